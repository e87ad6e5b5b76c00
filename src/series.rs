//! Bounded label sets: which keys an exporter keeps under their own
//! labels ([`Sticky`]) and the label of the rest ([`OTHER`]). Shared by
//! the metrics' series and the stack sampler's counters, which are
//! admitted where they are counted.

use std::collections::HashSet;

/// Label value of the series that pools what `--max-series` keeps out.
pub const OTHER: &str = "(other)";

/// Which series are exported under their own labels: first come, first
/// kept, for the life of the exporter, so an exported counter never
/// disappears into `(other)` and every series stays monotonic; a key
/// turned away once is folded for good.
#[derive(Debug)]
pub struct Sticky<K> {
    max: usize,
    admitted: HashSet<K>,
    folded: HashSet<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Sticky<K> {
    /// At most `max` keys kept apart.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            admitted: HashSet::new(),
            folded: HashSet::new(),
        }
    }

    /// Is `k` exported under its own labels?
    pub fn admit(&mut self, k: &K) -> bool {
        // Keys are turned away only once the set is full, which it then
        // stays: a key folded once is turned away again without a look.
        if self.admit_untracked(k) {
            return true;
        }
        self.folded.insert(k.clone());
        false
    }

    /// As [`Sticky::admit`], but a key turned away is not remembered: for
    /// keys without bound in number (stack frames), whose folded ones are
    /// not counted. Once full, the set never takes another key, so a key
    /// turned away stays turned away all the same.
    pub fn admit_untracked(&mut self, k: &K) -> bool {
        if self.admitted.contains(k) {
            return true;
        }
        if self.admitted.len() >= self.max {
            return false;
        }
        self.admitted.insert(k.clone());
        true
    }

    /// Keys folded into `(other)` so far.
    pub fn folded(&self) -> usize {
        self.folded.len()
    }
}
