//! Open-loop pacing: intended send times placed on the run's rate plan
//! (`--rate`: a constant rate, or a schedule of steps or a ramp), kept in a
//! backlog until a connection is free. Latency is measured from the
//! intended time, so a stalled target shows up as latency instead of
//! silently slowing the generator down (coordinated omission).
//!
//! The n-th intended time is the plan's `time_of(n)` from its start, not a
//! running sum of gaps: exact over any length of run, and right for a
//! ramp whose rate changes with every send. A schedule starts with the
//! measured window, so its steps are the window's whole seconds; the
//! warm-up before it runs at the schedule's first step's rate.

pub mod limited;
pub mod rate_plan;

use std::collections::VecDeque;

use crate::load::schedule::rate_plan::RatePlan;

/// A worker's open-loop schedule.
pub struct Schedule {
    plan: RatePlan,
    /// Run-clock ns of the plan's zero.
    base: f64,
    /// Index on the plan of the next intended time.
    n: u64,
    /// Warm-up pacing before a schedule: (gap, next), run-clock ns.
    warm: Option<(f64, f64)>,
    /// The next intended time (None: the plan has ended).
    next: Option<u64>,
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
    /// A worker's share `plan` starting at run-clock `start`; with a
    /// `quota`, stops releasing after that many intended times at or after
    /// `measure_from`. A constant rate runs from `start` (warm-up
    /// included); a schedule runs from `measure_from`, after a warm-up at
    /// its first step's rate.
    pub fn new(plan: &RatePlan, start: u64, measure_from: u64, quota: Option<u64>) -> Self {
        let (base, warm) = match plan.constant() {
            Some(_) => (start as f64, None),
            None => {
                let first = plan.steps().first().map_or(0.0, |s| s.rate);
                let warm =
                    (start < measure_from && first > 0.0).then(|| (1e9 / first, start as f64));
                (measure_from as f64, warm)
            }
        };
        let mut s = Self {
            plan: plan.clone(),
            base,
            n: 0,
            warm,
            next: None,
            backlog: VecDeque::new(),
            overflowed: 0,
            measure_from,
            quota,
            measured_released: 0,
        };
        s.next = s.compute_next();
        s
    }

    /// The intended time after the ones already released.
    fn compute_next(&self) -> Option<u64> {
        if let Some((_, w)) = self.warm {
            if w < self.base {
                return Some(w as u64);
            }
        }
        self.plan
            .time_of(self.n as f64)
            .map(|s| (self.base + s * 1e9).round() as u64)
    }

    fn advance(&mut self) {
        match self.warm.as_mut() {
            Some((gap, w)) if *w < self.base => *w += *gap,
            _ => self.n += 1,
        }
        self.next = self.compute_next();
    }

    /// True once the quota (if any) has been released, or the plan has
    /// ended.
    pub fn exhausted(&self) -> bool {
        self.next.is_none() || self.quota.is_some_and(|q| self.measured_released >= q)
    }

    /// Releases every intended time up to `now` into the backlog, calling
    /// `lag` with each one's intended time, how late it was released (the
    /// generator's lateness, before any wait for a free connection) and
    /// how many sends were queued ahead of it.
    pub fn release(&mut self, now: u64, mut lag: impl FnMut(u64, u64, usize)) {
        while !self.exhausted() {
            let Some(t) = self.next.filter(|&t| t <= now) else {
                break;
            };
            self.advance();
            if t >= self.measure_from {
                self.measured_released += 1;
            }
            lag(t, now - t, self.backlog.len());
            if self.backlog.len() >= MAX_BACKLOG {
                self.overflowed += 1;
            } else {
                self.backlog.push_back(t);
            }
        }
    }

    /// Run-clock time of the next release (None when exhausted).
    pub fn next_due(&self) -> Option<u64> {
        if self.exhausted() { None } else { self.next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_at_rate_and_respects_quota() {
        let mut s = Schedule::new(&RatePlan::Constant(1000.0), 0, 0, Some(5));
        let mut lags = Vec::new();
        s.release(2_500_000, |_, l, q| lags.push((l, q))); // 0, 1 ms, 2 ms
        assert_eq!(
            lags,
            vec![(2_500_000, 0), (1_500_000, 1), (500_000, 2)],
            "each with the sends queued ahead of it"
        );
        assert_eq!(
            s.backlog.iter().copied().collect::<Vec<_>>(),
            vec![0, 1_000_000, 2_000_000]
        );
        s.release(10_000_000, |_, _, _| {});
        assert_eq!(s.backlog.len(), 5);
        assert!(s.exhausted());
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn warmup_releases_do_not_count_against_quota() {
        let mut s = Schedule::new(&RatePlan::Constant(1000.0), 0, 3_000_000, Some(2));
        s.release(100_000_000, |_, _, _| {});
        // 0,1,2 ms are warm-up; 3 and 4 ms are the measured quota.
        assert_eq!(s.backlog.len(), 5);
    }

    #[test]
    fn a_schedule_releases_each_step_at_its_rate_after_a_warmup_at_its_first() {
        let plan = RatePlan::parse("10,20 every 1s").unwrap();
        // Warm-up of 0.5 s at 10/s, then the plan from 0.5 s.
        let mut s = Schedule::new(&plan, 0, 500_000_000, None);
        s.release(10_000_000_000, |_, _, _| {});
        let times: Vec<u64> = s.backlog.iter().copied().collect();
        let warm = times.iter().filter(|&&t| t < 500_000_000).count();
        assert_eq!(warm, 5);
        let step = |a: u64, b: u64| {
            times
                .iter()
                .filter(|&&t| t >= 500_000_000 + a && t < 500_000_000 + b)
                .count()
        };
        assert_eq!(step(0, 1_000_000_000), 10);
        assert_eq!(step(1_000_000_000, 2_000_000_000), 20);
        assert_eq!(times.len(), 35, "nothing after the plan's end");
        assert!(s.exhausted());
    }

    #[test]
    fn a_ramp_from_zero_releases_what_the_plan_counts() {
        let plan = RatePlan::parse("0..400 over 3s").unwrap();
        let mut s = Schedule::new(&plan, 0, 0, None);
        s.release(4_000_000_000, |_, _, _| {});
        assert_eq!(s.backlog.len() as f64, plan.count_until(3.0));
        let per_s: Vec<usize> = (0..3u64)
            .map(|i| {
                s.backlog
                    .iter()
                    .filter(|&&t| t >= i * 1_000_000_000 && t < (i + 1) * 1_000_000_000)
                    .count()
            })
            .collect();
        assert!(per_s[0] < per_s[1] && per_s[1] < per_s[2], "{per_s:?}");
    }
}
