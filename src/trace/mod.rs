//! The eBPF syscall profiler for a process tree (the `sockscope trace`
//! command itself, which writes its outputs and wires the Prometheus
//! exporter, is `run::trace`).
//!
//! Launch mode forks the command, registers it while it waits on a pipe,
//! then lets it execve, so the trace starts at its first instruction. Attach
//! mode registers every thread of a running process (and its descendants)
//! without stopping or signalling it. Either way, per-syscall aggregates are
//! kept by BPF in per-CPU arrays and read once at the end; lifecycle records
//! (fork, exit) arrive through a ring buffer.

pub mod abi;
pub mod account;
pub mod attach;
pub mod bpf;
pub mod calibrate;
pub mod errno;
mod groups;
pub mod interval;
pub mod launch;
mod rows;
mod schedule;
mod scope_run;
pub mod selfcost;
pub mod snapshot;
pub mod startup;
pub mod stat;
pub mod wait;

use std::cell::RefCell;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use libbpf_rs::{RingBuffer, RingBufferBuilder};
use nix::sys::signal::Signal;

pub(crate) use self::rows::{group_rows, syscall_rows, totals_of};
pub use self::scope_run::{filter_of as scope_filter_of, scope_target};

use self::account::EventLog;
use self::bpf::{Tracer, TracerConfig};
use self::wait::{Signals, Wake};
use crate::probe::TargetSpec;
use crate::report::trace::{
    SCHEMA, SCHEMA_VERSION, Target, TraceOptionsRecord, TraceReport, Window,
};
use crate::signals::StopFlag;
use crate::{error, procfs};

/// Where a running trace's snapshots go (the interval writer, the metrics
/// exporter), and how often each wants one.
#[derive(Clone, Default)]
pub struct Sinks(pub Vec<(Duration, Arc<dyn snapshot::SnapshotSink>)>);

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let every: Vec<_> = self.0.iter().map(|(d, _)| *d).collect();
        f.debug_struct("Sinks").field("every", &every).finish()
    }
}

/// Everything `trace::run` needs.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// What to trace.
    pub target: TargetSpec,
    /// Enter hook only (cheapest; no errors or latency).
    pub count_only: bool,
    /// Follow child processes (threads are always followed).
    pub follow_forks: bool,
    /// Keep per-thread tables.
    pub per_thread: bool,
    /// Per-thread slots before threads are pooled.
    pub max_threads: u32,
    /// Print progress lines on stderr (attached to ...).
    pub verbose: bool,
    /// Stop when SIGINT, SIGTERM or SIGHUP arrives (the CLI). An embedding
    /// caller that handles signals itself sets this to false and stops the
    /// trace with `stop` instead (attach mode): the trace then reads no
    /// signal at all in attach mode, and only SIGCHLD in launch mode, so it
    /// never consumes a signal meant for its caller.
    pub handle_signals: bool,
    /// Attach mode: ends the window when raised (end reason `stopped`).
    pub stop: Option<Arc<StopFlag>>,
    /// Told once the window is open (every thread registered, baselines
    /// taken), so a caller can start its workload then: the target's root
    /// pid (the launched command's, or -p's), 0 in a scope mode. Each
    /// sender is told (the request anatomy's, the stack sampler's).
    pub window_opened: Vec<mpsc::Sender<i32>>,
    /// Launch mode: the command is held until each of these says so (or
    /// is dropped), at most [`HOLD_LIMIT`]: what runs beside the tracer
    /// and must see the command's first request (the request anatomy,
    /// whose programs load after the window opens) attaches first.
    pub launch_holds: Vec<Hold>,
    /// Per-group breakdown (scope modes and attach mode alike).
    pub by: snapshot::Breakdown,
    /// Series (group x syscall) kept apart before the rest is pooled.
    pub max_series: u32,
    /// Snapshots taken while the trace runs, and where they go.
    pub sinks: Sinks,
}

