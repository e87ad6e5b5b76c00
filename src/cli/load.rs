//! `sockscope load` options (clap): the workloads tcp-rr, tcp-crr, http,
//! redis, memcached, udp-rr and udp, and [`parse`], which reads a load line
//! (`tcp-rr ADDR -c 64`) for the
//! callers that build one (profile's `--load`, the experiments).
//!
//! Validation beyond what clap checks (addresses, `--request`/`--expect`,
//! option combinations per workload) still happens in `crate::load` when a
//! command runs; these structs are what it is given.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};

use super::values;
use crate::error;

/// `sockscope load` subcommands.
#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// TCP request/response over persistent connections (closed loop, or
    /// open loop with --rate).
    TcpRr(RrArgs),
    /// TCP connect, request, response, close, in a loop per slot.
    TcpCrr(CrrArgs),
    /// HTTP/1.1 requests over keep-alive connections (or one connection
    /// per request with --new-connection).
    Http(HttpArgs),
    /// Redis (RESP2) commands built from templates over a key space.
    Redis(KvArgs),
    /// Memcached (text protocol) commands built from templates over a key
    /// space.
    Memcached(KvArgs),
    /// UDP request/response against a real server (DNS, memcached's UDP
    /// port, any datagram service): connected sockets, per-request
    /// timeouts, lost requests counted.
    UdpRr(UdpRrArgs),
    /// Sequenced UDP datagrams, with loss accounted by `serve udp-sink`.
    Udp(UdpArgs),
}

/// `load --path SPEC --serve ARGS`: the load crosses an emulated path to
/// a `sockscope serve` target that sockscope starts behind it.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// Cross an emulated path, e.g. 'rtt=20ms jitter=1ms loss=0.1%
    /// rate=1gbit limit=1000' (needs --serve; see docs/path.md).
    #[arg(long, value_name = "SPEC", global = true, requires = "serve")]
    pub path: Option<String>,
    /// The server behind the path: `sockscope serve` arguments, e.g.
    /// 'echo --transport epoll'; the workload's address is then the word
    /// ADDR (http: http://ADDR/).
    #[arg(long, value_name = "ARGS", global = true, requires = "path")]
    pub serve: Option<String>,
    /// How the path is built: netem, delayline, auto.
    #[arg(
        long,
        value_enum,
        value_name = "BACKEND",
        global = true,
        default_value = "auto"
    )]
    pub path_backend: crate::netpath::BackendChoice,
}

impl PathArgs {
    /// The served path, validated (usage errors exit 2); None without
    /// --path.
    pub fn into_served(self) -> Result<Option<crate::run::pathload::ServedPath>> {
        let (Some(p), Some(s)) = (self.path, self.serve) else {
            return Ok(None);
        };
        let Some(spec) = crate::netpath::PathSpec::parse(&p)? else {
            return Err(error::usage(
                "--path loopback with --serve: run `sockscope serve` and load it directly",
            ));
        };
        let serve =
            shell_words::split(&s).map_err(|e| error::usage(format!("--serve {s:?}: {e}")))?;
        if serve.is_empty() || serve[0] == "serve" {
            return Err(error::usage(
                "--serve: give the serve subcommand and its options, e.g. 'echo --transport \
                 epoll' (without the word serve)",
            ));
        }
        if serve
            .iter()
            .any(|a| a == "--json" || a.starts_with("--json="))
        {
            return Err(error::usage("--serve: leave out --json"));
        }
        Ok(Some(crate::run::pathload::ServedPath {
            spec,
            backend: self.path_backend,
            serve,
        }))
    }
}

