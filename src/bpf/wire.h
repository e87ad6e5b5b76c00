/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The command parsers' driver for the request anatomy (anatomy.bpf.c
 * includes this once, after names.h, resp.h and memcached.h): the bytes a
 * read returned are read back from the reader's own buffer (the syscall's
 * argument, from the task's saved registers) in chunks, and each byte run
 * through the connection's protocol's step (resp_step or mc_step); data
 * the protocol says to pass (a bulk string, a data block) is passed by
 * its length, never read. A connection's first read decides its protocol:
 * `*` begins RESP, a memcached command word memcached's text protocol, a
 * startup packet PostgreSQL's (pg_first), an HTTP/1 request line HTTP/1
 * (http1.h, which has its own driver); anything else is turns only.
 */
#ifndef SOCKSCOPE_WIRE_H
#define SOCKSCOPE_WIRE_H

/* Syscall numbers (x86_64) whose buffer is the second argument. */
#define NR_READ 0
#define NR_READV 19
#define NR_RECVFROM 45
#define NR_RECVMSG 47
#define TS_COMPAT 2

/* Parses the len bytes at the user address ubuf: 0; -1 when it gave up
 * (malformed, unreadable, or more line or header bytes than it reads);
 * -2 when the connection's first word is no memcached command; -3 when a
 * PostgreSQL connection went encrypted. */
__noinline int wire_parse(struct ss_anat_conn *c, __u64 ubuf, __u64 len)
{
	struct ss_resp_scratch *sc;
	struct ss_pg_conn *pg = 0;
	__u32 zero = 0, chunks = 0, n, i;
	__u64 pos = 0, d;
	int it, k, bad = 0, mc;

	if (c && (c->wire == SS_WIRE_HTTP1 || c->rproto == SS_RESP_PROBE_H1))
		return h1_parse(c, ubuf, len, 0);
	sc = bpf_map_lookup_elem(&resp_scratch, &zero);
	if (!c || !sc)
		return -1;
	sc->pcount = 0;
	sc->pbatched = 0;
	mc = c->wire == SS_WIRE_MEMCACHED || c->rproto == SS_RESP_PROBE;
	if (c->wire == SS_WIRE_POSTGRES) {
		pg = pg_conn(c, 0);
		if (!pg)
			return -1;  /* evicted (SS_PG_CONNS_MAX connections since) */
	}
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
			if (!c->rskip) {
				if (pg)
					pg_msg_done(c, pg, sc);
				else if (mc)
					mc_cmd_done(c, sc);
				else
					elem_done(c, sc);
			}
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
			if (pg)
				i = pg_step(c, pg, sc, i, n);
			else
				i = mc ? mc_step(c, sc, i, n) : resp_step(c, sc, i, n);
		}
		if (i > n) {
			bad = i == SS_MC_UNKNOWN ? 2 : i == SS_PG_ENCRYPTED ? 3 : 1;
			break;
		}
		pos += n;
	}
	run_flush(c, sc);
	if (bad == 2 || bad == 3)
		return -bad;
	return bad || pos < len ? -1 : 0;
}

/* The user buffer of the read (`send` 0) or write (`send` 1) syscall
 * under way: read, recvfrom / write, sendto: their buffer; readv, recvmsg
 * / writev, sendmsg: the first iovec's, when it holds at least `need`
 * bytes; 0 for any other syscall. */
__noinline __u64 wire_syscall_buf(__u64 need, __u32 send)
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
	if (send ? nr == NR_WRITE || nr == NR_SENDTO : nr == NR_READ || nr == NR_RECVFROM)
		return BPF_CORE_READ(regs, si);
	if (nr == (send ? NR_SENDMSG : NR_RECVMSG)) {
		if (bpf_probe_read_user(&m, sizeof(m), (void *)BPF_CORE_READ(regs, si)))
			return 0;
		piov = m.msg_iov;
	} else if (nr == (send ? NR_WRITEV : NR_READV)) {
		piov = (const struct iovec *)BPF_CORE_READ(regs, si);
	} else {
		return 0;
	}
	if (bpf_probe_read_user(&iov, sizeof(iov), piov) || iov.iov_len < need)
		return 0;
	return (__u64)iov.iov_base;
