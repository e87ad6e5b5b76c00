//! One relay event loop: its own SO_REUSEPORT listener, and every pair
//! (client connection + its upstream connection) it accepted, driven by
//! level-triggered epoll.
//!
//! A pair's life: accept the client, start a non-blocking connect to the
//! upstream (the client is not read meanwhile: its bytes wait in its
//! socket), then relay. Each direction ends when its source reaches end of
//! stream and everything read has been written (sockmap: and the
//! destination's peer has acknowledged every byte the source received),
//! then the destination's write side is shut down, so a half-close reaches
//! the other side. Once both directions ended the pair is closed. A reset
//! or error on either side resets the other and closes both.

use std::net::{SocketAddr, TcpListener};
use std::ops::ControlFlow;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::counters::RelayCounters;
use super::pump::{Dir, Scratch};
use super::sockmap::{PairKeys, Sockmap};
use super::tcpinfo;
use crate::poller::{self, Poller, Ready};
use crate::serve::accept::{self, AcceptLoop, Acceptor};
use crate::serve::workers::Crew;

const TOKEN_LISTENER: u64 = u64::MAX;
const TOKEN_STOP: u64 = u64::MAX - 1;
const CLIENT: usize = 0;
const UPSTREAM: usize = 1;
/// How often connect and idle timeouts are checked.
const HOUSEKEEPING: Duration = Duration::from_millis(100);
/// How often a sockmap pair waiting for its last bytes to be acknowledged
/// is checked, and for how long at most.
const FLUSH_POLL: Duration = Duration::from_millis(1);
const FLUSH_MAX: Duration = Duration::from_secs(5);
/// How long a stopping relay lets open pairs finish.
pub const DRAIN: Duration = Duration::from_secs(2);

/// How bytes cross the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayPath {
    /// read/write through a buffer.
    Userspace,
    /// splice through a pipe.
    Splice,
    /// The kernel redirects between the sockets (sockmap).
    Sockmap,
}

/// Logs at most one line a second (plus how many were left out), so a
/// failing upstream under load cannot flood stderr.
pub struct RateLog {
    state: Mutex<(Option<Instant>, u64)>,
    quiet: bool,
}

impl RateLog {
    /// A log that prints nothing when `quiet`.
    pub fn new(quiet: bool) -> Self {
        Self {
            state: Mutex::new((None, 0)),
            quiet,
        }
    }

    /// Logs `msg` unless a line went out less than a second ago.
    pub fn log(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        if st.0.is_some_and(|t| now - t < Duration::from_secs(1)) {
            st.1 += 1;
            return;
        }
        let more = std::mem::take(&mut st.1);
        st.0 = Some(now);
        if more > 0 {
            crate::progress::say!("sockscope relay: {msg} ({more} similar events not shown)");
        } else {
            crate::progress::say!("sockscope relay: {msg}");
        }
    }
}

/// What every loop of a relay shares.
pub struct RelayShared {
    /// The upstream address.
    pub upstream: SocketAddr,
    /// The path in use (after any fallback).
    pub path: RelayPath,
    /// The kernel maps, in sockmap mode.
    pub sockmap: Option<Sockmap>,
    /// The stop, the exit notice and --max-conns.
    pub crew: Crew,
    /// --connect-timeout.
    pub connect_timeout: Duration,
    /// --idle-timeout.
    pub idle_timeout: Option<Duration>,
    /// Rate-limited diagnostics.
    pub log: RateLog,
}

struct Pair {
    client: OwnedFd,
    upstream: OwnedFd,
    connecting: Option<Instant>,
    c2u: Dir,
    u2c: Dir,
    keys: Option<PairKeys>,
    /// tcpi_bytes_acked of each socket when linked: 1 for the upstream,
    /// whose SYN counts as an acknowledged byte, 0 for the client.
    acked_base: [u64; 2],
    interest: [u32; 2],
    last_active: Instant,
    flush_since: Option<Instant>,
}

impl Pair {
    fn fd(&self, side: usize) -> RawFd {
        if side == CLIENT {
            self.client.as_raw_fd()
        } else {
            self.upstream.as_raw_fd()
        }
    }

    /// The direction reading from `side`, and the one writing to it.
    fn dirs(&mut self, side: usize) -> (&mut Dir, &mut Dir) {
        if side == CLIENT {
            (&mut self.c2u, &mut self.u2c)
        } else {
            (&mut self.u2c, &mut self.c2u)
        }
    }

