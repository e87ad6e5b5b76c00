//! What drove a profile's window and who counted its requests: sockscope's
//! own load (`--load`), any command (`--load-cmd`), or the target's own
//! traffic (`--duration`, observe only). Part of the `sockscope.profile`
//! artifact (`workload`, docs/profile-json.md).

use serde::{Deserialize, Serialize};

use super::load::LoadReport;

/// `source` of a run under sockscope's own load.
pub const OWN: &str = "sockscope";
/// `source` of a run under a `--load-cmd` command.
pub const COMMAND: &str = "command";
/// `source` of an observe-only run (`--duration`).
pub const OBSERVED: &str = "observed";

/// Where the load came from and how the requests were counted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkloadRecord {
    /// [`OWN`], [`COMMAND`] or [`OBSERVED`].
    pub source: String,
    /// `--load-cmd`: the command as it was run (its placeholders filled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// `--load-cmd`: how the command ended (a run is written only when it
    /// exited with status 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// `--load-cmd`: the end of what it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CommandOutput>,
    /// The workload's window, s: the command's run, the observed duration,
    /// or the own load's wall time.
    pub window_s: f64,
    /// The requests every per-request figure is over.
    pub requests: RequestCount,
}

impl WorkloadRecord {
    /// The record of an artifact written before external loads existed:
    /// sockscope's own load, counted by it.
    pub fn own_legacy() -> Self {
        WorkloadRecord {
            source: OWN.into(),
            command: None,
            exit: None,
            output: None,
            window_s: 0.0,
            requests: RequestCount {
                counted_by: "load".into(),
                count: 0,
                window_s: 0.0,
                anatomy_count: None,
                edge_bound: None,
                note: String::new(),
            },
        }
    }

    /// sockscope's own load `load`, whose wall time was `wall_s`, and
    /// what the request anatomy counted beside it (None: not recorded).
    pub fn own(load: &LoadReport, wall_s: f64, anatomy_count: Option<u64>) -> Self {
        WorkloadRecord {
            source: OWN.into(),
            command: None,
            exit: None,
            output: None,
            window_s: wall_s,
            requests: RequestCount {
                counted_by: "load".into(),
                count: load.transactions,
                window_s: load.duration_s,
                anatomy_count,
                edge_bound: None,
                note: "the load's completed transactions in its measured window".into(),
            },
        }
    }

    /// True for sockscope's own load.
    pub fn is_own(&self) -> bool {
        self.source == OWN
    }
}

/// A command's output, bounded: the end of what it wrote to standard
/// output and standard error (one pipe, in the order written).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommandOutput {
    /// The end of its output (control characters and bytes that are not
    /// UTF-8 written out), at most 64 KiB.
    pub tail: String,
    /// Bytes it wrote in all.
    pub bytes: u64,
    /// True when `tail` is not all of it.
    pub cut: bool,
}

/// The requests a run's per-request figures are over.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RequestCount {
    /// `load` (sockscope's load counted its transactions) or `anatomy`
    /// (the request anatomy counted them at the target's sockets: the
    /// responses its listening ports' connections wrote in the window).
    pub counted_by: String,
    /// The count.
    pub count: u64,
    /// The window it is over, s.
    pub window_s: f64,
    /// Under sockscope's own load: what the anatomy counted beside it, for
    /// the cross-check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy_count: Option<u64>,
    /// Counted by the anatomy: how many requests the window's edges may
    /// have cut (in flight when it opened or closed, at most one per
    /// connection at each edge): a client's own count may differ by up to
    /// this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_bound: Option<u64>,
    /// What the count is, for people.
    pub note: String,
}
