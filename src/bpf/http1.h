/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * HTTP/1.0 and 1.1 request boundaries for the request anatomy
 * (anatomy.bpf.c includes this once, after names.h, resp.h and
 * memcached.h, before wire.h, which hands it a connection's reads; the
 * send program hands it the connection's writes).
 *
 * Requests: the bytes the target read, parsed as RESP's are (read back
 * from the reader's buffer in chunks, the state in the connection's
 * storage, so a request may be cut anywhere by the reads). A request is
 * its request line (METHOD SP target SP HTTP/1.x CRLF), its header lines
 * up to the empty line, then its body: Content-Length bytes, or chunks
 * (each size line parsed, its data passed by its length, then trailers
 * to the empty line); the body is passed by its length, never read. A
 * request is counted when its head is read whole (cmd_done; a server may
 * answer before it reads the body, or ask for it with 100 Continue),
 * pipelined requests each on their own. Only two header names are looked
 * at (Content-Length, Transfer-Encoding), and of their values only the
 * number and whether the last coding is `chunked`.
 *
 * Names: the method and the route template: the target up to its query
 * (`?`) or fragment, each numeric segment, hex run of 8+ digits and UUID
 * folded to `{id}`, at most SS_H1_TEXT bytes in all (longer: cut, and
 * said so). A name is the 8-byte hash of that text (the names map's key
 * stays 16 bytes for every protocol); the text is kept once per name in
 * h1_routes, written when the name is first given room. No query, header
 * value or body byte is kept.
 *
 * Responses: the bytes of the target's writes on the connection (the
 * write's buffer, from the syscall's saved registers; writev and sendmsg
 * up to SS_H1_MAX_IOV iovecs; a sendfile or splice only inside a body,
 * whose length it passes), parsed the same way: the status line, the
 * headers, the body by Content-Length or chunks (none after a HEAD, a
 * 204 or a 304). Each final response's status class goes to the name of
 * the oldest request not answered yet (a queue of SS_H1_QUEUE names per
 * connection: HTTP/1 answers in order); a 1xx interim response (100
 * Continue) answers none and is not the turn's response. A response
 * without a length (read to the close) ends the status parsing of its
 * connection (the later requests' status: unknown, counted).
 *
 * A connection is HTTP/1 when its first read begins with a request line
 * (a method of capital letters, a space, a target beginning with `/` or
 * `*`, a space, HTTP/1.0 or HTTP/1.1 and the line's end): RESP's inline
 * commands (`GET key\r\n`) and memcached's lower-case words are not. The
 * parser gives up on a connection (counted in SS_CNT_H1_GAVE_UP; its
 * turns timed as before, its requests no longer counted) on a head of
 * more than SS_H1_MAX_HEAD bytes, a read with more head bytes than
 * SS_RESP_MAX_CHUNKS chunks, a Content-Length or chunk size past
 * SS_H1_MAX_BODY (or of more than 15 hex digits), a malformed line, a
 * CONNECT or a 101 (the bytes after are no longer HTTP/1).
 */
#ifndef SOCKSCOPE_HTTP1_H
#define SOCKSCOPE_HTTP1_H

#define SS_H1_MAX_HEAD 16384          /* a head's bytes (nginx: 8 KiB a line) */
#define SS_H1_MAX_BODY (1ull << 40)   /* a Content-Length or chunk size */
#define SS_H1_MAX_IOV 8               /* iovecs of a write read */
#define SS_H1_METHOD_MAX 16
#define SS_H1_STEPS 16               /* steps a call of h1_step */

/* Syscall numbers (x86_64) of writes whose buffer is found. */
#define NR_WRITE 1
#define NR_WRITEV 20
#define NR_SENDTO 44
#define NR_SENDMSG 46
#define TS_COMPAT 2                   /* as wire.h has it */

/* ss_h1_parse.st */
enum ss_h1_state {
	H_START = 0,     /* a message begins */
	H_METHOD = 1,
	H_TARGET = 2,
	H_QUERY = 3,     /* the target's query: passed */
	H_VERSION = 4,   /* "HTTP/1.x" of the request line */
	H_RLF = 5,       /* '\n' after the request line's '\r' */
	H_HSTART = 6,    /* a header line (or the empty line) begins */
	H_HNAME = 7,     /* a header name that may be one looked at */
	H_HVAL = 8,      /* its value */
	H_HSKIP = 9,     /* the rest of a line that does not matter */
	H_HLF = 10,      /* '\n' after a header line's '\r' */
	H_ELF = 11,      /* '\n' of the empty line */
	H_CSIZE = 12,    /* a chunk's size */
	H_CEXT = 13,     /* its extensions: passed */
	H_CLF = 14,      /* '\n' after the size line's '\r' */
	H_SKIP = 15,     /* body bytes, by length */
	H_RVERSION = 16, /* "HTTP/1.x " of a status line */
	H_RCODE = 17,    /* its three digits */
	H_OFF = 18,      /* responses: no longer parsed */
};

/* ss_h1_parse.m: the header line being read. */
enum ss_h1_header {
	HM_NONE = 0,
	HM_CL = 1,       /* content-length */
	HM_TE = 2,       /* transfer-encoding */
};

/* ss_h1_parse.f */
enum ss_h1_flags {
	HF_CL = 1,        /* a Content-Length was read */
	HF_CHUNKED = 2,   /* the last transfer coding is chunked */
	HF_TRAILER = 4,   /* the trailers after the last chunk */
	HF_HEAD = 8,      /* requests: the method is HEAD */
	HF_INTERIM = 16,  /* responses: this write ended a 1xx interim one */
	HF_FINAL = 32,    /* responses: this write carried a final one's bytes */
};

/* ss_h1_conn.segf: what the path segment being read can still be. */
enum ss_h1_seg {
	SG_DIGITS = 1,
	SG_HEX = 2,
	SG_UUID = 4,
};

/* ss_h1_conn.tf */
enum ss_h1_text_flags {
	TF_CUT = 1,       /* a byte of an earlier segment was dropped */
	TF_CUTSEG = 2,    /* a byte of this segment was dropped */
	TF_OTHER = 4,     /* `last` found no room: "(other)" */
};

/* The text of each HTTP/1 name, by its hash (bounded as the names are:
 * written only for a name given room). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SS_RESP_NAMES_MAX);
	__type(key, __u64);
	__type(value, struct ss_h1_route);
} h1_routes SEC(".maps");

static __always_inline struct ss_h1_parse *h1_dir(struct ss_anat_conn *c, int dir)
{
	return dir ? &c->h1.resp : &c->h1.req;
}

/* A message begins: its fields are reset (and, for a request, its text). */
static __always_inline void h1_msg_reset(struct ss_anat_conn *c, struct ss_h1_parse *p, int dir)
{
	p->skip = 0;
	p->head = 0;
	p->code = 0;
	p->k = 0;
	p->m = HM_NONE;
	p->f &= HF_INTERIM | HF_FINAL;
	p->ck = 0;
	p->st = dir ? H_RVERSION : H_METHOD;
	if (!dir) {
		c->h1.tlen = 0;
		c->h1.tf &= TF_OTHER;
		c->h1.segn = 0;
		c->h1.segf = 0;
	}
}

/* A byte of the name's text (dropped once the text is full). */
static __always_inline void h1_put(struct ss_h1_conn *h, __u8 ch)
{
	__u8 n = h->tlen;

	if (h->tf & (TF_CUT | TF_CUTSEG))
		return;
	if (n >= SS_H1_TEXT) {
		h->tf |= TF_CUTSEG;
		return;
	}
	h->text[n & (SS_H1_TEXT - 1)] = ch;
	h->tlen = n + 1;
}

static __always_inline void h1_seg_begin(struct ss_h1_conn *h)
{
	h->seg = h->tlen;
	h->segn = 0;
	h->segf = SG_DIGITS | SG_HEX | SG_UUID;
}

/* A path byte of the segment being read: what the segment can still be. */
static __always_inline void h1_seg_byte(struct ss_h1_conn *h, __u8 ch)
{
	__u16 n = h->segn;
	int dash_at = n == 8 || n == 13 || n == 18 || n == 23;
	int digit = ch >= '0' && ch <= '9';
	int hex = digit || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');

	if (ch == '-') {
		h->segf &= dash_at ? SG_UUID : 0;
	} else if (hex) {
		if (dash_at)
			h->segf &= ~SG_UUID;
		if (!digit)
			h->segf &= ~SG_DIGITS;
	} else {
		h->segf = 0;
	}
	if (n < 0xffff)
		h->segn = n + 1;
	h1_put(h, ch);
}

/* The segment ends: a number, a hex id of 8+ digits or a UUID is
 * replaced by `{id}`. */
static __always_inline void h1_seg_end(struct ss_h1_conn *h)
{
	__u16 n = h->segn;
	__u8 s = h->seg, f = h->segf;
	int id = n && ((f & SG_DIGITS) || ((f & SG_HEX) && n >= 8) || ((f & SG_UUID) && n == 36));

	if (id && !(h->tf & TF_CUT) && s <= SS_H1_TEXT - 4) {
		h->text[s & (SS_H1_TEXT - 1)] = '{';
		h->text[(s + 1) & (SS_H1_TEXT - 1)] = 'i';
		h->text[(s + 2) & (SS_H1_TEXT - 1)] = 'd';
		h->text[(s + 3) & (SS_H1_TEXT - 1)] = '}';
		h->tlen = s + 4;
		h->tf &= ~TF_CUTSEG;
	}
	if (h->tf & TF_CUTSEG)
		h->tf |= TF_CUT;
	h->tf &= ~TF_CUTSEG;
	h->segn = 0;
	h->segf = 0;
}

/* The request's name: the hash of its text (words past its length
 * zeroed), its text kept when the name is first given room; "(other)"
 * (zero) when the port's names are full. */
__noinline int h1_name(struct ss_anat_conn *c)
{
	struct ss_anat_name_key k;
	struct ss_h1_route r = {};
	struct ss_anat_name *v;
	__u64 w[SS_H1_TEXT / 8], h, lo, n;
	int i;

	if (!c)
		return 0;
	n = c->h1.tlen;
	if (n > SS_H1_TEXT)
		n = SS_H1_TEXT;
	h = 0x9e3779b97f4a7c15ull ^ (n | ((__u64)(c->h1.tf & TF_CUT) << 8));
#pragma unroll
	for (i = 0; i < SS_H1_TEXT / 8; i++) {
		__builtin_memcpy(&w[i], &c->h1.text[i * 8], 8);
		if (n <= (__u64)i * 8)
			w[i] = 0;
		else if (n < (__u64)i * 8 + 8)
			w[i] &= (1ull << (8 * (n - i * 8))) - 1;
		h ^= w[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	lo = h | 1;
	if (lo == 1)
		lo = 3;
	if (lo == c->h1.last) {
		c->rname[0] = (c->h1.tf & TF_OTHER) ? 0 : lo;
		c->rname[1] = 0;
		return 0;
	}
	name_key(&k, c, lo, 0);
	v = name_entry(&k);
	c->h1.last = lo;
	__builtin_memcpy(&h, &k.name[0], 8);
	if (!v || !h) {
		c->h1.tf |= TF_OTHER;
		c->rname[0] = 0;
	} else {
		c->h1.tf &= ~TF_OTHER;
		c->rname[0] = lo;
		r.len = n;
		r.cut = (c->h1.tf & TF_CUT) ? 1 : 0;
		__builtin_memcpy(r.text, w, sizeof(w));
		bpf_map_update_elem(&h1_routes, &lo, &r, BPF_NOEXIST);
	}
	c->rname[1] = 0;
	return 0;
}

/* A final response's status class (2..5) for the request of name lo. */
__noinline int h1_status(const struct ss_anat_conn *c, __u64 lo, __u32 cls)
{
	struct ss_anat_name_key k;
	struct ss_anat_name *v;

	if (!c || cls < 2 || cls > 5)
		return 0;
	name_key(&k, c, lo, 0);
	v = bpf_map_lookup_elem(&names, &k);
	if (!v) {
		__builtin_memset(k.name, 0, sizeof(k.name));
		v = bpf_map_lookup_elem(&names, &k);
	}
	if (v)
		__sync_fetch_and_add(&v->status[(cls - 2) & 3], 1);
	return 0;
}

/* The responses of a connection are no longer parsed: the requests
 * waiting for theirs have an unknown status. */
static __always_inline void h1_resp_off(struct ss_anat_conn *c)
{
	__u64 n;
	__u32 i = SS_CNT_H1_STATUS_UNKNOWN;

	if (c->h1.resp.st == H_OFF)
		return;
	n = (__u16)(c->h1.qtail - c->h1.qhead) + c->h1.qlost;
	c->h1.resp.st = H_OFF;
	c->h1.qhead = c->h1.qtail;
	c->h1.qlost = 0;
	if (i < SS_COUNTS)
		cpu_here()->count[i] += n;
}

/* A request's head is read whole: it is counted (a server may answer
 * before it reads the body, or ask for it with 100 Continue), and queued
 * for its response; its body is passed next. */
static __always_inline void h1_req_head(struct ss_anat_conn *c, struct ss_resp_scratch *sc)
{
	struct ss_h1_conn *h = &c->h1;
	__u64 e = (c->rname[0] & ~1ull) | ((h->req.f & HF_HEAD) ? 0 : 1);

	cmd_done(c, sc);
	if (h->resp.st == H_OFF) {
		count(SS_CNT_H1_STATUS_UNKNOWN);
		return;
	}
	if (h->qlost || (__u16)(h->qtail - h->qhead) >= SS_H1_QUEUE) {
		h->qlost++;
		return;
	}
	h->q[h->qtail & (SS_H1_QUEUE - 1)] = e;
	h->qtail++;
}

/* A final response's head is read: its status goes to the oldest request
 * waiting; its body follows. 1: no body. */
static __always_inline int h1_resp_final(struct ss_anat_conn *c, struct ss_h1_parse *p)
{
	struct ss_h1_conn *h = &c->h1;
	__u32 cls = p->code / 100;
	__u64 e = 1;
	int head = 0;

	if (h->qtail != h->qhead) {
		e = h->q[h->qhead & (SS_H1_QUEUE - 1)];
		h->qhead++;
		head = !(e & 1);
		h1_status(c, e <= 1 ? 0 : (e | 1), cls);
	} else if (h->qlost) {
		h->qlost--;
		count(SS_CNT_H1_STATUS_UNKNOWN);
	} else {
		count(SS_CNT_H1_UNMATCHED);
	}
	p->f |= HF_FINAL;
	return head || p->code == 204 || p->code == 304;
}

/* The empty line after a head (or after the trailers). 0, or
 * SS_RESP_BAD. */
static __always_inline int h1_head_end(struct ss_anat_conn *c, struct ss_h1_parse *p,
				       struct ss_resp_scratch *sc, int dir)
{
	if (p->f & HF_TRAILER)
		goto done;
	if (!dir)
		h1_req_head(c, sc);
	if (dir) {
		if (p->code < 200) {
			if (p->code == 101)
				return SS_RESP_BAD;  /* another protocol follows */
			count(SS_CNT_H1_INTERIM);
			p->f |= HF_INTERIM;
			p->st = H_START;
			return 0;
		}
		if (h1_resp_final(c, p))
			goto done;
		if (!(p->f & (HF_CHUNKED | HF_CL))) {
			/* Read to the close: nothing after it is parsed. */
			h1_resp_off(c);
			return 0;
		}
	}
	if (p->f & HF_CHUNKED) {
		p->skip = 0;
		p->k = 0;
		p->head = 0;
		p->st = H_CSIZE;
		return 0;
	}
	if ((p->f & HF_CL) && p->skip) {
		p->st = H_SKIP;
		return 0;
	}
done:
	p->st = H_START;
	return 0;
}

/* Body (or chunk) bytes are passed whole. */
static __always_inline void h1_skip_done(struct ss_anat_conn *c, struct ss_h1_parse *p,
					 struct ss_resp_scratch *sc, int dir)
{
	if (p->f & HF_CHUNKED) {
		p->skip = 0;
		p->k = 0;
		p->head = 0;
		p->st = H_CSIZE;
	} else {
		p->st = H_START;
	}
}

/* The request line is read: the connection is HTTP/1 (on its first),
 * and the request gets its name. */
static __always_inline void h1_line_done(struct ss_anat_conn *c)
{
	if (c->rproto == SS_RESP_PROBE_H1) {
		if (c->wire == SS_WIRE_NONE)
			count(SS_CNT_H1_CONNS);
		c->wire = SS_WIRE_HTTP1;
		c->rproto = SS_RESP_ON;
	}
	h1_name(c);
	c->h1.req.st = H_HSTART;
}

/* A header line ends. */
static __always_inline void h1_line_end(struct ss_h1_parse *p)
{
	if (p->m == HM_TE) {
		if (p->ck == 7)
			p->f |= HF_CHUNKED;
		else
			p->f &= ~HF_CHUNKED;
	}
	p->m = HM_NONE;
	p->st = H_HSTART;
}

/* The k-th byte of the header name m (lower case). */
static __always_inline __u8 h1_hchar(__u8 m, __u8 k)
{
	__u64 w;

	if (m == HM_CL)
		w = k < 8 ? MC_LO("content-") : MC_LO("length");
	else
		w = k < 8 ? MC_LO("transfer") : k < 16 ? MC_LO("-encodin") : MC_LO("g");
	return (__u8)(w >> (8 * (k & 7)));
}

/* Passes sc->b's bytes from i up to the first '\n' (or ' ' with
 * `space`; a control byte other than '\r' and '\t' stops it too) or n:
 * the new i. */
static __always_inline __u32 h1_scan(const struct ss_resp_scratch *sc, __u32 i, __u32 n,
				     int space)
{
	int j;
	__u8 ch;

	bpf_for(j, 0, SS_RESP_CHUNK) {
		if (i >= n)
			break;
		ch = sc->b[i & (SS_RESP_CHUNK - 1)];
		if (ch == '\n' || (space && ch <= ' '))
			break;
		i++;
	}
	return i;
}

/* 8 bytes of sc->b from o (o < SS_RESP_CHUNK: within the buffer's two
 * chunks). */
static __always_inline __u64 h1_word(const struct ss_resp_scratch *sc, __u32 o)
{
	__u64 w;

	__builtin_memcpy(&w, &sc->b[o & (SS_RESP_CHUNK - 1)], 8);
	return w;
}

/* A header name beginning at sc->b[o] with `c` or `t` (lc), compared a
 * word at a time: 1 when it is Content-Length: or Transfer-Encoding:
 * (any case, the colon included), 2 when it is another, 0 when the
 * chunk ends before it tells (then a byte at a time). A letter's case bit
 * is ignored, no other byte's. */
static __always_inline int h1_hname_words(const struct ss_resp_scratch *sc, __u32 o, __u32 n,
					  __u8 lc)
{
	__u64 w0, w1, w2;

	if (lc == 'c') {
		if (o + 15 > n)
			return 0;
		w0 = h1_word(sc, o) | 0x0020202020202020ull;
		w1 = (h1_word(sc, o + 8) | 0x0000202020202020ull) & 0x00ffffffffffffffull;
		return w0 == MC_LO("content-") && w1 == MC_LO("length:") ? 1 : 2;
	}
	if (o + 18 > n)
		return 0;
	w0 = h1_word(sc, o) | 0x2020202020202020ull;
	w1 = h1_word(sc, o + 8) | 0x2020202020202000ull;
	w2 = (h1_word(sc, o + 16) | 0x0020ull) & 0xffffull;
	return w0 == MC_LO("transfer") && w1 == MC_LO("-encodin") && w2 == MC_LO("g:") ? 1 : 2;
}

/* A status line's "HTTP/1.x NNN" at sc->b[o] (12 bytes there): the code,
 * or 0 when they are not. */
static __always_inline __u32 h1_status_words(const struct ss_resp_scratch *sc, __u32 o)
{
	__u64 w = h1_word(sc, o), t = h1_word(sc, o + 8);
	__u8 d1 = t >> 8, d2 = t >> 16, d3 = t >> 24;

	if ((w != MC_LO("HTTP/1.1") && w != MC_LO("HTTP/1.0")) || (__u8)t != ' ' ||
	    d1 < '0' || d1 > '9' || d2 < '0' || d2 > '9' || d3 < '0' || d3 > '9')
		return 0;
	return (d1 - '0') * 100 + (d2 - '0') * 10 + (d3 - '0');
}

static __always_inline int h1_bad(const struct ss_anat_conn *c, int dir)
{
	return !dir && c->rproto == SS_RESP_PROBE_H1 ? SS_MC_UNKNOWN : SS_RESP_BAD;
}

static __always_inline __u8 h1_lower(__u8 ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch + 32 : ch;
}

/* One step at sc->b[i] (i < n <= SS_RESP_CHUNK) of direction dir (0:
 * requests, 1: responses): the next i, or SS_RESP_BAD (give up), or
 * SS_MC_UNKNOWN (the connection's first line is no request line). */
static __always_inline int h1_one(struct ss_anat_conn *c, struct ss_resp_scratch *sc, __u32 i,
				  __u32 n, int dir, struct ss_h1_parse *p, struct ss_h1_conn *h)
{
	__u64 d, v;
	__u32 j;
	__u8 ch, lc;

	if (i >= n || n > SS_RESP_CHUNK)
		return SS_RESP_BAD;
	if (p->st == H_SKIP) {
		d = n - i;
		if (d > p->skip)
			d = p->skip;
		p->skip -= d;
		if (dir)
			p->f |= HF_FINAL;
		if (!p->skip)
			h1_skip_done(c, p, sc, dir);
		return i + d;
	}
	if (p->st == H_HSKIP || p->st == H_QUERY || p->st == H_CEXT) {
		j = h1_scan(sc, i, n, p->st == H_QUERY);
		p->head += j - i;
		if (p->head > SS_H1_MAX_HEAD)
			return h1_bad(c, dir);
		if (j >= n)
			return j;
		ch = sc->b[j & (SS_RESP_CHUNK - 1)];
		if (p->st == H_QUERY) {
			if (ch != ' ')
				return h1_bad(c, dir);
			p->k = 0;
			p->st = H_VERSION;
		} else if (p->st == H_CEXT) {
			if (p->skip) {
				p->skip += 2;
				p->st = H_SKIP;
			} else {
				p->f |= HF_TRAILER;
				p->st = H_HSTART;
			}
		} else {
			h1_line_end(p);
		}
		p->head++;
		return j + 1;
	}
	ch = sc->b[i & (SS_RESP_CHUNK - 1)];
	i++;
	if (p->st == H_START) {
		if (!dir && (ch == '\r' || ch == '\n') && c->rproto != SS_RESP_PROBE_H1)
			return i;  /* empty lines between requests are ignored */
		h1_msg_reset(c, p, dir);
	}
	if (++p->head > SS_H1_MAX_HEAD)
		return h1_bad(c, dir);
	lc = h1_lower(ch);
	switch (p->st) {
	case H_METHOD:
		if (ch >= 'A' && ch <= 'Z' && p->k < SS_H1_METHOD_MAX) {
			h1_put(h, ch);
			p->k++;
			break;
		}
		if (ch != ' ' || !p->k)
			return h1_bad(c, dir);
		if (p->k == 4 && h->text[0] == 'H' && h->text[1] == 'E' && h->text[2] == 'A' &&
		    h->text[3] == 'D')
			p->f |= HF_HEAD;
		if (p->k == 7 && h->text[0] == 'C' && h->text[1] == 'O' && h->text[2] == 'N' &&
		    h->text[3] == 'N')
			return h1_bad(c, dir);  /* CONNECT: a tunnel follows */
		h1_put(h, ' ');
		p->k = 0;
		p->st = H_TARGET;
		break;
	case H_TARGET:
		if (ch == ' ' || ch == '?' || ch == '#') {
			if (!p->k)
				return h1_bad(c, dir);
			h1_seg_end(h);
			p->k = 0;
			p->st = ch == ' ' ? H_VERSION : H_QUERY;
			break;
		}
		if (ch <= ' ' || ch == 0x7f)
			return h1_bad(c, dir);
		if (!p->k) {
			if (ch != '/' && ch != '*')
				return h1_bad(c, dir);
			p->k = 1;
		}
		if (ch == '/') {
			if (h->segf || h->segn)
				h1_seg_end(h);
			h1_put(h, '/');
			h1_seg_begin(h);
		} else {
			h1_seg_byte(h, ch);
		}
		break;
	case H_VERSION:
		/* "HTTP/1." then 0 or 1, then the line's end */
		if (p->k < 7) {
			if (ch != (__u8)((p->k < 4 ? MC_LO("HTTP") : MC_LO("/1.") << 32) >>
					  (8 * (p->k & 7))))
				return h1_bad(c, dir);
			p->k++;
		} else if (p->k == 7) {
			if (ch != '0' && ch != '1')
				return h1_bad(c, dir);
			p->k++;
		} else if (ch == '\r') {
			p->st = H_RLF;
		} else if (ch == '\n') {
			h1_line_done(c);
		} else {
			return h1_bad(c, dir);
		}
		break;
	case H_RLF:
		if (ch != '\n')
			return h1_bad(c, dir);
		h1_line_done(c);
		break;
	case H_RVERSION:
		if (!p->k && i - 1 + 12 <= n) {
			/* The whole "HTTP/1.x NNN" at once. */
			j = h1_status_words(sc, i - 1);
			if (j < 100 || j > 599)
				return SS_RESP_BAD;
			p->code = j;
			p->head += 11;
			p->st = H_HSKIP;  /* the reason phrase */
			return i - 1 + 12;
		}
		if (p->k < 7) {
			if (ch != (__u8)((p->k < 4 ? MC_LO("HTTP") : MC_LO("/1.") << 32) >>
					  (8 * (p->k & 7))))
				return SS_RESP_BAD;
		} else if (p->k == 7) {
			if (ch != '0' && ch != '1')
				return SS_RESP_BAD;
		} else if (ch == ' ') {
			p->k = 0;
			p->code = 0;
			p->st = H_RCODE;
			break;
		} else {
			return SS_RESP_BAD;
		}
		p->k++;
		break;
	case H_RCODE:
		if (ch < '0' || ch > '9')
			return SS_RESP_BAD;
		p->code = p->code * 10 + (ch - '0');
		if (++p->k == 3) {
			if (p->code < 100 || p->code > 599)
				return SS_RESP_BAD;
			p->st = H_HSKIP;  /* the reason phrase */
		}
		break;
	case H_HSTART:
		if (ch == '\r') {
			p->st = H_ELF;
		} else if (ch == '\n') {
			return h1_head_end(c, p, sc, dir) ? SS_RESP_BAD : i;
		} else if (lc == 'c' || lc == 't') {
			j = h1_hname_words(sc, i - 1, n, lc);
			if (j == 1) {
				/* The whole name and its ':' matched. */
				d = lc == 'c' ? 15 : 18;
				p->m = lc == 'c' ? HM_CL : HM_TE;
				p->head += d - 1;
				p->ck = 0;
				p->st = H_HVAL;
				if (p->m == HM_CL) {
					p->f |= HF_CL;
					p->skip = 0;
				}
				return i - 1 + d;
			}
			if (j == 2) {
				p->st = H_HSKIP;  /* another header */
				break;
			}
			p->m = lc == 'c' ? HM_CL : HM_TE;
			p->k = 1;
			p->st = H_HNAME;
		} else {
			p->st = H_HSKIP;
		}
		break;
	case H_ELF:
		if (ch != '\n')
			return h1_bad(c, dir);
		return h1_head_end(c, p, sc, dir) ? SS_RESP_BAD : i;
	case H_HNAME:
		if (ch == ':') {
			if (p->k == (p->m == HM_CL ? 14 : 17)) {
				p->st = H_HVAL;
				p->ck = 0;
				if (p->m == HM_CL) {
					p->f |= HF_CL;
					p->skip = 0;
				}
			} else {
				p->m = HM_NONE;
				p->st = H_HSKIP;
			}
		} else if (ch == '\n') {
			h1_line_end(p);
		} else if (p->k < 17 && lc == h1_hchar(p->m, p->k)) {
			p->k++;
		} else {
			p->m = HM_NONE;
			p->st = H_HSKIP;
		}
		break;
	case H_HVAL:
		if (ch == '\r') {
			p->st = H_HLF;
		} else if (ch == '\n') {
			h1_line_end(p);
		} else if (ch == ' ' || ch == '\t') {
			break;
		} else if (p->m == HM_CL) {
			if (ch < '0' || ch > '9')
				return h1_bad(c, dir);
			v = p->skip * 10 + (ch - '0');
			if (v > SS_H1_MAX_BODY)
				return h1_bad(c, dir);
			p->skip = v;
		} else if (p->ck < 7 && lc == (__u8)(MC_LO("chunked") >> (8 * (p->ck & 7)))) {
			p->ck++;
		} else {
			p->ck = lc == 'c' ? 1 : 0;
		}
		break;
	case H_HLF:
		if (ch != '\n')
			return h1_bad(c, dir);
		h1_line_end(p);
		break;
	case H_CSIZE:
		if ((ch >= '0' && ch <= '9') || (lc >= 'a' && lc <= 'f')) {
			if (++p->k > 15)
				return h1_bad(c, dir);
			v = (p->skip << 4) | (ch <= '9' ? ch - '0' : lc - 'a' + 10);
			if (v > SS_H1_MAX_BODY)
				return h1_bad(c, dir);
			p->skip = v;
			break;
		}
		if (!p->k)
			return h1_bad(c, dir);
		if (ch == '\r') {
			p->st = H_CLF;
			break;
		}
		if (ch == ';' || ch == ' ' || ch == '\t') {
			p->st = H_CEXT;
			break;
		}
		if (ch != '\n')
			return h1_bad(c, dir);
		/* fallthrough */
	case H_CLF:
		if (ch != '\n')
			return h1_bad(c, dir);
		if (p->skip) {
			p->skip += 2;  /* the data's CRLF */
			p->st = H_SKIP;
		} else {
			p->f |= HF_TRAILER;
			p->head = 0;
			p->st = H_HSTART;
		}
		break;
	default:
		return SS_RESP_BAD;
	}
	return i;
}

/* Steps from sc->b[i] (i < n) until the chunk's end, a step that gave
 * up, or SS_H1_STEPS steps: one call for a run of bytes. */
__noinline int h1_step(struct ss_anat_conn *c, struct ss_resp_scratch *sc, __u32 i, __u32 n,
		       int dir)
{
	struct ss_h1_parse *p;
	int j;

	if (!c || !sc)
		return SS_RESP_BAD;
	p = h1_dir(c, dir);
	bpf_for(j, 0, SS_H1_STEPS) {
		if (i >= n)
			break;
		i = h1_one(c, sc, i, n, dir, p, &c->h1);
		if (i > n)
			break;
	}
	return i;
}

/* Parses the len bytes at the user address ubuf in direction dir: 0; -1
 * when it gave up; -2 when the connection's first line is no request
 * line. */
__noinline int h1_parse(struct ss_anat_conn *c, __u64 ubuf, __u64 len, int dir)
{
	struct ss_resp_scratch *sc;
	struct ss_h1_parse *p;
	__u32 zero = 0, chunks = 0, n, i;
	__u64 pos = 0, d;
	int it, k, bad = 0;

	sc = bpf_map_lookup_elem(&resp_scratch, &zero);
	if (!c || !sc)
		return -1;
	p = h1_dir(c, dir);
	if (!dir) {
		sc->pcount = 0;
		sc->pbatched = 0;
	}
	bpf_for(it, 0, SS_RESP_MAX_ITERS) {
		if (pos >= len)
			break;
		if (p->st == H_OFF)
			break;
		if (p->st == H_SKIP) {
			/* Passed without reading it. */
			d = len - pos;
			if (d > p->skip)
				d = p->skip;
			pos += d;
			p->skip -= d;
			if (dir)
				p->f |= HF_FINAL;
			if (!p->skip)
				h1_skip_done(c, p, sc, dir);
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
			i = h1_step(c, sc, i, n, dir);
		}
		if (i > n) {
			bad = i == SS_MC_UNKNOWN ? 2 : 1;
			break;
		}
		pos += n;
	}
	if (!dir)
		run_flush(c, sc);
	if (bad == 2)
		return -2;
	if (p->st == H_OFF)
		return 0;
	if (bad || pos < len) {
		if (!dir)
			c->h1.req.st = H_START;
		h1_resp_off(c);
		return -1;
	}
	return 0;
}

/* A write of `ret` bytes on an HTTP/1 connection, in the writer's
 * syscall (or, `plain` not 0, OpenSSL's write of ret plaintext bytes
 * there: tls.h): its responses' status lines are read. 1 when it carried
 * only 1xx interim responses (they are not the turn's response). */
static __always_inline int h1_write(struct ss_anat_conn *c, int ret, __u64 plain)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *task;
	struct pt_regs *regs;
	struct ss_h1_parse *p = &c->h1.resp;
	struct user_msghdr m;
	struct iovec iov;
	__u64 left = ret, base = 0, piov = 0, niov = 1, l;
	long nr;
	int j;

	if (p->st == H_OFF || ret <= 0)
		return 0;
	p->f &= ~(HF_INTERIM | HF_FINAL);
	task = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!plain && (!regs || (task->thread_info.status & TS_COMPAT))) {
		h1_resp_off(c);
		return 0;
	}
	nr = plain ? NR_WRITE : BPF_CORE_READ(regs, orig_ax);
	if (plain) {
		base = plain;
	} else if (nr == NR_WRITE || nr == NR_SENDTO) {
		base = BPF_CORE_READ(regs, si);
	} else if (nr == NR_WRITEV) {
		piov = BPF_CORE_READ(regs, si);
		niov = BPF_CORE_READ(regs, dx);
	} else if (nr == NR_SENDMSG) {
		if (bpf_probe_read_user(&m, sizeof(m), (void *)BPF_CORE_READ(regs, si))) {
			h1_resp_off(c);
			return 0;
		}
		piov = (__u64)m.msg_iov;
		niov = m.msg_iovlen;
	} else {
		/* sendfile, splice...: no buffer; only body bytes may pass. */
		if (p->st == H_SKIP && p->skip >= left) {
			p->skip -= left;
			if (!p->skip)
				p->st = (p->f & HF_CHUNKED) ? H_CSIZE : H_START;
			return 0;
		}
		h1_resp_off(c);
		return 0;
	}
	bpf_for(j, 0, SS_H1_MAX_IOV) {
		if (!left || (__u64)j >= niov)
			break;
		if (piov) {
			if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(piov + j * sizeof(iov)))) {
				h1_resp_off(c);
				return 0;
			}
			base = (__u64)iov.iov_base;
			l = iov.iov_len;
		} else {
			l = left;
		}
		if (l > left)
			l = left;
		if (l && h1_parse(c, base, l, 1) < 0)
			return 0;
		if (p->st == H_OFF)
			return 0;
		left -= l;
	}
	if (left) {
		if (p->st == H_SKIP && p->skip >= left) {
			p->skip -= left;
			if (!p->skip)
				p->st = (p->f & HF_CHUNKED) ? H_CSIZE : H_START;
		} else {
			h1_resp_off(c);
			return 0;
		}
	}
	return (p->f & HF_INTERIM) && !(p->f & HF_FINAL) && p->st == H_START;
#else
	return 0;
#endif
}

/* A pause of a sampled window: the requests read until the resume are
 * not seen; their responses could not be matched: statuses stop. */
static __always_inline void h1_pause(struct ss_anat_conn *c)
{
	c->h1.req.st = H_START;
	h1_resp_off(c);
}

#endif /* SOCKSCOPE_HTTP1_H */
