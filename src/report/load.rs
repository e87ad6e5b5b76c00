//! The `sockscope load` result: what `--json` writes (documented in
//! docs/load-json.md) and what the summary for people is rendered from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::header::ArtifactHeader;
use crate::proto::udp::SinkReport;
use crate::stats::LatencySummary;

/// Schema identifier of load artifacts.
pub const SCHEMA: &str = "sockscope.load";
/// Bumped on any incompatible change (2: the [`ArtifactHeader`] replaced
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One complete load result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// `tcp-rr`, `tcp-crr`, `http`, `redis`, `memcached`, `udp-rr` or
    /// `udp`.
    pub workload: String,
    /// Target address.
    pub target: String,
    /// The options that shape the load.
    pub config: LoadConfig,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// The same start in ns since the Unix epoch (the run clock's zero;
    /// the measured window starts `config.warmup_s` later). Absent in
    /// artifacts written before it existed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub started_at_unix_ns: Option<u64>,
    /// `--start-at`: the instant asked for and how late the run actually
    /// started.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub start_at: Option<StartAtRecord>,
    /// The generator's host name (which machine or pod measured this).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host: Option<String>,
    /// `--full-log`: where every transaction's send time and latency went.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub full_log: Option<FullLogRecord>,
    /// Present when `sockscope merge` made this artifact from several
    /// generators' artifacts: what it merged and how the seconds lined up.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub merged: Option<MergeRecord>,
    /// Measured window (warm-up excluded), seconds.
    pub duration_s: f64,
    /// False when the run did not do what was asked (interrupted,
    /// stalled, errors over budget, no report from the sink).
    pub complete: bool,
    /// Why the run ended: `duration`, `count`, `interrupted`, `stalled`...
    pub end_reason: String,
    /// Connections.
    pub connections: Connections,
    /// Completed transactions (datagrams for udp) in the measured window.
    pub transactions: u64,
    /// transactions / duration_s.
    pub rate_per_s: f64,
    /// Transactions completed during --warmup (not in any other figure).
    #[serde(default)]
    pub warmup_transactions: u64,
    /// Transaction latency (from the intended send time with --rate).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<LatencyRecord>,
    /// Latency from the actual send time (--rate only), to show what
    /// coordinated omission would have hidden.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency_uncorrected: Option<LatencyRecord>,
    /// How late the generator released each send after its intended time
    /// while a connection was free for it (--rate only): the generator's
    /// own share of `latency`. A send that found every connection busy is
    /// in `conn_wait` instead: that wait is the target's (or the pool's).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub send_lag: Option<LatencyRecord>,
    /// How late the generator released every send after its intended
    /// time, a connection free for it or not (--rate only; absent in
    /// artifacts older than it). Its tail at the SLO's limit says the
    /// generator alone could put a percentile over it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub release_lag: Option<LatencyRecord>,
    /// How long the sends that found every connection busy waited for
    /// one, from their release to their send, less the generator's own
    /// stalls meanwhile (--rate only; absent in artifacts older than the
    /// split, and when none waited).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub conn_wait: Option<LatencyRecord>,
    /// Connect latency (tcp-crr).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connect_latency: Option<LatencyRecord>,
    /// TLS handshake latency, from the TCP connect's end to the
    /// handshake's, of every connection opened in the measured window
    /// (TLS runs).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tls_handshake_latency: Option<LatencyRecord>,
    /// Errors.
    pub errors: Errors,
    /// Per-second samples of the measured window.
    pub intervals: Vec<Interval>,
    /// One result per step of a `--rate` schedule (absent for a constant
    /// rate): sums of the intervals' seconds, so their transactions and
    /// errors add up to the intervals'.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub steps: Option<Vec<Step>>,
    /// Payload bytes.
    pub bytes: Bytes,
    /// The generator's own cost.
    pub generator: Generator,
    /// What the responses said (http, redis, memcached).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub responses: Option<Responses>,
    /// UDP accounting (udp only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpResult>,
    /// Request/response over UDP (udp-rr only): requests sent, answered,
    /// lost, and replies that answered nothing.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_rr: Option<UdpRrResult>,
    /// Caveats and warnings.
    pub notes: Vec<String>,
    /// The emulated path the load crossed (`load --path --serve`); absent
    /// for a plain load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<super::path::NetPath>,
}

