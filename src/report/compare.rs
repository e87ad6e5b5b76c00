//! `sockscope compare A.json B.json`: the differences between two profile
//! artifacts (throughput, latency percentiles, syscalls per transaction,
//! CPU split, page faults), each with its change: in percent for
//! quantities, in percentage points for shares, absolute from zero; and
//! warnings when the two runs differ in more than the change under test
//! (machine, tracer mode, target, load shape); where the anatomies named
//! requests, the endpoints whose p99 changed (`endpoints_compare`); when
//! both runs have stacks, the functions that grew (`stacks_compare`), and
//! a page of it all.

use std::fmt::Write as _;

use super::profile::ProfileReport;
use super::tails;
use super::units::human_ns_f64;
use crate::stats::{LatencySummary, TailInterval};

/// How a figure's change is put.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A quantity: relative change in percent (absolute when A is, or
    /// displays as, zero).
    Quantity,
    /// A share (0..1): the difference in percentage points; a share that
    /// goes from 40% to 60% changed by 20 points, not by 50%.
    Share,
}

/// One compared figure.
struct Row {
    name: String,
    a: Option<f64>,
    b: Option<f64>,
    fmt: fn(f64) -> String,
    kind: Kind,
    /// Shown instead of A, B and the change where the figures are not
    /// numbers ("118us-131us") or the change needs a verdict (a tail
    /// percentile within its uncertainty).
    text: Option<RowText>,
}

/// The cells of a row that [`change`] and the row's `fmt` do not make.
struct RowText {
    a: Option<String>,
    b: Option<String>,
    change: String,
}

/// B's change relative to A, as a reader can use it.
fn change(a: Option<f64>, b: Option<f64>, fmt: fn(f64) -> String, kind: Kind) -> String {
    let (Some(a), Some(b)) = (a, b) else {
        return "-".into();
    };
    if kind == Kind::Share {
        return format!("{:+.1} pp", 100.0 * (b - a));
    }
    if a == b {
        return "+0.0%".into();
    }
    // From zero, or from a value too small to show, a percentage says
    // nothing ("+5002146.4%"): the absolute change does.
    if a == 0.0 || fmt(a) == fmt(0.0) {
        let diff = fmt((b - a).abs());
        if diff == fmt(0.0) {
            // Both too small to show: so is their difference.
            return "~0".into();
        }
        let sign = if b > a { '+' } else { '-' };
        return format!("{sign}{diff}");
    }
    format!("{:+.1}%", 100.0 * (b - a) / a.abs())
}
fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// The rows of the comparison, in the order they print.
fn rows(a: &ProfileReport, b: &ProfileReport) -> Vec<Row> {
    let mut rows = load_rows(a, b);
    let mut per_syscall = syscall_rows(a, b);
    for r in &mut per_syscall {
        not_recorded(r, a, b);
    }
    rows.extend(per_syscall);
    rows.extend(cost_rows(a, b));
    for r in rows
        .iter_mut()
        .filter(|r| TRACED.contains(&r.name.as_str()))
    {
        not_recorded(r, a, b);
    }
    rows.extend(evidence_rows(a, b));
    rows
}

/// The rows besides the per-syscall ones whose figures only the syscall
/// tracer measures.
const TRACED: &[&str] = &[
    "syscalls per transaction",
    "minor page faults per transaction",
    "voluntary switches per transaction",
    "involuntary switches per transaction",
];

/// A run without the syscall tracer (`profile --requests-only`) shows
/// "not recorded" in a row of the tracer's figures, and the row no
/// change: a figure never measured is not a zero.
fn not_recorded(row: &mut Row, a: &ProfileReport, b: &ProfileReport) {
    let (na, nb) = (a.trace.is_none(), b.trace.is_none());
    if !na && !nb {
        return;
    }
    let cell = |missing: bool, v: Option<f64>, fmt: fn(f64) -> String| {
        if missing {
            "not recorded".to_string()
        } else {
            v.filter(|v| v.is_finite()).map_or("-".to_string(), fmt)
        }
    };
    row.text = Some(RowText {
        a: Some(cell(na, row.a, row.fmt)),
        b: Some(cell(nb, row.b, row.fmt)),
        change: "-".into(),
    });
}

