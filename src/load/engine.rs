//! Runs the TCP workers on their threads and turns what they measured into
//! a `LoadReport`: starts the workers with signals blocked, shows progress,
//! stops them on Ctrl-C, merges their tallies and per-second intervals,
//! and accounts the generator's own CPU.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow};
use hdrhistogram::Histogram;
use nix::sys::signal::Signal;

use super::plan::{Progress, RunClock, Stop, TcpPlan, WorkerCtx};
use super::tally::{self, ErrorClass, IntervalRecord, Tally};
use super::tcp_rr::{ConnTally, WorkerEnd};
use super::{tcp_crr, tcp_rr};
use crate::report::load::{
    Bytes, Connections, Errors, Generator, Interval, LatencyRecord, LoadConfig, LoadReport, SCHEMA,
    SCHEMA_VERSION, seal_intervals,
};
use crate::signals::{Signals, StopFlag, signal_name};
use crate::stats::LatencyHist;

/// Which TCP workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpKind {
    /// Persistent connections.
    Rr,
    /// Connect, request, response, close.
    Crr,
}

impl TcpKind {
    fn name(self) -> &'static str {
        match self {
            Self::Rr => "tcp-rr",
            Self::Crr => "tcp-crr",
        }
    }
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    let (u, s) = rusage_ns(libc::RUSAGE_THREAD);
    u + s
}

/// (user, system) CPU of `who`, ns.
pub fn rusage_ns(who: libc::c_int) -> (u64, u64) {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

struct WorkerResult {
    tally: Tally,
    end: WorkerEnd,
    cpu_ns: u64,
    wall_ns: u64,
    /// When it stopped, on the run clock: the end of what it recorded.
    stopped_at: u64,
}

/// A finished TCP run.
pub struct Outcome {
    /// The result.
    pub report: LoadReport,
    /// Why the run counts as failed (errors over budget, stalled...).
    pub failure: Option<String>,
    /// tcp-rr: each connection's local address and responses (empty for
    /// tcp-crr).
    pub connections: Vec<ConnTally>,
}

/// Raises the soft open-files limit so `conns` sockets fit (up to the hard
/// limit); says so when they cannot.
fn ensure_fd_room(conns: usize) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = conns as u64 + 64;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading RLIMIT_NOFILE")?;
    if soft >= need {
        return Ok(());
    }
    if hard < need {
        return Err(crate::error::with_code(
            1,
            format!(
                "{conns} connections need {need} file descriptors but the hard limit is {hard} \
                 (raise it with ulimit -Hn or /etc/security/limits.conf)"
            ),
        ));
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, hard).context("raising RLIMIT_NOFILE")?;
    Ok(())
}

