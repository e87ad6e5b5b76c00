//! `sockscope load`: a load generator meant never to be the bottleneck.
//!
//! A request/response workload is a thin file (`tcp_rr`, `tcp_crr`) that
//! names itself, picks how it uses connections and supplies its exchange
//! (`workload`: what to send, how to recognise a whole response, what counts
//! as an error; `raw` is the exchange both share). `Load::of` is the
//! registry: one line per workload. Everything else is the TCP driver's:
//! one epoll loop per worker thread (`driver`) drives its share of the
//! connections, persistent (`persistent`) or one per transaction
//! (`per_txn`), over `socket`; workers keep their own counts and lossless
//! histograms (`tally`), merged at the end (`engine`); open-loop rates are
//! paced per worker (`schedule`) with latency measured from the intended
//! send time. `udp` is its own engine: sequenced datagrams and loss
//! accounting with `serve udp-sink`.
//!
//! Imports point one way: `workload` <- `raw`, `tally` <- `plan` <-
//! `driver` <- `persistent`/`per_txn` <- `engine` <- this module; a
//! workload file imports only `workload`, `raw` and its options.

pub mod clock;
pub mod driver;
pub mod engine;
pub mod per_txn;
pub mod persistent;
pub mod plan;
pub mod raw;
pub mod schedule;
pub mod socket;
pub mod tally;
pub mod tcp_crr;
pub mod tcp_rr;
pub mod udp;
pub mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};

pub use self::driver::ConnTally;
use self::plan::{Stop, TcpPlan};
use self::workload::{Exchange, TcpWorkload};
use crate::error;
use crate::report::{self, load::LoadConfig, load_text};
use crate::signals::StopFlag;

/// `sockscope load` subcommands.
#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// TCP request/response over persistent connections (closed loop, or
    /// open loop with --rate).
    TcpRr(RrArgs),
    /// TCP connect, request, response, close, in a loop per slot.
    TcpCrr(CrrArgs),
    /// Sequenced UDP datagrams, with loss accounted by `serve udp-sink`.
    Udp(UdpArgs),
}

/// Options shared by tcp-rr and tcp-crr.
#[derive(Debug, Args)]
pub struct TcpArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    #[arg(short = 'c', long = "connections", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Worker threads, one epoll loop each (default: min(connections, CPUs)).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Measure for this long (default 10 s unless -n).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = parse_positive_secs, conflicts_with = "count")]
    pub duration: Option<f64>,
    /// Measure this many transactions instead of a duration.
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Run this long first and leave it out of the results.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_secs)]
    pub warmup: f64,
    /// Open loop: this many transactions per second in total; latency is
    /// measured from the intended send time.
    #[arg(long, value_name = "PER_SEC", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Request size in bytes.
    #[arg(long = "req", value_name = "BYTES", default_value_t = 1, conflicts_with = "request", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub req: u32,
    /// Response size in bytes (default: the request size).
    #[arg(long = "resp", value_name = "BYTES", conflicts_with = "request", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub resp: Option<u32>,
    /// Send this string as the request instead (escapes: \r \n \t \\ \xHH),
    /// e.g. 'PING\r\n' for redis.
    #[arg(long, value_name = "STRING", requires = "expect")]
    pub request: Option<String>,
    /// With --request: the response, as a byte count or as the exact
    /// string (escapes as in --request), e.g. '+PONG\r\n'.
    #[arg(long, value_name = "BYTES|STRING", requires = "request")]
    pub expect: Option<String>,
    /// Check every response byte against the request it answers.
    #[arg(long)]
    pub verify: bool,
    /// Connect and response timeout.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_positive_secs)]
    pub timeout: f64,
    /// Spread connections over this many source addresses 127.0.0.2...
    /// (IPv4 loopback targets only; default: 16 for tcp-crr, 1 for tcp-rr).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub source_ips: Option<u32>,
    /// tcp-rr: open at most this many connections per second (so a server
    /// whose accept loop is slow is not handed a full listen backlog).
    #[arg(long, value_name = "PER_SEC", value_parser = parse_rate)]
    pub connect_rate: Option<f64>,
    /// Errors tolerated before the run counts as failed (exit 1).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Write the full result as JSON (schema: docs/load-json.md); - for
    /// stdout (the summary then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `load tcp-rr` options.
#[derive(Debug, Args)]
pub struct RrArgs {
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// Requests in flight per connection.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
}

