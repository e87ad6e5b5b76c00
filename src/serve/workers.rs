//! Worker threads of a server (echo, relay): started so that their exit,
//! however it happens, wakes the controller; joined with a bound; their
//! counters summed.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::signals::ExitNotice;

/// Counters a worker returns, summed across workers at the end.
pub trait Merge: Default {
    /// Adds `other` into `self`.
    fn merge(&mut self, other: &Self);
}

/// A worker thread's handle: its counters, or why it failed.
pub type Worker<C> = JoinHandle<Result<C>>;

/// Starts a worker thread that always bumps `exits` when it ends, even by
/// panic, so the controller never waits on a dead worker.
pub fn spawn_worker<C: Send + 'static>(
    name: String,
    exits: Arc<ExitNotice>,
    body: impl FnOnce() -> Result<C> + Send + 'static,
) -> Result<Worker<C>> {
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
    workers: Vec<Worker<C>>,
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
