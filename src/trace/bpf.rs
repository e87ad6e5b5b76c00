//! Loading, attaching and reading the syscall tracer's BPF object
//! (src/bpf/syscalls.bpf.c). Everything libbpf-specific stays in this file;
//! the rest of `trace` sees plain Rust values.
//!
//! Programs are attached through links owned by this process and nothing is
//! pinned, so however sockscope ends (even SIGKILL) the kernel detaches them
//! when the last file descriptor closes.

use std::collections::BTreeMap;
use std::io::Read;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow, bail};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, MapHandle, OpenObject, PrintLevel, libbpf_sys};

use super::hist::{self, Histogram};
use super::pod::{self, Plain, as_bytes};
use super::snapshot::Breakdown;

mod skel {
    #![allow(clippy::all, clippy::pedantic, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/syscalls.skel.rs"));
}
use skel::{SyscallsSkel, SyscallsSkelBuilder, types};

use types::{ss_event_type as EvType, ss_iter_mode as IterMode, ss_limits as Limits};

/// Syscall numbers with a slot of their own, plus the last slot that pools
/// every number beyond (SS_MAX_SYSCALLS in src/bpf/syscalls.h).
pub const MAX_SYSCALLS: usize = Limits::SS_MAX_SYSCALLS.0 as usize;
/// The slot that pools every syscall number from it up (SS_OTHER_SYSCALL).
pub const OTHER_SYSCALL: u32 = Limits::SS_OTHER_SYSCALL.0;
/// Buckets of the latency histogram (SS_HIST_BUCKETS).
pub const HIST_BUCKETS: usize = Limits::SS_HIST_BUCKETS.0 as usize;
/// Sub-buckets per power of two, as a shift (SS_HIST_SUB_BITS).
pub const HIST_SUB_BITS: u32 = Limits::SS_HIST_SUB_BITS.0;
const ERRNO_SLOTS: u32 = Limits::SS_ERRNO_SLOTS.0;
const ERRNO_DIRECT: u32 = Limits::SS_ERRNO_DIRECT.0;
const ERRNO_RESTART_BASE: u32 = Limits::SS_ERRNO_RESTART_BASE.0;
const PENDING_EXEC: u32 = types::ss_task_flags::SS_PENDING_EXEC.0;
const NEED_BASELINE: u32 = types::ss_task_flags::SS_NEED_BASELINE.0;

// SAFETY (all): skeleton structs generated from src/bpf/syscalls.h:
// repr(C), integers, byte arrays and explicit padding only (see pod.rs).
unsafe impl Plain for types::ss_task {}
// SAFETY: as above.
unsafe impl Plain for types::ss_thread_stats {}
// SAFETY: as above.
unsafe impl Plain for types::ss_sc_stats {}
// SAFETY: as above.
unsafe impl Plain for types::ss_ev_fork {}
// SAFETY: as above.
unsafe impl Plain for types::ss_ev_task {}
// SAFETY: as above.
unsafe impl Plain for types::ss_ev_exec {}
// SAFETY: as above.
unsafe impl Plain for types::ss_group_key {}
// SAFETY: a repr(transparent) u32.
unsafe impl Plain for EvType {}

