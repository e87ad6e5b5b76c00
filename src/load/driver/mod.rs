//! The per-worker half of the TCP driver: what every worker has, whatever
//! its connections ([`WorkerCore`]: poller, read buffer, open-loop schedule,
//! idle list, count quota), the event loop that drives a worker's
//! connections ([`drive`]: stop conditions, housekeeping, open-loop release
//! and dispatch, the wait that paces it all, the drain at the end), and
//! what a worker reports when it ends ([`WorkerEnd`]).
//!
//! Three connection state machines plug in through [`WorkerConns`]:
//! `persistent` (tcp-rr), `per_txn` (tcp-crr) and `datagram` (udp-rr's
//! UDP sockets); a workload picks one by its `ConnMode` and supplies only
//! its exchange. The two TCP ones move their bytes the same way, plain or
//! TLS, through the functions here: [`read_conn`], [`write_conn`], and for
//! TLS [`WorkerCore::tls_session`] then [`WorkerCore::handshake`] (one
//! handshake path, so a fix is made once).
//!
//! Waking from a timer takes tens of microseconds on a VM (33 us on average
//! here, with timer slack at 1 ns), and in open loop every microsecond a
//! send is late counts as latency. Polling instead of sleeping would hide
//! that, but on a machine where the target shares the CPUs, a spinning
//! generator steals the target's CPU and makes things worse (measured: p90
//! send lag went from tens of microseconds to milliseconds). So the loop
//! sleeps (timer slack 1 ns, at least 50 us at a time so high rates go out
//! in small batches) and the lateness is measured and reported as `send
//! lag`, the generator's own share of the latency.
//!
//! In closed loop nothing is due at a precise time but housekeeping and
//! the end of the run, so the wait blocks with no timeout and a timerfd
//! ([`WakeTimer`], re-armed only when the next wake-up moves: every 10 ms)
//! wakes it for those. A wait with a timeout arms and cancels a kernel
//! timer every time it sleeps, which at one connection means once per
//! transaction; neper's tcp_rr client waits the same way (no timeout).
//!
//! A duration run ends gracefully: once the measured window is over the
//! loop stops issuing, closes the connections with nothing in flight and
//! waits (at most [`drain_limit`]) for the answers still owed, so the target
//! sees orderly closes instead of resets from the generator's teardown.

pub mod clock;
pub mod datagram;
pub mod engine;
pub mod per_txn;
pub mod persistent;
pub mod plan;
pub mod socket;
pub mod stalls;
pub mod steps;
pub mod tally;
pub mod tcp_report;
pub mod timerfd;
pub mod tls;
pub mod watch;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use self::socket::ReadOutcome;
use self::stalls::{Stalls, Stamps};
use crate::load::driver::plan::{Stop, TcpPlan, WorkerCtx};
use crate::load::driver::tally::WorkerTally;
use crate::load::driver::tls::{Handshake, TlsConn};
use crate::load::schedule::Schedule;
use crate::load::workload::ErrorClass;
use crate::poller::{self, Poller, Ready};

/// How often timeouts and reconnects are checked.
pub const HOUSEKEEPING_NS: u64 = 10_000_000;
/// Shortest sleep between open-loop releases.
const QUANTUM_NS: u64 = 50_000;

/// What every worker has, whatever its connections. Owned by the driver;
/// a connection state machine embeds one.
pub struct WorkerCore<'a> {
    /// The run.
    pub plan: &'a TcpPlan,
    /// This worker's share of it.
    pub ctx: &'a WorkerCtx,
    /// The worker's epoll instance (token: connection index).
    pub poller: Poller,
    /// Read buffer shared by the worker's connections.
    pub buf: Vec<u8>,
    /// TLS runs: what a read takes from a socket, before decryption into
    /// `buf` (the same size, so the plaintext of one read always fits);
    /// empty otherwise.
    pub wire: Vec<u8>,
    /// Open-loop schedule (None: closed loop).
    pub sched: Option<Schedule>,
    /// Open loop: connections offered for the next send (a connection may
    /// be listed and no longer free: the dispatch asks it again).
    pub idle: Vec<usize>,
    /// Open loop: the release stamps of the sends in the backlog.
    pub stamps: Stamps,
    /// The loop's own stall time (late wakes).
    pub stalls: Stalls,
    /// Measured requests issued so far (count quota).
    pub issued_measured: u64,
}

