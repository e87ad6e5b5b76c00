/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * memcached's text protocol: request boundaries for the request anatomy
 * (anatomy.bpf.c includes this once, after names.h and resp.h; wire.h
 * reads the bytes back and runs them through this step, one byte at a
 * time, with the state kept in the connection's storage, so a command may
 * be cut anywhere by the reads).
 *
 * A command is a line ended by '\n' (the '\r' before it is optional, as
 * memcached has it); its name is its first word, as sent (memcached's
 * commands are lower case), its first SS_RESP_NAME_LEN bytes kept. The
 * storage commands (set, add, replace, append, prepend, cas: <bytes> is
 * the fifth word; ms: the third) are followed by a data block of <bytes>
 * bytes and "\r\n", passed by its length and never read: the command is
 * complete at its last byte. `get k1 k2 ...` is one command. A command
 * that takes `noreply` (storage, delete, incr, decr, touch, verbosity,
 * flush_all) with it as its last word gets no response: it is counted
 * (and apart), never a turn's command. Only the name is kept: no key or value
 * byte.
 *
 * A connection is memcached when its first word is one of memcached's
 * commands (mc_known) followed by a space or a line's end; a first byte
 * 0x80 (the binary protocol's magic) is counted as a memcached connection
 * given up on. The parser gives up on a connection (SS_RESP_OFF: its turns
 * are timed as before, its commands no longer counted) on a line longer
 * than SS_MC_MAX_LINE bytes, a '\r' not followed by '\n' (but in a
 * retrieval's keys, which are not looked at: memcached takes it there
 * as a key's byte), a <bytes> field
 * that is not a number or is over SS_MC_MAX_DATA, or (wire.h) a read with
 * more line bytes than it reads or whose buffer it cannot read.
 */
#ifndef SOCKSCOPE_MEMCACHED_H
#define SOCKSCOPE_MEMCACHED_H

#define SS_MC_MAX_LINE 2048        /* memcached's own key limit is 250 bytes */
#define SS_MC_MAX_DATA (1u << 30)  /* memcached's -I tops out at 1 GiB */
#define SS_MC_UNKNOWN 0x20000      /* a step's "the first word is no command" */
#define SS_MC_PROBE_LEN 14         /* the longest known command word */

/* The parser's states (ss_anat_conn.rst; R_SKIP is the data block). */
enum ss_mc_state {
	M_NAME = 8,    /* the line's first word */
	M_SPACE = 9,   /* between words */
	M_WORD = 10,   /* a later word */
	M_LF = 11,     /* '\n' after a '\r' */
	M_REST = 12,   /* the rest of a line none of whose words matter (a
			* retrieval's keys): only its end is looked for */
};

/* ss_anat_conn.mkind: where a command's <bytes> is. */
enum ss_mc_kind {
	MC_PLAIN = 0,      /* no data block */
	MC_STORE = 1,      /* set/add/replace/append/prepend/cas: the fifth word */
	MC_META_SET = 2,   /* ms: the third word */
};

/* ss_anat_conn.mflags */
enum ss_mc_flags {
	MF_BYTES = 1,       /* the <bytes> word was read */
	MF_NOREPLY_WORD = 2, /* the last word read was `noreply` */
	MF_NOREPLY = 4,     /* the command is noreply (kept through its data) */
	MF_NOREPLY_OK = 8,  /* the command takes `noreply` (memcached reads it
			     * only on these; `get noreply` is answered) */
};

/* A word's first 16 bytes as ss_anat_conn.rname packs them (little
 * endian, zeros past its end): constants the compiler folds. */
#define MC_PADDED(s) (s "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0")
#define MC_B(s, i) ((__u64)(__u8)MC_PADDED(s)[i] << (8 * ((i) & 7)))
#define MC_LO(s) (MC_B(s, 0) | MC_B(s, 1) | MC_B(s, 2) | MC_B(s, 3) | MC_B(s, 4) | \
		  MC_B(s, 5) | MC_B(s, 6) | MC_B(s, 7))
#define MC_HI(s) (MC_B(s, 8) | MC_B(s, 9) | MC_B(s, 10) | MC_B(s, 11) | MC_B(s, 12) | \
		  MC_B(s, 13) | MC_B(s, 14) | MC_B(s, 15))
#define MC_IS(lo, hi, s) ((lo) == MC_LO(s) && (hi) == MC_HI(s))

/* Is the word (lo, hi) one of memcached's commands? (Run once per
 * connection, on its first word.) */
