//! The generator's clocks: the run clock every worker stamps its events
//! with, and the CPU time it spends itself (reported as its own cost).

use std::time::{Duration, Instant};

/// Monotonic run clock: ns since the run's epoch, shared by all workers so
/// their timestamps compare.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    epoch: Instant,
}

impl RunClock {
    /// A clock starting now.
    pub fn start() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    /// ns since the epoch.
    #[inline]
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The Instant of run-clock time `t`.
    pub fn instant(&self, t: u64) -> Instant {
        self.epoch + Duration::from_nanos(t)
    }
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    let (u, s) = rusage_ns(libc::RUSAGE_THREAD);
    u + s
}

/// (user, system) CPU of `who`, ns.
pub fn rusage_ns(who: libc::c_int) -> (u64, u64) {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}
