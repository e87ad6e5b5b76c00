//! Open-loop pacing: intended send times at a constant rate, kept in a
//! backlog until a connection is free. Latency is measured from the
//! intended time, so a stalled target shows up as latency instead of
//! silently slowing the generator down (coordinated omission).

use std::collections::VecDeque;

/// A worker's open-loop schedule.
pub struct Schedule {
    gap_ns: f64,
    next: f64,
    /// Intended times released but not yet sent.
    pub backlog: VecDeque<u64>,
    /// Intended times not queued because the backlog was full.
    pub overflowed: u64,
    measure_from: u64,
    quota: Option<u64>,
    measured_released: u64,
}

/// Most intended times a worker keeps waiting; beyond this the target is
/// hopelessly behind and the excess is counted, not queued.
const MAX_BACKLOG: usize = 100_000;

impl Schedule {
    /// `rate` per second starting at run-clock `start`; with a `quota`,
    /// stops releasing after that many intended times at or after
    /// `measure_from`.
    pub fn new(rate: f64, start: u64, measure_from: u64, quota: Option<u64>) -> Self {
        Self {
            gap_ns: 1e9 / rate,
            next: start as f64,
            backlog: VecDeque::new(),
            overflowed: 0,
            measure_from,
            quota,
            measured_released: 0,
        }
    }

    /// True once the quota (if any) has been released.
    pub fn exhausted(&self) -> bool {
        self.quota.is_some_and(|q| self.measured_released >= q)
    }

    /// Releases every intended time up to `now` into the backlog, calling
    /// `lag` with how late each was released (the generator's lateness,
    /// before any wait for a free connection).
    pub fn release(&mut self, now: u64, mut lag: impl FnMut(u64, u64)) {
        while !self.exhausted() && self.next <= now as f64 {
            let t = self.next as u64;
            self.next += self.gap_ns;
            if t >= self.measure_from {
                self.measured_released += 1;
            }
            lag(t, now - t);
            if self.backlog.len() >= MAX_BACKLOG {
                self.overflowed += 1;
            } else {
                self.backlog.push_back(t);
            }
        }
    }

    /// Run-clock time of the next release (None when exhausted).
    pub fn next_due(&self) -> Option<u64> {
        (!self.exhausted()).then_some(self.next as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_at_rate_and_respects_quota() {
        let mut s = Schedule::new(1000.0, 0, 0, Some(5));
        let mut lags = Vec::new();
        s.release(2_500_000, |_, l| lags.push(l)); // 0, 1 ms, 2 ms
        assert_eq!(lags, vec![2_500_000, 1_500_000, 500_000]);
        assert_eq!(
            s.backlog.iter().copied().collect::<Vec<_>>(),
            vec![0, 1_000_000, 2_000_000]
        );
        s.release(10_000_000, |_, _| {});
        assert_eq!(s.backlog.len(), 5);
        assert!(s.exhausted());
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn warmup_releases_do_not_count_against_quota() {
        let mut s = Schedule::new(1000.0, 0, 3_000_000, Some(2));
        s.release(100_000_000, |_, _| {});
        // 0,1,2 ms are warm-up; 3 and 4 ms are the measured quota.
        assert_eq!(s.backlog.len(), 5);
    }
}
