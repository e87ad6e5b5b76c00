//! The per-step results of a `--rate` schedule: each step is a run of the
//! measured window's whole seconds, so its figures are sums of the run's
//! per-second tallies (`SecondTally`, gathered from every worker): its
//! transactions and errors add up exactly to the intervals' and the run's.
//! Each step is judged by the one generator-limited rule
//! (`limited::judge`): its send-lag p99 and its busiest worker thread's
//! CPU share.

use std::collections::BTreeMap;

use anyhow::Result;
use hdrhistogram::Histogram;

use crate::load::driver::tally::SecondTally;
use crate::load::schedule::limited::{GeneratorSigns, judge};
use crate::load::schedule::rate_plan::RatePlan;
use crate::report::load::{LatencyRecord, Step, StepErrors};
use crate::stats::LatencyHist;

/// The steps of `plan` from the run's `seconds` (None for a constant
/// rate). Seconds past the schedule's end (answers recorded as the run
/// stopped) count in the last step, so nothing measured is left out.
pub(crate) fn assemble(
    plan: &RatePlan,
    seconds: &BTreeMap<u64, SecondTally>,
) -> Result<Option<Vec<Step>>> {
    let steps = plan.steps();
    if steps.is_empty() {
        return Ok(None);
    }
    let last = steps.len() - 1;
    let mut out = Vec::with_capacity(steps.len());
    for (index, ps) in steps.iter().enumerate() {
        let end = if index == last {
            u64::MAX
        } else {
            ps.start_s + ps.len_s
        };
        let mut sum = SecondTally::default();
        for (_, sec) in seconds.range(ps.start_s..end) {
            add(&mut sum, sec);
        }
        let latency = to_latency(&sum.hist);
        let lag = sum.send_lag.as_ref().map(to_latency);
        let wall_ns = ps.len_s as f64 * 1e9;
        let busiest = sum
            .cpu_ns
            .iter()
            .max()
            .map(|&ns| (ns as f64 / wall_ns * 1000.0).round() / 1000.0);
        let signs = GeneratorSigns {
            send_lag_p99_ns: lag
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(|h| h.quantile(0.99)),
            busiest_thread_share: busiest,
        };
        out.push(Step {
            index,
            start_s: ps.start_s,
            len_s: ps.len_s,
            requested_per_s: ps.rate,
            achieved_per_s: sum.transactions as f64 / ps.len_s as f64,
            transactions: sum.transactions,
            errors: StepErrors {
                total: sum.errors,
                by_class: sum
                    .errors_by_class
                    .iter()
                    .map(|(k, v)| (k.name().to_string(), *v))
                    .collect(),
            },
            latency: LatencyRecord::of(&latency)?,
            send_lag: lag.as_ref().map(LatencyRecord::of).transpose()?.flatten(),
            busiest_thread_share: busiest,
            generator_limited: judge(signs),
        });
    }
    Ok(Some(out))
}

/// Adds second `b` into the step's sum `a`.
fn add(a: &mut SecondTally, b: &SecondTally) {
    a.transactions += b.transactions;
    a.errors += b.errors;
    for (k, v) in &b.errors_by_class {
        *a.errors_by_class.entry(*k).or_default() += v;
    }
    let _ = a.hist.add(&b.hist);
    if let Some(l) = &b.send_lag {
        match a.send_lag.as_mut() {
            Some(acc) => {
                let _ = acc.add(l);
            }
            None => a.send_lag = Some(l.clone()),
        }
    }
    if a.cpu_ns.len() < b.cpu_ns.len() {
        a.cpu_ns.resize(b.cpu_ns.len(), 0);
    }
    for (x, y) in a.cpu_ns.iter_mut().zip(&b.cpu_ns) {
        *x += y;
    }
}

