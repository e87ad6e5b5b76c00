//! Scope modes (`trace --cgroup/--unit/--comm/--system`) and the snapshots
//! a running trace hands to its sinks (interval tables, /metrics).
//!
//! In a scope mode no task is registered: the entry hook decides at every
//! syscall whether the task is in scope (cgroup ancestry, leader's name)
//! and gives it storage at its first in-scope one, so tasks that join
//! later are traced from then on without any work here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;

use super::bpf::{Event, RawGroup, ScopeFilter};
use super::snapshot::{Breakdown, GroupKey, GroupStats, Snapshot, TracerSelf};
use super::stat::{SyscallStat, add_stat};
use super::wait::{self, Wake};
use super::{Session, TargetSpec, TraceOptions, TraceOutcome, WindowEnd, account, scope};
use crate::report::trace::{ScopeRecord, Target};

/// The BPF filter for a scope.
pub fn filter_of(scope: &super::ScopeTarget) -> Result<ScopeFilter> {
    Ok(match scope {
        super::ScopeTarget::Cgroup(c) => ScopeFilter::Cgroup {
            id: c.id,
            level: c.level,
        },
        super::ScopeTarget::Comm(name) => ScopeFilter::Comm(scope::comm_name(name)?),
        super::ScopeTarget::System => ScopeFilter::System,
    })
}

/// Exited processes the final report still lists one by one.
const RETIRED_ROWS: usize = 4096;

/// Turns the kernel's per-group aggregates into named groups, and keeps
/// what must outlive the kernel's entries: processes that exited are read
/// one last time, removed from the kernel's map (freeing their series) and
/// pooled into the `other` group here.
#[derive(Default)]
pub struct GroupReader {
    cgroups: Option<scope::CgroupNames>,
    comms: HashMap<i32, String>,
    /// Per syscall: processes folded in after they exited.
    retired: BTreeMap<u32, SyscallStat>,
    /// The first exited processes one by one, for the final report's rows
    /// (bounded: a long system-wide run sees unbounded pids).
    retired_detail: Vec<(GroupKey, BTreeMap<u32, SyscallStat>)>,
    /// Per syscall: exited processes beyond that bound.
    retired_undetailed: BTreeMap<u32, SyscallStat>,
    /// Processes found gone at the previous reading.
    gone_before: HashMap<i32, ()>,
    /// The last reading: no process is retired.
    final_read: bool,
}

impl GroupReader {
    fn process_name(&mut self, tgid: i32, log: &account::EventLog) -> String {
        if let Some(n) = self.comms.get(&tgid) {
            return n.clone();
        }
        let name = crate::procfs::comm(tgid)
            .or_else(|| {
                log.forks
                    .iter()
                    .rev()
                    .find(|f| f.tid == tgid)
                    .map(|f| f.comm.clone())
            })
            .unwrap_or_else(|| "?".into());
        self.comms.insert(tgid, name.clone());
        name
    }

    /// Reads every group's final figures (the programs are detached):
    /// nothing is retired, exited processes keep their own rows.
    pub(super) fn read_final(
        &mut self,
        s: &mut Session<'_, '_>,
        by: Breakdown,
    ) -> Result<Vec<GroupStats>> {
        self.gone_before.clear();
        self.final_read = true;
        self.read(s, by)
    }

