// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * sockscope stack sampler: where the target's threads run (on-CPU) and
 * where they wait (off-CPU), as raw samples through a ring buffer; user
 * space unwinds and symbolizes them (src/stacks/, docs/stacks.md).
 *
 * On-CPU: a cpu-clock software perf event per online CPU, firing every
 * 1/hz s, runs ss_tick. A tick that hit a task of the scope (not the idle
 * task, not sockscope) writes its kernel stack (empty when the tick hit
 * user mode), its user registers (the interrupted ones when the tick hit
 * user mode, else those saved at its kernel entry; none for a kernel
 * thread) and a copy of its user stack from sp upward.
 *
 * Off-CPU, sampled in proportion to its length so that its cost is bounded
 * like the on-CPU side's: a task of the scope switched out sleeping keeps
 * the time in its task storage, and the wake-up's time when it is woken
 * (the wait ends there: what follows, runnable until a CPU takes it, is
 * the run queue's). When it is switched back in, its wait of d ns
 * is taken with probability min(1, d/P), P the on-CPU period (1e9/hz), with
 * weight max(d, P): the expected weight is d, so the sum over many waits
 * is unbiased, and a thread that wakes a million times a second costs
 * about as many samples as one that runs. A taken wait's kernel stack is
 * walked at once (the task is still inside schedule(): the frames say
 * where it waited); its user stack cannot be read from another task's
 * context, so it waits ("pending") for the thread's next syscall exit,
 * where the user registers saved at its kernel entry are compared with
 * those seen at the switch: equal, it is the same kernel entry (the user
 * stack has not changed since it blocked) and the sample is written with
 * the user stack copied there and the syscall's number; different (it
 * waited in a page fault, not a syscall), with kernel frames only.
 *
 * The window's edges: a wait that began before the window opened has no
 * switch-out to date it, and one still going on when it closes has no
 * switch-in to end it. Two walks over every task (sleepable task
 * iterators, run by the loader) close the gap: ss_open_waits, once the
 * hooks are attached, dates every wait of the scope going on then from
 * that moment; ss_close_waits, once they are detached, takes every wait
 * still open with its part up to window_end_ns (its kernel stack walked
 * then, its user stack copied from the task's memory), as switched_in
 * takes an ended one; and writes the taken waits no syscall exit wrote.
 *
 * User stacks are copied in page-aligned chunks (sp to the next page
 * boundary, then whole pages) and the copy stops at the first chunk that
 * fails: a single read that runs past the end of the stack's mapping
 * fails whole, so chunks keep every byte up to that end.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.h"
#include "anatomy.h"
#include "scope.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define PF_KTHREAD 0x00200000

/* Set by the loader before load. Bytes of user stack copied per sample (at most SS_STK_MAX_BYTES). */
const volatile __u32 stack_bytes = 16384;
/* The on-CPU period, 1e9 / hz: the off-CPU sampling unit. */
const volatile __u64 period_ns = 10101010;

struct ss_stk_cpu cpus[SS_MAX_CPUS] = {};
/* Taken waits not emitted yet, machine-wide: the syscall-exit hook, which
 * runs on every syscall of the machine, returns at once while it is 0. */
__s64 pending_total = 0;
/* Where the window ends (CLOCK_MONOTONIC ns), set by the loader before the
 * closing walk: the waits still open are counted up to here. */
__u64 window_end_ns = 0;
/* Set by the loader when the request anatomy runs beside: each sample
 * carries the turn its thread served (the anatomy's thread storage,
 * `threads`, is the anatomy's own map, reused), and run-queue waits
 * are sampled too (with the off-CPU side). */
const volatile __u32 tie_turns = 0;
/* Set by the loader for a reader that drains the ring on a timer (a node
 * agent): no sample wakes it, so none pays for a wake-up in the sampled
 * task's context and the reader pays for one wake-up a drain, not one a
 * sample. */
const volatile __u32 quiet_ring = 0;

/* Keeps the enums no field uses in BTF, for the skeleton's types. */
enum ss_stk_limits layout_stk_limits __attribute__((unused));
enum ss_common_limits layout_common_limits __attribute__((unused));
enum ss_scope_mode layout_scope_mode __attribute__((unused));
enum ss_stk_kind layout_stk_kind __attribute__((unused));
enum ss_stk_flags layout_stk_flags __attribute__((unused));
enum ss_stk_count layout_stk_count __attribute__((unused));
struct ss_stk_sample layout_stk_sample __attribute__((unused));

/* A sample being written: the header, then kernel frames, then user
 * stack bytes, contiguous (only the used size goes to the ring). The
 * slack of one page lets the verifier see that a chunk of at most a page
 * starting at any offset up to the frames plus the copy size fits. */
struct ss_stk_buf {
	struct ss_stk_sample hdr;
	__u8 data[SS_STK_KERNEL_FRAMES * 8 + SS_STK_MAX_BYTES + SS_STK_PAGE];
};

/* Per-CPU scratch, SS_STK_SLOTS entries per CPU (an array map: a per-CPU
 * map's value is limited to 32 KB). max_entries set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ss_stk_buf);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* set by the loader */
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_stk_task);
} tasks SEC(".maps");