// Every record starts with its type, which is how a reader tells them
// apart (see parse_record).
const _: () = assert!(std::mem::offset_of!(types::ss_ev_fork, r#type) == 0);
const _: () = assert!(std::mem::offset_of!(types::ss_ev_task, r#type) == 0);
const _: () = assert!(std::mem::offset_of!(types::ss_ev_exec, r#type) == 0);
const _: () = assert!(std::mem::offset_of!(types::ss_thread_stats, r#type) == 0);

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

/// Aggregated figures for one syscall number, summed over CPUs.
#[derive(Clone, Debug)]
pub struct SyscallStat {
    /// Syscall number ([`OTHER_SYSCALL`] pools out-of-table numbers).
    pub nr: u32,
    /// Completed calls (plus calls that never return, counted at entry).
    pub calls: u64,
    /// Calls that returned -1..-4095.
    pub errors: u64,
    /// Sum of entry-to-exit wall time.
    pub total_ns: u64,
    /// Latency histogram with exact min/max.
    pub hist: Histogram,
    /// errno value -> count (kernel restart codes as 512..521).
    pub errnos: BTreeMap<u32, u64>,
}

/// Per-thread totals for one syscall.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadSyscall {
    /// Calls.
    pub calls: u64,
    /// Errors.
    pub errors: u64,
    /// Entry-to-exit time.
    pub total_ns: u64,
}

/// Kernel resource counters of one task over the window.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskUsage {
    /// Tick-sampled user time (only the user:system ratio is meaningful).
    pub utime_ns: u64,
    /// Tick-sampled system time.
    pub stime_ns: u64,
    /// Precise CPU time (sum_exec_runtime).
    pub runtime_ns: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Minor page faults.
    pub min_flt: u64,
    /// Major page faults.
    pub maj_flt: u64,
}

/// A task's usage record: from the exit hook or the end-of-window pass.
#[derive(Clone, Debug)]
pub struct TaskRecord {
    /// Thread id.
    pub tid: i32,
    /// Process id.
    pub tgid: i32,
    /// Per-thread slot (0 = pooled/unassigned).
    pub slot: u32,
    /// Command name at that moment.
    pub comm: String,
    /// True when the task exited inside the window.
    pub exited: bool,
    /// Last thread of its process (exit records only).
    pub group_dead: bool,
    /// Peak RSS of its address space at exit, KiB (exit records only).
    pub maxrss_kb: u64,
    /// False when the task exited before its baseline could be taken; its
    /// usage then covers its whole life and is left out of the totals.
    pub has_baseline: bool,
    /// In-window usage.
    pub usage: TaskUsage,
    /// Its syscalls since it was traced (what the aggregates counted for it).
    pub syscalls: TaskSyscalls,
}

/// One task's share of the syscall aggregates.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskSyscalls {
    /// Calls.
    pub calls: u64,
    /// Calls that returned an error (0 in count-only mode).
    pub errors: u64,
    /// Entry-to-exit time, ns (0 in count-only mode).
    pub time_ns: u64,
}

/// A task created by a traced task, or registered by sockscope.
#[derive(Clone, Debug)]
pub struct ForkRecord {
    /// New thread id.
    pub tid: i32,
    /// Its process id.
    pub tgid: i32,
    /// Creating thread (0 for a task registered by sockscope).
    pub parent_tid: i32,
    /// Per-thread slot.
    pub slot: u32,
    /// New thread in the same process (vs. a new process).
    pub is_thread: bool,
    /// Name inherited from the parent.
    pub comm: String,
}

/// Everything the programs emit besides the per-syscall aggregates.
#[derive(Debug)]
pub enum Event {
    /// A traced task created a task that is now traced too.
    Fork(ForkRecord),
    /// A traced task exited (or is alive at the end, from the iterator).
    Task(TaskRecord),
    /// Per-thread syscall table of the slot, at exec, exit or end of window.
    ThreadStats(u32, Box<[ThreadSyscall; MAX_SYSCALLS]>),
    /// A traced task called execve and continues under a new slot.
    Exec(ExecRecord),
}

/// A traced task's execve (per-thread mode).
#[derive(Clone, Debug)]
pub struct ExecRecord {
    /// Thread id after the exec.
    pub tid: i32,
    /// Process id.
    pub tgid: i32,
    /// Slot its calls before the exec were counted in.
    pub old_slot: u32,
    /// Slot it continues in.
    pub new_slot: u32,
    /// Its new name.
    pub comm: String,
}

/// Counters kept by the fork/exit hooks.
#[derive(Clone, Copy, Debug, Default)]
pub struct HookCounters {
    /// Threads created by traced tasks inside the window.
    pub threads_created: u64,
    /// Processes created by traced tasks inside the window.
    pub processes_created: u64,
    /// Traced tasks that exited inside the window.
    pub exits: u64,
    /// Lifecycle records lost because the ring buffer was full.
    pub ringbuf_drops: u64,
    /// Scope modes: tasks that entered the trace at an in-scope syscall.
    pub joined: u64,
}

/// Kernel-measured run time of one program (bpf_enable_stats).
#[derive(Clone, Debug)]
pub struct ProgCost {
    /// Program name.
    pub name: &'static str,
    /// Times it ran (for every task on the machine, traced or not).
    pub run_cnt: u64,
    /// Total time spent in it.
    pub run_time_ns: u64,
}

/// One syscall program's own timing over the self-cost slices (its
/// `ss_prog_cost` in src/bpf/syscalls.h, summed over CPUs): raw sums, as
/// the program took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgSplit {
    /// Runs on a traced task's event.
    pub traced_runs: u64,
    /// Sum of their t2 - t1 (one clock read's cost included per run).
    pub traced_ns: u64,
    /// Runs that only filtered another task's syscall out.
    pub filtered_runs: u64,
    /// Sum of their t2 - t1.
    pub filtered_ns: u64,
    /// Sum of t1 - t0 over all timed runs: one clock read each.
    pub clock_ns: u64,
}

impl ProgSplit {
    /// What accumulated since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            traced_runs: self.traced_runs.saturating_sub(earlier.traced_runs),
            traced_ns: self.traced_ns.saturating_sub(earlier.traced_ns),
            filtered_runs: self.filtered_runs.saturating_sub(earlier.filtered_runs),
            filtered_ns: self.filtered_ns.saturating_sub(earlier.filtered_ns),
            clock_ns: self.clock_ns.saturating_sub(earlier.clock_ns),
        }
    }

    fn add(&mut self, p: &types::ss_prog_cost) {
        self.traced_runs += p.traced_runs;
        self.traced_ns += p.traced_ns;
        self.filtered_runs += p.filtered_runs;
        self.filtered_ns += p.filtered_ns;
        self.clock_ns += p.clock_ns;
    }
}

/// Both syscall programs' own timing (see [`ProgSplit`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitSums {
    /// ss_sys_enter.
    pub enter: ProgSplit,
    /// ss_sys_exit (all zero in count-only mode).
    pub exit: ProgSplit,
}

impl SplitSums {
    /// What accumulated since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            enter: self.enter.since(earlier.enter),
            exit: self.exit.since(earlier.exit),
        }
    }
}

