//! What udp-rr's `--id dns` reads of a DNS message (RFC 1035): the
//! question a query asks, whether a reply echoes it, whether a reply holds
//! answer records, the names of response codes, and the request ids.
//!
//! Ids are unpredictable so that a server (or anything else on the path)
//! that answers with an id of its own, a counter or a guess, is not scored
//! as answering: the id of a socket's request `seq` is a secret keyed
//! permutation of `seq as u16` ([`IdCipher`]). Being a permutation, two
//! requests in flight on a socket never share an id (the datagram driver
//! keeps fewer than 65536 in flight), and the reply's id maps back to the
//! request's sequence number without a table.

use std::borrow::Cow;

use crate::report::commands::qtype_text;

/// A DNS message header's length.
pub const HEADER: usize = 12;

/// A keyed permutation of the 16-bit id space: a four-round Feistel
/// network over two bytes, its round keys drawn from the kernel's random
/// source once per run.
#[derive(Clone, Copy, Debug)]
pub struct IdCipher {
    keys: [u32; 4],
}

impl IdCipher {
    /// A cipher with fresh random keys (getrandom(2)); falls back to the
    /// clock and the process id should the call fail (it does not on a
    /// kernel newer than 3.17), which still changes the ids per run.
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        // SAFETY: valid buffer of the given length.
        let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if n != bytes.len() as isize {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let mix = t ^ (u128::from(std::process::id()) << 64);
            bytes = mix.to_le_bytes();
        }
        let mut keys = [0u32; 4];
        for (k, c) in keys.iter_mut().zip(bytes.chunks_exact(4)) {
            *k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Self { keys }
    }

    /// A cipher with these round keys (tests).
    pub fn with_keys(keys: [u32; 4]) -> Self {
        Self { keys }
    }

    fn round(r: u8, k: u32) -> u8 {
        ((u32::from(r) ^ k).wrapping_mul(0x9E37_79B1) >> 24) as u8
    }

    /// The id on the wire of sequence number `seq` (mod 2^16).
    #[inline]
    pub fn encrypt(&self, seq: u16) -> u16 {
        let [mut l, mut r] = seq.to_be_bytes();
        for &k in &self.keys {
            (l, r) = (r, l ^ Self::round(r, k));
        }
        u16::from_be_bytes([l, r])
    }

    /// The sequence number (mod 2^16) whose id is `id`.
    #[inline]
    pub fn decrypt(&self, id: u16) -> u16 {
        let [mut l, mut r] = id.to_be_bytes();
        for &k in self.keys.iter().rev() {
            (l, r) = (r ^ Self::round(l, k), l);
        }
        u16::from_be_bytes([l, r])
    }
}

/// A DNS response code's name as the report shows it (RFC 1035, 6895).
pub fn rcode_name(rcode: u16) -> Cow<'static, str> {
    Cow::Borrowed(match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => return Cow::Owned(format!("rcode {rcode}")),
    })
}

/// The end of the name starting at `i` in `m` (after its zero label or
/// its compression pointer), or None when it runs past the message or has
/// a reserved label type.
fn skip_name(m: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let len = *m.get(i)?;
        match len & 0xc0 {
            0x00 if len == 0 => return Some(i + 1),
            0x00 => i += 1 + usize::from(len),
            // A pointer ends the name (its target was checked where it
            // first appeared, or is not the question we compare).
            0xc0 => return m.get(i + 1).map(|_| i + 2),
            _ => return None,
        }
    }
}

/// True when the name at `i` in `m` can be read whole: labels of at most
/// 63 bytes within the message, compression pointers that each point
/// strictly before themselves (RFC 1035 4.1.4: to a prior occurrence, so
/// no pointer can loop, to itself or through others), and at most 255
/// bytes in all once expanded.
fn name_reads(m: &[u8], mut i: usize) -> bool {
    let mut total = 0usize;
    loop {
        let Some(&len) = m.get(i) else {
            return false;
        };
        match len & 0xc0 {
            0x00 if len == 0 => return total < 255,
            0x00 => {
                total += 1 + usize::from(len);
                if total >= 255 || i + 1 + usize::from(len) > m.len() {
                    return false;
                }
                i += 1 + usize::from(len);
            }
            0xc0 => {
                let Some(&low) = m.get(i + 1) else {
                    return false;
                };
                let to = (usize::from(len & 0x3f) << 8) | usize::from(low);
                if to >= i {
                    return false;
                }
                i = to;
            }
            _ => return false,
        }
    }
}

