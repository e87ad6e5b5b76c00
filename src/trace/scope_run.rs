//! The scope modes' run loop (`trace --cgroup/--unit/--comm/--system`):
//! the BPF filter for a scope, then snapshots on their schedule until the
//! duration, a signal or the caller's stop flag, and the report.
//!
//! In a scope mode no task is registered: the entry hook decides at every
//! syscall whether the task is in scope (cgroup ancestry, leader's name)
//! and gives it storage at its first in-scope one, so tasks that join
//! later are traced from then on without any work here.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use nix::sys::signal::Signal;

use crate::probe::ScopeFilter;
use crate::probe::ScopeTarget;
use crate::report::trace::{ScopeRecord, Target};
use crate::trace::schedule::{Schedule, publish_last};
use crate::trace::wait::{self, Wake};
use crate::trace::{Session, TraceOptions, TraceOutcome, WindowEnd, account};

/// The BPF filter for a scope.
pub fn filter_of(scope: &ScopeTarget) -> Result<ScopeFilter> {
    Ok(match scope {
        ScopeTarget::Cgroup(c) => ScopeFilter::Cgroup {
            id: c.id,
            level: c.level,
        },
        ScopeTarget::Comm(name) => ScopeFilter::Comm(crate::probe::scope::comm_name(name)?),
        ScopeTarget::System => ScopeFilter::System,
    })
}

/// Traces a scope until the duration, a signal or the caller's stop flag.
pub(in crate::trace) fn run(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    target: &ScopeTarget,
    duration: Option<Duration>,
) -> Result<TraceOutcome> {
    let started_at = SystemTime::now();
    let started = s.open_window();
    if opts.verbose {
        crate::progress::say!(
            "sockscope: tracing {} ({}){}",
            target.describe(),
            match target {
                ScopeTarget::Cgroup(c) => format!("every task in {}", c.path.display()),
                ScopeTarget::Comm(n) => format!("every process named {n:?}"),
                ScopeTarget::System => "every task but sockscope".into(),
            },
            match duration {
                Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
                None => ", Ctrl-C to stop".into(),
            }
        );
    }
    for tx in &opts.window_opened {
        let _ = tx.send(0);
    }
    let end_at = duration.map(|d| started + d);
    let mut schedule = Schedule::new(opts, started);
    let stop_fd = opts.stop.as_ref().map(|f| f.fd());
    let fds: Vec<_> = stop_fd.into_iter().collect();
    let reason = loop {
        let next = [end_at, schedule.due()].into_iter().flatten().min();
        match s.wait(&fds, next)? {
            Wake::Deadline => {
                if end_at.is_some_and(|e| Instant::now() >= e) {
                    break "duration".to_string();
                }
                schedule.run_due(s, opts, started)?;
            }
            Wake::Ready(_) => break "stopped".to_string(),
            Wake::Signal(si) if si.ssi_signo == Signal::SIGCHLD as u32 => {}
            Wake::Signal(si) => break format!("signal:{}", wait::signal_name(si.ssi_signo)),
        }
    };
    publish_last(s, opts, started)?;
    let counters = s.tracer.counters()?;
    let processes = {
        let log = s.log.borrow();
        let mut tgids: Vec<i32> = log.forks.iter().map(|f| f.tgid).collect();
        tgids.sort_unstable();
        tgids.dedup();
        tgids.len() as u64 + log.leaders_folded
    };
    let (folded, forks_folded) = {
        let log = s.log.borrow();
        (log.folded_tasks, log.forks_folded)
    };
    if folded + forks_folded > 0 {
        s.notes.push(format!(
            "{} tasks entered the trace: past the first {} their records were summed into the \
             totals, not kept; the per-process table lists only the processes kept",
            counters.joined,
            account::KEPT_TASKS
        ));
    }
    if counters.joined == 0 {
        s.notes.push(format!(
            "no task of {} made a syscall in the window",
            target.describe()
        ));
    }
    let end = WindowEnd {
        reason,
        complete: true,
        exit_code: None,
        killed_by: None,
        status: 0,
    };
    crate::trace::finish(
        s,
        opts,
        scope_target(target, counters.joined),
        started_at,
        started,
        end,
        (counters.joined, processes),
        account::attach_resources,
    )
}

/// The report's record of a scope target; `tasks_joined` is what the
/// command followed in it (the tracer's tasks, the anatomy's threads).
pub fn scope_target(target: &ScopeTarget, tasks_joined: u64) -> Target {
    let kind = match target {
        ScopeTarget::Cgroup(_) => "cgroup",
        ScopeTarget::Comm(_) => "comm",
        ScopeTarget::System => "system",
    };
    let cg = match target {
        ScopeTarget::Cgroup(c) => Some(c),
        _ => None,
    };
    Target {
        mode: kind.into(),
        command: None,
        pid: 0,
        comm: target.describe(),
        scope: Some(ScopeRecord {
            kind: kind.into(),
            cgroup: cg.map(|c| c.rel.clone()),
            cgroup_id: cg.map(|c| c.id),
            unit: cg.and_then(|c| c.unit.clone()),
            unit_found_by: cg.and_then(|c| c.found_by).map(|f| f.as_str().to_owned()),
            cgroup_path: cg.map(|c| c.path.display().to_string()),
            comm: match target {
                ScopeTarget::Comm(n) => Some(n.clone()),
                _ => None,
            },
            tasks_joined,
        }),
    }
}
