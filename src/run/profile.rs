//! `sockscope profile`: launch (or find) a target, wait until it owns a
//! listening socket, trace it while a load runs against it, stop it, and
//! assemble one artifact from the load's and the trace's reports.
//!
//! Threads: the caller's thread blocks SIGINT/SIGTERM/SIGHUP/SIGCHLD first
//! (so every thread started here inherits the mask), a tracer thread runs
//! `trace::run` in attach mode, a watcher thread aborts the load if the
//! target dies, and the load runs on the calling thread. Every wait is
//! bounded; every process started here is stopped by a guard on every path.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use super::exit::{self, fail};
use super::loadline::LoadLine;
use super::machine;
use super::ready::{self, OwnedSocket, Proto};
use super::share;
use super::target::{self, Launched, STOP_GRACE, quote_block};
use crate::load::{self, LoadOutcome};
use crate::netpath::{EmulatedPath, NetPath};
use crate::report::insight;
use crate::report::machine::Machine;
use crate::report::profile::{
    ProfileReport, SCHEMA, SCHEMA_VERSION, Sharer, StopRecord, TargetRecord, Windows,
};
use crate::signals::{Signals, StopFlag};
use crate::trace::launch::RunAs;
use crate::trace::{self, TargetSpec, TraceOptions, TraceOutcome};

/// Longest wait for the tracer to load, attach and open its window.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the tracer to close its window and read its maps.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of the target's output an error message quotes.
const LOG_TAIL: u64 = 2000;

/// What to measure.
#[derive(Clone, Debug)]
pub enum ProfileTarget {
    /// Run this sockscope binary with these arguments (`serve echo ...`).
    Sockscope(Vec<String>),
    /// Run this program.
    Command(Vec<OsString>),
    /// Attach to this running process; it is not stopped afterwards.
    Pid(i32),
    /// Trace every process of this cgroup (a service under systemd or a
    /// container runtime); nothing in it is stopped afterwards.
    Cgroup(crate::trace::scope::CgroupTarget),
}

/// One profile run, parsed and validated.
#[derive(Clone, Debug)]
pub struct ProfileSpec {
    /// The target.
    pub target: ProfileTarget,
    /// The load line (address filled in once learned).
    pub load: LoadLine,
    /// Longest wait for the target to own a listening socket.
    pub ready_timeout: Duration,
    /// Trace with the entry hook only (no latency).
    pub count_only: bool,
    /// Collect kernel evidence (counters, sockets, run-queue delay).
    pub evidence: bool,
    /// Launched targets run as this user.
    pub run_as: Option<RunAs>,
    /// No progress bar.
    pub quiet: bool,
    /// The command line recorded in the artifact.
    pub command_line: Vec<String>,
    /// An emulated path between the load and the target (None: loopback
    /// or whatever address the target has).
    pub path: Option<crate::netpath::PathSpec>,
    /// How the path is built.
    pub path_backend: crate::netpath::BackendChoice,
}

/// The target while it is being measured: launched by us, or attached to.
struct Subject {
    launched: Option<Launched>,
    pid: i32,
    exit_fd: OwnedFd,
    /// It hands its own report back (a launched `serve echo`/`udp-sink`).
    reports: bool,
}

impl Subject {
    fn exited(&mut self) -> bool {
        match &mut self.launched {
            Some(l) => l.try_exited().is_some(),
            None => target::wait_pidfd(self.exit_fd.as_fd(), Duration::ZERO),
        }
    }

    fn log_tail(&self) -> String {
        self.launched
            .as_ref()
            .map(|l| quote_block(&l.log_tail(LOG_TAIL)))
            .unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!(
            "the target (pid {}, {})",
            self.pid,
            crate::procfs::comm(self.pid).unwrap_or_else(|| "gone".into())
        )
    }
}

/// Checks the arguments of a `--target`: a `--json` of its own is refused.
/// profile hands a serve target a descriptor for its report and embeds the
/// report in run.json; reading back a path the target wrote (it may run as
/// another user, who could put a link to any file there) is what it must
/// never do as root.
pub fn check_target_args(args: &[String]) -> Result<()> {
    if let Some(a) = args
        .iter()
        .find(|a| *a == "--json" || a.starts_with("--json="))
    {
        return Err(crate::error::usage(format!(
            "--target: leave out {a}: profile gives a serve target its own report descriptor \
             and puts the server's report in run.json (target.server_report)"
        )));
    }
    Ok(())
}

