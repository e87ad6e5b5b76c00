/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * RESP (Redis/Valkey) request boundaries for the request anatomy
 * (anatomy.bpf.c includes this once, after its maps and counters): the
 * bytes a read returned are read back from the reader's own buffer (the
 * syscall's argument, from the task's saved registers) and run through a
 * state machine kept in the connection's storage, so a command may be cut
 * anywhere by the reads. A command is an array of bulk strings
 * (`*N\r\n` then N times `$L\r\n<L bytes>\r\n`); its name is its first
 * bulk string's first SS_RESP_NAME_LEN bytes, upper-cased. Bulk bodies are
 * passed by their length, never read (only a name's bytes are); no key or
 * value byte is kept.
 *
 * Anything else gives up on the connection (SS_RESP_OFF: its turns are
 * timed as before, its commands no longer counted): a first read that does
 * not begin an array (inline commands, other protocols), a malformed
 * header, a count or length past redis's own limits, a read whose buffer
 * is not a read/recvfrom/readv/recvmsg argument (io_uring, recvmmsg,
 * splice, 32-bit tasks) or cannot be read, more than SS_RESP_MAX_CHUNKS
 * chunks of header bytes in one read.
 *
 * The per-byte step is a global function called from an open-coded loop:
 * inlined, its branches times the loop's length are past what the
 * verifier walks.
 */
#ifndef SOCKSCOPE_RESP_H
#define SOCKSCOPE_RESP_H

#define SS_RESP_CHUNK 256          /* bytes read from the buffer at a time */
#define SS_RESP_MAX_CHUNKS 16      /* at most 4 KiB read per read */
#define SS_RESP_MAX_ITERS 64       /* chunks and skips per read */
#define SS_RESP_MAX_ARRAY (1u << 24)   /* arguments of a command */
#define SS_RESP_MAX_BULK (1u << 29)    /* redis's proto-max-bulk-len: 512 MiB */
#define SS_RESP_BAD 0x10000        /* a step's "malformed" */

/* Syscall numbers (x86_64) whose buffer is the second argument. */
#define NR_READ 0
#define NR_READV 19
#define NR_RECVFROM 45
#define NR_RECVMSG 47
#define TS_COMPAT 2

enum ss_resp_state {
	R_TYPE = 0,   /* '*' of the next command */
	R_ANUM = 1,   /* its count's digits */
	R_ALF = 2,    /* '\n' after the count */
	R_BTYPE = 3,  /* '$' of the next bulk string */
	R_BNUM = 4,   /* its length's digits */
	R_BLF = 5,    /* '\n' after the length */
	R_NAME = 6,   /* the first bulk's bytes: the name */
	R_SKIP = 7,   /* the rest of a bulk string and its CRLF, by length */
};

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

/* Per port and command name (not preallocated: a value is 2.6 KB; one
 * the kernel cannot allocate counts in SS_CNT_NAMES_FULL). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SS_RESP_NAMES_MAX);
	__type(key, struct ss_anat_name_key);
	__type(value, struct ss_anat_name);
} names SEC(".maps");

/* Names per port so far. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct ss_anat_stats_key);
	__type(value, struct ss_anat_name_count);
} name_counts SEC(".maps");

const struct ss_anat_name zero_name = {};

/* The entry of (port, name), made if new: past the port's limit of names
 * (or the map's), the port's "(other)" entry. */
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
	if (nc && nc->names < SS_RESP_NAMES_PER_PORT &&
	    bpf_map_update_elem(&names, k, &zero_name, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&nc->names, 1);
		return bpf_map_lookup_elem(&names, k);
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
	k->pad = 0;
	__builtin_memcpy(&k->name[0], &lo, 8);
	__builtin_memcpy(&k->name[8], &hi, 8);
}

/* Adds commands (and batched ones) to a name of c's port. */
__noinline int name_add(const struct ss_anat_conn *c, __u64 lo, __u64 hi, __u32 commands,
			__u32 batched)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;

	if (!c)
		return 0;
	name_key(&k, c, lo, hi);
	v = name_entry(&k);
	if (!v) {
		cpu_here()->count[SS_CNT_NAMES_FULL] += commands;
		return 0;
	}
	if (commands)
		__sync_fetch_and_add(&v->commands, commands);
	if (batched)
		__sync_fetch_and_add(&v->batched, batched);
	return 0;
}

/* A turn that carried commands is closed: it is filed under its first
 * command's name (a batch of several names too), with its server time
 * when it was timed. */
