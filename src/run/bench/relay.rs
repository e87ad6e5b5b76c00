//! `bench relay`: tcp-rr through each of `serve relay`'s data paths
//! (userspace, splice, sockmap), through HAProxy in TCP mode (the peer,
//! when installed) and straight to the echo server (the ceiling), all to
//! the same `serve echo`, in interleaved rounds.
//!
//! Untraced: a syscall tracer charges every syscall, so it would slow the
//! userspace path (four syscalls a transaction) and barely touch sockmap
//! (none): the comparison itself would be bent. CPU is read from /proc
//! around each point instead, split between the relay, the upstream, the
//! generator and the kernel's worker threads, with the whole machine's
//! busy time as the total: sockmap's redirects run in kworkers that no
//! process is charged for, and leaving them out would flatter it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{BenchContext, Size};
use crate::load;
use crate::process::ready::Proto;
use crate::process::target::{Launched, STOP_GRACE, quote_block};
use crate::procfs;
use crate::report::bench::relay::{RelayPoint, RelayResult, RelayRun};
use crate::report::serve::relay::RelayReport;
use crate::report::units::{human_bytes, human_ns};
use crate::run::exit::{self, fail};

/// What each point sends: (message bytes, connections).
type Shape = (u32, u32);

/// The points to run.
pub struct RelayPlan {
    shapes: &'static [Shape],
    secs: f64,
    warmup: f64,
    rounds: u32,
}

impl RelayPlan {
    /// The full sweep, the demo's, or the quick one.
    pub fn new(size: Size) -> Self {
        const ALL: &[Shape] = &[(1024, 10), (1024, 100), (1024, 1000), (65536, 4)];
        match (size.quick, size.demo) {
            (true, _) => RelayPlan {
                shapes: &[(1024, 10), (1024, 100), (65536, 4)],
                secs: 0.5,
                warmup: 0.1,
                rounds: 1,
            },
            (false, true) => RelayPlan {
                shapes: ALL,
                secs: 1.5,
                warmup: 0.3,
                rounds: 1,
            },
            (false, false) => RelayPlan {
                shapes: ALL,
                secs: 4.0,
                warmup: 1.0,
                rounds: 3,
            },
        }
    }
}

/// A path the transactions take to the echo server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    Direct,
    Haproxy,
    Relay(&'static str),
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Haproxy => "haproxy",
            Route::Relay(m) => m,
        }
    }
}

/// Finds the haproxy binary (Debian puts it in /usr/sbin, which a
/// non-root PATH may lack).
fn find_haproxy() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d| d.join("haproxy"))
        .find(|p| p.is_file())
}

fn haproxy_version(bin: &Path) -> Option<String> {
    let mut cmd = std::process::Command::new(bin);
    let out = crate::process::target::dies_with_us(&mut cmd)
        .arg("-v")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}

/// HAProxy sizes its descriptor table from maxconn (two per connection
/// and a few more) and refuses to start when the hard limit is lower.
fn haproxy_maxconn() -> u64 {
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(4096, |(_, h)| h);
    (hard.saturating_sub(100) / 2).clamp(64, 20_000)
}

/// A free loopback port for HAProxy (it cannot bind port 0 and report it).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// The longest a path just started may take to relay its first message.
const FIRST_MESSAGE_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Sends one message through a path just started and reads it back from
/// the echo upstream. A path's listener appears before its loops serve
/// (and a new process's first requests fault its code in, which takes
/// long on a machine busy with I/O): its first point's short window must
/// measure the path serving, not its start. Not a measurement; a path
/// that never relays fails here, saying so.
fn relays_a_message(addr: SocketAddr) -> std::result::Result<(), String> {
    use std::io::{Read, Write};
    let msg: Vec<u8> = (0..1024u32).map(|i| (i % 251) as u8).collect();
    let mut s = std::net::TcpStream::connect_timeout(&addr, FIRST_MESSAGE_WITHIN)
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(FIRST_MESSAGE_WITHIN))
        .and_then(|()| s.set_write_timeout(Some(FIRST_MESSAGE_WITHIN)))
        .map_err(|e| format!("socket timeout: {e}"))?;
    s.write_all(&msg).map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; msg.len()];
    s.read_exact(&mut back)
        .map_err(|e| format!("reading the echo: {e}"))?;
    if back != msg {
        return Err("the echo differs from the message".into());
    }
    Ok(())
}