    fn wanted(&self, side: usize) -> u32 {
        if self.connecting.is_some() {
            // The client is not read until the upstream answers; errors
            // and hang-ups are reported regardless.
            return if side == UPSTREAM { poller::OUT } else { 0 };
        }
        let (from, to) = if side == CLIENT {
            (&self.c2u, &self.u2c)
        } else {
            (&self.u2c, &self.c2u)
        };
        let mut ev = 0;
        if from.wants_read() {
            ev |= poller::IN;
        }
        if to.dst_blocked && !to.shut {
            ev |= poller::OUT;
        }
        ev
    }
}

/// How a pair ended.
enum End {
    Closed,
    /// An error on either side; the text says which (logged, rate-limited).
    Reset(String),
    /// The upstream connect failed or timed out (counted by the caller).
    Upstream,
    Idle,
    FlushTimeout,
    AtStop,
}

/// A relay loop.
pub struct RelayLoop {
    poller: Poller,
    listener: TcpListener,
    listening: bool,
    shared: Arc<RelayShared>,
    pairs: Vec<Option<Pair>>,
    free: Vec<usize>,
    scratch: Scratch,
    c: RelayCounters,
    accept: Acceptor,
    flushing: usize,
}

impl RelayLoop {
    /// A loop around `listener`.
    pub fn new(listener: TcpListener, shared: &Arc<RelayShared>) -> Result<Self> {
        let poller = Poller::new(1024)?;
        poller.add(listener.as_raw_fd(), TOKEN_LISTENER, poller::IN)?;
        poller.add(shared.crew.stop.fd().as_raw_fd(), TOKEN_STOP, poller::IN)?;
        Ok(Self {
            poller,
            listener,
            listening: true,
            shared: Arc::clone(shared),
            pairs: Vec::new(),
            free: Vec::new(),
            scratch: Scratch::new(),
            c: RelayCounters::default(),
            accept: Acceptor::new(&shared.crew.slots),
            flushing: 0,
        })
    }

    fn open_pairs(&self) -> usize {
        self.pairs.len() - self.free.len()
    }

