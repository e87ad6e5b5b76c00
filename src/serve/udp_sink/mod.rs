//! `sockscope serve udp-sink`: receives the sequenced datagrams of
//! `load udp` (crate::proto::udp), accounts each run, answers each run's
//! FINs with a REPORT (at the run's own address, never with more bytes than
//! the FIN), and sets its own loss beside the kernel's drop counters. The
//! runs it tracks and the records it keeps are bounded (see [`table`]).
//!
//! Datagrams are read with recvmmsg into small buffers with MSG_TRUNC: only
//! the 32-byte header matters, and the true length is still reported, so
//! a batch of 64 datagrams costs one syscall and 4 KiB of buffers whatever
//! their size. Receive times are taken after each batch, so the one-way
//! latency includes the time a datagram waited in the socket queue, which
//! is what an application sees.

pub mod table;
pub mod tracker;

use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use socket2::{Domain, Protocol, Socket, Type};

use self::table::{MAX_LIVE, MAX_RECORDS, RunTable, Slot};
use self::tracker::RunTracker;
use super::signals::{block_stop_signals, timeout_ms};
use super::{UdpSinkSpec, announce, cpu_times, finish};
use crate::clock::monotonic_ns;
use crate::procfs::snmp;
use crate::proto::udp::{Header, Kind, SinkReport, need_datagram, report_datagram};
use crate::report::serve::udp_sink::{
    KernelDrops, RunRecord, SCHEMA, SCHEMA_VERSION, UdpSinkReport,
};
use crate::report::units::fmt_ns_as_us;
use crate::signals::{Signals, signal_name};

/// Datagrams per recvmmsg.
const BATCH: usize = 64;
/// Bytes kept of each datagram: the header (the rest is padding).
const KEEP: usize = 64;
/// Batches read per wakeup before signals and deadlines are checked again.
const BATCHES_PER_WAKE: usize = 64;
/// Runs whose loss line is printed as their first FIN arrives; later ones
/// are only in the summary and the JSON (a flood of runs must not fill a
/// log).
const MAX_PRINTED_RUNS: u64 = 256;
/// Runs listed in the summary printed at exit (the latest ones).
const SUMMARY_RUNS: usize = 64;
/// With --expect: how long to wait for the run's FIN once the count is
/// reached, so the sender still gets its REPORT.
const FIN_GRACE: Duration = Duration::from_secs(1);

/// State of a running sink.
struct Sink {
    sock: UdpSocket,
    table: RunTable,
    counts: Counts,
    quiet: bool,
}

/// The sink's own counters (see UdpSinkReport).
#[derive(Default)]
struct Counts {
    datagrams: u64,
    foreign: u64,
    untracked: u64,
    send_errors: u64,
    fins_too_short: u64,
    fins_wrong_source: u64,
    data_wrong_source: u64,
    /// Loss lines printed as runs' first FINs arrived.
    printed: u64,
}

