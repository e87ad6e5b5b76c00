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
    /// The `--by` breakdown's key (`process`, `comm`, `cgroup`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
    /// The `--by` breakdown, busiest first; its rows add up to `totals`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub groups: Option<Vec<GroupRow>>,
    /// Caveats a reader needs to interpret the figures.
    pub notes: Vec<String>,
    /// `--requests`: the request anatomy over the same window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub anatomy: Option<super::anatomy::AnatomyReport>,
    /// `--stacks`: sampled stacks over the same window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stacks: Option<super::stacks::StacksReport>,
    /// `--requests --stacks`: the tail's samples beside the rest's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tail: Option<super::slow::TailReport>,
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
    /// A scope mode (`cgroup`, `comm`, `system`): what was traced.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<ScopeRecord>,
}

/// What a scope mode traced (`trace --cgroup/--unit/--comm/--system`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScopeRecord {
    /// `cgroup`, `comm` or `system`.
    pub kind: String,
    /// The cgroup's path below the cgroup v2 mount.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cgroup: Option<String>,
    /// The cgroup's id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cgroup_id: Option<u64>,
    /// The systemd unit the cgroup was found from.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unit: Option<String>,
    /// `--unit`: how its cgroup was found, `systemd` (its ControlGroup) or
    /// `path` (no systemd running: the one directory named like the unit
    /// where systemd puts a system unit).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unit_found_by: Option<String>,
    /// `--cgroup`/`--unit`: the cgroup's absolute path as opened.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cgroup_path: Option<String>,
    /// The process name matched.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub comm: Option<String>,
    /// Tasks (threads) that entered the trace.
    pub tasks_joined: u64,
}

/// One group of a `--by` breakdown over the whole window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GroupRow {
    /// Process id (`--by process`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<i32>,
    /// Process name (`--by process`, `--by comm`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub comm: Option<String>,
    /// Cgroup path below the v2 mount, or `#ID` (`--by cgroup`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cgroup: Option<String>,
    /// True for the row pooling groups beyond `--max-series` (and, with
    /// `--by process`, processes that exited earlier in a long run).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub other: bool,
    /// Calls of every syscall in this group.
    pub calls: u64,
    /// Errors (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub errors: Option<u64>,
    /// Entry-to-exit time summed (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
    /// Its syscalls, as in the main table (errno breakdown left out).
    pub syscalls: Vec<SyscallRow>,
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
    /// Threads that exited in the window but whose last context switch the
    /// trace did not see: their CPU in the per-process rows (and, outside
    /// launch mode, in the figures above) stops at their exit tracepoint,
    /// short of the rest of their exit and of run time the scheduler had
    /// not added up yet. 0 in files written before it.
    #[serde(default)]
    pub exit_tails_missing: u64,
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
    /// BPF run time over the window, all programs, all tasks, the
    /// measurement's clock reads taken out: the parts of `bpf_split`
    /// (traced + filtered + lifecycle), ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bpf_time_ns: Option<u64>,
    /// bpf_time_ns per traced event, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ns_per_event: Option<f64>,
    /// bpf_time_ns as a share of one CPU over the window (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu_share: Option<f64>,
    /// Lifecycle records lost to a full ring buffer.
    pub ringbuf_drops: u64,
    /// The BPF time split into runs on the traced events and runs that only
    /// filter everyone else's syscalls out (absent in files written before
    /// it, and when not measured).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bpf_split: Option<BpfSplit>,
    /// The kernel's syscall-tracepoint slow path, calibrated after the
    /// window closed (absent in older files, and when the run saw too few
    /// events for a per-event cost).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub slow_path: Option<SlowPath>,
    /// What the tracer cost before its window opened (absent in older
    /// files).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub startup: Option<StartupCost>,
    /// What the tracer cost the traced processes and the rest of the
    /// machine, and what `--count-only` would save (absent in older files
    /// and when a part was not measured).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub attributed: Option<CostAttribution>,
}

/// The syscall programs' run time, split by whose syscall they ran on.
/// Both parts exclude the measurement's own clock reads; together with
/// `lifecycle_ns` they make `bpf_time_ns`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BpfSplit {
    /// Runs on the traced processes' events.
    pub traced: BpfPart,
    /// Runs that found another task's syscall and left (the load generator,
    /// everyone else on the machine).
    pub filtered: BpfPart,
    /// The fork/exit/exec programs over the window (scaled by time), ns.
    pub lifecycle_ns: u64,
    /// The sums over the sampled slices the parts come from, and how they
    /// add up to the kernel's own figure.
    pub sampled: SplitCheck,
}

/// One part of the syscall programs' run time.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BpfPart {
    /// Syscalls it covers over the window: the traced events (exact), or
    /// everyone else's syscalls (sys_enter's filtered runs in the slices,
    /// scaled by time to the window).
    pub syscalls: u64,
    /// BPF time per syscall (sys_enter's run + sys_exit's run), ns.
    pub ns_per_syscall: f64,
    /// sys_enter's time per run, ns.
    pub enter_ns_per_run: f64,
    /// sys_exit's time per run, ns (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_ns_per_run: Option<f64>,
    /// ns_per_syscall x syscalls.
    pub total_ns: u64,
}

