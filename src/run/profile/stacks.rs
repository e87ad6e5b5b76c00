//! The profile's stack sampling: started in each window once the tracer's
//! (or the anatomy's) window is open, ended with it, and turned into the
//! artifact's section. A sampler that cannot start, or fails, is kept as
//! the reason; everything else the window measured is still written, and
//! the run then exits non-zero ([`verdict`]).

use anyhow::Result;

use super::ProfileSpec;
use crate::probe::TargetSpec;
use crate::report::profile::ProfileReport;
use crate::report::stacks::StacksReport;
use crate::run::exit::{self, fail};
use crate::stacks::{Collected, Session};

/// Starts sampling `target` (whose tree is rooted at `root`) when the
/// profile asks for stacks; `tie`, the request anatomy's thread map, ties
/// the samples to its requests.
pub(super) fn start(
    spec: &ProfileSpec,
    target: &TargetSpec,
    root: i32,
    tie: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
) -> Option<std::result::Result<Session, String>> {
    let options = spec.stacks.as_ref()?;
    Some(
        crate::run::trace::stacks::config_for(target, root, options)
            .map(|mut cfg| {
                cfg.tie = tie;
                cfg
            })
            .and_then(Session::start)
            .map_err(|e| format!("{e:#}")),
    )
}

/// Ends sampling.
pub(super) fn finish(
    s: Option<std::result::Result<Session, String>>,
) -> Option<std::result::Result<Collected, String>> {
    s.map(|s| s.and_then(|s| s.finish().map_err(|e| format!("{e:#}"))))
}

/// The window's section, its cost's share over the target's CPU
/// (`target_cpu_s`, when known).
pub(super) fn section(
    c: Option<std::result::Result<Collected, String>>,
    target_cpu_s: Option<f64>,
) -> Option<std::result::Result<StacksReport, String>> {
    c.map(|c| c.map(|c| crate::stacks::report(&c, target_cpu_s.map(|s| (s * 1e9) as u64))))
}

/// Puts the section (or why it is missing) into the report.
pub(super) fn put(
    rep: &mut ProfileReport,
    section: Option<std::result::Result<StacksReport, String>>,
) {
    match section {
        Some(Ok(s)) => rep.stacks = Some(s),
        Some(Err(why)) => {
            rep.caveats.push(format!(
                "No stacks: the stack sampler failed: {why}. Everything else in this run was \
                 measured."
            ));
            rep.stacks_failure = Some(why);
        }
        None => {}
    }
}

/// After the artifact is written: the folded files the user named, then a
/// sampler that was asked for and failed fails the run (the tracer's
/// status), though the rest of it was measured and written.
pub(super) fn verdict(spec: &ProfileSpec, rep: &ProfileReport) -> Result<()> {
    if let (Some(options), Some(s)) = (&spec.stacks, &rep.stacks) {
        crate::run::trace::stacks::write_folded(options, s)?;
        crate::run::trace::stacks::write_tail_folded(options, rep.tail.as_ref())?;
        crate::run::trace::stacks::write_pprof(options, s, rep.tail.as_ref())?;
    }
    match &rep.stacks_failure {
        Some(why) => Err(fail(
            exit::TRACER_FAILED,
            format!(
                "the stack sampler failed: {why} (run.json has everything else; --no-stacks \
                 leaves it out)"
            ),
        )),
        None => Ok(()),
    }
}
