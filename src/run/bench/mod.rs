//! `sockscope bench NAME`: the built-in experiments. Each is one file
//! beside its siblings implementing [`Experiment`]; this file is the
//! registry ([`EXPERIMENTS`], which the CLI and the demo read) and what they
//! share (the artifact directory being written, signals, progress lines).

pub mod overhead;
pub mod relay;
pub mod transport;
pub mod udp_rcvbuf;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use nix::sys::signal::Signal;

use super::exit::{self, fail};
use crate::probe::preflight::{self, Programs};
use crate::process::publish::{Dest, Show, publish};
use crate::process::ready::{self, Proto};
use crate::process::staging::Staging;
use crate::process::target::{self, Launched, quote_block};
use crate::report::bench::{BenchReport, ExperimentResult, Results, SCHEMA, SCHEMA_VERSION};
use crate::report::load::LoadReport;
use crate::report::machine::Machine;
use crate::signals::Signals;

/// One built-in experiment, as `sockscope bench` and the demo run it.
/// Each is a unit struct in its own file, registered in [`EXPERIMENTS`];
/// its results are a [`crate::report::bench::Section`] registered on the
/// report side.
pub trait Experiment: Sync {
    /// Its name on the command line and in artifacts (`udp-rcvbuf`).
    fn name(&self) -> &'static str;
    /// One sentence for `bench --help`.
    fn about(&self) -> &'static str;
    /// The BPF programs it loads, if any.
    fn bpf(&self) -> Option<Programs>;
    /// True when it drives its load through profile, so `bench --path`
    /// applies to it.
    fn takes_path(&self) -> bool {
        false
    }
    /// What limits its figures on `machine` (after the run).
    fn caveats(&self, machine: &Machine) -> Vec<String>;
    /// Runs it into `ctx`'s directory: its results and the sentences they
    /// support.
    fn run(
        &self,
        ctx: &mut BenchContext<'_>,
        size: Size,
    ) -> Result<(ExperimentResult, Vec<String>)>;
}

/// Every experiment, in the order `bench --help` lists them and the demo
/// runs them. One line each.
pub static EXPERIMENTS: &[&dyn Experiment] = &[
    &transport::Transport,
    &udp_rcvbuf::UdpRcvbuf,
    &overhead::Overhead,
    &relay::Relay,
];

/// The registered experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    EXPERIMENTS.iter().copied().find(|e| e.name() == name)
}

impl std::fmt::Debug for dyn Experiment + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl dyn Experiment + '_ {
    /// True when it needs BPF (root, BTF).
    pub fn needs_bpf(&self) -> bool {
        self.bpf().is_some()
    }

    /// Fails at once, with TRACER_FAILED and a message naming the missing
    /// capability or kernel feature, when it needs BPF this process cannot
    /// load; `who` is the command run ("sockscope bench relay"). Without
    /// it, a relay run as non-root would measure its other paths for
    /// seconds and then fail on libbpf's errno.
    pub fn preflight(&self, who: &str) -> Result<()> {
        match self.bpf() {
            None => Ok(()),
            Some(programs) => preflight::check_for(programs, who)
                .map_err(|e| fail(exit::TRACER_FAILED, format!("{e:#}"))),
        }
    }
}

/// The caveats of an experiment on loopback (`machine::caveats` for a
/// run between two processes on 127.0.0.1), then `extra`.
pub fn loopback_caveats(machine: &Machine, extra: &[&str]) -> Vec<String> {
    let loopback = Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let mut c = super::machine::caveats(machine, loopback, true);
    c.extend(extra.iter().map(|s| s.to_string()));
    c
}

/// What every experiment gets: where to write, how to report progress,
/// and the signals to check between runs.
pub struct BenchContext<'a> {
    /// The artifact directory being written.
    pub staging: &'a Staging,
    /// The command line, recorded in artifacts.
    pub command_line: Vec<String>,
    /// No progress lines.
    pub quiet: bool,
    /// An emulated path every profile point runs on (`bench --path`).
    pub path: Option<(crate::netpath::PathSpec, crate::netpath::BackendChoice)>,
    signals: Signals,
    scratch: crate::process::staging::LockedDir,
    scratch_n: u32,
}

impl<'a> BenchContext<'a> {
    /// Blocks the stop signals (before any thread starts) and prepares.
    pub fn new(staging: &'a Staging, command_line: Vec<String>, quiet: bool) -> Result<Self> {
        let signals = Signals::block(&[
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGCHLD,
        ])?;
        Ok(Self {
            staging,
            command_line,
            quiet,
            path: None,
            signals,
            scratch: super::scratch_dir()?,
            scratch_n: 0,
        })
    }

