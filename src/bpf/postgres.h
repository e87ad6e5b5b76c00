/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * PostgreSQL's frontend/backend protocol (v3): request boundaries for the
 * request anatomy (anatomy.bpf.c includes this once, after names.h, resp.h
 * and memcached.h; wire.h reads the bytes back and runs them through
 * pg_step, with the message state in the connection's storage, so a
 * message may be cut anywhere by the reads).
 *
 * A connection is PostgreSQL when its first read begins a startup packet
 * (int32 length in [8, 10000], then the protocol 3.x, or SSLRequest,
 * GSSENCRequest or CancelRequest's code; wire.h's pg_first). Startup
 * packets are passed by length; after SSLRequest or GSSENCRequest the next
 * bytes are a startup packet again (the server said 'N') or encrypted: then
 * the connection is counted as not readable (SS_CNT_PG_ENCRYPTED) and its
 * turns stay turns. Every later message is a type byte and an int32 length
 * that counts itself: a body is passed by its length, never read, but for
 * the few bytes a name needs (Query's and Parse's first keyword, Parse's
 * and Bind's statement name).
 *
 * Requests: a simple Query ('Q') is one, named by its SQL's first keyword
 * (SELECT, INSERT, UPDATE, DELETE, BEGIN, COMMIT, ROLLBACK, OTHER); an
 * extended query's Sync ('S') is one, named by what its Execute ran: the
 * kind of the statement its last Bind bound, and that statement's name
 * when it is named (a Sync that executed nothing: PARSE after a Parse,
 * SYNC otherwise); a FunctionCall ('F') is one (FUNCTION). Flush,
 * Describe, Close, COPY's data and the password messages are not.
 * Terminate ('X') ends the connection's parsing.
 *
 * Prepared statements' kinds are kept per connection in pg_conns (an LRU
 * map of SS_PG_CONNS_MAX entries keyed by the socket, each a table of
 * SS_PG_STMTS statement names (their first 15 bytes) and kinds, replaced
 * round robin when full): a Bind of a statement not in it (evicted by a
 * flood of names, or prepared before the window) is named UNKNOWN. No SQL
 * text, parameter or value byte is kept: only a kind and a statement name.
 *
 * The parser gives up on a connection (SS_RESP_OFF, counted in
 * SS_CNT_PG_GAVE_UP: its turns are timed as before) on a length under 4, a
 * type byte no frontend message has, or (wire.h) a read with more bytes to
 * look at than it reads or whose buffer it cannot read.
 */
#ifndef SOCKSCOPE_POSTGRES_H
#define SOCKSCOPE_POSTGRES_H

#define SS_PG_CODE_V3 3u                /* the protocol's major version (code >> 16) */
#define SS_PG_CODE_CANCEL 80877102u
#define SS_PG_CODE_SSL 80877103u
#define SS_PG_CODE_GSSENC 80877104u
#define SS_PG_STARTUP_MAX 10000u        /* the server's MAX_STARTUP_PACKET_LENGTH */
#define SS_PG_SCAN_MAX 128              /* bytes looked at for a keyword or a name */
#define SS_PG_ENCRYPTED 0x30000         /* a step's "encrypted after SSL/GSSENCRequest" */

/* The parser's states (ss_anat_conn.rst; R_SKIP passes a body). */
enum ss_pg_state {
	P_START_LEN = 13,  /* a startup packet's length (4 bytes) */
	P_START_CODE = 14, /* its code (4 bytes) */
	P_TYPE = 15,       /* a message's type byte */
	P_LEN = 16,        /* its length (4 bytes) */
	P_CSTR = 17,       /* a name in a body, up to its NUL */
	P_SQL = 18,        /* a body's SQL, up to its first keyword's end */
};

/* ss_pg_conn.flags */
enum ss_pg_flags {
	PG_EXECUTED = 1,   /* an Execute since the last Sync */
	PG_PARSED = 2,     /* a Parse since the last Sync */
	PG_ENC_ASKED = 4,  /* an SSLRequest or GSSENCRequest was read */
};

