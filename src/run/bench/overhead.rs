//! `bench overhead`: what a traced syscall costs. A loop of raw getppid
//! calls (`sockscope __getppid-loop`, so no C compiler is needed at run
//! time) timed inside the process, untraced, under sockscope in both
//! modes, under strace -c and perf trace -s where installed, and untraced
//! while sockscope traces another, idle process (the collateral cost every
//! process pays while the tracepoints are attached). Rounds are
//! interleaved so machine noise hits every configuration alike.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{BenchContext, Size};
use crate::probe::TargetSpec;
use crate::process::target::{self, Launched, STOP_GRACE, quote_block};
use crate::report::bench::overhead::{OverheadResult, OverheadRow};
use crate::run::exit::{self, fail};
use crate::signals::StopFlag;
use crate::trace::{self, TraceOptions};

/// Longest any single measured run may take.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// The raw loop: `calls` getppid syscalls after 1000 warm-up calls;
/// returns ns per call. What `sockscope __getppid-loop N` runs.
pub fn getppid_loop(calls: u64) -> f64 {
    for _ in 0..1000 {
        // SAFETY: getppid has no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    let t0 = Instant::now();
    for _ in 0..calls {
        // SAFETY: as above.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
    t0.elapsed().as_nanos() as f64 / calls.max(1) as f64
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Runs `argv` to completion (bounded) and returns the loop's ns/call from
/// its output.
fn measure(argv: &[OsString], what: &str) -> Result<f64> {
    let mut p = Launched::spawn(argv, None)?;
    if !target::wait_pidfd(p.exit_fd(), RUN_LIMIT) {
        p.stop(STOP_GRACE);
        return Err(fail(
            exit::TIMED_OUT,
            format!(
                "overhead run `{what}` did not finish within {} s",
                RUN_LIMIT.as_secs()
            ),
        ));
    }
    let st = p.try_exited();
    let text = p.log_tail(4096);
    let ns = text
        .lines()
        .rev()
        .find_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("ns_per_call="))
        })
        .and_then(|v| v.parse::<f64>().ok());
    match (st.map(|s| s.success()), ns) {
        (Some(true), Some(ns)) => Ok(ns),
        _ => Err(fail(
            if what.contains("sockscope") {
                exit::TRACER_FAILED
            } else {
                1
            },
            format!(
                "overhead run `{what}` failed ({}); its output:\n{}",
                st.map_or("did not exit".into(), target::describe_status),
                quote_block(&p.log_tail(2000))
            ),
        )),
    }
}

/// The loop run untraced while an in-process attach-mode trace watches an
/// idle process.
fn collateral(exe: &Path, calls: u64) -> Result<f64> {
    let idle_argv: Vec<OsString> = vec![exe.into(), "__idle".into(), "600".into()];
    let idle = Launched::spawn(&idle_argv, None)?;
    let stop = Arc::new(StopFlag::new()?);
    let (open_tx, open_rx) = mpsc::channel();
    let opts = TraceOptions {
        target: TargetSpec::Attach {
            pid: idle.pid,
            duration: None,
        },
        count_only: false,
        follow_forks: true,
        per_thread: false,
        max_threads: 16,
        verbose: false,
        handle_signals: false,
        stop: Some(Arc::clone(&stop)),
        window_opened: vec![open_tx],
        launch_holds: Vec::new(),
        by: Default::default(),
        max_series: 0,
        sinks: Default::default(),
    };
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("sockscope-trace".into())
        .spawn(move || {
            let _ = done_tx.send(trace::run(&opts));
        })
        .context("starting the tracer thread")?;
    struct Raise(Arc<StopFlag>);
    impl Drop for Raise {
        fn drop(&mut self) {
            self.0.raise();
        }
    }
    let _raise = Raise(Arc::clone(&stop));
    if open_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let why = match done_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Err(e)) => format!("{e:#}"),
            _ => "its window did not open within 30 s".into(),
        };
        return Err(fail(
            exit::TRACER_FAILED,
            format!("the tracer could not attach: {why}"),
        ));
    }
    let loop_argv: Vec<OsString> = vec![
        exe.into(),
        "__getppid-loop".into(),
        calls.to_string().into(),
    ];
    let ns = measure(&loop_argv, "collateral");
    stop.raise();
    match done_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(fail(
                exit::TRACER_FAILED,
                format!("the tracer failed: {e:#}"),
            ));
        }
        Err(_) => {
            return Err(fail(
                exit::TIMED_OUT,
                "the tracer did not finish within 30 s",
            ));
        }
    }
    drop(idle);
    ns
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// `bench overhead`.
pub struct Overhead;

impl super::Experiment for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }
    fn about(&self) -> &'static str {
        "The tracer's overhead on a getppid loop, against strace and perf (where installed)"
    }
    fn bpf(&self) -> Option<crate::probe::preflight::Programs> {
        Some(crate::probe::preflight::Programs::Tracing)
    }
    fn caveats(&self, machine: &crate::report::machine::Machine) -> Vec<String> {
        let mut c = crate::run::machine::caveats(machine, None, false);
        c.push(
            "A getppid loop is the worst case for a syscall tracer: almost nothing but \
             syscalls. A real server spends most of its time elsewhere."
                .into(),
        );
        c
    }
    fn run(
        &self,
        ctx: &mut BenchContext<'_>,
        size: Size,
    ) -> Result<(crate::report::bench::ExperimentResult, Vec<String>)> {
        let (o, ins) = run(ctx, size)?;
        Ok((o.into(), ins))
    }
}