/// Runs `serve udp-sink` until --expect, the idle timeout or a signal;
/// returns the exit status.
pub fn run(args: &UdpSinkSpec, quiet: bool) -> Result<u8> {
    let mut signals = block_stop_signals()?;
    let (sock, bound, granted) = bind(args.listen, args.rcvbuf)?;
    let v6 = bound.is_ipv6();
    let rmem_max = read_sysctl("/proc/sys/net/core/rmem_max");
    let snmp0 = snmp::read(v6);
    announce(&bound.into(), args.json.as_deref());
    let t0 = Instant::now();
    if !quiet {
        let asked = match args.rcvbuf {
            Some(b) => format!("{b} bytes requested, "),
            None => "system default, ".to_string(),
        };
        crate::progress::say!(
            "serve udp-sink: receive buffer {asked}{granted} granted (SO_RCVBUF read back; \
             net.core.rmem_max {}); stop with Ctrl-C or SIGTERM",
            rmem_max.map_or("unknown".into(), |v| v.to_string())
        );
    }
    let mut sink = Sink {
        sock,
        table: RunTable::new(MAX_LIVE, MAX_RECORDS, granted),
        counts: Counts::default(),
        quiet,
    };
    let idle = (args.idle_timeout > 0.0).then(|| Duration::from_secs_f64(args.idle_timeout));
    let end_reason = sink.serve(&mut signals, idle, args.expect)?;
    let snmp1 = snmp::read(v6);
    let duration = t0.elapsed().as_secs_f64();

    let kernel = match (snmp0, snmp1) {
        (Some(a), Some(b)) => {
            let d = b.since(&a);
            Some(KernelDrops {
                source: snmp::source(v6).to_string(),
                rcvbuf_errors: d.rcvbuf_errors,
                in_errors: d.in_errors,
            })
        }
        _ => None,
    };
    let (user, system) = cpu_times();
    let c = &sink.counts;
    let rep = UdpSinkReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        listen: bound.to_string(),
        rcvbuf_requested: args.rcvbuf,
        rcvbuf_granted: granted,
        rmem_max,
        end_reason,
        duration_s: duration,
        datagrams: c.datagrams,
        foreign: c.foreign,
        untracked_runs: c.untracked,
        report_send_errors: c.send_errors,
        fins_too_short: c.fins_too_short,
        fins_wrong_source: c.fins_wrong_source,
        data_wrong_source: c.data_wrong_source,
        max_tracked_runs: MAX_LIVE as u64,
        runs_evicted: sink.table.evicted,
        runs_refused: sink.table.refused,
        max_run_records: MAX_RECORDS as u64,
        runs_dropped: sink.table.dropped.clone(),
        runs: sink.table.records(),
        kernel,
        cpu_user_s: user,
        cpu_system_s: system,
        notes: vec![
            "one-way latency is receive time (CLOCK_MONOTONIC, after recvmmsg) minus the \
             sender's stamp: meaningful only with sender and sink on one host"
                .into(),
            "kernel counters are per network namespace: other UDP sockets' drops count too".into(),
        ],
    };
    finish(&rep, render, args.json.as_deref(), quiet)
}

/// Binds the socket, sets the receive buffer before any datagram can
/// arrive, and reads back what the kernel granted.
fn bind(addr: SocketAddr, rcvbuf: Option<u64>) -> Result<(UdpSocket, SocketAddr, u64)> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .context("creating a UDP socket")?;
    if let Some(b) = rcvbuf {
        // Plain SO_RCVBUF, not SO_RCVBUFFORCE even as root: the experiment
        // shows what an unprivileged application gets.
        s.set_recv_buffer_size(b as usize)
            .with_context(|| format!("setting SO_RCVBUF to {b}"))?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true).context("setting IPV6_V6ONLY")?;
    }
    s.bind(&addr.into()).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EADDRINUSE) => " (another socket is using that port)",
            Some(libc::EADDRNOTAVAIL) => " (no local interface has that address)",
            _ => "",
        };
        anyhow!("cannot bind UDP {addr}: {e}{hint}")
    })?;
    s.set_nonblocking(true)
        .context("making the socket non-blocking")?;
    let granted = s.recv_buffer_size().context("reading SO_RCVBUF back")? as u64;
    let bound = s
        .local_addr()
        .context("getsockname")?
        .as_socket()
        .context("the socket has no IP address")?;
    Ok((s.into(), bound, granted))
}

