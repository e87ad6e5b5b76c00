//! `bench udp-rcvbuf`: bursts of sequenced datagrams into `serve udp-sink`
//! with a small, the default and a large SO_RCVBUF, several trials each.
//! Untraced: a tracer on the sink would slow its receive loop and change
//! the loss being measured.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{BenchContext, Size};
use crate::load;
use crate::process::ready::Proto;
use crate::process::target::{Launched, STOP_GRACE, quote_block};
use crate::report::bench::udp_rcvbuf::{UdpRcvbufResult, UdpTrial};
use crate::run::exit::{self, fail};

/// Asked-for receive buffers: (name, SO_RCVBUF request).
const BUFFERS: [(&str, Option<u64>); 3] = [
    ("small", Some(16 * 1024)),
    ("default", None),
    ("large", Some(4 << 20)),
];
const DATAGRAM: u32 = 1000;

fn sysctl_u64(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `bench udp-rcvbuf`.
pub struct UdpRcvbuf;

impl super::Experiment for UdpRcvbuf {
    fn name(&self) -> &'static str {
        "udp-rcvbuf"
    }
    fn about(&self) -> &'static str {
        "UDP loss with a small, the default and a large receive buffer"
    }
    fn bpf(&self) -> Option<crate::probe::preflight::Programs> {
        None
    }
    fn caveats(&self, machine: &crate::report::machine::Machine) -> Vec<String> {
        super::loopback_caveats(
            machine,
            &[
                "The kernel's RcvbufErrors counter is machine-wide (per network namespace): any \
               other UDP receiver dropping at the same time adds to it.",
            ],
        )
    }
    fn run(
        &self,
        ctx: &mut BenchContext<'_>,
        size: Size,
    ) -> Result<(crate::report::bench::ExperimentResult, Vec<String>)> {
        let (u, ins) = run(ctx, size)?;
        Ok((u.into(), ins))
    }
}

/// Runs every trial.
pub fn run(ctx: &mut BenchContext<'_>, size: Size) -> Result<(UdpRcvbufResult, Vec<String>)> {
    let (trials, burst): (u32, u64) = if size.quick { (2, 10_000) } else { (3, 20_000) };
    let exe = std::env::current_exe().context("locating the sockscope binary")?;
    let mut out = Vec::new();
    ctx.progress(&format!(
        "bench udp-rcvbuf: {} trials of {burst} x {DATAGRAM} B datagrams",
        trials as usize * BUFFERS.len()
    ));
    for n in 1..=trials {
        // Interleaved, so drift on the machine hits every size alike.
        for (name, req) in BUFFERS {
            ctx.check_signals()?;
            let mut argv: Vec<OsString> = vec![
                exe.clone().into(),
                "serve".into(),
                "udp-sink".into(),
                "--idle-timeout".into(),
                "0".into(),
            ];
            if let Some(r) = req {
                argv.push("--rcvbuf".into());
                argv.push(r.to_string().into());
            }
            let mut sink = Launched::spawn_reporting(&argv, None)?;
            let addr = wait_udp(&mut sink)?;
            let line = vec![
                "udp".to_string(),
                addr.to_string(),
                "--burst".into(),
                burst.to_string(),
                "--size".into(),
                DATAGRAM.to_string(),
            ];
            let outcome = load::execute(load::registry::parse_line(&line)?, true)?;
            ctx.check_load(
                &outcome.report,
                &format!("during udp-rcvbuf trial {name} {n}"),
            )?;
            if let Some(why) = outcome.failure {
                return Err(fail(
                    exit::LOAD_FAILED,
                    format!("udp-rcvbuf trial {name} {n}: the load failed: {why}"),
                ));
            }
            let stop = sink.stop(STOP_GRACE);
            let sink_rep: serde_json::Value = sink
                .report()
                .and_then(|b| serde_json::from_slice(&b).map_err(Into::into))
                .map_err(|e| {
                    fail(
                        exit::TARGET_DIED,
                        format!(
                            "the udp sink did not stop cleanly ({} after {:.2} s) and left no \
                             readable report ({e:#}); its output:\n{}",
                            stop.signal,
                            stop.after_s,
                            quote_block(&sink.log_tail(2000))
                        ),
                    )
                })?;
            let u = outcome
                .report
                .udp
                .as_ref()
                .context("a udp load without udp figures")?;
            let sink_run = u.sink.as_ref().context("no sink report")?;
            let published = u.published;
            let received = sink_run.received;
            let lost = published.saturating_sub(received);
            let trial = UdpTrial {
                buffer: name.into(),
                trial: n,
                requested: req,
                granted: sink_rep["rcvbuf_granted"]
                    .as_u64()
                    .unwrap_or(sink_run.rcvbuf_granted),
                published,
                received,
                lost,
                loss_pct: if published > 0 {
                    100.0 * lost as f64 / published as f64
                } else {
                    0.0
                },
                interior_gaps: sink_run.interior_gaps,
                kernel_rcvbuf_errors_delta: u.kernel_rcvbuf_errors_delta,
            };
            ctx.progress(&format!(
                "  {name:<7} trial {n}: granted {:>7} B, published {published}, received {received}, lost {lost} ({:.2}%), RcvbufErrors +{}",
                trial.granted,
                trial.loss_pct,
                trial
                    .kernel_rcvbuf_errors_delta
                    .map_or("?".into(), |d| d.to_string())
            ));
            out.push(trial);
        }
    }
    out.sort_by_key(|t| {
        (
            BUFFERS.iter().position(|b| b.0 == t.buffer).unwrap_or(9),
            t.trial,
        )
    });
    let res = UdpRcvbufResult {
        burst,
        datagram_bytes: DATAGRAM,
        rmem_default: sysctl_u64("net.core.rmem_default"),
        rmem_max: sysctl_u64("net.core.rmem_max"),
        trials: out,
    };
    let ins = insights(&res);
    Ok((res, ins))
}

