//! Open loop for the HTTP/2 engine (`--rate`): one pacer task per worker
//! releases the intended send times of the worker's [`Schedule`] into its
//! backlog, and every stream loop of every connection takes the next one
//! when it is free. A request's latency runs from its intended time, so a
//! target that falls behind shows as latency, not as a slower generator
//! (coordinated omission), exactly as in the TCP driver.
//!
//! The pacer sleeps on a timerfd, not on tokio's timer: tokio's wheel has
//! millisecond resolution, so every release would be up to a millisecond
//! late, and the send lag (the generator-limited sign) would measure the
//! timer instead of the generator. Like the driver, it never sleeps less
//! than a quantum: at high rates sends go out in small batches, not one
//! wake-up each.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::OwnedFd;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use crate::load::driver::tally::WorkerTally;
use crate::load::driver::timerfd;
use crate::load::schedule::Schedule;

/// Shortest sleep between releases, ns (the driver's quantum).
const QUANTUM_NS: u64 = 50_000;
/// Longest sleep: the stop flag and the run's end are noticed this soon.
const TICK_NS: u64 = 10_000_000;

/// A worker's open-loop pacer.
pub struct Pacer {
    sched: RefCell<Schedule>,
    /// Woken once per released send (a stored permit when no loop waits).
    ready: Notify,
    /// The pacer stopped releasing: the schedule is exhausted or the run
    /// ended.
    done: Cell<bool>,
    timer: AsyncFd<OwnedFd>,
}

impl Pacer {
    /// A pacer for `sched`; must be created inside the worker's runtime.
    pub fn new(sched: Schedule) -> io::Result<Self> {
        let fd = timerfd::create()?;
        // SAFETY: the OwnedFd is valid, open, and owned by the AsyncFd for
        // its whole life (never closed or replaced under it).
        let timer = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        Ok(Pacer {
            sched: RefCell::new(sched),
            ready: Notify::new(),
            done: Cell::new(false),
            timer,
        })
    }

    /// Releases sends until the schedule is exhausted or `go_on` says the
    /// run ended (`now` reads the run clock); each release's lateness is
    /// recorded in `tally` as the send lag. Then wakes every waiting loop.
    pub async fn run(
        &self,
        now: impl Fn() -> u64,
        go_on: impl Fn(u64) -> bool,
        end: Option<u64>,
        tally: &RefCell<WorkerTally>,
    ) {
        loop {
            let t = now();
            if !go_on(t) {
                break;
            }
            let released = {
                let mut s = self.sched.borrow_mut();
                let before = s.backlog.len();
                let mut tally = tally.borrow_mut();
                // Streams share a connection: a release never waits for
                // one, so its lateness is all the generator's.
                s.release(t, |at, lag, _| tally.release_lag(at, lag, true));
                s.backlog.len().saturating_sub(before)
            };
            for _ in 0..released {
                self.ready.notify_one();
            }
            let Some(due) = self.sched.borrow().next_due() else {
                break;
            };
            let mut wake = due.max(t + QUANTUM_NS).min(t + TICK_NS);
            if let Some(e) = end {
                wake = wake.min(e.max(t + 1));
            }
            if self.sleep(wake - t).await.is_err() {
                // No timer: stop pacing rather than spin; the run ends
                // with the sends released so far.
                break;
            }
        }
        self.done.set(true);
        self.ready.notify_waiters();
    }

    /// Sleeps `ns` on the timerfd.
    async fn sleep(&self, ns: u64) -> io::Result<()> {
        timerfd::fire_after(self.timer.get_ref(), ns)?;
        loop {
            let mut guard = self.timer.readable().await?;
            if timerfd::drain(self.timer.get_ref())? {
                return Ok(());
            }
            guard.clear_ready();
        }
    }

    /// The next intended send time, waiting for one to be released; None
    /// once the pacer is done and nothing is left to send.
    pub async fn take(&self) -> Option<u64> {
        loop {
            // Created before the check: a release between the two still
            // wakes it (single-threaded, but the order costs nothing).
            let notified = self.ready.notified();
            if let Some(t) = self.sched.borrow_mut().backlog.pop_front() {
                return Some(t);
            }
            if self.done.get() {
                return None;
            }
            notified.await;
        }
    }

    /// True once the pacer is done and every send was taken: the worker's
    /// open-loop share is over.
    pub fn finished(&self) -> bool {
        self.done.get() && self.sched.borrow().backlog.is_empty()
    }

    /// Puts back a send that was never processed (a connection that went
    /// away before sending it): it goes out first, still late from its
    /// intended time.
    pub fn give_back(&self, intended: u64) {
        self.sched.borrow_mut().backlog.push_front(intended);
        self.ready.notify_one();
    }

    /// Sends released and never taken, and sends the full backlog could
    /// not hold: what the run's end reports as the open-loop backlog.
    pub fn left(&self) -> (u64, u64) {
        let s = self.sched.borrow();
        (s.backlog.len() as u64, s.overflowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::schedule::rate_plan::RatePlan;
    use std::rc::Rc;

    #[test]
    fn releases_on_time_and_every_taker_ends() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let clock = crate::load::driver::clock::RunClock::start();
        let (tx, _rx) = std::sync::mpsc::channel();
        let tally = Rc::new(RefCell::new(WorkerTally::new(
            0,
            true,
            false,
            false,
            tx,
            Default::default(),
        )));
        let taken = local.block_on(&rt, async {
            // 2000/s for 50 sends: 25 ms.
            let pacer = Rc::new(
                Pacer::new(Schedule::new(
                    &RatePlan::Constant(2000.0),
                    clock.now(),
                    0,
                    Some(50),
                ))
                .unwrap(),
            );
            let takers: Vec<_> = (0..4)
                .map(|_| {
                    let p = Rc::clone(&pacer);
                    tokio::task::spawn_local(async move {
                        let mut got = Vec::new();
                        while let Some(t) = p.take().await {
                            got.push(t);
                            tokio::task::yield_now().await;
                        }
                        got
                    })
                })
                .collect();
            pacer.run(|| clock.now(), |_| true, None, &tally).await;
            let mut all = Vec::new();
            for t in takers {
                all.extend(t.await.unwrap());
            }
            all
        });
        assert_eq!(taken.len(), 50, "every released send taken once");
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 50);
        // The pacer did not release ahead of time: the run lasted at
        // least the schedule (the last intended time is 24.5 ms in).
        assert!(clock.now() >= 24_500_000);
    }
}
