//! What an echo server counts. Each worker keeps its own plain counters
//! (no shared atomics on the hot path) and they are summed at the end. The
//! counters are the artifact's ([`Counters`], [`AcceptErrors`] in
//! report::serve::echo); what fills them lives here.

pub use crate::report::serve::echo::{AcceptErrors, Counters};

use super::conn::Ending;

impl crate::serve::workers::Merge for Counters {
    fn merge(&mut self, o: &Counters) {
        Counters::merge(self, o);
    }
}

impl Counters {
    /// Counts a connection that ended on its own (not by the stop).
    pub fn ended(&mut self, how: Ending) {
        match how {
            Ending::PeerClosed => self.closed_by_peer += 1,
            Ending::Reset => self.reset += 1,
            Ending::Error => self.errors += 1,
        }
    }
}
