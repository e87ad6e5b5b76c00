//! One profile run, step by step: [`measure`] calls one function per step
//! and holds what must outlive them, declared so that an early return drops
//! them in order: the collectors, the tracer (its window closes), the
//! target (stopped, [`Subject`]), then the emulated path.
//!
//! The steps: launch or find the target ([`subject::start`]); wait until it
//! serves ([`ready`]); attach the tracer (or, with `--requests-only`, open
//! the request anatomy's window alone) and the collectors ([`attach`]);
//! run the load while a watcher thread aborts it if the target dies
//! ([`load`]); close the window and finish the collectors ([`finish`]);
//! judge the run ([`verdict::judge`]); stop the target ([`subject::stop`]);
//! assemble the report ([`assemble::assemble`]).
//!
//! Threads: the caller's thread blocks SIGINT/SIGTERM/SIGHUP/SIGCHLD first
//! (so every thread started here inherits the mask), a tracer thread runs
//! `trace::run` in attach mode (none with `--requests-only`; the anatomy
//! runs on a thread of its own), a watcher thread aborts the load if the
//! target dies, and the load runs on the calling thread. Every wait is
//! bounded; every process started here is stopped by a guard on every path.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use std::os::fd::AsFd;

use super::assemble::{self, Measured, Syscalls, UntracedCpu};
use super::collect;
use super::driven::Driven;
use super::loadcmd::{self, Cut, LoadCommand};
use super::loadline::LoadLine;
use super::readiness;
use super::share::{self, Owners};
use super::spec::{ProfileSpec, ProfileTarget, Workload};
use super::stacks;
use super::subject::{self, Subject};
use super::tracer::{self, FINISH_TIMEOUT, TracerThread};
use super::verdict::{self, Recorder};
use super::watch::{check_signals, start_watcher};
use crate::anatomy::{self, Recorded, Session};
use crate::endpoint::Endpoint;
use crate::load;
use crate::netpath::{EmulatedPath, PathRecord};
use crate::process::ready::{OwnedSocket, Proto, UnixListener};
use crate::process::run_as::RunAs;
use crate::report::anatomy::AnatomyReport;
use crate::report::evidence::KernelEvidence;
use crate::report::machine::Machine;
use crate::report::profile::{ProfileReport, Sharer, StopRecord, TargetRecord};
use crate::run::exit::{self, fail};
use crate::run::machine;
use crate::run::trace::target_cpu::{CpuProbe, CpuReading};
use crate::signals::{Signals, StopFlag};
use crate::trace::TraceOutcome;

/// Runs one profile and returns its report; writes nothing. A launched
/// target is started on the calling thread (its PR_SET_PDEATHSIG is tied
/// to it), which must therefore outlive the call. Failures carry the
/// statuses of [`exit`].
pub fn measure(spec: &ProfileSpec) -> Result<ProfileReport> {
    let mut signals = block_signals()?;
    preflight(spec)?;
    let mut live = Live::open(spec, &mut signals)?;
    let window = live.window(spec, &mut signals, &spec.workload, false)?;
    live.close(spec, window)
}

/// Blocks the stop signals and SIGCHLD; called before any thread exists,
/// so every thread started afterwards inherits the mask.
pub(super) fn block_signals() -> Result<Signals> {
    Signals::block(&[
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ])
}

/// What is checked before anything starts: the tracing programs load,
/// and a `--load-cmd` program exists.
pub(super) fn preflight(spec: &ProfileSpec) -> Result<()> {
    crate::probe::preflight::check_for(
        crate::probe::preflight::Programs::Tracing,
        "sockscope profile",
    )
    .map_err(|e| fail(exit::TRACER_FAILED, format!("{e:#}")))?;
    if let Workload::Command(c, _) = &spec.workload {
        c.check_program()?;
    }
    Ok(())
}

/// The target, launched (or found) and ready, between its windows. Fields
/// drop in declaration order: the target (stopped, [`Subject`]) before the
/// emulated path it runs in.
pub(super) struct Live {
    started_at: SystemTime,
    machine: Machine,
    subject: Subject,
    ready: Ready,
    shared_with: Vec<Sharer>,
    path: Option<EmulatedPath>,
}

