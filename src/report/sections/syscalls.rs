//! The target's syscalls: the summary's table (the trace's, with what it
//! saw besides) and the page's mix per transaction, both over the rows
//! [`shown`] picks; or, without the tracer, that they were not recorded.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, StackChart};
use crate::report::trace::{SyscallRow, TraceReport};
use crate::report::trace_text::{self, SortKey, TableView};
use crate::report::units::human_ns;

/// What the summary says in place of the syscall table of a run without
/// the syscall tracer.
pub const NO_SYSCALLS: &str = "Target syscalls: not recorded (--requests-only: no syscall tracer \
     was attached; the request anatomy above is what this run measured at the server).";

/// The syscalls, or that they were not recorded: every run has them.
pub struct Syscalls;

impl ProfileSection for Syscalls {
    fn name(&self) -> &'static str {
        "syscalls"
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::new();
        match &r.trace {
            Some(trace) => {
                let _ = writeln!(s, "Target syscalls over the trace window (top 15):");
                for l in trace_text::render(trace, &view(trace)).lines() {
                    let _ = writeln!(s, "  {l}");
                }
            }
            None => {
                let _ = writeln!(s, "{NO_SYSCALLS}");
            }
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        // A trace with no syscall (a target that made none) has no mix.
        let shown = r.trace.is_none() || !r.derived.top_syscalls.is_empty();
        shown.then(|| syscall_section(p, r))
    }
}

/// What a profile shows of its syscall table: the busiest 15 by time (by
/// calls in count-only mode).
fn view(trace: &TraceReport) -> TableView {
    TableView {
        sort: if trace.options.count_only {
            SortKey::Calls
        } else {
            SortKey::Time
        },
        top: Some(15),
        errors_only: false,
    }
}

/// The rows a profile's syscall table lists, text and page alike.
pub fn shown(trace: &TraceReport) -> Vec<&SyscallRow> {
    trace_text::shown_rows(&trace.syscalls, &view(trace))
}

/// The target's syscall mix per transaction.
fn syscall_section(p: &str, r: &ProfileReport) -> String {
    let d = &r.derived;
    let Some(trace) = &r.trace else {
        return card(
            &format!("{p}syscalls"),
            "Syscall mix of the target",
            "Not recorded (--requests-only): no syscall tracer was attached, so the target \
             paid only the request anatomy's cost.",
            "",
        );
    };
    let target_tx = d.target_transactions();
    let chart = target_tx.map_or_else(String::new, |_| {
        svg::stack_chart(&StackChart {
            id: &format!("{p}chart-syscalls"),
            title: "Syscalls per transaction",
            x_label: "calls per transaction",
            parts: vec!["calls per transaction".into()],
            rows: d
                .top_syscalls
                .iter()
                .map(|s| (s.name.clone(), vec![s.per_transaction]))
                .collect(),
            fmt: |v| format!("{v:.2}"),
        })
    });
    let rows: Vec<Vec<String>> = shown(trace)
        .into_iter()
        .map(|s| {
            let l = s.latency.as_ref();
            let total = trace.totals.time_ns.unwrap_or(0);
            vec![
                s.name.clone(),
                s.calls.to_string(),
                target_tx.map_or("-".into(), |t| format!("{:.3}", s.calls as f64 / t)),
                l.map_or("-".into(), |l| human_ns(l.total_ns)),
                l.filter(|_| total > 0).map_or("-".into(), |l| {
                    format!("{:.1}%", 100.0 * l.total_ns as f64 / total as f64)
                }),
                l.map_or("-".into(), |l| human_ns(l.p50_ns)),
                l.map_or("-".into(), |l| human_ns(l.p99_ns)),
                match (s.errors, trace_text::errno_summary(s)) {
                    (None, _) => "-".into(),
                    (Some(e), names) if names.is_empty() => e.to_string(),
                    (Some(e), names) => format!("{e} ({names})"),
                },
            ]
        })
        .collect();
    let t = table(
        &[
            "syscall",
            "calls",
            "per transaction",
            "total time",
            "% of time",
            "p50",
            "p99",
            "errors",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6],
    );
    let cut = shown_of(rows.len(), trace.syscalls.len());
    card(
        &format!("{p}syscalls"),
        "Syscall mix of the target",
        &format!(
            "{} Time is wall time from entry to exit: a syscall that blocks (epoll_wait, \
             accept) counts its waiting.",
            match target_tx {
                Some(_) => format!(
                    "{:.2} syscalls per transaction in all{}.",
                    d.syscalls_per_transaction,
                    if d.attribution.is_some() {
                        " (over the traced tree's estimated share of the transactions)"
                    } else {
                        ""
                    }
                ),
                None => "No per-transaction figure: the traced tree's share of the load \
                         is unknown (see the insights)."
                    .to_string(),
            }
        ),
        &(chart + &t + &cut),
    )
}

/// "15 of 25 syscalls shown" under a table that was cut, else nothing.
fn shown_of(shown: usize, all: usize) -> String {
    if shown >= all {
        return String::new();
    }
    format!(
        "<p class=\"lead rows-cut\">{shown} of {all} syscalls shown (the busiest by time, or by \
         calls in count-only mode); totals cover all, and run.json lists every one.</p>"
    )
}
