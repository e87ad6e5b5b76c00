//! Runs the TCP workers on their threads and turns what they measured into
//! a `LoadReport`: starts the workers with signals blocked, watches them
//! (progress, per-second intervals, Ctrl-C, the caller's abort, a target
//! nobody can connect to), merges their tallies and intervals, and accounts
//! the generator's own CPU. Each worker runs the connection state machine
//! of the workload's `ConnMode` (`persistent`, `per_txn`) over the
//! workload's exchange.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use nix::sys::signal::Signal;

use super::clock::{RunClock, rusage_ns, thread_cpu_ns};
use super::driver::{ConnTally, WorkerEnd};
use super::plan::{Stop, TcpPlan, WorkerCtx};
use super::tally::{self, IntervalRecord, ProgressCounters, WorkerTally};
use super::workload::{ConnMode, ErrorClass, Exchange};
use super::{datagram, per_txn, persistent};
use crate::report::load::{
    Bytes, CommandCounts, Connections, Errors, Generator, Interval, LatencyRecord, LoadConfig,
    LoadReport, Responses, SCHEMA, SCHEMA_VERSION, StartAtRecord, UdpRrResult, seal_intervals,
};
use crate::signals::{Signals, StopFlag, signal_name};
use crate::stats::LatencyHist;

/// A finished TCP run.
pub struct TcpOutcome {
    /// The result.
    pub report: LoadReport,
    /// Why the run counts as failed (errors over budget, stalled...).
    pub failure: Option<String>,
    /// Persistent connections: each connection's local address and
    /// responses (empty for a connection per transaction).
    pub connections: Vec<ConnTally>,
    /// `--full-log`: what the workers logged.
    pub full_log: Option<FullLogData>,
}

/// The raw transaction log of a run (`--full-log`), for its CSV file.
pub struct FullLogData {
    /// (send time, latency): ns since the Unix epoch, ns; in each
    /// worker's completion order, workers one after the other.
    pub entries: Vec<(u64, u64)>,
    /// Most entries kept over the run.
    pub limit: u64,
    /// Measured transactions left out of it (a worker's share was full).
    pub not_logged: u64,
}

/// The measured window on the run clock.
#[derive(Clone, Copy, Debug)]
struct Window {
    /// Its start (after the warm-up), ns.
    measure_from: u64,
    /// Its end in duration mode, ns.
    end: Option<u64>,
}

impl Window {
    fn of(plan: &TcpPlan) -> Self {
        let measure_from = plan.warmup.as_nanos() as u64;
        Self {
            measure_from,
            end: match plan.stop {
                Stop::Duration(d) => Some(measure_from + d.as_nanos() as u64),
                Stop::Count(_) => None,
            },
        }
    }
}

struct WorkerResult {
    tally: WorkerTally,
    end: WorkerEnd,
    cpu_ns: u64,
    wall_ns: u64,
    /// When it stopped, on the run clock: the end of what it recorded.
    stopped_at: u64,
}

/// What the watching (main) thread saw while the workers ran.
#[derive(Default)]
struct Watched {
    /// Per second: transactions, errors, latencies.
    intervals: BTreeMap<u64, (u64, u64, Histogram<u32>)>,
    /// The signal that stopped the run, if one did.
    interrupted: Option<String>,
    /// True when the embedding caller aborted the run.
    aborted: bool,
}

