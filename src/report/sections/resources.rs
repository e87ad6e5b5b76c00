//! CPU (user vs kernel per transaction, target and generator) and what
//! else the target's threads cost over the trace window.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, StackChart};
use crate::report::units::{self};

/// User vs kernel CPU per transaction, target and generator, on the page
/// (the summary has the trace's and the load's lines): every run has it.
pub struct Cpu;

impl ProfileSection for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(cpu_section(p, r))
    }
}

/// Page faults, memory, threads and processes, on the page (the summary
/// has them among the trace's lines): counted by the tracer.
pub struct Resources;

impl ProfileSection for Resources {
    fn name(&self) -> &'static str {
        "resources"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.trace.is_some()
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(resources_section(p, r))
    }
}

/// What else the target's threads cost over the trace window: page
/// faults, peak memory, the threads and processes seen (as summary.txt
/// lists them); left out without the tracer, which counts them.
fn resources_section(p: &str, r: &ProfileReport) -> String {
    let Some(trace) = &r.trace else {
        return String::new();
    };
    let res = &trace.resources;
    // Over the traced tree's share when others serve the address too.
    let tx = r.derived.target_transactions();
    let per = |v: u64| tx.map_or("-".to_string(), |t| format!("{:.2}", v as f64 / t));
    let rows = vec![
        vec![
            "minor page faults".to_string(),
            res.minor_faults.to_string(),
            per(res.minor_faults),
        ],
        vec![
            "major page faults (needed I/O)".to_string(),
            res.major_faults.to_string(),
            per(res.major_faults),
        ],
        vec![
            "voluntary context switches".to_string(),
            res.voluntary_ctxt_switches.to_string(),
            per(res.voluntary_ctxt_switches),
        ],
        vec![
            "involuntary context switches".to_string(),
            res.involuntary_ctxt_switches.to_string(),
            per(res.involuntary_ctxt_switches),
        ],
        vec![
            "peak RSS (largest process, since its exec)".to_string(),
            res.peak_rss_kb.map_or_else(
                || format!("unknown ({})", res.peak_rss_method),
                |kb| format!("{:.1} MiB", kb as f64 / 1024.0),
            ),
            "-".to_string(),
        ],
        vec![
            "threads seen".to_string(),
            res.threads_seen.to_string(),
            "-".to_string(),
        ],
        vec![
            "processes seen".to_string(),
            res.processes_seen.to_string(),
            "-".to_string(),
        ],
    ];
    let mut lead = format!(
        "The target's threads over the trace window ({}).",
        res.method
    );
    if res.tasks_excluded > 0 {
        let _ = write!(
            lead,
            " {} could not be windowed and {} left out of the usage totals.",
            crate::report::units::counted(res.tasks_excluded, "thread", "threads"),
            if res.tasks_excluded == 1 { "is" } else { "are" }
        );
    }
    card(
        &format!("{p}resources"),
        "Page faults, memory, threads and processes",
        &lead,
        &table(
            &["figure", "over the window", "per transaction"],
            &rows,
            &[1, 2],
        ),
    )
}

/// User vs kernel CPU per transaction, target and generator.
fn cpu_section(p: &str, r: &ProfileReport) -> String {
    let d = &r.derived;
    let gen_cpu = d.generator_cpu_us_per_transaction;
    // The generator's control-thread share is taken out pro rata (NaN,
    // and left out, without sockscope's own load).
    let (gu, gs) = r.load.as_ref().map_or((f64::NAN, f64::NAN), |l| {
        let g = &l.generator;
        let gen_total = (g.user_cpu_s + g.system_cpu_s).max(1e-12);
        (
            gen_cpu * g.user_cpu_s / gen_total,
            gen_cpu * g.system_cpu_s / gen_total,
        )
    });
    // Over the transactions the traced tree served (NaN when unknown).
    let ttx = d.target_transactions().unwrap_or(f64::NAN);
    let tu = d.target_user_cpu_s * 1e6 / ttx;
    let ts = d.target_system_cpu_s * 1e6 / ttx;
    let chart = svg::stack_chart(&StackChart {
        id: &format!("{p}chart-cpu"),
        title: "User vs kernel CPU per transaction",
        x_label: "CPU time per transaction",
        parts: vec!["user".into(), "kernel (system)".into()],
        rows: [
            ("target".to_string(), vec![tu, ts]),
            ("load generator".to_string(), vec![gu, gs]),
        ]
        .into_iter()
        .filter(|(_, v)| v.iter().all(|x| x.is_finite()))
        .collect(),
        fmt: units::fmt_us,
    });
    let mut rows = vec![vec![
        "target".to_string(),
        format!("{:.3} s", d.target_user_cpu_s),
        format!("{:.3} s", d.target_system_cpu_s),
        if ttx.is_finite() {
            units::fmt_us(tu + ts)
        } else {
            "-".into()
        },
        format!("{:.0}%", 100.0 * d.target_kernel_share),
    ]];
    if let Some(l) = &r.load {
        let g = &l.generator;
        rows.push(vec![
            "load generator".to_string(),
            format!("{:.3} s", g.user_cpu_s),
            format!("{:.3} s", g.system_cpu_s),
            units::fmt_us(gen_cpu),
            format!(
                "{:.0}%",
                100.0 * g.system_cpu_s / (g.user_cpu_s + g.system_cpu_s).max(1e-12)
            ),
        ]);
    }
    let t = table(
        &[
            "process",
            "user",
            "system",
            "CPU per transaction",
            "in the kernel",
        ],
        &rows,
        &[1, 2, 3, 4],
    );
    card(
        &format!("{p}cpu"),
        "User vs kernel CPU",
        &format!(
            "Target over the {}; generator over its run, without profile's own \
             tracing control thread ({:.3} s). {}",
            match &d.target_cpu_source {
                None => "trace window".to_string(),
                Some(src) => format!("request anatomy's window (read from {src})"),
            },
            d.control_thread_cpu_s,
            if r.trace.is_none() {
                "Context switches: not recorded (--requests-only).".to_string()
            } else if ttx.is_finite() {
                format!(
                    "Context switches per transaction: {:.2} voluntary, {:.2} involuntary.",
                    d.voluntary_switches_per_transaction, d.involuntary_switches_per_transaction
                )
            } else {
                "The traced tree's share of the load is unknown: no per-transaction target \
                 figure."
                    .to_string()
            }
        ),
        &(chart + &t),
    )
}
