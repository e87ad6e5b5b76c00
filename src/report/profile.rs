//! The `sockscope profile` artifact (run.json, schema `sockscope.profile`,
//! documented in docs/profile-json.md): the trace and load reports of one
//! window, the target, the machine, and the figures derived from them.

use serde::{Deserialize, Serialize};

use super::evidence::KernelEvidence;
use super::header::{self, ArtifactHeader};
use super::load::LoadReport;
use super::machine::Machine;
use super::syscall_class::SyscallClass;
use super::trace::TraceReport;
use super::tune::AuditRow;
use super::workload::WorkloadRecord;

/// Schema identifier of profile artifacts.
pub const SCHEMA: &str = "sockscope.profile";
/// Bumped on any incompatible change (2: the shared [`ArtifactHeader`];
/// 3: `trace` may be absent, `profile --requests-only`: a reader of
/// version 2 requires it, so it must refuse such a file by its version
/// rather than fail on a missing field; 4: `load` may be absent, a run
/// under `--load-cmd` or observe-only, with `workload` saying which).
/// Versions 1 to 3 read as 4.
pub const SCHEMA_VERSION: u32 = 4;
/// The version of an artifact with steps (`profile --sweep`,
/// `--find-capacity`: `sweep`, `capacity`): a version-4 reader would read
/// it as one window and drop the steps, so it must refuse it by its
/// version. A single window is still written as [`SCHEMA_VERSION`], which
/// it is unchanged; this sockscope reads both.
pub const SWEEP_SCHEMA_VERSION: u32 = 5;

/// One profile run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfileReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// Wall-clock start of the run (RFC 3339).
    pub started_at: String,
    /// The profile command line as given.
    pub command_line: Vec<String>,
    /// What was measured.
    pub target: TargetRecord,
    /// sockscope's own load, as the equivalent `sockscope load ...`
    /// command line (empty without one: see `workload`).
    #[serde(default)]
    pub load_command: Vec<String>,
    /// What drove the window (sockscope's load, a command, the target's
    /// own traffic) and who counted the requests. Artifacts written before
    /// it existed read as sockscope's own load.
    #[serde(default = "WorkloadRecord::own_legacy")]
    pub workload: WorkloadRecord,
    /// Lengths of the load and trace windows.
    pub windows: Windows,
    /// Where it ran.
    pub machine: Machine,
    /// The load generator's full report; absent when the load was not
    /// sockscope's (`--load-cmd`, observe-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadReport>,
    /// The tracer's full report (attach mode, over the trace window);
    /// absent with `--requests-only` (no syscall tracer was attached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReport>,
    /// Figures derived from the above.
    pub derived: Derived,
    /// The derived figures in plain sentences.
    pub insights: Vec<String>,
    /// What limits the figures (loopback, virtual machine, shared CPUs).
    pub caveats: Vec<String>,
    /// What the kernel counted, queued and scheduled around the target
    /// (absent in artifacts written before it was collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<KernelEvidence>,
    /// The tuning audit's rows that this run's evidence supports.
    #[serde(default)]
    pub advice: Vec<AuditRow>,
    /// The network between the load and the target: an emulated path
    /// (`--path`), `"loopback"`, or absent (another address, or an
    /// artifact written before paths were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<super::path::NetPath>,
    /// Where each request's time at the server went (queue wait, CPU
    /// wait, service, send), beside the load's latency; absent with
    /// `--no-requests`, when it failed, and in artifacts written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<super::anatomy::AnatomyReport>,
    /// Why the request anatomy is missing when it was asked for and
    /// failed (the run then exits non-zero; the rest of it is complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy_failure: Option<String>,
    /// Sampled stacks of the target over the window (on-CPU and off-CPU);
    /// absent with `--no-stacks`, when sampling failed, and in artifacts
    /// written before stacks were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<super::stacks::StacksReport>,
    /// Why the stacks are missing when they were asked for and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_failure: Option<String>,
    /// The tail's stacks and waits beside the rest's (samples tied to the
    /// anatomy's requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<super::slow::TailReport>,
    /// `--sweep` and `--find-capacity`: a point per step (the sections
    /// above are the last step's window); absent for a single window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<super::sweep::Sweep>,
    /// `--find-capacity`: the highest rate that met the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::sweep::Capacity>,
}

