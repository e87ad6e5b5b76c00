//! What a request/response workload plugs into the TCP driver, neper's way
//! (a workload is a small table of callbacks over one engine):
//!
//! - its [`Exchange`]: the request of transaction `seq`, how to recognise
//!   a whole response as bytes arrive, and what counts as an error;
//! - its on-connect step, when the protocol opens with one (h2load's
//!   `on_connect`): bytes written on every new connection and an answer
//!   read whole before the first request (redis AUTH/HELLO);
//! - its [`ConnMode`]: persistent connections (tcp-rr) or one connection
//!   per transaction (tcp-crr);
//! - its name, which is also the report's `workload`;
//! - whether it speaks TLS, and how ([`TlsSpec`]: a plain value; `tls`
//!   turns it into the run's client).
//!
//! Everything else (threads, epoll, buffers, connects and reconnects,
//! timeouts, open-loop pacing, tallies, intervals, the report) belongs to
//! the driver (`driver`, `persistent`, `per_txn`, `engine`), so a workload
//! file stays small: see `tcp_rr.rs`, `tcp_crr.rs` and the exchange they
//! share, `raw.rs`. This module imports nothing else from `load/`.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;

/// Error classes reported by the load generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorClass {
    /// Connection refused (nothing listening).
    Refused,
    /// Connect or response did not come within --timeout.
    TimedOut,
    /// A datagram request (udp-rr) got no reply within --timeout: the
    /// request is counted lost and its socket moves on.
    Lost,
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
    /// A whole, well-formed response whose status says the request failed
    /// (an HTTP status outside --ok-status); the connection goes on.
    Status(u16),
    /// A whole response that is the server's error reply (redis `-ERR`,
    /// memcached `SERVER_ERROR`); the connection goes on.
    ServerError,
    /// The server refused the request as malformed (memcached `ERROR`,
    /// `CLIENT_ERROR`); the connection goes on.
    ClientError,
    /// Bytes that are not the protocol (garbage, a broken frame): the
    /// connection cannot be trusted further and is closed.
    Protocol,
    /// The TLS handshake or record layer failed.
    Tls,
    /// The server refused the workload's on-connect step (redis: a wrong
    /// `--auth` password, an unknown `--user`, a HELLO it does not speak):
    /// the connection is closed.
    OnConnect,
    /// HTTP/2: the server reset the stream (RST_STREAM) with this error
    /// code; the connection goes on.
    RstStream(u32),
    /// HTTP/2: the server sent GOAWAY with this error code, and the
    /// request was cut by it (a stream it did not finish); the connection
    /// is replaced.
    GoAway(u32),
    /// gRPC: a whole response whose grpc-status is not OK (the code).
    GrpcStatus(u8),
    /// gRPC with --protoset: a worker's first OK response was not one
    /// uncompressed message of the method's output type.
    GrpcBadResponse,
    /// gRPC: an OK answer whose body breaks gRPC's message framing (a
    /// unary call's answer is one whole uncompressed message); the
    /// connection goes on.
    GrpcFraming(GrpcFault),
    /// The socket at the address is of another type than the load's
    /// (EPROTOTYPE: a stream load to a datagram Unix socket, or the
    /// reverse).
    SocketType,
    /// Any other socket error.
    Other,
}

impl ErrorClass {
    /// Stable name used in reports.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Refused => "ECONNREFUSED",
            Self::TimedOut => "ETIMEDOUT",
            Self::Lost => "lost",
            Self::AddrNotAvail => "EADDRNOTAVAIL",
            Self::Reset => "ECONNRESET",
            Self::ShortRead => "short_read",
            Self::Closed => "closed_by_peer",
            Self::Mismatch => "response_mismatch",
            Self::Unexpected => "unexpected_bytes",
            Self::Status(code) => return Cow::Owned(format!("status_{code}")),
            Self::ServerError => "server_error",
            Self::ClientError => "client_error",
            Self::Protocol => "protocol_error",
            Self::Tls => "tls_error",
            Self::OnConnect => "on_connect_refused",
            Self::RstStream(code) => return Cow::Owned(format!("rst_stream:{}", h2_code(code))),
            Self::GoAway(code) => return Cow::Owned(format!("goaway:{}", h2_code(code))),
            Self::GrpcStatus(code) => {
                return Cow::Owned(format!("grpc_status:{}", grpc_status_name(code)));
            }
            Self::GrpcBadResponse => "grpc_bad_response",
            Self::GrpcFraming(f) => f.class_name(),
            Self::SocketType => "wrong_socket_type",
            Self::Other => "other",
        })
    }

    /// True for the classes that judge a reply that came (it mismatched,
    /// was malformed, said the request failed), as against the classes of
    /// a reply that never came or a socket that failed.
    pub fn judges_a_reply(self) -> bool {
        matches!(
            self,
            Self::Mismatch
                | Self::Unexpected
                | Self::Status(_)
                | Self::ServerError
                | Self::ClientError
                | Self::Protocol
                | Self::OnConnect
                | Self::RstStream(_)
                | Self::GrpcStatus(_)
                | Self::GrpcBadResponse
                | Self::GrpcFraming(_)
        )
    }

    /// Classifies a socket error.
    pub fn of(err: &io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::ECONNREFUSED) => Self::Refused,
            Some(libc::ETIMEDOUT) => Self::TimedOut,
            Some(libc::EADDRNOTAVAIL) => Self::AddrNotAvail,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => Self::Reset,
            Some(libc::EPROTOTYPE) => Self::SocketType,
            _ => Self::Other,
        }
    }
}

