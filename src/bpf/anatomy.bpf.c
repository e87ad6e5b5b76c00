// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * sockscope request anatomy: each request's time at the server, split into
 * queue wait, CPU wait, service and send, from the socket tracepoints only
 * (no syscall hook, no scheduler hook, no kprobe, no fentry).
 *
 * A turn is one request and its response on one connection: it begins when
 * request data is queued on an idle connection (sock:sk_data_ready, in the
 * softirq that queues it), its first read (sock:sock_recv_length, in the
 * serving thread) takes it, the end of its first write (sock_send_length)
 * ends the service and the end of its last write before the next
 * request's data ends the turn. The serving thread's run-queue waits are
 * the kernel's own sum of them (task->sched_info.run_delay, kept whenever
 * CONFIG_SCHED_INFO is set), read in the thread at each of those hooks: no
 * hook on the scheduler, whose tracepoints fire on every context switch of
 * the machine. A UDP turn is a datagram read followed by
 * a send on the same socket; arrival times of queued datagrams are kept in
 * a small ring per socket.
 *
 * Which sockets: those on a port the target serves (a TCP listener or a
 * bound UDP socket; the `ports` map, filled by the loader from the
 * target's sockets and by the LISTEN transition of an in-scope task) in
 * the target's network namespace. A socket gets its state (socket local
 * storage) at its first event; every other socket on the machine costs a
 * storage lookup and, for data_ready, one hash lookup.
 *
 * Unix stream sockets: an accepted connection shares its listener's
 * address (struct unix_address, refcounted), so the connections of a
 * listener the target holds are those whose address is one the loader
 * learned (ss_learn_unix, an iterator over the Unix sockets run once the
 * hooks are attached: the listeners whose inode the loader gives). A
 * client's socket has its own address or none. Nothing like TCP's write
 * sequence says a Unix write is under way, and the peer may read the
 * response (queued before the write returns) and send its next request
 * before sock_send_length reports the write: the peer's read of a turn's
 * response marks the write as seen, so that the next request's data is
 * taken for the next turn, not for more of this one.
 *
 * Connections that carry several requests at a time (pipelining, HTTP/2)
 * show it: a read of data that was queued before the response ended, or a
 * write before the turn's data was read. They are counted apart from then
 * on, never timed as single requests.
 *
 * Aggregates are per-CPU (plain stores; tracepoint programs run with
 * migration disabled). Nothing goes through a ring buffer.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "anatomy.h"
#include "hist.h"
#include "scope.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MSG_PEEK 2
#define TCP_ESTABLISHED 1
#define TCP_LISTEN 10
#define TCP_CLOSE_WAIT 8
#define PROTO_TCP 6
#define PROTO_UDP 17
#define AF_UNIX 1

/* Keeps the compiler from moving loads and stores across it; x86 keeps
 * stores in order and loads in order, which is all ready_work and
 * send_work need from each other (on arm64, whose loads and stores the
 * JIT does not order, the race they close is only narrowed). */
#define barrier() asm volatile("" ::: "memory")

/* Written by the loader (mmapped .bss). */
__u32 window_open = 0;
__u64 window_start = 0;   /* bpf_ktime_get_ns() when the window opened */
__u32 cost_on = 0;
/* Sampled windows (--requests-duty): set when the loader runs the pause
 * iterator (every connection's turn is then unknown: RESYNC), and from the
 * first resume on (a connection first seen at a read had its request
 * arrive while paused: that turn is skipped, not counted from the window's
 * start). */
__u32 pausing = 0;
__u32 resumed = 0;
struct ss_anat_cpu cpus[SS_MAX_CPUS] = {};
/* One bit per local port that some followed namespace serves: the test
 * every unfollowed socket's data_ready and read pays before the (costlier)
 * hash lookup of the port in its namespace. Set by the loader and by
 * register_port. */
__u64 port_bits[65536 / 64] = {};
/* Set by the loader when a Unix listener is followed: every other Unix
 * socket's events return after this load otherwise. */
__u32 unix_on = 0;
/* --tls-plaintext (tls.h): TLS connections are read through OpenSSL's
 * plaintext; set by the loader before loading. */
const volatile __u32 tls_plaintext = 0;
/* Stack samples are tied to turns (profile and trace --requests with
 * stacks): a thread's turn is kept in its storage for the stack sampler,
 * and the end of a turn a sample fell in is written to h2_events. */
const volatile __u32 tie_samples = 0;
/* With tie_samples: a timed turn whose server time reaches this writes its
 * end too, sampled or not (the loader keeps it under the tail's threshold:
 * the queue wait of a tail request is explained by what its thread did
 * before it read it, which needs the request's arrival and reader). */
__u64 tail_floor_ns = 0;  /* 0: none yet */

/* Keeps the enums no field uses in BTF, for the skeleton's types. */
enum ss_anat_part layout_part __attribute__((unused));
enum ss_anat_state layout_state __attribute__((unused));
enum ss_anat_conn_flags layout_conn_flags __attribute__((unused));
enum ss_anat_limits layout_anat_limits __attribute__((unused));
enum ss_common_limits layout_common_limits __attribute__((unused));
enum ss_scope_mode layout_scope_mode __attribute__((unused));
enum ss_anat_prog layout_prog __attribute__((unused));
enum ss_anat_count layout_count __attribute__((unused));
struct ss_anat_conn layout_conn __attribute__((unused));
struct ss_anat_thread layout_thread __attribute__((unused));
struct ss_anat_name_key layout_name_key __attribute__((unused));
struct ss_anat_name layout_name __attribute__((unused));
struct ss_anat_name_count layout_name_count __attribute__((unused));
enum ss_resp_proto layout_resp_proto __attribute__((unused));
enum ss_anat_wire layout_wire __attribute__((unused));
enum ss_pg_kind layout_pg_kind __attribute__((unused));
struct ss_h1_route layout_h1_route __attribute__((unused));
enum ss_h2_limits layout_h2_limits __attribute__((unused));
enum ss_h2_record layout_h2_record __attribute__((unused));
enum ss_h2_end_how layout_h2_end_how __attribute__((unused));
struct ss_h2_block layout_h2_block __attribute__((unused));
struct ss_h2_end layout_h2_end __attribute__((unused));
struct ss_turn_end layout_turn_end __attribute__((unused));
enum ss_anat_tie layout_anat_tie __attribute__((unused));

const struct ss_anat_stats zero_stats = {};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_anat_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_anat_thread);
} threads SEC(".maps");

/* HTTP/2's header blocks and stream ends (h2.h), and the ends of the
 * turns a stack sample fell in, for the loader (sized by it). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} h2_events SEC(".maps");

/* Ports the target serves on (value unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ss_anat_port_key);
	__type(value, __u8);
} ports SEC(".maps");

/* Unix listeners to follow: inode -> number (the loader's), read by
 * ss_learn_unix only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SS_ANAT_UNIX_MAX);
	__type(key, __u64);
	__type(value, __u16);
} unix_inodes SEC(".maps");

/* The addresses (struct unix_address *) of those listeners, shared by the
 * connections they accept -> the listener's number. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SS_ANAT_UNIX_MAX);
	__type(key, __u64);
	__type(value, __u16);
} unix_addrs SEC(".maps");

/* Per-port statistics; max_entries (the series limit) set by the loader.
 * Not preallocated: a value is 23 KB per CPU, and preallocating the limit
 * would cost that times ports times CPUs. The loader creates the entries
 * of the ports known at the start (in process context, where allocation
 * does not fail); a port learned later gets its entry here, or, when the
 * allocation fails, its turns go to the overflow entry (counted). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 64);
	__type(key, struct ss_anat_stats_key);
	__type(value, struct ss_anat_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ss_anat_stats);
} stats_other SEC(".maps");

/* The timed runs per process (tgid) whose context they ran in: written
 * only during the cost slices, so the rest of the time costs nothing.
 * LRU: a machine with more processes than entries forgets the quietest. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ss_anat_svc_cost);
} svc_cost SEC(".maps");

static __always_inline struct ss_anat_cpu *cpu_here(void)
{
	return &cpus[bpf_get_smp_processor_id() & (SS_MAX_CPUS - 1)];
}

static __always_inline void count(enum ss_anat_count c)
{
	if (c < SS_COUNTS)
		cpu_here()->count[c]++;
}

/* Is the current task one of the target's? */
static __always_inline bool current_in_scope(void)
{
	return in_scope(bpf_get_current_task_btf());
}

