//! The generator's clocks: the run clock every worker stamps its events
//! with, and the CPU time it spends itself (reported as its own cost).

use std::time::{Duration, Instant};

use crate::clock::monotonic_ns;

/// Monotonic run clock: ns since the run's epoch, shared by all workers so
/// their timestamps compare.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    epoch: Instant,
    /// The epoch on CLOCK_MONOTONIC (the clock `Instant` reads), ns.
    epoch_ns: u64,
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
