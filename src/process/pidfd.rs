//! Waiting on processes and descriptors without races: a pidfd names one
//! process (never a reused pid) and is readable once it has exited; every
//! wait here is bounded and restarts after EINTR. Used by [`super::target`]
//! (launched processes), [`super::watchdog`] (its own helper) and the
//! commands that attach to a running process.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Opens a pidfd for `pid` (readable once the process exits).
pub fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; a returned fd is ours.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh fd returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

/// True when the pidfd is readable within `timeout` (the process exited).
pub fn wait_pidfd(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    wait_readable(fd, timeout)
}

/// True when `fd` is readable (or at end-of-file) within `timeout`.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        let mut pfd = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(
            &mut pfd,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) if n > 0 => return true,
            Ok(_) => return false,
            Err(nix::errno::Errno::EINTR) if !left.is_zero() => continue,
            Err(_) => return false,
        }
    }
}
