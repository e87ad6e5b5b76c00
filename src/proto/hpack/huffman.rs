//! HPACK's Huffman code (RFC 7541 Appendix B) and a table-driven decoder:
//! the code is walked four bits at a time through a state table built once
//! from the code (a state is a node of the code tree), so a string costs
//! two table look-ups per byte and no branch per bit.

use std::sync::OnceLock;

/// Each byte's code (right-aligned), from RFC 7541 Appendix B.
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8,
    0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed,
    0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
    0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8,
    0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
    0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
    0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75,
    0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4,
    0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb,
    0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda,
    0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd,
    0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
    0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7,
    0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7,
    0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4,
    0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
    0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];

/// Each byte's code length, bits.
const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// EOS, the 257th symbol: 30 one bits. Never valid inside a string.
const EOS: (u32, u8) = (0x3fff_ffff, 30);

/// The string is not valid Huffman code (RFC 7541 5.2): EOS inside it, or
/// padding longer than 7 bits or not all ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadHuffman;

/// One step of the decoder: from a state, on a nibble.
#[derive(Clone, Copy, Debug, Default)]
struct Step {
    /// The state after the nibble.
    next: u8,
    /// The byte the nibble completed, when [`EMIT`] is set.
    sym: u8,
    flags: u8,
}

const EMIT: u8 = 1;
const FAIL: u8 = 2;

/// The decoder's tables: `steps[state * 16 + nibble]`, and whether ending
/// in a state is a valid end of string (the root, or a path of at most 7
/// one bits from it: the padding).
struct Table {
    steps: Box<[Step; 4096]>,
    accept: [bool; 256],
}

/// A node of the code tree while the table is built: children, or a leaf.
#[derive(Clone, Copy)]
enum Node {
    Inner([u16; 2]),
    Leaf(u16),
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(build)
}

/// Builds the code tree (257 leaves, so 256 inner nodes: a state fits a
/// byte), then walks every nibble from every inner node.
fn build() -> Table {
    let mut nodes = vec![Node::Inner([0, 0])];
    let codes = (0..256)
        .map(|b| (CODES[b], LENGTHS[b]))
        .chain(std::iter::once(EOS));
    for (sym, (code, len)) in codes.enumerate() {
        let mut at = 0usize;
        for i in (0..len).rev() {
            let bit = ((code >> i) & 1) as usize;
            let Node::Inner(mut kids) = nodes[at] else {
                unreachable!("the Huffman code is prefix-free")
            };
            if i == 0 {
                nodes.push(Node::Leaf(sym as u16));
            } else if kids[bit] == 0 {
                nodes.push(Node::Inner([0, 0]));
            } else {
                at = kids[bit] as usize;
                continue;
            }
            kids[bit] = (nodes.len() - 1) as u16;
            nodes[at] = Node::Inner(kids);
            at = kids[bit] as usize;
        }
    }
    // Inner nodes numbered as states, the root 0.
    let mut state_of = vec![u8::MAX; nodes.len()];
    let mut inner = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if let Node::Inner(_) = n {
            state_of[i] = inner.len() as u8;
            inner.push(i);
        }
    }
    assert_eq!(inner.len(), 256);
    // Padding: the nodes reached from the root by 0 to 7 one bits.
    let mut accept = [false; 256];
    let mut at = 0usize;
    for _ in 0..8 {
        accept[state_of[at] as usize] = true;
        let Node::Inner(kids) = nodes[at] else { break };
        at = kids[1] as usize;
    }
    let mut steps = vec![Step::default(); 256 * 16];
    for (s, &node) in inner.iter().enumerate() {
        for nibble in 0..16u8 {
            let mut at = node;
            let mut step = Step::default();
            for i in (0..4).rev() {
                let Node::Inner(kids) = nodes[at] else {
                    unreachable!()
                };
                at = kids[((nibble >> i) & 1) as usize] as usize;
                if let Node::Leaf(sym) = nodes[at] {
                    if sym == 256 {
                        step.flags |= FAIL;
                        break;
                    }
                    // No code is shorter than 5 bits: at most one symbol
                    // ends within a nibble.
                    step.sym = sym as u8;
                    step.flags |= EMIT;
                    at = 0;
                }
            }
            step.next = state_of[at];
            steps[s * 16 + nibble as usize] = step;
        }
    }
    let steps = steps
        .into_boxed_slice()
        .try_into()
        .expect("256 states x 16");
    Table { steps, accept }
}

