//! `sockscope load WORKLOAD ADDR ... --path SPEC --serve 'ARGS'`: a load
//! against a `sockscope serve` target over an emulated path, without a
//! profile (no tracer). The server is started inside the path's target
//! namespace, the load runs on a thread inside the generator namespace,
//! and the load's artifact records the path.

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::load::LoadSpec;
use crate::load::driver::tcp_report::NOTHING_REPORTED;
use crate::load::spec::{PLACEHOLDER, Target};
use crate::netpath::{BackendChoice, EmulatedPath, NetPath, PathSpec};
use crate::process::ready::{self, Proto};
use crate::process::target::{Launched, STOP_GRACE, quote_block};

/// Longest wait for the served target to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A load over an emulated path against a served target.
#[derive(Debug)]
pub struct ServedPath {
    /// The path.
    pub spec: PathSpec,
    /// How it is built.
    pub backend: BackendChoice,
    /// `serve` arguments (`echo --transport epoll`).
    pub serve: Vec<String>,
}

/// Blocks the stop signals on the calling thread (threads started later
/// inherit it), so Ctrl-C reaches the load's own handling instead of
/// killing the process with the default action.
fn block_stop_signals() {
    // SAFETY: building and applying a signal mask for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Waits until the served target owns a socket the load can reach on the
/// path (its path address or a wildcard).
fn wait_listening(t: &mut Launched, proto: Proto, ip: IpAddr) -> Result<SocketAddr> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(st) = t.try_exited() {
            bail!(
                "the served target exited ({}) before it listened; its output:\n{}",
                crate::process::target::describe_status(st),
                quote_block(&t.log_tail(2000))
            );
        }
        let socks = ready::owned_sockets(t.pid);
        if let Some(s) = socks
            .iter()
            .filter(|s| s.proto == proto)
            .find(|s| s.local.ip() == ip || s.local.ip().is_unspecified())
        {
            return Ok(SocketAddr::new(ip, s.local.port()));
        }
        if Instant::now() >= deadline {
            bail!(
                "the served target did not listen on {ip} (or a wildcard) within {} s; its \
                 output:\n{}",
                READY_TIMEOUT.as_secs(),
                quote_block(&t.log_tail(2000))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the load over the path; returns the exit status as `load` does.
pub fn run(mut spec: LoadSpec, quiet: bool, sp: &ServedPath) -> Result<u8> {
    let udp = spec.is_udp();
    let json = spec.json_path();
    // The workload's address must be a slot that names ADDR (a bare http
    // path names none).
    let slot = spec.target().text().unwrap_or_default();
    if !matches!(spec.target(), Target::Slot(t) if t.contains(PLACEHOLDER)) {
        return Err(crate::error::usage(format!(
            "--serve: give the word ADDR where the address goes (e.g. `load tcp-rr ADDR -c 4 \
             --path rtt=10ms --serve 'echo --transport epoll'`, or http://ADDR/ for http), \
             not {slot:?}: the served target's address is only known once it listens"
        )));
    }
    if let Some(p) = &json {
        crate::output::check(p, "--json")?;
    }
    block_stop_signals();
    let path = EmulatedPath::create(&sp.spec, sp.backend).context("building --path")?;
    let exe = std::env::current_exe().context("locating the sockscope binary")?;
    let mut argv: Vec<OsString> = vec![exe.into(), "serve".into()];
    argv.extend(sp.serve.iter().map(OsString::from));
    if !sp
        .serve
        .iter()
        .any(|a| a == "--listen" || a.starts_with("--listen="))
    {
        argv.push("--listen".into());
        argv.push(format!("{}:0", path.target_ip).into());
    }
    let mut target = Launched::spawn_in_netns(&argv, None, false, path.target_netns())
        .context("starting the served target")?;
    let proto = if udp { Proto::Udp } else { Proto::TcpListen };
    let addr = wait_listening(&mut target, proto, IpAddr::V4(path.target_ip))?;
    spec.fill(&addr.into());
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            path.enter_generator()?;
            crate::load::execute(spec, quiet)
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the load thread panicked")))
    });
    let stop = target.stop(STOP_GRACE);
    let record = path.finish();
    let mut out = outcome?;
    out.failure = out.failure.map(|f| explain_silence(f, &sp.spec));
    out.report.notes.push(record.caveat());
    if stop.signal != "SIGTERM" {
        out.report.notes.push(format!(
            "The served target did not stop cleanly ({}).",
            stop.describe()
        ));
    }
    out.report.path = Some(NetPath::Emulated(Box::new(record)));
    super::load::finish(&out.report, out.failure, json.as_deref(), quiet)
}

/// A failure with no error to show ("no error reported": nothing came
/// back and nothing timed out yet) on a path that explains it: one that
/// drops every packet, or whose rate let nothing through in time.
fn explain_silence(failure: String, path: &PathSpec) -> String {
    let silent = format!("({NOTHING_REPORTED})");
    if !failure.contains(&silent) {
        return failure;
    }
    let why = if path.loss >= 1.0 {
        "every packet was dropped by the path (--path loss=100%)".to_string()
    } else if let Some(bps) = path.rate_bps {
        format!(
            "the path's rate ({}) let nothing through in time",
            crate::netpath::spec::fmt_rate(bps)
        )
    } else {
        return failure;
    };
    failure.replace(&silent, &format!("({why})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(spec: &str) -> PathSpec {
        PathSpec::parse(spec).unwrap().unwrap()
    }

    #[test]
    fn a_silent_failure_names_the_path_that_explains_it() {
        let f =
            || format!("no connection to 10.0.0.2:80 could be established ({NOTHING_REPORTED})");
        let lossy = explain_silence(f(), &path("rtt=2ms loss=100%"));
        assert!(!lossy.contains(NOTHING_REPORTED), "{lossy}");
        assert!(
            lossy.contains("every packet was dropped by the path"),
            "{lossy}"
        );
        let slow = explain_silence(f(), &path("rtt=2ms rate=1bit"));
        assert!(
            slow.contains("the path's rate (1bit) let nothing through in time"),
            "{slow}"
        );
        // A path that does not explain it, and a failure with errors, stay.
        assert_eq!(explain_silence(f(), &path("rtt=10ms")), f());
        let counted = "no reply (lost x3)".to_string();
        assert_eq!(
            explain_silence(counted.clone(), &path("rtt=2ms loss=100%")),
            counted
        );
    }
}
