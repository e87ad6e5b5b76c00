//! `sockscope profile`: launch (or find) a target, wait until it owns a
//! listening socket, trace it while a load runs against it, stop it, and
//! write one artifact from the load's and the trace's reports.
//!
//! - [`measure`] (`measure.rs`): the run itself, one function per step;
//!   it returns the report and writes nothing (`bench transport` calls it
//!   per point). Its steps: `subject` (launch or find the target, stop it),
//!   `readiness` (wait until it serves), `tracer` (attach, the window),
//!   `watch` (signals, the target's exit during the load), `verdict`
//!   (whether the run counts, and its status), `assemble` (the report
//!   from the measured parts); `spec` is what to measure;
//! - `sweep` (`--sweep`, `--find-capacity`): the target launched once,
//!   a window per step through `measure`'s own steps, each turned into a
//!   point; `search`, the capacity search's decisions (pure);
//! - [`loadline`]: the `--load` string, filled with the learned address;
//! - [`collect`]: the kernel evidence gathered around the window (counter
//!   snapshots, one sampler thread for the target's sockets and schedstat);
//! - [`share`]: who else serves the load's address, and the traced tree's
//!   share of the load.

mod assemble;
pub mod collect;
mod counted;
mod driven;
pub mod loadcmd;
pub mod loadline;
mod measure;
mod readiness;
mod search;
pub mod share;
mod spec;
mod stacks;
mod subject;
mod sweep;
mod tracer;
mod verdict;
mod watch;

use std::path::{Path, PathBuf};

use anyhow::Result;

pub use measure::measure;
pub use spec::{
    ProfileSpec, ProfileTarget, Recorders, StepPlan, Steps, Workload, check_target_args,
};

use crate::process::publish::{Dest, Show, publish};
use crate::process::staging::Staging;

/// `sockscope profile`: measures, then writes DIR/run.json, summary.txt
/// and report.html as a set; prints the summary (its brief form unless
/// `verbose`) and the report's path.
pub fn run(spec: &ProfileSpec, out: Option<&Path>, verbose: bool) -> Result<u8> {
    let dest = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("profile-{}", super::timestamp())));
    let staging = Staging::new(&dest)?;
    if let Some(steps) = &spec.steps {
        let done = sweep::measure_steps(spec, steps)?;
        publish(
            &done.report,
            Dest::Staged(staging),
            Show::for_terminal(spec.quiet, verbose),
        )?;
        // Written, marked partial; the status still says it was cut short.
        if let Some(x) = done.interrupted {
            return Err(crate::error::with_code(x.code, x.message));
        }
        stacks::verdict(spec, &done.report)?;
        verdict::anatomy_verdict(&done.report)?;
        return Ok(0);
    }
    let rep = measure(spec)?;
    publish(
        &rep,
        Dest::Staged(staging),
        Show::for_terminal(spec.quiet, verbose),
    )?;
    stacks::verdict(spec, &rep)?;
    verdict::anatomy_verdict(&rep)?;
    Ok(0)
}
