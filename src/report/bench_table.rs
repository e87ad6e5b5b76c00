//! The table of each experiment, built once: summary.txt shows its text
//! columns (see [`Table::to_text`]), report.html every page column under
//! the experiment's charts.

use super::bench::{OverheadResult, RelayResult, TransportPoint, UdpRcvbufResult};
use super::table::{Align::Left, Align::Right, Column, Table};
use super::units::human_bytes;
use super::units::human_ns;

/// The transport points given (all of them in the text, one workload's
/// on the page, which leaves the workload column out).
pub fn transport<'a>(points: impl IntoIterator<Item = &'a TransportPoint>) -> Table {
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
        Column::page("artifact", Left),
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
                pt.run.clone(),
            ]
        })
        .collect();
    Table { columns, rows }
}

/// Every trial of the UDP receive-buffer sweep.
pub fn udp_rcvbuf(u: &UdpRcvbufResult) -> Table {
    let columns = vec![
        Column::both("buffer", "buffer", 8, Left),
        Column::both("trial", "trial", 5, Right),
        Column::both("SO_RCVBUF asked", "asked", 10, Right),
        Column::both("granted", "granted", 9, Right),
        Column::both("published", "published", 9, Right),
        Column::both("received", "received", 9, Right),
        Column::both("lost (tail incl.)", "lost", 8, Right),
        Column::both("loss", "loss", 8, Right),
        Column::both("interior gaps", "gaps", 8, Right),
        Column::both("kernel RcvbufErrors +", "RcvbufErrors+", 13, Right),
    ];
    let rows = u
        .trials
        .iter()
        .map(|t| {
            vec![
                t.buffer.clone(),
                t.trial.to_string(),
                t.requested.map_or("(default)".into(), |r| r.to_string()),
                t.granted.to_string(),
                t.published.to_string(),
                t.received.to_string(),
                t.lost.to_string(),
                format!("{:.2}%", t.loss_pct),
                t.interior_gaps.to_string(),
                // Unknown: the counter could not be read.
                t.kernel_rcvbuf_errors_delta
                    .map_or("?".into(), |d| d.to_string()),
            ]
        })
        .collect();
    Table { columns, rows }
}

/// Every configuration of the overhead microbenchmark.
pub fn overhead(o: &OverheadResult) -> Table {
    let columns = vec![
        Column::both("configuration", "configuration", 50, Left),
        Column::both("ns/call (median)", "ns/call", 10, Right),
        Column::both("ratio to untraced", "ratio", 8, Right),
        Column::both("added ns/call", "added ns", 10, Right),
        Column::page("all rounds", Left),
    ];
    let rows = o
        .rows
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                format!("{:.1}", r.median_ns),
                format!("{:.2}x", r.ratio),
                format!("{:.1}", r.added_ns),
                r.rounds_ns
                    .iter()
                    .map(|v| format!("{v:.1}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    Table { columns, rows }
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
pub fn relay(r: &RelayResult) -> Table {
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
        let t = transport([&point()]);
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
        let t = relay(&r);
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
