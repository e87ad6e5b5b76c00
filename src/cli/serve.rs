//! `sockscope serve` options (clap) and their validation into
//! [`crate::serve::ServeSpec`]: echo, relay and udp-sink.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::values;
use crate::endpoint::Endpoint;
use crate::error;
use crate::serve::{EchoSpec, RelayMode, RelaySpec, ServeSpec, Transport, UdpSinkSpec};

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

/// `sockscope serve echo` options.
#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Address to listen on (IP:PORT; port 0 picks a free port), or a
    /// Unix socket: unix:/path (created, removed on exit; only a stale
    /// socket is replaced) or unix:@abstract-name.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", value_parser = listen_endpoint)]
    pub listen: Endpoint,

    /// Kernel path to serve through (default epoll: every kernel has it,
    /// and it is what most servers use).
    #[arg(long, value_enum, default_value = "epoll")]
    pub transport: Transport,

    /// epoll/uring: event loops, each with its own listener (default: one
    /// per CPU). Not used by threaded.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    /// Request size in bytes: answer every complete request of N bytes
    /// with --resp-size bytes (without both sizes: plain echo).
    #[arg(long, value_name = "N", requires = "resp_size", value_parser = values::message_size)]
    pub req_size: Option<usize>,

    /// Response size in bytes (with --req-size).
    #[arg(long, value_name = "M", requires = "req_size", value_parser = values::message_size)]
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
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = values::positive_secs_up_to_a_day)]
    pub connect_timeout: f64,

    /// Close pairs that carried no data for this long.
    #[arg(long, value_name = "SECS", value_parser = values::positive_secs_up_to_a_day)]
    pub idle_timeout: Option<f64>,

    /// On a clean stop, write the counters as JSON (docs/relay.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
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
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = values::secs_up_to_a_day_or_zero)]
    pub idle_timeout: f64,

    /// On a clean stop, write the per-run reports as JSON (docs/serve.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl ServeCommand {
    /// Validates the options: a `--json` that could never be written and
    /// combinations clap cannot express are usage errors, found before
    /// anything is served; relay's upstream is resolved here.
    pub fn into_spec(self) -> Result<ServeSpec> {
        Ok(match self {
            ServeCommand::Echo(a) => {
                check_json(a.json.as_deref())?;
                if a.threads.is_some() && a.transport == Transport::Threaded {
                    return Err(error::usage(
                        "--threads applies to --transport epoll and uring \
                         (threaded runs one thread per connection)",
                    ));
                }
                ServeSpec::Echo(EchoSpec {
                    listen: a.listen,
                    transport: a.transport,
                    threads: a.threads,
                    req_size: a.req_size,
                    resp_size: a.resp_size,
                    work_us: a.work_us,
                    max_conns: a.max_conns,
                    json: a.json,
                })
            }
            ServeCommand::Relay(a) => {
                check_json(a.json.as_deref())?;
                ServeSpec::Relay(RelaySpec {
                    upstream: values::resolve(&a.upstream)?,
                    listen: a.listen,
                    mode: a.mode,
                    strict: a.strict,
                    threads: a.threads,
                    max_conns: a.max_conns,
                    connect_timeout: a.connect_timeout,
                    idle_timeout: a.idle_timeout,
                    json: a.json,
                })
            }
            ServeCommand::UdpSink(a) => {
                check_json(a.json.as_deref())?;
                ServeSpec::UdpSink(UdpSinkSpec {
                    listen: a.listen,
                    rcvbuf: a.rcvbuf,
                    expect: a.expect,
                    idle_timeout: a.idle_timeout,
                    json: a.json,
                })
            }
        })
    }
}

/// `--listen` of serve echo: an IP address or a Unix socket.
fn listen_endpoint(s: &str) -> Result<Endpoint, String> {
    Endpoint::parse_listen(s).map_err(|e| e.to_string())
}

/// Fails before serving when `--json` could never be written (a usage
/// error), instead of discovering it after the run.
fn check_json(json: Option<&std::path::Path>) -> Result<()> {
    match json {
        Some(path) => crate::output::check(path, "--json"),
        None => Ok(()),
    }
}