/* The anatomy's per-thread state (src/bpf/anatomy.h): the loader gives
 * this map the anatomy's `threads` descriptor before loading; the same
 * name, as libbpf renames a reused map after the kernel's. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_anat_thread);
} threads SEC(".maps");

static __always_inline struct ss_stk_cpu *cpu_here(void)
{
	return &cpus[bpf_get_smp_processor_id() & (SS_MAX_CPUS - 1)];
}

static __always_inline void count(enum ss_stk_count c, __u64 n)
{
	if (c < SS_STK_COUNTS)
		cpu_here()->count[c] += n;
}

static __always_inline struct ss_stk_buf *scratch_of(enum ss_stk_limits slot)
{
	__u32 k = bpf_get_smp_processor_id() * SS_STK_SLOTS + slot;

	return bpf_map_lookup_elem(&scratch, &k);
}

static __always_inline bool is_kthread(struct task_struct *task)
{
	return (task->flags & PF_KTHREAD) || !task->mm;
}

/* Copies a user stack from sp upward into data + off (page-aligned
 * chunks, stopping at the first failure) with READ(dst, len, addr), which
 * returns 0 on success; sets `copied` to the bytes copied. A macro, not a
 * function taking the reader: the iterator's reader is a sleepable-only
 * helper that the other programs may not even name. */
#define COPY_STACK(b, off, sp, copied, READ)                                                  \
	do {                                                                                  \
		/* 64-bit throughout: a 32-bit bound tested on a zero-extended                \
		 * copy says nothing to the verifier about the register passed on. */        \
		__u64 want_ = stack_bytes, addr_ = (sp);                                      \
                                                                                              \
		copied = 0;                                                                   \
		if (want_ > SS_STK_MAX_BYTES)                                                 \
			want_ = SS_STK_MAX_BYTES;                                             \
		for (int i_ = 0; i_ < SS_STK_MAX_BYTES / SS_STK_PAGE + 1; i_++) {             \
			__u64 len_ = SS_STK_PAGE - (addr_ & (SS_STK_PAGE - 1));               \
			__u64 at_ = (__u64)(off) + copied;                                    \
                                                                                              \
			if (copied >= want_)                                                  \
				break;                                                        \
			if (len_ > want_ - copied)                                            \
				len_ = want_ - copied;                                        \
			/* The compiler knows both bounds; the verifier must see             \
			 * them tested on the values the helper gets. */                     \
			barrier_var(len_);                                                    \
			barrier_var(at_);                                                     \
			if (at_ > SS_STK_KERNEL_FRAMES * 8 + SS_STK_MAX_BYTES ||              \
			    len_ > SS_STK_PAGE)                                               \
				break;                                                        \
			if (READ(&(b)->data[at_], len_, (void *)addr_))                      \
				break;                                                        \
			copied += len_;                                                       \
			addr_ += len_;                                                        \
		}                                                                             \
		if (copied == 0 && want_ > 0)                                                 \
			count(SS_STK_CNT_COPY_FAILED, 1);                                     \
	} while (0)

/* Copies the current task's user stack from sp upward into data + off;
 * returns the bytes copied. */
static __always_inline __u32 copy_user_stack(struct ss_stk_buf *b, __u32 off, __u64 sp)
{
	__u64 copied;

	COPY_STACK(b, off, sp, copied, bpf_probe_read_user);
	return copied;
}

