//! Loading, attaching and reading the syscall tracer's BPF object
//! (src/bpf/syscalls.bpf.c). Everything libbpf-specific stays in this
//! folder (the skeleton itself is `trace::abi`); the rest of `trace` sees
//! plain Rust values. This file opens, configures and loads the object;
//! `attach` attaches the programs and registers tasks, `maps` reads the
//! aggregates, counters and task iterator, `records` parses what the
//! programs emit, `cost` is the programs' own cost.
//!
//! Programs are attached through links owned by this process and nothing is
//! pinned, so however sockscope ends (even SIGKILL) the kernel detaches them
//! when the last file descriptor closes.

mod attach;
mod cost;
mod maps;
mod records;

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use anyhow::{Context, Result, anyhow};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, OpenObject};

use super::abi::{SyscallsSkel, SyscallsSkelBuilder, types};
use super::snapshot::Breakdown;
use crate::probe::ScopeFilter;
use crate::probe::libbpf_log::{capture_libbpf_log, load_error};
use crate::probe::scope_filter::set_scope_globals;

pub use self::attach::{Registered, SyscallHook};
pub use self::cost::{ProgCost, ProgSplit, SplitSums};
pub use self::records::{
    Event, ExecRecord, ExitTail, ForkRecord, HookCounters, TaskRecord, TaskSyscalls, TaskUsage,
    ThreadSyscall, parse_record,
};

/// What to build into the programs (read-only globals, map sizes).
#[derive(Clone, Debug)]
pub struct TracerConfig {
    /// Enter hook only: calls per syscall, no errors or latency.
    pub count_only: bool,
    /// Trace child processes created by traced tasks (threads always are).
    pub follow_forks: bool,
    /// Keep a per-thread table of calls/errors/time per syscall.
    pub per_thread: bool,
    /// Per-thread slots; threads beyond this are pooled in slot 0.
    pub max_threads: u32,
    /// Size of the lifecycle event ring buffer in bytes (power of two).
    pub ringbuf_bytes: u32,
    /// Which tasks are traced.
    pub scope: ScopeFilter,
    /// How the per-group aggregates are keyed.
    pub by: Breakdown,
    /// Per-group series (group x syscall) the kernel keeps apart; events of
    /// further ones are added to the overflow aggregates.
    pub max_series: u32,
}

/// The group of a per-group aggregate, as the kernel keys it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RawGroup {
    /// A thread-group id.
    Process(i32),
    /// A thread-group leader's name, NUL-padded.
    Comm([u8; 16]),
    /// A cgroup v2 id.
    Cgroup(u64),
}

impl RawGroup {
    /// The name bytes of a [`RawGroup::Comm`] as text.
    pub fn comm_text(bytes: &[u8; 16]) -> String {
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(16);
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    }
}

/// The loaded tracer. Programs run only while it holds their links.
pub struct Tracer<'obj> {
    skel: SyscallsSkel<'obj>,
    links: Vec<(&'static str, Link)>,
    iter_link: Option<Link>,
    stats_fd: Option<OwnedFd>,
    cfg: TracerConfig,
    ncpus: usize,
}

impl<'obj> Tracer<'obj> {
    /// Opens, configures and loads the programs (no attach yet). A verifier
    /// rejection comes back with the verifier's own last lines.
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>, cfg: TracerConfig) -> Result<Self> {
        capture_libbpf_log();
        let builder = SyscallsSkelBuilder::default();
        let mut open = builder
            .open(storage)
            .map_err(|e| load_error("opening the BPF object", e))?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .ok_or_else(|| anyhow!("BPF object has no .rodata"))?;
            ro.count_only = cfg.count_only;
            ro.follow_forks = cfg.follow_forks;
            ro.per_thread = cfg.per_thread;
            ro.max_slots = if cfg.per_thread {
                cfg.max_threads + 1
            } else {
                0
            };
            ro.ringbuf_wake_bytes = u64::from(cfg.ringbuf_bytes / 4);
            ro.self_tgid = std::process::id();
            set_scope_globals!(&mut *ro, types::ss_scope_mode, cfg.scope.words());
            ro.by_mode = match cfg.by {
                Breakdown::None => types::ss_by_mode::SS_BY_NONE,
                Breakdown::Process => types::ss_by_mode::SS_BY_PROCESS,
                Breakdown::Comm => types::ss_by_mode::SS_BY_COMM,
                Breakdown::Cgroup => types::ss_by_mode::SS_BY_CGROUP,
            };
        }
        if cfg.by != Breakdown::None {
            open.maps
                .group_stats
                .set_max_entries(cfg.max_series.max(1))
                .context("sizing the per-group aggregates")?;
        }
        open.maps
            .events
            .set_max_entries(cfg.ringbuf_bytes)
            .context("sizing the event ring buffer")?;
        if cfg.count_only {
            open.progs.ss_sys_exit.set_autoload(false);
        }
        if !matches!(cfg.scope, ScopeFilter::Cgroup { .. }) {
            open.progs.ss_cgroup_attach.set_autoload(false);
        }
        let skel = open
            .load()
            .map_err(|e| load_error("loading the BPF programs", e))?;
        let ncpus = libbpf_rs::num_possible_cpus().context("counting possible CPUs")?;
        Ok(Self {
            skel,
            links: Vec::new(),
            iter_link: None,
            stats_fd: None,
            cfg,
            ncpus,
        })
    }
    fn bss(&mut self) -> Result<&mut types::bss> {
        self.skel
            .maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("BPF object has no .bss"))
    }
}
