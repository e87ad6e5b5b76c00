/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The target's scope, for every program that follows it by process,
 * cgroup or name: the loader's settings and the cgroup/name/system test
 * (syscalls.bpf.c, anatomy.bpf.c, stacks.bpf.c); and, unless
 * SS_SCOPE_NO_TREE is defined, the tree of processes with its fork and
 * exit steps (the anatomy and the stack sampler; the tracer marks its
 * members in its task storage instead). Included after vmlinux.h and
 * libbpf's headers.
 */
#ifndef SOCKSCOPE_SCOPE_H
#define SOCKSCOPE_SCOPE_H

/* Set by the loader before load (see enum ss_scope_mode): the cgroup's
 * id and depth, or the name as two words of NUL-padded bytes, and
 * sockscope's own tgid (never in scope: its own reads would be counted). */
const volatile enum ss_scope_mode scope_mode = SS_SCOPE_TREE;
const volatile __u64 scope_cgroup_id = 0;
const volatile __u32 scope_cgroup_level = 0;
const volatile __u64 scope_comm_lo = 0;
const volatile __u64 scope_comm_hi = 0;
const volatile __u32 self_tgid = 0;

/* The cgroup, name and system scopes' test of a task (the current one,
 * for the cgroup test), decided at each event, so that a task that joins
 * the cgroup or takes the name later is in scope from then on; true in
 * the system scope (and in the tree scope, which is tested apart). */
static __always_inline bool in_named_scope(struct task_struct *task)
{
	if (scope_mode == SS_SCOPE_CGROUP)
		return bpf_get_current_ancestor_cgroup_id(scope_cgroup_level) == scope_cgroup_id;
	if (scope_mode == SS_SCOPE_COMM) {
		/* Two direct 8-byte loads through the BTF pointer, no helper. */
		const __u64 *c = (const __u64 *)task->group_leader->comm;

		return c[0] == scope_comm_lo && c[1] == scope_comm_hi;
	}
	return true;
}

#ifndef SS_SCOPE_NO_TREE
/* Tree scope: the processes (tgids) of the target's tree. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tree SEC(".maps");

/* Is this task (the current one, for the cgroup test) one of the
 * target's? Never sockscope itself, never an idle task. */
static __always_inline bool in_scope(struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (tgid == self_tgid || task->pid == 0)
		return false;
	if (scope_mode == SS_SCOPE_TREE)
		return bpf_map_lookup_elem(&tree, &tgid) != 0;
	return in_named_scope(task);
}

/* Tree scope: a process forked by one of the tree's joins it. True when
 * it joined. */
static __always_inline bool tree_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (scope_mode != SS_SCOPE_TREE || ptgid == ctgid)
		return false;
	if (!bpf_map_lookup_elem(&tree, &ptgid))
		return false;
	bpf_map_update_elem(&tree, &ctgid, &one, BPF_ANY);
	return true;
}

/* Tree scope: a process whose last thread exits leaves the tree (its pid
 * may be reused by an unrelated process); true when it left. do_exit
 * drops signal->live before sched_process_exit: 0 once the whole group is
 * exiting. */
static __always_inline bool tree_exit(struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (scope_mode != SS_SCOPE_TREE || p->signal->live.counter != 0)
		return false;
	return bpf_map_delete_elem(&tree, &tgid) == 0;
}

#endif /* SS_SCOPE_NO_TREE */

#endif
