//! What a request/response workload plugs into the TCP driver, neper's way
//! (a workload is a small table of callbacks over one engine):
//!
//! - its [`Exchange`]: the request of transaction `seq`, how to recognise
//!   a whole response as bytes arrive, and what counts as an error;
//! - its [`ConnMode`]: persistent connections (tcp-rr) or one connection
//!   per transaction (tcp-crr);
//! - its name, which is also the report's `workload`.
//!
//! Everything else (threads, epoll, buffers, connects and reconnects,
//! timeouts, open-loop pacing, tallies, intervals, the report) belongs to
//! the driver (`driver`, `persistent`, `per_txn`, `engine`), so a workload
//! file stays small: see `tcp_rr.rs`, `tcp_crr.rs` and the exchange they
//! share, `raw.rs`. This module imports nothing else from `load/`.

use std::io;

/// Error classes reported by the load generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorClass {
    /// Connection refused (nothing listening).
    Refused,
    /// Connect or response did not come within --timeout.
    TimedOut,
    /// No local address/port available (ephemeral ports exhausted).
    AddrNotAvail,
    /// Connection reset by the peer.
    Reset,
    /// The peer closed the connection in the middle of a response.
    ShortRead,
    /// The peer closed the connection between transactions.
    Closed,
    /// A response byte differed from what the request implied (--verify,
    /// or --expect STRING).
    Mismatch,
    /// The peer sent more than the expected response.
    Unexpected,
    /// Any other socket error.
    Other,
}

impl ErrorClass {
    /// Stable name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Refused => "ECONNREFUSED",
            Self::TimedOut => "ETIMEDOUT",
            Self::AddrNotAvail => "EADDRNOTAVAIL",
            Self::Reset => "ECONNRESET",
            Self::ShortRead => "short_read",
            Self::Closed => "closed_by_peer",
            Self::Mismatch => "response_mismatch",
            Self::Unexpected => "unexpected_bytes",
            Self::Other => "other",
        }
    }

    /// Classifies a socket error.
    pub fn of(err: &io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::ECONNREFUSED) => Self::Refused,
            Some(libc::ETIMEDOUT) => Self::TimedOut,
            Some(libc::EADDRNOTAVAIL) => Self::AddrNotAvail,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => Self::Reset,
            _ => Self::Other,
        }
    }
}

/// What [`Exchange::parse`] made of the response bytes it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Every byte was consumed and the response is not whole yet.
    Partial,
    /// The response is whole after this many of the bytes; the rest (if
    /// any) belongs to the next response (pipelining) or, on a connection
    /// per transaction, is an error (`unexpected_bytes`).
    Complete(usize),
    /// The response is wrong: the connection fails with this class.
    Error(ErrorClass),
}

/// The protocol side of a request/response workload. The driver calls
/// [`push_request`](Exchange::push_request) once per request and
/// [`parse`](Exchange::parse) once per read that carries response bytes
/// (a few per response at most): no call per byte, and no allocation on
/// either path is expected of an implementation.
pub trait Exchange: Sync {
    /// Per-connection state of the response parser (e.g. the bytes of the
    /// current response seen so far). The driver resets it to its default
    /// when a response completes and when a connection starts over.
    type Cursor: Default + Send;

    /// Request size in bytes, when it is fixed (recorded in the report).
    fn request_len(&self) -> Option<usize>;

    /// Response size in bytes, when it is fixed (recorded in the report,
    /// and sizes the read buffer).
    fn response_len(&self) -> Option<usize>;

    /// Appends the request of transaction `seq` (per connection, from 0)
    /// to `out`.
    fn push_request(&self, out: &mut Vec<u8>, seq: u64);

    /// Consumes `data`, the next bytes of the response to transaction
    /// `seq` (never empty).
    fn parse(&self, cursor: &mut Self::Cursor, data: &[u8], seq: u64) -> Parsed;

    /// The class of error when the peer closes the connection while this
    /// response is awaited (typically `short_read` when part of it came,
    /// `closed_by_peer` when none did).
    fn on_eof(&self, cursor: &Self::Cursor) -> ErrorClass;
}

/// How a workload uses its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnMode {
    /// Persistent connections, each keeping up to `pipeline` requests in
    /// flight (tcp-rr).
    Persistent {
        /// Requests in flight per connection.
        pipeline: usize,
    },
    /// Connect, request, response, close, in a loop per slot (tcp-crr).
    PerTransaction {
        /// Close with RST (SO_LINGER 0) instead of FIN.
        close_rst: bool,
    },
}

impl ConnMode {
    /// True for a connection per transaction.
    pub fn per_transaction(self) -> bool {
        matches!(self, Self::PerTransaction { .. })
    }

    /// Source addresses to spread connects over when --source-ips is not
    /// given: 16 for a connection per transaction (its TIME_WAIT sockets
    /// would crowd one address's ephemeral ports), 1 otherwise.
    pub fn default_source_ips(self) -> usize {
        if self.per_transaction() { 16 } else { 1 }
    }

    /// The pipeline depth of persistent connections (None otherwise).
    pub fn pipeline(self) -> Option<usize> {
        match self {
            Self::Persistent { pipeline } => Some(pipeline),
            Self::PerTransaction { .. } => None,
        }
    }

    /// How each connection closes, `fin` or `rst`, for a connection per
    /// transaction (None otherwise).
    pub fn close_name(self) -> Option<&'static str> {
        match self {
            Self::PerTransaction { close_rst: true } => Some("rst"),
            Self::PerTransaction { close_rst: false } => Some("fin"),
            Self::Persistent { .. } => None,
        }
    }
}

/// A request/response workload as its file hands it to the driver.
pub struct TcpWorkload<E> {
    /// Its subcommand, also the report's `workload` (`tcp-rr`).
    pub name: &'static str,
    /// How it uses connections.
    pub mode: ConnMode,
    /// Its exchange, or why the command line gives none (a usage error,
    /// reported after the target address is checked).
    pub exchange: anyhow::Result<E>,
}
