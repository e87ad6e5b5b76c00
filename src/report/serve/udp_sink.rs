//! The `serve udp-sink` artifact (schema `sockscope.serve.udp-sink`,
//! written by `serve udp-sink --json`; docs/serve.md describes every
//! field): the per-run records and the kernel's drop counters beside them.
//! serve/udp_sink fills them.

use serde::{Deserialize, Serialize};

use crate::report::header::ArtifactHeader;

use crate::proto::udp::SinkReport;
use crate::stats::LatencySummary;

/// Schema identifier of the udp-sink artifact.
pub const SCHEMA: &str = "sockscope.serve.udp-sink";
/// Bumped on any incompatible change (2: the [`ArtifactHeader`] replaced
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// The kernel's UDP drop counters over the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelDrops {
    /// Which file and fields.
    pub source: String,
    /// Increase of RcvbufErrors (receive buffer full) during the run.
    pub rcvbuf_errors: u64,
    /// Increase of InErrors during the run.
    pub in_errors: u64,
}

/// One `serve udp-sink` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UdpSinkReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// The bound address.
    pub listen: String,
    /// --rcvbuf as given (null: the system default).
    pub rcvbuf_requested: Option<u64>,
    /// SO_RCVBUF read back: what the kernel granted (twice the request,
    /// capped at twice net.core.rmem_max).
    pub rcvbuf_granted: u64,
    /// net.core.rmem_max at start.
    pub rmem_max: Option<u64>,
    /// What ended the run: `expect`, `idle`, `signal:SIGTERM`...
    pub end_reason: String,
    /// From ready to end, seconds.
    pub duration_s: f64,
    /// Every datagram read (ours and foreign).
    pub datagrams: u64,
    /// Datagrams that are not DATA or FIN of the sockscope format (version
    /// 2), and datagrams without a source address.
    pub foreign: u64,
    /// DATA datagrams of runs already evicted (each run's share is its
    /// `report.after_eviction`): counted in no run's `received`.
    pub untracked_runs: u64,
    /// REPORTs and NEEDs that could not be sent.
    pub report_send_errors: u64,
    /// FINs too short for their REPORT, answered with a NEED (a bare
    /// header saying the length needed).
    pub fins_too_short: u64,
    /// FINs of a run from an address other than the run's: ignored, no
    /// answer.
    pub fins_wrong_source: u64,
    /// DATA of a run from an address other than the run's: ignored.
    pub data_wrong_source: u64,
    /// Runs tracked at once; a new run beyond evicts one.
    pub max_tracked_runs: u64,
    /// Runs evicted to make room for newer ones (ended runs first, then
    /// the least recently used of those quiet for 2 s).
    pub runs_evicted: u64,
    /// Datagrams of new runs refused because every tracked run had had a
    /// datagram within 2 s (a run that is receiving is never evicted).
    #[serde(default)]
    pub runs_refused: u64,
    /// Records of evicted runs kept in `runs`; older ones are dropped.
    pub max_run_records: u64,
    /// What the dropped records held (not in `runs`).
    pub runs_dropped: Dropped,
    /// Per run id, in order of first arrival: the tracked runs and the
    /// records of evicted ones still kept.
    pub runs: Vec<RunRecord>,
    /// The kernel's counters over the same time (null if unreadable).
    pub kernel: Option<KernelDrops>,
    /// The sink process's CPU time since it started, seconds.
    pub cpu_user_s: f64,
    /// Same, in the kernel.
    pub cpu_system_s: f64,
    /// Caveats needed to read the figures.
    pub notes: Vec<String>,
}

/// One run as the sink saw it (in the JSON's `runs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// What was (or would be) sent back in REPORT.
    pub report: SinkReport,
    /// DATA datagrams the sender published (from its FIN; null if no FIN
    /// arrived).
    pub published: Option<u64>,
    /// published - received: every loss, tail drops included.
    pub lost: Option<u64>,
    /// lost / published, percent.
    pub loss_pct: Option<f64>,
    /// Datagrams that arrived more than the tracking window (4 Mi sequence
    /// numbers) behind: neither received nor duplicates.
    pub late_beyond_window: u64,
    /// Summary of `report.latency_hist`, ns.
    pub latency: LatencySummary,
    /// DATA bytes received, duplicates included.
    pub bytes: u64,
    /// FINs answered with a REPORT.
    pub fins_answered: u64,
    /// The address the run belongs to: where its first datagram came from.
    pub source: String,
    /// The run's state was evicted to make room for newer runs: the figures
    /// stop there (later DATA is only counted in `report.after_eviction`).
    pub evicted: bool,
}

impl RunRecord {
    /// Sets the published count (from a FIN) and the loss it implies.
    pub fn set_published(&mut self, published: u64) {
        let lost = published.saturating_sub(self.report.received);
        self.published = Some(published);
        self.lost = Some(lost);
        self.loss_pct = Some(if published > 0 {
            100.0 * lost as f64 / published as f64
        } else {
            0.0
        });
    }
}

/// What the records dropped from the full list held (they are no longer
/// in `runs`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    /// Records dropped.
    pub runs: u64,
    /// Their `report.received`, summed.
    pub received: u64,
    /// Their `lost`, summed (runs without a FIN add nothing).
    pub lost: u64,
}