/// What the workers measured, merged, and what the run cost.
struct Merged {
    tally: WorkerTally,
    ends: Vec<WorkerEnd>,
    /// Each worker thread's busy share (CPU / wall).
    shares: Vec<f64>,
    /// When the last worker stopped, on the run clock.
    stopped_at: u64,
    /// The whole process's (user, system) CPU over the run, s.
    cpu_s: (f64, f64),
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

/// Runs `plan` with `exchange` and builds the report. `config` is
/// recorded as is.
pub fn run_tcp<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    config: LoadConfig,
    max_errors: u64,
    quiet: bool,
) -> Result<TcpOutcome> {
    ensure_fd_room(plan.connections)?;
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    if let Some(at) = &plan.start_at {
        wait_for_start(at, &mut signals, plan.abort.as_deref(), quiet)?;
    }
    // Read back to back: the run clock's zero is this wall-clock instant
    // (to well under a microsecond), which is what maps the full log's
    // send times and the merged timeline to Unix time.
    let started_at = SystemTime::now();
    let clock = RunClock::start();
    let window = Window::of(plan);
    let ctxs = worker_ctxs(plan, clock, window);
    let cpu_before = rusage_ns(libc::RUSAGE_SELF);
    let bar = progress_bar(plan, quiet);
    let (results, watched) = run_workers(plan, exchange, &ctxs, &mut signals, bar.as_ref());
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let cpu_after = rusage_ns(libc::RUSAGE_SELF);
    let mut merged = merge(
        results,
        (
            (cpu_after.0 - cpu_before.0) as f64 / 1e9,
            (cpu_after.1 - cpu_before.1) as f64 / 1e9,
        ),
    )?;
    let full_log = merged.tally.log.take().map(|log| {
        let epoch = crate::report::load::unix_ns(started_at);
        let mut entries = log.entries;
        for e in &mut entries {
            e.0 += epoch;
        }
        FullLogData {
            entries,
            limit: log.cap as u64,
            not_logged: log.not_logged,
        }
    });
    let (mut report, failure) = report(
        plan, config, started_at, window, &merged, watched, max_errors,
    )?;
    report.start_at = plan.start_at.as_ref().map(|at| StartAtRecord {
        requested: at.given.clone(),
        requested_unix_ns: at.unix_ns,
        late_ns: crate::report::load::unix_ns(started_at) as i64 - at.unix_ns as i64,
    });
    if exchange.counts_responses() {
        report.responses = Some(responses(&merged.tally.responses, exchange.ops()));
    }
    if plan.mode.datagram() {
        report.udp_rr = Some(udp_rr(&merged, &report));
    }
    let connections = merged
        .ends
        .into_iter()
        .flat_map(|e| e.connections)
        .collect();
    Ok(TcpOutcome {
        report,
        failure,
        connections,
        full_log,
    })
}

/// Waits until `--start-at`, watching for Ctrl-C (and SIGTERM, SIGHUP)
/// and the caller's abort: an interrupted wait ends the command with
/// 128+N and no artifact, since nothing was measured. Sleeps in poll until
/// a millisecond before the instant, then reads the clock in a loop, so
/// the start is late by microseconds, not by a timer's slack.
fn wait_for_start(
    at: &crate::values::StartAt,
    signals: &mut Signals,
    abort: Option<&StopFlag>,
    quiet: bool,
) -> Result<()> {
    use crate::values::unix_now_ns;
    let ahead = at.unix_ns.saturating_sub(unix_now_ns());
    if !quiet && ahead > 1_000_000_000 {
        eprintln!(
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

/// Each worker's share of the run: connections, rate, count quota.
fn worker_ctxs(plan: &TcpPlan, clock: RunClock, window: Window) -> Vec<WorkerCtx> {
    let stop = Arc::new(AtomicBool::new(false));
    (0..plan.threads)
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
            measure_from: window.measure_from,
            end: window.end,
            stop: Arc::clone(&stop),
            progress: Arc::new(ProgressCounters::default()),
        })
        .collect()
}

/// Runs one worker thread per context and watches them from this one
/// until all have ended.
fn run_workers<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    ctxs: &[WorkerCtx],
    signals: &mut Signals,
    bar: Option<&ProgressBar>,
) -> (Vec<Result<WorkerResult>>, Watched) {
    let (tx, rx) = mpsc::channel::<IntervalRecord>();
    let mut watched = Watched::default();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = ctxs
            .iter()
            .map(|ctx| {
                let tx = tx.clone();
                scope.spawn(move || worker(plan, exchange, ctx, tx))
            })
            .collect();
        drop(tx);
        watch(plan, ctxs, signals, bar, &rx, &mut watched, || {
            handles.iter().all(|h| h.is_finished())
        });
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a load worker panicked")))
            })
            .collect()
    });
    while let Ok(rec) = rx.try_recv() {
        add_interval(&mut watched.intervals, rec);
    }
    (results, watched)
}

