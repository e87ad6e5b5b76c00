//! The parsed, validated description of a TCP load run, and each worker's
//! share of it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use super::conn::Exchange;

/// When a run stops.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After the warm-up plus this long.
    Duration(Duration),
    /// After this many measured transactions.
    Count(u64),
}

/// A TCP load run.
#[derive(Clone, Debug)]
pub struct TcpPlan {
    /// Target.
    pub addr: SocketAddr,
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    pub connections: usize,
    /// Worker threads, one epoll loop each.
    pub threads: usize,
    /// What each transaction sends and expects.
    pub exchange: Exchange,
    /// Requests in flight per connection (tcp-rr).
    pub pipeline: usize,
    /// Close with RST (SO_LINGER 0) instead of FIN (tcp-crr).
    pub close_rst: bool,
    /// Stop condition.
    pub stop: Stop,
    /// Excluded from results.
    pub warmup: Duration,
    /// Open-loop total rate, transactions/s (None: closed loop).
    pub rate: Option<f64>,
    /// Connect and response timeout.
    pub timeout: Duration,
    /// Most new connections per second (tcp-rr), None: as fast as possible.
    pub connect_rate: Option<f64>,
    /// Source addresses to spread connects over (empty: the kernel's).
    pub sources: Vec<std::net::IpAddr>,
    /// Ends the run early when raised by an embedding caller (profile
    /// raises it when its target dies, so the load does not run out its
    /// duration against nothing). The run then counts as failed.
    pub abort: Option<Arc<crate::signals::StopFlag>>,
}

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

/// Per-worker progress counters read by the main thread (one cache line
/// each, written by one worker only).
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct Progress {
    /// Measured transactions completed.
    pub transactions: AtomicU64,
    /// Errors.
    pub errors: AtomicU64,
    /// Successful connects.
    pub connects: AtomicU64,
}

/// One worker's share of the run.
#[derive(Clone, Debug)]
pub struct WorkerCtx {
    /// Worker index.
    pub index: usize,
    /// Connections (or connect loops) it drives.
    pub conns: usize,
    /// Its share of the open-loop rate.
    pub rate: Option<f64>,
    /// Its share of --connect-rate.
    pub connect_rate: Option<f64>,
    /// Its share of the measured transactions (count mode).
    pub quota: Option<u64>,
    /// Shared clock.
    pub clock: RunClock,
    /// Start of the measured window (after warm-up), run clock ns.
    pub measure_from: u64,
    /// End of the run in duration mode, run clock ns.
    pub end: Option<u64>,
    /// Set by the main thread to stop early (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Its progress counters.
    pub progress: Arc<Progress>,
}

impl WorkerCtx {
    /// Splits `total` into `parts` shares that differ by at most one.
    pub fn share(total: u64, parts: usize, index: usize) -> u64 {
        let parts = parts as u64;
        total / parts + u64::from((index as u64) < total % parts)
    }

    /// Closed loop: may another request be issued now, with
    /// `issued_measured` measured ones issued so far? (The count quota and
    /// the end time; open loop decides through its schedule.)
    pub fn may_issue(&self, issued_measured: u64, now: u64) -> bool {
        if self.end.is_some_and(|e| now >= e) {
            return false;
        }
        match self.quota {
            Some(q) if now >= self.measure_from => issued_measured < q,
            _ => true,
        }
    }

    /// Count mode: has every measured transaction of this worker's quota
    /// been issued? (Open loop: the schedule is exhausted and nothing waits
    /// in its backlog.) Always false in duration mode.
    pub fn issued_all(
        &self,
        sched: Option<&super::schedule::Schedule>,
        issued_measured: u64,
    ) -> bool {
        let Some(q) = self.quota else {
            return false;
        };
        match sched {
            Some(s) => s.exhausted() && s.backlog.is_empty(),
            None => issued_measured >= q,
        }
    }
}

/// Exponential reconnect backoff, 10 ms doubling up to 1 s: a dead server
/// costs a few attempts per second per connection, never a spin.
#[derive(Clone, Copy, Debug)]
pub struct Backoff(u64);

impl Default for Backoff {
    fn default() -> Self {
        Self(Self::MIN)
    }
}

impl Backoff {
    const MIN: u64 = 10_000_000;
    const MAX: u64 = 1_000_000_000;

    /// The delay to wait now; doubles the next one.
    pub fn next_delay(&mut self) -> u64 {
        let d = self.0;
        self.0 = (self.0 * 2).min(Self::MAX);
        d
    }

    /// Back to the shortest delay after a success.
    pub fn reset(&mut self) {
        self.0 = Self::MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (total, parts) in [(10u64, 3usize), (2, 4), (1000, 7)] {
            let sum: u64 = (0..parts).map(|i| WorkerCtx::share(total, parts, i)).sum();
            assert_eq!(sum, total);
        }
    }

    #[test]
    fn backoff_is_bounded() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..12).map(|_| b.next_delay()).collect();
        assert_eq!(delays[0], 10_000_000);
        assert_eq!(delays[1], 20_000_000);
        assert_eq!(*delays.last().unwrap(), 1_000_000_000);
        b.reset();
        assert_eq!(b.next_delay(), 10_000_000);
    }
}
