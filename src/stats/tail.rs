//! How far a tail percentile can be trusted: its 95 % confidence interval
//! from the order statistics of the recorded samples, and how many samples
//! lie beyond it (docs/tail-percentiles.md).
//!
//! The interval is distribution-free: with `n` samples, the number of them
//! at or below the true q-quantile is Binomial(n, q), so the `l`-th and
//! `u`-th smallest samples bracket the true quantile with probability
//! P(l <= B < u), B ~ Binomial(n, q), whatever the latency distribution.
//! The ranks are chosen so that at most 2.5 % lies on each side; the
//! values are then read from the HDR histogram at those ranks.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// Two-sided standard normal quantile for [`LEVEL`] (used by the normal
/// approximation only).
const Z: f64 = 1.959_963_984_540_054;
/// Probability left out on each side.
const ALPHA_HALF: f64 = (1.0 - LEVEL) / 2.0;
/// Above this variance n q (1 - q) (a standard deviation of 1,000 ranks)
/// the ranks come from the normal approximation: the exact sum would walk
/// tens of thousands of terms, and the two differ by at most one rank (the
/// skew correction is (z^2 - 1)(1 - 2q)/6 < 0.5 rank for any n) in an
/// interval about 4,000 ranks wide.
pub const EXACT_MAX_VARIANCE: f64 = 1e6;
/// Fewer samples than this expected beyond a percentile (n (1 - q)) and
/// it is not meaningful: it rests on a handful of samples, the largest of
/// them decide it.
pub const MIN_EXPECTED_BEYOND: f64 = 10.0;

/// How the ranks of an interval were found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankMethod {
    /// Summed from the Binomial(n, q) probabilities (n q (1-q) <= 1e6).
    #[default]
    Exact,
    /// n q -+ 1.96 sqrt(n q (1-q)) with a continuity correction (above).
    Normal,
}

/// A tail percentile's 95 % confidence interval and the samples beyond it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TailInterval {
    /// Lower bound, ns: the value of the `low_rank`-th smallest sample (the
    /// lowest value of its histogram bucket; the smallest sample when
    /// `low_rank` is 0).
    pub low_ns: u64,
    /// Upper bound, ns: the value of the `high_rank`-th smallest sample
    /// (the highest value of its bucket; the largest sample when
    /// `high_rank` exceeds `count`: the interval runs into the maximum, its
    /// true upper end is unknown).
    pub high_ns: u64,
    /// Rank of the lower bound, 1-based (0: no sample is low enough).
    pub low_rank: u64,
    /// Rank of the upper bound, 1-based (may exceed the sample count).
    pub high_rank: u64,
    /// Samples recorded above the percentile's value (in higher histogram
    /// buckets than it).
    pub beyond: u64,
    /// Samples expected beyond the percentile: n (1 - q).
    pub expected_beyond: f64,
    /// False when the percentile says little: fewer than 10 samples are
    /// expected beyond it, or its interval runs into the maximum.
    pub meaningful: bool,
    /// How the ranks were found.
    pub method: RankMethod,
}

/// Ranks `(l, u)` (1-based) of the order statistics that bracket the true
/// q-quantile of `n` samples with probability >= 95 %: `l - 1` is the
/// largest k with P(B <= k) <= 2.5 % and `u - 1` the smallest k with
/// P(B <= k) >= 97.5 %, B ~ Binomial(n, q). `l` is 0 when even k = 0 has
/// more than 2.5 % below it; `u` may be `n + 1` (no sample is high
/// enough). Exact up to a variance of [`EXACT_MAX_VARIANCE`], normal
/// approximation above.
pub fn rank_interval(n: u64, q: f64) -> (u64, u64, RankMethod) {
    assert!(n > 0 && q > 0.0 && q < 1.0, "rank_interval({n}, {q})");
    let nf = n as f64;
    let var = nf * q * (1.0 - q);
    if var > EXACT_MAX_VARIANCE {
        // P(B <= k) ~ Phi((k + 0.5 - n q) / sd).
        let sd = var.sqrt();
        let k_lo = (nf * q - Z * sd - 0.5).floor().max(-1.0);
        let k_hi = (nf * q + Z * sd - 0.5).ceil().min(nf);
        return ((k_lo + 1.0) as u64, (k_hi + 1.0) as u64, RankMethod::Normal);
    }
    let (l, u) = exact_ranks(n, q);
    (l, u, RankMethod::Exact)
}

