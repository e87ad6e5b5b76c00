//! Stopping a server: SIGTERM/SIGINT arrive on a signalfd read by the
//! controlling thread, which then raises a [`StopFlag`] that every worker
//! loop watches as a file descriptor (so a loop blocked in epoll_wait,
//! poll or io_uring_enter wakes without polling a flag on a timer).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::signals::{Signals, bump, eventfd, signal_name};

/// Blocks SIGTERM and SIGINT and returns the signalfd that reads them: the
/// graceful end of every server. Call it before any thread exists, so every
/// thread inherits the blocked mask.
pub fn block_stop_signals() -> Result<Signals> {
    Signals::block(&[
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ])
}

/// A counter of finished workers that the controller can wait on: each
/// worker bumps it as it exits, for whatever reason, so a worker that fails
/// wakes the controller at once.
pub struct ExitNotice {
    fd: OwnedFd,
}

impl ExitNotice {
    /// A fresh notice.
    pub fn new() -> Result<Self> {
        Ok(Self {
            fd: eventfd().context("creating the worker-exit eventfd")?,
        })
    }

    /// Called by a worker as it exits.
    pub fn notify(&self) {
        bump(&self.fd);
    }

    /// Consumes the exits signalled so far, so the descriptor only becomes
    /// readable again at the next exit.
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // Non-blocking: EAGAIN when nothing was pending, which is fine.
        // SAFETY: reads 8 bytes into a valid u64.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// The descriptor to watch for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What ended [`wait_for_stop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// SIGTERM or SIGINT (the name).
    Signal(String),
    /// A worker exited on its own (an error, or its work was done).
    WorkerExited,
}

/// Blocks until a stop signal arrives or a worker exits; wakes at least
/// every second to re-check, so a lost wakeup cannot hang it.
pub fn wait_for_stop(signals: &mut Signals, exits: &ExitNotice) -> Result<StopCause> {
    loop {
        if let Some(si) = signals.pending() {
            return Ok(StopCause::Signal(signal_name(si.ssi_signo)));
        }
        let mut pfds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(exits.fd(), PollFlags::POLLIN),
        ];
        match poll(&mut pfds, PollTimeout::from(1000u16)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        if pfds[1]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN))
        {
            return Ok(StopCause::WorkerExited);
        }
    }
}

/// Milliseconds until `deadline` for poll/epoll_wait, rounded up so a wait
/// never wakes a hair early and spins; capped at `cap`.
pub fn timeout_ms(deadline: Option<Instant>, cap: Duration) -> i32 {
    let cap_ms = cap.as_millis().min(i32::MAX as u128) as i32;
    match deadline {
        None => cap_ms,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            ms.min(cap_ms)
        }
    }
}
