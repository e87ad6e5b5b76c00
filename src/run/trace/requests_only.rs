//! `sockscope trace --requests-only`: the request anatomy alone, with no
//! syscall tracer at all (only socket tracepoints are hooked, so no
//! process pays the syscall hooks' slow path). It follows a
//! running process tree (-p, whose exit ends the window through a pidfd)
//! or a scope, until --duration, SIGINT, SIGTERM or SIGHUP; it writes the
//! "Anatomy of a request" table, a `sockscope.requests` artifact with
//! --json, a line per --interval (`super::requests_live`), and serves the
//! per-port request metrics with --metrics.
//!
//! The cost is put against the target's CPU over the window: a cgroup's
//! `cpu.stat` (usage_usec, exited tasks included) for --cgroup/--unit, the
//! processes' /proc/PID/stat (user + system) for -p (the tree), --comm and
//! --system.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, anyhow};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use super::requests_live::{self, Live};
use super::target_cpu::CpuProbe;
use crate::anatomy::{self, Session};
use crate::error;
use crate::probe::TargetSpec;
use crate::report::requests::{self, RequestsReport, TargetCpu};
use crate::report::trace::{Target, Window};
use crate::signals::{Signals, signal_name};

/// How often a running window checks that its recorders still run.
const RECORDER_CHECK: Duration = Duration::from_secs(1);

/// One `trace --requests-only` run, validated (`run::trace` builds it
/// from the trace options, which it shares).
#[derive(Clone, Debug)]
pub struct RequestsOnlySpec {
    /// A pid or a scope (a launched command is refused).
    pub target: TargetSpec,
    /// Write the `sockscope.requests` artifact here (`-` for stdout).
    pub json: Option<PathBuf>,
    /// Write the table here instead of stderr.
    pub output: Option<PathBuf>,
    /// Print no table (nor progress lines) on stderr.
    pub quiet: bool,
    /// `--metrics ADDR` and whether it may be off loopback.
    pub metrics: Option<(std::net::SocketAddr, bool)>,
    /// How the exporter names the target (`pid:N`, `comm:x`...).
    pub scope_name: String,
    /// Endpoint series the exporter serves under their own names
    /// (`--max-series`).
    pub max_series: usize,
    /// Sample the window (`--requests-duty`) instead of following all of it.
    pub duty: Option<crate::anatomy::Duty>,
    /// `--interval`: a line on stderr per interval (`super::requests_live`).
    pub interval: Option<Duration>,
    /// How requests are read (`--max-endpoints`, `--tls-plaintext`).
    pub reading: crate::anatomy::Reading,
    /// A node agent's stacks (`--stacks`, served with --metrics) and their
    /// window (`--stack-window`).
    pub stacks: Option<(crate::stacks::StacksOptions, Duration)>,
}

