//! `sockscope __stacks-raw --pid PID --secs S [--hz N] [--off-cpu]`: the
//! stack sampler alone on a process's tree, one JSON line per sample (its
//! summary, not its stack) and a last line with the counters, the
//! sampling window and the CPU time PID's own threads had in it; what
//! tests/stacks_sampler.rs checks the BPF side with.

use std::io::Write;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::probe::ScopeFilter;
use crate::stacks::bpf::{Sampler, SamplerConfig};
use crate::stacks::sample::{RawSample, SampleKind};

/// What to sample (the hidden command's options).
#[derive(Clone, Copy, Debug)]
pub struct StacksRawSpec {
    /// The process whose tree is sampled.
    pub pid: i32,
    /// How long.
    pub secs: u64,
    /// On-CPU samples per second per CPU.
    pub hz: u32,
    /// Sample off-CPU waits too.
    pub off_cpu: bool,
}

/// Samples for `spec.secs` and prints the lines; exit status 0.
pub fn run(spec: &StacksRawSpec) -> Result<u8> {
    if !std::path::Path::new(&format!("/proc/{}", spec.pid)).exists() {
        return Err(crate::error::usage(format!(
            "--pid {}: no such process",
            spec.pid
        )));
    }
    let mut cfg = SamplerConfig::new(ScopeFilter::Tree);
    cfg.hz = spec.hz;
    cfg.off_cpu = spec.off_cpu;
    let mut storage = MaybeUninit::uninit();
    let mut sampler = Sampler::load(&mut storage, &cfg)?;
    sampler.add_tree(&[spec.pid])?;
    sampler.attach()?;
    let start = crate::clock::monotonic_ns();
    let cpu_start = threads_cpu_ns(spec.pid);
    crate::progress::say!(
        "sockscope: sampling process {} for {} s",
        spec.pid,
        spec.secs
    );
    let out = std::io::stdout();
    let mut out = out.lock();
    let end = Instant::now() + Duration::from_secs(spec.secs);
    while Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        for s in sampler.drain(left.min(Duration::from_millis(100)))? {
            writeln!(out, "{}", line(&s)).context("writing a sample")?;
        }
    }
    let cpu_stop = threads_cpu_ns(spec.pid);
    let stop = crate::clock::monotonic_ns();
    for s in sampler.close()? {
        writeln!(out, "{}", line(&s)).context("writing a sample")?;
    }
    let c = sampler.counters()?;
    let last = json!({
        "counters": {
            "samples": c.samples,
            "off_cpu_samples": c.off_cpu_samples,
            "lost": c.lost,
            "copy_failed": c.copy_failed,
            "bpf_ns": c.bpf_ns,
            "ticks": c.ticks,
            "ticks_missed": c.ticks_missed,
        },
        "window_ns": stop.saturating_sub(start),
        "pid_cpu_ns": cpu_stop.saturating_sub(cpu_start),
    });
    writeln!(out, "{last}").context("writing the counters")?;
    Ok(0)
}

/// The CPU time process `pid`'s threads have had (the scheduler's
/// /proc/PID/task/TID/schedstat), ns: what a test expects the on-CPU
/// samples to add up to.
fn threads_cpu_ns(pid: i32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One sample's summary line.
fn line(s: &RawSample) -> serde_json::Value {
    let (kind, weight_ns, state, open) = match s.kind {
        SampleKind::OnCpu => ("on", 0, None, false),
        SampleKind::RunQueue { weight_ns } => ("runq", weight_ns, None, false),
        SampleKind::OffCpu {
            weight_ns,
            state,
            open,
        } => ("off", weight_ns, Some(state.to_string()), open),
    };
    json!({
        "kind": kind,
        "pid": s.pid,
        "tid": s.tid,
        "comm": crate::text::escape(&String::from_utf8_lossy(
            s.comm.split(|&b| b == 0).next().unwrap_or_default()
        )),
        "weight_ns": weight_ns,
        "state": state,
        "open": open,
        "kernel_frames": s.kernel.len(),
        "user_ip": s.user_regs.map(|r| r.ip),
        "user_sp": s.user_regs.map(|r| r.sp),
        "stack_bytes": s.user_stack.len(),
        "syscall": s.syscall,
    })
}
