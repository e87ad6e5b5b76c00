//! The runs a sink accounts, in bounded memory, each bound to one address.
//!
//! At most [`MAX_LIVE`] runs are tracked at once (each holds a
//! [`RunTracker`]: a sequence bitmap of up to 512 KiB and a latency
//! histogram). A datagram of a new run when the table is full evicts one:
//! the least recently used run that has had its FIN, else the least
//! recently used of all (by last datagram, so a run that is receiving
//! stays). An evicted run leaves its record, the figures up to then, in a
//! list of at most [`MAX_RECORDS`]; when that list is full its oldest record
//! is dropped and only summed into [`Dropped`]. So a flood of made-up run
//! ids cannot lock real runs out, and costs bounded memory.
//!
//! A run belongs to the address its first datagram came from; its
//! datagrams from any other address are refused ([`Slot::WrongSource`]) and
//! change nothing, so a forged FIN cannot redirect a run's REPORT.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use super::tracker::RunTracker;
use crate::report::serve::udp_sink::{Dropped, RunRecord};

/// Runs tracked at once (at most 512 KiB of bitmap and a latency histogram
/// each).
pub const MAX_LIVE: usize = 64;
/// Records of evicted runs kept for the JSON (a few hundred bytes to a few
/// KiB each, the latency histogram included).
pub const MAX_RECORDS: usize = 1024;

/// How a run's record is taken from its tracker (the record is the
/// artifact's, report::serve::udp_sink).
impl RunRecord {
    /// The record of a tracked run.
    pub fn of(t: &RunTracker, granted: u64, source: SocketAddr) -> Self {
        let mut r = Self {
            report: t.report(granted),
            published: None,
            lost: None,
            loss_pct: None,
            late_beyond_window: t.late,
            latency: t.latency().summary(),
            bytes: t.bytes,
            fins_answered: t.fins,
            source: source.to_string(),
            evicted: false,
        };
        if let Some(p) = t.published {
            r.set_published(p);
        }
        r
    }
}

/// A run being tracked.
#[derive(Debug)]
pub struct Live {
    /// Its accounting.
    pub tracker: RunTracker,
    /// The address it belongs to.
    pub source: SocketAddr,
    arrival: u64,
    last_use: u64,
}

/// A run whose state was evicted: its record, frozen at eviction except
/// for what its FINs and later DATA add.
#[derive(Debug)]
pub struct Retired {
    /// The figures up to eviction.
    pub record: RunRecord,
    /// The address it belongs to.
    pub source: SocketAddr,
    arrival: u64,
}