/// How a gRPC answer's body breaks the message framing of a unary call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GrpcFault {
    /// The body ended inside a message (its length prefix says more
    /// bytes than came, or the prefix itself is cut).
    Truncated,
    /// A message flagged compressed, and no compression was negotiated
    /// (we offer none).
    Compressed,
    /// A flag byte other than 0 or 1.
    BadFlags,
    /// No message at all in an OK answer.
    NoMessage,
    /// More than one message for a unary call.
    ExtraMessages,
}

impl GrpcFault {
    /// The error class's name: a protocol error, and which.
    pub fn class_name(self) -> &'static str {
        match self {
            Self::Truncated => "protocol_error:grpc_message_truncated",
            Self::Compressed => "protocol_error:grpc_compressed_unnegotiated",
            Self::BadFlags => "protocol_error:grpc_bad_flags",
            Self::NoMessage => "protocol_error:grpc_no_message",
            Self::ExtraMessages => "protocol_error:grpc_extra_messages",
        }
    }
}

/// The name of an HTTP/2 error code (RFC 9113 section 7), or its number in
/// hex when it has none.
pub fn h2_code(code: u32) -> Cow<'static, str> {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(format!("0x{code:x}")),
    }
}

/// The name of a gRPC status code (grpc/doc/statuscodes.md), or its
/// number when it has none.
pub fn grpc_status_name(code: u8) -> Cow<'static, str> {
    match crate::report::commands::GRPC_CODE_NAMES.get(code as usize) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(code.to_string()),
    }
}

/// What a whole response meant, beyond its length: what the report counts
/// per response (HTTP status, command, hit or miss), whether the request
/// failed although the response is well-formed, and whether the server
/// closes the connection after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Counted per status in the report (the HTTP status code).
    pub status: Option<u16>,
    /// The operation answered, an index into [`Exchange::ops`] (0 when the
    /// workload names none).
    pub op: u16,
    /// A lookup's result: `Some(true)` a hit, `Some(false)` a miss.
    pub hit: Option<bool>,
    /// The request failed: counted as an error of this class instead of a
    /// transaction, and the connection goes on (a 404, a `-ERR`).
    pub error: Option<ErrorClass>,
    /// The server closes the connection after this response (HTTP
    /// `Connection: close`): the driver reconnects and counts it in
    /// `reconnects`; requests pipelined behind it are sent again.
    pub close: bool,
}

impl Outcome {
    /// A plain successful response.
    pub const OK: Self = Self {
        status: None,
        op: 0,
        hit: None,
        error: None,
        close: false,
    };
}

/// Which request a reply datagram answers, as [`Exchange::reply_id`]
/// reads it (udp-rr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyId {
    /// The protocol carries no id: the reply answers the one request in
    /// flight on its socket.
    Any,
    /// The reply names the request whose id is `seq as u16` (memcached's
    /// UDP request id; a DNS id as the exchange maps it back from the
    /// unpredictable one it sent).
    Id(u16),
    /// Too short or malformed to carry an id: not a reply to anything.
    Garbage,
}

