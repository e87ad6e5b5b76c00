//! What each load worker counts, and how the workers' counts merge.
//!
//! A worker owns its `WorkerTally` outright (no sharing, no atomic
//! read-modify-write on the hot path) and only publishes its `ProgressCounters`
//! counters for the main thread (progress bar, give-up check) and, once a
//! second, an interval record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;

use hdrhistogram::Histogram;

use crate::load::driver::tls::{Negotiated, TlsFailure};
use crate::load::workload::{ErrorClass, Outcome};
use crate::stats::LatencyHist;

/// Latency histogram used per one-second interval: 2 significant digits
/// from 100 ns to 60 s (about 12 KB), enough for per-second p50/p99.
pub fn interval_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(100, 60_000_000_000, 2).expect("valid static bounds")
}

/// Send-lag histogram used per one-second interval: 2 significant digits
/// from 1 ns to 60 s (a lag is often well under 100 ns).
pub fn lag_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, 60_000_000_000, 2).expect("valid static bounds")
}

/// One second of one worker, sent to the main thread.
pub struct IntervalRecord {
    /// Second index since the measured window started.
    pub second: u64,
    /// Transactions completed in it.
    pub transactions: u64,
    /// Errors in it.
    pub errors: u64,
    /// Those errors by class.
    pub errors_by_class: BTreeMap<ErrorClass, u64>,
    /// Latencies of those transactions.
    pub hist: Histogram<u32>,
    /// Send lag of the sends released in it (open loop).
    pub send_lag: Option<Histogram<u32>>,
    /// The worker that sent it.
    pub worker: usize,
    /// The worker thread's CPU time since its previous record (or since
    /// its first measured event), ns: read at the roll into the next
    /// second, so approximately this second's.
    pub cpu_ns: u64,
}

/// One second of the run, every worker's records added up.
pub struct SecondTally {
    /// Transactions completed in it.
    pub transactions: u64,
    /// Errors in it.
    pub errors: u64,
    /// Those errors by class.
    pub errors_by_class: BTreeMap<ErrorClass, u64>,
    /// Latencies of those transactions.
    pub hist: Histogram<u32>,
    /// Send lag of the sends released in it (None: closed loop).
    pub send_lag: Option<Histogram<u32>>,
    /// CPU time of each worker thread in it, ns, indexed by worker.
    pub cpu_ns: Vec<u64>,
}

impl Default for SecondTally {
    fn default() -> Self {
        Self {
            transactions: 0,
            errors: 0,
            errors_by_class: BTreeMap::new(),
            hist: interval_hist(),
            send_lag: None,
            cpu_ns: Vec::new(),
        }
    }
}

impl SecondTally {
    /// Adds one worker's record of this second.
    pub fn add(&mut self, rec: IntervalRecord) {
        self.transactions += rec.transactions;
        self.errors += rec.errors;
        for (k, v) in rec.errors_by_class {
            *self.errors_by_class.entry(k).or_default() += v;
        }
        let _ = self.hist.add(&rec.hist);
        if let Some(l) = rec.send_lag {
            match self.send_lag.as_mut() {
                Some(acc) => {
                    let _ = acc.add(&l);
                }
                None => self.send_lag = Some(l),
            }
        }
        if self.cpu_ns.len() <= rec.worker {
            self.cpu_ns.resize(rec.worker + 1, 0);
        }
        self.cpu_ns[rec.worker] += rec.cpu_ns;
    }
}

/// One operation's responses (whole run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTally {
    /// Responses received.
    pub answered: u64,
    /// Of which the request failed.
    pub errors: u64,
    /// Lookups that found their key.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
}

/// What a protocol workload's responses said, over the whole run (warm-up
/// and drain included, for comparison with the server's own counters).
#[derive(Clone, Debug, Default)]
pub struct ResponseTally {
    /// Whole responses.
    pub answered: u64,
    /// (status, responses), in order of first appearance: a handful of
    /// codes at most, so a scan beats a map.
    pub by_status: Vec<(u16, u64)>,
    /// Per operation, indexed by `Outcome::op`.
    pub by_op: Vec<OpTally>,
    /// Connections the server closed after a response, reopened.
    pub reconnects: u64,
}