/// `--start-at`: the instant asked for and the one the run started at.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StartAtRecord {
    /// As given on the command line.
    pub requested: String,
    /// The instant asked for, ns since the Unix epoch.
    pub requested_unix_ns: u64,
    /// `started_at_unix_ns - requested_unix_ns`: how late the run started
    /// (the wait's own wake-up latency, or the lateness of a command
    /// started after the instant; negative never, in practice).
    pub late_ns: i64,
}

/// `--full-log`: the raw log written beside the artifact.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FullLogRecord {
    /// The CSV file (`send_unix_ns,latency_ns`).
    pub file: String,
    /// Transactions written to it.
    pub logged: u64,
    /// Most transactions kept in memory for it (per run, split over the
    /// worker threads).
    pub limit: u64,
    /// Measured transactions left out because a worker's share of the
    /// limit was full.
    pub not_logged: u64,
    /// True when `not_logged > 0`: the file holds only part of the run.
    pub partial: bool,
}

/// What `sockscope merge` merged: one entry per source artifact, how
/// their per-second intervals were lined up, and what differed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The artifacts merged, in the order given.
    pub sources: Vec<MergeSource>,
    /// How the sources' seconds were placed on the merged timeline.
    pub alignment: MergeAlignment,
    /// Differences between the sources worth a reader's attention
    /// (different workloads or options; different targets with --force).
    pub warnings: Vec<String>,
    /// True when --force merged artifacts that targeted different servers.
    pub forced: bool,
}

/// One merged artifact.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MergeSource {
    /// The file, as given.
    pub file: String,
    /// Its `started_at`.
    pub started_at: String,
    /// Its start, ns since the Unix epoch (from `started_at_unix_ns`, or
    /// `started_at` at ms precision for older artifacts).
    pub started_at_unix_ns: u64,
    /// Its workload.
    pub workload: String,
    /// Its target.
    pub target: String,
    /// The generator's host name, when the artifact has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host: Option<String>,
    /// Its measured transactions.
    pub transactions: u64,
    /// Its measured window, s.
    pub duration_s: f64,
    /// Its interval 0 is the merged timeline's interval `offset_s`.
    pub offset_s: u64,
    /// How far its measured window's start is from that whole second of
    /// the merged timeline, ms (signed: positive = later).
    pub misalignment_ms: f64,
}

/// How the sources' per-second intervals were aligned.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MergeAlignment {
    /// The earliest measured window's start, ns since the Unix epoch: the
    /// merged timeline's second 0.
    pub window_start_unix_ns: u64,
    /// The latest measured window's end, ns since the Unix epoch.
    pub window_end_unix_ns: u64,
    /// The largest |misalignment| of any source, ms (close to 0 when the
    /// generators shared a --start-at and synchronised clocks).
    pub max_misalignment_ms: f64,
}