/// The exact ranks: the Binomial(n, q) probabilities, walked outwards from
/// the mode by the ratio of neighbours (no factorials, no overflow) until
/// they are negligible, then summed from below.
fn exact_ranks(n: u64, q: f64) -> (u64, u64) {
    let odds = q / (1.0 - q);
    let mode = (((n + 1) as f64) * q).floor().min(n as f64) as u64;
    // Terms below 1e-18 of the mode's cannot move a 2.5 % boundary.
    const NEGLIGIBLE: f64 = 1e-18;
    let mut down = Vec::new();
    let mut w = 1.0;
    let mut k = mode;
    while k > 0 {
        w *= k as f64 / ((n - k + 1) as f64 * odds);
        k -= 1;
        if w < NEGLIGIBLE {
            break;
        }
        down.push(w);
    }
    let mut up = Vec::new();
    let mut w = 1.0;
    let mut k = mode;
    while k < n {
        w *= (n - k) as f64 / ((k + 1) as f64) * odds;
        k += 1;
        if w < NEGLIGIBLE {
            break;
        }
        up.push(w);
    }
    // Weights in rank order: k = mode - down.len() ..= mode + up.len().
    let first = mode - down.len() as u64;
    let weights: Vec<f64> = down
        .iter()
        .rev()
        .copied()
        .chain(std::iter::once(1.0))
        .chain(up.iter().copied())
        .collect();
    let total: f64 = weights.iter().sum();
    // k_lo: the largest k with P(B <= k) <= 2.5 % (-1: none); k_hi: the
    // smallest with P(B <= k) >= 97.5 %.
    let mut k_lo: i64 = first as i64 - 1;
    let mut k_hi = n;
    let mut cdf = 0.0;
    for (i, w) in weights.iter().enumerate() {
        cdf += w / total;
        let k = first + i as u64;
        if cdf <= ALPHA_HALF {
            k_lo = k as i64;
        }
        if cdf >= 1.0 - ALPHA_HALF {
            k_hi = k;
            break;
        }
    }
    ((k_lo + 1) as u64, k_hi + 1)
}

/// The interval of the q-quantile of `h` whose value (HdrHistogram's
/// `value_at_quantile(q)`: the highest value of its bucket) is `value`.
/// None when `h` is empty.
pub fn interval(h: &Histogram<u64>, q: f64, value: u64) -> Option<TailInterval> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let (l, u, method) = rank_interval(n, q);
    let low_ns = if l == 0 {
        h.min()
    } else {
        h.lowest_equivalent(value_at_rank(h, l))
    };
    let high_ns = if u > n {
        h.max()
    } else {
        h.highest_equivalent(value_at_rank(h, u))
    };
    let expected_beyond = n as f64 * (1.0 - q);
    Some(TailInterval {
        low_ns,
        high_ns,
        low_rank: l,
        high_rank: u,
        // Samples in the buckets above the one that holds `value`.
        beyond: n - h.count_between(0, value),
        expected_beyond,
        meaningful: u <= n && expected_beyond >= MIN_EXPECTED_BEYOND,
        method,
    })
}

/// The value of the `rank`-th smallest sample (1-based, <= len), to the
/// histogram's precision (the highest value of its bucket). Asked as the
/// quantile half a rank below it: `value_at_quantile` takes the sample of
/// rank ceil(q n), and (rank - 0.5) / n * n rounds up to `rank` whatever
/// the floating-point error. (Its counting loop is some ten times faster
/// than the histogram's iterators.)
fn value_at_rank(h: &Histogram<u64>, rank: u64) -> u64 {
    h.value_at_quantile((rank as f64 - 0.5) / h.len() as f64)
}