/// One window's measured parts, judged, before they are assembled.
pub(super) struct WindowParts {
    driven: Driven,
    syscalls: Syscalls,
    control_cpu_s: f64,
    owners: Option<Owners>,
    evidence: Option<KernelEvidence>,
    anatomy: Option<std::result::Result<AnatomyReport, String>>,
    /// With the tracer: the target's (user, system) CPU over the anatomy's
    /// window, what its count's per-request figures divide.
    anatomy_cpu: Option<(f64, f64)>,
    stacks: Option<std::result::Result<crate::report::stacks::StacksReport, String>>,
    /// The tail's samples beside the rest's (stacks and the anatomy both
    /// recorded).
    tail: Option<crate::report::slow::TailReport>,
    /// A sweep step's load that counted as failed (errors over its
    /// budget): kept as the step's point instead of failing the run.
    pub(super) load_failure: Option<String>,
    /// The tracer and collectors, dropped once the window is assembled
    /// (a single window's after the target is stopped).
    attached: Attached,
}

impl Live {
    /// Launches or finds the target and waits until it serves.
    pub(super) fn open(spec: &ProfileSpec, signals: &mut Signals) -> Result<Live> {
        let started_at = SystemTime::now();
        let machine = Machine::current();
        // Before the target: it is started inside the path's namespace.
        // Dropped after the target (declared first), on every path out of
        // here.
        let path = match &spec.path {
            Some(p) => Some(EmulatedPath::create(p, spec.path_backend).context("building --path")?),
            None => None,
        };
        let t_launch = Instant::now();
        let mut subject = subject::start(spec, path.as_ref())?;
        let ready = ready(spec, &mut subject, signals, path.as_ref(), t_launch)?;
        let shared_with = find_sharers(spec, subject.pid, &ready.addr);
        Ok(Live {
            started_at,
            machine,
            subject,
            ready,
            shared_with,
            path,
        })
    }

    /// One window on the live target: attach, drive it with `workload`,
    /// finish, judge. `keep_load_failure` (a sweep's step) keeps a load
    /// that counted as failed as the window's `load_failure` rather than
    /// failing the run; an interrupted load fails it (128+N) either way.
    pub(super) fn window(
        &mut self,
        spec: &ProfileSpec,
        signals: &mut Signals,
        workload: &Workload,
        keep_load_failure: bool,
    ) -> Result<WindowParts> {
        let addr = self.ready.addr.clone();
        let mut attached = attach(spec, &mut self.subject, signals, &self.shared_with, &addr)?;
        let window = load(
            spec,
            workload,
            self.path.as_ref(),
            &addr,
            &self.subject,
            &attached,
            signals,
        )?;
        let mut finished = finish(&mut attached, window);
        // A worker started during the run serves the address too.
        share::merge_sharers(
            &mut self.shared_with,
            find_sharers(spec, self.subject.pid, &addr),
        );

        check_signals(signals, "during the run")?;
        let load_failure = match &mut finished.loaded {
            Ok(Driven::Own { outcome, .. })
                if keep_load_failure
                    && exit::ended_by_signal(&outcome.report.end_reason).is_none() =>
            {
                outcome.failure.take()
            }
            _ => None,
        };
        let died = finished.died;
        let (anatomy, recorder) = match finished.traced {
            Some(traced) => (finished.anatomy, Recorder::Tracer(Box::new(traced))),
            // Alone, the anatomy's failure is the run's (judged in order).
            None => match finished.anatomy {
                Some(Err(why)) => (None, Recorder::AnatomyAlone(Some(why))),
                a => (a, Recorder::AnatomyAlone(None)),
            },
        };
        let subject = &mut self.subject;
        let (driven, trace_out) = verdict::judge(finished.loaded, recorder, || {
            (died || subject.exited()).then(|| subject::target_died(subject))
        })?;

        let (syscalls, anatomy_cpu) = match trace_out {
            Some(t) => (
                Syscalls::Traced(Box::new(t.report)),
                finished.anatomy_cpu.and_then(|c| c.cpu),
            ),
            None => (
                Syscalls::NotTraced(finished.anatomy_cpu.unwrap_or_else(|| UntracedCpu {
                    cpu: None,
                    source: "no probe",
                    window_s: 0.0,
                    notes: Vec::new(),
                })),
                None,
            ),
        };
        let tail = tail_section(spec, anatomy.as_ref(), finished.stacks.as_ref());
        let anatomy = anatomy.map(|r| r.map(|rec| anatomy_report(&rec, target_cpu_s(&syscalls))));
        let stacks = stacks::section(finished.stacks, target_cpu_s(&syscalls));
        if !matches!(driven, Driven::Own { .. }) {
            verdict::counted_verdict(anatomy.as_ref(), &driven)?;
        }
        Ok(WindowParts {
            driven,
            syscalls,
            control_cpu_s: finished.control_cpu_s,
            owners: finished.owners,
            evidence: finished.evidence,
            anatomy,
            anatomy_cpu,
            stacks,
            tail,
            load_failure,
            attached,
        })
    }

