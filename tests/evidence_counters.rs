//! A profile's kernel counters and run-queue delay, provoked: each profile
//! runs in a fresh network namespace (so the namespace's counters move
//! only for the test's own traffic, and nothing of the host changes), and
//! the evidence in run.json is checked against what was provoked:
//!
//! - a server with listen backlog 1 that accepts slowly, hit by a tcp-crr
//!   burst: TcpExt.ListenOverflows > 0, named in the summary and the
//!   insights;
//! - UDP into a 4 KiB receive buffer: Udp.RcvbufErrors equal to the
//!   load's own loss figure;
//! - a target pinned on one CPU beside two busy loops pinned on it: its
//!   threads' run-queue wait, against the same target unstarved;
//! - `--no-evidence`: no evidence at all.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::Netns;
use common::*;
use sockscope::report::units::fmt_count;

/// Longest a profile here may take (they take seconds).
const LIMIT: Duration = Duration::from_secs(90);

/// Runs `sockscope profile ARGS` inside `ns`, bounded; returns (exit
/// code, stdout, stderr).
fn profile_in(ns: &Netns, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::env::temp_dir().join(format!("evc-{}-{}.out", std::process::id(), ns.name));
    let err = out.with_extension("err");
    let mut child = ns
        .command(sockscope())
        .arg("profile")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("running sockscope profile in a namespace");
    let st = wait_bounded(&mut child, LIMIT);
    let text = |p: &Path| {
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        s
    };
    (st.code(), text(&out), text(&err))
}