/* Writes the sample in b: the header, kframes frames and ubytes stack
 * bytes. */
static __always_inline void emit(struct ss_stk_buf *b, __u32 kframes, __u32 ubytes)
{
	__u64 size = sizeof(b->hdr) + (__u64)kframes * 8 + ubytes;

	b->hdr.kernel_frames = kframes;
	b->hdr.stack_bytes = ubytes;
	if (size > sizeof(*b))
		return;
	if (bpf_ringbuf_output(&samples, b, size, quiet_ring ? BPF_RB_NO_WAKEUP : 0)) {
		count(SS_STK_CNT_LOST, 1);
		return;
	}
	count(b->hdr.kind == SS_STK_ON_CPU ? SS_STK_CNT_SAMPLES :
	      b->hdr.kind == SS_STK_RUNQ   ? SS_STK_CNT_RUNQ_SAMPLES :
					     SS_STK_CNT_OFF_SAMPLES, 1);
}

/* The turn `task` serves (0: none), for a sample taken of it; the turn
 * is told that a sample fell in it (the anatomy marks it at the thread's
 * next write of it, so that its end reaches the loader). */
static __always_inline __u64 turn_of(struct task_struct *task, bool mark)
{
	struct ss_anat_thread *t;

	if (!tie_turns)
		return 0;
	t = bpf_task_storage_get(&threads, task, 0, 0);
	if (!t || !t->turn)
		return 0;
	if (mark && !(t->turn & SS_TURN_INTERLEAVED))
		t->sampled = t->turn;
	return t->wrote == t->turn ? t->turn | SS_TURN_AFTER_WRITE : t->turn;
}

/* --- on-CPU ----------------------------------------------------------- */

static __always_inline void tick_work(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_stk_buf *b;
	struct pt_regs *ur = 0;
	__u32 kframes = 0, ubytes = 0;
	long n;

	if (!in_scope(task))
		return;
	b = scratch_of(SS_STK_SLOT_TICK);
	if (!b)
		return;
	b->hdr.ts_ns = bpf_ktime_get_ns();
	b->hdr.begin_ns = b->hdr.end_ns = b->hdr.ts_ns;
	b->hdr.turn = turn_of(task, true);
	b->hdr.weight_ns = 0;
	b->hdr.pid = task->tgid;
	b->hdr.tid = task->pid;
	b->hdr.kind = SS_STK_ON_CPU;
	b->hdr.flags = 0;
	b->hdr.syscall = 0;
	b->hdr.state = 0;
	bpf_get_current_comm(b->hdr.comm, sizeof(b->hdr.comm));
	n = bpf_get_stack(ctx, b->data, SS_STK_KERNEL_FRAMES * 8, 0);
	if (n > 0)
		kframes = (__u32)n / 8;
	if (kframes > SS_STK_KERNEL_FRAMES)
		kframes = SS_STK_KERNEL_FRAMES;
	if (!is_kthread(task)) {
		/* The tick's registers are the user ones when it hit user
		 * mode (cs's privilege level 3; the context allows only
		 * 8-byte loads of it); in the kernel, the user registers are
		 * those saved at its entry. */
		__u64 cs = ctx->regs.csx, ip = ctx->regs.ip, sp = ctx->regs.sp;
		__u64 bp = ctx->regs.bp;

		/* Loaded here, not as a pointer picked between the context
		 * and the task's registers (which the verifier refuses). */
		barrier_var(ip);
		barrier_var(sp);
		barrier_var(bp);
		if ((cs & 3) != 3) {
			ur = (struct pt_regs *)bpf_task_pt_regs(task);
			if (!ur)
				goto out;
			ip = ur->ip;
			sp = ur->sp;
			bp = ur->bp;
		}
		b->hdr.ip = ip;
		b->hdr.sp = sp;
		b->hdr.bp = bp;
		b->hdr.flags = SS_STK_USER_REGS;
		ubytes = copy_user_stack(b, kframes * 8, b->hdr.sp);
	}
out:
	emit(b, kframes, ubytes);
}

/* Counts the tick, and the periods since the last one on this CPU that
 * had none: time no cpu-clock sampler saw (a virtual CPU's timer may not
 * fire for tens of ms at a time, or while that CPU idles; perf's neither). */
