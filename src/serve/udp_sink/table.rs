//! The runs a sink accounts, in bounded memory, each bound to one address.
//!
//! At most [`MAX_LIVE`] runs are tracked at once (each holds a
//! [`RunTracker`]: a sequence bitmap of up to 512 KiB and a latency
//! histogram). A datagram of a new run when the table is full evicts one:
//! the least recently used run that has had its FIN, else the least
//! recently used run that has been quiet for [`QUIET_NS`]; a run that had
//! a datagram within that time is never evicted, and when every run is such
//! a run the new one is refused ([`Slot::Full`], counted in `refused`)
//! instead. So a sustained flood of made-up run ids is what gets turned
//! away, never a run that is receiving. An evicted run leaves its record,
//! the figures up to then, in a list of at most [`MAX_RECORDS`]; when that
//! list is full its oldest record (of an ended run first) is dropped and
//! only summed into [`Dropped`]. The ids of dropped and refused runs are
//! remembered (the last [`FORGOTTEN_IDS`]), so a run that is tracked after
//! losing datagrams that way is marked `forgotten` and its REPORT says so:
//! its figures are then partial, and the sender must not take them as its
//! loss.
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
/// A run with a datagram this recently is never evicted (ns).
pub const QUIET_NS: u64 = 2_000_000_000;
/// Ids of forgotten (dropped) runs remembered, 4 bytes each.
pub const FORGOTTEN_IDS: usize = 65_536;

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
    /// The run's id was forgotten (its record dropped, or its datagrams
    /// refused) before this tracker began: what came earlier is in no
    /// figure.
    pub forgotten: bool,
    arrival: u64,
    last_use: u64,
    last_ns: u64,
}

