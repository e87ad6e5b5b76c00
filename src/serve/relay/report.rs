//! The summary `serve relay` prints on stderr at exit. What `--json` writes
//! is [`RelayReport`] (report::serve::relay; docs/relay.md describes every
//! field).

use std::fmt::Write as _;

use crate::report::serve::relay::RelayReport;
use crate::report::units::human_bytes;

/// The human summary printed on stderr at exit.
pub fn render(r: &RelayReport) -> String {
    let c = &r.counters;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "serve relay ({}{}, {} loops) {} -> {}: stopped by {} after {:.1} s",
        r.mode,
        if r.mode != r.mode_requested {
            format!(", asked {}", r.mode_requested)
        } else {
            String::new()
        },
        r.loops,
        r.listen,
        r.upstream,
        r.stop_reason.trim_start_matches("signal:"),
        r.duration_s
    );
    let _ = writeln!(
        s,
        "  pairs        {} accepted, {} closed in order, {} reset, {} idle-closed, {} open at stop, {} rejected (max-conns)",
        c.accepted, c.closed, c.reset, c.idle_closed, c.open_at_stop, c.rejected_max_conns
    );
    let _ = writeln!(
        s,
        "  upstream     {} connect failures, {} timeouts",
        c.upstream_failures, c.upstream_timeouts
    );
    let _ = writeln!(
        s,
        "  bytes        client->upstream {}, upstream->client {}, through userspace {}",
        human_bytes(c.bytes_client_to_upstream),
        human_bytes(c.bytes_upstream_to_client),
        human_bytes(c.bytes_through_userspace)
    );
    if let Some(v) = &r.verdict {
        let _ = writeln!(
            s,
            "  verdict      {} skbs redirected ({}), {} passed to userspace ({}), {} misses, {} empty (FIN) dropped; {} tainted sockets, {} pairs not linked",
            v.redirected_skbs,
            human_bytes(v.redirected_bytes),
            v.passed_skbs,
            human_bytes(v.passed_bytes),
            v.misses,
            v.empty_skbs,
            c.tainted_sockets,
            c.link_failures
        );
    }
    let cpu = r.cpu_user_s + r.cpu_system_s;
    let _ = writeln!(
        s,
        "  cpu          user {:.3} s, system {:.3} s{}",
        r.cpu_user_s,
        r.cpu_system_s,
        if cpu > 0.0 {
            format!(
                " ({:.0}% of it in the kernel)",
                100.0 * r.cpu_system_s / cpu
            )
        } else {
            String::new()
        }
    );
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::header::ArtifactHeader;
    use crate::report::serve::relay::{RelayCounters, SCHEMA, SCHEMA_VERSION};

    fn report(fallback: Option<&str>) -> RelayReport {
        RelayReport {
            header: ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
            listen: "127.0.0.1:1".into(),
            upstream: "127.0.0.1:2".into(),
            mode_requested: "sockmap".into(),
            mode: if fallback.is_some() {
                "userspace"
            } else {
                "sockmap"
            }
            .into(),
            fallback_reason: fallback.map(str::to_string),
            loops: 1,
            max_conns: None,
            stop_reason: "signal:SIGTERM".into(),
            duration_s: 1.0,
            drain_s: 0.0,
            counters: RelayCounters::default(),
            verdict: None,
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            notes: vec![],
        }
    }

    #[test]
    fn fallback_reason_is_always_in_the_json() {
        let none = serde_json::to_value(report(None)).unwrap();
        assert_eq!(none.get("fallback_reason"), Some(&serde_json::Value::Null));
        let some = serde_json::to_value(report(Some("no CAP_BPF"))).unwrap();
        assert_eq!(some["fallback_reason"], "no CAP_BPF");
    }
}