/// The kernel's evidence where either run has it: the named counters that
/// moved in either run, per transaction (two runs of different lengths
/// compare), the accept queue's peak, and the run-queue wait share.
fn evidence_rows(a: &ProfileReport, b: &ProfileReport) -> Vec<Row> {
    use super::evidence::counters::NAMED;
    let mut rows = Vec::new();
    let counter = |r: &ProfileReport, name: &str| {
        let c = r.evidence.as_ref()?.counters.as_ref()?;
        let tx = r.derived.transactions;
        (tx > 0).then(|| c.get(name) as f64 / tx as f64)
    };
    for name in NAMED {
        let (x, y) = (counter(a, name), counter(b, name));
        if x.unwrap_or(0.0) > 0.0 || y.unwrap_or(0.0) > 0.0 {
            rows.push(quantity(
                &format!("kernel {name} per transaction"),
                x,
                y,
                num,
            ));
        }
    }
    let queue = |r: &ProfileReport| {
        let s = r.evidence.as_ref()?.sockets.as_ref()?;
        s.listeners
            .iter()
            .map(|l| l.accept_queue_max as f64)
            .reduce(f64::max)
    };
    let (x, y) = (queue(a), queue(b));
    if x.is_some() || y.is_some() {
        rows.push(quantity("longest accept queue seen", x, y, num));
    }
    let wait = |r: &ProfileReport| Some(r.evidence.as_ref()?.sched.as_ref()?.wait_share);
    let (x, y) = (wait(a), wait(b));
    if x.is_some() || y.is_some() {
        rows.push(Row {
            name: "runnable time waiting for a CPU".into(),
            a: x,
            b: y,
            fmt: pct,
            kind: Kind::Share,
            text: None,
        });
    }
    rows
}

/// A row of a quantity (its change in percent).
fn quantity(name: &str, a: Option<f64>, b: Option<f64>, fmt: fn(f64) -> String) -> Row {
    Row {
        name: name.into(),
        a,
        b,
        fmt,
        kind: Kind::Quantity,
        text: None,
    }
}

/// Throughput, latency percentiles and syscalls per transaction.
fn load_rows(a: &ProfileReport, b: &ProfileReport) -> Vec<Row> {
    let mut rows = vec![
        quantity(
            "transactions/s",
            Some(a.derived.rate_per_s),
            Some(b.derived.rate_per_s),
            num,
        ),
        quantity(
            "transactions",
            Some(a.derived.transactions as f64),
            Some(b.derived.transactions as f64),
            num,
        ),
    ];
    let lat = |r: &ProfileReport, f: fn(&LatencySummary) -> u64| {
        r.load
            .as_ref()
            .and_then(|l| l.latency.as_ref())
            .map(|l| f(&l.summary) as f64)
    };
    for (name, f) in [
        (
            "latency p50",
            (|s: &LatencySummary| s.p50_ns) as fn(&_) -> u64,
        ),
        ("latency p90", |s| s.p90_ns),
    ] {
        rows.push(quantity(name, lat(a, f), lat(b, f), human_ns_f64));
    }
    for (name, f) in [
        (
            "latency p99",
            (|s: &LatencySummary| (s.p99_ns, s.p99_ci))
                as fn(&LatencySummary) -> (u64, Option<TailInterval>),
        ),
        ("latency p99.9", |s| (s.p999_ns, s.p999_ci)),
    ] {
        let tail = |r: &ProfileReport| {
            r.load
                .as_ref()
                .and_then(|l| l.latency.as_ref())
                .map(|l| f(&l.summary))
        };
        rows.extend(tail_rows(name, tail(a), tail(b)));
    }
    rows.push(quantity(
        "latency max",
        lat(a, |s| s.max_ns),
        lat(b, |s| s.max_ns),
        human_ns_f64,
    ));
    rows.push(quantity(
        "syscalls per transaction",
        Some(a.derived.syscalls_per_transaction),
        Some(b.derived.syscalls_per_transaction),
        num,
    ));
    rows
}

