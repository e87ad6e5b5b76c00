//! load udp: sequenced datagrams, back to back (--burst) or paced
//! (--rate), then the FIN/REPORT exchange with `serve udp-sink` so loss is
//! published - received, tail drops included. Its own engine, not the
//! driver's; its options and registration are here.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::ProgressBar;
use nix::sys::signal::Signal;
use socket2::{Domain, Protocol, Socket, Type};

use crate::clock::monotonic_ns;

use crate::load::Load;
use crate::load::driver::clock::rusage_ns;
use crate::load::spec::{ConnModel, Options, Registered, TargetForm};
use crate::procfs::snmp;
use crate::proto::udp::{Header, Kind, MAX_DATAGRAM, SinkReport, fin_datagram, parse_report};
use crate::report::load::{
    Bytes, Connections, Errors, Generator, LoadConfig, LoadReport, SCHEMA, SCHEMA_VERSION,
    UdpResult,
};
use crate::signals::{Signals, signal_name};
use crate::stats::LatencyHist;
use crate::values;

/// The registration of `load udp`.
pub static WORKLOAD: Registered<UdpArgs> = Registered::new(
    "udp",
    "Sequenced UDP datagrams, with loss accounted by `serve udp-sink`",
    TargetForm::Addr,
);

/// `--rate` of `load udp`: a number. A schedule is refused by name: the
/// one-way blast reports no steps (its sink counts the whole run only).
fn constant_rate(s: &str) -> Result<f64, String> {
    values::rate(s).map_err(
        |e| match crate::load::schedule::rate_plan::RatePlan::parse(s) {
            Ok(p) if p.constant().is_none() => format!(
                "`{s}`: load udp sends at one constant rate (its sink reports the whole run, \
                 not steps); rate schedules are for tcp-rr, tcp-crr, http, redis, memcached \
                 and udp-rr"
            ),
            _ => e,
        },
    )
}

/// `load udp` options.
#[derive(Clone, Debug, Args)]
pub struct UdpArgs {
    /// The sink: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Send this many datagrams back to back.
    #[arg(long, value_name = "N", conflicts_with = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    pub burst: Option<u64>,
    /// Send this many datagrams per second (one constant rate: the
    /// schedules of the request/response workloads are refused here).
    #[arg(long, value_name = "PPS", value_parser = constant_rate)]
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

impl Options for UdpArgs {
    fn address(&mut self) -> Option<&mut String> {
        Some(&mut self.addr)
    }

    fn conn(&self) -> ConnModel {
        ConnModel::UdpStream
    }

    fn json(&self) -> Option<&Path> {
        self.json.as_deref()
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        Ok(Load::udp(*self))
    }
}

/// How datagrams are sent.
#[derive(Clone, Copy, Debug)]
pub enum Pace {
    /// This many, back to back.
    Burst(u64),
    /// At this many per second, for a duration or a count.
    Rate {
        /// Datagrams per second.
        pps: f64,
        /// Stop after this long.
        duration: Option<Duration>,
        /// Stop after this many.
        count: Option<u64>,
    },
}

/// A UDP run.
#[derive(Clone, Debug)]
pub struct UdpPlan {
    /// The sink.
    pub addr: SocketAddr,
    /// Datagram size (>= HEADER_LEN).
    pub size: usize,
    /// Pacing.
    pub pace: Pace,
    /// SO_SNDBUF to request.
    pub sndbuf: Option<usize>,
    /// How long to wait for the sink's report.
    pub fin_timeout: Duration,
}

/// Datagrams handed to one sendmmsg.
const BATCH: usize = 64;
/// Length of the first FIN: the REPORT of a typical run (about 330 bytes of
/// JSON) fits, so one round trip usually does. The sink answers a shorter
/// FIN with NEED and the exact length, never with a longer datagram.
const FIN_FIRST_LEN: usize = 512;
/// NEEDs followed by an immediate longer FIN; after these the FIN goes out
/// at the normal 100 ms pace (a report growing between FINs, late DATA).
const MAX_IMMEDIATE_REFINS: u32 = 4;
/// Pause between FINs without an answer.
const FIN_INTERVAL: Duration = Duration::from_millis(100);

struct UdpSender {
    sock: UdpSocket,
    run: u32,
    bufs: Vec<Vec<u8>>,
    published: u64,
    send_errors: u64,
    first_error: Option<io::Error>,
}

impl UdpSender {
    /// Sends `n` (<= BATCH) datagrams with the next sequence numbers.
    /// Blocking: a full send buffer makes the sender wait, it does not drop.
    fn send_batch(&mut self, n: usize) {
        let mut iovs: Vec<libc::iovec> = Vec::with_capacity(n);
        for (k, buf) in self.bufs.iter_mut().take(n).enumerate() {
            Header {
                run: self.run,
                seq: self.published + k as u64,
                sent_ns: monotonic_ns(),
                kind: Kind::Data,
            }
            .encode(buf);
            iovs.push(libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            });
        }
        // SAFETY: mmsghdr is plain data; zeroed is a valid empty header.
        let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; n];
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut off = 0;
        while off < n {
            // SAFETY: msgs and the buffers they point to are alive; the
            // socket is connected so no address is needed.
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs[off..].as_mut_ptr(),
                    (n - off) as u32,
                    0,
                )
            };
            if r > 0 {
                off += r as usize;
                self.published += r as u64;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // The datagram at `off` was not sent. Renumber nothing: the
            // sequence stays dense because `published` did not advance, so
            // the next batch reuses the unsent numbers.
            self.send_errors += 1;
            if self.first_error.is_none() {
                self.first_error = Some(e);
            }
            break;
        }
    }
}