#else
	return 0;
#endif
}

/* The user buffer the current read syscall filled (its first bytes are
 * this read's), or 0 (see wire_syscall_buf). */
static __always_inline __u64 wire_user_buf(__u64 ret)
{
	return wire_syscall_buf(ret, 0);
}

/* DNS over UDP: the datagram just sent answers a query of QTYPE `name`:
 * its RCODE is counted under the name (status[]: NOERROR, NXDOMAIN,
 * SERVFAIL, any other), or the answer as unread. */
static __always_inline void dns_answered(const struct ss_anat_conn *c, __u64 name)
{
	__u64 ubuf = wire_syscall_buf(4, 1);
	__u8 h[4], rc;

	if (!ubuf || bpf_probe_read_user(h, sizeof(h), (void *)ubuf) || !(h[2] & 0x80)) {
		count(SS_CNT_DNS_RCODE_UNKNOWN);
		return;
	}
	rc = h[3] & 15;
	h1_status(c, name, rc == 0 ? 2 : rc == 3 ? 3 : rc == 2 ? 4 : 5);
}

/* PostgreSQL: does the connection's first read (ret bytes at ubuf) begin
 * a startup packet (a length the server takes, and the protocol 3.x or
 * SSLRequest, GSSENCRequest or CancelRequest's code)? Then the connection
 * is PostgreSQL's, its storage made. After a pause (SS_RESP_RESYNC), does
 * the read begin a frontend message (a type byte, a length of 4 or
 * more)? */
static __always_inline int pg_first(struct ss_anat_conn *c, __u64 ubuf, int ret)
{
	__u8 b[8];
	__u32 len, code;

	if (!ubuf || ret < 5 || bpf_probe_read_user(b, ret < 8 ? 5 : 8, (void *)ubuf))
		return 0;
	if (c->wire == SS_WIRE_POSTGRES) {
		len = (__u32)b[1] << 24 | (__u32)b[2] << 16 | (__u32)b[3] << 8 | b[4];
		if (len < 4 || !(b[0] == 'Q' || b[0] == 'P' || b[0] == 'B' || b[0] == 'S' ||
				 b[0] == 'X' || b[0] == 'E' || b[0] == 'D' || b[0] == 'H' ||
				 b[0] == 'C' || b[0] == 'F'))
			return 0;
		c->rst = P_TYPE;
		c->rnum = 0;
		c->rnamelen = 0;
		return 1;
	}
	if (ret < 8)
		return 0;
	len = (__u32)b[0] << 24 | (__u32)b[1] << 16 | (__u32)b[2] << 8 | b[3];
	code = (__u32)b[4] << 24 | (__u32)b[5] << 16 | (__u32)b[6] << 8 | b[7];
	if (len < 8 || len > SS_PG_STARTUP_MAX ||
	    !((code >> 16) == SS_PG_CODE_V3 || code == SS_PG_CODE_SSL ||
	      code == SS_PG_CODE_GSSENC || code == SS_PG_CODE_CANCEL))
		return 0;
	if (!pg_conn(c, 1)) {
		count(SS_CNT_STORAGE_FULL);
		return 0;
	}
	count(SS_CNT_PG_CONNS);
	c->wire = SS_WIRE_POSTGRES;
	c->rst = P_START_LEN;
	c->rnum = 0;
	c->rnamelen = 0;
	c->rskip = 0;
	return 1;
}

/* DNS over TCP: a read of `ret` bytes at ubuf on a connection that
 * speaks it (or may: SS_RESP_PROBE_DNS). A connection whose first query
 * does not parse is no DNS one (left alone, uncounted); one given up on
 * later is counted. After a pause the parser starts again at the read,
 * taken for a message's start; one that is not waits for the next read. */