/// A started relay (or HAProxy) and where to reach it.
struct Started {
    proc_: Option<Launched>,
    addr: SocketAddr,
    /// It hands back its own report (a sockscope relay).
    reports: bool,
}

fn start(
    p: Route,
    exe: &Path,
    upstream: SocketAddr,
    haproxy: Option<&Path>,
    scratch: &Path,
) -> Result<Started> {
    match p {
        Route::Direct => Ok(Started {
            proc_: None,
            addr: upstream,
            reports: false,
        }),
        Route::Haproxy => {
            let bin = haproxy.context("haproxy is not installed")?;
            let port = free_port()?;
            let cfg = scratch.join("haproxy.cfg");
            std::fs::write(
                &cfg,
                format!(
                    "global\n    maxconn {}\n    nbthread {}\ndefaults\n    mode tcp\n    \
                     timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n\
                     frontend f\n    bind 127.0.0.1:{port}\n    default_backend b\n\
                     backend b\n    server s1 {upstream}\n",
                    haproxy_maxconn(),
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ),
            )
            .context("writing haproxy.cfg")?;
            let argv: Vec<OsString> =
                vec![bin.into(), "-db".into(), "-f".into(), cfg.into_os_string()];
            let mut l = Launched::spawn(&argv, None)?;
            let addr = super::wait_socket(&mut l, Proto::TcpListen, "haproxy")?;
            Ok(Started {
                proc_: Some(l),
                addr,
                reports: false,
            })
        }
        Route::Relay(mode) => {
            let argv: Vec<OsString> = vec![
                exe.into(),
                "serve".into(),
                "relay".into(),
                "--upstream".into(),
                upstream.to_string().into(),
                "--mode".into(),
                mode.into(),
                // A sockmap that falls back to userspace would be measured
                // under the wrong name.
                "--strict".into(),
            ];
            let mut l = Launched::spawn_reporting(&argv, None)?;
            let addr =
                super::wait_socket(&mut l, Proto::TcpListen, &format!("serve relay {mode}"))?;
            Ok(Started {
                proc_: Some(l),
                addr,
                reports: true,
            })
        }
    }
}

/// Stops a started path; a sockscope relay must stop cleanly and leave its
/// report, which is returned.
fn stop(p: Route, s: &mut Started) -> Result<Option<RelayReport>> {
    let Some(l) = s.proc_.as_mut() else {
        return Ok(None);
    };
    let rec = l.stop(STOP_GRACE);
    let broken = |why: String| {
        fail(
            exit::TARGET_DIED,
            format!(
                "{} {why}; its output:\n{}",
                p.name(),
                quote_block(&l.log_tail(2000))
            ),
        )
    };
    if rec.signal == "SIGKILL" {
        return Err(broken(format!(
            "did not stop within {} s of SIGTERM",
            STOP_GRACE.as_secs()
        )));
    }
    if rec.signal == "none" {
        return Err(broken("exited by itself during the experiment".into()));
    }
    if !s.reports {
        return Ok(None);
    }
    if !rec.clean() {
        return Err(broken(format!("did not stop cleanly ({})", rec.describe())));
    }
    let bytes = l
        .report()
        .map_err(|e| broken(format!("left no report ({e:#})")))?;
    let rep: RelayReport = serde_json::from_slice(&bytes)
        .map_err(|e| broken(format!("wrote an unreadable report ({e})")))?;
    Ok(Some(rep))
}

/// CPU counters read before and after a point, in clock ticks.
#[derive(Clone, Copy)]
struct Cpu {
    relay: Option<u64>,
    upstream: u64,
    generator: u64,
    workers: u64,
    machine: u64,
}