/// The target process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetRecord {
    /// `sockscope` (--target), `command` (-- CMD) or `pid` (--pid).
    pub mode: String,
    /// Command line it was started with (launched targets).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub command: Option<Vec<String>>,
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// The address the load was sent to (learned from its own sockets).
    pub address: String,
    /// Every TCP listener / bound UDP socket it owned when it was ready.
    pub sockets: Vec<String>,
    /// Seconds from launch until it owned the listening socket.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ready_after_s: Option<f64>,
    /// How a launched target was stopped.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stop: Option<StopRecord>,
    /// The server's own report (`sockscope serve ... --json`), for
    /// `--target 'serve ...'`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_report: Option<serde_json::Value>,
    /// `--cgroup`/`--unit`: the cgroup v2 path traced (every process in it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cgroup: Option<String>,
    /// `--unit`: the systemd unit the cgroup was found from.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unit: Option<String>,
    /// `--unit`: how its cgroup was found, `systemd` or `path` (see the
    /// trace's `ScopeRecord::unit_found_by`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unit_found_by: Option<String>,
}

/// How a launched target ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StopRecord {
    /// `SIGTERM` when it stopped on it, `SIGKILL` when it had to be
    /// killed, `none` when it had already exited by itself.
    pub signal: String,
    /// Seconds from the signal to its exit.
    pub after_s: f64,
    /// Its exit code, if it exited.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub killed_by: Option<String>,
}

impl StopRecord {
    /// For people: `SIGTERM after 0.01 s, exit status 0`, `SIGKILL after
    /// 5.00 s, killed by SIGKILL`, `none after 0.00 s, status unknown`.
    pub fn describe(&self) -> String {
        let status = match (self.exit_code, &self.killed_by) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by {sig}"),
            (None, None) => "status unknown".to_string(),
        };
        format!("{} after {:.2} s, {status}", self.signal, self.after_s)
    }

    /// True when it exited with status 0 without needing SIGKILL.
    pub fn clean(&self) -> bool {
        self.signal != "SIGKILL" && self.exit_code == Some(0)
    }
}

/// The two windows: the load's measured window, and the trace window
/// around it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Windows {
    /// The load's measured window, s.
    pub load_s: f64,
    /// From the load's start (connections included) until it returned, s.
    pub load_wall_s: f64,
    /// The trace window, s (opens before the load starts, closes after it
    /// returns: a few ms longer).
    pub trace_s: f64,
    /// How the two relate, for people.
    pub note: String,
}

/// One syscall's share per transaction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyscallShare {
    /// Syscall name.
    pub name: String,
    /// Calls in the window.
    pub calls: u64,
    /// Calls per transaction.
    #[serde(deserialize_with = "nan_if_null")]
    pub per_transaction: f64,
    /// Time inside it, ns (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
    /// Share of all syscall time (0..1; absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_share: Option<f64>,
}

/// One kind of syscall (see [`SyscallClass`]) and its share.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassShare {
    /// The kind.
    pub class: SyscallClass,
    /// Calls in the window.
    pub calls: u64,
    /// Calls per transaction.
    #[serde(deserialize_with = "nan_if_null")]
    pub per_transaction: f64,
    /// Share of all calls (0..1).
    pub call_share: f64,
    /// Time inside them, ns (absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
    /// Share of all syscall time (0..1; absent in count-only mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_share: Option<f64>,
}