static __always_inline int dns_read(struct ss_anat_conn *c, __u64 ubuf, int ret)
{
	bool resync = c->rproto == SS_RESP_RESYNC;

	if (resync) {
		__builtin_memset(&c->dns, 0, sizeof(c->dns));
		c->rproto = SS_RESP_ON;
	}
	if (ubuf && dns_run(c, &c->dns, ubuf, ret, 0) >= 0)
		return 0;
	if (c->wire != SS_WIRE_DNS) {
		c->rproto = SS_RESP_OFF;
	} else if (resync) {
		c->rproto = SS_RESP_RESYNC;
	} else {
		c->rproto = SS_RESP_OFF;
		count(SS_CNT_DNS_GAVE_UP);
	}
	return 0;
}

/* DNS over UDP: the datagram of `ret` bytes just read, one query or none:
 * its QTYPE (counted under it), else 0. A socket's first query makes it
 * DNS; on a DNS socket a datagram that is no query is counted malformed,
 * and the next is read all the same (each stands alone); a socket whose
 * first SS_DNS_UDP_PROBES datagrams were no query is left alone. */
static __always_inline __u64 dns_datagram(struct ss_anat_conn *c, int ret)
{
	struct ss_dns_parse p = {};
	__u64 ubuf;

	if (c->rproto == SS_RESP_OFF)
		return 0;
	ubuf = wire_user_buf(ret);
	p.st = D_HDR;
	p.left = ret;
	if (ubuf && dns_run(c, &p, ubuf, ret, 1) == 1 && p.st == D_DONE) {
		if (c->wire != SS_WIRE_DNS) {
			c->wire = SS_WIRE_DNS;
			c->rproto = SS_RESP_ON;
			count(SS_CNT_DNS_CONNS);
		}
		count(SS_CNT_COMMANDS);
		name_add(c, p.qtype, 0, 1, 0);
		return p.qtype;
	}
	if (c->wire == SS_WIRE_DNS)
		count(SS_CNT_DNS_MALFORMED);
	else if (++c->rnum >= SS_DNS_UDP_PROBES)
		c->rproto = SS_RESP_OFF;
	return 0;
}

/* A read of `ret` bytes on a followed TCP or Unix connection, in the
 * reader's syscall (or, `tls`, OpenSSL's read of ret plaintext bytes at
 * `plain`, as it returns: tls.h; `tls` is a constant of the caller): its
 * commands are counted (its first read decides whether the connection
 * speaks RESP or memcached's text protocol, or is TLS). 1 when the turn
 * so far holds only memcached `noreply` commands, all read whole: no
 * response will come to it. */