/// A tail percentile's row and its intervals' row. Its difference is
/// called a change only when the two 95% confidence intervals do not
/// overlap; otherwise it is within the uncertainty of the runs. A
/// percentile not meaningful in either run (too few samples beyond it)
/// changes by nothing anyone can tell.
fn tail_rows(
    name: &str,
    a: Option<(u64, Option<TailInterval>)>,
    b: Option<(u64, Option<TailInterval>)>,
) -> Vec<Row> {
    let value = |x: Option<(u64, Option<TailInterval>)>| x.map(|(v, _)| v as f64);
    let mut row = quantity(name, value(a), value(b), human_ns_f64);
    let (Some((va, Some(ca))), Some((vb, Some(cb)))) = (a, b) else {
        // An artifact without intervals (its histogram unreadable): the
        // plain change.
        return vec![row];
    };
    let pct = change(row.a, row.b, human_ns_f64, Kind::Quantity);
    let verdict = if !ca.meaningful || !cb.meaningful {
        "not meaningful".to_string()
    } else if ca.overlaps(&cb) {
        format!("within uncertainty ({pct})")
    } else {
        pct
    };
    row.text = Some(RowText {
        a: Some(tails::cell(va, Some(ca))),
        b: Some(tails::cell(vb, Some(cb))),
        change: verdict,
    });
    let ci = |c: TailInterval| {
        if c.meaningful {
            tails::range(&c)
        } else {
            "-".into()
        }
    };
    let interval = Row {
        name: "  95% CI".into(),
        a: None,
        b: None,
        fmt: human_ns_f64,
        kind: Kind::Quantity,
        text: Some(RowText {
            a: Some(ci(ca)),
            b: Some(ci(cb)),
            change: String::new(),
        }),
    };
    vec![row, interval]
}

/// Per syscall of either run's top six: calls per transaction, and its
/// share of syscall time where that is not noise.
fn syscall_rows(a: &ProfileReport, b: &ProfileReport) -> Vec<Row> {
    let mut rows = Vec::new();
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
                .as_ref()?
                .syscalls
                .iter()
                .find(|s| s.name == n)
                .map_or(0.0, |s| s.calls as f64 / tx),
        )
    };
    // A syscall's share of all syscall time (None in count-only mode).
    let share = |r: &ProfileReport, n: &str| {
        let trace = r.trace.as_ref()?;
        let total = trace.totals.time_ns.filter(|t| *t > 0)?;
        let t = trace
            .syscalls
            .iter()
            .find(|s| s.name == n)
            .and_then(|s| s.latency.as_ref())
            .map_or(0, |l| l.total_ns);
        Some(t as f64 / total as f64)
    };
    for n in &names {
        rows.push(quantity(
            &format!("  {n} per transaction"),
            per(a, n),
            per(b, n),
            num,
        ));
    }
    // Shares under half a percent in both runs are noise here.
    for n in names.iter().filter(|n| {
        [share(a, n), share(b, n)]
            .into_iter()
            .flatten()
            .any(|s| s >= 0.005)
    }) {
        rows.push(Row {
            name: format!("  {n} share of syscall time"),
            a: share(a, n),
            b: share(b, n),
            fmt: pct,
            kind: Kind::Share,
            text: None,
        });
    }
    rows
}

