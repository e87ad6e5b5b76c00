//! summary.txt of an experiment or of the demo: short tables for a
//! terminal, then the sentences.

use std::fmt::Write as _;

use super::bench::{BenchReport, DemoReport};
use super::profile_text::wrap;
use super::units::human_ns;

/// Renders one experiment.
pub fn render(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sockscope bench {}{}: {:.0} s on {}",
        r.experiment,
        if r.quick { " --quick" } else { "" },
        r.duration_s,
        r.machine.describe()
    );
    if let Some(t) = &r.transport {
        let _ = writeln!(
            s,
            "{:<9} {:<8} {:>6} {:>10} {:>9} {:>9} {:>12} {:>12} {:>10}",
            "transport",
            "workload",
            "conns",
            "tx/s",
            "p50",
            "p99",
            "server us/tx",
            "syscalls/tx",
            "gen us/tx"
        );
        for p in &t.points {
            let _ = writeln!(
                s,
                "{:<9} {:<8} {:>6} {:>10.0} {:>9} {:>9} {:>12.2} {:>12.2} {:>10.2}",
                p.transport,
                p.workload,
                p.connections,
                p.rate_per_s,
                human_ns(p.p50_ns),
                human_ns(p.p99_ns),
                p.server_cpu_us_per_transaction,
                p.syscalls_per_transaction,
                p.generator_cpu_us_per_transaction
            );
        }
    }
    if let Some(u) = &r.udp_rcvbuf {
        let _ = writeln!(
            s,
            "{:<8} {:>5} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>13}",
            "buffer",
            "trial",
            "asked",
            "granted",
            "published",
            "received",
            "lost",
            "loss",
            "gaps",
            "RcvbufErrors+"
        );
        for t in &u.trials {
            let _ = writeln!(
                s,
                "{:<8} {:>5} {:>10} {:>9} {:>9} {:>9} {:>8} {:>7.2}% {:>8} {:>13}",
                t.buffer,
                t.trial,
                t.requested.map_or("default".into(), |v| v.to_string()),
                t.granted,
                t.published,
                t.received,
                t.lost,
                t.loss_pct,
                t.interior_gaps,
                t.kernel_rcvbuf_errors_delta
                    .map_or("?".into(), |v| v.to_string())
            );
        }
    }
    if let Some(o) = &r.overhead {
        let _ = writeln!(
            s,
            "{:<50} {:>10} {:>8} {:>10}",
            "configuration", "ns/call", "ratio", "added ns"
        );
        for row in &o.rows {
            let _ = writeln!(
                s,
                "{:<50} {:>10.1} {:>7.2}x {:>10.1}",
                row.label, row.median_ns, row.ratio, row.added_ns
            );
        }
        for sk in &o.skipped {
            let _ = writeln!(s, "skipped: {sk}");
        }
    }
    if let Some(x) = &r.relay {
        let _ = writeln!(
            s,
            "{:<9} {:>6} {:>6} {:>10} {:>9} {:>9} {:>11} {:>11} {:>12}",
            "path",
            "bytes",
            "conns",
            "tx/s",
            "p50",
            "p99",
            "relay us/tx",
            "kworker us",
            "machine us/tx"
        );
        for p in &x.points {
            let _ = writeln!(
                s,
                "{:<9} {:>6} {:>6} {:>10.0} {:>9} {:>9} {:>11} {:>11.2} {:>12.2}",
                p.mode,
                p.message_bytes,
                p.connections,
                p.rate_per_s,
                human_ns(p.p50_ns),
                human_ns(p.p99_ns),
                p.relay_cpu_us_per_transaction
                    .map_or("-".into(), |v| format!("{v:.2}")),
                p.kernel_workers_cpu_us_per_transaction,
                p.machine_cpu_us_per_transaction
            );
        }
        for sk in &x.skipped {
            let _ = writeln!(s, "skipped: {sk}");
        }
    }
    for i in &r.insights {
        let _ = writeln!(s, "  * {}", wrap(i, 96, "    "));
    }
    for c in &r.caveats {
        let _ = writeln!(s, "  ! {}", wrap(c, 96, "    "));
    }
    s
}

/// Renders the demo: each experiment, then what did not run.
pub fn render_demo(d: &DemoReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sockscope demo{}: {:.0} s, {}",
        if d.quick { " --quick" } else { "" },
        d.duration_s,
        if d.complete {
            "complete"
        } else {
            "INCOMPLETE (see below)"
        }
    );
    for e in &d.experiments {
        let _ = writeln!(s);
        s.push_str(&render(e));
    }
    if !d.not_run.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "not run:");
        for n in &d.not_run {
            let _ = writeln!(s, "  {}: {}", n.experiment, n.reason);
        }
    }
    s
}
