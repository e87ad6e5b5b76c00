//! The log-linear latency histogram filled by the BPF side.
//!
//! Values 0..7 ns have exact buckets; above that each power of two is split
//! into 8 buckets, so a bucket is at most 1/8 as wide as its lower bound and
//! its middle is within 6.25% of any value in it. `bucket_of` must stay the
//! exact twin of `hist_bucket` in src/bpf/hist.h; the unit tests pin
//! the boundaries so a drift on either side is caught.

/// Number of buckets (SS_HIST_BUCKETS in src/bpf/common.h; every skeleton's
/// twin is checked against it at compile time, `check_common_abi!`).
pub const BUCKETS: usize = 320;
/// Sub-buckets per power of two, as a shift (SS_HIST_SUB_BITS).
pub const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;

/// Bucket index of a value in nanoseconds (twin of the BPF code).
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let idx = (e - SUB_BITS + 1) as u64 * SUB + ((v >> (e - SUB_BITS)) & (SUB - 1));
    (idx as usize).min(BUCKETS - 1)
}

/// Smallest value that falls in bucket `b`.
pub fn lower_bound(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let e = b / SUB + u64::from(SUB_BITS) - 1;
    let m = b % SUB;
    (SUB + m) << (e - u64::from(SUB_BITS))
}

/// Width of bucket `b` in nanoseconds.
pub fn width(b: usize) -> u64 {
    if (b as u64) < 2 * SUB {
        1
    } else {
        lower_bound(b + 1) - lower_bound(b)
    }
}

/// Value reported for a sample in bucket `b`: its middle.
pub fn representative(b: usize) -> u64 {
    lower_bound(b) + width(b) / 2
}

/// A merged histogram with its exact extremes.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Sample count per bucket.
    pub counts: Vec<u64>,
    /// Exact smallest sample (ns).
    pub min: u64,
    /// Exact largest sample (ns).
    pub max: u64,
}

impl Histogram {
    /// Total number of samples.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Value at quantile `q` (0 < q <= 1): the middle of the bucket that
    /// holds the sample of rank ceil(q * n), clamped to the exact min/max so
    /// a percentile never lies outside what was observed. None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.total();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(representative(b).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Non-empty buckets as (lower bound ns, count) pairs, for artifacts.
    pub fn nonzero(&self) -> Vec<(u64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(b, c)| (lower_bound(b), *c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        for v in 0..16 {
            assert_eq!(bucket_of(v), v as usize);
            assert_eq!(lower_bound(v as usize), v);
        }
    }

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        for b in 0..BUCKETS - 1 {
            let lo = lower_bound(b);
            let hi = lower_bound(b + 1);
            assert!(hi > lo, "bucket {b}");
            assert_eq!(bucket_of(lo), b);
            assert_eq!(bucket_of(hi - 1), b);
            assert_eq!(width(b), hi - lo);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn relative_error_is_bounded() {
        for b in 16..BUCKETS - 1 {
            let w = width(b) as f64;
            let lo = lower_bound(b) as f64;
            assert!(w / lo <= 0.125 + 1e-12, "bucket {b}: {w} / {lo}");
        }
    }

    #[test]
    fn known_boundaries() {
        // Pins the mapping to the BPF twin: e = floor(log2 v),
        // idx = (e - 2) * 8 + mantissa bits.
        assert_eq!(bucket_of(16), 16);
        assert_eq!(bucket_of(17), 16);
        assert_eq!(bucket_of(18), 17);
        assert_eq!(bucket_of(1000), 63);
        assert_eq!(lower_bound(63), 960);
        assert_eq!(bucket_of(1_000_000), 143);
    }

    #[test]
    fn quantiles_follow_ranks() {
        let mut counts = vec![0; BUCKETS];
        counts[bucket_of(100)] = 90;
        counts[bucket_of(10_000)] = 9;
        counts[bucket_of(1_000_000)] = 1;
        let h = Histogram {
            counts,
            min: 100,
            max: 1_000_000,
        };
        let p50 = h.quantile(0.5).unwrap();
        assert!((96..=104).contains(&p50), "{p50}");
        let p90 = h.quantile(0.90).unwrap();
        assert!((96..=104).contains(&p90), "{p90}");
        let p99 = h.quantile(0.99).unwrap();
        assert!((9_500..=10_500).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), Some(1_000_000));
        let empty = Histogram {
            counts: vec![0; BUCKETS],
            min: 0,
            max: 0,
        };
        assert_eq!(empty.quantile(0.5), None);
    }
}
