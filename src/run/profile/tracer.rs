//! The attach step's tracer: `trace::run` in attach (or scope) mode on a
//! thread of its own, its window awaited while the target and signals are
//! watched; and the CPU clock of that thread, so profile's own control
//! work is not charged to the load generator.

use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::spec::{ProfileSpec, ProfileTarget};
use super::subject::Subject;
use super::watch::check_signals;
use crate::probe::TargetSpec;
use crate::run::exit::{self, fail};
use crate::signals::{Signals, StopFlag};
use crate::trace::{self, TraceOptions, TraceOutcome};

/// Longest wait for the tracer to load, attach and open its window.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the tracer to close its window and read its maps.
pub(super) const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// CPU time of a running thread of this process, s (0 once it ended).
pub(super) fn thread_cpu_s(clock: Option<libc::clockid_t>) -> f64 {
    let Some(c) = clock else { return 0.0 };
    // SAFETY: timespec is plain data filled by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; an invalid clock id only returns an error.
    if unsafe { libc::clock_gettime(c, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

pub(super) fn cpu_clock_of<T>(h: &JoinHandle<T>) -> Option<libc::clockid_t> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive (its handle is not joined).
    let rc = unsafe { libc::pthread_getcpuclockid(h.as_pthread_t(), &mut clock) };
    (rc == 0).then_some(clock)
}

/// The tracer thread; raising its stop flag on drop ends its window, so an
/// early return never leaves it attached longer than the process lives.
pub(super) struct TracerThread {
    pub(super) stop: Arc<StopFlag>,
    pub(super) handle: Option<JoinHandle<()>>,
    opened: mpsc::Receiver<i32>,
    pub(super) done: mpsc::Receiver<Result<TraceOutcome>>,
}

impl Drop for TracerThread {
    fn drop(&mut self) {
        self.stop.raise();
    }
}

/// What the tracer (and the request anatomy beside it) follows: the
/// cgroup, or the target's tree.
pub(super) fn trace_target(spec: &ProfileSpec, pid: i32) -> TargetSpec {
    match &spec.target {
        ProfileTarget::Cgroup(cg) => TargetSpec::Scope {
            scope: crate::probe::ScopeTarget::Cgroup(cg.clone()),
            duration: None,
        },
        _ => TargetSpec::Attach {
            pid,
            duration: None,
        },
    }
}

pub(super) fn start_tracer(spec: &ProfileSpec, pid: i32, count_only: bool) -> Result<TracerThread> {
    let stop = Arc::new(StopFlag::new()?);
    let (open_tx, opened) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    let opts = TraceOptions {
        target: trace_target(spec, pid),
        count_only,
        follow_forks: true,
        per_thread: false,
        max_threads: 4096,
        verbose: false,
        handle_signals: false,
        stop: Some(Arc::clone(&stop)),
        window_opened: vec![open_tx],
        launch_holds: Vec::new(),
        by: Default::default(),
        max_series: 0,
        sinks: Default::default(),
    };
    let handle = std::thread::Builder::new()
        .name("sockscope-trace".into())
        .spawn(move || {
            crate::signals::keep_off_this_thread();
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

/// Waits for the tracer's window to open, watching the target and signals;
/// returns the root pid the tracer names (0 in a scope mode).
pub(super) fn wait_window(
    tracer: &TracerThread,
    subject: &mut Subject,
    signals: &mut Signals,
) -> Result<i32> {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        match tracer.opened.recv_timeout(Duration::from_millis(50)) {
            Ok(root) => return Ok(root),
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
