//! Who else serves the load's address (attribution), and the per-process
//! breakdown of a multi-process target.

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::units::human_ns;

/// Who else serves the load's address, on the page: when others do.
pub struct Attribution;

impl ProfileSection for Attribution {
    fn name(&self) -> &'static str {
        "attribution"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.derived.attribution.is_some()
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(attribution_section(p, r))
    }
}

/// The per-process breakdown, on the page (the summary has it among the
/// trace's lines): for a traced tree of several processes.
pub struct Processes;

impl ProfileSection for Processes {
    fn name(&self) -> &'static str {
        "processes"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.trace.as_ref().is_some_and(|t| t.processes.len() >= 2)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(processes_section(p, r))
    }
}

/// Who else serves the load's address, and the traced tree's share of it
/// (empty when only the traced tree serves it).
fn attribution_section(p: &str, r: &ProfileReport) -> String {
    let Some(a) = &r.derived.attribution else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = a
        .shared_with
        .iter()
        .map(|s| {
            vec![
                s.pid.to_string(),
                s.comm.clone(),
                if s.how == "same_socket" {
                    "holds the same listening socket".into()
                } else {
                    "its own listener on the port (SO_REUSEPORT)".into()
                },
            ]
        })
        .collect();
    let lead = match (a.share, a.transactions) {
        (Some(share), Some(t)) => format!(
            "Other processes serve the load's address too. The traced tree served an \
             estimated {:.1}% of the load's {} transactions (about {t:.0}); every \
             per-transaction target figure on this page is over those. How: {}.",
            share * 100.0,
            r.derived.transactions,
            a.method
        ),
        _ => format!(
            "UNATTRIBUTED: other processes serve the load's address too and the traced \
             tree's share is unknown ({}); no per-transaction target figure is given.",
            a.method
        ),
    };
    card(
        &format!("{p}shared"),
        "Shared address",
        &lead,
        &table(&["pid", "command", "how"], &rows, &[0]),
    )
}

/// The per-process breakdown of a multi-process target (empty for one
/// process, or without the tracer).
fn processes_section(p: &str, r: &ProfileReport) -> String {
    let Some(trace) = &r.trace else {
        return String::new();
    };
    let procs = &trace.processes;
    if procs.len() < 2 {
        return String::new();
    }
    let rows: Vec<Vec<String>> = procs
        .iter()
        .map(|x| {
            vec![
                x.pid.to_string(),
                format!("{}{}", x.comm, if x.exited { " (exited)" } else { "" }),
                x.threads.to_string(),
                format!("{:.3} s", x.user_cpu_s),
                format!("{:.3} s", x.system_cpu_s),
                x.calls.to_string(),
                x.errors.map_or("-".into(), |e| e.to_string()),
                x.time_ns.map_or("-".into(), human_ns),
                x.minor_faults.to_string(),
                x.major_faults.to_string(),
            ]
        })
        .collect();
    card(
        &format!("{p}processes"),
        "Per process",
        &format!(
            "The traced tree had {} processes; each one's CPU, syscalls and faults over the \
             trace window, busiest first.",
            procs.len()
        ),
        &table(
            &[
                "pid",
                "command",
                "threads",
                "user",
                "system",
                "syscalls",
                "errors",
                "syscall time",
                "minor faults",
                "major faults",
            ],
            &rows,
            &[0, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
    )
}