impl<'a> WorkerCore<'a> {
    /// A worker's core; `response_len` (when fixed) sizes the read buffer.
    pub fn new(
        plan: &'a TcpPlan,
        ctx: &'a WorkerCtx,
        response_len: Option<usize>,
    ) -> io::Result<Self> {
        let buf_len = response_len.unwrap_or(0).clamp(64 * 1024, 1 << 20);
        Ok(Self {
            plan,
            ctx,
            poller: Poller::new(1024)?,
            buf: vec![0u8; buf_len],
            wire: if plan.tls.is_some() {
                vec![0u8; buf_len]
            } else {
                Vec::new()
            },
            sched: ctx
                .rate
                .as_ref()
                .map(|r| Schedule::new(r, ctx.clock.now(), ctx.measure_from, ctx.quota)),
            idle: Vec::new(),
            stamps: Stamps::default(),
            stalls: Stalls::default(),
            issued_measured: 0,
        })
    }

    /// The source address for connection (or socket) `i` of this worker,
    /// `turn` its reopen count (0 for connections opened once): spread over
    /// `--source-ips` so workers and turns do not all start at the first;
    /// None when the run binds no source.
    pub fn source_for(&self, i: usize, turn: usize) -> Option<std::net::IpAddr> {
        let sources = &self.plan.sources;
        (!sources.is_empty()).then(|| sources[(self.ctx.index * 7919 + i + turn) % sources.len()])
    }

    /// Counts a request issued for intended time `intended` against the
    /// measured quota (warm-up requests do not count).
    #[inline]
    pub fn count_issued(&mut self, intended: u64) {
        if intended >= self.ctx.measure_from {
            self.issued_measured += 1;
        }
    }

    /// A TLS session for a connection whose TCP connect just completed
    /// (None when the run speaks plain TCP); a failure comes back classed
    /// (its reason kept in the tally). The connection then handshakes
    /// through [`handshake`](Self::handshake) before it takes requests.
    pub fn tls_session(&self, tally: &mut WorkerTally) -> Result<Option<TlsConn>, ErrorClass> {
        match &self.plan.tls {
            None => Ok(None),
            Some(client) => client
                .connection()
                .map(Some)
                .map_err(|f| tally.tls_failure(f)),
        }
    }

    /// The one TLS handshake step of every connection state machine: takes
    /// the handshake of connection `token` (socket `fd`, session `tls`) as
    /// far as the socket allows, from any readiness report. Done, the
    /// connection is counted connected (its connect took `connect_ns`) and
    /// handshaken (since `since`), and this returns true; still waiting on
    /// the peer, the poller watches the socket for what rustls wants
    /// (writable too while handshake bytes wait for room) and this returns
    /// false. A failure comes back classed; the caller closes the
    /// connection.
    #[allow(clippy::too_many_arguments)]
    pub fn handshake(
        &mut self,
        token: usize,
        fd: RawFd,
        tls: &mut TlsConn,
        since: u64,
        connect_ns: u64,
        now: u64,
        tally: &mut WorkerTally,
    ) -> Result<bool, ErrorClass> {
        let step = tls.handshake(
            fd,
            &mut self.wire,
            &mut tally.bytes_sent,
            &mut tally.bytes_received,
        );
        match step {
            Ok(Handshake::Done) => {
                // A fresh reading, not the batch's `now`: a handshake that
                // began in this same batch (a reconnect's connect completing
                // just before) would otherwise last 0 ns (issue 22: 1 ns
                // minimums whenever connections were reopened).
                let end = self.ctx.clock.now().max(since + 1);
                tally.connected(now, connect_ns);
                tally.tls_handshake(end, end - since, tls.negotiated());
                Ok(true)
            }
            Ok(Handshake::Pending { write }) => {
                let ev = if write {
                    poller::IN | poller::OUT
                } else {
                    poller::IN
                };
                self.poller
                    .modify(fd, token as u64, ev)
                    .map_err(|e| ErrorClass::of(&e))?;
                Ok(false)
            }
            Err(f) => Err(tally.tls_failure(f)),
        }
    }
}