/// The driver's options, shared by every request/response workload over
/// TCP (tcp-rr, tcp-crr and the protocol workloads).
#[derive(Debug, Args)]
pub struct TcpArgs {
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    #[arg(short = 'c', long = "connections", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Worker threads, one epoll loop each (default: min(connections, CPUs)).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Measure for this long (default 10 s unless -n).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = values::positive_secs, conflicts_with = "count")]
    pub duration: Option<f64>,
    /// Measure this many transactions instead of a duration.
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Run this long first and leave it out of the results.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = values::secs_or_zero)]
    pub warmup: f64,
    /// Open loop: this many transactions per second in total; latency is
    /// measured from the intended send time.
    #[arg(long, value_name = "PER_SEC", value_parser = values::rate)]
    pub rate: Option<f64>,
    /// Connect and response timeout.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = values::positive_secs)]
    pub timeout: f64,
    /// Spread connections over this many source addresses 127.0.0.2...
    /// (IPv4 loopback targets only; default: 16 for tcp-crr, 1 for tcp-rr).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub source_ips: Option<u32>,
    /// tcp-rr: open at most this many connections per second (so a server
    /// whose accept loop is slow is not handed a full listen backlog).
    #[arg(long, value_name = "PER_SEC", value_parser = values::rate)]
    pub connect_rate: Option<f64>,
    /// Errors tolerated before the run counts as failed (exit 1).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Write the full result as JSON (schema: docs/load-json.md); - for
    /// stdout (the summary then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Start the run (warm-up included) at this wall-clock instant, so that
    /// several generators start together (`sockscope merge` then aligns
    /// their seconds): RFC 3339 (2026-11-23T21:00:00Z, fractions and
    /// +HH:MM offsets allowed) or @UNIX_SECONDS[.FRACTION]. At most 24 h
    /// ahead; more than 1 s past is refused. Ctrl-C while waiting exits 130.
    #[arg(long, value_name = "TIME", value_parser = values::start_at)]
    pub start_at: Option<values::StartAt>,
    /// Write every measured transaction's send time (unix ns) and latency
    /// (ns) to FILE as CSV (`send_unix_ns,latency_ns`) at the end of the
    /// run; kept in memory, at most 16,777,216 transactions (256 MiB) per
    /// run: beyond that the file and the notes say it is partial.
    #[arg(long, value_name = "FILE")]
    pub full_log: Option<PathBuf>,
}

/// The raw exchange's options (tcp-rr, tcp-crr): pattern bytes of a
/// size, or a fixed request and its expected answer.
#[derive(Debug, Args)]
pub struct RawArgs {
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
}

/// `load tcp-rr` options.
#[derive(Debug, Args)]
pub struct RrArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// What each transaction sends and expects.
    #[command(flatten)]
    pub raw: RawArgs,
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
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// What each transaction sends and expects.
    #[command(flatten)]
    pub raw: RawArgs,
    /// How to close each connection.
    #[arg(long, value_enum, default_value_t = CloseMode::Fin)]
    pub close: CloseMode,
}

/// `load http` options.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// The URL to request: http://HOST[:PORT]/PATH[?QUERY] (https:// speaks
    /// TLS).
    #[arg(
        value_name = "URL",
        required_unless_present = "urls",
        conflicts_with = "urls"
    )]
    pub url: Option<String>,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// Request method (the default for --urls lines that name none).
    #[arg(long, value_name = "METHOD", default_value = "GET")]
    pub method: String,
    /// Add this request header ('Name: value'; repeatable). A Host header
    /// replaces the automatic one.
    #[arg(short = 'H', long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// Request body: @FILE reads it from FILE, anything else is the body
    /// itself (sent with a Content-Length).
    #[arg(long, value_name = "@FILE|STRING")]
    pub body: Option<String>,
    /// Request the URLs of FILE in turn, one a line: [WEIGHT] [METHOD] URL
    /// (all with the same scheme, host and port).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Status codes that count as success; any other is an error of class
    /// status_<code>: codes, ranges and classes, e.g. 2xx, 200-399,
    /// 200,404.
    #[arg(long, value_name = "CODES", default_value = "2xx")]
    pub ok_status: String,
    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// One request per connection (connect, request, response, close: the
    /// HTTP analogue of tcp-crr); the request says Connection: close.
    #[arg(long, conflicts_with = "pipeline")]
    pub new_connection: bool,
    /// https: accept any server certificate (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// https: also trust the certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

