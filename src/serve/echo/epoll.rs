//! The epoll transport: N event loops, each with its own SO_REUSEPORT
//! listener, so connections are spread by the kernel and a loop never
//! shares a socket with another thread.
//!
//! Connections are edge-triggered (registered once for in, out and
//! read-hangup; never modified afterwards). A connection is read only when
//! it owes nothing: the bytes read are answered into a loop-wide scratch
//! buffer and written at once, and only what the kernel would not take is
//! copied into the connection's own output buffer. While that buffer is
//! not empty the connection is not read (backpressure), so a peer that does
//! not read its responses costs at most one read's worth of output here
//! and fills its own socket buffers instead. An idle connection holds no
//! buffer at all: see [`EpollConn`].
//!
//! The listener is level-triggered; when accept fails for lack of a
//! resource it is removed from the epoll set for the backoff (otherwise the
//! queued connection would wake the loop in a busy cycle), then re-added.

use std::collections::VecDeque;

use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::poll::PollTimeout;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};

use super::conn::{self, Ending, Framer, OutBuf, Tally};
use super::counters::Counters;
use super::{DRAIN, EchoShared, EchoWorker};
use crate::serve::accept::{self, AcceptLoop, Acceptor};
use crate::serve::signals::timeout_ms;

const TOKEN_LISTENER: u64 = u64::MAX;
const TOKEN_STOP: u64 = u64::MAX - 1;
/// The loop-wide read buffer: the most one read takes.
const READ_BUF: usize = 64 << 10;
/// Reads a connection may do per turn before the loop serves the others
/// (a client that never pauses must not starve its neighbours).
const ROUNDS: usize = 16;
/// Events taken per epoll_wait.
const EVENTS: usize = 256;
/// Longest epoll_wait; events (and the stop eventfd) normally wake it
/// first, this only bounds a wait that something failed to wake.
const WAIT_CAP: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts one event loop per listener. Everything that can fail is set up
/// before any thread starts.
pub fn start(listeners: Vec<OwnedFd>, shared: &Arc<EchoShared>) -> Result<Vec<EchoWorker>> {
    let loops = listeners
        .into_iter()
        .map(|l| EpollLoop::new(l, shared))
        .collect::<Result<Vec<_>>>()?;
    shared.crew.spawn_loops("ss-epoll", loops, EpollLoop::run)
}

/// One connection. Idle, it is a descriptor, two empty Vecs and a few
/// flags (about 80 bytes): the read buffer is the loop's, request bytes
/// are held only while a request is incomplete and output only while the
/// kernel would not take it.
struct EpollConn {
    fd: OwnedFd,
    framer: Framer,
    out: OutBuf,
    tally: Tally,
    /// Edge-triggered: input may be waiting (set by events, cleared when a
    /// read comes back short or with EAGAIN).
    readable: bool,
    /// The peer has finished sending (read returned 0).
    eof: bool,
    /// An event reported a hangup or error: a short read no longer proves
    /// the socket is drained (the EOF behind the data brings no new edge).
    hup: bool,
    /// In the loop's ready queue.
    queued: bool,
}

/// What a turn of [`EpollLoop::service`] ended with.
enum Turn {
    /// Nothing more to do until the next event.
    Wait,
    /// Used its rounds with input still waiting: queue it.
    More,
    /// Close it (with how it ended; None when the stop closed it).
    Close(Option<Ending>),
}

struct EpollLoop {
    ep: Epoll,
    listener: Option<OwnedFd>,
    /// The listener is in the epoll set (not during a backoff).
    listening: bool,
    shared: Arc<EchoShared>,
    conns: Vec<Option<EpollConn>>,
    free: Vec<usize>,
    /// Slots freed during the current batch of events, reusable after it
    /// (a later event of the same batch may still name the old connection).
    freed: Vec<usize>,
    ready: VecDeque<usize>,
    live: usize,
    rbuf: Box<[u8]>,
    scratch: Vec<u8>,
    accept: Acceptor,
    /// Set by the stop: when the drain ends.
    drain_until: Option<Instant>,
    c: Counters,
}