/// A worker's connections, as the event loop drives them.
pub trait WorkerConns<'a> {
    /// The driver-owned part of the worker.
    fn core(&mut self) -> &mut WorkerCore<'a>;
    /// The same, shared.
    fn core_ref(&self) -> &WorkerCore<'a>;
    /// Timeouts and reconnects (closed loop: also restarts what waited).
    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut WorkerTally);
    /// One readiness report.
    fn handle(&mut self, ev: Ready, tally: &mut WorkerTally);
    /// Requests issued and not answered yet (per transaction: exchanges
    /// under way).
    fn in_flight(&self) -> u64;
    /// Drain: closes every connection with nothing in flight (an orderly
    /// FIN, after a TLS close_notify: no unread data, no answer still
    /// coming).
    fn close_idle(&mut self, tally: &mut WorkerTally);
    /// Open loop: connection `i` comes off the idle list; true when it can
    /// take a send now.
    fn take_idle(&mut self, i: usize, now: u64) -> bool;
    /// Open loop: issues the send intended at `intended` on connection `i`.
    fn issue(&mut self, i: usize, intended: u64, now: u64, tally: &mut WorkerTally);
    /// Open loop: `waiting` sends are due and no connection is free; a
    /// driver that may open more (--max-conns) starts one for each that
    /// no connection being opened will take. None opens nothing.
    fn grow(&mut self, _waiting: usize, _now: u64, _tally: &mut WorkerTally) {}
    /// Once the loop is over: what the connections leave that only the
    /// state machine knows (connections established, its own records);
    /// [`run`] adds the rest.
    fn finish(&mut self) -> WorkerEnd;
}

/// Poller token of the worker's [`WakeTimer`] (connection tokens are
/// indices, far below it).
const TIMER_TOKEN: u64 = u64::MAX;

/// A one-shot timerfd in the worker's poller: in closed loop it wakes the
/// wait (which has no timeout) for housekeeping and the end of the run.
struct WakeTimer {
    fd: OwnedFd,
    /// The run-clock time it is armed for, if it is.
    armed: Option<u64>,
}

impl WakeTimer {
    /// A disarmed timer, registered in `poller` under [`TIMER_TOKEN`].
    fn new(poller: &Poller) -> io::Result<Self> {
        let fd = crate::load::driver::timerfd::create()?;
        poller.add(fd.as_raw_fd(), TIMER_TOKEN, poller::IN)?;
        Ok(Self { fd, armed: None })
    }

    /// Arms the timer for run-clock time `at` (it is `now`), unless it
    /// already is: a syscall only when the next wake-up moves.
    fn arm(&mut self, at: u64, now: u64) -> io::Result<()> {
        if self.armed == Some(at) {
            return Ok(());
        }
        crate::load::driver::timerfd::fire_after(&self.fd, at.saturating_sub(now))?;
        self.armed = Some(at);
        Ok(())
    }

    /// The timer fired: reads its expiration count, so the level-triggered
    /// poller stops reporting it, and leaves it disarmed.
    fn fired(&mut self) {
        // Not fired (a report that a re-arm made stale) needs nothing done.
        let _ = crate::load::driver::timerfd::drain(&self.fd);
        self.armed = None;
    }
}

/// Count mode: everything this worker issues has been issued and answered.
fn count_done<'a, W: WorkerConns<'a>>(w: &W) -> bool {
    let core = w.core_ref();
    core.ctx
        .issued_all(core.sched.as_ref(), core.issued_measured)
        && w.in_flight() == 0
}

