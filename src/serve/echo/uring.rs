//! The io_uring transport: N rings, each on its own thread with its own
//! SO_REUSEPORT listener, driving accept, recv and send as io_uring
//! operations (no readiness step, no per-operation syscall).
//!
//! Each connection has at most one operation in flight: a recv while it
//! owes nothing, or a send of what it owes. So a peer that does not read
//! its responses gets no further recv (backpressure), and the buffers an
//! operation points into are never touched while the kernel uses them.
//! Unlike epoll, an idle connection keeps a recv in flight and therefore
//! its own receive buffer ([`RECV_BUF`] bytes).
//!
//! A stop eventfd is watched with a poll operation. The accept is re-armed
//! after each completion; after a resource error it is not re-armed until
//! the backoff ends. At the stop the accept is cancelled, idle connections
//! are shut down (their recv completes) and closed, and connections that
//! owe output keep sending for the drain time, then are shut down too.

use std::collections::VecDeque;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use io_uring::{IoUring, opcode, squeue, types};

use super::conn::{self, Ending, Framer, OutBuf, Tally};
use super::counters::Counters;
use super::{DRAIN, EchoShared, EchoWorker};
use crate::serve::accept::{Acceptor, Admitted};

/// Receive buffer of each connection (a recv is always in flight on an
/// idle connection, so this is per-connection memory).
pub const RECV_BUF: usize = 16 << 10;
/// Submission queue entries per ring (the completion queue gets twice as
/// many; the kernel buffers completions beyond that, IORING_FEAT_NODROP).
const ENTRIES: u32 = 1024;
/// Longest wait in io_uring_enter; completions normally end it first.
const WAIT_CAP: Duration = Duration::from_secs(1);
/// After the drain, how long shut-down connections get for their last
/// operations to complete.
const FORCE_GRACE: Duration = Duration::from_secs(1);

const OP_ACCEPT: u64 = 0;
const OP_STOP: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_CANCEL: u64 = 4;

fn user_data(slot: usize, op: u64) -> u64 {
    ((slot as u64) << 3) | op
}

/// Creates one ring per listener and starts their threads. A ring that
/// cannot be created (io_uring disabled, not built, refused) fails the
/// start with the reason, before anything is announced.
pub fn start(listeners: Vec<OwnedFd>, shared: &Arc<EchoShared>) -> Result<Vec<EchoWorker>> {
    let rings = listeners
        .into_iter()
        .map(|l| UringLoop::new(l, shared))
        .collect::<Result<Vec<_>>>()?;
    shared.crew.spawn_loops("ss-uring", rings, UringLoop::run)
}

/// Creates a ring, or explains why io_uring is not available here.
pub fn new_ring() -> Result<IoUring> {
    match IoUring::builder().setup_coop_taskrun().build(ENTRIES) {
        Ok(r) => Ok(r),
        // Kernels before 5.19 reject the flag; a plain ring will do.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(ENTRIES)
            .map_err(|e| anyhow!(unavailable_message(&e, disabled_sysctl(), is_root()))),
        Err(e) => Err(anyhow!(unavailable_message(
            &e,
            disabled_sysctl(),
            is_root()
        ))),
    }
}

fn disabled_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Why io_uring_setup failed, in words: `disabled` is the value of
/// kernel.io_uring_disabled if readable.
pub fn unavailable_message(e: &std::io::Error, disabled: Option<u32>, root: bool) -> String {
    let why = match (e.raw_os_error(), disabled) {
        (Some(libc::ENOSYS), _) => {
            "this kernel has no io_uring (built without CONFIG_IO_URING)".to_string()
        }
        (Some(libc::EPERM), Some(2)) => {
            "io_uring is disabled for everyone on this system (kernel.io_uring_disabled = 2)"
                .to_string()
        }
        (Some(libc::EPERM), Some(1)) if !root => "io_uring is limited to root and the group \
             in kernel.io_uring_group on this system (kernel.io_uring_disabled = 1)"
            .to_string(),
        (Some(libc::EPERM), _) => "io_uring_setup was refused (EPERM) although \
             kernel.io_uring_disabled allows it: a seccomp filter or container runtime \
             probably blocks it"
            .to_string(),
        (Some(libc::ENOMEM), _) => "io_uring_setup ran out of memory (on kernels before \
             5.12 rings count against RLIMIT_MEMLOCK; check ulimit -l)"
            .to_string(),
        _ => format!("io_uring_setup failed: {e}"),
    };
    format!("--transport uring: {why}; use --transport epoll or threaded")
}