__noinline int mc_known(__u64 lo, __u64 hi)
{
	if (hi)
		return 0;  /* the longer ones: mc_known_long */
	return MC_IS(lo, hi, "get") || MC_IS(lo, hi, "gets") || MC_IS(lo, hi, "gat") ||
	       MC_IS(lo, hi, "gats") || MC_IS(lo, hi, "set") || MC_IS(lo, hi, "add") ||
	       MC_IS(lo, hi, "replace") || MC_IS(lo, hi, "append") ||
	       MC_IS(lo, hi, "prepend") || MC_IS(lo, hi, "cas") || MC_IS(lo, hi, "delete") ||
	       MC_IS(lo, hi, "incr") || MC_IS(lo, hi, "decr") || MC_IS(lo, hi, "touch") ||
	       MC_IS(lo, hi, "version") || MC_IS(lo, hi, "stats") || MC_IS(lo, hi, "quit") ||
	       MC_IS(lo, hi, "shutdown") || MC_IS(lo, hi, "slabs") || MC_IS(lo, hi, "watch") ||
	       MC_IS(lo, hi, "mg") || MC_IS(lo, hi, "ms") || MC_IS(lo, hi, "md") ||
	       MC_IS(lo, hi, "ma") || MC_IS(lo, hi, "mn") || MC_IS(lo, hi, "me");
}

/* The known commands longer than 8 bytes. */
__noinline int mc_known_long(__u64 lo, __u64 hi)
{
	return MC_IS(lo, hi, "flush_all") || MC_IS(lo, hi, "verbosity") ||
	       MC_IS(lo, hi, "lru_crawler") || MC_IS(lo, hi, "cache_memlimit");
}

/* A new line begins. */
static __always_inline void mc_line_reset(struct ss_anat_conn *c)
{
	c->rst = M_NAME;
	c->rname[0] = 0;
	c->rname[1] = 0;
	c->rnamelen = 0;
	c->relems = 0;
	c->rfirst = 0;
	c->rnum = 0;
	c->rskip = 0;
	c->mkind = MC_PLAIN;
	c->mmatch = 0;
	c->mflags = 0;
}

/* A command is read whole (its line, and its data block if it has one). */
static __always_inline void mc_cmd_done(struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	if (c->mflags & MF_NOREPLY) {
		name_noreply(c, c->rname[0], c->rname[1]);
		c->flags |= SS_CONN_NOREPLY;
	} else {
		cmd_done(c, sc);
	}
	mc_line_reset(c);
}

/* The first word ends: what the command is, and (on the connection's
 * first word) whether the connection is memcached at all. */
static __always_inline int mc_name_end(struct ss_anat_conn *c)
{
	__u64 lo = c->rname[0], hi = c->rname[1];

	if (c->rproto == SS_RESP_PROBE) {
		if (!mc_known(lo, hi) && !mc_known_long(lo, hi))
			return -1;
		if (c->wire == SS_WIRE_NONE)
			count(SS_CNT_MC_CONNS);
		c->wire = SS_WIRE_MEMCACHED;
		c->rproto = SS_RESP_ON;
	}
	if (hi == 0 && (lo == MC_LO("set") || lo == MC_LO("add") || lo == MC_LO("replace") ||
			lo == MC_LO("append") || lo == MC_LO("prepend") || lo == MC_LO("cas"))) {
		c->mkind = MC_STORE;
		c->mflags |= MF_NOREPLY_OK;
	} else if (hi == 0 && lo == MC_LO("ms")) {
		c->mkind = MC_META_SET;
	} else if ((hi == 0 && (lo == MC_LO("delete") || lo == MC_LO("incr") ||
				lo == MC_LO("decr") || lo == MC_LO("touch"))) ||
		   MC_IS(lo, hi, "verbosity") || MC_IS(lo, hi, "flush_all")) {
		c->mflags |= MF_NOREPLY_OK;
	}
	return 0;
}

/* A word after the first ends. */
static __always_inline void mc_word_end(struct ss_anat_conn *c)
{
	__u8 bytes_at = c->mkind == MC_STORE ? 4 : c->mkind == MC_META_SET ? 2 : 0;

	if (c->mmatch == 7)
		c->mflags |= MF_NOREPLY_WORD;
	else
		c->mflags &= ~MF_NOREPLY_WORD;
	if (bytes_at && c->rfirst == bytes_at)
		c->mflags |= MF_BYTES;
}

/* The line ends ('\n'): the command is complete, or its data block is
 * next. (A global function: mc_step reaches it from four places.) */
__noinline int mc_line_end(struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	if (!c || !sc)
		return 0;
	if (!c->rnamelen) {
		/* An empty line (memcached answers ERROR): no command; its
		 * turn stays a turn. */
		mc_line_reset(c);
		return 0;
	}
	if (c->rfirst && (c->mflags & MF_NOREPLY_WORD) && (c->mflags & MF_NOREPLY_OK))
		c->mflags |= MF_NOREPLY;
	if (c->mkind != MC_PLAIN && (c->mflags & MF_BYTES)) {
		c->rskip = (__u64)c->rnum + 2;
		c->rst = R_SKIP;
		return 0;
	}
	mc_cmd_done(c, sc);
	return 0;
}

/* Passes sc->b's bytes from i up to the first ' ', '\r' or '\n' (`line`:
 * the first '\n') or n: the new i. One call for a word (or a line's
 * rest) instead of one step a byte. */
static __always_inline __u32 mc_scan(const struct ss_resp_scratch *sc, __u32 i, __u32 n, int line)
{
	int j;
	__u8 ch;

	bpf_for(j, 0, SS_RESP_CHUNK) {
		if (i >= n)
			break;
		ch = sc->b[i & (SS_RESP_CHUNK - 1)];
		if (ch == '\n' || (!line && (ch == ' ' || ch == '\r')))
			break;
		i++;
	}
	return i;
}