/// Runs a UDP load and builds its report. Returns the report and, when the
/// run failed, why.
pub fn run(
    plan: &UdpPlan,
    config: LoadConfig,
    max_errors: u64,
    quiet: bool,
) -> Result<(LoadReport, Option<String>)> {
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    let (sock, sndbuf_granted) = open_socket(plan)?;
    let run_id = new_run_id();
    let mut tx = UdpSender {
        sock,
        run: run_id,
        bufs: (0..BATCH).map(|_| vec![0u8; plan.size]).collect(),
        published: 0,
        send_errors: 0,
        first_error: None,
    };

    let v6 = plan.addr.is_ipv6();
    let kernel_before = snmp::read(v6);
    let bar = progress(plan, quiet);
    let cpu0 = rusage_ns(libc::RUSAGE_SELF);
    let started_at = SystemTime::now();
    let mut sent = send(plan, &mut tx, &mut signals, bar.as_ref(), max_errors);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let cpu1 = rusage_ns(libc::RUSAGE_SELF);

    // FIN until REPORT, bounded by --fin-timeout (and ended by a signal).
    let (sink, sink_trouble) = match fin_exchange(
        &tx.sock,
        run_id,
        tx.published,
        plan.fin_timeout,
        &mut signals,
        &mut sent.interrupted,
    )? {
        FinOutcome::Report(r) => {
            let why = impossible_report(&r, run_id, tx.published).or_else(|| incomplete_report(&r));
            (Some(r), why)
        }
        FinOutcome::NoAnswer => (None, None),
        FinOutcome::TooLong(n) => (
            None,
            Some(format!(
                "the sink's report for this run is {n} bytes, more than one datagram \
                     ({MAX_DATAGRAM}): received and loss are unknown"
            )),
        ),
    };
    let kernel_after = snmp::read(v6);
    drop(signals);
    let finished = Finished {
        started_at,
        sent,
        cpu_s: (
            (cpu1.0 - cpu0.0) as f64 / 1e9,
            (cpu1.1 - cpu0.1) as f64 / 1e9,
        ),
        sndbuf_granted,
        sink,
        sink_trouble,
        rcvbuf_errors_delta: match (&kernel_before, &kernel_after) {
            (Some(b), Some(a)) => Some(a.since(b).rcvbuf_errors),
            _ => None,
        },
    };
    let failure = failure(plan, &tx, &finished, max_errors);
    Ok((report(plan, config, &tx, finished, &failure), failure))
}