static __always_inline void port_key_of(const struct sock *sk, struct ss_anat_port_key *k)
{
	k->netns = sk->__sk_common.skc_net.net->ns.inum;
	k->port = sk->__sk_common.skc_num;
	k->proto = sk->sk_protocol;
}

static __always_inline bool is_unix(const struct sock *sk)
{
	return sk->__sk_common.skc_family == AF_UNIX;
}

/* A Unix socket of a followed listener (the listener itself or a
 * connection it accepted): its number, else -1. */
static __always_inline int unix_listener_of(const struct sock *sk)
{
	struct unix_sock *u;
	__u16 *i;
	__u64 a;

	if (!unix_on)
		return -1;
	u = bpf_skc_to_unix_sock((void *)sk);
	if (!u)
		return -1;
	a = (__u64)u->addr;
	if (!a)
		return -1;
	i = bpf_map_lookup_elem(&unix_addrs, &a);
	return i ? *i : -1;
}

static __always_inline bool is_target_port(const struct sock *sk)
{
	struct ss_anat_port_key k;
	__u16 port = sk->__sk_common.skc_num;

	if (is_unix(sk))
		return unix_listener_of(sk) >= 0;

	if (!(port_bits[(port >> 6) & 1023] & (1ull << (port & 63))))
		return false;
	port_key_of(sk, &k);
	return bpf_map_lookup_elem(&ports, &k) != 0;
}

/* Makes a port the target serves known (a listener, a UDP socket). */
static __always_inline void register_port(const struct sock *sk)
{
	struct ss_anat_port_key k;
	__u8 one = 1;

	port_key_of(sk, &k);
	bpf_map_update_elem(&ports, &k, &one, BPF_ANY);
	__sync_fetch_and_or(&port_bits[(k.port >> 6) & 1023], 1ull << (k.port & 63));
}

/* TLS connections read in plaintext (tls.h): their state, keyed by the
 * socket's address; their socket storage is a stub (SS_CONN_TLS). An
 * LRU: entries of closed sockets go when room is needed. Sized by the
 * loader (1 without --tls-plaintext). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SS_TLS_CONNS_MAX);
	__type(key, __u64);
	__type(value, struct ss_anat_conn);
} tls_conns SEC(".maps");

/* The state of a connection read in plaintext. One the LRU evicted (more
 * such connections at once than it holds) goes on from its stub, turns
 * only. */
static __always_inline struct ss_anat_conn *tls_conn(struct ss_anat_conn *stub)
{
	__u64 key = stub->sk;
	struct ss_anat_conn *c = bpf_map_lookup_elem(&tls_conns, &key);

	if (c)
		return c;
	count(SS_CNT_TLS_LOST);
	stub->flags &= ~SS_CONN_TLS;
	stub->rproto = SS_RESP_OFF;
	stub->state = SS_TURN_RESYNC;
	return stub;
}

/* A fresh connection's state (storage comes zeroed). */
static __always_inline void conn_init(struct ss_anat_conn *c, const struct sock *sk)
{
	c->sk = (__u64)sk;
	c->port = sk->__sk_common.skc_num;
	c->proto = sk->sk_protocol;
	if (is_unix(sk)) {
		c->port = (__u16)unix_listener_of(sk);
		c->proto = SS_ANAT_PROTO_UNIX;
	}
	c->flags = SS_CONN_INIT | (c->proto == PROTO_UDP ? SS_CONN_UDP : 0);
	count(SS_CNT_CONNS);
}

/* The socket's state, made when `create` (a socket on a target port). */
static __always_inline struct ss_anat_conn *conn_of(const struct sock *sk, bool create)
{
	struct ss_anat_conn *c;

	c = bpf_sk_storage_get(&conns, (void *)sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!c) {
		if (create)
			count(SS_CNT_STORAGE_FULL);
		return 0;
	}
	if (!(c->flags & SS_CONN_INIT))
		conn_init(c, sk);
	if (c->flags & SS_CONN_TLS)
		return tls_conn(c);
	return c;
}

/* A task's run-queue wait so far (ns, the scheduler's clock: only its
 * differences are used). */
static __always_inline __u64 run_delay_of(const struct task_struct *task)
{
	return task->sched_info.run_delay;
}

/* The current task's record, made on its first turn (its run-queue wait
 * so far, rd, taken as the mark: that turn's CPU wait starts from there). */
static __always_inline struct ss_anat_thread *thread_here(struct task_struct *task, __u64 rd)
{
	struct ss_anat_thread *t;

	t = bpf_task_storage_get(&threads, task, 0, 0);
	if (t)
		return t;
	t = bpf_task_storage_get(&threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (t) {
		t->run_delay = rd;
		count(SS_CNT_THREADS);
	} else {
		count(SS_CNT_STORAGE_FULL);
	}
	return t;
}

/* The thread's run-queue wait since its last read or write on a followed
 * socket (rd: now); that becomes the new mark. */
static __always_inline __u64 waited_since_mark(struct ss_anat_thread *t, __u64 rd)
{
	__u64 d;

	if (!t)
		return 0;
	d = rd > t->run_delay ? rd - t->run_delay : 0;
	t->run_delay = rd;
	return d;
}

/* A new turn's number (enum ss_anat_tie): unique in the run, never 0,
 * its two low bits clear; numbered per CPU, so no two CPUs share a counter's line. */
static __always_inline __u64 new_turn_id(void)
{
	__u32 cpu = bpf_get_smp_processor_id() & (SS_MAX_CPUS - 1);
	__u64 seq = ++cpus[cpu].turn_seq;

	return ((seq << SS_TURN_CPU_BITS) | cpu) << 2;
}

/* TCP: the socket's write sequence (bytes written so far, mod 2^32). */
static __always_inline __u32 write_seq_of(const struct sock *sk)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);

	return tp ? tp->write_seq : 0;
}

static __always_inline struct ss_anat_stats *stats_of(struct ss_anat_conn *c)
{
	struct ss_anat_stats_key k = { .port = c->port, .proto = c->proto };
	struct ss_anat_stats *s;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&stats, &k);
	if (s)
		return s;
	bpf_map_update_elem(&stats, &k, &zero_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&stats, &k);
	if (s)
		return s;
	count(SS_CNT_SERIES_FULL);
	return bpf_map_lookup_elem(&stats_other, &zero);
}

/* The bucket function as a global (separately verified) function: a turn
 * adds six values, and the inlined branches of each multiplied the paths
 * the verifier walks past its limit. */
__noinline __u32 anat_bucket(__u64 v)
{
	return hist_bucket(v);
}

#include "names.h"
#include "resp.h"
#include "memcached.h"
#include "postgres.h"
#include "http1.h"
#include "dns.h"
#include "tls.h"

/* Index of part p's bucket b in the flat arrays, bounds-checked in a way
 * the verifier sees (the barrier keeps clang from re-deriving the index
 * from the unchecked bucket after the test). */
static __always_inline __u32 flat_index(__u32 part, __u32 b, __u32 limit)
{
	__u32 i = part * SS_HIST_BUCKETS + b;

	barrier_var(i);
	return i < limit ? i : limit;
}

static __always_inline void add_part(struct ss_anat_stats *s, __u32 part, __u64 v)
{
	__u32 i;

	if (part >= SS_PARTS)
		return;
	s->sum_ns[part] += v;
	if (v > s->max_ns[part])
		s->max_ns[part] = v;
	i = flat_index(part, anat_bucket(v), SS_PARTS * SS_HIST_BUCKETS);
	if (i < SS_PARTS * SS_HIST_BUCKETS)
		s->hist[i]++;
}