/// How tcp-crr closes each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CloseMode {
    /// Orderly close (FIN); the client keeps the TIME_WAIT.
    Fin,
    /// Abortive close (SO_LINGER 0, RST): no TIME_WAIT.
    Rst,
}

/// `load tcp-crr` options.
#[derive(Debug, Args)]
pub struct CrrArgs {
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// How to close each connection.
    #[arg(long, value_enum, default_value_t = CloseMode::Fin)]
    pub close: CloseMode,
}

/// `load udp` options.
#[derive(Debug, Args)]
pub struct UdpArgs {
    /// The sink: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Send this many datagrams back to back.
    #[arg(long, value_name = "N", conflicts_with = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    pub burst: Option<u64>,
    /// Send this many datagrams per second.
    #[arg(long, value_name = "PPS", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// With --rate: send for this long (default 10 s unless -n).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = parse_positive_secs, conflicts_with_all = ["count", "burst"])]
    pub duration: Option<f64>,
    /// With --rate: send this many.
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "burst")]
    pub count: Option<u64>,
    /// Datagram size in bytes (the 32-byte header included).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = clap::value_parser!(u32).range(32..=65507))]
    pub size: u32,
    /// SO_SNDBUF to request (the granted size is reported).
    #[arg(long, value_name = "BYTES")]
    pub sndbuf: Option<usize>,
    /// How long to wait for the sink's report after the last datagram.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_positive_secs)]
    pub fin_timeout: f64,
    /// Send errors tolerated before the run counts as failed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Write the full result as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && (0.0..=86400.0 * 365.0).contains(&v)) {
        return Err(format!("`{s}`: must be between 0 and a year"));
    }
    Ok(v)
}

fn parse_positive_secs(s: &str) -> Result<f64, String> {
    let v = parse_secs(s)?;
    if v <= 0.0 {
        return Err(format!("`{s}`: must be > 0"));
    }
    Ok(v)
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a rate"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1e9) {
        return Err(format!("`{s}`: the rate must be > 0 and <= 1e9 per second"));
    }
    Ok(v)
}

/// Resolves ADDR; a malformed or unresolvable address is a usage error.
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    match addr.to_socket_addrs() {
        Ok(mut it) => it
            .next()
            .ok_or_else(|| error::usage(format!("`{addr}` resolves to no address"))),
        Err(e) => Err(error::usage(format!(
            "`{addr}` is not an address (IP:PORT, [IPv6]:PORT or HOST:PORT): {e}"
        ))),
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A finished load run: the report and, when the run failed, why.
pub struct LoadOutcome {
    /// What was measured.
    pub report: report::load::LoadReport,
    /// Why the run counts as failed (None: success).
    pub failure: Option<String>,
    /// tcp-rr: every connection's local address and the responses it
    /// completed (empty for the other workloads).
    pub connections: Vec<ConnTally>,
}

/// A load command, by the engine that runs it.
enum Load {
    /// A request/response workload over TCP and the shared TCP options.
    Tcp(Box<dyn RunTcp>, TcpArgs),
    /// Sequenced UDP datagrams.
    Udp(UdpArgs),
}

impl Load {
    /// The registry of workloads: which engine runs each subcommand, and
    /// with what. A request/response workload is one line here (and its
    /// file, and its subcommand in [`LoadCommand`]).
    fn of(cmd: LoadCommand) -> Self {
        match cmd {
            LoadCommand::TcpRr(a) => Self::tcp(tcp_rr::workload(&a), a.tcp),
            LoadCommand::TcpCrr(a) => Self::tcp(tcp_crr::workload(&a), a.tcp),
            LoadCommand::Udp(a) => Self::Udp(a),
        }
    }

    fn tcp<E: Exchange + 'static>(w: TcpWorkload<E>, a: TcpArgs) -> Self {
        Self::Tcp(Box::new(w), a)
    }

    /// Where --json goes, if anywhere.
    fn json(&self) -> Option<&Path> {
        match self {
            Self::Tcp(_, a) => a.json.as_deref(),
            Self::Udp(a) => a.json.as_deref(),
        }
    }

    fn execute(self, quiet: bool, abort: Option<Arc<StopFlag>>) -> Result<LoadOutcome> {
        match self {
            Self::Tcp(w, a) => w.run(a, quiet, abort),
            Self::Udp(a) => run_udp(a, quiet),
        }
    }
}