/// The processes of a cgroup and of every cgroup below it, oldest first
/// (the lowest pid stands for the service in messages and the evidence).
pub fn cgroup_pids(dir: &std::path::Path) -> Vec<i32> {
    fn walk(dir: &std::path::Path, out: &mut Vec<i32>, depth: u32) {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if depth >= 16 {
            return;
        }
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                // file_type() does not follow links: cgroupfs has none, and
                // a delegated subtree cannot plant one that we would walk.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out, depth + 1);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out, 0);
    out.sort_unstable();
    out.dedup();
    out
}

fn start(spec: &ProfileSpec, path: Option<&EmulatedPath>) -> Result<Subject> {
    let (argv, reports): (Vec<OsString>, bool) = match &spec.target {
        ProfileTarget::Cgroup(cg) => {
            let what = cg
                .unit
                .clone()
                .unwrap_or_else(|| format!("cgroup {}", cg.rel));
            let pids = cgroup_pids(&cg.path);
            let Some(first) = pids
                .iter()
                .find_map(|p| target::pidfd_open(*p).ok().map(|fd| (*p, fd)))
            else {
                return Err(fail(
                    exit::TARGET_EXITED_EARLY,
                    format!("{what}: no process is running in {}", cg.path.display()),
                ));
            };
            return Ok(Subject {
                launched: None,
                pid: first.0,
                exit_fd: first.1,
                reports: false,
            });
        }
        ProfileTarget::Pid(pid) => {
            let fd = target::pidfd_open(*pid).map_err(|e| {
                fail(
                    exit::TARGET_EXITED_EARLY,
                    format!("--pid {pid}: no such process ({e})"),
                )
            })?;
            return Ok(Subject {
                launched: None,
                pid: *pid,
                exit_fd: fd,
                reports: false,
            });
        }
        ProfileTarget::Command(argv) => (argv.clone(), false),
        ProfileTarget::Sockscope(args) => {
            check_target_args(args)?;
            let exe = std::env::current_exe().context("locating the sockscope binary")?;
            let mut argv: Vec<OsString> = vec![exe.into()];
            argv.extend(args.iter().map(OsString::from));
            let is_server = args.first().is_some_and(|a| a == "serve")
                && args.get(1).is_some_and(|a| a == "echo" || a == "udp-sink");
            // A serve target listens on 127.0.0.1 by default: on a path it
            // must listen on the path's address instead.
            if let Some(p) = path
                && args.first().is_some_and(|a| a == "serve")
                && !args
                    .iter()
                    .any(|a| a == "--listen" || a.starts_with("--listen="))
            {
                argv.push("--listen".into());
                argv.push(format!("{}:0", p.target_ip).into());
            }
            (argv, is_server)
        }
    };
    let run_as = spec.run_as.as_ref();
    let launched = if let Some(p) = path {
        Launched::spawn_in_netns(&argv, run_as, reports, p.target_netns())
    } else if reports {
        Launched::spawn_reporting(&argv, run_as)
    } else {
        Launched::spawn(&argv, run_as)
    }
    .map_err(|e| {
        fail(
            exit::TARGET_EXITED_EARLY,
            format!("the target could not be started: {e:#}"),
        )
    })?;
    let exit_fd = launched
        .exit_fd()
        .try_clone_to_owned()
        .context("duplicating the target's pidfd")?;
    Ok(Subject {
        pid: launched.pid,
        launched: Some(launched),
        exit_fd,
        reports,
    })
}

/// Fails with the interruption status if a stop signal is pending.
fn check_signals(signals: &mut Signals, what: &str) -> Result<()> {
    while let Some(si) = signals.pending() {
        if si.ssi_signo != Signal::SIGCHLD as u32 {
            return Err(exit::interrupted(si.ssi_signo, what));
        }
    }
    Ok(())
}

/// Waits until the target itself owns a socket the load can use; returns
/// the address to load and every socket it owns.
fn wait_ready(
    spec: &ProfileSpec,
    subject: &mut Subject,
    signals: &mut Signals,
    path_ip: Option<Ipv4Addr>,
) -> Result<(std::net::SocketAddr, Vec<OwnedSocket>)> {
    let proto = if spec.load.is_udp() {
        Proto::Udp
    } else {
        Proto::TcpListen
    };
    let kind = if spec.load.is_udp() {
        "a bound UDP socket"
    } else {
        "a listening TCP socket"
    };
    let explicit = spec
        .load
        .explicit()
        .map(crate::values::resolve)
        .transpose()?;
    let t0 = Instant::now();
    let deadline = t0 + spec.ready_timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        check_signals(signals, "while waiting for the target to be ready")?;
        if subject.exited() {
            let status = subject
                .launched
                .as_mut()
                .and_then(|l| l.try_exited())
                .map_or_else(|| "exited".to_string(), target::describe_status);
            let tail = subject.log_tail();
            let taken = ["in use", "EADDRINUSE"].iter().any(|w| tail.contains(w));
            let code = if taken {
                exit::PORT_TAKEN
            } else {
                exit::TARGET_EXITED_EARLY
            };
            let why = if taken {
                "its port is taken (address in use)"
            } else {
                "it never owned"
            };
            return Err(fail(
                code,
                format!(
                    "the target (pid {}) exited ({status}) before it was ready: {why}{}; its \
                     output:\n{tail}",
                    subject.pid,
                    if taken {
                        "".to_string()
                    } else {
                        format!(" {kind}")
                    },
                ),
            ));
        }
        let socks = ready_sockets(spec, subject.pid);
        match explicit {
            None => {
                let chosen = match path_ip {
                    Some(ip) => choose_on_path(subject, &socks, proto, ip)?,
                    None => ready::choose(&socks, proto),
                };
                if let Some(addr) = chosen {
                    return Ok((addr, socks));
                }
            }
            Some(addr) => {
                if ready::serves(&socks, proto, addr) {
                    return Ok((addr, socks));
                }
                let others =
                    ready::listeners_on_port(addr.port(), proto, &ready_tree(spec, subject.pid));
                let mine = socks.iter().any(|s| s.proto == proto);
                if mine && !others.is_empty() {
                    return Err(port_taken(subject, addr, &socks, &others));
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            if let Some(addr) = explicit {
                let others =
                    ready::listeners_on_port(addr.port(), proto, &ready_tree(spec, subject.pid));
                if !others.is_empty() {
                    return Err(port_taken(subject, addr, &socks, &others));
                }
            }
            return Err(not_ready(spec, subject, kind, proto, &socks, explicit));
        }
        // Wake early on the target's exit or a signal; otherwise re-read
        // /proc with a growing pause (5 ms doubling to 100 ms).
        let wait = pause.min(deadline - now);
        let mut pfds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(subject.exit_fd.as_fd(), PollFlags::POLLIN),
        ];
        let ms = wait.as_millis().max(1).min(i32::MAX as u128) as i32;
        let _ = poll(
            &mut pfds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        );
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// On a path: the target's path address with the port of a socket bound
/// to it or to a wildcard; an error when the target listens only on
/// addresses the path cannot reach (127.0.0.1).
fn choose_on_path(
    subject: &Subject,
    socks: &[OwnedSocket],
    proto: Proto,
    ip: Ipv4Addr,
) -> Result<Option<std::net::SocketAddr>> {
    let mine: Vec<&OwnedSocket> = socks.iter().filter(|s| s.proto == proto).collect();
    if let Some(s) = mine
        .iter()
        .find(|s| s.local.ip() == IpAddr::V4(ip) || s.local.ip().is_unspecified())
    {
        return Ok(Some(std::net::SocketAddr::new(
            IpAddr::V4(ip),
            s.local.port(),
        )));
    }
    if mine.is_empty() {
        return Ok(None);
    }
    Err(crate::error::usage(format!(
        "--path: {} listens on {} only, which the load in the other namespace cannot reach; \
         make it listen on the path's target address {ip} or a wildcard (0.0.0.0 / [::]); a \
         sockscope serve target gets --listen {ip}:0 when it has no --listen of its own",
        subject.describe(),
        fmt_sockets(socks, subject.pid)
    )))
}

/// The sockets that make the target ready: with --pid, those of the
/// traced tree (the pid and its descendants, as the tracer follows them),
/// so a master whose worker holds the listener (haproxy -W, nginx,
/// postgres) is ready; a launched target must hold it itself.
fn ready_sockets(spec: &ProfileSpec, pid: i32) -> Vec<OwnedSocket> {
    match &spec.target {
        ProfileTarget::Pid(_) => ready::tree_sockets(pid),
        ProfileTarget::Cgroup(cg) => cgroup_pids(&cg.path)
            .into_iter()
            .flat_map(ready::owned_sockets)
            .collect(),
        _ => ready::owned_sockets(pid),
    }
}

/// The processes whose sockets count as the target's (see
/// [`ready_sockets`]); anyone else listening on the port is someone else.
fn ready_tree(spec: &ProfileSpec, pid: i32) -> Vec<i32> {
    match &spec.target {
        ProfileTarget::Pid(_) => std::iter::once(pid)
            .chain(crate::procfs::descendants(pid))
            .collect(),
        ProfileTarget::Cgroup(cg) => cgroup_pids(&cg.path),
        _ => vec![pid],
    }
}

/// `tcp 127.0.0.1:80`, with the holder's pid when it is not `root`.
fn fmt_socket(s: &OwnedSocket, root: i32) -> String {
    format!(
        "{} {}{}",
        match s.proto {
            Proto::TcpListen => "tcp",
            Proto::Udp => "udp",
        },
        s.local,
        if s.pid == root {
            String::new()
        } else {
            format!(" (pid {})", s.pid)
        }
    )
}

fn fmt_sockets(socks: &[OwnedSocket], root: i32) -> String {
    if socks.is_empty() {
        return "none".into();
    }
    socks
        .iter()
        .map(|s| fmt_socket(s, root))
        .collect::<Vec<_>>()
        .join(", ")
}

fn port_taken(
    subject: &Subject,
    addr: std::net::SocketAddr,
    socks: &[OwnedSocket],
    others: &[(i32, String)],
) -> anyhow::Error {
    let who: Vec<String> = others
        .iter()
        .map(|(p, c)| format!("pid {p} ({c})"))
        .collect();
    fail(
        exit::PORT_TAKEN,
        format!(
            "{addr} is not served by {}: another process listens there ({}); the target owns: \
             {}. Give the load no address (profile learns the target's own) or the target's \
             address.",
            subject.describe(),
            who.join(", "),
            fmt_sockets(socks, subject.pid)
        ),
    )
}

fn not_ready(
    spec: &ProfileSpec,
    subject: &Subject,
    kind: &str,
    proto: Proto,
    socks: &[OwnedSocket],
    explicit: Option<std::net::SocketAddr>,
) -> anyhow::Error {
    let tree = matches!(
        spec.target,
        ProfileTarget::Pid(_) | ProfileTarget::Cgroup(_)
    );
    let mut msg = format!(
        "{}{} did not own {kind}{} within {:.1} s (--ready-timeout); {}: {}",
        subject.describe(),
        if tree { " and its descendants" } else { "" },
        explicit.map_or_else(String::new, |a| format!(" serving {a}")),
        spec.ready_timeout.as_secs_f64(),
        if tree { "they own" } else { "it owns" },
        fmt_sockets(socks, subject.pid)
    );
    if tree {
        // Its descendants' sockets are already in `socks`: there is no
        // child to point at, and --pid was given.
        return fail(exit::TIMED_OUT, msg);
    }
    let kids: Vec<String> = crate::procfs::descendants(subject.pid)
        .into_iter()
        .filter_map(|p| {
            let s: Vec<OwnedSocket> = ready::owned_sockets(p)
                .into_iter()
                .filter(|s| s.proto == proto)
                .collect();
            (!s.is_empty()).then(|| {
                format!(
                    "pid {p} ({}) owns {}",
                    crate::procfs::comm(p).unwrap_or_default(),
                    fmt_sockets(&s, p)
                )
            })
        })
        .collect();
    if !kids.is_empty() {
        msg.push_str(&format!(
            ". A child process does: {}. profile measures the process it launched itself; \
             start the server so that it is that process (e.g. `exec` in a shell wrapper) or \
             use --pid",
            kids.join("; ")
        ));
    }
    if subject.launched.is_some() {
        msg.push_str(&format!("; its output:\n{}", subject.log_tail()));
    }
    fail(exit::TIMED_OUT, msg)
}

/// Processes outside the traced tree (the target and its descendants) that
/// serve the load's address too.
fn find_sharers(spec: &ProfileSpec, pid: i32, addr: std::net::SocketAddr) -> Vec<Sharer> {
    let proto = if spec.load.is_udp() {
        Proto::Udp
    } else {
        Proto::TcpListen
    };
    share::sharers(&share::tree_of(pid), addr, proto)
}

/// Samples the load's connections when others serve the address and the
/// load keeps its connections (tcp-rr, http, redis, memcached; a
/// connection per transaction is too short-lived: its share comes from the
/// trace's accepts).
fn start_share_sampler(
    spec: &ProfileSpec,
    shared_with: &[Sharer],
    addr: std::net::SocketAddr,
    pid: i32,
) -> Result<Option<share::Sampler>> {
    if shared_with.is_empty() || !spec.load.persistent() {
        return Ok(None);
    }
    let others = shared_with.iter().map(|s| s.pid).collect();
    share::Sampler::start(addr, pid, others).map(Some)
}

/// The caveat of a run whose address others serve too.
fn attribution_caveat(d: &crate::report::profile::Derived) -> Option<String> {
    let a = d.attribution.as_ref()?;
    let pids: Vec<String> = a.shared_with.iter().map(|s| s.pid.to_string()).collect();
    Some(match a.share {
        Some(share) => format!(
            "Shared address: processes outside the traced tree (pids {}) serve it too; the \
             per-transaction target figures are over the traced tree's estimated share ({:.1}%), \
             an estimate ({}).",
            pids.join(", "),
            share * 100.0,
            a.method
        ),
        None => format!(
            "Shared address, UNATTRIBUTED: processes outside the traced tree (pids {}) serve \
             it too and the traced tree's share is unknown; the target's per-transaction \
             figures are null.",
            pids.join(", ")
        ),
    })
}

/// CPU time of a running thread of this process, s (0 once it ended).
fn thread_cpu_s(clock: Option<libc::clockid_t>) -> f64 {
    let Some(c) = clock else { return 0.0 };
    // SAFETY: timespec is plain data filled by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; an invalid clock id only returns an error.
    if unsafe { libc::clock_gettime(c, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn cpu_clock_of<T>(h: &JoinHandle<T>) -> Option<libc::clockid_t> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive (its handle is not joined).
    let rc = unsafe { libc::pthread_getcpuclockid(h.as_pthread_t(), &mut clock) };
    (rc == 0).then_some(clock)
}

/// The tracer thread; raising its stop flag on drop ends its window, so an
/// early return never leaves it attached longer than the process lives.
struct TracerThread {
    stop: Arc<StopFlag>,
    handle: Option<JoinHandle<()>>,
    opened: mpsc::Receiver<()>,
    done: mpsc::Receiver<Result<TraceOutcome>>,
}

impl Drop for TracerThread {
    fn drop(&mut self) {
        self.stop.raise();
    }
}

fn start_tracer(spec: &ProfileSpec, pid: i32, count_only: bool) -> Result<TracerThread> {
    let stop = Arc::new(StopFlag::new()?);
    let (open_tx, opened) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    let opts = TraceOptions {
        target: match &spec.target {
            ProfileTarget::Cgroup(cg) => TargetSpec::Scope {
                scope: trace::ScopeTarget::Cgroup(cg.clone()),
                duration: None,
            },
            _ => TargetSpec::Attach {
                pid,
                duration: None,
            },
        },
        count_only,
        follow_forks: true,
        per_thread: false,
        max_threads: 4096,
        verbose: false,
        handle_signals: false,
        stop: Some(Arc::clone(&stop)),
        window_opened: Some(open_tx),
        by: Default::default(),
        max_series: 0,
        sinks: Default::default(),
    };
    let handle = std::thread::Builder::new()
        .name("sockscope-trace".into())
        .spawn(move || {
            let _ = done_tx.send(trace::run(&opts));
        })
        .context("starting the tracer thread")?;
    Ok(TracerThread {
        stop,
        handle: Some(handle),
        opened,
        done,
    })
}

/// Waits for the tracer's window to open, watching the target and signals.
fn wait_window(tracer: &TracerThread, subject: &mut Subject, signals: &mut Signals) -> Result<()> {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        match tracer.opened.recv_timeout(Duration::from_millis(50)) {
            Ok(()) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let why = match tracer.done.recv_timeout(FINISH_TIMEOUT) {
                    Ok(Err(e)) => format!("{e:#}"),
                    Ok(Ok(_)) => "it ended before its window opened".into(),
                    Err(_) => "it stopped without a result".into(),
                };
                return Err(fail(
                    exit::TRACER_FAILED,
                    format!("the tracer could not attach to pid {}: {why}", subject.pid),
                ));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        check_signals(signals, "while the tracer was attaching")?;
        if subject.exited() {
            return Err(fail(
                exit::TARGET_DIED,
                format!(
                    "the target (pid {}) exited while the tracer was attaching; its output:\n{}",
                    subject.pid,
                    subject.log_tail()
                ),
            ));
        }
        if Instant::now() >= deadline {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "the tracer did not open its window within {} s",
                    ATTACH_TIMEOUT.as_secs()
                ),
            ));
        }
    }
}

/// Watches the target during the load: raises `abort` (ending the load
/// early) and sets `died` if it exits; ends once `done` is raised.
fn start_watcher(
    exit_fd: OwnedFd,
    abort: Arc<StopFlag>,
    done: Arc<StopFlag>,
    died: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sockscope-watch".into())
        .spawn(move || {
            while !done.is_raised() {
                let mut pfds = [
                    PollFd::new(exit_fd.as_fd(), PollFlags::POLLIN),
                    PollFd::new(done.fd(), PollFlags::POLLIN),
                ];
                // The timeout only bounds a lost wakeup.
                let _ = poll(&mut pfds, PollTimeout::from(1000u16));
                if pfds[0].revents().is_some_and(|r| !r.is_empty()) {
                    died.store(true, Ordering::SeqCst);
                    abort.raise();
                    return;
                }
            }
        })
        .context("starting the target watcher thread")
}

/// The server's own report, read back through its descriptor once it
/// stopped cleanly on SIGTERM; without it the run has no server counters
/// and fails.
fn server_report(subject: &Subject, stop: Option<&StopRecord>) -> Result<serde_json::Value> {
    let clean = stop.is_none_or(|r| r.clean());
    let parsed = subject
        .launched
        .as_ref()
        .context("a report from a target profile did not launch")?
        .report()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).map_err(Into::into));
    match (clean, parsed) {
        (true, Ok(v)) => Ok(v),
        (_, parsed) => Err(fail(
            exit::TARGET_DIED,
            format!(
                "the server did not stop cleanly on SIGTERM ({}{}), so its own counters are \
                 missing; its output:\n{}",
                stop.map_or("?".into(), |r| r.describe()),
                parsed.err().map_or(String::new(), |e| format!("; {e:#}")),
                subject.log_tail()
            ),
        )),
    }
}

