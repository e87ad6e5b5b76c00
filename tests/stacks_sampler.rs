//! The stack sampler's BPF side (src/bpf/stacks.bpf.c, src/stacks/bpf.rs)
//! through `sockscope __stacks-raw`, on small C programs compiled here:
//! on-CPU samples of a busy loop and of a syscall loop, off-CPU waits of a
//! thread that sleeps half the time, and the tree scope. Needs root and BPF
//! (skipped with a reason outside CI).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Reaped;
use serde_json::Value;

/// A busy loop in a named function for SECS seconds.
const BUSY: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void spin(void) { for (int i = 0; i < 1000; i++) sink += i; }
int main(int argc, char **argv) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int k = 0; k < 100; k++) spin();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < atoi(argv[1]));
    return 0;
}
"#;

/// getppid() and a write to /dev/null in a loop for SECS seconds.
const SYSCALLS: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open("/dev/null", O_WRONLY);
    char b[64] = {0};
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int k = 0; k < 1000; k++) { getppid(); write(fd, b, sizeof b); }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < atoi(argv[1]));
    return 0;
}
"#;

/// Waits for a byte on stdin, then for SECS seconds: busy 10 ms, sleeps
/// 10 ms in nanosleep; prints the time it spent in nanosleep (its own
/// clock around each call: the ground truth of its off-CPU time).
const HALF: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static volatile unsigned long sink;
/* This thread's run time (the clock counts the slice under way, which
 * schedstat's first field does not yet) and its wait on run queues, ns. */
static void sched(int fd, double *run, double *queued) {
    char b[128];
    struct timespec t;
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0) exit(2);
    b[n] = 0;
    unsigned long long r, q;
    if (sscanf(b, "%llu %llu", &r, &q) != 2) exit(2);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    *run = t.tv_sec * 1e9 + t.tv_nsec; *queued = q;
}
int main(int argc, char **argv) {
    char c;
    if (read(0, &c, 1) != 1) return 1;
    int fd = open("/proc/thread-self/schedstat", O_RDONLY);
    if (fd < 0) return 2;
    double end = now() + atoi(argv[1]), slept = 0;
    struct timespec ten = {0, 10000000};
    while (now() < end) {
        double b = now() + 0.010;
        while (now() < b) sink++;
        /* Asleep: the call's wall time less what the thread ran and what
         * it waited for a CPU once woken (a busy machine's run queue). */
        double r0, q0, r1, q1, s = now();
        sched(fd, &r0, &q0);
        nanosleep(&ten, 0);
        sched(fd, &r1, &q1);
        slept += (now() - s) * 1e9 - (r1 - r0) - (q1 - q0);
    }
    printf("slept_ns %.0f\n", slept);
    return 0;
}
"#;

/// Three threads that wait through any window that opens after it says
/// "ready": one asleep 60 s, one sleeping 1 s at a time, and the main
/// thread in pthread_join.
const EDGES: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static void *asleep(void *a) { (void)a; sleep(60); return 0; }
static void *seconds(void *a) {
    (void)a;
    for (int i = 0; i < 60; i++) sleep(1);
    return 0;
}
int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, asleep, 0);
    pthread_create(&b, 0, seconds, 0);
    printf("ready\n");
    fflush(stdout);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
"#;

/// Compiles `src` as `name` into `dir` with cc.
fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).unwrap();
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .expect("running cc (is gcc installed? `make deps` installs it)");
    assert!(st.success(), "compiling {name}");
    exe
}