/// Runs `trace --requests-only` and returns the exit status: 0, or 1 when
/// the target exited before --duration (the window is incomplete).
pub fn run(spec: &RequestsOnlySpec) -> Result<u8> {
    let target = &spec.target;
    let duration = alone_duration(target, "requests")?;
    // Bound before the BPF programs load: an address in use costs nothing.
    let latest = anatomy::latest();
    let exporter = match spec.metrics {
        Some((addr, public)) => {
            let e = crate::metrics::Exporter::bind(
                addr,
                public,
                crate::metrics::ExporterOptions {
                    max_series: spec.max_series,
                    scope: spec.scope_name.clone(),
                    by: crate::trace::snapshot::Breakdown::None,
                },
            )?;
            e.serve_requests(latest.clone());
            Some(e)
        }
        None => None,
    };
    crate::probe::preflight::check()?;
    // Blocked before the anatomy's thread starts, which inherits the mask:
    // the signals reach the signalfd only.
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    let (root, pidfd) = attach_root(target)?;
    let mut cfg = super::requests::config_for(target, root, spec.reading)?;
    cfg.latest = Some(latest);
    cfg.max_services = u32::try_from(spec.max_series).unwrap_or(u32::MAX);
    cfg.duty = spec.duty;
    // The stack sampler's run time, per process, into the per-service cost.
    let other_runs: Option<crate::anatomy::service_cost::OtherRuns> =
        spec.stacks.as_ref().map(|_| Default::default());
    cfg.other_runs = other_runs.clone();
    if exporter.is_some() {
        cfg.ring_bytes = anatomy::bpf::AGENT_H2_RING_BYTES;
    }
    // The lines are progress: none under -q.
    let live = match spec.interval.filter(|_| !spec.quiet) {
        Some(span) => {
            let (live, tx) = Live::start(span, cfg.interval)?;
            cfg.progress = Some(tx);
            Some((live, requests_live::rounding_note(span, cfg.interval)))
        }
        None => None,
    };
    let probe = CpuProbe::new(target, root);
    // The window opens once the programs are attached (which takes from
    // a fraction of a second to seconds): --duration runs from then, the
    // window starts then, and the target's CPU is read over it.
    let session = Session::start(cfg)?;
    let stacks = match (&spec.stacks, &exporter) {
        (Some((options, window)), Some(e)) => {
            let shared =
                crate::stacks::export::Exported::shared(options.hz, *window, spec.max_series);
            let mut c = super::stacks::config_for(target, root, options)?;
            c.export = Some(shared.clone());
            c.other_runs = other_runs;
            let s = crate::stacks::Session::start(c)?;
            e.serve_stacks(shared);
            Some(s)
        }
        _ => None,
    };
    let before = probe.read();
    let started_at = SystemTime::now();
    let started = Instant::now();
    if !spec.quiet {
        // Only now that the programs are attached does the exporter serve
        // what it says: a run whose programs fail to load never claimed to.
        if let Some(e) = &exporter {
            crate::progress::say!(
                "sockscope: serving metrics at http://{}/metrics",
                e.local_addr()
            );
        }
        crate::progress::say!("sockscope: {}", opening_line(target, root, duration));
        if let Some((options, window)) = &spec.stacks {
            crate::progress::say!(
                "sockscope: sampling stacks at {} Hz per CPU; each {} s window's profile at \
                 /debug/pprof/profile",
                options.hz,
                window.as_secs()
            );
        }
    }
    if let Some((_, Some(note))) = &live {
        crate::progress::say!("sockscope: {note}");
    }
    let failed = || session.ended() || stacks.as_ref().is_some_and(|s| s.ended());
    let reason = wait_end(
        &mut signals,
        pidfd.as_ref(),
        duration.map(|d| started + d),
        &failed,
    )?;
    let rec = session.finish()?;
    let stacks = stacks.map(crate::stacks::Session::finish);
    // The window is closed: the last line is out before the table.
    if let Some((live, _)) = live {
        live.finish();
    }
    let after = probe.read();
    drop(exporter);
    let mut notes = Vec::new();
    let cpu_s = probe.cpu(&before, &after, &mut notes).map(|c| c.total_s());
    let recorder_failed = reason == "recorder_failed";
    let complete = !(recorder_failed || reason == "target_exited" && duration.is_some());
    if reason == "target_exited" {
        notes.push(format!(
            "process {root} exited after {:.3} s; the data covers the window until then",
            started.elapsed().as_secs_f64()
        ));
    }
    let anatomy = anatomy::report(&rec, cpu_s.map(|s| (s * 1e9) as u64));
    let rep = RequestsReport {
        header: crate::report::header::ArtifactHeader::new(
            requests::SCHEMA,
            requests::SCHEMA_VERSION,
        ),
        target: target_record(target, root, anatomy.threads),
        window: Window {
            started_at: humantime::format_rfc3339_millis(started_at).to_string(),
            duration_s: rec.window_ns as f64 / 1e9,
            end_reason: reason,
            complete,
            exit_code: None,
            killed_by_signal: None,
        },
        target_cpu: TargetCpu {
            source: probe.source().into(),
            cpu_s,
        },
        notes,
        anatomy,
    };
    write_outputs(spec, &rep)?;
    // What the anatomy measured is written before a failed sampler's
    // error ends the run.
    if let Some(Err(e)) = stacks {
        return Err(e.context("--stacks: the stack sampler failed"));
    }
    if recorder_failed {
        return Err(anyhow!(
            "a recorder's thread ended before the window did; the data covers the window until \
             then"
        ));
    }
    if !complete {
        crate::progress::say!(
            "sockscope: the window ended early (target exited); the data covers only the part \
             followed"
        );
        return Ok(1);
    }
    Ok(0)
}

