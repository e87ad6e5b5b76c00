//! Snapshots of a running trace ([`take_snapshot`]: everything counted so
//! far, the window left open) and their [`Schedule`]: each sink gets one
//! at its own period, and the last reading goes to all of them.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::bpf::Event;
use super::snapshot::{Snapshot, TracerSelf};
use super::{Session, TargetSpec, TraceOptions, account};

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
    let folded_series = reader.folded();
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
        folded_series,
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
