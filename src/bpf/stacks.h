/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Layouts and constants shared by stacks.bpf.c (the stack sampler: on-CPU
 * samples from a cpu-clock perf event per CPU, off-CPU waits sampled in
 * proportion to their length) and its Rust loader (src/stacks/bpf.rs). As
 * in syscalls.h, constants are enums so they reach BTF and the skeleton's
 * `types`.
 */
#ifndef SOCKSCOPE_STACKS_H
#define SOCKSCOPE_STACKS_H

#include "common.h"

enum ss_stk_limits {
	/* Kernel return addresses kept per sample (PERF_MAX_STACK_DEPTH). */
	SS_STK_KERNEL_FRAMES = 127,
	/* The largest user stack copy the loader may ask for. */
	SS_STK_MAX_BYTES = 65536,
	SS_STK_PAGE = 4096,
	/* Per-CPU scratch slots, one per context that can interrupt another
	 * on a CPU: the tick (a hard interrupt) may come in the middle of a
	 * task-context program (syscall exit, process exit); those run with
	 * preemption off, and the scheduler's hook with interrupts off, so
	 * they never interrupt each other. */
	SS_STK_SLOT_TICK = 0,
	SS_STK_SLOT_TASK = 1,
	/* The window's closing walk (a sleepable iterator: preemptible,
	 * so it cannot share the task slot). */
	SS_STK_SLOT_WALK = 2,
	SS_STK_SLOTS = 3,
};

/* ss_stk_sample.kind */
enum ss_stk_kind {
	SS_STK_ON_CPU = 0,
	SS_STK_OFF_CPU = 1,
	/* Runnable, waiting for a CPU (woken or preempted until it ran):
	 * sampled as off-CPU waits are, written with no stack, and only when
	 * samples are tied to turns (tie_turns). */
	SS_STK_RUNQ = 2,
};

/* ss_stk_sample.flags (bits) */
enum ss_stk_flags {
	SS_STK_USER_REGS = 1, /* ip, sp, bp are the thread's user registers */
	SS_STK_SYSCALL = 2,   /* syscall holds the syscall it blocked in */
	SS_STK_OPEN = 4,      /* a wait the window's end cut: it went on after */
};

/* Counters the programs keep (ss_stk_cpu.count). */
enum ss_stk_count {
	SS_STK_CNT_SAMPLES = 0,     /* on-CPU samples written */
	SS_STK_CNT_OFF_SAMPLES = 1, /* off-CPU samples written */
	SS_STK_CNT_LOST = 2,        /* samples the ring buffer had no room for */
	SS_STK_CNT_COPY_FAILED = 3, /* user stacks whose first read failed */
	SS_STK_CNT_RUN_NS = 4,      /* the programs' own run time */
	SS_STK_CNT_STORAGE_FULL = 5, /* task storage the kernel could not make */
	SS_STK_CNT_TICKS = 6,       /* cpu-clock ticks that ran the program (any task) */
	SS_STK_CNT_TICKS_MISSED = 7, /* periods the timer skipped (it fired late) */
	SS_STK_CNT_RUNQ_SAMPLES = 8, /* run-queue waits written (tie_turns) */
	SS_STK_COUNTS = 9,
};

/* One sample as the ring buffer carries it: this header, then
 * kernel_frames return addresses (u64, innermost first), then stack_bytes
 * bytes of user stack from sp upward. Only the used size is written. */
struct ss_stk_sample {
	__u64 ts_ns;     /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u64 weight_ns; /* off-CPU: the time it stands for; on-CPU: 0 */
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 kind;  /* enum ss_stk_kind */
	__u32 flags; /* enum ss_stk_flags */
	__u32 kernel_frames;
	__u32 stack_bytes;
	__u32 syscall;
	__u32 state; /* off-CPU: the task state it was switched out in */
	char comm[16];
	/* tie_turns: the turn the thread served (ss_anat_thread.turn: 0 none,
	 * enum ss_anat_tie), and when the time the sample stands for began and
	 * ended (on-CPU: the tick's time, both; a wait: from its switch-out,
	 * or its wake-up or preemption for SS_STK_RUNQ, to its wake-up, or
	 * its switch-in). */
	__u64 turn;
	__u64 begin_ns;
	__u64 end_ns;
};

/* A thread's off-CPU state (task storage): when it went to sleep, and a
 * taken wait waiting for its syscall's exit to be emitted. */
struct ss_stk_task {
	__u64 slept_at; /* 0: not asleep (or not in scope when it slept) */
	__u64 woken_at; /* 0: not woken since it slept */
	__u64 weight_ns;
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 state;   /* at the switch out */
	__u32 pending; /* 1: a taken wait, not emitted yet */
	__u32 has_regs;
	__u32 kernel_frames;
	__u64 turn;      /* tie_turns: the turn the taken wait fell in */
	__u64 wait_from; /* the taken wait's begin and end */
	__u64 wait_to;
	__u64 queued_at; /* tie_turns: runnable since (preempted; 0: not) */
	__u64 kstack[SS_STK_KERNEL_FRAMES];
};

/* Per-CPU counters (plain adds: a program's updates on its CPU). */
struct ss_stk_cpu {
	__u64 count[SS_STK_COUNTS];
	__u64 last_tick_ns; /* the previous tick on this CPU */
};

#endif
