//! Artifacts of the built-in experiments (`sockscope bench NAME`, schema
//! `sockscope.bench`) and of the demo that runs several of them
//! (`sockscope.demo`). Documented in docs/profile-json.md.

use serde::{Deserialize, Serialize};

use super::header::ArtifactHeader;
use super::machine::Machine;
use super::serve::relay::RelayReport;

/// Schema identifier of experiment artifacts.
pub const SCHEMA: &str = "sockscope.bench";
/// Schema identifier of demo artifacts.
pub const DEMO_SCHEMA: &str = "sockscope.demo";
/// Bumped on any incompatible change (both schemas; 2: the shared
/// [`ArtifactHeader`], and the relay reports inside lost
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One experiment run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// `transport`, `udp-rcvbuf`, `overhead` or `relay`.
    pub experiment: String,
    /// Where it ran.
    pub machine: Machine,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// How long the whole experiment took, s.
    pub duration_s: f64,
    /// The command line.
    pub command_line: Vec<String>,
    /// Reduced sizes (--quick).
    pub quick: bool,
    /// Results of `transport`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transport: Option<TransportResult>,
    /// Results of `udp-rcvbuf`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_rcvbuf: Option<UdpRcvbufResult>,
    /// Results of `overhead`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub overhead: Option<OverheadResult>,
    /// Results of `relay`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub relay: Option<RelayResult>,
    /// What the results say, in plain sentences.
    pub insights: Vec<String>,
    /// What limits them.
    pub caveats: Vec<String>,
}

/// The transport comparison: one traced profile per point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransportResult {
    /// Load duration of each point, s.
    pub seconds_per_point: f64,
    /// Request and response size, bytes.
    pub message_bytes: u32,
    /// Every point, in the order run.
    pub points: Vec<TransportPoint>,
}

/// One (transport, workload, connections) profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransportPoint {
    /// threaded, epoll, uring.
    pub transport: String,
    /// tcp-rr or tcp-crr.
    pub workload: String,
    /// Connections (tcp-crr: concurrent connect loops).
    pub connections: u32,
    /// The point's full profile artifact, relative to the experiment's
    /// directory.
    pub run: String,
    /// Transactions completed.
    pub transactions: u64,
    /// Per second.
    pub rate_per_s: f64,
    /// Median latency, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// The server's CPU per transaction over the window, us.
    pub server_cpu_us_per_transaction: f64,
    /// The server's share of it in the kernel (0..1).
    pub server_kernel_share: f64,
    /// The server's syscalls per transaction.
    pub syscalls_per_transaction: f64,
    /// The generator's CPU per transaction, us.
    pub generator_cpu_us_per_transaction: f64,
    /// Server vs load transaction counts (`exact`, `in_flight`, `mismatch`).
    pub server_agreement: Option<String>,
    /// The top syscalls per transaction, (name, calls per transaction).
    pub top_syscalls: Vec<(String, f64)>,
}

/// The UDP receive-buffer sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UdpRcvbufResult {
    /// Datagrams per burst.
    pub burst: u64,
    /// Datagram size, bytes.
    pub datagram_bytes: u32,
    /// net.core.rmem_default.
    pub rmem_default: Option<u64>,
    /// net.core.rmem_max (caps what SO_RCVBUF can get: twice this).
    pub rmem_max: Option<u64>,
    /// Every trial, in the order run.
    pub trials: Vec<UdpTrial>,
}

/// One burst into one sink.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UdpTrial {
    /// `small`, `default` or `large`.
    pub buffer: String,
    /// Trial number (1-based) within the buffer size.
    pub trial: u32,
    /// SO_RCVBUF asked for (None: the default).
    pub requested: Option<u64>,
    /// What the kernel granted (getsockopt).
    pub granted: u64,
    /// Datagrams sent.
    pub published: u64,
    /// Datagrams the sink received.
    pub received: u64,
    /// published - received (tail drops included).
    pub lost: u64,
    /// lost / published, percent.
    pub loss_pct: f64,
    /// Holes below the highest sequence received.
    pub interior_gaps: u64,
    /// Increase of the kernel's Udp RcvbufErrors over the trial (machine
    /// wide).
    pub kernel_rcvbuf_errors_delta: Option<u64>,
}

