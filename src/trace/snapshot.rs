//! A reading of everything a running trace has counted so far, taken
//! without stopping it: what `trace --interval` turns into one table per
//! interval (differences of two snapshots) and what `--metrics` serves to
//! Prometheus (cumulative, so its counters are monotonic).

use std::time::Duration;

use super::stat::SyscallStat;

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
    /// Label sets the tracer pooled into the [`GroupKey::Other`] group:
    /// processes retired after they exited, and a lower bound (one per
    /// syscall) of the groups that found the series map full.
    pub folded_series: u64,
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