    /// Stops what was started, reads the server's own account, and
    /// assembles the report of window `w`.
    pub(super) fn close(mut self, spec: &ProfileSpec, w: WindowParts) -> Result<ProfileReport> {
        let (stop, server_report) = subject::stop(&mut self.subject)?;
        let path_record = self.path.take().map(EmulatedPath::finish);
        let target = target_record(spec, &self.subject, &self.ready, stop, server_report);
        Ok(self.assemble(spec, w, target, path_record))
    }

    /// The report of a sweep's step `w`, the target still running (no stop
    /// record, no server report: those are the whole run's, see
    /// [`Live::finish_steps`]).
    pub(super) fn step_report(&self, spec: &ProfileSpec, w: WindowParts) -> ProfileReport {
        let target = target_record(spec, &self.subject, &self.ready, None, None);
        self.assemble(spec, w, target, None)
    }

    /// Stops what was started and puts the whole run's target record
    /// (its stop, the server's own account) into `last`, the last step's
    /// report.
    pub(super) fn finish_steps(
        mut self,
        spec: &ProfileSpec,
        last: &mut ProfileReport,
    ) -> Result<()> {
        let (stop, server_report) = subject::stop(&mut self.subject)?;
        last.target = target_record(spec, &self.subject, &self.ready, stop, server_report);
        last.started_at = humantime::format_rfc3339_millis(self.started_at).to_string();
        Ok(())
    }

    fn assemble(
        &self,
        spec: &ProfileSpec,
        w: WindowParts,
        target: TargetRecord,
        path: Option<PathRecord>,
    ) -> ProfileReport {
        let WindowParts {
            driven,
            syscalls,
            control_cpu_s,
            owners,
            evidence,
            anatomy,
            anatomy_cpu,
            stacks,
            tail,
            attached,
            ..
        } = w;
        // The tracer's window closed with the load; its thread's handle
        // goes (a single window's after the target stopped).
        drop(attached);
        let measured = Measured {
            started_at: self.started_at,
            machine: self.machine.clone(),
            target,
            addr: self.ready.addr.clone(),
            driven,
            syscalls,
            control_cpu_s,
            shared_with: self.shared_with.clone(),
            owners,
            evidence,
            path,
            shares_cpus: machine::shares_cpus_with(self.subject.pid),
            anatomy,
            anatomy_cpu,
        };
        // The ports a reservation may protect are the target's, not
        // whatever else listens on the machine.
        let ports: Vec<u16> = self.ready.sockets.iter().map(|s| s.local.port()).collect();
        let mut rep = assemble::assemble(spec.command_line.clone(), measured, |e, l| {
            crate::tune::supported_by(e, l, &ports)
        });
        stacks::put(&mut rep, stacks);
        rep.tail = tail;
        rep
    }
}

