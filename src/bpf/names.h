/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Commands found in a connection's bytes, by name, for the request
 * anatomy (anatomy.bpf.c includes this once, after its maps and counters,
 * before the parsers resp.h and memcached.h and their driver wire.h): the
 * per-CPU scratch a read is parsed in, the per-port name counts keyed by
 * protocol (ss_anat_conn.wire), and what a completed command adds to them
 * and to its turn. Only a command's name is kept: no key or value byte.
 */
#ifndef SOCKSCOPE_NAMES_H
#define SOCKSCOPE_NAMES_H

#define SS_RESP_CHUNK 256          /* bytes read from the buffer at a time */

/* A CPU's chunk of the buffer, and the run of same-named commands this
 * read completed that is not added to the names yet. */
struct ss_resp_scratch {
	__u8 b[2 * SS_RESP_CHUNK];
	__u64 pname[2];
	__u32 pcount;     /* commands of the run */
	__u32 pbatched;   /* of them (or of this name's) in a batch */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ss_resp_scratch);
} resp_scratch SEC(".maps");

/* Per port, protocol and command name (not preallocated: a value is
 * 3.9 KB; one the kernel cannot allocate, or past the map's size, which
 * the loader sets from --max-endpoints, counts in its protocol's
 * SS_CNT_*_NAMES_FULL). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SS_RESP_NAMES_MAX);
	__type(key, struct ss_anat_name_key);
	__type(value, struct ss_anat_name);
} names SEC(".maps");

/* Names given room per port (all protocols together); the rest of a
 * port's go to its "(other)" (--max-endpoints; set by the loader). */
const volatile __u32 max_endpoints = 64;

/* Names per port so far (all protocols together). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct ss_anat_stats_key);
	__type(value, struct ss_anat_name_count);
} name_counts SEC(".maps");

const struct ss_anat_name zero_name = {};

/* The entry of (port, protocol, name), made if new: past the port's limit
 * of names (or the map's), the "(other)" entry of its protocol. */
static __always_inline struct ss_anat_name *name_entry(struct ss_anat_name_key *k)
{
	struct ss_anat_stats_key pk = { .port = k->port, .proto = k->proto };
	struct ss_anat_name_count *nc, zero = {};
	struct ss_anat_name *v;

	v = bpf_map_lookup_elem(&names, k);
	if (v)
		return v;
	nc = bpf_map_lookup_elem(&name_counts, &pk);
	if (!nc) {
		bpf_map_update_elem(&name_counts, &pk, &zero, BPF_NOEXIST);
		nc = bpf_map_lookup_elem(&name_counts, &pk);
	}
	if (nc && nc->names < max_endpoints) {
		if (bpf_map_update_elem(&names, k, &zero_name, BPF_NOEXIST) == 0) {
			__sync_fetch_and_add(&nc->names, 1);
			return bpf_map_lookup_elem(&names, k);
		}
		/* Made by another CPU since the lookup: not "(other)". */
		v = bpf_map_lookup_elem(&names, k);
		if (v)
			return v;
	}
	__builtin_memset(k->name, 0, sizeof(k->name));
	v = bpf_map_lookup_elem(&names, k);
	if (v)
		return v;
	bpf_map_update_elem(&names, k, &zero_name, BPF_NOEXIST);
	return bpf_map_lookup_elem(&names, k);
}

static __always_inline void name_key(struct ss_anat_name_key *k, const struct ss_anat_conn *c,
				     __u64 lo, __u64 hi)
{
	k->port = c->port;
	k->proto = c->proto;
	k->wire = c->wire;
	k->pad[0] = 0;
	k->pad[1] = 0;
	k->pad[2] = 0;
	__builtin_memcpy(&k->name[0], &lo, 8);
	__builtin_memcpy(&k->name[8], &hi, 8);
}

/* The counter of c's protocol among RESP's, memcached's, PostgreSQL's,
 * HTTP/1's and DNS's. */
static __always_inline __u32 wire_counter(const struct ss_anat_conn *c, __u32 resp, __u32 mc,
					  __u32 pg, __u32 h1, __u32 dns)
{
	return c->wire == SS_WIRE_MEMCACHED ? mc
	       : c->wire == SS_WIRE_POSTGRES ? pg
	       : c->wire == SS_WIRE_HTTP1    ? h1
	       : c->wire == SS_WIRE_DNS      ? dns
					     : resp;
}

static __always_inline __u32 names_full_counter(const struct ss_anat_conn *c)
{
	return wire_counter(c, SS_CNT_NAMES_FULL, SS_CNT_MC_NAMES_FULL, SS_CNT_PG_NAMES_FULL,
			    SS_CNT_H1_NAMES_FULL, SS_CNT_DNS_NAMES_FULL);
}

