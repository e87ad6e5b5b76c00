//! The emulated network path as artifacts record it (`--path`, see
//! docs/path.md): the spec, the backend, the addresses and the relay's
//! counters, or `"loopback"`. Schema only; `crate::netpath` builds it.

use serde::{Deserialize, Serialize};

/// Counters of one direction of the delayline relay.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionStats {
    /// Packets that entered the path.
    pub packets: u64,
    /// Their bytes (IP packets, no link-layer header).
    pub bytes: u64,
    /// Dropped by the random loss.
    pub dropped_loss: u64,
    /// Dropped because `limit` packets were already queued.
    pub dropped_limit: u64,
    /// Written out at the other end.
    pub delivered: u64,
    /// Writes the other device refused (the packet is lost).
    pub write_errors: u64,
}

/// What the delayline relay did.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RelayStats {
    /// Generator to target.
    pub to_target: DirectionStats,
    /// Target to generator.
    pub to_generator: DirectionStats,
    /// Most packets queued in one direction at once.
    pub max_queued: usize,
    /// CPU time of the relay thread, seconds.
    pub cpu_s: f64,
}

/// The path as artifacts record it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PathRecord {
    /// The canonical spec (`rtt=20ms loss=0.1% limit=1000`).
    pub spec: String,
    /// `delayline` or `netem`.
    pub backend: String,
    /// Round-trip time added, ms.
    pub rtt_ms: f64,
    /// Per-direction jitter bound, ms (uniform in [-jitter, +jitter]).
    pub jitter_ms: f64,
    /// Jitter distribution: `uniform`.
    pub jitter_distribution: String,
    /// Loss per packet and direction, percent.
    pub loss_pct: f64,
    /// Rate per direction, bits/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// Queue bound per direction, packets.
    pub limit: usize,
    /// The generator's address on the path.
    pub generator_addr: String,
    /// The target's address on the path.
    pub target_addr: String,
    /// Interface names (generator side, target side).
    pub interfaces: Vec<String>,
    /// The delayline relay's counters (delayline backend only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayStats>,
    /// `tc -s qdisc` of each side at the end (netem backend only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdisc_stats: Vec<String>,
}

/// What an artifact says about the network between load and target: an
/// emulated path, or `"loopback"`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum NetPath {
    /// A `--path`.
    Emulated(Box<PathRecord>),
    /// `"loopback"`: the load and the target met on 127.0.0.1/::1.
    Named(String),
}

impl NetPath {
    /// `"loopback"`.
    pub fn loopback() -> NetPath {
        NetPath::Named("loopback".into())
    }

    /// The emulated path, if any.
    pub fn emulated(&self) -> Option<&PathRecord> {
        match self {
            NetPath::Emulated(p) => Some(p),
            NetPath::Named(_) => None,
        }
    }
}

impl PathRecord {
    /// The caveat that replaces the loopback one.
    pub fn caveat(&self) -> String {
        let mut s = format!(
            "Emulated path ({}, {} backend): the load ran in one network namespace and the \
             target in another, joined by a path that adds {} ms of round-trip time",
            self.spec, self.backend, self.rtt_ms
        );
        if self.jitter_ms > 0.0 {
            s.push_str(&format!(" (+-{} ms jitter per direction)", self.jitter_ms));
        }
        if self.loss_pct > 0.0 {
            s.push_str(&format!(", drops {}% of packets", self.loss_pct));
        }
        if let Some(r) = self.rate_bps {
            s.push_str(&format!(", limits each direction to {}", fmt_rate(r)));
        }
        s.push_str(
            ". No NIC, driver or wire is involved: both ends' kernel work and the path itself \
             run on this machine's CPUs",
        );
        if let Some(r) = &self.relay {
            s.push_str(&format!(
                " (the delayline relay used {:.3} s of CPU and adds its own wake-up latency, \
                 see docs/path.md)",
                r.cpu_s
            ));
        }
        s.push('.');
        s
    }
}

/// `1gbit`, `10mbit`, `1500kbit`, `999bit`.
pub fn fmt_rate(bps: u64) -> String {
    for (div, unit) in [
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ] {
        if bps >= div && bps % div == 0 {
            return format!("{}{unit}", bps / div);
        }
    }
    format!("{bps}bit")
}
