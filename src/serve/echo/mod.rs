//! `sockscope serve echo`: an echo / fixed-size request-response server
//! with three interchangeable transports.
//!
//! The controller (this file) binds the listeners, starts the transport's
//! workers, and hands over to the controller tail every server shares
//! ([`Crew::run_until_stop`]): ready line, sleep on a signalfd, and on
//! SIGTERM or SIGINT the stop flag; each worker stops accepting, drains
//! (finishes writing what it owes, for at most [`DRAIN`]), closes
//! everything and returns its counters, which are summed into the report.
//!
//! The protocol code lives once in [`conn`], the accept loop once in
//! [`crate::serve::accept`]; [`threaded`], [`epoll`] and [`uring`] only move
//! bytes, so differences between them are kernel paths.

pub mod conn;
pub mod counters;
pub mod epoll;
pub mod report;
pub mod threaded;
pub mod uring;

use std::os::fd::OwnedFd;
use std::time::Duration;

use anyhow::Result;

use self::conn::{Framing, Spec};
use self::counters::Counters;
use super::signals::block_stop_signals;
use super::unix_listen::bind_unix;
use super::workers::{Crew, Ready, WorkerHandle, loop_count};
use super::{EchoSpec, LOOPBACK_NOTE, Transport, UNIX_NOTE, cpu_times, finish, listen};
use crate::endpoint::Endpoint;
use crate::report::serve::echo::{self as schema, EchoReport};

/// Longest time a stopping server keeps writing responses it owes.
pub const DRAIN: Duration = Duration::from_secs(2);

/// What the workers of one echo server share.
pub struct EchoShared {
    /// The protocol.
    pub spec: Spec,
    /// The stop, the exit notice and --max-conns.
    pub crew: Crew,
}

/// An echo worker thread's handle: its counters, or why it failed.
pub type EchoWorker = WorkerHandle<Counters>;

/// Runs `serve echo` until SIGTERM/SIGINT; returns the exit status.
pub fn run(args: &EchoSpec, quiet: bool) -> Result<u8> {
    let framing = match (args.req_size, args.resp_size) {
        (Some(req), Some(resp)) => Framing::Fixed { req, resp },
        _ => Framing::Echo,
    };
    let work = (args.work_us > 0).then(|| Duration::from_micros(args.work_us));
    let spec = Spec::new(framing, work);
    let loops = match args.transport {
        Transport::Threaded => 1,
        _ => loop_count(args.threads),
    };

    let mut signals = block_stop_signals()?;
    // The socket file (of a Unix listener) lives as long as this run.
    let (listeners, bound, _file) = match &args.listen {
        Endpoint::Inet(addr) => {
            let (ls, bound) = listen::bind_tcp(*addr, loops)?;
            let fds = ls.into_iter().map(OwnedFd::from).collect::<Vec<_>>();
            (fds, Endpoint::Inet(bound), None)
        }
        Endpoint::Unix(name) => {
            let l = bind_unix(name, loops)?;
            (l.fds, args.listen.clone(), l.file)
        }
    };
    let shared = std::sync::Arc::new(EchoShared {
        spec,
        crew: Crew::new(args.max_conns)?,
    });
    let workers = match args.transport {
        Transport::Threaded => threaded::start(listeners, &shared)?,
        Transport::Epoll => epoll::start(listeners, &shared)?,
        Transport::Uring => uring::start(listeners, &shared)?,
    };
    let banner = (!quiet).then(|| {
        let what = match framing {
            Framing::Echo => "plain echo".to_string(),
            Framing::Fixed { req, resp } => format!("{req}-byte requests, {resp}-byte responses"),
        };
        format!(
            "serve echo: {} transport, {loops} loop{}, {what}; stop with Ctrl-C or SIGTERM",
            args.transport.name(),
            if loops == 1 { "" } else { "s" }
        )
    });
    let ready = Ready {
        bound: bound.clone(),
        json: args.json.as_deref(),
        banner,
    };
    let end = shared
        .crew
        .run_until_stop(&mut signals, workers, ready, DRAIN, "an event loop")?;
    let (user, system) = cpu_times();
    let note = if bound.is_unix() {
        UNIX_NOTE
    } else {
        LOOPBACK_NOTE
    };
    let mut notes = vec![note.to_string()];
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
        stop_reason: end.stop_reason(),
        duration_s: end.started.elapsed().as_secs_f64(),
        drain_s: end.stop_at.elapsed().as_secs_f64(),
        transactions: spec.resp_size().map(|_| end.total.transactions),
        counters: end.total,
        cpu_user_s: user,
        cpu_system_s: system,
        notes,
    };
    finish(&rep, report::render, args.json.as_deref(), quiet)
}
