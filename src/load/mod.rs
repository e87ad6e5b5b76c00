//! `sockscope load`: a load generator meant never to be the bottleneck.
//! This is the library ([`execute`], [`Load`]); the command (printing,
//! `--json`, the exit status) is `run::load`.
//!
//! A load is a [`LoadSpec`] (`spec`): a workload, its options and its
//! target, which may still be a slot (`ADDR`) filled once the target
//! listens. The CLI builds it once from `sockscope load`'s subcommands,
//! and profile and the experiments from their load lines
//! (`registry::parse_line`); both come from `registry`, one line per
//! workload.
//!
//! Three folders and two protocol folders:
//! - `workloads/`: a request/response workload is a thin file (`tcp_rr`,
//!   `tcp_crr`; the key-value protocols `redis` and `memcached`, codecs of
//!   one exchange core, `kv`, over `keyspace`, their options in
//!   `kv_options`; `udp_rr`; `grpc` on the HTTP/2 engine) that declares its
//!   options (a `clap::Args` struct), registers itself (`static WORKLOAD`),
//!   picks how it uses connections and supplies its exchange (`workload`,
//!   here: what to send, how to recognise a whole response, what counts as
//!   an error, and an optional on-connect step; `raw` is the exchange both
//!   tcp workloads share). `udp` is its own engine: sequenced datagrams
//!   and loss accounting with `serve udp-sink`.
//! - `driver/`: everything else of a TCP or datagram run: one epoll loop
//!   per worker thread (`driver`) drives its share of the connections,
//!   persistent (`persistent`), one per transaction (`per_txn`) or
//!   connected UDP sockets (`datagram`), over `socket`, with TLS (`tls`:
//!   a workload only names it); workers keep their own counts and lossless
//!   histograms (`tally`), merged at the end (`engine`; the main thread
//!   watches them, `watch`, and `tcp_report` writes the report, with a
//!   `--rate` schedule's per-step results from `steps`); `plan` is a run's
//!   validated plan; `clock` and `timerfd` are the time base and the
//!   one-shot timer.
//! - `schedule/`: open-loop intended send times (`schedule`), `--rate`
//!   schedules (`rate_plan`) and the one rule that says a step was
//!   generator-limited (`limited`).
//! - `http/` (HTTP/1.1 and https) and `http2/` (the HTTP/2 engine of
//!   `--http2` and `grpc`).
//!
//! Imports point one way: `workload` <- `workloads/raw`, `workload` and
//! `driver/socket` <- `driver/tls` <- `driver/tally` <- `driver/plan`
//! <- `driver` <- `persistent`/`per_txn`/`datagram` <- `engine` <- this
//! module, and `watch` <- `tcp_report` <- `engine`; a workload file
//! imports only `spec`, `workload`, `raw` or `kv`/`kv_options`/`keyspace`,
//! and its options; `registry` imports the workload files.

pub mod driver;
pub mod http;
pub mod http2;
pub mod registry;
pub mod schedule;
pub mod spec;
pub mod workload;
pub mod workloads;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use self::driver::{engine, socket};
pub use self::spec::{LoadSpec, TcpArgs};
use self::workload::ConnMode;
use self::workload::TcpWorkload;
use self::workloads::udp;
use crate::endpoint::Endpoint;
use crate::error;
pub use crate::load::driver::ConnTally;
use crate::load::driver::engine::WorkerLoop;
use crate::load::driver::plan::{Stop, TcpPlan};
use crate::load::driver::tls::TlsSpec;
use crate::load::schedule::rate_plan::RatePlan;
pub use crate::load::workloads::kv_options::{KeyDist, KvArgs, Ratio};
pub use crate::load::workloads::raw::RawArgs;
pub use crate::load::workloads::udp::UdpArgs;
use crate::report;
use crate::report::load::{LoadConfig, TlsConfig};
use crate::signals::StopFlag;
use crate::values::resolve;

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

/// A load, by the engine that runs it: what a workload's
/// [`Options::into_load`](spec::Options::into_load) makes of its options.
pub struct Load(Engine);

enum Engine {
    /// A request/response workload over the driver, and the shared TCP
    /// options.
    Tcp(Box<dyn RunTcp>, TcpArgs),
    /// Sequenced UDP datagrams.
    Udp(UdpArgs),
}

