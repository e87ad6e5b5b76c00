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

/// The end of the question section of `m` (after its QDCOUNT questions),
/// or None when it runs past the message.
pub fn questions_end(m: &[u8]) -> Option<usize> {
    let n = u16::from_be_bytes([*m.get(4)?, *m.get(5)?]);
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
/// names are never compressed, so neither may the echo's be.
pub fn echoes_question(q: &[u8], r: &[u8]) -> bool {
    if q.get(4..6) != r.get(4..6) {
        return false;
    }
    let Some(end) = questions_end(q) else {
        return false;
    };
    let Some(theirs) = r.get(HEADER..end) else {
        return false;
    };
    let ours = &q[HEADER..end];
    // Walk the query's structure: label lengths and the type and class
    // bytes compare exactly, label bytes without case.
    let mut i = 0;
    while i < ours.len() {
        let len = usize::from(ours[i]);
        if theirs[i] != ours[i] {
            return false;
        }
        i += 1;
        if len == 0 {
            if ours[i..i + 4] != theirs[i..i + 4] {
                return false;
            }
            i += 4;
        } else {
            if !ours[i..i + len].eq_ignore_ascii_case(&theirs[i..i + len]) {
                return false;
            }
            i += len;
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
    let Some(i) = questions_end(r).and_then(|i| skip_name(r, i)) else {
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
    if u16::from_be_bytes([q[4], q[5]]) == 0 {
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
    Some(format!("{} {name}", qtype_name(qtype)))
}

/// A DNS record type's mnemonic.
pub fn qtype_name(t: u16) -> Cow<'static, str> {
    Cow::Borrowed(match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        65 => "HTTPS",
        255 => "ANY",
        _ => return Cow::Owned(format!("TYPE{t}")),
    })
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

    #[test]
    fn rcodes_have_names() {
        assert_eq!(rcode_name(0), "NOERROR");
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert_eq!(rcode_name(5), "REFUSED");
        assert_eq!(rcode_name(9), "rcode 9");
    }
}
