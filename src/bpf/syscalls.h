/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Layouts and constants shared by syscalls.bpf.c and the Rust loader
 * (src/trace/bpf/); those every object shares are in common.h. The Rust side uses the skeleton's generated twins of
 * these structs and enums (libbpf-cargo, from the object's BTF), so it
 * holds no copy that could drift.
 */
#ifndef SOCKSCOPE_SYSCALLS_H
#define SOCKSCOPE_SYSCALLS_H

#include "common.h"

/*
 * Constants are enums, not #defines: enums reach the object's BTF, so the
 * skeleton generator (libbpf-cargo) emits them into the Rust `types` module
 * (`types::ss_limits::SS_MAX_SYSCALLS.0`) and the loader copies no value by
 * hand. An enum that no struct field or global uses would not reach BTF:
 * syscalls.bpf.c keeps those with an unused global (layout_* there).
 */
enum ss_limits {
	/* Syscall numbers 0..SS_MAX_SYSCALLS-2 get their own slot; anything
	 * larger (x32 ABI bit, future syscalls) lands in the last slot. */
	SS_MAX_SYSCALLS = 512,
	SS_OTHER_SYSCALL = SS_MAX_SYSCALLS - 1,

	/* errno slots per syscall: 1..149 are errno values as is; the
	 * kernel's internal restart codes 512..521 (ERESTARTSYS...) seen at
	 * sys_exit go to 150..159; slot 0 collects anything else. */
	SS_ERRNO_SLOTS = 160,
	SS_ERRNO_DIRECT = 150,
	SS_ERRNO_RESTART_BASE = 512,
};

/* ss_task.flags (bits) */
enum ss_task_flags {
	SS_PENDING_EXEC = 1,   /* launched child: count nothing before its execve */
	SS_NEED_BASELINE = 2,  /* resource baseline not taken yet (see iter pass) */
	SS_EXITED = 4,         /* its exit record is out: the end pass skips it */
	SS_JOINED = 8,         /* scope mode: entered at its first in-scope syscall */
	SS_CHECKED = 16,       /* cgroup scope: membership below is valid for `gen` */
	SS_MEMBER = 32,        /* cgroup scope: in the cgroup when last checked */
};


/* How the per-group aggregates are keyed (.rodata by_mode). */
enum ss_by_mode {
	SS_BY_NONE = 0,
	SS_BY_PROCESS = 1,     /* tgid */
	SS_BY_COMM = 2,        /* thread-group leader's comm */
	SS_BY_CGROUP = 3,      /* cgroup v2 id */
};

/* values of the .bss global iter_mode */
enum ss_iter_mode {
	SS_ITER_IDLE = 0,
	SS_ITER_BASELINE = 1,
	SS_ITER_END = 2,
	SS_ITER_PEEK = 3,      /* like END, but the window stays open */
};

/* ring buffer / iterator record types: the first field of every record */
enum ss_event_type {
	SS_EV_FORK = 1,
	SS_EV_EXIT = 2,
	SS_EV_THREAD_STATS = 3,
	SS_EV_LIVE = 4,
	SS_EV_EXEC = 5,
	SS_EV_REGISTERED = 6,  /* iterator: a registered task got its slot */
	SS_EV_EXIT_TAIL = 7,   /* usage between a task's exit record and its end */
};

/* Per-syscall aggregate, one per CPU (per-CPU array indexed by number). */
/* Errors of one syscall by errno slot (see SS_ERRNO_SLOTS). */
struct ss_errno_counts {
	__u64 n[SS_ERRNO_SLOTS];
};

struct ss_sc_stats {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 hist[SS_HIST_BUCKETS];
};

/* Key of the per-group aggregates: the group (tgid in `a`; a comm's 16
 * bytes in `a` and `b`; a cgroup id in `a`) and the syscall number. */
struct ss_group_key {
	__u64 a;
	__u64 b;
	__u32 nr;
	__u32 pad;
};

/* Resource counters of one task, as the kernel keeps them in task_struct. */
struct ss_res {
	__u64 utime_ns;    /* tick-sampled; only their ratio is used */
	__u64 stime_ns;
	__u64 runtime_ns;  /* se.sum_exec_runtime: precise CPU time */
	__u64 nvcsw;
	__u64 nivcsw;
	__u64 min_flt;
	__u64 maj_flt;
};

/* One task's syscalls since it was traced: every syscall the aggregates
 * count, summed per task so the loader can split them by process. Kept in
 * the task's own storage next to `ts` (plain stores, no sharing). */
struct ss_task_sc {
	__u64 calls;
	__u64 errors;      /* -1..-4095 returns (0 in count-only mode) */
	__u64 time_ns;     /* entry-to-exit time (0 in count-only mode) */
};

/* Per-task state in task local storage: its presence means "traced". */
struct ss_task {
	__u64 ts;          /* entry time of the syscall in flight, 0 if none seen */
	__u32 nr;          /* its number, recorded at entry */
	__u32 flags;
	__u32 slot;        /* per-thread slot, 0 = unassigned */
	__u32 gen;         /* cgroup scope: scope_gen when membership was checked */
	struct ss_task_sc sc;
	struct ss_res base; /* counters when the window opened for this task */
};

/* Per-thread totals for one syscall (--per-thread only). */
struct ss_thread_sc {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
};

/* Per-thread table in its own task storage map. It starts with a record
 * header so the exit hook can copy it to the ring buffer as is. */
struct ss_thread_stats {
	enum ss_event_type type; /* SS_EV_THREAD_STATS */
	__u32 slot;
	struct ss_thread_sc sc[SS_MAX_SYSCALLS];
};

/* A task was created by a traced task (ring buffer, SS_EV_FORK), or a task
 * registered by the loader got its baseline and slot (iterator,
 * SS_EV_REGISTERED, parent_tid 0). */
struct ss_ev_fork {
	enum ss_event_type type;
	__u32 tid;
	__u32 tgid;
	__u32 parent_tid;
	__u32 slot;
	__u32 is_thread;
	char comm[SS_COMM_LEN];
};

/* A traced task called execve: its new name, which names its process from
 * then on (--by process). With --per-thread its table so far was emitted
 * under old_slot, and it continues under new_slot (both 0 otherwise):
 * splitting the row at exec keeps a shell's own calls apart from the
 * program it runs. */
struct ss_ev_exec {
	enum ss_event_type type; /* SS_EV_EXEC */
	__u32 tid;
	__u32 tgid;
	__u32 old_slot;
	__u32 new_slot;
	__u32 split;   /* 1: --per-thread ended the row at old_slot here */
	char comm[SS_COMM_LEN];
};

/* A traced task exited (ring buffer, SS_EV_EXIT) or is alive at the end
 * of the window (iterator, SS_EV_LIVE). `res` is the usage inside the
 * window: counters now minus the task's baseline.
 * SS_EV_EXIT_TAIL (ring buffer) follows an exit record of the same tid:
 * `res` is what the task used from that record to its last context switch
 * (the rest of do_exit, and run time the scheduler had not yet added to
 * sum_exec_runtime when the exit record read it); comm, sc, group_dead
 * and maxrss_pages are zero. */
struct ss_ev_task {
	enum ss_event_type type;
	__u32 tid;
	__u32 tgid;
	__u32 slot;
	__u32 flags;       /* ss_task.flags at that moment */
	__u32 group_dead;  /* last thread of its process (exit only) */
	__u64 maxrss_pages; /* peak RSS of its mm at exit (exit only) */
	char comm[SS_COMM_LEN];
	struct ss_res res;
	struct ss_task_sc sc; /* its syscalls since it was traced */
};

/* Traced syscall events counted on one CPU (one cache line). */
struct ss_cpu_events {
	__u64 n;
	__u64 pad[7];
};

/*
 * The syscall programs timing themselves, during the self-cost slices only
 * (.bss cost_on set by the loader). Each timed run reads the clock three
 * times: t0 and t1 back to back at entry, t2 at its return, so t1 - t0 is
 * the cost of one read and (t2 - t1) - (t1 - t0) the run's own work.
 * "traced" runs are those on a traced task's event; "filtered" runs are
 * those that only found the task untraced (or not counting yet) and left.
 */
struct ss_prog_cost {
	__u64 traced_runs;
	__u64 traced_ns;    /* sum of t2 - t1 over traced runs */
	__u64 filtered_runs;
	__u64 filtered_ns;  /* sum of t2 - t1 over filtered runs */
	__u64 clock_ns;     /* sum of t1 - t0 over all timed runs */
	__u64 pad[3];
};

/* Both syscall programs' timing on one CPU (a cache line each). */
struct ss_cpu_cost {
	struct ss_prog_cost enter;
	struct ss_prog_cost exit;
};

/* Counters kept in .bss by the fork/exit hooks (not on the syscall path). */
struct ss_counters {
	__u64 threads_created;
	__u64 processes_created;
	__u64 exits;
	__u64 ringbuf_drops;
	__u64 slots_used;
	__u64 joined;          /* scope mode: tasks that entered the trace */
};

#endif /* SOCKSCOPE_SYSCALLS_H */
