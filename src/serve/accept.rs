//! The accept loop shared by every TCP server (echo's transports, the
//! relay): which accept(2) failures are retried, which pause accepting, the
//! bounded backoff of that pause, and the --max-conns admission. A server
//! supplies only what differs, through [`AcceptLoop`]: how to serve an
//! admitted connection and how to stop watching its listener.
//!
//! When the process is out of descriptors (EMFILE) the pending connection
//! stays in the accept queue, so the listener stays readable: retrying at
//! once would spin a CPU until a descriptor frees up. Instead the server
//! stops watching the listener for a backoff (10 ms, doubling up to 1 s,
//! reset by the next successful accept), then tries again.

use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use super::workers::Slots;
use crate::report::serve::echo::AcceptErrors;

/// First pause after a resource error.
pub const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Connections accepted per readiness event before a loop serves its other
/// sockets (level-triggered listeners report the rest again).
pub const ACCEPT_BATCH: usize = 64;

/// What to do after a failed accept.
#[derive(Debug, PartialEq, Eq)]
pub enum OnError {
    /// Nothing was pending (EAGAIN): wait for readiness.
    Idle,
    /// That connection is lost, the next may be fine: accept again.
    Retry,
    /// Out of a resource: pause accepting (see [`Backoff`]).
    Pause,
    /// The listener itself is broken: stop the server.
    Fatal,
}

/// Classifies (and counts) a failed accept.
pub fn classify(e: &io::Error, counts: &mut AcceptErrors) -> OnError {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => OnError::Idle,
        Some(libc::EINTR) => OnError::Retry,
        Some(libc::EMFILE) => {
            counts.emfile += 1;
            OnError::Pause
        }
        Some(libc::ENFILE) => {
            counts.enfile += 1;
            OnError::Pause
        }
        Some(libc::ENOBUFS) => {
            counts.enobufs += 1;
            OnError::Pause
        }
        Some(libc::ENOMEM) => {
            counts.enomem += 1;
            OnError::Pause
        }
        Some(libc::ECONNABORTED) => {
            counts.econnaborted += 1;
            OnError::Retry
        }
        Some(libc::EPROTO) => {
            counts.eproto += 1;
            OnError::Retry
        }
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => OnError::Fatal,
        // accept(2) passes on pending network errors (ENETDOWN,
        // EHOSTUNREACH...) and firewall refusals (EPERM); they concern one
        // connection. An errno we do not know could repeat, so it pauses
        // rather than retries: never a busy loop.
        _ => {
            counts.other += 1;
            OnError::Pause
        }
    }
}

/// The pause schedule after resource errors.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    until: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: BACKOFF_MIN,
            until: None,
        }
    }
}

impl Backoff {
    /// Starts a pause; returns when it ends. Each pause without a
    /// successful accept in between is twice as long, up to BACKOFF_MAX.
    pub fn pause(&mut self, counts: &mut AcceptErrors) -> Instant {
        counts.backoffs += 1;
        let until = Instant::now() + self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        self.until = Some(until);
        until
    }

    /// A connection was accepted: the next pause starts short again.
    pub fn success(&mut self) {
        self.next = BACKOFF_MIN;
    }

    /// When the current pause ends, if one is running.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// True (and the pause cleared) when a running pause has ended.
    pub fn expired(&mut self) -> bool {
        match self.until {
            Some(t) if Instant::now() >= t => {
                self.until = None;
                true
            }
            _ => false,
        }
    }

    /// True while paused.
    pub fn active(&self) -> bool {
        self.until.is_some()
    }
}

