//! The relay experiment's section: transactions per second through each
//! data path, where the CPU went, every point, and each relay's own
//! account.

use std::fmt::Write as _;

use super::{card, list, table};
use crate::report::bench::{RelayPoint, RelayResult};
use crate::report::bench_table::{self, relay_shape};
use crate::report::svg::{self, BarChart, Scale, StackChart, esc};
use crate::report::units::{self, human_bytes};

/// The relay comparison: rates by path for every shape, where the CPU
/// went, every point, and each relay's own account.
pub fn relay_body(p: &str, r: &RelayResult) -> String {
    let shapes = shapes(r);
    let rate = rate_chart(p, r, &shapes);
    let cpu_charts = cpu_charts(p, r, &shapes);
    let points = bench_table::relay(r).to_html();
    let runs = runs_table(r);
    let mut inner = rate + &cpu_charts + &points;
    let _ = write!(inner, "<h4>Each relay's own account</h4>{runs}");
    if !r.skipped.is_empty() {
        inner.push_str(&list(&r.skipped, "skipped"));
    }
    card(
        &format!("{p}relay"),
        "Relay data paths",
        &format!(
            "tcp-rr (--verify) through serve relay's userspace, splice and sockmap paths{} to {}, \
             and to it directly (the ceiling); {:.1} s per point after {:.1} s of warm-up, \
             median of {} interleaved round(s). Untraced. CPU is each process's own from /proc \
             around the point; kernel workers are every kworker and ksoftirqd thread; the \
             machine figure is all busy CPU, wherever it ran.",
            r.haproxy_version
                .as_ref()
                .map_or(String::new(), |v| format!(" and HAProxy ({})", esc(v))),
            esc(&r.upstream),
            r.seconds_per_point,
            r.warmup_s,
            r.rounds
        ),
        &inner,
    )
}

/// A point's shape: message size (bytes) and connections.
type Shape = (u32, u32);

/// The shapes measured, in the order run.
fn shapes(r: &RelayResult) -> Vec<Shape> {
    let mut shapes: Vec<Shape> = Vec::new();
    for pt in &r.points {
        if !shapes.contains(&(pt.message_bytes, pt.connections)) {
            shapes.push((pt.message_bytes, pt.connections));
        }
    }
    shapes
}

/// The point of path `m` at shape (`b`, `c`), if it was measured.
fn find<'a>(r: &'a RelayResult, m: &str, (b, c): Shape) -> Option<&'a RelayPoint> {
    r.points
        .iter()
        .find(|x| x.mode == m && x.message_bytes == b && x.connections == c)
}

/// Transactions per second through each path, for every shape.
fn rate_chart(p: &str, r: &RelayResult, shapes: &[Shape]) -> String {
    svg::bar_chart(&BarChart {
        id: &format!("{p}chart-relay-rate"),
        title: "Transactions per second through each path",
        y_label: "transactions per second",
        x_label: "message size x connections",
        categories: shapes.iter().map(|s| relay_shape(s.0, s.1)).collect(),
        series: r
            .modes
            .iter()
            .map(|m| {
                (
                    m.clone(),
                    shapes
                        .iter()
                        .map(|s| find(r, m, *s).map(|x| x.rate_per_s))
                        .collect(),
                )
            })
            .collect(),
        scale: Scale::Linear,
        fmt: units::fmt_si,
        compact: false,
    })
}

/// Where the CPU went, for the many-connection small-message shape and
/// the bulk one: the two ends of the comparison.
fn cpu_charts(p: &str, r: &RelayResult, shapes: &[Shape]) -> String {
    let mut cpu_shapes: Vec<Shape> = Vec::new();
    if let Some(s) = shapes.iter().filter(|s| s.0 <= 4096).max_by_key(|s| s.1) {
        cpu_shapes.push(*s);
    }
    if let Some(s) = shapes.iter().filter(|s| s.0 > 4096).max_by_key(|s| s.0) {
        cpu_shapes.push(*s);
    }
    let parts = [
        "relay process",
        "echo upstream",
        "load generator",
        "kernel workers",
        "rest of the machine",
    ];
    let mut cpu_charts = String::new();
    for s in &cpu_shapes {
        let rows = r
            .modes
            .iter()
            .filter_map(|m| find(r, m, *s))
            .map(|x| {
                let relay = x.relay_cpu_us_per_transaction.unwrap_or(0.0);
                let known = relay
                    + x.upstream_cpu_us_per_transaction
                    + x.generator_cpu_us_per_transaction
                    + x.kernel_workers_cpu_us_per_transaction;
                (
                    x.mode.clone(),
                    vec![
                        relay,
                        x.upstream_cpu_us_per_transaction,
                        x.generator_cpu_us_per_transaction,
                        x.kernel_workers_cpu_us_per_transaction,
                        (x.machine_cpu_us_per_transaction - known).max(0.0),
                    ],
                )
            })
            .collect();
        cpu_charts.push_str(&svg::stack_chart(&StackChart {
            id: &format!("{p}chart-relay-cpu-{}-{}", s.0, s.1),
            title: &format!("CPU per transaction, {}", relay_shape(s.0, s.1)),
            x_label: &format!(
                "CPU per transaction (us), {} B messages on {} connections",
                s.0, s.1
            ),
            parts: parts.iter().map(|x| x.to_string()).collect(),
            rows,
            fmt: |v| format!("{v:.1}"),
        }));
    }
    cpu_charts
}

/// Each sockscope relay's own account of each round.
fn runs_table(r: &RelayResult) -> String {
    let run_rows: Vec<Vec<String>> = r
        .relay_runs
        .iter()
        .map(|x| {
            let c = &x.report.counters;
            let v = x.report.verdict.as_ref();
            vec![
                x.mode.clone(),
                x.round.to_string(),
                x.report.mode.clone(),
                c.accepted.to_string(),
                c.reset.to_string(),
                human_bytes(c.bytes_client_to_upstream + c.bytes_upstream_to_client),
                human_bytes(c.bytes_through_userspace),
                v.map_or("-".into(), |v| v.redirected_skbs.to_string()),
                v.map_or("-".into(), |v| v.passed_skbs.to_string()),
                c.tainted_sockets.to_string(),
                format!("{:.2} s", x.report.cpu_user_s + x.report.cpu_system_s),
            ]
        })
        .collect();
    table(
        &[
            "relay",
            "round",
            "mode used",
            "pairs",
            "reset",
            "bytes relayed",
            "through userspace",
            "skbs redirected",
            "skbs passed up",
            "tainted sockets",
            "relay CPU",
        ],
        &run_rows,
        &[1, 3, 4, 5, 6, 7, 8, 9, 10],
    )
}