/// Figures derived from the load, the trace and the server's own report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Derived {
    /// Transactions the load completed (udp: datagrams the sink received).
    pub transactions: u64,
    /// Per second of the load window.
    pub rate_per_s: f64,
    /// The target's user CPU over the trace window, s.
    pub target_user_cpu_s: f64,
    /// Where the target's CPU was read when no syscall tracer measured it
    /// (`--requests-only`, over the anatomy's window): `/proc stat` or
    /// `cgroup cpu.stat`; absent when the tracer did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target_cpu_source: Option<String>,
    /// The target's system CPU over the trace window, s.
    pub target_system_cpu_s: f64,
    /// system / (user + system).
    pub target_kernel_share: f64,
    /// (user + system) / transactions, us.
    #[serde(deserialize_with = "nan_if_null")]
    pub target_cpu_us_per_transaction: f64,
    /// (user + system) / trace window: CPUs kept busy.
    pub target_cpus_busy: f64,
    /// Target syscalls per transaction (all syscalls).
    #[serde(deserialize_with = "nan_if_null")]
    pub syscalls_per_transaction: f64,
    /// The busiest syscalls (by time, or by calls in count-only mode).
    pub top_syscalls: Vec<SyscallShare>,
    /// Voluntary context switches per transaction (the target blocked).
    #[serde(deserialize_with = "nan_if_null")]
    pub voluntary_switches_per_transaction: f64,
    /// Involuntary context switches per transaction (it was preempted).
    #[serde(deserialize_with = "nan_if_null")]
    pub involuntary_switches_per_transaction: f64,
    /// The generator's CPU per transaction, us (profile's own tracing
    /// control thread excluded); null without sockscope's own load.
    #[serde(deserialize_with = "nan_if_null")]
    pub generator_cpu_us_per_transaction: f64,
    /// CPU of profile's tracing control thread during the load, s
    /// (excluded from the generator figure).
    pub control_thread_cpu_s: f64,
    /// True when a generator thread was busy >= 90% of the time.
    pub generator_saturated: bool,
    /// The tracer's BPF time per traced syscall, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_ns_per_syscall: Option<f64>,
    /// The tracer's BPF time over the window, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_bpf_time_ns: Option<u64>,
    /// That time as a share of the target's CPU time (0..1). It includes
    /// the runs that filter everyone else's syscalls out; what the target
    /// itself paid is `tracer_target_share`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_share_of_target_cpu: Option<f64>,
    /// What the tracer cost the target: BPF on its own events + the
    /// syscall hook's slow path on its syscalls, ns
    /// (`trace.tracer.attributed.target_ns`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_target_ns: Option<u64>,
    /// tracer_target_ns / the target's CPU time (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_target_share: Option<f64>,
    /// What it cost everyone else (the load generator included): the
    /// filter runs + the slow path on their syscalls, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_collateral_ns: Option<u64>,
    /// tracer_collateral_ns / the machine's busy CPU over the window (0..1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_collateral_machine_share: Option<f64>,
    /// What `--count-only` would save the target at most, ns (latency
    /// mode only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracer_count_only_saves_ns: Option<u64>,
    /// The server's own transaction count (serve targets).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_transactions: Option<u64>,
    /// `exact`, `in_flight` (the server answered up to
    /// `unanswered_at_end` requests more than the load counted) or
    /// `mismatch`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_agreement: Option<String>,
    /// The server's own CPU since it started (getrusage), s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_own_cpu_s: Option<f64>,
    /// Minor page faults of the target per transaction (trace window).
    #[serde(default, deserialize_with = "nan_if_null")]
    pub minor_faults_per_transaction: f64,
    /// Major page faults (they needed I/O) per transaction.
    #[serde(default, deserialize_with = "nan_if_null")]
    pub major_faults_per_transaction: f64,
    /// Threads of the target seen over the trace window.
    #[serde(default)]
    pub threads_seen: u64,
    /// Processes of the target seen over the trace window.
    #[serde(default)]
    pub processes_seen: u64,
    /// fork, vfork, clone and clone3 calls per transaction: processes or
    /// threads created.
    #[serde(default, deserialize_with = "nan_if_null")]
    pub tasks_created_per_transaction: f64,
    /// execve and execveat calls per transaction.
    #[serde(default, deserialize_with = "nan_if_null")]
    pub execs_per_transaction: f64,
    /// The syscalls by kind, most calls first (kinds with no call left out).
    #[serde(default)]
    pub syscall_classes: Vec<ClassShare>,
    /// Present when processes outside the traced tree serve the load's
    /// address too: the tree's share of the transactions, over which the
    /// per-transaction target figures are computed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub attribution: Option<Attribution>,
}

