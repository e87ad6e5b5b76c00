//! The command line, all of it: clap definitions for every command (one
//! file per command family), the one set of value parsers ([`values`]),
//! and the validation of each command's raw options into a [`Plan`] of
//! plain specs (no clap types) that the code running it takes. Like
//! ripgrep's low-level and high-level arguments: clap parses, `into_plan`
//! validates once, `main` dispatches. Nothing here measures anything.
//!
//! - [`trace`] -> [`crate::run::trace::TraceSpec`]; [`profile`] ->
//!   [`crate::run::profile::ProfileSpec`]; [`serve`] ->
//!   [`crate::serve::ServeSpec`];
//! - [`load`] -> [`crate::load::LoadSpec`]: the workloads' subcommands,
//!   built from `crate::load::registry` (profile's `--load` and the
//!   experiments parse load lines through the same registry); `--path`;
//! - [`bench`](mod@bench) (bench, demo), [`report`] (report, compare): plain fields;
//! - [`tune`] -> [`crate::run::tune::TuneSpec`].

pub mod bench;
pub mod exit_help;
pub mod load;
pub mod merge;
pub mod profile;
pub mod report;
pub mod serve;
pub mod stacks;
pub mod top;
pub mod trace;
pub mod tune;
pub mod values;

use std::path::PathBuf;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use self::bench::{BenchArgs, DemoArgs};
use self::profile::{PROFILE_HELP, ProfileArgs};
use self::report::{CompareArgs, ReportArgs};
use self::trace::{TRACE_HELP, TraceArgs};
use self::tune::{TUNE_HELP, TuneArgs};

/// Where a Linux network service spends its time, and how that changes
/// under load.
#[derive(Debug, Parser)]
#[command(name = "sockscope", version, about, long_about = None)]
pub struct Cli {
    /// Print nothing but errors and what was asked for (-o/--json; profile
    /// and demo still print the report's path).
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Print the whole summary (summary.txt: every table, the stacks, the
    /// evidence, the caveats and the settings) where profile and report
    /// print only what ran, the headline and what the run says.
    #[arg(long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Keep HTTP header values (-H 'Name: value') in the command lines
    /// that artifacts record; by default only the names are kept, so a
    /// token in an Authorization header does not end up in a shared
    /// run.json, summary.txt or report.html.
    #[arg(long, global = true)]
    pub record_header_values: bool,

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
    /// Generate load against a server (the workloads of
    /// `crate::load::registry`, listed by [`load::about`]).
    #[command(about = load::about(), long_about = None)]
    Load {
        /// Workload: one subcommand per registered workload.
        #[command(subcommand)]
        cmd: load::LoadCommand,
        /// An emulated path and the server behind it.
        #[command(flatten)]
        path: load::PathArgs,
    },
    /// Run a reference server: echo (threaded, epoll, io_uring), relay
    /// (userspace, splice, sockmap), udp-sink.
    Serve {
        /// Server.
        #[command(subcommand)]
        cmd: serve::ServeCommand,
    },
    /// Launch (or attach to) a server, drive a load against it while
    /// tracing it, and write run.json, summary.txt and report.html.
    #[command(after_help = PROFILE_HELP)]
    Profile(ProfileArgs),
    /// Run a built-in experiment and write bench.json, summary.txt and
    /// report.html (the experiments listed are the registry's).
    #[command(about = bench::about(), long_about = None, after_help = bench::after_help())]
    Bench(BenchArgs),
    /// Run the built-in experiments with one report (about two minutes;
    /// --quick: well under one).
    #[command(
        after_help = "A part that could not run (no BPF, say) is named in the report and the \
summary, and demo then exits 1."
    )]
    Demo(DemoArgs),
    /// Re-render report.html and summary.txt from a run.json, bench.json,
    /// demo.json or load artifact (`load --json`, `merge --out`).
    Report(ReportArgs),
    /// Print the differences between two profile artifacts (run.json), with
    /// the change in percent.
    Compare(CompareArgs),
    /// Merge the load artifacts of several generators into one, exactly:
    /// histograms merged (never percentiles averaged), counts, errors,
    /// bytes and CPU summed, per-second intervals aligned by wall-clock
    /// time.
    #[command(
        after_help = "Example:\n  sockscope merge gen-0.json gen-1.json gen-2.json --out merged.json\n  \
sockscope report merged.json\n\nStart the generators with a common `load ... --start-at TIME` \
so their seconds line up (docs/merge.md).\n\nUsage errors (2): an unreadable or non-load \
input, one input, an input given twice, different targets without --force."
    )]
    Merge(merge::MergeArgs),
    /// Watch a target's requests live: per served port and endpoint, the
    /// requests per second, errors, server time p50/p99 and what it was
    /// made of, refreshed every second (the request anatomy, as `trace
    /// --requests-only`).
    #[command(after_help = "Examples:\n  sockscope top -p $(pidof nginx)\n  \
