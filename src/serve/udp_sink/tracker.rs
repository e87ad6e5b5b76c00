//! Sequence accounting for one run: which sequence numbers arrived, in what
//! order, how late, with bounded memory.
//!
//! Arrivals are kept in a bitmap window of [`WINDOW`] sequence numbers
//! starting at `base`. A late datagram that fills a hole clears it; a hole
//! is only counted for good when the window slides past it, which needs a
//! datagram [`WINDOW`] sequence numbers ahead. The bitmap grows with the
//! highest sequence seen, so a short run costs a few bytes and a long one
//! at most WINDOW / 8 bytes.

use crate::proto::udp::SinkReport;
use crate::stats::LatencyHist;

/// Sequence numbers tracked individually: reordering deeper than this
/// cannot be told from loss (see [`RunTracker::late`]). 4 Mi numbers,
/// 512 KiB of bitmap at most.
pub const WINDOW: u64 = 1 << 22;

/// What the sink knows of one run id.
#[derive(Debug)]
pub struct RunTracker {
    run: u32,
    received: u64,
    duplicates: u64,
    reordered: u64,
    max_seq: Option<u64>,
    /// First sequence number the bitmap covers (a multiple of 64).
    base: u64,
    /// Bit i: sequence base + i arrived.
    bits: Vec<u64>,
    /// Holes the window slid past: lost for good.
    gaps_behind: u64,
    /// Datagrams below the window: a late fill or a duplicate, which can
    /// no longer be told apart. Counted in neither received nor duplicates.
    pub late: u64,
    jitter_ns: f64,
    last_transit: Option<i64>,
    hist: LatencyHist,
    /// Bytes of DATA received (duplicates included).
    pub bytes: u64,
    /// Published count from the run's FIN, once one arrived.
    pub published: Option<u64>,
    /// FINs answered.
    pub fins: u64,
}

impl RunTracker {
    /// A run with nothing received yet.
    pub fn new(run: u32) -> Self {
        Self {
            run,
            received: 0,
            duplicates: 0,
            reordered: 0,
            max_seq: None,
            base: 0,
            bits: Vec::new(),
            gaps_behind: 0,
            late: 0,
            jitter_ns: 0.0,
            last_transit: None,
            hist: LatencyHist::new(),
            bytes: 0,
            published: None,
            fins: 0,
        }
    }

    /// The run id.
    pub fn run(&self) -> u32 {
        self.run
    }

