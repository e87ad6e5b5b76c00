//! Surviving accept(2) failures: which errors are retried, which pause
//! accepting, and the bounded backoff of that pause.
//!
//! When the process is out of descriptors (EMFILE) the pending connection
//! stays in the accept queue, so the listener stays readable: retrying at
//! once would spin a CPU until a descriptor frees up. Instead the transport
//! stops watching the listener for a backoff (10 ms, doubling up to 1 s,
//! reset by the next successful accept), then tries again.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::counters::AcceptErrors;

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
