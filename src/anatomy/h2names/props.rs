//! Property tests of the HTTP/2 names: sessions written as the kernel
//! writes them (blocks cut into pieces of any size, padded or not)
//! count every request under the name its route folds to, its status
//! and gRPC code; arbitrary records, and a valid session's records
//! mutated, dropped or repeated, never panic, and what is kept stays
//! within the limits.

use proptest::prelude::*;

use super::tests::{Kernel, PADDED, block, grpc_request, request};
use super::*;
use crate::anatomy::counts::GRPC_CODES;
use crate::hostile;

/// A path from segments that fold (numbers, hex ids, UUIDs) and words
/// that do not.
fn path() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        prop::sample::select(vec!["users", "a", "orders", "v1", "", "x-y", "deadbee"])
            .prop_map(str::to_string),
        (0u64..1_000_000).prop_map(|n| n.to_string()),
        prop::collection::vec(prop::sample::select(b"0123456789abcdef".to_vec()), 8..12)
            .prop_map(|v| String::from_utf8(v).unwrap()),
        Just("123e4567-e89b-12d3-a456-426614174000".to_string()),
        "[a-z%.~]{1,30}",
    ];
    (
        prop::collection::vec(seg, 1..5),
        prop::option::of("[a-z=&]{0,8}"),
    )
        .prop_map(|(segs, q)| {
            let mut p = format!("/{}", segs.join("/"));
            if let Some(q) = q {
                p.push('?');
                p.push_str(&q);
            }
            p
        })
}

/// One stream of a session.
#[derive(Clone, Debug)]
struct Call {
    method: &'static str,
    path: String,
    grpc: bool,
    status: u16,
    code: u8,
    parts: Option<[u64; 4]>,
    pad: u8,
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop::sample::select(vec!["GET", "POST", "PUT", "DELETE"]),
        path(),
        any::<bool>(),
        prop::sample::select(vec![200u16, 204, 301, 404, 500, 503]),
        0u8..=17,
        prop::option::of([0u64..1 << 20, 0u64..1 << 20, 0u64..1 << 30, 0u64..1 << 20]),
        0u8..4,
    )
        .prop_map(|(method, path, grpc, status, code, parts, pad)| Call {
            method,
            path,
            grpc,
            status,
            code,
            parts,
            pad,
        })
}

/// A HEADERS frame's payload, padded with `pad` bytes when `pad` > 0.
fn padded(b: &[u8], pad: u8) -> (u8, Vec<u8>) {
    if pad == 0 {
        return (0, b.to_vec());
    }
    let mut p = vec![pad];
    p.extend_from_slice(b);
    p.extend(std::iter::repeat_n(0, usize::from(pad)));
    (PADDED, p)
}

/// A session's records: each call's request, response and end.
fn session(k: &Kernel, calls: &[Call]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let s = 1 + 2 * i as u32;
        let req = if c.grpc {
            grpc_request(&c.path)
        } else {
            request(c.method, &c.path)
        };
        let (f, p) = padded(&req, c.pad);
        out.extend(k.frame(0, s, 1, f | 0x4, &p));
        let status = c.status.to_string();
        let code = c.code.to_string();
        let mut fields = vec![(":status", status.as_str())];
        if c.grpc && c.code < 17 {
            fields.push(("grpc-status", code.as_str()));
        }
        out.extend(k.headers(1, s, &block(&fields)));
        out.push(k.end(s, h2::END_STREAM, c.parts));
    }
    out
}

/// A name's requests, timed streams, status classes and gRPC codes.
type Tally = (u64, u64, [u64; 4], [u64; GRPC_CODES]);

/// What is kept stays within the limits.
fn check_bounds(n: &H2Names, l: &Limits) -> Result<(), TestCaseError> {
    prop_assert!(n.connections() <= l.conns);
    prop_assert!(n.most_streams() <= l.streams);
    prop_assert!(n.name_count() <= l.names);
    prop_assert!(n.held() <= l.bytes || n.connections() <= 1, "{}", n.held());
    Ok(())
}

/// Small limits, so the properties reach them.
fn small() -> Limits {
    Limits {
        conns: 3,
        streams: 4,
        table: 4096,
        list: 4096,
        block: 1024,
        names: 8,
        bytes: 32 << 10,
    }
}