fn read_sysctl(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Sink {
    /// Reads until a stop condition; returns the end reason.
    fn serve(
        &mut self,
        signals: &mut Signals,
        idle: Option<Duration>,
        expect: Option<u64>,
    ) -> Result<String> {
        let mut last_rx: Option<Instant> = None;
        let mut expect_met: Option<Instant> = None;
        loop {
            if let Some(name) = signals.pending().map(|si| signal_name(si.ssi_signo)) {
                return Ok(format!("signal:{name}"));
            }
            let first = self.table.first_run();
            if let (Some(n), None) = (expect, expect_met)
                && first.is_some_and(|(received, _)| received >= n)
            {
                expect_met = Some(Instant::now());
            }
            if let Some(t) = expect_met
                && (first.is_some_and(|(_, answered)| answered) || t.elapsed() >= FIN_GRACE)
            {
                return Ok("expect".into());
            }
            let idle_until = idle.zip(last_rx).map(|(d, t)| t + d);
            if idle_until.is_some_and(|t| Instant::now() >= t) {
                return Ok("idle".into());
            }
            let next = [idle_until, expect_met.map(|t| t + FIN_GRACE)]
                .into_iter()
                .flatten()
                .min();
            let timeout = timeout_ms(next, Duration::from_secs(1));
            let mut pfds = [
                PollFd::new(self.sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            ];
            match poll(
                &mut pfds,
                PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e).context("poll"),
            }
            if self.drain_socket(expect)? > 0 {
                last_rx = Some(Instant::now());
            }
        }
    }

    /// Reads what is queued, a bounded number of batches; returns the
    /// datagrams read.
    fn drain_socket(&mut self, expect: Option<u64>) -> Result<u64> {
        let mut bufs = [[0u8; KEEP]; BATCH];
        let mut total = 0;
        for _ in 0..BATCHES_PER_WAKE {
            let got = recv_batch(self.sock.as_raw_fd(), &mut bufs)?;
            let now = monotonic_ns();
            for (i, (len, from)) in got.iter().enumerate() {
                self.datagram(&bufs[i][..(*len).min(KEEP)], *len, *from, now);
            }
            total += got.len() as u64;
            // Stop at the expected count so the run ends where asked.
            let met = expect.is_some_and(|n| {
                self.table
                    .first_run()
                    .is_some_and(|(received, _)| received >= n)
            });
            if got.len() < BATCH || met {
                break;
            }
        }
        Ok(total)
    }

    /// Accounts one datagram of `len` bytes (`head`: its first bytes)
    /// read at `now`, and answers it if it is a FIN of its run's address.
    fn datagram(&mut self, head: &[u8], len: usize, from: Option<SocketAddr>, now: u64) {
        let c = &mut self.counts;
        c.datagrams += 1;
        // A datagram without an address cannot be tied to a run or answered.
        let (Some(h), Some(from)) = (Header::decode(head), from) else {
            c.foreign += 1;
            return;
        };
        if !matches!(h.kind, Kind::Data | Kind::Fin) {
            c.foreign += 1;
            return;
        }
        let granted = self.table.granted();
        let refused = self.table.refused;
        match (self.table.admit(h.run, from, now), h.kind) {
            (Slot::WrongSource, Kind::Fin) => c.fins_wrong_source += 1,
            (Slot::WrongSource, _) => c.data_wrong_source += 1,
            (Slot::Full, Kind::Fin) => {
                // Answered all the same, so the sender learns that the sink
                // has nothing of its run and why, instead of waiting.
                let mut rep = RunTracker::new(h.run).report(granted);
                rep.runs_refused = refused + 1;
                answer_fin(&self.sock, c, &rep, h.seq, len, from);
            }
            (Slot::Full, _) => c.untracked += 1,
            (Slot::Live(l), Kind::Fin) => {
                let first = l.tracker.published.is_none();
                l.tracker.published = Some(h.seq);
                let mut rec = l.record(granted);
                rec.report.runs_refused = refused;
                if first && !self.quiet {
                    print_run_line(c, &rec);
                }
                if answer_fin(&self.sock, c, &rec.report, h.seq, len, from) {
                    l.tracker.fins += 1;
                }
            }
            (Slot::Live(l), _) => l.tracker.record(h.seq, h.sent_ns, now, len),
            (Slot::Retired(r), Kind::Fin) => {
                r.record.set_published(h.seq);
                r.record.report.runs_refused = refused;
                if answer_fin(&self.sock, c, &r.record.report, h.seq, len, from) {
                    r.record.fins_answered += 1;
                }
            }
            (Slot::Retired(r), _) => {
                r.record.report.after_eviction += 1;
                c.untracked += 1;
            }
        }
    }
}

/// Prints a run's loss line as its first FIN arrives, for the first
/// MAX_PRINTED_RUNS runs.
fn print_run_line(c: &mut Counts, rec: &RunRecord) {
    c.printed += 1;
    if c.printed <= MAX_PRINTED_RUNS {
        crate::progress::say!("{}", run_line(rec));
    }
    if c.printed == MAX_PRINTED_RUNS {
        crate::progress::say!(
            "serve udp-sink: {MAX_PRINTED_RUNS} runs printed; further runs are only in the \
             summary and the JSON"
        );
    }
}

/// Answers a FIN of `fin_len` bytes from `to`: with the REPORT (header,
/// `seq` = published, then the JSON) when it is no longer than the FIN,
/// else with a NEED saying how long the FIN must be, so the answer is never
/// larger than the datagram that asked. Returns whether a REPORT went out.
fn answer_fin(
    sock: &UdpSocket,
    c: &mut Counts,
    rep: &SinkReport,
    published: u64,
    fin_len: usize,
    to: SocketAddr,
) -> bool {
    let Ok(report) = report_datagram(rep, published) else {
        c.send_errors += 1;
        return false;
    };
    let fits = report.len() <= fin_len;
    let reply: &[u8] = if fits {
        &report
    } else {
        c.fins_too_short += 1;
        &need_datagram(rep.run, report.len())
    };
    // Non-blocking: a full send buffer loses this answer, and the sender's
    // next FIN asks again.
    if sock.send_to(reply, to).is_err() {
        c.send_errors += 1;
        return false;
    }
    fits
}

/// One recvmmsg (non-blocking, MSG_TRUNC so lengths are the datagrams'
/// true sizes); returns (length, source) per datagram.
fn recv_batch(fd: i32, bufs: &mut [[u8; KEEP]; BATCH]) -> Result<Vec<(usize, Option<SocketAddr>)>> {
    // SAFETY: all-zero is a valid sockaddr_storage, iovec and mmsghdr.
    let mut addrs: [libc::sockaddr_storage; BATCH] = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut iovs: [libc::iovec; BATCH] = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { MaybeUninit::zeroed().assume_init() };
    for i in 0..BATCH {
        iovs[i].iov_base = bufs[i].as_mut_ptr().cast();
        iovs[i].iov_len = KEEP;
        msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
        msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
        msgs[i].msg_hdr.msg_iov = &mut iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    let n = loop {
        // SAFETY: every pointer above points into arrays that outlive the
        // call, with the lengths given.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => break 0,
            // An ICMP error queued on the socket; it concerns a send, not
            // what we receive.
            Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH) => continue,
            _ => return Err(e).context("recvmmsg"),
        }
    };
    Ok((0..n)
        .map(|i| {
            let from = sockaddr(&addrs[i], msgs[i].msg_hdr.msg_namelen);
            (msgs[i].msg_len as usize, from)
        })
        .collect())
}

