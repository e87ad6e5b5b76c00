//! The syscall tracer's BPF object as libbpf-rs generated it from
//! src/bpf/syscalls.bpf.c (the skeleton and its `types`), and the limits
//! and flags its header src/bpf/syscalls.h shares with Rust. The only
//! module that includes the skeleton: `bpf/` drives it.

use crate::probe::pod::Plain;

mod skel {
    #![allow(clippy::all, clippy::pedantic, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/syscalls.skel.rs"));
}
pub(super) use skel::{SyscallsSkel, SyscallsSkelBuilder, types};

crate::probe::scope_filter::check_common_abi!(types);

use types::{ss_event_type as EvType, ss_limits as Limits};

/// Syscall numbers with a slot of their own, plus the last slot that pools
/// every number beyond (SS_MAX_SYSCALLS in src/bpf/syscalls.h).
pub const MAX_SYSCALLS: usize = Limits::SS_MAX_SYSCALLS.0 as usize;
/// The slot that pools every syscall number from it up (SS_OTHER_SYSCALL).
pub const OTHER_SYSCALL: u32 = Limits::SS_OTHER_SYSCALL.0;
pub(super) const ERRNO_SLOTS: u32 = Limits::SS_ERRNO_SLOTS.0;
pub(super) const ERRNO_DIRECT: u32 = Limits::SS_ERRNO_DIRECT.0;
pub(super) const ERRNO_RESTART_BASE: u32 = Limits::SS_ERRNO_RESTART_BASE.0;
pub(super) const PENDING_EXEC: u32 = types::ss_task_flags::SS_PENDING_EXEC.0;
pub(super) const NEED_BASELINE: u32 = types::ss_task_flags::SS_NEED_BASELINE.0;

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
