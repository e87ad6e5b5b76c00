/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * HTTP/2 streams for the request anatomy (anatomy.bpf.c includes this
 * once, after http1.h and before wire.h, whose first read of a connection
 * finds the preface; the socket programs hand an HTTP/2 connection's
 * data-ready, reads, writes and close to h2_ready, h2_read, h2_write and
 * h2_close instead of the turn machine).
 *
 * A connection is HTTP/2 when its first read begins with the client's
 * preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, RFC 9113 3.4: h2c with
 * prior knowledge; an Upgrade from HTTP/1.1 is HTTP/1's). Both
 * directions are cut into frames by their 9-byte headers (the bytes read
 * back from the reader's or the writer's buffer, as http1.h does; a
 * frame's payload is passed by its length, never read, unless it carries
 * a header block).
 *
 * A request is a stream: it begins with the client's HEADERS on a new
 * (odd, higher) stream id and ends at the write that carries the
 * target's END_STREAM on it (the end of a DATA frame, or of the trailers'
 * HEADERS: gRPC's), or at a RST_STREAM either way (counted, untimed). Its
 * parts are a turn's, stream by stream: queue wait from the arrival of
 * the bytes that carried its HEADERS (TCP: the data-ready whose receive
 * sequence covers them; Unix: the first data-ready since the queue was
 * last read empty) to the read that took them; service to the end of the
 * first write of a frame of its own; send to the end of the write of its
 * END_STREAM; CPU wait the serving thread's run-queue wait in each phase,
 * as for a turn. With several streams open on one thread, a stream's
 * service includes the time the thread served the others: what the
 * stream waited for, whoever caused it.
 *
 * Names: the header blocks (HEADERS, PUSH_PROMISE and CONTINUATION
 * payloads, both ways) go to the ring buffer h2_events, in order; the
 * loader decodes them with HPACK (whose dynamic table and Huffman coding
 * need every block of a direction, in order) and files each stream's END
 * record under its :method and :path (gRPC: its service and method) with
 * its :status (gRPC: grpc-status). A record the ring buffer has no room
 * for ends the connection's parsing (its names could no longer be
 * decoded), as does a header block longer than SS_H2_BLOCK_MAX, a write
 * or read whose buffer cannot be read, more frames in one call than
 * SS_H2_STEPS, or a sampled window's pause (frames cannot be found again
 * in the middle of a stream of bytes). Nothing but header blocks leaves
 * the kernel; the loader keeps only the method, the route template, the
 * content type's being gRPC and the status.
 */
#ifndef SOCKSCOPE_H2_H
#define SOCKSCOPE_H2_H

#define SS_H2_STEPS 256              /* frame headers and chunks a call walks */
#define SS_H2_BLOCK_MAX 16384        /* a header-carrying frame's payload */
#define SS_H2_MAX_IOV 16             /* iovecs of a write read */
#define SS_H2_PREFACE_LEN 24

#define H2_DATA 0
#define H2_HEADERS 1
#define H2_RST_STREAM 3
#define H2_PUSH_PROMISE 5
#define H2_CONTINUATION 9
#define H2_F_END_STREAM 1
#define H2_F_END_HEADERS 4

/* One direction's frame parser. */
struct ss_h2_dir {
	__u32 rem;      /* payload bytes of the current frame still to come */
	__u32 poff;     /* payload bytes of it passed */
	__u32 flen;
	__u32 sid;
	__u8 hdr[16];   /* the frame header's bytes so far (9) */
	__u8 hn;
	__u8 ftype;
	__u8 fflags;
	__u8 capture;   /* its payload goes to the ring buffer */
	__u8 end;       /* write side: the frame's end ends its stream (how) */
	__u8 pad[3];
};

/* A stream being timed. */
struct ss_h2_stream {
	__u32 sid;      /* 0: free */
	__u32 written;  /* a frame of its response has been written */
	__u64 arrival;
	__u64 first_read;
	__u64 first_write;
	__u64 last_write;
	__u64 cpu_queue;
	__u64 rq_read;
	__u64 rq_write;
	__u64 cpu_service;
	__u64 cpu_send;
	__u64 reader;
	__u64 writer;
};

/* An HTTP/2 connection (socket local storage of its own: only HTTP/2
 * connections pay for it). */
