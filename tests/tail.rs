//! Tail percentiles with their 95% confidence intervals
//! (docs/tail-percentiles.md): in a real load's JSON and summary, in
//! `compare` of two profile artifacts (a change only when the intervals do
//! not overlap), and for artifacts written before the intervals existed.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::server::Server;
use common::*;
use serde_json::Value;
use sockscope::report::tails;
use sockscope::report::units::human_ns;
use sockscope::stats::LatencyHist;

const LIMIT: Duration = Duration::from_secs(60);

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn a_real_loads_tail_percentiles_carry_intervals_and_flags() {
    let dir = scratch("tail-load");
    let srv = Server::start(&["serve", "echo", "--transport", "epoll"]);
    let json = dir.join("l.json");
    let out = Command::new(sockscope())
        .args([
            "load",
            "tcp-rr",
            &srv.addr.to_string(),
            "-c",
            "4",
            "-n",
            "3000",
        ])
        .args(["--json", json.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (st, err) = srv.stop();
    assert!(st.success(), "server exited {st}: {err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = read_json(&json);
    let lat = &rep["latency"];
    assert_eq!(u(&lat["count"]), 3000);

    // p99 of 3,000: 30 expected beyond it, meaningful, bracketed.
    let ci = &lat["p99_ci"];
    assert_eq!(ci["meaningful"], true, "{lat}");
    assert_eq!(ci["method"], "exact");
    assert_eq!(ci["expected_beyond"].as_f64().unwrap().round(), 30.0);
    assert!(u(&ci["low_ns"]) <= u(&lat["p99_ns"]) && u(&lat["p99_ns"]) <= u(&ci["high_ns"]));
    assert!(u(&ci["high_ns"]) <= u(&lat["max_ns"]));
    assert!(
        u(&ci["low_rank"]) < 2970 && 2970 < u(&ci["high_rank"]),
        "{ci}"
    );
    assert!(u(&ci["high_rank"]) <= 3000, "{ci}");
    assert!(u(&ci["beyond"]) <= 30, "{ci}");
    // The same interval, recomputed from the stored histogram.
    let h = LatencyHist::from_v2_base64(lat["hdr_histogram"].as_str().unwrap()).unwrap();
    let s = h.summary();
    let again = s.p99_ci.unwrap();
    assert_eq!(again.low_ns, u(&ci["low_ns"]));
    assert_eq!(again.high_ns, u(&ci["high_ns"]));
    assert_eq!(again.beyond, u(&ci["beyond"]));

    // p99.99 of 3,000: 0.3 expected beyond, not meaningful.
    let ci = &lat["p9999_ci"];
    assert_eq!(ci["meaningful"], false, "{lat}");
    assert!((ci["expected_beyond"].as_f64().unwrap() - 0.3).abs() < 1e-9);
    assert!(
        text.contains("p99.99: not meaningful from 3,000 samples (0.3 expected beyond it)"),
        "{text}"
    );
    assert!(text.contains("p99.99 n/m"), "{text}");
    let p99 = s.p99_ci.unwrap();
    let phrase = format!(
        "p99 {} (95% CI {}, {} beyond); p99.9",
        human_ns(s.p99_ns),
        tails::range(&p99),
        p99.beyond
    );
    assert!(text.contains(&phrase), "{phrase} not in\n{text}");
}

/// The v1 profile fixture with its load latency replaced by `n`
/// exponential latencies of mean `mean_ns`, written as an artifact of
/// before the intervals: no `*_ci` fields, only the histogram.
fn profile_with_latency(dir: &Path, name: &str, n: u64, mean_ns: f64, offset: f64) -> String {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/profile.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let mut h = LatencyHist::new();
    for i in 0..n {
        let q = (i as f64 + offset) / n as f64;
        h.record((-(1.0 - q).ln() * mean_ns) as u64);
    }
    let mut lat = serde_json::to_value(h.summary()).unwrap();
    let obj = lat.as_object_mut().unwrap();
    for k in ["p99_ci", "p999_ci", "p9999_ci"] {
        assert!(obj.remove(k).is_some(), "the summary has {k}");
    }
    obj.insert("hdr_histogram".into(), h.to_v2_base64().unwrap().into());
    v["load"]["latency"] = lat;
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

fn compare_line(a: &str, b: &str, name: &str) -> (String, String) {
    let (st, so, se) = run_bounded(&["compare", a, b], LIMIT);
    assert!(st.success(), "{so}{se}");
    let mut lines = so.lines().skip_while(|l| !l.starts_with(name));
    let row = lines.next().unwrap_or_else(|| panic!("no {name} in {so}"));
    let ci = lines.next().unwrap_or("");
    (row.to_string(), ci.to_string())
}

#[test]
fn compare_calls_a_p99_change_only_when_the_intervals_do_not_overlap() {
    let dir = scratch("tail-compare");
    // Old artifacts (no intervals): compare computes them from the
    // histograms.
    let a = profile_with_latency(&dir, "a.json", 20_000, 100_000.0, 0.25);
    let close = profile_with_latency(&dir, "close.json", 20_000, 101_000.0, 0.75);
    let slower = profile_with_latency(&dir, "slower.json", 20_000, 140_000.0, 0.75);

    let (row, ci) = compare_line(&a, &close, "latency p99 ");
    let pct: f64 = row
        .split("within uncertainty (")
        .nth(1)
        .unwrap_or_else(|| panic!("not within uncertainty: {row}"))
        .trim_end_matches(['%', ')'])
        .parse()
        .unwrap();
    assert!((0.5..=1.6).contains(&pct), "{row}");
    assert!(ci.trim_start().starts_with("95% CI"), "{ci}");
    let (row, _) = compare_line(&a, &slower, "latency p99 ");
    assert!(
        row.trim_end().ends_with('%') && !row.contains("within"),
        "{row}"
    );
    let (row, _) = compare_line(&slower, &a, "latency p99.9 ");
    assert!(
        row.trim_end().ends_with('%') && row.contains(" -2"),
        "{row}"
    );
    // p99.9 of 20,000: 20 beyond, meaningful; of 2,000 it is not.
    let few = profile_with_latency(&dir, "few.json", 2_000, 100_000.0, 0.5);
    let (row, ci) = compare_line(&few, &slower, "latency p99.9 ");
    assert!(
        row.contains("n/m") && row.ends_with("not meaningful"),
        "{row}"
    );
    assert!(ci.contains(" - "), "{ci}");

    // report renders an old artifact with the intervals too.
    let out = dir.join("re");
    let (st, so, se) = run_bounded(
        &["report", "-q", &few, "--out", out.to_str().unwrap()],
        LIMIT,
    );
    assert!(st.success(), "{so}{se}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("p99.9: not meaningful from 2,000 samples (2 expected beyond it)"),
        "{summary}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("95% CI") && html.contains("samples beyond"),
        "no interval table"
    );
}
