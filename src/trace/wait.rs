//! Waiting on several things at once without busy loops: signals (through a
//! signalfd), process exits (pidfds), the lifecycle ring buffer, and an
//! optional deadline.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::RingBuffer;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signalfd::siginfo;

pub use crate::signals::{Signals, signal_name};

/// What ended a wait.
pub enum Wake {
    /// A signal arrived.
    Signal(siginfo),
    /// `fds[i]` became readable.
    Ready(usize),
    /// The deadline passed.
    Deadline,
}

/// Waits until a signal, one of `fds` or the deadline; ring buffer records
/// are consumed whenever the wait wakes up.
pub fn wait(
    signals: &mut Signals,
    fds: &[BorrowedFd<'_>],
    rb: &RingBuffer<'_>,
    deadline: Option<Instant>,
) -> Result<Wake> {
    // SAFETY: the ring buffer's epoll fd lives as long as `rb`, which
    // outlives this call.
    let rb_fd = unsafe { BorrowedFd::borrow_raw(rb.epoll_fd()) };
    loop {
        if let Some(si) = signals.pending() {
            return Ok(Wake::Signal(si));
        }
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Wake::Deadline);
                }
                // Round up so we never wake a hair early and spin.
                let ms = left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut pfds: Vec<PollFd<'_>> = Vec::with_capacity(fds.len() + 2);
        pfds.push(PollFd::new(signals.as_fd(), PollFlags::POLLIN));
        pfds.push(PollFd::new(rb_fd, PollFlags::POLLIN));
        for fd in fds {
            pfds.push(PollFd::new(*fd, PollFlags::POLLIN));
        }
        match poll(&mut pfds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("poll"),
        }
        let ready = |p: &PollFd<'_>| p.revents().is_some_and(|r| !r.is_empty());
        // Records are mostly committed without a wakeup (see rb_flags in
        // the BPF code), so drain on every wake, not only when signalled.
        rb.consume().context("reading the event ring buffer")?;
        if let Some(i) = pfds[2..].iter().position(ready) {
            return Ok(Wake::Ready(i));
        }
    }
}

/// Drains the ring buffer until `done` says so or `limit` has passed,
/// looking every millisecond (for records due within microseconds).
pub fn drain_until(rb: &RingBuffer<'_>, done: impl Fn() -> bool, limit: Duration) -> Result<()> {
    let end = Instant::now() + limit;
    loop {
        rb.consume().context("reading the event ring buffer")?;
        if done() || Instant::now() >= end {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