/// Runs `plan` and builds the report. `config` is recorded as is.
pub fn run_tcp(
    plan: &TcpPlan,
    kind: TcpKind,
    config: LoadConfig,
    max_errors: u64,
    quiet: bool,
) -> Result<Outcome> {
    ensure_fd_room(plan.connections)?;
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    let started_at = SystemTime::now();
    let clock = RunClock::start();
    let measure_from = plan.warmup.as_nanos() as u64;
    let end = match plan.stop {
        Stop::Duration(d) => Some(measure_from + d.as_nanos() as u64),
        Stop::Count(_) => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<IntervalRecord>();
    let open_loop = plan.rate.is_some();
    let progress: Vec<Arc<Progress>> = (0..plan.threads)
        .map(|_| Arc::new(Progress::default()))
        .collect();
    let ctxs: Vec<WorkerCtx> = (0..plan.threads)
        .map(|i| WorkerCtx {
            index: i,
            conns: WorkerCtx::share(plan.connections as u64, plan.threads, i) as usize,
            rate: plan.rate.map(|r| r / plan.threads as f64),
            connect_rate: plan.connect_rate.map(|r| r / plan.threads as f64),
            quota: match plan.stop {
                Stop::Count(n) => Some(WorkerCtx::share(n, plan.threads, i)),
                Stop::Duration(_) => None,
            },
            clock,
            measure_from,
            end,
            stop: Arc::clone(&stop),
            progress: Arc::clone(&progress[i]),
        })
        .collect();
    let cpu_before = rusage_ns(libc::RUSAGE_SELF);
    let bar = progress_bar(plan, kind, quiet);
    let mut intervals: BTreeMap<u64, (u64, u64, Histogram<u32>)> = BTreeMap::new();
    let mut interrupted: Option<String> = None;
    let mut aborted = false;

    let results: Vec<Result<WorkerResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ctxs
            .iter()
            .map(|ctx| {
                let tx = tx.clone();
                scope.spawn(move || -> Result<WorkerResult> {
                    // Timer slack would delay every paced send by up to
                    // 50 us and show up as target latency in open loop.
                    // SAFETY: prctl with integer arguments.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
                    let cpu0 = thread_cpu_ns();
                    let t0 = clock.now();
                    let mut t = Tally::new(
                        measure_from,
                        open_loop,
                        kind == TcpKind::Crr,
                        tx,
                        Arc::clone(&ctx.progress),
                    );
                    let end = match kind {
                        TcpKind::Rr => tcp_rr::run(plan, ctx, &mut t),
                        TcpKind::Crr => tcp_crr::run(plan, ctx, &mut t),
                    }
                    .with_context(|| format!("load worker {}", ctx.index))?;
                    let stopped_at = clock.now();
                    Ok(WorkerResult {
                        tally: t,
                        end,
                        cpu_ns: thread_cpu_ns() - cpu0,
                        wall_ns: stopped_at - t0,
                        stopped_at,
                    })
                })
            })
            .collect();
        drop(tx);
        // The main thread watches: progress, intervals, signals, and a
        // target nobody can connect to (no point waiting out -d).
        let give_up_at = plan.timeout.min(Duration::from_secs(1)).as_nanos() as u64;
        loop {
            let connects: u64 = progress
                .iter()
                .map(|p| p.connects.load(Ordering::Relaxed))
                .sum();
            let errs: u64 = progress
                .iter()
                .map(|p| p.errors.load(Ordering::Relaxed))
                .sum();
            if connects == 0
                && errs >= plan.connections as u64
                && clock.now() >= give_up_at
                && !stop.load(Ordering::Relaxed)
            {
                stop.store(true, Ordering::Relaxed);
            }
            if let Some(si) = signals.pending() {
                if interrupted.is_none() {
                    interrupted = Some(signal_name(si.ssi_signo));
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if plan.abort.as_ref().is_some_and(|f| f.is_raised()) && !aborted {
                aborted = true;
                stop.store(true, Ordering::Relaxed);
            }
            while let Ok(rec) = rx.try_recv() {
                add_interval(&mut intervals, rec);
            }
            if let Some(b) = &bar {
                let done: u64 = progress
                    .iter()
                    .map(|p| p.transactions.load(Ordering::Relaxed))
                    .sum();
                let errs: u64 = progress
                    .iter()
                    .map(|p| p.errors.load(Ordering::Relaxed))
                    .sum();
                update_bar(b, plan, clock.now(), measure_from, done, errs);
            }
            if handles.iter().all(|h| h.is_finished()) {
                break;
            }
            wait_signal_or(&signals, plan.abort.as_deref(), Duration::from_millis(100));
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a load worker panicked")))
            })
            .collect()
    });
    while let Ok(rec) = rx.try_recv() {
        add_interval(&mut intervals, rec);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let cpu_after = rusage_ns(libc::RUSAGE_SELF);

    let mut parts = Vec::new();
    let mut ends = Vec::new();
    let mut shares = Vec::new();
    let mut stopped_at = 0;
    for r in results {
        let r = r?;
        stopped_at = stopped_at.max(r.stopped_at);
        shares.push(r.cpu_ns as f64 / r.wall_ns.max(1) as f64);
        parts.push(r.tally);
        ends.push(r.end);
    }
    let t = tally::merge(parts).ok_or_else(|| anyhow!("no load worker ran"))?;

    // Until the last worker stopped, not until the watching thread noticed
    // (up to one poll period later: a 50 ms count run read as 100 ms).
    let measured_ns = match plan.stop {
        Stop::Duration(_) => stopped_at
            .saturating_sub(measure_from)
            .min(end.unwrap_or(u64::MAX) - measure_from),
        Stop::Count(_) => stopped_at.saturating_sub(measure_from),
    };
    let duration_s = measured_ns as f64 / 1e9;
    let established: u64 = ends.iter().map(|e| e.established as u64).sum();
    let stalled = ends.iter().any(|e| e.stalled);
    let user = (cpu_after.0 - cpu_before.0) as f64 / 1e9;
    let system = (cpu_after.1 - cpu_before.1) as f64 / 1e9;
    let all_tx = t.transactions + t.warmup_transactions;
    let saturated = shares.iter().any(|s| *s >= 0.9);

    let mut notes = Vec::new();
    let overflow: u64 = ends.iter().map(|e| e.backlog_overflow).sum();
    let backlog_left: u64 = ends.iter().map(|e| e.backlog_at_end).sum();
    if overflow > 0 || backlog_left > 0 {
        notes.push(format!(
            "the target could not keep up with --rate: {backlog_left} intended requests were \
             still waiting for a connection at the end and {overflow} were dropped from a full \
             backlog (the latency of those never sent is not in the histogram)"
        ));
    }
    if saturated {
        let busiest = shares.iter().cloned().fold(0.0, f64::max);
        notes.push(format!(
            "a load worker thread was busy {:.0}% of the time: the generator itself may have \
             been the bottleneck (try more -t threads, or compare with a lighter load)",
            busiest * 100.0
        ));
    }
    notes.push(
        "loopback or single-host figures include the generator and the target sharing CPUs".into(),
    );

    let errors_total = t.error_count();
    let end_reason = if let Some(sig) = &interrupted {
        format!("signal:{sig}")
    } else if aborted {
        "aborted".to_string()
    } else if stalled {
        "stalled".to_string()
    } else {
        match plan.stop {
            Stop::Duration(_) => "duration".into(),
            Stop::Count(_) => "count".into(),
        }
    };
    let mut failure = None;
    if established == 0 {
        failure = Some(format!(
            "no connection to {} could be established ({})",
            plan.addr,
            error_classes(&t.errors).unwrap_or_else(|| "no error reported".into())
        ));
    } else if let Some(sig) = &interrupted {
        failure = Some(format!(
            "interrupted by {sig}; the figures cover the run until then"
        ));
    } else if aborted {
        failure = Some("aborted by its caller; the figures cover the run until then".into());
    } else if stalled {
        failure = Some(format!(
            "no transaction completed for {:.1} s: the target stalled before the count was reached",
            2.0 * plan.timeout.as_secs_f64()
        ));
    } else if errors_total > max_errors {
        failure = Some(format!(
            "{errors_total} errors, more than --max-errors {max_errors} ({})",
            error_classes(&t.errors).unwrap_or_default()
        ));
    } else if t.transactions == 0 {
        failure = Some("no transaction completed in the measured window".into());
    }

    let report = LoadReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        workload: kind.name().into(),
        target: plan.addr.to_string(),
        config,
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_s,
        complete: failure.is_none(),
        end_reason,
        connections: Connections {
            requested: plan.connections,
            established,
            connects: t.connects,
        },
        transactions: t.transactions,
        warmup_transactions: t.warmup_transactions,
        rate_per_s: if duration_s > 0.0 {
            t.transactions as f64 / duration_s
        } else {
            0.0
        },
        latency: record(&t.latency)?,
        latency_uncorrected: t.uncorrected.as_ref().map(record).transpose()?.flatten(),
        send_lag: t.send_lag.as_ref().map(record).transpose()?.flatten(),
        connect_latency: t.connect.as_ref().map(record).transpose()?.flatten(),
        errors: Errors {
            total: errors_total,
            by_class: t
                .errors
                .iter()
                .map(|(k, v)| (k.name().to_string(), *v))
                .collect(),
            unanswered_at_end: ends.iter().map(|e| e.unanswered).sum(),
            answered_after_end: t.answered_after_end,
        },
        intervals: seal_intervals(
            intervals
                .into_iter()
                .map(|(s, (tx, er, h))| Interval {
                    t_s: s,
                    transactions: tx,
                    errors: er,
                    // A second with errors only has no latency to show.
                    p50_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.5)),
                    p99_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.99)),
                    max_ns: (!h.is_empty()).then(|| h.max()),
                    ..Interval::empty(s)
                })
                .collect(),
            // Until the last worker stopped: everything the workers
            // recorded.
            stopped_at.saturating_sub(measure_from) as f64 / 1e9,
        ),
        bytes: Bytes {
            sent: t.bytes_sent,
            received: t.bytes_received,
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: if all_tx > 0 {
                (user + system) * 1e6 / all_tx as f64
            } else {
                0.0
            },
            thread_cpu_share: shares,
            saturated,
        },
        udp: None,
        notes,
    };
    let connections = ends.into_iter().flat_map(|e| e.connections).collect();
    Ok(Outcome {
        report,
        failure,
        connections,
    })
}

