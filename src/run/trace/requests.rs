//! The request anatomy beside a trace (`trace --requests`, and profile):
//! started when the tracer's window opens, from the target it names (the
//! root pid of a tree, or a scope's members), and finished after the
//! tracer's window closed. A failure to start is kept and reported at the
//! end, so nothing the tracer measured is lost to it.

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Result;

use crate::anatomy::{self, AnatomyConfig, Latest, Session};
use crate::probe::ScopeFilter;
use crate::probe::{ScopeTarget, TargetSpec};

/// An anatomy waiting for (or running in) the tracer's window.
pub type Beside = crate::recorder::Beside<Session>;

/// Starts the anatomy for `target` when `opened` (the tracer's
/// `window_opened`) gives its root pid, publishing its counts to `latest`
/// (for `--metrics`) when given; `verbose` says on stderr when its window
/// is open, which is later than the tracer's "attached" (its programs load
/// after that), so a caller that starts traffic on the tracer's line alone
/// would lose the first requests. `reading`: how requests are read from
/// the bytes (names kept per port, TLS plaintext). `attached` is told
/// once the programs are attached (dropped if they fail): a launched
/// command is held until then.
pub fn when_open(
    opened: mpsc::Receiver<i32>,
    target: &TargetSpec,
    reading: anatomy::Reading,
    latest: Option<Latest>,
    verbose: bool,
    tie: Option<Tie>,
    attached: mpsc::Sender<()>,
) -> Result<Beside> {
    let target = target.clone();
    Beside::when_open(opened, "anatomy", move |root| {
        let mut cfg = config_for(&target, root, reading)?;
        cfg.latest = latest;
        cfg.tie_samples = tie.as_ref().map(|t| t.tail);
        let session = Session::start(cfg);
        if let Some(t) = tie {
            // The sampler starts now, tied or (the anatomy failed) not.
            if let (Ok(s), Ok(mut slot)) = (&session, t.threads.lock()) {
                *slot = s.threads_map();
            }
            let _ = t.then.send(root);
        }
        let session = session?;
        let _ = attached.send(());
        if verbose {
            crate::progress::say!("sockscope: request anatomy attached: its window is open");
        }
        Ok(session)
    })
}

/// How `trace --requests --stacks` ties the sampler's samples to the
/// anatomy's requests: the anatomy starts first, puts its thread map in
/// `threads` and then opens the sampler's start (`then`).
pub struct Tie {
    /// Where the tail begins (`--tail`).
    pub tail: anatomy::TailSpec,
    /// The anatomy's thread map, for the sampler.
    pub threads: std::sync::Arc<std::sync::Mutex<Option<ThreadsMap>>>,
    /// The sampler's start, sent the root pid once the anatomy started.
    pub then: mpsc::Sender<i32>,
}

/// The anatomy's per-thread map, shared with the stack sampler.
pub type ThreadsMap = std::sync::Arc<std::os::fd::OwnedFd>;

/// The length of the anatomy's intervals (its `intervals`, its
/// publications to `--metrics`, the lines of `--requests-only
/// --interval`).
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Command names the per-process cost keeps apart when nothing bounds
/// them otherwise (the exporter's default `--max-series`).
pub const DEFAULT_MAX_SERVICES: u32 = 1024;

/// What the anatomy follows for a trace target whose root pid (tree
/// modes) is `root`, reading requests as `reading` says.
pub fn config_for(
    target: &TargetSpec,
    root: i32,
    reading: anatomy::Reading,
) -> Result<AnatomyConfig> {
    let (scope, roots, members) = match target {
        TargetSpec::Attach { .. } | TargetSpec::Launch { .. } => {
            (ScopeFilter::Tree, vec![root], Vec::new())
        }
        TargetSpec::Scope { scope, .. } => (
            crate::trace::scope_filter_of(scope)?,
            Vec::new(),
            members_of(scope),
        ),
    };
    Ok(AnatomyConfig {
        scope,
        roots,
        members,
        max_ports: anatomy::DEFAULT_MAX_PORTS,
        max_endpoints: reading.max_endpoints,
        tls_plaintext: reading.tls_plaintext,
        tie_samples: None,
        ring_bytes: anatomy::bpf::H2_RING_BYTES,
        other_runs: None,
        interval: INTERVAL,
        latest: None,
        max_services: DEFAULT_MAX_SERVICES,
        duty: None,
        progress: None,
    })
}

/// The processes in a scope now (their served ports are followed).
pub fn members_of(scope: &ScopeTarget) -> Vec<i32> {
    match scope {
        ScopeTarget::Cgroup(c) => {
            let mut out = Vec::new();
            cgroup_procs(&c.path, 0, &mut out);
            out
        }
        ScopeTarget::Comm(name) => all_pids()
            .into_iter()
            .filter(|p| crate::procfs::comm(*p).as_deref() == Some(name.as_str()))
            .collect(),
        ScopeTarget::System => {
            let me = std::process::id() as i32;
            all_pids().into_iter().filter(|p| *p != me).collect()
        }
    }
}

/// Every process listed in `dir`'s cgroup.procs and below (cgroupfs holds
/// no symbolic links; depth bounded).
fn cgroup_procs(dir: &Path, depth: usize, out: &mut Vec<i32>) {
    if depth > 64 {
        return;
    }
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            cgroup_procs(&e.path(), depth + 1, out);
        }
    }
}

fn all_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}