/// The syscall tracepoints a calibration attaches one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallHook {
    /// raw_syscalls:sys_enter (ss_sys_enter).
    Enter,
    /// raw_syscalls:sys_exit (ss_sys_exit; not loaded in count-only mode).
    Exit,
}

/// Result of registering a task for tracing.
#[derive(Debug, PartialEq, Eq)]
pub enum Registered {
    /// Storage created; the task is traced from now on.
    Yes,
    /// Already traced (the fork hook got there first).
    Already,
    /// The task no longer exists.
    Gone,
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

fn comm_str(c: &[i8]) -> String {
    let bytes: Vec<u8> = c
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| *b as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn usage_of(r: &types::ss_res) -> TaskUsage {
    TaskUsage {
        utime_ns: r.utime_ns,
        stime_ns: r.stime_ns,
        runtime_ns: r.runtime_ns,
        nvcsw: r.nvcsw,
        nivcsw: r.nivcsw,
        min_flt: r.min_flt,
        maj_flt: r.maj_flt,
    }
}

/// errno slot (as stored by the BPF side) back to the errno value.
fn errno_of_slot(slot: u32) -> u32 {
    if slot >= ERRNO_DIRECT {
        ERRNO_RESTART_BASE + (slot - ERRNO_DIRECT)
    } else {
        slot
    }
}

/// Parses one lifecycle record (ring buffer or iterator output).
/// Returns the event and the bytes it used.
pub fn parse_record(data: &[u8]) -> Result<(Event, usize)> {
    let ty: EvType = pod::read(data).ok_or_else(|| anyhow!("truncated tracer record"))?;
    match ty {
        EvType::SS_EV_FORK | EvType::SS_EV_REGISTERED => {
            let e: types::ss_ev_fork =
                pod::read(data).ok_or_else(|| anyhow!("truncated fork record"))?;
            Ok((
                Event::Fork(ForkRecord {
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    parent_tid: e.parent_tid as i32,
                    slot: e.slot,
                    is_thread: e.is_thread != 0,
                    comm: comm_str(&e.comm),
                }),
                size_of::<types::ss_ev_fork>(),
            ))
        }
        EvType::SS_EV_EXEC => {
            let e: types::ss_ev_exec =
                pod::read(data).ok_or_else(|| anyhow!("truncated exec record"))?;
            Ok((
                Event::Exec(ExecRecord {
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    old_slot: e.old_slot,
                    new_slot: e.new_slot,
                    comm: comm_str(&e.comm),
                }),
                size_of::<types::ss_ev_exec>(),
            ))
        }
        EvType::SS_EV_EXIT | EvType::SS_EV_LIVE => {
            let e: types::ss_ev_task =
                pod::read(data).ok_or_else(|| anyhow!("truncated task record"))?;
            Ok((
                Event::Task(TaskRecord {
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    slot: e.slot,
                    comm: comm_str(&e.comm),
                    exited: ty == EvType::SS_EV_EXIT,
                    group_dead: e.group_dead != 0,
                    maxrss_kb: e.maxrss_pages * page_kb(),
                    has_baseline: e.flags & NEED_BASELINE == 0,
                    usage: usage_of(&e.res),
                    syscalls: TaskSyscalls {
                        calls: e.sc.calls,
                        errors: e.sc.errors,
                        time_ns: e.sc.time_ns,
                    },
                }),
                size_of::<types::ss_ev_task>(),
            ))
        }
        EvType::SS_EV_THREAD_STATS => {
            // 12 KiB: read onto the heap, not the stack.
            let e: Box<types::ss_thread_stats> =
                pod::read_boxed(data).ok_or_else(|| anyhow!("truncated per-thread record"))?;
            let mut table = Box::new([ThreadSyscall::default(); MAX_SYSCALLS]);
            for (row, sc) in table.iter_mut().zip(e.sc.iter()) {
                *row = ThreadSyscall {
                    calls: sc.calls,
                    errors: sc.errors,
                    total_ns: sc.total_ns,
                };
            }
            Ok((
                Event::ThreadStats(e.slot, table),
                size_of::<types::ss_thread_stats>(),
            ))
        }
        other => bail!("unknown tracer record type {}", other.0),
    }
}

/// Parses back-to-back records (iterator output).
fn parse_all(mut rest: &[u8]) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (ev, used) = parse_record(rest)?;
        out.push(ev);
        rest = &rest[used..];
    }
    Ok(out)
}

fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 / 1024 } else { 4 }
}

/// Opens a pidfd for one thread (PIDFD_THREAD, Linux 6.9+), falling back to
/// a plain pidfd, which the kernel accepts for thread-group leaders only.
fn pidfd_for_thread(tid: i32) -> std::io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: plain syscall; a returned fd is owned by us.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, flags) };
        if fd >= 0 {
            // SAFETY: fd was just returned by the kernel and is not shared.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINVAL) {
            return Err(err);
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EINVAL))
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
            ro.scope_mode = match cfg.scope {
                ScopeFilter::Tree => types::ss_scope_mode::SS_SCOPE_TREE,
                ScopeFilter::Cgroup { id, level } => {
                    ro.scope_cgroup_id = id;
                    ro.scope_cgroup_level = level;
                    types::ss_scope_mode::SS_SCOPE_CGROUP
                }
                ScopeFilter::Comm(name) => {
                    ro.scope_comm_lo = u64::from_ne_bytes(name[..8].try_into().expect("8 bytes"));
                    ro.scope_comm_hi = u64::from_ne_bytes(name[8..].try_into().expect("8 bytes"));
                    types::ss_scope_mode::SS_SCOPE_COMM
                }
                ScopeFilter::System => types::ss_scope_mode::SS_SCOPE_SYSTEM,
            };
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
        if !cfg.per_thread {
            open.progs.ss_exec.set_autoload(false);
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

    /// Turns the kernel's per-program run-time accounting
    /// (BPF_ENABLE_STATS) and the syscall programs' own timing (.bss
    /// `cost_on`) on or off together. The kernel's accounting is global and
    /// costs two clock reads per program run, the programs' own three more,
    /// so the caller samples it. The flag is raised after the kernel's
    /// accounting is on and lowered before it goes off, so every run the
    /// programs time is one the kernel timed too. Needs CAP_SYS_ADMIN;
    /// returns the reason when it cannot be turned on.
    pub fn set_self_cost(&mut self, on: bool) -> std::result::Result<(), String> {
        if !on {
            self.set_cost_flag(false);
            self.stats_fd = None;
            return Ok(());
        }
        if self.stats_fd.is_some() {
            return Ok(());
        }
        // SAFETY: plain syscall wrapper; a non-negative result is an fd we own.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(format!(
                "BPF run-time statistics unavailable: {}",
                std::io::Error::from_raw_os_error(-fd)
            ));
        }
        // SAFETY: fd is a fresh descriptor returned by the kernel.
        self.stats_fd = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        self.set_cost_flag(true);
        Ok(())
    }

    fn set_cost_flag(&mut self, on: bool) {
        if let Ok(bss) = self.bss() {
            // Volatile: the programs read it concurrently through the
            // mmapped page; the store must happen here, not be moved.
            // SAFETY: a valid, aligned field of the mapped .bss.
            unsafe { std::ptr::write_volatile(&mut bss.cost_on, u32::from(on)) };
        }
    }

    /// The syscall programs' own timing so far, summed over CPUs (only
    /// runs inside self-cost slices are in it).
    pub fn split_sums(&mut self) -> SplitSums {
        let mut out = SplitSums::default();
        if let Ok(bss) = self.bss() {
            for c in bss.cpu_cost.iter() {
                // SAFETY: a valid, aligned element of the mapped .bss that
                // the programs write concurrently: read it as it is now.
                let c = unsafe { std::ptr::read_volatile(c) };
                out.enter.add(&c.enter);
                out.exit.add(&c.exit);
            }
        }
        out
    }

    /// The syscall programs' own timing on one CPU (see [`Self::split_sums`]).
    pub fn split_sums_on(&mut self, cpu: usize) -> SplitSums {
        let mut out = SplitSums::default();
        if let Ok(bss) = self.bss() {
            if let Some(c) = bss.cpu_cost.get(cpu % bss.cpu_cost.len()) {
                // SAFETY: as in split_sums.
                let c = unsafe { std::ptr::read_volatile(c) };
                out.enter.add(&c.enter);
                out.exit.add(&c.exit);
            }
        }
        out
    }

    /// Attaches one syscall program on its own, for a calibration before
    /// [`Tracer::attach`]; it runs until the returned link is dropped.
    pub fn attach_syscall_hook(&self, hook: SyscallHook) -> Result<Link> {
        let progs = &self.skel.progs;
        match hook {
            SyscallHook::Enter => progs
                .ss_sys_enter
                .attach()
                .map_err(|e| attach_error("sys_enter", e)),
            SyscallHook::Exit if self.cfg.count_only => {
                bail!("count-only mode has no sys_exit program")
            }
            SyscallHook::Exit => progs
                .ss_sys_exit
                .attach()
                .map_err(|e| attach_error("sys_exit", e)),
        }
    }

    /// True when the sys_exit program is loaded (latency mode).
    pub fn has_exit_hook(&self) -> bool {
        !self.cfg.count_only
    }

    /// Attaches the lifecycle hooks, then the syscall hooks. Until tasks are
    /// registered every program finds no storage and returns at once.
    pub fn attach(&mut self) -> Result<()> {
        let progs = &self.skel.progs;
        let mut links = Vec::new();
        // Before the syscall hooks: a migration must never go unseen
        // between a membership check and its cached use.
        if matches!(self.cfg.scope, ScopeFilter::Cgroup { .. }) {
            links.push((
                "ss_cgroup_attach",
                progs
                    .ss_cgroup_attach
                    .attach()
                    .map_err(|e| attach_error("cgroup_attach_task", e))?,
            ));
        }
        // In a scope mode the entry hook decides membership; children are
        // not traced for being children.
        if self.cfg.scope == ScopeFilter::Tree {
            links.push((
                "ss_fork",
                progs
                    .ss_fork
                    .attach()
                    .map_err(|e| attach_error("sched_process_fork", e))?,
            ));
        }
        links.push((
            "ss_exit",
            progs
                .ss_exit
                .attach()
                .map_err(|e| attach_error("sched_process_exit", e))?,
        ));
        links.push((
            "ss_sys_enter",
            progs
                .ss_sys_enter
                .attach()
                .map_err(|e| attach_error("sys_enter", e))?,
        ));
        if self.cfg.per_thread {
            links.push((
                "ss_exec",
                progs
                    .ss_exec
                    .attach()
                    .map_err(|e| attach_error("sched_process_exec", e))?,
            ));
        }
        if !self.cfg.count_only {
            links.push((
                "ss_sys_exit",
                progs
                    .ss_sys_exit
                    .attach()
                    .map_err(|e| attach_error("sys_exit", e))?,
            ));
        }
        self.links = links;
        Ok(())
    }

    /// Marks thread `tid` as traced. `pending_exec` holds off counting until
    /// the task calls execve (for a launched, not yet released child). A
    /// task the fork hook already traces is left as it is.
    pub fn register(&self, tid: i32, pending_exec: bool) -> Result<Registered> {
        let pidfd = match pidfd_for_thread(tid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(Registered::Gone),
            Err(e) => return Err(e).with_context(|| format!("pidfd_open({tid})")),
        };
        let key = pidfd.as_raw_fd().to_ne_bytes();
        let state = types::ss_task {
            flags: NEED_BASELINE | if pending_exec { PENDING_EXEC } else { 0 },
            ..Default::default()
        };
        if let Err(e) = self
            .skel
            .maps
            .tasks
            .update(&key, as_bytes(&state), MapFlags::NO_EXIST)
        {
            return classify_update_error(tid, e);
        }
        if self.cfg.per_thread {
            let table = Box::new(types::ss_thread_stats {
                r#type: EvType::SS_EV_THREAD_STATS,
                ..Default::default()
            });
            if let Err(e) =
                self.skel
                    .maps
                    .thread_stats
                    .update(&key, as_bytes(&*table), MapFlags::ANY)
            {
                return classify_update_error(tid, e);
            }
        }
        Ok(Registered::Yes)
    }

    fn bss(&mut self) -> Result<&mut types::bss> {
        self.skel
            .maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("BPF object has no .bss"))
    }

    fn run_iter(&mut self, mode: IterMode) -> Result<Vec<u8>> {
        // Ordinary store into the mmapped .bss; the iterator runs after the
        // bpf_iter_create syscall below, which orders it.
        self.bss()?.iter_mode = mode;
        if self.iter_link.is_none() {
            let link = self
                .skel
                .progs
                .ss_iter_task
                .attach()
                .map_err(|e| attach_error("the task iterator", e))?;
            self.iter_link = Some(link);
        }
        let link = self.iter_link.as_ref().expect("set above");
        let mut iter = Iter::new(link).context("creating the task iterator")?;
        let mut out = Vec::new();
        iter.read_to_end(&mut out)
            .context("reading the task iterator")?;
        Ok(out)
    }

    /// Records the current counters of every newly registered task as its
    /// baseline and gives it a per-thread slot; returns one record per task.
    pub fn take_baselines(&mut self) -> Result<Vec<Event>> {
        let raw = self.run_iter(IterMode::SS_ITER_BASELINE)?;
        parse_all(&raw)
    }

    /// Closes the resource window: exit records stop, and every traced task
    /// still alive reports its in-window usage (and per-thread table).
    pub fn close_window(&mut self) -> Result<Vec<Event>> {
        self.bss()?.window_closed = 1;
        let raw = self.run_iter(IterMode::SS_ITER_END)?;
        parse_all(&raw)
    }

    /// A handle on the lifecycle ring buffer that does not borrow the tracer.
    pub fn events_map(&self) -> Result<MapHandle> {
        MapHandle::try_from(&self.skel.maps.events).context("duplicating the event ring buffer fd")
    }

    /// Detaches every program (the maps stay readable).
    pub fn detach(&mut self) {
        self.links.clear();
        self.iter_link = None;
    }

    /// Fork/exit hook counters.
    pub fn counters(&mut self) -> Result<HookCounters> {
        let c = self.bss()?.counters;
        Ok(HookCounters {
            threads_created: c.threads_created,
            processes_created: c.processes_created,
            exits: c.exits,
            ringbuf_drops: c.ringbuf_drops,
            joined: c.joined,
        })
    }

    /// Every traced task still alive reports its usage so far, the window
    /// staying open (for a running total of the scope's usage).
    pub fn peek_live(&mut self) -> Result<Vec<Event>> {
        let raw = self.run_iter(IterMode::SS_ITER_PEEK)?;
        parse_all(&raw)
    }

    /// Per-group aggregates (--by), summed over CPUs: one entry per
    /// (group, syscall) with calls.
    pub fn group_stats(&self) -> Result<Vec<(RawGroup, SyscallStat)>> {
        let map = &self.skel.maps.group_stats;
        let mut out = Vec::new();
        for key in map.keys() {
            let Some(k) = pod::read::<types::ss_group_key>(&key) else {
                continue;
            };
            // A key deleted since keys() listed it is simply gone.
            let Some(per_cpu) = map
                .lookup_percpu(&key, MapFlags::ANY)
                .context("reading per-group statistics")?
            else {
                continue;
            };
            let stat = self.sum_cpus(k.nr, &per_cpu)?;
            if stat.calls == 0 {
                continue;
            }
            let group = match self.cfg.by {
                Breakdown::Process => RawGroup::Process(k.a as i32),
                Breakdown::Comm => {
                    let mut name = [0u8; 16];
                    name[..8].copy_from_slice(&k.a.to_ne_bytes());
                    name[8..].copy_from_slice(&k.b.to_ne_bytes());
                    RawGroup::Comm(name)
                }
                Breakdown::Cgroup | Breakdown::None => RawGroup::Cgroup(k.a),
            };
            out.push((group, stat));
        }
        Ok(out)
    }

    /// Removes one process group's aggregates (all its syscalls) after the
    /// caller read them for the last time: the process is gone, so nothing
    /// can add to them any more, and the slots are free for new groups.
    pub fn forget_process(&self, tgid: i32, nrs: &[u32]) {
        for nr in nrs {
            let k = types::ss_group_key {
                a: tgid as u32 as u64,
                b: 0,
                nr: *nr,
                pad: 0,
            };
            let _ = self.skel.maps.group_stats.delete(as_bytes(&k));
        }
    }

    /// Aggregates of the groups that found the series limit reached, per
    /// syscall.
    pub fn group_overflow(&self) -> Result<Vec<SyscallStat>> {
        self.array_stats(&self.skel.maps.group_other, false)
    }

    /// Traced syscall events counted so far (all CPUs); cheap: reads the
    /// mmapped .bss.
    pub fn events_counted(&mut self) -> u64 {
        self.bss()
            .map(|b| b.cpu_events.iter().map(|c| c.n).sum())
            .unwrap_or(0)
    }

    /// Per-syscall aggregates summed over CPUs; only syscalls with calls.
    pub fn syscall_stats(&self) -> Result<Vec<SyscallStat>> {
        self.array_stats(&self.skel.maps.sc_stats, true)
    }

    fn array_stats(&self, map: &impl MapCore, errnos: bool) -> Result<Vec<SyscallStat>> {
        let mut out = Vec::new();
        for nr in 0..MAX_SYSCALLS as u32 {
            let per_cpu = map
                .lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)
                .context("reading per-syscall statistics")?
                .unwrap_or_default();
            let mut agg = self.sum_cpus(nr, &per_cpu)?;
            if agg.calls == 0 {
                continue;
            }
            if errnos && agg.errors > 0 {
                agg.errnos = self.errnos_of(nr)?;
            }
            out.push(agg);
        }
        Ok(out)
    }

    /// One aggregate summed over the CPUs' values.
    fn sum_cpus(&self, nr: u32, per_cpu: &[Vec<u8>]) -> Result<SyscallStat> {
        let mut agg = SyscallStat {
            nr,
            calls: 0,
            errors: 0,
            total_ns: 0,
            hist: Histogram {
                counts: vec![0; hist::BUCKETS],
                min: u64::MAX,
                max: 0,
            },
            errnos: BTreeMap::new(),
        };
        for cpu in per_cpu.iter().take(self.ncpus) {
            let Some(s) = pod::read::<types::ss_sc_stats>(cpu) else {
                bail!("short per-CPU value in the syscall statistics");
            };
            if s.calls == 0 {
                continue;
            }
            agg.calls += s.calls;
            agg.errors += s.errors;
            agg.total_ns += s.total_ns;
            for (a, b) in agg.hist.counts.iter_mut().zip(s.hist.iter()) {
                *a += b;
            }
            if s.hist.iter().any(|c| *c > 0) {
                agg.hist.min = agg.hist.min.min(s.min_ns);
                agg.hist.max = agg.hist.max.max(s.max_ns);
            }
        }
        if agg.hist.min == u64::MAX {
            agg.hist.min = 0;
        }
        Ok(agg)
    }

    fn errnos_of(&self, nr: u32) -> Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for slot in 0..ERRNO_SLOTS {
            let key = nr * ERRNO_SLOTS + slot;
            let per_cpu = self
                .skel
                .maps
                .sc_errnos
                .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
                .context("reading errno counts")?
                .unwrap_or_default();
            let n: u64 = per_cpu
                .iter()
                .take(self.ncpus)
                .filter_map(|v| pod::read::<u64>(v))
                .sum();
            if n > 0 {
                out.insert(errno_of_slot(slot), n);
            }
        }
        Ok(out)
    }

    /// Run counts and times the kernel accumulated for each program while
    /// run-time accounting was on.
    pub fn prog_costs(&self) -> Option<Vec<ProgCost>> {
        let progs = &self.skel.progs;
        let mut out = Vec::new();
        let named: [(&'static str, &libbpf_rs::ProgramMut<'_>, bool); 6] = [
            ("ss_sys_enter", &progs.ss_sys_enter, true),
            ("ss_sys_exit", &progs.ss_sys_exit, !self.cfg.count_only),
            ("ss_fork", &progs.ss_fork, true),
            ("ss_exit", &progs.ss_exit, true),
            ("ss_exec", &progs.ss_exec, self.cfg.per_thread),
            (
                "ss_cgroup_attach",
                &progs.ss_cgroup_attach,
                matches!(self.cfg.scope, ScopeFilter::Cgroup { .. }),
            ),
        ];
        for (name, prog, loaded) in named {
            if !loaded {
                continue;
            }
            let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
            // SAFETY: info is a zeroed bpf_prog_info of the length we pass.
            let rc = unsafe {
                libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
            };
            if rc != 0 {
                return None;
            }
            out.push(ProgCost {
                name,
                run_cnt: info.run_cnt,
                run_time_ns: info.run_time_ns,
            });
        }
        Some(out)
    }

    /// Names of the programs as the kernel lists them (bpftool prog show).
    pub fn prog_names() -> &'static [&'static str] {
        &[
            "ss_sys_enter",
            "ss_sys_exit",
            "ss_fork",
            "ss_exit",
            "ss_exec",
            "ss_cgroup_attach",
            "ss_iter_task",
        ]
    }
}