impl ResponseTally {
    #[inline]
    fn count(&mut self, o: &Outcome) {
        self.answered += 1;
        if let Some(code) = o.status {
            match self.by_status.iter_mut().find(|(c, _)| *c == code) {
                Some((_, n)) => *n += 1,
                None => self.by_status.push((code, 1)),
            }
        }
        let op = o.op as usize;
        if self.by_op.len() <= op {
            self.by_op.resize(op + 1, OpTally::default());
        }
        let t = &mut self.by_op[op];
        t.answered += 1;
        t.errors += o.error.is_some() as u64;
        match o.hit {
            Some(true) => t.hits += 1,
            Some(false) => t.misses += 1,
            None => {}
        }
    }

    fn merge(&mut self, other: &Self) {
        self.answered += other.answered;
        self.reconnects += other.reconnects;
        for &(code, n) in &other.by_status {
            match self.by_status.iter_mut().find(|(c, _)| *c == code) {
                Some((_, m)) => *m += n,
                None => self.by_status.push((code, n)),
            }
        }
        if self.by_op.len() < other.by_op.len() {
            self.by_op.resize(other.by_op.len(), OpTally::default());
        }
        for (a, b) in self.by_op.iter_mut().zip(&other.by_op) {
            a.answered += b.answered;
            a.errors += b.errors;
            a.hits += b.hits;
            a.misses += b.misses;
        }
    }
}

/// One worker's raw transaction log (`--full-log`): (intended send time
/// on the run clock, latency), both ns, in completion order. Bounded: the
/// vector never grows past `cap`; what does not fit is counted.
#[derive(Debug, Default)]
pub struct FullLog {
    /// (send time on the run clock, latency), ns.
    pub entries: Vec<(u64, u64)>,
    /// Most entries kept.
    pub cap: usize,
    /// Measured transactions that did not fit.
    pub not_logged: u64,
}

impl FullLog {
    /// An empty log keeping at most `cap` entries.
    pub fn new(cap: usize) -> Self {
        Self {
            // Start small: most runs log far fewer than their cap, and a
            // doubling vector costs an amortised copy per entry at most.
            entries: Vec::with_capacity(cap.min(1 << 16)),
            cap,
            not_logged: 0,
        }
    }

    #[inline]
    fn push(&mut self, sent: u64, latency: u64) {
        if self.entries.len() < self.cap {
            self.entries.push((sent, latency));
        } else {
            self.not_logged += 1;
        }
    }

    fn append(&mut self, mut other: FullLog) {
        self.entries.append(&mut other.entries);
        self.cap += other.cap;
        self.not_logged += other.not_logged;
    }
}

/// Per-worker progress counters read by the main thread (one cache line
/// each, written by one worker only).
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct ProgressCounters {
    /// Measured transactions completed.
    pub transactions: AtomicU64,
    /// Errors.
    pub errors: AtomicU64,
    /// Successful connects.
    pub connects: AtomicU64,
}

