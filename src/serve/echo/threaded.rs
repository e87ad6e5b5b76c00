//! The threaded transport: one acceptor thread, one thread per connection
//! doing blocking reads and writes. The classic design, and the baseline
//! the event-driven transports are compared against.
//!
//! Backpressure is natural here: a thread blocked writing to a peer that
//! does not read does not read either. Stopping: the acceptor leaves its
//! poll on the stop eventfd, then shuts down the read side of every
//! connection (a blocked read returns 0 once the queued input is consumed),
//! waits up to the drain time for the threads to write what they owe and
//! exit, and after that shuts the connections down completely so blocked
//! writes fail and the threads exit.

use std::collections::HashMap;

use std::ops::ControlFlow;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::conn::{self, Ending, Framer, Spec, Tally};
use super::counters::Counters;
use super::{DRAIN, EchoShared, EchoWorker};
use crate::serve::accept::{self, AcceptLoop, Acceptor};
use crate::serve::signals::timeout_ms;

/// Stack of a connection thread: the loop below is shallow, and thousands
/// of connections must not reserve 2 MiB each.
const CONN_STACK: usize = 256 << 10;
/// A connection thread's read buffer.
const READ_BUF: usize = 64 << 10;
/// After the drain, how long threads get to exit once their sockets are
/// shut down completely.
const FORCE_GRACE: Duration = Duration::from_secs(1);

/// Starts the acceptor thread (which owns the connection threads).
pub fn start(listeners: Vec<OwnedFd>, shared: &Arc<EchoShared>) -> Result<Vec<EchoWorker>> {
    let listener = listeners
        .into_iter()
        .next()
        .context("no listener to serve")?;
    let acc = ThreadedAcceptor {
        listener,
        shared: Arc::clone(shared),
        reg: Arc::new(Registry::default()),
        accept: Acceptor::new(&shared.crew.slots),
        next_id: 0,
        c: Counters::default(),
    };
    Ok(vec![
        shared.crew.spawn("ss-accept".into(), move || acc.run())?,
    ])
}

/// The live connections, so the acceptor can shut them down at the stop,
/// and the counters of the finished ones.
#[derive(Default)]
struct Registry {
    inner: Mutex<RegInner>,
    changed: Condvar,
    stopping: AtomicBool,
}

#[derive(Default)]
struct RegInner {
    live: HashMap<u64, Arc<OwnedFd>>,
    done: Counters,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, RegInner> {
        // A panicking connection thread cannot leave the map half-updated
        // (single inserts and removes), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, id: u64, c: &Counters) {
        let mut g = self.lock();
        g.live.remove(&id);
        g.done.merge(c);
        self.changed.notify_all();
    }

    /// Shuts down every live connection (`how`: SHUT_RD or SHUT_RDWR).
    fn shutdown_all(&self, how: i32) {
        for fd in self.lock().live.values() {
            // SAFETY: the Arc keeps the descriptor open during the call.
            unsafe { libc::shutdown(fd.as_raw_fd(), how) };
        }
    }

    /// Waits until no connection is live or `until`; returns how many are.
    fn wait_empty(&self, until: Instant) -> usize {
        let mut g = self.lock();
        while !g.live.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        g.live.len()
    }
}

struct ThreadedAcceptor {
    listener: OwnedFd,
    shared: Arc<EchoShared>,
    reg: Arc<Registry>,
    accept: Acceptor,
    next_id: u64,
    c: Counters,
}

impl ThreadedAcceptor {
    fn run(mut self) -> Result<Counters> {
        let result = self.accept_until_stop();
        // Whatever ended accepting, the connection threads are stopped and
        // waited for before this returns.
        let stuck = self.drain();
        result?;
        if stuck > 0 {
            return Err(anyhow!(
                "{} did not exit after {} shut down",
                crate::report::units::counted(
                    stuck as u64,
                    "connection thread",
                    "connection threads"
                ),
                if stuck == 1 {
                    "its socket was"
                } else {
                    "their sockets were"
                }
            ));
        }
        let done = std::mem::take(&mut self.reg.lock().done);
        self.c.merge(&done);
        self.accept
            .report(&mut self.c.accept_errors, &mut self.c.rejected_max_conns);
        Ok(self.c)
    }