    /// Reads every group's cumulative figures.
    fn read(&mut self, s: &mut Session<'_, '_>, by: Breakdown) -> Result<Vec<GroupStats>> {
        if by == Breakdown::None {
            return Ok(Vec::new());
        }
        let raw = s.tracer.group_stats()?;
        let overflow = s.tracer.group_overflow()?;
        let mut groups: BTreeMap<GroupKey, BTreeMap<u32, SyscallStat>> = BTreeMap::new();
        let mut gone_now: HashMap<i32, Vec<u32>> = HashMap::new();
        let log = std::rc::Rc::clone(&s.log);
        let log = log.borrow();
        for (g, stat) in raw {
            let key = match g {
                RawGroup::Process(tgid) => {
                    if !self.final_read && !std::path::Path::new(&format!("/proc/{tgid}")).exists()
                    {
                        gone_now.entry(tgid).or_default().push(stat.nr);
                        if self.gone_before.contains_key(&tgid) {
                            // Gone for a whole reading: nothing can add to
                            // it any more, so it moves to `other` for good.
                            add_into(&mut self.retired, &stat);
                            let key = GroupKey::Process {
                                pid: tgid,
                                comm: self.process_name(tgid, &log),
                            };
                            let room = self.retired_detail.len() < RETIRED_ROWS;
                            match self.retired_detail.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, m)) => add_into(m, &stat),
                                None if room => {
                                    let mut m = BTreeMap::new();
                                    add_into(&mut m, &stat);
                                    self.retired_detail.push((key, m));
                                }
                                None => add_into(&mut self.retired_undetailed, &stat),
                            }
                            continue;
                        }
                    }
                    GroupKey::Process {
                        pid: tgid,
                        comm: self.process_name(tgid, &log),
                    }
                }
                RawGroup::Comm(name) => GroupKey::Comm(RawGroup::comm_text(&name)),
                RawGroup::Cgroup(id) => {
                    let names = self.cgroups.get_or_insert_with(|| {
                        scope::CgroupNames::new(
                            scope::v2_mount().unwrap_or_else(|_| "/sys/fs/cgroup".into()),
                        )
                    });
                    GroupKey::Cgroup(names.name_of(id))
                }
            };
            add_into(groups.entry(key).or_default(), &stat);
        }
        for (tgid, nrs) in &gone_now {
            if self.gone_before.contains_key(tgid) {
                s.tracer.forget_process(*tgid, nrs);
                self.comms.remove(tgid);
            }
        }
        self.gone_before = gone_now
            .into_keys()
            .filter(|t| !self.gone_before.contains_key(t))
            .map(|t| (t, ()))
            .collect();
        // Snapshots pool exited processes (bounded series); the final
        // report gives each its row again, as far as they were kept.
        let pooled = if self.final_read {
            for (k, m) in &self.retired_detail {
                let g = groups.entry(k.clone()).or_default();
                for st in m.values() {
                    add_into(g, st);
                }
            }
            &self.retired_undetailed
        } else {
            &self.retired
        };
        let other = groups.entry(GroupKey::Other).or_default();
        for st in overflow.iter().chain(pooled.values()) {
            add_into(other, st);
        }
        if other.is_empty() {
            groups.remove(&GroupKey::Other);
        }
        Ok(groups
            .into_iter()
            .map(|(key, m)| GroupStats {
                key,
                syscalls: m.into_values().collect(),
            })
            .collect())
    }
}

fn add_into(m: &mut BTreeMap<u32, SyscallStat>, st: &SyscallStat) {
    match m.get_mut(&st.nr) {
        Some(a) => add_stat(a, st),
        None => {
            m.insert(st.nr, st.clone());
        }
    }
}