/// Waits (bounded) until the sink owns its bound UDP socket and sleeps in
/// its receive loop.
fn wait_udp(sink: &mut Launched) -> Result<std::net::SocketAddr> {
    let deadline = Instant::now() + super::READY_TIMEOUT;
    let a = super::wait_socket(sink, Proto::Udp, "the udp sink")?;
    wait_blocked(sink.pid, deadline);
    Ok(a)
}

/// Waits (until `deadline`) for the sink to be asleep in its receive loop
/// (state `S` twice, 5 ms apart): a bound socket alone does not mean the
/// sink is reading yet, and a burst sent into a sink still starting up
/// measures its start-up, not its receive buffer.
fn wait_blocked(pid: i32, deadline: Instant) {
    let state = || {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        s[s.rfind(')')? + 1..]
            .split_whitespace()
            .next()?
            .chars()
            .next()
    };
    let mut asleep = 0;
    while asleep < 2 && Instant::now() < deadline {
        asleep = if state() == Some('S') { asleep + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn insights(r: &UdpRcvbufResult) -> Vec<String> {
    let mut out = Vec::new();
    let mut parts = Vec::new();
    for (name, _) in BUFFERS {
        let t: Vec<&UdpTrial> = r.trials.iter().filter(|t| t.buffer == name).collect();
        if t.is_empty() {
            continue;
        }
        let mean = t.iter().map(|x| x.loss_pct).sum::<f64>() / t.len() as f64;
        parts.push(format!(
            "{name} ({} B granted) lost {mean:.1}% on average",
            t[0].granted
        ));
    }
    out.push(format!(
        "Bursts of {} datagrams: {}.",
        r.burst,
        parts.join(", ")
    ));
    if let Some(large) = r.trials.iter().find(|t| t.buffer == "large") {
        if let (Some(req), Some(max)) = (large.requested, r.rmem_max) {
            if large.granted < req {
                out.push(format!(
                    "The large buffer asked for {req} B but got {} B: an unprivileged \
                     SO_RCVBUF is capped at twice net.core.rmem_max ({max}); raise that sysctl \
                     to give a receiver more.",
                    large.granted
                ));
            }
        }
    }
    let agree = r
        .trials
        .iter()
        .filter(|t| t.kernel_rcvbuf_errors_delta == Some(t.lost))
        .count();
    out.push(format!(
        "The kernel's RcvbufErrors increase equalled the loss in {agree} of {} trials{}.",
        r.trials.len(),
        if agree == r.trials.len() {
            " (every dropped datagram was a full receive buffer)"
        } else {
            " (a difference means another UDP socket dropped at the same time, or drops \
             elsewhere in the stack)"
        }
    ));
    let tail: u64 = r
        .trials
        .iter()
        .map(|t| t.lost.saturating_sub(t.interior_gaps))
        .sum();
    if tail > 0 {
        out.push(format!(
            "{tail} of the lost datagrams were at the tail of their burst: no sequence gap \
             shows them, only published minus received does."
        ));
    }
    out
}