/* Adds a turn's four addends to their sums in its server-time bucket b
 * (one cache line). */
static __always_inline void add_by_server(struct ss_anat_stats *s, __u32 b, __u64 queue,
					  __u64 cpu, __u64 service, __u64 send)
{
	__u32 i = b * SS_PART_SERVER;
	__u64 *row;

	barrier_var(i);
	if (i > (SS_HIST_BUCKETS - 1) * SS_PART_SERVER)
		return;
	/* One pointer from the checked index (clang would otherwise
	 * re-derive each element's offset from the unchecked one). */
	row = &s->by_server[i];
	barrier_var(row);
	row[SS_PART_QUEUE] += queue;
	row[SS_PART_CPU] += cpu;
	row[SS_PART_SERVICE] += service;
	row[SS_PART_SEND] += send;
}

/* Clears the turn's fields; the state is the caller's to set. */
static __always_inline void turn_clear(struct ss_anat_conn *c)
{
	c->flags &= ~(SS_CONN_ARRIVAL_UNSEEN | SS_CONN_NEXT | SS_CONN_SKIP | SS_CONN_WAITING |
		      SS_CONN_NOREPLY | SS_CONN_QUIET | SS_CONN_HANDSHAKE);
	c->tcmds = 0;
	c->arrival = 0;
	c->turn_id = 0;
	c->flags &= ~SS_CONN_SAMPLED;
	c->cpu_queue = 0;
	c->cpu_service = 0;
	c->cpu_send = 0;
	c->ready_at = 0;
}

static __always_inline void turn_reset(struct ss_anat_conn *c)
{
	turn_clear(c);
	c->state = SS_TURN_IDLE;
}

/* Adds one timed turn of the port `c` serves: its four parts and their
 * sum, the server time. */
static __always_inline void record_turn(struct ss_anat_conn *c, __u64 queue, __u64 cpu,
					__u64 service, __u64 send)
{
	struct ss_anat_stats *s = stats_of(c);
	__u64 server = queue + cpu + service + send;

	if (s) {
		__u32 b = anat_bucket(server);

		s->turns++;
		add_part(s, SS_PART_QUEUE, queue);
		add_part(s, SS_PART_CPU, cpu);
		add_part(s, SS_PART_SERVICE, service);
		add_part(s, SS_PART_SEND, send);
		add_part(s, SS_PART_SERVER, server);
		if (b < SS_HIST_BUCKETS)
			add_by_server(s, b, queue, cpu, service, send);
	}
	count(SS_CNT_TURNS);
}

/* A timed turn a stack sample fell in ends: its end goes to the loader,
 * which puts its samples in the tail or the rest (struct ss_turn_end). */
static __always_inline void turn_end(__u64 id, __u32 tid, const struct ss_anat_conn *c,
				     __u64 arrival, __u64 first_read, __u64 last_write,
				     const __u64 *parts, __u64 lo, __u64 hi, bool named)
{
	struct ss_turn_end *e = bpf_ringbuf_reserve(&h2_events, sizeof(*e), 0);

	if (!e) {
		count(SS_CNT_TURN_ENDS_LOST);
		return;
	}
	e->h.conn = id;
	e->h.stream = tid;
	e->h.port = c->port;
	e->h.proto = c->proto;
	e->h.kind = SS_H2_REC_TURN;
	e->h.dir = 0;
	e->h.ftype = 0;
	e->h.fflags = 0;
	e->h.flen = 0;
	e->arrival = arrival;
	e->first_read = first_read;
	e->last_write = last_write;
	e->parts[0] = parts[0];
	e->parts[1] = parts[1];
	e->parts[2] = parts[2];
	e->parts[3] = parts[3];
	__builtin_memcpy(&e->name[0], &lo, 8);
	__builtin_memcpy(&e->name[8], &hi, 8);
	e->wire = c->wire;
	e->named = named;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
	count(SS_CNT_TURN_ENDS);
}

/* --- closing an answered turn ---------------------------------------------
 *
 * An answered turn (RESPONDING) ends at the next request, which two hooks
 * on two CPUs see at nearly the same moment: its data-ready (in the peer's
 * softirq or send) and the read that takes it, which may come first
 * (read_before_ready). Only the read closes it: the data-ready keeps the
 * arrival (ready_at) for it. Other hooks end turns too (a write's end that
 * saw the next request come during it, the peer's close, the reader's end
 * of file, the window's end), and may meet the reader: each claims the turn
 * by swapping RESPONDING for CLOSING (tagged with its CPU), and only the
 * hook that made the swap records the turn; it clears it and stores the
 * next turn's state last, with an atomic exchange (ordered after the
 * stores before it). A reader that finds the turn CLOSING waits for that
 * store, then goes on from the state it finds. It does not wait for a
 * closer beneath it on its own CPU (interrupted or preempted there: it
 * cannot go on until the waiter returns), nor longer than SS_SETTLE_SPINS
 * reads; either is counted (SS_CNT_CLOSE_UNWAITED). */

#define SS_SETTLE_SPINS 8192

static __always_inline bool is_closing(__u64 st)
{
	return (__u32)st == SS_TURN_CLOSING;
}

/* The state as stored: the compiler may neither cache nor merge it. */
static __always_inline __u64 state_now(const struct ss_anat_conn *c)
{
	return *(volatile const __u64 *)&c->state;
}

struct ss_settle {
	struct ss_anat_conn *c;
	__u64 st;
};

static long settle_step(__u64 i, void *ctx)
{
	struct ss_settle *s = ctx;

	if (!s->c)
		return 1;
	s->st = state_now(s->c);
	return !is_closing(s->st);
}

/* The state once no close is under way (`st` is what was read). */
static __always_inline __u64 settled_state(struct ss_anat_conn *c, __u64 st)
{
	struct ss_settle s = { c, st };

	if (!is_closing(st))
		return st;
	if ((st >> 32) == (__u64)bpf_get_smp_processor_id() + 1) {
		count(SS_CNT_CLOSE_UNWAITED);
		return st;
	}
	bpf_loop(SS_SETTLE_SPINS, settle_step, &s, 0);
	if (is_closing(s.st)) {
		count(SS_CNT_CLOSE_UNWAITED);
		return s.st;
	}
	/* An atomic read: the closer's stores before its exchange are seen
	 * after it on every architecture, not only on x86's. */
	return __sync_val_compare_and_swap(&c->state, s.st, s.st);
}

/* The arrival of the answered turn's next request, which waits for its
 * read (its data-ready's stamp, when after the turn's last write); 0:
 * none came. The stamp is read once: a data-ready withdraws it when it
 * sees a read took the data. */
static __always_inline __u64 pending_arrival(const struct ss_anat_conn *c)
{
	__u64 at = *(volatile const __u64 *)&c->ready_at;

	return at > c->last_write ? at : 0;
}

/* Records the answered turn: timed, or counted as what it was. Returns
 * whether it was a TLS handshake's (the next turn then follows it). */
static __always_inline bool turn_record(struct ss_anat_conn *c)
{
	__u64 queue, cpu, service, send;

	if (c->flags & SS_CONN_SKIP) {
		count(SS_CNT_RESYNC);
		return false;
	}
	if (c->flags & SS_CONN_HANDSHAKE) {
		/* A TLS handshake's flight and its answer: no request. */
		count(SS_CNT_TLS_HANDSHAKES);
		return true;
	}
	if (c->flags & SS_CONN_MULTIPLEXED) {
		count(SS_CNT_MUX_TURNS);
		if (c->tcmds)
			name_turn(c, NULL);
		return false;
	}
	if (c->flags & SS_CONN_ARRIVAL_UNSEEN)
		count(SS_CNT_BEFORE_WINDOW);
	/* Each CPU wait was bounded by its phase when taken, so every part
	 * is >= 0 and the four add up to the server time exactly. */
	queue = c->first_read - c->arrival - c->cpu_queue;
	cpu = c->cpu_queue + c->cpu_service + c->cpu_send;
	service = c->first_write - c->first_read - c->cpu_service;
	send = c->last_write - c->first_write - c->cpu_send;
	record_turn(c, queue, cpu, service, send);
	if (tie_samples && tail_floor_ns && queue + cpu + service + send >= tail_floor_ns)
		c->flags |= SS_CONN_SAMPLED;
	if (c->tcmds || (c->flags & SS_CONN_SAMPLED)) {
		struct ss_anat_turn_parts parts = { { queue, cpu, service, send } };

		if (c->tcmds)
			name_turn(c, &parts);
		if (c->flags & SS_CONN_SAMPLED)
			turn_end(c->turn_id, c->reader_tid, c, c->arrival, c->first_read,
				 c->last_write, parts.p, c->tname[0], c->tname[1], c->tcmds > 0);
	}
	return false;
}

