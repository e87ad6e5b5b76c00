//! sockscope: where a Linux network service spends its time, and how that
//! changes under load. This file only dispatches; see the modules.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{CommandFactory, Parser};

use sockscope::cli::{Cli, Command, TraceArgs};
use sockscope::report::trace_text::{self, TableView};
use sockscope::{error, report, trace};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e.downcast_ref::<error::Exit>().map_or(1, |x| x.code);
            eprintln!("sockscope: {e:#}");
            ExitCode::from(code)
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Trace(args) => run_trace(args, cli.quiet),
        Command::Load { cmd } => sockscope::load::run(cmd, cli.quiet),
        Command::Serve { cmd } => sockscope::serve::run(cmd, cli.quiet),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "sockscope",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
        Command::Manpage => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            Ok(0)
        }
    }
}

fn run_trace(args: TraceArgs, quiet: bool) -> Result<u8> {
    // clap relaxes `requires` when a conflicting argument (the command) is
    // present, so this combination is checked here.
    if args.duration.is_some() && args.pid.is_none() {
        return Err(error::usage(
            "--duration applies to -p PID; a launched command is traced until it exits",
        ));
    }
    let target = match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => {
            if pid <= 0 {
                return Err(error::usage(format!("-p {pid}: not a process id")));
            }
            trace::TargetSpec::Attach {
                pid,
                duration: args.duration.map(Duration::from_secs_f64),
            }
        }
        (None, false) => trace::TargetSpec::Launch {
            run_as: trace::launch::resolve_run_as(args.user.as_deref(), args.as_root)?,
            argv: args.command.clone(),
        },
        (None, true) => {
            return Err(error::usage(
                "nothing to trace: give -p PID or a command after `--` \
                 (sockscope trace -- CMD ARGS...)",
            ));
        }
        (Some(_), false) => unreachable!("clap rejects -p together with a command"),
    };
    let outcome = trace::run(&trace::TraceOptions {
        target,
        count_only: args.count_only,
        follow_forks: !args.no_follow,
        per_thread: args.per_thread,
        max_threads: args.max_threads,
        verbose: !quiet,
        handle_signals: true,
        stop: None,
        window_opened: None,
    })?;
    let rep = &outcome.report;
    if let Some(path) = &args.json {
        report::write_json(path, rep)?;
    }
    let view = TableView {
        sort: args.sort,
        top: args.top,
        errors_only: args.errors_only,
    };
    let table = trace_text::render(rep, &view);
    match &args.output {
        Some(path) => report::write_atomic(path, table.as_bytes())?,
        None if !quiet => {
            let _ = std::io::stderr().write_all(table.as_bytes());
        }
        None => {}
    }
    if !rep.window.complete {
        eprintln!(
            "sockscope: the window ended early ({}); the data covers only the part traced",
            rep.window.end_reason.replace('_', " ")
        );
    }
    Ok(outcome.exit_code)
}