__noinline int name_turn(const struct ss_anat_conn *c, __u64 server, int timed)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;
	__u32 b;

	if (!c)
		return 0;
	count(SS_CNT_CMD_TURNS);
	if (!timed)
		return 0;
	name_key(&k, c, c->tname[0], c->tname[1]);
	v = name_entry(&k);
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->turns, 1);
	__sync_fetch_and_add(&v->sum_ns, server);
	if (server > v->max_ns)
		v->max_ns = server;
	b = anat_bucket(server);
	if (b < SS_HIST_BUCKETS)
		__sync_fetch_and_add(&v->hist[b], 1);
	return 0;
}

static __always_inline void run_flush(const struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	if (sc->pcount || sc->pbatched)
		name_add(c, sc->pname[0], sc->pname[1], sc->pcount, sc->pbatched);
	sc->pcount = 0;
	sc->pbatched = 0;
}

/* A command is read whole: it joins this read's run of its name, and
 * this turn's commands. */
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

/* A bulk string is passed whole. */
static __always_inline void elem_done(struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	c->rfirst = 0;
	if (c->relems)
		c->relems--;
	if (c->relems) {
		c->rst = R_BTYPE;
		return;
	}
	c->rst = R_TYPE;
	cmd_done(c, sc);
}

/* One step at sc->b[i] (i < n <= SS_RESP_CHUNK): the next i, or
 * SS_RESP_BAD when the bytes are not RESP. */
__noinline int resp_step(struct ss_anat_conn *c, struct ss_resp_scratch *sc, __u32 i, __u32 n)
{
	__u64 d, v;
	__u32 k;
	__u8 ch;

	if (!c || !sc || i >= n || n > SS_RESP_CHUNK)
		return SS_RESP_BAD;
	if (c->rst == R_SKIP) {
		d = n - i;
		if (d > c->rskip)
			d = c->rskip;
		c->rskip -= d;
		if (!c->rskip)
			elem_done(c, sc);
		return i + d;
	}
	ch = sc->b[i & (SS_RESP_CHUNK - 1)];
	i++;
	switch (c->rst) {
	case R_TYPE:
		if (ch != '*')
			return SS_RESP_BAD;
		c->rst = R_ANUM;
		c->rnum = 0;
		c->rnamelen = 0;
		break;
	case R_ANUM:
	case R_BNUM:
		if (ch >= '0' && ch <= '9') {
			v = (__u64)c->rnum * 10 + (ch - '0');
			if (v > (c->rst == R_ANUM ? SS_RESP_MAX_ARRAY : SS_RESP_MAX_BULK))
				return SS_RESP_BAD;
			c->rnum = v;
			c->rnamelen = 1;
		} else if (ch == '\r' && c->rnamelen) {
			c->rst = c->rst == R_ANUM ? R_ALF : R_BLF;
		} else {
			return SS_RESP_BAD;  /* '-', a sign, no digit, junk */
		}
		break;
	case R_ALF:
		if (ch != '\n')
			return SS_RESP_BAD;
		c->relems = c->rnum;
		c->rfirst = 1;
		c->rname[0] = 0;
		c->rname[1] = 0;
		c->rst = c->rnum ? R_BTYPE : R_TYPE;  /* `*0` is no command */
		break;
	case R_BTYPE:
		if (ch != '$')
			return SS_RESP_BAD;
		c->rst = R_BNUM;
		c->rnum = 0;
		c->rnamelen = 0;
		break;
	case R_BLF:
		if (ch != '\n')
			return SS_RESP_BAD;
		c->rskip = (__u64)c->rnum + 2;
		c->rnamelen = 0;
		c->rst = c->rfirst ? R_NAME : R_SKIP;
		break;
	case R_NAME:
		k = c->rnamelen;
		if (c->rskip > 2 && k < SS_RESP_NAME_LEN) {
			v = (ch >= 'a' && ch <= 'z') ? ch - 32 : ch;
			if (k < 8)
				c->rname[0] |= v << (8 * k);
			else
				c->rname[1] |= v << (8 * (k - 8));
			c->rnamelen = k + 1;
		}
		c->rskip--;
		if (!c->rskip)
			elem_done(c, sc);
		else if (c->rnamelen >= SS_RESP_NAME_LEN || c->rskip <= 2)
			c->rst = R_SKIP;
		break;
	default:
		return SS_RESP_BAD;
	}
	return i;
}

