//! The target's syscall mix per transaction.

use super::super::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, StackChart};
use crate::report::trace_text;
use crate::report::units::human_ns;

/// The target's syscall mix per transaction.
pub fn syscall_section(p: &str, r: &ProfileReport) -> String {
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
    if d.top_syscalls.is_empty() {
        return String::new();
    }
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
    let rows: Vec<Vec<String>> = trace
        .syscalls
        .iter()
        .take(15)
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