    /// Distinct DATA datagrams received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Records DATA `seq`, sent at `sent_ns` and read at `recv_ns`
    /// (CLOCK_MONOTONIC), `len` bytes long.
    pub fn record(&mut self, seq: u64, sent_ns: u64, recv_ns: u64, len: usize) {
        self.bytes += len as u64;
        if seq < self.base {
            self.late += 1;
            return;
        }
        if seq - self.base >= WINDOW {
            self.slide(seq);
        }
        let idx = (seq - self.base) as usize;
        let (word, bit) = (idx / 64, 1u64 << (idx % 64));
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        if self.bits[word] & bit != 0 {
            self.duplicates += 1;
            return;
        }
        self.bits[word] |= bit;
        self.received += 1;
        match self.max_seq {
            Some(m) if seq < m => self.reordered += 1,
            _ => self.max_seq = Some(seq),
        }
        // RFC 3550 6.4.1: D = difference of transit times of consecutive
        // arrivals; J += (|D| - J) / 16.
        let transit = recv_ns.wrapping_sub(sent_ns) as i64;
        if let Some(prev) = self.last_transit {
            let d = transit.wrapping_sub(prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        self.hist.record(recv_ns.saturating_sub(sent_ns));
    }

    /// Moves the window so `seq` fits, by at least half a window (so the
    /// cost of moving the bitmap is spread over many datagrams). Holes left
    /// behind are counted as gaps: everything below the new base is below
    /// `seq`, the new highest sequence number.
    fn slide(&mut self, seq: u64) {
        let want = (seq + 1 - WINDOW).max(self.base + WINDOW / 2);
        let new_base = want.div_ceil(64) * 64;
        let shift_words = ((new_base - self.base) / 64) as usize;
        let dropped = shift_words.min(self.bits.len());
        let ones: u64 = self.bits[..dropped]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        self.gaps_behind += (new_base - self.base) - ones;
        self.bits.drain(..dropped);
        self.base = new_base;
    }

    /// Holes below the highest sequence seen that were never filled.
    pub fn interior_gaps(&self) -> u64 {
        let Some(max) = self.max_seq else { return 0 };
        if max < self.base {
            return self.gaps_behind;
        }
        let ones: u64 = self.bits.iter().map(|w| u64::from(w.count_ones())).sum();
        self.gaps_behind + (max - self.base + 1) - ones
    }

    /// The report sent back in REPORT and printed.
    pub fn report(&self, rcvbuf_granted: u64) -> SinkReport {
        SinkReport {
            run: self.run,
            received: self.received,
            interior_gaps: self.interior_gaps(),
            reordered: self.reordered,
            duplicates: self.duplicates,
            max_seq: self.max_seq,
            jitter_ns: self.jitter_ns,
            // Encoding an in-range histogram cannot fail; an empty string
            // would only mean "no latency data".
            latency_hist: self.hist.to_v2_base64().unwrap_or_default(),
            rcvbuf_granted,
            after_eviction: 0,
            evicted: false,
            forgotten: false,
            runs_refused: 0,
        }
    }

    /// The latency histogram.
    pub fn latency(&self) -> &LatencyHist {
        &self.hist
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut RunTracker, seqs: &[u64]) {
        for &s in seqs {
            t.record(s, 1_000, 2_000, 100);
        }
    }

    #[test]
    fn holes_reorders_duplicates_and_late_fills() {
        let mut t = RunTracker::new(7);
        // 0 1 3 2 5 5 8 ; 4, 6, 7 missing, 2 reordered, 5 duplicated.
        feed(&mut t, &[0, 1, 3, 2, 5, 5, 8]);
        let r = t.report(0);
        assert_eq!(r.received, 6);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.interior_gaps, 3);
        assert_eq!(r.max_seq, Some(8));
        // A late arrival fills a hole.
        feed(&mut t, &[6]);
        let r = t.report(0);
        assert_eq!((r.received, r.reordered, r.interior_gaps), (7, 2, 2));
    }

    #[test]
    fn tail_loss_is_not_an_interior_gap() {
        let mut t = RunTracker::new(1);
        feed(&mut t, &[0, 1, 2]);
        assert_eq!(t.interior_gaps(), 0);
        assert_eq!(t.received(), 3);
    }

    #[test]
    fn window_slides_and_keeps_counting_gaps() {
        let mut t = RunTracker::new(1);
        // Every other sequence number over three windows.
        let n = 3 * WINDOW;
        let mut s = 0;
        while s < n {
            t.record(s, 0, 0, 1);
            s += 2;
        }
        assert_eq!(t.received(), n / 2);
        assert_eq!(t.interior_gaps(), n / 2 - 1);
        assert!(t.bits.len() as u64 <= WINDOW / 64);
        // Far below the window: neither received nor a duplicate.
        t.record(1, 0, 0, 1);
        assert_eq!(t.late, 1);
        assert_eq!(t.received(), n / 2);
        // A huge jump counts every skipped number as a gap.
        let mut t = RunTracker::new(2);
        t.record(0, 0, 0, 1);
        t.record(10 * WINDOW, 0, 0, 1);
        assert_eq!(t.interior_gaps(), 10 * WINDOW - 1);
        assert_eq!(t.received(), 2);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut t = RunTracker::new(1);
        // Transit 100, 116, 100: |D| = 16 twice.
        t.record(0, 0, 100, 1);
        t.record(1, 1000, 1116, 1);
        let j1 = 16.0 / 16.0;
        assert!((t.jitter_ns - j1).abs() < 1e-9);
        t.record(2, 2000, 2100, 1);
        let j2 = j1 + (16.0 - j1) / 16.0;
        assert!((t.jitter_ns - j2).abs() < 1e-9);
        assert_eq!(t.latency().len(), 3);
    }
}
