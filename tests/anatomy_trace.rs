//! `trace --requests-only`: the request anatomy alone times every
//! transaction a load made (turns = transactions + those answered after
//! the load's end) with no syscall program loaded, finds a cgroup scope's
//! served port, serves the per-port request counter with --metrics, leaves
//! no program behind when killed, refuses the tracer's options, and stops
//! following a tree's process once it exited (its pid reused by another);
//! `trace --requests --metrics` serves both kinds of series and ends on
//! SIGINT; `trace --requests -- CMD` holds a launched command until the
//! anatomy is attached, so a server loaded the moment it listens has
//! every request counted.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Background;
use common::cgroup::{TestCgroup, move_to};
use common::ports;
use common::progs::{loaded_programs, prog_ids_of, program_names_of};
use common::prometheus::http_get;
use common::server::Server;
use serde_json::Value;

/// A one-thread echo server that works 100 us per request.
fn echo_server() -> Server {
    Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--work-us",
        "100",
    ])
}

/// Runs a short tcp-rr load; returns the requests the server answered
/// (transactions, and those answered after the load's end).
fn load(dir: &Path, addr: SocketAddr) -> u64 {
    let (code, rep, err) = common::load_json(
        dir,
        &["tcp-rr", &addr.to_string(), "-c", "2", "-d", "1"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "load failed: {err}");
    let n = rep["transactions"].as_u64().unwrap()
        + rep["errors"]["answered_after_end"].as_u64().unwrap_or(0);
    assert!(n > 0, "{rep}");
    n
}

/// SIGINT ends the window: sockscope exits 0 (the signal is read from its
/// signalfd by the main loop, never delivered to a helper thread, where it
/// would kill the process).
fn interrupt(bg: Background) -> String {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(bg.child.id() as i32, libc::SIGINT) };
    let (st, err) = bg.finish(Duration::from_secs(30));
    assert!(st.success(), "sockscope trace: {st}: {err}");
    err
}

