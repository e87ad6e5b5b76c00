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
2 usage error; `trace -- CMD` exits with CMD's own status; profile, bench and \
demo use 3-8 for specific failures (see `sockscope profile --help`) and 128+N \
when interrupted by signal N."
)]
pub struct Cli {
    /// Print nothing but errors and what was asked for (-o/--json; profile
    /// and demo still print the report's path).
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
        after_help = TRACE_HELP
    )]
    Trace(TraceArgs),
    /// Generate load against a server: tcp-rr, tcp-crr, udp.
    Load {
        /// Workload.
        #[command(subcommand)]
        cmd: crate::load::LoadCommand,
    },
    /// Run a reference server: echo (threaded, epoll, io_uring), relay
    /// (userspace, splice, sockmap), udp-sink.
    Serve {
        /// Server.
        #[command(subcommand)]
        cmd: crate::serve::ServeCommand,
    },
    /// Launch (or attach to) a server, drive a load against it while
    /// tracing it, and write run.json, summary.txt and report.html.
    #[command(after_help = PROFILE_HELP)]
    Profile(ProfileArgs),
    /// Run a built-in experiment (transport, udp-rcvbuf, overhead, relay)
    /// and write bench.json, summary.txt and report.html.
    #[command(
        after_help = "Examples:\n  sockscope bench transport --out out/transport\n  \
sockscope bench udp-rcvbuf --quick\n  sockscope bench overhead\n  sockscope bench relay --quick\n\n\
Exit status: as for profile: 3-8 name the failing component (6: transport, overhead and \
relay need BPF, checked before anything is measured: root, or the capabilities the \
message names); 128+N when interrupted by signal N (Ctrl-C: 130), also during a load."
    )]
    Bench(BenchArgs),
    /// Run the built-in experiments with one report (about two minutes;
    /// --quick: well under one).
    #[command(
        after_help = "Exit status: 0 when every experiment ran; 1 when a part could \
not run (e.g. no BPF: the report and the summary say which); 3-8 and 128+N as for profile."
    )]
    Demo(DemoArgs),
    /// Re-render report.html and summary.txt from a run.json, bench.json or
    /// demo.json.
    Report(ReportArgs),
    /// Print the differences between two profile artifacts (run.json), with
    /// the change in percent.
    Compare(CompareArgs),
    /// The getppid loop of `bench overhead` (prints ns_per_call=...).
    #[command(name = "__getppid-loop", hide = true)]
    GetppidLoop {
        /// Calls to time.
        #[arg(value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
        calls: u64,
    },
    /// Guards the process groups sockscope launches: reads `+PGID`/`-PGID`
    /// on stdin and SIGKILLs every group still registered at end-of-file
    /// (see src/run/watchdog.rs).
    #[command(name = "__watchdog", hide = true)]
    Watchdog,
    /// Sleeps (an idle process for `bench overhead`).
    #[command(name = "__idle", hide = true)]
    Idle {
        /// Seconds.
        #[arg(value_parser = clap::value_parser!(u64).range(1..=86_400))]
        secs: u64,
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

fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 365.0 * 86400.0) {
        return Err(format!("`{s}`: the duration must be > 0 and finite"));
    }
    Ok(v)
}

const TRACE_HELP: &str = "\
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

const PROFILE_HELP: &str = "\
The load line is a `sockscope load` command without `load` and without the
address: profile learns the address from the target's own listening socket
(/proc/PID/fd against /proc/PID/net/tcp*) and inserts it after the workload
(or replaces the word ADDR). An explicit address must be one the target
listens on.

Examples:
  sockscope profile --target 'serve echo --transport epoll' --load 'tcp-rr -c 64 -d 10'
  sockscope profile --load 'tcp-rr -c 8 -d 5 --request \"PING\\r\\n\" --expect \"+PONG\\r\\n\"' \\
      -- redis-server --port 16379 --save ''
  sockscope profile --pid $(pidof nginx) --load 'tcp-crr -c 16 -d 10'

Exit status:
  0  success: DIR holds run.json, summary.txt, report.html
  1  other failure      2  usage error
  3  the target exited (or could not start) before it was ready
  4  the target died during the run, or did not stop cleanly
  5  port taken: the target could not bind, or another process owns the address
  6  the tracer could not attach (not root, no BTF, ...)
  7  the load failed (errors over --max-errors, no connection, stalled)
  8  a component timed out (not ready within --ready-timeout, no stop, tracer)
  128+N  interrupted by signal N (Ctrl-C: 130)
No failure leaves anything at DIR.";

/// `sockscope profile` options.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["target", "pid", "command"])))]
pub struct ProfileArgs {
    /// Run this sockscope subcommand as the target, e.g. 'serve echo
    /// --transport epoll' (without --json: a serve target's own counters
    /// are put in run.json).
    #[arg(long, value_name = "ARGS", conflicts_with_all = ["pid", "command"])]
    pub target: Option<String>,

    /// Attach to this running server (profile stops nothing it did not
    /// start).
    #[arg(short = 'p', long, value_name = "PID", conflicts_with_all = ["command", "user", "as_root"])]
    pub pid: Option<i32>,

    /// The load: a `sockscope load` line without the address, e.g.
    /// 'tcp-rr -c 64 -d 10'.
    #[arg(long, value_name = "LOAD")]
    pub load: String,

    /// Artifact directory (default: profile-YYYYmmdd-HHMMSS). Replaced
    /// only if it holds an earlier sockscope artifact.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Longest wait for the target to own its listening socket.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
    pub ready_timeout: f64,

    /// Trace with the syscall-entry hook only (cheapest; no syscall
    /// latency).
    #[arg(long)]
    pub count_only: bool,

    /// Run a launched target as this user (name or uid).
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,

    /// Under sudo, run a launched target as root instead of the invoking
    /// user.
    #[arg(long, conflicts_with = "user")]
    pub as_root: bool,

    /// The program to launch as the target, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `sockscope bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment.
    #[arg(value_enum)]
    pub name: crate::run::bench::Experiment,
    /// Artifact directory (default: bench-NAME-YYYYmmdd-HHMMSS).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fewer points, shorter runs.
    #[arg(long)]
    pub quick: bool,
}

/// `sockscope demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Artifact directory (default: demo-YYYYmmdd-HHMMSS).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Well under a minute instead of about two.
    #[arg(long)]
    pub quick: bool,
}

/// `sockscope report` options.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run.json, bench.json or demo.json.
    pub file: PathBuf,
    /// Write report.html and summary.txt here (default: beside FILE).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `sockscope compare` options.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline run.json.
    pub a: PathBuf,
    /// The run.json compared with it.
    pub b: PathBuf,
}