/// The result of a trace and the status sockscope should exit with.
pub struct TraceOutcome {
    /// The measurements.
    pub report: TraceReport,
    /// 0, 1 (window cut short), or the launched command's own status.
    pub exit_code: u8,
}

/// How the window ended.
pub(crate) struct WindowEnd {
    reason: String,
    complete: bool,
    exit_code: Option<i32>,
    killed_by: Option<String>,
    status: u8,
}

/// Longest time lifecycle records wait in the ring buffer before we read
/// them (the BPF side commits them without waking us).
const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// How long the end of a trace waits for exit tails still on their way.
const EXIT_TAIL_GRACE: Duration = Duration::from_millis(50);

/// The moving parts of one trace: the loaded tracer, its event stream, the
/// signals routed to us, the self-cost sampler.
pub(crate) struct Session<'obj, 'rb> {
    tracer: Tracer<'obj>,
    rb: RingBuffer<'rb>,
    log: Rc<RefCell<EventLog>>,
    signals: Signals,
    sampler: Option<selfcost::Sampler>,
    progress: Option<(indicatif::ProgressBar, Instant)>,
    notes: Vec<String>,
    /// The start-up phases, until the window opens.
    startup: startup::Timeline,
    /// The machine's busy CPU ticks when the window opened.
    machine_ticks0: Option<u64>,
    /// Names and keeps the --by groups.
    groups: groups::GroupReader,
}

impl Session<'_, '_> {
    /// Opens the window: from here on the traced tasks' syscalls count.
    fn open_window(&mut self) -> Instant {
        self.startup.mark("register");
        self.machine_ticks0 = procfs::machine_busy_ticks();
        self.sampler = Some(selfcost::Sampler::start(&mut self.tracer));
        Instant::now()
    }

    fn log_events(&mut self, events: Vec<bpf::Event>) {
        let mut log = self.log.borrow_mut();
        for ev in events {
            log.push(ev);
        }
    }

    /// Shows a progress bar on stderr while attached (only on a terminal,
    /// not with --quiet).
    fn show_progress(&mut self, pid: i32, duration: Option<Duration>, since: Instant) {
        // The caller asks only when verbose (not --quiet).
        if !crate::progress::wanted(false) {
            return;
        }
        let bar = match duration {
            Some(d) => crate::progress::bar(
                Some(d.as_millis() as u64),
                &format!(
                    "tracing pid {pid} [{{bar:30}}] of {:.1} s: {{msg}}",
                    d.as_secs_f64()
                ),
            ),
            None => crate::progress::spinner(&format!(
                "tracing pid {pid} {{spinner}} {{msg}}  (Ctrl-C to stop)"
            )),
        };
        self.progress = Some((bar, since));
    }

