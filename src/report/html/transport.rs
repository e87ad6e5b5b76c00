//! The transport experiment's section: per workload, throughput, p99,
//! server CPU and syscalls per transaction by connection count for each
//! echo transport, and the table of every point.

use super::card;
use crate::report::bench::TransportResult;
use crate::report::bench_table;
use crate::report::svg::{self, BarChart, Scale};
use crate::report::units;

/// One figure of the transport comparison, charted per workload.
struct Metric {
    key: &'static str,
    title: &'static str,
    y_label: &'static str,
    scale: Scale,
    fmt: svg::Fmt,
    value: fn(&crate::report::bench::TransportPoint) -> f64,
}

const METRICS: [Metric; 4] = [
    Metric {
        key: "rate",
        title: "Throughput",
        y_label: "transactions per second",
        scale: Scale::Linear,
        fmt: units::fmt_si,
        value: |p| p.rate_per_s,
    },
    Metric {
        key: "p99",
        title: "p99 latency",
        y_label: "p99 latency (log scale)",
        scale: Scale::Log,
        fmt: units::fmt_ns,
        value: |p| p.p99_ns as f64,
    },
    Metric {
        key: "cpu",
        title: "Server CPU per transaction",
        y_label: "server CPU per transaction (us)",
        scale: Scale::Linear,
        fmt: |v| format!("{v:.1}"),
        value: |p| p.server_cpu_us_per_transaction,
    },
    Metric {
        key: "syscalls",
        title: "Server syscalls per transaction",
        y_label: "syscalls per transaction",
        scale: Scale::Linear,
        fmt: |v| format!("{v:.2}"),
        value: |p| p.syscalls_per_transaction,
    },
];

fn transport_chart(p: &str, t: &TransportResult, workload: &str, m: &Metric) -> String {
    let id = format!("{p}chart-transport-{workload}-{}", m.key);
    let (title, y_label, scale, fmt, value) = (m.title, m.y_label, m.scale, m.fmt, m.value);
    let mut conns: Vec<u32> = t
        .points
        .iter()
        .filter(|p| p.workload == workload)
        .map(|p| p.connections)
        .collect();
    conns.sort_unstable();
    conns.dedup();
    let mut transports: Vec<String> = Vec::new();
    for p in &t.points {
        if p.workload == workload && !transports.contains(&p.transport) {
            transports.push(p.transport.clone());
        }
    }
    let series = transports
        .iter()
        .map(|tr| {
            let vals = conns
                .iter()
                .map(|c| {
                    t.points
                        .iter()
                        .find(|p| {
                            &p.transport == tr && p.workload == workload && p.connections == *c
                        })
                        .map(value)
                })
                .collect();
            (tr.clone(), vals)
        })
        .collect();
    svg::bar_chart(&BarChart {
        id: &id,
        title,
        y_label,
        x_label: "connections",
        categories: conns.iter().map(|c| c.to_string()).collect(),
        series,
        scale,
        fmt,
        compact: true,
    })
}

/// The transport comparison, element ids prefixed with `p`.
pub fn transport_body(p: &str, t: &TransportResult) -> String {
    let mut b = String::new();
    let mut workloads: Vec<&str> = Vec::new();
    for pt in &t.points {
        if !workloads.contains(&pt.workload.as_str()) {
            workloads.push(&pt.workload);
        }
    }
    for w in workloads {
        let charts: Vec<String> = METRICS
            .iter()
            .map(|m| transport_chart(p, t, w, m))
            .collect();
        let tbl = bench_table::transport(t.points.iter().filter(|pt| pt.workload == w)).to_html();
        b.push_str(&card(
            &format!("{p}transport-{w}"),
            &format!("Echo transports under {w}"),
            &format!(
                "serve echo with {} B requests and responses, each point a traced profile of \
                 {:.1} s. Server CPU and syscalls are the server's own over the trace window.",
                t.message_bytes, t.seconds_per_point
            ),
            &(format!("<div class=\"grid2\">{}</div>", charts.concat()) + &tbl),
        ));
    }
    b
}