/* ss_pg_conn.kw: where the keyword scan is. */
enum ss_pg_kw_state {
	KW_SPACE = 0,    /* before the keyword */
	KW_DASH = 1,     /* a '-': a comment's start? */
	KW_LINE = 2,     /* in a `--` comment */
	KW_SLASH = 3,    /* a '/': a comment's start? */
	KW_BLOCK = 4,    /* in a block comment */
	KW_STAR = 5,     /* a '*' in a block comment */
	KW_WORD = 6,     /* in the keyword */
};

/* The message's byte of a Parse ("the statement's name first") or a Bind
 * (the portal's name, then the statement's), in ss_anat_conn.rfirst. */
enum ss_pg_field {
	PF_NAME = 0,     /* Parse: the statement name; Bind: the portal */
	PF_STMT = 1,     /* Bind: the statement name */
};

/* One connection's extended-protocol state and prepared statements. */
struct ss_pg_conn {
	__u64 stmt[SS_PG_STMTS][2]; /* byte 0 the kind, 1..15 the name (0: free) */
	__u64 cur[2];       /* the name the next Sync's request gets */
	__u64 build[2];     /* the name being read (byte 0 left for the kind) */
	__u64 word;         /* the keyword's letters, upper-cased */
	__u32 scanned;      /* bytes of the current field looked at */
	__u8 kw;            /* enum ss_pg_kw_state */
	__u8 wlen;          /* letters in word */
	__u8 flags;         /* enum ss_pg_flags */
	__u8 next;          /* the slot a new name takes when none is free */
	__u8 qkind;         /* the Query being read: its kind */
	__u8 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SS_PG_CONNS_MAX);
	__type(key, __u64);   /* the socket's address (ss_anat_conn.sk) */
	__type(value, struct ss_pg_conn);
} pg_conns SEC(".maps");

const struct ss_pg_conn zero_pg = {};

/* The connection's state, made (empty) when `make`. */
static __always_inline struct ss_pg_conn *pg_conn(const struct ss_anat_conn *c, int make)
{
	__u64 k = c->sk;
	struct ss_pg_conn *p = bpf_map_lookup_elem(&pg_conns, &k);

	if (p || !make)
		return p;
	bpf_map_update_elem(&pg_conns, &k, &zero_pg, BPF_ANY);
	return bpf_map_lookup_elem(&pg_conns, &k);
}

/* A word's kind, from its upper-cased letters (8 at most: longer is no
 * keyword of these). */
static __always_inline __u8 pg_kind_of(__u64 w, __u8 len)
{
	if (len > 8)
		return SS_PG_OTHER;
	if (w == MC_LO("SELECT"))
		return SS_PG_SELECT;
	if (w == MC_LO("INSERT"))
		return SS_PG_INSERT;
	if (w == MC_LO("UPDATE"))
		return SS_PG_UPDATE;
	if (w == MC_LO("DELETE"))
		return SS_PG_DELETE;
	if (w == MC_LO("BEGIN") || w == MC_LO("START"))
		return SS_PG_BEGIN;
	if (w == MC_LO("COMMIT") || w == MC_LO("END"))
		return SS_PG_COMMIT;
	if (w == MC_LO("ROLLBACK") || w == MC_LO("ABORT"))
		return SS_PG_ROLLBACK;
	return SS_PG_OTHER;
}

/* The statement table's slot of name (lo's byte 0 ignored), or -1. */
static __always_inline int pg_find(const struct ss_pg_conn *p, __u64 lo, __u64 hi)
{
	int s;

	bpf_for(s, 0, SS_PG_STMTS) {
		if (p->stmt[s][0] && ((p->stmt[s][0] ^ lo) & ~0xffull) == 0 && p->stmt[s][1] == hi)
			return s;
	}
	return -1;
}

/* A Parse is read: its statement's kind is kept under its name. (Global
 * functions, as pg_bound: their loop stays out of the step's.) */
__noinline int pg_parsed(struct ss_pg_conn *p, __u8 kind)
{
	__u64 lo, hi;
	int s;

	if (!p)
		return 0;
	lo = (p->build[0] & ~0xffull) | kind;
	hi = p->build[1];
	s = pg_find(p, lo, hi);

	if (s < 0) {
		s = p->next & (SS_PG_STMTS - 1);
		p->next = (s + 1) & (SS_PG_STMTS - 1);
	}
	if (s >= 0 && s < SS_PG_STMTS) {
		p->stmt[s][0] = lo;
		p->stmt[s][1] = hi;
	}
	p->flags |= PG_PARSED;
	return 0;
}

