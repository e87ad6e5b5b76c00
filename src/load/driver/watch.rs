//! The main thread of a TCP run: before it, the wait for `--start-at`;
//! while the workers run, the watch over them (progress bar, per-second
//! intervals gathered from the workers, Ctrl-C and SIGTERM/SIGHUP, the
//! caller's abort, a target nobody can connect to, which stops the run
//! early instead of waiting out -d). The workers themselves are
//! `engine`'s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use indicatif::ProgressBar;

use crate::load::driver::plan::{Stop, TcpPlan, WorkerCtx};
use crate::load::driver::tally::{IntervalRecord, ProgressCounters, SecondTally};
use crate::signals::{Signals, StopFlag, signal_name};

/// What the watching (main) thread saw while the workers ran.
#[derive(Default)]
pub(in crate::load) struct Watched {
    /// Per second: every worker's records added up.
    pub(in crate::load) intervals: BTreeMap<u64, SecondTally>,
    /// The signal that stopped the run, if one did.
    pub(in crate::load) interrupted: Option<String>,
    /// True when the embedding caller aborted the run.
    pub(in crate::load) aborted: bool,
}

/// Waits until `--start-at`, watching for Ctrl-C (and SIGTERM, SIGHUP)
/// and the caller's abort: an interrupted wait ends the command with
/// 128+N and no artifact, since nothing was measured. Sleeps in poll until
/// a millisecond before the instant, then reads the clock in a loop, so
/// the start is late by microseconds, not by a timer's slack.
pub(in crate::load) fn wait_for_start(
    at: &crate::values::StartAt,
    signals: &mut Signals,
    abort: Option<&StopFlag>,
    quiet: bool,
) -> Result<()> {
    use crate::values::unix_now_ns;
    let ahead = at.unix_ns.saturating_sub(unix_now_ns());
    if !quiet && ahead > 1_000_000_000 {
        crate::progress::say!(
            "sockscope: waiting {:.1} s for --start-at {}",
            ahead as f64 / 1e9,
            at.given
        );
    }
    loop {
        if let Some(si) = signals.pending() {
            return Err(crate::error::with_code(
                (128 + si.ssi_signo.min(127)) as u8,
                format!(
                    "interrupted by {} while waiting for --start-at {}; nothing was measured \
                     or written",
                    signal_name(si.ssi_signo),
                    at.given
                ),
            ));
        }
        if abort.is_some_and(|f| f.is_raised()) {
            return Err(anyhow!(
                "aborted while waiting for --start-at {}; nothing was measured",
                at.given
            ));
        }
        let left = at.unix_ns.saturating_sub(unix_now_ns());
        if left == 0 {
            return Ok(());
        }
        if left > 2_000_000 {
            // Wake a millisecond early, at most 100 ms per poll so a
            // clock step (NTP) is noticed.
            let ms = ((left - 1_000_000) / 1_000_000).min(100);
            wait_signal_or(signals, abort, Duration::from_millis(ms));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Sums one progress counter over the workers.
fn total(ctxs: &[WorkerCtx], counter: impl Fn(&ProgressCounters) -> &AtomicU64) -> u64 {
    ctxs.iter()
        .map(|c| counter(&c.progress).load(Ordering::Relaxed))
        .sum()
}

/// The main thread while the workers run (until `all_done`): progress,
/// intervals, signals, the caller's abort, and a target nobody can connect
/// to (no point waiting out -d).
pub(in crate::load) fn watch(
    plan: &TcpPlan,
    ctxs: &[WorkerCtx],
    signals: &mut Signals,
    bar: Option<&ProgressBar>,
    rx: &mpsc::Receiver<IntervalRecord>,
    watched: &mut Watched,
    all_done: impl Fn() -> bool,
) {
    let Some(first) = ctxs.first() else {
        return;
    };
    let (clock, stop) = (first.clock, &first.stop);
    let give_up_at = plan.timeout.min(Duration::from_secs(1)).as_nanos() as u64;
    loop {
        let connects = total(ctxs, |p| &p.connects);
        let errs = total(ctxs, |p| &p.errors);
        if connects == 0
            && errs >= plan.connections as u64
            && clock.now() >= give_up_at
            && !stop.load(Ordering::Relaxed)
        {
            stop.store(true, Ordering::Relaxed);
        }
        if let Some(si) = signals.pending() {
            if watched.interrupted.is_none() {
                watched.interrupted = Some(signal_name(si.ssi_signo));
                stop.store(true, Ordering::Relaxed);
            }
        }
        if plan.abort.as_ref().is_some_and(|f| f.is_raised()) && !watched.aborted {
            watched.aborted = true;
            stop.store(true, Ordering::Relaxed);
        }
        while let Ok(rec) = rx.try_recv() {
            add_interval(&mut watched.intervals, rec);
        }
        if let Some(b) = bar {
            let done = total(ctxs, |p| &p.transactions);
            let errs = total(ctxs, |p| &p.errors);
            update_bar(b, plan, clock.now(), first.measure_from, done, errs);
        }
        if all_done() {
            break;
        }
        wait_signal_or(signals, plan.abort.as_deref(), Duration::from_millis(100));
    }
}

/// Adds one worker's second to the run's intervals.
pub(in crate::load) fn add_interval(map: &mut BTreeMap<u64, SecondTally>, rec: IntervalRecord) {
    map.entry(rec.second).or_default().add(rec);
}

/// Waits `d` at most, or until a signal is pending or the caller aborts.
fn wait_signal_or(signals: &Signals, abort: Option<&StopFlag>, d: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
    if let Some(f) = abort {
        fds.push(PollFd::new(f.fd(), PollFlags::POLLIN));
    }
    let _ = poll(
        &mut fds,
        PollTimeout::try_from(d.as_millis() as i32).unwrap_or(PollTimeout::NONE),
    );
}

/// The progress bar of a run on stderr, unless --quiet or not a terminal.
pub(in crate::load) fn progress_bar(plan: &TcpPlan, quiet: bool) -> Option<ProgressBar> {
    if !crate::progress::wanted(quiet) {
        return None;
    }
    let len = match plan.stop {
        Stop::Duration(d) => (plan.warmup + d).as_millis() as u64,
        Stop::Count(n) => n,
    };
    Some(crate::progress::bar(
        Some(len),
        &format!("{} {} [{{bar:30}}] {{msg}}", plan.workload, plan.addr),
    ))
}

/// Shows where the run is: its time or count, transactions, rate, errors.
fn update_bar(
    bar: &ProgressBar,
    plan: &TcpPlan,
    now: u64,
    measure_from: u64,
    done: u64,
    errs: u64,
) {
    let secs = now as f64 / 1e9;
    match plan.stop {
        Stop::Duration(_) => bar.set_position(now / 1_000_000),
        Stop::Count(_) => bar.set_position(done),
    }
    let phase = if now < measure_from { "warm-up, " } else { "" };
    let rate = if now > measure_from {
        done as f64 / ((now - measure_from) as f64 / 1e9)
    } else {
        0.0
    };
    bar.set_message(format!(
        "{phase}{secs:.1} s, {done} tx ({rate:.0}/s), {errs} errors"
    ));
}
