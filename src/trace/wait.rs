//! Waiting on several things at once without busy loops: signals (through a
//! signalfd), process exits (pidfds), the lifecycle ring buffer, and an
//! optional deadline.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use anyhow::{Context, Result};
use libbpf_rs::RingBuffer;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd, siginfo};

/// Signals routed to a signalfd for as long as this value lives.
///
/// Blocking happens on the calling thread; sockscope trace runs its loop on
/// one thread and starts no others, so the process cannot take the signal
/// anywhere else.
pub struct Signals {
    fd: SignalFd,
    old: SigSet,
}

impl Signals {
    /// Blocks `sigs` and opens a non-blocking signalfd for them.
    pub fn block(sigs: &[Signal]) -> Result<Self> {
        let mut set = SigSet::empty();
        for s in sigs {
            set.add(*s);
        }
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
            .context("blocking signals")?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("creating a signalfd")?;
        Ok(Self { fd, old })
    }

    /// Next pending signal, if any.
    pub fn pending(&mut self) -> Option<siginfo> {
        self.fd.read_signal().ok().flatten()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        // Swallow what arrived after the loop stopped listening, so
        // unblocking does not deliver a stale SIGINT that kills the report.
        while self.pending().is_some() {}
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.old), None);
    }
}

/// What ended a wait.
pub enum Wake {
    /// A signal arrived.
    Signal(siginfo),
    /// `fds[i]` became readable.
    Ready(usize),
    /// The deadline passed.
    Deadline,
}

/// Name of a signal number (SIGINT...), for reports.
pub fn signal_name(signo: u32) -> String {
    Signal::try_from(signo as i32)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signo}"))
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
        pfds.push(PollFd::new(signals.fd.as_fd(), PollFlags::POLLIN));
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