/* A Bind's statement name is read: the request at the next Sync is
 * named after it. */
__noinline int pg_bound(struct ss_pg_conn *p)
{
	int s;

	if (!p)
		return 0;
	s = pg_find(p, p->build[0], p->build[1]);

	if (s >= 0 && s < SS_PG_STMTS) {
		p->cur[0] = p->stmt[s][0];
		p->cur[1] = p->stmt[s][1];
	} else {
		p->cur[0] = (p->build[0] & ~0xffull) | SS_PG_UNKNOWN;
		p->cur[1] = p->build[1];
	}
	return 0;
}

/* A request is read whole, named (lo, hi). */
static __always_inline void pg_request(struct ss_anat_conn *c, struct ss_resp_scratch *sc,
				       __u64 lo, __u64 hi)
{
	c->rname[0] = lo;
	c->rname[1] = hi;
	cmd_done(c, sc);
}

/* The SQL's first keyword ended (or was not found within the bound). */
static __always_inline void pg_keyword_done(struct ss_anat_conn *c, struct ss_pg_conn *p,
					    struct ss_resp_scratch *sc)
{
	__u8 kind = p->kw == KW_WORD ? pg_kind_of(p->word, p->wlen) : SS_PG_OTHER;

	if (c->mkind == 'Q')
		p->qkind = kind;  /* the request, once its body is passed */
	else
		pg_parsed(p, kind);
	c->rst = R_SKIP;
}

/* A message's body is passed whole (c->mkind its type). A global
 * function: reached from the driver's skip and from the step. */
__noinline int pg_msg_done(struct ss_anat_conn *c, struct ss_pg_conn *p,
			   struct ss_resp_scratch *sc)
{
	if (!c || !p || !sc)
		return 0;
	c->rst = P_TYPE;
	switch (c->mkind) {
	case 'Q':
		pg_request(c, sc, p->qkind, 0);
		break;
	case 'S':
		if (p->flags & PG_EXECUTED)
			pg_request(c, sc, p->cur[0], p->cur[1]);
		else
			pg_request(c, sc, p->flags & PG_PARSED ? SS_PG_PARSE : SS_PG_SYNC, 0);
		p->flags &= ~(PG_EXECUTED | PG_PARSED);
		break;
	case 'E':
		p->flags |= PG_EXECUTED;
		break;
	case 'F':
		pg_request(c, sc, SS_PG_FUNCTION, 0);
		break;
	case 'X':
		/* Terminate: nothing more comes. */
		c->rproto = SS_RESP_OFF;
		break;
	case 0:
		/* A startup packet: after SSLRequest or GSSENCRequest (the
		 * server said 'N', or the bytes are encrypted), a startup
		 * packet again; after a startup, messages. */
		c->rst = (p->flags & PG_ENC_ASKED) ? P_START_LEN : P_TYPE;
		break;
	default:
		break;
	}
	return 0;
}

/* A name in a body is read to its NUL: Parse's is followed by its SQL,
 * Bind's portal by its statement's name. */
static __always_inline void pg_name_end(struct ss_anat_conn *c, struct ss_pg_conn *p)
{
	p->scanned = 0;
	if (c->mkind == 'P') {
		c->rst = P_SQL;
		p->kw = KW_SPACE;
		p->word = 0;
		p->wlen = 0;
	} else if (c->rfirst == PF_NAME) {
		c->rfirst = PF_STMT;
		p->build[0] = 0;
		p->build[1] = 0;
		c->rnamelen = 0;
	} else {
		pg_bound(p);
		c->rst = R_SKIP;
	}
}

/* The field being looked at cannot be read to its end (the body ends, or
 * the scan's bound is reached): the name gets what was read, and the rest
 * of the body is passed. */
