//! Scope modes: `trace --comm/--cgroup/--system`, the `--by` breakdowns,
//! `--max-series` and `--interval`, with exact counts from the getppid
//! workload (tests/workload/ss_workload.c).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::cgroup::{TestCgroup, move_to, v2_mount};
use common::{Background, Waiting, calls};

/// A copy of the workload under a name no other process has (<= 15 bytes).
fn named_workload(tag: &str) -> (PathBuf, String) {
    let name = format!("sc{tag}{}", std::process::id() % 1_000_000);
    assert!(name.len() <= 15);
    let path = common::scratch(&format!("scope-{tag}")).join(&name);
    std::fs::copy(common::workload(), &path).unwrap();
    (path, name)
}

fn run_workload(bin: &Path, args: &[&str]) {
    let st = Command::new(bin).args(args).status().unwrap();
    assert!(st.success());
}

fn stop(bg: Background) -> String {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(bg.child.id() as i32, libc::SIGINT) };
    let (st, err) = bg.finish(Duration::from_secs(30));
    assert!(st.success(), "sockscope exit {st}: {err}");
    err
}

/// A `sleep` put in a cgroup, killed on drop.
struct Sleeper(common::Reaped);

impl Sleeper {
    fn in_cgroup(dir: &Path) -> Self {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let s = Self(common::Reaped(child));
        move_to(dir, s.0.id() as i32);
        s
    }
}

fn trace_json(args: &[&str], tag: &str) -> (Background, PathBuf) {
    let json = common::scratch(&format!("scope-json-{tag}")).join("t.json");
    let mut full: Vec<&str> = vec!["trace"];
    full.extend_from_slice(args);
    let j = json.to_str().unwrap().to_string();
    full.push("--json");
    full.push(&j);
    let mut bg = Background::start(&full);
    bg.attached();
    (bg, json)
}