static __always_inline void count_tick(__u64 now)
{
	struct ss_stk_cpu *c = cpu_here();
	__u64 prev = c->last_tick_ns;

	c->last_tick_ns = now;
	c->count[SS_STK_CNT_TICKS] += 1;
	if (prev && period_ns && now - prev > period_ns + period_ns / 2)
		c->count[SS_STK_CNT_TICKS_MISSED] += (now - prev + period_ns / 2) / period_ns - 1;
}

SEC("perf_event")
int ss_tick(struct bpf_perf_event_data *ctx)
{
	__u64 t0 = bpf_ktime_get_ns();

	count_tick(t0);
	tick_work(ctx);
	count(SS_STK_CNT_RUN_NS, bpf_ktime_get_ns() - t0);
	return 0;
}

/* --- off-CPU ---------------------------------------------------------- */

/* Writes a taken wait of `task` (its storage st) with kernel frames only:
 * its user stack cannot be had (another task's context, or a page fault's
 * wait). */
static __always_inline void emit_kernel_only(struct ss_stk_buf *b, struct ss_stk_task *st,
					     struct task_struct *task)
{
	__u32 kframes = st->kernel_frames;

	if (kframes > SS_STK_KERNEL_FRAMES)
		kframes = SS_STK_KERNEL_FRAMES;
	b->hdr.ts_ns = bpf_ktime_get_ns();
	b->hdr.weight_ns = st->weight_ns;
	b->hdr.turn = st->turn;
	b->hdr.begin_ns = st->wait_from;
	b->hdr.end_ns = st->wait_to;
	b->hdr.ip = b->hdr.sp = b->hdr.bp = 0;
	b->hdr.pid = task->tgid;
	b->hdr.tid = task->pid;
	b->hdr.kind = SS_STK_OFF_CPU;
	b->hdr.flags = 0;
	b->hdr.syscall = 0;
	b->hdr.state = st->state;
	bpf_probe_read_kernel_str(b->hdr.comm, sizeof(b->hdr.comm), task->comm);
	bpf_probe_read_kernel(b->data, sizeof(st->kstack), st->kstack);
	emit(b, kframes, 0);
}

static __always_inline void clear_pending(struct ss_stk_task *st)
{
	if (st->pending) {
		st->pending = 0;
		__sync_fetch_and_add(&pending_total, -1);
	}
}

/* `task` waited for a CPU from `from` to `to` (it runs now): sampled as a
 * wait is (probability min(1, d/P), weight max(d, P)) and written at once
 * with no stack (where it was preempted says little about the wait). */
static __always_inline void runq_wait(struct ss_stk_task *st, struct task_struct *task,
				      __u64 from, __u64 to)
{
	__u64 d = to - from;
	struct ss_stk_buf *b;

	if (d < period_ns && (__u64)bpf_get_prandom_u32() * period_ns >= d << 32)
		return;
	b = scratch_of(SS_STK_SLOT_TASK);
	if (!b)
		return;
	b->hdr.ts_ns = to;
	b->hdr.weight_ns = d > period_ns ? d : period_ns;
	b->hdr.turn = turn_of(task, true);
	b->hdr.begin_ns = from;
	b->hdr.end_ns = to;
	b->hdr.ip = b->hdr.sp = b->hdr.bp = 0;
	b->hdr.pid = task->tgid;
	b->hdr.tid = task->pid;
	b->hdr.kind = SS_STK_RUNQ;
	b->hdr.flags = 0;
	b->hdr.syscall = 0;
	b->hdr.state = 0;
	bpf_probe_read_kernel_str(b->hdr.comm, sizeof(b->hdr.comm), task->comm);
	emit(b, 0, 0);
}

/* Decides whether `next`'s wait, ended now, is taken (probability
 * min(1, d/P), weight max(d, P)); a taken one is kept pending. */