/* Closes the answered turn and stores its successor: `next` (IDLE, or
 * ARRIVED at `arrival`). false: the turn was not RESPONDING when claimed
 * (another hook is closing it, or did): nothing was done. */
static __always_inline bool turn_close_to(struct ss_anat_conn *c, __u64 next, __u64 arrival)
{
	__u64 mine = SS_TURN_CLOSING | ((__u64)bpf_get_smp_processor_id() + 1) << 32;
	__u64 was = __sync_val_compare_and_swap(&c->state, SS_TURN_RESPONDING, mine);
	bool hs;

	if (was != SS_TURN_RESPONDING) {
		if (is_closing(was))
			count(SS_CNT_CLOSE_RACES);
		return false;
	}
	hs = turn_record(c);
	turn_clear(c);
	if (hs)
		c->flags |= SS_CONN_HS_TAIL;
	c->arrival = arrival;
	__sync_lock_test_and_set(&c->state, next);
	return true;
}

/* Ends the turn in progress: a responded one is timed (or counted as
 * multiplexed), one with no response yet is dropped. false: another hook
 * is closing it. */
static __always_inline bool turn_close(struct ss_anat_conn *c)
{
	__u64 st = state_now(c);

	if (is_closing(st)) {
		count(SS_CNT_CLOSE_RACES);
		return false;
	}
	if (st != SS_TURN_RESPONDING) {
		turn_reset(c);
		return true;
	}
	return turn_close_to(c, SS_TURN_IDLE, 0);
}

/* Closes the answered turn and opens the one of the request that came
 * during its last write (SS_CONN_NEXT). */
static __always_inline bool open_next_turn(struct ss_anat_conn *c)
{
	return turn_close_to(c, SS_TURN_ARRIVED, c->next_arrival);
}

static __always_inline void mark_multiplexed(struct ss_anat_conn *c)
{
	if (!(c->flags & SS_CONN_MULTIPLEXED)) {
		c->flags |= SS_CONN_MULTIPLEXED;
		count(SS_CNT_MUX_CONNS);
	}
}

static __always_inline __u64 bounded(__u64 v, __u64 limit)
{
	return v < limit ? v : limit;
}

/* UDP: the arrival time of the datagram being read, 0 when not kept.
 * This kernel calls data_ready for a datagram only when it finds the
 * receive queue empty (older ones call it for every datagram): each kept
 * arrival is then the first datagram of a burst, which the next read takes
 * (the queue is FIFO); the reads of the rest of the burst find none. Both
 * behaviours pop the oldest arrival kept. */
static __always_inline __u64 udp_arrival(struct ss_anat_conn *c)
{
	__u32 i;

	if (c->ring_head == c->ring_tail)
		return 0;
	i = c->ring_head & (SS_UDP_RING - 1);
	c->ring_head++;
	return c->ring[i];
}

/* A later write of the response ends: the send part grows. */
static __always_inline void write_continues(struct ss_anat_conn *c, __u64 now,
					    const struct task_struct *task, __u64 rd)
{
	if (now > c->last_write)
		c->last_write = now;
	if (c->writer != (__u64)task)
		return;  /* another thread's waits are not this turn's */
	c->cpu_send = bounded(rd - c->rq_write, c->last_write - c->first_write);
}

#include "h2.h"
#include "wire.h"

/* --- the timed wrappers ------------------------------------------------ */

static __always_inline void prog_end(enum ss_anat_prog p, bool matched, __u64 t0, __u64 t1)
{
	struct ss_anat_prog_cost *c;

	if (p >= SS_ANAT_PROGS)
		return;
	c = &cpu_here()->prog[p];
	if (matched)
		c->matched++;
	else
		c->filtered++;
	if (!t0)
		return;
	__u64 t2 = bpf_ktime_get_ns();

	if (matched) {
		c->timed_matched++;
		c->matched_ns += t2 - t1;
	} else {
		c->timed_filtered++;
		c->filtered_ns += t2 - t1;
	}
	c->clock_ns += t1 - t0;

	/* The process this run cost: the one whose context it ran in. */
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 ns = t2 - t1 > t1 - t0 ? (t2 - t1) - (t1 - t0) : 0;
	struct ss_anat_svc_cost *v = bpf_map_lookup_elem(&svc_cost, &tgid);

	if (v) {
		v->ns += ns;
		v->runs++;
		v->clock_ns += t1 - t0;
	} else {
		struct ss_anat_svc_cost n = { .ns = ns, .runs = 1, .clock_ns = t1 - t0 };

		bpf_map_update_elem(&svc_cost, &tgid, &n, BPF_NOEXIST);
	}
}

#ifdef SS_ANAT_HOOKS_ONLY
/* The diagnostic build (build.rs, SOCKSCOPE_ANATOMY_HOOKS_ONLY=1): every
 * program returns at once. */
#define TIMED(prog, work) do { } while (0)
#else
#define TIMED(prog, work)                                       \
	do {                                                     \
		__u64 t0 = 0, t1 = 0;                            \
		bool matched;                                    \
		if (cost_on) {                                   \
			t0 = bpf_ktime_get_ns();                 \
			t1 = bpf_ktime_get_ns();                 \
		}                                                \
		matched = (work);                                \
		prog_end(prog, matched, t0, t1);                 \
	} while (0)
#endif

/* --- data queued ------------------------------------------------------- */

/* TCP: is a write of ours on this socket under way (bytes queued by a
 * write whose end sock_send_length has not reported yet)? On loopback the
 * peer gets the response inside that write and may send its next request
 * before the write returns. */
static __always_inline bool write_under_way(const struct sock *sk, struct ss_anat_conn *c)
{
	if (c->proto == SS_ANAT_PROTO_UNIX)
		return c->seq_mark != 0;
	return write_seq_of(sk) != c->seq_mark;
}

/* Is there data in the socket's receive queue that no read has taken? */
static __always_inline bool unread_data(const struct sock *sk, const struct ss_anat_conn *c)
{
	struct tcp_sock *tp;

	if (c->proto == SS_ANAT_PROTO_UNIX)
		return sk->sk_receive_queue.qlen != 0;
	tp = bpf_skc_to_tcp_sock((void *)sk);
	return !tp || tp->rcv_nxt != tp->copied_seq;
}

/* Unix: a read on a socket we do not follow whose peer we do takes (part
 * of) that peer's response, which may be before its write returns: the
 * next data the peer gets is then the next request (marked until the
 * write's end). */
static __always_inline bool peer_reads(const struct sock *sk)
{
	struct ss_anat_conn *pc;
	struct unix_sock *u;
	struct sock *peer;

	u = bpf_skc_to_unix_sock((void *)sk);
	if (!u)
		return false;
	peer = u->peer;
	if (!peer)
		return false;
	pc = bpf_sk_storage_get(&conns, peer, 0, 0);
	if (!pc || pc->proto != SS_ANAT_PROTO_UNIX)
		return false;
	/* Only a write that has not returned needs the mark: once it has, the
	 * turn is RESPONDING and the next data closes it. */
	if (pc->state == SS_TURN_SERVING)
		pc->seq_mark = 1;
	return true;
}

