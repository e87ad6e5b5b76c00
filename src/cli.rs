//! Command-line definitions (clap). Parsed once into plain option structs;
//! nothing here measures anything.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::report::trace_text::SortKey;

/// Where a Linux network service spends its time, and how that changes
/// under load.
#[derive(Debug, Parser)]
#[command(name = "sockscope", version, about, long_about = None)]
#[command(
    after_help = "Exit status: 0 success, 1 measurement failed (reason on stderr), \
2 usage error; `trace -- CMD` exits with CMD's own status."
)]
pub struct Cli {
    /// Print nothing but errors (and what was asked for with -o/--json).
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Profile the syscalls of a command or a running process tree with eBPF:
    /// counts, errors, latency percentiles, and the tree's CPU split,
    /// context switches, page faults and peak memory over the same window.
    #[command(
        after_help = "Examples:\n  sockscope trace -- redis-server --port 0\n  \
sockscope trace -p 1234 --duration 10 --json out.json\n  \
sockscope trace --count-only --per-thread -p $(pidof nginx)"
    )]
    Trace(TraceArgs),
    /// Generate load against a server: tcp-rr, tcp-crr, udp.
    Load {
        /// Workload.
        #[command(subcommand)]
        cmd: crate::load::LoadCommand,
    },
    /// Run a reference server: echo (threaded, epoll, io_uring), udp-sink.
    Serve {
        /// Server.
        #[command(subcommand)]
        cmd: crate::serve::ServeCommand,
    },
    /// Print a shell completion script to stdout.
    Completions {
        /// Shell to generate for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout.
    Manpage,
}

/// `sockscope trace` options.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Attach to this running process (and all its threads) instead of
    /// launching a command.
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with_all = ["command", "user", "as_root"])]
    pub pid: Option<i32>,

    /// With -p: detach after this many seconds (default: on Ctrl-C,
    /// SIGTERM or when the process exits).
    #[arg(short, long, value_name = "SECS", requires = "pid", value_parser = parse_secs)]
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

    /// Write the full result as JSON (schema: docs/trace-json.md).
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

fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 365.0 * 86400.0) {
        return Err(format!("`{s}`: the duration must be > 0 and finite"));
    }
    Ok(v)
}
