//! The socket part of a profile's kernel evidence (run.json
//! `evidence.sockets`), provoked for real: a listen backlog of 1 under a
//! connect burst, a port range of ten ports exhausted by tcp-crr, and a
//! veth link that drops some of the target's packets. Each profile runs
//! inside fresh network namespaces, so the host's sysctls and counters are
//! untouched; every run is bounded and killed if it overstays. The tests
//! take common::serial(): their named namespaces would show in the path
//! tests' `ip netns list` (tests/path.rs).

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{Netns, veth};
use common::*;

const LIMIT: Duration = Duration::from_secs(90);

/// Runs `cmd` to completion within [`LIMIT`] (killed past it): exit code,
/// stdout, stderr.
fn bounded(mut cmd: Command) -> (Option<i32>, String, String) {
    let out_path = |n: &str| {
        std::env::temp_dir().join(format!("evs-{}-{n}-{}", std::process::id(), rand_tag()))
    };
    let (o, e) = (out_path("out"), out_path("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .expect("spawning");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after {LIMIT:?}: {}",
                std::fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| {
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        s
    };
    (status.code(), read(&o), read(&e))
}

fn rand_tag() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// `sockscope profile ARGS` inside `ns`.
fn profile_in(ns: &Netns, args: &[&str]) -> (Option<i32>, String, String) {
    let mut c = ns.command(sockscope());
    c.arg("profile").args(args);
    bounded(c)
}

/// A python3 server on HOST:PORT (0: any port) with listen(BACKLOG) that
/// echoes each connection's bytes, one thread per connection, sleeping
/// DELAY seconds before each accept().
fn py_server(host: &str, port: u16, backlog: u32, delay: f64) -> String {
    format!(
        "import socket, threading, time\n\
         s = socket.socket()\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{host}', {port}))\n\
         s.listen({backlog})\n\
         def echo(c):\n\
         \x20   try:\n\
         \x20       while True:\n\
         \x20           d = c.recv(65536)\n\
         \x20           if not d:\n\
         \x20               break\n\
         \x20           c.sendall(d)\n\
         \x20   except OSError:\n\
         \x20       pass\n\
         \x20   c.close()\n\
         while True:\n\
         \x20   time.sleep({delay})\n\
         \x20   c, _ = s.accept()\n\
         \x20   threading.Thread(target=echo, args=(c,), daemon=True).start()\n"
    )
}

fn sockets_of(rep: &serde_json::Value) -> &serde_json::Value {
    let s = &rep["evidence"]["sockets"];
    assert!(s.is_object(), "no socket evidence: {}", rep["evidence"]);
    s
}

#[test]
fn backlog_of_one_is_seen_full_under_a_connect_burst() {
    let _serial = common::serial();
    let test = "backlog_of_one_is_seen_full_under_a_connect_burst";
    if !require_bpf(test) || !common::require_program("python3", test) {
        return;
    }
    let Some(ns) = Netns::new(test) else { return };
    let dir = scratch("evs-backlog");
    let out = dir.join("art");
    // accept() every 50 ms with a backlog of 1, against 16 connections
    // opened at once and again after each close.
    let code = py_server("127.0.0.1", 0, 1, 0.05);
    let (c, so, se) = profile_in(
        &ns,
        &[
            "--load",
            "tcp-crr -c 16 -d 2 --source-ips 1 --max-errors 1000000",
            "--out",
            out.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            &code,
        ],
    );
    assert_eq!(c, Some(0), "{so}{se}");
    let rep = read_json(&out.join("run.json"));
    let s = sockets_of(&rep);
    let l = &s["listeners"][0];
    assert_eq!(l["backlog"], 1, "{s}");
    assert!(l["accept_queue_max"].as_u64().unwrap() >= 1, "{s}");
    assert!(l["samples_full"].as_u64().unwrap() >= 1, "{s}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("reached its backlog (1)"),
        "the sentence is in the summary: {summary}"
    );
}

#[test]
fn a_ten_port_range_runs_out_and_time_wait_is_counted() {
    let _serial = common::serial();
    let test = "a_ten_port_range_runs_out_and_time_wait_is_counted";
    if !require_bpf(test) {
        return;
    }
    let Some(ns) = Netns::new(test) else { return };
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40009");
    let dir = scratch("evs-ports");
    let out = dir.join("art");
    // One source address: ten local ports, each held 60 s in TIME_WAIT by
    // the client (tcp-crr closes first), then connect() fails.
    let (c, so, se) = profile_in(
        &ns,
        &[
            "--target",
            "serve echo --transport epoll",
            "--load",
            "tcp-crr -c 2 -d 2 --source-ips 1 --max-errors 100000000",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(c, Some(0), "{so}{se}");
    let rep = read_json(&out.join("run.json"));
    let errs = &rep["load"]["errors"]["by_class"];
    assert!(
        errs["EADDRNOTAVAIL"].as_u64().unwrap_or(0) > 0,
        "connect failed for want of a port: {}",
        rep["load"]["errors"]
    );
    let tw = &sockets_of(&rep)["time_wait"];
    let held = tw["remote_max"].as_u64().unwrap() + tw["local_max"].as_u64().unwrap();
    // Most of the ten ports wait (one may be in a live connection at the
    // count).
    assert!(held >= 5, "the range's ports wait in TIME_WAIT: {tw}");
    assert!(tw["namespace_max"].as_u64().unwrap() >= held, "{tw}");
    // A fresh namespace: every one of them is this run's, from its one
    // source address.
    assert_eq!(tw["before"]["remote"], 0, "{tw}");
    assert!(
        tw["remote_new_per_source_max"].as_u64().unwrap() >= 5,
        "{tw}"
    );
    // The report ends with the settings this evidence points at.
    let advice: Vec<&str> = rep["advice"]
        .as_array()
        .expect("advice")
        .iter()
        .filter_map(|r| r["setting"].as_str())
        .collect();
    for want in ["net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse"] {
        assert!(advice.contains(&want), "{want} not advised: {advice:?}");
    }
    let range = rep["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["setting"] == "net.ipv4.ip_local_port_range")
        .unwrap();
    // Read in the namespace the profile ran in: the tiny range, not the host's.
    assert_eq!(range["current"], "40000 40009", "{range}");
    assert!(
        range["evidence"]
            .as_str()
            .unwrap()
            .contains("EADDRNOTAVAIL"),
        "{range}"
    );
}

#[test]
fn loss_on_the_targets_link_shows_as_its_retransmits() {
    let _serial = common::serial();
    let test = "loss_on_the_targets_link_shows_as_its_retransmits";
    if !require_bpf(test) || !common::require_program("python3", test) {
        return;
    }
    if Command::new("nft").arg("--version").output().is_err() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: CI=true but nft (nftables) is missing");
        }
        eprintln!("SKIP {test}: nft missing");
        return;
    }
    let (Some(gen_ns), Some(target_ns)) = (Netns::new(test), Netns::new(test)) else {
        return;
    };
    let link = veth(&gen_ns, &target_ns);
    // Lose 8% of what the target sends, on arrival in the generator's
    // namespace: past the target's TCP stack, so it retransmits. (A drop
    // in the target's own output chain is a local transmit error: TCP
    // sends the segment again later as new data and counts no
    // retransmission.)
    for rule in [
        vec!["add", "table", "inet", "loss"],
        vec![
            "add",
            "chain",
            "inet",
            "loss",
            "in",
            "{ type filter hook prerouting priority -300; }",
        ],
        vec![
            "add",
            "rule",
            "inet",
            "loss",
            "in",
            "iifname",
            &link.a_dev,
            "numgen",
            "random",
            "mod",
            "100",
            "<",
            "8",
            "drop",
        ],
    ] {
        let o = gen_ns.command("nft").args(&rule).output().unwrap();
        assert!(
            o.status.success(),
            "nft {}: {}",
            rule.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let dir = scratch("evs-loss");
    let out = dir.join("art");
    let code = py_server(&link.b_ip, 18080, 64, 0.0);
    // The profile (and its load generator) runs in the generator's
    // namespace; `ip netns exec` execs, so the launched pid is the server,
    // in the target's namespace.
    let (c, so, se) = profile_in(
        &gen_ns,
        &[
            "--load",
            "tcp-rr -c 4 -d 2 --req 3000 --max-errors 1000",
            "--out",
            out.to_str().unwrap(),
            "--",
            "ip",
            "netns",
            "exec",
            &target_ns.name,
            "python3",
            "-c",
            &code,
        ],
    );
    assert_eq!(c, Some(0), "{so}{se}");
    let rep = read_json(&out.join("run.json"));
    assert_eq!(
        rep["evidence"]["netns"]["shared_with_generator"], false,
        "{}",
        rep["evidence"]["netns"]
    );
    let s = sockets_of(&rep);
    assert_eq!(
        s["listeners"][0]["local"],
        format!("{}:18080", link.b_ip),
        "the listener was read in the target's namespace: {s}"
    );
    let r = &s["retransmits"];
    assert!(r["total"].as_u64().unwrap() > 0, "{s}");
    assert!(s["connections_seen"].as_u64().unwrap() >= 4, "{s}");
    // The counters part, where it is filled, agrees.
    if let Some(d) = rep["evidence"]["counters"]["deltas"]["Tcp.RetransSegs"].as_u64() {
        assert!(d > 0, "{}", rep["evidence"]["counters"]);
    }
}