/// A worker's counts.
pub struct WorkerTally {
    /// Start of the measured window on the run clock (ns).
    pub measure_from: u64,
    /// Latency (from the intended send time in open-loop mode).
    pub latency: LatencyHist,
    /// Latency from the actual send time (open-loop mode only).
    pub uncorrected: Option<LatencyHist>,
    /// How late the generator released sends after their intended time
    /// when a connection was free for them (open-loop mode; waiting for a
    /// free connection not included).
    pub send_lag: Option<LatencyHist>,
    /// How late the generator released every send after its intended
    /// time, whether a connection was free for it or not (open-loop mode).
    pub release_lag: Option<LatencyHist>,
    /// How long sends that found no free connection waited for one, from
    /// their release to their send less the generator's own stalls
    /// meanwhile (open-loop mode).
    pub conn_wait: Option<LatencyHist>,
    /// Connect latency (tcp-crr).
    pub connect: Option<LatencyHist>,
    /// TLS handshake latency, from the TCP connect's end to the
    /// handshake's (TLS runs).
    pub tls_handshake: Option<LatencyHist>,
    /// What the first handshake of this worker negotiated (TLS runs).
    pub tls_negotiated: Option<Negotiated>,
    /// Why the first TLS failure of this worker happened.
    pub tls_error: Option<String>,
    /// The server's answer to the first on-connect step it refused.
    pub on_connect_error: Option<String>,
    /// Transactions completed inside the measured window.
    pub transactions: u64,
    /// Transactions completed during warm-up.
    pub warmup_transactions: u64,
    /// Errors by class (whole run, warm-up included).
    pub errors: BTreeMap<ErrorClass, u64>,
    /// Payload bytes written.
    pub bytes_sent: u64,
    /// Payload bytes read.
    pub bytes_received: u64,
    /// Connections that became established (reconnects included).
    pub connects: u64,
    /// Responses that arrived after the measured window ended, while the
    /// run drained the requests still in flight (not transactions).
    pub answered_after_end: u64,
    /// What the responses said (protocol workloads).
    pub responses: ResponseTally,
    /// Whole responses inside the measured window whose request failed
    /// (an HTTP 404, a `-ERR`): the target answered, though not as hoped.
    pub failed_answers: u64,
    /// `--full-log`: every measured transaction's send time and latency.
    pub log: Option<FullLog>,
    /// This worker's index (in its interval records).
    pub worker: usize,
    /// Set when the measured window has ended and the run drains: answers
    /// then count in `answered_after_end` and errors stay out of the
    /// per-second intervals.
    window_closed: bool,
    interval: Histogram<u32>,
    interval_second: u64,
    /// Run-clock span [start, end) of `interval_second`: a transaction
    /// inside it needs no division to know its second.
    interval_span: (u64, u64),
    interval_tx: u64,
    interval_errors: u64,
    interval_by_class: BTreeMap<ErrorClass, u64>,
    interval_lag: Option<Histogram<u32>>,
    /// Thread CPU time at the previous record (None: not measuring yet).
    cpu_mark: Option<u64>,
    sink: Option<Sender<IntervalRecord>>,
    progress: Arc<ProgressCounters>,
}

impl WorkerTally {
    /// A tally whose measured window starts at `measure_from` (run clock
    /// ns); `progress` is this worker's completed-transactions counter;
    /// `connect` and `tls` ask for the connect and TLS handshake
    /// histograms.
    pub fn new(
        measure_from: u64,
        open_loop: bool,
        connect: bool,
        tls: bool,
        sink: Sender<IntervalRecord>,
        progress: Arc<ProgressCounters>,
    ) -> Self {
        Self {
            measure_from,
            latency: LatencyHist::new(),
            uncorrected: open_loop.then(LatencyHist::new),
            send_lag: open_loop.then(LatencyHist::new),
            release_lag: open_loop.then(LatencyHist::new),
            conn_wait: open_loop.then(LatencyHist::new),
            connect: connect.then(LatencyHist::new),
            tls_handshake: tls.then(LatencyHist::new),
            tls_negotiated: None,
            tls_error: None,
            on_connect_error: None,
            transactions: 0,
            warmup_transactions: 0,
            errors: BTreeMap::new(),
            bytes_sent: 0,
            bytes_received: 0,
            connects: 0,
            answered_after_end: 0,
            responses: ResponseTally::default(),
            failed_answers: 0,
            log: None,
            worker: 0,
            window_closed: false,
            interval: interval_hist(),
            interval_second: 0,
            // Empty: the first measured event rolls into second 0 and
            // marks the thread's CPU time there (warm-up events are not
            // rolled; see `roll`).
            interval_span: (measure_from, measure_from),
            interval_tx: 0,
            interval_errors: 0,
            interval_by_class: BTreeMap::new(),
            interval_lag: open_loop.then(lag_hist),
            cpu_mark: None,
            sink: Some(sink),
            progress,
        }
    }

    /// True once the measured window has started.
    #[inline]
    pub fn measuring(&self, now: u64) -> bool {
        now >= self.measure_from
    }

    /// Records a transaction completed at `now` that was meant to start at
    /// `intended` and actually started at `sent` (equal in closed loop).
    #[inline]
    pub fn transaction(&mut self, now: u64, intended: u64, sent: u64) {
        if self.window_closed {
            self.answered_after_end += 1;
            return;
        }
        if !self.measuring(now) {
            self.warmup_transactions += 1;
            return;
        }
        self.roll(now);
        let lat = now.saturating_sub(intended);
        self.latency.record(lat);
        if let Some(log) = self.log.as_mut() {
            log.push(intended, lat);
        }
        if let Some(u) = self.uncorrected.as_mut() {
            u.record(now.saturating_sub(sent));
        }

        let _ = self.interval.record(lat.clamp(100, 60_000_000_000));
        self.transactions += 1;
        self.interval_tx += 1;
        self.progress
            .transactions
            .store(self.transactions, Ordering::Relaxed);
    }