    /// Runs until the stop flag is raised and the drain is over.
    pub fn run(mut self) -> Result<RelayCounters> {
        let mut next_housekeeping = Instant::now() + HOUSEKEEPING;
        let mut drain_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let mut wake = next_housekeeping;
            if self.flushing > 0 {
                wake = wake.min(now + FLUSH_POLL);
            }
            if let Some(t) = self.accept.backoff.until() {
                wake = wake.min(t);
            }
            if let Some(t) = drain_until {
                wake = wake.min(t);
            }
            let n = self
                .poller
                .wait(Some(wake.saturating_duration_since(now)))?;
            for k in 0..n {
                let ev = self.poller.ready(k);
                match ev.token {
                    TOKEN_LISTENER => accept::accept_batch(&mut self)?,
                    TOKEN_STOP => {
                        if drain_until.is_none() {
                            drain_until = Some(Instant::now() + DRAIN);
                            self.stop_listening();
                            let _ = self.poller.delete(self.shared.crew.stop.fd().as_raw_fd());
                        }
                    }
                    t => self.handle((t / 2) as usize, (t % 2) as usize, ev),
                }
            }
            if self.accept.backoff.expired() && drain_until.is_none() {
                self.start_listening()?;
            }
            let now = Instant::now();
            if self.flushing > 0 || now >= next_housekeeping {
                self.housekeeping(now, now >= next_housekeeping);
                if now >= next_housekeeping {
                    next_housekeeping = now + HOUSEKEEPING;
                }
            }
            if let Some(t) = drain_until {
                if self.open_pairs() == 0 {
                    return Ok(self.counters());
                }
                if now >= t {
                    for i in 0..self.pairs.len() {
                        if self.pairs[i].is_some() {
                            self.end(i, End::AtStop);
                        }
                    }
                    return Ok(self.counters());
                }
            }
        }
    }

    /// What the loop counted, its acceptor's figures included.
    fn counters(mut self) -> RelayCounters {
        self.accept
            .report(&mut self.c.accept_errors, &mut self.c.rejected_max_conns);
        self.c
    }

    fn stop_listening(&mut self) {
        if self.listening {
            let _ = self.poller.delete(self.listener.as_raw_fd());
            self.listening = false;
        }
    }

    fn start_listening(&mut self) -> Result<()> {
        if !self.listening {
            self.poller
                .add(self.listener.as_raw_fd(), TOKEN_LISTENER, poller::IN)?;
            self.listening = true;
        }
        Ok(())
    }

    fn start_pair(&mut self, client: OwnedFd) {
        let now = Instant::now();
        let up = self.shared.upstream;
        let sock = match Socket::new(
            Domain::for_address(up),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        ) {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, most likely: the client goes, and
                // accepting pauses like for EMFILE on accept.
                self.shared.log.log(&format!(
                    "cannot create an upstream socket: {e}; closing the client"
                ));
                self.c.upstream_failures += 1;
                self.shared.crew.slots.release();
                self.accept.pause();
                self.stop_listening();
                return;
            }
        };
        let _ = sock.set_tcp_nodelay(true);
        let connected = match sock.connect(&SockAddr::from(up)) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => {
                self.shared
                    .log
                    .log(&format!("upstream {up}: {e}; closing the client"));
                self.c.upstream_failures += 1;
                self.shared.crew.slots.release();
                return;
            }
        };
        let splice = self.shared.path == RelayPath::Splice;
        let pair = Pair {
            client,
            upstream: sock.into(),
            connecting: Some(now),
            c2u: Dir::new(splice),
            u2c: Dir::new(splice),
            keys: None,
            acked_base: [0, 0],
            interest: [0, 0],
            last_active: now,
            flush_since: None,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.pairs[i] = Some(pair);
                i
            }
            None => {
                self.pairs.push(Some(pair));
                self.pairs.len() - 1
            }
        };
        let p = self.pairs[i].as_mut().expect("just stored");
        let regs = [
            self.poller
                .add(p.client.as_raw_fd(), (i * 2 + CLIENT) as u64, 0),
            self.poller.add(
                p.upstream.as_raw_fd(),
                (i * 2 + UPSTREAM) as u64,
                poller::OUT,
            ),
        ];
        p.interest = [0, poller::OUT];
        if regs.iter().any(|r| r.is_err()) {
            self.c.upstream_failures += 1;
            self.end(i, End::Upstream);
            return;
        }
        self.c.accepted += 1;
        if connected {
            self.connected(i);
        }
    }

    fn connected(&mut self, i: usize) {
        let Some(p) = self.pairs[i].as_mut() else {
            return;
        };
        let err = socket2::SockRef::from(&p.upstream).take_error();
        match err {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                self.shared.log.log(&format!(
                    "upstream {}: {e}; closing the client",
                    self.shared.upstream
                ));
                self.c.upstream_failures += 1;
                self.end(i, End::Upstream);
                return;
            }
        }
        p.connecting = None;
        p.last_active = Instant::now();
        if let Some(sm) = &self.shared.sockmap {
            for side in [CLIENT, UPSTREAM] {
                p.acked_base[side] = tcpinfo::read(p.fd(side)).map_or(0, |t| t.bytes_acked);
            }
            match sm.link(p.client.as_raw_fd(), p.upstream.as_raw_fd()) {
                Ok(k) => p.keys = Some(k),
                Err(e) => {
                    // This pair is relayed in userspace; its bytes are
                    // still in the sockets' queues, untouched.
                    self.c.link_failures += 1;
                    self.shared.log.log(&format!(
                        "sockmap refused a pair ({e:#}); relaying it in userspace"
                    ));
                }
            }
        }
        // Bytes the client sent while the upstream connected are waiting
        // in its socket (or, linked, were just flushed by the kernel):
        // pump once instead of waiting for a readiness report.
        self.pump(i, CLIENT, true, false);
    }

    fn handle(&mut self, i: usize, side: usize, ev: Ready) {
        let Some(p) = self.pairs.get(i).and_then(|p| p.as_ref()) else {
            return;
        };
        if p.connecting.is_some() {
            if side == UPSTREAM && ev.writable() {
                self.connected(i);
            } else if side == CLIENT && ev.error() {
                // The client reset while we were connecting.
                self.end(
                    i,
                    End::Reset(format!(
                        "client error while connecting: {}",
                        sock_error(p.fd(CLIENT))
                    )),
                );
            }
            return;
        }
        if ev.error() {
            let why = format!("{} error: {}", side_name(side), sock_error(p.fd(side)));
            self.end(i, End::Reset(why));
            return;
        }
        self.pump(i, side, ev.readable(), ev.writable());
    }

    /// Moves what can move for the pair after an event on `side`, then
    /// passes on ends of stream, closes a finished pair, and updates what
    /// epoll watches.
    fn pump(&mut self, i: usize, side: usize, readable: bool, writable: bool) {
        let Some(p) = self.pairs[i].as_mut() else {
            return;
        };
        let (src, dst) = (p.fd(side), p.fd(1 - side));
        let mut failed = None;
        {
            let (from, to) = p.dirs(side);
            if readable && !from.src_eof {
                if let Err(e) = from.pump(src, dst, &mut self.scratch) {
                    failed = Some(format!("relaying from the {}: {e}", side_name(side)));
                }
            }
            if writable && to.dst_blocked && failed.is_none() {
                if let Err(e) = to.pump(dst, src, &mut self.scratch) {
                    failed = Some(format!("relaying to the {}: {e}", side_name(side)));
                }
            }
        }
        if let Some(why) = failed {
            self.end(i, End::Reset(why));
            return;
        }
        p.last_active = Instant::now();
        self.settle(i);
    }

    /// Shuts down the write side of every direction that has ended, ends
    /// the pair when both have, and refreshes the epoll interest.
    fn settle(&mut self, i: usize) {
        let Some(p) = self.pairs[i].as_mut() else {
            return;
        };
        let mut waiting = false;
        for d in [CLIENT, UPSTREAM] {
            let (src_fd, dst_fd) = (p.fd(d), p.fd(1 - d));
            let linked = p.keys.is_some();
            let base = p.acked_base[1 - d];
            let (from, _) = p.dirs(d);
            if !from.drained() || from.shut {
                continue;
            }
            if linked && !acked_everything(src_fd, dst_fd, base) {
                waiting = true;
                continue;
            }
            // SAFETY: shutdown on our own socket.
            unsafe { libc::shutdown(dst_fd, libc::SHUT_WR) };
            from.shut = true;
        }
        match (waiting, p.flush_since.is_some()) {
            (true, false) => {
                p.flush_since = Some(Instant::now());
                self.flushing += 1;
            }
            (false, true) => {
                p.flush_since = None;
                self.flushing -= 1;
            }
            _ => {}
        }
        if p.c2u.shut && p.u2c.shut {
            self.end(i, End::Closed);
            return;
        }
        for side in [CLIENT, UPSTREAM] {
            let want = p.wanted(side);
            if want != p.interest[side] {
                if let Err(e) = self.poller.modify(p.fd(side), (i * 2 + side) as u64, want) {
                    self.end(i, End::Reset(format!("epoll_ctl: {e}")));
                    return;
                }
                p.interest[side] = want;
            }
        }
    }

    fn housekeeping(&mut self, now: Instant, full: bool) {
        for i in 0..self.pairs.len() {
            let Some(p) = self.pairs[i].as_ref() else {
                continue;
            };
            if let Some(since) = p.connecting {
                if full && now - since > self.shared.connect_timeout {
                    self.shared.log.log(&format!(
                        "upstream {}: no connection within {:?}; closing the client",
                        self.shared.upstream, self.shared.connect_timeout
                    ));
                    self.c.upstream_timeouts += 1;
                    self.end(i, End::Upstream);
                }
                continue;
            }
            if let Some(since) = p.flush_since {
                if now - since > FLUSH_MAX {
                    self.end(i, End::FlushTimeout);
                } else {
                    self.settle(i);
                }
                continue;
            }
            if let (true, Some(idle)) = (full, self.shared.idle_timeout) {
                if self.idle_for(p, now) >= idle {
                    self.end(i, End::Idle);
                }
            }
        }
    }

    /// How long the pair has carried no data. Linked pairs move data
    /// without us: the kernel's own per-socket timestamps say.
    fn idle_for(&self, p: &Pair, now: Instant) -> Duration {
        if p.keys.is_some() {
            let ms = [CLIENT, UPSTREAM]
                .iter()
                .filter_map(|s| tcpinfo::read(p.fd(*s)).ok())
                .map(|t| t.last_data_recv_ms.min(t.last_data_sent_ms))
                .min()
                .unwrap_or(0);
            return Duration::from_millis(u64::from(ms)).min(now - p.last_active);
        }
        now - p.last_active
    }

    /// Ends pair `i`: counts it, resets the sockets unless it closed in
    /// order, gives back its pipes and slot.
    fn end(&mut self, i: usize, how: End) {
        let Some(mut p) = self.pairs[i].take() else {
            return;
        };
        self.free.push(i);
        if p.flush_since.is_some() {
            self.flushing -= 1;
        }
        let in_order = matches!(how, End::Closed);
        match how {
            End::Closed => self.c.closed += 1,
            End::Reset(why) => {
                self.c.reset += 1;
                self.shared.log.log(&format!("pair reset: {why}"));
            }
            End::Upstream => {}
            End::Idle => self.c.idle_closed += 1,
            End::FlushTimeout => self.c.flush_timeouts += 1,
            End::AtStop => self.c.open_at_stop += 1,
        }
        let (c2u, u2c) = match (p.keys, &self.shared.sockmap) {
            (Some(keys), Some(sm)) => {
                // The kernel moved what the verdict redirected (counted per
                // socket in its map); userspace moved the rest (`bytes`,
                // from a tainted socket).
                let c = sm.redirected_bytes(keys.client).unwrap_or(0) + p.c2u.bytes;
                let u = sm.redirected_bytes(keys.upstream).unwrap_or(0) + p.u2c.bytes;
                self.c.tainted_sockets +=
                    u64::from(sm.tainted(keys.client)) + u64::from(sm.tainted(keys.upstream));
                sm.unlink(keys);
                (c, u)
            }
            _ => (p.c2u.bytes, p.u2c.bytes),
        };
        self.c.bytes_client_to_upstream += c2u;
        self.c.bytes_upstream_to_client += u2c;
        self.c.bytes_through_userspace += p.c2u.bytes_user + p.u2c.bytes_user;
        if !in_order {
            // Abortive close: the peers see a reset, not a clean end of
            // stream they could mistake for a complete exchange.
            for fd in [&p.client, &p.upstream] {
                let _ = socket2::SockRef::from(fd).set_linger(Some(Duration::ZERO));
            }
        }
        p.c2u.release(&mut self.scratch);
        p.u2c.release(&mut self.scratch);
        self.shared.crew.slots.release();
        // Dropping the descriptors closes them and removes them from epoll.
    }
}

