//! sockscope: where a Linux network service spends its time, and how that
//! changes under load. This file only dispatches; see the modules.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{CommandFactory, Parser};

use sockscope::cli::{Cli, Command, ProfileArgs, TraceArgs};
use sockscope::report::trace_text::{self, TableView};
use sockscope::{error, report, trace};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Whatever this run launches dies with it, SIGKILL included. The
    // watchdog starts with the first launch; /proc/self/exe still names
    // this binary if the file is replaced meanwhile.
    sockscope::run::watchdog::enable("/proc/self/exe".into());
    let res = dispatch(cli);
    sockscope::run::watchdog::shutdown();
    match res {
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
        Command::Profile(args) => run_profile(args, cli.quiet),
        Command::Bench(args) => {
            sockscope::run::bench::run_cli(args.name, args.out.as_deref(), args.quick, cli.quiet)
        }
        Command::Demo(args) => {
            sockscope::run::demo::run(args.out.as_deref(), args.quick, cli.quiet)
        }
        Command::Report(args) => {
            sockscope::run::rerender(&args.file, args.out.as_deref(), cli.quiet)
        }
        Command::Compare(args) => {
            let a = report::profile::read(&args.a).map_err(|e| error::usage(format!("{e:#}")))?;
            let b = report::profile::read(&args.b).map_err(|e| error::usage(format!("{e:#}")))?;
            print!(
                "{}",
                report::compare::render(
                    &a,
                    &b,
                    &args.a.display().to_string(),
                    &args.b.display().to_string()
                )
            );
            Ok(0)
        }
        Command::GetppidLoop { calls } => {
            let ns = sockscope::run::bench::overhead::getppid_loop(calls);
            println!("ns_per_call={ns:.1} calls={calls}");
            Ok(0)
        }
        Command::Watchdog => sockscope::run::watchdog::run(),
        Command::Idle { secs } => {
            std::thread::sleep(Duration::from_secs(secs));
            Ok(0)
        }
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
    check_trace_outputs(&args)?;
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
    let written = write_trace_outputs(&args, rep, quiet);
    if !rep.window.complete {
        eprintln!(
            "sockscope: the window ended early ({}); the data covers only the part traced",
            rep.window.end_reason.replace('_', " ")
        );
    }
    written.map(|()| outcome.exit_code)
}

/// Refuses --json and -o destinations before anything is traced (exit 2).
fn check_trace_outputs(args: &TraceArgs) -> Result<()> {
    if let Some(p) = &args.json {
        sockscope::output::check(p, "--json")?;
    }
    if let Some(p) = &args.output {
        sockscope::output::check(p, "-o")?;
    }
    if let (Some(j), Some(o)) = (&args.json, &args.output)
        && sockscope::output::is_stdout(j)
        && sockscope::output::is_stdout(o)
    {
        return Err(error::usage(
            "--json and -o both name standard output; send one of them elsewhere",
        ));
    }
    Ok(())
}

/// Writes --json, then the table to -o (or stderr). Every output is
/// attempted even when an earlier one failed, and a table that could not
/// be written to -o is printed on stderr instead, so nothing measured is
/// lost to a full disk; the first failure is returned (exit 1).
fn write_trace_outputs(
    args: &TraceArgs,
    rep: &report::trace::TraceReport,
    quiet: bool,
) -> Result<()> {
    let json = match &args.json {
        Some(path) => report::write_json(path, rep),
        None => Ok(()),
    };
    let view = TableView {
        sort: args.sort,
        top: args.top,
        errors_only: args.errors_only,
    };
    let table = trace_text::render(rep, &view);
    let text = match &args.output {
        Some(path) => report::write_atomic(path, table.as_bytes()).inspect_err(|_| {
            let _ = std::io::stderr().write_all(table.as_bytes());
        }),
        None => {
            if !quiet {
                let _ = std::io::stderr().write_all(table.as_bytes());
            }
            Ok(())
        }
    };
    json.and(text)
}

fn run_profile(args: ProfileArgs, quiet: bool) -> Result<u8> {
    use sockscope::run::profile::{ProfileSpec, Target};
    let target = match (args.target, args.pid, args.command.is_empty()) {
        (Some(t), None, true) => {
            let words =
                shell_words::split(&t).map_err(|e| error::usage(format!("--target {t:?}: {e}")))?;
            if words.is_empty() {
                return Err(error::usage(
                    "--target is empty: give e.g. 'serve echo --transport epoll'",
                ));
            }
            sockscope::run::profile::check_target_args(&words)?;
            Target::Sockscope(words)
        }
        (None, Some(pid), true) => {
            if pid <= 0 {
                return Err(error::usage(format!("--pid {pid}: not a process id")));
            }
            Target::Pid(pid)
        }
        (None, None, false) => Target::Command(args.command),
        _ => {
            return Err(error::usage(
                "give exactly one target: --target 'ARGS', --pid PID, or -- CMD ARGS",
            ));
        }
    };
    let run_as = match target {
        Target::Pid(_) => None,
        _ => trace::launch::resolve_run_as(args.user.as_deref(), args.as_root)?,
    };
    let spec = ProfileSpec {
        target,
        load: sockscope::run::loadline::LoadLine::parse(&args.load)?,
        ready_timeout: Duration::from_secs_f64(args.ready_timeout),
        count_only: args.count_only,
        run_as,
        quiet,
        command_line: std::env::args().collect(),
    };
    sockscope::run::run_profile(&spec, args.out.as_deref())
}
