//! Lossless latency statistics shared by `load` and `serve`: an HDR
//! histogram in nanoseconds, its summary, and its standard interchange form
//! (HdrHistogram's compressed V2 encoding in base64, the `HISTF...` strings
//! HdrHistogram tools read), so runs can be merged.

use anyhow::{Context, Result, anyhow};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

pub mod tail;
pub use tail::TailInterval;

/// Highest trackable value: one hour in ns. Larger values are clamped (and
/// counted in `LatencyHist::clamped`), never dropped.
pub const MAX_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept (0.1% relative precision).
pub const SIGFIG: u8 = 3;

/// A latency histogram in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    h: Histogram<u64>,
    /// Samples above MAX_NS recorded as MAX_NS.
    pub clamped: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    /// An empty histogram covering 1 ns .. 1 h at 3 significant digits.
    pub fn new() -> Self {
        Self {
            h: Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid static bounds"),
            clamped: 0,
        }
    }

    /// Records one sample (0 is recorded as 1 ns, the lowest bucket).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        if ns > MAX_NS {
            self.clamped += 1;
        }
        // Cannot fail: v is within the bounds the histogram was built with.
        let _ = self.h.record(v);
    }

    /// Records `count` samples of the same value.
    pub fn record_n(&mut self, ns: u64, count: u64) {
        let v = ns.clamp(1, MAX_NS);
        if ns > MAX_NS {
            self.clamped += count;
        }
        let _ = self.h.record_n(v, count);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHist) {
        // Same bounds on both sides, so this cannot fail.
        let _ = self.h.add(&other.h);
        self.clamped += other.clamped;
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// True when no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// Samples at or above `ns` (to the histogram's resolution).
    pub fn count_at_or_above(&self, ns: u64) -> u64 {
        self.h.count_between(ns.clamp(1, MAX_NS), MAX_NS)
    }

    /// Value at quantile q (0..=1), ns.
    pub fn quantile(&self, q: f64) -> u64 {
        self.h.value_at_quantile(q)
    }

    /// The figures people read, the tail percentiles with their 95 %
    /// confidence intervals (see [`tail`]).
    pub fn summary(&self) -> LatencySummary {
        let h = &self.h;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let mut s = LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stddev_ns: h.stdev(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
            p99_ci: None,
            p999_ci: None,
            p9999_ci: None,
        };
        self.fill_intervals(&mut s);
        s
    }

    /// Sets the tail intervals of `s`, a summary of this histogram (of an
    /// artifact written before they existed, say), from its samples.
    pub fn fill_intervals(&self, s: &mut LatencySummary) {
        s.p99_ci = tail::interval(&self.h, 0.99, s.p99_ns);
        s.p999_ci = tail::interval(&self.h, 0.999, s.p999_ns);
        s.p9999_ci = tail::interval(&self.h, 0.9999, s.p9999_ns);
    }

    /// The 95 % confidence interval of the q-quantile, whose value is
    /// `value` (see [`tail::interval`]); None when empty.
    pub fn interval_at(&self, q: f64, value: u64) -> Option<TailInterval> {
        tail::interval(&self.h, q, value)
    }

    /// HdrHistogram V2 compressed encoding, base64 (`HISTF...`).
    pub fn to_v2_base64(&self) -> Result<String> {
        let mut buf = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.h, &mut buf)
            .map_err(|e| anyhow!("encoding histogram: {e:?}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(buf))
    }

    /// Decodes what `to_v2_base64` (or any HdrHistogram library) wrote.
    pub fn from_v2_base64(s: &str) -> Result<Self> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .context("histogram is not valid base64")?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| anyhow!("decoding histogram: {e:?}"))?;
        let mut out = Self::new();
        out.h
            .add(&h)
            .map_err(|e| anyhow!("histogram out of range: {e:?}"))?;
        Ok(out)
    }
}

/// Percentiles and moments of a latency histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Standard deviation.
    pub stddev_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// 99.99th percentile.
    pub p9999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
    /// The p99's 95 % confidence interval and the samples beyond it
    /// (absent in artifacts written before sockscope had them, and when
    /// there is no sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ci: Option<TailInterval>,
    /// The p99.9's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_ci: Option<TailInterval>,
    /// The p99.99's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p9999_ci: Option<TailInterval>,
}

impl LatencySummary {
    /// The tail percentiles people read, with their names and intervals:
    /// p99, p99.9, p99.99.
    pub fn tails(&self) -> [(&'static str, u64, Option<TailInterval>); 3] {
        [
            ("p99", self.p99_ns, self.p99_ci),
            ("p99.9", self.p999_ns, self.p999_ci),
            ("p99.99", self.p9999_ns, self.p9999_ci),
        ]
    }
}

/// Histograms the unit tests build their cases from.
#[cfg(test)]
pub(crate) mod testing {
    use super::{LatencyHist, TailInterval};

    /// A meaningful interval from `low_ns` to `high_ns`.
    pub fn interval(low_ns: u64, high_ns: u64) -> TailInterval {
        TailInterval {
            low_ns,
            high_ns,
            meaningful: true,
            ..Default::default()
        }
    }

    /// `n` samples `first`, `first + step`, ... (ns).
    pub fn evenly(n: u64, first: u64, step: u64) -> LatencyHist {
        let mut h = LatencyHist::new();
        for i in 0..n {
            h.record(first + i * step);
        }
        h
    }

    /// `n` samples of an exponential distribution of mean `mean_ns`,
    /// spread evenly over it: the i-th at quantile (i + offset) / n, with
    /// `offset` in 0..1 (two offsets: two samples of one distribution).
    pub fn exponential(n: u64, mean_ns: f64, offset: f64) -> LatencyHist {
        let mut h = LatencyHist::new();
        for i in 0..n {
            let q = (i as f64 + offset) / n as f64;
            h.record((-(1.0 - q).ln() * mean_ns) as u64);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_round_trip() {
        let mut h = LatencyHist::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min_ns, 1000);
        assert!((s.p50_ns as f64 - 5_000_000.0).abs() / 5e6 < 0.002, "{s:?}");
        assert!(
            (s.p99_ns as f64 - 9_900_000.0).abs() / 9.9e6 < 0.002,
            "{s:?}"
        );
        let enc = h.to_v2_base64().unwrap();
        assert!(enc.starts_with("HISTF"), "{enc}");
        let back = LatencyHist::from_v2_base64(&enc).unwrap();
        assert_eq!(back.summary(), s);
    }

    #[test]
    fn merge_adds_counts_and_clamps() {
        let mut a = LatencyHist::new();
        let mut b = LatencyHist::new();
        a.record(100);
        b.record(MAX_NS * 2);
        a.merge(&b);
        assert_eq!(a.len(), 2);
        assert_eq!(a.clamped, 1);
        assert!(LatencyHist::from_v2_base64("not base64!").is_err());
    }
}
