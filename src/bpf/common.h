/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Constants every BPF object of sockscope shares (the syscall tracer, the
 * request anatomy, the stack sampler): the latency histogram's layout, the
 * per-CPU slots, the name length and the scope's modes. Each object's own
 * header (syscalls.h, anatomy.h, stacks.h) includes this one; none includes
 * another object's header. The Rust side reads the values from each
 * skeleton's generated twin (`types::ss_common_limits`) and checks them
 * against src/probe/ at compile time (the `*::abi` modules).
 */
#ifndef SOCKSCOPE_COMMON_H
#define SOCKSCOPE_COMMON_H

/*
 * Constants are enums, not #defines: enums reach the object's BTF, so the
 * skeleton generator (libbpf-cargo) emits them into the Rust `types`
 * module and no loader copies a value by hand. An enum that no struct
 * field or global uses would not reach BTF: each object keeps the ones its
 * loader reads with an unused global (layout_*).
 */
enum ss_common_limits {
	/* Log-linear latency histogram: values 0..7 ns exact, then 8
	 * sub-buckets per power of two (bucket width <= 1/8 of its lower
	 * bound, so a value reported as the bucket middle is within 6.25%).
	 * 320 buckets reach 2^42 ns (73 minutes); longer values land in the
	 * last bucket. See hist.h and src/probe/hist.rs. */
	SS_HIST_SUB_BITS = 3,
	SS_HIST_SUB = 1 << SS_HIST_SUB_BITS,
	SS_HIST_BUCKETS = 320,

	SS_COMM_LEN = 16,

	/* Per-CPU counters in .bss, a cache line each, indexed by CPU id
	 * modulo this (ids past it share a line: a few increments could then
	 * be lost). */
	SS_MAX_CPUS = 256,
};

/* What decides which tasks are followed (.rodata scope_mode, scope.h). */
enum ss_scope_mode {
	SS_SCOPE_TREE = 0,     /* tasks registered by the loader, and their children */
	SS_SCOPE_CGROUP = 1,   /* tasks in a cgroup v2 directory or below it */
	SS_SCOPE_COMM = 2,     /* tasks whose thread-group leader has this name */
	SS_SCOPE_SYSTEM = 3,   /* every task but sockscope's own */
};

#endif /* SOCKSCOPE_COMMON_H */
