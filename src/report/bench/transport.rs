//! `bench transport`'s results: the schema (`"transport"` in bench.json),
//! the table of every point, and the page's section: per workload,
//! throughput, p99, server CPU and syscalls per transaction by connection
//! count for each echo transport.

use serde::{Deserialize, Serialize};

use super::Section;
use crate::report::html::card;
use crate::report::svg::{self, BarChart, Scale};
use crate::report::table::{Align::Left, Align::Right, Column, Table};
use crate::report::units::{self, human_ns};

/// The transport comparison: one traced profile per point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransportResult {
    /// Load duration of each point, s.
    pub seconds_per_point: f64,
    /// Request and response size, bytes.
    pub message_bytes: u32,
    /// Every point, in the order run.
    pub points: Vec<TransportPoint>,
}

/// One (transport, workload, connections) profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransportPoint {
    /// threaded, epoll, uring.
    pub transport: String,
    /// tcp-rr or tcp-crr.
    pub workload: String,
    /// Connections (tcp-crr: concurrent connect loops).
    pub connections: u32,
    /// The point's full profile artifact, relative to the experiment's
    /// directory.
    pub run: String,
    /// Transactions completed.
    pub transactions: u64,
    /// Per second.
    pub rate_per_s: f64,
    /// Median latency, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// The server's CPU per transaction over the window, us.
    pub server_cpu_us_per_transaction: f64,
    /// The server's share of it in the kernel (0..1).
    pub server_kernel_share: f64,
    /// The server's syscalls per transaction.
    pub syscalls_per_transaction: f64,
    /// The generator's CPU per transaction, us.
    pub generator_cpu_us_per_transaction: f64,
    /// Server vs load transaction counts (`exact`, `in_flight`, `mismatch`).
    pub server_agreement: Option<String>,
    /// The top syscalls per transaction, (name, calls per transaction).
    pub top_syscalls: Vec<(String, f64)>,
}

/// The transport points given (all of them in the text, one workload's
/// on the page, which leaves the workload column out).
pub fn table<'a>(points: impl IntoIterator<Item = &'a TransportPoint>) -> Table {
    let columns = vec![
        Column::both("transport", "transport", 9, Left),
        Column::text("workload", 8, Left),
        Column::both("conns", "conns", 6, Right),
        Column::both("tx/s", "tx/s", 10, Right),
        Column::both("p50", "p50", 9, Right),
        Column::both("p99", "p99", 9, Right),
        Column::both("server CPU/tx", "server us/tx", 12, Right).unit(" us"),
        Column::page("kernel", Right),
        Column::both("syscalls/tx", "syscalls/tx", 12, Right),
        Column::page("top syscalls/tx", Left),
        Column::both("generator CPU/tx", "gen us/tx", 10, Right).unit(" us"),
        Column::page("server count", Left),
    ];
    let rows = points
        .into_iter()
        .map(|pt| {
            vec![
                pt.transport.clone(),
                pt.workload.clone(),
                pt.connections.to_string(),
                format!("{:.0}", pt.rate_per_s),
                human_ns(pt.p50_ns),
                human_ns(pt.p99_ns),
                format!("{:.2}", pt.server_cpu_us_per_transaction),
                format!("{:.0}%", pt.server_kernel_share * 100.0),
                format!("{:.2}", pt.syscalls_per_transaction),
                pt.top_syscalls
                    .iter()
                    .take(3)
                    .map(|(n, v)| format!("{n} {v:.2}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                format!("{:.2}", pt.generator_cpu_us_per_transaction),
                pt.server_agreement.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    Table { columns, rows }
}

impl Section for TransportResult {
    fn table(&self) -> Table {
        table(&self.points)
    }
    fn html(&self, p: &str) -> String {
        transport_body(p, self)
    }
}

/// One figure of the transport comparison, charted per workload.
struct Metric {
    key: &'static str,
    title: &'static str,
    y_label: &'static str,
    scale: Scale,
    fmt: svg::Fmt,
    value: fn(&TransportPoint) -> f64,
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
        let points: Vec<&TransportPoint> = t.points.iter().filter(|pt| pt.workload == w).collect();
        let tbl = table(points.iter().copied()).to_html() + &open_a_point(&points);
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

/// How to read one point's own report: every point is a whole profile,
/// its run.json named under the table (a path relative to the directory of
/// this page) rather than in a column as wide as the rest of the table.
fn open_a_point(points: &[&TransportPoint]) -> String {
    let Some(first) = points.first() else {
        return String::new();
    };
    let runs: Vec<String> = points
        .iter()
        .map(|pt| format!("<code>{}</code>", svg::esc(&pt.run)))
        .collect();
    format!(
        "<p class=\"lead open-point\">Each row is a whole profile, its run.json beside this \
         page: {}. To read one point's own report (its syscalls, CPU and the kernel's \
         evidence), run <code>sockscope report {}</code> in this page's directory: it writes \
         report.html and summary.txt beside that run.json; <code>sockscope compare A B</code> \
         sets two points side by side.</p>",
        runs.join(", "),
        svg::esc(&first.run)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point() -> TransportPoint {
        serde_json::from_value(json!({
            "transport": "threaded", "workload": "tcp-rr", "connections": 1,
            "run": "runs/threaded-tcp-rr-1/run.json", "transactions": 4543,
            "rate_per_s": 9086.0, "p50_ns": 124799, "p99_ns": 357631,
            "server_cpu_us_per_transaction": 43.754, "server_kernel_share": 0.948,
            "syscalls_per_transaction": 2.0063, "generator_cpu_us_per_transaction": 48.1449,
            "server_agreement": "exact",
            "top_syscalls": [["recvfrom", 1.0002], ["sendto", 1.0], ["clone3", 0.0002], ["close", 0.0002]]
        }))
        .unwrap()
    }

    #[test]
    fn transport_text_and_page_show_the_same_point() {
        let t = table([&point()]);
        assert_eq!(
            t.to_text(),
            "transport workload  conns       tx/s       p50       p99 server us/tx  syscalls/tx  gen us/tx\n\
             threaded  tcp-rr        1       9086     125us     358us        43.75         2.01      48.14\n"
        );
        let h = t.to_html();
        assert!(!h.contains("workload"), "one workload per page table");
        assert!(h.contains(
            "<td class=\"n\">43.75 us</td><td class=\"n\">95%</td><td class=\"n\">2.01</td>\
             <td>recvfrom 1.00, sendto 1.00, clone3 0.00</td><td class=\"n\">48.14 us</td>"
        ));
    }
}
