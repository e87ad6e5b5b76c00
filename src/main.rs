//! sockscope: where a Linux network service spends its time, and how that
//! changes under load. This file only parses, dispatches and maps errors
//! to exit statuses; the options and their validation are in `cli`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use sockscope::cli::{self, Cli, Plan};
use sockscope::{error, load, process, run, serve, tune};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Whatever this run launches dies with it, SIGKILL included. The
    // watchdog starts with the first launch; /proc/self/exe still names
    // this binary if the file is replaced meanwhile.
    process::watchdog::enable("/proc/self/exe".into());
    let res = cli.into_plan().and_then(dispatch);
    process::watchdog::shutdown();
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e.downcast_ref::<error::Exit>().map_or(1, |x| x.code);
            // Errors quote targets' output, peers' bytes and artifacts' strings.
            let message = format!("{e:#}");
            eprintln!("sockscope: {}", sockscope::text::escape_block(&message));
            ExitCode::from(code)
        }
    }
}

/// Runs one validated command; returns its exit status.
fn dispatch(plan: Plan) -> Result<u8> {
    match plan {
        Plan::Trace(spec) => run::trace::run(&spec),
        Plan::Load {
            spec,
            quiet,
            served: None,
        } => load::run(spec, quiet),
        Plan::Load {
            spec,
            quiet,
            served: Some(sp),
        } => run::pathload::run(spec, quiet, &sp),
        Plan::Serve { spec, quiet } => serve::run(spec, quiet),
        Plan::Profile { spec, out } => run::profile::run(&spec, out.as_deref()),
        Plan::Bench {
            experiment,
            out,
            quick,
            quiet,
            path,
        } => run::bench::run_cli(experiment, out.as_deref(), quick, quiet, path),
        Plan::Demo { out, quick, quiet } => run::demo::run(out.as_deref(), quick, quiet),
        Plan::Report { file, out, quiet } => run::report::run(&file, out.as_deref(), quiet),
        Plan::Compare { a, b, html } => run::compare::run(&a, &b, html.as_deref()),
        Plan::Merge {
            files,
            out,
            force,
            quiet,
        } => run::merge::run(&files, &out, force, quiet),
        Plan::Tune(spec) => tune::command::run(&spec),
        Plan::GetppidLoop { calls } => run::hidden::getppid_loop(calls),
        Plan::Watchdog => process::watchdog::run(),
        Plan::Idle { secs } => run::hidden::idle(secs),
        Plan::StacksRaw(spec) => run::stacks_raw::run(&spec),
        Plan::Completions(shell) => cli::print_completions(shell),
        Plan::Manpage => cli::print_manpage(),
    }
}