fn sockaddr(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    let len = len as usize;
    match ss.ss_family as i32 {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                u32::from_be(a.sin6_flowinfo),
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The loss report of one run, one line.
fn run_line(r: &RunRecord) -> String {
    let rep = &r.report;
    let loss = match (r.published, r.lost, r.loss_pct) {
        (Some(p), Some(l), Some(pct)) => format!(
            "published {p}, received {}, lost {l} ({pct:.2}%)",
            rep.received
        ),
        _ => format!("received {} (no FIN yet: loss unknown)", rep.received),
    };
    let l = &r.latency;
    format!(
        "run {:08x}: {loss}, interior gaps {}, reordered {}, duplicates {}, jitter {}, \
         one-way latency p50 {} p99 {} max {}",
        rep.run,
        rep.interior_gaps,
        rep.reordered,
        rep.duplicates,
        fmt_ns_as_us(rep.jitter_ns),
        fmt_ns_as_us(l.p50_ns as f64),
        fmt_ns_as_us(l.p99_ns as f64),
        fmt_ns_as_us(l.max_ns as f64),
    )
}

/// The summary printed on stderr at exit.
fn render(r: &UdpSinkReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "serve udp-sink on {}: ended by {} after {:.1} s; {} datagrams read, {} foreign, \
         receive buffer {} granted",
        r.listen,
        r.end_reason.trim_start_matches("signal:"),
        r.duration_s,
        r.datagrams,
        r.foreign,
        r.rcvbuf_granted
    );
    let hidden = r.runs.len().saturating_sub(SUMMARY_RUNS);
    if hidden > 0 {
        let _ = writeln!(s, "  ({hidden} earlier runs: see the JSON)");
    }
    for run in &r.runs[hidden..] {
        let _ = writeln!(s, "  {}", run_line(run));
    }
    if r.runs_evicted + r.runs_refused > 0 || r.fins_wrong_source + r.data_wrong_source > 0 {
        let _ = writeln!(
            s,
            "  {} runs evicted (more than {} at once), {} datagrams of new runs refused (every \
             tracked run receiving), {} records dropped; ignored from another address than \
             their run's: {} FINs, {} DATA",
            r.runs_evicted,
            r.max_tracked_runs,
            r.runs_refused,
            r.runs_dropped.runs,
            r.fins_wrong_source,
            r.data_wrong_source
        );
    }
    if let Some(k) = &r.kernel {
        let ours: u64 = r.runs.iter().filter_map(|x| x.lost).sum::<u64>() + r.runs_dropped.lost;
        let _ = writeln!(
            s,
            "  kernel: RcvbufErrors +{}, InErrors +{} over the run (sink's own loss count: {ours}; \
             {}: all UDP sockets of this network namespace)",
            k.rcvbuf_errors, k.in_errors, k.source
        );
    }
    s
}
