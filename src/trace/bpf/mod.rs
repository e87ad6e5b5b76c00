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
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, OpenObject, PrintLevel};

use super::abi::{SyscallsSkel, SyscallsSkelBuilder, types};
use super::snapshot::Breakdown;

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

/// Which tasks the programs trace (the BPF side's `scope_mode`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ScopeFilter {
    /// Tasks the loader registers, and their children.
    #[default]
    Tree,
    /// Every task in the cgroup v2 directory with this id, which sits at
    /// this depth below the root, or in one below it.
    Cgroup {
        /// The cgroup id (its directory's inode number).
        id: u64,
        /// Its depth (root = 0).
        level: u32,
    },
    /// Every task whose thread-group leader has this name (NUL-padded).
    Comm([u8; 16]),
    /// Every task but sockscope's own.
    System,
}

/// A [`ScopeFilter`] as the read-only globals every program that filters
/// by scope takes (`scope_mode` and its operands, in syscalls.bpf.c and
/// anatomy.bpf.c); each loader copies them into its own skeleton.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScopeWords {
    /// `enum ss_scope_mode`'s value.
    pub mode: u32,
    /// Cgroup scope: the cgroup's id.
    pub cgroup_id: u64,
    /// Cgroup scope: its depth.
    pub cgroup_level: u32,
    /// Comm scope: the name's first 8 bytes, as a native-endian word.
    pub comm_lo: u64,
    /// Comm scope: its last 8 bytes.
    pub comm_hi: u64,
}

impl ScopeFilter {
    /// The globals that select this scope in the programs.
    pub fn words(&self) -> ScopeWords {
        use types::ss_scope_mode as M;
        let mut w = ScopeWords::default();
        w.mode = match *self {
            ScopeFilter::Tree => M::SS_SCOPE_TREE.0,
            ScopeFilter::Cgroup { id, level } => {
                w.cgroup_id = id;
                w.cgroup_level = level;
                M::SS_SCOPE_CGROUP.0
            }
            ScopeFilter::Comm(name) => {
                w.comm_lo = u64::from_ne_bytes(name[..8].try_into().expect("8 bytes"));
                w.comm_hi = u64::from_ne_bytes(name[8..].try_into().expect("8 bytes"));
                M::SS_SCOPE_COMM.0
            }
            ScopeFilter::System => M::SS_SCOPE_SYSTEM.0,
        };
        w
    }
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

static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());

fn libbpf_print(level: PrintLevel, msg: String) {
    if level == PrintLevel::Debug {
        return;
    }
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        // Keep the tail: the verifier's verdict is at the end of its log.
        if log.len() > 64 * 1024 {
            let cut = log.len() - 32 * 1024;
            let cut = (cut..log.len())
                .find(|i| log.is_char_boundary(*i))
                .unwrap_or(0);
            log.drain(..cut);
        }
        log.push_str(&msg);
    }
}

/// Sends libbpf's messages (the verifier's log among them) to the buffer
/// [`load_error`] quotes from, and empties it: call before opening an
/// object.
pub fn capture_libbpf_log() {
    libbpf_rs::set_print(Some((PrintLevel::Info, libbpf_print)));
    take_libbpf_log();
}

fn take_libbpf_log() -> String {
    LIBBPF_LOG
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
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
        libbpf_rs::set_print(Some((PrintLevel::Info, libbpf_print)));
        take_libbpf_log();
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
            let w = cfg.scope.words();
            ro.scope_mode = types::ss_scope_mode(w.mode);
            ro.scope_cgroup_id = w.cgroup_id;
            ro.scope_cgroup_level = w.cgroup_level;
            ro.scope_comm_lo = w.comm_lo;
            ro.scope_comm_hi = w.comm_hi;
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

/// A load failure with the verifier's last lines (see
/// [`capture_libbpf_log`]).
pub fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let log = take_libbpf_log();
    let tail: Vec<&str> = log.lines().rev().take(25).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let mut msg = format!("{what} failed: {e}");
    let verifier = log.contains("END PROG LOAD LOG") || log.contains("processed ");
    if verifier {
        msg.push_str(
            "\n  the BPF verifier rejected a program; its verdict is the last lines below",
        );
    } else if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        msg.push_str(
            "\n  the kernel refused: sockscope trace needs CAP_BPF and CAP_PERFMON \
             (or CAP_SYS_ADMIN); run it as root",
        );
    }
    if !tail.is_empty() {
        msg.push_str("\n  libbpf/verifier said:\n    ");
        msg.push_str(&tail.join("\n    "));
    }
    anyhow!(msg)
}
