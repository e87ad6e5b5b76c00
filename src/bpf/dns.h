/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * DNS queries as the request anatomy's requests (anatomy.bpf.c includes
 * this once, after names.h and before wire.h, which drives it): over UDP
 * one datagram is one query; over TCP each message follows its 2-byte
 * length, several may come in one read and one may be cut anywhere by the
 * reads (the parser's state is in the connection's storage).
 *
 * A query is recognised from its bytes alone, on any port, strictly: the
 * header says a standard query (QR 0, OPCODE 0, RCODE 0) with QDCOUNT 1,
 * ANCOUNT 0, NSCOUNT 0 and ARCOUNT 0 or 1 (EDNS's OPT); then one question
 * whose labels (each at most 63 bytes, the name at most 255) end at its
 * QTYPE (not 0) and QCLASS (IN, CH, HS, NONE or ANY). With no additional
 * record the message ends there; with one, at least a record's 11 bytes
 * follow (passed by length, never read: EDNS options are not looked at).
 * A compression pointer in a query's question is given up on (no client
 * sends one).
 *
 * A query is named by its QTYPE only: the kernel keeps its two bytes as
 * the name (little endian, the rest zero), and userspace writes it as dig
 * does (A, AAAA, TYPE65280). The labels' bytes are passed by their length
 * bytes and never read: no domain name is read into the kernel, let alone
 * kept.
 *
 * Bytes are read one at a time from the reader's buffer (a query examines
 * its 12 header bytes, a length byte per label and its 4 QTYPE/QCLASS
 * bytes: at most about 150 reads); a read takes at most SS_DNS_STEPS
 * steps, and one with more bytes left is given up on.
 */
#ifndef SOCKSCOPE_DNS_H
#define SOCKSCOPE_DNS_H

#define SS_DNS_HDR 12
#define SS_DNS_NAME_MAX 255
#define SS_DNS_LABEL_MAX 63
#define SS_DNS_MIN_MSG 17        /* the header, the root name, QTYPE, QCLASS */
#define SS_DNS_RR_MIN 11         /* a record with the root as its name */
#define SS_DNS_STEPS 8192        /* bytes read or runs passed per read */
#define SS_DNS_UDP_PROBES 16     /* datagrams a UDP socket may send that are
				  * no query before it is left alone */

/* ss_dns_parse.st */
enum ss_dns_state {
	D_LEN = 0,     /* TCP: the message's 2-byte length */
	D_HDR = 1,     /* the 12-byte header */
	D_LABEL = 2,   /* a label's length byte */
	D_PASS = 3,    /* a label's bytes, passed */
	D_Q = 4,       /* QTYPE and QCLASS */
	D_REST = 5,    /* the records after the question, passed */
	D_DONE = 6,    /* UDP: the datagram's query is read whole */
};

/* Is header byte k (0-based) b one of a standard query's? */
static __always_inline bool dns_header_ok(struct ss_dns_parse *p, __u8 b)
{
	switch (p->k) {
	case 2:
		return (b & 0xf8) == 0;  /* QR 0, OPCODE 0 */
	case 3:
		return (b & 0x0f) == 0;  /* RCODE 0 */
	case 4:
	case 6:
	case 7:
	case 8:
	case 9:
	case 10:
		return b == 0;
	case 5:
		return b == 1;           /* QDCOUNT 1 */
	case 11:
		p->ar = b;
		return b <= 1;           /* ARCOUNT: EDNS's OPT at most */
	default:
		return true;             /* the ID */
	}
}

/* QCLASS's low byte (its high one is 0): IN, CH, HS, NONE, ANY. */
static __always_inline bool dns_class_ok(__u8 b)
{
	return b == 1 || b == 3 || b == 4 || b == 254 || b == 255;
}

/* TCP: a query read whole joins the read's run of its name and its turn
 * (names.h); the connection's first makes it DNS. */