impl EpollLoop {
    fn new(listener: OwnedFd, shared: &Arc<EchoShared>) -> Result<Self> {
        let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll_create1")?;
        ep.add(
            &listener,
            EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LISTENER),
        )
        .context("adding the listener to epoll")?;
        ep.add(
            shared.crew.stop.fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_STOP),
        )
        .context("adding the stop eventfd to epoll")?;
        Ok(Self {
            ep,
            listener: Some(listener),
            listening: true,
            shared: Arc::clone(shared),
            conns: Vec::new(),
            free: Vec::new(),
            freed: Vec::new(),
            ready: VecDeque::new(),
            live: 0,
            rbuf: vec![0u8; READ_BUF].into_boxed_slice(),
            scratch: Vec::new(),
            accept: Acceptor::new(&shared.crew.slots),
            drain_until: None,
            c: Counters::default(),
        })
    }

    fn run(mut self) -> Result<Counters> {
        let mut events = vec![EpollEvent::empty(); EVENTS];
        loop {
            if let Some(until) = self.drain_until {
                if self.live == 0 {
                    break;
                }
                if Instant::now() >= until {
                    self.abort_all();
                    break;
                }
            }
            if self.accept.backoff.expired() {
                self.resume_accepting()?;
            }
            let timeout = if self.ready.is_empty() {
                let next = match (self.accept.backoff.until(), self.drain_until) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                timeout_ms(next, WAIT_CAP)
            } else {
                0
            };
            let n = match self.ep.wait(
                &mut events,
                PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(n) => n,
                Err(Errno::EINTR) => 0,
                Err(e) => return Err(e).context("epoll_wait"),
            };
            for ev in &events[..n] {
                match ev.data() {
                    TOKEN_LISTENER => accept::accept_batch(&mut self)?,
                    TOKEN_STOP => self.begin_drain()?,
                    t => {
                        let slot = t as usize;
                        let f = ev.events();
                        if let Some(Some(conn)) = self.conns.get_mut(slot) {
                            let hup = EpollFlags::EPOLLRDHUP
                                | EpollFlags::EPOLLHUP
                                | EpollFlags::EPOLLERR;
                            if f.intersects(EpollFlags::EPOLLIN | hup) {
                                conn.readable = true;
                            }
                            if f.intersects(hup) {
                                conn.hup = true;
                            }
                        }
                        self.turn(slot);
                    }
                }
            }
            // One more turn for each connection that used up its rounds,
            // after everything that had an event was served.
            for _ in 0..self.ready.len() {
                let Some(slot) = self.ready.pop_front() else {
                    break;
                };
                if let Some(Some(conn)) = self.conns.get_mut(slot) {
                    conn.queued = false;
                }
                self.turn(slot);
            }
            self.free.append(&mut self.freed);
        }
        self.accept
            .report(&mut self.c.accept_errors, &mut self.c.rejected_max_conns);
        Ok(self.c)
    }

    /// Serves `slot` and acts on the outcome.
    fn turn(&mut self, slot: usize) {
        match self.service(slot) {
            Turn::Wait => {}
            Turn::More => {
                if let Some(Some(conn)) = self.conns.get_mut(slot)
                    && !conn.queued
                {
                    conn.queued = true;
                    self.ready.push_back(slot);
                }
            }
            Turn::Close(how) => self.close(slot, how),
        }
    }

    /// Writes what the connection owes, then reads and answers while it
    /// can, for at most ROUNDS reads.
    fn service(&mut self, slot: usize) -> Turn {
        let EpollLoop {
            conns,
            rbuf,
            scratch,
            c,
            shared,
            drain_until,
            ..
        } = self;
        let Some(Some(conn)) = conns.get_mut(slot) else {
            return Turn::Wait;
        };
        let spec = &shared.spec;
        let fd = conn.fd.as_raw_fd();
        let draining = drain_until.is_some();
        // The stop already counted this connection in open_at_stop.
        let ended = |how: Ending| Turn::Close((!draining).then_some(how));
        for _ in 0..ROUNDS {
            if !conn.out.is_empty() {
                match conn::send(fd, conn.out.pending()) {
                    Ok(n) => {
                        conn.out.consume(n);
                        c.bytes_out += n as u64;
                        c.transactions += conn.tally.wrote(spec, n);
                        if !conn.out.is_empty() {
                            // The kernel took part: its buffer is full.
                            return Turn::Wait;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Turn::Wait,
                    Err(e) => return ended(conn::ending_of(&e)),
                }
            }
            if draining {
                return Turn::Close(None);
            }
            if conn.eof {
                return Turn::Close(Some(Ending::PeerClosed));
            }
            if !conn.readable {
                return Turn::Wait;
            }
            // Output is empty here, so the budget is at least one request.
            let budget = conn.framer.read_budget(spec, 0).min(rbuf.len());
            match conn::recv(fd, &mut rbuf[..budget]) {
                Ok(0) => {
                    conn.eof = true;
                    conn.readable = false;
                }
                Ok(n) => {
                    c.bytes_in += n as u64;
                    if n < budget && !conn.hup {
                        // The socket was emptied; new data brings a new edge.
                        conn.readable = false;
                    }
                    scratch.clear();
                    c.requests += conn.framer.feed(spec, &rbuf[..n], scratch);
                    if scratch.is_empty() {
                        continue;
                    }
                    let sent = match conn::send(fd, scratch) {
                        Ok(w) => w,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                        Err(e) => return ended(conn::ending_of(&e)),
                    };
                    c.bytes_out += sent as u64;
                    c.transactions += conn.tally.wrote(spec, sent);
                    if sent < scratch.len() {
                        conn.out.tail().extend_from_slice(&scratch[sent..]);
                        return Turn::Wait;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    conn.readable = false;
                    return Turn::Wait;
                }
                Err(e) => return ended(conn::ending_of(&e)),
            }
        }
        if conn.readable || conn.eof {
            Turn::More
        } else {
            Turn::Wait
        }
    }

    fn close(&mut self, slot: usize, how: Option<Ending>) {
        if let Some(conn) = self.conns.get_mut(slot).and_then(Option::take) {
            // Closing the descriptor also removes it from the epoll set.
            drop(conn);
            self.freed.push(slot);
            self.live -= 1;
            self.shared.crew.slots.release();
            if let Some(how) = how {
                self.c.ended(how);
            }
        }
    }

    fn resume_accepting(&mut self) -> Result<()> {
        if let Some(l) = &self.listener
            && !self.listening
        {
            self.ep
                .add(l, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LISTENER))
                .context("re-adding the listener to epoll after a backoff")?;
            self.listening = true;
        }
        Ok(())
    }

    /// Stop: close the listener, close idle connections, keep the ones that
    /// still owe output until they are flushed or the drain time is up.
    fn begin_drain(&mut self) -> Result<()> {
        if self.drain_until.is_some() {
            return Ok(());
        }
        self.drain_until = Some(Instant::now() + DRAIN);
        // The stop eventfd stays readable: it must leave the set or it
        // would wake every wait from now on.
        self.ep
            .delete(self.shared.crew.stop.fd())
            .context("removing the stop eventfd from epoll")?;
        if let Some(l) = self.listener.take()
            && self.listening
        {
            let _ = self.ep.delete(&l);
        }
        self.listening = false;
        self.c.open_at_stop += self.live as u64;
        for slot in 0..self.conns.len() {
            if let Some(Some(conn)) = self.conns.get(slot)
                && conn.out.is_empty()
            {
                self.close(slot, None);
            }
        }
        Ok(())
    }

    /// The drain time ran out: close what is left, counting connections
    /// that were still owed output.
    fn abort_all(&mut self) {
        for slot in 0..self.conns.len() {
            if let Some(Some(conn)) = self.conns.get(slot) {
                if !conn.out.is_empty() {
                    self.c.drain_timeouts += 1;
                }
                self.close(slot, None);
            }
        }
    }
}

impl AcceptLoop for EpollLoop {
    fn listener(&self) -> Option<(RawFd, bool)> {
        self.listener.as_ref().map(|l| (l.as_raw_fd(), true))
    }

    fn acceptor(&mut self) -> &mut Acceptor {
        &mut self.accept
    }

    fn serve(&mut self, fd: OwnedFd) -> ControlFlow<()> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let flags = EpollFlags::EPOLLIN
            | EpollFlags::EPOLLOUT
            | EpollFlags::EPOLLRDHUP
            | EpollFlags::EPOLLET;
        if self
            .ep
            .add(fd.as_fd(), EpollEvent::new(flags, slot as u64))
            .is_err()
        {
            // Out of kernel memory for the epoll item: this connection
            // cannot be served.
            self.shared.crew.slots.release();
            self.free.push(slot);
            self.c.errors += 1;
            return ControlFlow::Continue(());
        }
        self.c.accepted += 1;
        self.live += 1;
        self.conns[slot] = Some(EpollConn {
            fd,
            framer: Framer::default(),
            out: OutBuf::default(),
            tally: Tally::default(),
            readable: false,
            eof: false,
            hup: false,
            queued: false,
        });
        ControlFlow::Continue(())
    }

    /// The queued connection keeps a level-triggered listener readable: it
    /// leaves the epoll set for the backoff, or the loop would spin.
    fn pause_listening(&mut self) -> Result<()> {
        if let Some(l) = &self.listener
            && self.listening
        {
            self.ep
                .delete(l)
                .context("removing the listener from epoll for a backoff")?;
            self.listening = false;
        }
        Ok(())
    }
}