/// The end of the question section of `m` (after its QDCOUNT questions),
/// or None when it runs past the message.
pub fn questions_end(m: &[u8]) -> Option<usize> {
    if m.len() < HEADER {
        return None;
    }
    let n = u16::from_be_bytes([m[4], m[5]]);
    let mut i = HEADER;
    for _ in 0..n {
        i = skip_name(m, i)? + 4;
        if i > m.len() {
            return None;
        }
    }
    Some(i)
}

/// True when the reply `r` asks the same questions as the query `q`: the
/// same QDCOUNT and, question by question, the same QNAME (labels compared
/// without regard to ASCII case, as servers may echo a name's case
/// differently, e.g. under 0x20 randomisation), QTYPE and QCLASS. A query's
/// names are never compressed, so neither may the echo's be; a query that
/// holds a compression pointer anyway (`--request` takes any bytes) is
/// echoed by the same two bytes.
pub fn echoes_question(q: &[u8], r: &[u8]) -> bool {
    if q.get(4..6) != r.get(4..6) {
        return false;
    }
    let Some(end) = questions_end(q) else {
        return false;
    };
    if r.len() < end {
        return false;
    }
    // Walk the query's questions as `questions_end` did: label lengths,
    // pointers, type and class bytes compare exactly, label bytes without
    // case. Every range lies within `end` (checked again by `get`).
    let same = |i: usize, n: usize, fold: bool| match (q.get(i..i + n), r.get(i..i + n)) {
        (Some(a), Some(b)) if fold => a.eq_ignore_ascii_case(b),
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    let mut i = HEADER;
    while i < end {
        let len = q[i];
        if !same(i, 1, false) {
            return false;
        }
        match len & 0xc0 {
            0x00 if len == 0 => {
                if !same(i + 1, 4, false) {
                    return false;
                }
                i += 5;
            }
            0x00 => {
                if !same(i + 1, usize::from(len), true) {
                    return false;
                }
                i += 1 + usize::from(len);
            }
            _ => {
                // A pointer (the only other kind questions_end lets
                // through) ends the name; then type and class.
                if !same(i + 1, 5, false) {
                    return false;
                }
                i += 6;
            }
        }
    }
    true
}

/// True when the reply `r` holds at least one answer record: ANCOUNT > 0,
/// and the question section and the first record (its owner name, the
/// 10-byte fixed part and its RDATA) all lie within the datagram.
pub fn has_answer(r: &[u8]) -> bool {
    if r.len() < HEADER || u16::from_be_bytes([r[6], r[7]]) == 0 {
        return false;
    }
    let Some(owner) = questions_end(r) else {
        return false;
    };
    // The owner name must read whole: a pointer to itself (or a loop) is
    // no answer, however well its fixed part fits.
    if !name_reads(r, owner) {
        return false;
    }
    let Some(i) = skip_name(r, owner) else {
        return false;
    };
    let Some(fixed) = r.get(i..i + 10) else {
        return false;
    };
    let rdlength = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
    i + 10 + rdlength <= r.len()
}

/// The first question of a DNS message: its type and name, when the
/// message has one that can be read (no compression in a query).
pub fn question(q: &[u8]) -> Option<String> {
    if u16::from_be_bytes([*q.get(4)?, *q.get(5)?]) == 0 {
        return None;
    }
    let mut i = HEADER;
    let mut labels: Vec<Cow<'_, str>> = Vec::new();
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?));
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let name = if labels.is_empty() {
        ".".to_string()
    } else {
        labels.join(".")
    };
    Some(format!("{} {name}", qtype_text(qtype)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        q
    }

    #[test]
    fn ids_are_a_keyed_permutation() {
        let c = IdCipher::with_keys([1, 2, 3, 4]);
        let mut seen = vec![false; 1 << 16];
        let mut fixed = 0;
        for s in 0..=u16::MAX {
            let id = c.encrypt(s);
            assert!(!seen[usize::from(id)], "id {id} twice");
            seen[usize::from(id)] = true;
            assert_eq!(c.decrypt(id), s);
            fixed += usize::from(id == s);
        }
        // Not the identity, nor a counter under another key.
        assert!(fixed < 16, "{fixed} fixed points");
        let d = IdCipher::with_keys([5, 6, 7, 8]);
        assert!(
            (0..100u16)
                .filter(|&s| c.encrypt(s) == d.encrypt(s))
                .count()
                < 5
        );
    }

    #[test]
    fn the_echo_must_ask_the_same_question_in_any_case() {
        let q = query("bench.test");
        let mut r = query("BeNcH.TEST");
        r[2] |= 0x80;
        assert!(echoes_question(&q, &r));
        assert!(!echoes_question(&q, &query("bench.tess")));
        assert!(!echoes_question(&q, &query("bench.test.x")));
        // Another QTYPE (AAAA), another QCLASS, no question, cut short.
        let mut t = q.clone();
        let n = t.len();
        t[n - 3] = 28;
        assert!(!echoes_question(&q, &t));
        let mut c = q.clone();
        c[n - 1] = 3;
        assert!(!echoes_question(&q, &c));
        let mut none = q[..HEADER].to_vec();
        none[5] = 0;
        assert!(!echoes_question(&q, &none));
        assert!(!echoes_question(&q, &q[..n - 1]));
        // A compressed echo is not the query's question.
        let mut p = q[..HEADER].to_vec();
        p.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
        assert!(!echoes_question(&q, &p));
    }

    #[test]
    fn an_answer_needs_a_whole_record_not_only_a_count() {
        let mut r = query("bench.test");
        r[2] |= 0x80;
        r[6..8].copy_from_slice(&1u16.to_be_bytes());
        assert!(!has_answer(&r), "ANCOUNT 1, no record");
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0]);
        assert!(!has_answer(&r), "RDATA cut short");
        r.push(1);
        assert!(has_answer(&r));
        let mut lying = query("bench.test");
        lying[6..8].copy_from_slice(&65_535u16.to_be_bytes());
        assert!(!has_answer(&lying));
        let mut none = r.clone();
        none[6..8].copy_from_slice(&[0, 0]);
        assert!(!has_answer(&none));
    }

    /// Issue 38: `--expect-answer` took an answer whose owner name was a
    /// compression pointer to itself (a name that never ends).
    #[test]
    fn an_answer_whose_name_points_to_itself_or_forward_is_none() {
        let mut r = query("bench.test");
        r[2] |= 0x80;
        r[6..8].copy_from_slice(&1u16.to_be_bytes());
        let at = r.len() as u16;
        let fixed = [0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1];
        let with_owner = |owner: &[u8]| {
            let mut m = r.clone();
            m.extend_from_slice(owner);
            m.extend_from_slice(&fixed);
            m
        };
        assert!(has_answer(&with_owner(&[0xc0, 0x0c])));
        let me = (0xc000 | at).to_be_bytes();
        assert!(!has_answer(&with_owner(&me)), "a pointer to itself");
        let ahead = (0xc000 | (at + 2)).to_be_bytes();
        assert!(!has_answer(&with_owner(&ahead)), "a pointer forward");
        // A label, then a pointer back to that label: a loop too.
        let mut label_loop = vec![1, b'a'];
        label_loop.extend_from_slice(&(0xc000 | at).to_be_bytes());
        assert!(
            !has_answer(&with_owner(&label_loop)),
            "a loop through a label"
        );
        // Labels then a pointer to the question: whole.
        let mut good = vec![3, b'w', b'w', b'w'];
        good.extend_from_slice(&[0xc0, 0x0c]);
        assert!(has_answer(&with_owner(&good)));
        // A reserved label type, and a name over 255 bytes.
        assert!(!has_answer(&with_owner(&[0x40, 0])));
        let long: Vec<u8> = (0..5)
            .flat_map(|_| {
                let mut l = vec![63];
                l.extend_from_slice(&[b'x'; 63]);
                l
            })
            .chain([0])
            .collect();
        assert!(!has_answer(&with_owner(&long)));
    }

    #[test]
    fn rcodes_have_names() {
        assert_eq!(rcode_name(0), "NOERROR");
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert_eq!(rcode_name(5), "REFUSED");
        assert_eq!(rcode_name(9), "rcode 9");
    }

    // Property tests: queries of one or more questions and replies that
    // echo them (in any case) with answer records, from a reference
    // encoder; mutated messages on either side never panic a reader.

    use crate::hostile;
    use proptest::prelude::*;

    /// A question: labels (1 to 63 bytes each), QTYPE, QCLASS.
    #[derive(Clone, Debug)]
    struct Question {
        labels: Vec<Vec<u8>>,
        qtype: u16,
        qclass: u16,
    }

    fn questions() -> impl Strategy<Value = Vec<Question>> {
        let label = prop::collection::vec(any::<u8>(), 1..=63);
        let q = (
            prop::collection::vec(label, 0..4),
            any::<u16>(),
            any::<u16>(),
        )
            .prop_map(|(labels, qtype, qclass)| Question {
                labels,
                qtype,
                qclass,
            })
            // RFC 1035: a name is at most 255 bytes, its root's included.
            .prop_filter("a name of at most 255 bytes", |q| {
                q.labels.iter().map(|l| 1 + l.len()).sum::<usize>() < 255
            });
        prop::collection::vec(q, 1..3)
    }

    fn put_question(m: &mut Vec<u8>, q: &Question, flip_case: bool) {
        for l in &q.labels {
            m.push(l.len() as u8);
            m.extend(l.iter().map(|&b| {
                if flip_case && b.is_ascii_alphabetic() {
                    b ^ 0x20
                } else {
                    b
                }
            }));
        }
        m.push(0);
        m.extend_from_slice(&q.qtype.to_be_bytes());
        m.extend_from_slice(&q.qclass.to_be_bytes());
    }

    fn message(id: u16, flags: u16, qs: &[Question], flip_case: bool) -> Vec<u8> {
        let mut m = Vec::new();
        for v in [id, flags, qs.len() as u16, 0, 0, 0] {
            m.extend_from_slice(&v.to_be_bytes());
        }
        for q in qs {
            put_question(&mut m, q, flip_case);
        }
        m
    }

    /// A reply to `qs` with `answers` records (owner name a pointer to
    /// the first question, or written out), each with its RDATA.
    fn reply(qs: &[Question], answers: &[(bool, Vec<u8>)], flip_case: bool) -> Vec<u8> {
        let mut r = message(0xabcd, 0x8180, qs, flip_case);
        r[6..8].copy_from_slice(&(answers.len() as u16).to_be_bytes());
        for (pointer, rdata) in answers {
            if *pointer {
                r.extend_from_slice(&[0xc0, 0x0c]);
            } else {
                r.extend_from_slice(&[3, b'w', b'w', b'w', 0]);
            }
            r.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60]);
            r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            r.extend_from_slice(rdata);
        }
        r
    }

    fn answers() -> impl Strategy<Value = Vec<(bool, Vec<u8>)>> {
        prop::collection::vec(
            (any::<bool>(), prop::collection::vec(any::<u8>(), 0..20)),
            0..3,
        )
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// The question section ends where the encoder put its end; a
        /// reply echoing it in any case echoes it, one asking anything
        /// else does not; records are found when there are some; the
        /// first question is named.
        #[test]
        fn queries_and_replies_read_as_encoded(
            qs in questions(),
            ans in answers(),
            flip in any::<bool>(),
            other in questions(),
        ) {
            let q = message(0x1234, 0x0100, &qs, false);
            prop_assert_eq!(questions_end(&q), Some(q.len()));
            let r = reply(&qs, &ans, flip);
            prop_assert!(echoes_question(&q, &r));
            prop_assert_eq!(has_answer(&r), !ans.is_empty());
            let r2 = reply(&other, &ans, false);
            let same = qs.len() == other.len() && qs.iter().zip(&other).all(|(a, b)| {
                a.qtype == b.qtype && a.qclass == b.qclass && a.labels.len() == b.labels.len()
                    && a.labels.iter().zip(&b.labels).all(|(x, y)| x.eq_ignore_ascii_case(y))
            });
            prop_assert_eq!(echoes_question(&q, &r2), same);
            let first = &qs[0];
            let name = if first.labels.is_empty() {
                ".".to_string()
            } else {
                first.labels.iter().map(|l| String::from_utf8_lossy(l)).collect::<Vec<_>>().join(".")
            };
            prop_assert_eq!(question(&q), Some(format!("{} {name}", qtype_text(first.qtype))));
        }

        /// A reply whose question differs from the query's in one byte
        /// (a label byte other than by case, a length, type or class)
        /// does not echo it.
        #[test]
        fn a_reply_one_byte_off_does_not_echo(
            qs in questions(),
            at in any::<proptest::sample::Index>(),
            x in 1..=255u8,
        ) {
            let q = message(0x1234, 0x0100, &qs, false);
            let mut r = reply(&qs, &[], true);
            let i = HEADER + at.index(q.len() - HEADER);
            r[i] ^= x;
            // A letter changed in case only still echoes (the reply
            // already flips every letter's case).
            prop_assume!(!(q[i].is_ascii_alphabetic() && r[i].eq_ignore_ascii_case(&q[i])));
            prop_assert!(!echoes_question(&q, &r), "byte {} {:02x} -> {:02x}", i, q[i], r[i]);
        }

        /// Mutated queries and replies (and any bytes) in every reader,
        /// on both sides of the comparison: an answer, never a panic; an
        /// echo is never claimed for a reply shorter than the question.
        #[test]
        fn mutated_messages_never_panic_a_reader(
            qs in questions(),
            ans in answers(),
            ms in hostile::mutations(),
            mq in hostile::mutations(),
            noise in prop::collection::vec(any::<u8>(), 0..40),
        ) {
            let q = message(1, 0x0100, &qs, false);
            let r = reply(&qs, &ans, false);
            let bad_r = hostile::mutate(&r, &ms);
            let bad_q = hostile::mutate(&q, &mq);
            for m in [&bad_r, &bad_q, &noise] {
                if let Some(end) = questions_end(m) {
                    prop_assert!(end <= m.len());
                }
                let _ = has_answer(m);
                let _ = question(m);
            }
            for (a, b) in [(&q, &bad_r), (&bad_q, &r), (&bad_q, &bad_r), (&noise, &r), (&q, &noise)] {
                if echoes_question(a, b) {
                    prop_assert!(b.len() >= questions_end(a).unwrap());
                }
            }
        }
    }

    /// A query whose question is a compression pointer (found by the
    /// properties above: the walk indexed past the question). Echoed by
    /// the same pointer, it matches; by another, it does not.
    #[test]
    fn a_compressed_query_is_compared_by_its_pointer() {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
        let mut r = q.clone();
        r[2] |= 0x80;
        assert!(echoes_question(&q, &r));
        r[13] = 0x0d;
        assert!(!echoes_question(&q, &r));
        assert_eq!(question(&q), None);
        assert_eq!(question(&q[..5]), None);
    }

    /// Found by the properties above: a message cut inside its header
    /// with QDCOUNT 0 had its question section "end" at byte 12, past
    /// its own end (and the comparison then sliced the query there).
    #[test]
    fn a_message_shorter_than_its_header_has_no_question_section() {
        let q = [0x12, 0x34, 0x01, 0x00, 0, 0, 0];
        assert_eq!(questions_end(&q), None);
        assert!(!echoes_question(&q, &q));
        assert!(!has_answer(&q));
    }
}