/* Adds commands (and batched ones) to a name of c's port. */
__noinline int name_add(const struct ss_anat_conn *c, __u64 lo, __u64 hi, __u32 commands,
			__u32 batched)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;
	__u32 i;

	if (!c)
		return 0;
	name_key(&k, c, lo, hi);
	v = name_entry(&k);
	if (!v) {
		i = names_full_counter(c);
		if (i < SS_COUNTS)
			cpu_here()->count[i] += commands;
		return 0;
	}
	if (commands)
		__sync_fetch_and_add(&v->commands, commands);
	if (batched)
		__sync_fetch_and_add(&v->batched, batched);
	return 0;
}

/* A memcached `noreply` command is read whole: counted under its name,
 * and apart (no response comes: it is never a turn's command). */
__noinline int name_noreply(const struct ss_anat_conn *c, __u64 lo, __u64 hi)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;

	if (!c)
		return 0;
	count(SS_CNT_COMMANDS);
	count(SS_CNT_MC_NOREPLY);
	name_key(&k, c, lo, hi);
	v = name_entry(&k);
	if (!v) {
		count(SS_CNT_MC_NAMES_FULL);
		return 0;
	}
	__sync_fetch_and_add(&v->commands, 1);
	__sync_fetch_and_add(&v->noreply, 1);
	return 0;
}

/* A timed turn's four parts (queue, CPU, service, send): a global
 * function's pointer argument is checked against its type's size. */
struct ss_anat_turn_parts {
	__u64 p[SS_PART_SERVER];
};

/* A turn that carried commands is closed: it is filed under the name
 * (lo, hi), with its parts when it was timed (NULL: counted only). */
__noinline int name_turn_as(const struct ss_anat_conn *c, __u64 lo, __u64 hi,
			    const struct ss_anat_turn_parts *tp)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;
	const __u64 *parts;
	__u64 server, *row;
	__u32 b, i;

	if (!c)
		return 0;
	count(wire_counter(c, SS_CNT_CMD_TURNS, SS_CNT_MC_TURNS, SS_CNT_PG_TURNS, SS_CNT_H1_TURNS,
			   SS_CNT_DNS_TURNS));
	if (!tp)
		return 0;
	parts = tp->p;
	name_key(&k, c, lo, hi);
	v = name_entry(&k);
	if (!v)
		return 0;
	server = parts[0] + parts[1] + parts[2] + parts[3];
	__sync_fetch_and_add(&v->turns, 1);
	__sync_fetch_and_add(&v->sum_ns, server);
	if (server > v->max_ns)
		v->max_ns = server;
	b = anat_bucket(server);
	if (b >= SS_HIST_BUCKETS)
		return 0;
	__sync_fetch_and_add(&v->hist[b], 1);
	__sync_fetch_and_add(&v->parts[0], parts[0]);
	__sync_fetch_and_add(&v->parts[1], parts[1]);
	__sync_fetch_and_add(&v->parts[2], parts[2]);
	__sync_fetch_and_add(&v->parts[3], parts[3]);
	/* One pointer from the checked index, as add_by_server has it. */
	i = (b / SS_HIST_SUB) * SS_PART_SERVER;
	barrier_var(i);
	if (i > (SS_NAME_BANDS - 1) * SS_PART_SERVER)
		return 0;
	row = &v->by_band[i];
	barrier_var(row);
	__sync_fetch_and_add(&row[0], parts[0]);
	__sync_fetch_and_add(&row[1], parts[1]);
	__sync_fetch_and_add(&row[2], parts[2]);
	__sync_fetch_and_add(&row[3], parts[3]);
	return 0;
}

/* A connection's turn is closed: it goes under its first command's name
 * (a batch of several names too). */
static __always_inline void name_turn(const struct ss_anat_conn *c,
				      const struct ss_anat_turn_parts *tp)
{
	name_turn_as(c, c->tname[0], c->tname[1], tp);
}

static __always_inline void run_flush(const struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	if (sc->pcount || sc->pbatched)
		name_add(c, sc->pname[0], sc->pname[1], sc->pcount, sc->pbatched);
	sc->pcount = 0;
	sc->pbatched = 0;
}

/* A command (named c->rname) is read whole: it joins this read's run of
 * its name, and this turn's commands. */
static __always_inline void cmd_done(struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	if ((sc->pcount || sc->pbatched) &&
	    (sc->pname[0] != c->rname[0] || sc->pname[1] != c->rname[1]))
		run_flush(c, sc);
	sc->pname[0] = c->rname[0];
	sc->pname[1] = c->rname[1];
	sc->pcount++;
	if (c->tcmds) {
		/* The turn's second command makes its first one batched too. */
		sc->pbatched++;
		if (c->tcmds == 1) {
			if (sc->pcount > 1 && sc->pname[0] == c->tname[0] &&
			    sc->pname[1] == c->tname[1])
				sc->pbatched++;
			else
				name_add(c, c->tname[0], c->tname[1], 0, 1);
		}
	} else {
		c->tname[0] = c->rname[0];
		c->tname[1] = c->rname[1];
	}
	c->tcmds++;
	count(SS_CNT_COMMANDS);
}

#endif /* SOCKSCOPE_NAMES_H */
