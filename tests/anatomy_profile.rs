//! The request anatomy in `sockscope profile`: run.json's `anatomy`
//! section against the load's own counts and latency, the parts adding up
//! to the server time, the emulated path's RTT outside the server, the
//! summary.txt table, report.html's section, `--no-requests`, and
//! `--requests-only` (the anatomy alone, no syscall tracer).

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(120);
const PERCENTILES: [&str; 4] = ["p50", "p90", "p99", "p999"];
/// The kernel's log-linear histogram gives a percentile as the middle of
/// its bucket, up to 6.25 % above the value (its interval's lower edge is
/// at most the value): a server time is compared with the client's
/// latency through that lower edge.
const BUCKET_HALF_WIDTH: f64 = 0.0625;

/// Runs a profile into a scratch directory and returns it (exit 0
/// asserted).
fn profile(name: &str, extra: &[&str]) -> PathBuf {
    let out = scratch(name).join("art");
    let mut args = vec!["profile", "--out", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    let (st, so, se) = run_bounded(&args, LIMIT);
    assert_eq!(st.code(), Some(0), "stdout: {so}\nstderr: {se}");
    out
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn i(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn profile_records_the_anatomy_of_each_turn_beside_the_load() {
    let name = "profile_records_the_anatomy_of_each_turn_beside_the_load";
    if !require_bpf(name) {
        return;
    }
    let out = profile(
        "anatomy-threaded",
        &[
            "--target",
            "serve echo --transport threaded --work-us 300",
            "--load",
            "tcp-rr -c 1 -d 2",
        ],
    );
    let rep = read_json(&out.join("run.json"));
    let a = &rep["anatomy"];
    let load = &rep["load"];
    // Every request the load sent and saw answered is one turn: those in
    // its window and those answered in the drain after it.
    let tx = u(&load["transactions"]);
    let after = u(&load["errors"]["answered_after_end"]);
    assert!(tx > 100, "{tx} transactions");
    assert_eq!(u(&a["turns"]), tx + after, "turns vs {tx} + {after}");
    assert_eq!(u(&a["multiplexed"]["connections"]), 0);
    // The server's own work is the 300 us it was told to do.
    let service = u(&a["parts"]["service"]["p50_ns"]);
    assert!(
        (300_000..380_000).contains(&service),
        "service p50 {service} ns with --work-us 300"
    );
    // The four parts add up to the server time exactly.
    let s = &a["sums_ns"];
    assert_eq!(
        u(&s["queue_wait"]) + u(&s["cpu_wait"]) + u(&s["service"]) + u(&s["send"]),
        u(&s["server_time"]),
        "{s}"
    );
    // Each request's server time is inside its client latency, so at
    // every percentile too (within the kernel histogram's bucket).
    let c = &a["client"];
    assert_eq!(c["source"], "load");
    assert_eq!(u(&c["count"]), tx);
    for p in PERCENTILES {
        let server = u(&a["parts"]["server_time"][format!("{p}_ns")]) as f64;
        let client = u(&c[format!("{p}_ns")]) as f64;
        assert!(
            server / (1.0 + BUCKET_HALF_WIDTH) <= client,
            "{p}: server {server} ns > client {client} ns"
        );
        assert_eq!(
            i(&c["difference_ns"][PERCENTILES.iter().position(|x| *x == p).unwrap()]),
            client as i64 - server as i64
        );
    }
    assert_eq!(u(&load["latency"]["p50_ns"]), u(&c["p50_ns"]));
    assert_eq!(a["at_percentile"].as_array().unwrap().len(), 4);
    // The insight names the part that dominated p50's turns, whichever it
    // was (service on a quiet machine; CPU wait when other work kept the
    // server's thread off the CPU).
    let p50 = a["at_percentile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["percentile"] == "p50")
        .unwrap_or_else(|| panic!("no p50 composition: {a}"));
    let dominant = [
        ("queue wait", "queue_wait_ns"),
        ("CPU wait", "cpu_wait_ns"),
        ("service", "service_ns"),
        ("send", "send_ns"),
    ]
    .into_iter()
    .max_by_key(|(_, k)| u(&p50[*k]))
    .unwrap()
    .0;
    let said = format!("at the server was {dominant}:");
    assert!(
        rep["insights"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(serde_json::Value::as_str)
            .any(|l| l.starts_with("At p50,") && l.contains(&said)),
        "p50's turns were mostly {dominant}: {}",
        rep["insights"]
    );

    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("Anatomy of a request"), "{summary}");
    for row in [
        "queue wait",
        "CPU wait",
        "service",
        "send",
        "server time",
        "client",
        "outside",
    ] {
        assert!(
            summary.lines().any(|l| l.trim_start().starts_with(row)),
            "no {row} row:\n{summary}"
        );
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("id=\"anatomy\""), "no anatomy section");
    assert!(html.contains("id=\"chart-anatomy\""), "no stacked bars");
    assert!(html.contains("p99.9 (client "), "no client beside the bars");
}

#[test]
fn no_requests_leaves_the_anatomy_out() {
    let name = "no_requests_leaves_the_anatomy_out";
    if !require_bpf(name) {
        return;
    }
    let out = profile(
        "anatomy-off",
        &[
            "--target",
            "serve echo --transport epoll",
            "--load",
            "tcp-rr -c 1 -d 1",
            "--no-requests",
        ],
    );
    let rep = read_json(&out.join("run.json"));
    assert!(rep.get("anatomy").is_none(), "{}", rep["anatomy"]);
    assert!(rep.get("anatomy_failure").is_none());
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(!summary.contains("Anatomy of a request"), "{summary}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("id=\"anatomy\""));
}

#[test]
fn requests_only_records_the_anatomy_without_the_tracer() {
    let name = "requests_only_records_the_anatomy_without_the_tracer";
    if !require_bpf(name) {
        return;
    }
    let out = scratch("anatomy-alone").join("art");
    let mut child = Command::new(sockscope())
        .args(["profile", "--out", out.to_str().unwrap(), "--quiet"])
        .args(["--target", "serve echo --transport epoll"])
        .args(["--load", "tcp-rr -c 1 -d 3", "--requests-only"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While its window is open (the whole 3 s load) it holds the
    // anatomy's programs, and no syscall program: no tracer is attached.
    let deadline = Instant::now() + LIMIT;
    let mut names = Vec::new();
    while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        names = common::progs::program_names_of(child.id());
        if names.iter().any(|n| n == "ss_data_ready") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = wait_bounded(&mut child, LIMIT);
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
    assert_eq!(st.code(), Some(0), "{err}");
    assert!(
        names.iter().any(|n| n == "ss_data_ready"),
        "the anatomy's programs were never seen: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("ss_sys_")),
        "a syscall program: {names:?}"
    );
    let rep = read_json(&out.join("run.json"));
    assert_eq!(rep["schema_version"], 4);
    assert!(rep.get("trace").is_none(), "a trace without the tracer");
    let a = &rep["anatomy"];
    let load = &rep["load"];
    // Every request the load saw answered is one turn, as beside the
    // tracer: those in its window and those answered in the drain.
    let tx = u(&load["transactions"]);
    let after = u(&load["errors"]["answered_after_end"]);
    assert!(tx > 100, "{tx} transactions");
    assert_eq!(u(&a["turns"]), tx + after, "turns vs {tx} + {after}");
    // The target's CPU, read from /proc over the anatomy's window, gives
    // the per-transaction figure and the anatomy's cost its share.
    let d = &rep["derived"];
    assert_eq!(d["target_cpu_source"], "/proc stat");
    let cpu_us = d["target_cpu_us_per_transaction"]
        .as_f64()
        .expect("CPU per tx");
    assert!(cpu_us > 0.0, "{cpu_us}");
    assert!(
        a["cost"]["of_target_cpu"].as_f64().is_some(),
        "{}",
        a["cost"]
    );
    // What only the tracer measures is null, not zero.
    assert!(d["syscalls_per_transaction"].is_null(), "{d}");
    assert!(d.get("tracer_bpf_time_ns").is_none(), "{d}");
    assert_eq!(d["top_syscalls"].as_array().map(Vec::len), Some(0));

    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("Anatomy of a request"), "{summary}");
    assert!(
        summary.contains("Target syscalls: not recorded (--requests-only"),
        "{summary}"
    );
    assert!(
        !summary.contains("Target syscalls over the trace window"),
        "{summary}"
    );
    assert!(!summary.contains("NaN"), "{summary}");

    // `report` re-renders it from the JSON alone.
    let again = scratch(name).join("again");
    let run_json = out.join("run.json");
    let (st, so, se) = run_bounded(
        &[
            "report",
            run_json.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(0), "stdout: {so}\nstderr: {se}");
    let html = std::fs::read_to_string(again.join("report.html")).unwrap();
    assert!(html.contains("id=\"anatomy\""), "no anatomy section");
    assert!(html.contains("Not recorded (--requests-only)"));
    // `compare` against a traced profile: the syscall rows say so.
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/profile.json");
    let (st, so, se) = run_bounded(
        &[
            "compare",
            full.to_str().unwrap(),
            run_json.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(0), "stdout: {so}\nstderr: {se}");
    let row = so
        .lines()
        .find(|l| l.starts_with("syscalls per transaction"))
        .unwrap_or_else(|| panic!("{so}"));
    assert!(row.contains("not recorded"), "{row}");
}

#[test]
fn requests_only_refuses_the_tracer_options() {
    for (extra, says) in [
        ("--no-requests", "cannot be used with"),
        ("--max-endpoints=0", "not in 1..=4096"),
        (
            "--count-only",
            "--count-only is an option of the syscall tracer",
        ),
    ] {
        let (st, _, se) = run_bounded(
            &[
                "profile",
                "--target",
                "serve echo",
                "--load",
                "tcp-rr -c 1 -d 1",
                "--requests-only",
                extra,
            ],
            LIMIT,
        );
        assert_eq!(st.code(), Some(2), "{extra}: {se}");
        assert!(se.contains(says), "{extra}: {se}");
    }
}

#[test]
fn over_an_emulated_path_the_rtt_is_outside_the_server() {
    let name = "over_an_emulated_path_the_rtt_is_outside_the_server";
    if !require_bpf(name) {
        return;
    }
    let out = profile(
        "anatomy-path",
        &[
            "--target",
            "serve echo --transport epoll",
            "--load",
            "tcp-rr -c 1 -d 2",
            "--path",
            "rtt=20ms",
        ],
    );
    let rep = read_json(&out.join("run.json"));
    let a = &rep["anatomy"];
    assert!(u(&a["turns"]) > 10, "{a}");
    // The path's 20 ms are outside the server; what else is outside
    // (loopback, the client's own time, more of it when other work keeps
    // the client off the CPU) is small beside them.
    let outside_ms = i(&a["client"]["difference_ns"][0]) as f64 / 1e6;
    assert!(
        (20.0..25.0).contains(&outside_ms),
        "client p50 - server p50 = {outside_ms} ms over rtt=20ms"
    );
}
