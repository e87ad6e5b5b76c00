//! What an echo server counts. Each worker keeps its own plain counters
//! (no shared atomics on the hot path) and they are summed at the end.

use serde::{Deserialize, Serialize};

use super::conn::Ending;

/// Connection and byte counters of one worker, or of the whole server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Connections accepted and served (rejected ones not included).
    pub accepted: u64,
    /// Connections accepted and closed at once because --max-conns were
    /// open.
    pub rejected_max_conns: u64,
    /// threaded: connections closed at once because no thread could be
    /// started for them.
    pub rejected_no_thread: u64,
    /// Connections the peer closed (after everything owed was written).
    pub closed_by_peer: u64,
    /// Connections ended by ECONNRESET/EPIPE (or a timeout the kernel
    /// reported).
    pub reset: u64,
    /// Connections ended by any other I/O error.
    pub errors: u64,
    /// Connections still open when the stop signal came (closed by the
    /// server after draining).
    pub open_at_stop: u64,
    /// Of those, connections that still had response bytes unwritten when
    /// the drain time ran out.
    pub drain_timeouts: u64,
    /// Complete requests read (framed mode).
    pub requests: u64,
    /// Responses written in full (framed mode).
    pub transactions: u64,
    /// Bytes read from connections.
    pub bytes_in: u64,
    /// Bytes written to connections.
    pub bytes_out: u64,
    /// Failed accept calls, by error.
    pub accept_errors: AcceptErrors,
}

impl crate::serve::workers::Merge for Counters {
    fn merge(&mut self, o: &Counters) {
        Counters::merge(self, o);
    }
}

impl Counters {
    /// Adds `o` to these counters.
    pub fn merge(&mut self, o: &Counters) {
        self.accepted += o.accepted;
        self.rejected_max_conns += o.rejected_max_conns;
        self.rejected_no_thread += o.rejected_no_thread;
        self.closed_by_peer += o.closed_by_peer;
        self.reset += o.reset;
        self.errors += o.errors;
        self.open_at_stop += o.open_at_stop;
        self.drain_timeouts += o.drain_timeouts;
        self.requests += o.requests;
        self.transactions += o.transactions;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.accept_errors.merge(&o.accept_errors);
    }

    /// Counts a connection that ended on its own (not by the stop).
    pub fn ended(&mut self, how: Ending) {
        match how {
            Ending::PeerClosed => self.closed_by_peer += 1,
            Ending::Reset => self.reset += 1,
            Ending::Error => self.errors += 1,
        }
    }
}

/// Failed accept(2) calls by errno. The resource errors (EMFILE, ENFILE,
/// ENOBUFS, ENOMEM) pause accepting for a backoff; the others are retried.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptErrors {
    /// Per-process descriptor limit reached.
    pub emfile: u64,
    /// System-wide descriptor limit reached.
    pub enfile: u64,
    /// No socket buffer memory.
    pub enobufs: u64,
    /// No memory.
    pub enomem: u64,
    /// The connection was aborted while in the accept queue.
    pub econnaborted: u64,
    /// Protocol error on the pending connection.
    pub eproto: u64,
    /// Any other errno (network errors passed on by accept, EPERM from a
    /// firewall rule...).
    pub other: u64,
    /// Times accepting was paused for a backoff.
    pub backoffs: u64,
}

impl AcceptErrors {
    pub fn merge(&mut self, o: &AcceptErrors) {
        self.emfile += o.emfile;
        self.enfile += o.enfile;
        self.enobufs += o.enobufs;
        self.enomem += o.enomem;
        self.econnaborted += o.econnaborted;
        self.eproto += o.eproto;
        self.other += o.other;
        self.backoffs += o.backoffs;
    }

    /// Non-zero classes as `NAME n` pairs, for the text summary.
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        [
            ("EMFILE", self.emfile),
            ("ENFILE", self.enfile),
            ("ENOBUFS", self.enobufs),
            ("ENOMEM", self.enomem),
            ("ECONNABORTED", self.econnaborted),
            ("EPROTO", self.eproto),
            ("other", self.other),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}
