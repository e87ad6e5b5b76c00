//! HTTP/2 names from records built as the kernel builds them: header
//! blocks encoded with the shared HPACK encoder or written by hand (RFC
//! 7541 C.4's Huffman and dynamic-table requests), frames cut into
//! pieces, CONTINUATION, padding and priority, trailers, gRPC statuses,
//! resets, lost records, the names' bound and their windows.

use super::frames::{CONTINUATION, HEADERS, PUSH_PROMISE};
use super::*;
use crate::anatomy::counts::{BAND_BUCKETS, GRPC_CODES};
use crate::probe::hist;
use crate::proto::hpack::put_field;

pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY: u8 = 0x20;

/// Records of one connection, as the kernel writes them.
pub(super) struct Kernel {
    pub conn: u64,
    pub port: u16,
    /// Bytes a BLOCK record carries at most (the kernel's: `h2::CHUNK`).
    pub chunk: usize,
}

impl Kernel {
    pub fn new(conn: u64, port: u16) -> Self {
        Self {
            conn,
            port,
            chunk: h2::CHUNK,
        }
    }

    fn head(&self, kind: u8, stream: u32) -> h2::Head {
        h2::Head {
            conn: self.conn,
            stream,
            port: self.port,
            proto: 6,
            kind,
            ..h2::Head::default()
        }
    }

    /// One frame's payload as BLOCK records of at most `chunk` bytes.
    pub fn frame(
        &self,
        dir: u8,
        stream: u32,
        ftype: u8,
        flags: u8,
        payload: &[u8],
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut off = 0;
        loop {
            let n = (payload.len() - off).min(self.chunk);
            let mut b = h2::Block {
                h: h2::Head {
                    dir,
                    ftype,
                    fflags: flags,
                    flen: payload.len() as u32,
                    ..self.head(h2::REC_BLOCK, stream)
                },
                off: off as u32,
                len: n as u16,
                ..h2::Block::default()
            };
            b.data[..n].copy_from_slice(&payload[off..off + n]);
            out.push(pod::as_bytes(&b).to_vec());
            off += n;
            if off >= payload.len() {
                return out;
            }
        }
    }

    /// A whole header block in one HEADERS frame.
    pub fn headers(&self, dir: u8, stream: u32, block: &[u8]) -> Vec<Vec<u8>> {
        self.frame(dir, stream, HEADERS, END_HEADERS, block)
    }

    /// A stream's end; timed when `parts` are given.
    pub fn end(&self, stream: u32, how: u8, parts: Option<[u64; 4]>) -> Vec<u8> {
        let e = h2::End {
            h: self.head(h2::REC_END, stream),
            how,
            timed: u8::from(parts.is_some()),
            parts: parts.unwrap_or_default(),
            ..h2::End::default()
        };
        pod::as_bytes(&e).to_vec()
    }

    pub fn close(&self) -> Vec<u8> {
        pod::as_bytes(&self.head(h2::REC_CLOSE, 0)).to_vec()
    }
}

/// A block of fields, static-indexed or literal (never the dynamic table).
pub(super) fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        put_field(&mut b, n, v);
    }
    b
}

pub(super) fn request(method: &str, path: &str) -> Vec<u8> {
    block(&[
        (":method", method),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", path),
    ])
}

pub(super) fn grpc_request(path: &str) -> Vec<u8> {
    block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ])
}