impl AcceptLoop for RelayLoop {
    fn listener(&self) -> Option<(RawFd, bool)> {
        Some((self.listener.as_raw_fd(), true))
    }

    fn acceptor(&mut self) -> &mut Acceptor {
        &mut self.accept
    }

    fn serve(&mut self, client: OwnedFd) -> ControlFlow<()> {
        self.start_pair(client);
        ControlFlow::Continue(())
    }

    /// The queued connection keeps the listener readable: stop watching
    /// it for the backoff, never spin.
    fn pause_listening(&mut self) -> Result<()> {
        self.stop_listening();
        Ok(())
    }
}

fn side_name(side: usize) -> &'static str {
    if side == CLIENT { "client" } else { "upstream" }
}

/// The pending socket error (SO_ERROR), for messages.
fn sock_error(fd: RawFd) -> String {
    // SAFETY: a borrowed view of a descriptor the caller keeps open.
    let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    match socket2::SockRef::from(&b).take_error() {
        Ok(Some(e)) => e.to_string(),
        Ok(None) => "no error pending (hang-up)".into(),
        Err(e) => e.to_string(),
    }
}

/// True when the destination's peer has acknowledged every byte the source
/// received before its FIN (sockmap: only then has the kernel delivered all
/// of them, and the end of stream may follow). Both counters include one
/// for a control segment: the source's received FIN, and `dst_base` (the
/// upstream's SYN) on the destination.
fn acked_everything(src: RawFd, dst: RawFd, dst_base: u64) -> bool {
    match (tcpinfo::read(src), tcpinfo::read(dst)) {
        (Ok(s), Ok(d)) => {
            d.bytes_acked.saturating_sub(dst_base) >= s.bytes_received.saturating_sub(1)
        }
        // No counters: nothing to wait for that we could observe.
        _ => true,
    }
}