impl ProfileReport {
    /// An artifact written before `workload` existed: sockscope's load
    /// counted the requests, over its own window.
    pub fn fill_legacy(&mut self) {
        if let (Some(l), true) = (&self.load, self.workload.requests.window_s == 0.0) {
            self.workload.window_s = l.duration_s;
            self.workload.requests.count = l.transactions;
            self.workload.requests.window_s = l.duration_s;
        }
    }

    /// The window as a step of a sweep sees it (see
    /// [`super::sweep::SweepPoint::of`]).
    pub fn step_window(&self) -> super::sweep::StepWindow<'_> {
        super::sweep::StepWindow {
            load: self.load.as_ref(),
            anatomy: self.anatomy.as_ref(),
            evidence: self.evidence.as_ref(),
            cpu_us_per_request: self.derived.target_cpu_us_per_transaction,
            syscalls_per_request: self.derived.syscalls_per_transaction,
        }
    }

    /// What drove the window, in one line: the `sockscope load` command,
    /// the `--load-cmd` command, or the observation.
    pub fn load_line(&self) -> String {
        let w = &self.workload;
        match w.source.as_str() {
            super::workload::OWN => shell_words::join(&self.load_command),
            super::workload::COMMAND => format!(
                "{} (--load-cmd, {})",
                w.command
                    .as_deref()
                    .map(shell_words::join)
                    .unwrap_or_default(),
                w.exit.as_deref().unwrap_or("status unknown")
            ),
            _ => format!(
                "none: the target's own traffic, observed for {:.2} s",
                w.window_s
            ),
        }
    }
}

impl Derived {
    /// The transactions the per-transaction target figures are over: every
    /// transaction of the load, or the traced tree's estimated share of
    /// them when others serve the address too; None when that share is
    /// unknown or zero (the figures are then null).
    pub fn target_transactions(&self) -> Option<f64> {
        match &self.attribution {
            None => Some(self.transactions as f64).filter(|t| *t > 0.0),
            Some(a) => a.transactions.filter(|t| *t > 0.0),
        }
    }
}

/// Which part of the load the traced tree served, when others serve the
/// same address (a worker among several, SO_REUSEPORT siblings).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Attribution {
    /// `tree_share`: the per-transaction target figures are over
    /// `transactions` (the tree's estimated share); `unknown`: the share
    /// could not be measured and those figures are null.
    pub basis: String,
    /// The processes outside the traced tree that serve the address.
    pub shared_with: Vec<Sharer>,
    /// Estimated fraction (0..1) of the load's transactions the traced tree
    /// served (absent when unknown).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub share: Option<f64>,
    /// The load's transactions x `share`: the divisor of the per-transaction
    /// target figures (absent when unknown).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<f64>,
    /// How the share was estimated, or why it could not be.
    pub method: String,
    /// The load's connections by who held their server end, as sampled
    /// (tcp-rr).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connections: Option<ConnectionOwners>,
}

/// A process outside the traced tree that serves the load's address.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sharer {
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// `same_socket` (it holds the very listening socket, e.g. inherited
    /// across fork) or `reuseport` (its own listener on the same port).
    pub how: String,
}

/// Who held the server end of the load's connections.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ConnectionOwners {
    /// Held by the traced tree.
    pub tree: u64,
    /// Held by another process.
    pub others: u64,
    /// Never seen accepted by anyone (left out of the share).
    pub unknown: u64,
}

/// A per-transaction target figure: null in the JSON (NaN in memory) when
/// the traced tree's share of the transactions is unknown (see
/// [`Attribution`]); serde_json writes a NaN as null.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A profile artifact from the bytes of `path` (read bounded by the
/// caller: `input::read_artifact`). A file that is not one fails with a
/// message that says what it is instead, `who` naming the command:
/// `compare reads profile artifacts (run.json, schema sockscope.profile);
/// X is a sockscope.trace artifact`.
pub fn from_bytes(
    bytes: &[u8],
    path: &std::path::Path,
    who: &str,
) -> anyhow::Result<ProfileReport> {
    parse(bytes).map_err(|what| {
        anyhow::anyhow!(
            "{who} reads profile artifacts (run.json, schema {SCHEMA}); {} {what}",
            path.display()
        )
    })
}