/// The tail's section, when the anatomy and the stack sampler both
/// recorded the window with their samples tied.
fn tail_section(
    spec: &ProfileSpec,
    anatomy: Option<&std::result::Result<Recorded, String>>,
    stacks: Option<&std::result::Result<crate::stacks::Collected, String>>,
) -> Option<crate::report::slow::TailReport> {
    let (Some(Ok(rec)), Some(Ok(col)), Some(opts)) = (anatomy, stacks, spec.stacks.as_ref()) else {
        return None;
    };
    crate::run::tail::report(
        col.tied()?,
        rec.turn_ends.as_ref()?,
        &rec.window,
        opts.tail,
        col.off_cpu(),
    )
}

/// The anatomy's section of a recorded window, its cost's share taken from
/// the target's CPU (`cpu_s`) over the trace window (which holds the
/// anatomy's) or, without the tracer, over the anatomy's own.
fn anatomy_report(rec: &Recorded, cpu_s: Option<f64>) -> AnatomyReport {
    anatomy::report(rec, cpu_s.map(|s| (s * 1e9) as u64))
}

/// The target's CPU over the window, s: the tracer's, or read without it.
fn target_cpu_s(syscalls: &Syscalls) -> Option<f64> {
    match syscalls {
        Syscalls::Traced(t) => Some(t.resources.user_cpu_s + t.resources.system_cpu_s),
        Syscalls::NotTraced(c) => c.cpu.map(|(u, s)| u + s),
    }
}

/// What the ready step learned about the target.
struct Ready {
    /// The address the load goes to.
    addr: Endpoint,
    /// Every TCP/UDP socket the target owned then.
    sockets: Vec<OwnedSocket>,
    /// Every Unix listener it owned then.
    unix: Vec<UnixListener>,
    /// From the launch to readiness.
    after: Duration,
    /// Its command name.
    comm: String,
}

/// The ready step: waits until the target serves (see
/// [`readiness::wait_ready`]) and notes when and what it is.
fn ready(
    spec: &ProfileSpec,
    subject: &mut Subject,
    signals: &mut Signals,
    path: Option<&EmulatedPath>,
    t_launch: Instant,
) -> Result<Ready> {
    let learned = readiness::wait_ready(spec, subject, signals, path.map(|p| p.target_ip))?;
    let after = t_launch.elapsed();
    Ok(Ready {
        addr: learned.addr,
        sockets: learned.sockets,
        unix: learned.unix,
        after,
        comm: crate::procfs::comm(subject.pid).unwrap_or_default(),
    })
}

/// Processes outside the traced tree (the target and its descendants) that
/// serve the load's address too (a Unix socket file has one listener:
/// none).
fn find_sharers(spec: &ProfileSpec, pid: i32, addr: &Endpoint) -> Vec<Sharer> {
    let Some(addr) = addr.inet() else {
        return Vec::new();
    };
    let proto = if spec.workload.is_udp() {
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
    addr: SocketAddr,
    pid: i32,
) -> Result<Option<share::Sampler>> {
    if shared_with.is_empty() || !spec.workload.own().is_some_and(|l| l.persistent()) {
        return Ok(None);
    }
    let others = shared_with.iter().map(|s| s.pid).collect();
    share::Sampler::start(addr, pid, others).map(Some)
}

/// The anatomy's configuration, tying stack samples to its requests when
/// stacks are sampled too (`SOCKSCOPE_UNTIED` in the environment leaves
/// them untied: bench/tail.sh measures what the tie costs with it).
fn tie(
    mut cfg: crate::anatomy::AnatomyConfig,
    spec: &ProfileSpec,
) -> crate::anatomy::AnatomyConfig {
    cfg.tie_samples = spec
        .stacks
        .as_ref()
        .filter(|_| std::env::var_os("SOCKSCOPE_UNTIED").is_none())
        .map(|o| o.tail);
    cfg
}

/// The anatomy's per-thread map, when it started and ties samples.
fn threads_map(
    anatomy: Option<&std::result::Result<Session, String>>,
) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
    anatomy
        .and_then(|a| a.as_ref().ok())
        .and_then(Session::threads_map)
}

