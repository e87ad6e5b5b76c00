// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * sockscope trace: per-syscall counts, errors and latency for a process tree.
 *
 * Hot path (sys_enter/sys_exit, run for every syscall on the machine):
 *  - membership is the presence of task local storage, so an untraced task
 *    pays one storage lookup that finds nothing and returns;
 *  - the syscall number and entry time live in that per-task storage, so
 *    sys_exit does not depend on regs->orig_ax and needs no hash map;
 *  - aggregates are per-CPU array slots indexed by syscall number: plain
 *    stores, no atomic read-modify-write on a shared cache line. Syscall
 *    tracepoint programs run with preemption disabled, so two tasks cannot
 *    interleave on one CPU's slot.
 * Atomics appear only on the fork/exit paths, which are rare by comparison.
 * During the loader's self-cost slices (cost_on) the two syscall programs
 * also time themselves, split into runs on traced events and runs that
 * only filter other tasks out; outside the slices that costs a flag test.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscalls.h"
#include "hist.h"
/* The tracer marks its tree in its task storage (struct ss_task.flags). */
#define SS_SCOPE_NO_TREE
#include "scope.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#if defined(__TARGET_ARCH_x86)
#define NR_execve 59
#define NR_execveat 322
#define NR_exit 60
#define NR_exit_group 231
#elif defined(__TARGET_ARCH_arm64)
#define NR_execve 221
#define NR_execveat 281
#define NR_exit 93
#define NR_exit_group 94
#else
#error "sockscope: syscall numbers for this architecture are not defined"
#endif

/* Set by the loader before load; constant-folded by the verifier. */
const volatile bool count_only = false;
const volatile bool follow_forks = true;
const volatile bool per_thread = false;
const volatile __u32 max_slots = 0;
const volatile __u64 ringbuf_wake_bytes = 1 << 20;
const volatile enum ss_by_mode by_mode = SS_BY_NONE;

/* Written by the loader between phases (mmapped .bss). */
enum ss_iter_mode iter_mode = SS_ITER_IDLE;
__u32 window_closed = 0;
struct ss_counters counters = {};
/* Read by the loader around self-cost slices: events per BPF run time. */
struct ss_cpu_events cpu_events[SS_MAX_CPUS] = {};
/* Set by the loader during self-cost slices only: the syscall programs then
 * time themselves into cpu_cost (see struct ss_prog_cost). Outside the
 * slices this flag is the whole price: one load and a branch per run. */
__u32 cost_on = 0;
/* Cgroup scope: bumped whenever any task changes cgroup, so each task
 * re-checks its cached membership once at its next syscall. */
__u32 scope_gen = 0;
struct ss_cpu_cost cpu_cost[SS_MAX_CPUS] = {};

/* Never used by the programs: referenced so the skeleton generator emits
 * Rust twins of the record layouts the loader parses, and of the enums no
 * field or global has as its type (see syscalls.h). */
struct ss_ev_fork layout_ev_fork __attribute__((unused));
struct ss_ev_task layout_ev_task __attribute__((unused));
struct ss_ev_exec layout_ev_exec __attribute__((unused));
enum ss_limits layout_limits __attribute__((unused));
enum ss_common_limits layout_common_limits __attribute__((unused));
enum ss_scope_mode layout_scope_mode __attribute__((unused));
enum ss_task_flags layout_task_flags __attribute__((unused));
struct ss_group_key layout_group_key __attribute__((unused));

/* A zeroed value to create per-group entries from (too big for the stack). */
const struct ss_sc_stats zero_stats = {};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_thread_stats);
} thread_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SS_MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, struct ss_sc_stats);
} sc_stats SEC(".maps");

/* One entry per syscall, its errno slots in the value: a per-CPU array
 * allocates every entry apart, and 512 x 160 one-counter entries took the
 * kernel tens of ms to create and free (most of a short trace's start-up). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SS_MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, struct ss_errno_counts);
} sc_errnos SEC(".maps");

/* Per-group, per-syscall aggregates (--by); max_entries is the series
 * limit, set by the loader. Keys that find it full go to group_other.
 * Preallocated: a no-prealloc map allocates from a per-CPU cache that
 * holds only a few objects of this size, so a new process's first
 * distinct syscalls would find it empty and land in group_other. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct ss_group_key);
	__type(value, struct ss_sc_stats);
} group_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SS_MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, struct ss_sc_stats);
} group_other SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the loader */
} events SEC(".maps");

