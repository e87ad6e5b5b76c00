//! HPACK's property tests: a reference encoder (the peer's, with its own
//! dynamic table kept as RFC 7541 says) writes blocks of every
//! representation; the decoder must read each whole, field for field, and
//! end with the same table. Mutated blocks must decode to the same fields
//! up to the first changed byte, then fields or an error, never a panic.
//! And the public hpack-test-case stories decode exactly.

use super::tests::hex;
use super::*;

use std::collections::VecDeque as Deque;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use crate::hostile;

type Field = (Vec<u8>, Vec<u8>);

/// A header name or value: often one of a few (so the decoder's memo of
/// Huffman strings sees repeats, as it does from a real server), else any
/// bytes.
fn text() -> impl Strategy<Value = Vec<u8>> {
    let pool = prop::sample::select(vec![
        "",
        "a",
        "nginx",
        "text/html; charset=utf-8",
        "no-cache",
        "Mon, 21 Oct 2013 20:13:21 GMT",
        "x-custom",
    ]);
    prop_oneof![
        2 => pool.prop_map(|s| s.as_bytes().to_vec()),
        3 => prop::collection::vec(any::<u8>(), 0..48),
    ]
}

/// Where a literal's name comes from.
#[derive(Clone, Debug)]
enum NameRef {
    Static(Index),
    /// A dynamic table entry (a static one while the table is empty).
    Dynamic(Index),
    /// A literal name, Huffman-coded or not.
    New(Vec<u8>, bool),
}

#[derive(Clone, Copy, Debug)]
enum Indexing {
    Incremental,
    Without,
    Never,
}

/// One field representation (RFC 7541 6.1-6.2).
#[derive(Clone, Debug)]
enum Rep {
    Static(Index),
    /// A dynamic table entry (a static one while the table is empty).
    Dynamic(Index),
    Literal {
        name: NameRef,
        value: Vec<u8>,
        huffman: bool,
        indexing: Indexing,
    },
}

/// A header block: its table size updates (6.3), then its fields.
#[derive(Clone, Debug)]
struct BlockSpec {
    updates: Vec<usize>,
    reps: Vec<Rep>,
}

fn rep() -> impl Strategy<Value = Rep> {
    let name = prop_oneof![
        any::<Index>().prop_map(NameRef::Static),
        any::<Index>().prop_map(NameRef::Dynamic),
        (text(), any::<bool>()).prop_map(|(s, h)| NameRef::New(s, h)),
    ];
    let indexing = prop_oneof![
        2 => Just(Indexing::Incremental),
        1 => Just(Indexing::Without),
        1 => Just(Indexing::Never),
    ];
    prop_oneof![
        1 => any::<Index>().prop_map(Rep::Static),
        2 => any::<Index>().prop_map(Rep::Dynamic),
        4 => (name, text(), any::<bool>(), indexing).prop_map(|(name, value, huffman, indexing)| {
            Rep::Literal {
                name,
                value,
                huffman,
                indexing,
            }
        }),
    ]
}

fn block() -> impl Strategy<Value = BlockSpec> {
    // Sizes near those of small entries (32 bytes and up), so an entry
    // that fits the table exactly, or by one byte not, comes up.
    let size = prop_oneof![0..=4096usize, 0..=300usize, 32..=80usize];
    let updates = prop_oneof![
        5 => Just(Vec::new()),
        1 => prop::collection::vec(size, 1..=2),
    ];
    (updates, prop::collection::vec(rep(), 1..12))
        .prop_map(|(updates, reps)| BlockSpec { updates, reps })
}

/// One connection's blocks, in order.
fn connection() -> impl Strategy<Value = Vec<BlockSpec>> {
    prop::collection::vec(block(), 1..6)
}