/// One worker thread: its connections, by the workload's mode, until its
/// share of the run is done.
fn worker<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    ctx: &WorkerCtx,
    sink: mpsc::Sender<IntervalRecord>,
) -> Result<WorkerResult> {
    // Timer slack would delay every paced send by up to 50 us and show up
    // as target latency in open loop.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let cpu0 = thread_cpu_ns();
    let t0 = ctx.clock.now();
    let mut t = WorkerTally::new(
        ctx.measure_from,
        plan.rate.is_some(),
        plan.mode.per_transaction(),
        plan.tls.is_some(),
        sink,
        Arc::clone(&ctx.progress),
    );
    if let Some(limit) = plan.full_log {
        let share = WorkerCtx::share(limit as u64, plan.threads, ctx.index);
        t.log = Some(tally::FullLog::new(share as usize));
    }
    let end = match plan.mode {
        ConnMode::Persistent { .. } => persistent::run(plan, exchange, ctx, &mut t),
        ConnMode::PerTransaction { .. } => per_txn::run(plan, exchange, ctx, &mut t),
        ConnMode::Datagram { .. } => datagram::run(plan, exchange, ctx, &mut t),
    }
    .with_context(|| format!("load worker {}", ctx.index))?;
    let stopped_at = ctx.clock.now();
    Ok(WorkerResult {
        tally: t,
        end,
        cpu_ns: thread_cpu_ns() - cpu0,
        wall_ns: stopped_at - t0,
        stopped_at,
    })
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
fn watch(
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

/// Merges the workers' tallies; `cpu_s` is the process's (user, system)
/// CPU over the run.
fn merge(results: Vec<Result<WorkerResult>>, cpu_s: (f64, f64)) -> Result<Merged> {
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
    let tally = tally::merge(parts).ok_or_else(|| anyhow!("no load worker ran"))?;
    Ok(Merged {
        tally,
        ends,
        shares,
        stopped_at,
        cpu_s,
    })
}

/// Why the run ended (`end_reason`) and, when it counts as failed, why.
fn verdict(
    plan: &TcpPlan,
    m: &Merged,
    watched: &Watched,
    max_errors: u64,
) -> (String, Option<String>) {
    let t = &m.tally;
    let established: u64 = m.ends.iter().map(|e| e.established as u64).sum();
    let stalled = m.ends.iter().any(|e| e.stalled);
    let errors_total = t.error_count();
    let end_reason = if let Some(sig) = &watched.interrupted {
        format!("signal:{sig}")
    } else if watched.aborted {
        "aborted".to_string()
    } else if stalled {
        "stalled".to_string()
    } else {
        match plan.stop {
            Stop::Duration(_) => "duration".into(),
            Stop::Count(_) => "count".into(),
        }
    };
    // A TLS failure says why (an untrusted certificate, a name mismatch),
    // not only how often.
    let tls_why = t
        .tls_error
        .as_ref()
        .map_or_else(String::new, |e| format!("; first TLS error: {e}"));
    let failure = if established == 0 && plan.mode.datagram() {
        Some(format!(
            "no reply from {} on any socket ({})",
            plan.addr,
            error_classes(&t.errors).unwrap_or_else(|| "no error reported".into())
        ))
    } else if established == 0 {
        Some(format!(
            "no connection to {} could be established ({}){tls_why}",
            plan.addr,
            error_classes(&t.errors).unwrap_or_else(|| "no error reported".into())
        ))
    } else if let Some(sig) = &watched.interrupted {
        Some(format!(
            "interrupted by {sig}; the figures cover the run until then"
        ))
    } else if watched.aborted {
        Some("aborted by its caller; the figures cover the run until then".into())
    } else if stalled {
        // Name what went wrong meanwhile (a server answering garbage
        // stalls a count run too: every response fails).
        let classes = error_classes(&t.errors).map_or(String::new(), |c| format!(" ({c})"));
        Some(format!(
            "no transaction completed for {:.1} s: the target stalled before the count was \
             reached{classes}",
            2.0 * plan.timeout.as_secs_f64()
        ))
    } else if errors_total > max_errors {
        Some(format!(
            "{errors_total} errors, more than --max-errors {max_errors} ({}){tls_why}",
            error_classes(&t.errors).unwrap_or_default()
        ))
    } else if t.transactions == 0 && t.failed_answers == 0 {
        // Whole responses in the window that were failed requests (HTTP
        // 404s within --max-errors) show the target answering: not a run
        // that did nothing.
        Some("no transaction completed in the measured window".into())
    } else {
        None
    };
    (end_reason, failure)
}

/// The caveats of a run: a target behind --rate, a saturated generator,
/// shared CPUs.
fn notes(m: &Merged, saturated: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let overflow: u64 = m.ends.iter().map(|e| e.backlog_overflow).sum();
    let backlog_left: u64 = m.ends.iter().map(|e| e.backlog_at_end).sum();
    if overflow > 0 || backlog_left > 0 {
        notes.push(format!(
            "the target could not keep up with --rate: {backlog_left} intended requests were \
             still waiting for a connection at the end and {overflow} were dropped from a full \
             backlog (the latency of those never sent is not in the histogram)"
        ));
    }
    if saturated {
        let busiest = m.shares.iter().cloned().fold(0.0, f64::max);
        notes.push(format!(
            "a load worker thread was busy {:.0}% of the time: the generator itself may have \
             been the bottleneck (try more -t threads, or compare with a lighter load)",
            busiest * 100.0
        ));
    }
    if let Some(e) = &m.tally.tls_error {
        notes.push(format!("first TLS error: {e}"));
    }
    notes.push(
        "loopback or single-host figures include the generator and the target sharing CPUs".into(),
    );
    notes
}

/// The report of a finished run and, when it counts as failed, why.
fn report(
    plan: &TcpPlan,
    config: LoadConfig,
    started_at: SystemTime,
    window: Window,
    m: &Merged,
    watched: Watched,
    max_errors: u64,
) -> Result<(LoadReport, Option<String>)> {
    let (end_reason, failure) = verdict(plan, m, &watched, max_errors);
    let t = &m.tally;
    let mut config = config;
    if let (Some(c), Some(n)) = (config.tls.as_mut(), t.tls_negotiated) {
        c.protocol_version = Some(n.version.into());
        c.cipher_suite = Some(n.cipher_suite.into());
    }
    let measure_from = window.measure_from;
    // Until the last worker stopped, not until the watching thread noticed
    // (up to one poll period later: a 50 ms count run read as 100 ms).
    let measured_ns = match plan.stop {
        Stop::Duration(_) => m
            .stopped_at
            .saturating_sub(measure_from)
            .min(window.end.unwrap_or(u64::MAX) - measure_from),
        Stop::Count(_) => m.stopped_at.saturating_sub(measure_from),
    };
    let duration_s = measured_ns as f64 / 1e9;
    let (user, system) = m.cpu_s;
    let all_tx = t.transactions + t.warmup_transactions;
    let saturated = m.shares.iter().any(|s| *s >= 0.9);
    let report = LoadReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        workload: plan.workload.into(),
        target: plan.target.clone().unwrap_or_else(|| plan.addr.to_string()),
        config,
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        started_at_unix_ns: Some(crate::report::load::unix_ns(started_at)),
        start_at: None,
        host: crate::report::load::host_name(),
        full_log: None,
        merged: None,
        duration_s,
        complete: failure.is_none(),
        end_reason,
        connections: Connections {
            requested: plan.connections,
            established: m.ends.iter().map(|e| e.established as u64).sum(),
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
        tls_handshake_latency: t.tls_handshake.as_ref().map(record).transpose()?.flatten(),
        errors: Errors {
            total: t.error_count(),
            by_class: t
                .errors
                .iter()
                .map(|(k, v)| (k.name().to_string(), *v))
                .collect(),
            unanswered_at_end: m.ends.iter().map(|e| e.unanswered).sum(),
            answered_after_end: t.answered_after_end,
        },
        intervals: seal_intervals(
            watched
                .intervals
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
            m.stopped_at.saturating_sub(measure_from) as f64 / 1e9,
        ),
        bytes: Bytes {
            sent: t.bytes_sent,
            received: t.bytes_received,
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: Generator::cpu_us_per(user, system, all_tx),
            thread_cpu_share: m.shares.clone(),
            saturated,
        },
        responses: None,
        udp: None,
        udp_rr: None,
        notes: notes(m, saturated),
        path: None,
    };
    Ok((report, failure))
}

/// The report's `responses` from the merged tally; `ops` names the
/// operations `Outcome::op` indexes.
fn responses(r: &tally::ResponseTally, ops: &[String]) -> Responses {
    let by_command = r
        .by_op
        .iter()
        .enumerate()
        .filter(|(_, t)| t.answered > 0)
        .filter_map(|(i, t)| {
            let name = ops.get(i)?;
            let lookups = t.hits + t.misses > 0;
            Some((
                name.clone(),
                CommandCounts {
                    answered: t.answered,
                    errors: t.errors,
                    hits: lookups.then_some(t.hits),
                    misses: lookups.then_some(t.misses),
                },
            ))
        })
        .collect();
    let hits: u64 = r.by_op.iter().map(|t| t.hits).sum();
    let misses: u64 = r.by_op.iter().map(|t| t.misses).sum();
    let lookups = hits + misses > 0;
    Responses {
        answered: r.answered,
        by_status: r
            .by_status
            .iter()
            .map(|(c, n)| (c.to_string(), *n))
            .collect(),
        by_command,
        hits: lookups.then_some(hits),
        misses: lookups.then_some(misses),
        hit_ratio: lookups.then(|| hits as f64 / (hits + misses) as f64),
        reconnects: r.reconnects,
    }
}

/// The report's `udp_rr` from the merged workers of a datagram run.
fn udp_rr(m: &Merged, rep: &LoadReport) -> UdpRrResult {
    let mut c = super::driver::DatagramCounts::default();
    for e in &m.ends {
        c.add(&e.datagrams);
    }
    let class = |k: ErrorClass| m.tally.errors.get(&k).copied().unwrap_or(0);
    let lost = class(ErrorClass::Lost);
    let settled = c.sent.saturating_sub(rep.errors.unanswered_at_end);
    UdpRrResult {
        id: rep
            .config
            .workload_options
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or("none")
            .to_string(),
        requests_sent: c.sent,
        answered: m.tally.responses.answered,
        lost,
        refused: class(ErrorClass::Refused),
        loss_ratio: if settled > 0 {
            lost as f64 / settled as f64
        } else {
            0.0
        },
        late_replies: c.late,
        garbage_replies: c.garbage,
    }
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

fn progress_bar(plan: &TcpPlan, quiet: bool) -> Option<ProgressBar> {
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

    /// A framed exchange unlike the raw one: each response is a line of
    /// varying length (`ok:<request>\n`), recognised by its newline.
    struct LineExchange;

    impl Exchange for LineExchange {
        type Cursor = ();
        fn request_len(&self) -> Option<usize> {
            None
        }
        fn response_len(&self) -> Option<usize> {
            None
        }
        fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
            out.extend_from_slice(format!("req {seq}\n").as_bytes());
        }
        fn parse(&self, _: &mut (), data: &[u8], _seq: u64) -> crate::load::workload::Parsed {
            use crate::load::workload::Parsed;
            match data.iter().position(|b| *b == b'\n') {
                Some(i) => Parsed::Complete(i + 1, crate::load::workload::Outcome::OK),
                None => Parsed::Partial,
            }
        }
        fn on_eof(&self, _: &()) -> ErrorClass {
            ErrorClass::Closed
        }
    }

    /// A line server on loopback: answers each line with `ok:<line>`,
    /// written in two pieces so responses also arrive split.
    fn line_server() -> std::net::SocketAddr {
        use std::io::{BufRead, BufReader, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                std::thread::spawn(move || {
                    s.set_nodelay(true).unwrap();
                    let mut w = s.try_clone().unwrap();
                    for line in BufReader::new(s).lines() {
                        let Ok(line) = line else { return };
                        if w.write_all(b"ok:").is_err()
                            || w.write_all(format!("{line}\n").as_bytes()).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn plan(addr: std::net::SocketAddr, mode: ConnMode, n: u64) -> TcpPlan {
        TcpPlan {
            workload: "line",
            mode,
            addr,
            tls: None,
            target: None,
            connections: 3,
            threads: 2,
            stop: Stop::Count(n),
            warmup: Duration::ZERO,
            rate: None,
            timeout: Duration::from_secs(5),
            connect_rate: None,
            sources: Vec::new(),
            abort: None,
            start_at: None,
            full_log: None,
        }
    }

    #[test]
    fn a_framed_exchange_runs_on_both_connection_modes() {
        let addr = line_server();
        for mode in [
            ConnMode::Persistent { pipeline: 3 },
            ConnMode::PerTransaction { close_rst: false },
        ] {
            let p = plan(addr, mode, 300);
            let out = run_tcp(&p, &LineExchange, LoadConfig::default(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 300, "{mode:?}");
            assert_eq!(out.report.errors.total, 0, "{mode:?}");
            assert_eq!(out.report.workload, "line");
            assert_eq!(
                out.report.connect_latency.is_some(),
                mode.per_transaction(),
                "{mode:?}"
            );
        }
    }

    /// The line exchange, with outcomes read from the answered sequence
    /// number: every 7th request fails with a 404, every 5th response
    /// closes the connection, requests alternate between two operations,
    /// every 3rd is a hit.
    struct OutcomeExchange {
        ops: Vec<String>,
    }

    impl Exchange for OutcomeExchange {
        type Cursor = Vec<u8>;
        fn request_len(&self) -> Option<usize> {
            None
        }
        fn response_len(&self) -> Option<usize> {
            None
        }
        fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
            out.extend_from_slice(format!("req {seq}\n").as_bytes());
        }
        fn parse(
            &self,
            line: &mut Vec<u8>,
            data: &[u8],
            seq: u64,
        ) -> crate::load::workload::Parsed {
            use crate::load::workload::{Outcome, Parsed};
            let Some(i) = data.iter().position(|b| *b == b'\n') else {
                line.extend_from_slice(data);
                return Parsed::Partial;
            };
            line.extend_from_slice(&data[..i]);
            // The answer must be to the request awaited: resent requests
            // keep their place.
            if *line != format!("ok:req {seq}").into_bytes() {
                return Parsed::Error(ErrorClass::Mismatch);
            }
            Parsed::Complete(
                i + 1,
                Outcome {
                    status: Some(if seq % 7 == 3 { 404 } else { 200 }),
                    op: (seq % 2) as u16,
                    hit: Some(seq % 3 == 0),
                    error: (seq % 7 == 3).then_some(ErrorClass::Status(404)),
                    close: seq % 5 == 4,
                },
            )
        }
        fn on_eof(&self, _: &Vec<u8>) -> ErrorClass {
            ErrorClass::Closed
        }
        fn ops(&self) -> &[String] {
            &self.ops
        }
        fn counts_responses(&self) -> bool {
            true
        }
    }

    #[test]
    fn outcomes_are_counted_and_a_server_close_reopens_without_loss() {
        let addr = line_server();
        let ex = OutcomeExchange {
            ops: vec!["A".into(), "B".into()],
        };
        for mode in [
            ConnMode::Persistent { pipeline: 3 },
            ConnMode::PerTransaction { close_rst: false },
        ] {
            let p = plan(addr, mode, 300);
            let out = run_tcp(&p, &ex, LoadConfig::default(), u64::MAX, true).unwrap();
            let rep = &out.report;
            let r = rep.responses.as_ref().expect("responses counted");
            let failed = rep.errors.by_class.get("status_404").copied().unwrap_or(0);
            assert!(failed > 0, "{mode:?}: {:?}", rep.errors);
            assert_eq!(rep.errors.total, failed, "{mode:?}: {:?}", rep.errors);
            assert_eq!(r.answered, rep.transactions + failed, "{mode:?}");
            assert_eq!(r.by_status["404"], failed, "{mode:?}");
            assert_eq!(r.by_status["200"], rep.transactions, "{mode:?}");
            let by_cmd: u64 = r.by_command.values().map(|c| c.answered).sum();
            assert_eq!(by_cmd, r.answered, "{mode:?}");
            assert_eq!(r.by_command["A"].errors + r.by_command["B"].errors, failed);
            assert_eq!(r.hits.unwrap() + r.misses.unwrap(), r.answered, "{mode:?}");
            assert_eq!(rep.errors.unanswered_at_end, 0, "{mode:?}");
            if mode.per_transaction() {
                assert_eq!(r.reconnects, 0);
            } else {
                assert!(r.reconnects >= 300 / 5 - 1, "{mode:?}: {}", r.reconnects);
                // The last close may come when nothing is left to send.
                let c = rep.connections.connects;
                assert!(c <= r.reconnects + 3 && c + 3 >= r.reconnects + 3, "{c}");
            }
        }
    }

    /// A TLS line server on loopback (rustls, a self-signed certificate for
    /// `localhost` made now): answers each line with `ok:<line>`, padded
    /// to 300 KB (several TLS records, more than a read) for every 10th request, so
    /// responses span records and reads. Returns its address and the
    /// certificate (PEM).
    fn tls_line_server() -> (std::net::SocketAddr, String) {
        use std::io::{BufRead, BufReader, Write};
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![ck.cert.der().clone()], key)
                .unwrap(),
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let config = Arc::clone(&config);
                std::thread::spawn(move || {
                    s.set_nodelay(true).unwrap();
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut r = BufReader::new(rustls::StreamOwned::new(conn, s));
                    let mut line = String::new();
                    loop {
                        line.clear();
                        // A client that refused the certificate ends here.
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let req = line.trim_end();
                        let seq: u64 = req
                            .strip_prefix("req ")
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(1);
                        let pad = if seq % 10 == 0 { 300_000 } else { 0 };
                        let resp = format!("ok:{req}{}\n", "x".repeat(pad));
                        let w = r.get_mut();
                        if w.write_all(resp.as_bytes())
                            .and_then(|_| w.flush())
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (addr, ck.cert.pem())
    }

    fn tls_plan(
        addr: std::net::SocketAddr,
        mode: ConnMode,
        n: u64,
        spec: crate::load::tls::TlsSpec,
    ) -> TcpPlan {
        TcpPlan {
            tls: Some(spec.client().unwrap()),
            ..plan(addr, mode, n)
        }
    }

    fn spec(insecure: bool, ca_file: Option<std::path::PathBuf>) -> crate::load::tls::TlsSpec {
        crate::load::tls::TlsSpec {
            server_name: "localhost".into(),
            insecure,
            ca_file,
        }
    }

    fn tls_config() -> LoadConfig {
        LoadConfig {
            tls: Some(crate::report::load::TlsConfig::default()),
            ..LoadConfig::default()
        }
    }

    const MODES: [ConnMode; 2] = [
        ConnMode::Persistent { pipeline: 3 },
        ConnMode::PerTransaction { close_rst: false },
    ];

    #[test]
    fn tls_runs_on_both_connection_modes_and_times_its_handshakes() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            let p = tls_plan(addr, mode, 300, spec(true, None));
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(rep.transactions, 300, "{mode:?}");
            assert_eq!(rep.errors.total, 0, "{mode:?}");
            // Every 10th response is 300 KB: the bytes counted are
            // the records', more than the plaintext.
            assert!(
                rep.bytes.received > 20 * 300_000,
                "{mode:?}: {}",
                rep.bytes.received
            );
            let hs = rep
                .tls_handshake_latency
                .as_ref()
                .expect("handshakes timed");
            // One handshake per connection: each transaction's own with a
            // connection per transaction.
            assert_eq!(hs.summary.count, rep.connections.connects, "{mode:?}");
            if mode.per_transaction() {
                assert!(hs.summary.count >= 300, "{mode:?}: {}", hs.summary.count);
                let connect = rep.connect_latency.as_ref().unwrap();
                assert_eq!(connect.summary.count, hs.summary.count);
            } else {
                assert_eq!(hs.summary.count, 3, "{mode:?}");
            }
            let tls = rep.config.tls.as_ref().unwrap();
            assert_eq!(tls.protocol_version.as_deref(), Some("TLSv1_3"));
            assert!(tls.cipher_suite.as_deref().unwrap().starts_with("TLS13_"));
            let text = crate::report::load_text::render(rep);
            assert!(text.contains("\ntls           TLSv1_3, TLS13_"), "{text}");
            assert!(text.contains("\ntls handshake min "), "{text}");
        }
    }

    #[test]
    fn tls_runs_open_loop_and_drains_a_duration_run() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            // Open loop: sends wait for a connection that is up (its
            // handshake done), none is lost.
            let p = TcpPlan {
                rate: Some(2000.0),
                ..tls_plan(addr, mode, 200, spec(true, None))
            };
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 200, "{mode:?}");
            // A duration run ends with the drain's orderly closes.
            let p = TcpPlan {
                stop: Stop::Duration(Duration::from_millis(300)),
                ..tls_plan(addr, mode, 0, spec(true, None))
            };
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert!(rep.transactions > 0, "{mode:?}");
            assert_eq!(rep.errors.total, 0, "{mode:?}: {:?}", rep.errors);
            assert_eq!(rep.errors.unanswered_at_end, 0, "{mode:?}");
        }
    }

    #[test]
    fn an_untrusted_certificate_fails_the_run_with_tls_errors() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            let p = tls_plan(addr, mode, 100, spec(false, None));
            let t0 = std::time::Instant::now();
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            let why = out.failure.expect("the run fails");
            assert!(why.contains("tls_error"), "{mode:?}: {why}");
            assert!(why.contains("UnknownIssuer"), "{mode:?}: {why}");
            assert!(t0.elapsed() < Duration::from_secs(4), "{mode:?}: no hang");
            assert_eq!(rep.transactions, 0);
            assert_eq!(rep.connections.established, 0);
            assert!(rep.errors.by_class["tls_error"] > 0, "{:?}", rep.errors);
            assert_eq!(rep.errors.total, rep.errors.by_class["tls_error"]);
            assert!(rep.tls_handshake_latency.is_none());
        }
    }

    #[test]
    fn a_ca_file_makes_the_test_certificate_trusted() {
        let (addr, pem) = tls_line_server();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, pem).unwrap();
        for mode in MODES {
            let p = tls_plan(addr, mode, 50, spec(false, Some(ca.clone())));
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 50, "{mode:?}");
        }
        // The same name with a certificate for another one is refused.
        let other = crate::load::tls::TlsSpec {
            server_name: "example.com".into(),
            ..spec(false, Some(ca))
        };
        let p = TcpPlan {
            tls: Some(other.client().unwrap()),
            ..plan(addr, MODES[0], 50)
        };
        let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
        let why = out.failure.expect("a name mismatch fails");
        assert!(why.contains("not valid for name"), "{why}");
    }

    #[test]
    fn a_peer_that_does_not_speak_tls_is_a_tls_error() {
        use std::io::{Read, Write};
        // Answers the ClientHello as a plain HTTP server would, or closes
        // at once: both end the handshake, neither hangs it.
        for reply in [&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], b""] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                for s in l.incoming() {
                    let Ok(mut s) = s else { return };
                    // Read the ClientHello first: closing on unread bytes
                    // would reset the connection instead.
                    let _ = s.read(&mut [0u8; 4096]);
                    let _ = s.write_all(reply);
                }
            });
            for mode in MODES {
                let p = tls_plan(addr, mode, 10, spec(true, None));
                let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
                assert!(out.failure.is_some(), "{mode:?}");
                let e = &out.report.errors;
                assert!(e.by_class.get("tls_error").is_some_and(|n| *n > 0), "{e:?}");
            }
        }
    }
}
