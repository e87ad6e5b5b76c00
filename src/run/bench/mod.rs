//! `sockscope bench NAME`: the built-in experiments. Each is one file
//! beside its siblings; this file is the registry and what they share (the
//! artifact directory being written, signals, progress lines).

pub mod overhead;
pub mod relay;
pub mod transport;
pub mod udp_rcvbuf;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use clap::ValueEnum;
use nix::sys::signal::Signal;

use super::exit::{self, fail};
use super::machine;
use crate::process::publish::{Dest, Show, publish};
use crate::process::ready::{self, Proto};
use crate::process::staging::Staging;
use crate::process::target::{self, Launched, quote_block};
use crate::report::bench::{BenchReport, SCHEMA, SCHEMA_VERSION};
use crate::report::load::LoadReport;
use crate::report::machine::Machine;
use crate::signals::Signals;
use crate::trace::preflight::{self, Programs};

/// The experiments `sockscope bench` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// Echo transports (threaded, epoll, uring) across connection counts
    /// under tcp-rr and tcp-crr, each point a traced profile.
    Transport,
    /// UDP loss with a small, the default and a large receive buffer.
    UdpRcvbuf,
    /// The tracer's overhead on a getppid loop, against strace and perf
    /// (where installed).
    Overhead,
    /// serve relay's data paths (userspace, splice, sockmap) against
    /// HAProxy (when installed) and the echo server reached directly.
    Relay,
}

impl Experiment {
    /// Its name on the command line and in artifacts.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Transport => "transport",
            Experiment::UdpRcvbuf => "udp-rcvbuf",
            Experiment::Overhead => "overhead",
            Experiment::Relay => "relay",
        }
    }

    /// The BPF programs it loads, if any: the tracer (transport,
    /// overhead) or serve relay's sockmap (relay).
    pub fn bpf(self) -> Option<Programs> {
        match self {
            Experiment::Transport | Experiment::Overhead => Some(Programs::Tracing),
            Experiment::Relay => Some(Programs::Sockmap),
            Experiment::UdpRcvbuf => None,
        }
    }

    /// True when it needs BPF (root, BTF).
    pub fn needs_bpf(self) -> bool {
        self.bpf().is_some()
    }

    /// Fails at once, with TRACER_FAILED and a message naming the missing
    /// capability or kernel feature, when it needs BPF this process cannot
    /// load; `who` is the command run ("sockscope bench relay"). Without
    /// it, a relay run as non-root would measure its other paths for
    /// seconds and then fail on libbpf's errno.
    pub fn preflight(self, who: &str) -> Result<()> {
        match self.bpf() {
            None => Ok(()),
            Some(programs) => preflight::check_for(programs, who)
                .map_err(|e| fail(exit::TRACER_FAILED, format!("{e:#}"))),
        }
    }
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
            eprintln!("{line}");
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
pub fn run(exp: Experiment, size: Size, ctx: &mut BenchContext<'_>) -> Result<BenchReport> {
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    let machine = Machine::current();
    let mut rep = BenchReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        experiment: exp.name().into(),
        machine: machine.clone(),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        duration_s: 0.0,
        command_line: ctx.command_line.clone(),
        quick: size.quick,
        transport: None,
        udp_rcvbuf: None,
        overhead: None,
        relay: None,
        insights: Vec::new(),
        caveats: Vec::new(),
    };
    let loopback = Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    match exp {
        Experiment::Transport => {
            let plan = transport::TransportPlan::new(size.quick, size.demo);
            ctx.progress(&format!("bench transport: {} traced profiles", plan.len()));
            let (t, ins) = transport::run(ctx, &plan)?;
            rep.transport = Some(t);
            rep.insights = ins;
            rep.caveats = machine::caveats(&machine, loopback, true);
        }
        Experiment::UdpRcvbuf => {
            let (u, ins) = udp_rcvbuf::run(ctx, size)?;
            rep.udp_rcvbuf = Some(u);
            rep.insights = ins;
            rep.caveats = machine::caveats(&machine, loopback, true);
            rep.caveats.push(
                "The kernel's RcvbufErrors counter is machine-wide (per network namespace): any \
                 other UDP receiver dropping at the same time adds to it."
                    .into(),
            );
        }
        Experiment::Overhead => {
            let (o, ins) = overhead::run(ctx, size)?;
            rep.overhead = Some(o);
            rep.insights = ins;
            rep.caveats = machine::caveats(&machine, None, false);
            rep.caveats.push(
                "A getppid loop is the worst case for a syscall tracer: almost nothing but \
                 syscalls. A real server spends most of its time elsewhere."
                    .into(),
            );
        }
        Experiment::Relay => {
            let (r, ins) = relay::run(ctx, size)?;
            rep.relay = Some(r);
            rep.insights = ins;
            rep.caveats = machine::caveats(&machine, loopback, true);
            rep.caveats.push(
                "Relay, echo server and load generator share this machine's CPUs: a path that \
                 costs more CPU anywhere (kernel workers included) leaves less for the others, \
                 which is why the machine-wide CPU per transaction is the column to compare."
                    .into(),
            );
        }
    }
    rep.duration_s = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// `sockscope bench NAME [--out DIR] [--quick]`: runs it and writes
/// DIR/bench.json, summary.txt and report.html as a set.
pub fn run_cli(
    exp: Experiment,
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
    let mut ctx = BenchContext::new(&staging, std::env::args().collect(), quiet)?;
    ctx.path = path;
    let rep = run(exp, Size { quick, demo: false }, &mut ctx)?;
    ctx.check_signals()?;
    // The experiment is over: stop signals take their usual effect again
    // and the scratch directory goes.
    drop(ctx);
    // Quiet, a bench prints nothing at all.
    let show = Show {
        summary: !quiet,
        path: !quiet,
    };
    publish(&rep, Dest::Staged(staging), show)?;
    Ok(0)
}