/// Reads everything counted so far without closing the window.
pub(super) fn take_snapshot(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    started: Instant,
) -> Result<Snapshot> {
    // Live tasks first, then the exit records that arrived meanwhile: a
    // task that exited in between is then counted once, by its exit
    // record (which holds its final figures).
    s.log.borrow_mut().exits_watch = Some(Vec::new());
    let live = s.tracer.peek_live();
    let drained = s.rb.consume().context("draining the event ring buffer");
    let exited_since: std::collections::HashSet<i32> = s
        .log
        .borrow_mut()
        .exits_watch
        .take()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let live = live?;
    drained?;
    let total = s.tracer.syscall_stats()?;
    let mut reader = std::mem::take(&mut s.groups);
    let groups = reader.read(s, opts.by);
    s.groups = reader;
    let groups = groups?;
    let counters = s.tracer.counters()?;
    let log = s.log.borrow();
    let live_records: Vec<_> = live
        .into_iter()
        .filter_map(|e| match e {
            Event::Task(t) if !exited_since.contains(&t.tid) => Some(t),
            _ => None,
        })
        .collect();
    let mut usage = account::usage_now(&log, &live_records);
    usage.tasks_seen = match opts.target {
        TargetSpec::Scope { .. } => counters.joined,
        _ => log.forks.len() as u64 + log.forks_folded,
    };
    drop(log);
    let (per_event, per_filtered) = match s.sampler.as_ref() {
        Some(sm) => sm.so_far(&mut s.tracer),
        None => (None, None),
    };
    Ok(Snapshot {
        taken_unix_ns: unix_ns(SystemTime::now()),
        window: started.elapsed(),
        count_only: opts.count_only,
        total,
        by: opts.by,
        groups,
        usage,
        tracer: TracerSelf {
            events: s.tracer.events_counted(),
            bpf_ns_per_event: per_event,
            bpf_ns_per_filtered: per_filtered,
            ringbuf_drops: counters.ringbuf_drops,
        },
    })
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// When each sink wants its next snapshot.
pub(super) struct Schedule {
    next: Vec<Instant>,
}

impl Schedule {
    pub(super) fn new(opts: &TraceOptions, started: Instant) -> Self {
        Self {
            next: opts
                .sinks
                .0
                .iter()
                .map(|(every, _)| started + *every)
                .collect(),
        }
    }

    pub(super) fn due(&self) -> Option<Instant> {
        self.next.iter().min().copied()
    }

    /// Takes one snapshot for every sink whose time has come.
    pub(super) fn run_due(
        &mut self,
        s: &mut Session<'_, '_>,
        opts: &TraceOptions,
        started: Instant,
    ) -> Result<()> {
        let now = Instant::now();
        if self.next.iter().all(|t| *t > now) {
            return Ok(());
        }
        let snap = Arc::new(take_snapshot(s, opts, started)?);
        for (i, (every, sink)) in opts.sinks.0.iter().enumerate() {
            if self.next[i] <= now {
                sink.publish(&snap);
                // Catch up without a burst after a stall.
                while self.next[i] <= now {
                    self.next[i] += *every;
                }
            }
        }
        Ok(())
    }
}

/// The last reading goes to every sink, so the last (partial) interval is
/// printed and the exporter serves the final figures while detaching.
pub(super) fn publish_last(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    started: Instant,
) -> Result<()> {
    if !opts.sinks.0.is_empty() {
        let snap = Arc::new(take_snapshot(s, opts, started)?);
        for (_, sink) in &opts.sinks.0 {
            sink.publish(&snap);
            sink.detaching();
        }
    }
    Ok(())
}

/// Traces a scope until the duration, a signal or the caller's stop flag.
pub(super) fn run(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    target: &super::ScopeTarget,
    duration: Option<Duration>,
) -> Result<TraceOutcome> {
    let started_at = SystemTime::now();
    let started = s.open_window();
    if opts.verbose {
        eprintln!(
            "sockscope: tracing {} ({}){}",
            target.describe(),
            match target {
                super::ScopeTarget::Cgroup(c) => format!("every task in {}", c.path.display()),
                super::ScopeTarget::Comm(n) => format!("every process named {n:?}"),
                super::ScopeTarget::System => "every task but sockscope".into(),
            },
            match duration {
                Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
                None => ", Ctrl-C to stop".into(),
            }
        );
    }
    if let Some(tx) = &opts.window_opened {
        let _ = tx.send(());
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
    let (kind, cgroup, cgroup_id, unit, comm) = match target {
        super::ScopeTarget::Cgroup(c) => (
            "cgroup",
            Some(c.rel.clone()),
            Some(c.id),
            c.unit.clone(),
            None,
        ),
        super::ScopeTarget::Comm(n) => ("comm", None, None, None, Some(n.clone())),
        super::ScopeTarget::System => ("system", None, None, None, None),
    };
    let end = WindowEnd {
        reason,
        complete: true,
        exit_code: None,
        killed_by: None,
        status: 0,
    };
    let target_rec = Target {
        mode: kind.into(),
        command: None,
        pid: 0,
        comm: target.describe(),
        scope: Some(ScopeRecord {
            kind: kind.into(),
            cgroup,
            cgroup_id,
            unit,
            comm,
            tasks_joined: counters.joined,
        }),
    };
    super::finish(
        s,
        opts,
        target_rec,
        started_at,
        started,
        end,
        (counters.joined, processes),
        account::attach_resources,
    )
}
