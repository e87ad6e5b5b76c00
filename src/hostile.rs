//! Test support for the property tests of every parser of bytes from a
//! peer, a target or a file (DESIGN.md: "Peer bytes are hostile"): the
//! bounded proptest configuration they share, and the mutations that turn
//! a valid message from a test's reference model into a hostile one (bits
//! flipped, bytes set, inserted, duplicated or deleted, the message cut).
//! docs/dependencies.md lists the parsers covered and what each checks.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// A configuration of `cases` cases, without failure files (a failure is
/// kept as a plain unit test beside the parser instead). `PROPTEST_CASES`
/// in the environment overrides the count, for a deeper run by hand.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// One change to a message; positions are drawn as [`Index`]es, so the
/// same mutation applies to a message of any length.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// One bit of one byte flipped.
    Flip(Index, u8),
    /// One byte replaced.
    Set(Index, u8),
    /// A byte inserted before a position.
    Insert(Index, u8),
    /// Up to 16 bytes from a position repeated in place.
    Duplicate(Index, u8),
    /// Up to 16 bytes from a position removed.
    Delete(Index, u8),
    /// The message cut at a position.
    Cut(Index),
}

/// Any one mutation. Single-byte changes weigh most: they keep the rest
/// of the message valid, so the parser gets past the change.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 0..8u8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), 1..=16u8).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        1 => (any::<Index>(), 1..=16u8).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => any::<Index>().prop_map(Mutation::Cut),
    ]
}

/// One to three mutations.
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..=3)
}

impl Mutation {
    /// Applies the mutation to `m` (an insertion into an empty message
    /// makes a one-byte one; the others leave it empty).
    pub fn apply(&self, m: &mut Vec<u8>) {
        if m.is_empty() {
            if let Mutation::Insert(_, b) = self {
                m.push(*b);
            }
            return;
        }
        match *self {
            Mutation::Flip(i, bit) => {
                let at = i.index(m.len());
                m[at] ^= 1 << bit;
            }
            Mutation::Set(i, b) => {
                let at = i.index(m.len());
                m[at] = b;
            }
            Mutation::Insert(i, b) => {
                let at = i.index(m.len() + 1);
                m.insert(at, b);
            }
            Mutation::Duplicate(i, n) => {
                let at = i.index(m.len());
                let end = (at + usize::from(n)).min(m.len());
                let copy = m[at..end].to_vec();
                m.splice(at..at, copy);
            }
            Mutation::Delete(i, n) => {
                let at = i.index(m.len());
                let end = (at + usize::from(n)).min(m.len());
                m.drain(at..end);
            }
            Mutation::Cut(i) => {
                let at = i.index(m.len() + 1);
                m.truncate(at);
            }
        }
    }

    /// The first byte offset the mutation changes (the bytes before it are
    /// the original's), for a message of `len` bytes.
    pub fn first_changed(&self, len: usize) -> usize {
        match *self {
            _ if len == 0 => 0,
            Mutation::Flip(i, _)
            | Mutation::Set(i, _)
            | Mutation::Duplicate(i, _)
            | Mutation::Delete(i, _) => i.index(len),
            Mutation::Insert(i, _) | Mutation::Cut(i) => i.index(len + 1),
        }
    }
}

/// `m` with every mutation of `ms` applied in turn.
pub fn mutate(m: &[u8], ms: &[Mutation]) -> Vec<u8> {
    let mut out = m.to_vec();
    for x in ms {
        x.apply(&mut out);
    }
    out
}

/// Text for the parsers of /proc text: `m` mutated, then read as UTF-8
/// the way `fs::read_to_string` would not (invalid bytes replaced), so
/// the parser sees every character a hostile file could hold.
pub fn mutate_text(m: &str, ms: &[Mutation]) -> String {
    String::from_utf8_lossy(&mutate(m.as_bytes(), ms)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;

    fn at(n: usize) -> Index {
        // An Index maps into 0..len by its fraction of the full range.
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        loop {
            let i = any::<Index>().new_tree(&mut runner).unwrap().current();
            if i.index(10) == n {
                return i;
            }
        }
    }

    #[test]
    fn each_mutation_does_what_it_says() {
        let m = b"0123456789".to_vec();
        let one = |x: Mutation| mutate(&m, &[x]);
        assert_eq!(one(Mutation::Flip(at(0), 0)), b"1123456789");
        assert_eq!(one(Mutation::Set(at(9), b'x')), b"012345678x");
        assert_eq!(one(Mutation::Delete(at(8), 16)), b"01234567");
        assert_eq!(one(Mutation::Duplicate(at(2), 3)), b"0123423456789");
        assert_eq!(one(Mutation::Cut(at(3))).len(), 3);
        assert_eq!(one(Mutation::Insert(at(1), b'-')).len(), 11);
        assert_eq!(mutate(b"", &[Mutation::Insert(at(1), b'x')]), b"x");
        assert_eq!(Mutation::Set(at(9), 0).first_changed(10), 9);
    }
}
