//! `sockscope trace` on real processes with real BPF: exact counts against a
//! ground-truth workload and against strace, attach/detach safety, failure
//! paths. Needs root; see common::require_bpf.

use crate::common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

// Ground truth of the standard workload run.
const MAIN_GETPPID: u64 = 200_000;
const WRITES: u64 = 1_000;
const ENOENT: u64 = 500;
const THREADS: u64 = 4;
const THREAD_GETPPID: u64 = 5_000;
const CHILD_GETPPID: u64 = 1_000;

fn workload_args() -> Vec<String> {
    [
        "-g",
        &MAIN_GETPPID.to_string(),
        "-W",
        &WRITES.to_string(),
        "-e",
        &ENOENT.to_string(),
        "-t",
        &THREADS.to_string(),
        "-G",
        &THREAD_GETPPID.to_string(),
        "-c",
        &CHILD_GETPPID.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The syscall the workload's missing-file opens use.
fn open_name() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "open"
    } else {
        "openat"
    }
}

fn assert_ground_truth(rep: &serde_json::Value) {
    let getppid = MAIN_GETPPID + THREADS * THREAD_GETPPID + CHILD_GETPPID;
    assert_eq!(calls(rep, "getppid"), getppid, "getppid");
    assert_eq!(errors(rep, "getppid"), 0);
    assert_eq!(calls(rep, "write"), WRITES, "write");
    assert_eq!(errors(rep, "write"), 0);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(calls(rep, "open"), ENOENT, "open");
        assert_eq!(errors(rep, "open"), ENOENT);
        let errnos = &syscall(rep, "open").unwrap()["errnos"];
        assert_eq!(errnos[0]["name"], "ENOENT");
        assert_eq!(errnos[0]["count"], ENOENT);
        assert_eq!(errnos.as_array().unwrap().len(), 1);
    }
    // Threads leave with exit, processes with exit_group.
    assert_eq!(calls(rep, "exit"), THREADS, "exit");
    assert_eq!(calls(rep, "exit_group"), 2, "exit_group");
    let r = &rep["resources"];
    assert_eq!(r["processes_seen"], 2);
    assert_eq!(r["threads_seen"], 1 + THREADS + 1);
    // Sums are consistent with the rows.
    let rows = rep["syscalls"].as_array().unwrap();
    let sum: u64 = rows.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert_eq!(rep["totals"]["calls"], sum);
    assert_process_rows(rep);
}