fn group(
    rep: &serde_json::Value,
    f: impl Fn(&serde_json::Value) -> bool,
) -> Vec<&serde_json::Value> {
    rep["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| f(g))
        .collect()
}

fn group_calls(g: &serde_json::Value, name: &str) -> u64 {
    g["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .map_or(0, |s| s["calls"].as_u64().unwrap())
}

/// Every syscall's calls summed over the groups equal the totals' row.
fn assert_groups_add_up(rep: &serde_json::Value) {
    let groups = rep["groups"].as_array().unwrap();
    let sum: u64 = groups.iter().map(|g| g["calls"].as_u64().unwrap()).sum();
    assert_eq!(sum, rep["totals"]["calls"].as_u64().unwrap());
    for s in rep["syscalls"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let by: u64 = groups.iter().map(|g| group_calls(g, name)).sum();
        assert_eq!(by, s["calls"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn comm_scope_traces_processes_started_later_exactly() {
    if !common::require_bpf("comm_scope_traces_processes_started_later_exactly") {
        return;
    }
    let (bin, name) = named_workload("c");
    let (other, _) = named_workload("o");
    let (bg, json) = trace_json(&["--comm", &name, "--duration", "60"], "comm");
    run_workload(&bin, &["-g", "40000"]);
    run_workload(&bin, &["-g", "1000", "-t", "2", "-G", "500"]);
    run_workload(&other, &["-g", "7777"]);
    stop(bg);
    let rep = common::read_json(&json);
    assert_eq!(calls(&rep, "getppid"), 42_000);
    assert_eq!(rep["target"]["scope"]["kind"], "comm");
    assert_eq!(rep["target"]["scope"]["comm"], name.as_str());
    // Two processes, one of them with two more threads.
    assert_eq!(rep["target"]["scope"]["tasks_joined"], 4);
}

#[test]
fn cgroup_scope_counts_joiners_and_descendants_and_stops_at_leavers() {
    if !common::require_bpf("cgroup_scope_counts_joiners_and_descendants_and_stops_at_leavers") {
        return;
    }
    let cg = TestCgroup::new("cg");
    let sub = cg.child("sub");
    // A process in the child cgroup before the trace starts, one that
    // joins later, and one that leaves after it made a syscall inside.
    let mut inner = Waiting::start(&["-w", "-g", "3000"]);
    move_to(&sub, inner.pid);
    let mut leaver = Waiting::start(&["-w", "-g", "5000"]);
    move_to(&cg.path, leaver.pid);
    let (bg, json) = trace_json(
        &["--cgroup", &cg.rel, "--by", "cgroup", "--duration", "60"],
        "cg",
    );
    let mut joiner = Waiting::start(&["-w", "-g", "2000"]);
    move_to(&cg.path, joiner.pid);
    // The leaver's blocked read is restarted inside the cgroup (SIGSTOP +
    // SIGCONT), so it enters the trace; then it leaves and does its work.
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(leaver.pid, libc::SIGSTOP);
        libc::kill(leaver.pid, libc::SIGCONT);
    }
    std::thread::sleep(Duration::from_millis(300));
    move_to(&v2_mount(), leaver.pid);
    for w in [&mut inner, &mut joiner, &mut leaver] {
        w.go();
    }
    for w in [inner, joiner, leaver] {
        assert!(w.wait(Duration::from_secs(30)).success());
    }
    stop(bg);
    let rep = common::read_json(&json);
    assert_eq!(
        calls(&rep, "getppid"),
        5000,
        "inner 3000 + joiner 2000, not the leaver"
    );
    assert_eq!(rep["target"]["scope"]["cgroup"], cg.rel.as_str());
    assert_groups_add_up(&rep);
    let sub_rel = format!("{}/sub", cg.rel);
    let rows = group(&rep, |g| g["cgroup"] == sub_rel.as_str());
    assert_eq!(rows.len(), 1, "{}", rep["groups"]);
    assert_eq!(group_calls(rows[0], "getppid"), 3000);
    let rows = group(&rep, |g| g["cgroup"] == cg.rel.as_str());
    assert_eq!(group_calls(rows[0], "getppid"), 2000);
}

#[test]
fn system_scope_by_comm_rows_add_up_to_the_totals() {
    if !common::require_bpf("system_scope_by_comm_rows_add_up_to_the_totals") {
        return;
    }
    let (bin, name) = named_workload("s");
    let (bg, json) = trace_json(&["--system", "--by", "comm", "--duration", "60"], "sys");
    let me = bg.child.id() as i64;
    run_workload(&bin, &["-g", "30000"]);
    stop(bg);
    let rep = common::read_json(&json);
    assert_eq!(rep["by"], "comm");
    let rows = group(&rep, |g| g["comm"] == name.as_str());
    assert_eq!(rows.len(), 1);
    assert_eq!(group_calls(rows[0], "getppid"), 30_000);
    assert_groups_add_up(&rep);
    // sockscope never traces itself (other tests' instances it may).
    let procs = rep["processes"].as_array().unwrap();
    assert!(!procs.is_empty());
    assert!(procs.iter().all(|p| p["pid"].as_i64() != Some(me)));
}

#[test]
fn by_process_rows_and_max_series_pool_the_rest_without_losing_calls() {
    if !common::require_bpf("by_process_rows_and_max_series_pool_the_rest_without_losing_calls") {
        return;
    }
    let (bin, name) = named_workload("p");
    let (bg, json) = trace_json(
        &["--comm", &name, "--by", "process", "--duration", "60"],
        "byp",
    );
    run_workload(&bin, &["-g", "1111"]);
    run_workload(&bin, &["-g", "2222"]);
    stop(bg);
    let rep = common::read_json(&json);
    let mut per: Vec<u64> = group(&rep, |g| g["pid"].is_number())
        .iter()
        .map(|g| group_calls(g, "getppid"))
        .collect();
    per.sort_unstable();
    assert_eq!(per, vec![1111, 2222]);
    assert_groups_add_up(&rep);

    // Three series at most: the rest lands in "other", every call kept.
    let (bg, json) = trace_json(
        &[
            "--comm",
            &name,
            "--by",
            "process",
            "--max-series",
            "3",
            "--duration",
            "60",
        ],
        "maxs",
    );
    for n in ["100", "200", "300"] {
        run_workload(&bin, &["-g", n]);
    }
    stop(bg);
    let rep = common::read_json(&json);
    assert_eq!(calls(&rep, "getppid"), 600);
    assert_eq!(
        group(&rep, |g| g["other"] == true).len(),
        1,
        "{}",
        rep["groups"]
    );
    assert_groups_add_up(&rep);
}

#[test]
fn intervals_add_up_exactly_to_the_whole_trace() {
    if !common::require_bpf("intervals_add_up_exactly_to_the_whole_trace") {
        return;
    }
    let (bin, name) = named_workload("i");
    let (bg, json) = trace_json(
        &[
            "--comm",
            &name,
            "--interval",
            "300ms",
            "--by",
            "process",
            "--duration",
            "60",
        ],
        "iv",
    );
    for _ in 0..3 {
        run_workload(&bin, &["-g", "50000"]);
        std::thread::sleep(Duration::from_millis(200));
    }
    stop(bg);
    let text = std::fs::read_to_string(&json).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, intervals) = lines.split_last().unwrap();
    assert_eq!(last["schema"], "sockscope.trace");
    assert!(intervals.len() >= 3, "{} intervals", intervals.len());
    let mut sum = 0;
    let mut group_sum = 0;
    for iv in intervals {
        assert_eq!(iv["schema"], "sockscope.trace.interval");
        sum += calls(iv, "getppid");
        group_sum += iv["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| group_calls(g, "getppid"))
            .sum::<u64>();
    }
    assert_eq!(sum, 150_000);
    assert_eq!(group_sum, 150_000);
    assert_eq!(calls(last, "getppid"), 150_000);
}

#[test]
fn intervals_go_to_stdout_as_json_lines() {
    if !common::require_bpf("intervals_go_to_stdout_as_json_lines") {
        return;
    }
    let (bin, name) = named_workload("j");
    let bg = Background::start(&[
        "trace",
        "--comm",
        &name,
        "--interval",
        "200ms",
        "--json",
        "-",
        "--duration",
        "2",
        "-q",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    run_workload(&bin, &["-g", "999"]);
    let out = bg.child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let total: u64 = lines[..lines.len() - 1]
        .iter()
        .map(|l| calls(l, "getppid"))
        .sum();
    assert_eq!(total, 999);
    assert_eq!(calls(lines.last().unwrap(), "getppid"), 999);
}

#[test]
fn scope_bad_input_is_refused_clearly() {
    if !common::require_bpf("scope_bad_input_is_refused_clearly") {
        return;
    }
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--cgroup", "/sys/fs/cgroup/unified/no-such-group-xyz"],
            1,
            "no-such-group-xyz",
        ),
        (&["--cgroup", "/sys/fs/cgroup/memory"], 1, "cgroup v2"),
        (&["--unit", "no-such-unit-xyz"], 1, "not running"),
        (&["--comm", "a-name-longer-than-15"], 2, "15 bytes"),
        (&["--comm", "x", "--per-thread"], 2, "--per-thread"),
        (&["--comm", "x", "--no-follow"], 2, "--no-follow"),
        (&["--comm", "x", "--max-series", "5"], 2, "--by"),
        (&["--comm", "x", "--interval", "10ms"], 2, "100ms"),
        (&["--duration", "1"], 2, "--duration"),
    ];
    for (args, code, needle) in cases {
        let json = common::scratch("scope-bad").join("never.json");
        let mut full = vec!["trace"];
        full.extend_from_slice(args);
        let j = json.to_str().unwrap().to_string();
        full.extend_from_slice(&["--json", &j]);
        let out = common::run(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!json.exists(), "{args:?} wrote an artifact");
    }
}

#[test]
fn sigkill_of_a_scope_trace_leaves_no_bpf_program() {
    if !common::require_bpf("sigkill_of_a_scope_trace_leaves_no_bpf_program") {
        return;
    }
    let mut bg = Background::start(&["trace", "--system", "--by", "comm", "--duration", "60"]);
    bg.attached();
    let pid = bg.child.id();
    // Its own ss_sys_enter, found by what it holds: the other tests of
    // this binary load theirs meanwhile.
    let held = common::progs::prog_ids_of(pid);
    let ours: Vec<u32> = common::progs::loaded_programs()
        .into_iter()
        .filter(|(id, name)| held.contains(id) && name == "ss_sys_enter")
        .map(|(id, _)| id)
        .collect();
    assert!(!ours.is_empty(), "it holds no ss_sys_enter: {held:?}");
    bg.child.kill().unwrap();
    bg.child.wait().unwrap();
    // The kernel frees the programs once the last descriptor closes.
    let mut gone = false;
    for _ in 0..50 {
        let loaded = common::progs::loaded_programs();
        if !loaded.iter().any(|(id, _)| ours.contains(id)) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(gone, "sockscope {pid}'s programs outlived it");
}

/// A server started inside a cgroup, the way a runtime starts a service.
fn serve_in(cg: &Path) -> std::process::Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs; exec {} serve echo --transport epoll --listen 127.0.0.1:0",
            cg.display(),
            common::sockscope()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn profile_cgroup_and_unit_trace_a_running_service_and_leave_it_running() {
    let test = "profile_cgroup_and_unit_trace_a_running_service_and_leave_it_running";
    if !common::require_bpf(test) {
        return;
    }
    let cg = TestCgroup::new("prof");
    let unit = TestCgroup::system_unit(&format!("sockscope-test-{}.service", std::process::id()));
    let mut server = serve_in(&unit.path);
    std::thread::sleep(Duration::from_millis(500));
    for (flag, value) in [
        ("--cgroup", unit.rel.clone()),
        ("--unit", format!("sockscope-test-{}", std::process::id())),
    ] {
        let out_dir = common::scratch(&format!("scope-prof{flag}")).join("p");
        let out = common::run(&[
            "profile",
            flag,
            &value,
            "--load",
            "tcp-rr -c 2 -d 1",
            "-o",
            out_dir.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{flag}: {err}");
        let run = common::read_json(&out_dir.join("run.json"));
        assert_eq!(run["target"]["mode"], "cgroup");
        assert_eq!(run["target"]["cgroup"], unit.rel.as_str());
        if flag == "--unit" && !Path::new("/run/systemd/system").is_dir() {
            assert_eq!(run["target"]["unit_found_by"], "path");
        }
        let txns = run["load"]["transactions"].as_u64().unwrap_or(0);
        let recv = calls(&run["trace"], "recvfrom") + calls(&run["trace"], "read");
        assert!(
            txns > 0 && recv >= txns,
            "{flag}: {recv} reads for {txns} transactions"
        );
        assert_eq!(run["trace"]["target"]["scope"]["kind"], "cgroup");
        // The service is left running.
        assert!(
            server.try_wait().unwrap().is_none(),
            "{flag}: the server was stopped"
        );
    }
    let _ = server.kill();
    let _ = server.wait();
    // Nothing running in it: refused, nothing written.
    let empty = cg.child("empty");
    let out_dir = common::scratch("scope-prof-empty").join("p");
    let rel = format!("{}/empty", cg.rel);
    let out = common::run(&[
        "profile",
        "--cgroup",
        &rel,
        "--load",
        "tcp-rr -c 1 -d 1",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no process"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out_dir.join("run.json").exists());
    let _ = empty;
}

#[test]
fn unit_without_systemd_skips_impostors_and_says_where_it_found_it() {
    let test = "unit_without_systemd_skips_impostors_and_says_where_it_found_it";
    if !common::require_bpf(test) {
        return;
    }
    if Path::new("/run/systemd/system").is_dir() {
        eprintln!("SKIP {test}: systemd runs here, and --unit asks it");
        return;
    }
    let name = format!("sockscope-imp-{}", std::process::id());
    let unit = format!("{name}.service");
    // A user's subtree (owned by nobody) with a directory named like the
    // unit and a process in it.
    let user = TestCgroup::new("someuser.slice");
    let impostor = user.child(&format!("x/{unit}"));
    for d in [user.path.clone(), user.path.join("x"), impostor.clone()] {
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    }
    let _in_impostor = Sleeper::in_cgroup(&impostor);
    let trace = |tag: &str| {
        let json = common::scratch(&format!("scope-unit-{tag}")).join("t.json");
        let out = common::run(&[
            "trace",
            "--unit",
            &name,
            "--duration",
            "0.5",
            "--json",
            json.to_str().unwrap(),
        ]);
        (out, json)
    };

    // Only the impostor: refused, saying why it was not taken.
    let (out, json) = trace("impostor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("no cgroup named {unit}")), "{err}");
    assert!(
        err.contains(&format!("{} (under {}", impostor.display(), user.rel)),
        "{err}"
    );
    assert!(!json.exists());

    // The real one in system.slice: taken, and the choice said.
    let real = TestCgroup::system_unit(&unit);
    let _in_real = Sleeper::in_cgroup(&real.path);
    let (out, json) = trace("real");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "--unit {unit}: cgroup {} (no systemd running: found by path)",
            real.path.display()
        )),
        "{err}"
    );
    let rep = common::read_json(&json);
    let scope = &rep["target"]["scope"];
    assert_eq!(scope["cgroup"], real.rel.as_str());
    assert_eq!(scope["unit"], unit.as_str());
    assert_eq!(scope["unit_found_by"], "path");
    assert_eq!(scope["cgroup_path"], real.path.to_str().unwrap());
}