/// A TCP workload whose exchange type is known only inside: the one
/// dynamic call per run that lets the driver be compiled for each
/// exchange (no dynamic dispatch on the hot path).
trait RunTcp {
    fn run(
        self: Box<Self>,
        a: TcpArgs,
        quiet: bool,
        abort: Option<Arc<StopFlag>>,
    ) -> Result<LoadOutcome>;
}

impl<E: Exchange> RunTcp for TcpWorkload<E> {
    fn run(
        self: Box<Self>,
        a: TcpArgs,
        quiet: bool,
        abort: Option<Arc<StopFlag>>,
    ) -> Result<LoadOutcome> {
        run_tcp(*self, a, quiet, abort)
    }
}

/// Runs a load subcommand; returns the exit status (the CLI path: prints
/// the summary and writes --json).
pub fn run(cmd: LoadCommand, quiet: bool) -> Result<u8> {
    let load = Load::of(cmd);
    let json = load.json().map(Path::to_path_buf);
    if let Some(path) = &json {
        crate::output::check(path, "--json")?;
    }
    let out = load.execute(quiet, None)?;
    finish(&out.report, out.failure, json.as_deref(), quiet)
}

/// Runs a load subcommand and returns what it measured, printing nothing
/// but the progress bar (unless `quiet`). Bad options are usage errors;
/// a failed run comes back as `LoadOutcome::failure`, with its report.
/// For callers that embed a load (profile, experiments). Blocks SIGINT,
/// SIGTERM and SIGHUP on the calling thread while it runs (Ctrl-C stops
/// the load and marks it incomplete).
pub fn execute(cmd: LoadCommand, quiet: bool) -> Result<LoadOutcome> {
    execute_until(cmd, quiet, None)
}

/// [`execute`], and a TCP run also ends early (marked failed, end reason
/// `aborted`) once `abort` is raised. A UDP run ignores `abort`: it is
/// bounded by its own --fin-timeout.
pub fn execute_until(
    cmd: LoadCommand,
    quiet: bool,
    abort: Option<Arc<StopFlag>>,
) -> Result<LoadOutcome> {
    Load::of(cmd).execute(quiet, abort)
}

/// Parses a load command line (without the `load` word), e.g.
/// `["tcp-rr", "127.0.0.1:8080", "-c", "64", "-d", "10"]`.
pub fn parse(args: &[String]) -> Result<LoadCommand> {
    #[derive(clap::Parser)]
    #[command(name = "load", no_binary_name = true)]
    struct LoadLine {
        #[command(subcommand)]
        cmd: LoadCommand,
    }
    use clap::Parser;
    LoadLine::try_parse_from(args)
        .map(|l| l.cmd)
        .map_err(|e| error::usage(format!("load {}: {}", args.join(" "), e.to_string().trim())))
}

/// Validates the shared TCP options of workload `w` into a plan, runs it
/// and records the options in the report.
fn run_tcp<E: Exchange>(
    w: TcpWorkload<E>,
    a: TcpArgs,
    quiet: bool,
    abort: Option<Arc<StopFlag>>,
) -> Result<LoadOutcome> {
    let addr = resolve(&a.addr)?;
    if w.mode.per_transaction() && a.connect_rate.is_some() {
        return Err(error::usage(format!(
            "--connect-rate applies to tcp-rr; {} paces its connects with --rate",
            w.name
        )));
    }
    let exchange = w.exchange?;
    let n_sources = a
        .source_ips
        .map_or(w.mode.default_source_ips(), |n| n as usize);
    let sources = socket::source_pool(&addr, n_sources);
    if a.source_ips.is_some_and(|n| n > 1) && sources.is_empty() {
        return Err(error::usage(
            "--source-ips needs an IPv4 loopback target (127.0.0.0/8)",
        ));
    }
    let connections = a.connections as usize;
    let threads = a
        .threads
        .map_or_else(|| connections.min(cpus()), |t| t as usize)
        .min(connections)
        .max(1);
    let stop = match (a.count, a.duration) {
        (Some(n), _) => Stop::Count(n),
        (None, d) => Stop::Duration(Duration::from_secs_f64(d.unwrap_or(10.0))),
    };
    if let (Some(r), Stop::Count(n)) = (a.rate, stop) {
        if (n as f64) < r / 1e6 {
            return Err(error::usage("-n is smaller than one microsecond of --rate"));
        }
    }
    let plan = TcpPlan {
        workload: w.name,
        mode: w.mode,
        addr,
        connections,
        threads,
        stop,
        warmup: Duration::from_secs_f64(a.warmup),
        rate: a.rate,
        timeout: Duration::from_secs_f64(a.timeout),
        connect_rate: a.connect_rate,
        sources: sources.clone(),
        abort,
    };
    let config = LoadConfig {
        connections: Some(connections),
        threads,
        pipeline: w.mode.pipeline(),
        request_bytes: exchange.request_len(),
        response_bytes: exchange.response_len(),
        request: a.request.clone(),
        expect: a.expect.clone(),
        duration_s: match stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Count(_) => None,
        },
        count: a.count,
        warmup_s: a.warmup,
        rate: a.rate,
        verify: a.verify,
        close: w.mode.close_name().map(String::from),
        timeout_s: a.timeout,
        max_errors: a.max_errors,
        connect_rate: a.connect_rate,
        source_ips: Some(sources.len().max(1)),
        command_line: std::env::args().collect(),
        ..Default::default()
    };
    let out = engine::run_tcp(&plan, &exchange, config, a.max_errors, quiet)?;
    Ok(LoadOutcome {
        report: out.report,
        failure: out.failure,
        connections: out.connections,
    })
}

