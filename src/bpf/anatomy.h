/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Layouts and constants shared by anatomy.bpf.c (request anatomy: each
 * request's time at the server, from the socket tracepoints only) and its
 * Rust loader (src/anatomy/). As in syscalls.h, constants
 * are enums so they reach BTF and the skeleton's `types`.
 */
#ifndef SOCKSCOPE_ANATOMY_H
#define SOCKSCOPE_ANATOMY_H

#include "common.h"

/* The parts of a turn, in the order of ss_anat_stats' arrays. Queue wait,
 * CPU wait, service and send add up to the server time, turn by turn. */
enum ss_anat_part {
	SS_PART_QUEUE = 0,   /* arrival to the read that takes it, less CPU wait */
	SS_PART_CPU = 1,     /* the serving thread runnable, not running */
	SS_PART_SERVICE = 2, /* first read to first write, less CPU wait */
	SS_PART_SEND = 3,    /* first to last write, less CPU wait */
	SS_PART_SERVER = 4,  /* arrival to last write */
	SS_PARTS = 5,
};

/* Where a connection's current turn is (ss_anat_conn.state). */
enum ss_anat_state {
	SS_TURN_IDLE = 0,       /* no request seen since the last turn closed */
	SS_TURN_ARRIVED = 1,    /* request data queued, not read yet */
	SS_TURN_SERVING = 2,    /* read, no response written yet */
	SS_TURN_RESPONDING = 3, /* response written; ends at the next arrival */
	SS_TURN_RESYNC = 4,     /* sampling resumed: where it is is not known */
	SS_TURN_CLOSING = 5,    /* one hook is closing the answered turn; the
				 * state's high 32 bits: its CPU + 1 (anatomy.bpf.c,
				 * "Closing an answered turn") */
};

/* ss_anat_conn.flags (bits) */
enum ss_anat_conn_flags {
	SS_CONN_INIT = 1,        /* set up for this very socket (not a clone) */
	SS_CONN_LISTENER = 2,    /* a listening socket: its children are turns */
	SS_CONN_MULTIPLEXED = 4, /* carries more than one request at a time */
	SS_CONN_UDP = 16,        /* datagram turns: a receive, then a send */
	SS_CONN_FOREIGN = 32,    /* served by a task outside the scope */
	SS_CONN_ARRIVAL_UNSEEN = 64, /* this turn's data came before the window */
	SS_CONN_NEXT = 128,      /* TCP: the next request came during a write */
	SS_CONN_SKIP = 256,      /* this turn began while sampling was paused */
	SS_CONN_WAITING = 512,   /* data unread during this turn's service */
	SS_CONN_NOREPLY = 1024,  /* memcached: this turn read a `noreply` command */
	SS_CONN_QUIET = 2048,    /* memcached: the last turn was only `noreply`
				  * commands, dropped untimed: a read before the
				  * next data-ready is a new request */
	SS_CONN_TLS = 4096,      /* TLS read in plaintext (tls.h): the state lives in
				  * tls_conns, this socket storage is its stub */
	SS_CONN_TLS_SEEN = 8192, /* TLS: OpenSSL's plaintext was seen on it */
	SS_CONN_CIPHER = 16384,  /* its first read began a TLS handshake */
	SS_CONN_HANDSHAKE = 32768, /* TLS: this turn's first read began a
				    * handshake record (or a ChangeCipherSpec):
				    * no request */
	SS_CONN_HS_TAIL = 65536, /* TLS: the last turn was a handshake's; a write
				  * before the next read is still its (TLS 1.3's
				  * session tickets, written in parts) */
	SS_CONN_SAMPLED = 131072, /* a stack sample fell in this turn, or its server
				   * time reached tail_floor_ns (tie_samples): its
				   * end is written to the ring buffer */
};

/* Tying stack samples to turns (tie_samples; src/bpf/stacks.bpf.c reads
 * the serving thread's ss_anat_thread.turn through this very map). */
enum ss_anat_tie {
	/* ss_anat_thread.turn: the thread reads a connection whose requests
	 * interleave (HTTP/2 streams): a sample cannot be given to one. */
	SS_TURN_INTERLEAVED = 1,
	/* A sample's turn (never ss_anat_thread.turn): its thread had written
	 * a response of that turn before the sample (a turn whose end never
	 * came is then one the sample came after, not an untimed one). */
	SS_TURN_AFTER_WRITE = 2,
	/* Turn numbers: (per-CPU sequence << SS_TURN_CPU_BITS | cpu) << 2,
	 * never 0, the two low bits clear (the flags above). */
	SS_TURN_CPU_BITS = 8,
};

enum ss_anat_limits {
	/* UDP: arrival times of datagram bursts queued and not read yet. */
	SS_UDP_RING = 16,
	/* Programs that time themselves (enum ss_anat_prog). */
	SS_ANAT_PROGS = 7,
	/* The proto of a Unix stream socket's connections (AF_UNIX): its
	 * "port" is the listener's number, given by the loader. */
	SS_ANAT_PROTO_UNIX = 1,
	/* Unix listeners followed at most. */
	SS_ANAT_UNIX_MAX = 64,
	/* RESP (resp.h): a command's name is its first bulk string's first
	 * bytes, upper-cased. Names per port: the loader's max_endpoints
	 * (names.h; the rest go to the name of all zeros, "(other)"); names
	 * kept in all: the names map's size, set by the loader too. */
	SS_RESP_NAME_LEN = 16,
	SS_RESP_NAMES_MAX = 1024,
	/* Bands of server time a name's parts are summed by (a band is
	 * SS_HIST_SUB histogram buckets: one power of two). */
	SS_NAME_BANDS = SS_HIST_BUCKETS / SS_HIST_SUB,
	/* HTTP/1 (http1.h): the text of a name (method, space, route
	 * template) kept at most; requests read and not answered whose names
	 * are kept, per connection (for their responses' status). */
	SS_H1_TEXT = 64,
	SS_H1_QUEUE = 16,
	/* PostgreSQL (postgres.h): prepared statements' kinds kept per
	 * connection (a power of 2), and connections kept in all (LRU). */
	SS_PG_STMTS = 16,
	SS_PG_CONNS_MAX = 4096,
	/* TLS (tls.h): connections read in plaintext at once (LRU), and
	 * OpenSSL sessions whose socket is kept. */
	SS_TLS_CONNS_MAX = 8192,
};

/* ss_anat_conn.rproto: what the connection's bytes are to the parser. */
enum ss_resp_proto {
	SS_RESP_UNKNOWN = 0,   /* no read seen yet (or since a pause) */
	SS_RESP_ON = 1,        /* commands are parsed, read by read */
	SS_RESP_OFF = 2,       /* not parsed, or given up on: turns only */
	SS_RESP_RESYNC = 3,    /* parsed before a pause: parsed again from a
				* read that begins a command */
	SS_RESP_PROBE = 4,     /* memcached: the first word is being read; a
				* known command makes the connection memcached */
	/* HTTP/1 (http1.h): the first request line is being read; one that
	 * ends in HTTP/1.x makes the connection HTTP/1. (6, not 5: the value
	 * a parallel protocol branch may take.) */
	SS_RESP_PROBE_H1 = 6,
	/* DNS over TCP (dns.h): a connection whose first read began with a
	 * byte a length prefix begins with, and no PostgreSQL startup; its
	 * first whole query makes it DNS. (8: values parallel protocol
	 * branches may take are left alone.) */
	SS_RESP_PROBE_DNS = 8,
};

/* ss_anat_conn.wire (and ss_anat_name_key.wire): the protocol a
 * connection's commands were found in. */
enum ss_anat_wire {
	SS_WIRE_NONE = 0,
	SS_WIRE_RESP = 1,      /* resp.h */
	SS_WIRE_MEMCACHED = 2, /* memcached.h: the text protocol */
	SS_WIRE_POSTGRES = 3,  /* postgres.h: the frontend protocol v3 */
	SS_WIRE_HTTP1 = 4,     /* http1.h: HTTP/1.0 and 1.1 (4, not 3: see
				* SS_RESP_PROBE_H1) */
	SS_WIRE_DNS = 6,       /* dns.h: queries over UDP and TCP */
	SS_WIRE_HTTP2 = 7,     /* h2.h: HTTP/2 with prior knowledge (h2c): streams */
	/* Never set by the kernel: the loader names an HTTP/2 stream whose
	 * request's content-type is application/grpc as gRPC. */
	SS_WIRE_GRPC = 9,
};

/* PostgreSQL: a request's kind, the first byte of its name (the rest, a
 * prepared statement's name when it is named). */
enum ss_pg_kind {
	SS_PG_SELECT = 1,
	SS_PG_INSERT = 2,
	SS_PG_UPDATE = 3,
	SS_PG_DELETE = 4,
	SS_PG_BEGIN = 5,      /* BEGIN, START (TRANSACTION) */
	SS_PG_COMMIT = 6,     /* COMMIT, END */
	SS_PG_ROLLBACK = 7,   /* ROLLBACK, ABORT */
	SS_PG_OTHER = 8,      /* any other first word, or none */
	SS_PG_PARSE = 9,      /* a Sync after a Parse that executed nothing */
	SS_PG_SYNC = 10,      /* a Sync with nothing parsed or executed */
	SS_PG_UNKNOWN = 11,   /* a Bind of a statement whose Parse was not seen */
	SS_PG_FUNCTION = 12,  /* a FunctionCall */
};

/* The programs, in the order of ss_anat_cpu.prog. */
enum ss_anat_prog {
	SS_PROG_DATA_READY = 0,
	SS_PROG_RECV = 1,
	SS_PROG_SEND = 2,
	SS_PROG_STATE = 3,
	SS_PROG_FORK = 4,
	SS_PROG_TLS_ENTER = 5,   /* uprobes on OpenSSL's reads and writes (tls.h) */
	SS_PROG_TLS_RETURN = 6,  /* and their returns */
};

/* Counters of what the programs saw (ss_anat_cpu.count). */
enum ss_anat_count {
	SS_CNT_TURNS = 0,          /* turns timed into the histograms */
	SS_CNT_MUX_TURNS = 1,      /* turns on multiplexed connections */
	SS_CNT_MUX_CONNS = 2,      /* connections found multiplexed */
	SS_CNT_BEFORE_WINDOW = 3,  /* turns whose data arrived before the window */
	SS_CNT_UNSOLICITED = 4,    /* writes with no request (a greeting) */
	SS_CNT_UDP_UNSEEN = 5,     /* datagrams answered, their arrival not seen: untimed */
	SS_CNT_CONNS = 6,          /* connections (and UDP sockets) followed */
	SS_CNT_STORAGE_FULL = 7,   /* socket or task storage could not be made */
	SS_CNT_FOREIGN = 8,        /* sockets read by tasks outside the scope */
	SS_CNT_THREADS = 9,        /* serving threads followed */
	SS_CNT_SERIES_FULL = 10,   /* turns added to the overflow port */
	SS_CNT_IN_FLIGHT = 11,     /* turns not answered when the window closed */
	SS_CNT_UNANSWERED = 12,    /* UDP: a datagram read, none sent before the next */
	SS_CNT_NEXT_IN_WRITE = 13, /* TCP: the next request came during a write */
	SS_CNT_RESYNC = 14,        /* turns begun while sampling was paused: untimed */
	SS_CNT_WRITING_AT_END = 15, /* answered turns whose write had not returned at the end */
	SS_CNT_READ_BEFORE_READY = 16, /* next requests read before their data-ready ran */
	SS_CNT_COMMANDS = 17,      /* commands completed (read whole), every protocol */
	SS_CNT_CMD_TURNS = 18,     /* RESP: turns closed that carried >= 1 command */
	SS_CNT_RESP_CONNS = 19,    /* connections whose first read began a RESP array */
	SS_CNT_RESP_GAVE_UP = 20,  /* RESP connections the parser gave up on */
	SS_CNT_NAMES_FULL = 21,    /* RESP commands whose name found no room */
	SS_CNT_MC_CONNS = 22,      /* connections whose first word was a memcached command
				    * (or whose first byte was the binary protocol's) */
	SS_CNT_MC_GAVE_UP = 23,    /* memcached connections the parser gave up on */
	SS_CNT_MC_TURNS = 24,      /* memcached: turns closed that carried >= 1 command */
	SS_CNT_MC_NAMES_FULL = 25, /* memcached commands whose name found no room */
	SS_CNT_MC_NOREPLY = 26,    /* memcached `noreply` commands: counted, not timed */
	SS_CNT_PG_CONNS = 27,      /* connections whose first read was a PostgreSQL startup */
	SS_CNT_PG_GAVE_UP = 28,    /* PostgreSQL connections the parser gave up on */
	SS_CNT_PG_TURNS = 29,      /* PostgreSQL: turns closed that carried >= 1 request */
	SS_CNT_PG_NAMES_FULL = 30, /* PostgreSQL requests whose name found no room */
	SS_CNT_PG_ENCRYPTED = 31,  /* PostgreSQL connections gone TLS or GSS: not readable */
	/* HTTP/1 (http1.h) */
	SS_CNT_H1_CONNS = 32,      /* connections whose first read began an HTTP/1 request line */
	SS_CNT_H1_GAVE_UP = 33,    /* of them, given up on (requests or responses) */
	SS_CNT_H1_TURNS = 34,      /* turns closed that carried >= 1 request */
	SS_CNT_H1_NAMES_FULL = 35, /* requests whose route found no room */
	SS_CNT_H1_STATUS_UNKNOWN = 36, /* requests whose response's status was not read */
	SS_CNT_H1_UNMATCHED = 37,  /* final responses with no request read before them */
	SS_CNT_H1_INTERIM = 38,    /* 1xx interim responses (100 Continue...): not a turn's end */
	/* DNS (dns.h) */
	SS_CNT_DNS_CONNS = 39,     /* TCP connections and UDP sockets whose first query parsed */
	SS_CNT_DNS_GAVE_UP = 40,   /* of the TCP connections, given up on (malformed bytes) */
	SS_CNT_DNS_TURNS = 41,     /* turns closed that carried >= 1 query (UDP: answers) */
	SS_CNT_DNS_NAMES_FULL = 42, /* queries whose QTYPE found no room */
	SS_CNT_DNS_MALFORMED = 43, /* UDP datagrams on a DNS socket that were no query (each
				    * datagram stands alone: the socket is not given up on) */
	/* HTTP/2 (h2.h) */
	SS_CNT_H2_CONNS = 44,      /* connections whose first read began with the h2 preface */
	SS_CNT_H2_GAVE_UP = 45,    /* of them, given up on (a frame past the bounds, a write
				    * or read not parsed, an event lost) */
	SS_CNT_H2_STREAMS = 46,    /* streams begun (a client's HEADERS on a new stream) */
	SS_CNT_H2_TIMED = 47,      /* streams timed (their response's END_STREAM written) */
	SS_CNT_H2_RESET = 48,      /* streams reset (RST_STREAM either way): untimed */
	SS_CNT_H2_NO_SLOT = 49,    /* streams counted and named, untimed: begun with their
				    * slot taken, or marks out of order (a read and a
				    * write raced on two CPUs) */
	SS_CNT_H2_EVENTS_LOST = 50, /* records the ring buffer had no room for (the
				     * connection is given up on: HPACK needs every block) */
	SS_CNT_H2_ARRIVAL_UNSEEN = 51, /* streams whose bytes' arrival was not kept: timed
					* from their read (no queue wait) */
	SS_CNT_DNS_RCODE_UNKNOWN = 52, /* UDP answers to a query whose RCODE was not read
					* (the send's buffer unreadable, or no response) */
	SS_CNT_TLS_CONNS = 53,     /* TCP connections whose first read was a TLS
				    * ClientHello's record */
	SS_CNT_TLS_READ = 54,      /* of them, read in plaintext (OpenSSL's, --tls-plaintext) */
	SS_CNT_TLS_LOST = 55,      /* TLS connections whose state tls_conns evicted
				    * (more than its size at once): turns only from there */
	SS_CNT_TLS_HANDSHAKES = 56, /* TLS handshake turns (dropped: no request) */
	SS_CNT_TURN_ENDS = 57,     /* ends of turns a stack sample fell in, written */
	SS_CNT_TURN_ENDS_LOST = 58, /* of them, the ring buffer had no room for */
	SS_CNT_CLOSE_RACES = 59,   /* answered turns two hooks came to close at once
				    * (the next request's read and the peer's close,
				    * a write's end or the window's end, on two
				    * CPUs): closed, and recorded, once */
	SS_CNT_CLOSE_UNWAITED = 60, /* of them, the hook that lost did not see the
				     * close end (its closer interrupted beneath it on
				     * its CPU, or slower than the wait allows): what
				     * it had come to do was left undone */
	SS_COUNTS = 61,
};

/* HTTP/2 (h2.h). */
enum ss_h2_limits {
	/* Streams timed at once per connection (slot: stream id / 2 mod
	 * this); a stream whose slot is taken is counted, not timed. */
	SS_H2_STREAMS = 64,
	/* Bytes of a header block a record carries at most (a longer
	 * fragment goes in several records). */
	SS_H2_CHUNK = 256,
	/* TCP: data-ready times kept per connection, with the sequence they
	 * queued up to (the arrival of the bytes a read takes). */
	SS_H2_ARRIVALS = 8,
};

/* A ring-buffer record's kind (ss_h2_head.kind). */
enum ss_h2_record {
	SS_H2_REC_BLOCK = 1,  /* bytes of a HEADERS, PUSH_PROMISE or CONTINUATION payload */
	SS_H2_REC_END = 2,    /* a stream ended */
	SS_H2_REC_CLOSE = 3,  /* the connection ended, or is no longer parsed */
	SS_H2_REC_TURN = 4,   /* a timed turn a stack sample fell in ended
			       * (struct ss_turn_end; not HTTP/2's) */
};

/* How a stream ended (ss_h2_end.how). */
enum ss_h2_end_how {
	SS_H2_END_STREAM = 1,        /* the target wrote its END_STREAM */
	SS_H2_END_RESET_SERVER = 2,  /* the target wrote RST_STREAM */
	SS_H2_END_RESET_CLIENT = 3,  /* the client sent RST_STREAM */
};

/* The head of every HTTP/2 record. */
struct ss_h2_head {
	__u64 conn;     /* the connection's number, unique in the run (never 0) */
	__u32 stream;   /* the stream's id (CLOSE: 0) */
	__u16 port;     /* the statistics key of the connection */
	__u16 proto;
	__u8 kind;      /* enum ss_h2_record */
	__u8 dir;       /* BLOCK: 0 bytes the target read, 1 bytes it wrote */
	__u8 ftype;     /* BLOCK: the frame's type */
	__u8 fflags;    /* BLOCK: the frame's flags */
	__u32 flen;     /* BLOCK: the frame's payload length */
};

/* Bytes [off, off + len) of a frame's payload, padding and priority
 * fields included, as they were on the wire. */
struct ss_h2_block {
	struct ss_h2_head h;
	__u32 off;
	__u16 len;
	__u16 pad;
	__u8 data[SS_H2_CHUNK];
};

/* A stream ended: with its four parts when it was timed. */
struct ss_h2_end {
	struct ss_h2_head h;
	__u8 how;       /* enum ss_h2_end_how */
	__u8 timed;
	__u8 pad[6];
	__u64 parts[SS_PART_SERVER]; /* queue wait, CPU wait, service, send */
};

/* A timed turn that a stack sample fell in (tie_samples) has ended: what
 * the loader needs to put its samples in the tail or the rest, and to
 * explain its queue wait. h.conn holds the turn's number, h.stream the
 * reading thread's id. */
struct ss_turn_end {
	struct ss_h2_head h;
	__u64 arrival;
	__u64 first_read;
	__u64 last_write;
	__u64 parts[SS_PART_SERVER]; /* queue wait, CPU wait, service, send */
	__u8 name[SS_RESP_NAME_LEN]; /* its first command's name (named: 1) */
	__u8 wire;
	__u8 named;
	__u8 pad[6];
};

/* One program's runs on one CPU: every run is counted as matched (on the
 * target's socket or thread) or filtered (someone else's); during the
 * loader's cost slices (cost_on) the runs also time themselves. */
struct ss_anat_prog_cost {
	__u64 matched;
	__u64 filtered;
	__u64 timed_matched;
	__u64 timed_filtered;
	__u64 matched_ns;
	__u64 filtered_ns;
	__u64 clock_ns;    /* the cost of the clock reads themselves */
	__u64 pad;
};

/* The timed runs of one process (tgid) during the cost slices, on one
 * CPU: what the programs cost the process they ran in the context of
 * (src/anatomy/service_cost.rs). */
struct ss_anat_svc_cost {
	__u64 ns;          /* run time, the clock read's own cost taken out */
	__u64 runs;
	__u64 clock_ns;    /* one clock read's cost per run, summed */
	__u64 pad;
};

/* Everything the programs count on one CPU (plain stores). */
struct ss_anat_cpu {
	struct ss_anat_prog_cost prog[SS_ANAT_PROGS];
	__u64 count[SS_COUNTS];
	__u64 turn_seq;    /* tie_samples: turns numbered on this CPU */
};

/* The turns of one listening port (or of the overflow), per CPU. The sums
 * of the four parts equal the server time's sum exactly, and so do they
 * within each server-time bucket (by_server): what the turns at a given
 * server-time percentile were made of. */
struct ss_anat_stats {
	__u64 turns;
	__u64 sum_ns[SS_PARTS];
	__u64 max_ns[SS_PARTS];
	/* part p's bucket b at [p * SS_HIST_BUCKETS + b] (flat: the skeleton
	 * generator derives Default, which nested arrays lack) */
	__u64 hist[SS_PARTS * SS_HIST_BUCKETS];
	/* server-time bucket b's addend p at [b * SS_PART_SERVER + p]: the
	 * four sums a turn adds share one cache line */
	__u64 by_server[SS_HIST_BUCKETS * SS_PART_SERVER];
};

/* A port the target serves on: a TCP listener or a bound UDP socket, in
 * one network namespace (the inode number of /proc/PID/ns/net). */
struct ss_anat_port_key {
	__u32 netns;
	__u16 port;
	__u16 proto;   /* IPPROTO_TCP or IPPROTO_UDP */
};

/* A Unix listener to follow: its inode (the loader's key) and its number
 * (the "port" of its connections' statistics). */
struct ss_anat_unix {
	__u64 inode;
	__u16 index;
	__u16 pad[3];
};

/* Key of the per-port statistics. */
struct ss_anat_stats_key {
	__u16 port;
	__u16 proto;
	__u32 pad;
};

/* HTTP/1 (http1.h): one direction's parser (requests read, responses
 * written). */
struct ss_h1_parse {
	__u64 skip;     /* body or chunk bytes still to pass; while a head is
			 * read, the Content-Length or chunk size so far */
	__u32 head;     /* bytes of the head (or chunk line) so far: bounded */
	__u16 code;     /* responses: the status code */
	__u8 st;        /* enum ss_h1_state */
	__u8 k;         /* bytes matched of the word being compared */
	__u8 m;         /* the header line being read: enum ss_h1_header */
	__u8 f;         /* enum ss_h1_flags */
	__u8 ck;        /* bytes of "chunked" matched at a value's end */
	__u8 pad;
};

/* HTTP/1 per connection: both parsers, the names of the requests waiting
 * for their response, and the route template being read. No header
 * value, query or body byte is kept. */
struct ss_h1_conn {
	struct ss_h1_parse req;
	struct ss_h1_parse resp;
	__u64 q[SS_H1_QUEUE]; /* names (ss_anat_name_key.name's first 8
			       * bytes; bit 0 clear: a HEAD) read, not answered */
	__u64 last;     /* the last name whose text is kept (h1_name) */
	__u16 qhead;
	__u16 qtail;
	__u16 qlost;    /* requests read past a full queue: statuses unknown */
	__u16 segn;     /* bytes of the path segment being read */
	__u8 tlen;      /* bytes of text */
	__u8 seg;       /* where the segment being read begins in text */
	__u8 segf;      /* what the segment can still be (enum ss_h1_seg) */
	__u8 tf;        /* enum ss_h1_text_flags */
	__u8 text[SS_H1_TEXT];
};

/* The text of an HTTP/1 name (`GET /users/{id}`), by its 8-byte hash
 * (ss_anat_name_key.name's first 8 bytes; the rest zero). */
struct ss_h1_route {
	__u8 len;
	__u8 cut;       /* 1: the route was longer than kept */
	__u8 pad[6];
	__u8 text[SS_H1_TEXT];
};

/* DNS (dns.h): one message's parser, in the connection's storage for
 * TCP (a message may be cut anywhere by the reads), on the stack for a
 * datagram. Only the QTYPE is kept: the labels of the name are passed by
 * their lengths, never read. */
struct ss_dns_parse {
	__u32 left;     /* bytes of the message not read yet */
	__u32 skip;     /* bytes of a label, or of the records after the
			 * question, still to pass */
	__u16 qtype;
	__u16 namelen;  /* bytes of the question's name so far (<= 255) */
	__u8 st;        /* enum ss_dns_state */
	__u8 k;         /* bytes of the fixed field being read */
	__u8 ar;        /* ARCOUNT (0, or 1 for EDNS's OPT) */
	__u8 pad;
};

/* One connection (or UDP socket), in socket local storage. */
struct ss_anat_conn {
	__u64 sk;           /* the socket this was set up for */
	__u64 arrival;      /* first data of the turn queued */
	__u64 first_read;
	__u64 first_write;
	__u64 last_write;
	__u64 next_arrival; /* TCP: the next request's, come during a write */
	__u64 ready_at;     /* the next request's data-ready, come while the
			     * turn was RESPONDING (kept if after last_write) */
	__u64 cpu_queue;    /* CPU wait before the first read */
	__u64 rq_read;      /* the reader's run_delay at the first read */
	__u64 rq_write;     /* the writer's at the first write */
	__u64 cpu_service;
	__u64 cpu_send;
	__u64 reader;       /* task that read first (task_struct address) */
	__u64 writer;       /* task that wrote first */
	__u64 turn_id;      /* tie_samples: this turn's number (enum ss_anat_tie) */
	__u64 tls_ssl;      /* TLS (tls.h): the SSL a socket op was last seen in */
	__u64 tls_retry_buf; /* TLS: the rest of a write whose plaintext was parsed */
	__u64 tls_retry_len; /* and did not all go: its retry is not parsed again */
	__u64 state;        /* enum ss_anat_state (64 bits: closed by compare-and-swap) */
	__u32 flags;
	__u16 port;
	__u16 proto;
	__u32 seq_mark;     /* TCP: write_seq when no write of ours was under way;
			     * Unix: 1 once the peer read (part of) this turn's
			     * response before the write returned, until it does */
	__u32 ring_head;    /* UDP: next arrival to read */
	__u32 ring_tail;    /* UDP: next free slot */
	__u64 ring[SS_UDP_RING];     /* UDP: arrival times, oldest first */
	/* RESP (resp.h): the parser's state, which a command can straddle
	 * reads in, and the commands of the turn in progress. No key or value
	 * byte is kept: only a command's name. */
	__u64 rskip;        /* bulk bytes (and CRLF) still to pass */
	__u64 rname[2];     /* the command being read: its name so far */
	__u64 tname[2];     /* the turn's first command's name */
	__u32 rnum;         /* the count or length being read */
	__u32 relems;       /* bulk strings left in the array */
	__u32 tcmds;        /* commands the turn completed */
	__u8 rproto;        /* enum ss_resp_proto */
	__u8 rst;           /* parser state (resp.h) */
	__u8 rfirst;        /* 1 while the array's first bulk is read */
	__u8 rnamelen;      /* name bytes kept (or digits read, in a number) */
	/* memcached (memcached.h) reuses the fields above: rskip the data
	 * block, rnum the bytes field, relems the line's length so far,
	 * rfirst the token's index. */
	__u8 wire;          /* enum ss_anat_wire */
	__u8 mkind;         /* the line's command: storage or not (memcached.h) */
	__u8 mmatch;        /* bytes of the token that match "noreply" */
	__u8 mflags;        /* memcached.h's line flags */
	__u32 reader_tid;   /* tie_samples: the thread that read first (its id) */
	/* HTTP/1 (http1.h): its own parsers' state, apart from the fields
	 * above. */
	struct ss_h1_conn h1;
	/* DNS over TCP (dns.h). */
	struct ss_dns_parse dns;
};

/* Key of the per-command-name counts: a port's statistics key and the
 * name (zeros: "(other)"). */
struct ss_anat_name_key {
	__u16 port;
	__u16 proto;
	__u8 wire;     /* enum ss_anat_wire */
	__u8 pad[3];
	__u8 name[SS_RESP_NAME_LEN];
};

/* One command name's counts on one port (atomic adds: shared by CPUs). */
struct ss_anat_name {
	__u64 commands;     /* completed, counted at the read that completed them */
	__u64 batched;      /* of them, in turns that carried more than one */
	__u64 noreply;      /* of them, memcached `noreply` (not timed) */
	__u64 turns;        /* timed turns whose first command had this name */
	__u64 sum_ns;       /* their server time's sum */
	__u64 max_ns;
	__u64 hist[SS_HIST_BUCKETS];  /* their server time */
	/* HTTP/1: final responses by status class (2xx, 3xx, 4xx, 5xx; the
	 * rest, 1xx finals such as 101, in the counters). DNS over UDP: the
	 * answers by RCODE (NOERROR, NXDOMAIN, SERVFAIL, any other). */
	__u64 status[4];
	/* Their parts' sums (queue, CPU, service, send): the means exactly. */
	__u64 parts[SS_PART_SERVER];
	/* The parts' sums by band of server time (band b, part p at
	 * [b * SS_PART_SERVER + p]): a band is SS_HIST_SUB buckets of hist,
	 * one power of two; what the turns at a percentile were made of. */
	__u64 by_band[SS_NAME_BANDS * SS_PART_SERVER];
};

/* A port's number of names so far (bounds them). */
struct ss_anat_name_count {
	__u32 names;
	__u32 pad;
};

/* One serving thread, in task local storage: its run-queue wait so far
 * as of its last read or write on a followed socket, and its UDP turn in
 * progress (a datagram socket is read by several threads at once, so its
 * turns are kept per thread, not per socket). */
struct ss_anat_thread {
	__u64 run_delay;      /* task->sched_info.run_delay at its last hook */
	__u64 udp_sk;         /* the socket of the datagram it read (0: none) */
	__u64 udp_arrival;    /* that datagram's arrival */
	__u64 udp_read;       /* when it read it */
	__u64 udp_cpu_queue;  /* CPU wait before the read */
	__u64 udp_rq_read;    /* run_delay at the read */
	__u64 udp_name;       /* DNS: that datagram's QTYPE (0: no query) */
	/* TLS (tls.h): the OpenSSL call under way (SSL_read, SSL_write or
	 * their _ex): its SSL, buffer, where an _ex call writes its byte
	 * count, the followed socket it read or wrote (0: none yet), and
	 * which (enum ss_tls_op; 0: none). */
	__u64 tls_ssl;
	__u64 tls_buf;
	__u64 tls_num;        /* SSL_write: the bytes it was given */
	__u64 tls_nptr;
	__u64 tls_sk;
	__u32 tls_op;
	__u32 tls_parsed;     /* SSL_write: its plaintext was parsed (at its
			       * first socket write) */
	/* tie_samples: the turn whose request this thread read last (0: none;
	 * enum ss_anat_tie), which the stack sampler gives its samples of the
	 * thread; and the last turn it gave one (the next write of that turn
	 * marks it SS_CONN_SAMPLED). */
	__u64 turn;
	__u64 sampled;
	__u64 wrote;          /* tie_samples: the last turn it wrote a response of */
	__u64 udp_turn;       /* tie_samples: the datagram's turn (udp_sk) */
};

#endif /* SOCKSCOPE_ANATOMY_H */
