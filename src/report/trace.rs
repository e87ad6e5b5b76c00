//! The `sockscope trace` result: what `--json` writes (schema documented in
//! docs/trace-json.md) and what the text table is rendered from.

use serde::{Deserialize, Serialize};

use super::header::ArtifactHeader;

/// Schema identifier written into every trace artifact.
pub const SCHEMA: &str = "sockscope.trace";
/// Bumped on any incompatible change to the fields below (2: the
/// [`ArtifactHeader`] replaced `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One complete trace result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// What was traced.
    pub target: Target,
    /// Options that change what was measured.
    pub options: TraceOptionsRecord,
    /// The measurement window and how it ended.
    pub window: Window,
    /// One row per syscall seen, sorted by total time (descending).
    pub syscalls: Vec<SyscallRow>,
    /// Sums over all syscalls.
    pub totals: Totals,
    /// Per-thread breakdown (only with --per-thread).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub threads: Option<Vec<ThreadRow>>,
    /// Resource use of the traced tree over the window.
    pub resources: Resources,
    /// The same figures and the syscall totals split by process, busiest
    /// first (every process traced in the window).
    #[serde(default)]
    pub processes: Vec<ProcessRow>,
    /// The tracer's own cost.
    pub tracer: TracerCost,
    /// Caveats a reader needs to interpret the figures.
    pub notes: Vec<String>,
}

/// The traced process tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    /// `launch` (sockscope started the command) or `attach` (-p PID).
    pub mode: String,
    /// Command line, in launch mode.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub command: Option<Vec<String>>,
    /// Root process id (the launched child, or the -p PID).
    pub pid: i32,
    /// Command name of the root process.
    pub comm: String,
}

/// Options recorded so a reader knows what the numbers mean.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceOptionsRecord {
    /// Entry hook only (no errors, no latency).
    pub count_only: bool,
    /// Child processes were followed.
    pub follow_forks: bool,
    /// A per-thread table was kept.
    pub per_thread: bool,
}

/// The window over which everything was measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Window {
    /// Wall-clock start (RFC 3339, UTC).
    pub started_at: String,
    /// Length of the window in seconds.
    pub duration_s: f64,
    /// Why it ended: `command_exited`, `target_exited`, `duration`,
    /// `signal:SIGINT`, ...
    pub end_reason: String,
    /// False when the window ended before what was asked (the target died
    /// before --duration elapsed): the data covers only the part that ran.
    pub complete: bool,
    /// Exit code of the launched command (launch mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i32>,
    /// Signal that killed the launched command, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub killed_by_signal: Option<String>,
}

/// errno and how many calls failed with it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrnoCount {
    /// Symbolic name (ENOENT, ERESTARTSYS, ...).
    pub name: String,
    /// Numeric value.
    pub errno: u32,
    /// Number of calls that returned it.
    pub count: u64,
}

/// Figures for one syscall.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyscallRow {
    /// Syscall name (`syscall_N` when unknown to the table).
    pub name: String,
    /// Syscall number.
    pub nr: u32,
    /// Calls.
    pub calls: u64,
    /// Calls that returned an error (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub errors: Option<u64>,
    /// Errors by errno, most frequent first.
    #[serde(default)]
    pub errnos: Vec<ErrnoCount>,
    /// Latency figures (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<Latency>,
}

/// Entry-to-exit wall time of one syscall.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Latency {
    /// Sum over calls, ns.
    pub total_ns: u64,
    /// Exact minimum, ns.
    pub min_ns: u64,
    /// Mean, ns.
    pub avg_ns: u64,
    /// Exact maximum, ns.
    pub max_ns: u64,
    /// Median (histogram bucket middle, within 6.25%).
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Non-empty histogram buckets as [lower bound ns, count].
    pub histogram: Vec<[u64; 2]>,
}

/// Sums over all syscalls.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    /// Calls.
    pub calls: u64,
    /// Errors (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub errors: Option<u64>,
    /// Time inside syscalls, ns (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
}

