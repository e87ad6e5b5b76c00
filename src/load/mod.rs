//! `sockscope load`: a load generator meant never to be the bottleneck.
//!
//! One epoll loop per worker thread drives its share of the connections
//! (`tcp_rr`, `tcp_crr`); `udp` sends sequenced datagrams. Workers keep
//! their own counts and lossless histograms (`tally`), merged at the end
//! (`engine`). Open-loop rates are paced per worker (`schedule`) with
//! latency measured from the intended send time.

pub mod conn;
pub mod driver;
pub mod engine;
pub mod plan;
pub mod schedule;
pub mod tally;
pub mod tcp_crr;
pub mod tcp_rr;
pub mod udp;

use std::time::Duration;

use anyhow::Result;

use self::conn::{Exchange, Expect};
use self::engine::TcpKind;
use self::plan::{Stop, TcpPlan};
pub use self::tcp_rr::ConnTally;
// The clap option structs and the shared value parsers live in the CLI
// layer; `run_tcp`/`run_udp` still read the raw options until load takes a
// plan of its own.
use crate::cli::load::{CloseMode, LoadCommand, TcpArgs, UdpArgs};
use crate::cli::values::{resolve, unescape};
use crate::error;
use crate::report::{self, load::LoadConfig, load_text};

/// Parses --expect: a byte count or the exact response (escapes as in
/// --request). An empty response, as a count or as a string, is a usage
/// error: a response of no bytes cannot be waited for.
fn parse_expect(exp: &str, verify: bool) -> Result<Expect> {
    let expect = match exp.parse::<usize>() {
        Ok(0) => {
            return Err(error::usage(
                "--expect 0: a response of 0 bytes cannot be waited for",
            ));
        }
        Ok(n) => Expect::Bytes(n),
        Err(_) => {
            let bytes = unescape(exp)?;
            if bytes.is_empty() {
                return Err(error::usage(
                    "--expect '': an empty response cannot be waited for (give the \
                     response, or its size in bytes)",
                ));
            }
            Expect::Exact(bytes)
        }
    };
    if verify && matches!(expect, Expect::Bytes(_)) {
        return Err(error::usage(
            "--verify with --expect BYTES: give the expected string to verify",
        ));
    }
    Ok(expect)
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

/// Runs a load subcommand; returns the exit status (the CLI path: prints
/// the summary and writes --json).
pub fn run(cmd: LoadCommand, quiet: bool) -> Result<u8> {
    let json = match &cmd {
        LoadCommand::TcpRr(a) => a.tcp.json.clone(),
        LoadCommand::TcpCrr(a) => a.tcp.json.clone(),
        LoadCommand::Udp(a) => a.json.clone(),
    };
    if let Some(path) = &json {
        crate::output::check(path, "--json")?;
    }
    let out = execute(cmd, quiet)?;
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
    abort: Option<std::sync::Arc<crate::signals::StopFlag>>,
) -> Result<LoadOutcome> {
    match cmd {
        LoadCommand::TcpRr(a) => {
            run_tcp(TcpKind::Rr, a.tcp, a.pipeline as usize, None, quiet, abort)
        }
        LoadCommand::TcpCrr(a) => run_tcp(TcpKind::Crr, a.tcp, 1, Some(a.close), quiet, abort),
        LoadCommand::Udp(a) => run_udp(a, quiet),
    }
}

fn run_tcp(
    kind: TcpKind,
    a: TcpArgs,
    pipeline: usize,
    close: Option<CloseMode>,
    quiet: bool,
    abort: Option<std::sync::Arc<crate::signals::StopFlag>>,
) -> Result<LoadOutcome> {
    let addr = resolve(&a.addr)?;
    if kind == TcpKind::Crr && a.connect_rate.is_some() {
        return Err(error::usage(
            "--connect-rate applies to tcp-rr; tcp-crr paces its connects with --rate",
        ));
    }
    let exchange = match (&a.request, &a.expect) {
        (Some(req), Some(exp)) => {
            let request = unescape(req)?;
            if request.is_empty() {
                return Err(error::usage("--request must not be empty"));
            }
            Exchange::Fixed {
                request,
                expect: parse_expect(exp, a.verify)?,
            }
        }
        _ => Exchange::pattern(a.req as usize, a.resp.unwrap_or(a.req) as usize, a.verify),
    };
    let n_sources = a
        .source_ips
        .map_or(if kind == TcpKind::Crr { 16 } else { 1 }, |n| n as usize);
    let sources = conn::source_pool(&addr, n_sources);
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
        addr,
        connections,
        threads,
        exchange: exchange.clone(),
        pipeline,
        close_rst: close == Some(CloseMode::Rst),
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
        pipeline: (kind == TcpKind::Rr).then_some(pipeline),
        request_bytes: Some(exchange.req_len()),
        response_bytes: Some(exchange.resp_len()),
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
        close: close.map(|c| match c {
            CloseMode::Fin => "fin".into(),
            CloseMode::Rst => "rst".into(),
        }),
        timeout_s: a.timeout,
        max_errors: a.max_errors,
        connect_rate: a.connect_rate,
        source_ips: Some(sources.len().max(1)),
        command_line: std::env::args().collect(),
        ..Default::default()
    };
    let out = engine::run_tcp(&plan, kind, config, a.max_errors, quiet)?;
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
    fn an_empty_expected_response_is_a_usage_error() {
        for exp in ["", "0"] {
            let Err(e) = parse_expect(exp, false) else {
                panic!("--expect {exp:?} was accepted");
            };
            assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
            assert!(e.to_string().contains("cannot be waited for"), "{e}");
        }
        assert!(matches!(parse_expect("5", false), Ok(Expect::Bytes(5))));
        assert!(
            matches!(parse_expect("+PONG\\r\\n", true), Ok(Expect::Exact(b)) if b == b"+PONG\r\n")
        );
        assert!(parse_expect("5", true).is_err());
    }
}
