//! `sockscope demo`: the built-in experiments on built-in targets, sized
//! to finish in about two minutes on a 2-CPU machine (`--quick`: well
//! under one), with one report. Parts that cannot run here (no BPF) are
//! named, and a demo that could not run everything it should exits
//! non-zero.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Result;

use super::bench::{self, BenchContext, EXPERIMENTS, Size};
use crate::error;
use crate::process::publish::{Dest, Show, publish};
use crate::process::staging::Staging;
use crate::report::bench::{DEMO_SCHEMA, DemoReport, NotRun, SCHEMA_VERSION};
use crate::report::machine::Machine;

/// Runs the demo; writes DIR/demo.json, summary.txt, report.html (and the
/// transport points' run.json files) as a set. Exit status 0 when
/// everything ran; 1 when a part could not run (the report says which).
pub fn run(out: Option<&Path>, quick: bool, quiet: bool) -> Result<u8> {
    let dest = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("demo-{}", super::timestamp())));
    let staging = Staging::new(&dest)?;
    let mut ctx = BenchContext::new(&staging, crate::cmdline::recorded(), quiet)?;
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    let mut experiments = Vec::new();
    let mut not_run = Vec::new();
    let mut missing_required = Vec::new();
    // Every registered experiment, in the registry's order.
    for &exp in EXPERIMENTS {
        if let Err(why) = exp.preflight("sockscope demo") {
            not_run.push(NotRun {
                experiment: exp.name().into(),
                reason: format!("needs BPF: {why:#}"),
            });
            missing_required.push(exp.name());
            continue;
        }
        ctx.progress(&format!("demo: running {}", exp.name()));
        // Transport points write their profile artifacts under runs/.
        experiments.push(bench::run(exp, Size { quick, demo: true }, &mut ctx)?);
    }
    ctx.check_signals()?;
    let complete = missing_required.is_empty();
    let demo = DemoReport {
        header: crate::report::header::ArtifactHeader::new(DEMO_SCHEMA, SCHEMA_VERSION),
        machine: Machine::current(),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_s: t0.elapsed().as_secs_f64(),
        quick,
        complete,
        experiments,
        not_run,
    };
    // The experiments are over: stop signals take their usual effect again
    // and the scratch directory goes.
    drop(ctx);
    // Incomplete, the summary is printed even when quiet: it says what did
    // not run.
    let show = Show {
        summary: !quiet || !complete,
        whole: true,
        path: true,
    };
    publish(&demo, Dest::Staged(staging), show)?;
    if complete {
        Ok(0)
    } else {
        Err(error::with_code(
            1,
            format!(
                "the demo is INCOMPLETE: could not run {} (see the report)",
                missing_required.join(", ")
            ),
        ))
    }
}
