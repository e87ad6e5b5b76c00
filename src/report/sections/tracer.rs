//! The tracer's own cost on the page: its BPF time, the syscall hook's
//! slow path, its start-up, and what it cost the target and the rest of
//! the machine (the summary has it among the trace's lines). Without the
//! tracer (`--requests-only`) the anatomy's own cost is in its section.

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::trace::TracerCost;
use crate::report::trace_text::rounds_range;
use crate::report::units::human_ns;

/// The tracer's cost, for a run with the tracer.
pub struct Tracer;

impl ProfileSection for Tracer {
    fn name(&self) -> &'static str {
        "tracer"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.trace.is_some()
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(tracer_card(p, &r.trace.as_ref()?.tracer))
    }
}

/// The tracer's own cost: its BPF time, the syscall hook's slow path, its
/// start-up, and what it cost the target and the rest of the machine.
fn tracer_card(p: &str, tracer: &TracerCost) -> String {
    let mut trows = vec![vec![
        "syscall events traced".to_string(),
        tracer.events.to_string(),
    ]];
    if let Some(ns) = tracer.ns_per_event {
        trows.push(vec!["BPF time per event".into(), format!("{ns:.0} ns")]);
    }
    if let Some(t) = tracer.bpf_time_ns {
        trows.push(vec!["BPF time over the window".into(), human_ns(t)]);
    }
    if let Some(c) = tracer.cpu_share {
        trows.push(vec![
            "share of one CPU".into(),
            format!("{:.2}%", c * 100.0),
        ]);
    }
    if let Some(sp) = &tracer.bpf_split {
        trows.push(vec![
            "BPF on the traced events".into(),
            format!(
                "{} ({:.0} ns per event)",
                human_ns(sp.traced.total_ns),
                sp.traced.ns_per_syscall
            ),
        ]);
        trows.push(vec![
            "BPF filtering everyone else".into(),
            format!(
                "{} ({} other syscalls x {:.0} ns, count scaled by time)",
                human_ns(sp.filtered.total_ns),
                sp.filtered.syscalls,
                sp.filtered.ns_per_syscall
            ),
        ]);
    }
    if let Some(sl) = &tracer.slow_path {
        trows.push(vec![
            "syscall hook slow path".into(),
            if sl.within_noise {
                format!(
                    "not told apart from noise ({} over {} calibration rounds): charged as 0",
                    rounds_range(sl),
                    sl.rounds
                )
            } else {
                format!(
                    "{:.0} ns per syscall ({} over {} calibration rounds)",
                    sl.ns_per_syscall,
                    rounds_range(sl),
                    sl.rounds
                )
            },
        ]);
    }
    if let Some(st) = &tracer.startup {
        trows.push(vec![
            "start-up".into(),
            format!(
                "{:.0} ms before the window opened, {:.0} ms of sockscope's CPU",
                st.before_window_ms, st.cpu_ms
            ),
        ]);
    }
    if let Some(a) = &tracer.attributed {
        let pct = |v: Option<f64>, of: &str| {
            v.map_or_else(String::new, |v| format!(", {:.2}% of {of}", v * 100.0))
        };
        trows.push(vec![
            "cost to the target (its events' BPF + slow path)".into(),
            format!(
                "{}{}",
                human_ns(a.target_ns),
                pct(a.target_cpu_share, "its CPU time")
            ),
        ]);
        trows.push(vec![
            "cost to the rest of the machine".into(),
            format!(
                "{}{}",
                human_ns(a.collateral_ns),
                pct(a.collateral_machine_share, "the machine's busy CPU")
            ),
        ]);
        if let (Some(st), Some(so)) = (a.count_only_saves_target_ns, a.count_only_saves_others_ns) {
            trows.push(vec![
                "--count-only would save at most".into(),
                format!(
                    "{} of the target's cost, {} of the rest's",
                    human_ns(st),
                    human_ns(so)
                ),
            ]);
        }
    }
    card(
        &format!("{p}tracer"),
        "The tracer's own cost",
        "BPF time from the kernel's run-time accounting and the programs' own timing in sampled \
         slices; the syscall hook's slow path calibrated after the run (docs/trace.md).",
        &table(&["figure", "value"], &trows, &[1]),
    )
}
