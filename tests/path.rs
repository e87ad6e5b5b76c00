//! `--path`: emulated network paths between two anonymous namespaces (the
//! delayline backend here: this kernel has no sch_netem). RTT, loss and
//! rate measured through a real profile; bad specs; the netem backend's
//! message where netem is missing; and nothing left behind after SIGKILL
//! or Ctrl-C.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::procs::{Seen, still_running_after, tree, wait_for};
use common::*;

const LIMIT: Duration = Duration::from_secs(120);
const ECHO: &str = "serve echo --transport epoll";
/// What the path and the rest (server, both kernels, the relay's wake-ups
/// on a shared 2-CPU VM) may add to a 20 ms RTT at p50.
const RTT_MARGIN_MS: f64 = 5.0;

fn profile(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let (st, out, err) = run_bounded(&all, LIMIT);
    (st.code(), out, err)
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn ok_profile(name: &str, path: &str, target: &str, load: &str) -> serde_json::Value {
    let out = scratch(name).join("art");
    let (c, so, se) = profile(&[
        "--target",
        target,
        "--load",
        load,
        "--path",
        path,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(c, Some(0), "stdout: {so}\nstderr: {se}");
    read_json(&out.join("run.json"))
}

#[test]
fn path_rtt_is_the_emulated_rtt_at_p50_and_the_artifact_records_it() {
    if !require_bpf("path_rtt_is_the_emulated_rtt_at_p50_and_the_artifact_records_it") {
        return;
    }
    let rep = ok_profile("path-rtt", "rtt=20ms", ECHO, "tcp-rr -c 1 -d 2");
    let p50_ms = f(&rep["load"]["latency"]["p50_ns"]) / 1e6;
    assert!(
        (20.0..20.0 + RTT_MARGIN_MS).contains(&p50_ms),
        "p50 {p50_ms} ms over rtt=20ms"
    );
    let p = &rep["path"];
    assert_eq!(p["spec"], "rtt=20ms limit=1000");
    assert_eq!(p["backend"], "delayline");
    assert_eq!(f(&p["rtt_ms"]), 20.0);
    let target = p["target_addr"].as_str().unwrap();
    assert!(target.starts_with("10.233."), "{target}");
    assert!(
        rep["target"]["address"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{target}:")),
        "the load is aimed at the target's path address: {}",
        rep["target"]["address"]
    );
    // Every request and response crossed the relay.
    let tx = rep["load"]["transactions"].as_u64().unwrap();
    assert!(p["relay"]["to_target"]["delivered"].as_u64().unwrap() >= tx);
    assert!(p["relay"]["to_generator"]["delivered"].as_u64().unwrap() >= tx);
    // The target lived in a namespace of its own.
    assert_eq!(rep["evidence"]["netns"]["shared_with_generator"], false);
    let caveats = rep["caveats"].to_string();
    assert!(caveats.contains("Emulated path (rtt=20ms"), "{caveats}");
    assert!(!caveats.contains("Loopback:"), "{caveats}");
    let insights = rep["insights"].to_string();
    assert!(
        insights.contains("ms of which 20.0 ms is the emulated RTT"),
        "{insights}"
    );
}

#[test]
fn path_loss_is_dropped_by_the_relay_and_tcp_retransmits() {
    if !require_bpf("path_loss_is_dropped_by_the_relay_and_tcp_retransmits") {
        return;
    }
    let rep = ok_profile(
        "path-loss",
        "rtt=2ms loss=10%",
        ECHO,
        "tcp-rr -c 8 -d 3 --timeout 10",
    );
    let r = &rep["path"]["relay"];
    let packets = f(&r["to_target"]["packets"]) + f(&r["to_generator"]["packets"]);
    let lost = f(&r["to_target"]["dropped_loss"]) + f(&r["to_generator"]["dropped_loss"]);
    assert!(packets > 500.0, "too few packets to judge: {r}");
    let share = lost / packets;
    assert!(
        (0.06..0.14).contains(&share),
        "loss share {share} for loss=10%: {r}"
    );
    let retrans = f(&rep["evidence"]["counters"]["deltas"]["Tcp.RetransSegs"]);
    assert!(retrans > 0.0, "no retransmits with 10% loss");
}

#[test]
fn path_rate_limits_throughput() {
    if !require_bpf("path_rate_limits_throughput") {
        return;
    }
    // 64 KiB each way per transaction over a 10 mbit/s path.
    let rep = ok_profile(
        "path-rate",
        "rtt=1ms rate=10mbit",
        "serve echo --transport epoll --req-size 65536 --resp-size 65536",
        "tcp-rr -c 4 -d 3 --req 65536 --timeout 10",
    );
    let secs = f(&rep["load"]["duration_s"]);
    let sent = f(&rep["load"]["bytes"]["sent"]);
    let mbit = sent * 8.0 / secs / 1e6;
    // The payload alone must stay under the link rate (headers ride on it
    // too), and the path must not collapse far below it.
    assert!(mbit <= 10.0, "{mbit} Mbit/s of payload through rate=10mbit");
    assert!(
        mbit >= 5.0,
        "{mbit} Mbit/s: the path collapsed under rate=10mbit"
    );
}

#[test]
fn bad_path_specs_exit_2_with_the_syntax() {
    for (spec, why) in [
        ("rtt=20ms rate=0mbit", "must be positive"),
        ("rtt=20ms loss=200%", "[0%, 100%]"),
        ("rtt=20ms delay=1", "unknown key"),
        ("loss=1%", "rtt is required"),
        ("rtt=20ms jitter=15ms", "exceeds rtt/2"),
    ] {
        let (c, so, se) = profile(&["--target", ECHO, "--load", "tcp-rr -n 1", "--path", spec]);
        assert_eq!(c, Some(2), "{spec}: {so}{se}");
        assert!(se.contains(why), "{spec}: {se}");
        assert!(se.contains("accepted: --path"), "{spec}: {se}");
    }
    let (c, _, se) = profile(&["--pid", "1", "--load", "tcp-rr -n 1", "--path", "rtt=1ms"]);
    assert_eq!(c, Some(2), "{se}");
    let (c, _, se) = profile(&[
        "--target",
        ECHO,
        "--load",
        "tcp-rr 127.0.0.1:1 -n 1",
        "--path",
        "rtt=1ms",
    ]);
    assert_eq!(c, Some(2), "{se}");
    assert!(se.contains("leave the address"), "{se}");
    // Only an experiment that drives its load through profile takes --path.
    let (st, _, se) = run_bounded(&["bench", "overhead", "--path", "rtt=1ms"], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("only bench transport takes --path"), "{se}");
    let (st, _, se) = run_bounded(
        &["bench", "transport", "--path", "rtt=1ms rate=0bit"],
        LIMIT,
    );
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("accepted: --path"), "{se}");
}

#[test]
fn a_target_on_loopback_only_is_refused_on_a_path() {
    if !require_bpf("a_target_on_loopback_only_is_refused_on_a_path") {
        return;
    }
    let (c, so, se) = profile(&[
        "--target",
        "serve echo --transport epoll --listen 127.0.0.1:0",
        "--load",
        "tcp-rr -n 10",
        "--path",
        "rtt=1ms",
        "--out",
        scratch("path-lo").join("art").to_str().unwrap(),
    ]);
    assert_eq!(c, Some(2), "{so}{se}");
    assert!(se.contains("listens on tcp 127.0.0.1:"), "{se}");
    assert!(se.contains("or a wildcard"), "{se}");
}

/// True when this kernel can add a netem qdisc (checked in a throwaway
/// namespace).
fn netem_available() -> bool {
    Command::new("unshare")
        .args([
            "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn path_backend_netem_without_sch_netem_exits_1_naming_it() {
    if !require_bpf("path_backend_netem_without_sch_netem_exits_1_naming_it") {
        return;
    }
    if netem_available() {
        eprintln!(
            "SKIP path_backend_netem_without_sch_netem_exits_1_naming_it: this kernel has netem"
        );
        return;
    }
    let (c, so, se) = profile(&[
        "--target",
        ECHO,
        "--load",
        "tcp-rr -n 10",
        "--path",
        "rtt=1ms",
        "--path-backend",
        "netem",
        "--out",
        scratch("path-netem").join("art").to_str().unwrap(),
    ]);
    assert_eq!(c, Some(1), "{so}{se}");
    assert!(se.contains("CONFIG_NET_SCH_NETEM"), "{se}");
    assert!(se.contains("sch_netem"), "{se}");
}

/// `net:[INODE]` of a process's network namespace.
fn netns_of(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Whether any process still has `ns` as its namespace or holds it open.
fn netns_held(ns: &str) -> bool {
    common::procs::pids().any(|pid| {
        netns_of(pid).is_some_and(|n| n == ns)
            || std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| {
                    d.flatten().any(|e| {
                        std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == ns)
                    })
                })
                .unwrap_or(false)
    })
}

/// `ip netns list` without the tests' own namespaces (`sstest-*`,
/// tests/common/netns.rs), which tests of another binary running beside
/// this one add and remove.
fn named_netns() -> Vec<String> {
    ip(&["netns", "list"])
        .lines()
        .filter(|l| !l.starts_with("sstest-"))
        .map(str::to_string)
        .collect()
}

fn ip(args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (package iproute2)");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Starts a long `profile --path` run, waits for its target, then stops it
/// with `signal` and checks that nothing of it is left: no process, no
/// namespace (neither held by a process nor open anywhere), no interface in
/// the root namespace, nothing in `ip netns list`.
fn stop_and_check(name: &str, signal: libc::c_int, expect_code: Option<i32>) {
    // No other test of this binary adds a named namespace meanwhile.
    let _serial = common::serial();
    let out = scratch(name).join("art");
    let netns_before = named_netns();
    let mut run = Command::new(sockscope())
        .args([
            "profile",
            "--target",
            ECHO,
            "--load",
            "tcp-rr -c 4 -d 60",
            "--path",
            "rtt=5ms",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = run.id() as i32;
    // The target is up in its namespace and the load is running.
    let target = wait_for(Duration::from_secs(30), || {
        tree(pid)
            .into_iter()
            .find(|s| s.cmdline.contains("serve echo"))
            .filter(|s| netns_of(s.pid) != netns_of(pid))
    })
    .unwrap_or_else(|| {
        let _ = run.kill();
        panic!("no target in a namespace of its own under pid {pid}")
    });
    std::thread::sleep(Duration::from_millis(1500));
    let target_ns = netns_of(target.pid).unwrap();
    let procs: Vec<Seen> = tree(pid);
    let links = ip(&["-o", "link"]);
    assert!(
        !links.contains(&format!("ss{pid}")),
        "a path interface in the root namespace: {links}"
    );
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(pid, signal) };
    let st = wait_bounded(&mut run, Duration::from_secs(30));
    assert_eq!(st.code(), expect_code, "{st:?}");
    let left = still_running_after(&procs, Duration::from_secs(10));
    assert!(left.is_empty(), "still running after {name}: {left:#?}");
    let gone = wait_for(Duration::from_secs(10), || {
        (!netns_held(&target_ns)).then_some(())
    });
    assert!(
        gone.is_some(),
        "the target's namespace {target_ns} is still held"
    );
    assert!(!ip(&["-o", "link"]).contains(&format!("ss{pid}")));
    assert_eq!(named_netns(), netns_before, "ip netns list changed");
    assert!(!out.exists(), "an artifact after {name}");
}

#[test]
fn a_sigkilled_path_run_leaves_nothing() {
    if !require_bpf("a_sigkilled_path_run_leaves_nothing") {
        return;
    }
    stop_and_check("path-kill", libc::SIGKILL, None);
}

#[test]
fn a_ctrl_c_path_run_leaves_nothing() {
    if !require_bpf("a_ctrl_c_path_run_leaves_nothing") {
        return;
    }
    stop_and_check("path-int", libc::SIGINT, Some(130));
}

/// True when this test may make namespaces (root); outside CI a missing
/// privilege skips it with a printed reason, under CI=true it fails.
fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but not root: --path needs CAP_SYS_ADMIN");
    }
    eprintln!("SKIP {test}: not root (--path makes network namespaces)");
    false
}

#[test]
fn load_serve_over_a_path_records_the_path() {
    if !require_root("load_serve_over_a_path_records_the_path") {
        return;
    }
    let json = scratch("path-load-serve").join("load.json");
    let (st, so, se) = run_bounded(
        &[
            "load",
            "tcp-rr",
            "ADDR",
            "-c",
            "2",
            "-d",
            "1",
            "--path",
            "rtt=10ms jitter=1ms",
            "--serve",
            "echo --transport epoll",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(0), "{so}{se}");
    let rep = read_json(&json);
    assert_eq!(rep["schema"], "sockscope.load");
    assert_eq!(rep["path"]["spec"], "rtt=10ms jitter=1ms limit=1000");
    assert_eq!(f(&rep["path"]["jitter_ms"]), 1.0);
    assert!(rep["target"].as_str().unwrap().starts_with("10.233."));
    let p50_ms = f(&rep["latency"]["p50_ns"]) / 1e6;
    // Two jittered directions: the RTT lies in [8, 12] ms plus overhead.
    assert!(
        (8.0..12.0 + RTT_MARGIN_MS).contains(&p50_ms),
        "p50 {p50_ms} ms"
    );
    assert!(rep["transactions"].as_u64().unwrap() > 50);
    assert!(rep["notes"].to_string().contains("Emulated path"));
}

#[test]
fn load_serve_needs_the_addr_placeholder_and_both_options() {
    let (st, _, se) = run_bounded(
        &[
            "load",
            "tcp-rr",
            "127.0.0.1:1",
            "-n",
            "1",
            "--path",
            "rtt=1ms",
            "--serve",
            "echo --transport epoll",
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("give the word ADDR"), "{se}");
    let (st, _, se) = run_bounded(
        &["load", "tcp-rr", "ADDR", "-n", "1", "--path", "rtt=1ms"],
        LIMIT,
    );
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("--serve"), "{se}");
    let (st, _, se) = run_bounded(
        &[
            "load",
            "tcp-rr",
            "ADDR",
            "-n",
            "1",
            "--path",
            "rtt=1ms loss=101%",
            "--serve",
            "echo --transport epoll",
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("accepted: --path"), "{se}");
}