impl TailInterval {
    /// True when the two intervals share a value: the difference between
    /// the two percentiles is within their uncertainty.
    pub fn overlaps(&self, other: &TailInterval) -> bool {
        self.low_ns <= other.high_ns && other.low_ns <= self.high_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyHist;
    use crate::stats::testing::{evenly, exponential, interval as iv};

    /// P(B <= k) for B ~ Binomial(n, q), from log-binomial coefficients
    /// summed term by term: slow, obviously right.
    fn cdf(n: u64, q: f64, k: u64) -> f64 {
        let mut ln_fact = vec![0.0f64; n as usize + 1];
        for i in 1..=n as usize {
            ln_fact[i] = ln_fact[i - 1] + (i as f64).ln();
        }
        let ln_fact = |m: u64| ln_fact[m as usize];
        (0..=k)
            .map(|j| {
                (ln_fact(n) - ln_fact(j) - ln_fact(n - j)
                    + j as f64 * q.ln()
                    + (n - j) as f64 * (1.0 - q).ln())
                .exp()
            })
            .sum()
    }

    #[test]
    fn ranks_match_a_direct_binomial_sum() {
        for (n, q) in [
            (1000, 0.99),
            (2000, 0.99),
            (5000, 0.999),
            (300, 0.9),
            (50, 0.99),
        ] {
            let (l, u, m) = rank_interval(n, q);
            assert_eq!(m, RankMethod::Exact);
            // l - 1 is the largest k with at most 2.5 % at or below it.
            if l > 0 {
                assert!(cdf(n, q, l - 1) <= ALPHA_HALF, "{n} {q}: l {l}");
            }
            assert!(cdf(n, q, l) > ALPHA_HALF, "{n} {q}: l {l}");
            // u - 1 is the smallest k with at least 97.5 % at or below it.
            if u <= n {
                assert!(cdf(n, q, u - 1) >= 1.0 - ALPHA_HALF, "{n} {q}: u {u}");
            }
            if u >= 2 {
                assert!(cdf(n, q, u - 2) < 1.0 - ALPHA_HALF, "{n} {q}: u {u}");
            }
            // And so covers at least 95 %.
            let below_l = if l > 0 { cdf(n, q, l - 1) } else { 0.0 };
            let below_u = if u <= n { cdf(n, q, u - 1) } else { 1.0 };
            assert!(below_u - below_l >= LEVEL, "{n} {q}: [{l}, {u}]");
        }
        // 50 samples: no sample is high enough for the p99's upper bound.
        assert_eq!(rank_interval(50, 0.99).1, 51);
    }

    #[test]
    fn the_normal_approximation_agrees_with_the_exact_ranks_where_it_takes_over() {
        // Just above and below the switch: n q (1 - q) = 1e6 at q = 0.99.
        let n = (EXACT_MAX_VARIANCE / (0.99 * 0.01)).round() as u64;
        let exact = exact_ranks(n, 0.99);
        let (l, u, m) = rank_interval(n + 200, 0.99);
        assert_eq!(m, RankMethod::Normal);
        // Shift the exact ranks by the 200 extra samples' share (198).
        let shift = 198;
        assert!(
            (l as i64 - (exact.0 + shift) as i64).abs() <= 2,
            "normal l {l}, exact {}",
            exact.0 + shift
        );
        assert!(
            (u as i64 - (exact.1 + shift) as i64).abs() <= 2,
            "normal u {u}, exact {}",
            exact.1 + shift
        );
        // Around ±1.96 sd (sd = 1000 ranks) of n q.
        let mean = n as f64 * 0.99;
        assert!(
            (mean - 1960.0 - exact.0 as f64).abs() < 3.0,
            "{exact:?} {mean}"
        );
        assert!(
            (exact.1 as f64 - mean - 1960.0).abs() < 3.0,
            "{exact:?} {mean}"
        );
    }

    #[test]
    fn bounds_are_the_samples_at_those_ranks() {
        // 1..=2000 ns: below 2048 every value has a bucket of its own, so
        // the value of rank r is r.
        let s = evenly(2000, 1, 1).summary();
        let ci = s.p99_ci.expect("interval");
        let (l, u, _) = rank_interval(2000, 0.99);
        assert_eq!((ci.low_ns, ci.high_ns), (l, u));
        assert_eq!((ci.low_rank, ci.high_rank), (l, u));
        assert!(ci.low_ns <= s.p99_ns && s.p99_ns <= ci.high_ns, "{s:?}");
        assert_eq!(s.p99_ns, 1980);
        assert_eq!(ci.beyond, 20);
        assert!((ci.expected_beyond - 20.0).abs() < 1e-9);
        assert!(ci.meaningful);
        // p99.9 of 2000: 2 expected beyond.
        let ci = s.p999_ci.unwrap();
        assert!(!ci.meaningful);
        assert_eq!(ci.beyond, 2);
    }

    #[test]
    fn value_at_rank_is_the_rank_th_sample() {
        let mut h = LatencyHist::new();
        for v in 1..=1500u64 {
            h.record_n(v * 997, 3);
        }
        let mut seen = 0;
        for b in h.h.iter_recorded() {
            let first = seen + 1;
            seen += b.count_at_value();
            for rank in [first, seen] {
                assert_eq!(value_at_rank(&h.h, rank), b.value_iterated_to(), "{rank}");
            }
        }
    }

    #[test]
    fn a_p9999_from_3000_samples_is_not_meaningful() {
        let s = evenly(3000, 10_000, 7).summary();
        let ci = s.p9999_ci.unwrap();
        assert!(!ci.meaningful);
        assert!((ci.expected_beyond - 0.3).abs() < 1e-9);
        // Its upper bound runs past the largest sample.
        assert!(ci.high_rank > 3000);
        assert_eq!(ci.high_ns, s.max_ns);
        // The p99 of the same samples is: 30 expected beyond.
        assert!(s.p99_ci.unwrap().meaningful);
    }

    /// splitmix64: a seeded, dependency-free source for the resamples.
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn the_interval_covers_the_true_p99_about_95_percent_of_the_time() {
        // Exponential latencies (mean 100 us): true p99 = 100 us * ln 100.
        let truth = 100_000.0 * 100f64.ln();
        let mut seed = 12;
        let trials = 1000;
        let mut covered = 0;
        for _ in 0..trials {
            let mut h = LatencyHist::new();
            for _ in 0..3000 {
                let u = (splitmix(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
                h.record((-(1.0 - u).ln() * 100_000.0) as u64);
            }
            let ci = h.summary().p99_ci.unwrap();
            if ci.low_ns as f64 <= truth && truth <= ci.high_ns as f64 {
                covered += 1;
            }
        }
        let share = covered as f64 / trials as f64;
        // At least 95 % by construction (a little more: ranks are whole
        // and the bounds widen to their histogram bucket), and not so
        // much more that the interval would be uselessly wide.
        assert!((0.93..=0.985).contains(&share), "coverage {share}");
    }

    #[test]
    fn intervals_narrow_as_samples_grow() {
        let mut last = f64::INFINITY;
        for n in [1_000u64, 10_000, 100_000, 1_000_000] {
            let s = exponential(n, 100_000.0, 0.5).summary();
            let ci = s.p99_ci.unwrap();
            let width = (ci.high_ns - ci.low_ns) as f64 / s.p99_ns as f64;
            assert!(
                width < last,
                "n {n}: relative width {width} not below {last}"
            );
            last = width;
        }
        assert!(last < 0.02, "1M samples: p99 within {last}");
    }

    #[test]
    fn overlap_is_symmetric_and_touching_counts() {
        assert!(iv(100, 120).overlaps(&iv(110, 130)));
        assert!(iv(110, 130).overlaps(&iv(100, 120)));
        assert!(iv(100, 120).overlaps(&iv(120, 130)));
        assert!(!iv(100, 120).overlaps(&iv(121, 130)));
        assert!(!iv(121, 130).overlaps(&iv(100, 120)));
    }
}