static __always_inline void switched_in(struct task_struct *next, __u64 now)
{
	struct ss_stk_task *st;
	struct pt_regs *ur;
	__u64 d;
	long n;

	__u64 from;

	st = bpf_task_storage_get(&tasks, next, 0, 0);
	if (!st)
		return;
	if (tie_turns) {
		/* Runnable from its preemption, or from its wake-up. */
		from = st->queued_at;
		if (!from && st->slept_at && st->woken_at)
			from = st->woken_at;
		st->queued_at = 0;
		if (from && from < now)
			runq_wait(st, next, from, now);
	}
	if (!st->slept_at)
		return;
	/* The wait ends at the wakeup: what follows, runnable until a CPU
	 * takes it, is run-queue time (the anatomy's CPU wait), not where
	 * it blocked. */
	from = st->slept_at;
	if (st->woken_at && st->woken_at < now)
		now = st->woken_at;
	d = now > st->slept_at ? now - st->slept_at : 0;
	st->slept_at = 0;
	st->woken_at = 0;
	/* d < P: taken when rand/2^32 < d/P (d < P <= 1e9 keeps both sides
	 * below 2^64). */
	if (d < period_ns && (__u64)bpf_get_prandom_u32() * period_ns >= d << 32)
		return;
	if (st->pending) {
		/* An earlier wait whose syscall has not returned (it waited in
		 * a page fault and has not made a syscall since): written now,
		 * kernel frames only. */
		struct ss_stk_buf *b = scratch_of(SS_STK_SLOT_TASK);

		if (b)
			emit_kernel_only(b, st, next);
		clear_pending(st);
	}
	st->weight_ns = d > period_ns ? d : period_ns;
	st->turn = turn_of(next, true);
	st->wait_from = from;
	st->wait_to = now;
	n = bpf_get_task_stack(next, st->kstack, sizeof(st->kstack), 0);
	st->kernel_frames = n > 0 ? (__u32)n / 8 : 0;
	st->has_regs = 0;
	st->ip = st->sp = st->bp = 0;
	if (!is_kthread(next)) {
		ur = (struct pt_regs *)bpf_task_pt_regs(next);
		if (ur) {
			st->ip = ur->ip;
			st->sp = ur->sp;
			st->bp = ur->bp;
			st->has_regs = 1;
		}
	}
	st->pending = 1;
	__sync_fetch_and_add(&pending_total, 1);
}

static __always_inline void switch_work(bool preempt, struct task_struct *prev,
					struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	struct ss_stk_task *st;
	__u32 state = prev->__state;

	/* A preempted task is runnable whatever its state says; a state
	 * of 0 (running) was not a wait either. */
	if (!preempt && state != 0 && in_scope(prev)) {
		st = bpf_task_storage_get(&tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st) {
			st->slept_at = now;
			st->woken_at = 0;
			st->queued_at = 0;
			st->state = state;
		} else {
			count(SS_STK_CNT_STORAGE_FULL, 1);
		}
	} else if (tie_turns && prev->pid != 0 && in_scope(prev)) {
		/* Preempted: runnable from now until it runs again. */
		st = bpf_task_storage_get(&tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st)
			st->queued_at = now;
		else
			count(SS_STK_CNT_STORAGE_FULL, 1);
	}
	if (next->pid != 0)
		switched_in(next, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ss_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 t0 = bpf_ktime_get_ns();

	switch_work(preempt, prev, next);
	count(SS_STK_CNT_RUN_NS, bpf_ktime_get_ns() - t0);
	return 0;
}

/* A sleeping task of the scope is woken: its wait ends now (it may wait
 * for a CPU a while longer before it runs). Runs on every wakeup of the
 * machine: one storage lookup for the tasks without a wait. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(ss_wakeup, struct task_struct *p)
{
	__u64 t0 = bpf_ktime_get_ns();
	struct ss_stk_task *st;

	st = bpf_task_storage_get(&tasks, p, 0, 0);
	if (st && st->slept_at && !st->woken_at)
		st->woken_at = t0;
	count(SS_STK_CNT_RUN_NS, bpf_ktime_get_ns() - t0);
	return 0;
}

static __always_inline void sys_exit_work(struct pt_regs *regs)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_stk_task *st;
	struct ss_stk_buf *b;
	__u32 kframes;

	st = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!st || !st->pending)
		return;
	b = scratch_of(SS_STK_SLOT_TASK);
	if (!b)
		goto done;
	if (!st->has_regs || regs->ip != st->ip || regs->sp != st->sp) {
		emit_kernel_only(b, st, task);
		goto done;
	}
	kframes = st->kernel_frames;
	if (kframes > SS_STK_KERNEL_FRAMES)
		kframes = SS_STK_KERNEL_FRAMES;
	b->hdr.ts_ns = bpf_ktime_get_ns();
	b->hdr.weight_ns = st->weight_ns;
	b->hdr.turn = st->turn;
	b->hdr.begin_ns = st->wait_from;
	b->hdr.end_ns = st->wait_to;
	b->hdr.ip = st->ip;
	b->hdr.sp = st->sp;
	b->hdr.bp = st->bp;
	b->hdr.pid = task->tgid;
	b->hdr.tid = task->pid;
	b->hdr.kind = SS_STK_OFF_CPU;
	b->hdr.flags = SS_STK_USER_REGS | SS_STK_SYSCALL;
	b->hdr.syscall = (__u32)regs->orig_ax;
	b->hdr.state = st->state;
	bpf_get_current_comm(b->hdr.comm, sizeof(b->hdr.comm));
	bpf_probe_read_kernel(b->data, sizeof(st->kstack), st->kstack);
	emit(b, kframes, copy_user_stack(b, kframes * 8, st->sp));
done:
	clear_pending(st);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ss_sys_exit, struct pt_regs *regs, long ret)
{
	__u64 t0;

	/* Every syscall of the machine comes here: nothing pending, nothing
	 * to do (one load). */
	if (!pending_total)
		return 0;
	t0 = bpf_ktime_get_ns();
	sys_exit_work(regs);
	count(SS_STK_CNT_RUN_NS, bpf_ktime_get_ns() - t0);
	return 0;
}