/// The tracer and the collectors, attached before the load. Fields drop
/// in declaration order: the anatomy, the collectors, then the tracer.
struct Attached {
    /// The request anatomy (`--no-requests`: None), or why it could not
    /// start: kept, so the rest of the run is measured and written.
    anatomy: Option<std::result::Result<Session, String>>,
    /// The stack sampler (`--no-stacks`: None), or why it could not start.
    stacks: Option<std::result::Result<crate::stacks::Session, String>>,
    collector: Option<collect::Collector>,
    sampler: Option<share::Sampler>,
    /// None with `--requests-only`.
    tracer: Option<TracerThread>,
    /// Where the target's CPU is read, and the reading when the anatomy's
    /// window opened (none without the anatomy).
    cpu_probe: Option<(CpuProbe, CpuReading)>,
    /// The tracer thread's CPU clock (profile's control work).
    control_clock: Option<libc::clockid_t>,
}

/// The attach step: starts the tracer and waits for its window, or (with
/// `--requests-only`) opens the anatomy's window at the same point; then
/// the share sampler (when others serve the address) and the evidence
/// collector (when asked for).
fn attach(
    spec: &ProfileSpec,
    subject: &mut Subject,
    signals: &mut Signals,
    shared_with: &[Sharer],
    addr: &Endpoint,
) -> Result<Attached> {
    let target = tracer::trace_target(spec, subject.pid);
    let (tracer, control_clock, anatomy, cpu_probe, stacks) = if spec.recorders.syscalls() {
        let tracer = tracer::start_tracer(spec, subject.pid, spec.count_only)?;
        let control_clock = tracer.handle.as_ref().and_then(tracer::cpu_clock_of);
        let root = tracer::wait_window(&tracer, subject, signals)?;
        // In the tracer's window, before the load: every request is seen
        // (on the target's TCP/UDP ports and Unix listeners alike).
        let anatomy = spec.recorders.requests().then(|| {
            crate::run::trace::requests::config_for(&target, root, spec.reading)
                .and_then(|cfg| Session::start(tie(cfg, spec)))
                .map_err(|e| format!("{e:#}"))
        });
        // The anatomy's window opens later than the tracer's (its attach
        // takes 0.1-0.7 s) and closes later: the per-request CPU of the
        // requests it counts is read over its own window.
        let probe = matches!(anatomy, Some(Ok(_))).then(|| {
            let probe = CpuProbe::new(&target, root);
            let before = probe.read();
            (probe, before)
        });
        let stacks = stacks::start(spec, &target, root, threads_map(anatomy.as_ref()));
        (Some(tracer), control_clock, anatomy, probe, stacks)
    } else {
        // Alone, the anatomy is all the run records: one that cannot start
        // fails it now, before the load.
        let probe = CpuProbe::new(&target, subject.pid);
        let session = crate::run::trace::requests::config_for(&target, subject.pid, spec.reading)
            .and_then(|cfg| Session::start(tie(cfg, spec)))
            .map_err(|e| {
                fail(
                    exit::TRACER_FAILED,
                    format!("the request anatomy could not start: {e:#}"),
                )
            })?;
        // Read once the window is open: the attach is not the window's.
        let before = probe.read();
        let stacks = stacks::start(spec, &target, subject.pid, session.threads_map());
        (None, None, Some(Ok(session)), Some((probe, before)), stacks)
    };
    let sampler = match addr.inet() {
        Some(a) => start_share_sampler(spec, shared_with, a, subject.pid)?,
        None => None,
    };
    let collector = if spec.evidence {
        Some(collect::Collector::start(subject.pid, addr.inet())?)
    } else {
        None
    };
    Ok(Attached {
        anatomy,
        stacks,
        collector,
        sampler,
        tracer,
        cpu_probe,
        control_clock,
    })
}