/// Runs the rounds.
pub fn run(ctx: &mut BenchContext<'_>, size: Size) -> Result<(OverheadResult, Vec<String>)> {
    let (rounds, calls, slow) = match (size.quick, size.demo) {
        (true, _) => (1u32, 500_000u64, 5_000u64),
        (false, true) => (5, 1_000_000, 10_000),
        (false, false) => (7, 1_000_000, 20_000),
    };
    let exe = std::env::current_exe().context("locating the sockscope binary")?;
    let loop_argv = |n: u64| -> Vec<OsString> {
        vec![
            exe.clone().into(),
            "__getppid-loop".into(),
            n.to_string().into(),
        ]
    };
    let strace = which("strace");
    let perf = which("perf").filter(|p| {
        let mut probe = std::process::Command::new(p);
        target::dies_with_us(&mut probe)
            .args(["trace", "-s", "-o", "/dev/null", "--", "true"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let mut skipped = Vec::new();
    if strace.is_none() {
        skipped.push("strace -c: strace is not installed".to_string());
    }
    if perf.is_none() {
        skipped.push("perf trace -s: perf is not installed or cannot trace here".to_string());
    }
    type Cfg = (&'static str, &'static str);
    let mut configs: Vec<Cfg> = vec![
        ("untraced", "untraced"),
        ("count_only", "sockscope trace --count-only"),
        ("latency", "sockscope trace (latency, default)"),
    ];
    if strace.is_some() {
        configs.push(("strace", "strace -f -c"));
    }
    if perf.is_some() {
        configs.push(("perf_trace", "perf trace -s"));
    }
    configs.push((
        "collateral",
        "untraced, while sockscope traces another process",
    ));
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    ctx.progress(&format!(
        "bench overhead: {rounds} round(s) of getppid x {calls} (strace, perf trace: x {slow})"
    ));
    for r in 1..=rounds {
        for (i, (key, _)) in configs.iter().enumerate() {
            ctx.check_signals()?;
            let ns = match *key {
                "untraced" => measure(&loop_argv(calls), key)?,
                "count_only" | "latency" => {
                    let mut argv: Vec<OsString> =
                        vec![exe.clone().into(), "-q".into(), "trace".into()];
                    if *key == "count_only" {
                        argv.push("--count-only".into());
                    }
                    argv.push("--".into());
                    argv.extend(loop_argv(calls));
                    measure(&argv, &format!("sockscope {key}"))?
                }
                "strace" => {
                    let mut argv: Vec<OsString> = vec![
                        strace.clone().expect("checked").into(),
                        "-f".into(),
                        "-c".into(),
                        "-o".into(),
                        "/dev/null".into(),
                        "--".into(),
                    ];
                    argv.extend(loop_argv(slow));
                    measure(&argv, key)?
                }
                "perf_trace" => {
                    let mut argv: Vec<OsString> = vec![
                        perf.clone().expect("checked").into(),
                        "trace".into(),
                        "-s".into(),
                        "-o".into(),
                        "/dev/null".into(),
                        "--".into(),
                    ];
                    argv.extend(loop_argv(slow));
                    measure(&argv, key)?
                }
                _ => collateral(&exe, calls)?,
            };
            results[i].push(ns);
        }
        ctx.progress(&format!(
            "  round {r}: {}",
            configs
                .iter()
                .zip(&results)
                .map(|((k, _), v)| format!("{k} {:.1} ns", v.last().copied().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let base = median(&results[0]).max(1e-9);
    let rows: Vec<OverheadRow> = configs
        .iter()
        .zip(results)
        .map(|((key, label), v)| {
            let m = median(&v);
            OverheadRow {
                config: key.to_string(),
                label: label.to_string(),
                median_ns: m,
                ratio: m / base,
                added_ns: m - base,
                rounds_ns: v,
            }
        })
        .collect();
    let ins = insights(&rows);
    Ok((
        OverheadResult {
            calls,
            slow_calls: slow,
            rounds,
            rows,
            skipped,
        },
        ins,
    ))
}

fn insights(rows: &[OverheadRow]) -> Vec<String> {
    let get = |k: &str| rows.iter().find(|r| r.config == k);
    let mut out = Vec::new();
    if let Some(u) = get("untraced") {
        out.push(format!(
            "An untraced getppid call took {:.1} ns.",
            u.median_ns
        ));
    }
    for (k, what) in [
        ("count_only", "sockscope --count-only"),
        ("latency", "sockscope with latency"),
        ("strace", "strace -c"),
        ("perf_trace", "perf trace -s"),
    ] {
        if let Some(r) = get(k) {
            out.push(format!(
                "Under {what} it took {:.1} ns ({:.2}x, {:.0} ns added per call).",
                r.median_ns, r.ratio, r.added_ns
            ));
        }
    }
    if let (Some(l), Some(s)) = (get("latency"), get("strace")) {
        if l.added_ns > 0.0 {
            out.push(format!(
                "strace adds {:.0} times what sockscope's latency mode adds per call.",
                s.added_ns / l.added_ns
            ));
        }
    }
    if let Some(c) = get("collateral") {
        out.push(format!(
            "While sockscope traces another process, an untraced one pays {:.1} ns per call \
             ({:.2}x): the kernel's syscall tracepoint path runs for every process while the \
             programs are attached.",
            c.median_ns, c.ratio
        ));
    }
    out
}