fn feed(n: &mut H2Names, records: impl IntoIterator<Item = Vec<u8>>) {
    for r in records {
        n.record(&r);
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The name's counts after `turns` timed streams, computed apart from
/// the code under test (the twin of summary.rs' `named`).
fn expected_turns(turns: &[[u64; 4]]) -> (Vec<u64>, [u64; 4], Vec<u64>, u64, u64) {
    let mut hist = vec![0; hist::BUCKETS];
    let mut parts = [0; 4];
    let mut by_band = vec![0; hist::BUCKETS / BAND_BUCKETS * 4];
    let (mut sum, mut max) = (0, 0);
    for t in turns {
        let server: u64 = t.iter().sum();
        let b = hist::bucket_of(server);
        hist[b] += 1;
        sum += server;
        max = max.max(server);
        for p in 0..4 {
            parts[p] += t[p];
            by_band[b / BAND_BUCKETS * 4 + p] += t[p];
        }
    }
    (hist, parts, by_band, sum, max)
}

#[test]
fn a_stream_is_named_by_its_route_counted_and_timed_as_the_kernel_files_a_turn() {
    let k = Kernel::new(7, 8080);
    let mut n = H2Names::new(64);
    let t1 = [1_000, 0, 40_000, 2_000];
    let t2 = [3_000, 500, 900_000, 1_000];
    feed(&mut n, k.headers(0, 1, &request("GET", "/users/42?full=1")));
    feed(&mut n, k.headers(0, 3, &request("GET", "/users/7")));
    feed(&mut n, k.headers(1, 1, &block(&[(":status", "200")])));
    n.record(&k.end(1, h2::END_STREAM, Some(t1)));
    feed(&mut n, k.headers(1, 3, &block(&[(":status", "404")])));
    n.record(&k.end(3, h2::END_STREAM, Some(t2)));
    let names = n.names();
    assert_eq!(names.len(), 1, "{names:?}");
    let g = &names[0];
    assert_eq!(
        (g.wire, g.port, g.transport),
        (Wire::Http2, 8080, Transport::Tcp)
    );
    assert_eq!(g.name, b"GET /users/{id}");
    assert_eq!((g.commands, g.turns), (2, 2));
    assert_eq!(g.status, [1, 0, 1, 0]);
    let (hist, parts, by_band, sum, max) = expected_turns(&[t1, t2]);
    assert_eq!((&g.hist, g.parts, &g.by_band), (&hist, parts, &by_band));
    assert_eq!((g.sum_ns, g.max_ns), (sum, max));
    assert_eq!(g.grpc, [0; GRPC_CODES]);
    let s = n.stats();
    assert_eq!((s.requests, s.ends, s.timed, s.blocks), (2, 2, 2, 4));
    assert_eq!((s.unnamed, s.directions_lost, s.malformed), (0, 0, 0));
}

#[test]
fn rfc7541_c4_requests_decode_through_huffman_and_the_dynamic_table_in_pieces() {
    // C.4.1-C.4.3: Huffman-coded, each later one referring to entries the
    // one before inserted (C.4.3's :authority is dynamic index 63).
    let blocks = [
        hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        hex("8286 84be 5886 a8eb 1064 9cbf"),
        hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
    ];
    let mut k = Kernel::new(1, 80);
    k.chunk = 5;
    let mut n = H2Names::new(64);
    for (i, b) in blocks.iter().enumerate() {
        feed(&mut n, k.headers(0, 1 + 2 * i as u32, b));
    }
    let got: Vec<(Vec<u8>, u64)> = n
        .names()
        .into_iter()
        .map(|x| (x.name, x.commands))
        .collect();
    assert_eq!(
        got,
        vec![(b"GET /".to_vec(), 2), (b"GET /index.html".to_vec(), 1)]
    );
    assert_eq!(n.stats().lost_hpack, 0);
}

#[test]
fn rfc7541_c6_responses_decode_in_a_table_larger_than_their_encoders() {
    // C.6.1-C.6.3: Huffman-coded responses from an encoder whose table
    // is 256 bytes (it evicts `:status 302` for `307`); the generous
    // table keeps more, yet every entry the encoder refers to has the
    // same index (newest first), so each decodes as the RFC says.
    let blocks = [
        hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        ),
        hex("4883 640e ffc1 c0bf"),
        hex(
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];
    let mut k = Kernel::new(1, 80);
    k.chunk = 7;
    let mut n = H2Names::new(64);
    for (i, b) in blocks.iter().enumerate() {
        let s = 1 + 2 * i as u32;
        feed(&mut n, k.headers(0, s, &request("GET", "/")));
        feed(&mut n, k.headers(1, s, b));
        n.record(&k.end(s, h2::END_STREAM, None));
    }
    assert_eq!(n.names()[0].status, [1, 2, 0, 0]);
    assert_eq!(n.stats().directions_lost, 0);
}

#[test]
fn padding_priority_and_continuation_are_taken_off_and_gathered() {
    let k = Kernel::new(3, 80);
    let mut n = H2Names::new(64);
    let b = request("POST", "/orders/123e4567-e89b-12d3-a456-426614174000/items");
    let (first, rest) = b.split_at(7);
    // HEADERS: pad length 3, priority (5 bytes), the first 7 bytes, padding.
    let mut payload = vec![3, 0x80, 0, 0, 1, 16];
    payload.extend_from_slice(first);
    payload.extend_from_slice(&[0, 0, 0]);
    let mut records = Vec::new();
    let mut small = Kernel::new(3, 80);
    small.chunk = 4;
    records.extend(small.frame(0, 5, HEADERS, PADDED | PRIORITY, &payload));
    let (mid, last) = rest.split_at(rest.len() / 2);
    records.extend(k.frame(0, 5, CONTINUATION, 0, mid));
    records.extend(small.frame(0, 5, CONTINUATION, END_HEADERS, last));
    feed(&mut n, records);
    // A server's PUSH_PROMISE (padded, promised id) is decoded for the
    // table: its literal with indexing is what the response refers to.
    let mut push = vec![2, 0, 0, 0, 2];
    push.extend_from_slice(&hex("4005 3a70 6174 6805 2f70 7573 68")); // :path /push, indexed
    push.extend_from_slice(&[0, 0]);
    feed(
        &mut n,
        k.frame(1, 5, PUSH_PROMISE, PADDED | END_HEADERS, &push),
    );
    // `:status 503` as a new literal, then index 63 (:path /push): the
    // response block decodes only if the push's insertion was kept.
    let resp = [hex("48 03 353033"), hex("bf")].concat();
    feed(&mut n, k.headers(1, 5, &resp));
    n.record(&k.end(5, h2::END_STREAM, None));
    let names = n.names();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(names[0].name, b"POST /orders/{id}/items");
    assert_eq!(names[0].status, [0, 0, 0, 1]);
    assert_eq!(names[0].turns, 0);
    let s = n.stats();
    assert_eq!((s.pushes, s.directions_lost, s.ends, s.timed), (1, 0, 1, 0));
}

#[test]
fn grpc_calls_count_their_status_from_headers_or_trailers_and_resets_as_absent() {
    let k = Kernel::new(9, 50051);
    let mut n = H2Names::new(64);
    let path = "/helloworld.Greeter/SayHello";
    for s in [1, 3, 5] {
        feed(&mut n, k.headers(0, s, &grpc_request(path)));
    }
    let head = block(&[(":status", "200"), ("content-type", "application/grpc")]);
    // 1: headers, then trailers with grpc-status 0; the client's own
    // trailers count nothing.
    feed(&mut n, k.headers(1, 1, &head));
    feed(
        &mut n,
        k.frame(0, 1, HEADERS, END_HEADERS | 1, &block(&[("x-end", "1")])),
    );
    feed(&mut n, k.headers(1, 1, &block(&[("grpc-status", "0")])));
    n.record(&k.end(1, h2::END_STREAM, Some([0, 0, 10_000, 0])));
    // 3: trailers-only, NOT_FOUND.
    let only = block(&[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "5"),
        ("grpc-message", "no such greeter"),
    ]);
    feed(&mut n, k.headers(1, 3, &only));
    n.record(&k.end(3, h2::END_STREAM, Some([0, 0, 20_000, 0])));
    // 5: reset by the client before any response.
    n.record(&k.end(5, h2::END_RESET_CLIENT, None));
    let names = n.names();
    assert_eq!(names.len(), 1, "{names:?}");
    let g = &names[0];
    assert_eq!((g.wire, g.name.as_slice()), (Wire::Grpc, path.as_bytes()));
    assert_eq!((g.commands, g.turns), (3, 2));
    assert_eq!(g.status, [2, 0, 0, 0]);
    let mut codes = [0; GRPC_CODES];
    codes[0] = 1;
    codes[5] = 1;
    codes[GRPC_ABSENT] = 1;
    assert_eq!(g.grpc, codes);
    let s = n.stats();
    assert_eq!((s.resets, s.requests, s.unnamed), (1, 3, 0));
    // The report's row says OK 1, NOT_FOUND 1, (absent) 1: two not OK.
    let row = &crate::anatomy::summary::endpoints(&names)[0];
    assert_eq!(row.errors, Some(2));
    assert_eq!(row.grpc_status.as_ref().unwrap()["NOT_FOUND"], 1);
}

#[test]
fn a_lost_piece_loses_its_direction_and_its_streams_go_unnamed() {
    let mut k = Kernel::new(4, 80);
    k.chunk = 6;
    let mut n = H2Names::new(64);
    feed(&mut n, k.headers(0, 1, &request("GET", "/a")));
    let mut pieces = k.headers(0, 3, &request("GET", "/b"));
    pieces.remove(1); // the ring buffer had no room for it
    feed(&mut n, pieces);
    feed(&mut n, k.headers(0, 5, &request("GET", "/c")));
    n.record(&k.end(1, h2::END_STREAM, Some([0, 0, 1_000, 0])));
    n.record(&k.end(3, h2::END_STREAM, Some([0, 0, 1_000, 0])));
    n.record(&k.end(5, h2::END_STREAM, None));
    let names = n.names();
    assert_eq!(names.len(), 1);
    assert_eq!(
        (names[0].name.as_slice(), names[0].turns),
        (&b"GET /a"[..], 1)
    );
    let s = n.stats();
    assert_eq!((s.directions_lost, s.lost_gap), (1, 1));
    assert!(s.after_loss > 0);
    assert_eq!((s.unnamed, s.unnamed_timed), (2, 1));
    // The other direction is still read: a response on stream 1 would
    // count (its stream ended, so it is unmatched now).
    feed(&mut n, k.headers(1, 1, &block(&[(":status", "200")])));
    assert_eq!(n.stats().responses_unmatched, 1);
    // CLOSE drops the connection; a new one on the same port starts clean.
    n.record(&k.close());
    assert_eq!(n.connections(), 0);
    let k2 = Kernel::new(5, 80);
    feed(&mut n, k2.headers(0, 1, &request("GET", "/b")));
    assert_eq!(n.names().len(), 2);
}

#[test]
fn an_hpack_error_or_a_stray_continuation_loses_the_direction() {
    let k = Kernel::new(6, 80);
    let mut n = H2Names::new(64);
    feed(
        &mut n,
        k.headers(0, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
    );
    feed(&mut n, k.frame(1, 1, CONTINUATION, END_HEADERS, &[0x88]));
    let s = n.stats();
    assert_eq!((s.lost_hpack, s.lost_framing, s.directions_lost), (1, 1, 2));
    assert!(n.names().is_empty());
}

#[test]
fn names_past_max_endpoints_go_to_their_wires_other() {
    let k = Kernel::new(2, 8080);
    let mut n = H2Names::new(2);
    feed(&mut n, k.headers(0, 1, &request("GET", "/a")));
    feed(&mut n, k.headers(0, 3, &grpc_request("/s.S/M")));
    feed(&mut n, k.headers(0, 5, &request("GET", "/b")));
    feed(&mut n, k.headers(0, 7, &request("GET", "/c")));
    feed(&mut n, k.headers(0, 9, &grpc_request("/s.S/N")));
    feed(&mut n, k.headers(0, 11, &request("GET", "/a")));
    let got: Vec<(Wire, Vec<u8>, u64)> = n
        .names()
        .into_iter()
        .map(|x| (x.wire, x.name, x.commands))
        .collect();
    assert_eq!(
        got,
        vec![
            (Wire::Http2, Vec::new(), 2),
            (Wire::Http2, b"GET /a".to_vec(), 2),
            (Wire::Grpc, Vec::new(), 1),
            (Wire::Grpc, b"/s.S/M".to_vec(), 1),
        ]
    );
    // Another port has room of its own.
    let k = Kernel::new(3, 9090);
    feed(&mut n, k.headers(0, 1, &request("GET", "/c")));
    assert!(
        n.names()
            .iter()
            .any(|x| x.port == 9090 && x.name == b"GET /c")
    );
}

#[test]
fn an_interim_status_is_not_the_final_one() {
    let k = Kernel::new(8, 80);
    let mut n = H2Names::new(64);
    feed(&mut n, k.headers(0, 1, &request("PUT", "/f/1")));
    feed(&mut n, k.headers(1, 1, &block(&[(":status", "100")])));
    feed(&mut n, k.headers(1, 1, &block(&[(":status", "201")])));
    feed(&mut n, k.headers(1, 1, &block(&[("x-trailer", "1")])));
    n.record(&k.end(1, h2::END_STREAM, None));
    assert_eq!(n.names()[0].status, [1, 0, 0, 0]);
}

#[test]
fn streams_and_connections_past_their_bounds_are_dropped_oldest_first() {
    let limits = Limits {
        conns: 2,
        streams: 3,
        ..Limits::default()
    };
    let mut n = H2Names::with_limits(64, limits);
    let k = Kernel::new(1, 80);
    for s in [1, 3, 5, 7, 9] {
        feed(&mut n, k.headers(0, s, &request("GET", "/x")));
    }
    assert_eq!(n.most_streams(), 3);
    assert_eq!(n.stats().streams_dropped, 2);
    // Streams 1 and 3 were dropped: their ends are unnamed.
    n.record(&k.end(1, h2::END_STREAM, None));
    n.record(&k.end(9, h2::END_STREAM, Some([0, 0, 5, 0])));
    assert_eq!((n.stats().unnamed, n.stats().timed), (1, 1));
    for c in [2, 3] {
        feed(
            &mut n,
            Kernel::new(c, 80).headers(0, 1, &request("GET", "/y")),
        );
    }
    assert_eq!(n.connections(), 2);
    let s = n.stats();
    assert_eq!((s.conns_dropped, s.closed_pending), (1, 2));
    // The byte budget drops the oldest others too.
    let tight = Limits {
        bytes: 1,
        ..Limits::default()
    };
    let mut n = H2Names::with_limits(64, tight);
    for c in 1..=4 {
        feed(
            &mut n,
            Kernel::new(c, 80).headers(0, 1, &request("GET", "/z")),
        );
    }
    assert_eq!(n.connections(), 1);
    assert_eq!(n.stats().conns_dropped, 3);
    assert_eq!(n.names()[0].commands, 4);
}

#[test]
fn malformed_records_are_counted_and_change_nothing() {
    let k = Kernel::new(1, 80);
    let mut n = H2Names::new(64);
    n.record(&[]);
    n.record(&[1, 2, 3]);
    let mut bad_kind = k.close();
    bad_kind[offset_of!(h2::Head, kind)] = 77;
    n.record(&bad_kind);
    let mut short = k.headers(0, 1, &request("GET", "/a")).remove(0);
    short.truncate(offset_of!(h2::Block, data) + 3);
    n.record(&short);
    let mut bad_how = k.end(1, h2::END_STREAM, None);
    bad_how[offset_of!(h2::End, how)] = 9;
    n.record(&bad_how);
    let s = n.stats();
    assert_eq!((s.records, s.malformed), (5, 5));
    assert!(n.names().is_empty());
}

#[test]
fn a_window_of_names_takes_away_the_grpc_codes_too() {
    let k = Kernel::new(1, 50051);
    let mut n = H2Names::new(64);
    let only = |code: &str| {
        block(&[
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", code),
        ])
    };
    feed(&mut n, k.headers(0, 1, &grpc_request("/a.B/C")));
    feed(&mut n, k.headers(1, 1, &only("0")));
    n.record(&k.end(1, h2::END_STREAM, Some([0, 0, 100, 0])));
    let before = n.names();
    feed(&mut n, k.headers(0, 3, &grpc_request("/a.B/C")));
    feed(&mut n, k.headers(1, 3, &only("14")));
    n.record(&k.end(3, h2::END_STREAM, Some([0, 0, 300, 0])));
    feed(&mut n, k.headers(0, 5, &grpc_request("/a.B/C")));
    feed(&mut n, k.headers(1, 5, &only("nope")));
    n.record(&k.end(5, h2::END_STREAM, None));
    let d = n.names()[0].since(&before[0]);
    assert_eq!((d.commands, d.turns, d.sum_ns), (2, 1, 300));
    let mut codes = [0; GRPC_CODES];
    codes[14] = 1;
    codes[GRPC_ABSENT] = 1;
    assert_eq!(d.grpc, codes);
    assert_eq!(d.status, [2, 0, 0, 0]);
}