/// Open loop: releases the sends due by `now` into the backlog and hands
/// them to idle connections. A release's lateness is the generator's
/// send lag when a connection was free for it (fewer sends queued ahead
/// of it than connections idle); every release's lateness is in the
/// release lag. A send that had no free connection waits for one, and
/// that wait, from its release to its send less the generator's own
/// stalls meanwhile (see [`stalls`]), is the connection wait: the
/// target's, or the pool's (every connection had a request in flight).
pub fn release_and_dispatch<'a, W: WorkerConns<'a>>(w: &mut W, now: u64, tally: &mut WorkerTally) {
    let core = w.core();
    // Nothing new goes out once the window has ended (the drain).
    if core.ctx.end.is_some_and(|e| now >= e) {
        return;
    }
    let Some(sched) = core.sched.as_mut() else {
        return;
    };
    let idle = core.idle.len();
    let queued_before = sched.backlog.len();
    sched.release(now, |t, lag, ahead| tally.release_lag(t, lag, ahead < idle));
    let released = sched.backlog.len().saturating_sub(queued_before);
    let stamp = core.stalls.stamp(now);
    core.stamps.push_back(stamp, released);
    loop {
        let core = w.core();
        let Some(&intended) = core.sched.as_ref().and_then(|s| s.backlog.front()) else {
            break;
        };
        let Some(i) = core.idle.pop() else {
            break;
        };
        if !w.take_idle(i, now) {
            continue;
        }
        let core = w.core();
        let queued = core.sched.as_mut().map_or(0, |s| {
            s.backlog.pop_front();
            s.backlog.len()
        });
        let stamp = core.stamps.pop_front();
        let stalled = core.stalls.total;
        w.issue(i, intended, now, tally);
        let core = w.core();
        if core
            .sched
            .as_ref()
            .is_some_and(|s| s.backlog.len() > queued)
        {
            // Put back (a datagram socket that could not send): it waits on.
            if let Some(s) = stamp {
                core.stamps.push_front(s);
            }
        } else if let Some(s) = stamp.filter(|s| s.at < now) {
            tally.conn_wait(intended, s.wait_until(now, stalled));
        }
    }
    let waiting = w.core().sched.as_ref().map_or(0, |s| s.backlog.len());
    if waiting > 0 && w.core().idle.is_empty() {
        w.grow(waiting, now, tally);
    }
}

/// Longest wait for the answers still in flight once a duration run's
/// window has ended: `--timeout`, at most 1 s.
pub fn drain_limit(timeout: Duration) -> Duration {
    timeout.min(Duration::from_secs(1))
}

/// Runs the loop until the worker's share is done. Returns true when count
/// mode gave up because nothing completed for twice the timeout.
pub fn drive<'a, W: WorkerConns<'a>>(w: &mut W, tally: &mut WorkerTally) -> io::Result<bool> {
    let (plan, ctx) = (w.core().plan, w.core().ctx);
    let timeout = plan.timeout.as_nanos() as u64;
    let mut next_housekeeping = 0;
    let mut last_count = 0;
    let mut last_progress = ctx.clock.now();
    // Closed loop: the timer paces the wait. Open loop keeps the wait's own
    // timeout: its wake-up moves with every release anyway.
    let mut timer = match w.core().sched {
        None => Some(WakeTimer::new(&w.core().poller)?),
        Some(_) => None,
    };
    loop {
        let now = ctx.clock.now();
        if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) || count_done(w) {
            return Ok(false);
        }
        if ctx.end.is_some_and(|e| now >= e) {
            // Closing the timerfd takes it out of the poller: the drain
            // waits with timeouts of its own.
            drop(timer);
            drain(w, plan, ctx, tally)?;
            return Ok(false);
        }
        if now >= next_housekeeping {
            w.housekeeping(now, timeout, tally);
            next_housekeeping = now + HOUSEKEEPING_NS;
            // Count mode has no end time: give up when nothing completes
            // for twice the timeout (a dead or stalled target).
            let done = tally.transactions + tally.warmup_transactions;
            if done != last_count {
                last_count = done;
                last_progress = now;
            } else if matches!(plan.stop, Stop::Count(_)) && now - last_progress > 2 * timeout {
                return Ok(true);
            }
        }
        let due = w.core().sched.as_ref().and_then(|s| s.next_due());
        if due.is_some() {
            release_and_dispatch(w, now, tally);
        }
        let mut wake = next_housekeeping;
        if let Some(e) = ctx.end {
            wake = wake.min(e);
        }
        if let Some(d) = due {
            // Never sleep less than a quantum: at high rates sends are
            // released in small batches instead of one timer wake each
            // (a wake costs several microseconds of CPU here).
            wake = wake.min(d.max(now + QUANTUM_NS));
        }
        let timeout = match timer.as_mut() {
            Some(t) => {
                t.arm(wake, now)?;
                None
            }
            None => Some(Duration::from_nanos(wake.saturating_sub(now))),
        };
        let n = w.core().poller.wait(timeout)?;
        if due.is_some() {
            // A wake later than planned is the generator's stall: its CPU
            // (a quota, a busy machine) or its timer, not the target.
            let woke = ctx.clock.now();
            w.core().stalls.woke(wake, woke);
        }
        for k in 0..n {
            let ev = w.core().poller.ready(k);
            if ev.token == TIMER_TOKEN {
                if let Some(t) = timer.as_mut() {
                    t.fired();
                }
                continue;
            }
            w.handle(ev, tally);
        }
    }
}

