//! Numbers with units, for people: the one place each format lives, so a
//! figure reads the same in the text summaries, the HTML tables, the chart
//! axes and the servers' exit summaries.
//!
//! Two microsecond formats exist on purpose (their outputs differ and both
//! are user-visible): [`fmt_us`] (three significant digits and a space,
//! `12.3 us`, for CPU-per-transaction figures) and [`fmt_ns_as_us`] (one
//! decimal, no space, `12.3us`, the udp-sink's loss lines).

/// Nanoseconds with a unit (ns, us, ms, s) and three significant digits,
/// no space: `95ns`, `1.50us`, `15.2us`, `3.40ms`, `2.00s`.
pub fn human_ns(ns: u64) -> String {
    let (v, unit) = match ns {
        0..1_000 => return format!("{ns}ns"),
        1_000..1_000_000 => (ns as f64 / 1e3, "us"),
        1_000_000..1_000_000_000 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$}{unit}")
}

/// [`human_ns`] of a fractional count, rounded; negatives read as 0
/// (`0ns`).
pub fn human_ns_f64(ns: f64) -> String {
    human_ns(ns.max(0.0).round() as u64)
}

/// Nanoseconds for a chart axis or bar: `0` (no unit) at or below zero,
/// else [`human_ns_f64`].
pub fn fmt_ns(v: f64) -> String {
    if v <= 0.0 {
        return "0".into();
    }
    human_ns_f64(v)
}

/// Compact number with an SI suffix: `1.50k`, `2M`, `0.50`, `35.5G`.
/// Whole numbers get no decimals.
pub fn fmt_si(v: f64) -> String {
    let a = v.abs();
    let (x, u) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = if x.abs() >= 100.0 || x == x.trunc() {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$}{u}")
}

/// A 0..100 percentage: two decimals under 1% (so a small share does not
/// read as 0%), none otherwise: `0.25%`, `42%`, `0%`.
pub fn fmt_pct(v: f64) -> String {
    if v != 0.0 && v.abs() < 1.0 {
        format!("{v:.2}%")
    } else {
        format!("{v:.0}%")
    }
}

/// Microseconds, three significant digits and a space: `123 us`,
/// `12.3 us`, `1.23 us`.
pub fn fmt_us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} us")
    } else if v >= 10.0 {
        format!("{v:.1} us")
    } else {
        format!("{v:.2} us")
    }
}

/// Nanoseconds shown as microseconds with one decimal and no space:
/// `12.3us` (the udp-sink's per-run loss lines; differs from [`fmt_us`]).
pub fn fmt_ns_as_us(ns: f64) -> String {
    format!("{:.1}us", ns / 1000.0)
}

/// Bytes in binary units, one decimal above 1 KiB: `0 B`, `1.5 KiB`,
/// `3.0 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A count and its noun, singular for one: `1 process`, `2 processes`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A count with thousands separators: `0`, `999`, `1,204`, `12,345,678`
/// (the evidence's counter increases, which people compare digit by digit).
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds() {
        assert_eq!(human_ns(0), "0ns");
        assert_eq!(human_ns(95), "95ns");
        assert_eq!(human_ns(1_500), "1.50us");
        assert_eq!(human_ns(15_250), "15.2us");
        assert_eq!(human_ns(999_999), "1000us");
        assert_eq!(human_ns(3_400_000), "3.40ms");
        assert_eq!(human_ns(2_000_000_000), "2.00s");
        assert_eq!(human_ns_f64(-3.0), "0ns");
        assert_eq!(human_ns_f64(1499.6), "1.50us");
        assert_eq!(fmt_ns(0.0), "0");
        assert_eq!(fmt_ns(-1.0), "0");
        assert_eq!(fmt_ns(0.2), "0ns");
        assert_eq!(fmt_ns(2500.0), "2.50us");
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1_000), "1,000");
        assert_eq!(fmt_count(1_204), "1,204");
        assert_eq!(fmt_count(12_345_678), "12,345,678");
        assert_eq!(fmt_count(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn si() {
        assert_eq!(fmt_si(1500.0), "1.50k");
        assert_eq!(fmt_si(2e6), "2M");
        assert_eq!(fmt_si(0.5), "0.50");
        assert_eq!(fmt_si(35.0), "35");
        assert_eq!(fmt_si(12_345.0), "12.3k");
        assert_eq!(fmt_si(-250_000.0), "-250k");
        assert_eq!(fmt_si(3.55e10), "35.5G");
    }

    #[test]
    fn percent() {
        assert_eq!(fmt_pct(0.0), "0%");
        assert_eq!(fmt_pct(0.25), "0.25%");
        assert_eq!(fmt_pct(42.4), "42%");
        assert_eq!(fmt_pct(-0.5), "-0.50%");
    }

    #[test]
    fn microseconds() {
        assert_eq!(fmt_us(123.4), "123 us");
        assert_eq!(fmt_us(12.34), "12.3 us");
        assert_eq!(fmt_us(1.234), "1.23 us");
        assert_eq!(fmt_ns_as_us(12_345.0), "12.3us");
        assert_eq!(fmt_ns_as_us(0.0), "0.0us");
    }

    #[test]
    fn bytes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_bytes(5 << 40), "5.0 TiB");
    }
}
