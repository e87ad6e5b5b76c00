//! The generator's clocks: the run clock every worker stamps its events
//! with, and the CPU time it spends itself (reported as its own cost).

use std::time::{Duration, Instant};

/// Monotonic run clock: ns since the run's epoch, shared by all workers so
/// their timestamps compare.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    epoch: Instant,
    /// The epoch on CLOCK_MONOTONIC (the clock `Instant` reads), ns.
    epoch_ns: u64,
}

/// CLOCK_MONOTONIC, ns. Read directly: `Instant::elapsed` adds a timespec
/// subtraction and a 128-bit conversion to every one of the two clock reads
/// a transaction makes.
#[inline]
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; CLOCK_MONOTONIC cannot fail (vDSO).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl RunClock {
    /// A clock starting now.
    pub fn start() -> Self {
        Self {
            epoch: Instant::now(),
            epoch_ns: monotonic_ns(),
        }
    }

    /// ns since the epoch.
    #[inline]
    pub fn now(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch_ns)
    }

    /// The Instant of run-clock time `t`.
    pub fn instant(&self, t: u64) -> Instant {
        self.epoch + Duration::from_nanos(t)
    }
}

pub use crate::procfs::rusage_ns;

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    let (u, s) = rusage_ns(libc::RUSAGE_THREAD);
    u + s
}
