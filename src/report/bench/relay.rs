//! `bench relay`'s results: the schema (`"relay"` in bench.json), the
//! table of every point, and the page's section: transactions per second
//! through each data path, where the CPU went, every point, and each
//! relay's own account.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::Section;
use crate::report::html::{card, list, table as html_table};
use crate::report::serve::relay::RelayReport;
use crate::report::svg::{self, BarChart, Scale, StackChart, esc};
use crate::report::table::{Align::Left, Align::Right, Column, Table};
use crate::report::units::{self, human_bytes, human_ns};

/// The relay comparison: tcp-rr through each relay data path (and HAProxy)
/// to the same echo server, untraced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayResult {
    /// Load duration of each point, s.
    pub seconds_per_point: f64,
    /// Warm-up before each point's measured window, s.
    pub warmup_s: f64,
    /// Interleaved rounds (each point's figures are medians over them).
    pub rounds: u32,
    /// The upstream every relay forwards to.
    pub upstream: String,
    /// The paths compared, in the order run: `direct` (no relay: the
    /// ceiling), `haproxy` (the peer), `userspace`, `splice`, `sockmap`.
    pub modes: Vec<String>,
    /// HAProxy's version line, when it took part.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub haproxy_version: Option<String>,
    /// One per (mode, message size, connections).
    pub points: Vec<RelayPoint>,
    /// Each sockscope relay's own account of each round.
    pub relay_runs: Vec<RelayRun>,
    /// Modes left out, and why (e.g. haproxy not installed).
    pub skipped: Vec<String>,
}

/// One (path, message size, connections) point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayPoint {
    /// direct, haproxy, userspace, splice, sockmap.
    pub mode: String,
    /// Request and response size, bytes.
    pub message_bytes: u32,
    /// Client connections.
    pub connections: u32,
    /// Transactions per second of each round.
    pub rates_per_s: Vec<f64>,
    /// Median of `rates_per_s`.
    pub rate_per_s: f64,
    /// Median latency, ns (median over the rounds).
    pub p50_ns: u64,
    /// 99th percentile, ns (median over the rounds).
    pub p99_ns: u64,
    /// Load errors over every round (any error fails the experiment, so
    /// this is 0 in a written artifact; kept for readers' checks).
    pub errors: u64,
    /// The relay process's CPU per transaction, us (None for `direct`).
    pub relay_cpu_us_per_transaction: Option<f64>,
    /// Kernel worker threads' CPU (kworker, ksoftirqd: machine wide) per
    /// transaction, us. sockmap's redirected bytes are carried there.
    pub kernel_workers_cpu_us_per_transaction: f64,
    /// The echo upstream's CPU per transaction, us.
    pub upstream_cpu_us_per_transaction: f64,
    /// The load generator's CPU per transaction, us.
    pub generator_cpu_us_per_transaction: f64,
    /// Busy CPU of the whole machine per transaction, us: the fairest
    /// total on one loopback machine, wherever the work ran.
    pub machine_cpu_us_per_transaction: f64,
}

/// A sockscope relay's own report of one round (its --json).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayRun {
    /// userspace, splice, sockmap.
    pub mode: String,
    /// Round, 1-based.
    pub round: u32,
    /// The relay's report.
    pub report: RelayReport,
}

/// "1 KiB x 100" for a relay point's shape.
pub fn relay_shape(bytes: u32, conns: u32) -> String {
    format!(
        "{} x {conns}",
        human_bytes(u64::from(bytes)).replace(".0 ", " ")
    )
}