    /// Waits for a signal, one of `fds` or `deadline`, switching the
    /// self-cost sampling on and off in between.
    fn wait(&mut self, fds: &[BorrowedFd<'_>], deadline: Option<Instant>) -> Result<Wake> {
        loop {
            let sample_at = self.sampler.as_ref().and_then(|s| s.deadline());
            let drain_at = Instant::now() + DRAIN_EVERY;
            let next = [deadline, sample_at, Some(drain_at)]
                .into_iter()
                .flatten()
                .min();
            let wake = wait::wait(&mut self.signals, fds, &self.rb, next)?;
            if let Some((bar, since)) = &self.progress {
                let t = since.elapsed();
                bar.set_position(t.as_millis() as u64);
                bar.set_message(format!(
                    "{:.1} s, {} syscalls",
                    t.as_secs_f64(),
                    self.tracer.events_counted()
                ));
            }
            match wake {
                Wake::Deadline if deadline.is_none_or(|d| Instant::now() < d) => {
                    if let Some(s) = self.sampler.as_mut() {
                        s.tick(&mut self.tracer, Instant::now());
                    }
                }
                w => return Ok(w),
            }
        }
    }
}

/// How often launch mode looks for its command's exit besides SIGCHLD.
const REAP_EVERY: Duration = Duration::from_millis(500);

/// What a launched command waits for (`TraceOptions::launch_holds`): told
/// once, or dropped. Shared, so the options stay `Clone`.
pub type Hold = Arc<std::sync::Mutex<mpsc::Receiver<()>>>;

/// The longest a launched command is held for what runs beside the
/// tracer to attach (`TraceOptions::launch_holds`).
pub const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// Runs a whole trace: preflight, load, attach, window, report.
pub fn run(opts: &TraceOptions) -> Result<TraceOutcome> {
    let mut startup = startup::Timeline::begin();
    crate::probe::preflight::check()?;
    startup.mark("preflight");
    let mut storage = MaybeUninit::uninit();
    let tracer = Tracer::load(
        &mut storage,
        TracerConfig {
            count_only: opts.count_only,
            follow_forks: opts.follow_forks,
            per_thread: opts.per_thread,
            max_threads: opts.max_threads,
            ringbuf_bytes: if opts.per_thread { 32 << 20 } else { 4 << 20 },
            scope: match &opts.target {
                TargetSpec::Scope { scope, .. } => scope_run::filter_of(scope)?,
                _ => crate::probe::ScopeFilter::Tree,
            },
            by: opts.by,
            max_series: opts.max_series,
        },
    )?;

    startup.mark("bpf_load");

    let log = Rc::new(RefCell::new(EventLog::default()));
    let events_map = tracer.events_map()?;
    let mut rb_builder = RingBufferBuilder::new();
    {
        let log = Rc::clone(&log);
        rb_builder
            .add(&events_map, move |data: &[u8]| {
                match bpf::parse_record(data) {
                    Ok((ev, _)) => log.borrow_mut().push(ev),
                    Err(_) => log.borrow_mut().malformed += 1,
                }
                0
            })
            .context("setting up the event ring buffer")?;
    }
    let rb = rb_builder
        .build()
        .context("setting up the event ring buffer")?;
    // An embedding caller (handle_signals = false) reads its own signals:
    // a signalfd here would steal them. Launch mode still needs SIGCHLD to
    // reap its command.
    let watched: &[Signal] = match (opts.handle_signals, &opts.target) {
        (true, _) => &[
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGCHLD,
        ],
        (false, TargetSpec::Launch { .. }) => &[Signal::SIGCHLD],
        (false, TargetSpec::Attach { .. } | TargetSpec::Scope { .. }) => &[],
    };
    let signals = Signals::block(watched)?;
    startup.mark("ring_buffer");
    let mut s = Session {
        tracer,
        rb,
        log,
        signals,
        sampler: None,
        progress: None,
        notes: Vec::new(),
        startup,
        machine_ticks0: None,
        groups: groups::GroupReader::default(),
    };
    s.tracer.attach()?;
    s.startup.mark("attach");

    match &opts.target {
        TargetSpec::Launch { argv, run_as } => run_launch(&mut s, opts, argv, run_as.as_ref()),
        TargetSpec::Attach { pid, duration } => run_attach(&mut s, opts, *pid, *duration),
        TargetSpec::Scope { scope, duration } => scope_run::run(&mut s, opts, scope, *duration),
    }
}

fn run_launch(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    argv: &[OsString],
    run_as: Option<&crate::process::run_as::RunAs>,
) -> Result<TraceOutcome> {
    let program = launch::resolve_program(&argv[0])?;
    launch::become_subreaper()?;
    let started_at = SystemTime::now();
    let held = launch::spawn_held(&program, argv, run_as)?;
    let pid = held.pid;
    let registered = s
        .tracer
        .register(pid, true)
        .and_then(|_| s.tracer.take_baselines());
    match registered {
        Ok(events) => s.log_events(events),
        Err(e) => {
            held.abort();
            return Err(e.context("registering the command before it runs"));
        }
    }
    let started = s.open_window();
    for tx in &opts.window_opened {
        let _ = tx.send(pid);
    }
    // A beside that failed drops its sender: the command runs without it
    // (its error is reported at the end).
    let hold_until = Instant::now() + HOLD_LIMIT;
    for hold in &opts.launch_holds {
        if let Ok(rx) = hold.lock() {
            let _ = rx.recv_timeout(hold_until.saturating_duration_since(Instant::now()));
        }
    }
    held.release(&program)?;

    let mut reaper = launch::Reaper::default();
    let mut schedule = schedule::Schedule::new(opts, started);
    while reaper.main_status.is_none() {
        // SIGCHLD reaps at once; the periodic wake reaps too, so the end
        // of the command is seen even if its SIGCHLD never reached the
        // signalfd (taken by a thread that did not block it).
        let reap_at = Instant::now() + REAP_EVERY;
        let wake_at = schedule.due().map_or(reap_at, |d| d.min(reap_at));
        match s.wait(&[], Some(wake_at))? {
            Wake::Signal(si) if si.ssi_signo == Signal::SIGCHLD as u32 => reaper.reap(pid),
            Wake::Signal(si) => {
                // Ctrl-C from the terminal reaches the command's process
                // group by itself; a signal sent to sockscope is passed on.
                if si.ssi_code != libc::SI_KERNEL {
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(pid, si.ssi_signo as i32) };
                }
            }
            Wake::Deadline => {
                schedule.run_due(s, opts, started)?;
                reaper.reap(pid);
            }
            Wake::Ready(_) => {}
        }
    }
    reaper.reap(pid);
    schedule::publish_last(s, opts, started)?;
    let still_running = procfs::descendants(std::process::id() as i32);
    if !still_running.is_empty() {
        s.notes.push(format!(
            "{} descendant process(es) still running when the command exited (pids {}); \
             their CPU use is not in the rusage totals",
            still_running.len(),
            still_running
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let st = reaper.main_status.unwrap_or(0);
    let end = if libc::WIFSIGNALED(st) {
        let sig = libc::WTERMSIG(st);
        WindowEnd {
            reason: "command_exited".into(),
            complete: true,
            exit_code: None,
            killed_by: Some(wait::signal_name(sig as u32)),
            status: (128 + sig) as u8,
        }
    } else {
        let code = libc::WEXITSTATUS(st);
        WindowEnd {
            reason: "command_exited".into(),
            complete: true,
            exit_code: Some(code),
            killed_by: None,
            status: code as u8,
        }
    };
    let target = Target {
        mode: "launch".into(),
        command: Some(
            argv.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        ),
        pid,
        comm: program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        scope: None,
    };
    let usage = reaper.usage;
    let orphans = reaper.orphans_reaped;
    finish(
        s,
        opts,
        target,
        started_at,
        started,
        end,
        (1, 1),
        |log, hwm, threads, procs| {
            account::launch_resources(&usage, orphans, log, hwm, threads, procs)
        },
    )
}

/// A pidfd on the process to attach to (readable once it exits); a pid
/// with no process is exit 1, "no process with pid N".
pub fn open_attach_pidfd(pid: i32) -> Result<OwnedFd> {
    // SAFETY: plain syscall; a returned fd is ours.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        let err = std::io::Error::last_os_error();
        return Err(if err.raw_os_error() == Some(libc::ESRCH) {
            error::with_code(1, format!("no process with pid {pid}"))
        } else {
            anyhow::Error::from(err).context(format!("opening process {pid}"))
        });
    }
    // SAFETY: fresh fd returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

fn run_attach(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    pid: i32,
    duration: Option<Duration>,
) -> Result<TraceOutcome> {
    let pidfd = open_attach_pidfd(pid)?;
    let comm = procfs::comm(pid).unwrap_or_default();
    let started_at = SystemTime::now();
    let reg = attach::register_tree(&s.tracer, pid, opts.follow_forks)?;
    if !reg.converged {
        s.notes.push(
            "new threads kept appearing while attaching; some created during the attach \
             may be missing"
                .into(),
        );
    }
    let events = s.tracer.take_baselines()?;
    s.log_events(events);
    let started = s.open_window();
    if opts.verbose {
        crate::progress::say!(
            "sockscope: attached to pid {pid} ({}): {} in {}",
            crate::text::escape(&comm),
            crate::report::units::counted(reg.tids.len() as u64, "thread", "threads"),
            crate::report::units::counted(reg.tgids.len() as u64, "process", "processes")
        );
    }
    if opts.verbose && opts.sinks.0.is_empty() {
        s.show_progress(pid, duration, started);
    }
    for tx in &opts.window_opened {
        let _ = tx.send(pid);
    }
    let deadline = duration.map(|d| started + d);
    let stop_fd = opts.stop.as_ref().map(|f| f.fd());
    let mut fds = vec![pidfd.as_fd()];
    fds.extend(stop_fd);
    let mut schedule = schedule::Schedule::new(opts, started);
    let reason = loop {
        let next = [deadline, schedule.due()].into_iter().flatten().min();
        match s.wait(&fds, next)? {
            Wake::Ready(0) => break "target_exited".to_string(),
            Wake::Ready(_) => break "stopped".to_string(),
            Wake::Deadline => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break "duration".to_string();
                }
                schedule.run_due(s, opts, started)?;
            }
            Wake::Signal(si) if si.ssi_signo == Signal::SIGCHLD as u32 => {}
            Wake::Signal(si) => break format!("signal:{}", wait::signal_name(si.ssi_signo)),
        }
    };
    if let Some((bar, _)) = s.progress.take() {
        bar.finish_and_clear();
    }
    schedule::publish_last(s, opts, started)?;
    let complete = !(reason == "target_exited" && duration.is_some());
    if reason == "target_exited" {
        s.notes.push(format!(
            "process {pid} exited after {:.3} s; the data covers the trace until then",
            started.elapsed().as_secs_f64()
        ));
    }
    let end = WindowEnd {
        status: if complete { 0 } else { 1 },
        reason,
        complete,
        exit_code: None,
        killed_by: None,
    };
    let target = Target {
        mode: "attach".into(),
        command: None,
        pid,
        comm,
        scope: None,
    };
    let initial = (
        reg.registered_threads,
        reg.registered_processes.len() as u64,
    );
    finish(
        s,
        opts,
        target,
        started_at,
        started,
        end,
        initial,
        account::attach_resources,
    )
}

/// Closes the window and assembles the report. `initial` is the number of
/// (threads, processes) registered by sockscope itself; `resources` turns
/// the event log, the live processes' VmHWM and the thread/process counts
/// into the resource figures.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    s: &mut Session<'_, '_>,
    opts: &TraceOptions,
    target: Target,
    started_at: SystemTime,
    started: Instant,
    end: WindowEnd,
    initial: (u64, u64),
    resources: impl FnOnce(&EventLog, Option<u64>, u64, u64) -> crate::report::trace::Resources,
) -> Result<TraceOutcome> {
    // Every traced task alive now reports its in-window usage.
    let live = s.tracer.close_window()?;
    s.log_events(live);
    let window = started.elapsed();
    let machine_cpu_s = s
        .machine_ticks0
        .zip(procfs::machine_busy_ticks())
        .map(|(a, b)| b.saturating_sub(a) as f64 / procfs::clock_ticks());
    // VmHWM must be read while those processes still exist.
    let live_hwm = s
        .log
        .borrow()
        .tasks
        .iter()
        .filter(|t| !t.exited)
        .filter_map(|t| procfs::vm_hwm_kb(t.tgid))
        .max();
    // A task's exit tail comes from its last context switch, microseconds
    // after its exit record: wait for those on their way before detaching.
    let log = Rc::clone(&s.log);
    wait::drain_until(&s.rb, || log.borrow().tails_missing() == 0, EXIT_TAIL_GRACE)?;
    let sampler = s.sampler.take();
    s.tracer.detach();
    s.rb.consume().context("draining the event ring buffer")?;
    let stats = s.tracer.syscall_stats()?;
    let counters = s.tracer.counters()?;
    let groups = if opts.by == snapshot::Breakdown::None {
        None
    } else {
        let mut reader = std::mem::take(&mut s.groups);
        let g = reader.read_final(s, opts.by);
        s.groups = reader;
        Some(group_rows(&g?, opts.count_only))
    };
    let log = s.log.borrow();

    let threads = initial.0 + counters.threads_created + counters.processes_created;
    let processes = initial.1 + counters.processes_created;
    let resources = resources(&log, live_hwm, threads, processes);

    let mut notes = std::mem::take(&mut s.notes);
    if counters.ringbuf_drops > 0 {
        notes.push(format!(
            "{} lifecycle records were lost (ring buffer full): per-thread and resource \
             figures of the tasks concerned are missing",
            counters.ringbuf_drops
        ));
    }
    notes.extend(account::exit_tail_note(&log));
    if log.malformed > 0 {
        notes.push(format!(
            "{} malformed tracer records ignored",
            log.malformed
        ));
    }
    if opts.count_only {
        notes.push("count-only mode: calls counted at entry; no errors or latency".into());
    } else {
        notes.push(
            "latency is wall time from syscall entry to exit (blocking included); \
             p50/p90/p99 are histogram bucket middles (within 6.25%), min and max are exact"
                .into(),
        );
    }
    if stats.iter().any(|x| x.nr == abi::OTHER_SYSCALL) {
        notes.push(format!(
            "syscall numbers >= {} are pooled in one row",
            abi::OTHER_SYSCALL
        ));
    }

    let syscalls = syscall_rows(&stats, opts.count_only);
    let totals = totals_of(&syscalls, opts.count_only);
    // Now that every figure of the window is read: the calibration attaches
    // and detaches the syscall programs on its own, and serves only the
    // per-event cost, so a run too short for one skips it.
    let stopped = sampler.map(|sm| sm.stop(&mut s.tracer));
    let slow_path = match stopped.as_ref() {
        Some(st) if st.per_event_measurable() => match calibrate::slow_path(&mut s.tracer) {
            Ok(sp) => Some(sp),
            Err(why) => {
                notes.push(format!("syscall hook slow path not calibrated: {why}"));
                None
            }
        },
        _ => None,
    };
    let facts = selfcost::WindowFacts {
        events: totals.calls,
        window,
        drops: counters.ringbuf_drops,
        target_cpu_s: Some(resources.user_cpu_s + resources.system_cpu_s),
        machine_cpu_s,
        slow_path,
    };
    let (mut tracer_cost, cost_note) = match stopped {
        Some(st) => st.finish(&facts),
        None => (Default::default(), Some("window never opened".into())),
    };
    tracer_cost.startup = Some(s.startup.finish());
    if let Some(why) = cost_note {
        notes.push(format!("tracer self-cost not measured: {why}"));
    }
    let threads_rows = opts
        .per_thread
        .then(|| account::thread_rows(&log, opts.count_only));

    let report = TraceReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        target,
        options: TraceOptionsRecord {
            count_only: opts.count_only,
            follow_forks: opts.follow_forks,
            per_thread: opts.per_thread,
        },
        window: Window {
            started_at: humantime::format_rfc3339_millis(started_at).to_string(),
            duration_s: window.as_secs_f64(),
            end_reason: end.reason,
            complete: end.complete,
            exit_code: end.exit_code,
            killed_by_signal: end.killed_by,
        },
        syscalls,
        totals,
        threads: threads_rows,
        resources,
        processes: account::process_rows(&log, opts.count_only),
        tracer: tracer_cost,
        by: (opts.by != snapshot::Breakdown::None).then(|| {
            serde_json::to_value(opts.by)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        }),
        groups,
        notes,
        anatomy: None,
        stacks: None,
        tail: None,
    };
    Ok(TraceOutcome {
        report,
        exit_code: end.status,
    })
}