/// What the target and the generator cost per transaction.
fn cost_rows(a: &ProfileReport, b: &ProfileReport) -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, f, fmt, kind) in [
        (
            "target CPU per transaction (us)",
            (|r: &ProfileReport| r.derived.target_cpu_us_per_transaction)
                as fn(&ProfileReport) -> f64,
            num as fn(f64) -> String,
            Kind::Quantity,
        ),
        (
            "target user CPU (s)",
            |r| r.derived.target_user_cpu_s,
            num,
            Kind::Quantity,
        ),
        (
            "target system CPU (s)",
            |r| r.derived.target_system_cpu_s,
            num,
            Kind::Quantity,
        ),
        (
            "target share in the kernel",
            |r| r.derived.target_kernel_share,
            pct,
            Kind::Share,
        ),
        (
            "minor page faults per transaction",
            |r| r.derived.minor_faults_per_transaction,
            num,
            Kind::Quantity,
        ),
        (
            "voluntary switches per transaction",
            |r| r.derived.voluntary_switches_per_transaction,
            num,
            Kind::Quantity,
        ),
        (
            "involuntary switches per transaction",
            |r| r.derived.involuntary_switches_per_transaction,
            num,
            Kind::Quantity,
        ),
        (
            "generator CPU per transaction (us)",
            |r| r.derived.generator_cpu_us_per_transaction,
            num,
            Kind::Quantity,
        ),
    ] {
        rows.push(Row {
            name: name.into(),
            a: Some(f(a)),
            b: Some(f(b)),
            fmt,
            kind,
            text: None,
        });
    }
    rows
}

/// The target's command as a comparable list: the program's base name,
/// without the `--json FILE` profile gives a `serve` target, with the port
/// it listened on written `PORT` (two runs of one server differ in it).
fn target_identity(r: &ProfileReport) -> Vec<String> {
    let Some(cmd) = &r.target.command else {
        return vec![format!("pid of {}", r.target.comm)];
    };
    let port = r
        .target
        .address
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut skip = false;
    for (i, arg) in cmd.iter().enumerate() {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == "--json" {
            skip = true;
            continue;
        }
        if arg.starts_with("--json=") {
            continue;
        }
        let arg = if i == 0 {
            arg.rsplit('/').next().unwrap_or(arg).to_string()
        } else if !port.is_empty() {
            arg.replace(&port, "PORT")
        } else {
            arg.clone()
        };
        out.push(arg);
    }
    out
}

/// The options that shape a load, by name, for people.
fn load_shape(r: &ProfileReport) -> Vec<(&'static str, String)> {
    let Some(load) = &r.load else {
        // Not sockscope's load: its shape is the command, or none.
        return vec![("workload", r.load_line())];
    };
    let c = &load.config;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    vec![
        ("workload", load.workload.clone()),
        ("connections", opt(c.connections.map(|v| v.to_string()))),
        ("threads", c.threads.to_string()),
        ("pipeline", opt(c.pipeline.map(|v| v.to_string()))),
        ("request bytes", opt(c.request_bytes.map(|v| v.to_string()))),
        (
            "response bytes",
            opt(c.response_bytes.map(|v| v.to_string())),
        ),
        ("request", opt(c.request.clone())),
        (
            "datagram bytes",
            opt(c.datagram_bytes.map(|v| v.to_string())),
        ),
        ("burst", opt(c.burst.map(|v| v.to_string()))),
        ("rate", opt(c.rate.map(|v| format!("{v}/s")))),
        ("rate schedule", opt(c.rate_schedule.clone())),
        ("duration", opt(c.duration_s.map(|v| format!("{v} s")))),
        ("count", opt(c.count.map(|v| v.to_string()))),
        ("warm-up", format!("{} s", c.warmup_s)),
    ]
}

/// Warnings about differences that are not the change under test.
fn warnings(a: &ProfileReport, b: &ProfileReport) -> Vec<String> {
    let mut out = Vec::new();
    if a.machine.kernel_release != b.machine.kernel_release
        || a.machine.cpu_model != b.machine.cpu_model
    {
        out.push(format!(
            "different machines or kernels ({} vs {}): differences are not only the change \
             under test",
            a.machine.describe(),
            b.machine.describe()
        ));
    }
    let mode = |r: &ProfileReport| match &r.trace {
        None => "none (--requests-only: no syscall tracer)",
        Some(t) if t.options.count_only => "count-only (--count-only: no syscall latency)",
        Some(_) => "latency",
    };
    if mode(a) != mode(b) {
        out.push(format!(
            "different tracer modes: A {}, B {}; the tracer costs the target differently in \
             each, syscall times exist only in latency mode, and syscall figures only where \
             it ran",
            mode(a),
            mode(b)
        ));
    }
    let (ta, tb) = (target_identity(a), target_identity(b));
    if ta != tb {
        out.push(format!(
            "different targets: A `{}`, B `{}`",
            shell_words::join(&ta),
            shell_words::join(&tb)
        ));
    }
    let diffs: Vec<String> = load_shape(a)
        .into_iter()
        .zip(load_shape(b))
        .filter(|(x, y)| x.1 != y.1)
        .map(|((name, x), (_, y))| format!("{name} {x} vs {y}"))
        .collect();
    if !diffs.is_empty() {
        out.push(format!(
            "different loads ({}): per-transaction figures depend on the load's shape",
            diffs.join(", ")
        ));
    }
    out
}