impl Cpu {
    fn read(relay: Option<i32>, upstream: i32) -> Cpu {
        Cpu {
            relay: relay.and_then(procfs::process_cpu_ticks),
            upstream: procfs::process_cpu_ticks(upstream).unwrap_or(0),
            generator: procfs::process_cpu_ticks(std::process::id() as i32).unwrap_or(0),
            workers: procfs::kernel_worker_cpu_ticks(),
            machine: procfs::machine_busy_ticks().unwrap_or(0),
        }
    }
}

/// One round of one point.
struct Sample {
    rate: f64,
    p50: u64,
    p99: u64,
    errors: u64,
    relay: Option<f64>,
    workers: f64,
    upstream: f64,
    generator: f64,
    machine: f64,
}

fn measure(
    ctx: &mut BenchContext<'_>,
    p: Route,
    s: &mut Started,
    upstream: &mut Launched,
    (bytes, conns): Shape,
    plan: &RelayPlan,
) -> Result<Sample> {
    let line: Vec<String> = format!(
        "tcp-rr {} -c {conns} -d {} --warmup {} --req {bytes} --verify --timeout 5 \
         --connect-rate 2000",
        s.addr, plan.secs, plan.warmup
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    let relay_pid = s.proc_.as_ref().map(|l| l.pid);
    let before = Cpu::read(relay_pid, upstream.pid);
    let outcome = load::execute(load::registry::parse_line(&line)?, true)?;
    let after = Cpu::read(relay_pid, upstream.pid);
    let what = format!("{} at {conns} x {bytes} B", p.name());
    let when = format!("during {what}");
    ctx.check_load(&outcome.report, &when)?;
    if let Some(l) = s.proc_.as_mut() {
        super::check_alive(l, exit::TARGET_DIED, p.name(), &when)?;
    }
    super::check_alive(upstream, exit::TARGET_DIED, "the echo upstream", &when)?;
    let r = &outcome.report;
    if let Some(why) = outcome.failure {
        // What the path itself counted says where the bytes stopped.
        let detail = match stop(p, s) {
            Ok(Some(rep)) => format!(
                "; the relay's own report:\n{}",
                crate::serve::relay::report::render(&rep)
            ),
            Ok(None) => String::new(),
            Err(e) => format!("; {e:#}"),
        };
        return Err(fail(
            exit::LOAD_FAILED,
            format!("relay point {what}: the load failed: {why}{detail}"),
        ));
    }
    // CPU is read around the whole load (connections and warm-up
    // included), so it is divided by every transaction done in it.
    let all_tx = (r.transactions
        + r.warmup_transactions
        + r.errors.answered_after_end
        + r.errors.unanswered_at_end)
        .max(1);
    let hz = procfs::clock_ticks();
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz * 1e6 / all_tx as f64;
    let lat = r.latency.as_ref().map(|l| &l.summary);
    Ok(Sample {
        rate: r.rate_per_s,
        p50: lat.map_or(0, |l| l.p50_ns),
        p99: lat.map_or(0, |l| l.p99_ns),
        errors: r.errors.total,
        relay: match (before.relay, after.relay) {
            (Some(a), Some(b)) => Some(per(a, b)),
            _ => None,
        },
        workers: per(before.workers, after.workers),
        upstream: per(before.upstream, after.upstream),
        generator: per(before.generator, after.generator),
        machine: per(before.machine, after.machine),
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median_u64(v: &[u64]) -> u64 {
    let mut f: Vec<f64> = v.iter().map(|x| *x as f64).collect();
    median(&mut f) as u64
}

/// `bench relay`.
pub struct Relay;

impl super::Experiment for Relay {
    fn name(&self) -> &'static str {
        "relay"
    }
    fn about(&self) -> &'static str {
        "serve relay's data paths (userspace, splice, sockmap) against HAProxy (when installed) \
         and the echo server reached directly"
    }
    fn bpf(&self) -> Option<crate::probe::preflight::Programs> {
        Some(crate::probe::preflight::Programs::Sockmap)
    }
    fn caveats(&self, machine: &crate::report::machine::Machine) -> Vec<String> {
        super::loopback_caveats(
            machine,
            &[
                "Relay, echo server and load generator share this machine's CPUs: a path that \
               costs more CPU anywhere (kernel workers included) leaves less for the others, \
               which is why the machine-wide CPU per transaction is the column to compare.",
            ],
        )
    }
    fn run(
        &self,
        ctx: &mut BenchContext<'_>,
        size: Size,
    ) -> Result<(crate::report::bench::ExperimentResult, Vec<String>)> {
        let (r, ins) = run(ctx, size)?;
        Ok((r.into(), ins))
    }
}

/// Runs every round; returns the result and its sentences.
pub fn run(ctx: &mut BenchContext<'_>, size: Size) -> Result<(RelayResult, Vec<String>)> {
    let plan = RelayPlan::new(size);
    let exe = std::env::current_exe().context("locating the sockscope binary")?;
    let haproxy = find_haproxy();
    let mut skipped = Vec::new();
    let mut paths = vec![Route::Direct];
    match &haproxy {
        Some(_) => paths.push(Route::Haproxy),
        None => skipped.push(
            "haproxy: not installed (apt install haproxy), so there is no peer to compare with"
                .to_string(),
        ),
    }
    paths.extend([
        Route::Relay("userspace"),
        Route::Relay("splice"),
        Route::Relay("sockmap"),
    ]);
    ctx.progress(&format!(
        "bench relay: {} paths x {} points x {} round(s) of {} s",
        paths.len(),
        plan.shapes.len(),
        plan.rounds,
        plan.secs
    ));
    let scratch = ctx.scratch("relay")?;
    let echo_argv: Vec<OsString> = vec![
        exe.clone().into(),
        "serve".into(),
        "echo".into(),
        "--transport".into(),
        "epoll".into(),
    ];
    let mut echo = Launched::spawn(&echo_argv, None)?;
    let upstream = super::wait_socket(&mut echo, Proto::TcpListen, "the echo upstream")?;

    let mut samples: Vec<(Route, Shape, Sample)> = Vec::new();
    let mut relay_runs = Vec::new();
    for round in 1..=plan.rounds {
        for &p in &paths {
            ctx.check_signals()?;
            let dir = scratch.join(format!("round{round}"));
            std::fs::create_dir_all(&dir)?;
            let mut s = start(p, &exe, upstream, haproxy.as_deref(), &dir)?;
            if let Err(why) = relays_a_message(s.addr) {
                let log = s
                    .proc_
                    .as_ref()
                    .map(|l| l.log_tail(2000))
                    .unwrap_or_default();
                let _ = stop(p, &mut s);
                return Err(fail(
                    exit::TARGET_DIED,
                    format!(
                        "{} listens at {} but did not relay a first message to the echo \
                         upstream within {} s ({why}); its output:\n{}",
                        p.name(),
                        s.addr,
                        FIRST_MESSAGE_WITHIN.as_secs(),
                        quote_block(&log)
                    ),
                ));
            }
            for &shape in plan.shapes {
                ctx.check_signals()?;
                let x = measure(ctx, p, &mut s, &mut echo, shape, &plan)?;
                ctx.progress(&format!(
                    "  round {round} {:<9} {:>5} B x {:>4} conns: {:>8.0} tx/s  p99 {:>8}  relay {:>7}  workers {:>6.2} us/tx  machine {:>6.2} us/tx",
                    p.name(),
                    shape.0,
                    shape.1,
                    x.rate,
                    human_ns(x.p99),
                    x.relay.map_or("-".into(), |v| format!("{v:.2} us")),
                    x.workers,
                    x.machine
                ));
                samples.push((p, shape, x));
            }
            if let Some(report) = stop(p, &mut s)? {
                relay_runs.push(RelayRun {
                    mode: p.name().into(),
                    round,
                    report,
                });
            }
        }
    }
    let stopped = echo.stop(STOP_GRACE);
    if stopped.signal != "SIGTERM" {
        return Err(fail(
            exit::TARGET_DIED,
            format!(
                "the echo upstream did not stop on SIGTERM ({}); its output:\n{}",
                stopped.signal,
                quote_block(&echo.log_tail(2000))
            ),
        ));
    }

    let mut points = Vec::new();
    for &p in &paths {
        for &shape in plan.shapes {
            let xs: Vec<&Sample> = samples
                .iter()
                .filter(|(q, s, _)| *q == p && *s == shape)
                .map(|t| &t.2)
                .collect();
            let med = |f: &dyn Fn(&Sample) -> f64| {
                median(&mut xs.iter().map(|x| f(x)).collect::<Vec<_>>())
            };
            points.push(RelayPoint {
                mode: p.name().into(),
                message_bytes: shape.0,
                connections: shape.1,
                rates_per_s: xs.iter().map(|x| x.rate).collect(),
                rate_per_s: med(&|x| x.rate),
                p50_ns: median_u64(&xs.iter().map(|x| x.p50).collect::<Vec<_>>()),
                p99_ns: median_u64(&xs.iter().map(|x| x.p99).collect::<Vec<_>>()),
                errors: xs.iter().map(|x| x.errors).sum(),
                relay_cpu_us_per_transaction: (p != Route::Direct)
                    .then(|| med(&|x| x.relay.unwrap_or(0.0))),
                kernel_workers_cpu_us_per_transaction: med(&|x| x.workers),
                upstream_cpu_us_per_transaction: med(&|x| x.upstream),
                generator_cpu_us_per_transaction: med(&|x| x.generator),
                machine_cpu_us_per_transaction: med(&|x| x.machine),
            });
        }
    }
    let res = RelayResult {
        seconds_per_point: plan.secs,
        warmup_s: plan.warmup,
        rounds: plan.rounds,
        upstream: format!("sockscope serve echo --transport epoll ({upstream})"),
        modes: paths.iter().map(|p| p.name().to_string()).collect(),
        haproxy_version: haproxy.as_deref().and_then(haproxy_version),
        points,
        relay_runs,
        skipped,
    };
    let ins = insights(&res);
    Ok((res, ins))
}

fn point<'a>(r: &'a RelayResult, mode: &str, bytes: u32, conns: u32) -> Option<&'a RelayPoint> {
    r.points
        .iter()
        .find(|p| p.mode == mode && p.message_bytes == bytes && p.connections == conns)
}

