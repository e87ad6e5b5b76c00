//! `sockscope compare A.json B.json`: the differences between two profile
//! artifacts (throughput, latency percentiles, syscalls per transaction,
//! CPU split), each with its change in percent.

use std::fmt::Write as _;

use super::profile::ProfileReport;
use super::trace_text::human_ns;

/// One compared figure.
struct Row {
    name: String,
    a: Option<f64>,
    b: Option<f64>,
    fmt: fn(f64) -> String,
}

fn change(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => format!("{:+.1}%", 100.0 * (b - a) / a.abs()),
        (Some(a), Some(b)) if a == b => "+0.0%".into(),
        (Some(_), Some(_)) => "new".into(),
        _ => "-".into(),
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn ns(v: f64) -> String {
    human_ns(v.max(0.0).round() as u64)
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// Renders the comparison table (B relative to A).
pub fn render(a: &ProfileReport, b: &ProfileReport, a_name: &str, b_name: &str) -> String {
    let mut rows = vec![
        Row {
            name: "transactions/s".into(),
            a: Some(a.derived.rate_per_s),
            b: Some(b.derived.rate_per_s),
            fmt: num,
        },
        Row {
            name: "transactions".into(),
            a: Some(a.derived.transactions as f64),
            b: Some(b.derived.transactions as f64),
            fmt: num,
        },
    ];
    let lat = |r: &ProfileReport, f: fn(&crate::stats::LatencySummary) -> u64| {
        r.load.latency.as_ref().map(|l| f(&l.summary) as f64)
    };
    for (name, f) in [
        (
            "latency p50",
            (|s: &crate::stats::LatencySummary| s.p50_ns) as fn(&_) -> u64,
        ),
        ("latency p90", |s| s.p90_ns),
        ("latency p99", |s| s.p99_ns),
        ("latency p99.9", |s| s.p999_ns),
        ("latency max", |s| s.max_ns),
    ] {
        rows.push(Row {
            name: name.into(),
            a: lat(a, f),
            b: lat(b, f),
            fmt: ns,
        });
    }
    rows.push(Row {
        name: "syscalls per transaction".into(),
        a: Some(a.derived.syscalls_per_transaction),
        b: Some(b.derived.syscalls_per_transaction),
        fmt: num,
    });
    // Per syscall: the union of both runs' top syscalls.
    let mut names: Vec<String> = Vec::new();
    for r in [a, b] {
        for s in r.derived.top_syscalls.iter().take(6) {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    // Over the transactions the traced tree served (None when unknown).
    let per = |r: &ProfileReport, n: &str| {
        let tx = r.derived.target_transactions()?;
        Some(
            r.trace
                .syscalls
                .iter()
                .find(|s| s.name == n)
                .map_or(0.0, |s| s.calls as f64 / tx),
        )
    };
    for n in &names {
        rows.push(Row {
            name: format!("  {n} per transaction"),
            a: per(a, n),
            b: per(b, n),
            fmt: num,
        });
    }
    for (name, f, fmt) in [
        (
            "target CPU per transaction (us)",
            (|r: &ProfileReport| r.derived.target_cpu_us_per_transaction)
                as fn(&ProfileReport) -> f64,
            num as fn(f64) -> String,
        ),
        ("target user CPU (s)", |r| r.derived.target_user_cpu_s, num),
        (
            "target system CPU (s)",
            |r| r.derived.target_system_cpu_s,
            num,
        ),
        (
            "target share in the kernel",
            |r| r.derived.target_kernel_share,
            pct,
        ),
        (
            "voluntary switches per transaction",
            |r| r.derived.voluntary_switches_per_transaction,
            num,
        ),
        (
            "involuntary switches per transaction",
            |r| r.derived.involuntary_switches_per_transaction,
            num,
        ),
        (
            "generator CPU per transaction (us)",
            |r| r.derived.generator_cpu_us_per_transaction,
            num,
        ),
    ] {
        rows.push(Row {
            name: name.into(),
            a: Some(f(a)),
            b: Some(f(b)),
            fmt,
        });
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {a_name}\n   {} under {}",
        a.target.comm,
        a.load_command.join(" ")
    );
    let _ = writeln!(
        s,
        "B: {b_name}\n   {} under {}",
        b.target.comm,
        b.load_command.join(" ")
    );
    if a.machine.kernel_release != b.machine.kernel_release
        || a.machine.cpu_model != b.machine.cpu_model
    {
        let _ = writeln!(
            s,
            "note: different machines or kernels ({} vs {}): differences are not only the change under test",
            a.machine.describe(),
            b.machine.describe()
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<40} {:>14} {:>14} {:>10}",
        "figure", "A", "B", "change"
    );
    for mut r in rows {
        // A per-transaction figure of an unattributed run is NaN: unknown.
        r.a = r.a.filter(|v| v.is_finite());
        r.b = r.b.filter(|v| v.is_finite());
        let f = |v: Option<f64>| v.map_or("-".to_string(), r.fmt);
        let _ = writeln!(
            s,
            "{:<40} {:>14} {:>14} {:>10}",
            r.name,
            f(r.a),
            f(r.b),
            change(r.a, r.b)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::change;

    #[test]
    fn change_in_percent() {
        assert_eq!(change(Some(100.0), Some(150.0)), "+50.0%");
        assert_eq!(change(Some(200.0), Some(100.0)), "-50.0%");
        assert_eq!(change(Some(0.0), Some(0.0)), "+0.0%");
        assert_eq!(change(Some(0.0), Some(3.0)), "new");
        assert_eq!(change(None, Some(3.0)), "-");
    }
}
