//! Sampled stacks end to end (issue 25): `trace --stacks` and `profile`
//! on programs whose answer is known (tests/workload/stacks_prog.c, built
//! here with and without frame pointers, and stripped), on Debian's own
//! nginx (its agreement with `perf record --call-graph dwarf` is
//! tests/stacks_perf.rs), and through the lives a target can have (exit,
//! exec, sockscope killed).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::{Reaped, read_json, require_bpf, run_bounded, scratch, serial, sockscope};
use serde_json::Value;

// The tests run one at a time (common::serial): the shares they check are
// of the target's own time, but a sleeper's wait is measured until it is
// woken, and siblings' busy loops would make its wakeups late and the
// graphs noisy.

/// The fixture built with `flags` (once per test binary), at a path named
/// `name`; `strip` strips the copy of its symbols.
fn build(name: &str, flags: &[&str], strip: bool) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workload/stacks_prog.c");
    let st = Command::new("cc")
        .args(flags)
        .args(["-Wall", "-o"])
        .arg(&tmp)
        .arg(&src)
        .status()
        .expect("running cc (is gcc installed? `make deps` installs it)");
    assert!(st.success(), "compiling {}", src.display());
    if strip {
        let st = Command::new("strip")
            .arg(&tmp)
            .status()
            .expect("running strip");
        assert!(st.success());
    }
    std::fs::rename(&tmp, &out).unwrap();
    out
}

fn no_fp() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| build("stacks_prog", &["-O2", "-fomit-frame-pointer"], false))
}

fn with_fp() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        build(
            "stacks_prog_fp",
            &[
                "-O2",
                "-fno-omit-frame-pointer",
                "-mno-omit-leaf-frame-pointer",
            ],
            false,
        )
    })
}

fn stripped() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        build(
            "stacks_prog_stripped",
            &["-O2", "-fomit-frame-pointer"],
            true,
        )
    })
}

/// The fixture running `mode` for `secs`, once it said "ready"; killed on
/// drop.
struct Prog(Reaped);