/// Runs one profile and returns its report; writes nothing. A launched
/// target is started on the calling thread (its PR_SET_PDEATHSIG is tied
/// to it), which must therefore outlive the call. Failures carry the
/// statuses of [`exit`].
pub fn measure(spec: &ProfileSpec) -> Result<ProfileReport> {
    // Before any thread exists: every thread started below inherits it.
    let mut signals = Signals::block(&[
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ])?;
    trace::preflight::check_for(trace::preflight::Programs::Tracing, "sockscope profile")
        .map_err(|e| fail(exit::TRACER_FAILED, format!("{e:#}")))?;
    let started_at = SystemTime::now();
    let machine = Machine::current();

    // Before the target: it is started inside the path's namespace. Dropped
    // after the target (declared first), on every path out of here.
    let path = match &spec.path {
        Some(p) => Some(EmulatedPath::create(p, spec.path_backend).context("building --path")?),
        None => None,
    };
    let t_launch = Instant::now();
    let mut subject = start(spec, path.as_ref())?;
    let (addr, sockets) = wait_ready(
        spec,
        &mut subject,
        &mut signals,
        path.as_ref().map(|p| p.target_ip),
    )?;
    let ready_after = t_launch.elapsed();
    let comm = crate::procfs::comm(subject.pid).unwrap_or_default();
    let load_argv = spec.load.with_addr(addr);
    let cmd = spec.load.spec(addr);
    let mut shared_with = find_sharers(spec, subject.pid, addr);

    let tracer = start_tracer(spec, subject.pid, spec.count_only)?;
    let control_clock = tracer.handle.as_ref().and_then(cpu_clock_of);
    wait_window(&tracer, &mut subject, &mut signals)?;
    let sampler = start_share_sampler(spec, &shared_with, addr, subject.pid)?;
    let collector = if spec.evidence {
        Some(super::evidence::Collector::start(subject.pid, addr)?)
    } else {
        None
    };

    let abort = Arc::new(StopFlag::new()?);
    let done = Arc::new(StopFlag::new()?);
    let died = Arc::new(AtomicBool::new(false));
    let watcher = start_watcher(
        subject
            .exit_fd
            .try_clone()
            .context("duplicating the target's pidfd")?,
        Arc::clone(&abort),
        Arc::clone(&done),
        Arc::clone(&died),
    )?;
    let control0 = thread_cpu_s(control_clock);
    let t_load = Instant::now();
    let loaded = match &path {
        None => load::execute_until(cmd, spec.quiet, Some(abort)),
        // On a thread of its own inside the generator's namespace: the
        // load's workers, started by it, are born there.
        Some(p) => std::thread::scope(|s| {
            s.spawn(|| {
                p.enter_generator()?;
                load::execute_until(cmd, spec.quiet, Some(abort))
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the load thread panicked")))
        }),
    };
    let load_wall = t_load.elapsed();
    let control_cpu = (thread_cpu_s(control_clock) - control0).max(0.0);
    let (samples, sampler_cpu) = sampler.map(share::Sampler::finish).unzip();
    let evidence = collector.map(super::evidence::Collector::finish);
    let control_cpu = control_cpu + sampler_cpu.unwrap_or(0.0);
    tracer.stop.raise();
    done.raise();
    let traced = tracer.done.recv_timeout(FINISH_TIMEOUT);
    let _ = watcher.join();
    // A worker started during the run serves the address too.
    share::merge_sharers(&mut shared_with, find_sharers(spec, subject.pid, addr));

    check_signals(&mut signals, "during the run")?;
    let LoadOutcome {
        report: mut load_report,
        failure,
        connections: load_conns,
    } = match loaded {
        Ok(o) => o,
        Err(e) if e.downcast_ref::<crate::error::Exit>().is_some() => return Err(e),
        Err(e) => {
            return Err(fail(exit::LOAD_FAILED, format!("the load failed: {e:#}")));
        }
    };
    exit::load_interrupted(&load_report, "during the load")?;
    if died.load(Ordering::SeqCst) || subject.exited() {
        return Err(target_died(&mut subject));
    }
    let trace_out = tracer_result(traced)?;
    if let Some(why) = failure {
        return Err(fail(exit::LOAD_FAILED, format!("the load failed: {why}")));
    }

    // Stop what we started, and read the server's own account.
    let (stop, server_report) = stop_target(&mut subject)?;
    let path_record = path.map(EmulatedPath::finish);

    let mut load_command = vec!["sockscope".to_string(), "load".to_string()];
    load_command.extend(load_argv.iter().cloned());
    load_report.config.command_line = load_command.clone();
    let trace_report = trace_out.report;
    let mut derived = insight::derive(
        &load_report,
        &trace_report,
        server_report.as_ref(),
        control_cpu,
    );
    if !shared_with.is_empty() {
        let a = share::attribute(
            shared_with,
            samples.as_ref(),
            &load_conns,
            &load_report,
            &trace_report,
        );
        insight::attribute_per_transaction(&mut derived, a);
    }
    let mut insights = insight::sentences(&derived, &load_report, &trace_report);
    if let Some(p) = &path_record {
        insights.insert(
            1.min(insights.len()),
            insight::emulated_path_sentence(&load_report, p),
        );
    }
    let advice = evidence.as_ref().map_or_else(Vec::new, |e| {
        insights.extend(e.sentences(&derived, &load_report));
        crate::tune::supported_by(e, &load_report)
    });
    let mut caveats = machine::caveats(
        &machine,
        Some(addr.ip()),
        machine::shares_cpus_with(subject.pid),
    );
    if let Some(p) = &path_record {
        caveats.insert(0, p.caveat());
    }
    caveats.extend(attribution_caveat(&derived));
    if derived.server_agreement.as_deref() == Some("mismatch") {
        caveats.push(
            "The server's own transaction count disagrees with the load's (see the insights)."
                .into(),
        );
    }
    let trace_s = trace_report.window.duration_s;
    let windows = windows(&load_report, load_wall, trace_s);
    let target_record = TargetRecord {
        mode: match spec.target {
            ProfileTarget::Sockscope(_) => "sockscope",
            ProfileTarget::Command(_) => "command",
            ProfileTarget::Pid(_) => "pid",
            ProfileTarget::Cgroup(_) => "cgroup",
        }
        .into(),
        command: subject.launched.as_ref().map(|l| l.argv.clone()),
        pid: subject.pid,
        comm,
        address: addr.to_string(),
        sockets: sockets.iter().map(|s| fmt_socket(s, subject.pid)).collect(),
        ready_after_s: subject.launched.as_ref().map(|_| ready_after.as_secs_f64()),
        stop,
        server_report,
        cgroup: match &spec.target {
            ProfileTarget::Cgroup(cg) => Some(cg.rel.clone()),
            _ => None,
        },
        unit: match &spec.target {
            ProfileTarget::Cgroup(cg) => cg.unit.clone(),
            _ => None,
        },
    };
    drop(tracer);
    Ok(ProfileReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        command_line: spec.command_line.clone(),
        target: target_record,
        load_command,
        windows,
        machine,
        load: load_report,
        trace: trace_report,
        derived,
        insights,
        caveats,
        evidence,
        advice,
        path: match path_record {
            Some(p) => Some(NetPath::Emulated(Box::new(p))),
            None if machine::is_loopback(addr.ip()) => Some(NetPath::loopback()),
            None => None,
        },
    })
}

/// The error for a target that exited during the run, with its status and
/// (launched targets) its output.
fn target_died(subject: &mut Subject) -> anyhow::Error {
    let status = subject
        .launched
        .as_mut()
        .and_then(|l| l.try_exited())
        .map_or_else(String::new, |s| {
            format!(" ({})", target::describe_status(s))
        });
    let output = if subject.launched.is_some() {
        format!("; its output:\n{}", subject.log_tail())
    } else {
        String::new()
    };
    fail(
        exit::TARGET_DIED,
        format!(
            "the target (pid {}) exited during the run{status}; nothing was written{output}",
            subject.pid
        ),
    )
}

/// The tracer's outcome, or the error that says why there is none.
fn tracer_result(
    traced: Result<Result<TraceOutcome>, mpsc::RecvTimeoutError>,
) -> Result<TraceOutcome> {
    Ok(match traced {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            return Err(fail(
                exit::TRACER_FAILED,
                format!("the tracer failed: {e:#}"),
            ));
        }
        Err(_) => {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "the tracer did not finish within {} s of the load's end",
                    FINISH_TIMEOUT.as_secs()
                ),
            ));
        }
    })
}

