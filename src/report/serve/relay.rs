//! The `serve relay` artifact (schema `sockscope.serve.relay`, written by
//! `serve relay --json`; docs/relay.md describes every field) and the
//! counters it carries. serve/relay fills them.

use serde::{Deserialize, Serialize};

use crate::report::header::ArtifactHeader;

use super::echo::AcceptErrors;

/// Schema identifier of the relay artifact.
pub const SCHEMA: &str = "sockscope.serve.relay";
/// Bumped on any incompatible change (2: the [`ArtifactHeader`] replaced
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One `serve relay` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// The bound address.
    pub listen: String,
    /// The upstream address.
    pub upstream: String,
    /// --mode as given.
    pub mode_requested: String,
    /// The data path actually used (userspace after a sockmap fallback).
    pub mode: String,
    /// Why sockmap was not used, when it fell back; always written (null
    /// when there was no fallback), so a reader can tell "none" from "not
    /// recorded".
    #[serde(default)]
    pub fallback_reason: Option<String>,
    /// Event loops.
    pub loops: usize,
    /// --max-conns.
    pub max_conns: Option<u64>,
    /// What stopped the relay.
    pub stop_reason: String,
    /// From ready to stopped, seconds.
    pub duration_s: f64,
    /// Drain after the stop signal, seconds.
    pub drain_s: f64,
    /// Everything counted.
    pub counters: RelayCounters,
    /// The verdict program's own counters (sockmap).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verdict: Option<VerdictStats>,
    /// The relay's CPU since it started (getrusage), seconds.
    pub cpu_user_s: f64,
    /// Same, in the kernel.
    pub cpu_system_s: f64,
    /// Caveats.
    pub notes: Vec<String>,
}

/// Counters of one relay loop, or of the whole relay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayCounters {
    /// Client connections accepted and given an upstream connection.
    pub accepted: u64,
    /// Accepted and closed at once because --max-conns pairs were open.
    pub rejected_max_conns: u64,
    /// Upstream connects that failed (refused, unreachable...): the client
    /// was closed.
    pub upstream_failures: u64,
    /// Upstream connects that did not finish within --connect-timeout.
    pub upstream_timeouts: u64,
    /// Pairs that ended with both directions closed in order (FIN both
    /// ways, every byte delivered).
    pub closed: u64,
    /// Pairs ended by a reset or error on either side (the other side was
    /// reset too).
    pub reset: u64,
    /// Pairs closed for --idle-timeout.
    pub idle_closed: u64,
    /// sockmap: pairs whose bytes did not all reach the other side within
    /// the flush bound after an end of stream (then reset).
    pub flush_timeouts: u64,
    /// Pairs open when the stop signal came (closed after the drain).
    pub open_at_stop: u64,
    /// Payload bytes from clients to the upstream.
    pub bytes_client_to_upstream: u64,
    /// Payload bytes from the upstream to clients.
    pub bytes_upstream_to_client: u64,
    /// Of those, bytes that were copied through this process's memory (all
    /// of them in userspace mode; none with splice; with sockmap, only
    /// what the kernel handed back, normally none).
    pub bytes_through_userspace: u64,
    /// sockmap: sockets whose data the kernel handed back to userspace
    /// because their peer was not in the map yet (an insertion race).
    pub tainted_sockets: u64,
    /// sockmap: pairs the kernel could not take (they were relayed in
    /// userspace instead).
    pub link_failures: u64,
    /// Failed accept calls, by error.
    pub accept_errors: AcceptErrors,
}

/// Verdict program counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictStats {
    /// skbs redirected to the peer socket.
    pub redirected_skbs: u64,
    /// Their bytes.
    pub redirected_bytes: u64,
    /// skbs left to the socket's own receive queue (userspace relays them).
    pub passed_skbs: u64,
    /// Their bytes.
    pub passed_bytes: u64,
    /// Redirects that found no peer (each taints a socket).
    pub misses: u64,
    /// Payload-less skbs (a bare FIN), dropped: redirected, they would make
    /// the peer's transmit worker report a broken pipe.
    pub empty_skbs: u64,
}
