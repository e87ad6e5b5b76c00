//! `sockscope profile` without sockscope's own load: `--load-cmd` (wrk
//! against nginx, redis-benchmark against redis, counted against the
//! servers' own counts and the tools'), observe only (`--duration`, with
//! and without traffic), a load command that fails or is not there, and
//! the options that do not go together.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::nginx::Nginx;
use common::redis::{self, Redis};
use common::server::Server;
use common::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A profile into a scratch directory: its status, stderr and directory.
fn profile(name: &str, extra: &[&str]) -> (Option<i32>, String, PathBuf) {
    let out = scratch(name).join("art");
    let mut args = vec!["profile", "--out", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    let (st, so, se) = run_bounded(&args, LIMIT);
    (st.code(), format!("{so}{se}"), out)
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// What every run without sockscope's load writes: no `load` section, the
/// requests counted by the anatomy, per-request figures over them.
fn assert_counted(rep: &serde_json::Value, source: &str) -> u64 {
    assert!(rep.get("load").is_none(), "a load section: {}", rep["load"]);
    assert_eq!(rep["schema_version"], 4);
    let w = &rep["workload"];
    assert_eq!(w["source"], source, "{w}");
    assert_eq!(w["requests"]["counted_by"], "anatomy", "{w}");
    let n = u(&w["requests"]["count"]);
    assert!(n > 0, "{w}");
    assert_eq!(u(&rep["derived"]["transactions"]), n);
    let d = &rep["derived"];
    for k in [
        "target_cpu_us_per_transaction",
        "syscalls_per_transaction",
        "voluntary_switches_per_transaction",
    ] {
        let v = d[k].as_f64().unwrap_or_else(|| panic!("{k}: {}", d[k]));
        assert!(v.is_finite() && v >= 0.0, "{k}: {v}");
    }
    assert!(d["target_cpu_us_per_transaction"].as_f64().unwrap() > 0.0);
    assert!(d["generator_cpu_us_per_transaction"].is_null(), "{d}");
    assert!(rep["anatomy"]["turns"].as_u64().unwrap() > 0);
    n
}

#[test]
fn wrk_as_the_load_command_is_counted_as_nginx_and_wrk_count() {
    let name = "wrk_as_the_load_command_is_counted_as_nginx_and_wrk_count";
    if !require_bpf(name) || !require_program("wrk", name) {
        return;
    }
    let Some(nginx) = Nginx::start(name) else {
        return;
    };
    let pid = nginx.child.id().to_string();
    let (code, out, dir) = profile(
        "ext-wrk",
        &[
            "--pid",
            &pid,
            "--load-cmd",
            "wrk -t 1 -c 4 -d 1 http://ADDR/index.html",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    let rep = read_json(&dir.join("run.json"));
    let counted = assert_counted(&rep, "command");
    let w = &rep["workload"];
    let cmd: Vec<&str> = w["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        cmd.last().copied(),
        Some(nginx.url("/index.html").as_str()),
        "ADDR filled in: {cmd:?}"
    );
    assert_eq!(w["exit"], "exit status 0");
    // wrk's own count, from its output kept in the artifact.
    let tail = w["output"]["tail"].as_str().unwrap();
    let wrk: u64 = tail
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .map(|(n, _)| n.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no wrk count in {tail:?}"));
    // wrk stops counting at its deadline with up to one request per
    // connection still in flight; the anatomy counts those answered before
    // its window closed: at most the stated bound more.
    let bound = u(&w["requests"]["edge_bound"]);
    assert!(bound >= 4, "{w}");
    assert!(
        wrk <= counted && counted <= wrk + bound,
        "wrk {wrk}, anatomy {counted}, bound {bound}"
    );
    // nginx's access log: one line per request it answered, those still
    // in flight when wrk exited included (answered to a closed connection,
    // at or after the window's end): within the same bound.
    let logged = nginx.logged(counted);
    assert!(
        counted <= logged && logged <= counted + bound,
        "nginx logged {logged}, anatomy {counted}, bound {bound}"
    );
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("Workload (an external command, --load-cmd):"),
        "{summary}"
    );
    assert!(summary.contains("requests in"), "{summary}");
    assert!(dir.join("report.html").is_file());
}

#[test]
fn redis_benchmark_as_the_load_command_counts_what_info_counts() {
    let name = "redis_benchmark_as_the_load_command_counts_what_info_counts";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let Some(redis) = Redis::start(name) else {
        return;
    };
    let before = redis.commands();
    let (code, out, dir) = profile(
        "ext-redis",
        &[
            "--pid",
            &redis.child.id().to_string(),
            "--load-cmd",
            "redis-benchmark -h HOST -p PORT -c 4 -n 3000 -t set,get -q",
        ],
    );
    // The INFO above counts itself once its answer is out: before the
    // window opened.
    let delta = redis.commands() - before - 1;
    assert_eq!(code, Some(0), "{out}");
    let rep = read_json(&dir.join("run.json"));
    let counted = assert_counted(&rep, "command");
    // redis-benchmark first asks CONFIG GET save and CONFIG GET appendonly
    // in one write, answered in one: one turn at the socket layer, two
    // commands in the bytes, which the anatomy counts (RESP).
    let config = redis.info("commandstats")["cmdstat_config|get"].clone();
    assert!(config.starts_with("calls=2,"), "{config}");
    assert_eq!(
        counted, delta,
        "INFO's total_commands_processed delta ({delta}): every command counted"
    );
    assert!(
        rep["workload"]["output"]["tail"]
            .as_str()
            .unwrap()
            .contains("requests per second"),
        "{}",
        rep["workload"]
    );
}

/// A `sockscope serve echo` target and a background `sockscope load`
/// client, both stopped on drop.
fn echo_server() -> Server {
    Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--listen",
        "127.0.0.1:0",
    ])
}

#[test]
fn observe_only_counts_the_traffic_the_target_already_has() {
    let name = "observe_only_counts_the_traffic_the_target_already_has";
    if !require_bpf(name) {
        return;
    }
    let srv = echo_server();
    let addr = srv.addr.to_string();
    // The traffic: a client of its own, running longer than the window.
    let mut client = Command::new(sockscope())
        .args([
            "load", "tcp-rr", &addr, "-c", "2", "-d", "8", "--rate", "2000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    let (code, out, dir) = profile(
        "ext-observe",
        &["--pid", &srv.pid.to_string(), "--duration", "1.5"],
    );
    let _ = client.kill();
    let _ = client.wait();
    assert_eq!(code, Some(0), "{out}");
    let rep = read_json(&dir.join("run.json"));
    let n = assert_counted(&rep, "observed");
    // About 2000/s for 1.5 s: the count is the traffic's, not a guess.
    let rate = rep["derived"]["rate_per_s"].as_f64().unwrap();
    assert!((1000.0..=2600.0).contains(&rate), "{rate}/s from {n}");
    assert!(rep["workload"].get("command").is_none());
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("observed: no load was sent"), "{summary}");
    assert!(
        summary.contains("under its own traffic, observed for"),
        "{summary}"
    );
}

#[test]
fn observe_only_without_traffic_says_so_and_writes_nothing() {
    let name = "observe_only_without_traffic_says_so_and_writes_nothing";
    if !require_bpf(name) {
        return;
    }
    let srv = echo_server();
    let (code, out, dir) = profile(
        "ext-quiet",
        &["--pid", &srv.pid.to_string(), "--duration", "0.5"],
    );
    assert_eq!(code, Some(9), "{out}");
    assert!(
        out.contains("no requests: the target answered none"),
        "{out}"
    );
    assert!(!dir.exists(), "an artifact after a run with no requests");
    assert!(no_staging_left(dir.parent().unwrap(), "art"));
}

#[test]
fn a_load_command_that_fails_or_is_missing_fails_the_profile_with_its_status() {
    let name = "a_load_command_that_fails_or_is_missing_fails_the_profile_with_its_status";
    if !require_bpf(name) {
        return;
    }
    let srv = echo_server();
    let pid = srv.pid.to_string();
    let (code, out, dir) = profile(
        "ext-exit3",
        &["--pid", &pid, "--load-cmd", "sh -c 'echo boom >&2; exit 3'"],
    );
    assert_eq!(code, Some(7), "{out}");
    assert!(
        out.contains("the load command failed (exit status 3)"),
        "{out}"
    );
    assert!(out.contains("| boom"), "its output is quoted: {out}");
    assert!(!dir.exists());
    let (code, out, dir) = profile(
        "ext-missing",
        &[
            "--pid",
            &pid,
            "--load-cmd",
            "sockscope-no-such-load-tool -c 1",
        ],
    );
    assert_eq!(code, Some(7), "{out}");
    assert!(
        out.contains("\"sockscope-no-such-load-tool\" was not found in PATH"),
        "{out}"
    );
    assert!(!dir.exists());
}

#[test]
fn the_workload_options_that_do_not_go_together_are_usage_errors() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--load", "tcp-rr -d 1", "--load-cmd", "wrk http://ADDR/"],
            "cannot be used with",
        ),
        (
            &["--load", "tcp-rr -d 1", "--duration", "2"],
            "--duration is for observing without a load",
        ),
        (
            &["--load-cmd", "wrk http://ADDR/", "--duration", "2"],
            "the window is the command's run",
        ),
        (&[], "give the load: --load"),
        (
            &["--duration", "2", "--no-requests"],
            "the request anatomy is what counts the requests",
        ),
    ];
    for (extra, why) in cases {
        let mut args = vec!["profile", "--pid", "1"];
        args.extend_from_slice(extra);
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

#[test]
fn a_load_command_child_that_calls_setsid_is_stopped_with_the_command() {
    let name = "a_load_command_child_that_calls_setsid_is_stopped";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let Some(redis) = Redis::start(name) else {
        return;
    };
    let pidfile = scratch("ext-setsid-pid").join("escaped.pid");
    // The command's background job leaves its process group (setsid) and
    // would outlive it; the command itself loads the target and exits 0.
    let cmd = format!(
        "sh -c \"setsid sh -c 'echo \\$\\$ > {0}.tmp; mv {0}.tmp {0}; exec sleep 300' & \
         exec redis-benchmark -h HOST -p PORT -c 2 -n 2000 -t get -q\"",
        pidfile.display()
    );
    let (code, out, _dir) = profile(
        "ext-setsid",
        &["--pid", &redis.child.id().to_string(), "--load-cmd", &cmd],
    );
    assert_eq!(code, Some(0), "{out}");
    let escaped: i32 = std::fs::read_to_string(&pidfile)
        .unwrap_or_else(|e| panic!("the background job never wrote its pid: {e}\n{out}"))
        .trim()
        .parse()
        .unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{escaped}/stat")).is_ok_and(|s| {
            let state = s.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        })
    };
    // profile has exited: whatever its command started is gone already.
    assert!(
        !alive(),
        "pid {escaped}, started by the load command with setsid, outlived profile"
    );
}
