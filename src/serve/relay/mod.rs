//! `sockscope serve relay`: a TCP relay (one upstream connection per client)
//! with three data paths, so their costs can be compared on the same
//! traffic: read/write through userspace, splice through pipes, and a BPF
//! sockmap where the kernel redirects each socket's bytes to its peer.
//!
//! The controller (this file) loads the sockmap program if asked (falling
//! back to userspace, or failing with --strict), binds one SO_REUSEPORT
//! listener per loop, starts the loops ([`looper`], accepting through the
//! shared [`crate::serve::accept`] loop), and hands over to the controller
//! tail every server shares ([`Crew::run_until_stop`]): ready line, wait
//! for SIGTERM/SIGINT; then the loops stop accepting, let open pairs finish
//! for a bounded time, and their counters are reported.

pub mod counters;
pub mod looper;
pub mod pump;
pub mod report;
pub mod sockmap;
pub mod tcpinfo;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};

use self::counters::RelayCounters;
use self::looper::{DRAIN, RateLog, RelayLoop, RelayPath, RelayShared};
use super::signals::block_stop_signals;
use super::workers::{Crew, Ready, loop_count};
use super::{LOOPBACK_NOTE, RelayMode, RelaySpec, cpu_times, finish, listen};
use crate::report::serve::relay::{self as schema, RelayReport};

/// Runs `serve relay` until SIGTERM/SIGINT; returns the exit status.
pub fn run(args: &RelaySpec, quiet: bool) -> Result<u8> {
    let upstream = args.upstream;
    let loops = loop_count(args.threads);
    let mut signals = block_stop_signals()?;

    let mut fallback = None;
    let mut keep = None;
    let (path, sockmap) = match args.mode {
        RelayMode::Userspace => (RelayPath::Userspace, None),
        RelayMode::Splice => (RelayPath::Splice, None),
        RelayMode::Sockmap => {
            // Named capabilities first: libbpf alone says only EPERM.
            let loaded = crate::probe::preflight::check_for(
                crate::probe::preflight::Programs::Sockmap,
                "sockscope serve relay --mode sockmap",
            )
            .and_then(|()| {
                sockmap::Sockmap::load(args.max_conns.map_or(65536, |m| m.min(1 << 20) as u32))
            });
            match loaded {
                Ok((sm, loaded)) => {
                    keep = Some(loaded);
                    (RelayPath::Sockmap, Some(sm))
                }
                Err(e) if args.strict => {
                    return Err(anyhow!(
                        "--mode sockmap --strict: the kernel path is unavailable: {e:#}"
                    ));
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    crate::progress::say!(
                        "sockscope relay: sockmap unavailable ({why}); relaying in userspace instead"
                    );
                    fallback = Some(why);
                    (RelayPath::Userspace, None)
                }
            }
        }
    };

    let (listeners, bound) = listen::bind_tcp(args.listen, loops)?;
    let shared = Arc::new(RelayShared {
        upstream,
        path,
        sockmap,
        crew: Crew::new(args.max_conns)?,
        connect_timeout: Duration::from_secs_f64(args.connect_timeout),
        idle_timeout: args.idle_timeout.map(Duration::from_secs_f64),
        log: RateLog::new(quiet),
    });
    let mut handles = Vec::with_capacity(loops);
    for (i, l) in listeners.into_iter().enumerate() {
        let lp = RelayLoop::new(l, &shared)?;
        handles.push(
            shared
                .crew
                .spawn(format!("ss-relay-{i}"), move || lp.run())?,
        );
    }
    let banner = (!quiet).then(|| {
        format!(
            "serve relay: {bound} -> {upstream}, {} mode, {loops} loop{}; stop with Ctrl-C or SIGTERM",
            mode_name(path),
            if loops == 1 { "" } else { "s" }
        )
    });
    let ready = Ready {
        bound: bound.into(),
        json: args.json.as_deref(),
        banner,
    };
    let end = shared
        .crew
        .run_until_stop(&mut signals, handles, ready, DRAIN, "a relay loop")?;
    let total: &RelayCounters = &end.total;
    let (user, system) = cpu_times();
    let verdict = shared.sockmap.as_ref().map(|s| s.stats());
    let mut notes = vec![LOOPBACK_NOTE.to_string()];
    if path == RelayPath::Sockmap && total.bytes_through_userspace > 0 {
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
            RelayMode::Userspace => RelayPath::Userspace,
            RelayMode::Splice => RelayPath::Splice,
            RelayMode::Sockmap => RelayPath::Sockmap,
        })
        .to_string(),
        mode: mode_name(path).to_string(),
        fallback_reason: fallback,
        loops,
        max_conns: args.max_conns,
        stop_reason: end.stop_reason(),
        duration_s: end.started.elapsed().as_secs_f64(),
        drain_s: end.stop_at.elapsed().as_secs_f64(),
        counters: end.total,
        verdict,
        cpu_user_s: user,
        cpu_system_s: system,
        notes,
    };
    let status = finish(&rep, report::render, args.json.as_deref(), quiet);
    // The loops are joined: the maps go, then the program they used.
    drop(shared);
    drop(keep);
    status
}

/// Name of a data path in reports.
pub fn mode_name(p: RelayPath) -> &'static str {
    match p {
        RelayPath::Userspace => "userspace",
        RelayPath::Splice => "splice",
        RelayPath::Sockmap => "sockmap",
    }
}
