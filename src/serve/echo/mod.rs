//! `sockscope serve echo`: an echo / fixed-size request-response server
//! with three interchangeable transports.
//!
//! The controller (this file) binds the listeners, starts the transport's
//! workers, prints the ready line, then sleeps on a signalfd. On SIGTERM or
//! SIGINT it raises the stop flag; each worker stops accepting, drains
//! (finishes writing what it owes, for at most [`DRAIN`]), closes
//! everything and returns its counters, which are summed into the report.
//!
//! The protocol code lives once in [`conn`]; [`threaded`], [`epoll`] and
//! [`uring`] only move bytes, so differences between them are kernel paths.

pub mod accept;
pub mod conn;
pub mod counters;
pub mod epoll;
pub mod report;
pub mod threaded;
pub mod uring;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use self::conn::{Framing, Spec};
use self::counters::Counters;
use super::signals::{ExitNotice, StopCause, wait_for_stop};
use super::{EchoArgs, Transport, announce, cpu_times, listen, workers};
use crate::report as artifact;
use crate::report::serve::echo::{self as schema, EchoReport};
use crate::signals::Signals;
use crate::signals::StopFlag;

/// Longest time a stopping server keeps writing responses it owes.
pub const DRAIN: Duration = Duration::from_secs(2);
/// Extra time workers get, after the drain, to close and return.
const JOIN_GRACE: Duration = Duration::from_secs(3);

/// What the workers of one server share.
pub struct Shared {
    /// The protocol.
    pub spec: Spec,
    /// --max-conns.
    pub slots: workers::Slots,
    /// Raised by the controller to stop every worker.
    pub stop: StopFlag,
    /// Bumped by every worker as it exits.
    pub exits: Arc<ExitNotice>,
}

impl Shared {
    /// Takes a connection slot; false when --max-conns are already open
    /// (the caller closes the connection and counts it rejected).
    pub fn admit(&self) -> bool {
        self.slots.admit()
    }

    /// Gives back the slot of a closed connection.
    pub fn release(&self) {
        self.slots.release()
    }
}

/// A worker thread's handle: its counters, or why it failed.
pub type Worker = workers::Worker<Counters>;

/// Starts a worker thread whose exit always wakes the controller.
pub fn spawn_worker(
    name: String,
    shared: &Arc<Shared>,
    body: impl FnOnce() -> Result<Counters> + Send + 'static,
) -> Result<Worker> {
    workers::spawn_worker(name, Arc::clone(&shared.exits), body)
}

/// Runs `serve echo` until SIGTERM/SIGINT; returns the exit status.
pub fn run(args: &EchoArgs, quiet: bool) -> Result<u8> {
    let framing = match (args.req_size, args.resp_size) {
        (Some(req), Some(resp)) => Framing::Fixed { req, resp },
        _ => Framing::Echo,
    };
    let work = (args.work_us > 0).then(|| Duration::from_micros(args.work_us));
    let spec = Spec::new(framing, work);
    let loops = match args.transport {
        Transport::Threaded => 1,
        _ => match args.threads {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
    };

    // Before any thread exists, so every thread inherits the blocked mask.
    let mut signals = Signals::block(&[
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ])?;
    let (listeners, bound) = listen::bind_tcp(args.listen, loops)?;
    let shared = Arc::new(Shared {
        spec,
        slots: workers::Slots::new(args.max_conns),
        stop: StopFlag::new()?,
        exits: Arc::new(ExitNotice::new()?),
    });
    let workers = match args.transport {
        Transport::Threaded => threaded::start(listeners, &shared)?,
        Transport::Epoll => epoll::start(listeners, &shared)?,
        Transport::Uring => uring::start(listeners, &shared)?,
    };
    announce(bound, args.json.as_deref());
    let t0 = Instant::now();
    if !quiet {
        let what = match framing {
            Framing::Echo => "plain echo".to_string(),
            Framing::Fixed { req, resp } => format!("{req}-byte requests, {resp}-byte responses"),
        };
        eprintln!(
            "serve echo: {} transport, {loops} loop{}, {what}; stop with Ctrl-C or SIGTERM",
            args.transport.name(),
            if loops == 1 { "" } else { "s" }
        );
    }

    let cause = wait_for_stop(&mut signals, &shared.exits)?;
    let stop_at = Instant::now();
    shared.stop.raise();
    let total = workers::join_all(workers, &shared.exits, DRAIN + JOIN_GRACE)?;
    if cause == StopCause::WorkerExited {
        // Workers only return early on error, and join_all reported those.
        return Err(anyhow!("an event loop stopped on its own; the run is void"));
    }
    let StopCause::Signal(sig) = cause else {
        unreachable!()
    };
    let (user, system) = cpu_times();
    let mut notes =
        vec!["loopback only: figures include both ends' kernel work on one machine".to_string()];
    if args.transport == Transport::Threaded {
        notes.push("threaded: one acceptor thread plus one thread per connection".to_string());
    }
    let rep = EchoReport {
        header: crate::report::header::ArtifactHeader::new(schema::SCHEMA, schema::SCHEMA_VERSION),
        listen: bound.to_string(),
        transport: args.transport.name().to_string(),
        loops,
        req_size: args.req_size,
        resp_size: args.resp_size,
        work_us: args.work_us,
        max_conns: args.max_conns,
        out_cap_bytes: spec.out_cap,
        stop_reason: format!("signal:{sig}"),
        duration_s: t0.elapsed().as_secs_f64(),
        drain_s: stop_at.elapsed().as_secs_f64(),
        transactions: spec.resp_size().map(|_| total.transactions),
        counters: total,
        cpu_user_s: user,
        cpu_system_s: system,
        notes,
    };
    if !quiet {
        eprint!("{}", report::render(&rep));
    }
    if let Some(path) = &args.json {
        artifact::write_json(path, &rep)?;
    }
    Ok(0)
}