/*
 * Ring buffer records are committed without a wakeup: a wakeup is an
 * irq_work self-IPI, which costs tens of microseconds in a VM, on the
 * forking or exiting task. The loader drains the buffer on its own timer;
 * only a buffer filling up forces a wakeup.
 */
static __always_inline __u64 rb_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ringbuf_wake_bytes ?
		       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline __u32 errno_slot(long ret)
{
	long e = -ret;

	if (e < SS_ERRNO_DIRECT)
		return e;
	if (e >= SS_ERRNO_RESTART_BASE &&
	    e < SS_ERRNO_RESTART_BASE + (SS_ERRNO_SLOTS - SS_ERRNO_DIRECT))
		return SS_ERRNO_DIRECT + (e - SS_ERRNO_RESTART_BASE);
	return 0;
}

static __always_inline void count_event(void)
{
	cpu_events[bpf_get_smp_processor_id() & (SS_MAX_CPUS - 1)].n++;
}

/* Clock reads of a timed run: t0, t1 back to back at entry (t1 - t0 is
 * what one read costs), t2 at the return. */
struct run_clock {
	__u64 t0;
	__u64 t1;
};

static __always_inline void clock_start(struct run_clock *c)
{
	c->t0 = bpf_ktime_get_ns();
	c->t1 = bpf_ktime_get_ns();
}

/* Adds one timed run to this CPU's sums (plain stores: the programs run
 * with migration disabled and do not nest on one CPU for one tracepoint). */
static __always_inline void clock_end(struct run_clock *c, struct ss_prog_cost *p, bool traced)
{
	__u64 t2 = bpf_ktime_get_ns();

	if (traced) {
		p->traced_runs++;
		p->traced_ns += t2 - c->t1;
	} else {
		p->filtered_runs++;
		p->filtered_ns += t2 - c->t1;
	}
	p->clock_ns += c->t1 - c->t0;
}

static __always_inline struct ss_cpu_cost *cpu_cost_here(void)
{
	return &cpu_cost[bpf_get_smp_processor_id() & (SS_MAX_CPUS - 1)];
}

static __always_inline __u32 clamp_nr(long id)
{
	return (id >= 0 && id < SS_OTHER_SYSCALL) ? (__u32)id : SS_OTHER_SYSCALL;
}

static __always_inline struct ss_thread_sc *thread_sc(struct task_struct *task, __u32 nr)
{
	struct ss_thread_stats *ts;

	ts = bpf_task_storage_get(&thread_stats, task, 0, 0);
	if (!ts || nr >= SS_MAX_SYSCALLS)
		return 0;
	return &ts->sc[nr];
}

/* The group the current task's event belongs to (--by). */
static __always_inline void group_key_of(struct task_struct *task, struct ss_group_key *k, __u32 nr)
{
	k->a = 0;
	k->b = 0;
	k->nr = nr;
	k->pad = 0;
	if (by_mode == SS_BY_PROCESS) {
		k->a = task->tgid;
	} else if (by_mode == SS_BY_COMM) {
		const __u64 *c = (const __u64 *)task->group_leader->comm;

		k->a = c[0];
		k->b = c[1];
	} else {
		k->a = bpf_get_current_cgroup_id();
	}
}

/* This CPU's per-group aggregate of the current event's group and syscall,
 * created on first use; the overflow slot once the series limit is hit. */
static __always_inline struct ss_sc_stats *group_stats_of(struct task_struct *task, __u32 nr)
{
	struct ss_group_key k;
	struct ss_sc_stats *s;

	group_key_of(task, &k, nr);
	s = bpf_map_lookup_elem(&group_stats, &k);
	if (s)
		return s;
	/* EEXIST (another CPU created it meanwhile) is fine: look up again. */
	bpf_map_update_elem(&group_stats, &k, &zero_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&group_stats, &k);
	if (s)
		return s;
	return bpf_map_lookup_elem(&group_other, &nr);
}

/* Adds one timed call to an aggregate. */
static __always_inline void add_timed(struct ss_sc_stats *s, __u64 dur, long ret)
{
	__u32 b;

	if (s->calls == 0 || dur < s->min_ns)
		s->min_ns = dur;
	if (dur > s->max_ns)
		s->max_ns = dur;
	s->calls++;
	s->total_ns += dur;
	b = hist_bucket(dur);
	if (b < SS_HIST_BUCKETS)
		s->hist[b]++;
	if (ret < 0 && ret >= -4095)
		s->errors++;
}

