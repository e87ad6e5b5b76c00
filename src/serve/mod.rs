//! `sockscope serve`: reference targets to compare kernel paths.
//!
//! * [`echo`]: a TCP echo / fixed-size request-response server with three
//!   transports (thread per connection, epoll event loops, io_uring rings)
//!   sharing one framing state machine, so a difference between them is the
//!   kernel path and not the protocol code.
//! * [`udp_sink`]: a UDP receiver that accounts sequenced datagrams
//!   (received, gaps, reordering, duplicates, jitter, one-way latency) and
//!   answers the load generator's FIN with a REPORT.
//!
//! Both print `listening on IP:PORT` (echo on a Unix socket: `listening on
//! unix:/path`) on stdout once ready (everything else
//! goes to stderr; with `--json -` the line goes to stderr too), stop
//! cleanly on SIGTERM/SIGINT and write `--json` (through [`crate::output`],
//! checked before serving) only when they ran to a clean stop. People's documentation:
//! docs/serve.md.
//!
//! Each server runs from a validated spec ([`ServeSpec`]); the options and
//! their checks are in `crate::cli::serve`.

pub mod accept;
pub mod echo;
pub mod listen;
pub mod relay;
pub mod signals;
pub mod udp_sink;
pub mod unix_listen;
pub mod workers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::ValueEnum;

use crate::endpoint::Endpoint;

/// Largest `--req-size` / `--resp-size`: a response is built whole in the
/// connection's output buffer, so this also bounds per-connection memory.
pub const MAX_MESSAGE: usize = 16 << 20;

/// How `serve echo` moves bytes between sockets and the framing code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// One thread per connection, blocking reads and writes.
    Threaded,
    /// N event loops, each with its own SO_REUSEPORT listener.
    Epoll,
    /// N io_uring rings (accept/recv/send), each with its own listener.
    Uring,
}

impl Transport {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Threaded => "threaded",
            Transport::Epoll => "epoll",
            Transport::Uring => "uring",
        }
    }
}

/// How `serve relay` moves bytes between a client and its upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RelayMode {
    /// read/write through a buffer in this process.
    Userspace,
    /// splice(2) through a pipe: no copy into this process.
    Splice,
    /// A BPF sockmap: the kernel redirects each socket's bytes to its peer.
    Sockmap,
}

/// One serve command, validated (built by the CLI layer, `crate::cli::serve`).
#[derive(Clone, Debug)]
pub enum ServeSpec {
    /// `serve echo`.
    Echo(EchoSpec),
    /// `serve relay`.
    Relay(RelaySpec),
    /// `serve udp-sink`.
    UdpSink(UdpSinkSpec),
}

/// What `serve echo` serves (docs/serve.md).
#[derive(Clone, Debug)]
pub struct EchoSpec {
    /// Address to listen on (port 0: a free port), or a Unix socket.
    pub listen: Endpoint,
    /// Kernel path to serve through.
    pub transport: Transport,
    /// epoll/uring: event loops (None: one per CPU); never set for threaded.
    pub threads: Option<u32>,
    /// Request size: with `resp_size`, answer every request of this many
    /// bytes (None: plain echo).
    pub req_size: Option<usize>,
    /// Response size (with `req_size`).
    pub resp_size: Option<usize>,
    /// CPU to burn per request (or per read in plain echo), microseconds.
    pub work_us: u64,
    /// Connections beyond this many at once are closed at once.
    pub max_conns: Option<u64>,
    /// Write the counters here on a clean stop (checked writable).
    pub json: Option<PathBuf>,
}

/// What `serve relay` relays (docs/relay.md).
#[derive(Clone, Debug)]
pub struct RelaySpec {
    /// Where every client connection is relayed to (resolved).
    pub upstream: SocketAddr,
    /// Address to listen on (port 0: a free port).
    pub listen: SocketAddr,
    /// Data path.
    pub mode: RelayMode,
    /// Sockmap only: fail instead of falling back to userspace.
    pub strict: bool,
    /// Event loops (None: one per CPU).
    pub threads: Option<u32>,
    /// At most this many pairs at once.
    pub max_conns: Option<u64>,
    /// Upstream connect timeout, seconds.
    pub connect_timeout: f64,
    /// Close pairs idle this long, seconds.
    pub idle_timeout: Option<f64>,
    /// Write the counters here on a clean stop (checked writable).
    pub json: Option<PathBuf>,
}

/// What `serve udp-sink` accounts (docs/serve.md).
#[derive(Clone, Debug)]
pub struct UdpSinkSpec {
    /// Address to listen on (port 0: a free port).
    pub listen: SocketAddr,
    /// SO_RCVBUF to ask for.
    pub rcvbuf: Option<u64>,
    /// Stop once this many distinct DATA datagrams of the first run arrived.
    pub expect: Option<u64>,
    /// Stop after this many seconds without a datagram (0: never).
    pub idle_timeout: f64,
    /// Write the per-run reports here on a clean stop (checked writable).
    pub json: Option<PathBuf>,
}

/// Prints the ready line on stdout and flushes it: the one line a launcher
/// waits for. Nothing else sockscope serve prints goes to stdout. When
/// `--json` goes to stdout (`--json -`), the line goes to stderr instead,
/// so that stdout is the JSON alone.
pub(crate) fn announce(addr: &Endpoint, json: Option<&Path>) {
    use std::io::Write;
    let line = format!("listening on {addr}\n");
    // A launcher that closed our stdout no longer waits for the line;
    // serving on is still right.
    if json.is_some_and(crate::output::is_stdout) {
        let _ = std::io::stderr().write_all(line.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// The caveat every TCP server report carries.
pub(crate) const LOOPBACK_NOTE: &str =
    "loopback only: figures include both ends' kernel work on one machine";

/// The caveat of a server on a Unix socket.
pub(crate) const UNIX_NOTE: &str = "Unix-domain socket: figures include both ends' kernel work \
     on one machine, without the TCP/IP stack";

/// Ends a server's clean run, the same for every server: its summary on
/// stderr (unless quiet), its report as JSON to `--json`. Returns the exit
/// status.
pub(crate) fn finish<R: serde::Serialize>(
    rep: &R,
    summary: impl FnOnce(&R) -> String,
    json: Option<&Path>,
    quiet: bool,
) -> Result<u8> {
    if !quiet {
        // A failed stderr loses the summary, not the run (--json).
        let _ = std::io::Write::write_all(&mut std::io::stderr(), summary(rep).as_bytes());
    }
    if let Some(path) = json {
        crate::report::write_json(path, rep)?;
    }
    Ok(0)
}

/// Process CPU time so far (getrusage RUSAGE_SELF): (user, system) seconds.
pub(crate) fn cpu_times() -> (f64, f64) {
    let (user, system) = crate::procfs::rusage_ns(libc::RUSAGE_SELF);
    (user as f64 / 1e9, system as f64 / 1e9)
}