/* --- the window's edges ------------------------------------------------ */

extern struct cgroup *bpf_cgroup_from_id(__u64 cgid) __ksym;
extern void bpf_cgroup_release(struct cgroup *cgrp) __ksym;
extern long bpf_task_under_cgroup(struct task_struct *task, struct cgroup *ancestor) __ksym;

/* in_scope for a task that is not the current one (the walks run in
 * sockscope's context, where the cgroup test of in_scope would test
 * sockscope). */
static __always_inline bool walk_in_scope(struct task_struct *t)
{
	struct cgroup *cg;
	bool under;

	if (scope_mode != SS_SCOPE_CGROUP)
		return in_scope(t);
	if (t->tgid == self_tgid || t->pid == 0)
		return false;
	cg = bpf_cgroup_from_id(scope_cgroup_id);
	if (!cg)
		return false;
	under = bpf_task_under_cgroup(t, cg);
	bpf_cgroup_release(cg);
	return under;
}

/* Blocked: switched out in a sleep (not merely preempted, not on its way
 * into schedule() with its state set). */
static __always_inline bool blocked(struct task_struct *t)
{
	return t->__state != 0 && !t->on_rq && !t->on_cpu;
}

/* Dates every wait of the scope going on as the window opens from now:
 * the wake-up (or the closing walk) ends it as any other. */
SEC("iter.s/task")
int ss_open_waits(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct ss_stk_task *st;

	if (!t || !blocked(t) || !walk_in_scope(t))
		return 0;
	st = bpf_task_storage_get(&tasks, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count(SS_STK_CNT_STORAGE_FULL, 1);
		return 0;
	}
	/* A switch-out since the hooks were attached dated it already. */
	if (!st->slept_at) {
		st->slept_at = bpf_ktime_get_ns();
		st->woken_at = 0;
		st->state = t->__state;
	}
	return 0;
}

/* The closing walk's reader of another task's memory (the task is `t`). */
#define COPY_FROM_TASK(dst, len, addr) bpf_copy_from_user_task(dst, len, addr, t, 0)

/* Writes the wait of a task the closing walk took: its kernel stack walked
 * now, and while it is still blocked in a syscall, its user registers as
 * saved at that entry and its user stack from its own memory. A task
 * running again (woken after the window closed) gives neither: its stack
 * is moving under the walk. */