/// Runs worker `w` until its share of the run is done ([`drive`]), ends
/// its tally and says what it leaves: the state machine's own figures
/// ([`WorkerConns::finish`]) and what the driver knows (whether count mode
/// stalled, the requests still in flight, the open-loop backlog). Every
/// connection state machine's `run` ends here.
pub fn run<'a, W: WorkerConns<'a>>(w: &mut W, tally: &mut WorkerTally) -> io::Result<WorkerEnd> {
    let stalled = drive(w, tally)?;
    tally.finish();
    let mut end = w.finish();
    end.stalled = stalled;
    end.unanswered = w.in_flight();
    end.record_backlog(w.core_ref().sched.as_ref());
    Ok(end)
}

/// After the end of a duration run: issues nothing, closes what is idle and
/// waits for the answers still in flight, until none is left, the drain
/// limit passes, or the run is stopped. Answers that arrive now are counted
/// apart (`answered_after_end`); what is still unanswered afterwards is the
/// worker's `unanswered`.
fn drain<'a, W: WorkerConns<'a>>(
    w: &mut W,
    plan: &TcpPlan,
    ctx: &WorkerCtx,
    tally: &mut WorkerTally,
) -> io::Result<()> {
    tally.close_window();
    let deadline = ctx.clock.now() + drain_limit(plan.timeout).as_nanos() as u64;
    loop {
        w.close_idle(tally);
        let now = ctx.clock.now();
        if w.in_flight() == 0
            || now >= deadline
            || ctx.stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(());
        }
        // The stop flag is checked at least every 100 ms.
        let wait = (deadline - now).min(100_000_000);
        let n = w.core().poller.wait(Some(Duration::from_nanos(wait)))?;
        for k in 0..n {
            let ev = w.core().poller.ready(k);
            w.handle(ev, tally);
        }
    }
}

/// What a worker reports besides its tally.
#[derive(Debug, Default)]
pub struct WorkerEnd {
    /// Connections that were established at least once.
    pub established: usize,
    /// Requests in flight when the run ended (not counted as errors).
    pub unanswered: u64,
    /// Open-loop intended sends dropped because the backlog was full.
    pub backlog_overflow: u64,
    /// Open-loop intended sends still waiting for a free connection.
    pub backlog_at_end: u64,
    /// True when count mode gave up for lack of progress.
    pub stalled: bool,
    /// Connections still in their TLS handshake when the run ended.
    pub handshaking: usize,
    /// Connections opened beyond its share of -c (--max-conns).
    pub added: usize,
    /// Persistent connections: every socket that was connected, with the
    /// responses it completed (profile uses them to tell which process
    /// served what).
    pub connections: Vec<ConnTally>,
    /// Datagram sockets (udp-rr): what became of the requests and replies.
    pub datagrams: DatagramCounts,
    /// Why a connection that came up could send no request (HTTP/2: a
    /// server that never sent SETTINGS, or allows no stream): the reason
    /// a run that completed nothing gives when no error names one.
    pub idle_why: Option<&'static str>,
}

/// What a datagram worker (udp-rr) counts besides its tally.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatagramCounts {
    /// Requests sent.
    pub sent: u64,
    /// Well-formed replies that matched no request in flight: answers to
    /// requests already counted lost, or duplicates.
    pub late: u64,
    /// Datagrams too short or malformed to name a request.
    pub garbage: u64,
}

impl DatagramCounts {
    /// Adds another worker's counts.
    pub fn add(&mut self, o: &Self) {
        self.sent += o.sent;
        self.late += o.late;
        self.garbage += o.garbage;
    }
}

/// One connection of a tcp-rr run: its local address and the responses
/// completed on it (warm-up and drain included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnTally {
    /// Local address of the generator's socket.
    pub local: SocketAddr,
    /// Responses completed on it.
    pub transactions: u64,
}