/* Calls that never return (exit, exit_group) and every call in count-only
 * mode are counted at entry. */
static __always_inline void count_entry(struct task_struct *task, struct ss_task *t, __u32 nr)
{
	struct ss_sc_stats *s = bpf_map_lookup_elem(&sc_stats, &nr);

	if (s)
		s->calls++;
	if (by_mode != SS_BY_NONE) {
		struct ss_sc_stats *g = group_stats_of(task, nr);

		if (g)
			g->calls++;
	}
	t->sc.calls++;
	count_event();
	if (per_thread) {
		struct ss_thread_sc *t = thread_sc(task, nr);

		if (t)
			t->calls++;
	}
}

/* Scope modes: is the current task one to trace? Decided at every entry,
 * so a task that joins the cgroup, or takes the name, later is traced from
 * then on, and one that leaves is not. */
static __always_inline bool in_scope(struct task_struct *task)
{
	return task->tgid != self_tgid && in_named_scope(task);
}

static __always_inline void read_res(struct task_struct *task, struct ss_res *r);
static __always_inline __u32 alloc_slot(void);
static __always_inline void start_thread_stats(struct task_struct *task, __u32 slot);

/* Scope modes: a task's first in-scope syscall gives it its storage, its
 * resource baseline and its slot, and tells the loader who it is. */
static __always_inline struct ss_task *join(struct task_struct *task)
{
	struct ss_ev_fork *e;
	struct ss_task *t;

	t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t || (t->flags & SS_JOINED))
		return t;
	t->flags |= SS_JOINED;
	read_res(task, &t->base);
	t->slot = alloc_slot();
	start_thread_stats(task, t->slot);
	__sync_fetch_and_add(&counters.joined, 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		return t;
	}
	e->type = SS_EV_REGISTERED;
	e->tid = task->pid;
	e->tgid = task->tgid;
	e->parent_tid = 0;
	e->slot = t->slot;
	e->is_thread = task->pid != task->tgid;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	bpf_ringbuf_submit(e, rb_flags());
	return t;
}

/* The entry hook's work; true when the run was on a traced task's event,
 * false when it only filtered the syscall out. */
static __always_inline bool enter_work(long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_task *t;
	__u32 nr;

	if (scope_mode == SS_SCOPE_CGROUP) {
		/* Membership is cached in the task's storage (every task that
		 * makes a syscall gets one) and re-checked only after a cgroup
		 * migration somewhere: the ancestor lookup costs more than the
		 * storage lookup every path pays anyway. */
		__u32 gen = scope_gen;

		t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return false;
		if (!(t->flags & SS_CHECKED) || t->gen != gen) {
			bool member = in_scope(task);

			t->flags = (t->flags & ~SS_MEMBER) | SS_CHECKED | (member ? SS_MEMBER : 0);
			t->gen = gen;
		}
		if (!(t->flags & SS_MEMBER))
			return false;
		if (!(t->flags & SS_JOINED))
			t = join(task);
		if (!t)
			return false;
	} else if (scope_mode != SS_SCOPE_TREE) {
		/* The scope test first: it is cheaper than a storage lookup
		 * for the (many) tasks outside it. */
		if (!in_scope(task))
			return false;
		t = bpf_task_storage_get(&tasks, task, 0, 0);
		if (!t || !(t->flags & SS_JOINED))
			t = join(task);
		if (!t)
			return false;
	} else {
		t = bpf_task_storage_get(&tasks, task, 0, 0);
		if (!t)
			return false;
	}
	/* After the window (the slow-path calibration re-attaches this
	 * program): a traced task still running pays a lookup, not the
	 * traced path. Untraced tasks never get here, so the filter runs the
	 * calibration times are the window's own. */
	if (window_closed)
		return false;
	if (t->flags & SS_PENDING_EXEC) {
		/* The launched child is registered while it waits on a pipe;
		 * its own life starts with execve. */
		if (id != NR_execve && id != NR_execveat)
			return false;
		t->flags &= ~SS_PENDING_EXEC;
	}
	nr = clamp_nr(id);
	if (count_only || nr == NR_exit || nr == NR_exit_group) {
		count_entry(task, t, nr);
		t->ts = 0;
		return true;
	}
	t->nr = nr;
	t->ts = bpf_ktime_get_ns();
	return true;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(ss_sys_enter, struct pt_regs *regs, long id)
{
	struct run_clock c;
	bool traced;

	if (!cost_on) {
		enter_work(id);
		return 0;
	}
	clock_start(&c);
	traced = enter_work(id);
	clock_end(&c, &cpu_cost_here()->enter, traced);
	return 0;
}

/* The exit hook's work; true when the run recorded a traced event. */
static __always_inline bool exit_work(long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_sc_stats *s;
	struct ss_task *t;
	__u64 now, dur;
	__u32 nr;

	t = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!t || !t->ts)
		return false; /* untraced, or its entry predates the attach */
	now = bpf_ktime_get_ns();
	dur = now - t->ts;
	t->ts = 0;
	nr = t->nr;
	if (nr >= SS_MAX_SYSCALLS)
		return true;

	s = bpf_map_lookup_elem(&sc_stats, &nr);
	if (!s)
		return true;
	add_timed(s, dur, ret);
	if (by_mode != SS_BY_NONE) {
		struct ss_sc_stats *g = group_stats_of(task, nr);

		if (g)
			add_timed(g, dur, ret);
	}
	t->sc.calls++;
	t->sc.time_ns += dur;
	count_event();

	if (ret < 0 && ret >= -4095) {
		struct ss_errno_counts *e = bpf_map_lookup_elem(&sc_errnos, &nr);
		__u32 slot = errno_slot(ret);

		t->sc.errors++;
		if (e && slot < SS_ERRNO_SLOTS)
			e->n[slot]++;
	}

	if (per_thread) {
		struct ss_thread_sc *tsc = thread_sc(task, nr);

		if (tsc) {
			tsc->calls++;
			tsc->total_ns += dur;
			if (ret < 0 && ret >= -4095)
				tsc->errors++;
		}
	}
	return true;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ss_sys_exit, struct pt_regs *regs, long ret)
{
	struct run_clock c;
	bool traced;

	if (!cost_on) {
		exit_work(ret);
		return 0;
	}
	clock_start(&c);
	traced = exit_work(ret);
	clock_end(&c, &cpu_cost_here()->exit, traced);
	return 0;
}