/// Options recorded with the result.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadConfig {
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connections: Option<usize>,
    /// Worker threads.
    pub threads: usize,
    /// Requests in flight per connection.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pipeline: Option<usize>,
    /// Request size, bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub request_bytes: Option<usize>,
    /// Response size, bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response_bytes: Option<usize>,
    /// Fixed request string (--request).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub request: Option<String>,
    /// Expected response (--expect).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expect: Option<String>,
    /// Requested duration, s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_s: Option<f64>,
    /// Requested count.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub count: Option<u64>,
    /// Warm-up, s.
    pub warmup_s: f64,
    /// Open-loop rate (transactions or datagrams per second); absent for
    /// a schedule (see `rate_schedule`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rate: Option<f64>,
    /// `--rate` as a schedule, in its canonical text
    /// (`200,400,600 every 1s`, `0..400 over 3s`); absent for a constant
    /// rate or a closed loop.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rate_schedule: Option<String>,
    /// Responses verified byte by byte.
    pub verify: bool,
    /// Connection close style (tcp-crr): `fin` or `rst`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub close: Option<String>,
    /// Connect/response timeout, s.
    pub timeout_s: f64,
    /// Errors tolerated before the run counts as failed.
    pub max_errors: u64,
    /// Source addresses connects were spread over (1: the kernel's choice).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source_ips: Option<usize>,
    /// Most new connections per second (tcp-rr --connect-rate).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connect_rate: Option<f64>,
    /// Open loop: the most connections, opened while every one was busy
    /// (--max-conns).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_conns: Option<usize>,
    /// Datagrams sent back to back (udp --burst).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub burst: Option<u64>,
    /// Datagram size (udp).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub datagram_bytes: Option<usize>,
    /// Requested SO_SNDBUF (udp).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sndbuf_requested: Option<usize>,
    /// TLS on every connection (https): how, and what was negotiated.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tls: Option<TlsConfig>,
    /// The options of a protocol workload (http: method, urls, ok_status;
    /// redis/memcached: commands, ratio, keys, key_dist, value_size...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub workload_options: BTreeMap<String, serde_json::Value>,
    /// The exact command line.
    pub command_line: Vec<String>,
}

/// How a load spoke TLS: what was asked, and what the first connection
/// negotiated.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TlsConfig {
    /// Sent as SNI and checked against the certificate.
    pub server_name: String,
    /// Certificates were not checked (--insecure).
    pub insecure: bool,
    /// Certificates trusted besides the system's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ca_file: Option<String>,
    /// Session resumption (false: every handshake is a full one).
    pub session_resumption: bool,
    /// Protocol version the first connection negotiated (`TLSv1_3`);
    /// absent when no handshake completed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub protocol_version: Option<String>,
    /// Cipher suite the first connection negotiated
    /// (`TLS13_AES_256_GCM_SHA384`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cipher_suite: Option<String>,
}

/// What the responses of a protocol workload (http, redis, memcached)
/// said. Counted over the whole run, warm-up and drain included, so they
/// can be set against the server's own counters (`INFO commandstats`,
/// memcached `stats`): a request still unanswered at the end
/// (`errors.unanswered_at_end`) may or may not have reached the server.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Responses {
    /// Whole responses received (transactions, failed requests such as a
    /// 404 or `-ERR`, warm-up and drain included).
    pub answered: u64,
    /// HTTP: responses per status code.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub by_status: BTreeMap<String, u64>,
    /// Responses per command (redis, memcached) or per method+URL.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub by_command: BTreeMap<String, CommandCounts>,
    /// Lookups that found their key (redis GET, memcached get).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hits: Option<u64>,
    /// Lookups that did not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub misses: Option<u64>,
    /// hits / (hits + misses).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hit_ratio: Option<f64>,
    /// Connections the server closed after a response (HTTP `Connection:
    /// close`, e.g. nginx's keepalive_requests) and the load reopened:
    /// not errors.
    pub reconnects: u64,
}

/// One command's responses.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommandCounts {
    /// Responses received.
    pub answered: u64,
    /// Of which errors (counted in `errors.by_class` too).
    pub errors: u64,
    /// Lookups that found their key.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hits: Option<u64>,
    /// Lookups that did not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub misses: Option<u64>,
}

/// Connections asked for and obtained.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Connections {
    /// Asked for (-c).
    pub requested: usize,
    /// tcp-rr: connections established at least once; tcp-crr: connects
    /// that succeeded.
    pub established: u64,
    /// Successful connects including reconnects.
    pub connects: u64,
    /// Open loop with --max-conns: connections opened beyond `requested`
    /// because a send was due and every connection had a request in
    /// flight.
    #[serde(skip_serializing_if = "crate::report::commands::is_zero", default)]
    pub added: u64,
}

/// A latency histogram: summary plus the lossless encoding.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "StoredLatencyRecord")]
pub struct LatencyRecord {
    /// Percentiles, ns.
    #[serde(flatten)]
    pub summary: LatencySummary,
    /// HdrHistogram V2 compressed, base64 (mergeable across runs).
    pub hdr_histogram: String,
}

