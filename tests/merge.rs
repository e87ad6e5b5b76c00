//! `sockscope merge` and the options that serve it (`load --start-at`,
//! `load --full-log`): three generators, each in a network namespace of
//! its own (a "host"), load one `serve echo` in a fourth through its own
//! veth pair, started together with `--start-at`; their artifacts are
//! merged and checked against the raw latencies the generators logged.
//! Addresses are 10.231.0.0/16 (tests/common/netns.rs), used only between
//! the namespaces this test made.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::netns::{Netns, veth};
use common::{Reaped, read_json, run, run_bounded, scratch, sockscope};
use serde_json::Value;
use sockscope::stats::LatencyHist;

/// The service address every generator targets: on the target
/// namespace's loopback, routed through each generator's own veth (a
/// service address reachable from several hosts, as in a cluster).
const SERVICE_IP: &str = "10.231.251.1";

/// `sockscope serve echo` inside `ns` on 0.0.0.0: the process and its
/// port.
fn serve_in(ns: &Netns) -> (Reaped, u16) {
    let mut child = ns
        .command(sockscope())
        .args([
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--listen",
            "0.0.0.0:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sockscope serve in the target namespace");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let guard = Reaped(child);
    let port = line
        .trim()
        .strip_prefix("listening on 0.0.0.0:")
        .unwrap_or_else(|| panic!("no ready line: {line:?}"))
        .parse()
        .unwrap();
    (guard, port)
}

/// (send_unix_ns, latency_ns) of a --full-log file; checks its header.
fn full_log(path: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("send_unix_ns,latency_ns"), "{path:?}");
    lines
        .map(|l| {
            let (a, b) = l.split_once(',').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

fn hist(v: &Value) -> LatencyHist {
    LatencyHist::from_v2_base64(v["hdr_histogram"].as_str().unwrap()).unwrap()
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn three_generators_in_three_namespaces_merge_exactly() {
    let test = "three_generators_in_three_namespaces_merge_exactly";
    let Some(target) = Netns::new(test) else {
        return;
    };
    let gens: Vec<Netns> = (0..3).map(|_| Netns::new(test).unwrap()).collect();
    target.ip(&["addr", "add", &format!("{SERVICE_IP}/32"), "dev", "lo"]);
    let mut direct = Vec::new();
    for g in &gens {
        let v = veth(g, &target);
        g.ip(&["route", "add", &format!("{SERVICE_IP}/32"), "via", &v.b_ip]);
        direct.push(v.b_ip.clone());
    }
    let (_server, port) = serve_in(&target);
    let addr = format!("{SERVICE_IP}:{port}");
    let dir = scratch("merge3");

    // All three start at the same instant, 3 s from now (time enough to
    // launch them), and run 2 s each.
    let start = now_ns() + 3_000_000_000;
    let start_arg = format!("@{}.{:09}", start / 1_000_000_000, start % 1_000_000_000);
    let jobs: Vec<(Child, String)> = gens
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let child = g
                .command(sockscope())
                .args(["-q", "load", "tcp-rr", &addr, "-c", "2", "-d", "2"])
                .args(["--start-at", &start_arg, "--full-log"])
                .arg(dir.join(format!("log{i}.csv")))
                .arg("--json")
                .arg(dir.join(format!("gen{i}.json")))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, format!("generator {i}"))
        })
        .collect();
    for (mut child, name) in jobs {
        let st = common::wait_bounded(&mut child, Duration::from_secs(30));
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        assert!(st.success(), "{name}: {st:?}: {err}");
    }
    let gen_json: Vec<Value> = (0..3)
        .map(|i| read_json(&dir.join(format!("gen{i}.json"))))
        .collect();
    for j in &gen_json {
        assert_eq!(j["target"], addr.as_str());
        assert_eq!(j["start_at"]["requested"], start_arg.as_str());
        let late = j["start_at"]["late_ns"].as_i64().unwrap();
        // Started at the instant asked, not before, and not a timer slack
        // late (2 cores shared by the three generators and the server).
        assert!((0..50_000_000).contains(&late), "late by {late} ns");
        assert!(
            j["transactions"].as_u64().unwrap() > 100,
            "{}",
            j["transactions"]
        );
    }

    let merged_path = dir.join("merged.json");
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend((0..3).map(|i| dir.join(format!("gen{i}.json")).display().to_string()));
    args.extend(["--out".into(), merged_path.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (st, out, err) = run_bounded(&argv, Duration::from_secs(30));
    assert!(st.success(), "merge: {st:?}\n{out}\n{err}");
    assert!(out.contains("merged        3 generators"), "{out}");
    let m = read_json(&merged_path);
    assert_eq!(m["schema"], "sockscope.load");

    // Counts add up, and the logs hold every measured transaction.
    let sum = |f: &dyn Fn(&Value) -> u64| gen_json.iter().map(f).sum::<u64>();
    let total = sum(&|j| j["transactions"].as_u64().unwrap());
    assert_eq!(m["transactions"].as_u64().unwrap(), total);
    assert_eq!(
        m["bytes"]["sent"].as_u64().unwrap(),
        sum(&|j| j["bytes"]["sent"].as_u64().unwrap())
    );
    assert_eq!(
        m["connections"]["established"].as_u64().unwrap(),
        sum(&|j| j["connections"]["established"].as_u64().unwrap())
    );
    let logs: Vec<Vec<(u64, u64)>> = (0..3)
        .map(|i| full_log(&dir.join(format!("log{i}.csv"))))
        .collect();
    for (l, j) in logs.iter().zip(&gen_json) {
        assert_eq!(l.len() as u64, j["transactions"].as_u64().unwrap());
        assert_eq!(j["full_log"]["partial"], false);
    }

    // The merged histogram is the histogram of the union of the raw
    // latencies, count for count.
    let mut union = LatencyHist::new();
    let mut raw: Vec<u64> = Vec::new();
    for l in &logs {
        for (_, lat) in l {
            union.record(*lat);
            raw.push(*lat);
        }
    }
    let merged_hist = hist(&m["latency"]);
    assert_eq!(merged_hist.len(), total);
    assert_eq!(
        merged_hist.to_v2_base64().unwrap(),
        union.to_v2_base64().unwrap(),
        "merged histogram differs from the union of the logs"
    );
    for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        assert_eq!(merged_hist.quantile(q), union.quantile(q), "q={q}");
    }
    // The merged p99 against the exact p99 of the union (the sample of
    // rank ceil(0.99 n)): equal within the histogram's precision (3
    // significant digits: 0.1 %).
    raw.sort_unstable();
    let exact = raw[((0.99 * raw.len() as f64).ceil() as usize).max(1) - 1];
    let p99 = m["latency"]["p99_ns"].as_u64().unwrap();
    let rel = (p99 as f64 - exact as f64).abs() / exact as f64;
    assert!(rel <= 0.001, "merged p99 {p99} ns, union's {exact} ns");

    // Per-second sums: each merged second is the sum of the generators'
    // seconds placed by their offsets, and matches the logs bucketed by
    // completion time.
    let rec = &m["merged"];
    assert_eq!(rec["sources"].as_array().unwrap().len(), 3);
    let mis = rec["alignment"]["max_misalignment_ms"].as_f64().unwrap();
    assert!(mis < 50.0, "seconds {mis} ms apart despite --start-at");
    let merged_iv = m["intervals"].as_array().unwrap();
    let mut expect = vec![0u64; merged_iv.len()];
    let mut from_logs = vec![0u64; merged_iv.len()];
    let window0 = rec["alignment"]["window_start_unix_ns"].as_u64().unwrap();
    for (i, j) in gen_json.iter().enumerate() {
        let off = rec["sources"][i]["offset_s"].as_u64().unwrap();
        assert_eq!(off, 0, "a common --start-at puts every run at second 0");
        for iv in j["intervals"].as_array().unwrap() {
            expect[(iv["t_s"].as_u64().unwrap() + off) as usize] +=
                iv["transactions"].as_u64().unwrap();
        }
        let start_i = j["started_at_unix_ns"].as_u64().unwrap();
        assert!(start_i >= window0);
        for (sent, lat) in &logs[i] {
            let k = (sent + lat - start_i) / 1_000_000_000 + off;
            from_logs[k as usize] += 1;
        }
    }
    let got: Vec<u64> = merged_iv
        .iter()
        .map(|iv| iv["transactions"].as_u64().unwrap())
        .collect();
    assert_eq!(got, expect, "merged intervals are not the sums by second");
    assert_eq!(got, from_logs, "merged intervals disagree with the logs");
    assert!(rec["warnings"].as_array().unwrap().is_empty(), "{rec}");

    // `report` renders the merged artifact.
    let rdir = dir.join("rendered");
    let o = run(&[
        "report",
        merged_path.to_str().unwrap(),
        "--out",
        rdir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = std::fs::read_to_string(rdir.join("summary.txt")).unwrap();
    assert!(summary.contains("merged        3 generators"), "{summary}");
    let page = std::fs::read_to_string(rdir.join("report.html")).unwrap();
    assert!(page.contains("Merged from 3 generators"));

    // Different options: merged, with a warning.
    let other = dir.join("other.json");
    let o = gens[0]
        .command(sockscope())
        .args([
            "-q",
            "load",
            "tcp-rr",
            &addr,
            "-n",
            "300",
            "--pipeline",
            "2",
        ])
        .arg("--json")
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gen0 = dir.join("gen0.json");
    let warned = dir.join("warned.json");
    let o = run(&[
        "merge",
        gen0.to_str().unwrap(),
        other.to_str().unwrap(),
        "-o",
        warned.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let w = read_json(&warned);
    let warnings = w["merged"]["warnings"].to_string();
    assert!(warnings.contains("pipeline"), "{warnings}");
    assert!(w["notes"].to_string().contains("pipeline"));

    // A different target (the server's own veth address instead of the
    // service address): exit 2 unless --force.
    let elsewhere = dir.join("elsewhere.json");
    let o = gens[1]
        .command(sockscope())
        .args([
            "-q",
            "load",
            "tcp-rr",
            &format!("{}:{port}", direct[1]),
            "-n",
            "300",
        ])
        .arg("--json")
        .arg(&elsewhere)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let refused = dir.join("refused.json");
    let o = run(&[
        "merge",
        gen0.to_str().unwrap(),
        elsewhere.to_str().unwrap(),
        "-o",
        refused.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert!(!refused.exists());
    let o = run(&[
        "merge",
        gen0.to_str().unwrap(),
        elsewhere.to_str().unwrap(),
        "-o",
        refused.to_str().unwrap(),
        "--force",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = read_json(&refused);
    assert_eq!(f["merged"]["forced"], true);
    assert_eq!(
        f["transactions"].as_u64().unwrap(),
        gen_json[0]["transactions"].as_u64().unwrap() + 300
    );
}

/// A load on loopback for the refusal cases (no namespace needed).
fn loopback_artifact(dir: &Path, name: &str) -> std::path::PathBuf {
    let srv = common::server::Server::start(&["serve", "echo", "--transport", "epoll"]);
    let path = dir.join(name);
    let o = run(&[
        "-q",
        "load",
        "tcp-rr",
        &srv.addr.to_string(),
        "-n",
        "200",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path
}

#[test]
fn merge_refuses_what_it_cannot_merge() {
    let dir = scratch("merge-refuse");
    let a = loopback_artifact(&dir, "a.json");
    let b = loopback_artifact(&dir, "b.json");
    let out = dir.join("m.json");
    let (a_s, b_s, out_s) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let refused = |args: &[&str], why: &str| {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!out.exists());
    };
    refused(&["merge", a_s, "-o", out_s], "at least two");
    refused(&["merge", a_s, a_s, "-o", out_s], "given twice");
    let copy = dir.join("copy.json");
    std::fs::copy(&a, &copy).unwrap();
    refused(
        &["merge", a_s, copy.to_str().unwrap(), "-o", out_s],
        "same run",
    );
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "not json").unwrap();
    refused(
        &["merge", a_s, garbage.to_str().unwrap(), "-o", out_s],
        "not JSON",
    );
    let trace = dir.join("trace.json");
    std::fs::write(&trace, r#"{"schema":"sockscope.trace","schema_version":2}"#).unwrap();
    refused(
        &["merge", a_s, trace.to_str().unwrap(), "-o", out_s],
        "not a load artifact",
    );
    refused(
        &[
            "merge",
            a_s,
            dir.join("missing.json").to_str().unwrap(),
            "-o",
            out_s,
        ],
        "missing.json",
    );
    refused(&["merge", a_s, b_s, "-o", a_s], "is one of the inputs");
    // Two runs against two loopback servers: different targets.
    refused(&["merge", a_s, b_s, "-o", out_s], "--force");
}

#[test]
fn start_at_and_full_log_usage_errors() {
    let dir = scratch("merge-usage");
    for (at, why) in [
        ("@1", "already"),
        ("2999-01-01T00:00:00Z", "24 h"),
        ("noon", "RFC 3339"),
    ] {
        let o = run(&["load", "tcp-rr", "127.0.0.1:9", "-n", "1", "--start-at", at]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{at}: {err}");
        assert!(err.contains(why), "{at}: {err}");
    }
    let o = run(&[
        "load",
        "tcp-rr",
        "127.0.0.1:9",
        "-n",
        "1",
        "--full-log",
        dir.join("no/such/dir/log.csv").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--full-log"));
}

#[test]
fn ctrl_c_while_waiting_for_start_at_exits_130_and_writes_nothing() {
    let dir = scratch("merge-sigint");
    let json = dir.join("never.json");
    let at = format!("@{}", now_ns() / 1_000_000_000 + 30);
    let mut child = Command::new(sockscope())
        .args([
            "-q",
            "load",
            "tcp-rr",
            "127.0.0.1:9",
            "-n",
            "1",
            "--start-at",
            &at,
        ])
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = common::wait_bounded(&mut child, Duration::from_secs(10));
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(err.contains("waiting for --start-at"), "{err}");
    assert!(!json.exists());
}
