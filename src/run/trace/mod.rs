//! The `sockscope trace` command: runs a validated [`TraceSpec`], then
//! writes what the user asked for (the table on stderr or `-o`, `--json`,
//! `--interval` lines) and serves `--metrics` (the Prometheus exporter of
//! `crate::metrics`, fed by the running trace's snapshots). Here, not in
//! `trace/`, so that `metrics` reads `trace` and `trace` imports no
//! `metrics`. The options and their checks are in `crate::cli::trace`.
//!
//! Its parts: [`requests`] (the anatomy beside the tracer's window),
//! [`requests_only`] and [`requests_live`] (`--requests-only` and its
//! `--interval` lines), [`stacks`] (the stack sampler beside the window, the
//! folded files), [`stacks_only`] (`--stacks-only`), [`target_cpu`] (the
//! target's CPU without the tracer, for both `--*-only` modes) and
//! [`stacks_raw`] (`__stacks-raw`, the sampler alone for its tests).

pub mod requests;
pub mod requests_live;
pub mod requests_only;
pub mod stacks;
pub mod stacks_only;
pub mod stacks_raw;
pub mod target_cpu;

use std::path::PathBuf;

use anyhow::Result;

use std::sync::Arc;

use crate::probe::TargetSpec;
use crate::report::trace::TraceReport;
use crate::report::trace_text::{self, TableView};
use crate::trace::TraceOptions;
use crate::trace::interval::{IntervalWriter, JsonLines, Tables};
use crate::trace::snapshot::SnapshotSink;

/// One `sockscope trace` run, validated: what to trace and where the
/// results go (both destinations already checked writable).
#[derive(Clone, Debug)]
pub struct TraceSpec {
    /// What to trace and how.
    pub options: TraceOptions,
    /// Write the report as JSON here (`-` for stdout).
    pub json: Option<PathBuf>,
    /// Write the table here instead of stderr.
    pub output: Option<PathBuf>,
    /// Which rows the table shows, in which order.
    pub view: TableView,
    /// Print no table on stderr (a table sent to `-o` is still written).
    pub quiet: bool,
    /// `--interval`: a table and a JSON line per interval.
    pub interval: Option<std::time::Duration>,
    /// `--metrics ADDR` and whether `--metrics-public` allows it off
    /// loopback.
    pub metrics: Option<(std::net::SocketAddr, bool)>,
    /// `--requests`: the request anatomy over the same window.
    pub requests: bool,
    /// `--requests-only`: the request anatomy alone, no syscall tracer
    /// (`requests_only`).
    pub requests_only: bool,
    /// `--requests-duty`: sample the anatomy's window.
    pub requests_duty: Option<crate::anatomy::Duty>,
    /// `--max-endpoints`, `--tls-plaintext`: how the anatomy reads requests.
    pub reading: crate::anatomy::Reading,
    /// `--stacks`: sampled stacks over the same window.
    pub stacks: Option<crate::stacks::StacksOptions>,
    /// `--stacks-only`: the stack sampler alone (`stacks_only`).
    pub stacks_only: bool,
    /// A node agent's stacks window (`--stack-window`, with
    /// `--requests-only --stacks`).
    pub stack_window: std::time::Duration,
}

