//! The `serve echo` artifact (schema `sockscope.serve.echo`, written by
//! `serve echo --json`; docs/serve.md describes every field) and the
//! counters it carries. serve/echo fills them.

use serde::{Deserialize, Serialize};

use crate::report::header::ArtifactHeader;

/// Schema identifier of the echo artifact.
pub const SCHEMA: &str = "sockscope.serve.echo";
/// Bumped on any incompatible change (2: the [`ArtifactHeader`] replaced
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One `serve echo` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EchoReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// The bound address (IP:PORT).
    pub listen: String,
    /// threaded, epoll or uring.
    pub transport: String,
    /// Event loops (epoll, uring); 1 for threaded (its acceptor).
    pub loops: usize,
    /// Request size in framed mode (null: plain echo).
    pub req_size: Option<usize>,
    /// Response size in framed mode (null: plain echo).
    pub resp_size: Option<usize>,
    /// CPU burned per request (per read in echo mode), microseconds.
    pub work_us: u64,
    /// --max-conns, if given.
    pub max_conns: Option<u64>,
    /// Unwritten output a connection may hold before it stops reading.
    pub out_cap_bytes: usize,
    /// What stopped the server (`signal:SIGTERM`).
    pub stop_reason: String,
    /// From ready to fully stopped, seconds.
    pub duration_s: f64,
    /// Drain time after the stop signal, seconds.
    pub drain_s: f64,
    /// Responses written in full (null in plain echo mode, where there are
    /// no requests to count).
    pub transactions: Option<u64>,
    /// Everything counted.
    pub counters: Counters,
    /// The server process's own CPU time since it started (getrusage
    /// RUSAGE_SELF), seconds.
    pub cpu_user_s: f64,
    /// Same, in the kernel.
    pub cpu_system_s: f64,
    /// Caveats needed to read the figures.
    pub notes: Vec<String>,
}

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
    /// Adds `o` to these counts.
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