impl Prog {
    fn start(bin: &Path, mode: &str, secs: f64) -> Prog {
        let mut child = Command::new(bin)
            .args([mode, &secs.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        Prog(Reaped(child))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// `sockscope trace --stacks ARGS --json DIR/t.json`; returns the report's
/// stacks section, after checking the run succeeded.
fn trace_stacks(dir: &Path, args: &[&str]) -> Value {
    trace_with(dir, "--stacks", args)
}

/// [`trace_stacks`] with `mode` (`--stacks` or `--stacks-only`).
fn trace_with(dir: &Path, mode: &str, args: &[&str]) -> Value {
    trace_status(dir, mode, args, 0)
}

/// [`trace_with`], the run expected to exit with `code`.
fn trace_status(dir: &Path, mode: &str, args: &[&str], code: i32) -> Value {
    let json = dir.join("t.json");
    let mut all = vec!["trace", mode, "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let (st, _out, err) = run_bounded(&all, Duration::from_secs(60));
    assert_eq!(st.code(), Some(code), "trace {all:?} ({st}): {err}");
    let rep = read_json(&json);
    let s = rep["stacks"].clone();
    assert!(s.is_object(), "no stacks section: {err}");
    s
}

/// (frames root first, weight) of a graph's stacks.
fn stacks_of(graph: &Value) -> Vec<(Vec<String>, u64)> {
    graph["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().to_string())
                    .collect(),
                s["weight"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn weight_with(stacks: &[(Vec<String>, u64)], pred: impl Fn(&[String]) -> bool) -> u64 {
    stacks.iter().filter(|(f, _)| pred(f)).map(|(_, w)| w).sum()
}

fn has(frames: &[String], name: &str) -> bool {
    frames.iter().any(|f| f == name)
}

/// The 70/30 program: shares within 5 points, names resolved, main()
/// reached in at least 90 % of the hot functions' samples.
fn check_split(bin: &Path, test: &str) {
    let dir = scratch(test);
    let prog = Prog::start(bin, "split", 8.0);
    let pid = prog.pid().to_string();
    let pprof = dir.join("cpu.pb.gz");
    let s = trace_stacks(
        &dir,
        &[
            "--stack-hz",
            "299",
            "--stacks-pprof",
            pprof.to_str().unwrap(),
            "-p",
            &pid,
            "--duration",
            "4",
        ],
    );
    drop(prog);
    // The same samples as a pprof profile, read by Go's own pprof.
    if common::require_program("go", test) {
        common::pprof::check_against(&s["on_cpu"], &pprof, 5, test);
    }
    let st = stacks_of(&s["on_cpu"]);
    let seventy = weight_with(&st, |f| has(f, "hot_seventy"));
    let thirty = weight_with(&st, |f| has(f, "hot_thirty"));
    let hot = seventy + thirty;
    assert!(
        hot >= 300,
        "{test}: only {hot} samples in the hot functions: {s:#}"
    );
    let share = seventy as f64 / hot as f64;
    assert!(
        (0.65..=0.75).contains(&share),
        "{test}: hot_seventy has {:.1} % of the hot samples (70 expected): {seventy} vs {thirty}",
        share * 100.0
    );
    let via_middle = weight_with(&st, |f| {
        (has(f, "hot_seventy") || has(f, "hot_thirty")) && has(f, "middle_layer")
    });
    let to_main = weight_with(&st, |f| {
        (has(f, "hot_seventy") || has(f, "hot_thirty")) && has(f, "middle_layer") && has(f, "main")
    });
    assert!(
        via_middle as f64 >= 0.9 * hot as f64 && to_main as f64 >= 0.9 * hot as f64,
        "{test}: of {hot} hot samples, {via_middle} went through middle_layer and {to_main} \
         reached main: {s:#}"
    );
    // The order on the stack: main, then middle_layer, then the hot one.
    let ordered = weight_with(&st, |f| {
        let pos = |n: &str| f.iter().position(|x| x == n);
        matches!((pos("main"), pos("middle_layer"), pos("hot_seventy")), (Some(a), Some(b), Some(c)) if a < b && b < c)
    });
    assert!(
        ordered > 0,
        "{test}: no stack reads main;middle_layer;hot_seventy"
    );
    let top: Vec<&str> = s["on_cpu"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &top[..2],
        &["hot_seventy", "hot_thirty"],
        "{test}: top functions"
    );
}

#[test]
fn split_70_30_without_frame_pointers() {
    if !require_bpf("split_70_30_without_frame_pointers") {
        return;
    }
    let _serial = serial();
    check_split(no_fp(), "stacks-nofp");
}

#[test]
fn split_70_30_with_frame_pointers() {
    if !require_bpf("split_70_30_with_frame_pointers") {
        return;
    }
    let _serial = serial();
    check_split(with_fp(), "stacks-fp");
}

#[test]
fn stripped_binary_gives_module_offsets_and_a_note() {
    if !require_bpf("stripped_binary_gives_module_offsets_and_a_note") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-stripped");
    let prog = Prog::start(stripped(), "split", 6.0);
    let pid = prog.pid().to_string();
    let s = trace_stacks(&dir, &["-p", &pid, "--duration", "2"]);
    drop(prog);
    let st = stacks_of(&s["on_cpu"]);
    assert!(s["on_cpu"]["total"].as_u64().unwrap() > 50, "{s:#}");
    let in_module = weight_with(&st, |f| {
        f.iter().any(|x| x.starts_with("stacks_prog_stripped+0x"))
    });
    assert!(
        in_module as f64 > 0.5 * s["on_cpu"]["total"].as_u64().unwrap() as f64,
        "the stripped binary's frames are not module+offset: {s:#}"
    );
    // No name is made up for a function the file does not name.
    assert_eq!(weight_with(&st, |f| has(f, "hot_seventy")), 0, "{s:#}");
    let notes = s["unsymbolized"].as_array().unwrap();
    let note = notes
        .iter()
        .find(|n| {
            n["path"]
                .as_str()
                .unwrap()
                .ends_with("stacks_prog_stripped")
        })
        .unwrap_or_else(|| panic!("no note for the stripped binary: {notes:?}"));
    assert!(note["frames"].as_u64().unwrap() > 0);
    assert!(!note["hint"].as_str().unwrap().is_empty());
}

#[test]
fn syscall_loop_has_kernel_frames_beneath_user_frames() {
    if !require_bpf("syscall_loop_has_kernel_frames_beneath_user_frames") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-syscalls");
    let prog = Prog::start(no_fp(), "syscalls", 6.0);
    let pid = prog.pid().to_string();
    let s = trace_stacks(&dir, &["--stack-hz", "199", "-p", &pid, "--duration", "2"]);
    drop(prog);
    let st = stacks_of(&s["on_cpu"]);
    let in_loop = weight_with(&st, |f| has(f, "syscall_loop"));
    // Kernel frames come after (beneath) every user frame, and the read
    // path is among them.
    let kernel_below = weight_with(&st, |f| {
        let Some(u) = f.iter().position(|x| x == "syscall_loop") else {
            return false;
        };
        let first_k = f.iter().position(|x| x.ends_with("_[k]"));
        first_k.is_some_and(|k| k > u)
            && f[first_k.unwrap()..].iter().all(|x| x.ends_with("_[k]"))
            && f.iter().any(|x| x.ends_with("_[k]") && x.contains("read"))
    });
    assert!(in_loop > 100, "{s:#}");
    assert!(
        kernel_below as f64 >= 0.5 * in_loop as f64,
        "{kernel_below} of {in_loop} samples in syscall_loop show the kernel's read path \
         beneath it: {s:#}"
    );
}

#[test]
fn off_cpu_half_asleep_shows_the_wait() {
    if !require_bpf("off_cpu_half_asleep_shows_the_wait") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-offcpu");
    let prog = Prog::start(no_fp(), "sleeper", 8.0);
    let pid = prog.pid().to_string();
    let s = trace_stacks(&dir, &["--off-cpu", "-p", &pid, "--duration", "4"]);
    drop(prog);
    let off = &s["off_cpu"];
    assert_eq!(off["unit"], "nanoseconds", "{s:#}");
    let st = stacks_of(off);
    let waited = weight_with(&st, |f| has(f, "sleepy_cycle") && has(f, "main"));
    let window_ns = s["cost"]["window_s"].as_f64().unwrap() * 1e9;
    let share = waited as f64 / window_ns;
    assert!(
        (0.40..=0.60).contains(&share),
        "the sleeper waited {:.1} % of the window in sleepy_cycle (50 expected): {off:#}",
        share * 100.0
    );
    // Where it waits: the kernel's sleep path is named beneath it.
    let in_sleep = weight_with(&st, |f| {
        has(f, "sleepy_cycle")
            && f.iter()
                .any(|x| x.ends_with("_[k]") && x.contains("nanosleep"))
    });
    assert!(in_sleep as f64 >= 0.9 * waited as f64, "{off:#}");
}

#[test]
fn target_that_exits_mid_run_keeps_its_samples() {
    if !require_bpf("target_that_exits_mid_run_keeps_its_samples") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-exit");
    let prog = Prog::start(no_fp(), "split", 2.0);
    let pid = prog.pid().to_string();
    // Exit 1: the window ended before --duration; what it sampled is kept.
    let s = trace_status(&dir, "--stacks", &["-p", &pid, "--duration", "20"], 1);
    drop(prog);
    let st = stacks_of(&s["on_cpu"]);
    let hot = weight_with(&st, |f| has(f, "hot_seventy") || has(f, "hot_thirty"));
    assert!(hot > 50, "samples before the exit are lost: {s:#}");
    assert!(s["cost"]["window_s"].as_f64().unwrap() < 10.0);
}

#[test]
fn exec_mid_run_names_both_images() {
    if !require_bpf("exec_mid_run_names_both_images") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-exec");
    let json = dir.join("t.json");
    let bin = no_fp().to_str().unwrap();
    let (st, _o, err) = run_bounded(
        &[
            "trace",
            "--stacks",
            "--json",
            json.to_str().unwrap(),
            "--",
            bin,
            "exec",
            "5",
        ],
        Duration::from_secs(60),
    );
    assert!(st.success(), "{err}");
    let s = read_json(&json)["stacks"].clone();
    let stacks = stacks_of(&s["on_cpu"]);
    let before = weight_with(&stacks, |f| has(f, "hot_seventy"));
    let after = weight_with(&stacks, |f| has(f, "syscall_loop"));
    assert!(
        before > 30 && after > 30,
        "before exec {before} samples named, after {after}: {s:#}"
    );
}

#[test]
fn sigkill_of_sockscope_leaves_nothing_attached() {
    if !require_bpf("sigkill_of_sockscope_leaves_nothing_attached") {
        return;
    }
    let _serial = serial();
    let prog = Prog::start(no_fp(), "split", 20.0);
    let pid = prog.pid().to_string();
    let mut bg = common::Background::start(&["trace", "--stacks", "-p", &pid, "--duration", "30"]);
    bg.line_with("stack sampling attached");
    let me = bg.child.id();
    let held = common::progs::prog_ids_of(me);
    assert!(!held.is_empty(), "sockscope holds no BPF program");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(me as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = bg.child.wait();
    let left = common::procs::wait_for(Duration::from_secs(10), || {
        let loaded: Vec<u32> = common::progs::loaded_programs()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        held.iter().all(|id| !loaded.contains(id)).then_some(())
    });
    assert!(
        left.is_some(),
        "programs {held:?} are still loaded after SIGKILL"
    );
    drop(prog);
}

#[test]
fn comm_and_system_scopes_sample_their_tasks() {
    if !require_bpf("comm_and_system_scopes_sample_their_tasks") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-scopes");
    let prog = Prog::start(no_fp(), "split", 10.0);
    let s = trace_stacks(&dir, &["--comm", "stacks_prog", "--duration", "2"]);
    let st = stacks_of(&s["on_cpu"]);
    assert!(weight_with(&st, |f| has(f, "hot_seventy")) > 20, "{s:#}");
    assert!(
        st.iter().all(|(f, _)| f[0] == "stacks_prog"),
        "a task outside --comm was sampled: {s:#}"
    );
    // The whole machine, with the sampler alone (no syscall tracer).
    let s = trace_with(&dir, "--stacks-only", &["--system", "--duration", "2"]);
    let st = stacks_of(&s["on_cpu"]);
    assert!(
        weight_with(&st, |f| f[0] == "stacks_prog" && has(f, "hot_seventy")) > 20,
        "{s:#}"
    );
    drop(prog);
}

#[test]
fn stacks_only_samples_without_the_tracer() {
    if !require_bpf("stacks_only_samples_without_the_tracer") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-only");
    let prog = Prog::start(no_fp(), "sleeper", 8.0);
    let pid = prog.pid().to_string();
    let json = dir.join("s.json");
    let mut bg = common::Background::start(&[
        "trace",
        "--stacks-only",
        "--off-cpu",
        "--json",
        json.to_str().unwrap(),
        "-p",
        &pid,
        "--duration",
        "3",
    ]);
    bg.line_with("sampling stacks of");
    // Only the sampler's programs: no syscall hook.
    let names = common::progs::program_names_of(bg.child.id());
    assert!(
        !names.is_empty() && names.iter().all(|n| !n.contains("sys_enter")),
        "{names:?}"
    );
    let (st, err) = bg.finish(Duration::from_secs(30));
    assert!(st.success(), "{err}");
    drop(prog);
    let rep = read_json(&json);
    assert_eq!(rep["schema"], "sockscope.stacks");
    let s = &rep["stacks"];
    assert!(
        weight_with(&stacks_of(&s["on_cpu"]), |f| has(f, "sleepy_cycle")) > 10,
        "{s:#}"
    );
    assert!(
        weight_with(&stacks_of(&s["off_cpu"]), |f| has(f, "sleepy_cycle")) > 0,
        "{s:#}"
    );
    assert!(rep["target_cpu"]["cpu_s"].as_f64().unwrap() > 0.5);
    assert!(s["cost"]["target_share"].as_f64().is_some(), "{s:#}");
    assert!(
        err.contains("hot") || err.contains("sleepy_cycle"),
        "no table on stderr: {err}"
    );
}

#[test]
fn folded_file_adds_up_to_the_graph() {
    if !require_bpf("folded_file_adds_up_to_the_graph") {
        return;
    }
    let _serial = serial();
    let dir = scratch("stacks-folded");
    let folded = dir.join("cpu.folded");
    let offf = dir.join("off.folded");
    let (on_pprof, off_pprof) = (dir.join("cpu.pb.gz"), dir.join("off.pb.gz"));
    let prog = Prog::start(no_fp(), "sleeper", 6.0);
    let pid = prog.pid().to_string();
    let s = trace_stacks(
        &dir,
        &[
            "--off-cpu",
            "--stacks-folded",
            folded.to_str().unwrap(),
            "--offcpu-folded",
            offf.to_str().unwrap(),
            "--stacks-pprof",
            on_pprof.to_str().unwrap(),
            "--offcpu-pprof",
            off_pprof.to_str().unwrap(),
            "-p",
            &pid,
            "--duration",
            "2",
        ],
    );
    drop(prog);
    for (file, graph) in [(&folded, &s["on_cpu"]), (&offf, &s["off_cpu"])] {
        let text = std::fs::read_to_string(file).unwrap();
        let mut sum = 0u64;
        let mut lines = BTreeMap::new();
        for l in text.lines() {
            let (stack, n) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            sum += n.parse::<u64>().unwrap();
            assert!(!stack.is_empty() && lines.insert(stack.to_string(), ()).is_none());
        }
        assert_eq!(sum, graph["total"].as_u64().unwrap(), "{}", file.display());
    }
    if common::require_program("go", "folded_file_adds_up_to_the_graph") {
        common::pprof::check_against(&s["on_cpu"], &on_pprof, 3, "on-CPU pprof");
        common::pprof::check_against(&s["off_cpu"], &off_pprof, 3, "off-CPU pprof");
    }
}

#[test]
fn usage_errors_exit_2() {
    let _serial = serial();
    for args in [
        &["trace", "--stacks", "--stack-hz", "0", "-p", "1"][..],
        &["trace", "--stacks", "--stack-hz", "5000", "-p", "1"],
        &["trace", "--stack-hz", "99", "-p", "1"],
        &["trace", "--stacks-folded", "/tmp/x", "-p", "1"],
        &["trace", "--stacks", "--requests-only", "-p", "1"],
        &["trace", "--stacks", "--offcpu-folded", "/tmp/x", "-p", "1"],
        &["trace", "--stacks", "--offcpu-pprof", "/tmp/x", "-p", "1"],
        &[
            "trace",
            "--stacks",
            "--stacks-pprof",
            "/tmp/x",
            "--stacks-folded",
            "/tmp/x",
            "-p",
            "1",
        ],
        &[
            "profile",
            "--no-stacks",
            "--stack-hz",
            "9",
            "--pid",
            "1",
            "--duration",
            "1",
        ],
        &["trace", "--stacks-only", "--", "true"],
        &["trace", "--stacks-only", "--per-thread", "-p", "1"],
        &["trace", "--stacks-only", "--requests", "-p", "1"],
    ] {
        let out = Command::new(sockscope()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn nginx_stacks_are_deep_and_named() {
    if !require_bpf("nginx_stacks_are_deep_and_named") {
        return;
    }
    let _serial = serial();
    let Some(nginx) = common::nginx::Nginx::start("stacks-nginx") else {
        return;
    };
    let dir = scratch("stacks-nginx-run");
    let out = dir.join("prof");
    let master = nginx.child.id() as i32;
    let mut profile = Command::new(sockscope())
        .args([
            "profile",
            "--quiet",
            "--pid",
            &master.to_string(),
            "--stack-hz",
            "199",
            "--load",
            "http -c 4 -d 6",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = common::wait_bounded(&mut profile, Duration::from_secs(90));
    let mut err = String::new();
    std::io::Read::read_to_string(profile.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(st.success(), "profile failed: {err}");
    let rep = read_json(&out.join("run.json"));
    let s = &rep["stacks"];
    let on = &s["on_cpu"];
    assert!(on["total"].as_u64().unwrap() > 300, "{s:#}");
    let deep = on["deep_share"].as_f64().unwrap();
    assert!(
        deep >= 0.9,
        "only {:.0} % of nginx's samples are deeper than 3 frames",
        deep * 100.0
    );
    let ours: Vec<(String, f64)> = on["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["self_share"].as_f64().unwrap(),
            )
        })
        .collect();
    // Debian's nginx has no frame pointers: unwound through its own
    // functions, named from its symbols (nginx exports them).
    let st = stacks_of(on);
    let through_ngx = weight_with(&st, |f| f.iter().any(|x| x.starts_with("ngx_")));
    assert!(
        through_ngx as f64 >= 0.5 * on["total"].as_u64().unwrap() as f64,
        "only {through_ngx} samples pass through an ngx_ function: {ours:?}"
    );
    // The report shows it: the flame graph's page.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains(&ours[0].0),
        "report.html does not name {}",
        ours[0].0
    );
}