/// A UDP socket connected to the sink, and the SO_SNDBUF it was granted.
fn open_socket(plan: &UdpPlan) -> Result<(UdpSocket, u64)> {
    let bind: SocketAddr = if plan.addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let s2 = Socket::new(
        Domain::for_address(plan.addr),
        Type::DGRAM.cloexec(),
        Some(Protocol::UDP),
    )
    .context("creating the UDP socket")?;
    if let Some(b) = plan.sndbuf {
        s2.set_send_buffer_size(b).context("setting SO_SNDBUF")?;
    }
    s2.bind(&bind.into()).context("binding the UDP socket")?;
    let sock: UdpSocket = s2.into();
    // Connected: plain send(), replies only from the sink, and an ICMP
    // port-unreachable surfaces as ECONNREFUSED instead of silent loss.
    sock.connect(plan.addr)
        .with_context(|| format!("connecting the UDP socket to {}", plan.addr))?;
    let sndbuf_granted = socket2::SockRef::from(&sock)
        .send_buffer_size()
        .unwrap_or(0) as u64;
    Ok((sock, sndbuf_granted))
}

/// A run id unlikely to repeat: the sink keeps each run's counts apart.
fn new_run_id() -> u32 {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u32) ^ std::process::id().rotate_left(16)
}

/// What the sending phase did.
struct Sent {
    /// Cumulative (published, errors) at the end of each second.
    per_second: Vec<(u64, u64)>,
    /// The signal that stopped it, if one did.
    interrupted: Option<String>,
    /// How long it took.
    send_time: Duration,
    /// True when it stopped on send errors over --max-errors.
    over_max_errors: bool,
}

/// What a UDP run saw, for its report.
struct Finished {
    started_at: SystemTime,
    sent: Sent,
    /// The process's (user, system) CPU while sending, s.
    cpu_s: (f64, f64),
    sndbuf_granted: u64,
    /// The sink's REPORT, if one came.
    sink: Option<SinkReport>,
    /// Why the sink's REPORT cannot give the loss, if it cannot.
    sink_trouble: Option<String>,
    /// Machine-wide Udp RcvbufErrors over the run.
    rcvbuf_errors_delta: Option<u64>,
}

/// The sending phase: back to back (--burst) or paced (--rate), until
/// done, a signal, or (paced) more send errors than `max_errors`.
fn send(
    plan: &UdpPlan,
    tx: &mut UdpSender,
    signals: &mut Signals,
    bar: Option<&ProgressBar>,
    max_errors: u64,
) -> Sent {
    let t0 = Instant::now();
    let mut per_second: Vec<(u64, u64)> = Vec::new();
    let mut interrupted = None;
    let mut over_max_errors = false;
    match plan.pace {
        Pace::Burst(n) => {
            while tx.published < n && tx.first_error.is_none() {
                let k = ((n - tx.published) as usize).min(BATCH);
                tx.send_batch(k);
                tick(&mut per_second, t0, tx, bar, n);
                if let Some(si) = signals.pending() {
                    interrupted = Some(signal_name(si.ssi_signo));
                    break;
                }
            }
        }
        Pace::Rate {
            pps,
            duration,
            count,
        } => {
            let gap = 1e9 / pps;
            let end = duration.map(|d| t0 + d);
            loop {
                let now = Instant::now();
                if end.is_some_and(|e| now >= e) || count.is_some_and(|c| tx.published >= c) {
                    break;
                }
                if let Some(si) = signals.pending() {
                    interrupted = Some(signal_name(si.ssi_signo));
                    break;
                }
                if tx.send_errors > max_errors {
                    over_max_errors = true;
                    break;
                }
                // Everything due by now goes out in batches; then sleep
                // until the next is due (at least 50 us, so high rates are
                // sent in small batches rather than spun for).
                let due = ((now - t0).as_nanos() as f64 / gap) as u64 + 1;
                let due = count.map_or(due, |c| due.min(c));
                while tx.published < due {
                    let k = ((due - tx.published) as usize).min(BATCH);
                    let p = tx.published;
                    tx.send_batch(k);
                    if tx.published == p {
                        break; // an error; counted, retried next round
                    }
                }
                tick(&mut per_second, t0, tx, bar, count.unwrap_or(0));
                let next = t0 + Duration::from_nanos((tx.published as f64 * gap) as u64);
                let sleep = next
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(50));
                std::thread::sleep(sleep.min(Duration::from_millis(100)));
            }
        }
    }
    Sent {
        per_second,
        interrupted,
        over_max_errors,
        send_time: t0.elapsed(),
    }
}