static __always_inline int wire_read(const struct sock *sk, struct ss_anat_conn *c, int ret,
				     __u64 plain, bool tls)
{
	__u64 ubuf;
	__u8 first = 0;
	int r;

	if (c->rproto == SS_RESP_OFF)
		return 0;
	ubuf = tls ? plain : wire_user_buf(ret);
	if (c->wire == SS_WIRE_DNS || c->rproto == SS_RESP_PROBE_DNS)
		return dns_read(c, ubuf, ret);
	if (c->rproto == SS_RESP_UNKNOWN || c->rproto == SS_RESP_RESYNC) {
		if (!ubuf || bpf_probe_read_user(&first, 1, (void *)ubuf))
			first = 0;
		if (((first == 0 || first == 1) && c->wire == SS_WIRE_NONE) ||
		    c->wire == SS_WIRE_POSTGRES) {
			/* PostgreSQL's startup (or, after a pause, a message);
			 * else perhaps a DNS message's length. */
			if (!pg_first(c, ubuf, ret)) {
				if (c->rproto == SS_RESP_UNKNOWN && ubuf &&
				    c->wire == SS_WIRE_NONE) {
					c->rproto = SS_RESP_PROBE_DNS;
					__builtin_memset(&c->dns, 0, sizeof(c->dns));
					return dns_read(c, ubuf, ret);
				}
				if (c->rproto == SS_RESP_UNKNOWN)
					c->rproto = SS_RESP_OFF;
				return 0;
			}
			c->rproto = SS_RESP_ON;
		} else if (first == '*' && c->wire != SS_WIRE_MEMCACHED) {
			if (c->wire == SS_WIRE_NONE)
				count(SS_CNT_RESP_CONNS);
			c->wire = SS_WIRE_RESP;
			c->rproto = SS_RESP_ON;
			c->rst = R_TYPE;
		} else if (first == 'P' && c->wire == SS_WIRE_NONE && c->rproto == SS_RESP_UNKNOWN &&
			   h2_first(sk, c, ubuf, ret, tls)) {
			/* HTTP/2's preface (h2.h): streams from here on. */
			return 0;
		} else if (first >= 'A' && first <= 'Z' &&
			   (c->wire == SS_WIRE_NONE || c->wire == SS_WIRE_HTTP1)) {
			/* Its request line tells (http1.h). */
			c->rproto = SS_RESP_PROBE_H1;
			c->h1.req.st = H_START;
		} else if (first >= 'a' && first <= 'z' &&
			   (c->wire == SS_WIRE_NONE || c->wire == SS_WIRE_MEMCACHED)) {
			/* Its first word tells (mc_name_end). */
			c->rproto = SS_RESP_PROBE;
			mc_line_reset(c);
		} else if (first >= 0x14 && first <= 0x17 && !tls && c->wire == SS_WIRE_NONE &&
			   c->rproto == SS_RESP_UNKNOWN && c->proto == PROTO_TCP &&
			   (r = tls_record(ubuf, ret))) {
			/* TLS (tls.h): the bytes are ciphertext. */
			tls_begin(c, r == 1);
			return 0;
		} else if (first == 0x80 && c->wire == SS_WIRE_NONE) {
			/* memcached's binary protocol: not parsed. */
			count(SS_CNT_MC_CONNS);
			count(SS_CNT_MC_GAVE_UP);
			c->wire = SS_WIRE_MEMCACHED;
			c->rproto = SS_RESP_OFF;
			return 0;
		} else {
			/* After a pause, wait for a read that begins a command. */
			if (c->rproto == SS_RESP_UNKNOWN)
				c->rproto = SS_RESP_OFF;
			return 0;
		}
	}
	r = ubuf ? wire_parse(c, ubuf, ret) : -1;
	if (r == -2 || (r < 0 && c->wire == SS_WIRE_NONE)) {
		/* Not memcached (or, after a pause, not a command's start). */
		c->rproto = c->wire == SS_WIRE_NONE ? SS_RESP_OFF : SS_RESP_RESYNC;
		return 0;
	}
	if (r == -3) {
		/* PostgreSQL gone TLS or GSS after asking: not readable. */
		c->rproto = SS_RESP_OFF;
		count(SS_CNT_PG_ENCRYPTED);
		return 0;
	}
	if (r < 0) {
		c->rproto = SS_RESP_OFF;
		count(wire_counter(c, SS_CNT_RESP_GAVE_UP, SS_CNT_MC_GAVE_UP, SS_CNT_PG_GAVE_UP,
				   SS_CNT_H1_GAVE_UP, SS_CNT_DNS_GAVE_UP));
		return 0;
	}
	return c->wire == SS_WIRE_MEMCACHED && c->rproto == SS_RESP_ON &&
	       (c->flags & SS_CONN_NOREPLY) && !c->tcmds && c->rst == M_NAME && !c->relems;
}

/* A pause of a sampled window: the reads until the resume are not seen,
 * so the parser starts again at a read that begins a command. */
static __always_inline void wire_pause(struct ss_anat_conn *c)
{
	if (c->rproto == SS_RESP_ON ||
	    ((c->rproto == SS_RESP_PROBE || c->rproto == SS_RESP_PROBE_H1) &&
	     c->wire != SS_WIRE_NONE))
		c->rproto = SS_RESP_RESYNC;
	else if (c->rproto == SS_RESP_PROBE || c->rproto == SS_RESP_PROBE_H1 ||
		 c->rproto == SS_RESP_PROBE_DNS)
		c->rproto = SS_RESP_UNKNOWN;
	if (c->wire == SS_WIRE_HTTP1)
		h1_pause(c);
	c->rst = R_TYPE;
	c->rskip = 0;
	c->relems = 0;
}

#endif /* SOCKSCOPE_WIRE_H */
