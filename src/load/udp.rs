//! load udp: sequenced datagrams, back to back (--burst) or paced
//! (--rate), then the FIN/REPORT exchange with `serve udp-sink` so loss is
//! published - received, tail drops included.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;
use socket2::{Domain, Protocol, Socket, Type};

use super::engine::rusage_ns;
use crate::procfs::snmp;
use crate::proto::udp::{HEADER_LEN, Header, Kind, SinkReport, monotonic_ns};
use crate::report::load::{
    Bytes, Connections, Errors, Generator, LoadConfig, LoadReport, SCHEMA, SCHEMA_VERSION,
    UdpResult,
};
use crate::signals::{Signals, signal_name};
use crate::stats::LatencyHist;

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

struct Sender {
    sock: UdpSocket,
    run: u32,
    bufs: Vec<Vec<u8>>,
    published: u64,
    send_errors: u64,
    first_error: Option<io::Error>,
}

impl Sender {
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
    let run_id: u32 = {
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        (t.as_nanos() as u32) ^ std::process::id().rotate_left(16)
    };
    let mut tx = Sender {
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
    let mut per_second: Vec<(u64, u64)> = Vec::new(); // (published, errors) per second
    let cpu0 = rusage_ns(libc::RUSAGE_SELF);
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    let mut interrupted = None;
    match plan.pace {
        Pace::Burst(n) => {
            while tx.published < n && tx.first_error.is_none() {
                let k = ((n - tx.published) as usize).min(BATCH);
                tx.send_batch(k);
                tick(&mut per_second, t0, &tx, bar.as_ref(), n);
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
                tick(&mut per_second, t0, &tx, bar.as_ref(), count.unwrap_or(0));
                let next = t0 + Duration::from_nanos((tx.published as f64 * gap) as u64);
                let sleep = next
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(50));
                std::thread::sleep(sleep.min(Duration::from_millis(100)));
            }
        }
    }
    let send_time = t0.elapsed();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let cpu1 = rusage_ns(libc::RUSAGE_SELF);

    // FIN until REPORT, bounded by --fin-timeout.
    let report = fin_exchange(&tx.sock, run_id, tx.published, plan.fin_timeout)?;
    let kernel_after = snmp::read(v6);
    drop(signals);

    let mut notes = vec![
        "one-way latency compares CLOCK_MONOTONIC stamps of sender and sink: meaningful only \
         on one host"
            .to_string(),
    ];
    let delta = match (&kernel_before, &kernel_after) {
        (Some(b), Some(a)) => Some(a.since(b).rcvbuf_errors),
        _ => None,
    };
    notes.push(
        "kernel_rcvbuf_errors_delta is the machine-wide Udp RcvbufErrors counter: it matches \
         `lost` only when the sink is on this host and nothing else drops UDP meanwhile"
            .into(),
    );
    let lost = report
        .as_ref()
        .map(|r| tx.published.saturating_sub(r.received));
    let one_way = report
        .as_ref()
        .and_then(|r| LatencyHist::from_v2_base64(&r.latency_hist).ok())
        .filter(|h| !h.is_empty())
        .map(|h| h.summary());
    let mut failure = None;
    if let Some(sig) = &interrupted {
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
    if report.is_none() && failure.is_none() {
        failure = Some(format!(
            "the sink at {} did not answer FIN within {:.1} s: received and loss are unknown",
            plan.addr,
            plan.fin_timeout.as_secs_f64()
        ));
    }
    let received = report.as_ref().map_or(0, |r| r.received);
    let secs = send_time.as_secs_f64();
    let user = (cpu1.0 - cpu0.0) as f64 / 1e9;
    let system = (cpu1.1 - cpu0.1) as f64 / 1e9;
    let busy = (user + system) / secs.max(1e-9);
    if busy >= 0.9 {
        notes.push(format!(
            "the sender was busy {:.0}% of the time: it may not have reached the requested rate",
            busy * 100.0
        ));
    }
    let rep = LoadReport {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        sockscope_version: env!("CARGO_PKG_VERSION").into(),
        workload: "udp".into(),
        target: plan.addr.to_string(),
        config,
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_s: secs,
        complete: failure.is_none(),
        end_reason: match (&interrupted, plan.pace) {
            (Some(s), _) => format!("signal:{s}"),
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
        connect_latency: None,
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
        intervals: intervals_of(&per_second),
        bytes: Bytes {
            sent: tx.published * plan.size as u64,
            received: 0,
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: if tx.published > 0 {
                (user + system) * 1e6 / tx.published as f64
            } else {
                0.0
            },
            thread_cpu_share: vec![busy],
            saturated: busy >= 0.9,
        },
        udp: Some(UdpResult {
            published: tx.published,
            send_errors: tx.send_errors,
            sndbuf_granted,
            lost,
            loss_ratio: lost.map(|l| {
                if tx.published > 0 {
                    l as f64 / tx.published as f64
                } else {
                    0.0
                }
            }),
            one_way_latency: one_way,
            kernel_rcvbuf_errors_delta: delta,
            sink: report,
        }),
        notes,
    };
    Ok((rep, failure))
}

/// Cumulative (published, errors) at the end of each second so far; the
/// progress bar follows.
fn tick(
    per_second: &mut Vec<(u64, u64)>,
    t0: Instant,
    tx: &Sender,
    bar: Option<&indicatif::ProgressBar>,
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
                t_s: i as u64,
                transactions: p - prev.0,
                errors: e - prev.1,
                p50_ns: None,
                p99_ns: None,
                max_ns: None,
            };
            prev = (p, e);
            iv
        })
        .collect()
}

fn progress(plan: &UdpPlan, quiet: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let len = match plan.pace {
        Pace::Burst(n) => n,
        Pace::Rate { count: Some(c), .. } => c,
        Pace::Rate { .. } => 0,
    };
    let bar = if len > 0 {
        indicatif::ProgressBar::new(len)
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!("udp {} [{{bar:30}}] {{msg}}", plan.addr))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    Some(bar)
}

/// Sends FIN every 100 ms until a REPORT for `run` arrives or `limit`
/// passes.
fn fin_exchange(
    sock: &UdpSocket,
    run: u32,
    published: u64,
    limit: Duration,
) -> Result<Option<SinkReport>> {
    let mut fin = [0u8; HEADER_LEN];
    Header {
        run,
        seq: published,
        sent_ns: monotonic_ns(),
        kind: Kind::Fin,
    }
    .encode(&mut fin);
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .context("setting a receive timeout")?;
    let end = Instant::now() + limit;
    let mut buf = vec![0u8; 65536];
    while Instant::now() < end {
        // ECONNREFUSED here means nothing listens: keep trying until the
        // limit, the sink may be starting (bounded either way).
        let _ = sock.send(&fin);
        let until = (Instant::now() + Duration::from_millis(100)).min(end);
        while Instant::now() < until {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    if let Some(h) = Header::decode(&buf[..n]) {
                        if h.kind == Kind::Report && h.run == run {
                            let rep: SinkReport = serde_json::from_slice(&buf[HEADER_LEN..n])
                                .context("the sink's report is not valid JSON")?;
                            return Ok(Some(rep));
                        }
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => break,
                Err(e) => return Err(e).context("waiting for the sink's report"),
            }
        }
    }
    Ok(None)
}