    /// Fails with the interruption status if Ctrl-C (or SIGTERM/SIGHUP)
    /// arrived.
    pub fn check_signals(&mut self) -> Result<()> {
        while let Some(si) = self.signals.pending() {
            if si.ssi_signo != Signal::SIGCHLD as u32 {
                return Err(exit::interrupted(si.ssi_signo, "during the experiment"));
            }
        }
        Ok(())
    }

    /// Fails with the interruption status if a stop signal came while an
    /// embedded load ran (`when`: "during ..."): pending here, or read by
    /// the load itself and left in its report. Call it before judging the
    /// load's failure or the processes, which the signal may explain.
    pub fn check_load(&mut self, rep: &LoadReport, when: &str) -> Result<()> {
        self.check_signals()?;
        exit::load_interrupted(rep, when)
    }

    /// A fresh directory for one run's scratch files, inside this
    /// experiment's private scratch directory ([`super::scratch_dir`],
    /// removed with the context).
    pub fn scratch(&mut self, name: &str) -> Result<PathBuf> {
        self.scratch_n += 1;
        let d = self
            .scratch
            .path()
            .join(format!("{}-{name}", self.scratch_n));
        std::fs::create_dir(&d)?;
        Ok(d)
    }

    /// A progress line on stderr (unless quiet).
    pub fn progress(&self, line: &str) {
        if !self.quiet {
            crate::progress::say!("{line}");
        }
    }
}

/// Longest wait for a process an experiment starts to own its socket.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits (at most READY_TIMEOUT) until `l` itself owns a socket of `proto`
/// (a TCP listener, a bound UDP socket) and returns its address; a process
/// that exits first, or never gets there, is an error quoting its output.
pub fn wait_socket(l: &mut Launched, proto: Proto, what: &str) -> Result<SocketAddr> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        check_alive(l, exit::TARGET_EXITED_EARLY, what, "before it was ready")?;
        if let Some(a) = ready::choose(&ready::owned_sockets(l.pid), proto) {
            return Ok(a);
        }
        if Instant::now() >= deadline {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "{what} did not own its socket within {} s; its output:\n{}",
                    READY_TIMEOUT.as_secs(),
                    quote_block(&l.log_tail(2000))
                ),
            ));
        }
        target::wait_pidfd(l.exit_fd(), Duration::from_millis(10));
    }
}

/// Fails with `code` if `l` has exited, naming it (`what`), when (`when`)
/// and quoting its output.
pub fn check_alive(l: &mut Launched, code: u8, what: &str, when: &str) -> Result<()> {
    match l.try_exited() {
        None => Ok(()),
        Some(st) => Err(fail(
            code,
            format!(
                "{what} exited ({}) {when}; its output:\n{}",
                target::describe_status(st),
                quote_block(&l.log_tail(2000))
            ),
        )),
    }
}

/// Sizes of a run: `quick` for a short one; `demo` for the demo's middle
/// ground.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    /// --quick.
    pub quick: bool,
    /// Called by the demo (about two minutes for everything).
    pub demo: bool,
}

/// Runs one experiment into `ctx`'s directory and returns its report.
pub fn run(exp: &dyn Experiment, size: Size, ctx: &mut BenchContext<'_>) -> Result<BenchReport> {
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    let machine = Machine::current();
    let (result, insights) = exp.run(ctx, size)?;
    Ok(BenchReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        experiment: exp.name().into(),
        machine: machine.clone(),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_s: t0.elapsed().as_secs_f64(),
        command_line: ctx.command_line.clone(),
        quick: size.quick,
        results: Results(vec![result]),
        insights,
        caveats: exp.caveats(&machine),
    })
}

/// `sockscope bench NAME [--out DIR] [--quick]`: runs it and writes
/// DIR/bench.json, summary.txt and report.html as a set.
pub fn run_cli(
    exp: &dyn Experiment,
    out: Option<&Path>,
    quick: bool,
    quiet: bool,
    path: Option<(crate::netpath::PathSpec, crate::netpath::BackendChoice)>,
) -> Result<u8> {
    exp.preflight(&format!("sockscope bench {}", exp.name()))?;
    let dest = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("bench-{}-{}", exp.name(), super::timestamp())));
    let staging = Staging::new(&dest)?;
    let mut ctx = BenchContext::new(&staging, crate::cmdline::recorded(), quiet)?;
    ctx.path = path;
    let rep = run(exp, Size { quick, demo: false }, &mut ctx)?;
    ctx.check_signals()?;
    // The experiment is over: stop signals take their usual effect again
    // and the scratch directory goes.
    drop(ctx);
    // Quiet, a bench prints nothing at all.
    let show = Show {
        summary: !quiet,
        whole: true,
        path: !quiet,
    };
    publish(&rep, Dest::Staged(staging), show)?;
    Ok(0)
}