static __always_inline void pg_field_cut(struct ss_anat_conn *c, struct ss_pg_conn *p,
					 struct ss_resp_scratch *sc)
{
	if (c->rst == P_SQL) {
		pg_keyword_done(c, p, sc);
		return;
	}
	if (c->mkind == 'B') {
		p->cur[0] = SS_PG_UNKNOWN;
		p->cur[1] = 0;
	} else {
		p->flags |= PG_PARSED;  /* a name too long to keep: not kept */
	}
	c->rst = R_SKIP;
}

/* One byte of the SQL, looking for its first keyword past spaces and
 * comments. */
static __always_inline void pg_sql_byte(struct ss_anat_conn *c, struct ss_pg_conn *p,
					struct ss_resp_scratch *sc, __u8 ch)
{
	int letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');

	switch (p->kw) {
	case KW_SPACE:
		if (letter)
			break;
		if (ch == '-')
			p->kw = KW_DASH;
		else if (ch == '/')
			p->kw = KW_SLASH;
		else if (!(ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' ||
			   ch == '(' || ch == ';'))
			pg_keyword_done(c, p, sc);  /* no keyword first: OTHER */
		return;
	case KW_DASH:
		if (ch == '-')
			p->kw = KW_LINE;
		else
			pg_keyword_done(c, p, sc);
		return;
	case KW_LINE:
		if (ch == '\n')
			p->kw = KW_SPACE;
		return;
	case KW_SLASH:
		if (ch == '*')
			p->kw = KW_BLOCK;
		else
			pg_keyword_done(c, p, sc);
		return;
	case KW_BLOCK:
		if (ch == '*')
			p->kw = KW_STAR;
		return;
	case KW_STAR:
		p->kw = ch == '/' ? KW_SPACE : ch == '*' ? KW_STAR : KW_BLOCK;
		return;
	case KW_WORD:
		if (!letter) {
			pg_keyword_done(c, p, sc);
			return;
		}
		break;
	default:
		return;
	}
	/* A letter of the keyword. */
	p->kw = KW_WORD;
	if (p->wlen < 8)
		p->word |= (__u64)(ch & ~0x20) << (8 * p->wlen);
	if (p->wlen < 255)
		p->wlen++;
}

/* Is ch a frontend message's type byte? */
static __always_inline int pg_type_ok(__u8 ch)
{
	switch (ch) {
	case 'B': case 'C': case 'd': case 'c': case 'f': case 'D': case 'E':
	case 'H': case 'F': case 'P': case 'p': case 'Q': case 'S': case 'X':
		return 1;
	default:
		return 0;
	}
}

/* One step at sc->b[i] (i < n <= SS_RESP_CHUNK): the next i, or
 * SS_RESP_BAD (give up), or SS_PG_ENCRYPTED. */