/// A connection. At most one of recv/send is in flight (see the module
/// comment); `rbuf` and `out` are what they point into.
struct UringConn {
    fd: OwnedFd,
    framer: Framer,
    out: OutBuf,
    tally: Tally,
    rbuf: Box<[u8]>,
    in_flight: bool,
}

struct UringLoop {
    ring: IoUring,
    listener: Option<OwnedFd>,
    accept_in_flight: bool,
    shared: Arc<EchoShared>,
    conns: Vec<Option<UringConn>>,
    free: Vec<usize>,
    live: usize,
    /// Entries that did not fit in the submission queue yet.
    backlog: VecDeque<squeue::Entry>,
    accept: Acceptor,
    drain_until: Option<Instant>,
    /// Set when the drain time ran out and the rest were shut down.
    forced_until: Option<Instant>,
    c: Counters,
}

impl UringLoop {
    fn new(listener: OwnedFd, shared: &Arc<EchoShared>) -> Result<Self> {
        Ok(Self {
            ring: new_ring()?,
            listener: Some(listener),
            accept_in_flight: false,
            shared: Arc::clone(shared),
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            backlog: VecDeque::new(),
            accept: Acceptor::new(&shared.crew.slots),
            drain_until: None,
            forced_until: None,
            c: Counters::default(),
        })
    }

    fn run(mut self) -> Result<Counters> {
        let stop = opcode::PollAdd::new(
            types::Fd(self.shared.crew.stop.fd().as_raw_fd()),
            libc::POLLIN as u32,
        )
        .build()
        .user_data(user_data(0, OP_STOP));
        self.push(stop);
        self.arm_accept();
        loop {
            if self.drain_until.is_some() {
                if self.live == 0 && !self.accept_in_flight {
                    break;
                }
                let now = Instant::now();
                match self.forced_until {
                    None if self.drain_until.is_some_and(|d| now >= d) => self.force_close(),
                    Some(t) if now >= t => {
                        self.abandon();
                        break;
                    }
                    _ => {}
                }
            } else if self.accept.backoff.expired() {
                self.arm_accept();
            }
            self.submit_and_wait()?;
            self.reap()?;
        }
        self.accept
            .report(&mut self.c.accept_errors, &mut self.c.rejected_max_conns);
        Ok(self.c)
    }

    fn push(&mut self, e: squeue::Entry) {
        self.backlog.push_back(e);
        self.flush_backlog();
    }

    fn flush_backlog(&mut self) {
        let mut sq = self.ring.submission();
        while let Some(e) = self.backlog.front() {
            // SAFETY: every entry points into memory (connection buffers,
            // the stop eventfd) that outlives its operation: a slot is only
            // freed after its operation completed.
            if unsafe { sq.push(e) }.is_err() {
                break;
            }
            self.backlog.pop_front();
        }
    }

