/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * TLS for the request anatomy (anatomy.bpf.c includes this once, after
 * the protocols' parsers and before wire.h, whose first read of a
 * connection finds the handshake; the uprobe programs at the end of
 * anatomy.bpf.c use it).
 *
 * A TCP connection whose first read begins a TLS handshake record
 * (0x16 0x03 0x00-0x04: a ClientHello) is TLS: its bytes are ciphertext,
 * counted and never parsed. A turn whose first read begins a handshake
 * record (or TLS 1.3's ChangeCipherSpec before a client's Finished) is
 * the handshake's, counted and not timed; the others stay turns, unless
 * the loader was asked to read the plaintext
 * (--tls-plaintext: `tls_plaintext`), where the target links OpenSSL
 * (libssl) dynamically: uprobes on SSL_read, SSL_read_ex, SSL_write and
 * SSL_write_ex (and their returns) hand the plaintext those calls return
 * or take to the protocols' parsers, as a read's or a write's bytes.
 *
 * The timing stays the socket programs' (a turn's marks are its socket
 * reads and writes, as without TLS); only what the bytes say (which
 * requests, their names, their status; HTTP/2's streams) comes from the
 * plaintext, as OpenSSL's call returns, a few microseconds after its
 * socket read or write. Which connection a call is on: the socket a
 * followed read or write inside the call was on (the call is kept in the
 * thread's storage from its entry to its return); a call with none (its
 * plaintext was already decrypted, or its write buffered) is on the
 * socket its SSL was last seen on (tls_ssl).
 *
 * uprobe programs may not use socket storage: a connection read in
 * plaintext keeps its state in tls_conns (an LRU keyed by the socket's
 * address, written at the handshake's first read), its socket storage
 * being a stub that sends conn_of there (SS_CONN_TLS); HTTP/2's in
 * tls_h2 (h2.h), dropped as the connection closes.
 */
#ifndef SOCKSCOPE_TLS_H
#define SOCKSCOPE_TLS_H

/* ss_anat_thread.tls_op */
enum ss_tls_op {
	SS_TLS_READ = 1,
	SS_TLS_WRITE = 2,
};

/* An OpenSSL session (SSL *) -> the socket (its address) a followed read
 * or write of it was last seen on. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SS_TLS_CONNS_MAX);
	__type(key, __u64);
	__type(value, __u64);
} tls_ssl SEC(".maps");

/* Does the read of ret bytes at ubuf begin a TLS record: 1, a handshake
 * record (a ClientHello, on a connection's first read); 2, application
 * data, an alert or a ChangeCipherSpec (a connection whose handshake
 * came before the window); else 0. */
static __always_inline int tls_record(__u64 ubuf, int ret)
{
	__u8 b[3];

	if (!ubuf || ret < 5 || bpf_probe_read_user(b, sizeof(b), (void *)ubuf))
		return 0;
	if (b[1] != 3 || b[2] > 4)
		return 0;
	if (b[0] == 0x16)
		return 1;
	return b[0] == 0x17 || b[0] == 0x15 || b[0] == 0x14 ? 2 : 0;
}

/* Does the record at ubuf (a turn's first read on a TLS connection)
 * belong to a handshake: a handshake record, or TLS 1.3's
 * ChangeCipherSpec that precedes a client's encrypted Finished? Its
 * turn is then no request. */
static __always_inline bool tls_handshake_record(__u64 ubuf)
{
	__u8 b = 0;

	if (!ubuf || bpf_probe_read_user(&b, 1, (void *)ubuf))
		return false;
	return b == 0x16 || b == 0x14;
}

/* The connection's first read began a TLS record (`hello`: its
 * handshake's): counted, and either left to turns only or
 * (--tls-plaintext) given its state in tls_conns, where its plaintext's
 * first read will find its protocol (on a connection whose handshake came
 * before the window, if that read begins a request). */
static __always_inline void tls_begin(struct ss_anat_conn *c, bool hello)
{
	__u64 key = c->sk;

	count(SS_CNT_TLS_CONNS);
	c->flags |= SS_CONN_CIPHER | (hello ? SS_CONN_HANDSHAKE : 0);
	c->rproto = SS_RESP_OFF;
	if (!tls_plaintext)
		return;
	c->flags |= SS_CONN_TLS;
	c->rproto = SS_RESP_UNKNOWN;
	/* BPF_ANY: an entry of a socket freed at this address is stale. */
	if (bpf_map_update_elem(&tls_conns, &key, c, BPF_ANY)) {
		c->flags &= ~SS_CONN_TLS;
		c->rproto = SS_RESP_OFF;
		count(SS_CNT_TLS_LOST);
	}
}

/* A socket read or write on a connection read in plaintext: the
 * thread's OpenSSL call under way, if it is one of `op`, is on it. */
static __always_inline void tls_socket_op(const struct ss_anat_conn *c, __u32 op)
{
	struct ss_anat_thread *t =
		bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);

	if (t && t->tls_op == op && !t->tls_sk)
		t->tls_sk = c->sk;
}

#endif /* SOCKSCOPE_TLS_H */
