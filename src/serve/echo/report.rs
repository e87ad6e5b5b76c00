//! The summary `serve echo` prints on stderr at exit. What `--json` writes
//! is [`EchoReport`] (report::serve::echo; docs/serve.md describes every
//! field).

use std::fmt::Write as _;

use crate::report::serve::echo::{Counters, EchoReport};
use crate::report::units::human_bytes;

/// The human summary printed on stderr at exit.
pub fn render(r: &EchoReport) -> String {
    let c = &r.counters;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "serve echo ({}, {} loop{}) on {}: stopped by {} after {:.1} s",
        r.transport,
        r.loops,
        if r.loops == 1 { "" } else { "s" },
        r.listen,
        r.stop_reason.trim_start_matches("signal:"),
        r.duration_s
    );
    let _ = writeln!(
        s,
        "  connections  {} accepted, {}, {} open at stop, \
         {} closed by peer, {} reset, {} errors",
        c.accepted,
        rejected(c),
        c.open_at_stop,
        c.closed_by_peer,
        c.reset,
        c.errors
    );
    if c.drain_timeouts > 0 {
        let _ = writeln!(
            s,
            "  drain        {} still owed response bytes when the drain time ran out",
            crate::report::units::counted(c.drain_timeouts, "connection", "connections")
        );
    }
    let errs = c.accept_errors.nonzero();
    if !errs.is_empty() {
        let list: Vec<String> = errs.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(
            s,
            "  accept       errors {} ({} pauses)",
            list.join(", "),
            c.accept_errors.backoffs
        );
    }
    if let Some(t) = r.transactions {
        let rate = if r.duration_s > 0.0 {
            t as f64 / r.duration_s
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "  transactions {t} ({rate:.0}/s over the run), {} requests read",
            c.requests
        );
    }
    let _ = writeln!(
        s,
        "  bytes        in {}, out {}",
        human_bytes(c.bytes_in),
        human_bytes(c.bytes_out)
    );
    let total = r.cpu_user_s + r.cpu_system_s;
    let _ = writeln!(
        s,
        "  cpu          user {:.3} s, system {:.3} s ({:.0}% of it in the kernel)",
        r.cpu_user_s,
        r.cpu_system_s,
        if total > 0.0 {
            100.0 * r.cpu_system_s / total
        } else {
            0.0
        }
    );
    s
}

/// "N rejected", with the reasons the JSON counts them under: over
/// --max-conns (`rejected_max_conns`), or no thread could be started for
/// them (`rejected_no_thread`, threaded only).
fn rejected(c: &Counters) -> String {
    let reasons: Vec<(&str, u64)> = [
        ("max-conns", c.rejected_max_conns),
        ("no thread", c.rejected_no_thread),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect();
    let total = c.rejected_max_conns + c.rejected_no_thread;
    match reasons.as_slice() {
        [] => "0 rejected".into(),
        [(why, _)] => format!("{total} rejected ({why})"),
        many => {
            let parts: Vec<String> = many.iter().map(|(w, n)| format!("{n} {w}")).collect();
            format!("{total} rejected ({})", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::header::ArtifactHeader;
    use crate::report::serve::echo::{SCHEMA, SCHEMA_VERSION};

    fn counters(max_conns: u64, no_thread: u64) -> Counters {
        Counters {
            rejected_max_conns: max_conns,
            rejected_no_thread: no_thread,
            ..Counters::default()
        }
    }

    #[test]
    fn rejections_name_the_reason_the_json_gives() {
        assert_eq!(rejected(&counters(0, 0)), "0 rejected");
        assert_eq!(rejected(&counters(0, 154)), "154 rejected (no thread)");
        assert_eq!(rejected(&counters(7, 0)), "7 rejected (max-conns)");
        assert_eq!(
            rejected(&counters(7, 154)),
            "161 rejected (7 max-conns, 154 no thread)"
        );
    }

    #[test]
    fn the_summary_of_a_threaded_server_out_of_threads_says_so() {
        let r = EchoReport {
            header: ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
            listen: "127.0.0.1:1".into(),
            transport: "threaded".into(),
            loops: 1,
            req_size: None,
            resp_size: None,
            work_us: 0,
            max_conns: None,
            out_cap_bytes: 0,
            stop_reason: "signal:SIGTERM".into(),
            duration_s: 1.0,
            drain_s: 0.0,
            transactions: None,
            counters: counters(0, 154),
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            notes: vec![],
        };
        let text = render(&r);
        assert!(text.contains(", 154 rejected (no thread),"), "{text}");
        assert!(!text.contains("max-conns"), "{text}");
    }
}
