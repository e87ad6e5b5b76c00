//! A reading of everything a running trace has counted so far, taken
//! without stopping it: what `trace --interval` turns into one table per
//! interval (differences of two snapshots) and what `--metrics` serves to
//! Prometheus (cumulative, so its counters are monotonic).

use std::time::Duration;

use super::bpf::SyscallStat;

/// How the per-group figures are keyed (`--by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Breakdown {
    /// No breakdown: totals only.
    #[default]
    None,
    /// One group per process (tgid, with its name).
    Process,
    /// One group per process name (the thread-group leader's comm).
    Comm,
    /// One group per cgroup v2 directory a task ran in.
    Cgroup,
}

/// The key of one group of a breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKey {
    /// A process: its pid (tgid) and name.
    Process {
        /// Thread-group id.
        pid: i32,
        /// Name of its leader when first seen.
        comm: String,
    },
    /// A process name.
    Comm(String),
    /// A cgroup, as its path below the cgroup v2 mount ("/" for the root),
    /// or `#ID` when the directory is gone and its path unknown.
    Cgroup(String),
    /// Every key beyond the series limit (`--max-series`) and, for the
    /// process breakdown, processes that exited more than an interval ago.
    Other,
}

/// One group's figures, cumulative since the trace attached.
#[derive(Clone, Debug)]
pub struct GroupStats {
    /// Whose figures.
    pub key: GroupKey,
    /// Per syscall, only syscalls with calls.
    pub syscalls: Vec<SyscallStat>,
}

/// Resource usage of the traced tasks, cumulative: the exited ones' final
/// figures plus the live ones' figures now, each counted from the moment
/// the task entered the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    /// CPU time in user mode, seconds.
    pub user_cpu_s: f64,
    /// CPU time in the kernel, seconds.
    pub system_cpu_s: f64,
    /// Voluntary context switches.
    pub voluntary_ctxt_switches: u64,
    /// Involuntary context switches.
    pub involuntary_ctxt_switches: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Tasks (threads) that entered the trace so far.
    pub tasks_seen: u64,
}

/// The tracer's own cost so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TracerSelf {
    /// Traced syscall events counted (every CPU).
    pub events: u64,
    /// BPF run time per traced event, ns (both syscall programs), from the
    /// kernel's run-time accounting in the sampled slices; None until a
    /// slice has completed.
    pub bpf_ns_per_event: Option<f64>,
    /// BPF run time spent filtering other tasks' syscalls out, ns per
    /// filtered run, from the same slices.
    pub bpf_ns_per_filtered: Option<f64>,
    /// Lifecycle records lost because the ring buffer was full.
    pub ringbuf_drops: u64,
}

/// Everything counted since the trace attached, read while it runs.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When it was taken, ns since the Unix epoch.
    pub taken_unix_ns: u64,
    /// Time since the window opened.
    pub window: Duration,
    /// Count-only mode: no errors, no latency (histograms empty).
    pub count_only: bool,
    /// Per syscall over every traced task (the totals).
    pub total: Vec<SyscallStat>,
    /// The breakdown `groups` follows.
    pub by: Breakdown,
    /// Per group of the breakdown (empty with [`Breakdown::None`]). The
    /// groups' figures add up to `total`.
    pub groups: Vec<GroupStats>,
    /// The traced tasks' resource usage.
    pub usage: Usage,
    /// The tracer's own cost.
    pub tracer: TracerSelf,
}