/// Stops a launched target (a target that needed SIGKILL, or had already
/// exited, fails the run) and reads the server's own report when it
/// writes one.
fn stop_target(subject: &mut Subject) -> Result<(Option<StopRecord>, Option<serde_json::Value>)> {
    let stop = subject.launched.as_mut().map(|l| l.stop(STOP_GRACE));
    if let Some(rec) = &stop {
        if rec.signal == "SIGKILL" {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "the target did not stop within {} s of SIGTERM and was killed; its \
                     output:\n{}",
                    STOP_GRACE.as_secs(),
                    subject.log_tail()
                ),
            ));
        }
        if rec.signal == "none" {
            return Err(fail(
                exit::TARGET_DIED,
                format!(
                    "the target exited on its own right after the run; its output:\n{}",
                    subject.log_tail()
                ),
            ));
        }
    }
    let server_report = if subject.reports {
        Some(server_report(subject, stop.as_ref())?)
    } else {
        None
    };
    Ok((stop, server_report))
}

/// The load and trace windows, and the note that says how they differ.
fn windows(
    load_report: &crate::report::load::LoadReport,
    load_wall: Duration,
    trace_s: f64,
) -> Windows {
    Windows {
        load_s: load_report.duration_s,
        load_wall_s: load_wall.as_secs_f64(),
        trace_s,
        note: format!(
            "The trace window ({trace_s:.3} s) opens before the load starts and closes after it \
             returns, so it is {:.1} ms longer than the load's wall time ({:.3} s, connection \
             set-up and teardown included); the load's own measured window is {:.3} s. Target \
             CPU and syscalls cover the trace window; transactions cover the load.",
            ((trace_s - load_wall.as_secs_f64()) * 1e3).max(0.0),
            load_wall.as_secs_f64(),
            load_report.duration_s
        ),
    }
}
