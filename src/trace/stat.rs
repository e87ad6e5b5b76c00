//! One syscall's aggregate figures ([`SyscallStat`]: calls, errors, time,
//! latency histogram, errnos), as the tracer reads them from its maps, and
//! their arithmetic: the sum of two ([`add_stat`]) and the difference of two
//! cumulative readings ([`stat_since`]).

use std::collections::BTreeMap;

use crate::probe::hist::{self, Histogram};

/// Aggregated figures for one syscall number, summed over CPUs.
#[derive(Clone, Debug)]
pub struct SyscallStat {
    /// Syscall number ([`OTHER_SYSCALL`](super::abi::OTHER_SYSCALL) pools out-of-table numbers).
    pub nr: u32,
    /// Completed calls (plus calls that never return, counted at entry).
    pub calls: u64,
    /// Calls that returned -1..-4095.
    pub errors: u64,
    /// Sum of entry-to-exit wall time.
    pub total_ns: u64,
    /// Latency histogram with exact min/max.
    pub hist: Histogram,
    /// errno value -> count (kernel restart codes as 512..521).
    pub errnos: BTreeMap<u32, u64>,
}

/// Adds `b`'s figures to `a` (same syscall).
pub fn add_stat(a: &mut SyscallStat, b: &SyscallStat) {
    let a_timed = a.hist.total() > 0;
    let b_timed = b.hist.total() > 0;
    a.calls += b.calls;
    a.errors += b.errors;
    a.total_ns += b.total_ns;
    if a.hist.counts.len() < b.hist.counts.len() {
        a.hist.counts.resize(b.hist.counts.len(), 0);
    }
    for (x, y) in a.hist.counts.iter_mut().zip(&b.hist.counts) {
        *x += y;
    }
    match (a_timed, b_timed) {
        (true, true) => {
            a.hist.min = a.hist.min.min(b.hist.min);
            a.hist.max = a.hist.max.max(b.hist.max);
        }
        (false, true) => {
            a.hist.min = b.hist.min;
            a.hist.max = b.hist.max;
        }
        _ => {}
    }
    for (e, n) in &b.errnos {
        *a.errnos.entry(*e).or_default() += n;
    }
}

/// What `now` counted since `before` (the same syscall, an earlier reading
/// of the same cumulative counters). The exact extremes of an interval are
/// not known: min and max become the edges of the lowest and highest
/// bucket that gained samples, clamped to the cumulative extremes.
pub fn stat_since(now: &SyscallStat, before: Option<&SyscallStat>) -> SyscallStat {
    let Some(b) = before else {
        return now.clone();
    };
    let mut d = now.clone();
    d.calls = now.calls.saturating_sub(b.calls);
    d.errors = now.errors.saturating_sub(b.errors);
    d.total_ns = now.total_ns.saturating_sub(b.total_ns);
    for (i, x) in d.hist.counts.iter_mut().enumerate() {
        *x = x.saturating_sub(b.hist.counts.get(i).copied().unwrap_or(0));
    }
    for (e, n) in d.errnos.iter_mut() {
        *n = n.saturating_sub(b.errnos.get(e).copied().unwrap_or(0));
    }
    d.errnos.retain(|_, n| *n > 0);
    let first = d.hist.counts.iter().position(|c| *c > 0);
    let last = d.hist.counts.iter().rposition(|c| *c > 0);
    if let (Some(f), Some(l)) = (first, last) {
        d.hist.min = hist::lower_bound(f).max(now.hist.min);
        d.hist.max = (hist::lower_bound(l) + hist::width(l).saturating_sub(1)).min(now.hist.max);
    } else {
        d.hist.min = 0;
        d.hist.max = 0;
    }
    d
}

/// A syscall's figures from these latency samples (tests).
#[cfg(test)]
pub fn stat_of(nr: u32, samples: &[u64]) -> SyscallStat {
    let mut h = Histogram {
        counts: vec![0; hist::BUCKETS],
        min: samples.iter().copied().min().unwrap_or(0),
        max: samples.iter().copied().max().unwrap_or(0),
    };
    for v in samples {
        h.counts[hist::bucket_of(*v)] += 1;
    }
    SyscallStat {
        nr,
        calls: samples.len() as u64,
        errors: 0,
        total_ns: samples.iter().sum(),
        hist: h,
        errnos: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(samples: &[u64]) -> SyscallStat {
        stat_of(110, samples)
    }

    #[test]
    fn differences_of_cumulative_readings_add_back_up() {
        let a = stat(&[100, 200, 300]);
        let mut b = a.clone();
        add_stat(&mut b, &stat(&[5000, 7000]));
        let d = stat_since(&b, Some(&a));
        assert_eq!(d.calls, 2);
        assert_eq!(d.total_ns, 12000);
        assert_eq!(d.hist.total(), 2);
        assert!(d.hist.min <= 5000 && d.hist.min >= 4096, "{}", d.hist.min);
        assert_eq!(d.hist.max, 7000);
        let mut back = a.clone();
        add_stat(&mut back, &d);
        assert_eq!(back.calls, b.calls);
        assert_eq!(back.hist.counts, b.hist.counts);
    }
}