/// An integer with an `n`-bit prefix (5.1), written here rather than with
/// the module's own encoder.
fn int(out: &mut Vec<u8>, flags: u8, n: u32, v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = v - max;
    loop {
        let low = (rest % 128) as u8;
        rest /= 128;
        if rest == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn lit(out: &mut Vec<u8>, s: &[u8], huffman: bool) {
    if huffman {
        let mut code = Vec::new();
        super::huffman::encode(s, &mut code);
        int(out, 0x80, 7, code.len());
        out.extend_from_slice(&code);
    } else {
        int(out, 0, 7, s.len());
        out.extend_from_slice(s);
    }
}

/// The peer's encoder and its dynamic table (newest first).
struct Model {
    table: Deque<Field>,
    size: usize,
    max: usize,
}

/// A block as encoded, the fields it holds and where each one ends.
struct Encoded {
    bytes: Vec<u8>,
    fields: Vec<Field>,
    ends: Vec<usize>,
}

impl Model {
    fn new(max: usize) -> Self {
        Self {
            table: Deque::new(),
            size: 0,
            max,
        }
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }

    fn insert(&mut self, f: Field) {
        let size = f.0.len() + f.1.len() + 32;
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front(f);
        }
    }

    fn static_field(i: Index) -> (usize, Field) {
        let k = i.index(STATIC.len());
        let (n, v) = STATIC[k];
        (k + 1, (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    }

    /// The index (static or dynamic) and the field it names.
    fn entry(&self, dynamic: bool, i: Index) -> (usize, Field) {
        if !dynamic || self.table.is_empty() {
            return Self::static_field(i);
        }
        let k = i.index(self.table.len());
        (62 + k, self.table[k].clone())
    }

    fn encode(&mut self, b: &BlockSpec) -> Encoded {
        let mut out = Vec::new();
        for &u in &b.updates {
            int(&mut out, 0x20, 5, u);
            self.max = u;
            self.evict(0);
        }
        let (mut fields, mut ends) = (Vec::new(), Vec::new());
        for r in &b.reps {
            let field = match r {
                Rep::Static(i) | Rep::Dynamic(i) => {
                    let (k, f) = self.entry(matches!(r, Rep::Dynamic(_)), *i);
                    int(&mut out, 0x80, 7, k);
                    f
                }
                Rep::Literal {
                    name,
                    value,
                    huffman,
                    indexing,
                } => {
                    let (flags, n) = match indexing {
                        Indexing::Incremental => (0x40, 6),
                        Indexing::Without => (0x00, 4),
                        Indexing::Never => (0x10, 4),
                    };
                    let name = match name {
                        NameRef::Static(i) | NameRef::Dynamic(i) => {
                            let (k, f) = self.entry(matches!(name, NameRef::Dynamic(_)), *i);
                            int(&mut out, flags, n, k);
                            f.0
                        }
                        NameRef::New(s, h) => {
                            int(&mut out, flags, n, 0);
                            lit(&mut out, s, *h);
                            s.clone()
                        }
                    };
                    lit(&mut out, value, *huffman);
                    let f = (name, value.clone());
                    if let Indexing::Incremental = indexing {
                        self.insert(f.clone());
                    }
                    f
                }
            };
            fields.push(field);
            ends.push(out.len());
        }
        Encoded {
            bytes: out,
            fields,
            ends,
        }
    }

    fn table(&self) -> (Vec<Field>, usize) {
        (self.table.iter().cloned().collect(), self.size)
    }
}

/// The decoder's dynamic table, newest first, and its size.
fn raw_table(d: &Decoder) -> (Vec<Field>, usize) {
    let t = d
        .table
        .iter()
        .map(|e| (e.name().to_vec(), e.value().to_vec()))
        .collect();
    (t, d.size)
}

/// What every decoder state must satisfy, whatever it was fed.
fn check_invariants(d: &Decoder) {
    let sum: usize = d.table.iter().map(Entry::size).sum();
    assert_eq!(d.size, sum);
    assert!(d.size <= d.max && d.max <= d.limit, "{} {}", d.size, d.max);
}

fn decode_all(d: &mut Decoder, block: &[u8]) -> (Vec<Field>, Result<(), HpackError>) {
    let mut got = Vec::new();
    let r = d.decode(block, |n, v| got.push((n.to_vec(), v.to_vec())));
    (got, r)
}

/// The fields whose name this test's `decode_wanted` asks for.
fn wanted(name: &[u8]) -> bool {
    name.first().is_none_or(|b| b % 2 == 0)
}

proptest! {
    #![proptest_config(hostile::config(2048))]

    /// Every block of a connection decodes to the reference's fields,
    /// whole, and leaves the reference's table; `decode_wanted` hands on
    /// the wanted ones and keeps the same table.
    #[test]
    fn encoded_blocks_decode_to_their_fields_and_table(conn in connection()) {
        let mut model = Model::new(4096);
        let mut d = Decoder::new(4096, 1 << 20);
        let mut some = Decoder::new(4096, 1 << 20);
        for b in &conn {
            let e = model.encode(b);
            let (got, r) = decode_all(&mut d, &e.bytes);
            prop_assert_eq!(r, Ok(()));
            prop_assert_eq!(&got, &e.fields);
            prop_assert_eq!(raw_table(&d), model.table());
            let mut part = Vec::new();
            some.decode_wanted(&e.bytes, wanted, |n, v| part.push((n.to_vec(), v.to_vec())))
                .unwrap();
            let want: Vec<Field> = e.fields.iter().filter(|f| wanted(&f.0)).cloned().collect();
            prop_assert_eq!(part, want);
            prop_assert_eq!(raw_table(&some), model.table());
            check_invariants(&d);
        }
    }

    /// One block mutated once: the fields that end before the first
    /// changed byte come out as encoded; then more fields or an error,
    /// and the blocks after it decode or fail, never panic.
    #[test]
    fn a_mutated_block_decodes_alike_up_to_the_change(
        conn in connection(),
        which in any::<Index>(),
        m in hostile::mutation(),
    ) {
        let mut model = Model::new(4096);
        let blocks: Vec<Encoded> = conn.iter().map(|b| model.encode(b)).collect();
        let j = which.index(blocks.len());
        let mut d = Decoder::new(4096, 1 << 20);
        for (k, e) in blocks.iter().enumerate() {
            if k < j {
                decode_all(&mut d, &e.bytes).1.unwrap();
                continue;
            }
            let bytes = if k == j { hostile::mutate(&e.bytes, std::slice::from_ref(&m)) } else { e.bytes.clone() };
            let (got, _) = decode_all(&mut d, &bytes);
            check_invariants(&d);
            if k == j {
                let at = m.first_changed(e.bytes.len());
                let before = e.ends.iter().filter(|&&end| end <= at).count();
                prop_assert!(got.len() >= before, "{} fields of {before}", got.len());
                prop_assert_eq!(&got[..before], &e.fields[..before]);
            }
        }
    }

    /// Several mutations anywhere in a connection's blocks, and blocks of
    /// any bytes: fields or an error of HpackError's, the table within
    /// its bounds.
    #[test]
    fn mutated_and_random_blocks_never_panic(
        conn in connection(),
        ms in hostile::mutations(),
        which in any::<Index>(),
        noise in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut model = Model::new(4096);
        let mut d = Decoder::new(4096, 1 << 20);
        let j = which.index(conn.len());
        for (k, b) in conn.iter().enumerate() {
            let e = model.encode(b);
            let bytes = if k == j { hostile::mutate(&e.bytes, &ms) } else { e.bytes };
            let _ = decode_all(&mut d, &bytes);
            check_invariants(&d);
        }
        let _ = decode_all(&mut d, &noise);
        check_invariants(&d);
        // A small list limit is met with ListTooLarge, not a panic.
        let mut small = Decoder::new(4096, 64);
        let _ = decode_all(&mut small, &hostile::mutate(&Model::new(4096).encode(&conn[0]).bytes, &ms));
    }
}

/// RFC 7541 4.4: an entry exactly the table's size is kept (evicting
/// the rest); one byte larger empties the table and is not kept.
#[test]
fn an_entry_the_size_of_the_table_fits_and_one_byte_more_does_not() {
    // 0x3f 0x02: a size update to 33; then "a": "" with indexing (33).
    let mut d = Decoder::new(4096, 1 << 16);
    let block = [0x3f, 0x02, 0x40, 0x01, b'a', 0x00];
    assert_eq!(decode_all(&mut d, &block).1, Ok(()));
    assert_eq!(raw_table(&d), (vec![(b"a".to_vec(), Vec::new())], 33));
    let block = [0x40, 0x01, b'b', 0x01, b'x'];
    assert_eq!(decode_all(&mut d, &block).1, Ok(()));
    assert_eq!(raw_table(&d), (Vec::new(), 0));
}

/// How far mutated blocks are read: the old randomized test (noise
/// bytes) stopped at the first field in 73 % of its inputs. Here a block
/// of the reference model mutated once must mostly be read past its
/// first field, so every representation after it is exercised too.
#[test]
fn mutated_blocks_are_read_past_their_first_field() {
    let mut runner = TestRunner::deterministic();
    let strategy = (prop::collection::vec(rep(), 2..12), hostile::mutation());
    let (mut inputs, mut first_field_errors, mut share) = (0, 0, 0.0);
    for _ in 0..2000 {
        let (reps, m) = strategy.new_tree(&mut runner).unwrap().current();
        let e = Model::new(4096).encode(&BlockSpec {
            updates: Vec::new(),
            reps,
        });
        let bytes = hostile::mutate(&e.bytes, &[m]);
        let (got, r) = decode_all(&mut Decoder::new(4096, 1 << 20), &bytes);
        inputs += 1;
        if r.is_err() && got.is_empty() {
            first_field_errors += 1;
        }
        share += if r.is_ok() {
            1.0
        } else {
            got.len().min(e.fields.len()) as f64 / e.fields.len() as f64
        };
    }
    let stopped = f64::from(first_field_errors) / f64::from(inputs);
    let read = share / f64::from(inputs);
    eprintln!(
        "mutated blocks: {:.1} % failed in their first field, {:.1} % of fields read on average",
        stopped * 100.0,
        read * 100.0
    );
    assert!(stopped < 0.15, "{stopped}");
    assert!(read > 0.6, "{read}");
}

/// hpack-test-case (tests/fixtures/hpack/README.md): blocks that
/// go-hpack, nghttp2, node-http2, python-hpack, swift-nio and Haskell's
/// http2 encoded, each story one connection. Every block decodes to
/// exactly the story's header list, and a SETTINGS_HEADER_TABLE_SIZE
/// change is followed by the encoder's size update.
#[test]
fn hpack_test_case_stories_decode_exactly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hpack");
    let mut files = Vec::new();
    for imp in std::fs::read_dir(&root).unwrap() {
        let imp = imp.unwrap().path();
        if imp.is_dir() {
            for f in std::fs::read_dir(&imp).unwrap() {
                files.push(f.unwrap().path());
            }
        }
    }
    files.sort();
    let mut blocks = 0;
    for f in &files {
        let name = f.strip_prefix(&root).unwrap().display().to_string();
        let story: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        let mut d = Decoder::new(4096, 1 << 20);
        let mut settings = 4096;
        for case in story["cases"].as_array().unwrap() {
            let seq = &case["seqno"];
            if let Some(s) = case.get("header_table_size").and_then(|s| s.as_u64()) {
                settings = s as usize;
            }
            let want: Vec<Field> = case["headers"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|h| h.as_object().unwrap().iter())
                .map(|(n, v)| {
                    let v = v.as_str().unwrap();
                    (n.as_bytes().to_vec(), v.as_bytes().to_vec())
                })
                .collect();
            let (got, r) = decode_all(&mut d, &hex(case["wire"].as_str().unwrap()));
            assert_eq!(r, Ok(()), "{name} case {seq}");
            assert_eq!(got, want, "{name} case {seq}");
            assert!(
                d.max <= settings,
                "{name} case {seq}: table {} > {settings}",
                d.max
            );
            check_invariants(&d);
            blocks += 1;
        }
    }
    assert_eq!(files.len(), 9, "{files:?}");
    assert!(blocks > 150, "{blocks}");
}