/// How a key-value workload picks the key of each request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipf with this exponent: key 0 the most frequent, key k about
    /// 1/(k+1)^S as frequent.
    Zipf(f64),
}

impl std::fmt::Display for KeyDist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uniform => f.write_str("uniform"),
            Self::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// A `--ratio`: one weight per command, in their order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ratio(pub Vec<u32>);

/// `load redis` and `load memcached` options: commands built from
/// templates over a key space (docs/load.md, "Key-value workloads").
#[derive(Debug, Args)]
pub struct KvArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// A command template, repeatable: words separated by spaces, with
    /// the fields {key} (a key of the key space) and {value} (--value-size
    /// bytes); {{ and }} are literal braces. Default: redis
    /// 'SET key:{key} {value}' and 'GET key:{key}', memcached
    /// 'set key:{key} {value}' and 'get key:{key}', at --ratio 1:10.
    #[arg(long = "command", value_name = "TEMPLATE")]
    pub commands: Vec<String>,
    /// How often each --command is sent, in their order (e.g. 1:10: one
    /// SET per ten GETs); default 1 each (1:10 for the default commands).
    #[arg(long, value_name = "A:B:...", value_parser = values::ratio)]
    pub ratio: Option<Ratio>,
    /// Keys in the key space ({key} is 0 to N-1, zero-padded to one width).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000_000))]
    pub keys: u64,
    /// Key distribution: uniform, or zipf:S (S > 0, e.g. zipf:0.99; key 0
    /// the hottest).
    #[arg(long, value_name = "uniform|zipf:S", default_value = "uniform", value_parser = values::key_dist)]
    pub key_dist: KeyDist,
    /// Bytes of {value}.
    #[arg(long, value_name = "BYTES", default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=(64 << 20)))]
    pub value_size: u32,
    /// Requests in flight per connection.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
}

/// How udp-rr tells which request a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UdpId {
    /// No id: one request in flight per socket, a reply answers it.
    None,
    /// The request is a DNS message: its 16-bit id is rewritten per
    /// request and the reply's id says which request it answers.
    Dns,
    /// The request is a memcached text command: each goes out behind
    /// memcached's 8-byte UDP frame header (request id, sequence 0, total
    /// 1), and a reply is whole once every datagram its header announces
    /// has come.
    Memcached,
}

impl UdpId {
    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Dns => "dns",
            Self::Memcached => "memcached",
        }
    }
}

/// `load udp-rr` options.
#[derive(Debug, Args)]
pub struct UdpRrArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared driver options (-c is the number of UDP sockets).
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// The request datagram: a string (escapes: \r \n \t \0 \\ \xHH), or
    /// @FILE for its bytes as they are in FILE.
    #[arg(long, value_name = "STRING|@FILE")]
    pub request: String,
    /// How a reply is matched to its request: none (one request in flight
    /// per socket), dns or memcached (never guessed from the port).
    #[arg(long, value_enum, default_value_t = UdpId::None)]
    pub id: UdpId,
    /// A reply must contain these bytes (escapes as in --request; for
    /// memcached, in the reply's text without the frame headers); one that
    /// does not is a response_mismatch error.
    #[arg(long, value_name = "STRING")]
    pub expect: Option<String>,
    /// --id dns: a reply must be NOERROR with at least one answer record,
    /// else it is a response_mismatch error.
    #[arg(long)]
    pub expect_answer: bool,
    /// Requests in flight per socket (needs --id dns or memcached).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
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
    #[arg(long, value_name = "PPS", value_parser = values::rate)]
    pub rate: Option<f64>,
    /// With --rate: send for this long (default 10 s unless -n).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = values::positive_secs, conflicts_with_all = ["count", "burst"])]
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
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = values::positive_secs)]
    pub fin_timeout: f64,
    /// Send errors tolerated before the run counts as failed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Write the full result as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Parses a load command line (without the `load` word), e.g.
/// `["tcp-rr", "127.0.0.1:8080", "-c", "64", "-d", "10"]`; clap's refusal
/// is a usage error naming the line.
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
