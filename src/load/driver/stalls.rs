//! The generator's own stalls, kept apart from the target's waits.
//!
//! An open-loop send that finds every connection busy waits for one, and
//! that wait is the target's (or the pool's) doing, unless the generator
//! itself was away meanwhile: a worker held by its CPU quota, or starved
//! of CPU, leaves the answers that arrived unread, so its connections look
//! busy when they are not. The loop knows when it meant to wake and when
//! it did; the difference, summed over its turns, is its stall time. A
//! queued send's connection wait is counted from its release, less the
//! stall time that passed while it waited.

use std::collections::VecDeque;

/// When a run of consecutively released sends left the schedule: the
/// loop's clock and its stall total then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Run-clock time of the release, ns.
    pub at: u64,
    /// The worker's stall total at the release, ns.
    pub stalled: u64,
}

impl Stamp {
    /// How long a send released at this stamp waited until `now`, less
    /// the generator's stalls since (`stalled_now` its total now).
    pub fn wait_until(&self, now: u64, stalled_now: u64) -> u64 {
        now.saturating_sub(self.at)
            .saturating_sub(stalled_now.saturating_sub(self.stalled))
    }
}

/// The release stamps of the sends queued in an open-loop backlog, in the
/// backlog's order (a run of sends released in one turn shares a stamp, so
/// a backlog of thousands costs a few entries).
#[derive(Debug, Default)]
pub struct Stamps {
    runs: VecDeque<(Stamp, usize)>,
}

impl Stamps {
    /// `n` sends released with `stamp`, queued at the back.
    pub fn push_back(&mut self, stamp: Stamp, n: usize) {
        if n == 0 {
            return;
        }
        match self.runs.back_mut() {
            Some((s, k)) if *s == stamp => *k += n,
            _ => self.runs.push_back((stamp, n)),
        }
    }

    /// The stamp of the send at the front of the backlog, taken off.
    pub fn pop_front(&mut self) -> Option<Stamp> {
        let (s, k) = self.runs.front_mut()?;
        let s = *s;
        *k -= 1;
        if *k == 0 {
            self.runs.pop_front();
        }
        Some(s)
    }

    /// A send put back at the front of the backlog (it could not go).
    pub fn push_front(&mut self, stamp: Stamp) {
        match self.runs.front_mut() {
            Some((s, k)) if *s == stamp => *k += 1,
            _ => self.runs.push_front((stamp, 1)),
        }
    }

    /// Sends stamped.
    pub fn len(&self) -> usize {
        self.runs.iter().map(|(_, k)| k).sum()
    }

    /// No send stamped.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// The loop's stall time: how much later than it meant each of its waits
/// ended, summed.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stalls {
    /// The sum, ns.
    pub total: u64,
}

impl Stalls {
    /// A wait meant to end at `planned` ended at `now`.
    pub fn woke(&mut self, planned: u64, now: u64) {
        self.total += now.saturating_sub(planned);
    }

    /// The stamp of a release at `now`.
    pub fn stamp(&self, now: u64) -> Stamp {
        Stamp {
            at: now,
            stalled: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_sends_wait_leaves_out_the_generators_stalls() {
        let mut st = Stalls::default();
        let s = st.stamp(1_000);
        // Meant to wake at 2 000, woke at 90 000: 88 000 of stall.
        st.woke(2_000, 90_000);
        assert_eq!(st.total, 88_000);
        assert_eq!(s.wait_until(95_000, st.total), 94_000 - 88_000);
        // On time: nothing left out.
        st.woke(100_000, 100_000);
        assert_eq!(s.wait_until(100_000, st.total), 99_000 - 88_000);
    }

    #[test]
    fn stamps_follow_the_backlog_in_runs() {
        let mut q = Stamps::default();
        let a = Stamp { at: 1, stalled: 0 };
        let b = Stamp { at: 2, stalled: 5 };
        q.push_back(a, 3);
        q.push_back(a, 2);
        q.push_back(b, 1);
        q.push_back(b, 0);
        assert_eq!(q.len(), 6);
        assert_eq!(q.runs.len(), 2, "same stamps share a run");
        for _ in 0..5 {
            assert_eq!(q.pop_front(), Some(a));
        }
        q.push_front(a);
        assert_eq!(q.pop_front(), Some(a));
        assert_eq!(q.pop_front(), Some(b));
        assert_eq!(q.pop_front(), None);
        assert!(q.is_empty());
    }
}