/// Where snapshots go while a trace runs: the interval writer, the metrics
/// exporter. Called on the tracing thread, so an implementation must not
/// block for long.
pub trait SnapshotSink: Send + Sync {
    /// A new snapshot (cumulative figures).
    fn publish(&self, snap: &std::sync::Arc<Snapshot>);
    /// The trace is about to detach: no snapshot will follow the last one.
    fn detaching(&self) {}
    /// The first failure this sink met (an output it could not write), to
    /// be reported when the trace ends.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// Adds `b`'s figures to `a` (same syscall).
pub fn add_stat(a: &mut SyscallStat, b: &SyscallStat) {
    let a_timed = a.hist.total() > 0;
    let b_timed = b.hist.total() > 0;
    a.calls += b.calls;
    a.errors += b.errors;
    a.total_ns += b.total_ns;
    if a.hist.counts.len() < b.hist.counts.len() {
        a.hist.counts.resize(b.hist.counts.len(), 0);
    }
    for (x, y) in a.hist.counts.iter_mut().zip(&b.hist.counts) {
        *x += y;
    }
    match (a_timed, b_timed) {
        (true, true) => {
            a.hist.min = a.hist.min.min(b.hist.min);
            a.hist.max = a.hist.max.max(b.hist.max);
        }
        (false, true) => {
            a.hist.min = b.hist.min;
            a.hist.max = b.hist.max;
        }
        _ => {}
    }
    for (e, n) in &b.errnos {
        *a.errnos.entry(*e).or_default() += n;
    }
}

/// What `now` counted since `before` (the same syscall, an earlier reading
/// of the same cumulative counters). The exact extremes of an interval are
/// not known: min and max become the edges of the lowest and highest
/// bucket that gained samples, clamped to the cumulative extremes.
pub fn stat_since(now: &SyscallStat, before: Option<&SyscallStat>) -> SyscallStat {
    let Some(b) = before else {
        return now.clone();
    };
    let mut d = now.clone();
    d.calls = now.calls.saturating_sub(b.calls);
    d.errors = now.errors.saturating_sub(b.errors);
    d.total_ns = now.total_ns.saturating_sub(b.total_ns);
    for (i, x) in d.hist.counts.iter_mut().enumerate() {
        *x = x.saturating_sub(b.hist.counts.get(i).copied().unwrap_or(0));
    }
    for (e, n) in d.errnos.iter_mut() {
        *n = n.saturating_sub(b.errnos.get(e).copied().unwrap_or(0));
    }
    d.errnos.retain(|_, n| *n > 0);
    let first = d.hist.counts.iter().position(|c| *c > 0);
    let last = d.hist.counts.iter().rposition(|c| *c > 0);
    if let (Some(f), Some(l)) = (first, last) {
        d.hist.min = super::hist::lower_bound(f).max(now.hist.min);
        d.hist.max = (super::hist::lower_bound(l) + super::hist::width(l).saturating_sub(1))
            .min(now.hist.max);
    } else {
        d.hist.min = 0;
        d.hist.max = 0;
    }
    d
}

/// A syscall's figures from these latency samples (tests).
#[cfg(test)]
pub fn stat_of(nr: u32, samples: &[u64]) -> SyscallStat {
    use crate::trace::hist::{self, Histogram};
    let mut h = Histogram {
        counts: vec![0; hist::BUCKETS],
        min: samples.iter().copied().min().unwrap_or(0),
        max: samples.iter().copied().max().unwrap_or(0),
    };
    for v in samples {
        h.counts[hist::bucket_of(*v)] += 1;
    }
    SyscallStat {
        nr,
        calls: samples.len() as u64,
        errors: 0,
        total_ns: samples.iter().sum(),
        hist: h,
        errnos: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(samples: &[u64]) -> SyscallStat {
        stat_of(110, samples)
    }

    #[test]
    fn differences_of_cumulative_readings_add_back_up() {
        let a = stat(&[100, 200, 300]);
        let mut b = a.clone();
        add_stat(&mut b, &stat(&[5000, 7000]));
        let d = stat_since(&b, Some(&a));
        assert_eq!(d.calls, 2);
        assert_eq!(d.total_ns, 12000);
        assert_eq!(d.hist.total(), 2);
        assert!(d.hist.min <= 5000 && d.hist.min >= 4096, "{}", d.hist.min);
        assert_eq!(d.hist.max, 7000);
        let mut back = a.clone();
        add_stat(&mut back, &d);
        assert_eq!(back.calls, b.calls);
        assert_eq!(back.hist.counts, b.hist.counts);
    }
}