/* Parses the len bytes at the user address ubuf: 0, or -1 when it gave
 * up (malformed, unreadable, or more header bytes than it reads). */
__noinline int resp_parse(struct ss_anat_conn *c, __u64 ubuf, __u64 len)
{
	struct ss_resp_scratch *sc;
	__u32 zero = 0, chunks = 0, n, i;
	__u64 pos = 0, d;
	int it, k, bad = 0;

	sc = bpf_map_lookup_elem(&resp_scratch, &zero);
	if (!c || !sc)
		return -1;
	sc->pcount = 0;
	sc->pbatched = 0;
	bpf_for(it, 0, SS_RESP_MAX_ITERS) {
		if (pos >= len)
			break;
		if (c->rst == R_SKIP) {
			/* Passed without reading it. */
			d = len - pos;
			if (d > c->rskip)
				d = c->rskip;
			pos += d;
			c->rskip -= d;
			if (!c->rskip)
				elem_done(c, sc);
			continue;
		}
		if (chunks >= SS_RESP_MAX_CHUNKS)
			break;
		chunks++;
		n = len - pos > SS_RESP_CHUNK ? SS_RESP_CHUNK : len - pos;
		if (bpf_probe_read_user(sc->b, n & (2 * SS_RESP_CHUNK - 1), (void *)(ubuf + pos))) {
			bad = 1;
			break;
		}
		i = 0;
		bpf_for(k, 0, SS_RESP_CHUNK) {
			if (i >= n)
				break;
			i = resp_step(c, sc, i, n);
		}
		if (i > n) {
			bad = 1;
			break;
		}
		pos += n;
	}
	run_flush(c, sc);
	return bad || pos < len ? -1 : 0;
}

/* The user buffer the current read syscall filled (its first bytes are
 * this read's), or 0 when it is not one of read, recvfrom, readv and
 * recvmsg (readv and recvmsg: when the first iovec holds all `ret`). */
__noinline __u64 resp_user_buf(__u64 ret)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	const struct iovec *piov;
	struct user_msghdr m;
	struct iovec iov;
	long nr;

	if (!regs || (task->thread_info.status & TS_COMPAT))
		return 0;
	nr = BPF_CORE_READ(regs, orig_ax);
	if (nr == NR_READ || nr == NR_RECVFROM)
		return BPF_CORE_READ(regs, si);
	if (nr == NR_RECVMSG) {
		if (bpf_probe_read_user(&m, sizeof(m), (void *)BPF_CORE_READ(regs, si)))
			return 0;
		piov = m.msg_iov;
	} else if (nr == NR_READV) {
		piov = (const struct iovec *)BPF_CORE_READ(regs, si);
	} else {
		return 0;
	}
	if (bpf_probe_read_user(&iov, sizeof(iov), piov) || iov.iov_len < ret)
		return 0;
	return (__u64)iov.iov_base;
#else
	return 0;
#endif
}

/* A read of `ret` bytes on a followed TCP or Unix connection, in the
 * reader's syscall: its commands are counted (its first read decides
 * whether the connection speaks RESP). */
static __always_inline void resp_read(struct ss_anat_conn *c, int ret)
{
	__u64 ubuf;
	__u8 first = 0;

	if (c->rproto == SS_RESP_OFF)
		return;
	ubuf = resp_user_buf(ret);
	if (c->rproto != SS_RESP_ON) {
		if (!ubuf || bpf_probe_read_user(&first, 1, (void *)ubuf) || first != '*') {
			/* After a pause, wait for a read that begins a command. */
			if (c->rproto == SS_RESP_UNKNOWN)
				c->rproto = SS_RESP_OFF;
			return;
		}
		if (c->rproto == SS_RESP_UNKNOWN)
			count(SS_CNT_RESP_CONNS);
		c->rproto = SS_RESP_ON;
		c->rst = R_TYPE;
	}
	if (!ubuf || resp_parse(c, ubuf, ret) < 0) {
		c->rproto = SS_RESP_OFF;
		count(SS_CNT_RESP_GAVE_UP);
	}
}

/* A pause of a sampled window: the reads until the resume are not seen,
 * so the parser starts again at a read that begins a command. */
static __always_inline void resp_pause(struct ss_anat_conn *c)
{
	if (c->rproto == SS_RESP_ON)
		c->rproto = SS_RESP_RESYNC;
	c->rst = R_TYPE;
	c->rskip = 0;
	c->relems = 0;
}

#endif /* SOCKSCOPE_RESP_H */