/// The tracer overhead microbenchmark.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OverheadResult {
    /// getppid calls per fast run.
    pub calls: u64,
    /// Calls per strace / perf trace run (ptrace costs ~100 us a call).
    pub slow_calls: u64,
    /// Interleaved rounds.
    pub rounds: u32,
    /// One row per configuration.
    pub rows: Vec<OverheadRow>,
    /// Configurations left out, and why (e.g. perf not installed).
    pub skipped: Vec<String>,
}

/// One configuration of the overhead benchmark.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OverheadRow {
    /// Key: untraced, count_only, latency, strace, perf_trace, collateral.
    pub config: String,
    /// For people.
    pub label: String,
    /// ns per call of each round.
    pub rounds_ns: Vec<f64>,
    /// Median of the rounds.
    pub median_ns: f64,
    /// median / untraced median.
    pub ratio: f64,
    /// median - untraced median.
    pub added_ns: f64,
}

/// The relay comparison: tcp-rr through each relay data path (and HAProxy)
/// to the same echo server, untraced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayResult {
    /// Load duration of each point, s.
    pub seconds_per_point: f64,
    /// Warm-up before each point's measured window, s.
    pub warmup_s: f64,
    /// Interleaved rounds (each point's figures are medians over them).
    pub rounds: u32,
    /// The upstream every relay forwards to.
    pub upstream: String,
    /// The paths compared, in the order run: `direct` (no relay: the
    /// ceiling), `haproxy` (the peer), `userspace`, `splice`, `sockmap`.
    pub modes: Vec<String>,
    /// HAProxy's version line, when it took part.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub haproxy_version: Option<String>,
    /// One per (mode, message size, connections).
    pub points: Vec<RelayPoint>,
    /// Each sockscope relay's own account of each round.
    pub relay_runs: Vec<RelayRun>,
    /// Modes left out, and why (e.g. haproxy not installed).
    pub skipped: Vec<String>,
}

/// One (path, message size, connections) point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayPoint {
    /// direct, haproxy, userspace, splice, sockmap.
    pub mode: String,
    /// Request and response size, bytes.
    pub message_bytes: u32,
    /// Client connections.
    pub connections: u32,
    /// Transactions per second of each round.
    pub rates_per_s: Vec<f64>,
    /// Median of `rates_per_s`.
    pub rate_per_s: f64,
    /// Median latency, ns (median over the rounds).
    pub p50_ns: u64,
    /// 99th percentile, ns (median over the rounds).
    pub p99_ns: u64,
    /// Load errors over every round (any error fails the experiment, so
    /// this is 0 in a written artifact; kept for readers' checks).
    pub errors: u64,
    /// The relay process's CPU per transaction, us (None for `direct`).
    pub relay_cpu_us_per_transaction: Option<f64>,
    /// Kernel worker threads' CPU (kworker, ksoftirqd: machine wide) per
    /// transaction, us. sockmap's redirected bytes are carried there.
    pub kernel_workers_cpu_us_per_transaction: f64,
    /// The echo upstream's CPU per transaction, us.
    pub upstream_cpu_us_per_transaction: f64,
    /// The load generator's CPU per transaction, us.
    pub generator_cpu_us_per_transaction: f64,
    /// Busy CPU of the whole machine per transaction, us: the fairest
    /// total on one loopback machine, wherever the work ran.
    pub machine_cpu_us_per_transaction: f64,
}

/// A sockscope relay's own report of one round (its --json).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayRun {
    /// userspace, splice, sockmap.
    pub mode: String,
    /// Round, 1-based.
    pub round: u32,
    /// The relay's report.
    pub report: RelayReport,
}

/// A part of the demo that did not run, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NotRun {
    /// Experiment name.
    pub experiment: String,
    /// Why not.
    pub reason: String,
}

/// The demo: several experiments and one report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DemoReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// Where it ran.
    pub machine: Machine,
    /// Wall-clock start.
    pub started_at: String,
    /// Whole demo, s.
    pub duration_s: f64,
    /// --quick.
    pub quick: bool,
    /// False when a part could not run (see `not_run`).
    pub complete: bool,
    /// The experiments that ran.
    pub experiments: Vec<BenchReport>,
    /// Those that did not.
    pub not_run: Vec<NotRun>,
}