struct ss_h2_conn {
	__u64 id;
	struct ss_h2_dir rd;
	struct ss_h2_dir wr;
	__u32 last_sid;     /* the client's highest stream id so far */
	__u32 pend_end;     /* write side: a stream whose END_STREAM HEADERS
			     * ends with its END_HEADERS */
	__u32 ahead;        /* arrivals: oldest kept */
	__u32 atail;        /* next free */
	__u32 aseq[SS_H2_ARRIVALS]; /* TCP: rcv_nxt after a data-ready */
	__u64 at[SS_H2_ARRIVALS];   /* its time */
	__u64 unix_arrival; /* Unix: first data-ready since a read emptied the queue */
	/* The read in progress (reads and writes may run at once on two
	 * CPUs: each has its own): its time, the thread's run-queue wait
	 * before it, run_delay, the task, the sequence of its first byte, the
	 * arrival when none is kept. */
	__u64 now;
	__u64 wait;
	__u64 rdelay;
	__u64 task;
	__u64 fallback;
	__u32 seq0;
	__u32 dead;         /* no longer parsed */
	__u64 base;         /* where the bytes walked begin in the read */
	/* The write in progress: its time, run_delay, task. */
	__u64 wnow;
	__u64 wrdelay;
	__u64 wtask;
	/* TLS (tls.h): the arrival of the bytes the connection's last socket
	 * read took (its plaintext is walked later, as OpenSSL's read
	 * returns, where TCP sequences no longer say which bytes are which). */
	__u64 tls_arrival;
	struct ss_h2_stream s[SS_H2_STREAMS];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ss_h2_conn);
} h2conns SEC(".maps");

/* HTTP/2 over TLS read in plaintext: the connection's state, keyed by
 * the socket's address (the uprobes on OpenSSL, which walk the
 * plaintext, cannot reach socket storage); deleted as the connection
 * closes. Not preallocated: only such connections take room. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SS_TLS_CONNS_MAX);
	__type(key, __u64);
	__type(value, struct ss_h2_conn);
} tls_h2 SEC(".maps");

const struct ss_h2_conn zero_h2 = {};

/* wire.h: the user buffer of the read or write syscall under way. */
__noinline __u64 wire_syscall_buf(__u64 need, __u32 send);

/* Connection numbers (0: none). */
__u64 h2_next_id = 0;

static __always_inline void h2_head(struct ss_h2_head *e, const struct ss_anat_conn *c,
				    const struct ss_h2_conn *h, __u8 kind, __u32 sid)
{
	e->conn = h->id;
	e->stream = sid;
	e->port = c->port;
	e->proto = c->proto;
	e->kind = kind;
	e->dir = 0;
	e->ftype = 0;
	e->fflags = 0;
	e->flen = 0;
}

