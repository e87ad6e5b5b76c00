//! The parsed, validated description of a TCP load run (`TcpPlan`), and
//! each worker's share of it (`WorkerCtx`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::load::driver::clock::RunClock;
use crate::load::driver::tally::ProgressCounters;
use crate::load::driver::tls::TlsClient;
use crate::load::schedule::Schedule;
use crate::load::schedule::rate_plan::RatePlan;
use crate::load::workload::ConnMode;

/// When a run stops.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After the warm-up plus this long.
    Duration(Duration),
    /// After this many measured transactions.
    Count(u64),
}

/// A TCP load run (its exchange aside: the driver takes it separately, so
/// that the plan stays one type whatever the workload).
#[derive(Clone, Debug)]
pub struct TcpPlan {
    /// The workload's name (`tcp-rr`): the report's `workload`.
    pub workload: &'static str,
    /// How the workload uses its connections.
    pub mode: ConnMode,
    /// Target: an IP address or a Unix socket.
    pub addr: Endpoint,
    /// Speak TLS on every connection, with this client (https).
    pub tls: Option<TlsClient>,
    /// The report's `target` when it is not `addr` (an http URL).
    pub target: Option<String>,
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    pub connections: usize,
    /// Worker threads, one epoll loop each.
    pub threads: usize,
    /// Stop condition.
    pub stop: Stop,
    /// Excluded from results.
    pub warmup: Duration,
    /// Open-loop total rate or schedule, transactions/s (None: closed
    /// loop).
    pub rate: Option<RatePlan>,
    /// Connect and response timeout.
    pub timeout: Duration,
    /// Most new connections per second (tcp-rr), None: as fast as possible.
    pub connect_rate: Option<f64>,
    /// Open loop: the most connections, opened beyond `connections` while
    /// every one is busy (--max-conns); None: `connections` only.
    pub max_conns: Option<usize>,
    /// Source addresses to spread connects over (empty: the kernel's).
    pub sources: Vec<std::net::IpAddr>,
    /// Ends the run early when raised by an embedding caller (profile
    /// raises it when its target dies, so the load does not run out its
    /// duration against nothing). The run then counts as failed.
    pub abort: Option<Arc<crate::signals::StopFlag>>,
    /// `--start-at`: the run (warm-up included) starts at this wall-clock
    /// instant.
    pub start_at: Option<crate::values::StartAt>,
    /// `--full-log`: keep each measured transaction's send time and latency,
    /// at most this many over the run (None: keep none).
    pub full_log: Option<usize>,
}

impl TcpPlan {
    /// The most connections the run may hold at once: --max-conns, or
    /// `connections` without it.
    pub fn max_connections(&self) -> usize {
        self.max_conns.unwrap_or(0).max(self.connections)
    }
}

/// One worker's share of the run.
#[derive(Clone, Debug)]
pub struct WorkerCtx {
    /// Worker index.
    pub index: usize,
    /// Connections (or connect loops) it drives.
    pub conns: usize,
    /// Its share of the open-loop rate or schedule.
    pub rate: Option<RatePlan>,
    /// Its share of --connect-rate.
    pub connect_rate: Option<f64>,
    /// Its share of --max-conns (at least `conns`).
    pub max_conns: usize,
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
    pub progress: Arc<ProgressCounters>,
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
    pub fn issued_all(&self, sched: Option<&Schedule>, issued_measured: u64) -> bool {
        let Some(q) = self.quota else {
            return false;
        };
        match sched {
            Some(s) => s.exhausted() && s.backlog.is_empty(),
            None => issued_measured >= q,
        }
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
}