impl Live {
    /// This run's record now (its REPORT says whether it was forgotten
    /// before).
    pub fn record(&self, granted: u64) -> RunRecord {
        let mut r = RunRecord::of(&self.tracker, granted, self.source);
        r.report.forgotten = self.forgotten;
        r
    }
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
    /// The run is unknown and every tracked run is receiving (none ended,
    /// none quiet for [`QUIET_NS`]): it is refused, not tracked.
    Full,
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
    /// Tests' clock (ns): the table itself reads none.
    #[cfg(test)]
    tick_ns: u64,
    arrivals: u64,
    first: Option<u32>,
    /// Runs evicted so far.
    pub evicted: u64,
    /// Datagrams of new runs refused because every tracked run was
    /// receiving.
    pub refused: u64,
    /// Ids of the last [`FORGOTTEN_IDS`] runs whose records were dropped
    /// or whose datagrams were refused.
    forgotten: VecDeque<u32>,
    forgotten_set: std::collections::HashSet<u32>,
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
            #[cfg(test)]
            tick_ns: 0,
            arrivals: 0,
            first: None,
            evicted: 0,
            refused: 0,
            forgotten: VecDeque::new(),
            forgotten_set: std::collections::HashSet::new(),
            dropped: Dropped::default(),
        }
    }

    /// The run `id` for a datagram from `from` read at `now_ns`
    /// (monotonic): tracked, created (evicting an ended or quiet run when
    /// full), retired, someone else's, or refused.
    pub fn admit(&mut self, id: u32, from: SocketAddr, now_ns: u64) -> Slot<'_> {
        self.tick += 1;
        if self.live.contains_key(&id) {
            let l = self.live.get_mut(&id).expect("checked above");
            if l.source != from {
                return Slot::WrongSource;
            }
            l.last_use = self.tick;
            l.last_ns = now_ns;
            return Slot::Live(l);
        }
        if let Some(&n) = self.retired_at.get(&id) {
            let r = &mut self.retired[(n - self.retired_base) as usize].1;
            if r.source != from {
                return Slot::WrongSource;
            }
            return Slot::Retired(r);
        }
        if self.live.len() >= self.max_live && !self.evict_one(now_ns) {
            self.refused += 1;
            // Remembered, so that if the run is admitted later its REPORT
            // says its earlier datagrams are in no figure.
            self.forget(id);
            return Slot::Full;
        }
        self.arrivals += 1;
        self.first.get_or_insert(id);
        let forgotten = self.forgotten_set.contains(&id);
        Slot::Live(self.live.entry(id).or_insert(Live {
            tracker: RunTracker::new(id),
            source: from,
            forgotten,
            arrival: self.arrivals,
            last_use: self.tick,
            last_ns: now_ns,
        }))
    }

    /// Evicts the least recently used run that had its FIN, else the least
    /// recently used run quiet for [`QUIET_NS`], into the records; false
    /// when every run is receiving (nothing evicted).
    fn evict_one(&mut self, now_ns: u64) -> bool {
        let victim = self
            .live
            .iter()
            .filter(|(_, l)| {
                l.tracker.published.is_some() || now_ns.saturating_sub(l.last_ns) >= QUIET_NS
            })
            .min_by_key(|(_, l)| (l.tracker.published.is_none(), l.last_use))
            .map(|(id, _)| *id);
        let Some(l) = victim.and_then(|id| self.live.remove(&id)) else {
            return false;
        };
        self.evicted += 1;
        let mut record = l.record(self.granted);
        record.evicted = true;
        record.report.evicted = true;
        self.retire(
            l.tracker.run(),
            Retired {
                record,
                source: l.source,
                arrival: l.arrival,
            },
        );
        true
    }

    fn retire(&mut self, id: u32, r: Retired) {
        if self.max_records == 0 {
            self.drop_record(id, &r.record);
            return;
        }
        if self.retired.len() >= self.max_records {
            // The oldest record of an ended run goes first: its sender
            // has had its REPORT. Only a record in the front half is taken
            // out of order, so the search stays short.
            let ended = self
                .retired
                .iter()
                .take(self.max_records / 2 + 1)
                .position(|(_, r)| r.record.published.is_some())
                .unwrap_or(0);
            let (old, rec) = self.remove_retired(ended);
            self.drop_record(old, &rec.record);
        }
        self.retired_at
            .insert(id, self.retired_base + self.retired.len() as u64);
        self.retired.push_back((id, r));
    }

    /// Takes out the record at `pos`, renumbering those behind it.
    fn remove_retired(&mut self, pos: usize) -> (u32, Retired) {
        let (id, r) = self.retired.remove(pos).expect("a record at pos");
        self.retired_at.remove(&id);
        if pos == 0 {
            self.retired_base += 1;
        } else {
            for (i, (later, _)) in self.retired.iter().enumerate().skip(pos) {
                self.retired_at.insert(*later, self.retired_base + i as u64);
            }
        }
        (id, r)
    }

    fn drop_record(&mut self, id: u32, r: &RunRecord) {
        self.dropped.runs += 1;
        self.dropped.received += r.report.received;
        self.dropped.lost += r.lost.unwrap_or(0);
        self.forget(id);
    }

    /// Remembers `id` among the runs that lost datagrams to the table's
    /// bounds (dropped or refused), the last [`FORGOTTEN_IDS`] of them.
    fn forget(&mut self, id: u32) {
        if self.forgotten_set.insert(id) {
            self.forgotten.push_back(id);
            if self.forgotten.len() > FORGOTTEN_IDS
                && let Some(old) = self.forgotten.pop_front()
            {
                self.forgotten_set.remove(&old);
            }
        }
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
            .map(|l| (l.arrival, l.record(self.granted)))
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

    /// One DATA datagram `seq` of `id` from `from` at `now` ns; returns the
    /// slot kind.
    fn data_at(t: &mut RunTable, id: u32, from: SocketAddr, seq: u64, now: u64) -> &'static str {
        match t.admit(id, from, now) {
            Slot::Live(l) => {
                l.tracker.record(seq, 0, 1, 100);
                "live"
            }
            Slot::Retired(r) => {
                r.record.report.after_eviction += 1;
                "retired"
            }
            Slot::WrongSource => "wrong",
            Slot::Full => "full",
        }
    }

    /// [`data_at`] for tests of the order of eviction: every run quiet.
    fn data(t: &mut RunTable, id: u32, from: SocketAddr, seq: u64) -> &'static str {
        t.tick_ns += QUIET_NS;
        let now = t.tick_ns;
        data_at(t, id, from, seq, now)
    }

    fn fin(t: &mut RunTable, id: u32, from: SocketAddr, published: u64) {
        t.tick_ns += QUIET_NS;
        let now = t.tick_ns;
        if let Slot::Live(l) = t.admit(id, from, now) {
            l.tracker.published = Some(published);
            l.tracker.fins += 1;
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_flood_of_run_ids_stays_bounded_and_spares_the_receiving_run() {
        let mut t = RunTable::new(MAX_LIVE, MAX_RECORDS, 0);
        let (real, spoof) = (addr(1000), addr(2000));
        let mut full = 0u64;
        for i in 0..10_000u32 {
            let now = u64::from(i) * MS;
            // The real run sends every 10th datagram of the flood.
            if i % 10 == 0 {
                assert_eq!(data_at(&mut t, 7, real, u64::from(i / 10), now), "live");
            }
            if data_at(&mut t, 100 + i, spoof, 0, now) == "full" {
                full += 1;
            }
            assert!(t.live_len() <= MAX_LIVE);
            assert!(t.retired_len() <= MAX_RECORDS);
        }
        // Until the first spoofed runs had been quiet for 2 s, new ones
        // were refused; then quiet ones were evicted, never the real run.
        assert_eq!(full, t.refused);
        assert!(t.refused >= 1900, "{}", t.refused);
        assert!(t.evicted > 0);
        let recs = t.records();
        let real_rec = recs.iter().find(|r| r.report.run == 7).unwrap();
        assert_eq!(real_rec.report.received, 1000);
        assert!(!real_rec.evicted);
        assert_eq!(t.first_run(), Some((1000, false)));
        // Kept, dropped and refused add up to every datagram.
        let kept: u64 = recs.iter().map(|r| r.report.received).sum();
        assert_eq!(kept + t.dropped.received + t.refused, 11_000);
    }

    /// Issue 22: a sustained flood of spoofed ids evicted a real run
    /// sending a datagram every 500 ms; its record was then dropped, its
    /// FIN started a new run with nothing received, and the load reported
    /// 100 % loss with exit 0.
    #[test]
    fn a_slow_run_under_a_sustained_flood_is_never_evicted() {
        let mut t = RunTable::new(4, 4, 0);
        let (real, spoof) = (addr(1), addr(2));
        let mut id = 100;
        for tick in 0..200u64 {
            let now = tick * 50 * MS;
            if tick % 10 == 0 {
                assert_eq!(data_at(&mut t, 7, real, tick / 10, now), "live");
            }
            for _ in 0..50 {
                data_at(&mut t, id, spoof, 0, now);
                id += 1;
            }
        }
        let r = t.records().into_iter().find(|r| r.report.run == 7).unwrap();
        assert_eq!(r.report.received, 20);
        assert!(!r.evicted && !r.report.forgotten);
        assert!(t.refused > 0);
    }

    #[test]
    fn a_run_refused_then_tracked_says_its_figures_are_partial() {
        let mut t = RunTable::new(1, 1, 0);
        assert_eq!(data_at(&mut t, 1, addr(1), 0, 0), "live");
        assert_eq!(data_at(&mut t, 2, addr(2), 0, MS), "full");
        // Run 1 quiet for 2 s: run 2 gets its place, marked.
        assert_eq!(data_at(&mut t, 2, addr(2), 1, 3000 * MS), "live");
        let r = t.records().into_iter().find(|r| r.report.run == 2).unwrap();
        assert!(r.report.forgotten);
        assert_eq!(r.report.received, 1);
    }

    #[test]
    fn a_run_that_comes_back_after_being_forgotten_says_so() {
        let mut t = RunTable::new(1, 1, 0);
        data(&mut t, 1, addr(1), 0);
        data(&mut t, 2, addr(2), 0); // run 1 evicted
        data(&mut t, 3, addr(3), 0); // run 2 evicted, run 1's record dropped
        assert_eq!(t.dropped.runs, 1);
        assert_eq!(data(&mut t, 1, addr(1), 5), "live");
        let r = t.records().into_iter().find(|r| r.report.run == 1).unwrap();
        assert!(r.report.forgotten);
        assert_eq!(r.report.received, 1);
        // Its eviction carries the flag into the REPORT of its record.
        data(&mut t, 4, addr(4), 0);
        let r = t.records().into_iter().find(|r| r.report.run == 1).unwrap();
        assert!(r.evicted && r.report.evicted && r.report.forgotten);
    }

    #[test]
    fn ended_records_are_dropped_before_unended_ones() {
        let mut t = RunTable::new(1, 2, 0);
        data(&mut t, 1, addr(1), 0);
        data(&mut t, 2, addr(2), 0); // 1 retired (no FIN)
        fin(&mut t, 2, addr(2), 1);
        data(&mut t, 3, addr(3), 0); // 2 retired (ended)
        data(&mut t, 4, addr(4), 0); // 3 retired: a record must go
        let ids: Vec<u32> = t.records().iter().map(|r| r.report.run).collect();
        // Run 2 ended, so its record went although run 1's is older.
        assert_eq!(ids, [1, 3, 4]);
        // And the renumbered records are still found by id.
        assert_eq!(data(&mut t, 3, addr(3), 1), "retired");
        assert_eq!(data(&mut t, 1, addr(1), 1), "retired");
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