fn turns_of_port(rep: &Value, port: u16) -> u64 {
    rep["anatomy"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == port && p["transport"] == "tcp")
        .unwrap_or_else(|| panic!("port {port} not in {}", rep["anatomy"]["ports"]))["turns"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_launched_server_loaded_as_it_listens_has_every_request_counted() {
    let name = "a_launched_server_loaded_as_it_listens_has_every_request_counted";
    if !common::require_bpf(name) {
        return;
    }
    // slow_server answers each line at once; its client, started 0.2 s
    // after it (inside the same launched command), counts what it got.
    // The anatomy's programs load about a second after the command
    // would start: unheld, most of this load went uncounted (0 turns in
    // 4 of 5 runs).
    let bin = common::build_c(
        "slow_server.c",
        "slow_server",
        &["-O2", "-g", "-pthread", "-Wall"],
    );
    let bin = bin.to_str().unwrap();
    let port = ports::free_tcp();
    let dir = common::scratch(name);
    let json = dir.join("t.json");
    let script = format!(
        "{bin} serve {port} sleep 2 >/dev/null & sleep 0.2; {bin} load {port} 2 1 1000000000; wait"
    );
    let (st, out, err) = common::run_bounded(
        &[
            "trace",
            "--requests",
            "-q",
            "--json",
            json.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ],
        Duration::from_secs(60),
    );
    assert!(st.success(), "{err}");
    let answered: u64 = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("requests ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count from the client: {out}"));
    assert!(answered > 100, "{out}");
    let rep = common::read_json(&json);
    assert_eq!(turns_of_port(&rep, port), answered, "{}", rep["anatomy"]);
}

/// The exporter's request count for `port` once it reaches `sent` (it
/// publishes once a second), or its last reading after 20 s.
fn scraped_until(addr: SocketAddr, port: u16, sent: u64) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut scraped = None;
    while Instant::now() < deadline {
        scraped = scraped_requests(addr, port);
        if scraped == Some(sent) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    scraped
}

/// The exporter's `sockscope_requests_total` for `port`, when served.
fn scraped_requests(addr: SocketAddr, port: u16) -> Option<u64> {
    let (status, _, body) = http_get(addr, "/metrics", None)?;
    if status != 200 {
        return None;
    }
    let want = format!("sockscope_requests_total{{port=\"{port}\",transport=\"tcp\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(want.as_str())?.trim().parse().ok())
}

#[test]
fn requests_only_pid_times_every_transaction_with_no_syscall_program() {
    if !common::require_bpf("requests_only_pid_times_every_transaction_with_no_syscall_program") {
        return;
    }
    let dir = common::scratch("reqonly-pid");
    let json = dir.join("r.json");
    let srv = echo_server();
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "-p",
        &srv.pid.to_string(),
        "--json",
        json.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    bg.attached();
    let maddr = ports::listening(&mut bg.child, Duration::from_secs(10));
    let names = program_names_of(bg.child.id());
    assert!(
        names.iter().any(|n| n == "ss_data_ready"),
        "the anatomy's programs are loaded: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("ss_sys_")),
        "no syscall program: {names:?}"
    );
    let sent = load(&dir, srv.addr);
    let scraped = scraped_until(maddr, srv.addr.port(), sent);
    interrupt(bg);
    let rep = common::read_json(&json);
    assert_eq!(rep["schema"], "sockscope.requests");
    assert_eq!(rep["window"]["end_reason"], "signal:SIGINT");
    assert_eq!(rep["window"]["complete"], true);
    assert_eq!(rep["target"]["pid"], srv.pid);
    assert_eq!(rep["anatomy"]["turns"], sent, "{}", rep["anatomy"]);
    assert_eq!(turns_of_port(&rep, srv.addr.port()), sent);
    assert_eq!(scraped, Some(sent), "the exporter's counter is the turns");
    assert_eq!(rep["target_cpu"]["source"], "/proc stat");
    assert!(rep["target_cpu"]["cpu_s"].as_f64().unwrap() > 0.0, "{rep}");
    assert!(rep["anatomy"]["cost"]["of_target_cpu"].as_f64().is_some());
}

#[test]
fn requests_beside_a_trace_ends_on_sigint_and_exports_both_series() {
    if !common::require_bpf("requests_beside_a_trace_ends_on_sigint_and_exports_both_series") {
        return;
    }
    let dir = common::scratch("req-beside-metrics");
    let srv = echo_server();
    let mut bg = Background::start(&[
        "trace",
        "--requests",
        "-p",
        &srv.pid.to_string(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    bg.attached();
    let maddr = ports::listening(&mut bg.child, Duration::from_secs(10));
    // The anatomy starts once the tracer's window is open and takes its
    // own moment to load: its port's series says its window is open.
    let ready = Instant::now() + Duration::from_secs(30);
    while scraped_requests(maddr, srv.addr.port()).is_none() {
        assert!(Instant::now() < ready, "the request series never came");
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = load(&dir, srv.addr);
    let scraped = scraped_until(maddr, srv.addr.port(), sent);
    let (_, _, body) = http_get(maddr, "/metrics", None).expect("a scrape");
    let body = String::from_utf8_lossy(&body).into_owned();
    interrupt(bg);
    assert_eq!(scraped, Some(sent), "{body}");
    assert!(body.contains("sockscope_syscalls_total{"), "{body}");
    assert!(
        body.contains("sockscope_request_server_seconds_count{"),
        "{body}"
    );
}

#[test]
fn requests_only_cgroup_scope_finds_the_served_port() {
    if !common::require_bpf("requests_only_cgroup_scope_finds_the_served_port") {
        return;
    }
    let dir = common::scratch("reqonly-cg");
    let json = dir.join("r.json");
    let out = dir.join("r.txt");
    let cg = TestCgroup::new("reqonly");
    let srv = echo_server();
    move_to(&cg.path, srv.pid);
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "--cgroup",
        &cg.rel,
        "--json",
        json.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    bg.attached();
    let sent = load(&dir, srv.addr);
    interrupt(bg);
    let rep = common::read_json(&json);
    assert_eq!(rep["target"]["scope"]["kind"], "cgroup");
    assert_eq!(turns_of_port(&rep, srv.addr.port()), sent);
    assert_eq!(rep["target_cpu"]["source"], "cgroup cpu.stat");
    assert!(rep["target_cpu"]["cpu_s"].as_f64().unwrap() > 0.0, "{rep}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("Anatomy of a request"), "{text}");
    assert!(text.contains("of the machine"), "{text}");
    drop(srv);
}

/// Issue 38 item 11: `-d N` ran from the launch, so the attach (0.25 to
/// 2.3 s) was taken out of the window, which still said "complete", and
/// its start was the launch time. The window is N seconds from when it
/// opened, and starts then.
#[test]
fn requests_only_duration_runs_from_when_the_window_opened() {
    if !common::require_bpf("requests_only_duration_runs_from_when_the_window_opened") {
        return;
    }
    let dir = common::scratch("reqonly-window");
    let json = dir.join("r.json");
    let srv = echo_server();
    let launched = std::time::SystemTime::now();
    let (st, _, err) = common::run_bounded(
        &[
            "trace",
            "--requests-only",
            "-p",
            &srv.pid.to_string(),
            "-d",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let ended = std::time::SystemTime::now();
    assert!(st.success(), "{st}: {err}");
    let rep = common::read_json(&json);
    let w = &rep["window"];
    assert_eq!(w["complete"], true, "{w}");
    assert_eq!(w["end_reason"], "duration", "{w}");
    let dur = w["duration_s"].as_f64().unwrap();
    assert!(dur >= 2.0, "a 2 s window observed {dur} s");
    let started = humantime::parse_rfc3339(w["started_at"].as_str().unwrap()).unwrap();
    // Millisecond stamps: a millisecond of slack each way.
    let ms = Duration::from_millis(1);
    assert!(started + ms >= launched, "{w}");
    assert!(
        started + Duration::from_secs_f64(dur) <= ended + ms,
        "the window ends after sockscope did: {w}"
    );
    drop(srv);
}

#[test]
fn requests_only_killed_leaves_no_program_loaded() {
    if !common::require_bpf("requests_only_killed_leaves_no_program_loaded") {
        return;
    }
    let srv = echo_server();
    let mut bg = Background::start(&["trace", "--requests-only", "-p", &srv.pid.to_string()]);
    bg.attached();
    let held = prog_ids_of(bg.child.id());
    assert!(!held.is_empty(), "it holds its programs");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(bg.child.id() as i32, libc::SIGKILL) };
    let _ = bg.finish(Duration::from_secs(30));
    // Programs are freed after an RCU grace period: wait for it, bounded.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left: Vec<(u32, String)> = Vec::new();
    while Instant::now() < deadline {
        left = loaded_programs()
            .into_iter()
            .filter(|(id, _)| held.contains(id))
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(left.is_empty(), "still loaded after SIGKILL: {left:?}");
}

/// `--- requests N: A-B s, T turns ...`: (N, T), for the lines of
/// `--requests-only --interval`.
fn interval_lines(stderr: &str) -> Vec<(u64, u64)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("--- requests ")?;
            let (n, rest) = rest.split_once(": ")?;
            let mut turns = rest.split(", ").nth(1)?.split(' ');
            let (count, word) = (turns.next()?, turns.next()?);
            (word == "turns").then_some(())?;
            Some((n.parse().ok()?, count.parse().ok()?))
        })
        .collect()
}

/// `--requests-only --interval 1` under a 2 s load, ended (SIGINT) after
/// its second line: a line per second while the window is open, numbered in order, whose turns add up to at most the artifact's
/// (the time after the last line is in the table only); the table and the
/// artifact are those of a run without lines (per-second intervals in
/// `anatomy.intervals`, no line in -o), and `report` of the artifact
/// prints the table -o holds.
#[test]
fn requests_only_interval_prints_a_line_per_second() {
    if !common::require_bpf("requests_only_interval_prints_a_line_per_second") {
        return;
    }
    let dir = common::scratch("reqonly-interval");
    let (json, out) = (dir.join("r.json"), dir.join("r.txt"));
    let srv = echo_server();
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "-p",
        &srv.pid.to_string(),
        "--duration",
        "30",
        "--interval",
        "1",
        "--json",
        json.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    bg.attached();
    let (code, _, err) = common::load_json(
        &dir,
        &["tcp-rr", &srv.addr.to_string(), "-c", "2", "-d", "2"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "load failed: {err}");
    // Ended once two lines are out and the load's turns are in them,
    // however long loading the programs or starting the load took (the
    // window's --duration bounds the wait).
    loop {
        bg.line_with("--- requests ");
        let so_far = interval_lines(&bg.seen);
        if so_far.len() >= 2 && so_far.iter().any(|(_, t)| *t > 0) {
            break;
        }
    }
    let stderr = interrupt(bg);
    let lines = interval_lines(&stderr);
    assert!(lines.len() >= 2, "a line a second: {stderr}");
    let numbers: Vec<u64> = lines.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, (1..=lines.len() as u64).collect::<Vec<_>>());
    let rep = common::read_json(&json);
    let turns = rep["anatomy"]["turns"].as_u64().unwrap();
    let in_lines: u64 = lines.iter().map(|(_, t)| t).sum();
    assert!(
        in_lines > 0 && in_lines <= turns,
        "{in_lines} of {turns}: {stderr}"
    );
    assert!(
        rep["anatomy"]["intervals"].as_array().unwrap().len() >= lines.len(),
        "{}",
        rep["anatomy"]["intervals"]
    );
    let table = std::fs::read_to_string(&out).unwrap();
    assert!(!table.contains("--- requests"), "{table}");
    let (st, so, se) = common::run_bounded(
        &[
            "report",
            "-q",
            json.to_str().unwrap(),
            "--out",
            dir.join("report").to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(st.success(), "{so}{se}");
    assert_eq!(
        std::fs::read_to_string(dir.join("report/summary.txt")).unwrap(),
        table
    );
}

#[test]
fn requests_only_refuses_what_it_cannot_do() {
    let cases: &[(&[&str], &str)] = &[
        (&["-p", "1", "--count-only"], "--count-only"),
        (&["-p", "1", "--per-thread"], "--per-thread"),
        (&["--comm", "x", "--by", "process"], "--by"),
        (&["-p", "1", "--sort", "calls"], "--sort"),
        (&["-p", "1", "--requests"], "--requests"),
        (&["--", "true"], "--requests -- CMD"),
    ];
    for (args, says) in cases {
        let mut all = vec!["trace", "--requests-only"];
        all.extend_from_slice(args);
        let (st, _, err) = common::run_bounded(&all, Duration::from_secs(30));
        assert_eq!(st.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
    }
    // The refusal is one sentence, its words a single space apart.
    let (st, _, err) = common::run_bounded(
        &["trace", "--requests-only", "-p", "1", "--count-only"],
        Duration::from_secs(30),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "--count-only is an option of the syscall tracer, and --requests-only runs none; \
             use --requests to have both\n"
        ),
        "{err:?}"
    );
}

#[test]
fn requests_duty_samples_the_window_and_detaches_the_request_hooks_between_samples() {
    let test = "requests_duty_samples_the_window";
    if !common::require_bpf(test) {
        return;
    }
    let dir = common::scratch("reqonly-duty");
    let json = dir.join("r.json");
    let srv = echo_server();
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "--requests-duty",
        "300ms/1s",
        "-p",
        &srv.pid.to_string(),
        "--json",
        json.to_str().unwrap(),
    ]);
    bg.attached();
    // Over 3 s, the request hooks are seen attached and detached: the
    // process holds ss_recv's program throughout, its link only while a
    // sample runs.
    let (mut on, mut off) = (0, 0);
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if links_held(bg.child.id(), "ss_recv") {
            on += 1;
        } else {
            off += 1;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(
        on > 0 && off > 0,
        "hooks attached {on} times, detached {off} times"
    );
    let (code, rep, err) = common::load_json(
        &dir,
        &["tcp-rr", &srv.addr.to_string(), "-c", "2", "-d", "3"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "load failed: {err}");
    let sent = rep["transactions"].as_u64().unwrap();
    interrupt(bg);
    let rep = common::read_json(&json);
    let a = &rep["anatomy"];
    let turns = a["turns"].as_u64().unwrap();
    // A 30 % sample of a 3 s load: well above none, well below all.
    assert!(
        turns * 10 >= sent && turns * 10 <= sent * 6,
        "{turns} turns of {sent} requests: {a}"
    );
    assert_eq!(a["multiplexed"]["turns"], 0, "{a}");
    assert_eq!(
        a["before_window"], 0,
        "a request that came while paused is not timed: {a}"
    );
    let s = &a["sampled"];
    assert_eq!(s["on_s"], 0.3, "{a}");
    assert_eq!(s["period_s"], 1.0, "{a}");
    let share = s["sampled_s"].as_f64().unwrap() / s["window_s"].as_f64().unwrap();
    assert!(
        (0.2..0.45).contains(&share),
        "sampled {share} of the window: {s}"
    );
    let sums = &a["sums_ns"];
    let parts: u64 = ["queue_wait", "cpu_wait", "service", "send"]
        .iter()
        .map(|k| sums[k].as_u64().unwrap())
        .sum();
    assert_eq!(parts, sums["server_time"].as_u64().unwrap());
}

/// Does `pid` hold a BPF link to the program named `name`? (Link fds'
/// fdinfo names their program by id.)
fn links_held(pid: u32, name: &str) -> bool {
    let ids: Vec<u32> = loaded_programs()
        .into_iter()
        .filter(|(_, n)| n == name)
        .map(|(id, _)| id)
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
        info.contains("link_type:")
            && info.lines().any(|l| {
                l.strip_prefix("prog_id:")
                    .and_then(|v| v.trim().parse::<u32>().ok())
                    .is_some_and(|id| ids.contains(&id))
            })
    })
}

#[test]
fn requests_duty_and_max_endpoints_refuse_what_they_cannot_do() {
    for (args, says) in [
        (
            vec!["--requests-only", "--requests-duty", "2s/1s"],
            "shorter than its period",
        ),
        (
            vec!["--requests-only", "--requests-duty", "10ms/1s"],
            "at least 100ms",
        ),
        (
            vec!["--requests-only", "--requests-duty", "1s"],
            "expected ON/PERIOD",
        ),
        (vec!["--requests-duty", "1s/10s"], "--requests-only"),
        (
            vec!["--max-endpoints", "8"],
            "--max-endpoints applies to the request anatomy",
        ),
        (
            vec!["--requests-only", "--max-endpoints", "0"],
            "not in 1..=4096",
        ),
        (
            vec!["--requests", "--max-endpoints", "5000"],
            "not in 1..=4096",
        ),
    ] {
        let mut cmd = std::process::Command::new(common::sockscope());
        cmd.arg("trace")
            .args(&args)
            .args(["-p", "1", "--duration", "1"]);
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A tree target (python3) that, once `go` exists, forks a child that
/// exits at once, writes the child's pid to `out` and sleeps.
const FORK_ONE: &str = "import os, sys, time
go, out = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
open(out + '.tmp', 'w').write(str(pid))
os.rename(out + '.tmp', out)
time.sleep(60)
";

/// An echo server whose pid is `pid`: the kernel's last pid set just below
/// it (`ns_last_pid`, root), retried while another fork takes it first.
fn echo_server_as(pid: i32) -> Option<Server> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
            .expect("writing /proc/sys/kernel/ns_last_pid");
        let srv = echo_server();
        if srv.pid == pid {
            return Some(srv);
        }
    }
    None
}

#[test]
fn a_pid_reused_after_a_tree_process_exited_is_not_followed() {
    let test = "a_pid_reused_after_a_tree_process_exited_is_not_followed";
    if !common::require_bpf(test) || !common::require_program("python3", test) {
        return;
    }
    let dir = common::scratch("reqonly-pid-reuse");
    let (go, out, json) = (dir.join("go"), dir.join("child"), dir.join("r.json"));
    let target = std::process::Command::new("python3")
        .args(["-c", FORK_ONE])
        .arg(&go)
        .arg(&out)
        .spawn()
        .unwrap();
    let target = common::Reaped(target);
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "-p",
        &target.0.id().to_string(),
        "--json",
        json.to_str().unwrap(),
    ]);
    bg.attached();
    std::fs::write(&go, "").unwrap();
    let child: i32 = common::procs::wait_for(Duration::from_secs(10), || {
        Some(std::fs::read_to_string(&out).ok()?.trim().parse().unwrap())
    })
    .expect("the target's child never ran");
    // The child joined the tree at its fork and has exited: an unrelated
    // server that gets its pid is not the target's.
    let srv = echo_server_as(child).expect("no fork got the exited child's pid in 50 tries");
    load(&dir, srv.addr);
    interrupt(bg);
    let rep = common::read_json(&json);
    let followed: Vec<(u64, u64)> = rep["anatomy"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["port"].as_u64().unwrap(), p["turns"].as_u64().unwrap()))
        .collect();
    assert!(
        !followed
            .iter()
            .any(|(p, _)| *p == u64::from(srv.addr.port())),
        "the server on port {} with the exited child's pid {child} was followed (port, turns): \
         {followed:?}",
        srv.addr.port()
    );
    assert_eq!(rep["anatomy"]["turns"], 0, "(port, turns): {followed:?}");
}
