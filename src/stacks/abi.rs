//! The stack sampler's BPF object as libbpf-rs generated it from
//! src/bpf/stacks.bpf.c (the skeleton and its `types`), and the limits its
//! header src/bpf/stacks.h shares with Rust. The only module that includes
//! this skeleton.

use crate::probe::pod::Plain;

mod skel {
    #![allow(clippy::all, clippy::pedantic, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/stacks.skel.rs"));
}
pub(super) use skel::{StacksSkel, StacksSkelBuilder, types};

crate::probe::scope_filter::check_common_abi!(types);

use types::ss_stk_limits as L;

/// Kernel return addresses kept per sample.
pub const KERNEL_FRAMES: usize = L::SS_STK_KERNEL_FRAMES.0 as usize;
/// The largest user stack copy a sample may carry.
pub const MAX_STACK_BYTES: u32 = L::SS_STK_MAX_BYTES.0;
/// Scratch buffers per CPU (see src/bpf/stacks.h).
pub const SLOTS: u32 = L::SS_STK_SLOTS.0;
/// Counters the programs keep (`enum ss_stk_count`).
pub const COUNTS: usize = types::ss_stk_count::SS_STK_COUNTS.0 as usize;

/// The counters' indices (see src/bpf/stacks.h for what each counts).
pub mod count {
    use super::types::ss_stk_count as C;
    /// On-CPU samples written.
    pub const SAMPLES: usize = C::SS_STK_CNT_SAMPLES.0 as usize;
    /// Off-CPU samples written.
    pub const OFF_SAMPLES: usize = C::SS_STK_CNT_OFF_SAMPLES.0 as usize;
    /// Samples the ring buffer had no room for.
    pub const LOST: usize = C::SS_STK_CNT_LOST.0 as usize;
    /// User stacks whose first read failed.
    pub const COPY_FAILED: usize = C::SS_STK_CNT_COPY_FAILED.0 as usize;
    /// The programs' own run time, ns.
    pub const RUN_NS: usize = C::SS_STK_CNT_RUN_NS.0 as usize;
    /// cpu-clock ticks that ran the program, any task's.
    pub const TICKS: usize = C::SS_STK_CNT_TICKS.0 as usize;
    /// Periods the timer skipped by firing late.
    pub const TICKS_MISSED: usize = C::SS_STK_CNT_TICKS_MISSED.0 as usize;
    /// Run-queue waits written (samples tied to requests).
    pub const RUNQ_SAMPLES: usize = C::SS_STK_CNT_RUNQ_SAMPLES.0 as usize;
}

/// `ss_stk_sample.kind`: an on-CPU tick.
pub const KIND_ON_CPU: u32 = types::ss_stk_kind::SS_STK_ON_CPU.0;
/// `ss_stk_sample.kind`: a run-queue wait.
pub const KIND_RUNQ: u32 = types::ss_stk_kind::SS_STK_RUNQ.0;
/// `ss_stk_sample.flags`: ip, sp and bp hold user registers.
pub const FLAG_USER_REGS: u32 = types::ss_stk_flags::SS_STK_USER_REGS.0;
/// `ss_stk_sample.flags`: the syscall field holds the syscall it blocked in.
pub const FLAG_SYSCALL: u32 = types::ss_stk_flags::SS_STK_SYSCALL.0;
/// `ss_stk_sample.flags`: a wait the window's end cut.
pub const FLAG_OPEN: u32 = types::ss_stk_flags::SS_STK_OPEN.0;

// SAFETY: a skeleton struct generated from src/bpf/stacks.h: repr(C),
// integers, a byte array and explicit padding only (see trace/pod.rs).
unsafe impl Plain for types::ss_stk_sample {}