static __always_inline bool ready_work(const struct sock *sk)
{
	struct ss_anat_conn *c;
	__u64 now, st;
	__u32 i;

	c = conn_of(sk, false);
	if (!c) {
		if (!window_open)
			return false;
		/* A listener's data_ready is a connection for accept(). */
		if (sk->__sk_common.skc_state == TCP_LISTEN)
			return false;
		if (!is_target_port(sk))
			return false;
		c = conn_of(sk, true);
		if (!c)
			return false;
	}
	if (!window_open || (c->flags & SS_CONN_FOREIGN))
		return true;
	now = bpf_ktime_get_ns();
	if (c->wire == SS_WIRE_HTTP2) {
		h2_ready(sk, c, now);
		return true;
	}
	if (c->flags & SS_CONN_UDP) {
		if (c->ring_tail - c->ring_head >= SS_UDP_RING) {
			/* More bursts queued than kept: which arrival goes
			 * with which read is lost; start again from empty
			 * (the reads then find none: counted unseen). */
			c->ring_head = c->ring_tail;
			return true;
		}
		i = c->ring_tail & (SS_UDP_RING - 1);
		c->ring[i] = now;
		c->ring_tail++;
		return true;
	}
	if (sk->__sk_common.skc_state != TCP_ESTABLISHED) {
		/* The peer closed: TCP calls data_ready for its FIN too. Only
		 * bytes beyond the FIN's one sequence number are a request. */
		struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);

		if (!tp || tp->rcv_nxt - tp->copied_seq <= 1)
			return true;
	}
	/* The data is queued before data_ready runs, and a reader already
	 * awake (an epoll loop finds a level-triggered socket readable
	 * without the wake-up) can take it in between: that read began its
	 * turn (recv_work); this data is not a new arrival. */
	if (!unread_data(sk, c))
		return true;
	if ((c->state == SS_TURN_SERVING || c->state == SS_TURN_RESPONDING) &&
	    write_under_way(sk, c)) {
		/* The peer answered bytes of a response whose write has not
		 * returned: this is the next request; the write's end closes
		 * this turn and opens that one. */
		if (!(c->flags & SS_CONN_NEXT)) {
			c->flags |= SS_CONN_NEXT;
			c->next_arrival = now;
			count(SS_CNT_NEXT_IN_WRITE);
		}
		return true;
	}
	/* Read the state again: a write's end on another CPU stores the
	 * state before the write mark (send_work), so one whose mark the
	 * test above saw has left RESPONDING here, never a SERVING that
	 * would take this request for more of the last one. */
	barrier();
	st = state_now(c);
	if (st == SS_TURN_RESPONDING) {
		/* The next request: its arrival is kept for the read that
		 * takes it, which closes the answered turn (the only hook
		 * that does, so none records it twice: the reader may be
		 * taking these very bytes on another CPU now). The first
		 * arrival after the turn's last write stands. */
		if (!pending_arrival(c)) {
			__u64 at = bpf_ktime_get_ns();

			c->ready_at = at;
			barrier();
			/* A reader that took this data before the stamp has
			 * begun its turn: the stamp would be the next one's. */
			if (!unread_data(sk, c))
				__sync_val_compare_and_swap(&c->ready_at, at, 0);
		}
		return true;
	}
	/* A hook closing the turn: the reader that took this data (its
	 * first read then sees any data left unread), or the peer's end.
	 * Nothing is left to this data-ready. */
	if (is_closing(st))
		return true;
	if (st == SS_TURN_IDLE || st == SS_TURN_RESYNC) {
		c->arrival = now;
		c->state = SS_TURN_ARRIVED;
	} else if (st == SS_TURN_SERVING) {
		/* More of the request, or the next one pipelined behind it:
		 * a read after the response began tells. */
		c->flags |= SS_CONN_WAITING;
		barrier();
		/* Unless a reader on another CPU took this very data between
		 * the test of unread data above and the state read here: its
		 * read began the SERVING turn seen (recv_work stores the state
		 * after the kernel took the bytes), and the data is that
		 * request's own, not one waiting behind it. Taken for waiting,
		 * the next request read before its data_ready would make a
		 * lockstep connection look multiplexed. */
		if (!unread_data(sk, c))
			c->flags &= ~SS_CONN_WAITING;
	}
	return true;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(ss_data_ready, const struct sock *sk)
{
	TIMED(SS_PROG_DATA_READY, ready_work(sk));
	return 0;
}

/* --- a read returns ----------------------------------------------------- */

/* First read of a turn: the queue wait ends. The CPU wait before it is
 * the thread's run-queue wait since its last read or write on a followed
 * socket, at most the time since the arrival (the kernel keeps a sum, not
 * when each wait was). */
static __always_inline void first_read(struct ss_anat_conn *c, const struct sock *sk, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 rd = run_delay_of(task);
	struct ss_anat_thread *t = thread_here(task, rd);

	c->first_read = now;
	if (unread_data(sk, c))
		c->flags |= SS_CONN_WAITING;  /* read in part, or pipelined */
	c->cpu_queue = bounded(waited_since_mark(t, rd), now - c->arrival);
	c->rq_read = rd;
	c->reader = (__u64)task;
	if (tie_samples && t) {
		/* The stack sampler gives this thread's samples to this turn
		 * from here (until it reads the next). */
		c->turn_id = new_turn_id();
		c->reader_tid = task->pid;
		t->turn = c->turn_id;
	}
	c->seq_mark = write_seq_of(sk);
	c->state = SS_TURN_SERVING;
	c->flags &= ~SS_CONN_HS_TAIL;
	if ((c->flags & SS_CONN_CIPHER) && tls_handshake_record(wire_syscall_buf(1, 0)))
		c->flags |= SS_CONN_HANDSHAKE;
}