/// What [`Exchange::parse`] made of the response bytes it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Every byte was consumed and the response is not whole yet.
    Partial,
    /// The response is whole after this many of the bytes, and meant
    /// this; the rest (if any) belongs to the next response (pipelining)
    /// or, on a connection per transaction, is an error
    /// (`unexpected_bytes`).
    Complete(usize, Outcome),
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

    /// When the peer's close ends the response awaited (to request `seq`)
    /// instead of cutting it short, what the whole response meant: an HTTP
    /// body delimited by the end of the connection. The driver then counts
    /// it and reopens the connection as after [`Outcome::close`]. None (the
    /// default): the close is an error of class [`on_eof`](Exchange::on_eof).
    fn complete_at_eof(&self, _cursor: &Self::Cursor, _seq: u64) -> Option<Outcome> {
        None
    }

    /// Names of the operations [`Outcome::op`] indexes (`GET`, `SET`);
    /// empty when the workload tells none apart.
    fn ops(&self) -> &[String] {
        &[]
    }

    /// Datagram workloads (udp-rr): which request the reply `datagram`
    /// answers, as `seq as u16` of that request (whatever id
    /// [`push_request`](Exchange::push_request) wrote for it); [`parse`](Exchange::parse)
    /// is then called with each whole datagram of the reply (several when
    /// the protocol splits a reply, as memcached does) and the matched
    /// request's `seq`, with a cursor of that request's own.
    fn reply_id(&self, _datagram: &[u8]) -> ReplyId {
        ReplyId::Any
    }

    /// True when the report should carry per-response counts
    /// (`responses`: statuses, commands, hits, reconnects): the protocol
    /// workloads.
    fn counts_responses(&self) -> bool {
        false
    }

    /// The class of bytes that come while no request is outstanding on a
    /// persistent connection (they answer nothing, and the connection is
    /// closed so they never answer a later request): `unexpected_bytes`
    /// unless the protocol calls them a protocol error (HTTP: a response
    /// cannot come before its request). A protocol that names a class
    /// here (Some) also has each connection checked for such bytes once
    /// it is up, before its first request goes out.
    fn unsolicited(&self) -> Option<ErrorClass> {
        None
    }

    /// The on-connect step (h2load's `on_connect`): bytes written on every
    /// new persistent connection, after its TLS handshake and before its
    /// first request, whose answer ([`parse_on_connect`]) must come whole
    /// before requests go out: redis `AUTH`/`HELLO`, PostgreSQL's startup
    /// message. None (the default): the connection takes requests at once.
    /// The step is no transaction: not timed, not counted.
    ///
    /// [`parse_on_connect`]: Exchange::parse_on_connect
    fn on_connect(&self) -> Option<&[u8]> {
        None
    }

    /// Consumes `data`, the next bytes of the answer to the on-connect
    /// step, with the connection's cursor (reset to its default before the
    /// first request). `Complete(n, outcome)` ends the step; an
    /// `outcome.error` means the server refused it, and the connection
    /// fails with [`ErrorClass::OnConnect`]. Bytes after the `n` answer
    /// nothing (no request went out yet) and fail it as unsolicited.
    fn parse_on_connect(&self, _cursor: &mut Self::Cursor, _data: &[u8]) -> Parsed {
        Parsed::Error(ErrorClass::Protocol)
    }

    /// How the report names a response status (`Outcome::status`): the
    /// number (HTTP) unless the protocol has names for its codes (DNS
    /// RCODEs: `NOERROR`, `NXDOMAIN`).
    fn status_name(&self, status: u16) -> Cow<'static, str> {
        Cow::Owned(status.to_string())
    }
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
    /// Connected UDP sockets (udp-rr), each keeping up to `pipeline`
    /// requests in flight, matched to replies by
    /// [`Exchange::reply_id`]; a request not answered within --timeout is
    /// lost and its socket moves on.
    Datagram {
        /// Requests in flight per socket.
        pipeline: usize,
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

    /// The pipeline depth of persistent connections and datagram sockets
    /// (None otherwise).
    pub fn pipeline(self) -> Option<usize> {
        match self {
            Self::Persistent { pipeline } | Self::Datagram { pipeline } => Some(pipeline),
            Self::PerTransaction { .. } => None,
        }
    }

    /// True for datagram sockets (udp-rr).
    pub fn datagram(self) -> bool {
        matches!(self, Self::Datagram { .. })
    }

    /// How each connection closes, `fin` or `rst`, for a connection per
    /// transaction (None otherwise).
    pub fn close_name(self) -> Option<&'static str> {
        match self {
            Self::PerTransaction { close_rst: true } => Some("rst"),
            Self::PerTransaction { close_rst: false } => Some("fin"),
            Self::Persistent { .. } | Self::Datagram { .. } => None,
        }
    }
}

/// A request/response workload as its file hands it to the driver.
pub struct TcpWorkload<E> {
    /// Its subcommand, also the report's `workload` (`tcp-rr`).
    pub name: &'static str,
    /// Where to connect: IP:PORT, [IPv6]:PORT or HOST:PORT (for http, the
    /// URL's authority).
    pub addr: String,
    /// The report's `target` when it is not `addr` (the URL for http).
    pub target: Option<String>,
    /// Speak TLS over each connection (https), and how.
    pub tls: Option<TlsSpec>,
    /// What the workload records of its own options in the report's
    /// `config` (`request`, `expect`, `verify`, `workload_options`); the
    /// driver fills in the rest.
    pub config: crate::report::load::LoadConfig,
    /// How it uses connections.
    pub mode: ConnMode,
    /// Its exchange, or why the command line gives none (a usage error,
    /// reported after the target address is checked).
    pub exchange: anyhow::Result<E>,
}

/// How a workload wants TLS spoken on each connection (https). A plain
/// value the workload fills in; `tls` checks it and builds the run's client
/// from it (`TlsSpec::check`, `TlsSpec::client`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSpec {
    /// The name sent as SNI and checked against the certificate.
    pub server_name: String,
    /// Accept any certificate (self-signed test servers): --insecure.
    pub insecure: bool,
    /// Trust the certificates in this PEM file as well as the system's.
    pub ca_file: Option<PathBuf>,
}