/// A latency record, or None for an empty histogram.
pub fn record(h: &LatencyHist) -> Result<Option<LatencyRecord>> {
    if h.is_empty() {
        return Ok(None);
    }
    Ok(Some(LatencyRecord {
        summary: h.summary(),
        hdr_histogram: h.to_v2_base64()?,
    }))
}

fn add_interval(map: &mut BTreeMap<u64, (u64, u64, Histogram<u32>)>, rec: IntervalRecord) {
    let e = map
        .entry(rec.second)
        .or_insert_with(|| (0, 0, tally::interval_hist()));
    e.0 += rec.transactions;
    e.1 += rec.errors;
    let _ = e.2.add(&rec.hist);
}

/// The error classes of a run, most frequent first ("ECONNRESET x10,
/// short_read x2"), so a failure says what went wrong and not only how
/// often; None when there were none.
fn error_classes(errors: &BTreeMap<ErrorClass, u64>) -> Option<String> {
    let mut v: Vec<(&ErrorClass, &u64)> = errors.iter().filter(|(_, n)| **n > 0).collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = v
        .iter()
        .map(|(k, n)| format!("{} x{n}", k.name()))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

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

fn progress_bar(plan: &TcpPlan, kind: TcpKind, quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let (len, unit) = match plan.stop {
        Stop::Duration(d) => ((plan.warmup + d).as_millis() as u64, "ms"),
        Stop::Count(n) => (n, "tx"),
    };
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{} {} [{{bar:30}}] {{msg}}",
        kind.name(),
        plan.addr
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    let _ = unit;
    Some(bar)
}

fn update_bar(
    bar: &indicatif::ProgressBar,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_classes_name_the_most_frequent_first() {
        let mut e = BTreeMap::new();
        assert_eq!(error_classes(&e), None);
        e.insert(ErrorClass::ShortRead, 2);
        e.insert(ErrorClass::Reset, 10);
        e.insert(ErrorClass::Refused, 0);
        assert_eq!(
            error_classes(&e).as_deref(),
            Some("ECONNRESET x10, short_read x2")
        );
    }
}