    /// Records a whole response and what it meant: a transaction, or an
    /// error of its class when the request failed (the connection goes on
    /// either way).
    #[inline]
    pub fn answer(&mut self, now: u64, outcome: &Outcome, intended: u64, sent: u64) {
        self.responses.count(outcome);
        match outcome.error {
            Some(class) => {
                if self.measuring(now) && !self.window_closed {
                    self.failed_answers += 1;
                }
                self.error(now, class)
            }
            None => self.transaction(now, intended, sent),
        }
    }

    /// Counts a connection the server closed after a response, reopened.
    pub fn reconnect(&mut self) {
        self.responses.reconnects += 1;
    }

    /// Records how late an open-loop send was released after its intended
    /// time: always in the release lag, and in the send lag when a
    /// connection was `free` for it (otherwise what it waits next is the
    /// connection wait, recorded when it is sent).
    #[inline]
    pub fn release_lag(&mut self, intended: u64, lag: u64, free: bool) {
        if intended >= self.measure_from
            && let Some(l) = self.release_lag.as_mut()
        {
            l.record(lag);
        }
        if free && intended >= self.measure_from {
            if let Some(l) = self.send_lag.as_mut() {
                l.record(lag);
            }
            if !self.window_closed && self.interval_lag.is_some() {
                // Released at intended + lag: the second it counts in.
                self.roll(intended + lag);
                if let Some(h) = self.interval_lag.as_mut() {
                    let _ = h.record(lag.clamp(1, 60_000_000_000));
                }
            }
        }
    }

    /// Records how long an open-loop send meant for `intended` waited for
    /// a free connection (from its release to its send, less the
    /// generator's stalls meanwhile).
    #[inline]
    pub fn conn_wait(&mut self, intended: u64, wait: u64) {
        if intended >= self.measure_from
            && let Some(h) = self.conn_wait.as_mut()
        {
            h.record(wait);
        }
    }

    /// Records a connect that took `ns`.
    #[inline]
    pub fn connected(&mut self, now: u64, ns: u64) {
        self.connects += 1;
        self.progress
            .connects
            .store(self.connects, Ordering::Relaxed);
        if self.measuring(now) {
            if let Some(c) = self.connect.as_mut() {
                c.record(ns);
            }
        }
    }

    /// Records a TLS handshake that completed at `now` after `ns`, and
    /// what the worker's first one negotiated.
    pub fn tls_handshake(&mut self, now: u64, ns: u64, negotiated: Option<Negotiated>) {
        if self.tls_negotiated.is_none() {
            self.tls_negotiated = negotiated;
        }
        if self.measuring(now) {
            if let Some(h) = self.tls_handshake.as_mut() {
                h.record(ns);
            }
        }
    }

    /// The class a failed TLS connection counts as; keeps the reason of
    /// the worker's first TLS failure for the report.
    pub fn tls_failure(&mut self, f: TlsFailure) -> ErrorClass {
        if self.tls_error.is_none() {
            self.tls_error = f.reason();
        }
        f.class()
    }

    /// Counts an error.
    pub fn error(&mut self, now: u64, class: ErrorClass) {
        *self.errors.entry(class).or_default() += 1;
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        if self.measuring(now) && !self.window_closed {
            self.roll(now);
            self.interval_errors += 1;
            *self.interval_by_class.entry(class).or_default() += 1;
        }
    }

    /// Total errors.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Moves to the interval that contains `now`, sending the finished one.
    #[inline]
    pub fn roll(&mut self, now: u64) {
        if now >= self.interval_span.0 && now < self.interval_span.1 {
            return;
        }
        let second = (now - self.measure_from.min(now)) / 1_000_000_000;
        let start = self.measure_from + second * 1_000_000_000;
        self.interval_span = (start, start.saturating_add(1_000_000_000));
        if self.cpu_mark.is_none() {
            self.cpu_mark = Some(crate::load::driver::clock::thread_cpu_ns());
        }
        if second != self.interval_second {
            self.flush_interval();
            self.interval_second = second;
        }
    }