/// The sentences: who wins where, by how much, and where the CPU went.
pub fn insights(r: &RelayResult) -> Vec<String> {
    let mut out = Vec::new();
    let mut shapes: Vec<(u32, u32)> = Vec::new();
    for p in &r.points {
        if !shapes.contains(&(p.message_bytes, p.connections)) {
            shapes.push((p.message_bytes, p.connections));
        }
    }
    for &(b, c) in &shapes {
        let relays: Vec<&RelayPoint> = r
            .points
            .iter()
            .filter(|p| p.message_bytes == b && p.connections == c && p.mode != "direct")
            .collect();
        let Some(best) = relays
            .iter()
            .max_by(|x, y| x.rate_per_s.total_cmp(&y.rate_per_s))
        else {
            continue;
        };
        let mut parts = vec![format!(
            "{} leads with {:.0} tx/s",
            best.mode, best.rate_per_s
        )];
        for p in &relays {
            if p.mode != best.mode && best.rate_per_s > 0.0 {
                parts.push(format!("{} {:.2}x", p.mode, p.rate_per_s / best.rate_per_s));
            }
        }
        if let Some(d) = point(r, "direct", b, c).filter(|d| d.rate_per_s > 0.0) {
            parts.push(format!(
                "the echo server reached directly does {:.0} tx/s ({:.2}x the best relay)",
                d.rate_per_s,
                d.rate_per_s / best.rate_per_s.max(1.0)
            ));
        }
        out.push(format!(
            "{b} B messages on {c} connections: {}.",
            parts.join(", ")
        ));
    }
    if let Some(&(b, c)) = shapes.iter().filter(|s| s.0 <= 4096).max_by_key(|s| s.1) {
        if let (Some(u), Some(h)) = (point(r, "userspace", b, c), point(r, "haproxy", b, c)) {
            if h.rate_per_s > 0.0 {
                out.push(format!(
                    "At {c} connections of {b} B, the userspace relay does {:.2}x HAProxy's \
                     transactions per second ({:.0} vs {:.0}).",
                    u.rate_per_s / h.rate_per_s,
                    u.rate_per_s,
                    h.rate_per_s
                ));
            }
        }
        if let (Some(u), Some(s)) = (point(r, "userspace", b, c), point(r, "sockmap", b, c)) {
            let (ur, sr) = (
                u.relay_cpu_us_per_transaction.unwrap_or(0.0),
                s.relay_cpu_us_per_transaction.unwrap_or(0.0),
            );
            let (uw, sw) = (
                u.kernel_workers_cpu_us_per_transaction,
                s.kernel_workers_cpu_us_per_transaction,
            );
            let why = if sw > 2.0 * uw + 1.0 {
                ", because the kernel carries each redirected message in a worker thread \
                 (the sk_psock backlog), charged to no process"
            } else {
                ""
            };
            out.push(format!(
                "Where the CPU went at {c} connections of {b} B: the userspace relay process \
                 used {ur:.2} us per transaction and kernel workers {uw:.2} us; with sockmap the \
                 relay process used {sr:.2} us and kernel workers {sw:.2} us{why}. Machine-wide: \
                 {:.2} vs {:.2} us per transaction.",
                u.machine_cpu_us_per_transaction, s.machine_cpu_us_per_transaction
            ));
        }
    }
    let sockmap: Vec<&RelayRun> = r
        .relay_runs
        .iter()
        .filter(|x| x.mode == "sockmap")
        .collect();
    if !sockmap.is_empty() {
        let moved: u64 = sockmap
            .iter()
            .map(|x| {
                x.report.counters.bytes_client_to_upstream
                    + x.report.counters.bytes_upstream_to_client
            })
            .sum();
        let through: u64 = sockmap
            .iter()
            .map(|x| x.report.counters.bytes_through_userspace)
            .sum();
        let redirected: u64 = sockmap
            .iter()
            .filter_map(|x| x.report.verdict.as_ref())
            .map(|v| v.redirected_skbs)
            .sum();
        out.push(format!(
            "sockmap moved {} with {} of it through the relay's memory; its verdict program \
             redirected {redirected} skbs in the kernel.",
            human_bytes(moved),
            human_bytes(through)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(mode: &str, bytes: u32, conns: u32, rate: f64) -> RelayPoint {
        RelayPoint {
            mode: mode.into(),
            message_bytes: bytes,
            connections: conns,
            rates_per_s: vec![rate],
            rate_per_s: rate,
            p50_ns: 1,
            p99_ns: 2,
            errors: 0,
            relay_cpu_us_per_transaction: (mode != "direct").then_some(10.0),
            kernel_workers_cpu_us_per_transaction: if mode == "sockmap" { 20.0 } else { 0.1 },
            upstream_cpu_us_per_transaction: 5.0,
            generator_cpu_us_per_transaction: 5.0,
            machine_cpu_us_per_transaction: 30.0,
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median_u64(&[10, 30, 20]), 20);
    }

    #[test]
    fn insights_name_the_leader_and_the_ratio_to_haproxy() {
        let r = RelayResult {
            seconds_per_point: 1.0,
            warmup_s: 0.0,
            rounds: 1,
            upstream: "u".into(),
            modes: vec![],
            haproxy_version: None,
            points: vec![
                pt("direct", 1024, 100, 200_000.0),
                pt("haproxy", 1024, 100, 80_000.0),
                pt("userspace", 1024, 100, 100_000.0),
                pt("sockmap", 1024, 100, 50_000.0),
            ],
            relay_runs: vec![],
            skipped: vec![],
        };
        let s = insights(&r);
        assert!(s[0].contains("userspace leads with 100000 tx/s"), "{s:?}");
        assert!(
            s[0].contains("haproxy 0.80x") && s[0].contains("sockmap 0.50x"),
            "{s:?}"
        );
        assert!(s[0].contains("(2.00x the best relay)"), "{s:?}");
        assert!(s.iter().any(|l| l.contains("1.25x HAProxy")), "{s:?}");
        assert!(
            s.iter().any(|l| l.contains("kernel workers 20.00 us")),
            "{s:?}"
        );
    }
}