impl LatencyRecord {
    /// The record of `h`: its summary and lossless encoding; None for an
    /// empty histogram.
    pub fn of(h: &crate::stats::LatencyHist) -> anyhow::Result<Option<Self>> {
        if h.is_empty() {
            return Ok(None);
        }
        Ok(Some(LatencyRecord {
            summary: h.summary(),
            hdr_histogram: h.to_v2_base64()?,
        }))
    }
}

/// A [`LatencyRecord`] as an artifact holds it: one written before the
/// tail intervals existed lacks them, and reading it computes them from
/// its histogram, so `report` and `compare` show them for old runs too.
#[derive(Deserialize)]
struct StoredLatencyRecord {
    #[serde(flatten)]
    summary: LatencySummary,
    hdr_histogram: String,
}

impl From<StoredLatencyRecord> for LatencyRecord {
    fn from(r: StoredLatencyRecord) -> Self {
        let mut summary = r.summary;
        if summary.count > 0 && summary.p99_ci.is_none() {
            // A histogram that does not decode leaves the summary as
            // written: the figures stand, without their intervals.
            if let Ok(h) = crate::stats::LatencyHist::from_v2_base64(&r.hdr_histogram) {
                h.fill_intervals(&mut summary);
            }
        }
        LatencyRecord {
            summary,
            hdr_histogram: r.hdr_histogram,
        }
    }
}

/// Errors by class.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Errors {
    /// All errors (warm-up included).
    pub total: u64,
    /// By class (ECONNREFUSED, ETIMEDOUT, EADDRNOTAVAIL, ECONNRESET,
    /// short_read, closed_by_peer, response_mismatch, ...).
    pub by_class: BTreeMap<String, u64>,
    /// Requests still unanswered when the run ended, after the drain (not
    /// errors).
    pub unanswered_at_end: u64,
    /// Requests in flight when the measured window ended that were
    /// answered during the drain that follows it (tcp; not transactions,
    /// not in the latency or the rate).
    #[serde(default)]
    pub answered_after_end: u64,
}

/// One second of the measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds since the window started.
    pub t_s: u64,
    /// Transactions completed in that second (udp: datagrams published).
    pub transactions: u64,
    /// Errors in that second.
    pub errors: u64,
    /// Median latency of that second, ns (absent for udp: the sender does
    /// not see per-datagram latency).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub p50_ns: Option<u64>,
    /// 99th percentile, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub p99_ns: Option<u64>,
    /// Largest, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_ns: Option<u64>,
    /// True when the window did not cover this whole second (normally the
    /// last one: a count run that ended mid-second, or the responses that
    /// arrived after a duration run's end). Its counts are not a rate and
    /// its percentiles rest on a few samples, so charts leave it out.
    #[serde(default)]
    pub partial: bool,
    /// How much of this second the window covered, s (1 for a whole one).
    #[serde(default = "one_second")]
    pub covered_s: f64,
}

/// One step of a rate schedule: seconds `start_s .. start_s + len_s` of
/// the measured window (the last step also holds any answer recorded after
/// the schedule's end, so the steps add up to the run).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Step {
    /// Position in the schedule, from 0.
    pub index: usize,
    /// Start, seconds into the measured window.
    pub start_s: u64,
    /// Length, s.
    pub len_s: u64,
    /// Rate the schedule asked for (a ramp: its mean over the step), /s.
    pub requested_per_s: f64,
    /// transactions / len_s.
    pub achieved_per_s: f64,
    /// Transactions completed in the step.
    pub transactions: u64,
    /// Errors in the step, by class (measured window only, like the
    /// intervals').
    pub errors: StepErrors,
    /// Latency of the step's transactions (from the intended send time),
    /// from the per-second histograms (2 significant digits).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<LatencyRecord>,
    /// How late the generator released the step's sends (same resolution).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub send_lag: Option<LatencyRecord>,
    /// The busiest worker thread's CPU share of the step (thread CPU time
    /// sampled by each worker at its first event of a second).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busiest_thread_share: Option<f64>,
    /// Why the generator, not the target, limited this step (send lag p99
    /// over 1 ms, or a worker thread busy 90 % or more); absent when it
    /// kept up. A generator-limited step says nothing about the target.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub generator_limited: Option<String>,
}