fn run_udp(a: UdpArgs, quiet: bool) -> Result<LoadOutcome> {
    let addr = resolve(&a.addr)?;
    let pace = match (a.burst, a.rate) {
        (Some(n), None) => udp::Pace::Burst(n),
        (None, Some(pps)) => udp::Pace::Rate {
            pps,
            duration: a
                .count
                .is_none()
                .then(|| Duration::from_secs_f64(a.duration.unwrap_or(10.0))),
            count: a.count,
        },
        (None, None) => return Err(error::usage("load udp needs --burst N or --rate PPS")),
        (Some(_), Some(_)) => unreachable!("clap rejects --burst with --rate"),
    };
    let plan = udp::UdpPlan {
        addr,
        size: a.size as usize,
        pace,
        sndbuf: a.sndbuf,
        fin_timeout: Duration::from_secs_f64(a.fin_timeout),
    };
    let config = LoadConfig {
        threads: 1,
        duration_s: a.duration,
        count: a.count,
        rate: a.rate,
        burst: a.burst,
        datagram_bytes: Some(a.size as usize),
        sndbuf_requested: a.sndbuf,
        timeout_s: a.fin_timeout,
        max_errors: a.max_errors,
        command_line: std::env::args().collect(),
        ..Default::default()
    };
    let (report, failure) = udp::run(&plan, config, a.max_errors, quiet)?;
    Ok(LoadOutcome {
        report,
        failure,
        connections: Vec::new(),
    })
}

/// Prints the summary, writes the JSON (also for a failed run that
/// measured something: it is marked `complete: false`), and turns a
/// failure into exit status 1. The summary goes to stdout, or to stderr
/// when the JSON does (`--json -`), and comes before the JSON is written,
/// so a destination that turns out full loses nothing already shown.
pub fn finish(
    rep: &report::load::LoadReport,
    failure: Option<String>,
    json: Option<&std::path::Path>,
    quiet: bool,
) -> Result<u8> {
    use std::io::Write;
    let nothing_measured = rep.transactions == 0
        && rep.udp.as_ref().is_none_or(|u| u.published == 0)
        && rep.connections.established == 0;
    // A failed run still shows what it measured (even with --quiet); a run
    // that measured nothing shows only the error.
    let show = (!quiet || failure.is_some()) && !(nothing_measured && failure.is_some());
    if show {
        let text = load_text::render(rep);
        if json.is_some_and(crate::output::is_stdout) {
            let _ = std::io::stderr().write_all(text.as_bytes());
        } else {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
    }
    let written = match json {
        Some(path) if !nothing_measured => report::write_json(path, rep),
        _ => Ok(()),
    };
    match (failure, written) {
        (None, Ok(())) => Ok(0),
        (None, Err(e)) => Err(e),
        (Some(why), Ok(())) => Err(error::with_code(1, why)),
        (Some(why), Err(e)) => Err(error::with_code(1, format!("{why}; and {e:#}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_a_load_line() {
        let args: Vec<String> = ["tcp-rr", "127.0.0.1:80", "-c", "64", "-d", "10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        match parse(&args).unwrap() {
            LoadCommand::TcpRr(a) => {
                assert_eq!(a.tcp.connections, 64);
                assert_eq!(a.tcp.duration, Some(10.0));
            }
            other => panic!("{other:?}"),
        }
        let bad: Vec<String> = vec!["tcp-rr".into(), "-c".into(), "x".into()];
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
    }
}
