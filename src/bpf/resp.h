/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * RESP (Redis/Valkey) request boundaries for the request anatomy
 * (anatomy.bpf.c includes this once, after names.h; wire.h reads the
 * bytes back and runs them through this step, one byte at a time): a
 * state machine kept in the connection's storage, so a command may be
 * cut anywhere by the reads. A command is an array of bulk strings
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
 * The per-byte step is a global function called from wire.h's
 * open-coded loop: inlined, its branches times the loop's length are past
 * what the verifier walks.
 */
#ifndef SOCKSCOPE_RESP_H
#define SOCKSCOPE_RESP_H

#define SS_RESP_MAX_CHUNKS 16      /* at most 4 KiB read per read */
#define SS_RESP_MAX_ITERS 64       /* chunks and skips per read */
#define SS_RESP_MAX_ARRAY (1u << 24)   /* arguments of a command */
#define SS_RESP_MAX_BULK (1u << 29)    /* redis's proto-max-bulk-len: 512 MiB */
#define SS_RESP_BAD 0x10000        /* a step's "malformed" */

enum ss_resp_state {
	R_TYPE = 0,   /* '*' of the next command */
	R_ANUM = 1,   /* its count's digits */
	R_ALF = 2,    /* '\n' after the count */
	R_BTYPE = 3,  /* '$' of the next bulk string */
	R_BNUM = 4,   /* its length's digits */
	R_BLF = 5,    /* '\n' after the length */
	R_NAME = 6,   /* the first bulk's bytes: the name */
	R_SKIP = 7,   /* the rest of a bulk string and its CRLF, by length
		       * (memcached.h's data block too) */
};

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

#endif /* SOCKSCOPE_RESP_H */