/// One thread's share (--per-thread).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadRow {
    /// Thread id (0 for the pooled row of threads beyond --max-threads).
    pub tid: i32,
    /// Process id.
    pub pid: i32,
    /// Command name.
    pub comm: String,
    /// How the row ended inside the window: `exit`, or `exec` (the thread
    /// went on in a new row under its new name). Absent while it ran on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ended: Option<String>,
    /// Calls.
    pub calls: u64,
    /// Errors.
    pub errors: u64,
    /// Time inside syscalls, ns.
    pub time_ns: u64,
    /// Its syscalls, by time (or calls in count-only mode).
    pub syscalls: Vec<ThreadSyscallRow>,
}

/// One syscall of one thread.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadSyscallRow {
    /// Syscall name.
    pub name: String,
    /// Calls.
    pub calls: u64,
    /// Errors.
    pub errors: u64,
    /// Time inside it, ns.
    pub time_ns: u64,
}

/// Resource use of the traced tree over the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Resources {
    /// How the CPU, context-switch and fault figures were obtained.
    pub method: String,
    /// CPU time in user mode, seconds.
    pub user_cpu_s: f64,
    /// CPU time in the kernel, seconds.
    pub system_cpu_s: f64,
    /// Voluntary context switches (the task blocked).
    pub voluntary_ctxt_switches: u64,
    /// Involuntary context switches (preempted).
    pub involuntary_ctxt_switches: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults (needed I/O).
    pub major_faults: u64,
    /// Largest peak RSS of any process of the tree, kB.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub peak_rss_kb: Option<u64>,
    /// How the peak RSS was obtained.
    pub peak_rss_method: String,
    /// Threads traced over the window (every task, main threads included).
    pub threads_seen: u64,
    /// Processes traced over the window.
    pub processes_seen: u64,
    /// Threads whose usage could not be windowed and was left out.
    pub tasks_excluded: u64,
}

/// One process of the traced tree over the window: the sum of its
/// threads' in-window kernel counters and syscalls.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcessRow {
    /// Process id.
    pub pid: i32,
    /// Command name (its main thread's, after any exec).
    pub comm: String,
    /// Threads of it traced in the window.
    pub threads: u64,
    /// True when it exited inside the window.
    pub exited: bool,
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
    /// Syscalls.
    pub calls: u64,
    /// Syscalls that returned an error (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub errors: Option<u64>,
    /// Time inside syscalls, ns (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
    /// Threads whose usage could not be windowed (left out of its CPU,
    /// switch and fault figures, as in `resources`).
    pub tasks_excluded: u64,
}

/// The tracer's own cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TracerCost {
    /// Syscall events recorded for traced tasks.
    pub events: u64,
    /// Kernel-measured run time per program over the sampled slices (empty
    /// when BPF statistics could not be enabled; see `notes`).
    #[serde(default)]
    pub programs: Vec<ProgramCost>,
    /// Share of the window during which run-time accounting was on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sampled_fraction: Option<f64>,
    /// Traced syscall events during the sampled slices.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sampled_events: Option<u64>,
    /// BPF run time over the window: ns_per_event x events, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bpf_time_ns: Option<u64>,
    /// BPF run time in the sampled slices (all programs, all tasks) per
    /// traced event in them, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ns_per_event: Option<f64>,
    /// bpf_time_ns as a share of one CPU over the window (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu_share: Option<f64>,
    /// Lifecycle records lost to a full ring buffer.
    pub ringbuf_drops: u64,
}

/// Kernel run-time accounting of one BPF program.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProgramCost {
    /// Program name (as `bpftool prog show` lists it).
    pub name: String,
    /// Runs during the sampled slices, for every task on the machine
    /// (traced or not).
    pub run_count: u64,
    /// Run time during the sampled slices, ns.
    pub run_time_ns: u64,
    /// Mean run time, ns.
    pub ns_per_run: f64,
}
