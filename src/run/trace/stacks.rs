//! Stack sampling beside a trace (`trace --stacks`) or a profile: started
//! when the tracer's window opens, for the target it names (the root of a
//! tree, or a scope), finished after the tracer's window closed; then its
//! section is added to the report and the folded files the user named are
//! written. A failure to start is kept and reported at the end, so nothing
//! else the run measured is lost to it.

use std::sync::mpsc;

use anyhow::{Context, Result};

use crate::probe::ScopeFilter;
use crate::probe::TargetSpec;
use crate::report::stacks::{StacksReport, folded_text};
use crate::stacks::{Session, StacksConfig, StacksOptions};

/// A stacks window waiting for (or running in) the tracer's window.
pub type Beside = crate::recorder::Beside<Session>;

/// Starts sampling `target` when `opened` (one of the tracer's
/// `window_opened`) gives its root pid.
pub fn when_open(
    opened: mpsc::Receiver<i32>,
    target: &TargetSpec,
    options: &StacksOptions,
    verbose: bool,
    tie: Option<std::sync::Arc<std::sync::Mutex<Option<super::requests::ThreadsMap>>>>,
) -> Result<Beside> {
    let target = target.clone();
    let options = options.clone();
    Beside::when_open(opened, "stacks", move |root| {
        let mut cfg = config_for(&target, root, &options)?;
        cfg.tie = tie.and_then(|t| t.lock().ok().and_then(|mut g| g.take()));
        let session = Session::start(cfg)?;
        if verbose {
            crate::progress::say!(
                "sockscope: stack sampling attached ({} Hz per CPU{})",
                options.hz,
                if options.off_cpu { ", off-CPU too" } else { "" }
            );
        }
        Ok(session)
    })
}

/// What the sampler follows for a trace target whose root pid (tree
/// modes) is `root`.
pub fn config_for(target: &TargetSpec, root: i32, options: &StacksOptions) -> Result<StacksConfig> {
    let (scope, roots) = match target {
        TargetSpec::Attach { .. } | TargetSpec::Launch { .. } => (ScopeFilter::Tree, vec![root]),
        TargetSpec::Scope { scope, .. } => (crate::trace::scope_filter_of(scope)?, Vec::new()),
    };
    Ok(StacksConfig {
        scope,
        roots,
        hz: options.hz,
        off_cpu: options.off_cpu,
        tie: None,
        hot: None,
        export: None,
        other_runs: None,
    })
}

/// Writes the folded files `options` names (through `crate::output`:
/// planted links refused, files replaced atomically). Every file is
/// attempted; the first failure is returned.
pub fn write_folded(options: &StacksOptions, report: &StacksReport) -> Result<()> {
    let on = match &options.folded {
        Some(p) => crate::output::write(p, folded_text(&report.on_cpu).as_bytes())
            .with_context(|| format!("writing --stacks-folded {}", p.display())),
        None => Ok(()),
    };
    let off = match (&options.offcpu_folded, &report.off_cpu) {
        (Some(p), Some(g)) => crate::output::write(p, folded_text(g).as_bytes())
            .with_context(|| format!("writing --offcpu-folded {}", p.display())),
        _ => Ok(()),
    };
    on.and(off)
}

/// Writes the pprof files `options` names (`--stacks-pprof`,
/// `--offcpu-pprof`; through `crate::output`, like every artifact). With
/// a tail, the on-CPU samples are labelled requests=tail|rest|other. Every
/// file is attempted; the first failure is returned.
pub fn write_pprof(
    options: &StacksOptions,
    report: &StacksReport,
    tail: Option<&crate::report::slow::TailReport>,
) -> Result<()> {
    let on = match &options.pprof {
        Some(p) => crate::report::pprof::on_cpu_file(report, tail)
            .and_then(|bytes| crate::output::write(p, &bytes))
            .with_context(|| format!("writing --stacks-pprof {}", p.display())),
        None => Ok(()),
    };
    let off = match (
        &options.offcpu_pprof,
        crate::report::pprof::off_cpu_file(report),
    ) {
        (Some(p), Some(bytes)) => crate::output::write(p, &bytes?)
            .with_context(|| format!("writing --offcpu-pprof {}", p.display())),
        _ => Ok(()),
    };
    on.and(off)
}

/// Writes the tail's and the rest's folded stacks the options name
/// (`--tail-folded`, `--rest-folded`); a run with no tail section writes
/// none and says so.
pub fn write_tail_folded(
    options: &StacksOptions,
    tail: Option<&crate::report::slow::TailReport>,
) -> Result<()> {
    let wanted = [
        ("--tail-folded", &options.tail_folded, true),
        ("--rest-folded", &options.rest_folded, false),
    ];
    let mut out = Ok(());
    for (flag, path, is_tail) in wanted {
        let Some(p) = path else { continue };
        let r = match tail {
            Some(t) => {
                let g = if is_tail {
                    &t.tail_on_cpu
                } else {
                    &t.rest_on_cpu
                };
                crate::output::write(p, folded_text(g).as_bytes())
                    .with_context(|| format!("writing {flag} {}", p.display()))
            }
            None => Err(anyhow::anyhow!(
                "{flag} {}: not written: the tail needs the request anatomy and stacks of the \
                 same window, and it timed no request",
                p.display()
            )),
        };
        out = out.and(r);
    }
    out
}