fn opening_line(target: &TargetSpec, root: i32, duration: Option<Duration>) -> String {
    let until = match duration {
        Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
        None => ", Ctrl-C to stop".into(),
    };
    match target {
        TargetSpec::Scope { scope, .. } => format!(
            "tracing {} (requests only, no syscall hooks){until}",
            crate::text::escape(&scope.describe())
        ),
        _ => format!(
            "attached to pid {root} ({}): requests only, no syscall hooks{until}",
            crate::text::escape(&crate::procfs::comm(root).unwrap_or_default())
        ),
    }
}

/// The --duration of `trace --{mode}-only` (`mode`: "requests" or
/// "stacks"), which follows a running process or a scope; a launched
/// command is a usage error that names `--{mode} -- CMD` instead.
pub(crate) fn alone_duration(target: &TargetSpec, mode: &str) -> Result<Option<Duration>> {
    match target {
        TargetSpec::Attach { duration, .. } | TargetSpec::Scope { duration, .. } => Ok(*duration),
        TargetSpec::Launch { .. } => Err(error::usage(format!(
            "--{mode}-only follows a running process or a scope (-p PID, --cgroup, --unit, \
             --comm, --system); to launch a command, use --{mode} -- CMD"
        ))),
    }
}

/// The root pid of `-p` and a pidfd on it (whose readiness ends the
/// window when the process exits); 0 and none for a scope.
pub(crate) fn attach_root(target: &TargetSpec) -> Result<(i32, Option<OwnedFd>)> {
    Ok(match target {
        TargetSpec::Attach { pid, .. } => (*pid, Some(crate::trace::open_attach_pidfd(*pid)?)),
        _ => (0, None),
    })
}

/// Waits for the window's end: a signal, the target's exit, or the
/// deadline; returns the end reason as trace names it.
pub(super) fn wait_end(
    signals: &mut Signals,
    pidfd: Option<&OwnedFd>,
    deadline: Option<Instant>,
    failed: &dyn Fn() -> bool,
) -> Result<String> {
    loop {
        if let Some(si) = signals.pending() {
            return Ok(format!("signal:{}", signal_name(si.ssi_signo)));
        }
        // A recorder's thread that ended on its own failed: the window
        // ends there (its error is the run's), not at a --duration or a
        // signal hours later, an agent serving figures that stopped.
        if failed() {
            return Ok("recorder_failed".into());
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            return Ok("duration".into());
        }
        let wait = left.map_or(RECORDER_CHECK, |l| l.min(RECORDER_CHECK));
        let ms = wait.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(p) = pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(anyhow!(e).context("poll")),
        }
        if fds
            .get(1)
            .and_then(|f| f.revents())
            .is_some_and(|r| !r.is_empty())
        {
            return Ok("target_exited".into());
        }
    }
}

pub(super) fn target_record(target: &TargetSpec, root: i32, threads: u64) -> Target {
    let TargetSpec::Scope { scope, .. } = target else {
        return Target {
            mode: "attach".into(),
            command: None,
            pid: root,
            comm: crate::procfs::comm(root).unwrap_or_default(),
            scope: None,
        };
    };
    crate::trace::scope_target(scope, threads)
}

/// Writes --json, then the table to -o (or stderr); every output is
/// attempted, a table -o could not take goes to stderr, and the first
/// failure is returned (exit 1).
fn write_outputs(spec: &RequestsOnlySpec, rep: &RequestsReport) -> Result<()> {
    crate::output::json_and_table(
        spec.json.as_deref(),
        spec.output.as_deref(),
        spec.quiet,
        rep,
        &requests::render(rep),
    )
}
