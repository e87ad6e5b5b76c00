//! Tail percentiles for people: a value with its 95 % confidence interval
//! and the samples beyond it ("p99 123us (95% CI 118us-131us, 412
//! beyond)"), or why it is not meaningful ("p99.99: not meaningful from
//! 3,000 samples (0.3 expected beyond it)"). One wording for the load and
//! profile summaries, report.html and `compare` (docs/tail-percentiles.md).

use super::units::{fmt_count, human_ns};
use crate::stats::{LatencySummary, TailInterval};

/// What a table cell shows for a tail percentile: its value, or `n/m`
/// when it is not meaningful (the interval's line says why).
pub fn cell(value_ns: u64, ci: Option<TailInterval>) -> String {
    match ci {
        Some(ci) if !ci.meaningful => "n/m".into(),
        _ => human_ns(value_ns),
    }
}

/// The interval as a range: `118us-131us`. Bounds that three significant
/// digits would show as one (`16.2ms-16.2ms`, a narrow interval of a long
/// run) get the decimals that tell them apart, up to three more
/// (`16.18ms-16.24ms`).
pub fn range(ci: &TailInterval) -> String {
    let (lo, hi) = (human_ns(ci.low_ns), human_ns(ci.high_ns));
    if lo != hi || ci.high_ns < 1_000 {
        return format!("{lo}-{hi}");
    }
    // Same text: same unit, and nanoseconds are already exact.
    let (div, unit) = match ci.high_ns {
        0..1_000_000 => (1e3, "us"),
        1_000_000..1_000_000_000 => (1e6, "ms"),
        _ => (1e9, "s"),
    };
    let (l, h) = (ci.low_ns as f64 / div, ci.high_ns as f64 / div);
    let shown = |v: f64, d: usize| format!("{v:.d$}{unit}");
    let base = lo
        .trim_end_matches(unit)
        .split('.')
        .nth(1)
        .map_or(0, str::len);
    (base + 1..=base + 3)
        .map(|d| (shown(l, d), shown(h, d)))
        .find(|(a, b)| a != b)
        .map_or_else(|| format!("{lo}-{hi}"), |(a, b)| format!("{a}-{b}"))
}

/// Why a percentile is not meaningful, after "not meaningful from N
/// samples": few samples expected beyond it, or an interval that runs
/// past the largest sample.
fn reason(ci: &TailInterval) -> String {
    if ci.expected_beyond < crate::stats::tail::MIN_EXPECTED_BEYOND {
        let digits = if ci.expected_beyond < 1.0 { 1 } else { 0 };
        format!("{:.digits$} expected beyond it", ci.expected_beyond)
    } else {
        "its 95% CI runs past the largest sample".into()
    }
}

/// One percentile in words: `p99 123us (95% CI 118us-131us, 412 beyond)`
/// or `p99.99: not meaningful from 3,000 samples (0.3 expected beyond it)`.
pub fn phrase(name: &str, value_ns: u64, ci: &TailInterval, count: u64) -> String {
    if ci.meaningful {
        format!(
            "{name} {} (95% CI {}, {} beyond)",
            human_ns(value_ns),
            range(ci),
            fmt_count(ci.beyond)
        )
    } else {
        format!(
            "{name}: not meaningful from {} samples ({})",
            fmt_count(count),
            reason(ci)
        )
    }
}

/// The tail percentiles of `s` in words, `; `-separated; None when the
/// summary has no intervals (no samples, or an artifact whose histogram
/// could not be read).
pub fn line(s: &LatencySummary) -> Option<String> {
    let parts: Vec<String> = s
        .tails()
        .iter()
        .filter_map(|(name, v, ci)| Some(phrase(name, *v, ci.as_ref()?, s.count)))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::testing::{evenly, interval as iv};

    #[test]
    fn meaningful_and_not_read_as_the_issue_asks() {
        let s = evenly(3000, 100_000, 10).summary();
        let text = line(&s).unwrap();
        let parts: Vec<&str> = text.split("; ").collect();
        assert_eq!(parts.len(), 3, "{text}");
        let ci = s.p99_ci.unwrap();
        assert_eq!(
            parts[0],
            format!(
                "p99 {} (95% CI {}, {} beyond)",
                human_ns(s.p99_ns),
                range(&ci),
                ci.beyond
            )
        );
        // 30 samples lie above the p99's rank; those sharing its histogram
        // bucket (64 ns wide here) are not beyond its value.
        assert!((26..=30).contains(&ci.beyond), "{ci:?}");
        assert_eq!(
            parts[1],
            "p99.9: not meaningful from 3,000 samples (3 expected beyond it)"
        );
        assert_eq!(
            parts[2],
            "p99.99: not meaningful from 3,000 samples (0.3 expected beyond it)"
        );
        assert_eq!(cell(s.p9999_ns, s.p9999_ci), "n/m");
        assert_eq!(cell(s.p99_ns, s.p99_ci), human_ns(s.p99_ns));
        // Without intervals (an unreadable old histogram): the value.
        assert_eq!(cell(s.p9999_ns, None), human_ns(s.p9999_ns));
        assert_eq!(line(&LatencySummary::default()), None);
    }

    #[test]
    fn a_narrow_interval_shows_the_digits_that_tell_its_bounds_apart() {
        assert_eq!(range(&iv(118_000, 131_400)), "118us-131us");
        assert_eq!(range(&iv(16_180_000, 16_240_000)), "16.18ms-16.24ms");
        assert_eq!(range(&iv(123_000, 123_400)), "123.0us-123.4us");
        assert_eq!(range(&iv(1_500, 1_501)), "1.500us-1.501us");
        // Equal bounds stay as they are.
        assert_eq!(range(&iv(2_000_000, 2_000_000)), "2.00ms-2.00ms");
        assert_eq!(range(&iv(500, 500)), "500ns-500ns");
    }
}
