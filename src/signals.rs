//! Signals routed to a signalfd, so the main loops of trace, load and serve
//! wait on them like on any other file descriptor.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// Every signal of this set was already blocked before (an outer
    /// `Signals` reads them: profile or bench around an embedded load).
    nested: bool,
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
        let nested = sigs.iter().all(|s| old.contains(*s));
        Ok(Self { fd, old, nested })
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
        // Nested, nothing is unblocked: what arrived stays pending for the
        // outer reader, which must see a Ctrl-C that came at the very end.
        if !self.nested {
            while self.pending().is_some() {}
        }
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.old), None);
    }
}

/// Blocks every signal in the calling thread for good: the first thing a
/// helper thread does. A process-directed signal goes to any thread that
/// does not block it; a helper started before the main loop's [`Signals`]
/// would otherwise take a SIGCHLD (ignored there: the loop waiting for its
/// command's exit never hears of it) or a SIGINT (whose default action ends
/// the process, its report unwritten). With every helper blocking them, a
/// signal stays for the loop's signalfd, or for the main thread's default
/// action when no loop reads.
pub fn keep_off_this_thread() {
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), None);
}

/// Name of a signal number (SIGINT...), for reports.
pub fn signal_name(signo: u32) -> String {
    Signal::try_from(signo as i32)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signo}"))
}

/// Number of a signal named as [`signal_name`] writes it (`SIGINT` -> 2);
/// None for a name that is no signal.
pub fn signal_number(name: &str) -> Option<u32> {
    Signal::iterator()
        .find(|s| s.as_str() == name)
        .map(|s| s as i32 as u32)
}

/// A one-way "stop now" switch that is also a file descriptor (an eventfd
/// that becomes readable once raised and stays readable: nobody reads it,
/// so any number of loops can watch it, level-triggered).
#[derive(Debug)]
pub struct StopFlag {
    fd: OwnedFd,
    raised: AtomicBool,
}

impl StopFlag {
    /// A lowered flag.
    pub fn new() -> Result<Self> {
        Ok(Self {
            fd: eventfd().context("creating the stop eventfd")?,
            raised: AtomicBool::new(false),
        })
    }

    /// Raises the flag and wakes everything watching it.
    pub fn raise(&self) {
        if !self.raised.swap(true, Ordering::SeqCst) {
            bump(&self.fd);
        }
    }

    /// True once raised.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// The descriptor to watch for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A new non-blocking eventfd.
pub fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before it is owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd, making it readable.
pub fn bump(fd: &OwnedFd) {
    let one: u64 = 1;
    // An eventfd write only fails when the counter would overflow, which a
    // few increments never reach; the fd stays readable either way.
    // SAFETY: writes 8 bytes from a valid u64.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_and_numbers_round_trip() {
        assert_eq!(signal_number("SIGINT"), Some(libc::SIGINT as u32));
        assert_eq!(signal_number("SIGTERM"), Some(libc::SIGTERM as u32));
        assert_eq!(signal_number(&signal_name(libc::SIGHUP as u32)), Some(1));
        assert_eq!(signal_number("signal 99"), None);
        assert_eq!(signal_number("INT"), None);
    }

    #[test]
    fn a_nested_signalfd_leaves_late_signals_to_the_outer_one() {
        // Its own thread: the mask and the raised signal stay there.
        std::thread::spawn(|| {
            let mut outer = Signals::block(&[Signal::SIGUSR2]).unwrap();
            let inner = Signals::block(&[Signal::SIGUSR2]).unwrap();
            // Arrives after the inner loop stopped reading.
            // SAFETY: raise on the calling thread, where SIGUSR2 is blocked.
            assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
            drop(inner);
            let si = outer
                .pending()
                .expect("the outer reader sees the late signal");
            assert_eq!(si.ssi_signo, libc::SIGUSR2 as u32);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_outermost_signalfd_swallows_late_signals() {
        std::thread::spawn(|| {
            let s = Signals::block(&[Signal::SIGUSR1]).unwrap();
            // SAFETY: raise on the calling thread, where SIGUSR1 is blocked.
            assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
            // Unblocking would deliver it (and kill the process) unless
            // the drop swallowed it.
            drop(s);
        })
        .join()
        .unwrap();
    }
}