static __always_inline bool recv_work(struct sock *sk, int ret, int flags)
{
	struct ss_anat_conn *c;
	__u64 now, arrival, rd, st;
	bool closed;

	if (flags & MSG_PEEK)
		return false;
	if (ret == 0) {
		/* The peer closed: a turn answered is over (TCP says so at its
		 * state change too; a Unix socket only here). */
		c = conn_of(sk, false);
		if (c && window_open && c->wire == SS_WIRE_HTTP2)
			h2_close(sk, c, false);
		else if (c && window_open && !(c->flags & SS_CONN_UDP))
			turn_close(c);
		return c != 0;
	}
	if (ret < 0)
		return false;
	c = conn_of(sk, false);
	if (!c) {
		if (!window_open)
			return false;
		if (is_unix(sk)) {
			if (!is_target_port(sk))
				return unix_on && peer_reads(sk);
		} else if (!is_target_port(sk)) {
			/* A UDP server socket bound during the window: its
			 * first read by the target makes its port known. */
			if (sk->sk_protocol != PROTO_UDP ||
			    sk->__sk_common.skc_state == TCP_ESTABLISHED || !current_in_scope())
				return false;
			register_port(sk);
		}
		c = conn_of(sk, true);
		if (!c)
			return false;
	}
	if (!window_open || (c->flags & SS_CONN_FOREIGN))
		return true;
	if (!c->reader && !current_in_scope()) {
		/* Read by a task outside the scope (a sharer of the port). */
		c->flags |= SS_CONN_FOREIGN;
		count(SS_CNT_FOREIGN);
		return true;
	}
	now = bpf_ktime_get_ns();
	if (c->flags & SS_CONN_TLS)
		tls_socket_op(c, SS_TLS_READ);
	if (c->wire == SS_WIRE_HTTP2) {
		if (tie_samples) {
			/* Its streams interleave: no sample of the thread can be
			 * given to one of them. */
			struct ss_anat_thread *t =
				bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);

			if (t)
				t->turn = SS_TURN_INTERLEAVED;
		}
		if (c->flags & SS_CONN_TLS)
			h2_tls_read(sk, c, ret);
		else
			h2_read(sk, c, ret, now);
		return true;
	}
	if (c->flags & SS_CONN_UDP) {
		struct task_struct *task = bpf_get_current_task_btf();
		struct ss_anat_thread *t;

		rd = run_delay_of(task);
		t = thread_here(task, rd);
		c->reader = (__u64)task;
		if (!t)
			return true;
		if (t->udp_sk)
			count(SS_CNT_UNANSWERED);
		arrival = udp_arrival(c);
		/* Threads reading one socket at once can pop each other's
		 * arrivals: one later than this read is not this datagram's.
		 * A datagram with no arrival is still a turn; its answer
		 * counts it as untimed (arrival 0). */
		if (arrival > now)
			arrival = 0;
		t->udp_sk = (__u64)sk;
		t->udp_arrival = arrival;
		t->udp_read = now;
		t->udp_cpu_queue = bounded(waited_since_mark(t, rd), arrival ? now - arrival : 0);
		t->udp_rq_read = rd;
		t->udp_name = dns_datagram(c, ret);
		if (tie_samples) {
			t->udp_turn = new_turn_id();
			t->turn = t->udp_turn;
		}
		return true;
	}
	st = settled_state(c, state_now(c));
	switch (st) {
	case SS_TURN_IDLE:
		if (c->flags & SS_CONN_QUIET) {
			/* After a turn of `noreply` commands only: this read
			 * took the next request before its data_ready ran. */
			count(SS_CNT_READ_BEFORE_READY);
			c->arrival = now;
			first_read(c, sk, now);
			break;
		}
		if (!resumed) {
			/* Data queued before the window (or before the socket
			 * was followed): counted from the window's start, and
			 * said so. */
			c->arrival = window_start;
			c->flags |= SS_CONN_ARRIVAL_UNSEEN;
			first_read(c, sk, now);
			break;
		}
		/* Sampled: this request came while paused. */
		/* fallthrough */
	case SS_TURN_RESYNC:
		/* Sampling resumed mid-turn: this turn is not timed. */
		c->arrival = now;
		c->flags |= SS_CONN_SKIP;
		first_read(c, sk, now);
		break;
	case SS_TURN_ARRIVED:
		first_read(c, sk, now);
		break;
	case SS_TURN_RESPONDING:
		if (c->flags & SS_CONN_NEXT) {
			/* The next request came during the last write, and the
			 * write's end missed it (the data-ready ran on another
			 * CPU at that very moment): it is this read's. */
			closed = open_next_turn(c);
		} else if (!(c->flags & SS_CONN_WAITING)) {
			/* No data was waiting when the response began: this
			 * read took the next request, which came at its
			 * data-ready's stamp. Without one, the read took it
			 * between its queueing and its data-ready (which will
			 * find nothing unread): it came a moment ago. */
			arrival = pending_arrival(c);
			if (!arrival) {
				arrival = now;
				count(SS_CNT_READ_BEFORE_READY);
			}
			closed = turn_close_to(c, SS_TURN_ARRIVED, arrival);
		} else if (c->flags & SS_CONN_HANDSHAKE) {
			/* TLS: the client's first request came with (or right
			 * behind) its handshake's last flight, before the
			 * server's answer to it (TLS 1.3's session tickets):
			 * no pipelining. It is timed from that flight's
			 * arrival, the earliest it can have come at (its
			 * queue wait an upper bound). */
			closed = turn_close_to(c, SS_TURN_ARRIVED, c->arrival);
		} else {
			/* This data was waiting before the response began: the
			 * connection carries the next request behind this
			 * one. It is still a request of its own: the answered
			 * turn ends (counted, not timed) and this one
			 * begins. */
			mark_multiplexed(c);
			closed = turn_close_to(c, SS_TURN_ARRIVED, now);
		}
		if (!closed) {
			/* Another hook closed the turn first: a write's end
			 * that saw this request come during it (ARRIVED), or
			 * the peer's close (IDLE). */
			st = settled_state(c, state_now(c));
			if (st == SS_TURN_IDLE)
				c->arrival = now;
			else if (st != SS_TURN_ARRIVED)
				break;
		}
		first_read(c, sk, now);
		break;
	case SS_TURN_SERVING:
		/* More of the request: whatever it left unread waits. */
		if (unread_data(sk, c))
			c->flags |= SS_CONN_WAITING;
		else
			c->flags &= ~SS_CONN_WAITING;
		break;
	default:
		break;
	}
	/* The turn this read is part of is settled: count its commands (a
	 * TLS connection's, from its plaintext as OpenSSL's read returns). */
	if (!(c->flags & SS_CONN_TLS) && wire_read(sk, c, ret, 0, false) &&
	    c->state == SS_TURN_SERVING && !unread_data(sk, c)) {
		/* Only memcached `noreply` commands, read whole: no response
		 * comes, and the next request is a turn of its own. */
		turn_reset(c);
		c->flags |= SS_CONN_QUIET;
	}
	return true;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(ss_recv, struct sock *sk, int ret, int flags)
{
	TIMED(SS_PROG_RECV, recv_work(sk, ret, flags));
	return 0;
}

/* TLS: the plaintext of an OpenSSL write, n bytes at buf, on a
 * connection read in plaintext: its responses' status lines, or its
 * HTTP/2 frames. */
static __always_inline void tls_parse_write(struct ss_anat_conn *c, struct ss_h2_conn *h, __u64 buf,
					    __u64 n, __u64 now)
{
	if (c->wire == SS_WIRE_HTTP2) {
		if (h)
			h2_write_plain(c, h, n, now, buf);
	} else if (c->wire == SS_WIRE_HTTP1) {
		h1_write(c, n, buf);
	}
}

/* A socket write of a connection read in plaintext: the first in the
 * thread's SSL_write parses that call's plaintext (all of it: OpenSSL
 * takes it whole, or, in part, is called again with the rest, which is
 * then not parsed again). */
static __always_inline void tls_write_plain(const struct sock *sk, struct ss_anat_conn *c,
					    __u64 now)
{
	struct ss_anat_thread *t =
		bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);

	if (!t || t->tls_op != SS_TLS_WRITE || t->tls_sk)
		return;
	t->tls_sk = c->sk;
	if (c->tls_retry_len && c->tls_retry_buf == t->tls_buf && c->tls_retry_len == t->tls_num) {
		c->tls_retry_len = 0;
		return;
	}
	c->tls_retry_len = 0;
	if (!t->tls_num || t->tls_num > (1u << 30))
		return;
	t->tls_parsed = 1;
	/* An HTTP/1 write needs no HTTP/2 state: no lookup on its path. */
	tls_parse_write(c, c->wire == SS_WIRE_HTTP2 ? h2_of(sk, c) : 0, t->tls_buf, t->tls_num,
			now);
}

/* --- a write returns ---------------------------------------------------- */

/* A response written while the next request is still unread: it answers
 * an earlier one; on a connection never read yet it answers none (a
 * greeting: an HTTP/2 server's SETTINGS, sent as the client's preface
 * arrives), nor does the rest of a TLS handshake's. */
static __always_inline void written_before_read(struct ss_anat_conn *c)
{
	if (c->reader && !(c->flags & SS_CONN_HS_TAIL))
		mark_multiplexed(c);
	else
		count(SS_CNT_UNSOLICITED);
}

/* A write of the response returns: the first one ends the service part
 * (the service includes that write's own time: no hook reports a TCP
 * write's start without costing a second run per write). */
