//! Worker threads of a TCP server (echo, relay) and the controller's tail
//! they share: workers are started so that their exit, however it happens,
//! wakes the controller ([`Crew::spawn`]); the controller announces the
//! server, sleeps until SIGTERM/SIGINT, raises the stop, joins the workers
//! with a bound and sums their counters ([`Crew::run_until_stop`]). A
//! server supplies only its workers and its report.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::announce;
use super::signals::{ExitNotice, StopCause, wait_for_stop};
use crate::signals::{Signals, StopFlag};

/// Counters a worker returns, summed across workers at the end.
pub trait Merge: Default {
    /// Adds `other` into `self`.
    fn merge(&mut self, other: &Self);
}

/// A worker thread's handle: its counters, or why it failed.
pub type WorkerHandle<C> = JoinHandle<Result<C>>;

/// Starts a worker thread that always bumps `exits` when it ends, even by
/// panic, so the controller never waits on a dead worker.
pub fn spawn_worker<C: Send + 'static>(
    name: String,
    exits: Arc<ExitNotice>,
    body: impl FnOnce() -> Result<C> + Send + 'static,
) -> Result<WorkerHandle<C>> {
    struct Notify(Arc<ExitNotice>);
    impl Drop for Notify {
        fn drop(&mut self) {
            self.0.notify();
        }
    }
    let guard = Notify(exits);
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _guard = guard;
            body()
        })
        .with_context(|| format!("starting thread {name}"))
}

/// Waits for every worker, at most `limit`, and sums their counters; the
/// first worker error, panic or overrun fails the run.
pub fn join_all<C: Merge>(
    workers: Vec<WorkerHandle<C>>,
    exits: &ExitNotice,
    limit: Duration,
) -> Result<C> {
    let deadline = Instant::now() + limit;
    let mut pending = workers;
    let mut total = C::default();
    let mut first_err: Option<anyhow::Error> = None;
    while !pending.is_empty() {
        let (done, rest): (Vec<_>, Vec<_>) = pending.into_iter().partition(|h| h.is_finished());
        pending = rest;
        for h in done {
            match h.join() {
                Ok(Ok(c)) => total.merge(&c),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(anyhow!("a server thread panicked"));
                }
            }
        }
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(anyhow!(
                "{} server threads did not stop within {limit:?} of the stop signal",
                pending.len()
            ));
        }
        // Woken by the next worker exit; the timeout only bounds the wait.
        let mut pfd = [nix::poll::PollFd::new(
            exits.fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let _ = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(20u8));
        exits.clear();
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// Event loops to run: `--threads`, or one per CPU.
pub fn loop_count(threads: Option<u32>) -> usize {
    match threads {
        Some(n) => n as usize,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// What the workers of a TCP server share with its controller, whatever
/// the server: the stop they watch, the notice their exits bump, and the
/// --max-conns slots.
pub struct Crew {
    /// Raised by the controller to stop every worker.
    pub stop: StopFlag,
    /// Bumped by every worker as it exits.
    pub exits: Arc<ExitNotice>,
    /// --max-conns.
    pub slots: Arc<Slots>,
}

/// Extra time workers get, after their drain, to close and return.
pub const JOIN_GRACE: Duration = Duration::from_secs(3);

/// How a server introduces itself once its workers run.
pub struct Ready<'a> {
    /// The address its listeners share: the ready line (see [`announce`]).
    pub bound: crate::endpoint::Endpoint,
    /// --json, which moves the ready line to stderr when it is stdout.
    pub json: Option<&'a Path>,
    /// The line for people on stderr (None with --quiet).
    pub banner: Option<String>,
}

/// How a server's run ended, for its report.
pub struct Stopped<C> {
    /// The workers' counters, summed.
    pub total: C,
    /// The stop signal's name (`SIGTERM`, `SIGINT`).
    pub signal: String,
    /// When the ready line went out.
    pub started: Instant,
    /// When the stop signal was seen.
    pub stop_at: Instant,
}

impl<C> Stopped<C> {
    /// The report's `stop_reason`.
    pub fn stop_reason(&self) -> String {
        format!("signal:{}", self.signal)
    }
}

impl Crew {
    /// A crew for at most `max_conns` connections at once.
    pub fn new(max_conns: Option<u64>) -> Result<Self> {
        Ok(Self {
            stop: StopFlag::new()?,
            exits: Arc::new(ExitNotice::new()?),
            slots: Arc::new(Slots::new(max_conns)),
        })
    }

    /// Starts a worker thread whose exit always wakes the controller.
    pub fn spawn<C: Send + 'static>(
        &self,
        name: String,
        body: impl FnOnce() -> Result<C> + Send + 'static,
    ) -> Result<WorkerHandle<C>> {
        spawn_worker(name, Arc::clone(&self.exits), body)
    }

    /// Starts one worker per event loop, named `{prefix}-{i}`. The loops
    /// are built first (everything that can fail set up), so a failure
    /// leaves no thread behind.
    pub fn spawn_loops<L: Send + 'static, C: Send + 'static>(
        &self,
        prefix: &str,
        loops: Vec<L>,
        run: fn(L) -> Result<C>,
    ) -> Result<Vec<WorkerHandle<C>>> {
        loops
            .into_iter()
            .enumerate()
            .map(|(i, lp)| self.spawn(format!("{prefix}-{i}"), move || run(lp)))
            .collect()
    }

    /// The controller's part once the workers run: announces the server
    /// (see [`Ready`]), sleeps until SIGTERM/SIGINT, raises the stop, and
    /// joins the workers within their `drain` plus [`JOIN_GRACE`]. A worker
    /// that stopped on its own voids the run; `what` names one in that
    /// error ("an event loop").
    pub fn run_until_stop<C: Merge>(
        &self,
        signals: &mut Signals,
        workers: Vec<WorkerHandle<C>>,
        ready: Ready<'_>,
        drain: Duration,
        what: &str,
    ) -> Result<Stopped<C>> {
        announce(&ready.bound, ready.json);
        let started = Instant::now();
        if let Some(line) = ready.banner {
            crate::progress::say!("{line}");
        }
        let cause = wait_for_stop(signals, &self.exits)?;
        let stop_at = Instant::now();
        self.stop.raise();
        let total = join_all(workers, &self.exits, drain + JOIN_GRACE)?;
        match cause {
            StopCause::Signal(signal) => Ok(Stopped {
                total,
                signal,
                started,
                stop_at,
            }),
            // Workers only return early on error, and join_all reported
            // those.
            StopCause::WorkerExited => Err(anyhow!("{what} stopped on its own; the run is void")),
        }
    }
}

/// Connection slots for --max-conns, shared by every loop of a server.
#[derive(Debug, Default)]
pub struct Slots {
    max: Option<u64>,
    open: std::sync::atomic::AtomicU64,
}

impl Slots {
    /// At most `max` at once (None: no limit, only counted).
    pub fn new(max: Option<u64>) -> Self {
        Self {
            max,
            open: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Takes a slot; false when all are taken (the caller closes the
    /// connection and counts it rejected).
    pub fn admit(&self) -> bool {
        use std::sync::atomic::Ordering;
        match self.max {
            None => {
                self.open.fetch_add(1, Ordering::Relaxed);
                true
            }
            Some(max) => self
                .open
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok(),
        }
    }

    /// Gives back the slot of a closed connection.
    pub fn release(&self) {
        self.open.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}