/// True when `program` runs; under CI=true its absence fails the test.
fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn insights(rep: &serde_json::Value) -> Vec<String> {
    rep["insights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect()
}

/// A server with backlog 1 that answers one connection every 50 ms: the
/// accept queue (backlog + 1 = 2 connections) overflows under 16
/// concurrent connects.
const SLOW_ACCEPTOR: &str = r#"
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
while True:
    c, _ = s.accept()
    d = c.recv(64)
    if d:
        c.sendall(d)
    c.close()
    time.sleep(0.05)
"#;

#[test]
fn a_backlog_of_one_overflows_under_a_connect_burst() {
    let _serial = serial();
    let test = "a_backlog_of_one_overflows_under_a_connect_burst";
    if !require_bpf(test) || !common::require_program("python3", test) {
        return;
    }
    let Some(ns) = Netns::new(test) else {
        return;
    };
    let dir = scratch("evidence-backlog");
    let out = dir.join("art");
    // Dropped SYNs are sent again after 1 s, 3 s...: a generous timeout
    // lets those connects finish instead of counting as errors; the
    // budget covers a slow machine where some still time out.
    let (c, so, se) = profile_in(
        &ns,
        &[
            "--out",
            out.to_str().unwrap(),
            "--load",
            "tcp-crr -c 16 -d 2 --timeout 10 --max-errors 1000",
            "--",
            "python3",
            "-c",
            SLOW_ACCEPTOR,
        ],
    );
    assert_eq!(c, Some(0), "stdout: {so}\nstderr: {se}");
    let rep = read_json(&out.join("run.json"));
    let ev = &rep["evidence"];
    let d = &ev["counters"]["deltas"];
    let over = d["TcpExt.ListenOverflows"]
        .as_u64()
        .expect("ListenOverflows");
    assert!(over > 0, "no overflow counted: {}", ev["counters"]);
    assert!(d["TcpExt.ListenDrops"].as_u64().unwrap() >= over);
    // Every named counter is in the JSON, moved or not.
    for n in [
        "TcpExt.TCPBacklogDrop",
        "Udp.RcvbufErrors",
        "softnet.dropped",
    ] {
        assert!(d[n].is_u64(), "{n} missing: {d}");
    }
    assert!(!d.as_object().unwrap().contains_key("Tcp.CurrEstab"));
    assert!(ev["counters"]["gauges"]["Tcp.CurrEstab"]["after"].is_u64());
    assert!(
        ev["counters"]["source"]
            .as_str()
            .unwrap()
            .contains("network namespace"),
        "{}",
        ev["counters"]["source"]
    );
    assert_eq!(ev["netns"]["shared_with_generator"], true);
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("TcpExt.ListenOverflows"))
        .unwrap_or_else(|| panic!("no ListenOverflows line in:\n{summary}"));
    assert!(line.contains(&format!("+{}", fmt_count(over))), "{line}");
    assert!(summary.contains("per network namespace"), "{summary}");
    let said = insights(&rep);
    assert!(
        said.iter()
            .any(|s| s.starts_with("The accept queue overflowed")
                && s.contains("(TcpExt.ListenOverflows)")),
        "{said:#?}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("TcpExt.ListenOverflows"), "not in the HTML");
    // The audit rows this evidence supports name the program's backlog
    // (the limit here) and somaxconn, quoting the counter.
    let advice = rep["advice"].as_array().expect("advice");
    let setting = |prefix: &str| {
        advice
            .iter()
            .find(|r| r["setting"].as_str().is_some_and(|s| s.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no {prefix} row in {advice:#?}"))
    };
    let backlog = setting("listen() backlog");
    assert_eq!(backlog["current"], "1", "{backlog}");
    assert_eq!(backlog["ok"], false, "{backlog}");
    assert!(
        backlog["evidence"]
            .as_str()
            .unwrap()
            .contains("TcpExt.ListenOverflows +"),
        "{backlog}"
    );
    setting("net.core.somaxconn");
    assert!(summary.contains("listen() backlog ("), "{summary}");
}

#[test]
fn udp_rcvbuf_errors_equal_the_loads_loss() {
    let _serial = serial();
    let test = "udp_rcvbuf_errors_equal_the_loads_loss";
    if !require_bpf(test) {
        return;
    }
    let Some(ns) = Netns::new(test) else {
        return;
    };
    let dir = scratch("evidence-udp");
    let out = dir.join("art");
    let (c, so, se) = profile_in(
        &ns,
        &[
            "--out",
            out.to_str().unwrap(),
            "--target",
            "serve udp-sink --rcvbuf 4096",
            "--load",
            "udp --burst 20000 --size 1000",
        ],
    );
    assert_eq!(c, Some(0), "stdout: {so}\nstderr: {se}");
    let rep = read_json(&out.join("run.json"));
    let u = &rep["load"]["udp"];
    let lost = u["lost"].as_u64().expect("the load's loss");
    assert!(
        lost > 0,
        "a 4 KiB buffer must overflow under a 20k burst: {u}"
    );
    // The namespace holds only this run's datagrams: the evidence, the
    // load's own kernel figure and the loss agree exactly.
    let rcv = rep["evidence"]["counters"]["deltas"]["Udp.RcvbufErrors"]
        .as_u64()
        .expect("Udp.RcvbufErrors");
    assert_eq!(rcv, lost, "evidence {rcv} vs the load's loss {lost}");
    assert_eq!(u["kernel_rcvbuf_errors_delta"].as_u64(), Some(rcv));
    let said = insights(&rep);
    assert!(
        said.iter()
            .any(|s| s.contains("(Udp.RcvbufErrors): exactly the") && s.contains("the load lost")),
        "{said:#?}"
    );
}

/// A busy loop pinned on CPU 0.
fn busy_loop() -> Reaped {
    Reaped(
        Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("starting a busy loop"),
    )
}

/// Profiles an echo server pinned on CPU 0 that burns 200 us a request;
/// returns its run.json.
fn pinned_echo(ns: &Netns, out: &Path) -> serde_json::Value {
    let (c, so, se) = profile_in(
        ns,
        &[
            "--out",
            out.to_str().unwrap(),
            "--load",
            "tcp-rr -c 4 -d 2",
            "--",
            "taskset",
            "-c",
            "0",
            sockscope(),
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--threads",
            "1",
            "--work-us",
            "200",
        ],
    );
    assert_eq!(c, Some(0), "stdout: {so}\nstderr: {se}");
    read_json(&out.join("run.json"))
}

#[test]
fn a_cpu_starved_target_waits_on_the_run_queue() {
    let _serial = serial();
    let test = "a_cpu_starved_target_waits_on_the_run_queue";
    if !require_bpf(test) || !common::require_program("taskset", test) {
        return;
    }
    let Some(ns) = Netns::new(test) else {
        return;
    };
    let dir = scratch("evidence-starved");
    let calm = pinned_echo(&ns, &dir.join("calm"));
    let starved = {
        let _loops = [busy_loop(), busy_loop()];
        pinned_echo(&ns, &dir.join("starved"))
    };
    let (cs, ss) = (&calm["evidence"]["sched"], &starved["evidence"]["sched"]);
    eprintln!(
        "wait share: unstarved {} ({} s waiting), starved {} ({} s waiting)",
        cs["wait_share"], cs["runqueue_wait_s"], ss["wait_share"], ss["runqueue_wait_s"]
    );
    // Two busy loops and the target on one CPU: the target gets about a
    // third of it whenever it is runnable.
    assert!(f(&ss["runqueue_wait_s"]) > 0.0, "{ss}");
    assert!(f(&ss["wait_share"]) > 0.3, "{ss}");
    assert!(f(&ss["on_cpu_s"]) > 0.0, "{ss}");
    assert!(ss["threads"].as_u64().unwrap() >= 1, "{ss}");
    assert_eq!(ss["worst_thread"]["comm"], "ss-epoll-0", "{ss}");
    // The same target alone waits less (the machine's other work still
    // counts, so only the direction is asserted).
    assert!(
        f(&ss["wait_share"]) > f(&cs["wait_share"]),
        "starved {ss} vs unstarved {cs}"
    );
    let said = insights(&starved);
    assert!(
        said.iter()
            .any(|s| s.starts_with("The target's threads waited")
                && s.contains("of their runnable time for a CPU")),
        "{said:#?}"
    );
    let summary = std::fs::read_to_string(dir.join("starved/summary.txt")).unwrap();
    assert!(summary.contains("run-queue delay:"), "{summary}");
}

#[test]
fn no_evidence_writes_none() {
    let _serial = serial();
    let test = "no_evidence_writes_none";
    if !require_bpf(test) {
        return;
    }
    let Some(ns) = Netns::new(test) else {
        return;
    };
    let dir = scratch("evidence-none");
    let out = dir.join("art");
    let (c, so, se) = profile_in(
        &ns,
        &[
            "--out",
            out.to_str().unwrap(),
            "--no-evidence",
            "--target",
            "serve echo --transport epoll --threads 1",
            "--load",
            "tcp-rr -c 2 -n 2000",
        ],
    );
    assert_eq!(c, Some(0), "stdout: {so}\nstderr: {se}");
    let rep = read_json(&out.join("run.json"));
    assert!(rep.get("evidence").is_none(), "{}", rep["evidence"]);
    assert_eq!(rep["advice"], serde_json::json!([]));
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(!summary.contains("Kernel evidence"), "{summary}");
    assert!(!summary.contains("run-queue delay"), "{summary}");
}