static __always_inline void write_ends(struct ss_anat_conn *c, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 rd = run_delay_of(task);
	struct ss_anat_thread *t = bpf_task_storage_get(&threads, task, 0, 0);

	/* Waits while writing belong to this turn's send, not to the
	 * thread's next turn's queue. */
	waited_since_mark(t, rd);
	if (tie_samples && t && c->turn_id) {
		/* A sample fell in this turn while this thread served it. */
		if (t->sampled == c->turn_id)
			c->flags |= SS_CONN_SAMPLED;
		t->wrote = c->turn_id;
	}
	switch (state_now(c)) {
	case SS_TURN_IDLE:
		count(SS_CNT_UNSOLICITED);
		break;
	case SS_TURN_RESYNC:
		break;  /* answers a request read while paused */
	case SS_TURN_ARRIVED:
		written_before_read(c);
		break;
	case SS_TURN_SERVING:
		c->first_write = now;
		c->last_write = now;
		c->writer = (__u64)task;
		c->rq_write = rd;
		c->cpu_service = c->reader == (__u64)task ?
			bounded(rd - c->rq_read, now - c->first_read) : 0;
		c->state = SS_TURN_RESPONDING;
		break;
	case SS_TURN_RESPONDING:
		/* The next request came after the last write, unread: as in
		 * ARRIVED. */
		if (pending_arrival(c))
			written_before_read(c);
		else
			write_continues(c, now, task, rd);
		break;
	default:
		break;  /* CLOSING: the turn is another hook's */
	}
}

/* UDP: a send on the socket this thread read a datagram from answers it:
 * the turn is timed (service from the read to the send; no send part). */
static __always_inline void udp_answer(struct ss_anat_conn *c, struct sock *sk, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_anat_thread *t = bpf_task_storage_get(&threads, task, 0, 0);
	__u64 cpu_service, queue, service, rd, name;

	if (!t || t->udp_sk != (__u64)sk || now < t->udp_read) {
		count(SS_CNT_UNSOLICITED);
		return;
	}
	t->udp_sk = 0;
	if (tie_samples)
		t->wrote = t->udp_turn;
	name = t->udp_name;
	t->udp_name = 0;
	if (name)
		dns_answered(c, name);
	rd = run_delay_of(task);
	waited_since_mark(t, rd);
	if (!t->udp_arrival) {
		count(SS_CNT_UDP_UNSEEN);
		if (name)
			name_turn_as(c, name, 0, NULL);
		return;
	}
	cpu_service = bounded(rd - t->udp_rq_read, now - t->udp_read);
	queue = t->udp_read - t->udp_arrival - t->udp_cpu_queue;
	service = now - t->udp_read - cpu_service;
	record_turn(c, queue, t->udp_cpu_queue + cpu_service, service, 0);
	if (tie_samples && t->udp_turn &&
	    (t->sampled == t->udp_turn ||
	     (tail_floor_ns &&
	      queue + t->udp_cpu_queue + cpu_service + service >= tail_floor_ns))) {
		__u64 p[SS_PART_SERVER] = { queue, t->udp_cpu_queue + cpu_service, service, 0 };

		turn_end(t->udp_turn, task->pid, c, t->udp_arrival, t->udp_read, now, p, name, 0,
			 name != 0);
	}
	/* A DNS query's turn goes under its QTYPE. */
	if (name) {
		struct ss_anat_turn_parts parts = {
			{ queue, t->udp_cpu_queue + cpu_service, service, 0 }
		};

		name_turn_as(c, name, 0, &parts);
	}
}