static __always_inline void read_res(struct task_struct *task, struct ss_res *r)
{
	r->utime_ns = BPF_CORE_READ(task, utime);
	r->stime_ns = BPF_CORE_READ(task, stime);
	r->runtime_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
	r->nvcsw = BPF_CORE_READ(task, nvcsw);
	r->nivcsw = BPF_CORE_READ(task, nivcsw);
	r->min_flt = BPF_CORE_READ(task, min_flt);
	r->maj_flt = BPF_CORE_READ(task, maj_flt);
}

/* `now` less the task's baseline, into r. */
static __always_inline void res_since(const struct ss_res *now, const struct ss_task *t,
				      struct ss_res *r)
{
	*r = *now;
	if (t->flags & SS_NEED_BASELINE)
		return; /* userspace discards it: no baseline to subtract */
	r->utime_ns -= t->base.utime_ns;
	r->stime_ns -= t->base.stime_ns;
	r->runtime_ns -= t->base.runtime_ns;
	r->nvcsw -= t->base.nvcsw;
	r->nivcsw -= t->base.nivcsw;
	r->min_flt -= t->base.min_flt;
	r->maj_flt -= t->base.maj_flt;
}

static __always_inline void window_res(struct task_struct *task, struct ss_task *t,
				       struct ss_res *r)
{
	struct ss_res now;

	read_res(task, &now);
	res_since(&now, t, r);
}

static __always_inline __u32 alloc_slot(void)
{
	__u32 s;

	if (!per_thread)
		return 0;
	s = __sync_fetch_and_add(&counters.slots_used, 1) + 1;
	return s < max_slots ? s : 0;
}

