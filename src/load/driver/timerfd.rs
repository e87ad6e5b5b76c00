//! The one-shot CLOCK_MONOTONIC timerfd both open-loop pacers sleep on
//! (the driver's worker poller, the HTTP/2 engine's tokio reactor): its
//! creation, arming and draining, written once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A disarmed, non-blocking timerfd on CLOCK_MONOTONIC.
pub fn create() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned below.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `fd` to fire once, `ns` from now (a zero it_value would disarm it,
/// so a time already past fires at once instead).
pub fn fire_after(fd: &OwnedFd, ns: u64) -> io::Result<()> {
    let ns = ns.max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: valid timerfd and itimerspec; no old value asked for.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the expiration count, so a level-triggered poller stops reporting
/// the timer: Ok(true) when it had fired, Ok(false) when it had not yet
/// (EAGAIN).
pub fn drain(fd: &OwnedFd) -> io::Result<bool> {
    let mut expirations = 0u64;
    // SAFETY: reads 8 bytes into a u64 from a valid non-blocking timerfd.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut expirations as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    if n == 8 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}