fn spawn(exe: &Path, args: &[&str], stdin: Stdio) -> Reaped {
    Reaped(
        Command::new(exe)
            .args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// What `__stacks-raw` printed: the sample lines and the last line.
struct Raw {
    samples: Vec<Value>,
    last: Value,
}

impl Raw {
    fn parse(stdout: &[u8]) -> Self {
        let mut lines: Vec<Value> = String::from_utf8_lossy(stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        let last = lines.pop().expect("a last line");
        assert!(last["counters"].is_object(), "last line: {last}");
        Self {
            samples: lines,
            last,
        }
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.samples.iter().filter(|s| s["kind"] == kind).collect()
    }

    fn counter(&self, name: &str) -> u64 {
        self.last["counters"][name].as_u64().unwrap()
    }
}

/// Samples `pid`'s tree for `secs` and waits for the lines.
fn sample(pid: u32, secs: u64, extra: &[&str]) -> Raw {
    let pid = pid.to_string();
    let secs_s = secs.to_string();
    let mut args = vec!["__stacks-raw", "--pid", &pid, "--secs", &secs_s];
    args.extend_from_slice(extra);
    let (st, out, err) = common::run_bounded(&args, Duration::from_secs(secs + 60));
    assert!(st.success(), "__stacks-raw failed: {err}");
    Raw::parse(out.as_bytes())
}

#[test]
fn a_busy_loop_gets_a_sample_per_tick_of_its_cpu_time_with_user_registers_and_stack() {
    if !common::require_bpf("a_busy_loop_gets_a_sample_per_tick") {
        return;
    }
    let dir = common::scratch("stacks-busy");
    let busy = compile(&dir, "busy", BUSY);
    let child = spawn(&busy, &["20"], Stdio::null());
    let pid = child.0.id();
    let raw = sample(pid, 2, &["--hz", "99"]);
    let on = raw.of_kind("on");
    // The samples a 99 Hz clock owes the CPU time the loop had in the
    // window (its own threads' scheduler time, not the wall clock: the
    // machine is shared, and a preempted loop is not on a CPU).
    let cpu_ns = raw.last["pid_cpu_ns"].as_u64().unwrap();
    let expected = cpu_ns as f64 * 99.0 / 1e9;
    assert!(
        expected > 20.0,
        "the loop had only {cpu_ns} ns of CPU in the window: nothing to judge"
    );
    assert!(
        on.len() as f64 >= 0.8 * expected,
        "{} samples for {cpu_ns} ns of CPU at 99 Hz (expected about {expected:.0})",
        on.len()
    );
    for s in &on {
        assert_eq!(s["pid"], pid, "{s}");
        assert_eq!(s["tid"], pid, "{s}");
        assert!(s["user_ip"].as_u64().is_some_and(|ip| ip > 0), "{s}");
        assert!(s["user_sp"].as_u64().is_some_and(|sp| sp > 0), "{s}");
        assert!(s["stack_bytes"].as_u64().unwrap() >= 64, "{s}");
        assert_eq!(s["comm"], "busy", "{s}");
    }
    assert_eq!(raw.counter("samples"), on.len() as u64);
    assert_eq!(raw.counter("lost"), 0);
    assert_eq!(raw.counter("copy_failed"), 0);
    assert!(raw.counter("bpf_ns") > 0);
    // Every CPU's clock owes 99 ticks a second of the window: those that
    // fired and the periods that had none add up to them
    // (one per CPU may fall outside: the first comes up to a period after
    // the event is enabled, the last before it is disabled).
    let window_s = raw.last["window_ns"].as_u64().unwrap() as f64 / 1e9;
    // SAFETY: sysconf reads a constant of the running system.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as f64;
    let due = window_s * 99.0 * cpus;
    let (ticks, missed) = (raw.counter("ticks"), raw.counter("ticks_missed"));
    assert!(
        ticks >= on.len() as u64,
        "{ticks} ticks, {} samples",
        on.len()
    );
    let counted = (ticks + missed) as f64;
    assert!(
        counted >= 0.9 * due - cpus && counted <= 1.05 * due + cpus,
        "{ticks} ticks fired and {missed} skipped over {window_s:.2} s on {cpus} CPUs at 99 Hz \
         (due: {due:.0})"
    );
}

#[test]
fn a_syscall_loop_has_kernel_frames_beneath_its_user_registers() {
    if !common::require_bpf("a_syscall_loop_has_kernel_frames") {
        return;
    }
    let dir = common::scratch("sampler-syscalls");
    let exe = compile(&dir, "sysloop", SYSCALLS);
    let child = spawn(&exe, &["20"], Stdio::null());
    let raw = sample(child.0.id(), 2, &[]);
    let on = raw.of_kind("on");
    assert!(on.len() >= 20, "only {} samples", on.len());
    let in_kernel = on
        .iter()
        .filter(|s| s["kernel_frames"].as_u64().unwrap() > 0)
        .count();
    // The loop spends most of its time between syscall entry and exit;
    // the ticks there carry the kernel's frames (a busy loop's carry none).
    assert!(
        in_kernel * 10 >= on.len() * 3,
        "{in_kernel} of {} samples have kernel frames",
        on.len()
    );
    for s in &on {
        // In the kernel too, the user registers are those of its entry.
        assert!(s["user_ip"].as_u64().is_some_and(|ip| ip > 0), "{s}");
        assert!(s["stack_bytes"].as_u64().unwrap() >= 64, "{s}");
    }
}

#[test]
fn a_thread_sleeping_half_the_time_shows_its_sleep_weighted_by_time() {
    if !common::require_bpf("a_thread_sleeping_half_the_time") {
        return;
    }
    let dir = common::scratch("sampler-offcpu");
    let exe = compile(&dir, "half", HALF);
    let mut child = spawn(&exe, &["3"], Stdio::piped());
    let pid = child.0.id().to_string();
    let out = dir.join("raw.jsonl");
    let mut sampler = common::Background::start_with_stdout(
        &["__stacks-raw", "--pid", &pid, "--secs", "6", "--off-cpu"],
        std::fs::File::create(&out).unwrap(),
    );
    sampler.line_with("sampling process");
    // Its three seconds begin now, inside the sampler's window.
    child.0.stdin.take().unwrap().write_all(b"x").unwrap();
    let mut said = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let slept_ns: f64 = said
        .strip_prefix("slept_ns ")
        .unwrap_or_else(|| panic!("the program said {said:?}"))
        .trim()
        .parse()
        .unwrap();
    let (st, err) = sampler.finish(Duration::from_secs(60));
    assert!(st.success(), "__stacks-raw failed: {err}");
    let raw = Raw::parse(&std::fs::read(&out).unwrap());
    let nanosleep = libc::SYS_clock_nanosleep as u64;
    let off = raw.of_kind("off");
    let waits: Vec<&&Value> = off
        .iter()
        .filter(|s| s["syscall"].as_u64() == Some(nanosleep))
        .collect();
    let weight: u64 = waits.iter().map(|s| s["weight_ns"].as_u64().unwrap()).sum();
    // Busy 10 ms, asleep 10 ms: half of its 3 s, or less when the shared
    // machine stretches the busy part. The truth the sampled weight must
    // meet within 10 % is the program's own: each nanosleep's wall time
    // less the thread's run time and run-queue wait in it (schedstat),
    // since a wait ends at the wake-up, not when a busy CPU takes the
    // woken thread.
    assert!(
        slept_ns > 1.0e9,
        "the program slept only {slept_ns} ns: nothing to judge"
    );
    let ratio = weight as f64 / slept_ns;
    // What else was recorded, for a failure's message: waits written with
    // kernel frames only (no syscall), and samples the ring buffer lost.
    let unknown: u64 = off
        .iter()
        .filter(|s| s["syscall"].as_u64().is_none_or(|n| n == 0))
        .map(|s| s["weight_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(raw.counter("lost"), 0, "the ring buffer lost samples");
    assert!(
        (0.9..=1.1).contains(&ratio),
        "off-CPU weight {weight} ns in nanosleep vs {slept_ns:.0} ns slept ({ratio:.3}); \
         {unknown} ns in waits without a syscall"
    );
    assert!(waits.len() >= 50, "only {} nanosleep waits", waits.len());
    for s in &waits {
        assert_eq!(s["state"], "S", "{s}");
        assert!(s["user_ip"].as_u64().is_some_and(|ip| ip > 0), "{s}");
        assert!(s["stack_bytes"].as_u64().unwrap() >= 64, "{s}");
        assert!(s["kernel_frames"].as_u64().unwrap() > 0, "{s}");
    }
    assert_eq!(raw.counter("off_cpu_samples"), off.len() as u64);
}

#[test]
fn waits_across_the_window_edges_count_their_part_inside_it() {
    if !common::require_bpf("waits_across_the_window_edges") {
        return;
    }
    let dir = common::scratch("sampler-edges");
    let exe = compile(&dir, "edges", EDGES);
    let mut child = spawn(&exe, &[], Stdio::null());
    let mut said = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said, "ready\n");
    // Every wait began before the window: the 60 s sleep and the join last
    // through it, and one of the 1 s sleeps is under way as it opens and
    // another as it closes.
    let raw = sample(child.0.id(), 3, &["--off-cpu"]);
    drop(child);
    let window_ns = raw.last["window_ns"].as_u64().unwrap() as f64;
    let off = raw.of_kind("off");
    let mut by_thread: std::collections::BTreeMap<u64, Vec<&Value>> = Default::default();
    for s in &off {
        by_thread
            .entry(s["tid"].as_u64().unwrap())
            .or_default()
            .push(s);
    }
    assert_eq!(by_thread.len(), 3, "three threads wait: {off:#?}");
    let futex = libc::SYS_futex as u64;
    let nanosleep = libc::SYS_clock_nanosleep as u64;
    let mut syscalls = Vec::new();
    for (tid, waits) in &by_thread {
        // Each waited the whole window, less its wake-ups' run time and
        // run-queue time (a few ms a second on a busy machine) and plus the
        // attach and detach around the window's clock reads (a few ms).
        let weight: u64 = waits.iter().map(|s| s["weight_ns"].as_u64().unwrap()).sum();
        let share = weight as f64 / window_ns;
        assert!(
            (0.95..=1.02).contains(&share),
            "thread {tid} waited {share:.3} of the window: {waits:#?}"
        );
        // The wait going on as the window closed is written then, with the
        // frames it waits in.
        let open: Vec<_> = waits.iter().filter(|s| s["open"] == true).collect();
        assert_eq!(open.len(), 1, "thread {tid}: {waits:#?}");
        let last = open[0];
        assert_eq!(last["state"], "S", "{last}");
        assert!(last["kernel_frames"].as_u64().unwrap() > 0, "{last}");
        assert!(last["user_ip"].as_u64().is_some_and(|ip| ip > 0), "{last}");
        assert!(last["stack_bytes"].as_u64().unwrap() >= 64, "{last}");
        syscalls.push(last["syscall"].as_u64().unwrap());
    }
    syscalls.sort_unstable();
    let mut want = vec![futex, nanosleep, nanosleep];
    want.sort_unstable();
    assert_eq!(
        syscalls, want,
        "the join waits in futex, the sleeps in clock_nanosleep"
    );
    assert_eq!(raw.counter("lost"), 0);
}

#[test]
fn a_process_outside_the_tree_gets_no_samples() {
    if !common::require_bpf("a_process_outside_the_tree_gets_no_samples") {
        return;
    }
    let dir = common::scratch("stacks-scope");
    let busy = compile(&dir, "busy", BUSY);
    let inside = spawn(&busy, &["20"], Stdio::null());
    let outside = spawn(&busy, &["20"], Stdio::null());
    let raw = sample(inside.0.id(), 2, &[]);
    let on = raw.of_kind("on");
    assert!(
        on.len() >= 20,
        "only {} samples of the sampled loop",
        on.len()
    );
    let strays: Vec<&&Value> = on.iter().filter(|s| s["pid"] != inside.0.id()).collect();
    assert!(
        strays.is_empty(),
        "samples of other processes (the other loop is {}): {strays:?}",
        outside.0.id()
    );
}

#[test]
fn sigkill_of_the_sampler_leaves_nothing_attached() {
    if !common::require_bpf("sigkill_of_the_sampler_leaves_nothing_attached") {
        return;
    }
    let dir = common::scratch("stacks-kill");
    let busy = compile(&dir, "busy", BUSY);
    let child = spawn(&busy, &["30"], Stdio::null());
    let pid = child.0.id().to_string();
    let mut sampler = common::Background::start_with_stdout(
        &["__stacks-raw", "--pid", &pid, "--secs", "30"],
        std::fs::File::create(dir.join("raw.jsonl")).unwrap(),
    );
    sampler.line_with("sampling process");
    let names = common::progs::program_names_of(sampler.child.id());
    assert!(
        names.iter().any(|n| n == "ss_tick"),
        "the sampler holds {names:?}"
    );
    let held = common::progs::prog_ids_of(sampler.child.id());
    sampler.child.kill().unwrap();
    let _ = sampler.child.wait();
    // The kernel frees a program once its last link and descriptor close;
    // that follows the process's exit closely, but not synchronously.
    let left = common::procs::wait_for(Duration::from_secs(10), || {
        let loaded: Vec<u32> = common::progs::loaded_programs()
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| held.contains(id))
            .collect();
        loaded.is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "programs {held:?} still loaded after SIGKILL"
    );
}