static __always_inline void dns_tcp_query(struct ss_anat_conn *c, struct ss_resp_scratch *sc,
					  __u16 qtype)
{
	if (c->wire != SS_WIRE_DNS) {
		c->wire = SS_WIRE_DNS;
		c->rproto = SS_RESP_ON;
		count(SS_CNT_DNS_CONNS);
	}
	c->rname[0] = qtype;
	c->rname[1] = 0;
	cmd_done(c, sc);
}

/* Runs the len bytes at the user address ubuf through the parser p: the
 * queries read whole (TCP: each counted under its QTYPE; UDP: the
 * datagram's left in p, D_DONE), or -1 when the bytes are no DNS query
 * (malformed, unreadable, more than SS_DNS_STEPS steps). */
__noinline int dns_run(struct ss_anat_conn *c, struct ss_dns_parse *p, __u64 ubuf, __u64 len,
		       int udp)
{
	struct ss_resp_scratch *sc = 0;
	__u32 zero = 0, d;
	__u64 pos = 0;
	int it, done = 0, bad = 0;
	__u8 b;

	if (!c || !p)
		return -1;
	if (!udp) {
		sc = bpf_map_lookup_elem(&resp_scratch, &zero);
		if (!sc)
			return -1;
		sc->pcount = 0;
		sc->pbatched = 0;
	}
	bpf_for(it, 0, SS_DNS_STEPS) {
		if (pos >= len)
			break;
		if (p->st == D_PASS || p->st == D_REST) {
			d = len - pos > p->skip ? p->skip : len - pos;
			pos += d;
			p->skip -= d;
			p->left -= d;
			if (!p->skip)
				p->st = p->st == D_PASS ? D_LABEL : udp ? D_DONE : D_LEN;
			continue;
		}
		if (p->st == D_DONE || bpf_probe_read_user(&b, 1, (void *)(ubuf + pos))) {
			bad = 1;
			break;
		}
		pos++;
		if (p->st != D_LEN) {
			if (!p->left) {
				bad = 1;  /* the message ends inside its question */
				break;
			}
			p->left--;
		}
		if (p->st == D_LEN) {
			if (!p->k) {
				p->left = (__u32)b << 8;
				p->k = 1;
				continue;
			}
			p->left |= b;
			p->k = 0;
			if (p->left < SS_DNS_MIN_MSG) {
				bad = 1;
				break;
			}
			p->st = D_HDR;
			p->namelen = 0;
			p->ar = 0;
		} else if (p->st == D_HDR) {
			if (!dns_header_ok(p, b)) {
				bad = 1;
				break;
			}
			if (++p->k == SS_DNS_HDR) {
				p->k = 0;
				p->st = D_LABEL;
			}
		} else if (p->st == D_LABEL) {
			/* 0xc0: a compression pointer; 0x40, 0x80: no label */
			p->namelen += 1 + b;
			if (b > SS_DNS_LABEL_MAX || p->namelen > SS_DNS_NAME_MAX || b > p->left) {
				bad = 1;
				break;
			}
			if (b) {
				p->skip = b;
				p->st = D_PASS;
			} else {
				p->st = D_Q;
				p->k = 0;
			}
		} else if (p->st == D_Q) {
			if (p->k == 0) {
				p->qtype = (__u16)b << 8;
			} else if (p->k == 1) {
				p->qtype |= b;
			} else if ((p->k == 2 && b) || (p->k == 3 && !dns_class_ok(b))) {
				bad = 1;
				break;
			}
			if (++p->k < 4)
				continue;
			p->k = 0;
			if (!p->qtype || (!p->ar && p->left) || (p->ar && p->left < SS_DNS_RR_MIN)) {
				bad = 1;
				break;
			}
			done++;
			if (sc)
				dns_tcp_query(c, sc, p->qtype);
			if (p->left) {
				p->skip = p->left;
				p->st = D_REST;
			} else {
				p->st = udp ? D_DONE : D_LEN;
			}
		} else {
			bad = 1;
			break;
		}
	}
	if (sc)
		run_flush(c, sc);
	return bad || pos < len ? -1 : done;
}

#endif /* SOCKSCOPE_DNS_H */