/// Renders the comparison table (B relative to A) and, when either run
/// has stacks, the functions that grew, its control characters written
/// out: both artifacts' strings are untrusted (see [`crate::text`]).
pub fn render(a: &ProfileReport, b: &ProfileReport, a_name: &str, b_name: &str) -> String {
    let mut s = figures(a, b, a_name, b_name);
    let endpoints = super::endpoints_compare::text(a, b);
    if !endpoints.is_empty() {
        s.push('\n');
        s.push_str(&endpoints);
    }
    let stacks = super::stacks_compare::text(a.stacks.as_ref(), b.stacks.as_ref());
    if !stacks.is_empty() {
        s.push('\n');
        s.push_str(&stacks);
    }
    crate::text::escape_block(&s).into_owned()
}

/// The comparison as a page (`compare --html`): the table as the terminal
/// shows it, then the functions that grew with the differential flame
/// graph.
pub fn page(a: &ProfileReport, b: &ProfileReport, a_name: &str, b_name: &str) -> String {
    use super::svg::esc;
    let mut figs = figures(a, b, a_name, b_name);
    let endpoints = super::endpoints_compare::text(a, b);
    if !endpoints.is_empty() {
        figs.push('\n');
        figs.push_str(&endpoints);
    }
    let table = crate::text::escape_block(&figs).into_owned();
    let body = format!(
        "{}{}",
        super::html::card(
            "figures",
            "The figures",
            "B relative to A.",
            &format!("<pre class=\"mono\">{}</pre>", esc(&table))
        ),
        super::stacks_compare::html(a.stacks.as_ref(), b.stacks.as_ref())
    );
    super::html::page(
        "sockscope compare",
        &format!("A: {a_name}, B: {b_name}"),
        &body,
    )
}