/// The per-process split: the rows add up to the totals, each agrees with
/// the per-thread tables (kept by a separate mechanism) of its threads, and
/// the forked child holds its getppid calls and its exit_group (plus what
/// libc's fork does in the child).
fn assert_process_rows(rep: &serde_json::Value) {
    let procs = rep["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 2, "{procs:?}");
    let sum: u64 = procs.iter().map(|p| p["calls"].as_u64().unwrap()).sum();
    assert_eq!(rep["totals"]["calls"], sum, "{procs:?}");
    let errs: u64 = procs.iter().map(|p| p["errors"].as_u64().unwrap()).sum();
    assert_eq!(rep["totals"]["errors"], errs, "{procs:?}");
    let root = &rep["target"]["pid"];
    let main = procs.iter().find(|p| &p["pid"] == root).expect("root row");
    let child = procs.iter().find(|p| &p["pid"] != root).expect("child row");
    let child_calls = child["calls"].as_u64().unwrap();
    assert!(
        (CHILD_GETPPID + 1..CHILD_GETPPID + 4).contains(&child_calls),
        "getppid + exit_group: {child}"
    );
    assert_eq!(child["errors"], 0);
    let threads = rep["threads"].as_array().expect("--per-thread rows");
    for p in procs {
        let of_it: u64 = threads
            .iter()
            .filter(|t| t["pid"] == p["pid"])
            .map(|t| t["calls"].as_u64().unwrap())
            .sum();
        assert_eq!(p["calls"].as_u64().unwrap(), of_it, "{p} vs {threads:?}");
    }
    assert_eq!(child["threads"], 1);
    assert_eq!(child["exited"], true);
    assert_eq!(main["threads"], 1 + THREADS);
    assert_eq!(main["errors"], ENOENT);
    assert_eq!(main["exited"], true);
}

#[test]
fn launch_counts_equal_ground_truth() {
    if !require_bpf("launch_counts_equal_ground_truth") {
        return;
    }
    let dir = scratch("launch");
    let json = dir.join("t.json");
    let wl = workload().to_str().unwrap().to_string();
    let mut args = vec![
        "trace",
        "--per-thread",
        "--json",
        json.to_str().unwrap(),
        "--",
        &wl,
    ];
    let wargs = workload_args();
    args.extend(wargs.iter().map(String::as_str));
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = read_json(&json);
    assert_eq!(rep["schema"], "sockscope.trace");
    assert_eq!(rep["schema_version"], 2);
    assert_eq!(rep["build"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(rep.get("sockscope_version").is_none(), "{rep}");
    assert_eq!(rep["target"]["mode"], "launch");
    assert_eq!(rep["window"]["exit_code"], 0);
    assert_eq!(rep["window"]["complete"], true);
    assert_ground_truth(&rep);
    // Traced from the first instruction: exactly one execve, nothing from
    // the held child before it.
    assert_eq!(calls(&rep, "execve"), 1);
    assert_eq!(calls(&rep, "read"), 0, "pre-exec pipe read must not count");

    // Per thread: the main thread, 4 workers, the child process.
    let threads = rep["threads"].as_array().unwrap();
    let getppid_of = |t: &serde_json::Value| {
        t["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "getppid")
            .map_or(0, |c| c["calls"].as_u64().unwrap())
    };
    let mut per: Vec<u64> = threads.iter().map(getppid_of).collect();
    per.sort_unstable();
    assert_eq!(
        per,
        vec![
            CHILD_GETPPID,
            THREAD_GETPPID,
            THREAD_GETPPID,
            THREAD_GETPPID,
            THREAD_GETPPID,
            MAIN_GETPPID
        ],
        "{threads:#?}"
    );
    let pids: std::collections::BTreeSet<i64> =
        threads.iter().map(|t| t["pid"].as_i64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "threads of two processes");
    // Per-thread sums equal the aggregate.
    let sum: u64 = threads.iter().map(|t| t["calls"].as_u64().unwrap()).sum();
    assert_eq!(sum, rep["totals"]["calls"].as_u64().unwrap());

    // Resource figures are present and plausible for ~220k syscalls.
    let r = &rep["resources"];
    let cpu = r["user_cpu_s"].as_f64().unwrap() + r["system_cpu_s"].as_f64().unwrap();
    assert!(cpu > 0.0, "{r}");
    assert!(r["minor_faults"].as_u64().unwrap() > 0);
    assert!(r["peak_rss_kb"].as_u64().unwrap() > 0);
    assert!(r["peak_rss_kb"].as_u64().unwrap() < 64 * 1024, "{r}");
}

#[test]
fn count_only_counts_exactly() {
    if !require_bpf("count_only_counts_exactly") {
        return;
    }
    let dir = scratch("count-only");
    let json = dir.join("t.json");
    let wl = workload().to_str().unwrap().to_string();
    let mut args = vec![
        "trace",
        "--count-only",
        "--json",
        json.to_str().unwrap(),
        "--",
        &wl,
    ];
    let wargs = workload_args();
    args.extend(wargs.iter().map(String::as_str));
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = read_json(&json);
    assert_eq!(rep["options"]["count_only"], true);
    assert_eq!(
        calls(&rep, "getppid"),
        MAIN_GETPPID + THREADS * THREAD_GETPPID + CHILD_GETPPID
    );
    assert_eq!(calls(&rep, "write"), WRITES);
    assert_eq!(
        calls(&rep, open_name()),
        ENOENT + u64::from(open_name() == "openat")
    );
    let row = syscall(&rep, "getppid").unwrap();
    assert!(row.get("latency").is_none(), "count-only has no latency");
    assert!(row.get("errors").is_none(), "count-only has no errors");
}

#[test]
fn counts_agree_with_strace_on_every_syscall() {
    if !require_bpf("counts_agree_with_strace_on_every_syscall") {
        return;
    }
    // sockscope traces strace and, through it, the workload: both tracers
    // see the very same syscalls in one run, so even futex counts (which
    // vary from run to run) must agree. The per-thread rows are split at
    // exec, so strace's own pre-exec calls stay in a row named "strace".
    let dir = scratch("strace");
    let json = dir.join("t.json");
    let strace_out = dir.join("strace.txt");
    let wl = workload().to_str().unwrap().to_string();
    let mut args = vec![
        "trace",
        "--per-thread",
        "--json",
        json.to_str().unwrap(),
        "--",
        "strace",
        "-f",
        "-c",
        "-o",
        strace_out.to_str().unwrap(),
        "--",
        &wl,
    ];
    let wargs = workload_args();
    args.extend(wargs.iter().map(String::as_str));
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let strace = parse_strace_c(&std::fs::read_to_string(&strace_out).unwrap());
    let rep = read_json(&json);
    let mut ours: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for t in rep["threads"].as_array().unwrap() {
        if t["comm"] != "ss_workload" {
            continue;
        }
        for c in t["syscalls"].as_array().unwrap() {
            let e = ours
                .entry(c["name"].as_str().unwrap().to_string())
                .or_default();
            e.0 += c["calls"].as_u64().unwrap();
            e.1 += c["errors"].as_u64().unwrap();
        }
    }
    assert!(strace.len() > 10, "strace table too short: {strace:?}");
    for (name, (c, e)) in &strace {
        assert_eq!(
            ours.get(name),
            Some(&(*c, *e)),
            "{name}: strace says {c} calls, {e} errors"
        );
    }
    // strace -c leaves out calls that never return; everything else must
    // be in both tables.
    for name in ours.keys() {
        assert!(
            strace.contains_key(name) || name == "exit" || name == "exit_group",
            "{name} seen by sockscope but not by strace"
        );
    }
    assert_eq!(ours["exit"].0, THREADS);
    assert_eq!(ours["exit_group"].0, 2);
}

/// Parses `strace -c` output into name -> (calls, errors).
fn parse_strace_c(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5
            || f[0].starts_with('%')
            || f[0].starts_with('-')
            || *f.last().unwrap() == "total"
        {
            continue;
        }
        let name = f.last().unwrap().to_string();
        let calls: u64 = f[3].parse().unwrap();
        let errors: u64 = if f.len() == 6 {
            f[4].parse().unwrap()
        } else {
            0
        };
        out.insert(name, (calls, errors));
    }
    out
}

#[test]
fn attach_counts_equal_ground_truth() {
    if !require_bpf("attach_counts_equal_ground_truth") {
        return;
    }
    // The worker threads exist before the attach (-P): they must be found
    // in /proc, while the child process is created after it and must be
    // followed by the fork hook.
    let dir = scratch("attach");
    let json = dir.join("t.json");
    let mut wargs = workload_args();
    wargs.extend(["-w".to_string(), "-P".to_string()]);
    let wrefs: Vec<&str> = wargs.iter().map(String::as_str).collect();
    let mut wl = Waiting::start(&wrefs);
    let pid = wl.pid.to_string();
    let mut bg = Background::start(&[
        "trace",
        "-p",
        &pid,
        "--per-thread",
        "--json",
        json.to_str().unwrap(),
    ]);
    bg.attached();
    // One process, in the singular.
    assert!(
        bg.seen.contains("5 threads in 1 process") && !bg.seen.contains("processes"),
        "{}",
        bg.seen
    );
    wl.go();
    assert!(wl.wait(LIMIT).success());
    let (st, err) = bg.finish(LIMIT);
    assert!(st.success(), "{err}");
    let rep = read_json(&json);
    assert_eq!(rep["target"]["mode"], "attach");
    assert_eq!(rep["window"]["end_reason"], "target_exited");
    assert_eq!(
        rep["window"]["complete"], true,
        "no --duration: the exit ends the window"
    );
    assert_ground_truth(&rep);
}

#[test]
fn attach_cpu_agrees_with_the_process_own_rusage() {
    if !require_bpf("attach_cpu_agrees_with_the_process_own_rusage") {
        return;
    }
    // A single-threaded process that only waits before the go signal: its
    // own getrusage at the end covers (almost) exactly the traced window.
    let dir = scratch("attach-cpu");
    let json = dir.join("t.json");
    let ru = dir.join("ru.txt");
    let mut wl = Waiting::start(&["-w", "-g", "2000000", "-r", ru.to_str().unwrap()]);
    let pid = wl.pid.to_string();
    let mut bg = Background::start(&["trace", "-p", &pid, "--json", json.to_str().unwrap()]);
    bg.attached();
    wl.go();
    assert!(wl.wait(LIMIT).success());
    let (st, err) = bg.finish(LIMIT);
    assert!(st.success(), "{err}");
    let rep = read_json(&json);
    let own: Vec<f64> = std::fs::read_to_string(&ru)
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let own_cpu = (own[0] + own[1]) / 1e6;
    let r = &rep["resources"];
    let traced_cpu = r["user_cpu_s"].as_f64().unwrap() + r["system_cpu_s"].as_f64().unwrap();
    // The process's own figure also covers its start-up before the attach
    // (a few ms at most); the window adds the exit path.
    assert!(
        (traced_cpu - own_cpu).abs() <= 0.02 + 0.1 * own_cpu,
        "traced {traced_cpu} s vs own {own_cpu} s"
    );
    // getppid loops are kernel-heavy: most of the time is system time.
    assert!(
        r["system_cpu_s"].as_f64().unwrap() > r["user_cpu_s"].as_f64().unwrap(),
        "{r}"
    );
    assert_eq!(calls(&rep, "getppid"), 2_000_000);
}

#[test]
fn attach_and_detach_20_times_leaves_the_target_undisturbed() {
    if !require_bpf("attach_and_detach_20_times_leaves_the_target_undisturbed") {
        return;
    }
    // The workload checks every getppid result and fails on a wrong one,
    // on any signal and on EINTR; it stops when its stdin closes.
    let mut target = Command::new(workload())
        .args(["-b", "120000"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let mut busy_cycles = 0;
    for i in 0..20 {
        let dir = scratch(&format!("cycle{i}"));
        let json = dir.join("t.json");
        let out = run(&[
            "trace",
            "-q",
            "-p",
            &pid,
            "--duration",
            "0.05",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "cycle {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rep = read_json(&json);
        assert_eq!(rep["window"]["end_reason"], "duration");
        // The target calls getppid in a loop: at least one call per 20 us
        // of the CPU time it had in the window (a traced call takes well
        // under 2 us), however little a busy machine gave it.
        let r = &rep["resources"];
        let cpu_s = r["user_cpu_s"].as_f64().unwrap() + r["system_cpu_s"].as_f64().unwrap();
        let least = (cpu_s * 1e6 / 20.0) as u64;
        let seen = calls(&rep, "getppid");
        assert!(
            seen >= least,
            "cycle {i}: {seen} getppid calls in {cpu_s:.4} s of the target's CPU"
        );
        busy_cycles += u32::from(seen > 0);
        assert!(
            target.try_wait().unwrap().is_none(),
            "target died at cycle {i}"
        );
    }
    assert!(busy_cycles > 0, "no cycle saw a getppid call");
    drop(target.stdin.take());
    let st = wait_bounded(&mut target, LIMIT);
    assert_eq!(
        st.code(),
        Some(0),
        "the target saw a wrong result, a signal or EINTR"
    );
}

#[test]
fn target_exit_before_duration_keeps_data_and_says_so() {
    if !require_bpf("target_exit_before_duration_keeps_data_and_says_so") {
        return;
    }
    let dir = scratch("early-exit");
    let json = dir.join("t.json");
    let mut wl = Waiting::start(&["-w", "-g", "12345"]);
    let pid = wl.pid.to_string();
    let mut bg = Background::start(&[
        "trace",
        "-p",
        &pid,
        "--duration",
        "30",
        "--json",
        json.to_str().unwrap(),
    ]);
    bg.attached();
    wl.go();
    assert!(wl.wait(LIMIT).success());
    let (st, err) = bg.finish(LIMIT);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("ended early"), "{err}");
    let rep = read_json(&json);
    assert_eq!(rep["window"]["complete"], false);
    assert_eq!(rep["window"]["end_reason"], "target_exited");
    assert_eq!(
        calls(&rep, "getppid"),
        12345,
        "data gathered until the exit is kept"
    );
}

#[test]
fn no_follow_traces_threads_but_not_child_processes() {
    if !require_bpf("no_follow_traces_threads_but_not_child_processes") {
        return;
    }
    let dir = scratch("no-follow");
    let json = dir.join("t.json");
    let wl = workload().to_str().unwrap().to_string();
    let out = run(&[
        "trace",
        "--no-follow",
        "--json",
        json.to_str().unwrap(),
        "--",
        &wl,
        "-g",
        "100",
        "-t",
        "2",
        "-G",
        "300",
        "-c",
        "7000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = read_json(&json);
    assert_eq!(
        calls(&rep, "getppid"),
        100 + 2 * 300,
        "threads counted, child not"
    );
    assert_eq!(rep["resources"]["processes_seen"], 1);
}

#[test]
fn exit_status_of_the_command_is_passed_on() {
    if !require_bpf("exit_status_of_the_command_is_passed_on") {
        return;
    }
    let out = run(&["trace", "-q", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let out = run(&["trace", "-q", "--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(out.status.code(), Some(128 + 9));
    let out = run(&["trace", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + 15));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command exited"));
}

#[test]
fn command_not_found_exits_127_without_artifact() {
    if !require_bpf("command_not_found_exits_127_without_artifact") {
        return;
    }
    let dir = scratch("not-found");
    let json = dir.join("t.json");
    let out = run(&[
        "trace",
        "--json",
        json.to_str().unwrap(),
        "--",
        "no-such-command-sockscope",
    ]);
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
    assert!(!json.exists());
}

#[test]
fn bad_pid_fails_clearly_without_artifact() {
    if !require_bpf("bad_pid_fails_clearly_without_artifact") {
        return;
    }
    let dir = scratch("bad-pid");
    let json = dir.join("t.json");
    // pid_max is at most 4194304, so this pid cannot exist.
    let out = run(&["trace", "-p", "4194305", "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no process with pid 4194305"), "{err}");
    assert!(!json.exists());
}

#[test]
fn unprivileged_run_names_the_missing_capability() {
    if !require_bpf("unprivileged_run_names_the_missing_capability") {
        return;
    }
    // Drop to nobody with no capabilities at all.
    let dir = scratch("unpriv");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let json = dir.join("t.json");
    let out = sockscope_as_nobody()
        .args(["trace", "--json", json.to_str().unwrap(), "--", "true"])
        .output()
        .expect("setpriv (util-linux)");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no table on failure");
    assert!(!json.exists());
}

#[test]
fn a_killed_trace_takes_its_command_with_it() {
    if !require_bpf("a_killed_trace_takes_its_command_with_it") {
        return;
    }
    let mut run = Command::new(sockscope())
        .args(["trace", "-q", "--", sockscope(), "__idle", "600"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The command once it has exec'd (before, the held child's command
    // line is sockscope's own).
    let exec_line = format!("{} __idle 600", sockscope());
    let cmd = common::procs::wait_for(Duration::from_secs(30), || {
        common::procs::tree(run.id() as i32)
            .into_iter()
            .find(|p| p.cmdline.starts_with(&exec_line))
    })
    .expect("the traced command never ran");
    run.kill().unwrap();
    run.wait().unwrap();
    let left = common::procs::still_running_after(&[cmd], Duration::from_secs(2));
    assert!(left.is_empty(), "the command outlived its tracer: {left:?}");
}

#[test]
fn sigkill_leaves_no_bpf_program_attached() {
    if !require_bpf("sigkill_leaves_no_bpf_program_attached") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let mut bg = Background::start(&["trace", "-p", &sleeper.id().to_string()]);
    bg.attached();
    let tracer_pid = bg.child.id();
    let ids = prog_ids_of(tracer_pid);
    assert!(
        ids.len() >= 3,
        "expected sockscope's programs, found {ids:?}"
    );
    // SAFETY: killing our own child.
    unsafe { libc::kill(tracer_pid as i32, libc::SIGKILL) };
    let _ = bg.child.wait();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let live = all_prog_ids();
        let left: Vec<u64> = ids.iter().copied().filter(|i| live.contains(i)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "programs {left:?} still loaded after SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

/// Ids of the BPF programs process `pid` holds open (from its fdinfo; the
/// Debian bpftool cannot name a program's owner).
fn prog_ids_of(pid: u32) -> Vec<u64> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        if let Some(id) = text.lines().find_map(|l| l.strip_prefix("prog_id:")) {
            ids.push(id.trim().parse().unwrap());
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn bpftool_progs() -> Vec<serde_json::Value> {
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .expect("bpftool (make deps installs it)");
    assert!(out.status.success());
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn all_prog_ids() -> Vec<u64> {
    bpftool_progs()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn run_as_user_drops_privileges() {
    if !require_bpf("run_as_user_drops_privileges") {
        return;
    }
    let out = Command::new(sockscope())
        .args(["trace", "-q", "--user", "nobody", "--", "id", "-u"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "65534");
}

#[test]
fn usage_errors_exit_2() {
    // No BPF needed: these fail before anything is loaded.
    for args in [
        vec!["trace"],
        vec!["trace", "--duration", "1", "--", "true"],
        vec!["trace", "-p", "1", "--", "true"],
        vec!["trace", "-p", "0"],
        vec!["trace", "-p", "1", "--duration", "-3"],
        vec!["trace", "--sort", "bogus", "--", "true"],
        vec!["frobnicate"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn embedded_trace_is_stopped_by_its_caller() {
    if !require_bpf("embedded_trace_is_stopped_by_its_caller") {
        return;
    }
    use sockscope::probe::TargetSpec;
    use sockscope::signals::StopFlag;
    use sockscope::trace::TraceOptions;
    use std::sync::{Arc, mpsc};
    let mut target = Command::new(workload())
        .args(["-b", "60000"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let stop = Arc::new(StopFlag::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let opts = TraceOptions {
        target: TargetSpec::Attach {
            pid: target.id() as i32,
            duration: None,
        },
        count_only: false,
        follow_forks: true,
        per_thread: false,
        max_threads: 16,
        verbose: false,
        handle_signals: false,
        stop: Some(Arc::clone(&stop)),
        window_opened: vec![tx],
        launch_holds: Vec::new(),
        by: Default::default(),
        max_series: 0,
        sinks: Default::default(),
    };
    let handle = std::thread::spawn(move || sockscope::trace::run(&opts));
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the window opens");
    std::thread::sleep(Duration::from_millis(200));
    stop.raise();
    let outcome = handle.join().unwrap().unwrap();
    let rep = &outcome.report;
    assert_eq!(rep.window.end_reason, "stopped");
    assert!(rep.window.complete);
    assert_eq!(outcome.exit_code, 0);
    let getppid = rep.syscalls.iter().find(|s| s.name == "getppid").unwrap();
    assert!(getppid.calls > 1000, "{}", getppid.calls);
    assert!(
        (0.15..2.0).contains(&rep.window.duration_s),
        "{}",
        rep.window.duration_s
    );
    drop(target.stdin.take());
    assert_eq!(wait_bounded(&mut target, LIMIT).code(), Some(0));
}

#[test]
fn a_short_run_reports_its_start_up_and_skips_the_calibration() {
    if !require_bpf("a_short_run_reports_its_start_up_and_skips_the_calibration") {
        return;
    }
    let dir = scratch("short-run");
    let json = dir.join("t.json");
    // The static workload with nothing to do: a handful of syscalls (a
    // dynamic /bin/true makes over a hundred under cargo's
    // LD_LIBRARY_PATH, the loader trying each directory).
    let wl = workload().to_str().unwrap().to_string();
    let out = run(&[
        "trace",
        "--json",
        json.to_str().unwrap(),
        "--",
        &wl,
        "-g",
        "1",
    ]);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rep = read_json(&json);
    let t = &rep["tracer"];
    assert!(
        rep["totals"]["calls"].as_u64().unwrap() < 100,
        "{:#}",
        rep["totals"]
    );
    // Too few events for a per-event cost: the calibration, which serves
    // only that figure, is not run (it used to delay the command by tens
    // of ms), and nothing claims it failed.
    assert!(t.get("slow_path").is_none(), "{t:#}");
    assert!(!text.contains("not calibrated"), "{text}");
    let st = &t["startup"];
    let names: Vec<&str> = st["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["preflight", "bpf_load", "ring_buffer", "attach", "register"],
        "{st:#}"
    );
    assert!(text.contains("start-up"), "{text}");
}

#[test]
fn tracer_cost_parts_add_up_to_the_kernel_figure() {
    if !require_bpf("tracer_cost_parts_add_up_to_the_kernel_figure") {
        return;
    }
    // Everyone else's syscalls: an untraced getppid loop, so the programs
    // have filter runs to time (the workload's busy mode, for as long as it
    // lives: killed when the test ends).
    let _busy = Reaped(
        Command::new(workload())
            .args(["-b", "60000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = scratch("tracer-cost");
    let json = dir.join("t.json");
    let wl = workload().to_str().unwrap().to_string();
    let out = run(&[
        "trace",
        "--json",
        json.to_str().unwrap(),
        "--",
        &wl,
        "-g",
        "1500000",
    ]);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rep = read_json(&json);
    let t = &rep["tracer"];
    let events = t["events"].as_u64().unwrap();
    assert_eq!(rep["totals"]["calls"].as_u64().unwrap(), events);
    let split = &t["bpf_split"];
    assert!(split.is_object(), "no split: {t:#}\n{text}");
    let u = |v: &serde_json::Value| v.as_u64().unwrap();
    let f = |v: &serde_json::Value| v.as_f64().unwrap();

    // The check over the sampled slices: the traced and filtered work the
    // programs timed themselves, plus the clock reads of the measurement
    // (4 per run: the programs' three and about one of the kernel's own),
    // plus a remainder, make the kernel's run time of the two programs
    // over the same slices. The remainder is what neither side times: the
    // indirect call into the program (a retpoline on a mitigated VM), its
    // entry and return, the cost_on test and the stores into cpu_cost,
    // plus the model's error in taking the kernel's clock read as costing
    // what a bpf_ktime_get_ns does. Tolerance, per run: no less than minus
    // one clock read (the kernel's read cannot cost less than nothing, and
    // the rest is positive), no more than two clock reads plus 20 ns (an
    // indirect call and a function's entry and return cost about what a
    // clock read does). 65 ns a run on the 45 ns-clock VM it was written
    // on, against a bound of 110.
    let s = &split["sampled"];
    let kernel = f(&s["kernel_run_time_ns"]);
    let runs = u(&s["kernel_runs"]);
    let timed = u(&s["timed_runs"]);
    let residual = s["residual_ns"].as_i64().unwrap() as f64;
    let clock = f(&s["clock_ns_per_read"]);
    assert!(timed > 1000 && timed <= runs, "{s:#}");
    assert!(
        timed as f64 >= 0.95 * runs as f64,
        "the programs timed nearly every run the kernel did: {s:#}"
    );
    let parts = f(&s["traced_ns"]) + f(&s["filtered_ns"]) + f(&s["clock_ns"]);
    assert!(
        (parts + residual - kernel).abs() <= 2.0,
        "residual is the remainder: {s:#}"
    );
    let per_run = residual / timed as f64;
    assert!(
        per_run >= -clock && per_run <= 2.0 * clock + 20.0,
        "parts {parts} vs kernel {kernel}: {per_run:.1} ns a run unaccounted, clock read \
         {clock:.1} ns: {s:#}"
    );
    assert!(clock > 0.0 && clock < 1000.0, "{s:#}");

    // The parts: the traced one covers the events exactly, the filtered one
    // the other process's syscalls; bpf_time_ns is their sum.
    let traced = &split["traced"];
    let filtered = &split["filtered"];
    assert_eq!(u(&traced["syscalls"]), events);
    assert!(f(&traced["enter_ns_per_run"]) > 0.0, "{split:#}");
    assert!(f(&traced["exit_ns_per_run"]) > 0.0, "{split:#}");
    assert!(u(&filtered["syscalls"]) > 10_000, "{split:#}");
    assert!(f(&filtered["ns_per_syscall"]) > 0.0, "{split:#}");
    let sum = u(&traced["total_ns"]) + u(&filtered["total_ns"]) + u(&split["lifecycle_ns"]);
    assert!(u(&t["bpf_time_ns"]).abs_diff(sum) <= 1, "{t:#}");

    // The slow path was calibrated, briefly, and attributed to both sides.
    let sp = &t["slow_path"];
    assert_eq!(sp["rounds"], 4, "{sp:#}");
    let (lo, mid, hi) = (f(&sp["min_ns"]), f(&sp["ns_per_syscall"]), f(&sp["max_ns"]));
    assert!(
        lo <= mid && mid <= hi,
        "the rounds bracket the figure: {sp:#}"
    );
    // On a quiet machine the path costs something; on a noisy one (the
    // CI's runners) it may not be told apart from noise, and then the
    // report says so and charges nothing, never a negative cost.
    let within_noise = sp["within_noise"].as_bool().unwrap();
    let (att, unt, filt) = (
        f(&sp["attached_ns_per_call"]),
        f(&sp["untraced_ns_per_call"]),
        f(&sp["filter_ns_per_call"]),
    );
    assert_eq!(within_noise, att - unt - filt <= 0.0, "{sp:#}");
    assert!((att - unt - filt - mid).abs() < 1e-6, "{sp:#}");
    if within_noise {
        assert!(
            text.contains("not told apart from noise"),
            "a calibration lost in noise is said:\n{text}"
        );
    } else {
        assert!(!text.contains("not told apart"), "{text}");
    }
    assert!(filt > 0.0, "{sp:#}");
    assert!(f(&sp["took_ms"]) < 500.0, "{sp:#}");
    assert!(sp["exit_ns_per_syscall"].is_f64(), "{sp:#}");
    let a = &t["attributed"];
    let slow = mid.max(0.0);
    assert!(
        (f(&a["slow_path_target_ns"]) - slow * events as f64).abs() <= 1.0,
        "{a:#}"
    );
    assert_eq!(
        u(&a["target_ns"]),
        u(&traced["total_ns"]) + u(&a["slow_path_target_ns"])
    );
    assert_eq!(
        u(&a["collateral_ns"]),
        u(&filtered["total_ns"]) + u(&a["slow_path_others_ns"])
    );
    let share = f(&a["target_cpu_share"]);
    assert!(share > 0.0 && share < 1.0, "{a:#}");
    assert!(f(&a["machine_cpu_s"]) > 0.0, "{a:#}");
    assert!(
        u(&a["count_only_saves_target_ns"]) <= u(&a["target_ns"]),
        "{a:#}"
    );

    // Start-up is reported apart: its phases add up to the time before
    // the window, and the BPF load is one of them.
    let st = &t["startup"];
    let phases = st["phases"].as_array().unwrap();
    let sum: f64 = phases.iter().map(|p| f(&p["ms"])).sum();
    assert!((sum - f(&st["before_window_ms"])).abs() < 0.01, "{st:#}");
    assert!(
        phases
            .iter()
            .any(|p| p["name"] == "bpf_load" && f(&p["ms"]) > 0.0),
        "{st:#}"
    );
    assert!(f(&st["cpu_ms"]) > 0.0, "{st:#}");

    // The text says the same in its own lines.
    for line in [
        "BPF on the traced events",
        "BPF filtering the rest",
        "syscall hook slow path",
        "cost to the target",
        "cost to the rest",
        "--count-only would save",
        "start-up",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    eprintln!(
        "tracer cost: traced {:.1} ns/event (enter {:.1} + exit {:.1}), filtered {:.1} ns/syscall \
         over {} syscalls, slow path {mid:.1} ns ({lo:.1}..{hi:.1}; untraced {:.1}, attached \
         {:.1}, filter {:.1}), clock {clock:.1} ns/read, residual {:.1} ns/run, kernel {:.1} \
         ns/run, calibration {:.0} ms",
        f(&traced["ns_per_syscall"]),
        f(&traced["enter_ns_per_run"]),
        f(&traced["exit_ns_per_run"]),
        f(&filtered["ns_per_syscall"]),
        u(&filtered["syscalls"]),
        f(&sp["untraced_ns_per_call"]),
        f(&sp["attached_ns_per_call"]),
        f(&sp["filter_ns_per_call"]),
        residual / timed as f64,
        kernel / runs as f64,
        f(&sp["took_ms"]),
    );
}

/// A process names itself (prctl PR_SET_NAME), escape sequences included;
/// trace's table shows the name written out and never the bytes: on
/// stderr, in -o's file, per thread and `--by process`.
#[test]
fn a_process_name_with_escapes_is_written_out_not_sent_to_the_terminal() {
    if !require_bpf("a_process_name_with_escapes_is_written_out_not_sent_to_the_terminal") {
        return;
    }
    let dir = scratch("trace-escapes");
    let file = dir.join("table.txt");
    let wl = workload().to_str().unwrap().to_string();
    let name = "\x1b]0;pwn\x07x";
    let shown = r"\x1b]0;pwn\x07x";
    let wargs = [
        "--", &wl, "-n", name, "-g", "100", "-t", "2", "-G", "10", "-c", "10",
    ];
    let raw = |s: &str| s.contains(['\x1b', '\x07']);

    // The table on stderr.
    let mut args = vec!["trace", "--per-thread"];
    args.extend(wargs);
    let (st, so, se) = run_bounded(&args, LIMIT);
    assert!(st.success(), "{se}");
    assert!(!raw(&so) && !raw(&se), "{so:?} {se:?}");
    assert!(se.contains(shown), "{se}");

    // By process, into a file.
    let mut args = vec!["trace", "--by", "process", "-o", file.to_str().unwrap()];
    args.extend(wargs);
    let (st, so, se) = run_bounded(&args, LIMIT);
    assert!(st.success(), "{se}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!raw(&so) && !raw(&se) && !raw(&text), "{text:?}");
    let by = text
        .split("by process:")
        .nth(1)
        .expect("a --by process table");
    assert!(by.contains(shown), "{text}");
}

/// The name the kernel gives a process running `bin` (its file name, cut
/// to 15 bytes).
fn comm_of(bin: &std::path::Path) -> String {
    let name = bin.file_name().unwrap().to_str().unwrap();
    name[..name.len().min(15)].to_string()
}

/// The `--by process` groups of a report: (pid, comm, getppid calls).
fn process_groups(rep: &serde_json::Value) -> Vec<(i64, String, u64)> {
    let mut out: Vec<(i64, String, u64)> = rep["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["pid"].is_number())
        .map(|g| {
            let getppid = g["syscalls"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == "getppid")
                .map_or(0, |s| s["calls"].as_u64().unwrap());
            (
                g["pid"].as_i64().unwrap(),
                g["comm"].as_str().unwrap().to_string(),
                getppid,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn by_process_names_a_launched_process_after_its_exec() {
    if !require_bpf("by_process_names_a_launched_process_after_its_exec") {
        return;
    }
    let wl = workload();
    let json = scratch("by-process-exec").join("t.json");
    let script = format!("exec {} -g 777", wl.display());
    let out = run(&[
        "trace",
        "--by",
        "process",
        "--json",
        json.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let rep = read_json(&json);
    let name = comm_of(wl);
    // One process, which ran sh and then the workload: named after the
    // workload, with the calls of both (sh may read $PPID with getppid).
    let groups = process_groups(&rep);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].1, name, "{groups:?}");
    assert!(groups[0].2 >= 777, "{groups:?}");
    // The table's row too: "PID NAME".
    assert!(text.contains(&format!("{} {name}", groups[0].0)), "{text}");
}

#[test]
fn by_process_follows_execs_after_the_attach() {
    if !require_bpf("by_process_follows_execs_after_the_attach") {
        return;
    }
    let wl = workload();
    let json = scratch("by-process-exec-attach").join("t.json");
    // Waits for a line, then forks a child that execs the workload, then
    // execs the workload itself: both exec after the trace attached.
    let script = format!("read x; {wl} -g 333; exec {wl} -g 444", wl = wl.display());
    let mut sh = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id().to_string();
    let mut bg = Background::start(&[
        "trace",
        "-p",
        &pid,
        "--by",
        "process",
        "--json",
        json.to_str().unwrap(),
    ]);
    bg.attached();
    {
        use std::io::Write;
        let mut stdin = sh.stdin.take().unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    assert!(wait_bounded(&mut sh, LIMIT).success());
    let (st, err) = bg.finish(LIMIT);
    assert!(st.success(), "{err}");
    let rep = read_json(&json);
    let name = comm_of(wl);
    let groups = process_groups(&rep);
    // The forked child and the target, each named after what it ran last.
    let mut named: Vec<(String, u64)> = groups
        .iter()
        .filter(|g| g.2 > 0)
        .map(|g| (g.1.clone(), g.2))
        .collect();
    named.sort_by_key(|g| g.1);
    assert_eq!(
        named,
        [(name.clone(), 333), (name.clone(), 444)],
        "{groups:?}"
    );
    // The target itself kept its pid across the exec.
    let target = groups.iter().find(|g| g.0 == sh.id() as i64).unwrap();
    assert_eq!((target.1.as_str(), target.2), (name.as_str(), 444));
}