    fn flush_interval(&mut self) {
        let lagged = self.interval_lag.as_ref().is_some_and(|h| !h.is_empty());
        if self.interval_tx == 0 && self.interval_errors == 0 && !lagged {
            return;
        }
        // One clock read per worker and second: what the step's busy
        // share is made of.
        let cpu = crate::load::driver::clock::thread_cpu_ns();
        let cpu_ns = cpu.saturating_sub(self.cpu_mark.unwrap_or(cpu));
        self.cpu_mark = Some(cpu);
        let rec = IntervalRecord {
            second: self.interval_second,
            transactions: self.interval_tx,
            errors: self.interval_errors,
            errors_by_class: std::mem::take(&mut self.interval_by_class),
            hist: std::mem::replace(&mut self.interval, interval_hist()),
            send_lag: self
                .interval_lag
                .as_mut()
                .map(|h| std::mem::replace(h, lag_hist())),
            worker: self.worker,
            cpu_ns,
        };
        self.interval_tx = 0;
        self.interval_errors = 0;
        if let Some(s) = &self.sink {
            let _ = s.send(rec);
        }
    }

    /// Ends the measured window (duration mode, before the drain): from
    /// here on answers are `answered_after_end`, not transactions.
    pub fn close_window(&mut self) {
        self.window_closed = true;
    }

    /// Sends the last partial interval; call once when the worker ends.
    pub fn finish(&mut self) {
        self.flush_interval();
        self.sink = None;
    }
}

/// Merges worker tallies into one (histograms added, counters summed).
pub fn merge(parts: Vec<WorkerTally>) -> Option<WorkerTally> {
    let mut it = parts.into_iter();
    let mut acc = it.next()?;
    for t in it {
        acc.latency.merge(&t.latency);
        if let (Some(a), Some(b)) = (acc.uncorrected.as_mut(), t.uncorrected.as_ref()) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (acc.connect.as_mut(), t.connect.as_ref()) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (acc.send_lag.as_mut(), t.send_lag.as_ref()) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (acc.release_lag.as_mut(), t.release_lag.as_ref()) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (acc.conn_wait.as_mut(), t.conn_wait.as_ref()) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (acc.tls_handshake.as_mut(), t.tls_handshake.as_ref()) {
            a.merge(b);
        }
        acc.tls_negotiated = acc.tls_negotiated.or(t.tls_negotiated);
        acc.tls_error = acc.tls_error.or(t.tls_error);
        acc.on_connect_error = acc.on_connect_error.or(t.on_connect_error);
        acc.transactions += t.transactions;
        acc.warmup_transactions += t.warmup_transactions;
        for (k, v) in t.errors {
            *acc.errors.entry(k).or_default() += v;
        }
        acc.bytes_sent += t.bytes_sent;
        acc.bytes_received += t.bytes_received;
        acc.connects += t.connects;
        acc.answered_after_end += t.answered_after_end;
        acc.responses.merge(&t.responses);
        acc.failed_answers += t.failed_answers;
        match (acc.log.as_mut(), t.log) {
            (Some(a), Some(b)) => a.append(b),
            (None, b) => acc.log = b,
            (Some(_), None) => {}
        }
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally() -> WorkerTally {
        let (tx, _rx) = std::sync::mpsc::channel();
        WorkerTally::new(0, false, false, false, tx, Arc::default())
    }

    #[test]
    fn the_full_log_keeps_what_the_histogram_records_up_to_its_bound() {
        let mut t = tally();
        t.log = Some(FullLog::new(3));
        for (i, lat) in [10u64, 20, 30, 40, 50].iter().enumerate() {
            let sent = 1_000 * i as u64;
            t.transaction(sent + lat, sent, sent);
        }
        let log = t.log.as_ref().unwrap();
        assert_eq!(log.entries, vec![(0, 10), (1000, 20), (2000, 30)]);
        assert_eq!(log.not_logged, 2);
        assert_eq!(t.latency.len(), 5);
        // Two workers' logs merge: entries, bounds and what was left out.
        let mut u = tally();
        u.log = Some(FullLog::new(2));
        u.transaction(7_000, 6_000, 6_000);
        let m = merge(vec![t, u]).unwrap();
        let log = m.log.unwrap();
        assert_eq!(log.entries.len(), 4);
        assert_eq!((log.cap, log.not_logged), (5, 2));
    }
}