/// A step's errors.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepErrors {
    /// All of them.
    pub total: u64,
    /// By class, as in the run's `errors.by_class`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub by_class: BTreeMap<String, u64>,
}

/// This machine's host name (the UTS namespace's: a pod's name in
/// Kubernetes), None when it cannot be read.
pub fn host_name() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_string())
}

/// `t` in ns since the Unix epoch (0 before it).
pub fn unix_ns(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn one_second() -> f64 {
    1.0
}

/// Slack before a second counts as partial: a window of 10.0004 s has ten
/// whole seconds, not ten and a sliver.
const SECOND_SLACK_S: f64 = 1e-3;

impl Interval {
    /// Second `t_s` with nothing recorded in it.
    pub fn empty(t_s: u64) -> Self {
        Self {
            t_s,
            transactions: 0,
            errors: 0,
            p50_ns: None,
            p99_ns: None,
            max_ns: None,
            partial: false,
            covered_s: 1.0,
        }
    }
}

/// Completes the per-second list of a window that lasted `span_s` (from
/// the start of the measured window until the last worker stopped):
/// seconds in which nothing was recorded are filled in with zeros, so a
/// stall shows as one instead of a line drawn across it, and every second
/// the window did not cover whole is marked `partial` with the part it
/// covered. A trailing second the window entered by less than
/// [`SECOND_SLACK_S`] is kept only if something was recorded in it.
pub fn seal_intervals(recorded: Vec<Interval>, span_s: f64) -> Vec<Interval> {
    let span_s = span_s.max(0.0);
    let entered = (span_s - SECOND_SLACK_S).ceil().max(0.0) as u64;
    let last_recorded = recorded.iter().map(|i| i.t_s + 1).max().unwrap_or(0);
    let n = entered.max(last_recorded);
    let mut by_second: std::collections::BTreeMap<u64, Interval> =
        recorded.into_iter().map(|i| (i.t_s, i)).collect();
    (0..n)
        .map(|s| {
            let mut iv = by_second.remove(&s).unwrap_or_else(|| Interval::empty(s));
            let covered = (span_s - s as f64).clamp(0.0, 1.0);
            iv.partial = covered < 1.0 - SECOND_SLACK_S;
            iv.covered_s = if iv.partial {
                (covered * 1e6).round() / 1e6
            } else {
                1.0
            };
            iv
        })
        .collect()
}

/// Payload bytes moved.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Bytes {
    /// Written by the generator.
    pub sent: u64,
    /// Read by the generator.
    pub received: u64,
}

/// The generator's own CPU use.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Generator {
    /// User CPU, s (whole process, whole run).
    pub user_cpu_s: f64,
    /// System CPU, s.
    pub system_cpu_s: f64,
    /// (user + system) / transactions (whole run, warm-up included), us.
    pub cpu_us_per_transaction: f64,
    /// Each worker thread's CPU use as a share of the run's wall time.
    pub thread_cpu_share: Vec<f64>,
    /// True when a worker thread was busy >= 90% of the time: the
    /// generator may have been the bottleneck.
    pub saturated: bool,
}

impl Generator {
    /// (user + system) CPU seconds per transaction, in microseconds; 0
    /// when there was no transaction.
    pub fn cpu_us_per(user_s: f64, system_s: f64, transactions: u64) -> f64 {
        if transactions > 0 {
            (user_s + system_s) * 1e6 / transactions as f64
        } else {
            0.0
        }
    }
}

/// UDP accounting: what was published and what the sink saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct UdpResult {
    /// DATA datagrams sent successfully.
    pub published: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// SO_SNDBUF granted by the kernel.
    pub sndbuf_granted: u64,
    /// The sink's report (absent if it never answered).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sink: Option<SinkReport>,
    /// published - received (tail drops included).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lost: Option<u64>,
    /// lost / published.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loss_ratio: Option<f64>,
    /// One-way latency from the sink's histogram (one host only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub one_way_latency: Option<LatencySummary>,
    /// Increase of /proc/net/snmp `Udp: RcvbufErrors` over the run
    /// (machine-wide: equal to `lost` only when nothing else drops UDP).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_rcvbuf_errors_delta: Option<u64>,
}