/// Every point of the relay comparison: its rate, the ratio to the best
/// relay of its shape, latency, and each process's CPU per transaction.
pub fn table(r: &RelayResult) -> Table {
    let columns = vec![
        Column::both("path", "path", 9, Left),
        Column::text("bytes", 6, Right),
        Column::text("conns", 6, Right),
        Column::page("shape", Left),
        Column::both("tx/s", "tx/s", 10, Right),
        Column::page("vs best relay", Right),
        Column::both("p50", "p50", 9, Right),
        Column::both("p99", "p99", 9, Right),
        Column::both("relay CPU/tx", "relay us/tx", 11, Right).unit(" us"),
        Column::both("kernel workers CPU/tx", "kworker us", 11, Right).unit(" us"),
        Column::page("upstream CPU/tx", Right).unit(" us"),
        Column::page("generator CPU/tx", Right).unit(" us"),
        Column::both("machine CPU/tx", "machine us/tx", 12, Right).unit(" us"),
        Column::page("tx/s per round", Left),
    ];
    let rows = r
        .points
        .iter()
        .map(|x| {
            let best = r
                .points
                .iter()
                .filter(|y| {
                    y.message_bytes == x.message_bytes
                        && y.connections == x.connections
                        && y.mode != "direct"
                })
                .map(|y| y.rate_per_s)
                .fold(0.0f64, f64::max);
            vec![
                x.mode.clone(),
                x.message_bytes.to_string(),
                x.connections.to_string(),
                relay_shape(x.message_bytes, x.connections),
                format!("{:.0}", x.rate_per_s),
                if x.mode == "direct" || best <= 0.0 {
                    "-".into()
                } else {
                    format!("{:.2}", x.rate_per_s / best)
                },
                human_ns(x.p50_ns),
                human_ns(x.p99_ns),
                x.relay_cpu_us_per_transaction
                    .map_or("-".into(), |v| format!("{v:.2}")),
                format!("{:.2}", x.kernel_workers_cpu_us_per_transaction),
                format!("{:.2}", x.upstream_cpu_us_per_transaction),
                format!("{:.2}", x.generator_cpu_us_per_transaction),
                format!("{:.2}", x.machine_cpu_us_per_transaction),
                x.rates_per_s
                    .iter()
                    .map(|v| format!("{v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    Table { columns, rows }
}

impl Section for RelayResult {
    fn table(&self) -> Table {
        table(self)
    }
    fn text(&self) -> String {
        let mut s = table(self).to_text();
        for sk in &self.skipped {
            let _ = writeln!(s, "skipped: {sk}");
        }
        s
    }
    fn html(&self, p: &str) -> String {
        relay_body(p, self)
    }
}

/// The relay comparison: rates by path for every shape, where the CPU
/// went, every point, and each relay's own account.
pub fn relay_body(p: &str, r: &RelayResult) -> String {
    let shapes = shapes(r);
    let rate = rate_chart(p, r, &shapes);
    let cpu_charts = cpu_charts(p, r, &shapes);
    let points = table(r).to_html();
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
    html_table(
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn relay_text_aligns_the_machine_column_under_its_header() {
        let r: RelayResult = serde_json::from_value(json!({
            "seconds_per_point": 0.5, "warmup_s": 0.1, "rounds": 1, "upstream": "echo",
            "modes": ["direct", "userspace"], "haproxy_version": null, "relay_runs": [],
            "skipped": [],
            "points": [
                {"mode": "direct", "message_bytes": 1024, "connections": 10,
                 "rates_per_s": [45818.0], "rate_per_s": 45818.0, "p50_ns": 107903,
                 "p99_ns": 3172351, "errors": 0, "relay_cpu_us_per_transaction": null,
                 "kernel_workers_cpu_us_per_transaction": 1.0765,
                 "upstream_cpu_us_per_transaction": 11.84,
                 "generator_cpu_us_per_transaction": 13.99,
                 "machine_cpu_us_per_transaction": 43.419},
                {"mode": "userspace", "message_bytes": 1024, "connections": 10,
                 "rates_per_s": [24498.0], "rate_per_s": 24498.0, "p50_ns": 361000,
                 "p99_ns": 1710000, "errors": 0, "relay_cpu_us_per_transaction": 18.91,
                 "kernel_workers_cpu_us_per_transaction": 0.0,
                 "upstream_cpu_us_per_transaction": 10.0,
                 "generator_cpu_us_per_transaction": 12.0,
                 "machine_cpu_us_per_transaction": 82.38}
            ]
        }))
        .unwrap();
        let t = table(&r);
        assert_eq!(
            t.to_text(),
            "path       bytes  conns       tx/s       p50       p99 relay us/tx  kworker us machine us/tx\n\
             direct      1024     10      45818     108us    3.17ms           -        1.08         43.42\n\
             userspace   1024     10      24498     361us    1.71ms       18.91        0.00         82.38\n"
        );
        let h = t.to_html();
        assert!(h.contains("<td>1 KiB x 10</td><td class=\"n\">45818</td><td class=\"n\">-</td>"));
        assert!(h.contains("<td class=\"n\">-</td><td class=\"n\">1.08 us</td>"));
        assert!(h.contains("<td class=\"n\">18.91 us</td>"));
    }
}