/// A per-second histogram (2 significant digits) as the run's latency
/// histogram type: each bucket's count at its highest equivalent value, as
/// the histogram's own percentiles report it.
fn to_latency(h: &Histogram<u32>) -> LatencyHist {
    let mut out = LatencyHist::new();
    for v in h.iter_recorded() {
        out.record_n(
            h.highest_equivalent(v.value_iterated_to()),
            u64::from(v.count_at_value()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::driver::tally::{IntervalRecord, interval_hist, lag_hist};
    use crate::load::workload::ErrorClass;

    /// A worker's record of `second`: `tx` transactions of 50 us, each
    /// released `lag` ns late, `errors` resets, `cpu_ms` of CPU.
    fn rec(
        worker: usize,
        second: u64,
        tx: u64,
        lag: u64,
        errors: u64,
        cpu_ms: u64,
    ) -> IntervalRecord {
        let mut hist = interval_hist();
        let mut send_lag = lag_hist();
        for _ in 0..tx {
            hist.record(50_000).unwrap();
            send_lag.record(lag).unwrap();
        }
        let mut errors_by_class = BTreeMap::new();
        if errors > 0 {
            errors_by_class.insert(ErrorClass::Reset, errors);
        }
        IntervalRecord {
            second,
            transactions: tx,
            errors,
            errors_by_class,
            hist,
            send_lag: Some(send_lag),
            worker,
            cpu_ns: cpu_ms * 1_000_000,
        }
    }

    fn seconds(recs: Vec<IntervalRecord>) -> BTreeMap<u64, SecondTally> {
        let mut m: BTreeMap<u64, SecondTally> = BTreeMap::new();
        for r in recs {
            m.entry(r.second).or_default().add(r);
        }
        m
    }

    #[test]
    fn steps_sum_their_seconds_and_a_late_step_is_generator_limited() {
        let plan = RatePlan::parse("100,200 every 2s").unwrap();
        let secs = seconds(vec![
            rec(0, 0, 50, 20_000, 0, 100),
            rec(1, 0, 50, 20_000, 1, 100),
            rec(0, 1, 100, 20_000, 0, 100),
            // Step 1: every send released 5 ms late by worker 0.
            rec(0, 2, 200, 5_000_000, 2, 300),
            rec(0, 3, 190, 5_000_000, 0, 300),
            // An answer recorded as the run stopped, past the schedule.
            rec(1, 4, 3, 20_000, 0, 1),
        ]);
        let steps = assemble(&plan, &secs).unwrap().unwrap();
        assert_eq!(steps.len(), 2);
        let (a, b) = (&steps[0], &steps[1]);
        assert_eq!((a.start_s, a.len_s, a.requested_per_s), (0, 2, 100.0));
        assert_eq!((a.transactions, a.achieved_per_s), (200, 100.0));
        assert_eq!(a.errors.total, 1);
        assert_eq!(a.errors.by_class.get("ECONNRESET"), Some(&1));
        assert_eq!(a.generator_limited, None, "{a:?}");
        assert_eq!(a.busiest_thread_share, Some(0.1));
        assert_eq!(
            b.transactions, 393,
            "the tail past the end is in the last step"
        );
        assert_eq!(b.errors.total, 2);
        let why = b
            .generator_limited
            .as_deref()
            .expect("step 1 is generator-limited");
        assert!(why.contains("send lag p99 5.0 ms"), "{why}");
        let total: u64 = steps.iter().map(|s| s.transactions).sum();
        let per_s: u64 = secs.values().map(|s| s.transactions).sum();
        assert_eq!(total, per_s);
        let lat = &b.latency.as_ref().unwrap().summary;
        assert_eq!(lat.count, 393);
        assert!(lat.p99_ci.is_some(), "the step's tail has its interval");
    }

    #[test]
    fn a_busy_worker_limits_its_step_and_a_constant_rate_has_no_steps() {
        let plan = RatePlan::parse("0..400 over 2s").unwrap();
        let secs = seconds(vec![
            rec(0, 0, 100, 1_000, 0, 100),
            rec(1, 1, 300, 1_000, 0, 950),
        ]);
        let steps = assemble(&plan, &secs).unwrap().unwrap();
        assert!(steps[0].requested_per_s < steps[1].requested_per_s);
        assert_eq!(steps[0].generator_limited, None);
        let why = steps[1].generator_limited.as_deref().unwrap();
        assert!(why.contains("busy 95 %"), "{why}");
        assert!(
            assemble(&RatePlan::Constant(100.0), &secs)
                .unwrap()
                .is_none()
        );
    }
}
