/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Layouts and values shared by relay.bpf.c and src/serve/relay/sockmap.rs,
 * which uses the skeleton's generated twins (libbpf-cargo, from the
 * object's BTF): values are enums, which reach BTF, not #defines.
 */
#ifndef SOCKSCOPE_RELAY_H
#define SOCKSCOPE_RELAY_H

/* relay_peer.tainted: where a socket's data goes. */
enum relay_taint {
	RELAY_CLEAN = 0,    /* redirected to its peer by the verdict */
	RELAY_TAINTED = 1,  /* a redirect failed once: its own receive queue, for good */
};

/* peers[cookie]: the socket's peer, the payload bytes the verdict
 * redirected from this socket to it (exact: a FIN is no byte here, unlike
 * in tcpi_bytes_received), and whether its data now goes through userspace
 * (a redirect failed once). */
struct relay_peer {
	__u64 peer;
	__u64 redirected_bytes;
	enum relay_taint tainted;
	__u32 pad;
};

/* Verdict counters, one per CPU (plain increments: per-CPU slot, and the
 * verdict runs in softirq with preemption disabled). */
struct relay_stats {
	__u64 redirected_skbs;
	__u64 redirected_bytes;
	__u64 passed_skbs;
	__u64 passed_bytes;
	__u64 misses;
	__u64 empty_skbs;   /* payload-less skbs (a bare FIN), dropped */
};

#endif /* SOCKSCOPE_RELAY_H */