    fn accept_until_stop(&mut self) -> Result<()> {
        loop {
            self.accept.backoff.expired();
            let accepting = !self.accept.backoff.active();
            let timeout = timeout_ms(self.accept.backoff.until(), Duration::from_secs(1));
            let mut pfds = vec![PollFd::new(self.shared.crew.stop.fd(), PollFlags::POLLIN)];
            if accepting {
                pfds.push(PollFd::new(
                    std::os::fd::AsFd::as_fd(&self.listener),
                    PollFlags::POLLIN,
                ));
            }
            match poll(
                &mut pfds,
                PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e).context("poll on the listener"),
            }
            let readable = |p: &PollFd<'_>| p.revents().is_some_and(|r| !r.is_empty());
            let (stop, incoming) = (
                readable(&pfds[0]) || self.shared.crew.stop.is_raised(),
                pfds.get(1).is_some_and(readable),
            );
            drop(pfds);
            if stop {
                return Ok(());
            }
            if incoming {
                accept::accept_batch(self)?;
            }
        }
    }

    /// Stops the connection threads: read side first (they finish what
    /// they owe), everything after the drain time. Returns how many
    /// threads are still running after that.
    fn drain(&mut self) -> usize {
        self.reg.stopping.store(true, Ordering::SeqCst);
        self.c.open_at_stop += self.reg.lock().live.len() as u64;
        self.reg.shutdown_all(libc::SHUT_RD);
        let left = self.reg.wait_empty(Instant::now() + DRAIN);
        if left == 0 {
            return 0;
        }
        self.c.drain_timeouts += left as u64;
        self.reg.shutdown_all(libc::SHUT_RDWR);
        self.reg.wait_empty(Instant::now() + FORCE_GRACE)
    }
}

impl AcceptLoop for ThreadedAcceptor {
    fn listener(&self) -> Option<(RawFd, bool)> {
        // Blocking sockets for blocking connection threads.
        Some((self.listener.as_raw_fd(), false))
    }

    fn acceptor(&mut self) -> &mut Acceptor {
        &mut self.accept
    }

    fn serve(&mut self, fd: OwnedFd) -> ControlFlow<()> {
        let fd = Arc::new(fd);
        let id = self.next_id;
        self.next_id += 1;
        self.reg.lock().live.insert(id, Arc::clone(&fd));
        let (shared, reg) = (Arc::clone(&self.shared), Arc::clone(&self.reg));
        let spawned = std::thread::Builder::new()
            .name("ss-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || {
                let mut c = Counters::default();
                let how = serve_conn(fd.as_raw_fd(), &shared.spec, &mut c);
                // Connections open at the stop are counted there.
                if !reg.stopping.load(Ordering::SeqCst) {
                    c.ended(how);
                }
                drop(fd);
                shared.crew.slots.release();
                reg.finish(id, &c);
            });
        match spawned {
            Ok(_) => {
                self.c.accepted += 1;
                ControlFlow::Continue(())
            }
            Err(_) => {
                // Out of threads (or memory for a stack): refuse this
                // connection and pause, as for EMFILE.
                self.reg.lock().live.remove(&id);
                self.shared.crew.slots.release();
                self.c.rejected_no_thread += 1;
                self.accept.pause();
                ControlFlow::Break(())
            }
        }
    }

    fn pause_listening(&mut self) -> Result<()> {
        // Nothing to do: the poll leaves the listener out while paused.
        Ok(())
    }
}

/// One connection, blocking: read what can be answered, answer it, write
/// it all, until the peer closes or an error.
fn serve_conn(fd: RawFd, spec: &Spec, c: &mut Counters) -> Ending {
    let mut buf = vec![0u8; READ_BUF];
    let mut framer = Framer::default();
    let mut tally = Tally::default();
    let mut out = Vec::new();
    loop {
        // Nothing is owed between rounds: all output was written.
        let budget = framer.read_budget(spec, 0).min(buf.len());
        let n = match conn::recv(fd, &mut buf[..budget]) {
            Ok(0) => return Ending::PeerClosed,
            Ok(n) => n,
            Err(e) => return conn::ending_of(&e),
        };
        c.bytes_in += n as u64;
        out.clear();
        c.requests += framer.feed(spec, &buf[..n], &mut out);
        let mut off = 0;
        while off < out.len() {
            match conn::send(fd, &out[off..]) {
                Ok(0) => return Ending::Error,
                Ok(w) => {
                    off += w;
                    c.bytes_out += w as u64;
                    c.transactions += tally.wrote(spec, w);
                }
                Err(e) => return conn::ending_of(&e),
            }
        }
    }
}
