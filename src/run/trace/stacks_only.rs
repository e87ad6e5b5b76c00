//! `sockscope trace --stacks-only`: the stack sampler alone, with no
//! syscall tracer (only the cpu-clock perf events and, for off-CPU, the
//! context-switch and syscall-exit tracepoints are hooked). It follows a
//! running process tree (-p, whose exit ends the window) or a scope, until
//! --duration, SIGINT, SIGTERM or SIGHUP; it writes the stacks' tables, a
//! `sockscope.stacks` artifact with --json, and the folded files asked for.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use anyhow::Result;
use nix::sys::signal::Signal;

use super::target_cpu::CpuProbe;
use crate::probe::TargetSpec;
use crate::report::requests::TargetCpu;
use crate::report::stacks_only::{self, StacksOnlyReport};
use crate::report::trace::Window;
use crate::signals::Signals;
use crate::stacks::{Session, StacksOptions};

/// One `trace --stacks-only` run, validated.
#[derive(Clone, Debug)]
pub struct StacksOnlySpec {
    /// A pid or a scope (a launched command is refused).
    pub target: TargetSpec,
    /// How to sample, and the folded files.
    pub stacks: StacksOptions,
    /// Write the `sockscope.stacks` artifact here (`-` for stdout).
    pub json: Option<PathBuf>,
    /// Write the tables here instead of stderr.
    pub output: Option<PathBuf>,
    /// Print no tables (nor progress lines) on stderr.
    pub quiet: bool,
}

/// Runs `trace --stacks-only`; returns 0, or 1 when the target exited
/// before --duration (the window is incomplete).
pub fn run(spec: &StacksOnlySpec) -> Result<u8> {
    let target = &spec.target;
    let duration = super::requests_only::alone_duration(target, "stacks")?;
    crate::probe::preflight::check()?;
    // Blocked before the sampler's thread starts, which inherits the mask.
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    let (root, pidfd) = super::requests_only::attach_root(target)?;
    let cfg = super::stacks::config_for(target, root, &spec.stacks)?;
    let probe = CpuProbe::new(target, root);
    let before = probe.read();
    let started_at = SystemTime::now();
    let started = Instant::now();
    let session = Session::start(cfg)?;
    if !spec.quiet {
        let until = match duration {
            Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
            None => ", Ctrl-C to stop".into(),
        };
        crate::progress::say!(
            "sockscope: sampling stacks of {} at {} Hz per CPU (no syscall hooks){until}",
            crate::text::escape(&who(target, root)),
            spec.stacks.hz
        );
    }
    let reason = super::requests_only::wait_end(
        &mut signals,
        pidfd.as_ref(),
        duration.map(|d| started + d),
        &|| session.ended(),
    )?;
    let collected = session.finish()?;
    let window_s = started.elapsed().as_secs_f64();
    let after = probe.read();
    let mut notes = Vec::new();
    let cpu_s = probe.cpu(&before, &after, &mut notes).map(|c| c.total_s());
    let complete = !(reason == "target_exited" && duration.is_some());
    if reason == "target_exited" {
        notes.push(format!(
            "process {root} exited after {window_s:.3} s; the data covers the window until then"
        ));
    }
    let stacks = crate::stacks::report(&collected, cpu_s.map(|s| (s * 1e9) as u64));
    let rep = StacksOnlyReport {
        header: crate::report::header::ArtifactHeader::new(
            stacks_only::SCHEMA,
            stacks_only::SCHEMA_VERSION,
        ),
        target: super::requests_only::target_record(target, root, 0),
        window: Window {
            started_at: humantime::format_rfc3339_millis(started_at).to_string(),
            duration_s: window_s,
            end_reason: reason,
            complete,
            exit_code: None,
            killed_by_signal: None,
        },
        target_cpu: TargetCpu {
            source: probe.source().into(),
            cpu_s,
        },
        notes,
        stacks,
    };
    let folded = super::stacks::write_folded(&spec.stacks, &rep.stacks)
        .and(super::stacks::write_pprof(&spec.stacks, &rep.stacks, None));
    write_outputs(spec, &rep).and(folded)?;
    if !complete {
        crate::progress::say!(
            "sockscope: the window ended early (target exited); the data covers only the part \
             sampled"
        );
        return Ok(1);
    }
    Ok(0)
}

fn who(target: &TargetSpec, root: i32) -> String {
    match target {
        TargetSpec::Scope { scope, .. } => scope.describe(),
        _ => format!(
            "pid {root} ({})",
            crate::procfs::comm(root).unwrap_or_default()
        ),
    }
}

/// Writes --json, then the tables to -o (or stderr); every output is
/// attempted, tables -o could not take go to stderr, and the first failure
/// is returned (exit 1).
fn write_outputs(spec: &StacksOnlySpec, rep: &StacksOnlyReport) -> Result<()> {
    crate::output::json_and_table(
        spec.json.as_deref(),
        spec.output.as_deref(),
        spec.quiet,
        rep,
        &stacks_only::render(rep),
    )
}