/// Traces, writes the outputs and returns the exit status: the launched
/// command's own, or 0/1 in attach mode.
pub fn run(spec: &TraceSpec) -> Result<u8> {
    if spec.requests_only {
        return self::requests_only::run(&self::requests_only::RequestsOnlySpec {
            target: spec.options.target.clone(),
            json: spec.json.clone(),
            output: spec.output.clone(),
            quiet: spec.quiet,
            metrics: spec.metrics,
            scope_name: scope_name(&spec.options.target),
            max_series: spec.options.max_series as usize,
            duty: spec.requests_duty,
            interval: spec.interval,
            reading: spec.reading,
            stacks: spec.stacks.clone().map(|s| (s, spec.stack_window)),
        });
    }
    if spec.stacks_only {
        return self::stacks_only::run(&self::stacks_only::StacksOnlySpec {
            target: spec.options.target.clone(),
            stacks: spec.stacks.clone().unwrap_or_default(),
            json: spec.json.clone(),
            output: spec.output.clone(),
            quiet: spec.quiet,
        });
    }
    let mut options = spec.options.clone();
    let intervals = spec.interval.map(|every| {
        let w = Arc::new(IntervalWriter::new(
            scope_name(&options.target),
            spec.view.clone(),
            match &spec.output {
                Some(p) if !crate::output::is_stdout(p) => Tables::File(p.clone()),
                _ if spec.quiet => Tables::None,
                _ => Tables::Stderr,
            },
            spec.json.as_ref().map(|p| {
                if crate::output::is_stdout(p) {
                    JsonLines::Stdout
                } else {
                    JsonLines::File(p.clone())
                }
            }),
        ));
        options
            .sinks
            .0
            .push((every, Arc::clone(&w) as Arc<dyn SnapshotSink>));
        w
    });
    // Bound before the BPF programs load: an address in use costs nothing.
    let mut served = None;
    let exporter = match spec.metrics {
        Some((addr, public)) => {
            let e = Arc::new(crate::metrics::Exporter::bind(
                addr,
                public,
                crate::metrics::ExporterOptions {
                    max_series: options.max_series as usize,
                    scope: scope_name(&options.target),
                    by: options.by,
                },
            )?);
            if !spec.quiet {
                served = Some(announce_when_open(&mut options, e.local_addr()));
            }
            options
                .sinks
                .0
                .push((METRICS_EVERY, Arc::clone(&e) as Arc<dyn SnapshotSink>));
            Some(e)
        }
        None => None,
    };
    // With both, the sampler starts once the anatomy did, tied to its
    // requests.
    let tie = match (&spec.stacks, spec.requests) {
        (Some(s), true) => {
            let (tx, rx) = std::sync::mpsc::channel();
            let slot = std::sync::Arc::default();
            Some((
                self::requests::Tie {
                    tail: s.tail,
                    threads: std::sync::Arc::clone(&slot),
                    then: tx,
                },
                rx,
                slot,
            ))
        }
        _ => None,
    };
    let (tie, stacks_opened) = match tie {
        Some((t, rx, slot)) => (Some(t), Some((rx, slot))),
        None => (None, None),
    };
    let beside = if spec.requests {
        let (tx, rx) = std::sync::mpsc::channel();
        options.window_opened.push(tx);
        // A launched command waits for the anatomy's programs, which load
        // after the window opens: its first requests are then seen.
        let (attached, hold) = std::sync::mpsc::channel();
        options
            .launch_holds
            .push(std::sync::Arc::new(std::sync::Mutex::new(hold)));
        // The exporter serves the anatomy's counts beside the trace's.
        let latest = exporter.as_ref().map(|e| {
            let l = crate::anatomy::latest();
            e.serve_requests(l.clone());
            l
        });
        Some(self::requests::when_open(
            rx,
            &options.target,
            spec.reading,
            latest,
            options.verbose,
            tie,
            attached,
        )?)
    } else {
        None
    };
    let stacks = match (&spec.stacks, stacks_opened) {
        (Some(s), Some((rx, slot))) => Some(self::stacks::when_open(
            rx,
            &options.target,
            s,
            options.verbose,
            Some(slot),
        )?),
        (Some(s), None) => {
            let (tx, rx) = std::sync::mpsc::channel();
            options.window_opened.push(tx);
            Some(self::stacks::when_open(
                rx,
                &options.target,
                s,
                options.verbose,
                None,
            )?)
        }
        (None, _) => None,
    };
    let outcome = crate::trace::run(&options);
    // The sinks' copies go with `options`; the last one stops the server.
    // The anatomy's opener goes too, so its thread never waits in vain.
    drop(options);
    drop(exporter);
    if let Some(t) = served {
        let _ = t.join();
    }
    let anatomy = beside.map(|b| b.finish(crate::anatomy::Session::finish));
    let stacks = stacks.map(|b| b.finish(crate::stacks::Session::finish));
    let mut outcome = outcome?;
    let mut anatomy_failed = None;
    let mut recorded = None;
    match anatomy {
        Some(Ok(Some(rec))) => {
            let r = &outcome.report.resources;
            let cpu_ns = ((r.user_cpu_s + r.system_cpu_s) * 1e9) as u64;
            outcome.report.anatomy = Some(crate::anatomy::report(&rec, Some(cpu_ns)));
            recorded = Some(rec);
        }
        Some(Ok(None)) | None => {}
        Some(Err(e)) => anatomy_failed = Some(e),
    }
    let mut stacks_failed = None;
    match (stacks, &spec.stacks) {
        (Some(Ok(Some(collected))), Some(options)) => {
            let r = &outcome.report.resources;
            let cpu_ns = ((r.user_cpu_s + r.system_cpu_s) * 1e9) as u64;
            let s = crate::stacks::report(&collected, Some(cpu_ns));
            if let (Some(rec), Some(tied)) = (&recorded, collected.tied())
                && let Some(ends) = &rec.turn_ends
            {
                outcome.report.tail = crate::run::tail::report(
                    tied,
                    ends,
                    &rec.window,
                    options.tail,
                    collected.off_cpu(),
                );
            }
            let tail = outcome.report.tail.as_ref();
            let written = self::stacks::write_folded(options, &s)
                .and(self::stacks::write_tail_folded(options, tail))
                .and(self::stacks::write_pprof(options, &s, tail));
            if let Err(e) = written {
                stacks_failed = Some(e);
            }
            outcome.report.stacks = Some(s);
        }
        (Some(Err(e)), _) => stacks_failed = Some(e.context("--stacks: the stack sampler failed")),
        _ => {}
    }
    let rep = &outcome.report;
    let written = match &intervals {
        Some(w) => w.finish(rep, &spec.view).and_then(|()| match w.failure() {
            Some(why) => Err(crate::error::with_code(1, why)),
            None => Ok(()),
        }),
        None => write_outputs(spec, rep),
    };
    if !rep.window.complete {
        crate::progress::say!(
            "sockscope: the window ended early ({}); the data covers only the part traced",
            rep.window.end_reason.replace('_', " ")
        );
    }
    if let Some(e) = stacks_failed {
        written?;
        return Err(crate::error::with_code(1, format!("{e:#}")));
    }
    if let Some(e) = anatomy_failed {
        // The syscall trace is written; the missing part fails the run.
        written?;
        return Err(crate::error::with_code(
            1,
            format!("--requests: the request anatomy failed: {e:#}"),
        ));
    }
    written.map(|()| outcome.exit_code)
}