/// Where a datagram of a run goes.
#[derive(Debug)]
pub enum Slot<'a> {
    /// The run is tracked (created now if it was unknown).
    Live(&'a mut Live),
    /// The run was evicted; its record remains.
    Retired(&'a mut Retired),
    /// The run belongs to another address: the datagram must change
    /// nothing and get no answer.
    WrongSource,
}

/// Live runs and the records of evicted ones, both bounded.
#[derive(Debug)]
pub struct RunTable {
    max_live: usize,
    max_records: usize,
    granted: u64,
    live: HashMap<u32, Live>,
    /// Oldest eviction first.
    retired: VecDeque<(u32, Retired)>,
    /// Run id -> eviction number; `retired[n - retired_base]`.
    retired_at: HashMap<u32, u64>,
    retired_base: u64,
    tick: u64,
    arrivals: u64,
    first: Option<u32>,
    /// Runs evicted so far.
    pub evicted: u64,
    /// Records dropped so far.
    pub dropped: Dropped,
}

impl RunTable {
    /// An empty table; `granted` (the socket's receive buffer) goes into
    /// every record.
    pub fn new(max_live: usize, max_records: usize, granted: u64) -> Self {
        Self {
            max_live: max_live.max(1),
            max_records,
            granted,
            live: HashMap::new(),
            retired: VecDeque::new(),
            retired_at: HashMap::new(),
            retired_base: 0,
            tick: 0,
            arrivals: 0,
            first: None,
            evicted: 0,
            dropped: Dropped::default(),
        }
    }

    /// The run `id` for a datagram from `from`: tracked, created (evicting
    /// another when full), retired, or someone else's.
    pub fn admit(&mut self, id: u32, from: SocketAddr) -> Slot<'_> {
        self.tick += 1;
        if self.live.contains_key(&id) {
            let l = self.live.get_mut(&id).expect("checked above");
            if l.source != from {
                return Slot::WrongSource;
            }
            l.last_use = self.tick;
            return Slot::Live(l);
        }
        if let Some(&n) = self.retired_at.get(&id) {
            let r = &mut self.retired[(n - self.retired_base) as usize].1;
            if r.source != from {
                return Slot::WrongSource;
            }
            return Slot::Retired(r);
        }
        if self.live.len() >= self.max_live {
            self.evict_one();
        }
        self.arrivals += 1;
        self.first.get_or_insert(id);
        Slot::Live(self.live.entry(id).or_insert(Live {
            tracker: RunTracker::new(id),
            source: from,
            arrival: self.arrivals,
            last_use: self.tick,
        }))
    }

    /// Evicts the least recently used run that had its FIN, else the least
    /// recently used run, into the records.
    fn evict_one(&mut self) {
        let victim = self
            .live
            .iter()
            .min_by_key(|(_, l)| (l.tracker.published.is_none(), l.last_use))
            .map(|(id, _)| *id);
        let Some(l) = victim.and_then(|id| self.live.remove(&id)) else {
            return;
        };
        self.evicted += 1;
        let mut record = RunRecord::of(&l.tracker, self.granted, l.source);
        record.evicted = true;
        self.retire(
            l.tracker.run(),
            Retired {
                record,
                source: l.source,
                arrival: l.arrival,
            },
        );
    }

    fn retire(&mut self, id: u32, r: Retired) {
        if self.max_records == 0 {
            self.drop_record(&r.record);
            return;
        }
        if self.retired.len() >= self.max_records
            && let Some((old, rec)) = self.retired.pop_front()
        {
            self.retired_at.remove(&old);
            self.retired_base += 1;
            self.drop_record(&rec.record);
        }
        self.retired_at
            .insert(id, self.retired_base + self.retired.len() as u64);
        self.retired.push_back((id, r));
    }

    fn drop_record(&mut self, r: &RunRecord) {
        self.dropped.runs += 1;
        self.dropped.received += r.report.received;
        self.dropped.lost += r.lost.unwrap_or(0);
    }

    /// The receive buffer written into every record.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// Runs tracked now.
    pub fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Records of evicted runs kept now.
    pub fn retired_len(&self) -> usize {
        self.retired.len()
    }

    /// The first run ever seen, if its record remains: (distinct DATA
    /// received, whether a FIN of it was answered).
    pub fn first_run(&self) -> Option<(u64, bool)> {
        let id = self.first?;
        if let Some(l) = self.live.get(&id) {
            return Some((l.tracker.received(), l.tracker.fins > 0));
        }
        let n = *self.retired_at.get(&id)?;
        let r = &self.retired.get((n - self.retired_base) as usize)?.1.record;
        Some((r.report.received, r.fins_answered > 0))
    }

    /// Every record kept, tracked and evicted, in order of first arrival.
    pub fn records(&self) -> Vec<RunRecord> {
        let mut all: Vec<(u64, RunRecord)> = self
            .live
            .values()
            .map(|l| (l.arrival, RunRecord::of(&l.tracker, self.granted, l.source)))
            .chain(
                self.retired
                    .iter()
                    .map(|(_, r)| (r.arrival, r.record.clone())),
            )
            .collect();
        all.sort_by_key(|(a, _)| *a);
        all.into_iter().map(|(_, r)| r).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// One DATA datagram `seq` of `id` from `from`; returns the slot kind.
    fn data(t: &mut RunTable, id: u32, from: SocketAddr, seq: u64) -> &'static str {
        match t.admit(id, from) {
            Slot::Live(l) => {
                l.tracker.record(seq, 0, 1, 100);
                "live"
            }
            Slot::Retired(r) => {
                r.record.report.after_eviction += 1;
                "retired"
            }
            Slot::WrongSource => "wrong",
        }
    }

    fn fin(t: &mut RunTable, id: u32, from: SocketAddr, published: u64) {
        if let Slot::Live(l) = t.admit(id, from) {
            l.tracker.published = Some(published);
            l.tracker.fins += 1;
        }
    }

    #[test]
    fn a_flood_of_run_ids_stays_bounded_and_spares_the_receiving_run() {
        let mut t = RunTable::new(MAX_LIVE, MAX_RECORDS, 0);
        let (real, spoof) = (addr(1000), addr(2000));
        for i in 0..10_000u32 {
            // The real run sends every 10th datagram of the flood.
            if i % 10 == 0 {
                assert_eq!(data(&mut t, 7, real, u64::from(i / 10)), "live");
            }
            data(&mut t, 100 + i, spoof, 0);
            assert!(t.live_len() <= MAX_LIVE);
            assert!(t.retired_len() <= MAX_RECORDS);
        }
        assert_eq!(t.live_len(), MAX_LIVE);
        assert_eq!(t.retired_len(), MAX_RECORDS);
        // 10,001 runs: 64 live, 1024 kept, the rest dropped and summed.
        assert_eq!(t.evicted, 10_001 - MAX_LIVE as u64);
        assert_eq!(t.dropped.runs, 10_001 - (MAX_LIVE + MAX_RECORDS) as u64);
        assert_eq!(t.dropped.received, t.dropped.runs);
        let recs = t.records();
        assert_eq!(recs.len(), MAX_LIVE + MAX_RECORDS);
        let real_rec = recs.iter().find(|r| r.report.run == 7).unwrap();
        assert_eq!(real_rec.report.received, 1000);
        assert!(!real_rec.evicted);
        assert_eq!(t.first_run(), Some((1000, false)));
        // The sum over kept and dropped records is every datagram.
        let kept: u64 = recs.iter().map(|r| r.report.received).sum();
        assert_eq!(kept + t.dropped.received, 11_000);
    }

    #[test]
    fn runs_that_had_their_fin_go_first() {
        let mut t = RunTable::new(3, 10, 0);
        data(&mut t, 1, addr(1), 0);
        data(&mut t, 2, addr(2), 0);
        fin(&mut t, 2, addr(2), 1);
        data(&mut t, 3, addr(3), 0);
        // Run 1 is the least recently used, but run 2 has ended.
        data(&mut t, 4, addr(4), 0);
        let recs = t.records();
        let ids: Vec<(u32, bool)> = recs.iter().map(|r| (r.report.run, r.evicted)).collect();
        assert_eq!(ids, [(1, false), (2, true), (3, false), (4, false)]);
        assert_eq!(recs[1].published, Some(1));
        assert_eq!(recs[1].lost, Some(0));
        // None ended: plain LRU (run 1, then 3).
        data(&mut t, 5, addr(5), 0);
        assert!(t.records()[0].evicted);
    }

    #[test]
    fn a_run_answers_only_its_first_address() {
        let mut t = RunTable::new(2, 2, 0);
        assert_eq!(data(&mut t, 1, addr(1), 0), "live");
        assert_eq!(data(&mut t, 1, addr(9), 1), "wrong");
        fin(&mut t, 1, addr(9), 99);
        let r = &t.records()[0];
        assert_eq!((r.report.received, r.published), (1, None));
        assert_eq!(r.source, "127.0.0.1:1");
        // Evicted: still its address's only.
        data(&mut t, 2, addr(2), 0);
        data(&mut t, 3, addr(3), 0);
        assert_eq!(data(&mut t, 1, addr(9), 1), "wrong");
        assert_eq!(data(&mut t, 1, addr(1), 1), "retired");
        let r = &t.records()[0];
        assert!(r.evicted);
        assert_eq!((r.report.received, r.report.after_eviction), (1, 1));
        assert_eq!(t.first_run(), Some((1, false)));
    }

    #[test]
    fn dropped_records_are_summed_and_their_ids_forgotten() {
        let mut t = RunTable::new(1, 1, 0);
        data(&mut t, 1, addr(1), 0);
        fin(&mut t, 1, addr(1), 4);
        data(&mut t, 2, addr(2), 0);
        data(&mut t, 3, addr(3), 0);
        assert_eq!(
            t.dropped,
            Dropped {
                runs: 1,
                received: 1,
                lost: 3
            }
        );
        assert_eq!(t.first_run(), None);
        let ids: Vec<u32> = t.records().iter().map(|r| r.report.run).collect();
        assert_eq!(ids, [2, 3]);
        // Run 1's id is free again: a new run, tracked from scratch.
        assert_eq!(data(&mut t, 1, addr(5), 0), "live");
        assert_eq!((t.live_len(), t.retired_len()), (1, 1));
    }
}