/// Decodes `src` and appends the bytes to `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), BadHuffman> {
    let t = table();
    let start = out.len();
    // At most one byte per nibble (after a failure too), so the writes
    // below stay in bounds; the loop has no branch but its own.
    out.resize(start + 2 * src.len(), 0);
    let buf = &mut out[start..];
    let (mut n, mut state, mut seen) = (0, 0usize, 0u8);
    for &b in src {
        for nibble in [b >> 4, b & 15] {
            let step = t.steps[(state << 4 | nibble as usize) & 0xfff];
            buf[n] = step.sym;
            n += usize::from(step.flags & EMIT);
            seen |= step.flags;
            state = usize::from(step.next);
        }
    }
    out.truncate(start + n);
    if seen & FAIL == 0 && t.accept[state] {
        Ok(())
    } else {
        Err(BadHuffman)
    }
}

/// Encodes `src` and appends the code to `out`, padded with one bits.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let len = u32::from(LENGTHS[b as usize]);
        acc = (acc << len) | u64::from(CODES[b as usize]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).collect();
        for chunk in [&all[..], b"www.example.com", b"", b"a"] {
            let mut code = Vec::new();
            encode(chunk, &mut code);
            let mut back = Vec::new();
            decode(&code, &mut back).unwrap();
            assert_eq!(back, chunk);
        }
        // Every byte alone, so each code's padding is checked too.
        for b in 0..=255u8 {
            let mut code = Vec::new();
            encode(&[b], &mut code);
            let mut back = Vec::new();
            decode(&code, &mut back).unwrap();
            assert_eq!(back, [b]);
        }
    }

    #[test]
    fn eos_and_bad_padding_are_errors() {
        let mut out = Vec::new();
        // EOS (30 one bits) inside the string.
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xff], &mut out), Err(BadHuffman));
        // Padding of 8 one bits after a whole symbol ('0' is 00000, then
        // 3 bits of padding, then a whole byte of ones).
        assert_eq!(decode(&[0x07, 0xff], &mut out), Err(BadHuffman));
        // Padding that is not all ones: '0' (00000) then 000.
        assert_eq!(decode(&[0x00], &mut out), Err(BadHuffman));
        out.clear();
        // 'a' is 00011 (5 bits); padding 010 is not ones.
        assert_eq!(decode(&[0b0001_1010], &mut out), Err(BadHuffman));
        out.clear();
        assert_eq!(decode(&[0b0001_1111], &mut out), Ok(()));
        assert_eq!(out, b"a");
    }

    /// A bit-at-a-time decoder written from RFC 7541 5.2 and Appendix
    /// B alone: the reference the table-driven decoder is held to.
    fn reference(src: &[u8]) -> Result<Vec<u8>, BadHuffman> {
        let codes: std::collections::HashMap<(u32, u8), u16> = (0..256)
            .map(|b| ((CODES[b], LENGTHS[b]), b as u16))
            .chain(std::iter::once(((EOS.0, EOS.1), 256)))
            .collect();
        let (mut code, mut len, mut out) = (0u32, 0u8, Vec::new());
        for &byte in src {
            for i in (0..8).rev() {
                code = code << 1 | u32::from(byte >> i & 1);
                len += 1;
                match codes.get(&(code, len)) {
                    Some(256) => return Err(BadHuffman),
                    Some(&sym) => {
                        out.push(sym as u8);
                        (code, len) = (0, 0);
                    }
                    None => {}
                }
            }
        }
        // The padding: at most 7 bits, the start of EOS (all ones).
        if len <= 7 && code == (1 << len) - 1 {
            Ok(out)
        } else {
            Err(BadHuffman)
        }
    }

    fn decoded(src: &[u8]) -> Result<Vec<u8>, BadHuffman> {
        let mut out = vec![b'x'];
        let r = decode(src, &mut out);
        // What was there before is kept; at most 8 bytes per 5 bytes.
        assert_eq!(out[0], b'x');
        assert!(out.len() <= 1 + src.len() * 8 / 5);
        r.map(|()| out[1..].to_vec())
    }

    use crate::hostile;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(4096))]

        /// Any bytes round-trip, in as many bits as their codes add up to.
        #[test]
        fn any_bytes_round_trip(s in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut code = Vec::new();
            encode(&s, &mut code);
            let bits: usize = s.iter().map(|&b| usize::from(LENGTHS[b as usize])).sum();
            prop_assert_eq!(code.len(), bits.div_ceil(8));
            prop_assert_eq!(decoded(&code), Ok(s.clone()));
            prop_assert_eq!(reference(&code), Ok(s));
        }

        /// Mutated codes and any bytes: the table-driven decoder says what
        /// the reference says, string and verdict.
        #[test]
        fn mutated_codes_decode_as_the_reference_does(
            s in prop::collection::vec(any::<u8>(), 0..32),
            ms in hostile::mutations(),
            noise in prop::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut code = Vec::new();
            encode(&s, &mut code);
            let bad = hostile::mutate(&code, &ms);
            prop_assert_eq!(decoded(&bad), reference(&bad));
            prop_assert_eq!(decoded(&noise), reference(&noise));
        }
    }
}