static __always_inline void start_thread_stats(struct task_struct *task, __u32 slot)
{
	struct ss_thread_stats *ts;

	if (!per_thread)
		return;
	ts = bpf_task_storage_get(&thread_stats, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts) {
		ts->type = SS_EV_THREAD_STATS;
		ts->slot = slot;
	}
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ss_fork, struct task_struct *parent, struct task_struct *child)
{
	struct ss_task *pt, *ct;
	struct ss_ev_fork *e;
	bool thread;

	/* In a scope mode a child is traced when it is in scope, which the
	 * entry hook decides at its first syscall. */
	if (scope_mode != SS_SCOPE_TREE)
		return 0;
	pt = bpf_task_storage_get(&tasks, parent, 0, 0);
	if (!pt)
		return 0;
	thread = BPF_CORE_READ(child, tgid) == BPF_CORE_READ(parent, tgid);
	if (!thread && !follow_forks)
		return 0;
	ct = bpf_task_storage_get(&tasks, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ct)
		return 0;
	/* A new task starts with zeroed counters: its baseline is zero. */
	ct->ts = 0;
	ct->flags = 0;
	ct->sc.calls = 0;
	ct->sc.errors = 0;
	ct->sc.time_ns = 0;
	ct->slot = alloc_slot();
	start_thread_stats(child, ct->slot);
	if (thread)
		__sync_fetch_and_add(&counters.threads_created, 1);
	else
		__sync_fetch_and_add(&counters.processes_created, 1);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		return 0;
	}
	e->type = SS_EV_FORK;
	e->tid = BPF_CORE_READ(child, pid);
	e->tgid = BPF_CORE_READ(child, tgid);
	e->parent_tid = BPF_CORE_READ(parent, pid);
	e->slot = ct->slot;
	e->is_thread = thread;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}

/*
 * Peak RSS of the task's address space, as /proc's VmHWM computes it:
 * max(hiwater_rss, current file + anon + shmem pages). Since Linux 6.16 the
 * exit tracepoint runs before exit_mm(), so the mm is still there; on older
 * kernels it is gone and we fall back to signal->maxrss (which exec seeds
 * with the pre-exec image, so it can overstate a launched command).
 */
static __always_inline __u64 mm_peak_pages(struct task_struct *task)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	__u64 hiwater, rss = 0;

	if (!mm)
		return BPF_CORE_READ(task, signal, maxrss);
	hiwater = BPF_CORE_READ(mm, hiwater_rss);
	if (bpf_core_field_exists(mm->rss_stat[0].count)) {
		__s64 file = BPF_CORE_READ(mm, rss_stat[0].count);
		__s64 anon = BPF_CORE_READ(mm, rss_stat[1].count);
		__s64 shmem = BPF_CORE_READ(mm, rss_stat[3].count);
		__s64 sum = file + anon + shmem;

		rss = sum > 0 ? sum : 0;
	}
	return hiwater > rss ? hiwater : rss;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ss_exit, struct task_struct *task)
{
	struct ss_thread_stats *ts;
	struct ss_res now;
	struct ss_ev_task *e;
	struct ss_task *t;

	t = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!t || window_closed)
		return 0;
	/* Cgroup scope: tasks outside it have storage too (their cached
	 * membership); only those that entered the trace report. */
	if (scope_mode != SS_SCOPE_TREE && !(t->flags & SS_JOINED))
		return 0;
	__sync_fetch_and_add(&counters.exits, 1);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		return 0;
	}
	e->type = SS_EV_EXIT;
	e->tid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->slot = t->slot;
	e->flags = t->flags;
	e->group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	e->maxrss_pages = mm_peak_pages(task);
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	read_res(task, &now);
	res_since(&now, t, &e->res);
	e->sc = t->sc;
	bpf_ringbuf_submit(e, rb_flags());
	/* A zombie is still listed by the task iterator: don't count it twice.
	 * The counters just reported become the baseline of its exit tail. */
	t->flags |= SS_EXITED;
	t->base = now;

	if (per_thread) {
		ts = bpf_task_storage_get(&thread_stats, task, 0, 0);
		if (ts && bpf_ringbuf_output(&events, ts, sizeof(*ts), rb_flags()))
			__sync_fetch_and_add(&counters.ringbuf_drops, 1);
	}
	return 0;
}

/* TASK_DEAD (include/linux/sched.h, a #define, so not in BTF): the state
 * do_task_dead() sets before a task's last __schedule(). */
#define SS_TASK_DEAD 0x00000080

/*
 * A traced task's last context switch: its CPU time is final here. The
 * exit record above undercounts it, twice over: the scheduler adds a
 * running task's time to se.sum_exec_runtime only at a tick, a context
 * switch or a wakeup on its CPU (update_curr), so a thread that lives less
 * than a tick can reach the exit tracepoint with almost nothing added; and
 * the rest of do_exit (exit_mm, exit_files, exit_notify, release_task)
 * runs after it. By this tracepoint __schedule() has dequeued the task,
 * which ran update_curr, so the difference is sent as a tail record.
 * Runs on every context switch of the machine: the state test comes first
 * and costs one load and a compare.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(ss_exit_tail, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct ss_ev_task *e;
	struct ss_task *t;

	if (prev->__state != SS_TASK_DEAD)
		return 0;
	t = bpf_task_storage_get(&tasks, prev, 0, 0);
	/* Only after an exit record that had a baseline (SS_EXITED is set once
	 * it is out, inside the window). */
	if (!t || (t->flags & (SS_EXITED | SS_NEED_BASELINE)) != SS_EXITED)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = SS_EV_EXIT_TAIL;
	e->tid = prev->pid;
	e->tgid = prev->tgid;
	e->slot = t->slot;
	e->flags = t->flags;
	window_res(prev, t, &e->res);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}