impl WorkerEnd {
    /// Fills in what an open-loop schedule left behind.
    pub fn record_backlog(&mut self, sched: Option<&Schedule>) {
        if let Some(s) = sched {
            self.backlog_overflow = s.overflowed;
            self.backlog_at_end = s.backlog.len() as u64;
        }
    }
}

/// Exponential reconnect backoff, 10 ms doubling up to 1 s: a dead server
/// costs a few attempts per second per connection, never a spin.
#[derive(Clone, Copy, Debug)]
pub struct Backoff(u64);

impl Default for Backoff {
    fn default() -> Self {
        Self(Self::MIN)
    }
}

impl Backoff {
    const MIN: u64 = 10_000_000;
    const MAX: u64 = 1_000_000_000;

    /// The delay to wait now; doubles the next one.
    pub fn next_delay(&mut self) -> u64 {
        let d = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        d
    }

    /// Back to the shortest delay after a success.
    pub fn reset(&mut self) {
        self.0 = Self::MIN;
    }
}

/// One read of a connection's response bytes into `buf`, through TLS when
/// the connection speaks it (`wire` holds the ciphertext), counting bytes
/// in the tally; a failure comes back classed. Both TCP connection state
/// machines read this way.
#[inline]
pub fn read_conn(
    fd: RawFd,
    tls: Option<&mut TlsConn>,
    wire: &mut [u8],
    buf: &mut [u8],
    tally: &mut WorkerTally,
) -> Result<ReadOutcome, ErrorClass> {
    match tls {
        None => match socket::read_some(fd, buf) {
            Ok(r) => {
                if let ReadOutcome::Data(n) = r {
                    tally.bytes_received += n as u64;
                }
                Ok(r)
            }
            Err(e) => Err(ErrorClass::of(&e)),
        },
        Some(t) => t
            .read(
                fd,
                wire,
                buf,
                &mut tally.bytes_sent,
                &mut tally.bytes_received,
            )
            .map_err(|f| tally.tls_failure(f)),
    }
}

/// One write of `out`, a connection's queued request bytes, through TLS
/// when the connection speaks it, counting bytes in the tally; returns how
/// many of them were taken (with TLS, records may still wait in the
/// session: [`TlsConn::wants_write`]). A failure comes back classed. Both
/// TCP connection state machines write this way.
#[inline]
pub fn write_conn(
    fd: RawFd,
    tls: Option<&mut TlsConn>,
    out: &[u8],
    tally: &mut WorkerTally,
) -> Result<usize, ErrorClass> {
    match tls {
        None => match socket::write_some(fd, out) {
            Ok(n) => {
                tally.bytes_sent += n as u64;
                Ok(n)
            }
            Err(e) => Err(ErrorClass::of(&e)),
        },
        Some(t) => t
            .write(fd, out, &mut tally.bytes_sent)
            .map_err(|f| tally.tls_failure(f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_timer_wakes_an_untimed_wait_once() {
        let mut poller = Poller::new(4).unwrap();
        let mut t = WakeTimer::new(&poller).unwrap();
        let start = std::time::Instant::now();
        t.arm(2_000_000, 0).unwrap();
        // Arming for the same time again changes nothing.
        t.arm(2_000_000, 1_000_000).unwrap();
        assert_eq!(poller.wait(None).unwrap(), 1);
        assert!(start.elapsed() >= Duration::from_millis(2));
        assert_eq!(poller.ready(0).token, TIMER_TOKEN);
        t.fired();
        assert_eq!(t.armed, None);
        // Read, it is no longer reported (level-triggered poller).
        assert_eq!(poller.wait(Some(Duration::ZERO)).unwrap(), 0);
        // A time already past fires at once.
        t.arm(5, 10).unwrap();
        assert_eq!(poller.wait(Some(Duration::from_secs(1))).unwrap(), 1);
    }

    #[test]
    fn backoff_is_bounded() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..12).map(|_| b.next_delay()).collect();
        assert_eq!(delays[0], 10_000_000);
        assert_eq!(delays[1], 20_000_000);
        assert_eq!(*delays.last().unwrap(), 1_000_000_000);
        b.reset();
        assert_eq!(b.next_delay(), 10_000_000);
    }
}
