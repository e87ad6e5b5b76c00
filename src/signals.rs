//! Signals routed to a signalfd, so the main loops of trace, load and serve
//! wait on them like on any other file descriptor.

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd, siginfo};

/// Signals routed to a signalfd for as long as this value lives.
///
/// Blocking happens on the calling thread and is inherited by threads it
/// starts afterwards: create this before spawning workers, so the process
/// cannot take the signal anywhere else.
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

    /// The signalfd, to poll on.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
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

/// Name of a signal number (SIGINT...), for reports.
pub fn signal_name(signo: u32) -> String {
    Signal::try_from(signo as i32)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signo}"))
}
