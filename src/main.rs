//! sockscope: where a Linux network service spends its time, and how that
//! changes under load. This file only parses, dispatches and maps errors
//! to exit statuses; the options and their validation are in `cli`.

#![deny(clippy::print_stderr)]

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Result;

use sockscope::cli::{self, Plan};
use sockscope::run;

fn main() -> ExitCode {
    let cli = cli::parse();
    run::lifecycle::begin();
    let res = cli.into_plan().and_then(dispatch);
    run::lifecycle::end();
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let (code, message) = run::lifecycle::failure(&e);
            // A failed stderr (2>/dev/full) loses the message, never the
            // status: eprintln! would panic into exit 101.
            let _ = writeln!(std::io::stderr(), "sockscope: {message}");
            ExitCode::from(code)
        }
    }
}

/// Runs one validated command; returns its exit status. Every arm calls
/// one `run::` function (tests/layering.rs checks it).
fn dispatch(plan: Plan) -> Result<u8> {
    match plan {
        Plan::Trace(spec) => run::trace::run(&spec),
        Plan::Load {
            spec,
            quiet,
            served: None,
        } => run::load::run(spec, quiet),
        Plan::Load {
            spec,
            quiet,
            served: Some(sp),
        } => run::pathload::run(spec, quiet, &sp),
        Plan::Serve { spec, quiet } => run::serve::run(spec, quiet),
        Plan::Profile { spec, out, verbose } => run::profile::run(&spec, out.as_deref(), verbose),
        Plan::Bench {
            experiment,
            out,
            quick,
            quiet,
            path,
        } => run::bench::run_cli(experiment, out.as_deref(), quick, quiet, path),
        Plan::Demo { out, quick, quiet } => run::demo::run(out.as_deref(), quick, quiet),
        Plan::Report {
            file,
            out,
            quiet,
            verbose,
        } => run::report::run(&file, out.as_deref(), quiet, verbose),
        Plan::Compare { a, b, html } => run::compare::run(&a, &b, html.as_deref()),
        Plan::Merge {
            files,
            out,
            force,
            quiet,
        } => run::merge::run(&files, &out, force, quiet),
        Plan::Tune(spec) => run::tune::run(&spec),
        Plan::Top(spec) => run::top::run(&spec),
        Plan::GetppidLoop { calls } => run::hidden::getppid_loop(calls),
        Plan::Watchdog => run::hidden::watchdog(),
        Plan::Idle { secs } => run::hidden::idle(secs),
        Plan::StacksRaw(spec) => run::trace::stacks_raw::run(&spec),
        Plan::Completions(shell) => run::help::completions(cli::command(), shell),
        Plan::Manpage { dir } => run::help::manpage(cli::command(), dir.as_deref()),
    }
}