/* One step at sc->b[i] (i < n <= SS_RESP_CHUNK): the next i, or
 * SS_RESP_BAD (give up), or SS_MC_UNKNOWN (the connection's first word
 * is no memcached command). */
__noinline int mc_step(struct ss_anat_conn *c, struct ss_resp_scratch *sc, __u32 i, __u32 n)
{
	__u8 bytes_at, k, ch;
	__u32 k2;
	__u64 d, v;

	if (!c || !sc || i >= n || n > SS_RESP_CHUNK)
		return SS_RESP_BAD;
	if (c->rst == R_SKIP) {
		d = n - i;
		if (d > c->rskip)
			d = c->rskip;
		c->rskip -= d;
		if (!c->rskip)
			mc_cmd_done(c, sc);
		return i + d;
	}
	ch = sc->b[i & (SS_RESP_CHUNK - 1)];
	i++;
	if (++c->relems > SS_MC_MAX_LINE)
		return SS_RESP_BAD;
	switch (c->rst) {
	case M_NAME:
		if (ch == ' ' || ch == '\r' || ch == '\n') {
			if (!c->rnamelen) {
				if (c->rproto == SS_RESP_PROBE)
					return SS_MC_UNKNOWN;
				if (ch == ' ')
					break;  /* memcached skips leading spaces */
			} else if (mc_name_end(c) < 0) {
				return SS_MC_UNKNOWN;
			}
			if (ch == ' ')
				/* A retrieval's (or version's, stats'...) words
				 * do not matter: its line's end does. */
				c->rst = c->mkind == MC_PLAIN && !(c->mflags & MF_NOREPLY_OK) ?
					M_REST : M_SPACE;
			else if (ch == '\r')
				c->rst = M_LF;
			else
				mc_line_end(c, sc);
			break;
		}
		k = c->rnamelen;
		if (c->rproto == SS_RESP_PROBE &&
		    (k >= SS_MC_PROBE_LEN || !((ch >= 'a' && ch <= 'z') || ch == '_')))
			return SS_MC_UNKNOWN;
		if (k < SS_RESP_NAME_LEN) {
			if (k < 8)
				c->rname[0] |= (__u64)ch << (8 * k);
			else
				c->rname[1] |= (__u64)ch << (8 * (k - 8));
			c->rnamelen = k + 1;
		} else {
			/* Past the name's bytes: keep it from matching a
			 * shorter command's. */
			c->rnamelen = SS_RESP_NAME_LEN;
		}
		break;
	case M_LF:
		if (ch != '\n')
			return SS_RESP_BAD;
		mc_line_end(c, sc);
		break;
	case M_REST:
		if (ch == '\n') {
			mc_line_end(c, sc);
			break;
		}
		k2 = mc_scan(sc, i, n, 1);
		c->relems += k2 - i;
		if (c->relems > SS_MC_MAX_LINE)
			return SS_RESP_BAD;
		return k2;
	case M_SPACE:
		if (ch == ' ')
			break;
		if (ch == '\r') {
			c->rst = M_LF;
			break;
		}
		if (ch == '\n') {
			mc_line_end(c, sc);
			break;
		}
		/* A word begins. */
		if (c->rfirst < 255)
			c->rfirst++;
		c->mmatch = 0;
		c->rnum = 0;
		c->rst = M_WORD;
		/* fallthrough */
	case M_WORD:
		if (ch == ' ' || ch == '\r' || ch == '\n') {
			mc_word_end(c);
			if (ch == ' ')
				c->rst = M_SPACE;
			else if (ch == '\r')
				c->rst = M_LF;
			else
				mc_line_end(c, sc);
			break;
		}
		k = c->mmatch;
		if (k < 7 && ch == (__u8)(MC_LO("noreply") >> (8 * k)))
			c->mmatch = k + 1;
		else
			c->mmatch = 255;
		bytes_at = c->mkind == MC_STORE ? 4 : c->mkind == MC_META_SET ? 2 : 0;
		if (!(bytes_at && c->rfirst == bytes_at) &&
		    !(c->rfirst > bytes_at && (c->mflags & MF_NOREPLY_OK))) {
			/* Neither <bytes> nor a word that may be the last
			 * `noreply` (a key, flags, exptime; a meta command's
			 * flags): only its end matters. */
			c->mmatch = 255;
			k2 = mc_scan(sc, i, n, 0);
			c->relems += k2 - i;
			if (c->relems > SS_MC_MAX_LINE)
				return SS_RESP_BAD;
			return k2;
		}
		if (bytes_at && c->rfirst == bytes_at) {
			if (ch < '0' || ch > '9')
				return SS_RESP_BAD;
			v = (__u64)c->rnum * 10 + (ch - '0');
			if (v > SS_MC_MAX_DATA)
				return SS_RESP_BAD;
			c->rnum = v;
		}
		break;
	default:
		return SS_RESP_BAD;
	}
	return i;
}

#endif /* SOCKSCOPE_MEMCACHED_H */
