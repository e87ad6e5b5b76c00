/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The target's scope, for the programs that follow it by process, cgroup
 * or name (anatomy.bpf.c, stacks.bpf.c): the loader's settings, the tree
 * of processes, the membership test and the tree's fork and exit steps.
 * syscalls.bpf.c keeps its own: it marks members in its task storage.
 * Included after vmlinux.h and libbpf's headers.
 */
#ifndef SOCKSCOPE_SCOPE_H
#define SOCKSCOPE_SCOPE_H

/* Set by the loader before load (see syscalls.bpf.c for their meaning). */
const volatile enum ss_scope_mode scope_mode = SS_SCOPE_TREE;
const volatile __u64 scope_cgroup_id = 0;
const volatile __u32 scope_cgroup_level = 0;
const volatile __u64 scope_comm_lo = 0;
const volatile __u64 scope_comm_hi = 0;
const volatile __u32 self_tgid = 0;

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
	if (scope_mode == SS_SCOPE_CGROUP)
		return bpf_get_current_ancestor_cgroup_id(scope_cgroup_level) == scope_cgroup_id;
	if (scope_mode == SS_SCOPE_COMM) {
		const __u64 *c = (const __u64 *)task->group_leader->comm;

		return c[0] == scope_comm_lo && c[1] == scope_comm_hi;
	}
	return true;
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

#endif