/// The table of figures with its heading and notes (not yet escaped).
fn figures(a: &ProfileReport, b: &ProfileReport, a_name: &str, b_name: &str) -> String {
    let mut s = String::new();
    for (label, name, r) in [("A", a_name, a), ("B", b_name, b)] {
        let _ = writeln!(
            s,
            "{label}: {name}\n   {} under {}",
            r.target.command.as_ref().map_or_else(
                || format!("pid {} ({})", r.target.pid, r.target.comm),
                |c| { shell_words::join(c) }
            ),
            r.load_line()
        );
    }
    for w in warnings(a, b) {
        let _ = writeln!(s, "note: {w}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<40} {:>14} {:>14} {:>10}",
        "figure", "A", "B", "change"
    );
    for mut r in rows(a, b) {
        // A per-transaction figure of an unattributed run is NaN: unknown.
        r.a = r.a.filter(|v| v.is_finite());
        r.b = r.b.filter(|v| v.is_finite());
        let f = |v: Option<f64>| v.map_or("-".to_string(), r.fmt);
        let (ta, tb, tc) = match r.text {
            Some(t) => (t.a, t.b, Some(t.change)),
            None => (None, None, None),
        };
        let line = format!(
            "{:<40} {:>14} {:>14} {:>10}",
            r.name,
            ta.unwrap_or_else(|| f(r.a)),
            tb.unwrap_or_else(|| f(r.b)),
            tc.unwrap_or_else(|| change(r.a, r.b, r.fmt, r.kind))
        );
        // An interval row has no change column.
        let _ = writeln!(s, "{}", line.trim_end());
    }
    let _ = writeln!(
        s,
        "\nchange: B relative to A in percent; shares in percentage points (pp); from a zero \
         (or a value that shows as zero) the absolute change (~0: both too small to show)"
    );
    let _ = writeln!(
        s,
        "p99 and p99.9: a change only when their 95% confidence intervals do not overlap, \
         otherwise within uncertainty; n/m: not meaningful, too few samples beyond it \
         (docs/tail-percentiles.md)"
    );
    s
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;

    #[test]
    fn a_run_without_the_tracer_compares_with_its_syscall_rows_not_recorded() {
        let a = fixtures::profile(&fixtures::epoll_echo());
        let b = fixtures::untraced(a.clone());
        let text = render(&a, &b, "full.json", "requests-only.json");
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .map(str::to_owned)
                .unwrap_or_else(|| panic!("no {name:?} row in:\n{text}"))
        };
        for name in [
            "syscalls per transaction",
            "voluntary switches per transaction",
            "minor page faults per transaction",
        ] {
            let l = line(name);
            assert!(l.contains("not recorded") && l.ends_with(" -"), "{l}");
        }
        // The per-syscall rows name the full run's syscalls, B has none.
        let per = text
            .lines()
            .find(|l| l.starts_with("  ") && l.contains(" per transaction"))
            .expect(&text);
        assert!(per.contains("not recorded"), "{per}");
        // The target's CPU was measured in both: a number and a change.
        let cpu = line("target CPU per transaction (us)");
        assert!(!cpu.contains("not recorded") && cpu.ends_with('%'), "{cpu}");
        assert!(
            text.contains("note: different tracer modes: A latency, B none (--requests-only"),
            "{text}"
        );
        assert!(!text.contains("NaN"), "{text}");
        // Both without: the rows say it on both sides, no per-syscall rows.
        let text = render(&b, &b, "x", "y");
        let l = text
            .lines()
            .find(|l| l.starts_with("syscalls per transaction"))
            .unwrap();
        assert_eq!(l.matches("not recorded").count(), 2, "{l}");
        assert!(!text.contains("different tracer modes"), "{text}");
    }

    #[test]
    fn kernel_counters_compare_per_transaction_and_only_when_they_moved() {
        use crate::report::evidence::{CounterDeltas, KernelEvidence, SchedEvidence};
        let mut a = fixtures::profile(&fixtures::epoll_echo());
        let mut b = a.clone();
        let ev = |overflows: u64, wait: f64| KernelEvidence {
            counters: Some(CounterDeltas {
                source: "test".into(),
                deltas: [
                    ("TcpExt.ListenOverflows".to_string(), overflows),
                    ("Tcp.RetransSegs".to_string(), 0),
                ]
                .into(),
                ..Default::default()
            }),
            sched: Some(SchedEvidence {
                wait_share: wait,
                ..Default::default()
            }),
            ..Default::default()
        };
        a.evidence = Some(ev(0, 0.10));
        b.evidence = Some(ev(b.derived.transactions, 0.25));
        let text = render(&a, &b, "a.json", "b.json");
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .map(str::to_owned)
        };
        let overflow = line("kernel TcpExt.ListenOverflows per transaction").expect(&text);
        assert!(overflow.ends_with("+1.000"), "{overflow}");
        assert!(line("kernel Tcp.RetransSegs").is_none(), "{text}");
        let wait = line("runnable time waiting for a CPU").expect(&text);
        assert!(wait.ends_with("+15.0 pp"), "{wait}");
        // A run without evidence (an older artifact) shows "-" for it.
        a.evidence = None;
        let text = render(&a, &b, "a.json", "b.json");
        let overflow = text
            .lines()
            .find(|l| l.starts_with("kernel TcpExt.ListenOverflows"))
            .expect(&text);
        assert!(overflow.contains(" - "), "{overflow}");
    }

    /// A latency record of `n` exponential latencies (mean `mean_ns`),
    /// evenly spread over the distribution from `offset` (0..1) of a step.
    fn exp_record(n: u64, mean_ns: f64, offset: f64) -> crate::report::load::LatencyRecord {
        let h = crate::stats::testing::exponential(n, mean_ns, offset);
        crate::report::load::LatencyRecord {
            summary: h.summary(),
            hdr_histogram: h.to_v2_base64().unwrap(),
        }
    }

    fn line_of<'a>(text: &'a str, name: &str) -> &'a str {
        let mut it = text.lines().skip_while(|l| !l.starts_with(name));
        it.next().unwrap_or_else(|| panic!("no {name} in\n{text}"))
    }

    #[test]
    fn a_p99_change_is_called_only_when_the_intervals_do_not_overlap() {
        let mut a = fixtures::profile(&fixtures::epoll_echo());
        let mut b = a.clone();
        // Two samples of one distribution: p99s 0.5% apart, inside their
        // intervals.
        a.load.as_mut().unwrap().latency = Some(exp_record(20_000, 100_000.0, 0.25));
        b.load.as_mut().unwrap().latency = Some(exp_record(20_000, 100_500.0, 0.75));
        let text = render(&a, &b, "a", "b");
        let p99 = line_of(&text, "latency p99 ");
        assert!(p99.contains("within uncertainty (+"), "{p99}");
        let ci = text
            .lines()
            .skip_while(|l| !l.starts_with("latency p99 "))
            .nth(1)
            .unwrap();
        let sa = a.load.as_ref().unwrap().latency.as_ref().unwrap().summary;
        assert!(ci.starts_with("  95% CI"), "{text}");
        assert!(ci.contains(&tails::range(&sa.p99_ci.unwrap())), "{ci}");
        // 30% slower: the intervals are far apart, a change.
        b.load.as_mut().unwrap().latency = Some(exp_record(20_000, 130_000.0, 0.75));
        let text = render(&a, &b, "a", "b");
        let p99 = line_of(&text, "latency p99 ");
        assert!(p99.trim_end().ends_with('%'), "{p99}");
        assert!(!p99.contains("within"), "{p99}");
        let pct: f64 = p99
            .rsplit(' ')
            .next()
            .unwrap()
            .trim_matches(['+', '%'])
            .parse()
            .unwrap();
        assert!((pct - 30.0).abs() < 1.0, "{p99}");
        // p99.9 of 2,000 samples: 2 beyond it, not meaningful.
        a.load.as_mut().unwrap().latency = Some(exp_record(2_000, 100_000.0, 0.5));
        b.load.as_mut().unwrap().latency = Some(exp_record(2_000, 300_000.0, 0.5));
        let text = render(&a, &b, "a", "b");
        let p999 = line_of(&text, "latency p99.9 ");
        assert!(
            p999.contains("n/m") && p999.ends_with("not meaningful"),
            "{p999}"
        );
    }

    #[test]
    fn an_artifact_without_intervals_gets_them_from_its_histogram() {
        let rec = exp_record(20_000, 100_000.0, 0.5);
        let mut v = serde_json::to_value(&rec).unwrap();
        assert!(v.get("p99_ci").is_some(), "{v}");
        for k in ["p99_ci", "p999_ci", "p9999_ci"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let back: crate::report::load::LatencyRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.summary, rec.summary);
        // One whose histogram does not decode keeps its figures, without.
        let mut v = serde_json::to_value(&rec).unwrap();
        v["hdr_histogram"] = "x".into();
        v.as_object_mut().unwrap().remove("p99_ci");
        let back: crate::report::load::LatencyRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.summary.p99_ci, None);
        assert_eq!(back.summary.p99_ns, rec.summary.p99_ns);
        // Then compare shows the plain change.
        let mut a = fixtures::profile(&fixtures::epoll_echo());
        let b = a.clone();
        a.load.as_mut().unwrap().latency = Some(back);
        let text = render(&a, &b, "a", "b");
        assert!(!line_of(&text, "latency p99 ").contains("within"), "{text}");
        assert!(!text.contains("  95% CI"), "{text}");
    }

    #[test]
    fn change_in_percent_points_or_absolute() {
        let q = Kind::Quantity;
        assert_eq!(change(Some(100.0), Some(150.0), num, q), "+50.0%");
        assert_eq!(change(Some(200.0), Some(100.0), num, q), "-50.0%");
        assert_eq!(change(Some(0.0), Some(0.0), num, q), "+0.0%");
        assert_eq!(change(None, Some(3.0), num, q), "-");
        // From zero, or from what displays as zero: absolute.
        assert_eq!(change(Some(0.0), Some(3.0), num, q), "+3.000");
        assert_eq!(change(Some(0.0000002), Some(1.0004), num, q), "+1.000");
        assert_eq!(
            change(Some(0.0), Some(2_500_000.0), human_ns_f64, q),
            "+2.50ms"
        );
        assert_eq!(change(Some(0.0001), Some(0.0), num, q), "~0");
        assert_eq!(change(Some(0.0004), Some(0.5), num, q), "+0.500");
        // Shares: 40% -> 60% is 20 points, not +50%.
        assert_eq!(change(Some(0.4), Some(0.6), pct, Kind::Share), "+20.0 pp");
        assert_eq!(change(Some(0.0), Some(0.05), pct, Kind::Share), "+5.0 pp");
    }

    #[test]
    fn commands_paste_into_a_shell_and_differences_are_named() {
        let a = fixtures::profile(&fixtures::epoll_echo());
        let mut b = fixtures::profile(&fixtures::epoll_echo());
        let out = render(&a, &b, "a.json", "b.json");
        assert!(!out.contains("note:"), "{out}");
        b.load_command = vec![
            "sockscope".into(),
            "load".into(),
            "tcp-rr".into(),
            "--request".into(),
            "PING\\r\\n".into(),
        ];
        b.target.command = Some(
            [
                "sockscope",
                "serve",
                "echo",
                "--transport",
                "uring",
                "--json",
                "/tmp/x.json",
            ]
            .map(String::from)
            .to_vec(),
        );
        b.trace.as_mut().unwrap().options.count_only = true;
        b.load.as_mut().unwrap().config.connections = Some(64);
        b.load.as_mut().unwrap().config.duration_s = Some(10.0);
        let out = render(&a, &b, "a.json", "b.json");
        assert!(
            out.contains("under sockscope load tcp-rr --request 'PING\\r\\n'"),
            "{out}"
        );
        assert!(out.contains("note: different tracer modes: A latency, B count-only"));
        assert!(out.contains(
            "note: different targets: A `sockscope serve echo --transport epoll`, B `sockscope \
             serve echo --transport uring`"
        ));
        assert!(out.contains("note: different loads (connections 16 vs 64, duration 2 s vs 10 s)"));
    }

    #[test]
    fn the_same_server_on_another_port_is_the_same_target() {
        let a = fixtures::profile(&fixtures::forking_server());
        let mut b = fixtures::profile(&fixtures::forking_server());
        b.target.address = "127.0.0.1:41000".into();
        b.target.command = Some(
            [
                "/usr/local/bin/postgres",
                "-D",
                "/tmp/pgdata",
                "-p",
                "41000",
            ]
            .map(String::from)
            .to_vec(),
        );
        assert!(!render(&a, &b, "a", "b").contains("different targets"));
    }

    #[test]
    fn shares_change_in_points() {
        let a = fixtures::profile(&fixtures::epoll_echo());
        let mut b = fixtures::profile(&fixtures::epoll_echo());
        b.derived.target_kernel_share = a.derived.target_kernel_share - 0.10;
        let out = render(&a, &b, "a", "b");
        let line = out
            .lines()
            .find(|l| l.starts_with("target share in the kernel"))
            .unwrap();
        assert!(line.ends_with("-10.0 pp"), "{line}");
        let line = out
            .lines()
            .find(|l| l.starts_with("  sendto share of syscall time"))
            .unwrap();
        assert!(line.ends_with("+0.0 pp"), "{line}");
    }
}