impl Load {
    /// A request/response workload `w` run by the driver with options `a`.
    pub fn tcp<E: WorkerLoop + 'static>(w: TcpWorkload<E>, a: TcpArgs) -> Self {
        Self(Engine::Tcp(Box::new(w), a))
    }

    /// Sequenced UDP datagrams.
    pub fn udp(a: UdpArgs) -> Self {
        Self(Engine::Udp(a))
    }

    /// Runs it; a TCP run also ends early (marked failed) once `abort` is
    /// raised. See [`execute`].
    pub fn execute(self, quiet: bool, abort: Option<Arc<StopFlag>>) -> Result<LoadOutcome> {
        match self.0 {
            Engine::Tcp(w, a) => w.run(a, quiet, abort),
            Engine::Udp(a) => run_udp(a, quiet),
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

impl<E: WorkerLoop> RunTcp for TcpWorkload<E> {
    fn run(
        self: Box<Self>,
        a: TcpArgs,
        quiet: bool,
        abort: Option<Arc<StopFlag>>,
    ) -> Result<LoadOutcome> {
        run_tcp(*self, a, quiet, abort)
    }
}

/// Runs a load and returns what it measured, printing nothing
/// but the progress bar (unless `quiet`). Bad options are usage errors;
/// a failed run comes back as `LoadOutcome::failure`, with its report.
/// For callers that embed a load (profile, experiments). Blocks SIGINT,
/// SIGTERM and SIGHUP on the calling thread while it runs (Ctrl-C stops
/// the load and marks it incomplete).
pub fn execute(spec: LoadSpec, quiet: bool) -> Result<LoadOutcome> {
    execute_until(spec, quiet, None)
}

/// [`execute`], and a TCP run also ends early (marked failed, end reason
/// `aborted`) once `abort` is raised. A UDP run ignores `abort`: it is
/// bounded by its own --fin-timeout.
pub fn execute_until(
    spec: LoadSpec,
    quiet: bool,
    abort: Option<Arc<StopFlag>>,
) -> Result<LoadOutcome> {
    spec.into_load()?.execute(quiet, abort)
}

/// Validates the shared TCP options of workload `w` into a plan, runs it
/// and records the options in the report.
fn run_tcp<E: WorkerLoop>(
    w: TcpWorkload<E>,
    a: TcpArgs,
    quiet: bool,
    abort: Option<Arc<StopFlag>>,
) -> Result<LoadOutcome> {
    // A URL target names the URL as typed, not the authority taken from it.
    let addr = match &w.target {
        Some(url) => Endpoint::parse(&w.addr).map_err(|e| error::usage(format!("{url}: {e}")))?,
        None => Endpoint::parse(&w.addr)?,
    };
    if addr.is_unix() {
        refuse_tcp_only(&w, &a, &addr)?;
    }
    if w.mode.per_transaction() && a.connect_rate.is_some() {
        return Err(error::usage(format!(
            "--connect-rate applies to tcp-rr; {} paces its connects with --rate",
            w.name
        )));
    }
    if w.mode.datagram() && a.connect_rate.is_some() {
        return Err(error::usage(
            "--connect-rate paces TCP connects; udp-rr opens its UDP sockets at once",
        ));
    }
    if let Some(max) = a.max_conns {
        if !matches!(w.mode, ConnMode::Persistent { .. }) {
            return Err(error::usage(format!(
                "--max-conns adds persistent connections; {} has none",
                w.name
            )));
        }
        if a.rate.is_none() {
            return Err(error::usage(
                "--max-conns needs --rate: a closed loop sends only on a free connection",
            ));
        }
        if max < a.connections {
            return Err(error::usage(format!(
                "--max-conns {max} is fewer than the {} connections asked for (-c)",
                a.connections
            )));
        }
    }
    let exchange = w.exchange?;
    if exchange.has_on_connect() && !matches!(w.mode, ConnMode::Persistent { .. }) {
        return Err(error::usage(format!(
            "{}: an on-connect step needs persistent connections",
            w.name
        )));
    }
    if let Some(path) = &a.full_log {
        if a.json.as_deref().is_some_and(crate::output::is_stdout) && crate::output::is_stdout(path)
        {
            return Err(error::usage(
                "--full-log - and --json - would both write to stdout, CSV and JSON mixed: \
                 send one of them to a file",
            ));
        }
        crate::output::check(path, "--full-log")?;
    }
    // One client (configuration, roots) for every connection of the run;
    // a CA file or server name that cannot be used stops here.
    let tls = w.tls.as_ref().map(TlsSpec::client).transpose()?;
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
    let stop = stop_of(&a)?;
    if let (Some(r), Stop::Count(n)) = (a.rate.as_ref().and_then(RatePlan::constant), stop) {
        if (n as f64) < r / 1e6 {
            return Err(error::usage("-n is smaller than one microsecond of --rate"));
        }
    }
    let plan = TcpPlan {
        workload: w.name,
        target: w.target.clone(),
        mode: w.mode,
        addr,
        tls,
        connections,
        threads,
        stop,
        warmup: Duration::from_secs_f64(a.warmup),
        rate: a.rate.clone(),
        timeout: Duration::from_secs_f64(a.timeout),
        connect_rate: a.connect_rate,
        max_conns: a.max_conns.map(|n| n as usize),
        sources: sources.clone(),
        abort,
        start_at: a.start_at.clone(),
        full_log: a.full_log.is_some().then_some(FULL_LOG_LIMIT),
    };
    let config = LoadConfig {
        connections: Some(connections),
        threads,
        pipeline: w.mode.pipeline(),
        request_bytes: exchange.request_len(),
        response_bytes: exchange.response_len(),
        duration_s: match stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Count(_) => None,
        },
        count: a.count,
        warmup_s: a.warmup,
        rate: a.rate.as_ref().and_then(RatePlan::constant),
        rate_schedule: a
            .rate
            .as_ref()
            .filter(|r| r.constant().is_none())
            .map(|r| r.to_string()),
        close: w.mode.close_name().map(String::from),
        timeout_s: a.timeout,
        max_errors: a.max_errors,
        connect_rate: a.connect_rate,
        max_conns: a.max_conns.map(|n| n as usize),
        source_ips: Some(sources.len().max(1)),
        tls: w.tls.as_ref().map(|t| TlsConfig {
            server_name: t.server_name.clone(),
            insecure: t.insecure,
            ca_file: t.ca_file.as_ref().map(|p| p.display().to_string()),
            session_resumption: false,
            protocol_version: None,
            cipher_suite: None,
        }),
        command_line: crate::cmdline::recorded(),
        ..w.config
    };
    let mut out = engine::run_tcp(&plan, &exchange, config, a.max_errors, quiet)?;
    if let (Some(path), Some(mut log)) = (&a.full_log, out.full_log.take()) {
        // A log that cannot be written loses nothing else: the summary and
        // --json are still written, then the run fails naming the log.
        if let Err(e) = write_full_log(path, &mut log) {
            let why = format!("{e:#}");
            out.report.notes.push(format!(
                "{why}: the full log was not written (the rest of this report was)"
            ));
            out.report.complete = false;
            out.failure = Some(match out.failure.take() {
                Some(f) => format!("{f}; and {why}"),
                None => why,
            });
        } else {
            record_full_log(&mut out.report, path, &log);
        }
    }
    Ok(LoadOutcome {
        report: out.report,
        failure: out.failure,
        connections: out.connections,
    })
}

/// When a TCP run stops: after `-n` transactions, after `-d` (10 s by
/// default), or, with a rate schedule, when the schedule ends. A schedule
/// sets the measured window itself: `-n` with one, or a `-d` that differs
/// from its length, is refused (exit 2) rather than cutting the schedule
/// short or running past its last step at an unstated rate.
fn stop_of(a: &TcpArgs) -> Result<Stop> {
    let schedule = a.rate.as_ref().and_then(|r| r.duration().map(|d| (r, d)));
    match (schedule, a.count, a.duration) {
        (Some((r, _)), Some(_), _) => Err(error::usage(format!(
            "--rate '{r}' is a schedule: it sets the run's length; leave -n out"
        ))),
        (Some((r, len)), None, Some(d)) if (d - len.as_secs_f64()).abs() > 1e-9 => {
            Err(error::usage(format!(
                "--rate '{r}' is a schedule of {} s: -d {d} would {} it; leave -d out (the \
                 schedule sets the run's length)",
                len.as_secs(),
                if d < len.as_secs_f64() {
                    "cut short"
                } else {
                    "run past"
                }
            )))
        }
        (Some((_, len)), None, _) => Ok(Stop::Duration(len)),
        (None, Some(n), _) => Ok(Stop::Count(n)),
        (None, None, d) => Ok(Stop::Duration(Duration::from_secs_f64(d.unwrap_or(10.0)))),
    }
}

/// Refuses, for a Unix socket target, what only TCP (or TLS over it) has:
/// source addresses, a reset close, TLS; then checks that the socket file
/// is a socket. Usage errors, exit 2.
fn refuse_tcp_only<E: WorkerLoop>(w: &TcpWorkload<E>, a: &TcpArgs, addr: &Endpoint) -> Result<()> {
    if a.source_ips.is_some() {
        return Err(error::usage(format!(
            "--source-ips spreads TCP connects over loopback source addresses; {addr} is a \
             Unix socket, which has none"
        )));
    }
    if matches!(
        w.mode,
        workload::ConnMode::PerTransaction { close_rst: true }
    ) {
        return Err(error::usage(format!(
            "--close rst ends a TCP connection with a reset; a Unix socket ({addr}) has no \
             reset: use --close fin"
        )));
    }
    if w.tls.is_some() {
        return Err(error::usage(format!(
            "TLS over a Unix socket ({addr}) is not supported: load it over plain http"
        )));
    }
    addr.check_connectable()
}

/// Notes and records a written full log in the report.
fn record_full_log(report: &mut report::load::LoadReport, path: &Path, log: &engine::FullLogData) {
    if log.not_logged > 0 {
        report.notes.push(format!(
            "--full-log is partial: {} of {} measured transactions were logged (at most \
             {FULL_LOG_LIMIT} per run, split over the worker threads); the file's first \
             line says so",
            log.entries.len(),
            log.entries.len() as u64 + log.not_logged
        ));
    }
    report.full_log = Some(report::load::FullLogRecord {
        file: path.display().to_string(),
        logged: log.entries.len() as u64,
        limit: log.limit,
        not_logged: log.not_logged,
        partial: log.not_logged > 0,
    });
}

/// Most transactions `--full-log` keeps per run: 16 bytes each, so at most
/// 256 MiB of memory. At 100,000 transactions/s that is 168 s of a run.
pub const FULL_LOG_LIMIT: usize = 1 << 24;

/// Writes the full log as CSV: a header `send_unix_ns,latency_ns`, then one
/// line per logged transaction in order of send time. A log that could not
/// hold every transaction starts with a `#` comment line that says so (CSV
/// readers take it with their comment option, e.g. pandas `comment='#'`).
fn write_full_log(path: &Path, log: &mut engine::FullLogData) -> Result<()> {
    use std::io::Write as _;
    log.entries.sort_unstable();
    let mut buf = Vec::with_capacity(log.entries.len() * 28 + 64);
    if log.not_logged > 0 {
        let _ = writeln!(
            buf,
            "# partial: {} measured transactions were not logged (limit {} per run)",
            log.not_logged, log.limit
        );
    }
    buf.extend_from_slice(b"send_unix_ns,latency_ns\n");
    for (sent, lat) in &log.entries {
        let _ = writeln!(buf, "{sent},{lat}");
    }
    crate::output::write(path, &buf)
        .map_err(|e| error::with_code(1, format!("--full-log {}: {e:#}", path.display())))
}

fn run_udp(a: UdpArgs, quiet: bool) -> Result<LoadOutcome> {
    if let Endpoint::Unix(_) = Endpoint::parse(&a.addr)? {
        // Its sink (serve udp-sink) listens on UDP only, and loss is
        // counted by the kernel's UDP counters.
        return Err(error::usage(format!(
            "load udp sends to a UDP sink; `{}` is a Unix socket: use udp-rr for Unix \
             datagram sockets",
            a.addr
        )));
    }
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
        command_line: crate::cmdline::recorded(),
        ..Default::default()
    };
    let (report, failure) = udp::run(&plan, config, a.max_errors, quiet)?;
    Ok(LoadOutcome {
        report,
        failure,
        connections: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_is_sorted_csv_and_a_partial_one_says_so() {
        let dir = std::env::temp_dir().join(format!("ss-fulllog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.csv");
        let mut log = engine::FullLogData {
            entries: vec![(30, 3), (10, 1), (20, 2)],
            limit: 3,
            not_logged: 0,
        };
        write_full_log(&path, &mut log).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "send_unix_ns,latency_ns\n10,1\n20,2\n30,3\n"
        );
        log.not_logged = 4;
        write_full_log(&path, &mut log).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(
                "# partial: 4 measured transactions were not logged (limit 3 per run)\n\
                 send_unix_ns,latency_ns\n10,1\n"
            ),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
