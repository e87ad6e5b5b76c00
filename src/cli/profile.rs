//! `sockscope profile` options (clap) and their validation into
//! [`crate::run::profile::ProfileSpec`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::values;
use crate::error;
use crate::load::schedule::rate_plan::RatePlan;
use crate::report::sweep::Slo;
use crate::run::profile::loadcmd::LoadCommand;
use crate::run::profile::loadline::LoadLine;
use crate::run::profile::{self, ProfileSpec, ProfileTarget, Recorders, StepPlan, Steps, Workload};

pub(super) const PROFILE_HELP: &str = "\
The load line is a `sockscope load` command without `load` and without the
address: profile learns the address from the target's own listening socket
(/proc/PID/fd against /proc/PID/net/tcp*) and inserts it after the workload
(or replaces the word ADDR). An explicit address must be one the target
listens on.

Without --load: --load-cmd 'COMMAND' runs any program as the load (ADDR,
HOST and PORT are filled in), and --duration SECS observes the target
under the traffic it already has. Their requests are counted at the
target's sockets by the request anatomy (docs/profile.md).

Examples (--pid takes `$(pidof nginx)`, the master and its workers: it covers
their common ancestor's tree; --unit needs systemd and that unit):
  sockscope profile --target 'serve echo --transport epoll' --load 'tcp-rr -c 64 -d 2'
  sockscope profile --pid $(pidof -s nginx) --load-cmd 'wrk -c 16 -d 2 http://ADDR/'
  sockscope profile --unit redis-server --load-cmd 'redis-benchmark -h HOST -p PORT -q -n 10000'
  sockscope profile --unit nginx.service --duration 2      # its real traffic
  sockscope profile --load 'tcp-rr -c 8 -d 2 --request \"PING\\r\\n\" --expect \"+PONG\\r\\n\"' \\
      -- redis-server --port 16379 --save ''
  sockscope profile --pid $(pidof nginx) --load 'http -c 16 -d 2 --new-connection'
  sockscope profile --unit nginx.service --load 'http -c 16 -d 2'
  sockscope profile --pid $(pidof nginx) --load 'http -c 16 -d 2' --requests-only   # no syscall hook
  sockscope profile --target 'serve echo --transport epoll' --load 'tcp-rr -c 8 -d 2' \\
      --path 'rtt=20ms jitter=1ms loss=0.1% rate=1gbit'   # docs/path.md
  sockscope profile --target 'serve echo' --load 'tcp-rr -c 8' --sweep '1k..3k step 1k every 1s'
  sockscope profile --pid $(pidof nginx) --load 'http -c 16' --find-capacity 'p99<5ms,errors<0.1%' \\
      --step 1 --max-duration 10   # steps on one live target, a window each: docs/profile.md

No failure leaves anything at DIR, but one: --sweep or --find-capacity
interrupted after a step finished writes the steps finished so far, marked
partial (run.json sweep.partial, summary.txt, report.html), and exits 128+N.";

/// `sockscope profile` options.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["target", "pid", "cgroup", "unit", "command"])))]
pub struct ProfileArgs {
    /// Run this sockscope subcommand as the target, e.g. 'serve echo
    /// --transport epoll' (without --json: a serve target's own counters
    /// are put in run.json).
    #[arg(long, value_name = "ARGS", conflicts_with_all = ["pid", "command"])]
    pub target: Option<String>,

    /// Attach to this running server and its descendants (profile stops
    /// nothing it did not start). Several pids (`--pid $(pidof nginx)`:
    /// a master and its workers) name the one that is an ancestor of all
    /// the others; unrelated processes are a usage error.
    #[arg(short = 'p', long, value_name = "PID", num_args = 1.., conflicts_with_all = ["command", "user", "as_root"])]
    pub pid: Vec<i32>,

    /// Trace every process of this cgroup v2 directory (a service already
    /// running under a container runtime); nothing in it is stopped.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["target", "pid", "unit", "command", "user", "as_root"])]
    pub cgroup: Option<String>,

    /// Trace a running systemd unit's cgroup (nginx or nginx.service).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["target", "pid", "command", "user", "as_root"])]
    pub unit: Option<String>,

    /// The load: a `sockscope load` line without the address, e.g.
    /// 'tcp-rr -c 64 -d 10'.
    #[arg(long, value_name = "LOAD")]
    pub load: Option<String>,

    /// Any command as the load (wrk, redis-benchmark, h2load, a script),
    /// run without a shell; the words ADDR, HOST and PORT are replaced by
    /// the target's address. The window is its run; the requests are
    /// counted at the target's sockets (the request anatomy).
    #[arg(long, value_name = "COMMAND", conflicts_with = "load")]
    pub load_cmd: Option<String>,

    /// The longest a --load-cmd command may run; it is then stopped and
    /// the run fails (status 8).
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = values::positive_secs)]
    pub load_timeout: f64,

    /// No load: observe the target under the traffic it has for this
    /// long; the requests are counted at its sockets (the request
    /// anatomy).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = values::positive_secs)]
    pub duration: Option<f64>,

    /// Artifact directory (default: profile-YYYYmmdd-HHMMSS). Replaced
    /// only if it holds an earlier sockscope artifact.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Longest wait for the target to own its listening socket.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = values::positive_secs)]
    pub ready_timeout: f64,

    /// Trace with the syscall-entry hook only (cheapest; no syscall
    /// latency).
    #[arg(long)]
    pub count_only: bool,

    /// Do not collect kernel evidence (counters, socket samples, run-queue
    /// delay); for measuring what collecting it costs.
    #[arg(long)]
    pub no_evidence: bool,

    /// Do not record the request anatomy (where each request's time at
    /// the server went: queue wait, CPU wait, service, send; see
    /// docs/anatomy.md).
    #[arg(long)]
    pub no_requests: bool,

    /// Record the request anatomy alone, without the syscall tracer (no
    /// syscall hook: the target pays only the anatomy's cost); run.json
    /// then has no `trace` and the syscall figures are not recorded. See
    /// docs/profile.md.
    #[arg(long, conflicts_with = "no_requests")]
    pub requests_only: bool,

    /// Request names (HTTP routes, commands, statement kinds) the anatomy
    /// keeps per served port; the requests of the names past them are
    /// summed in the port's "(other)" rows.
    #[arg(long, value_name = "N", default_value_t = crate::anatomy::DEFAULT_MAX_ENDPOINTS,
          conflicts_with = "no_requests",
          value_parser = clap::value_parser!(u32).range(1..=crate::anatomy::MAX_ENDPOINTS_LIMIT as i64))]
    pub max_endpoints: u32,

    /// Read the requests of TLS connections from their plaintext, through
    /// uprobes on the target's OpenSSL (libssl: SSL_read, SSL_write and
    /// their _ex forms). Costs the target tens of microseconds per request;
    /// see docs/anatomy.md. Without it a TLS connection's turns are timed
    /// and its requests not read.
    #[arg(long, conflicts_with = "no_requests")]
    pub tls_plaintext: bool,

    /// Do not sample the target's stacks (where its CPU goes and where its
    /// threads wait, as flame graphs; see docs/stacks.md).
    #[arg(long)]
    pub no_stacks: bool,

    #[command(flatten)]
    pub stack_args: super::stacks::StackArgs,

    /// Run a launched target as this user (name or uid).
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,

    /// Under sudo, run a launched target as root instead of the invoking
    /// user.
    #[arg(long, conflicts_with = "user")]
    pub as_root: bool,

    /// Run the target and the load in two network namespaces joined by an
    /// emulated path, e.g. 'rtt=20ms jitter=1ms loss=0.1% rate=1gbit
    /// limit=1000' ('loopback': none). Launched targets only. See
    /// docs/path.md.
    #[arg(long, value_name = "SPEC", conflicts_with = "pid")]
    pub path: Option<String>,

    /// How the path is built: netem (veth + tc netem), delayline (TUN +
    /// sockscope's relay), auto (netem when the kernel has it).
    #[arg(long, value_enum, value_name = "BACKEND", default_value = "auto")]
    pub path_backend: crate::netpath::BackendChoice,

    /// Run the load in steps on the one target, a window per step at a
    /// constant open-loop rate: 'R1,R2,... every DUR', 'FROM..TO step STEP
    /// every DUR' or 'FROM..TO over DUR [every DUR]' (a ramp's steps at
    /// their mean rate). run.json `sweep`: a point per step, the knee. See
    /// docs/profile.md.
    #[arg(long, value_name = "SCHEDULE", conflicts_with = "find_capacity")]
    pub sweep: Option<String>,

    /// Find the highest open-loop rate that meets an SLO, e.g. 'p99<5ms' or
    /// 'p999<20ms,errors<0.1%': a closed-loop step, then a ramp and a
    /// bisection. run.json `capacity`. See docs/profile.md.
    #[arg(long, value_name = "SLO")]
    pub find_capacity: Option<String>,

    /// --find-capacity: each step's load window, whole seconds [default: 5].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub step: Option<u64>,

    /// --sweep, --find-capacity: the whole run's bound; no step starts that
    /// would end past it [default: 300].
    #[arg(long, value_name = "SECS", value_parser = values::positive_secs)]
    pub max_duration: Option<f64>,

    /// The program to launch as the target, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl ProfileArgs {
    /// What drives the window: exactly one of --load, --load-cmd and
    /// --duration; the request anatomy counts the requests of the last two,
    /// so they refuse --no-requests (usage errors, exit 2).
    fn workload(&self) -> Result<Workload> {
        let which = match (&self.load, &self.load_cmd, self.duration) {
            (Some(_), _, Some(_)) => {
                return Err(error::usage(
                    "--duration is for observing without a load; with --load the load's own \
                     -d sets the window (put it in the load line: --load 'tcp-rr -c 8 -d 10')",
                ));
            }
            (None, Some(_), Some(_)) => {
                return Err(error::usage(
                    "--duration is for observing without a load; with --load-cmd the window is \
                     the command's run (bound it with the command's own options, or \
                     --load-timeout)",
                ));
            }
            (Some(l), None, None) => Workload::Own(LoadLine::parse(l)?),
            (None, Some(c), None) => Workload::Command(
                LoadCommand::parse(c, Duration::from_secs_f64(self.load_timeout))?,
                crate::process::run_as::resolve(None, false)?,
            ),
            (None, None, Some(d)) => Workload::Observe(Duration::from_secs_f64(d)),
            (None, None, None) => {
                return Err(error::usage(
                    "give the load: --load 'LOAD' (sockscope's), --load-cmd 'COMMAND' (any \
                     program, e.g. wrk), or --duration SECS to observe the traffic the target \
                     already has",
                ));
            }
            (Some(_), Some(_), None) => unreachable!("clap refuses --load with --load-cmd"),
        };
        if self.no_requests && !matches!(which, Workload::Own(_)) {
            return Err(error::usage(
                "--no-requests: with --load-cmd or --duration the request anatomy is what \
                 counts the requests; leave --no-requests out",
            ));
        }
        Ok(which)
    }

    /// `--sweep` or `--find-capacity` with their bounds, checked against
    /// the load: sockscope's own, open loop, without the options each step
    /// sets (usage errors, exit 2).
    fn steps(&self, workload: &Workload) -> Result<Option<Steps>> {
        let plan = match (&self.sweep, &self.find_capacity) {
            (None, None) => {
                if self.step.is_some() || self.max_duration.is_some() {
                    return Err(error::usage(
                        "--step and --max-duration bound a run in steps: give --sweep SCHEDULE \
                         or --find-capacity SLO",
                    ));
                }
                return Ok(None);
            }
            (Some(text), None) => {
                if self.step.is_some() {
                    return Err(error::usage(
                        "--step is --find-capacity's: a --sweep's steps last what its schedule \
                         says ('200,400 every 2s')",
                    ));
                }
                let plan =
                    RatePlan::parse(text).map_err(|e| error::usage(format!("--sweep {e}")))?;
                if plan.constant().is_some() {
                    return Err(error::usage(format!(
                        "--sweep `{text}`: one rate is not a sweep; give a list ('200,400 every \
                         2s'), a staircase ('1k..5k step 1k every 5s') or a ramp ('1k..5k over \
                         20s every 5s')"
                    )));
                }
                if let Some(s) = plan.steps().iter().find(|s| s.rate < 1.0) {
                    return Err(error::usage(format!(
                        "--sweep `{text}`: the step at {} s asks for {:.2}/s; every step needs \
                         at least 1 request per second",
                        s.start_s, s.rate
                    )));
                }
                StepPlan::Sweep {
                    plan,
                    text: text.clone(),
                }
            }
            (None, Some(slo)) => StepPlan::Capacity {
                slo: Slo::parse(slo).map_err(|e| error::usage(format!("--find-capacity {e}")))?,
                step_s: self.step.unwrap_or(5),
            },
            (Some(_), Some(_)) => unreachable!("clap refuses --sweep with --find-capacity"),
        };
        let mode = match plan {
            StepPlan::Sweep { .. } => "--sweep",
            StepPlan::Capacity { .. } => "--find-capacity",
        };
        let Workload::Own(line) = workload else {
            return Err(error::usage(format!(
                "{mode} paces sockscope's own load at each step's rate; a --load-cmd command or \
                 an observation (--duration) cannot be paced: give --load"
            )));
        };
        if self.path.is_some() {
            return Err(error::usage(format!(
                "{mode} with --path is not supported: run the steps on loopback or another \
                 address"
            )));
        }
        line.check_steppable(mode)?;
        Ok(Some(Steps {
            plan,
            max_duration: Duration::from_secs_f64(self.max_duration.unwrap_or(300.0)),
        }))
    }

    /// Validates the options into a [`ProfileSpec`] and the artifact
    /// directory: exactly one target, a `--target` line without a `--json`
    /// of its own, a load line that parses, no tracer option with
    /// `--requests-only` (usage errors, exit 2).
    pub fn into_spec(self, quiet: bool) -> Result<(ProfileSpec, Option<PathBuf>)> {
        let workload = self.workload()?;
        let steps = self.steps(&workload)?;
        if self.requests_only && self.count_only {
            return Err(error::usage(
                "--count-only is an option of the syscall tracer, and --requests-only runs \
                 none; leave out one of them",
            ));
        }
        let scope = match (&self.cgroup, &self.unit) {
            (Some(c), _) => Some(crate::probe::scope::resolve_cgroup(c)?),
            (None, Some(u)) => {
                let target = crate::probe::scope::resolve_unit(u)?;
                if let Some(note) = target.unit_note().filter(|_| !quiet) {
                    crate::progress::say!("{note}");
                }
                Some(target)
            }
            (None, None) => None,
        };
        let pid = values::tree_root("--pid", &self.pid)?;
        let target = match (self.target, pid, self.command.is_empty()) {
            (None, None, true) if scope.is_some() => {
                ProfileTarget::Cgroup(scope.expect("checked above"))
            }
            (Some(t), None, true) => {
                let words = shell_words::split(&t)
                    .map_err(|e| error::usage(format!("--target {t:?}: {e}")))?;
                if words.is_empty() {
                    return Err(error::usage(
                        "--target is empty: give e.g. 'serve echo --transport epoll'",
                    ));
                }
                check_sockscope_line(&words)?;
                profile::check_target_args(&words)?;
                ProfileTarget::Sockscope(words)
            }
            (None, Some(pid), true) => ProfileTarget::Pid(pid),
            (None, None, false) => ProfileTarget::Command(self.command),
            _ => {
                return Err(error::usage(
                    "give exactly one target: --target 'ARGS', --pid PID, --cgroup PATH, \
                     --unit NAME, or -- CMD ARGS",
                ));
            }
        };
        let run_as = match target {
            ProfileTarget::Pid(_) | ProfileTarget::Cgroup(_) => None,
            _ => crate::process::run_as::resolve(self.user.as_deref(), self.as_root)?,
        };
        let path = match &self.path {
            Some(p) => crate::netpath::PathSpec::parse(p)?,
            None => None,
        };
        if path.is_some() {
            if matches!(target, ProfileTarget::Pid(_) | ProfileTarget::Cgroup(_)) {
                return Err(error::usage(
                    "--path needs a target profile launches (--target or -- CMD): a running \
                     process given by --pid, --cgroup or --unit cannot be moved into the \
                     path's namespace",
                ));
            }
            if let Some(a) = workload.own().and_then(LoadLine::explicit) {
                return Err(error::usage(format!(
                    "--path: leave the address ({a}) out of --load: the load is aimed at the \
                     target's address on the path"
                )));
            }
        }
        if !matches!(workload, Workload::Own(_)) && path.is_some() {
            return Err(error::usage(
                "--path runs sockscope's own load inside the path's namespace; --load-cmd and \
                 --duration have none there: use --load",
            ));
        }
        let stacks = if self.no_stacks {
            if self.stack_args.any_set() {
                return Err(error::usage(
                    "--stack-hz, --off-cpu, --stacks-folded, --offcpu-folded and the --tail \
                     options set how stacks are sampled, and --no-stacks samples none",
                ));
            }
            None
        } else {
            Some(self.stack_args.clone().into_options()?)
        };
        let tail_set = self.stack_args.tail.is_some()
            || self.stack_args.tail_folded.is_some()
            || self.stack_args.rest_folded.is_some();
        if tail_set && self.no_requests {
            return Err(error::usage(
                "--tail, --tail-folded and --rest-folded split the stacks by the requests' server \
                 time, which --no-requests does not record",
            ));
        }
        let spec = ProfileSpec {
            target,
            workload,
            path,
            path_backend: self.path_backend,
            ready_timeout: Duration::from_secs_f64(self.ready_timeout),
            count_only: self.count_only,
            evidence: !self.no_evidence,
            recorders: match (self.requests_only, self.no_requests) {
                (true, _) => Recorders::Requests,
                (false, true) => Recorders::Syscalls,
                (false, false) => Recorders::Both,
            },
            run_as,
            quiet,
            command_line: crate::cmdline::recorded(),
            steps,
            stacks,
            reading: crate::anatomy::Reading {
                max_endpoints: self.max_endpoints,
                tls_plaintext: self.tls_plaintext,
            },
        };
        Ok((spec, self.out))
    }
}

/// `--target` runs a sockscope subcommand: words that do not parse as one
/// are a usage error here (exit 2), not a target that exits before it is
/// ready (exit 3, quoting clap); a program is launched after `--`.
fn check_sockscope_line(words: &[String]) -> Result<()> {
    use clap::Parser;
    use clap::error::ErrorKind;
    let argv = std::iter::once("sockscope".to_string()).chain(words.iter().cloned());
    let Err(e) = super::Cli::try_parse_from(argv) else {
        return Ok(());
    };
    if e.kind() == ErrorKind::InvalidSubcommand {
        return Err(error::usage(format!(
            "--target runs a sockscope subcommand (e.g. 'serve echo --transport epoll'), and \
             {:?} is not one; to profile a program, launch it after `--`: sockscope profile \
             [OPTIONS] -- {}",
            words[0],
            shell_words::join(words)
        )));
    }
    let why = e.render().to_string();
    let why = why
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ");
    Err(error::usage(format!(
        "--target {:?} is not a sockscope command line: {}",
        shell_words::join(words),
        crate::text::escape(why)
    )))
}
