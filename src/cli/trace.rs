//! `sockscope trace` options (clap) and their validation into
//! [`crate::run::trace::TraceSpec`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::values;
use crate::error;
use crate::probe::{ScopeTarget, TargetSpec};
use crate::report::trace_text::{SortKey, TableView};
use crate::run::trace::TraceSpec;
use crate::trace::TraceOptions;
use crate::trace::snapshot::Breakdown;

/// `sockscope trace` options.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Attach to this running process (and all its threads) instead of
    /// launching a command. Several pids (`-p $(pidof nginx)`: a master
    /// and its workers) name the one that is an ancestor of all the
    /// others; unrelated processes are a usage error.
    #[arg(short = 'p', long = "pid", value_name = "PID", num_args = 1.., conflicts_with_all = ["command", "user", "as_root", "cgroup", "unit", "comm", "system"])]
    pub pid: Vec<i32>,

    /// Trace every task in this cgroup v2 directory or below it, and every
    /// one that joins later: an absolute path, or a path below the cgroup
    /// v2 mount (system.slice/nginx.service).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["command", "user", "as_root", "unit", "comm", "system"])]
    pub cgroup: Option<String>,

    /// Trace a systemd unit's cgroup (nginx or nginx.service), as --cgroup.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["command", "user", "as_root", "comm", "system"])]
    pub unit: Option<String>,

    /// Trace every process with this name (its main thread's comm, at most
    /// 15 bytes), those started later included.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["command", "user", "as_root", "system"])]
    pub comm: Option<String>,

    /// Trace every task on the machine (but sockscope itself).
    #[arg(long, conflicts_with_all = ["command", "user", "as_root"])]
    pub system: bool,

    /// With -p or a scope: detach after this many seconds (default: on
    /// Ctrl-C, SIGTERM, or when the process exits).
    #[arg(short, long, value_name = "SECS", value_parser = values::positive_secs)]
    pub duration: Option<f64>,

    /// Break the tables (and metrics) down by process (pid and name),
    /// process name, or cgroup, with the totals.
    #[arg(long, value_enum, default_value_t = Breakdown::None, value_name = "KEY")]
    pub by: Breakdown,

    /// With --by: series (group x syscall) kept apart; the rest is pooled
    /// into an "(other)" group. Bounds the kernel's memory (2.6 KiB per
    /// series per CPU, allocated up front) and the metrics' cardinality.
    /// With --requests or --requests-only and --metrics, it also bounds the
    /// exported endpoint series (requests named from their bytes); the
    /// rest are served as endpoint="(other)".
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub max_series: u32,

    /// Serve the counts at http://ADDR/metrics for Prometheus (text format,
    /// or protobuf with native histograms when the scraper asks for it),
    /// e.g. 127.0.0.1:9469. Loopback only unless --metrics-public.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,

    /// Allow --metrics on a non-loopback address (other machines can then
    /// read what this host's processes do).
    #[arg(long, requires = "metrics")]
    pub metrics_public: bool,

    /// Also time each request at the server from the socket layer, per
    /// served port: queue wait, CPU wait, service and send (the request
    /// anatomy, docs/anatomy.md). Hooks only socket tracepoints.
    #[arg(long)]
    pub requests: bool,

    /// Only the request anatomy, with no syscall tracer at all: hooks the
    /// socket tracepoints alone, so neither the target nor any other
    /// process pays the syscall hooks. With -p PID or a scope.
    #[arg(long, conflicts_with = "requests")]
    pub requests_only: bool,

    /// Also sample the target's stacks over the window: where its CPU goes
    /// (on-CPU, cpu-clock at --stack-hz per CPU) and where its threads wait
    /// (off-CPU), unwound without frame pointers and symbolized; the top
    /// functions follow the table, and --json holds the folded stacks
    /// (docs/stacks.md).
    #[arg(long)]
    pub stacks: bool,

    /// Only the stack sampler, with no syscall tracer: hooks the cpu-clock
    /// perf events (and, for off-CPU, context switches and syscall exits)
    /// alone. With -p PID or a scope; the cheapest way to see where a
    /// running service's CPU goes.
    #[arg(long, conflicts_with_all = ["stacks", "requests", "requests_only"])]
    pub stacks_only: bool,

    #[command(flatten)]
    pub stack_args: super::stacks::StackArgs,

    /// With --requests-only --stacks --metrics (a node agent): the window
    /// whose whole stacks /debug/pprof/profile serves, the last complete
    /// one; each window starts afresh, so the agent's memory does not grow
    /// with time. Whole seconds, 1s to 1h (default 60s).
    #[arg(long, value_name = "SPAN", value_parser = values::stack_window)]
    pub stack_window: Option<Duration>,

    /// With --requests-only: follow the requests ON of every PERIOD only
    /// (e.g. 1s/10s): the per-request hooks are detached the rest of the
    /// time, when they cost nothing; the turns are a sample.
    #[arg(long, value_name = "ON/PERIOD", requires = "requests_only",
          value_parser = crate::anatomy::Duty::parse)]
    pub requests_duty: Option<crate::anatomy::Duty>,

    /// With --requests or --requests-only: request names (HTTP routes,
    /// commands, statement kinds) kept per served port; the requests of
    /// the names past them are summed in the port's "(other)" rows.
    #[arg(long, value_name = "N", default_value_t = crate::anatomy::DEFAULT_MAX_ENDPOINTS,
          value_parser = clap::value_parser!(u32).range(1..=crate::anatomy::MAX_ENDPOINTS_LIMIT as i64))]
    pub max_endpoints: u32,

    /// With --requests or --requests-only: read the requests of TLS
    /// connections from their plaintext, through uprobes on the target's
    /// OpenSSL (libssl: SSL_read, SSL_write and their _ex forms). Costs the
    /// target tens of microseconds per request; see docs/anatomy.md.
    #[arg(long)]
    pub tls_plaintext: bool,

    /// Print one table (and with --json one JSON line) per interval, e.g.
    /// 10s or 500ms, until the end of the trace. With --requests-only: one
    /// line per interval on stderr, in whole seconds.
    #[arg(long, value_name = "SPAN", value_parser = values::interval)]
    pub interval: Option<Duration>,

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
        let scoped =
            self.cgroup.is_some() || self.unit.is_some() || self.comm.is_some() || self.system;
        if self.duration.is_some() && self.pid.is_empty() && !scoped {
            return Err(error::usage(
                "--duration applies to -p PID or a scope (--cgroup, --unit, --comm, --system); \
                 a launched command is traced until it exits",
            ));
        }
        let endpoint_series = (self.requests || self.requests_only) && self.metrics.is_some();
        if self.by == Breakdown::None && self.max_series != 1024 && !endpoint_series {
            return Err(error::usage(
                "--max-series applies to a --by breakdown, or to the endpoint series of \
                 --requests or --requests-only with --metrics",
            ));
        }
        if self.requests_only {
            self.check_alone("--requests-only", "--requests")?;
        }
        if self.max_endpoints != crate::anatomy::DEFAULT_MAX_ENDPOINTS
            && !self.requests
            && !self.requests_only
        {
            return Err(error::usage(
                "--max-endpoints applies to the request anatomy: --requests or --requests-only",
            ));
        }
        if self.tls_plaintext && !self.requests && !self.requests_only {
            return Err(error::usage(
                "--tls-plaintext applies to the request anatomy: --requests or --requests-only",
            ));
        }
        if self.stack_args.any_set() && !self.stacks && !self.stacks_only {
            return Err(error::usage(
                "--stack-hz, --off-cpu, --stacks-folded, --offcpu-folded, --tail, --tail-folded \
                 and --rest-folded apply to --stacks and --stacks-only",
            ));
        }
        let tail_set = self.stack_args.tail.is_some()
            || self.stack_args.tail_folded.is_some()
            || self.stack_args.rest_folded.is_some();
        if tail_set && !self.requests {
            return Err(error::usage(
                "--tail, --tail-folded and --rest-folded split the stacks by the requests' server \
                 time: --requests --stacks",
            ));
        }
        if self.stacks_only {
            self.check_alone("--stacks-only", "--stacks")?;
        }
        if self.requests_only && self.stacks {
            self.check_agent_stacks()?;
        } else if self.stack_window.is_some() {
            return Err(error::usage(
                "--stack-window applies to a node agent's stacks: --requests-only --stacks \
                 --metrics ADDR",
            ));
        }
        let stacks = if self.stacks || self.stacks_only {
            Some(self.stack_args.clone().into_options()?)
        } else {
            None
        };
        check_outputs(self.json.as_ref(), self.output.as_ref())?;
        if let Some(a) = self.metrics
            && !self.metrics_public
            && !crate::metrics::is_loopback(&a)
        {
            return Err(error::usage(format!(
                "--metrics {a}: not a loopback address; the metrics would be readable from \
                 other machines. Add --metrics-public to serve them there on purpose"
            )));
        }
        let target = if scoped {
            if self.per_thread {
                return Err(error::usage(
                    "--per-thread applies to -p PID or a command; with a scope use --by process",
                ));
            }
            if self.no_follow {
                return Err(error::usage(
                    "--no-follow applies to -p PID or a command: a scope traces whatever is in it",
                ));
            }
            let scope = if let Some(path) = &self.cgroup {
                ScopeTarget::Cgroup(crate::probe::scope::resolve_cgroup(path)?)
            } else if let Some(unit) = &self.unit {
                let target = crate::probe::scope::resolve_unit(unit)?;
                if let Some(note) = target.unit_note().filter(|_| !quiet) {
                    crate::progress::say!("{note}");
                }
                ScopeTarget::Cgroup(target)
            } else if let Some(name) = &self.comm {
                crate::probe::scope::comm_name(name)?;
                ScopeTarget::Comm(name.clone())
            } else {
                ScopeTarget::System
            };
            TargetSpec::Scope {
                scope,
                duration: self.duration.map(Duration::from_secs_f64),
            }
        } else {
            self.tree_target()?
        };
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
                window_opened: Vec::new(),
                launch_holds: Vec::new(),
                by: self.by,
                max_series: self.max_series,
                sinks: Default::default(),
            },
            json: self.json,
            output: self.output,
            view: TableView {
                sort: self.sort,
                top: self.top,
                errors_only: self.errors_only,
            },
            quiet,
            interval: self.interval,
            metrics: self.metrics.map(|a| (a, self.metrics_public)),
            requests: self.requests,
            requests_only: self.requests_only,
            requests_duty: self.requests_duty,
            reading: crate::anatomy::Reading {
                max_endpoints: self.max_endpoints,
                tls_plaintext: self.tls_plaintext,
            },
            stacks,
            stacks_only: self.stacks_only,
            stack_window: self
                .stack_window
                .unwrap_or(crate::stacks::export::DEFAULT_WINDOW),
        })
    }

    /// `--requests-only --stacks` is a node agent's: its stacks are served
    /// (per-command counters on /metrics, each window's pprof on
    /// /debug/pprof/profile), never gathered for a report at the end, so it
    /// needs --metrics and takes none of the end-of-window outputs.
    fn check_agent_stacks(&self) -> Result<()> {
        if self.metrics.is_none() {
            return Err(error::usage(
                "--stacks beside --requests-only serves the stacks as a node agent does \
                 (per-command counters on /metrics, the last window's profile on \
                 /debug/pprof/profile): add --metrics ADDR. For a report of the window, use \
                 --requests --stacks, or --stacks-only",
            ));
        }
        let a = &self.stack_args;
        let end_of_window = [
            (a.off_cpu, "--off-cpu"),
            (a.stacks_folded.is_some(), "--stacks-folded"),
            (a.offcpu_folded.is_some(), "--offcpu-folded"),
            (a.stacks_pprof.is_some(), "--stacks-pprof"),
            (a.offcpu_pprof.is_some(), "--offcpu-pprof"),
            (a.tail.is_some(), "--tail"),
            (a.tail_folded.is_some(), "--tail-folded"),
            (a.rest_folded.is_some(), "--rest-folded"),
        ];
        if let Some((_, flag)) = end_of_window.iter().find(|(set, _)| *set) {
            return Err(error::usage(format!(
                "{flag} is not served by a node agent: --requests-only --stacks serves the \
                 on-CPU stacks of each --stack-window at /debug/pprof/profile; for {flag}, use \
                 --requests --stacks or --stacks-only"
            )));
        }
        Ok(())
    }

    /// Refuses what `mode` (--requests-only, --stacks-only: no syscall
    /// tracer) cannot do: the syscall tracer's options, and a launched
    /// command (usage errors, exit 2); `with` is the option that adds the
    /// same recorder to the tracer instead.
    fn check_alone(&self, mode: &str, with: &str) -> Result<()> {
        let tracer_only = [
            (self.count_only, "--count-only"),
            (self.per_thread, "--per-thread"),
            (self.by != Breakdown::None, "--by"),
            (self.no_follow, "--no-follow"),
            (self.errors_only, "--errors-only"),
            (self.top.is_some(), "--top"),
            (self.sort != SortKey::Time, "--sort"),
            (self.max_threads != 4096, "--max-threads"),
            (
                self.interval.is_some() && mode == "--stacks-only",
                "--interval",
            ),
            (
                self.metrics.is_some() && mode == "--stacks-only",
                "--metrics",
            ),
        ];
        if let Some((_, name)) = tracer_only.iter().find(|(set, _)| *set) {
            return Err(error::usage(format!(
                "{name} is an option of the syscall tracer, and {mode} runs none; \
                 use {with} to have both"
            )));
        }
        if !self.command.is_empty() {
            // Launching needs the tracer's launch path (held before exec,
            // reaped, signals passed on, its status returned); --requests
            // has it.
            return Err(error::usage(format!(
                "{mode} follows a running process or a scope (-p PID, --cgroup, --unit, \
                 --comm, --system); to launch a command, use {with} -- CMD"
            )));
        }
        Ok(())
    }

    /// The target of a tree mode: a pid, or a command after `--`.
    fn tree_target(&self) -> Result<TargetSpec> {
        Ok(
            match (values::tree_root("-p", &self.pid)?, self.command.is_empty()) {
                (Some(pid), true) => TargetSpec::Attach {
                    pid,
                    duration: self.duration.map(Duration::from_secs_f64),
                },
                (None, false) => TargetSpec::Launch {
                    run_as: crate::process::run_as::resolve(self.user.as_deref(), self.as_root)?,
                    argv: self.command.clone(),
                },
                (None, true) => {
                    return Err(error::usage(
                        "nothing to trace: give -p PID, a command after `--` \
                     (sockscope trace -- CMD ARGS...), or a scope: --cgroup PATH, --unit NAME, \
                     --comm NAME or --system",
                    ));
                }
                (Some(_), false) => unreachable!("clap rejects -p together with a command"),
            },
        )
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
Examples (-p takes `$(pidof nginx)`, the master and its workers: it traces
their common ancestor's tree; --unit needs systemd and that unit):
  sockscope trace -- redis-benchmark -p 6379 -n 10000 -q -t get,set
  sockscope trace --unit nginx.service --by process --interval 10s
  sockscope trace --comm redis-server --metrics 127.0.0.1:9469 --duration 2
  sockscope trace --system --by comm --duration 2
  sockscope trace -p 1234 --duration 2 --json out.json
  sockscope trace --requests-only -p 1234 --duration 2 --metrics 127.0.0.1:9469
  sockscope trace --count-only --per-thread -p $(pidof nginx) --duration 2

Signals, launch mode (-- CMD): sockscope does not stop before the command
does. Ctrl-C in a terminal reaches the command (and its children) from the
terminal itself; SIGINT, SIGTERM or SIGHUP sent to sockscope (kill PID) is
passed on to the command's process only, not to its children. The command
decides: sockscope traces until it exits, prints the table, writes --json
and exits with the command's status (130 if SIGINT killed it, 143 SIGTERM).
Attach mode (-p): those signals end the window, the table is printed and
sockscope exits 0; the process is never signalled.";
