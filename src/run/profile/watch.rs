//! What ends a run early: a pending stop signal (SIGINT, SIGTERM, SIGHUP;
//! checked between steps) and the target's exit during the load (a watcher
//! thread on its pidfd aborts the load).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use crate::run::exit;
use crate::signals::{Signals, StopFlag};

/// Fails with the interruption status if a stop signal is pending.
pub(super) fn check_signals(signals: &mut Signals, what: &str) -> Result<()> {
    while let Some(si) = signals.pending() {
        if si.ssi_signo != Signal::SIGCHLD as u32 {
            return Err(exit::interrupted(si.ssi_signo, what));
        }
    }
    Ok(())
}

/// Watches the target during the load: raises `abort` (ending the load
/// early) and sets `died` if it exits; ends once `done` is raised.
pub(super) fn start_watcher(
    exit_fd: OwnedFd,
    abort: Arc<StopFlag>,
    done: Arc<StopFlag>,
    died: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sockscope-watch".into())
        .spawn(move || {
            crate::signals::keep_off_this_thread();
            while !done.is_raised() {
                let mut pfds = [
                    PollFd::new(exit_fd.as_fd(), PollFlags::POLLIN),
                    PollFd::new(done.fd(), PollFlags::POLLIN),
                ];
                // The timeout only bounds a lost wakeup.
                let _ = poll(&mut pfds, PollTimeout::from(1000u16));
                if pfds[0].revents().is_some_and(|r| !r.is_empty()) {
                    died.store(true, Ordering::SeqCst);
                    abort.raise();
                    return;
                }
            }
        })
        .context("starting the target watcher thread")
}
