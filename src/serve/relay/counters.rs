//! What a relay counts. Each loop keeps its own counters; they are summed
//! at exit. The counters are the artifact's ([`RelayCounters`] in
//! report::serve::relay); how they are summed lives here.

pub use crate::report::serve::relay::RelayCounters;
use crate::serve::workers::Merge;

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