/* The connection is no longer parsed: the loader drops it. */
static __always_inline void h2_give_up(const struct ss_anat_conn *c, struct ss_h2_conn *h,
				       bool counted)
{
	struct ss_h2_head *e;

	if (h->dead)
		return;
	h->dead = 1;
	if (counted)
		count(SS_CNT_H2_GAVE_UP);
	e = bpf_ringbuf_reserve(&h2_events, sizeof(*e), 0);
	if (!e)
		return;
	h2_head(e, c, h, SS_H2_REC_CLOSE, 0);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* TCP: the arrival of the byte at sequence `seq` (the time of the first
 * data-ready whose rcv_nxt passed it); the read's fallback when none is
 * kept. */
static __always_inline __u64 h2_arrival_of(struct ss_h2_conn *h, __u32 seq)
{
	__u32 i, k;

	if (h->fallback)
		return h->fallback;
	for (k = 0; k < SS_H2_ARRIVALS; k++) {
		i = h->ahead + k;
		if (i == h->atail)
			break;
		if ((__s32)(h->aseq[i & (SS_H2_ARRIVALS - 1)] - seq) > 0)
			return h->at[i & (SS_H2_ARRIVALS - 1)];
	}
	return 0;
}

static __always_inline struct ss_h2_stream *h2_slot(struct ss_h2_conn *h, __u32 sid)
{
	return &h->s[(sid >> 1) & (SS_H2_STREAMS - 1)];
}

/* The client's HEADERS on a new stream, whose header began at `at` in
 * the read. */
static __always_inline void h2_begin(struct ss_h2_conn *h, __u32 sid, __u64 at)
{
	struct ss_h2_stream *s = h2_slot(h, sid);
	__u64 arrival;

	count(SS_CNT_H2_STREAMS);
	count(SS_CNT_COMMANDS);
	if (s->sid) {
		count(SS_CNT_H2_NO_SLOT);
		return;
	}
	arrival = h2_arrival_of(h, h->seq0 + (__u32)at);
	if (!arrival || arrival > h->now) {
		count(SS_CNT_H2_ARRIVAL_UNSEEN);
		arrival = h->now;
	}
	s->sid = sid;
	s->written = 0;
	s->arrival = arrival;
	s->first_read = h->now;
	s->cpu_queue = bounded(h->wait, h->now - arrival);
	s->rq_read = h->rdelay;
	s->reader = h->task;
	s->cpu_service = 0;
	s->cpu_send = 0;
}

/* A stream ends (how: enum ss_h2_end_how): timed when its response was
 * written and it ended by its END_STREAM. */
__noinline int h2_end(const struct ss_anat_conn *c, struct ss_h2_conn *h, __u32 sid, __u32 how)
{
	struct ss_h2_stream *s;
	struct ss_h2_end *e;
	__u64 q = 0, cpu = 0, svc = 0, snd = 0;
	__u8 timed = 0;

	if (!c || !h)
		return 0;
	s = h2_slot(h, sid);
	if (s->sid != sid)
		return 0;  /* never begun here (no slot, or before the window) */
	/* A stream whose marks are out of order (its read and a write raced
	 * on two CPUs past what the slot can tell) is counted, not timed. */
	if (how == SS_H2_END_STREAM && s->written && s->arrival <= s->first_read &&
	    s->first_read <= s->first_write && s->first_write <= s->last_write) {
		q = s->first_read - s->arrival - s->cpu_queue;
		cpu = s->cpu_queue + s->cpu_service + s->cpu_send;
		svc = s->first_write - s->first_read - s->cpu_service;
		snd = s->last_write - s->first_write - s->cpu_send;
		record_turn((struct ss_anat_conn *)c, q, cpu, svc, snd);
		count(SS_CNT_H2_TIMED);
		timed = 1;
	} else if (how != SS_H2_END_STREAM) {
		count(SS_CNT_H2_RESET);
	} else {
		count(SS_CNT_H2_NO_SLOT);  /* untimed */
	}
	s->sid = 0;
	e = bpf_ringbuf_reserve(&h2_events, sizeof(*e), 0);
	if (!e) {
		count(SS_CNT_H2_EVENTS_LOST);
		h2_give_up(c, h, false);
		return 0;
	}
	h2_head(&e->h, c, h, SS_H2_REC_END, sid);
	e->how = how;
	e->timed = timed;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	e->parts[0] = q;
	e->parts[1] = cpu;
	e->parts[2] = svc;
	e->parts[3] = snd;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* A frame of the target's on stream sid was written (this write). */
static __always_inline void h2_wrote(struct ss_h2_conn *h, __u32 sid)
{
	struct ss_h2_stream *s = h2_slot(h, sid);

	if (s->sid != sid)
		return;
	if (!s->written) {
		s->written = 1;
		s->first_write = h->wnow;
		s->last_write = h->wnow;
		s->writer = h->wtask;
		s->rq_write = h->wrdelay;
		s->cpu_service = s->reader == h->wtask ?
			bounded(h->wrdelay - s->rq_read, h->wnow - s->first_read) : 0;
		return;
	}
	if (h->wnow > s->last_write)
		s->last_write = h->wnow;
	if (s->writer == h->wtask)
		s->cpu_send = bounded(h->wrdelay - s->rq_write, s->last_write - s->first_write);
}

/* A frame's header is whole (p->hdr): what it begins; `at` is where it
 * began in the read. */
__noinline int h2_frame_start(struct ss_h2_conn *h, int dir, __u64 at)
{
	struct ss_h2_dir *p;
	__u8 *b;
	__u32 sid;

	if (!h)
		return 0;
	p = dir ? &h->wr : &h->rd;
	b = p->hdr;

	p->flen = (__u32)b[0] << 16 | (__u32)b[1] << 8 | b[2];
	p->ftype = b[3];
	p->fflags = b[4];
	sid = ((__u32)b[5] << 24 | (__u32)b[6] << 16 | (__u32)b[7] << 8 | b[8]) & 0x7fffffff;
	p->sid = sid;
	p->rem = p->flen;
	p->poff = 0;
	p->hn = 0;
	p->end = 0;
	p->capture = p->ftype == H2_HEADERS || p->ftype == H2_PUSH_PROMISE ||
		     p->ftype == H2_CONTINUATION;
	if (!sid)
		return 0;
	if (!dir) {
		if (p->ftype == H2_HEADERS && (sid & 1) && sid > h->last_sid) {
			h->last_sid = sid;
			h2_begin(h, sid, at);
		} else if (p->ftype == H2_RST_STREAM) {
			p->end = SS_H2_END_RESET_CLIENT;
		}
		return 0;
	}
	if (p->ftype == H2_DATA || p->ftype == H2_HEADERS || p->ftype == H2_RST_STREAM ||
	    p->ftype == H2_CONTINUATION)
		h2_wrote(h, sid);
	if (p->ftype == H2_RST_STREAM)
		p->end = SS_H2_END_RESET_SERVER;
	else if ((p->ftype == H2_DATA || p->ftype == H2_HEADERS) &&
		 (p->fflags & H2_F_END_STREAM)) {
		if (p->ftype == H2_HEADERS && !(p->fflags & H2_F_END_HEADERS))
			h->pend_end = sid;
		else
			p->end = SS_H2_END_STREAM;
	} else if (p->ftype == H2_CONTINUATION && (p->fflags & H2_F_END_HEADERS) &&
		   h->pend_end == sid) {
		h->pend_end = 0;
		p->end = SS_H2_END_STREAM;
	}
	return 0;
}

/* The frame's payload has passed whole. */
static __always_inline void h2_frame_done(const struct ss_anat_conn *c, struct ss_h2_conn *h,
					  struct ss_h2_dir *p)
{
	if (p->end)
		h2_end(c, h, p->sid, p->end);
	p->end = 0;
	p->capture = 0;
}

/* Bytes [ubuf, ubuf + n) of a header-carrying frame's payload, n <=
 * SS_H2_CHUNK, to the ring buffer. */
static __always_inline int h2_emit(const struct ss_anat_conn *c, struct ss_h2_conn *h,
				   struct ss_h2_dir *p, int dir, __u64 ubuf, __u32 n)
{
	struct ss_h2_block *e;

	if (p->flen > SS_H2_BLOCK_MAX)
		return -1;
	e = bpf_ringbuf_reserve(&h2_events, sizeof(*e), 0);
	if (!e) {
		count(SS_CNT_H2_EVENTS_LOST);
		return -2;
	}
	h2_head(&e->h, c, h, SS_H2_REC_BLOCK, p->sid);
	e->h.dir = dir;
	e->h.ftype = p->ftype;
	e->h.fflags = p->fflags;
	e->h.flen = p->flen;
	e->off = p->poff;
	e->len = n;
	e->pad = 0;
	barrier_var(n);
	if (n > SS_H2_CHUNK)
		n = SS_H2_CHUNK;
	if (bpf_probe_read_user(e->data, n, (void *)ubuf)) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		return -1;
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Walks len bytes at ubuf (0: no buffer, only payload may pass) of one
 * direction; h->base is where they begin in the read. 0, or < 0 when the
 * connection is given up on. */
__noinline int h2_walk(const struct ss_anat_conn *c, struct ss_h2_conn *h, int dir, __u64 ubuf,
		       __u64 len)
{
	struct ss_h2_dir *p;
	__u8 tmp[16];
	__u64 pos = 0, d;
	int it, k, r;

	if (!c || !h)
		return -1;
	p = dir ? &h->wr : &h->rd;
	bpf_for(it, 0, SS_H2_STEPS) {
		if (pos >= len)
			return 0;
		if (p->rem) {
			d = len - pos;
			if (d > p->rem)
				d = p->rem;
			if (p->capture) {
				if (!ubuf)
					return -1;
				if (d > SS_H2_CHUNK)
					d = SS_H2_CHUNK;
				r = h2_emit(c, h, p, dir, ubuf + pos, d);
				if (r < 0)
					return r;
			}
			pos += d;
			p->rem -= d;
			p->poff += d;
			if (!p->rem)
				h2_frame_done(c, h, p);
			continue;
		}
		if (!ubuf)
			return -1;
		if (!p->hn && len - pos >= 9) {
			if (bpf_probe_read_user(tmp, 9, (void *)(ubuf + pos)))
				return -1;
			__builtin_memcpy(p->hdr, tmp, 9);
			h2_frame_start(h, dir, h->base + pos);
			pos += 9;
		} else {
			/* A header cut by the read or write: byte by byte. */
			for (k = 0; k < 9; k++) {
				if (p->hn >= 9 || pos >= len)
					break;
				if (bpf_probe_read_user(&tmp[0], 1, (void *)(ubuf + pos)))
					return -1;
				p->hdr[p->hn & 15] = tmp[0];
				p->hn++;
				pos++;
			}
			if (p->hn < 9)
				return 0;
			/* Its arrival: the read that completes it. */
			h2_frame_start(h, dir, h->base + pos - 1);
		}
		if (!p->rem)
			h2_frame_done(c, h, p);
	}
	return pos >= len ? 0 : -1;
}

/* A walk's result: the connection given up on (counted) unless it was
 * parsed. */
static __always_inline void h2_walked(const struct ss_anat_conn *c, struct ss_h2_conn *h, int r)
{
	if (r == -2)
		h2_give_up(c, h, false);  /* counted as a lost record */
	else if (r < 0)
		h2_give_up(c, h, true);
}

/* The state of a connection read in plaintext (TLS), or 0. */
static __always_inline struct ss_h2_conn *h2_of_tls(__u64 key)
{
	struct ss_h2_conn *h = bpf_map_lookup_elem(&tls_h2, &key);

	return h && !h->dead ? h : 0;
}

static __always_inline struct ss_h2_conn *h2_of(const struct sock *sk,
						const struct ss_anat_conn *c)
{
	struct ss_h2_conn *h;

	if (c->flags & SS_CONN_TLS)
		return h2_of_tls(c->sk);
	h = bpf_sk_storage_get(&h2conns, (void *)sk, 0, 0);
	return h && !h->dead ? h : 0;
}

/* The client's preface at the start of the connection's first read (ret
 * bytes at ubuf): the connection becomes HTTP/2 and its bytes after the
 * preface are walked. Its turn so far is dropped; the streams this read
 * begins arrived with it (c->arrival). */
static __always_inline bool h2_first(const struct sock *sk, struct ss_anat_conn *c, __u64 ubuf,
				     int ret, bool tls)
{
	__u64 w[3], key = c->sk;
	struct ss_h2_conn *h;

	if (ret < SS_H2_PREFACE_LEN || !ubuf || bpf_probe_read_user(w, sizeof(w), (void *)ubuf))
		return false;
	/* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", little-endian words */
	if (w[0] != 0x5448202a20495250ull || w[1] != 0x0a0d302e322f5054ull ||
	    w[2] != 0x0a0d0a0d4d530a0dull)
		return false;
	if (tls) {
		/* `tls` is a constant of the caller: the uprobe that walks
		 * the plaintext may not call the socket storage's helper. */
		bpf_map_update_elem(&tls_h2, &key, &zero_h2, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&tls_h2, &key);
	} else {
		h = bpf_sk_storage_get(&h2conns, (void *)sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	}
	if (!h) {
		count(SS_CNT_STORAGE_FULL);
		return false;
	}
	h->id = __sync_fetch_and_add(&h2_next_id, 1) + 1;
	c->wire = SS_WIRE_HTTP2;
	c->rproto = SS_RESP_ON;
	count(SS_CNT_H2_CONNS);
	h->now = c->first_read;
	h->wait = c->cpu_queue;
	h->rdelay = c->rq_read;
	h->task = c->reader;
	h->fallback = c->arrival;
	h->seq0 = 0;
	turn_reset(c);
	h->base = SS_H2_PREFACE_LEN;
	h2_walked(c, h, h2_walk(c, h, 0, ubuf + SS_H2_PREFACE_LEN, ret - SS_H2_PREFACE_LEN));
	h->fallback = 0;
	return true;
}

/* Data queued on an HTTP/2 connection: its arrival is kept. */
static __always_inline void h2_ready(const struct sock *sk, struct ss_anat_conn *c, __u64 now)
{
	struct ss_h2_conn *h = h2_of(sk, c);
	struct tcp_sock *tp;
	__u32 i, seq;

	if (!h)
		return;
	if (c->proto == SS_ANAT_PROTO_UNIX) {
		if (!h->unix_arrival)
			h->unix_arrival = now;
		return;
	}
	tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return;
	seq = tp->rcv_nxt;
	if (h->atail != h->ahead &&
	    h->aseq[(h->atail - 1) & (SS_H2_ARRIVALS - 1)] == seq)
		return;  /* nothing new (a FIN) */
	if (h->atail - h->ahead >= SS_H2_ARRIVALS) {
		/* Full: the newest covers these bytes too (their arrival is
		 * taken early: an upper bound of their queue wait). */
		h->aseq[(h->atail - 1) & (SS_H2_ARRIVALS - 1)] = seq;
		return;
	}
	i = h->atail & (SS_H2_ARRIVALS - 1);
	h->aseq[i] = seq;
	h->at[i] = now;
	h->atail++;
}

/* A read's marks (now): its time, the thread's run-queue wait before it,
 * run_delay, the task. */
static __always_inline void h2_read_marks(struct ss_h2_conn *h, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 rd = run_delay_of(task);
	struct ss_anat_thread *t = thread_here(task, rd);

	h->now = now;
	h->wait = waited_since_mark(t, rd);
	h->rdelay = rd;
	h->task = (__u64)task;
}

/* A write's marks (now): its time, run_delay, the task (the thread's wait
 * before it belongs to the stream's send). */
static __always_inline void h2_write_marks(struct ss_h2_conn *h, __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 rd = run_delay_of(task);

	waited_since_mark(bpf_task_storage_get(&threads, task, 0, 0), rd);
	h->wnow = now;
	h->wrdelay = rd;
	h->wtask = (__u64)task;
}

/* TCP: arrivals whose bytes are all read (up to copied_seq) are dropped. */
static __always_inline void h2_drop_arrivals(struct ss_h2_conn *h, __u32 copied)
{
	__u32 k;

	for (k = 0; k < SS_H2_ARRIVALS; k++) {
		if (h->ahead == h->atail ||
		    (__s32)(h->aseq[h->ahead & (SS_H2_ARRIVALS - 1)] - copied) > 0)
			break;
		h->ahead++;
	}
}

/* A read of ret bytes on an HTTP/2 connection. */
static __always_inline void h2_read(const struct sock *sk, struct ss_anat_conn *c, int ret,
				    __u64 now)
{
	struct ss_h2_conn *h = h2_of(sk, c);
	struct tcp_sock *tp;
	__u32 copied = 0;
	__u64 ubuf;

	if (!h)
		return;
	h2_read_marks(h, now);
	h->fallback = 0;
	if (c->proto == SS_ANAT_PROTO_UNIX) {
		h->fallback = h->unix_arrival ? h->unix_arrival : now;
		if (!sk->sk_receive_queue.qlen)
			h->unix_arrival = 0;
	} else {
		tp = bpf_skc_to_tcp_sock((void *)sk);
		if (tp)
			copied = tp->copied_seq;
		h->seq0 = copied - (__u32)ret;
	}
	ubuf = wire_syscall_buf(ret, 0);
	h->base = 0;
	h2_walked(c, h, ubuf ? h2_walk(c, h, 0, ubuf, ret) : -1);
	if (c->proto != SS_ANAT_PROTO_UNIX)
		h2_drop_arrivals(h, copied);
}

/* A write of ret bytes on an HTTP/2 connection: its frames, from the
 * syscall's buffer (write, sendto, writev, sendmsg; a sendfile or splice
 * only inside a payload not kept). */
static __always_inline void h2_write(const struct sock *sk, struct ss_anat_conn *c, int ret,
				     __u64 now)
{
#if defined(__TARGET_ARCH_x86)
	struct ss_h2_conn *h = h2_of(sk, c);
	struct task_struct *task;
	struct pt_regs *regs;
	struct user_msghdr m;
	struct iovec iov;
	__u64 left = ret, base = 0, piov = 0, niov = 1, l;
	long nr;
	int j, r;

	if (!h)
		return;
	h2_write_marks(h, now);
	task = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (task->thread_info.status & TS_COMPAT)) {
		h2_give_up(c, h, true);
		return;
	}
	nr = BPF_CORE_READ(regs, orig_ax);
	if (nr == NR_WRITE || nr == NR_SENDTO) {
		base = BPF_CORE_READ(regs, si);
	} else if (nr == NR_WRITEV) {
		piov = BPF_CORE_READ(regs, si);
		niov = BPF_CORE_READ(regs, dx);
	} else if (nr == NR_SENDMSG) {
		if (bpf_probe_read_user(&m, sizeof(m), (void *)BPF_CORE_READ(regs, si))) {
			h2_give_up(c, h, true);
			return;
		}
		piov = (__u64)m.msg_iov;
		niov = m.msg_iovlen;
	} else {
		/* sendfile, splice...: no buffer. */
		h2_walked(c, h, h2_walk(c, h, 1, 0, left));
		return;
	}
	bpf_for(j, 0, SS_H2_MAX_IOV) {
		if (!left || (__u64)j >= niov)
			break;
		if (piov) {
			if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(piov + j * sizeof(iov)))) {
				h2_give_up(c, h, true);
				return;
			}
			base = (__u64)iov.iov_base;
			l = iov.iov_len;
		} else {
			l = left;
		}
		if (l > left)
			l = left;
		if (l) {
			r = h2_walk(c, h, 1, base, l);
			if (r < 0) {
				h2_walked(c, h, r);
				return;
			}
		}
		left -= l;
	}
	if (left)
		h2_give_up(c, h, true);
#endif
}

/* TLS: a socket read of ret bytes on an HTTP/2 connection read in
 * plaintext: the arrival of its first byte is kept for the streams its
 * plaintext begins (h2_read_plain), and the arrivals it read past are
 * dropped. */
static __always_inline void h2_tls_read(const struct sock *sk, struct ss_anat_conn *c, int ret)
{
	struct ss_h2_conn *h = h2_of(sk, c);
	struct tcp_sock *tp;
	__u32 copied;

	if (!h)
		return;
	tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return;
	copied = tp->copied_seq;
	h->fallback = 0;
	h->tls_arrival = h2_arrival_of(h, copied - (__u32)ret);
	h2_drop_arrivals(h, copied);
}

/* TLS: OpenSSL's read returned n plaintext bytes at ubuf on an HTTP/2
 * connection: its frames are walked, and a stream they begin arrived
 * with the bytes of the connection's last socket read (decryption is
 * part of its queue wait). */
static __always_inline void h2_read_plain(const struct ss_anat_conn *c, struct ss_h2_conn *h,
					  __u64 n, __u64 now, __u64 ubuf)
{
	h2_read_marks(h, now);
	/* No arrival kept: one after `now` makes h2_begin count the stream's
	 * arrival unseen and time it from this read. */
	h->fallback = h->tls_arrival && h->tls_arrival <= now ? h->tls_arrival : now + 1;
	h->base = 0;
	h2_walked(c, h, h2_walk(c, h, 0, ubuf, n));
}

/* TLS: OpenSSL's write took n plaintext bytes at ubuf on an HTTP/2
 * connection: its frames are walked (a stream's END_STREAM ends it as
 * the write returns). */
static __always_inline void h2_write_plain(const struct ss_anat_conn *c, struct ss_h2_conn *h,
					   __u64 n, __u64 now, __u64 ubuf)
{
	int r;

	h2_write_marks(h, now);
	r = h2_walk(c, h, 1, ubuf, n);
	if (r < 0)
		h2_walked(c, h, r);
}

/* The connection ends (or the window does: `pause`, a sampled window's
 * pause, after which its frames cannot be found again): streams still
 * open are counted in flight or cut. A TLS connection's state is
 * dropped as it closes. */
static __always_inline void h2_close(const struct sock *sk, const struct ss_anat_conn *c,
				     bool pause)
{
	struct ss_h2_conn *h;
	__u64 key = c->sk;
	__u32 k;

	if (c->flags & SS_CONN_TLS)
		h = bpf_map_lookup_elem(&tls_h2, &key);
	else
		h = bpf_sk_storage_get(&h2conns, (void *)sk, 0, 0);
	if (!h)
		return;
	if (!h->dead) {
		for (k = 0; k < SS_H2_STREAMS; k++) {
			if (h->s[k].sid) {
				count(pause ? SS_CNT_RESYNC : SS_CNT_IN_FLIGHT);
				h->s[k].sid = 0;
			}
		}
		h2_give_up(c, h, false);
	}
	if ((c->flags & SS_CONN_TLS) && !pause)
		bpf_map_delete_elem(&tls_h2, &key);
}

#endif /* SOCKSCOPE_H2_H */