/// The self-timed sums over the slices, against the kernel's run time of
/// the two syscall programs over the same slices.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SplitCheck {
    /// The kernel's run_time_ns of ss_sys_enter + ss_sys_exit in the slices.
    pub kernel_run_time_ns: u64,
    /// The kernel's run count of both in the slices.
    pub kernel_runs: u64,
    /// Runs the programs timed themselves (a subset of the kernel's).
    pub timed_runs: u64,
    /// Work on traced events between the clock reads, ns.
    pub traced_ns: u64,
    /// Work on filtered runs between the clock reads, ns.
    pub filtered_ns: u64,
    /// One clock read, as measured back to back inside the programs, ns.
    pub clock_ns_per_read: f64,
    /// The measurement's clock reads inside the kernel's figure: the
    /// programs' three plus the kernel's own accounting (about one read's
    /// worth of its two falls inside its window), 4 x clock_ns_per_read per
    /// run, ns.
    pub clock_ns: u64,
    /// kernel_run_time_ns - traced_ns - filtered_ns - clock_ns: the
    /// program's entry and return, the flag test and the sums' stores,
    /// spread over the parts per run. Negative when the clock estimate
    /// overshoots.
    pub residual_ns: i64,
}

/// The tracer's start-up, apart from its per-event cost: from the start
/// of the trace to its window opening (the launched command is held until
/// then).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StartupCost {
    /// Wall time from the start of the trace to the window opening, ms.
    pub before_window_ms: f64,
    /// sockscope's own CPU time (user + system) when the window opened, ms.
    pub cpu_ms: f64,
    /// Of it, what was spent before the trace began (the process's start,
    /// argument parsing), ms.
    pub cpu_before_ms: f64,
    /// The phases in order.
    pub phases: Vec<StartupPhase>,
}

/// One start-up phase.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StartupPhase {
    /// `preflight`, `bpf_load` (open, load and verify the programs),
    /// `ring_buffer`, `attach`, `register` (finding and registering the
    /// target's tasks; launching, also spawning the held command).
    pub name: String,
    /// Wall time, ms.
    pub ms: f64,
    /// sockscope's CPU time, ms.
    pub cpu_ms: f64,
}

/// The kernel's syscall-tracepoint slow path: what every syscall on the
/// machine pays while a program is attached to sys_enter/sys_exit, beyond
/// the programs' own run time (the tracepoint flag forces the slow syscall
/// entry and exit, and each tracepoint's dispatch to BPF).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SlowPath {
    /// Per syscall, ns: attached - untraced - the programs' measured filter
    /// runs, each phase its least disturbed batch over all rounds.
    pub ns_per_syscall: f64,
    /// True when the machine's noise during the calibration was larger than
    /// the path itself (ns_per_syscall at or below zero): it is charged as
    /// zero and printed as not told apart from noise.
    #[serde(default)]
    pub within_noise: bool,
    /// Smallest round's figure, ns.
    pub min_ns: f64,
    /// Largest round's figure, ns.
    pub max_ns: f64,
    /// The part due to the sys_exit hook (what `--count-only` does not
    /// pay), ns; absent in count-only mode.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_ns_per_syscall: Option<f64>,
    /// getppid cost with no program attached (least disturbed batch), ns.
    pub untraced_ns_per_call: f64,
    /// getppid cost with the programs attached, filtering it (least
    /// disturbed batch), ns.
    pub attached_ns_per_call: f64,
    /// The programs' measured run time per filtered getppid (enter + exit),
    /// ns; 0 when it could not be measured (then the slow path includes it).
    pub filter_ns_per_call: f64,
    /// Rounds of the calibration.
    pub rounds: u32,
    /// getppid calls per timed batch.
    pub calls_per_batch: u64,
    /// Wall time the calibration took, ms.
    pub took_ms: f64,
    /// How it was measured.
    pub method: String,
}

/// The tracer's cost by who paid it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CostAttribution {
    /// Slow path x the traced syscalls, ns.
    pub slow_path_target_ns: u64,
    /// Slow path x everyone else's syscalls, ns.
    pub slow_path_others_ns: u64,
    /// What the traced processes paid: BPF on their events + the slow path
    /// of their syscalls, ns.
    pub target_ns: u64,
    /// target_ns / the traced processes' CPU time over the window (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target_cpu_share: Option<f64>,
    /// What everyone else paid: the filter runs + the slow path of their
    /// syscalls, ns.
    pub collateral_ns: u64,
    /// Busy CPU of the whole machine over the window (/proc/stat), s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub machine_cpu_s: Option<f64>,
    /// collateral_ns / machine_cpu_s (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub collateral_machine_share: Option<f64>,
    /// What `--count-only` would have saved the traced processes: sys_exit's
    /// runs on their events and its share of the slow path, ns (latency
    /// mode only; an upper bound, see docs/trace.md).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub count_only_saves_target_ns: Option<u64>,
    /// ... and everyone else: sys_exit's filter runs and its share of the
    /// slow path on their syscalls, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub count_only_saves_others_ns: Option<u64>,
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