/// The target watcher of the load step, to be ended once the load is over.
struct Watcher {
    done: Arc<StopFlag>,
    died: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// What the load step returns: what drove the window (judged later), the
/// control thread's CPU over it, and the watcher.
struct Window {
    loaded: Result<Driven>,
    control_cpu_s: f64,
    watcher: Watcher,
}

/// The load step: runs sockscope's load (on a thread inside the
/// generator's namespace when there is a path), the `--load-cmd` command,
/// or waits out the observation, while a watcher thread aborts the load if
/// the target exits.
fn load(
    spec: &ProfileSpec,
    workload: &Workload,
    path: Option<&EmulatedPath>,
    addr: &Endpoint,
    subject: &Subject,
    attached: &Attached,
    signals: &mut Signals,
) -> Result<Window> {
    let abort = Arc::new(StopFlag::new()?);
    let done = Arc::new(StopFlag::new()?);
    let died = Arc::new(AtomicBool::new(false));
    let handle = start_watcher(
        subject
            .exit_fd
            .try_clone()
            .context("duplicating the target's pidfd")?,
        Arc::clone(&abort),
        Arc::clone(&done),
        Arc::clone(&died),
    )?;
    let control0 = tracer::thread_cpu_s(attached.control_clock);
    let loaded = match workload {
        Workload::Own(line) => own_load(spec, path, line, addr, abort),
        Workload::Command(c, run_as) => command_load(c, run_as.as_ref(), addr, subject, signals),
        Workload::Observe(d) => observe(*d, subject, signals),
    };
    let control_cpu_s = (tracer::thread_cpu_s(attached.control_clock) - control0).max(0.0);
    Ok(Window {
        loaded,
        control_cpu_s,
        watcher: Watcher { done, died, handle },
    })
}

/// sockscope's own load, aimed at `addr`.
fn own_load(
    spec: &ProfileSpec,
    path: Option<&EmulatedPath>,
    line: &LoadLine,
    addr: &Endpoint,
    abort: Arc<StopFlag>,
) -> Result<Driven> {
    let argv = crate::cmdline::record(line.with_addr(addr));
    let cmd = line.spec(addr);
    let t_load = Instant::now();
    let outcome = match path {
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
    }?;
    Ok(Driven::Own {
        argv,
        outcome: Box::new(outcome),
        wall: t_load.elapsed(),
    })
}

/// The `--load-cmd` command, aimed at `addr`, until it exits; a signal or
/// its timeout ends it early and fails the run (the target's death is
/// judged after).
fn command_load(
    c: &LoadCommand,
    run_as: Option<&RunAs>,
    addr: &Endpoint,
    subject: &Subject,
    signals: &mut Signals,
) -> Result<Driven> {
    let argv = match addr {
        Endpoint::Inet(a) => c.fill(*a),
        Endpoint::Unix(name) => c.fill_unix(name)?,
    };
    let (run, cut) = loadcmd::run(&argv, run_as, c.timeout, subject.exit_fd.as_fd(), signals)?;
    match cut {
        Some(Cut::Signal(signo)) => Err(exit::interrupted(signo, "during the load command")),
        Some(Cut::Timeout) => Err(fail(
            exit::TIMED_OUT,
            format!(
                "the load command ran past --load-timeout ({} s) and was stopped ({}): {}",
                c.timeout.as_secs_f64(),
                run.exit,
                shell_words::join(&run.argv)
            ),
        )),
        Some(Cut::TargetDied) | None => Ok(Driven::Command(run)),
    }
}

/// Observe only: waits `d`, or until the target exits (judged after) or a
/// stop signal fails the run.
fn observe(d: Duration, subject: &Subject, signals: &mut Signals) -> Result<Driven> {
    let t0 = Instant::now();
    loop {
        let left = d.saturating_sub(t0.elapsed());
        if left.is_zero() {
            break;
        }
        let mut pfds = [
            PollFd::new(subject.exit_fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
        ];
        let ms = u16::try_from(left.as_millis().clamp(1, 1000)).unwrap_or(1000);
        let _ = poll(&mut pfds, PollTimeout::from(ms));
        if pfds[0].revents().is_some_and(|r| !r.is_empty()) {
            break;
        }
        if let Some(signo) = loadcmd::stop_signal(signals) {
            return Err(exit::interrupted(signo, "while observing"));
        }
    }
    Ok(Driven::Observed(t0.elapsed()))
}

/// What the run left once its window closed, before it is judged.
struct Finished {
    loaded: Result<Driven>,
    /// The control thread's and the share sampler's CPU, s.
    control_cpu_s: f64,
    owners: Option<Owners>,
    evidence: Option<KernelEvidence>,
    /// The tracer's outcome (None without it).
    traced: Option<Result<Result<TraceOutcome>, mpsc::RecvTimeoutError>>,
    /// The target's CPU over the anatomy's window.
    anatomy_cpu: Option<UntracedCpu>,
    /// What the request anatomy recorded, or why it did not.
    anatomy: Option<std::result::Result<Recorded, String>>,
    /// What the stack sampler collected, or why it did not.
    stacks: Option<std::result::Result<crate::stacks::Collected, String>>,
    /// The watcher saw the target exit during the load.
    died: bool,
}

/// The sample step's end: finishes the share sampler and the evidence
/// collector, closes the tracer's window and waits (bounded) for its
/// result, and ends the watcher.
fn finish(attached: &mut Attached, window: Window) -> Finished {
    let (owners, sampler_cpu) = attached.sampler.take().map(share::Sampler::finish).unzip();
    let evidence = attached.collector.take().map(collect::Collector::finish);
    let control_cpu_s = window.control_cpu_s + sampler_cpu.unwrap_or(0.0);
    if let Some(t) = &attached.tracer {
        t.stop.raise();
    }
    let Watcher { done, died, handle } = window.watcher;
    done.raise();
    let traced = attached
        .tracer
        .as_ref()
        .map(|t| t.done.recv_timeout(FINISH_TIMEOUT));
    // Read as the anatomy's window is told to close (within its 10 ms
    // tick), not after it has detached.
    let cpu_after = attached.cpu_probe.as_ref().map(|(probe, _)| probe.read());
    let anatomy = attached
        .anatomy
        .take()
        .map(|a| a.and_then(|s| s.finish().map_err(|e| format!("{e:#}"))));
    let stacks = stacks::finish(attached.stacks.take());
    let anatomy_cpu = attached
        .cpu_probe
        .take()
        .zip(cpu_after)
        .map(|((probe, before), after)| {
            let mut notes = Vec::new();
            let cpu = probe.cpu(&before, &after, &mut notes);
            let window_s = match &anatomy {
                Some(Ok(rec)) => rec.window_ns as f64 / 1e9,
                _ => 0.0,
            };
            UntracedCpu {
                cpu: cpu.map(|c| (c.user_s, c.system_s)),
                source: probe.source(),
                window_s,
                notes,
            }
        });
    let _ = handle.join();
    Finished {
        loaded: window.loaded,
        control_cpu_s,
        owners,
        evidence,
        traced,
        anatomy_cpu,
        anatomy,
        stacks,
        died: died.load(Ordering::SeqCst),
    }
}

/// The artifact's record of the target.
fn target_record(
    spec: &ProfileSpec,
    subject: &Subject,
    ready: &Ready,
    stop: Option<StopRecord>,
    server_report: Option<serde_json::Value>,
) -> TargetRecord {
    TargetRecord {
        mode: assemble::mode(&spec.target).into(),
        command: subject.launched.as_ref().map(|l| l.argv.clone()),
        pid: subject.pid,
        comm: ready.comm.clone(),
        address: ready.addr.to_string(),
        sockets: ready
            .sockets
            .iter()
            .map(|s| readiness::fmt_socket(s, subject.pid))
            .chain(
                ready
                    .unix
                    .iter()
                    .map(|l| readiness::fmt_unix(l, subject.pid)),
            )
            .collect(),
        ready_after_s: subject.launched.as_ref().map(|_| ready.after.as_secs_f64()),
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
        unit_found_by: match &spec.target {
            ProfileTarget::Cgroup(cg) => cg.found_by.map(|f| f.as_str().to_owned()),
            _ => None,
        },
    }
}
