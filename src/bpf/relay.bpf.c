// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * sockscope serve relay --mode sockmap: every relayed TCP socket sits in a
 * SOCKHASH keyed by its socket cookie, and this stream verdict program
 * (no parser) redirects each incoming skb to the egress of the socket's
 * peer, so payload never crosses into userspace.
 *
 * Ordering rules, which the loader relies on:
 *  - `peers` holds, for each socket cookie, the peer's cookie. The loader
 *    fills it for both sockets before inserting either into `socks`.
 *  - If the redirect fails (the peer is not in `socks` yet, or any more),
 *    the skb goes to the socket's own receive path (SK_PASS) and the
 *    direction is marked tainted: from then on every skb of that socket
 *    takes the same path, so userspace relays that direction and no byte
 *    is lost, dropped, or overtaken by a later redirected one. A redirect
 *    miss returning SK_DROP would drop bytes TCP already acknowledged.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "relay.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536); /* resized by the loader */
	__type(key, __u64);
	__type(value, __u64);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* resized by the loader */
	__type(key, __u64);
	__type(value, struct relay_peer);
} peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct relay_stats);
} stats SEC(".maps");

SEC("sk_skb/stream_verdict")
int relay_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct relay_peer *p = bpf_map_lookup_elem(&peers, &cookie);
	__u32 zero = 0;
	struct relay_stats *st = bpf_map_lookup_elem(&stats, &zero);

	/*
	 * A FIN with no payload arrives as an empty skb. Redirected, the
	 * peer's transmit worker "sends" zero bytes, takes that for a broken
	 * pipe and reports EPIPE on the peer socket. TCP has already processed
	 * the FIN; the loader passes the end of stream on itself once every
	 * byte is acknowledged. Nothing to deliver: drop the empty skb.
	 */
	if (skb->len == 0) {
		if (st)
			st->empty_skbs++;
		return SK_DROP;
	}
	if (!p || p->tainted) {
		if (st) {
			st->passed_skbs++;
			st->passed_bytes += skb->len;
		}
		return SK_PASS;
	}
	if (bpf_sk_redirect_hash(skb, &socks, &p->peer, 0) == SK_PASS) {
		__sync_fetch_and_add(&p->redirected_bytes, skb->len);
		if (st) {
			st->redirected_skbs++;
			st->redirected_bytes += skb->len;
		}
		return SK_PASS;
	}
	/* Peer missing: this socket's data goes through userspace for good. */
	p->tainted = RELAY_TAINTED;
	if (st) {
		st->misses++;
		st->passed_skbs++;
		st->passed_bytes += skb->len;
	}
	return SK_PASS;
}