static __always_inline void emit_walked(struct ss_stk_buf *b, struct task_struct *t,
					__u64 weight, __u32 state, __u32 flags, __u64 from,
					__u64 to)
{
	__u32 kframes = 0, ubytes = 0;
	__u64 copied;
	struct pt_regs *ur;
	long n;

	b->hdr.ts_ns = bpf_ktime_get_ns();
	b->hdr.weight_ns = weight;
	/* Cut by the window's end: no turn the anatomy timed is still open. */
	b->hdr.turn = 0;
	b->hdr.begin_ns = from;
	b->hdr.end_ns = to;
	b->hdr.ip = b->hdr.sp = b->hdr.bp = 0;
	b->hdr.pid = t->tgid;
	b->hdr.tid = t->pid;
	b->hdr.kind = SS_STK_OFF_CPU;
	b->hdr.flags = flags;
	b->hdr.syscall = 0;
	b->hdr.state = state;
	bpf_probe_read_kernel_str(b->hdr.comm, sizeof(b->hdr.comm), t->comm);
	if (t->on_cpu)
		goto out;
	n = bpf_get_task_stack(t, b->data, SS_STK_KERNEL_FRAMES * 8, 0);
	if (n > 0)
		kframes = (__u32)n / 8;
	if (kframes > SS_STK_KERNEL_FRAMES)
		kframes = SS_STK_KERNEL_FRAMES;
	if (is_kthread(t))
		goto out;
	ur = (struct pt_regs *)bpf_task_pt_regs(t);
	/* orig_ax is the syscall's number inside one, -1 in a fault. */
	if (!ur || (long)ur->orig_ax < 0)
		goto out;
	b->hdr.ip = ur->ip;
	b->hdr.sp = ur->sp;
	b->hdr.bp = ur->bp;
	b->hdr.syscall = (__u32)ur->orig_ax;
	b->hdr.flags |= SS_STK_USER_REGS | SS_STK_SYSCALL;
	COPY_STACK(b, kframes * 8, b->hdr.sp, copied, COPY_FROM_TASK);
	ubytes = copied;
out:
	emit(b, kframes, ubytes);
}

/* Takes every wait still open as the window closes (the hooks are
 * detached: nothing else touches the storage now), cut at window_end_ns
 * and sampled as switched_in samples an ended one; writes the taken waits
 * whose syscall did not return in the window. One byte to the iterator's
 * reader per sample written, so that it can drain the ring buffer between
 * reads. */
SEC("iter.s/task")
int ss_close_waits(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *t = ctx->task;
	struct ss_stk_task *st;
	struct ss_stk_buf *b;
	__u64 from, to, d;
	__u32 flags;
	__u8 one = 1;

	if (!t)
		return 0;
	st = bpf_task_storage_get(&tasks, t, 0, 0);
	if (!st)
		return 0;
	b = scratch_of(SS_STK_SLOT_WALK);
	if (!b)
		return 0;
	if (st->pending) {
		emit_kernel_only(b, st, t);
		clear_pending(st);
		bpf_seq_write(seq, &one, 1);
	}
	from = st->slept_at;
	st->slept_at = 0;
	if (!from)
		return 0;
	to = window_end_ns;
	if (st->woken_at && st->woken_at < to)
		to = st->woken_at;
	flags = to == window_end_ns ? SS_STK_OPEN : 0;
	d = to > from ? to - from : 0;
	if (d == 0)
		return 0;
	if (d < period_ns && (__u64)bpf_get_prandom_u32() * period_ns >= d << 32)
		return 0;
	emit_walked(b, t, d > period_ns ? d : period_ns, st->state, flags, from, to);
	bpf_seq_write(seq, &one, 1);
	return 0;
}

/* --- the tree ---------------------------------------------------------- */

/* Tree scope: a process forked by one of the tree's joins it. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ss_fork, struct task_struct *parent, struct task_struct *child)
{
	tree_fork(parent, child);
	return 0;
}

/* A thread exits: its pending wait is written (it will make no syscall
 * again); when it was the last of its process, the process leaves the
 * tree (its pid may be reused by an unrelated process). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ss_exit, struct task_struct *p)
{
	struct ss_stk_task *st;

	if (pending_total) {
		st = bpf_task_storage_get(&tasks, p, 0, 0);
		if (st && st->pending) {
			struct ss_stk_buf *b = scratch_of(SS_STK_SLOT_TASK);

			if (b)
				emit_kernel_only(b, st, p);
			clear_pending(st);
		}
	}
	tree_exit(p);
	return 0;
}
