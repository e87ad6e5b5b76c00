//! `sockscope tune`: audits the machine's settings for network servers
//! and ranks them by a profile's evidence. It only reads; sockscope never
//! changes the system itself.
//!
//! - [`settings`]: reads the current values (/proc/sys, getrlimit, /sys);
//! - [`rules`]: what a latency-, throughput- or connections-oriented
//!   server wants of each, and why (pure);
//! - [`advice`]: the rows a run's evidence supports, quoting it (pure);
//!
//! The `tune` command's output (table, JSON, sysctl.d) is `run::tune`.

pub mod advice;
pub mod rules;
pub mod settings;

pub use rules::Goal;
pub use settings::Settings;

use crate::report::evidence::KernelEvidence;
use crate::report::load::LoadReport;
use crate::report::tune::AuditRow;

/// The rows a profile's own evidence supports (a counted overflow, an
/// exhausted port range, a buffer that dropped), read against this
/// machine's current settings. Empty when the evidence shows nothing a
/// setting would fix. `ports` are the target's: the only ones a
/// reservation of ports is proposed for.
pub fn supported_by(
    evidence: &KernelEvidence,
    load: Option<&LoadReport>,
    ports: &[u16],
) -> Vec<AuditRow> {
    let mut s = Settings::read();
    s.listening = ports.to_vec();
    advice::rows(&s, evidence, load)
}

/// The audit of `s` for `goal`, ranked by a run's evidence when given:
/// the rows the evidence supports first (each quoting its counter), then
/// the rest of the audit, without repeating a setting.
pub fn ranked(
    s: &Settings,
    goal: Goal,
    run: Option<(&KernelEvidence, Option<&LoadReport>)>,
) -> Vec<AuditRow> {
    let mut rows = match run {
        Some((ev, load)) => advice::rows(s, ev, load),
        None => Vec::new(),
    };
    let audit = rules::audit(s, goal);
    let seen: std::collections::BTreeSet<String> = rows.iter().map(|r| r.setting.clone()).collect();
    rows.extend(audit.into_iter().filter(|r| !seen.contains(&r.setting)));
    rows
}

/// A sysctl.d snippet for the rows that need a change and are sysctls:
/// `header` as comment lines, then per row its why (and evidence) as a
/// comment and its `key = value` line. When nothing needs a change, a
/// comment saying so.
pub fn sysctl_snippet(rows: &[AuditRow], header: &[String]) -> String {
    let mut out = String::new();
    for h in header {
        out.push_str(&format!("# {h}\n"));
    }
    let changes: Vec<&AuditRow> = rows
        .iter()
        .filter(|r| !r.ok && r.sysctl.is_some())
        .collect();
    if changes.is_empty() {
        out.push_str("# No sysctl needs a change for this goal.\n");
        return out;
    }
    for r in changes {
        out.push('\n');
        out.push_str(&format!("# {}: {}\n", r.setting, r.why));
        if let Some(e) = &r.evidence {
            out.push_str(&format!("# evidence: {e}\n"));
        }
        out.push_str(&format!("# was: {}\n", r.current));
        if let Some(line) = &r.sysctl {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranked_puts_evidence_rows_first_without_repeating_settings() {
        let s = Settings::from_pairs(&[
            ("net.core.somaxconn", "128"),
            ("net.ipv4.tcp_tw_reuse", "0"),
        ]);
        let ev = KernelEvidence {
            counters: Some(crate::report::evidence::CounterDeltas {
                source: "t".into(),
                deltas: [("TcpExt.ListenOverflows".to_string(), 3)].into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let load = crate::report::fixtures::profile(&crate::report::fixtures::epoll_echo())
            .load
            .unwrap();
        let rows = ranked(&s, Goal::Latency, Some((&ev, Some(&load))));
        assert_eq!(rows[0].setting, "net.core.somaxconn");
        assert!(rows[0].evidence.is_some());
        assert_eq!(
            rows.iter()
                .filter(|r| r.setting == "net.core.somaxconn")
                .count(),
            1
        );
        assert!(rows[1..].iter().all(|r| r.evidence.is_none()));
    }

    #[test]
    fn the_snippet_has_only_changes_and_says_so_when_there_are_none() {
        let s = Settings::from_pairs(&[
            ("net.ipv4.tcp_tw_reuse", "0"),
            (settings::NOFILE_SOFT, "1024"),
        ]);
        let rows = rules::audit(&s, Goal::Connections);
        let text = sysctl_snippet(&rows, &["head".into()]);
        assert!(text.starts_with("# head\n"));
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert_eq!(lines, ["net.ipv4.tcp_tw_reuse = 1"], "{text}");
        let none = sysctl_snippet(&rules::audit(&s, Goal::Latency), &[]);
        assert_eq!(none, "# No sysctl needs a change for this goal.\n");
    }
}