/// Why the run counts as failed, if it does: a signal, send errors over
/// the budget, a sink report that cannot give the loss, or none at all.
fn failure(plan: &UdpPlan, tx: &UdpSender, f: &Finished, max_errors: u64) -> Option<String> {
    let mut failure = None;
    if let Some(sig) = &f.sent.interrupted {
        failure = Some(format!(
            "interrupted by {sig} after {} datagrams",
            tx.published
        ));
    } else if let Some(e) = &tx.first_error {
        if tx.published == 0 || tx.send_errors > max_errors {
            failure = Some(format!(
                "{} send errors (first: {e}), more than --max-errors {max_errors}",
                tx.send_errors
            ));
        }
    }
    if failure.is_none() {
        failure = f.sink_trouble.clone();
    }
    if f.sink.is_none() && failure.is_none() {
        failure = Some(format!(
            "the sink at {} did not answer FIN within {:.1} s: received and loss are unknown",
            plan.addr,
            plan.fin_timeout.as_secs_f64()
        ));
    }
    failure
}

/// The report of a finished UDP run.
fn report(
    plan: &UdpPlan,
    config: LoadConfig,
    tx: &UdpSender,
    f: Finished,
    failure: &Option<String>,
) -> LoadReport {
    let mut notes = vec![
        "one-way latency compares CLOCK_MONOTONIC stamps of sender and sink: meaningful only \
         on one host"
            .to_string(),
        "kernel_rcvbuf_errors_delta is the machine-wide Udp RcvbufErrors counter: it matches \
         `lost` only when the sink is on this host and nothing else drops UDP meanwhile"
            .into(),
    ];
    let sink = f.sink;
    let lost = sink
        .as_ref()
        .filter(|_| f.sink_trouble.is_none())
        .map(|r| tx.published.saturating_sub(r.received));
    let one_way = sink
        .as_ref()
        .and_then(|r| LatencyHist::from_v2_base64(&r.latency_hist).ok())
        .filter(|h| !h.is_empty())
        .map(|h| h.summary());
    let received = sink.as_ref().map_or(0, |r| r.received);
    let secs = f.sent.send_time.as_secs_f64();
    let (user, system) = f.cpu_s;
    let busy = (user + system) / secs.max(1e-9);
    if busy >= 0.9 {
        notes.push(format!(
            "the sender was busy {:.0}% of the time: it may not have reached the requested rate",
            busy * 100.0
        ));
    }
    LoadReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        workload: "udp".into(),
        target: plan.addr.to_string(),
        config,
        started_at: humantime::format_rfc3339_millis(f.started_at).to_string(),
        started_at_unix_ns: Some(crate::report::load::unix_ns(f.started_at)),
        start_at: None,
        host: crate::report::load::host_name(),
        full_log: None,
        merged: None,
        duration_s: secs,
        complete: failure.is_none(),
        end_reason: match (&f.sent.interrupted, plan.pace) {
            (Some(s), _) => format!("signal:{s}"),
            (None, _) if f.sent.over_max_errors => "max_errors".into(),
            (None, Pace::Burst(_)) => "burst_sent".into(),
            (
                None,
                Pace::Rate {
                    duration: Some(_), ..
                },
            ) => "duration".into(),
            (None, Pace::Rate { .. }) => "count".into(),
        },
        connections: Connections::default(),
        transactions: received,
        warmup_transactions: 0,
        rate_per_s: if secs > 0.0 {
            tx.published as f64 / secs
        } else {
            0.0
        },
        latency: None,
        latency_uncorrected: None,
        send_lag: None,
        release_lag: None,
        conn_wait: None,
        connect_latency: None,
        tls_handshake_latency: None,
        errors: Errors {
            total: tx.send_errors,
            by_class: tx
                .first_error
                .as_ref()
                .map(|e| {
                    [(format!("send: {}", e.kind()), tx.send_errors)]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
            unanswered_at_end: 0,
            answered_after_end: 0,
        },
        intervals: crate::report::load::seal_intervals(intervals_of(&f.sent.per_second), secs),
        steps: None,
        bytes: Bytes {
            sent: tx.published * plan.size as u64,
            received: 0,
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: Generator::cpu_us_per(user, system, tx.published),
            thread_cpu_share: vec![busy],
            saturated: busy >= 0.9,
        },
        responses: None,
        udp: Some(UdpResult {
            published: tx.published,
            send_errors: tx.send_errors,
            sndbuf_granted: f.sndbuf_granted,
            lost,
            loss_ratio: lost.map(|l| {
                if tx.published > 0 {
                    l as f64 / tx.published as f64
                } else {
                    0.0
                }
            }),
            one_way_latency: one_way,
            kernel_rcvbuf_errors_delta: f.rcvbuf_errors_delta,
            sink,
        }),
        udp_rr: None,
        notes,
        path: None,
    }
}

/// Cumulative (published, errors) at the end of each second so far; the
/// progress bar follows.
fn tick(
    per_second: &mut Vec<(u64, u64)>,
    t0: Instant,
    tx: &UdpSender,
    bar: Option<&ProgressBar>,
    total: u64,
) {
    let sec = t0.elapsed().as_secs() as usize;
    while per_second.len() <= sec {
        per_second.push((tx.published, tx.send_errors));
    }
    per_second[sec] = (tx.published, tx.send_errors);
    if let Some(b) = bar {
        if total > 0 {
            b.set_position(tx.published.min(total));
        }
        b.set_message(format!(
            "{:.1} s, {} published",
            t0.elapsed().as_secs_f64(),
            tx.published
        ));
    }
}

/// Per-second deltas from cumulative samples.
fn intervals_of(per_second: &[(u64, u64)]) -> Vec<crate::report::load::Interval> {
    let mut prev = (0, 0);
    per_second
        .iter()
        .enumerate()
        .map(|(i, &(p, e))| {
            let iv = crate::report::load::Interval {
                transactions: p - prev.0,
                errors: e - prev.1,
                ..crate::report::load::Interval::empty(i as u64)
            };
            prev = (p, e);
            iv
        })
        .collect()
}

fn progress(plan: &UdpPlan, quiet: bool) -> Option<ProgressBar> {
    if !crate::progress::wanted(quiet) {
        return None;
    }
    let len = match plan.pace {
        Pace::Burst(n) => n,
        Pace::Rate { count: Some(c), .. } => c,
        Pace::Rate { .. } => 0,
    };
    Some(crate::progress::bar(
        (len > 0).then_some(len),
        &format!("udp {} [{{bar:30}}] {{msg}}", plan.addr),
    ))
}

/// How the FIN/REPORT exchange ended.
#[derive(Debug)]
enum FinOutcome {
    /// The sink's REPORT.
    Report(SinkReport),
    /// No REPORT within the limit.
    NoAnswer,
    /// The sink said its REPORT needs a FIN of this many bytes, more than a
    /// datagram can hold.
    TooLong(u64),
}

/// What no sink that counted this run could answer, if the REPORT says
/// it: another run, more received than published, a sequence number
/// never sent, counts that cannot be. Such a REPORT is an error, never a
/// loss figure.
fn impossible_report(r: &SinkReport, run: u32, published: u64) -> Option<String> {
    let why = if r.run != run {
        format!("it is for run {}, not this run {run}", r.run)
    } else if r.received > published {
        format!("{} received of {published} sent", r.received)
    } else if r.max_seq.is_some_and(|m| m >= published) {
        format!(
            "highest sequence {} of {published} sent (0..{})",
            r.max_seq.unwrap_or(0),
            published.saturating_sub(1)
        )
    } else if r.interior_gaps > published || r.reordered > r.received {
        format!(
            "{} interior gaps and {} reordered of {} received, {published} sent",
            r.interior_gaps, r.reordered, r.received
        )
    } else if r.received > 0 && r.max_seq.is_none() {
        format!("{} received but no highest sequence", r.received)
    } else {
        return None;
    };
    Some(format!(
        "the sink's REPORT is impossible ({why}): received and loss are unknown"
    ))
}

/// Why a REPORT cannot give this run's loss, if it cannot.
fn incomplete_report(r: &SinkReport) -> Option<String> {
    if r.after_eviction > 0 {
        return Some(format!(
            "the sink stopped tracking this run before it ended (too many runs at once: it \
             evicted this one), {} datagrams arrived after that: received and loss are unknown",
            r.after_eviction
        ));
    }
    if r.forgotten {
        return Some(
            "the sink had forgotten this run once (too many runs at once: it dropped its \
             record) and counted it anew: received and loss are unknown"
                .into(),
        );
    }
    if r.received == 0 && r.runs_refused > 0 {
        return Some(format!(
            "the sink has no datagram of this run, and it refused {} datagrams of new runs \
             while every run it tracked was receiving (a flood of runs?): this run's may be \
             among them, so received and loss are unknown",
            r.runs_refused
        ));
    }
    None
}

/// Sends FIN every 100 ms until a REPORT for `run` arrives, `limit`
/// passes, or a stop signal comes (recorded in `interrupted`, unless an
/// earlier one is: the run is then reported as interrupted, not as a sink
/// that did not answer). The FIN starts at FIN_FIRST_LEN bytes; a NEED
/// from the sink makes it as long as the REPORT needs and sends it again at
/// once (at most MAX_IMMEDIATE_REFINS times).
fn fin_exchange(
    sock: &UdpSocket,
    run: u32,
    published: u64,
    limit: Duration,
    signals: &mut Signals,
    interrupted: &mut Option<String>,
) -> Result<FinOutcome> {
    let mut fin = fin_datagram(run, published, FIN_FIRST_LEN);
    let end = Instant::now() + limit;
    let mut next_send = Instant::now();
    let mut refins = 0;
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    loop {
        if let Some(si) = signals.pending() {
            interrupted.get_or_insert_with(|| signal_name(si.ssi_signo));
            return Ok(FinOutcome::NoAnswer);
        }
        let now = Instant::now();
        if now >= end {
            return Ok(FinOutcome::NoAnswer);
        }
        if now >= next_send {
            // ECONNREFUSED here means nothing listens: keep trying until
            // the limit, the sink may be starting (bounded either way).
            let _ = sock.send(&fin);
            next_send = now + FIN_INTERVAL;
        }
        let wait = next_send.min(end).saturating_duration_since(Instant::now());
        sock.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .context("setting a receive timeout")?;
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) || e.raw_os_error() == Some(libc::ECONNREFUSED) =>
            {
                continue;
            }
            Err(e) => return Err(e).context("waiting for the sink's report"),
        };
        let Some(h) = Header::decode(&buf[..n]).filter(|h| h.run == run) else {
            continue;
        };
        match h.kind {
            // A REPORT answers the FIN's count: another count answers
            // another FIN (not this run's), and is no answer here.
            Kind::Report if h.seq != published => continue,
            Kind::Report => {
                let rep = parse_report(&buf[..n]).context("the sink's report is not valid JSON")?;
                return Ok(FinOutcome::Report(rep));
            }
            Kind::Need if h.seq > MAX_DATAGRAM as u64 => return Ok(FinOutcome::TooLong(h.seq)),
            // A NEED answering an earlier, shorter FIN asks for nothing new.
            Kind::Need if h.seq as usize > fin.len() => {
                fin = fin_datagram(run, published, h.seq as usize);
                if refins < MAX_IMMEDIATE_REFINS {
                    refins += 1;
                    next_send = Instant::now();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::udp::{HEADER_LEN, need_datagram, report_datagram};

    /// A client socket connected to a fake sink; returns both.
    fn pair() -> (UdpSocket, UdpSocket) {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(sink.local_addr().unwrap()).unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (client, sink)
    }

    #[test]
    fn a_need_makes_the_fin_as_long_as_the_report_then_the_report_comes() {
        let (client, sink) = pair();
        let fake = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let (n, from) = sink.recv_from(&mut buf).unwrap();
            assert_eq!(n, FIN_FIRST_LEN);
            let h = Header::decode(&buf[..n]).unwrap();
            assert_eq!((h.run, h.seq, h.kind), (5, 77, Kind::Fin));
            // Another run's NEED and a stale one are ignored.
            sink.send_to(&need_datagram(6, 1500), from).unwrap();
            sink.send_to(&need_datagram(5, 100), from).unwrap();
            sink.send_to(&need_datagram(5, 700), from).unwrap();
            let (n, _) = sink.recv_from(&mut buf).unwrap();
            assert_eq!(n, 700);
            let rep = SinkReport {
                run: 5,
                received: 70,
                ..Default::default()
            };
            let b = report_datagram(&rep, 77).unwrap();
            assert!(b.len() <= n);
            sink.send_to(&b, from).unwrap();
        });
        let out = fin_exchange(
            &client,
            5,
            77,
            Duration::from_secs(5),
            &mut no_signals(),
            &mut None,
        )
        .unwrap();
        fake.join().unwrap();
        match out {
            FinOutcome::Report(r) => assert_eq!((r.run, r.received), (5, 70)),
            o => panic!("{o:?}"),
        }
    }

    /// A signalfd for no signal: the exchange runs uninterrupted.
    fn no_signals() -> Signals {
        Signals::block(&[]).unwrap()
    }

    #[test]
    fn a_report_longer_than_a_datagram_ends_the_exchange() {
        let (client, sink) = pair();
        let fake = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let (n, from) = sink.recv_from(&mut buf).unwrap();
            assert!(n >= HEADER_LEN);
            sink.send_to(&need_datagram(5, MAX_DATAGRAM + 1), from)
                .unwrap();
        });
        let out = fin_exchange(
            &client,
            5,
            1,
            Duration::from_secs(5),
            &mut no_signals(),
            &mut None,
        )
        .unwrap();
        fake.join().unwrap();
        assert!(
            matches!(out, FinOutcome::TooLong(n) if n == MAX_DATAGRAM as u64 + 1),
            "{out:?}"
        );
    }

    #[test]
    fn a_report_with_data_after_eviction_gives_no_loss() {
        let mut r = SinkReport {
            received: 10,
            ..Default::default()
        };
        assert_eq!(incomplete_report(&r), None);
        r.after_eviction = 3;
        let why = incomplete_report(&r).unwrap();
        assert!(why.contains("3 datagrams arrived after"), "{why}");
        let r = SinkReport {
            received: 10,
            forgotten: true,
            ..Default::default()
        };
        assert!(incomplete_report(&r).unwrap().contains("forgotten"));
        // Refused runs matter only when nothing of this run came.
        let mut r = SinkReport {
            received: 10,
            runs_refused: 5,
            ..Default::default()
        };
        assert_eq!(incomplete_report(&r), None);
        r.received = 0;
        assert!(
            incomplete_report(&r)
                .unwrap()
                .contains("refused 5 datagrams")
        );
    }

    /// Issue 22: received > published, 2^64-1, a mismatched run id or
    /// sequence were accepted as "lost 0".
    #[test]
    fn an_impossible_report_is_an_error() {
        let ok = SinkReport {
            run: 5,
            received: 90,
            max_seq: Some(99),
            interior_gaps: 10,
            ..Default::default()
        };
        assert_eq!(impossible_report(&ok, 5, 100), None);
        let bad = [
            SinkReport {
                run: 6,
                ..ok.clone()
            },
            SinkReport {
                received: 101,
                ..ok.clone()
            },
            SinkReport {
                received: u64::MAX,
                ..ok.clone()
            },
            SinkReport {
                max_seq: Some(100),
                ..ok.clone()
            },
            SinkReport {
                max_seq: Some(u64::MAX),
                ..ok.clone()
            },
            SinkReport {
                interior_gaps: 101,
                ..ok.clone()
            },
            SinkReport {
                reordered: 91,
                ..ok.clone()
            },
            SinkReport {
                max_seq: None,
                ..ok.clone()
            },
        ];
        for r in bad {
            let why = impossible_report(&r, 5, 100).unwrap_or_else(|| panic!("{r:?}"));
            assert!(why.starts_with("the sink's REPORT is impossible"), "{why}");
        }
        // Nothing received of nothing sent is possible.
        assert_eq!(
            impossible_report(
                &SinkReport {
                    run: 5,
                    ..Default::default()
                },
                5,
                0
            ),
            None
        );
    }
}
