//! Attaching to a running process without stopping it: register every thread
//! of it (and, when following, of its descendant processes) until a pass over
//! /proc finds nothing new.
//!
//! The fork hook is attached before the first pass, so a task created by an
//! already registered task is traced by the kernel side; one created by a
//! task not yet registered shows up in /proc on the next pass. The passes
//! therefore converge, and no thread is missed.

use std::collections::BTreeSet;

use anyhow::Result;

use super::bpf::{Registered, Tracer};
use crate::{error, procfs};

/// Upper bound on /proc passes (a tree that keeps spawning faster than we
/// can scan is reported rather than chased forever).
const MAX_PASSES: usize = 50;

/// What the initial registration found.
#[derive(Debug, Default)]
pub struct Registration {
    /// Threads found in /proc and traced (by us or already by the fork hook).
    pub tids: BTreeSet<i32>,
    /// Processes found in /proc and traced.
    pub tgids: BTreeSet<i32>,
    /// Threads registered by this pass (the rest are counted by the fork hook).
    pub registered_threads: u64,
    /// Processes whose threads this pass registered.
    pub registered_processes: BTreeSet<i32>,
    /// False when MAX_PASSES ran out with new tasks still appearing.
    pub converged: bool,
}

/// Registers `root`'s threads, and its descendants' when `follow`.
pub fn register_tree(tracer: &Tracer<'_>, root: i32, follow: bool) -> Result<Registration> {
    let mut reg = Registration::default();
    for _ in 0..MAX_PASSES {
        let mut procs = vec![root];
        if follow {
            procs.extend(procfs::descendants(root));
        }
        let mut new = 0;
        for p in procs {
            let Ok(tids) = procfs::threads(p) else {
                continue; // exited meanwhile
            };
            for tid in tids {
                if reg.tids.contains(&tid) {
                    continue;
                }
                let r = tracer.register(tid, false)?;
                if r == Registered::Gone {
                    continue;
                }
                if r == Registered::Yes {
                    reg.registered_threads += 1;
                    reg.registered_processes.insert(p);
                }
                reg.tids.insert(tid);
                reg.tgids.insert(p);
                new += 1;
            }
        }
        if !reg.tgids.contains(&root) {
            return Err(error::with_code(
                1,
                format!("process {root} exited before sockscope could attach to it"),
            ));
        }
        if new == 0 {
            reg.converged = true;
            return Ok(reg);
        }
    }
    Ok(reg)
}
