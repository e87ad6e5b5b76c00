//! Collects a profile's kernel-side evidence (`report::evidence`): counter
//! snapshots before and after the window, and a sampler thread that every
//! [`INTERVAL`] reads the target tree's sockets (sock_diag, in the target's
//! network namespace: its TCP and UDP sockets, or its Unix sockets when it
//! serves one) and its threads' schedstat. The sampler only reads
//! /proc and the kernel's socket table; it never touches the target's
//! sockets or signals it. Its own CPU time is measured and reported, so
//! its cost is part of the evidence.

pub mod counters;
pub mod sched;
pub mod sockets;
pub mod unix_sockets;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::report::evidence::{EvidenceCost, KernelEvidence, Netns};
use crate::signals::StopFlag;

/// Pause between sampling rounds.
pub const INTERVAL: Duration = Duration::from_millis(100);
/// How often the tree (the target and its descendants) is walked again:
/// walking /proc costs more than one round, and workers are rarely born
/// mid-run; a new worker is still seen within this long.
const TREE_REFRESH: Duration = Duration::from_secs(1);

/// A running collector; [`Collector::finish`] ends it and returns the
/// evidence. Dropping it without finishing stops the thread too.
pub struct Collector {
    stop: Arc<StopFlag>,
    handle: Option<JoinHandle<Rounds>>,
    before: std::result::Result<counters::Snapshot, String>,
    pid: i32,
    netns: Netns,
    started: Instant,
}

/// The socket sampler of a target: its TCP/UDP sockets, or its Unix ones.
/// An error is the `unavailable` line saying why neither runs.
type Sockets = std::result::Result<SocketSampler, String>;

enum SocketSampler {
    Inet(Box<sockets::Sampler>),
    Unix(Box<unix_sockets::Sampler>),
}

/// What the sampler thread hands back.
struct Rounds {
    sockets: Sockets,
    sched: sched::Sampler,
    samples: u64,
    cpu_s: f64,
}

impl Collector {
    /// Takes the "before" counter snapshot and TIME_WAIT count, and starts
    /// sampling the tree of `pid`, whose service listens on `addr` (None:
    /// on a Unix socket: its Unix sockets are sampled, through UNIX_DIAG).
    pub fn start(pid: i32, addr: Option<SocketAddr>) -> Result<Self> {
        let netns = netns_of(pid);
        let before = counters::snapshot(pid);
        // Here, not in the thread: the TIME_WAIT count it starts with is
        // what was there before the run, so it must be taken before this
        // returns and the load starts (in the thread it raced the load's
        // first connections and counted them as earlier runs').
        let sockets = match addr {
            Some(addr) => sockets::Sampler::new(pid, addr)
                .map(|s| SocketSampler::Inet(Box::new(s)))
                .map_err(|e| format!("the target's sockets (sock_diag): {e}")),
            None => unix_sockets::Sampler::new(pid)
                .map(|u| SocketSampler::Unix(Box::new(u)))
                .map_err(|e| format!("the target's Unix sockets (sock_diag UNIX_DIAG): {e}")),
        };
        let stop = Arc::new(StopFlag::new()?);
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("sockscope-evidence".into())
            .spawn(move || {
                crate::signals::keep_off_this_thread();
                sample_until(&flag, pid, sockets)
            })
            .context("starting the evidence sampler thread")?;
        Ok(Collector {
            stop,
            handle: Some(handle),
            before,
            pid,
            netns,
            started: Instant::now(),
        })
    }

    /// Stops sampling, takes the "after" snapshot and assembles the evidence.
    pub fn finish(mut self) -> KernelEvidence {
        let after = counters::snapshot(self.pid);
        let window = self.started.elapsed().as_secs_f64();
        self.stop.raise();
        let rounds = self.handle.take().and_then(|h| h.join().ok());
        let mut unavailable = Vec::new();
        let counters = match (&self.before, &after) {
            (Ok(b), Ok(a)) => {
                let (deltas, missing) = counters::delta(b, a);
                unavailable.extend(missing);
                Some(deltas)
            }
            (Err(e), _) | (_, Err(e)) => {
                unavailable.push(format!("kernel counters: {e}"));
                None
            }
        };
        let Some(r) = rounds else {
            unavailable.push("socket and scheduling samples: the sampler thread panicked".into());
            return KernelEvidence {
                netns: self.netns.clone(),
                counters,
                unavailable,
                ..Default::default()
            };
        };
        let (sockets, unix) = match r.sockets {
            Ok(SocketSampler::Inet(s)) => (Some(s.finish()), None),
            Ok(SocketSampler::Unix(u)) => (None, Some(u.finish())),
            Err(e) => {
                unavailable.push(e);
                (None, None)
            }
        };
        let sched = match r.sched.finish() {
            Ok(s) => Some(s),
            Err(e) => {
                unavailable.push(format!("run-queue delay (schedstat): {e}"));
                None
            }
        };
        KernelEvidence {
            netns: self.netns.clone(),
            counters,
            sockets,
            unix,
            sched,
            unavailable,
            cost: EvidenceCost {
                samples: r.samples,
                interval_ms: INTERVAL.as_millis() as u64,
                sampler_cpu_s: r.cpu_s,
                sampler_cpu_share: if window > 0.0 { r.cpu_s / window } else { 0.0 },
            },
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The sampler thread: one round at once (so a short run is seen), then
/// one every [`INTERVAL`] until stopped, and a last round at the stop.
fn sample_until(stop: &StopFlag, pid: i32, mut sockets: Sockets) -> Rounds {
    let cpu0 = thread_cpu_s();
    let mut sched = sched::Sampler::new();
    let mut tree = super::share::tree_of(pid);
    let mut walked = Instant::now();
    let mut samples = 0;
    loop {
        if walked.elapsed() >= TREE_REFRESH {
            let now = super::share::tree_of(pid);
            // The root may have exited; keep the last tree seen then.
            if !now.is_empty() && crate::procfs::comm(pid).is_some() {
                tree = now;
            }
            walked = Instant::now();
        }
        match sockets.as_mut() {
            Ok(SocketSampler::Inet(s)) => s.sample(&tree),
            Ok(SocketSampler::Unix(u)) => u.sample(&tree),
            Err(_) => {}
        }
        sched.sample(&tree);
        samples += 1;
        if stop.is_raised() {
            break;
        }
        let mut pfd = [PollFd::new(stop.fd(), PollFlags::POLLIN)];
        let _ = poll(
            &mut pfd,
            PollTimeout::try_from(INTERVAL.as_millis() as i32).unwrap_or(PollTimeout::MAX),
        );
    }
    Rounds {
        sockets,
        sched,
        samples,
        cpu_s: (thread_cpu_s() - cpu0).max(0.0),
    }
}

/// This thread's CPU time, seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: timespec is plain data filled by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and clock id.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The target's network namespace and whether this process shares it.
fn netns_of(pid: i32) -> Netns {
    let id = |p: &str| {
        std::fs::read_link(format!("/proc/{p}/ns/net"))
            .ok()
            .map(|l| l.to_string_lossy().into_owned())
    };
    let theirs = id(&pid.to_string());
    Netns {
        shared_with_generator: theirs.is_some() && theirs == id("self"),
        id: theirs.unwrap_or_else(|| "?".into()),
    }
}