__noinline int pg_step(struct ss_anat_conn *c, struct ss_pg_conn *p, struct ss_resp_scratch *sc,
		       __u32 i, __u32 n)
{
	__u64 d;
	__u32 v;
	__u8 ch, k;
	int j;

	if (!c || !p || !sc || i >= n || n > SS_RESP_CHUNK)
		return SS_RESP_BAD;
	if (c->rst == R_SKIP) {
		d = n - i;
		if (d > c->rskip)
			d = c->rskip;
		c->rskip -= d;
		if (!c->rskip)
			pg_msg_done(c, p, sc);
		return i + d;
	}
	if (c->rst == P_TYPE && n - i >= 5) {
		/* A whole header in the chunk: its type and three of its
		 * length's bytes here, the last one below. */
		ch = sc->b[i & (SS_RESP_CHUNK - 1)];
		if (!pg_type_ok(ch))
			return SS_RESP_BAD;
		c->mkind = ch;
		c->rst = P_LEN;
		c->rnum = (__u32)sc->b[(i + 1) & (SS_RESP_CHUNK - 1)] << 16 |
			  (__u32)sc->b[(i + 2) & (SS_RESP_CHUNK - 1)] << 8 |
			  sc->b[(i + 3) & (SS_RESP_CHUNK - 1)];
		c->rnamelen = 3;
		i += 4;
	} else if (c->rst == P_SQL) {
		/* The SQL's bytes up to its keyword's end, while neither the
		 * body's end nor the scan's bound is near (those below). */
		bpf_for(j, 0, 32) {
			if (i >= n || c->rst != P_SQL || c->rskip <= 1 ||
			    p->scanned + 1 >= SS_PG_SCAN_MAX)
				break;
			ch = sc->b[i & (SS_RESP_CHUNK - 1)];
			i++;
			c->rskip--;
			p->scanned++;
			pg_sql_byte(c, p, sc, ch);
		}
		if (c->rst == R_SKIP || i >= n)
			return i;
	}
	ch = sc->b[i & (SS_RESP_CHUNK - 1)];
	i++;
	switch (c->rst) {
	case P_START_LEN:
	case P_START_CODE:
	case P_LEN:
		if (c->rst == P_START_LEN && c->rnamelen == 0 && (p->flags & PG_ENC_ASKED) &&
		    ch != 0)
			return SS_PG_ENCRYPTED;  /* a TLS record, a GSS token */
		c->rnum = (c->rnum << 8) | ch;
		if (++c->rnamelen < 4)
			break;
		c->rnamelen = 0;
		v = c->rnum;
		c->rnum = 0;
		if (c->rst == P_START_LEN) {
			if (v < 8 || v > SS_PG_STARTUP_MAX)
				return (p->flags & PG_ENC_ASKED) ? SS_PG_ENCRYPTED : SS_RESP_BAD;
			c->rskip = v - 8;
			c->rst = P_START_CODE;
			break;
		}
		if (c->rst == P_START_CODE) {
			c->mkind = 0;
			if (v == SS_PG_CODE_SSL || v == SS_PG_CODE_GSSENC) {
				p->flags |= PG_ENC_ASKED;
			} else if ((v >> 16) == SS_PG_CODE_V3 || v == SS_PG_CODE_CANCEL) {
				p->flags &= ~PG_ENC_ASKED;
			} else {
				return (p->flags & PG_ENC_ASKED) ? SS_PG_ENCRYPTED : SS_RESP_BAD;
			}
			c->rst = R_SKIP;
			if (!c->rskip)
				pg_msg_done(c, p, sc);
			break;
		}
		/* A message's length, which counts itself. */
		if (v < 4)
			return SS_RESP_BAD;
		c->rskip = v - 4;
		c->rst = R_SKIP;
		p->scanned = 0;
		if (c->mkind == 'Q') {
			c->rst = P_SQL;
			p->kw = KW_SPACE;
			p->word = 0;
			p->wlen = 0;
		} else if (c->mkind == 'P' || c->mkind == 'B') {
			c->rst = P_CSTR;
			c->rfirst = PF_NAME;
			c->rnamelen = 0;
			p->build[0] = 0;
			p->build[1] = 0;
		}
		if (!c->rskip) {
			if (c->rst != R_SKIP)
				pg_field_cut(c, p, sc);
			pg_msg_done(c, p, sc);
		}
		break;
	case P_TYPE:
		if (!pg_type_ok(ch))
			return SS_RESP_BAD;
		c->mkind = ch;
		c->rst = P_LEN;
		c->rnum = 0;
		c->rnamelen = 0;
		break;
	case P_CSTR:
	case P_SQL:
		c->rskip--;
		if (c->rst == P_SQL) {
			pg_sql_byte(c, p, sc, ch);
		} else if (ch == 0) {
			pg_name_end(c, p);
		} else if (c->mkind == 'P' || c->rfirst == PF_STMT) {
			/* The statement's name: its first 15 bytes. */
			k = c->rnamelen;
			if (k < 7)
				p->build[0] |= (__u64)ch << (8 * (k + 1));
			else if (k < 15)
				p->build[1] |= (__u64)ch << (8 * (k - 7));
			if (k < 15)
				c->rnamelen = k + 1;
		}
		if (c->rst != R_SKIP && (++p->scanned >= SS_PG_SCAN_MAX || !c->rskip))
			pg_field_cut(c, p, sc);
		if (c->rst == R_SKIP && !c->rskip)
			pg_msg_done(c, p, sc);
		break;
	default:
		return SS_RESP_BAD;
	}
	return i;
}

#endif /* SOCKSCOPE_POSTGRES_H */