/// What became of a udp-rr run's requests (whole run, warm-up and drain
/// included, like `responses`). Every request sent is answered, lost,
/// refused, failed by a malformed reply, or still in flight at the end:
/// `requests_sent = answered + lost + refused + protocol_error +
/// unanswered_at_end` (the last two from `errors`; an ECONNREFUSED that
/// came with nothing in flight still counts one error, so `refused` can
/// exceed the requests it failed by that many).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UdpRrResult {
    /// How replies were matched to requests: `dns`, `memcached` or `none`.
    pub id: String,
    /// Requests sent.
    pub requests_sent: u64,
    /// Requests a whole reply answered (`responses.answered`: mismatches
    /// and server errors included).
    pub answered: u64,
    /// Requests with no reply within --timeout (`errors.by_class.lost`).
    pub lost: u64,
    /// Requests failed by an ICMP port unreachable
    /// (`errors.by_class.ECONNREFUSED`).
    pub refused: u64,
    /// lost / (requests_sent - unanswered_at_end): the share of requests
    /// whose fate is known that went unanswered.
    pub loss_ratio: f64,
    /// Well-formed replies that matched no request in flight: answers that
    /// came after their request was counted lost, or duplicates. Never
    /// responses.
    pub late_replies: u64,
    /// Datagrams too short or malformed to name a request (with `--id
    /// dns`: under 12 bytes or not a response; `--id memcached`: no frame
    /// header).
    pub garbage_replies: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t_s: u64, transactions: u64) -> Interval {
        Interval {
            transactions,
            p50_ns: Some(20_000),
            p99_ns: Some(90_000),
            max_ns: Some(100_000),
            ..Interval::empty(t_s)
        }
    }

    #[test]
    fn a_tail_after_a_duration_run_is_partial_and_says_how_short() {
        // -d 3: three whole seconds, then 2 responses that arrived 3.2 ms
        // after the end, while the workers stopped.
        let s = seal_intervals(vec![iv(0, 1000), iv(1, 1000), iv(2, 990), iv(3, 2)], 3.0032);
        assert_eq!(s.len(), 4);
        assert!(s[..3].iter().all(|i| !i.partial && i.covered_s == 1.0));
        assert!(s[3].partial);
        assert!((s[3].covered_s - 0.0032).abs() < 1e-9, "{}", s[3].covered_s);
        assert_eq!(s[3].transactions, 2);
    }

    #[test]
    fn a_sliver_with_nothing_in_it_is_left_out_and_stalls_are_zeros() {
        let s = seal_intervals(vec![iv(0, 1000), iv(2, 1000)], 3.0004);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[1].transactions, 0);
        assert_eq!(s[1].p99_ns, None);
        assert!(s.iter().all(|i| !i.partial));
    }

    #[test]
    fn a_run_shorter_than_a_second_is_one_partial_interval() {
        let s = seal_intervals(vec![iv(0, 500)], 0.25);
        assert_eq!(s.len(), 1);
        assert!(s[0].partial);
        assert_eq!(s[0].covered_s, 0.25);
        // A count run that ended 0.4 s into a second it spent stalled.
        let s = seal_intervals(vec![iv(0, 500), iv(1, 500)], 2.4);
        assert_eq!(s.len(), 3);
        assert!(s[2].partial && s[2].transactions == 0);
    }

    #[test]
    fn older_artifacts_read_as_whole_seconds() {
        let i: Interval = serde_json::from_str(r#"{"t_s":3,"transactions":5,"errors":0}"#).unwrap();
        assert!(!i.partial);
        assert_eq!(i.covered_s, 1.0);
        let v = serde_json::to_value(seal_intervals(vec![iv(0, 1)], 0.5)).unwrap();
        assert_eq!(v[0]["partial"], true);
        assert_eq!(v[0]["covered_s"], 0.5);
    }
}