/// accept4(2) returning a close-on-exec descriptor, non-blocking if asked.
/// EINTR is retried here; every other error goes to [`classify`].
pub fn accept(listener: RawFd, nonblocking: bool) -> io::Result<OwnedFd> {
    let mut flags = libc::SOCK_CLOEXEC;
    if nonblocking {
        flags |= libc::SOCK_NONBLOCK;
    }
    loop {
        // SAFETY: plain syscall; no address is asked for.
        let fd =
            unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        if fd >= 0 {
            // SAFETY: fd is a new descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One loop's side of the accept policy, the same for every server: the
/// --max-conns slots it shares with the server's other loops, its own pause
/// schedule, and what it counted, added to the loop's report by
/// [`Acceptor::report`] when the loop ends.
#[derive(Debug)]
pub struct Acceptor {
    /// --max-conns, shared by every loop of the server.
    slots: Arc<Slots>,
    /// This loop's pause schedule.
    pub backoff: Backoff,
    /// Failed accepts, by error (reported).
    errors: AcceptErrors,
    /// Connections closed at once because --max-conns were open (reported).
    rejected: u64,
}

/// What became of one accept, once the shared policy was applied.
#[derive(Debug)]
pub enum Admitted {
    /// A connection to serve. It holds a --max-conns slot (give it back
    /// with [`Slots::release`] when it closes) and has TCP_NODELAY set.
    Conn(OwnedFd),
    /// Accept again at once: that connection was lost, or turned away for
    /// --max-conns (accepted and closed: the client sees EOF, or a reset if
    /// it had sent data, instead of waiting in the queue).
    Again,
    /// Nothing is pending: wait for the listener's readiness.
    Idle,
    /// Out of a resource: the backoff has started; stop watching the
    /// listener until [`Backoff::until`].
    Paused,
}

impl Acceptor {
    /// A loop's acceptor taking its connections' slots from `slots`.
    pub fn new(slots: &Arc<Slots>) -> Self {
        Self {
            slots: Arc::clone(slots),
            backoff: Backoff::default(),
            errors: AcceptErrors::default(),
            rejected: 0,
        }
    }

    /// Applies the accept policy to the result of one accept(2) (or of an
    /// io_uring accept): counts and classifies a failure, starts the
    /// backoff when it must pause, takes a --max-conns slot for a
    /// connection. A broken listener is an error that stops the server.
    pub fn admit(&mut self, res: io::Result<OwnedFd>) -> Result<Admitted> {
        let fd = match res {
            Ok(fd) => fd,
            Err(e) => {
                return match classify(&e, &mut self.errors) {
                    OnError::Idle => Ok(Admitted::Idle),
                    OnError::Retry => Ok(Admitted::Again),
                    OnError::Pause => {
                        self.backoff.pause(&mut self.errors);
                        Ok(Admitted::Paused)
                    }
                    OnError::Fatal => Err(anyhow!("accept on the listener: {e}")),
                };
            }
        };
        self.backoff.success();
        if !self.slots.admit() {
            self.rejected += 1;
            return Ok(Admitted::Again);
        }
        set_nodelay(fd.as_raw_fd());
        Ok(Admitted::Conn(fd))
    }

    /// Starts a pause for a resource the loop itself ran out of while
    /// serving an admitted connection (a thread, an upstream socket), as
    /// for EMFILE on accept; returns when it ends.
    pub fn pause(&mut self) -> Instant {
        self.backoff.pause(&mut self.errors)
    }

    /// Adds what this loop counted to its report's figures.
    pub fn report(&self, errors: &mut AcceptErrors, rejected_max_conns: &mut u64) {
        errors.merge(&self.errors);
        *rejected_max_conns += self.rejected;
    }
}

/// A server loop that accepts from a readiness-driven listener (threaded's
/// acceptor, an epoll loop, a relay loop): what differs between servers.
pub trait AcceptLoop {
    /// The listener, and whether accepted sockets are non-blocking.
    fn listener(&self) -> Option<(RawFd, bool)>;
    /// The loop's side of the accept policy.
    fn acceptor(&mut self) -> &mut Acceptor;
    /// Serves an admitted connection; `Break` ends the batch (the loop
    /// could not take it and paused accepting itself).
    fn serve(&mut self, fd: OwnedFd) -> ControlFlow<()>;
    /// Stops watching the listener: the backoff has started.
    fn pause_listening(&mut self) -> Result<()>;
}

/// Accepts from a readable listener, at most [`ACCEPT_BATCH`] connections
/// (the loop's other sockets get their turn; a level-triggered listener
/// reports the rest again), handing each admitted one to the loop.
pub fn accept_batch(lp: &mut impl AcceptLoop) -> Result<()> {
    let Some((listener, nonblocking)) = lp.listener() else {
        return Ok(());
    };
    for _ in 0..ACCEPT_BATCH {
        match lp.acceptor().admit(accept(listener, nonblocking))? {
            Admitted::Conn(fd) => {
                if lp.serve(fd).is_break() {
                    return Ok(());
                }
            }
            Admitted::Again => {}
            Admitted::Idle => return Ok(()),
            Admitted::Paused => return lp.pause_listening(),
        }
    }
    Ok(())
}

/// Sets TCP_NODELAY: responses go out as soon as they are written, as a
/// request/response server needs.
pub fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // Failure only costs latency (Nagle); not worth ending the connection.
    // SAFETY: valid option pointer and length.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_errors_pause_and_are_counted() {
        let mut c = AcceptErrors::default();
        let err = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify(&err(libc::EMFILE), &mut c), OnError::Pause);
        assert_eq!(classify(&err(libc::ENFILE), &mut c), OnError::Pause);
        assert_eq!(classify(&err(libc::ENOBUFS), &mut c), OnError::Pause);
        assert_eq!(classify(&err(libc::ENOMEM), &mut c), OnError::Pause);
        assert_eq!(classify(&err(libc::ECONNABORTED), &mut c), OnError::Retry);
        assert_eq!(classify(&err(libc::EPROTO), &mut c), OnError::Retry);
        assert_eq!(classify(&err(libc::EAGAIN), &mut c), OnError::Idle);
        assert_eq!(classify(&err(libc::EBADF), &mut c), OnError::Fatal);
        assert_eq!(classify(&err(libc::EHOSTUNREACH), &mut c), OnError::Pause);
        assert_eq!(
            (
                c.emfile,
                c.enfile,
                c.enobufs,
                c.enomem,
                c.econnaborted,
                c.eproto,
                c.other
            ),
            (1, 1, 1, 1, 1, 1, 1)
        );
    }

    #[test]
    fn backoff_doubles_to_a_cap_and_resets() {
        let mut c = AcceptErrors::default();
        let mut b = Backoff::default();
        let t0 = Instant::now();
        let u1 = b.pause(&mut c);
        assert!(u1 >= t0 + BACKOFF_MIN);
        for _ in 0..20 {
            b.pause(&mut c);
        }
        assert_eq!(b.next, BACKOFF_MAX);
        assert_eq!(c.backoffs, 21);
        assert!(b.active());
        b.success();
        assert_eq!(b.next, BACKOFF_MIN);
    }
}