    fn submit_and_wait(&mut self) -> Result<()> {
        self.flush_backlog();
        let next = [
            self.accept.backoff.until(),
            self.forced_until.or(self.drain_until),
        ]
        .into_iter()
        .flatten()
        .min();
        let wait = next
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(WAIT_CAP)
            .min(WAIT_CAP)
            .max(Duration::from_micros(1));
        let ts = types::Timespec::new()
            .sec(wait.as_secs())
            .nsec(wait.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                // Timed out, interrupted, or completions must be reaped
                // before more can be submitted: all handled by the loop.
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => Ok(()),
                _ => Err(anyhow!("io_uring_enter: {e}")),
            },
        }
    }

    fn reap(&mut self) -> Result<()> {
        // Bounded: at most what the completion queue holds now.
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (ud, res) in cqes {
            let slot = (ud >> 3) as usize;
            match ud & 7 {
                OP_ACCEPT => self.on_accept(res)?,
                OP_STOP => self.begin_drain(),
                OP_RECV => self.on_recv(slot, res),
                OP_SEND => self.on_send(slot, res),
                _ => {} // OP_CANCEL: the cancelled operation reports itself.
            }
        }
        Ok(())
    }

    fn arm_accept(&mut self) {
        let Some(l) = &self.listener else { return };
        if self.accept_in_flight || self.drain_until.is_some() {
            return;
        }
        let e = opcode::Accept::new(
            types::Fd(l.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(user_data(0, OP_ACCEPT));
        self.accept_in_flight = true;
        self.push(e);
    }

    fn on_accept(&mut self, res: i32) -> Result<()> {
        self.accept_in_flight = false;
        if self.drain_until.is_some() {
            // Cancelled by the stop (or raced with it): close what came.
            if res >= 0 {
                // SAFETY: a new descriptor nobody else owns.
                drop(unsafe { OwnedFd::from_raw_fd(res) });
            }
            self.listener = None;
            return Ok(());
        }
        let res = if res < 0 {
            Err(std::io::Error::from_raw_os_error(-res))
        } else {
            // SAFETY: a new descriptor nobody else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(res) })
        };
        let fd = match self.accept.admit(res)? {
            Admitted::Conn(fd) => fd,
            Admitted::Idle | Admitted::Again => {
                self.arm_accept();
                return Ok(());
            }
            // Not re-armed until the backoff ends (see run).
            Admitted::Paused => return Ok(()),
        };
        self.arm_accept();
        self.c.accepted += 1;
        self.live += 1;
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.conns[slot] = Some(UringConn {
            fd,
            framer: Framer::default(),
            out: OutBuf::default(),
            tally: Tally::default(),
            rbuf: vec![0u8; RECV_BUF].into_boxed_slice(),
            in_flight: false,
        });
        self.arm_recv(slot);
        Ok(())
    }

    fn arm_recv(&mut self, slot: usize) {
        let spec = self.shared.spec;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let budget = conn.framer.read_budget(&spec, 0).min(conn.rbuf.len());
        let e = opcode::Recv::new(
            types::Fd(conn.fd.as_raw_fd()),
            conn.rbuf.as_mut_ptr(),
            budget as u32,
        )
        .build()
        .user_data(user_data(slot, OP_RECV));
        conn.in_flight = true;
        self.push(e);
    }

    fn arm_send(&mut self, slot: usize) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let p = conn.out.pending();
        let e = opcode::Send::new(
            types::Fd(conn.fd.as_raw_fd()),
            p.as_ptr(),
            p.len().min(u32::MAX as usize) as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(user_data(slot, OP_SEND));
        conn.in_flight = true;
        self.push(e);
    }

    fn on_recv(&mut self, slot: usize, res: i32) {
        let draining = self.drain_until.is_some();
        let spec = self.shared.spec;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        conn.in_flight = false;
        if draining {
            // It owed nothing when the stop came (or it would not have been
            // reading): done.
            return self.close(slot, None);
        }
        match res {
            0 => self.close(slot, Some(Ending::PeerClosed)),
            n if n < 0 => {
                if matches!(-n, libc::EINTR | libc::EAGAIN) {
                    return self.arm_recv(slot);
                }
                let e = std::io::Error::from_raw_os_error(-n);
                self.close(slot, Some(conn::ending_of(&e)));
            }
            n => {
                let n = n as usize;
                self.c.bytes_in += n as u64;
                let UringConn {
                    framer, out, rbuf, ..
                } = conn;
                self.c.requests += framer.feed(&spec, &rbuf[..n], out.tail());
                if out.is_empty() {
                    self.arm_recv(slot);
                } else {
                    self.arm_send(slot);
                }
            }
        }
    }

    fn on_send(&mut self, slot: usize, res: i32) {
        let draining = self.drain_until.is_some();
        let spec = self.shared.spec;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        conn.in_flight = false;
        if res < 0 {
            if matches!(-res, libc::EINTR | libc::EAGAIN) && self.forced_until.is_none() {
                return self.arm_send(slot);
            }
            let e = std::io::Error::from_raw_os_error(-res);
            let how = (!draining).then(|| conn::ending_of(&e));
            return self.close(slot, how);
        }
        let n = res as usize;
        conn.out.consume(n);
        self.c.bytes_out += n as u64;
        self.c.transactions += conn.tally.wrote(&spec, n);
        if !conn.out.is_empty() {
            self.arm_send(slot);
        } else if draining {
            self.close(slot, None);
        } else {
            self.arm_recv(slot);
        }
    }

    fn close(&mut self, slot: usize, how: Option<Ending>) {
        if let Some(conn) = self.conns.get_mut(slot).and_then(Option::take) {
            debug_assert!(!conn.in_flight);
            drop(conn);
            self.free.push(slot);
            self.live -= 1;
            self.shared.crew.slots.release();
            if let Some(how) = how {
                self.c.ended(how);
            }
        }
    }

    /// Stop: cancel the accept; connections that only wait for input are
    /// shut down (their recv completes and they close); those sending keep
    /// going for the drain time.
    fn begin_drain(&mut self) {
        if self.drain_until.is_some() {
            return;
        }
        self.drain_until = Some(Instant::now() + DRAIN);
        self.c.open_at_stop += self.live as u64;
        if self.accept_in_flight {
            let e = opcode::AsyncCancel::new(user_data(0, OP_ACCEPT))
                .build()
                .user_data(user_data(0, OP_CANCEL));
            self.push(e);
        } else {
            self.listener = None;
        }
        for conn in self.conns.iter().flatten() {
            if conn.out.is_empty() {
                // SAFETY: shutting down a descriptor we own.
                unsafe { libc::shutdown(conn.fd.as_raw_fd(), libc::SHUT_RDWR) };
            }
        }
    }

    /// The drain time ran out: shut down what is left; their sends fail
    /// and the connections close.
    fn force_close(&mut self) {
        self.forced_until = Some(Instant::now() + FORCE_GRACE);
        for conn in self.conns.iter().flatten() {
            if !conn.out.is_empty() {
                self.c.drain_timeouts += 1;
            }
            // SAFETY: shutting down a descriptor we own.
            unsafe { libc::shutdown(conn.fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }

    /// Operations still in flight after the grace: their buffers must stay
    /// valid until the kernel lets go of them, so they are leaked (the
    /// process is about to exit).
    fn abandon(&mut self) {
        for conn in self.conns.iter_mut().filter_map(Option::take) {
            std::mem::forget(conn);
        }
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_message_names_the_reason() {
        let err = |n| std::io::Error::from_raw_os_error(n);
        let m = unavailable_message(&err(libc::EPERM), Some(2), true);
        assert!(m.contains("kernel.io_uring_disabled = 2"), "{m}");
        assert!(m.contains("--transport epoll"), "{m}");
        let m = unavailable_message(&err(libc::EPERM), Some(1), false);
        assert!(m.contains("kernel.io_uring_disabled = 1"), "{m}");
        assert!(m.contains("io_uring_group"), "{m}");
        let m = unavailable_message(&err(libc::EPERM), Some(1), true);
        assert!(m.contains("seccomp"), "{m}");
        let m = unavailable_message(&err(libc::EPERM), Some(0), false);
        assert!(m.contains("seccomp"), "{m}");
        let m = unavailable_message(&err(libc::ENOSYS), None, false);
        assert!(m.contains("CONFIG_IO_URING"), "{m}");
        let m = unavailable_message(&err(libc::EINVAL), Some(0), false);
        assert!(m.contains("io_uring_setup failed"), "{m}");
    }
}