fn classify_update_error(tid: i32, e: libbpf_rs::Error) -> Result<Registered> {
    match e.kind() {
        libbpf_rs::ErrorKind::AlreadyExists => Ok(Registered::Already),
        // The task exited between pidfd_open and the update.
        libbpf_rs::ErrorKind::NotFound => Ok(Registered::Gone),
        _ => Err(anyhow!(e)).with_context(|| format!("registering thread {tid} for tracing")),
    }
}

fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
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

fn attach_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let log = take_libbpf_log();
    let mut msg = format!("attaching to {what} failed: {e}");
    if !log.trim().is_empty() {
        msg.push_str("\n  libbpf said: ");
        msg.push_str(log.trim());
    }
    anyhow!(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_through_the_generated_layouts() {
        let mut ts = Box::new(types::ss_thread_stats {
            r#type: EvType::SS_EV_THREAD_STATS,
            slot: 7,
            ..Default::default()
        });
        ts.sc[39].calls = 5;
        ts.sc[MAX_SYSCALLS - 1].total_ns = 9;
        let mut fork = types::ss_ev_fork {
            r#type: EvType::SS_EV_REGISTERED,
            tid: 42,
            tgid: 41,
            slot: 3,
            ..Default::default()
        };
        fork.comm[..3].copy_from_slice(&[b'a' as i8, b'b' as i8, b'c' as i8]);
        let mut data = as_bytes(&*ts).to_vec();
        data.extend_from_slice(as_bytes(&fork));
        let events = parse_all(&data).unwrap();
        match &events[..] {
            [Event::ThreadStats(7, table), Event::Fork(f)] => {
                assert_eq!(table[39].calls, 5);
                assert_eq!(table[MAX_SYSCALLS - 1].total_ns, 9);
                assert_eq!((f.tid, f.tgid, f.slot, f.parent_tid), (42, 41, 3, 0));
                assert_eq!(f.comm, "abc");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(parse_record(&data[..100]).is_err(), "truncated");
        let unknown = 99u32.to_ne_bytes();
        let err = parse_record(&unknown).unwrap_err().to_string();
        assert!(err.contains("unknown tracer record type 99"), "{err}");
    }
}