static __always_inline bool send_work(struct sock *sk, int ret)
{
	struct ss_anat_conn *c;
	__u64 now;

	c = conn_of(sk, false);
	if (!c)
		return false;  /* the target's client sockets get no state */
	if (ret <= 0 || !window_open || (c->flags & SS_CONN_FOREIGN))
		return true;
	now = bpf_ktime_get_ns();
	if (c->flags & SS_CONN_TLS) {
		/* The plaintext of OpenSSL's write under way, parsed here (at
		 * its first socket write: a stream's END_STREAM ends it as its
		 * bytes go, as in plain text). */
		tls_write_plain(sk, c, now);
		if (c->wire == SS_WIRE_HTTP2)
			return true;
	} else if (c->wire == SS_WIRE_HTTP2) {
		h2_write(sk, c, ret, now);
		return true;
	}
	if (c->flags & SS_CONN_UDP) {
		udp_answer(c, sk, now);
		return true;
	}
	if (c->wire == SS_WIRE_HTTP1 && !(c->flags & SS_CONN_TLS) && h1_write(c, ret, 0) &&
	    c->state == SS_TURN_SERVING) {
		/* Only a 1xx interim response (100 Continue): the request's
		 * body may follow; its turn goes on. */
		c->seq_mark = c->proto == SS_ANAT_PROTO_UNIX ? 0 : write_seq_of(sk);
		return true;
	}
	/* The state first, then the mark, then the test of a next request:
	 * a data-ready on another CPU reads them in the reverse order
	 * (ready_work), so it either sees the write under way (and leaves
	 * the next request to the test here, or to the read) or sees the
	 * turn RESPONDING and closes it itself. */
	write_ends(c, now);
	barrier();
	c->seq_mark = c->proto == SS_ANAT_PROTO_UNIX ? 0 : write_seq_of(sk);
	barrier();
	if ((c->flags & SS_CONN_NEXT) && c->state == SS_TURN_RESPONDING)
		open_next_turn(c);  /* it came while this write was under way */
	return true;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(ss_send, struct sock *sk, int ret, int flags)
{
	TIMED(SS_PROG_SEND, send_work(sk, ret));
	return 0;
}

/* --- connection life ---------------------------------------------------- */

static __always_inline bool state_work(const struct sock *sk, int oldstate, int newstate)
{
	struct ss_anat_conn *c;

	if (sk->sk_protocol != PROTO_TCP)
		return false;
	if (newstate == TCP_LISTEN) {
		if (!current_in_scope())
			return false;
		register_port(sk);
		return true;
	}
	/* The connection is closing: the peer closed (ESTABLISHED ->
	 * CLOSE_WAIT), or we did, first (-> FIN_WAIT1) or after it
	 * (CLOSE_WAIT -> LAST_ACK: the server closed without reading the
	 * peer's end of file, as nginx does after keepalive_requests; the
	 * socket is then held by no process, so the end-of-window walk of
	 * the processes' files would not find its turn either). A turn
	 * answered is over. */
	if (oldstate != TCP_ESTABLISHED && oldstate != TCP_CLOSE_WAIT)
		return false;
	c = conn_of(sk, false);
	if (!c)
		return false;
	if (c->wire == SS_WIRE_HTTP2) {
		if (window_open)
			h2_close(sk, c, false);
		return true;
	}
	if (window_open && c->state == SS_TURN_SERVING && !(c->flags & SS_CONN_UDP) &&
	    write_under_way(sk, c))
		/* The peer had the response and closed before our write
		 * returned (loopback): that write's end answers the turn, and
		 * the reader's end of file closes it. */
		return true;
	if (window_open)
		turn_close(c);
	return true;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(ss_sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	TIMED(SS_PROG_STATE, state_work(sk, oldstate, newstate));
	return 0;
}

/* --- the tree ---------------------------------------------------------- */

/* Tree scope: a process forked by one of the tree's joins it, and leaves
 * it when its last thread exits (rare events; both timed as "fork"). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ss_fork, struct task_struct *parent, struct task_struct *child)
{
	TIMED(SS_PROG_FORK, tree_fork(parent, child));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ss_exit, struct task_struct *p)
{
	TIMED(SS_PROG_FORK, tree_exit(p));
	return 0;
}

/* --- TLS plaintext (tls.h) ---------------------------------------------- */

/* OpenSSL's SSL_read, SSL_read_ex, SSL_write or SSL_write_ex begins in a
 * thread of the target: the call is kept until it returns. */
static __always_inline bool tls_enter(__u64 ssl, __u64 buf, __u64 num, __u64 nptr, __u32 op)
{
	struct task_struct *task;
	struct ss_anat_thread *t;

	if (!window_open || !current_in_scope())
		return false;
	task = bpf_get_current_task_btf();
	t = thread_here(task, run_delay_of(task));
	if (!t)
		return false;
	t->tls_ssl = ssl;
	t->tls_buf = buf;
	t->tls_num = num;
	t->tls_nptr = nptr;
	t->tls_sk = 0;
	t->tls_op = op;
	t->tls_parsed = 0;
	return true;
}

/* That call returns `ret` (the byte count, or, `ex`, 1 with the count at
 * tls_nptr): the plaintext it read or wrote goes to its connection's
 * parsers, as a read's or a write's bytes would. */
static __always_inline bool tls_exit(long ret, __u32 op, bool ex)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ss_anat_thread *t = bpf_task_storage_get(&threads, task, 0, 0);
	struct ss_anat_conn *c;
	struct ss_h2_conn *h;
	__u64 key, ssl, buf, n = 0, *v;

	if (!t || t->tls_op != op)
		return false;
	t->tls_op = 0;
	if (ex ? ret == 1 : ret > 0) {
		if (!ex)
			n = ret;
		else if (!t->tls_nptr || bpf_probe_read_user(&n, sizeof(n), (void *)t->tls_nptr))
			n = 0;
	}
	ssl = t->tls_ssl;
	buf = t->tls_buf;
	key = t->tls_sk;
	if (op == SS_TLS_WRITE && t->tls_parsed) {
		/* Parsed at its first socket write: what did not go is
		 * retried (with the same buffer, or with the rest of it). */
		c = key ? bpf_map_lookup_elem(&tls_conns, &key) : 0;
		if (c && n < t->tls_num) {
			c->tls_retry_buf = buf + n;
			c->tls_retry_len = t->tls_num - n;
		}
		return true;
	}
	if (!n || n > (1u << 30) || !window_open)
		return false;
	if (key) {
		bpf_map_update_elem(&tls_ssl, &ssl, &key, BPF_ANY);
	} else {
		v = bpf_map_lookup_elem(&tls_ssl, &ssl);
		if (!v)
			return false;
		key = *v;
	}
	c = bpf_map_lookup_elem(&tls_conns, &key);
	if (!c || (c->flags & SS_CONN_FOREIGN))
		return false;
	/* The SSL a socket op was seen in names the connection; one with
	 * none must be the connection's own (an SSL freed and its address
	 * given to another is not). */
	if (t->tls_sk)
		c->tls_ssl = ssl;
	else if (c->tls_ssl != ssl)
		return false;
	if (!(c->flags & SS_CONN_TLS_SEEN)) {
		c->flags |= SS_CONN_TLS_SEEN;
		count(SS_CNT_TLS_READ);
	}
	h = c->wire == SS_WIRE_HTTP2 ? h2_of_tls(key) : 0;
	if (op == SS_TLS_WRITE)
		/* A write with no socket write of its own (buffered). */
		tls_parse_write(c, h, buf, n, bpf_ktime_get_ns());
	else if (h)
		h2_read_plain(c, h, n, bpf_ktime_get_ns(), buf);
	else if (c->wire != SS_WIRE_HTTP2)
		wire_read(0, c, n, buf, true);
	return true;
}

SEC("uprobe")
int BPF_UPROBE(ss_ssl_read, void *ssl, void *buf, int num)
{
	TIMED(SS_PROG_TLS_ENTER, tls_enter((__u64)ssl, (__u64)buf, 0, 0, SS_TLS_READ));
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(ss_ssl_read_ex, void *ssl, void *buf, size_t num, size_t *readbytes)
{
	TIMED(SS_PROG_TLS_ENTER,
	      tls_enter((__u64)ssl, (__u64)buf, 0, (__u64)readbytes, SS_TLS_READ));
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(ss_ssl_write, void *ssl, const void *buf, int num)
{
	TIMED(SS_PROG_TLS_ENTER,
	      tls_enter((__u64)ssl, (__u64)buf, num > 0 ? num : 0, 0, SS_TLS_WRITE));
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(ss_ssl_write_ex, void *ssl, const void *buf, size_t num, size_t *written)
{
	TIMED(SS_PROG_TLS_ENTER,
	      tls_enter((__u64)ssl, (__u64)buf, num, (__u64)written, SS_TLS_WRITE));
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(ss_ssl_read_ret, int ret)
{
	TIMED(SS_PROG_TLS_RETURN, tls_exit(ret, SS_TLS_READ, false));
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(ss_ssl_read_ex_ret, int ret)
{
	TIMED(SS_PROG_TLS_RETURN, tls_exit(ret, SS_TLS_READ, true));
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(ss_ssl_write_ret, int ret)
{
	TIMED(SS_PROG_TLS_RETURN, tls_exit(ret, SS_TLS_WRITE, false));
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(ss_ssl_write_ex_ret, int ret)
{
	TIMED(SS_PROG_TLS_RETURN, tls_exit(ret, SS_TLS_WRITE, true));
	return 0;
}

/* --- Unix listeners ------------------------------------------------------ */

/* Run by the loader once the hooks are attached: the address of every
 * listening Unix socket whose inode it gave (unix_inodes) is followed. */
SEC("iter/unix")
int ss_learn_unix(struct bpf_iter__unix *ctx)
{
	struct unix_sock *u = ctx->unix_sk;
	struct sock *sk;
	__u16 *index;
	__u64 ino, a;

	if (!u)
		return 0;
	sk = &u->sk;
	if (sk->__sk_common.skc_state != TCP_LISTEN)
		return 0;
	ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
	index = bpf_map_lookup_elem(&unix_inodes, &ino);
	if (!index)
		return 0;
	a = (__u64)u->addr;
	if (a)
		bpf_map_update_elem(&unix_addrs, &a, index, BPF_ANY);
	return 0;
}

/* --- the end of the window ---------------------------------------------- */

/* Run by the loader once the socket programs are detached, at the end of
 * the window and at each pause of a sampled one: every turn answered is
 * closed (its last write so far ends it); one whose first write has not
 * returned is counted as writing, and those still waiting for their
 * response as in flight. At a pause every connection is then
 * left in RESYNC, and a UDP socket's kept arrivals are dropped.
 *
 * It walks the sockets the machine's processes hold (each process's
 * files once: the kernel skips threads that share them), not the
 * storage map: some kernels refuse an iterator over a socket storage
 * map (EPERM). A connection held by no process (not accepted yet, or
 * closed) is left alone; a socket two processes hold is met twice, and
 * the second visit finds its turn already closed. */
SEC("iter/task_file")
int ss_close_turns(struct bpf_iter__task_file *ctx)
{
	struct file *f = ctx->file;
	struct ss_anat_conn *c;
	bool pending;
	__u64 st;
	struct socket *so;
	struct sock *sk;

	if (!f)
		return 0;
	so = bpf_sock_from_file(f);
	if (!so)
		return 0;
	sk = so->sk;
	if (!sk)
		return 0;
	c = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!c)
		return 0;
	if (c->flags & SS_CONN_TLS)
		c = tls_conn(c);
	if (c->wire == SS_WIRE_HTTP2) {
		/* Its streams in flight are counted; its frames cannot be
		 * found again after a pause. */
		if (sk)
			h2_close(sk, c, pausing);
		turn_reset(c);
		return 0;
	}
	st = settled_state(c, state_now(c));
	if (st == SS_TURN_RESPONDING) {
		/* The next request, come and not read, is in flight as an
		 * ARRIVED one is. */
		pending = pending_arrival(c) != 0;
		if (turn_close(c) && pending && !(c->flags & SS_CONN_FOREIGN))
			count(pausing ? SS_CNT_RESYNC : SS_CNT_IN_FLIGHT);
	} else if (st == SS_TURN_SERVING && sk && !pausing &&
		 !(c->flags & SS_CONN_FOREIGN) && write_under_way(sk, c))
		/* The response is being written (a Unix peer may even have
		 * read it) but the write has not returned: answered, its
		 * service not known. */
		count(SS_CNT_WRITING_AT_END);
	else if (st != SS_TURN_IDLE && st != SS_TURN_RESYNC && !(c->flags & SS_CONN_FOREIGN))
		count(pausing ? SS_CNT_RESYNC : SS_CNT_IN_FLIGHT);
	turn_reset(c);
	if (pausing) {
		wire_pause(c);
		c->state = SS_TURN_RESYNC;
		c->ring_head = c->ring_tail;
	}
	return 0;
}
