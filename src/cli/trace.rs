//! `sockscope trace` options (clap) and their validation into
//! [`crate::trace::TraceSpec`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::values;
use crate::error;
use crate::report::trace_text::{SortKey, TableView};
use crate::trace::{self, TargetSpec, TraceOptions, TraceSpec};

/// `sockscope trace` options.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Attach to this running process (and all its threads) instead of
    /// launching a command.
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with_all = ["command", "user", "as_root"])]
    pub pid: Option<i32>,

    /// With -p: detach after this many seconds (default: on Ctrl-C,
    /// SIGTERM or when the process exits).
    #[arg(short, long, value_name = "SECS", requires = "pid", value_parser = values::positive_secs)]
    pub duration: Option<f64>,

    /// Do not follow child processes (threads are always followed).
    #[arg(long)]
    pub no_follow: bool,

    /// Count calls only, with the syscall-entry hook alone (cheapest mode:
    /// no errors, no latency).
    #[arg(long)]
    pub count_only: bool,

    /// Sort the table by this column.
    #[arg(long, value_enum, default_value_t = SortKey::Time)]
    pub sort: SortKey,

    /// Show only the first N syscalls of the table.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Show only syscalls that returned errors.
    #[arg(long)]
    pub errors_only: bool,

    /// Add a per-thread breakdown.
    #[arg(long)]
    pub per_thread: bool,

    /// With --per-thread: threads given their own row before the rest are
    /// pooled in an "other threads" row.
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_threads: u32,

    /// Write the full result as JSON (schema: docs/trace-json.md); - for
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the table to FILE instead of stderr.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Run the command as this user (name or uid).
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,

    /// Under sudo, run the command as root instead of the invoking user.
    #[arg(long, conflicts_with = "user")]
    pub as_root: bool,

    /// The command to launch and trace, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl TraceArgs {
    /// Validates the options into a [`TraceSpec`]: exactly one target (a
    /// pid, or a command after `--`), and output destinations that can be
    /// written, all before anything is traced (usage errors, exit 2).
    pub fn into_spec(self, quiet: bool) -> Result<TraceSpec> {
        // clap relaxes `requires` when a conflicting argument (the command) is
        // present, so this combination is checked here.
        if self.duration.is_some() && self.pid.is_none() {
            return Err(error::usage(
                "--duration applies to -p PID; a launched command is traced until it exits",
            ));
        }
        let target = match (self.pid, self.command.is_empty()) {
            (Some(pid), true) => {
                if pid <= 0 {
                    return Err(error::usage(format!("-p {pid}: not a process id")));
                }
                TargetSpec::Attach {
                    pid,
                    duration: self.duration.map(Duration::from_secs_f64),
                }
            }
            (None, false) => TargetSpec::Launch {
                run_as: trace::launch::resolve_run_as(self.user.as_deref(), self.as_root)?,
                argv: self.command,
            },
            (None, true) => {
                return Err(error::usage(
                    "nothing to trace: give -p PID or a command after `--` \
                     (sockscope trace -- CMD ARGS...)",
                ));
            }
            (Some(_), false) => unreachable!("clap rejects -p together with a command"),
        };
        check_outputs(self.json.as_ref(), self.output.as_ref())?;
        Ok(TraceSpec {
            options: TraceOptions {
                target,
                count_only: self.count_only,
                follow_forks: !self.no_follow,
                per_thread: self.per_thread,
                max_threads: self.max_threads,
                verbose: !quiet,
                handle_signals: true,
                stop: None,
                window_opened: None,
            },
            json: self.json,
            output: self.output,
            view: TableView {
                sort: self.sort,
                top: self.top,
                errors_only: self.errors_only,
            },
            quiet,
        })
    }
}

/// Refuses --json and -o destinations before anything is traced (exit 2).
fn check_outputs(json: Option<&PathBuf>, output: Option<&PathBuf>) -> Result<()> {
    if let Some(p) = json {
        crate::output::check(p, "--json")?;
    }
    if let Some(p) = output {
        crate::output::check(p, "-o")?;
    }
    if let (Some(j), Some(o)) = (json, output)
        && crate::output::is_stdout(j)
        && crate::output::is_stdout(o)
    {
        return Err(error::usage(
            "--json and -o both name standard output; send one of them elsewhere",
        ));
    }
    Ok(())
}

pub(super) const TRACE_HELP: &str = "\
Examples:
  sockscope trace -- redis-server --port 0
  sockscope trace -p 1234 --duration 10 --json out.json
  sockscope trace --count-only --per-thread -p $(pidof nginx)

Signals, launch mode (-- CMD): sockscope does not stop before the command
does. Ctrl-C in a terminal reaches the command (and its children) from the
terminal itself; SIGINT, SIGTERM or SIGHUP sent to sockscope (kill PID) is
passed on to the command's process only, not to its children. The command
decides: sockscope traces until it exits, prints the table, writes --json
and exits with the command's status (130 if SIGINT killed it, 143 SIGTERM).
Attach mode (-p): those signals end the window, the table is printed and
sockscope exits 0; the process is never signalled.";
