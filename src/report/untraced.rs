//! A profile without the syscall tracer (`profile --requests-only`): the
//! figures it has (the load's, the target's CPU read from /proc or its
//! cgroup, the generator's, the server's own) and the sentences that say
//! them. The syscall figures are not recorded: null in run.json, left out
//! of the sentences, and said to be missing once.

use serde_json::Value;

use super::insight::{self, Volume, base};
use super::load::LoadReport;
use super::profile::Derived;
use super::workload::WorkloadRecord;

/// The sentence that stands for every syscall, context-switch and fault
/// figure a run without the tracer has not recorded.
pub const NOT_RECORDED: &str = "Syscalls, context switches and page faults were not recorded \
     (--requests-only: no syscall tracer was attached, so the target paid only the request \
     anatomy's cost).";

/// The derived figures of a run without the tracer: `cpu` is the target's
/// (user, system) CPU over the anatomy's window of `window_s`, read by
/// `source` (None when it could not be read: the CPU figures are then
/// null per transaction and said to be unknown).
pub fn derive(
    load: &LoadReport,
    cpu: Option<(f64, f64)>,
    source: &str,
    window_s: f64,
    server: Option<&Value>,
    control_cpu_s: f64,
) -> Derived {
    let d = base(
        load,
        cpu.unwrap_or((0.0, 0.0)),
        window_s,
        server,
        control_cpu_s,
    );
    with_cpu_source(d, cpu.is_some(), source)
}

/// [`derive`] for a run whose requests the request anatomy counted
/// (`--load-cmd`, observe only).
pub fn derive_counted(
    w: &WorkloadRecord,
    cpu: Option<(f64, f64)>,
    source: &str,
    window_s: f64,
    server: Option<&Value>,
) -> Derived {
    let d = insight::base_counted(w, cpu.unwrap_or((0.0, 0.0)), window_s, server);
    with_cpu_source(d, cpu.is_some(), source)
}

/// Names where the CPU was read, or (unread) leaves the per-request CPU
/// null rather than 0.
fn with_cpu_source(mut d: Derived, read: bool, source: &str) -> Derived {
    if read {
        d.target_cpu_source = Some(source.to_string());
    } else {
        d.target_cpu_us_per_transaction = f64::NAN;
    }
    d
}

/// The derived figures in plain sentences, most important first, for a
/// run without the tracer.
pub fn sentences(d: &Derived, vol: Volume) -> Vec<String> {
    let unit = vol.unit();
    let mut out = vec![insight::volume_sentence(d, vol, unit)];
    if let Some(a) = &d.attribution {
        out.push(insight::attribution_sentence(a, unit));
    }
    if d.target_cpu_source.is_none() {
        out.push("The target's CPU time could not be read over the window.".into());
    } else if d.target_cpu_us_per_transaction.is_nan() {
        out.push(format!(
            "The traced tree's CPU time over the window was {:.3} s user + {:.3} s system, {} \
             of it in the kernel; it kept {:.2} CPUs busy.",
            d.target_user_cpu_s,
            d.target_system_cpu_s,
            insight::pct(d.target_kernel_share),
            d.target_cpus_busy
        ));
    } else {
        out.push(insight::cpu_sentence(d, unit));
    }
    out.push(NOT_RECORDED.into());
    if d.target_cpu_us_per_transaction.is_finite() && vol.load().is_some() {
        out.push(insight::generator_sentence(d, unit));
    }
    out.extend(insight::agreement_sentence(d, vol, unit));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    #[test]
    fn the_figures_without_the_tracer_are_null_not_zero() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        let d = derive(
            r.load.as_ref().unwrap(),
            Some((0.3, 0.7)),
            "/proc stat",
            2.0,
            None,
            0.0,
        );
        assert_eq!(d.target_cpu_source.as_deref(), Some("/proc stat"));
        assert!((d.target_kernel_share - 0.7).abs() < 1e-9);
        assert!((d.target_cpus_busy - 0.5).abs() < 1e-9);
        let tx = r.load.as_ref().unwrap().transactions as f64;
        assert!((d.target_cpu_us_per_transaction - 1e6 / tx).abs() < 1e-6);
        for v in [
            d.syscalls_per_transaction,
            d.voluntary_switches_per_transaction,
            d.involuntary_switches_per_transaction,
            d.minor_faults_per_transaction,
            d.major_faults_per_transaction,
            d.tasks_created_per_transaction,
            d.execs_per_transaction,
        ] {
            assert!(v.is_nan(), "{d:?}");
        }
        assert!(d.top_syscalls.is_empty() && d.syscall_classes.is_empty());
        assert!(d.tracer_bpf_time_ns.is_none() && d.tracer_target_ns.is_none());
        // Written as null, read back as not recorded.
        let json = serde_json::to_value(&d).unwrap();
        assert!(json["syscalls_per_transaction"].is_null(), "{json}");
        let back: Derived = serde_json::from_value(json).unwrap();
        assert!(back.syscalls_per_transaction.is_nan());
        // CPU unread: no per-transaction CPU, and no source claimed.
        let d = derive(r.load.as_ref().unwrap(), None, "/proc stat", 2.0, None, 0.0);
        assert!(d.target_cpu_us_per_transaction.is_nan());
        assert!(d.target_cpu_source.is_none());
    }

    #[test]
    fn the_sentences_say_the_syscalls_were_not_recorded() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        let d = derive(
            r.load.as_ref().unwrap(),
            Some((0.3, 0.7)),
            "/proc stat",
            2.0,
            None,
            0.0,
        );
        let s = sentences(&d, Volume::Load(r.load.as_ref().unwrap()));
        assert!(s[0].starts_with("The target handled"), "{s:?}");
        assert!(s[1].starts_with("Its CPU time over the window"), "{s:?}");
        assert!(s[1].contains("no syscall was recorded"), "{s:?}");
        assert!(s.contains(&NOT_RECORDED.to_string()), "{s:?}");
        assert!(
            !s.iter().any(|x| x.contains("syscalls in the target")
                || x.contains("Context switches per")
                || x.contains("NaN")),
            "{s:?}"
        );
    }
}
