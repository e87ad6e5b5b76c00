//! A minimal level-triggered epoll wrapper with nanosecond timeouts
//! (epoll_pwait2), used by the load workers and the relay loops.
//! Level-triggered on purpose: a worker reads once per readiness report and
//! lets the kernel report again if more is queued, which costs one read per
//! transaction instead of the extra EAGAIN read edge-triggered would need.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Readable.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// The peer shut down its sending side.
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;

/// An epoll instance.
pub struct Poller {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    pwait2: bool,
}

/// One readiness report: the token given at registration and the events.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    /// Registration token.
    pub token: u64,
    /// EPOLLIN / EPOLLOUT / EPOLLERR / EPOLLHUP bits.
    pub events: u32,
}

impl Ready {
    /// Readable, or an error/hang-up a read will report.
    pub fn readable(&self) -> bool {
        self.events & (IN | libc::EPOLLERR as u32 | libc::EPOLLHUP as u32) != 0
    }
    /// Writable, or an error a write/SO_ERROR will report.
    pub fn writable(&self) -> bool {
        self.events & (OUT | libc::EPOLLERR as u32 | libc::EPOLLHUP as u32) != 0
    }
    /// The peer sent FIN (EPOLLRDHUP), or the connection is gone.
    pub fn hangup(&self) -> bool {
        self.events & (RDHUP | libc::EPOLLHUP as u32) != 0
    }
    /// An error is pending on the socket.
    pub fn error(&self) -> bool {
        self.events & libc::EPOLLERR as u32 != 0
    }
}

impl Poller {
    /// A new epoll instance returning up to `capacity` events per wait.
    pub fn new(capacity: usize) -> io::Result<Self> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: fresh fd.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            pwait2: true,
        })
    }

    fn ctl(&self, op: i32, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: valid epoll fd and event pointer.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Registers `fd` for `events` under `token`.
    pub fn add(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Changes the interest set of `fd`.
    pub fn modify(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Removes `fd` (closing an fd removes it too).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout` (None: forever); returns how many reports
    /// `ready(0..n)` now holds.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let n = loop {
            let n = if self.pwait2 {
                let ts = timeout.map(|t| libc::timespec {
                    tv_sec: t.as_secs() as libc::time_t,
                    tv_nsec: t.subsec_nanos() as libc::c_long,
                });
                let tsp = ts
                    .as_ref()
                    .map_or(std::ptr::null(), |t| t as *const libc::timespec);
                // SAFETY: valid fd, buffer and timespec; no signal mask.
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        self.fd.as_raw_fd(),
                        self.events.as_mut_ptr(),
                        self.events.len() as libc::c_int,
                        tsp,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    ) as i32
                }
            } else {
                // Round up so a sub-millisecond timeout does not spin. In
                // 64 bits: a 128-bit division here cost every wait (the
                // compiler computes it ahead of the branch) tens of ns.
                let ms = timeout.map_or(-1, |t| {
                    t.as_secs()
                        .saturating_mul(1000)
                        .saturating_add(u64::from(t.subsec_nanos()).div_ceil(1_000_000))
                        .min(i32::MAX as u64) as i32
                });
                // SAFETY: valid fd and buffer.
                unsafe {
                    libc::epoll_wait(
                        self.fd.as_raw_fd(),
                        self.events.as_mut_ptr(),
                        self.events.len() as libc::c_int,
                        ms,
                    )
                }
            };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) if self.pwait2 => self.pwait2 = false,
                _ => return Err(err),
            }
        };
        Ok(n)
    }

    /// Report `k` of the last wait.
    #[inline]
    pub fn ready(&self, k: usize) -> Ready {
        let e = self.events[k];
        Ready {
            token: e.u64,
            events: e.events,
        }
    }
}
