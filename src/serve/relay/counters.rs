//! What a relay counts. Each loop keeps its own counters; they are summed
//! at exit.

use serde::{Deserialize, Serialize};

use crate::serve::echo::counters::AcceptErrors;
use crate::serve::workers::Merge;

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

impl Merge for RelayCounters {
    fn merge(&mut self, o: &Self) {
        self.accepted += o.accepted;
        self.rejected_max_conns += o.rejected_max_conns;
        self.upstream_failures += o.upstream_failures;
        self.upstream_timeouts += o.upstream_timeouts;
        self.closed += o.closed;
        self.reset += o.reset;
        self.idle_closed += o.idle_closed;
        self.flush_timeouts += o.flush_timeouts;
        self.open_at_stop += o.open_at_stop;
        self.bytes_client_to_upstream += o.bytes_client_to_upstream;
        self.bytes_upstream_to_client += o.bytes_upstream_to_client;
        self.bytes_through_userspace += o.bytes_through_userspace;
        self.tainted_sockets += o.tainted_sockets;
        self.link_failures += o.link_failures;
        self.accept_errors.merge(&o.accept_errors);
    }
}