/// [`parse`] for tests elsewhere in `report`.
#[cfg(test)]
pub(crate) fn parse_bytes(bytes: &[u8]) -> Result<ProfileReport, String> {
    parse(bytes)
}

/// A profile artifact from its bytes (version 1 converted, see
/// [`header::upgrade`]), or what they are instead ("is a sockscope.trace
/// artifact", "is not JSON (...)").
fn parse(bytes: &[u8]) -> Result<ProfileReport, String> {
    let mut v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("is not JSON ({e})"))?;
    let schema = match v.get("schema").and_then(|s| s.as_str()) {
        Some(s) => s.to_string(),
        None => return Err("is JSON without a `schema` field: not a sockscope artifact".into()),
    };
    if schema != SCHEMA {
        return Err(format!("is a {schema} artifact"));
    }
    header::upgrade(&mut v).map_err(|why| {
        format!(
            "is {SCHEMA}, but its {why}; this sockscope reads version {}",
            header::readable(SCHEMA)
        )
    })?;
    let mut r: ProfileReport = serde_json::from_value(v)
        .map_err(|e| format!("is a {SCHEMA} artifact this sockscope cannot read: {e}"))?;
    if r.load.is_none() && r.workload.is_own() {
        return Err(format!(
            "is a {SCHEMA} artifact under sockscope's own load without its `load` report"
        ));
    }
    r.fill_legacy();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_the_tracer_has_no_trace_key_and_reads_back() {
        use crate::report::fixtures;
        let r = fixtures::untraced(fixtures::profile(&fixtures::epoll_echo()));
        let mut v = serde_json::to_value(&r).unwrap();
        v["schema_version"] = SCHEMA_VERSION.into();
        assert!(v.get("trace").is_none(), "{v}");
        assert!(v["derived"]["syscalls_per_transaction"].is_null());
        assert_eq!(v["derived"]["target_cpu_source"], "/proc stat");
        let back = parse(v.to_string().as_bytes()).expect("it reads back");
        assert!(back.trace.is_none() && back.anatomy.is_some());
        assert!(back.derived.syscalls_per_transaction.is_nan());
        // A traced run keeps its trace.
        let full = fixtures::profile(&fixtures::epoll_echo());
        let mut v = serde_json::to_value(&full).unwrap();
        v["schema_version"] = SCHEMA_VERSION.into();
        assert!(v.get("trace").is_some());
        assert!(parse(v.to_string().as_bytes()).unwrap().trace.is_some());
    }

    #[test]
    fn what_is_not_a_profile_artifact_is_named() {
        let what = |t: &str| parse(t.as_bytes()).expect_err(t);
        assert_eq!(
            what(r#"{"schema":"sockscope.trace","schema_version":1,"syscalls":[]}"#),
            "is a sockscope.trace artifact"
        );
        for s in ["sockscope.load", "sockscope.bench", "sockscope.demo"] {
            assert_eq!(
                what(&format!(r#"{{"schema":"{s}","schema_version":1}}"#)),
                format!("is a {s} artifact")
            );
        }
        assert!(what("% time  total").starts_with("is not JSON ("));
        assert!(what("[1, 2]").contains("without a `schema` field"));
        assert_eq!(
            what(r#"{"schema":"sockscope.profile","schema_version":6}"#),
            "is sockscope.profile, but its schema_version 6 is not a supported version; this \
             sockscope reads version 1, 2, 3, 4 or 5"
        );
        for version in [1, 2, 3] {
            let t = format!(r#"{{"schema":"sockscope.profile","schema_version":{version}}}"#);
            assert!(
                what(&t)
                    .starts_with("is a sockscope.profile artifact this sockscope cannot read: "),
                "{t}"
            );
        }
    }
}
