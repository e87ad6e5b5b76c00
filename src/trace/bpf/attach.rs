//! Attaching the programs (all at once, or one syscall hook for a
//! calibration), detaching them, and registering a task for tracing by its
//! pidfd.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result, anyhow, bail};
use libbpf_rs::{Link, MapCore, MapFlags};

use super::super::abi::{NEED_BASELINE, PENDING_EXEC, types};
use super::Tracer;
use crate::probe::ScopeFilter;
use crate::probe::libbpf_log::take_libbpf_log;
use crate::probe::pod::as_bytes;
use types::ss_event_type as EvType;

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

impl Tracer<'_> {
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
        // An exiting task's final CPU time (see ss_exit_tail): after the
        // exit hook, so no tail is seen without its exit record.
        links.push((
            "ss_exit_tail",
            progs
                .ss_exit_tail
                .attach()
                .map_err(|e| attach_error("sched_switch", e))?,
        ));
        links.push((
            "ss_sys_enter",
            progs
                .ss_sys_enter
                .attach()
                .map_err(|e| attach_error("sys_enter", e))?,
        ));
        // Every mode: an exec renames the process (--by process, the
        // per-process table), and with --per-thread starts a new row.
        links.push((
            "ss_exec",
            progs
                .ss_exec
                .attach()
                .map_err(|e| attach_error("sched_process_exec", e))?,
        ));
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
        if let Err(e) = retry_transient(|| {
            self.skel
                .maps
                .tasks
                .update(&key, as_bytes(&state), MapFlags::NO_EXIST)
        }) {
            return classify_update_error(tid, e);
        }
        if self.cfg.per_thread {
            let table = Box::new(types::ss_thread_stats {
                r#type: EvType::SS_EV_THREAD_STATS,
                ..Default::default()
            });
            if let Err(e) = retry_transient(|| {
                self.skel
                    .maps
                    .thread_stats
                    .update(&key, as_bytes(&*table), MapFlags::ANY)
            }) {
                return classify_update_error(tid, e);
            }
        }
        Ok(Registered::Yes)
    }
    /// Detaches every program (the maps stay readable).
    pub fn detach(&mut self) {
        self.links.clear();
        self.iter_link = None;
    }
}

/// Runs a task-storage update again while the kernel says to try again:
/// it answers EAGAIN when the task's storage is being freed or made by a
/// program on another CPU at that moment (bpf_local_storage_update),
/// which passes in microseconds (seen once in CI: `trace -- CMD` failed
/// "registering thread N for tracing: Resource temporarily
/// unavailable"). At most 20 tries, 1 ms apart.
fn retry_transient(
    mut update: impl FnMut() -> std::result::Result<(), libbpf_rs::Error>,
) -> std::result::Result<(), libbpf_rs::Error> {
    let mut tries = 0;
    loop {
        match update() {
            Err(e) if tries < 20 && e.kind() == libbpf_rs::ErrorKind::WouldBlock => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            r => return r,
        }
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

pub(super) fn attach_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let log = take_libbpf_log();
    let mut msg = format!("attaching to {what} failed: {e}");
    if !log.trim().is_empty() {
        msg.push_str("\n  libbpf said: ");
        msg.push_str(log.trim());
    }
    anyhow!(msg)
}