sockscope top --once --comm redis-server\n  sockscope top --stacks --unit nginx\n\nKeys: q (or Esc, Ctrl-C) quits, s changes the \
order, up/down select. NO_COLOR turns colours off.")]
    Top(top::TopArgs),
    /// Audit this machine's network-server settings (sysctls, fd limits,
    /// THP, governor, RPS/XPS, conntrack) for a goal, ranked by a run's
    /// evidence with --from; --emit sysctl prints a sysctl.d snippet.
    /// Never changes the system.
    #[command(after_help = TUNE_HELP)]
    Tune(TuneArgs),
    /// The getppid loop of `bench overhead` (prints ns_per_call=...).
    #[command(name = "__getppid-loop", hide = true)]
    GetppidLoop {
        /// Calls to time.
        #[arg(value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
        calls: u64,
    },
    /// Guards the process groups sockscope launches: reads `+PGID`/`-PGID`
    /// on stdin and SIGKILLs every group still registered at end-of-file
    /// (see src/process/watchdog.rs).
    #[command(name = "__watchdog", hide = true)]
    Watchdog,
    /// Sleeps (an idle process for `bench overhead`).
    #[command(name = "__idle", hide = true)]
    Idle {
        /// Seconds.
        #[arg(value_parser = clap::value_parser!(u64).range(1..=86_400))]
        secs: u64,
    },
    /// Samples a process tree's stacks and prints one JSON line per sample
    /// (the stack sampler alone, for tests/stacks_sampler.rs).
    #[command(name = "__stacks-raw", hide = true)]
    StacksRaw {
        /// The process whose tree is sampled.
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
        pid: i32,
        /// Seconds to sample.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
        secs: u64,
        /// On-CPU samples per second per CPU.
        #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        hz: u32,
        /// Sample off-CPU waits too.
        #[arg(long)]
        off_cpu: bool,
    },
    /// Print a shell completion script to stdout.
    Completions {
        /// Shell to generate for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout; with --dir, write every
    /// command's page (sockscope.1, sockscope-profile.1, ...) there.
    #[command(after_help = "Examples:\n  sockscope manpage > sockscope.1\n  \
sockscope manpage --dir /usr/local/share/man/man1\n  man -l DIR/sockscope-profile.1")]
    Manpage {
        /// An existing directory to write every page into, each NAME.1
        /// replaced atomically; sockscope(1) names the others as
        /// sockscope-COMMAND(1).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// A command, validated: what `main` dispatches. Each variant holds the
/// plain spec (or plain values) the code that runs the command takes.
#[derive(Debug)]
pub enum Plan {
    /// `sockscope trace`.
    Trace(crate::run::trace::TraceSpec),
    /// `sockscope load`: the workload's options are checked further when
    /// it runs.
    Load {
        /// The workload, its options and its target.
        spec: crate::load::LoadSpec,
        /// --quiet.
        quiet: bool,
        /// `--path SPEC --serve ARGS`: over an emulated path, against a
        /// served target.
        served: Option<crate::run::pathload::ServedPath>,
    },
    /// `sockscope serve`.
    Serve {
        /// The server.
        spec: crate::serve::ServeSpec,
        /// --quiet.
        quiet: bool,
    },
    /// `sockscope profile`.
    Profile {
        /// The run.
        spec: crate::run::profile::ProfileSpec,
        /// Artifact directory (None: a timestamped default).
        out: Option<PathBuf>,
        /// --verbose: the whole summary on the terminal.
        verbose: bool,
    },
    /// `sockscope bench`.
    Bench {
        /// The experiment.
        experiment: &'static dyn crate::run::bench::Experiment,
        /// Artifact directory (None: a timestamped default).
        out: Option<PathBuf>,
        /// Fewer points, shorter runs.
        quick: bool,
        /// --quiet.
        quiet: bool,
        /// --path for every point's profile.
        path: Option<(crate::netpath::PathSpec, crate::netpath::BackendChoice)>,
    },
    /// `sockscope demo`.
    Demo {
        /// Artifact directory (None: a timestamped default).
        out: Option<PathBuf>,
        /// The short version.
        quick: bool,
        /// --quiet.
        quiet: bool,
    },
    /// `sockscope report`.
    Report {
        /// The artifact to re-render.
        file: PathBuf,
        /// Where to write (None: beside `file`).
        out: Option<PathBuf>,
        /// --quiet.
        quiet: bool,
        /// --verbose: the whole summary on the terminal.
        verbose: bool,
    },
    /// `sockscope compare`.
    Compare {
        /// The baseline run.json.
        a: PathBuf,
        /// The run.json compared with it.
        b: PathBuf,
        /// `--html FILE`: the page too.
        html: Option<PathBuf>,
    },
    /// `sockscope merge`.
    Merge {
        /// The load artifacts.
        files: Vec<PathBuf>,
        /// Where the merged artifact goes.
        out: PathBuf,
        /// Merge different targets anyway.
        force: bool,
        /// --quiet.
        quiet: bool,
    },
    /// `sockscope tune`.
    Tune(crate::run::tune::TuneSpec),
    /// `sockscope top`.
    Top(crate::run::top::TopSpec),
    /// `sockscope __getppid-loop`.
    GetppidLoop {
        /// Calls to time.
        calls: u64,
    },
    /// `sockscope __watchdog`.
    Watchdog,
    /// `sockscope __idle`.
    Idle {
        /// Seconds to sleep.
        secs: u64,
    },
    /// `sockscope __stacks-raw`.
    StacksRaw(crate::run::trace::stacks_raw::StacksRawSpec),
    /// `sockscope completions`.
    Completions(clap_complete::Shell),
    /// `sockscope manpage [--dir DIR]`.
    Manpage {
        /// Where to write every page; None: sockscope(1) to stdout.
        dir: Option<PathBuf>,
    },
}

/// sockscope's command line as `--help`, completions and man pages show
/// it: the derived definition with every command's exit statuses added.
pub fn command() -> clap::Command {
    exit_help::add(Cli::command())
}

/// Parses the process's arguments against [`command`]; exits as clap does
/// on `--help`, `--version` and usage errors (status 2).
pub fn parse() -> Cli {
    let mut cmd = command();
    let mut matches = cmd.clone().get_matches();
    Cli::from_arg_matches_mut(&mut matches)
        .map_err(|e| e.format(&mut cmd))
        .unwrap_or_else(|e| e.exit())
}

impl Cli {
    /// Validates the parsed options into a [`Plan`]; what clap could not
    /// check is a usage error here (exit 2), before anything runs.
    pub fn into_plan(self) -> Result<Plan> {
        let quiet = self.quiet;
        let verbose = self.verbose;
        crate::cmdline::keep_header_values(self.record_header_values);
        Ok(match self.command {
            Command::Trace(args) => Plan::Trace(args.into_spec(quiet)?),
            Command::Load { cmd, path } => Plan::Load {
                spec: cmd.0,
                quiet,
                served: path.into_served()?,
            },
            Command::Serve { cmd } => Plan::Serve {
                spec: cmd.into_spec()?,
                quiet,
            },
            Command::Profile(args) => {
                let (spec, out) = args.into_spec(quiet)?;
                Plan::Profile { spec, out, verbose }
            }
            Command::Bench(args) => Plan::Bench {
                path: args.path()?,
                experiment: args.name,
                out: args.out,
                quick: args.quick,
                quiet,
            },
            Command::Demo(args) => Plan::Demo {
                out: args.out,
                quick: args.quick,
                quiet,
            },
            Command::Report(args) => Plan::Report {
                file: args.file,
                out: args.out,
                quiet,
                verbose,
            },
            Command::Compare(args) => Plan::Compare {
                a: args.a,
                b: args.b,
                html: args.html,
            },
            Command::Merge(args) => Plan::Merge {
                files: args.files,
                out: args.out,
                force: args.force,
                quiet,
            },
            Command::Tune(args) => Plan::Tune(args.into_spec()),
            Command::Top(args) => Plan::Top(args.into_spec()?),
            Command::GetppidLoop { calls } => Plan::GetppidLoop { calls },
            Command::Watchdog => Plan::Watchdog,
            Command::Idle { secs } => Plan::Idle { secs },
            Command::StacksRaw {
                pid,
                secs,
                hz,
                off_cpu,
            } => Plan::StacksRaw(crate::run::trace::stacks_raw::StacksRawSpec {
                pid,
                secs,
                hz,
                off_cpu,
            }),
            Command::Completions { shell } => Plan::Completions(shell),
            Command::Manpage { dir } => Plan::Manpage { dir },
        })
    }
}

// The import rules (nothing outside cli/ and main.rs imports cli, report/
// is a leaf, no circles) are checked by tests/layering.rs.
