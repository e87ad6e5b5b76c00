//! `sockscope serve relay`: a TCP relay (one upstream connection per client)
//! with three data paths, so their costs can be compared on the same
//! traffic: read/write through userspace, splice through pipes, and a BPF
//! sockmap where the kernel redirects each socket's bytes to its peer.
//!
//! The controller (this file) loads the sockmap program if asked (falling
//! back to userspace, or failing with --strict), binds one SO_REUSEPORT
//! listener per loop, starts the loops ([`looper`]), prints the ready line
//! and waits for SIGTERM/SIGINT; then the loops stop accepting, let open
//! pairs finish for a bounded time, and their counters are reported.

pub mod counters;
pub mod looper;
pub mod pump;
pub mod report;
pub mod sockmap;
pub mod tcpinfo;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use self::counters::RelayCounters;
use self::looper::{DRAIN, Loop, Path, RateLog, Shared};
use super::signals::{ExitNotice, StopCause, wait_for_stop};
use super::{RelayArgs, RelayMode, announce, cpu_times, listen, workers};
use crate::report as artifact;
use crate::report::serve::relay::{self as schema, RelayReport};
use crate::signals::{Signals, StopFlag};

/// Extra time loops get, after the drain, to close and return.
const JOIN_GRACE: Duration = Duration::from_secs(3);

/// Runs `serve relay` until SIGTERM/SIGINT; returns the exit status.
pub fn run(args: &RelayArgs, quiet: bool) -> Result<u8> {
    let upstream = crate::load::resolve(&args.upstream)?;
    let loops = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    // Before any thread exists, so every thread inherits the blocked mask.
    let mut signals = Signals::block(&[
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ])?;

    let mut fallback = None;
    let mut keep = None;
    let (path, sockmap) = match args.mode {
        RelayMode::Userspace => (Path::Userspace, None),
        RelayMode::Splice => (Path::Splice, None),
        RelayMode::Sockmap => {
            // Named capabilities first: libbpf alone says only EPERM.
            let loaded = crate::trace::preflight::check_for(
                crate::trace::preflight::Programs::Sockmap,
                "sockscope serve relay --mode sockmap",
            )
            .and_then(|()| {
                sockmap::Sockmap::load(args.max_conns.map_or(65536, |m| m.min(1 << 20) as u32))
            });
            match loaded {
                Ok((sm, loaded)) => {
                    keep = Some(loaded);
                    (Path::Sockmap, Some(sm))
                }
                Err(e) if args.strict => {
                    return Err(anyhow!(
                        "--mode sockmap --strict: the kernel path is unavailable: {e:#}"
                    ));
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    eprintln!(
                        "sockscope relay: sockmap unavailable ({why}); relaying in userspace instead"
                    );
                    fallback = Some(why);
                    (Path::Userspace, None)
                }
            }
        }
    };

    let (listeners, bound) = listen::bind_tcp(args.listen, loops)?;
    let shared = Arc::new(Shared {
        upstream,
        path,
        sockmap,
        slots: workers::Slots::new(args.max_conns),
        stop: StopFlag::new()?,
        exits: Arc::new(ExitNotice::new()?),
        connect_timeout: Duration::from_secs_f64(args.connect_timeout),
        idle_timeout: args.idle_timeout.map(Duration::from_secs_f64),
        log: RateLog::new(quiet),
    });
    let mut handles = Vec::with_capacity(loops);
    for (i, l) in listeners.into_iter().enumerate() {
        let lp = Loop::new(l, &shared)?;
        handles.push(workers::spawn_worker(
            format!("ss-relay-{i}"),
            Arc::clone(&shared.exits),
            move || lp.run(),
        )?);
    }
    announce(bound, args.json.as_deref());
    let t0 = Instant::now();
    if !quiet {
        eprintln!(
            "serve relay: {bound} -> {upstream}, {} mode, {loops} loop{}; stop with Ctrl-C or SIGTERM",
            mode_name(path),
            if loops == 1 { "" } else { "s" }
        );
    }
    let cause = wait_for_stop(&mut signals, &shared.exits)?;
    let stop_at = Instant::now();
    shared.stop.raise();
    let total: RelayCounters = workers::join_all(handles, &shared.exits, DRAIN + JOIN_GRACE)?;
    if cause == StopCause::WorkerExited {
        return Err(anyhow!("a relay loop stopped on its own; the run is void"));
    }
    let StopCause::Signal(sig) = cause else {
        unreachable!()
    };
    let (user, system) = cpu_times();
    let verdict = shared.sockmap.as_ref().map(|s| s.stats());
    let mut notes =
        vec!["loopback only: figures include both ends' kernel work on one machine".to_string()];
    if path == Path::Sockmap && total.bytes_through_userspace > 0 {
        notes.push(format!(
            "{} bytes went through userspace in sockmap mode: {} sockets had data before their \
             peer was in the map, {} pairs could not be linked",
            total.bytes_through_userspace, total.tainted_sockets, total.link_failures
        ));
    }
    let rep = RelayReport {
        header: crate::report::header::ArtifactHeader::new(schema::SCHEMA, schema::SCHEMA_VERSION),
        listen: bound.to_string(),
        upstream: upstream.to_string(),
        mode_requested: mode_name(match args.mode {
            RelayMode::Userspace => Path::Userspace,
            RelayMode::Splice => Path::Splice,
            RelayMode::Sockmap => Path::Sockmap,
        })
        .to_string(),
        mode: mode_name(path).to_string(),
        fallback_reason: fallback,
        loops,
        max_conns: args.max_conns,
        stop_reason: format!("signal:{sig}"),
        duration_s: t0.elapsed().as_secs_f64(),
        drain_s: stop_at.elapsed().as_secs_f64(),
        counters: total,
        verdict,
        cpu_user_s: user,
        cpu_system_s: system,
        notes,
    };
    if !quiet {
        eprint!("{}", report::render(&rep));
    }
    if let Some(p) = &args.json {
        artifact::write_json(p, &rep)?;
    }
    drop(shared);
    drop(keep);
    Ok(0)
}

/// Name of a data path in reports.
pub fn mode_name(p: Path) -> &'static str {
    match p {
        Path::Userspace => "userspace",
        Path::Splice => "splice",
        Path::Sockmap => "sockmap",
    }
}
