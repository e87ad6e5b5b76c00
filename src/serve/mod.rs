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
//! Both print `listening on IP:PORT` on stdout once ready (everything else
//! goes to stderr; with `--json -` the line goes to stderr too), stop
//! cleanly on SIGTERM/SIGINT and write `--json` (through [`crate::output`],
//! checked before serving) only when they ran to a clean stop. People's documentation:
//! docs/serve.md.

pub mod accept;
pub mod echo;
pub mod listen;
pub mod relay;
pub mod signals;
pub mod udp_sink;
pub mod workers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};

use crate::error;

/// Largest `--req-size` / `--resp-size`: a response is built whole in the
/// connection's output buffer, so this also bounds per-connection memory.
pub const MAX_MESSAGE: usize = 16 << 20;

/// `sockscope serve` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// TCP echo / request-response server (threaded, epoll or io_uring).
    #[command(after_help = "Examples:\n  sockscope serve echo --transport epoll\n  \
sockscope serve echo --transport uring --req-size 100 --resp-size 1000 --json echo.json\n  \
sockscope serve echo --transport threaded --listen [::1]:7000 --max-conns 1000")]
    Echo(EchoArgs),
    /// TCP relay to an upstream, through userspace, splice or a BPF
    /// sockmap (the kernel redirects bytes between the two sockets).
    #[command(
        after_help = "Examples:\n  sockscope serve relay --upstream 127.0.0.1:8080 --mode splice\n  \
sockscope serve relay --upstream 127.0.0.1:8080 --mode sockmap --strict --json relay.json"
    )]
    Relay(RelayArgs),
    /// UDP sink that accounts sequenced datagrams and their loss.
    #[command(after_help = "Examples:\n  sockscope serve udp-sink\n  \
sockscope serve udp-sink --rcvbuf 65536 --expect 100000 --json sink.json")]
    UdpSink(UdpSinkArgs),
}

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

/// `sockscope serve echo` options.
#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Address to listen on (IP:PORT; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Kernel path to serve through.
    #[arg(long, value_enum)]
    pub transport: Transport,

    /// epoll/uring: event loops, each with its own listener (default: one
    /// per CPU). Not used by threaded.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    /// Request size in bytes: answer every complete request of N bytes
    /// with --resp-size bytes (without both sizes: plain echo).
    #[arg(long, value_name = "N", requires = "resp_size", value_parser = parse_size)]
    pub req_size: Option<usize>,

    /// Response size in bytes (with --req-size).
    #[arg(long, value_name = "M", requires = "req_size", value_parser = parse_size)]
    pub resp_size: Option<usize>,

    /// Burn this much CPU (a spin on the clock, not a sleep) per request,
    /// or per read in plain echo mode, to model application work.
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub work_us: u64,

    /// Connections beyond N at once are accepted and closed at once
    /// (counted as rejected).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_conns: Option<u64>,

    /// On a clean stop, write the counters as JSON (docs/serve.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
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

/// `sockscope serve relay` options.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Where every client connection is relayed to (IP:PORT or HOST:PORT).
    #[arg(long, value_name = "ADDR")]
    pub upstream: String,

    /// Address to listen on (IP:PORT; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Data path.
    #[arg(long, value_enum)]
    pub mode: RelayMode,

    /// With --mode sockmap: fail if the kernel path cannot be used, instead
    /// of falling back to userspace.
    #[arg(long)]
    pub strict: bool,

    /// Event loops, each with its own listener (default: one per CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    /// At most N pairs at once; more are accepted and closed at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_conns: Option<u64>,

    /// Give up an upstream connect after this long (the client is closed).
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_positive)]
    pub connect_timeout: f64,

    /// Close pairs that carried no data for this long.
    #[arg(long, value_name = "SECS", value_parser = parse_positive)]
    pub idle_timeout: Option<f64>,

    /// On a clean stop, write the counters as JSON (docs/relay.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_positive(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86400.0) {
        return Err(format!("`{s}`: must be > 0 and at most 86400 seconds"));
    }
    Ok(v)
}

/// `sockscope serve udp-sink` options.
#[derive(Debug, Args)]
pub struct UdpSinkArgs {
    /// Address to listen on (IP:PORT; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Ask for this receive buffer (SO_RCVBUF, as an unprivileged program
    /// would: the kernel doubles it and caps it at net.core.rmem_max).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..=(i32::MAX as u64 / 2)))]
    pub rcvbuf: Option<u64>,

    /// Stop once N distinct DATA datagrams of the first run arrived.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub expect: Option<u64>,

    /// Stop after this many seconds without a datagram, counted from the
    /// first datagram (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_idle)]
    pub idle_timeout: f64,

    /// On a clean stop, write the per-run reports as JSON (docs/serve.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let v: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes"))?;
    if v == 0 || v > MAX_MESSAGE {
        return Err(format!("`{s}`: must be between 1 and {MAX_MESSAGE} bytes"));
    }
    Ok(v)
}

fn parse_idle(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && (0.0..=86400.0).contains(&v)) {
        return Err(format!("`{s}`: must be between 0 and 86400 seconds"));
    }
    Ok(v)
}

/// Runs a serve subcommand; returns the exit status.
pub fn run(cmd: ServeCommand, quiet: bool) -> Result<u8> {
    // A peer that vanishes must cost one connection, not the process; sends
    // also pass MSG_NOSIGNAL, this covers any write that does not.
    // SAFETY: installing SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    match cmd {
        ServeCommand::Echo(args) => {
            check_json(args.json.as_deref())?;
            if args.threads.is_some() && args.transport == Transport::Threaded {
                return Err(error::usage(
                    "--threads applies to --transport epoll and uring \
                     (threaded runs one thread per connection)",
                ));
            }
            echo::run(&args, quiet)
        }
        ServeCommand::Relay(args) => {
            check_json(args.json.as_deref())?;
            relay::run(&args, quiet)
        }
        ServeCommand::UdpSink(args) => {
            check_json(args.json.as_deref())?;
            udp_sink::run(&args, quiet)
        }
    }
}

/// Fails before serving when `--json` could never be written (a usage
/// error), instead of discovering it after the run.
fn check_json(json: Option<&Path>) -> Result<()> {
    match json {
        Some(path) => crate::output::check(path, "--json"),
        None => Ok(()),
    }
}

/// Prints the ready line on stdout and flushes it: the one line a launcher
/// waits for. Nothing else sockscope serve prints goes to stdout. When
/// `--json` goes to stdout (`--json -`), the line goes to stderr instead,
/// so that stdout is the JSON alone.
pub(crate) fn announce(addr: SocketAddr, json: Option<&Path>) {
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
        eprint!("{}", summary(rep));
    }
    if let Some(path) = json {
        crate::report::write_json(path, rep)?;
    }
    Ok(0)
}

/// Process CPU time so far (getrusage RUSAGE_SELF): (user, system) seconds.
pub(crate) fn cpu_times() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (s(u.user_time()), s(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}
