//! The event loop both TCP workloads run: stop conditions, housekeeping
//! (timeouts, reconnects), open-loop release and dispatch, and the wait
//! that paces it all.
//!
//! Waking from a timer takes tens of microseconds on a VM (33 us on average
//! here, with timer slack at 1 ns), and in open loop every microsecond a
//! send is late counts as latency. Polling instead of sleeping would hide
//! that, but on a machine where the target shares the CPUs, a spinning
//! generator steals the target's CPU and makes things worse (measured: p90
//! send lag went from tens of microseconds to milliseconds). So the loop
//! sleeps (timer slack 1 ns, at least 50 us at a time so high rates go out
//! in small batches) and the lateness is measured and reported as `send
//! lag`, the generator's own share of the latency.
//!
//! A duration run ends gracefully: once the measured window is over the
//! loop stops issuing, closes the connections with nothing in flight and
//! waits (at most [`drain_limit`]) for the answers still owed, so the target
//! sees orderly closes instead of resets from the generator's teardown.

use std::io;
use std::time::Duration;

use super::plan::{Stop, TcpPlan, WorkerCtx};
use super::schedule::Schedule;
use super::tally::Tally;
use crate::poller::{Poller, Ready};

/// How often timeouts and reconnects are checked.
pub const HOUSEKEEPING_NS: u64 = 10_000_000;
/// Shortest sleep between open-loop releases.
const QUANTUM_NS: u64 = 50_000;

/// What a workload plugs into the loop.
pub trait Workload {
    /// Its epoll instance.
    fn poller(&mut self) -> &mut Poller;
    /// Its open-loop schedule, if any.
    fn schedule(&self) -> Option<&Schedule>;
    /// Count mode: everything issued and answered.
    fn count_done(&self) -> bool;
    /// Timeouts and reconnects.
    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut Tally);
    /// Open loop: release due sends and give them to idle connections.
    fn release_and_dispatch(&mut self, now: u64, tally: &mut Tally);
    /// One readiness report.
    fn handle(&mut self, ev: Ready, tally: &mut Tally);
    /// Requests issued and not answered yet (tcp-crr: exchanges under way).
    fn in_flight(&self) -> u64;
    /// Drain: closes every connection with nothing in flight (an orderly
    /// FIN: no unread data, no answer still coming).
    fn close_idle(&mut self);
}

/// Longest wait for the answers still in flight once a duration run's
/// window has ended: `--timeout`, at most 1 s.
pub fn drain_limit(timeout: Duration) -> Duration {
    timeout.min(Duration::from_secs(1))
}

/// Runs the loop until the worker's share is done. Returns true when count
/// mode gave up because nothing completed for twice the timeout.
pub fn drive<W: Workload>(
    w: &mut W,
    plan: &TcpPlan,
    ctx: &WorkerCtx,
    tally: &mut Tally,
) -> io::Result<bool> {
    let timeout = plan.timeout.as_nanos() as u64;
    let mut next_housekeeping = 0;
    let mut last_count = 0;
    let mut last_progress = ctx.clock.now();
    loop {
        let now = ctx.clock.now();
        if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) || w.count_done() {
            return Ok(false);
        }
        if ctx.end.is_some_and(|e| now >= e) {
            drain(w, plan, ctx, tally)?;
            return Ok(false);
        }
        if now >= next_housekeeping {
            w.housekeeping(now, timeout, tally);
            next_housekeeping = now + HOUSEKEEPING_NS;
            // Count mode has no end time: give up when nothing completes
            // for twice the timeout (a dead or stalled target).
            let done = tally.transactions + tally.warmup_transactions;
            if done != last_count {
                last_count = done;
                last_progress = now;
            } else if matches!(plan.stop, Stop::Count(_)) && now - last_progress > 2 * timeout {
                return Ok(true);
            }
        }
        let due = w.schedule().and_then(|s| s.next_due());
        if due.is_some() {
            w.release_and_dispatch(now, tally);
        }
        let mut wake = next_housekeeping;
        if let Some(e) = ctx.end {
            wake = wake.min(e);
        }
        if let Some(d) = due {
            // Never sleep less than a quantum: at high rates sends are
            // released in small batches instead of one timer wake each
            // (a wake costs several microseconds of CPU here).
            wake = wake.min(d.max(now + QUANTUM_NS));
        }
        let n = w
            .poller()
            .wait(Some(Duration::from_nanos(wake.saturating_sub(now))))?;
        for k in 0..n {
            let ev = w.poller().ready(k);
            w.handle(ev, tally);
        }
    }
}

/// After the end of a duration run: issues nothing, closes what is idle and
/// waits for the answers still in flight, until none is left, the drain
/// limit passes, or the run is stopped. Answers that arrive now are counted
/// apart (`answered_after_end`); what is still unanswered afterwards is the
/// worker's `unanswered`.
fn drain<W: Workload>(
    w: &mut W,
    plan: &TcpPlan,
    ctx: &WorkerCtx,
    tally: &mut Tally,
) -> io::Result<()> {
    tally.close_window();
    let deadline = ctx.clock.now() + drain_limit(plan.timeout).as_nanos() as u64;
    loop {
        w.close_idle();
        let now = ctx.clock.now();
        if w.in_flight() == 0
            || now >= deadline
            || ctx.stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(());
        }
        // The stop flag is checked at least every 100 ms.
        let wait = (deadline - now).min(100_000_000);
        let n = w.poller().wait(Some(Duration::from_nanos(wait)))?;
        for k in 0..n {
            let ev = w.poller().ready(k);
            w.handle(ev, tally);
        }
    }
}