/// A record shaped as the kernel's, its fields drawn from a range that
/// reaches every check, or bytes of any kind.
fn record() -> impl Strategy<Value = Vec<u8>> {
    let shaped = (
        (1u64..6, 0u32..8, 0u8..5, 0u8..3),
        (prop::sample::select(vec![1u8, 5, 9, 0, 3]), any::<u8>()),
        (0u32..300, 0u32..300, 0u16..300),
        prop::collection::vec(any::<u8>(), 0..64),
        (0u8..5, any::<u8>(), any::<[u64; 4]>()),
    )
        .prop_map(
            |((conn, stream, kind, dir), (ftype, flags), (flen, off, len), data, end)| {
                let h = h2::Head {
                    conn,
                    stream,
                    port: 80,
                    proto: 6,
                    kind,
                    dir,
                    ftype,
                    fflags: flags,
                    flen,
                };
                if kind == h2::REC_END {
                    let e = h2::End {
                        h,
                        how: end.0,
                        timed: end.1,
                        parts: end.2,
                        ..h2::End::default()
                    };
                    return pod::as_bytes(&e).to_vec();
                }
                let mut b = h2::Block {
                    h,
                    off,
                    len,
                    ..h2::Block::default()
                };
                let n = data.len().min(b.data.len());
                b.data[..n].copy_from_slice(&data[..n]);
                pod::as_bytes(&b).to_vec()
            },
        );
    prop_oneof![
        4 => shaped,
        1 => prop::collection::vec(any::<u8>(), 0..400),
    ]
}

proptest! {
    #![proptest_config(hostile::config(256))]

    /// Every call is counted under the name its route folds to, with its
    /// status class, its gRPC code and its time, whatever the pieces.
    #[test]
    fn sessions_count_every_call_under_its_folded_name(
        calls in prop::collection::vec(call(), 1..12),
        chunk in 1usize..=h2::CHUNK,
    ) {
        let mut k = Kernel::new(1, 80);
        k.chunk = chunk;
        let mut n = H2Names::new(1024);
        for r in session(&k, &calls) {
            n.record(&r);
        }
        let s = n.stats();
        prop_assert_eq!((s.malformed, s.directions_lost, s.unnamed), (0, 0, 0));
        let mut want: std::collections::BTreeMap<(Wire, Vec<u8>), Tally> = Default::default();
        for c in &calls {
            let key = if c.grpc {
                (Wire::Grpc, route::grpc_name(c.path.as_bytes()))
            } else {
                (Wire::Http2, route::http_name(c.method.as_bytes(), c.path.as_bytes()))
            };
            let e = want.entry(key).or_insert((0, 0, [0; 4], [0; GRPC_CODES]));
            e.0 += 1;
            e.1 += u64::from(c.parts.is_some());
            e.2[usize::from(c.status / 100 - 2)] += 1;
            if c.grpc {
                e.3[usize::from(c.code.min(17))] += 1;
            }
        }
        let got: std::collections::BTreeMap<_, _> = n
            .names()
            .into_iter()
            .map(|x| ((x.wire, x.name), (x.commands, x.turns, x.status, x.grpc)))
            .collect();
        prop_assert_eq!(got, want);
        // No name carries a query, and none is longer than its bound.
        for x in n.names() {
            prop_assert!(!x.name.contains(&b'?'));
            prop_assert!(x.name.len() <= route::GRPC_TEXT + "…".len());
        }
    }

    /// Records of any shape never panic, and what is kept stays bounded.
    #[test]
    fn arbitrary_records_never_panic_and_stay_bounded(
        records in prop::collection::vec(record(), 1..80),
    ) {
        let l = small();
        let mut n = H2Names::with_limits(4, l);
        for r in &records {
            n.record(r);
            check_bounds(&n, &l)?;
        }
        prop_assert_eq!(n.stats().records, records.len() as u64);
        let _ = n.names();
    }

    /// A valid session's records mutated, dropped or repeated, several
    /// connections interleaved: never a panic, always within the limits.
    #[test]
    fn mutated_sessions_never_panic_and_stay_bounded(
        calls in prop::collection::vec(call(), 1..8),
        chunk in 1usize..40,
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0u8..4, hostile::mutations()),
            1..8,
        ),
    ) {
        let l = small();
        let mut n = H2Names::with_limits(4, l);
        let mut records = Vec::new();
        for conn in 1..=4 {
            let mut k = Kernel::new(conn, 80 + conn as u16 % 2);
            k.chunk = chunk;
            records.extend(session(&k, &calls));
            records.push(k.close());
        }
        for (at, how, ms) in &edits {
            let i = at.index(records.len());
            match how {
                0 => records[i] = hostile::mutate(&records[i], ms),
                1 => {
                    records.remove(i);
                    if records.is_empty() {
                        break;
                    }
                }
                2 => {
                    let r = records[i].clone();
                    records.insert(i, r);
                }
                _ => {
                    let j = ms.len() % records.len();
                    records.swap(i, j);
                }
            }
        }
        for r in &records {
            n.record(r);
            check_bounds(&n, &l)?;
        }
        let s = n.stats();
        prop_assert!(s.timed + s.unnamed <= s.ends);
        prop_assert_eq!(
            s.directions_lost,
            s.lost_gap + s.lost_framing + s.lost_too_large + s.lost_hpack
        );
    }
}