struct zero_ctx {
	struct ss_thread_stats *ts;
};

static long zero_thread_sc(__u64 i, void *ctx)
{
	struct ss_thread_stats *ts = ((struct zero_ctx *)ctx)->ts;

	if (ts && i < SS_MAX_SYSCALLS) {
		ts->sc[i].calls = 0;
		ts->sc[i].errors = 0;
		ts->sc[i].total_ns = 0;
	}
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ss_exec, struct task_struct *task)
{
	struct ss_thread_stats *ts;
	struct zero_ctx zc;
	struct ss_ev_exec *e;
	struct ss_task *t;
	__u32 old_slot = 0, new_slot = 0;

	t = bpf_task_storage_get(&tasks, task, 0, 0);
	/* Scope modes give every task they look at storage; only those that
	 * joined are traced. */
	if (!t || (scope_mode != SS_SCOPE_TREE && !(t->flags & SS_JOINED)))
		return 0;
	ts = per_thread ? bpf_task_storage_get(&thread_stats, task, 0, 0) : 0;
	if (ts) {
		old_slot = t->slot;
		if (bpf_ringbuf_output(&events, ts, sizeof(*ts), rb_flags()))
			__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		/* bpf_loop: clang would turn a plain loop into a memset BPF lacks */
		zc.ts = ts;
		bpf_loop(SS_MAX_SYSCALLS, zero_thread_sc, &zc, 0);
		t->slot = alloc_slot();
		ts->slot = t->slot;
		new_slot = t->slot;
	}

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.ringbuf_drops, 1);
		return 0;
	}
	e->type = SS_EV_EXEC;
	e->tid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->old_slot = old_slot;
	e->new_slot = new_slot;
	e->split = ts != 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(ss_cgroup_attach, struct cgroup *dst, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	__sync_fetch_and_add(&scope_gen, 1);
	return 0;
}

/*
 * Run by the loader, once after registering the initial tasks
 * (SS_ITER_BASELINE: record each one's counters as its baseline, give it a
 * per-thread slot) and once when the window closes (SS_ITER_END: emit the
 * in-window usage of every traced task still alive, plus its per-thread
 * table).
 */
SEC("iter/task")
int ss_iter_task(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct ss_thread_stats *ts;
	struct ss_ev_task e = {};
	struct ss_task *t;

	if (!task)
		return 0;
	t = bpf_task_storage_get(&tasks, task, 0, 0);
	if (!t)
		return 0;

	if (iter_mode == SS_ITER_BASELINE) {
		struct ss_ev_fork r = {};

		if (!(t->flags & SS_NEED_BASELINE))
			return 0;
		read_res(task, &t->base);
		t->flags &= ~SS_NEED_BASELINE;
		t->slot = alloc_slot();
		start_thread_stats(task, t->slot);
		r.type = SS_EV_REGISTERED;
		r.tid = task->pid;
		r.tgid = task->tgid;
		r.slot = t->slot;
		bpf_probe_read_kernel_str(r.comm, sizeof(r.comm), task->comm);
		bpf_seq_write(seq, &r, sizeof(r));
		return 0;
	}
	if ((iter_mode != SS_ITER_END && iter_mode != SS_ITER_PEEK) || (t->flags & SS_EXITED))
		return 0;
	if (scope_mode != SS_SCOPE_TREE && !(t->flags & SS_JOINED))
		return 0;

	e.type = SS_EV_LIVE;
	e.tid = task->pid;
	e.tgid = task->tgid;
	e.slot = t->slot;
	e.flags = t->flags;
	bpf_probe_read_kernel_str(e.comm, sizeof(e.comm), task->comm);
	window_res(task, t, &e.res);
	e.sc = t->sc;
	bpf_seq_write(seq, &e, sizeof(e));
	if (per_thread && iter_mode == SS_ITER_END) {
		ts = bpf_task_storage_get(&thread_stats, task, 0, 0);
		if (ts)
			bpf_seq_write(seq, ts, sizeof(*ts));
	}
	return 0;
}