/// Writes --json, then the table to -o (or stderr). Every output is
/// attempted even when an earlier one failed, and a table that could not
/// be written to -o is printed on stderr instead, so nothing measured is
/// lost to a full disk; the first failure is returned (exit 1).
fn write_outputs(spec: &TraceSpec, rep: &TraceReport) -> Result<()> {
    crate::output::json_and_table(
        spec.json.as_deref(),
        spec.output.as_deref(),
        spec.quiet,
        rep,
        &trace_text::render(rep, &spec.view),
    )
}

/// Says where the exporter serves once the tracer's window is open (its
/// programs attached, the exporter listening since before): a run whose
/// programs fail to load never claimed to serve. The thread ends when the
/// window opens or, unopened, when `options` (the sender) is dropped.
fn announce_when_open(
    options: &mut TraceOptions,
    addr: std::net::SocketAddr,
) -> std::thread::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    options.window_opened.push(tx);
    std::thread::spawn(move || {
        crate::signals::keep_off_this_thread();
        if rx.recv().is_ok() {
            crate::progress::say!("sockscope: serving metrics at http://{addr}/metrics");
        }
    })
}

/// How often the exporter gets a fresh reading.
const METRICS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How an interval line (and the exporter's info) names what was traced.
fn scope_name(t: &TargetSpec) -> String {
    match t {
        TargetSpec::Scope { scope, .. } => scope.describe(),
        TargetSpec::Attach { pid, .. } => format!("pid:{pid}"),
        TargetSpec::Launch { argv, .. } => format!(
            "command:{}",
            argv.first()
                .map(|a| a.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
    }
}
