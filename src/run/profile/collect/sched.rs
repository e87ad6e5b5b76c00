//! Samples the target tree's threads' schedstat
//! (`report::evidence::sched`).
//!
//! /proc/PID/task/TID/schedstat holds three cumulative figures of a
//! thread: nanoseconds on a CPU, nanoseconds runnable but waiting on a run
//! queue, and time slices run. A thread's share of the window is its last
//! value seen minus its baseline: its first value seen, or 0 for a thread
//! born after the window opened (its /proc/PID/task/TID/stat start time,
//! read once per thread, is later than the sampler's start), so a worker
//! started mid-run counts whole. Limits: what a thread did between its last
//! sample and its exit (at most one [`super::INTERVAL`]) is not seen, and a
//! thread born before the window but first seen later (a process that
//! joined the tree mid-run) counts from its first sample only; both are
//! counted in the evidence.

use std::collections::HashMap;

use crate::report::evidence::SchedEvidence;
use crate::report::evidence::sched::ThreadSched;

/// One schedstat reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Nanoseconds on a CPU.
    pub on_cpu_ns: u64,
    /// Nanoseconds runnable but waiting for a CPU.
    pub wait_ns: u64,
    /// Time slices run.
    pub slices: u64,
}

impl Stat {
    /// `self - base`, per field, never negative.
    fn since(&self, base: &Stat) -> Stat {
        Stat {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(base.on_cpu_ns),
            wait_ns: self.wait_ns.saturating_sub(base.wait_ns),
            slices: self.slices.saturating_sub(base.slices),
        }
    }

    fn add(&mut self, o: &Stat) {
        self.on_cpu_ns += o.on_cpu_ns;
        self.wait_ns += o.wait_ns;
        self.slices += o.slices;
    }

    /// A reading earlier than `o` in any field: a different thread with
    /// the same id (tid reused).
    fn went_back_from(&self, o: &Stat) -> bool {
        self.on_cpu_ns < o.on_cpu_ns || self.wait_ns < o.wait_ns || self.slices < o.slices
    }
}

/// Parses /proc/PID/task/TID/schedstat: three unsigned integers; None for
/// anything else.
pub fn parse_schedstat(text: &str) -> Option<Stat> {
    let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let s = Stat {
        on_cpu_ns: it.next()??,
        wait_ns: it.next()??,
        slices: it.next()??,
    };
    it.next().is_none().then_some(s)
}

/// The start time (field 22, clock ticks since boot) and the command name
/// in /proc/PID/task/TID/stat text; None when malformed.
pub fn parse_stat_start(text: &str) -> Option<(u64, String)> {
    // The command name is in parentheses and may itself hold ") ".
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // After the name: field 3 (state) is the first; starttime is field 22.
    let start = text
        .get(close + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    Some((start, comm))
}

/// One thread followed over the window.
struct Track {
    pid: i32,
    tid: i32,
    comm: String,
    base: Stat,
    last: Stat,
}

/// Accumulates the last schedstat seen of every thread of the tree.
pub struct Sampler {
    /// Window start in clock ticks since boot (None: the clock could not
    /// be read; every thread then counts from its first sample).
    start_ticks: Option<u64>,
    /// Live threads by tid.
    threads: HashMap<i32, Track>,
    /// Threads whose tid was reused: what they did, kept.
    retired: Vec<Track>,
    rounds: u64,
    /// Threads born after the window opened (baseline 0).
    born_in_window: u64,
    /// Threads born before it but first read after the first round.
    seen_late: u64,
    /// The last read failure (for `finish` when nothing was read).
    last_error: Option<String>,
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler {
    /// A sampler whose window opens now.
    pub fn new() -> Self {
        Sampler {
            start_ticks: boot_ticks_now(),
            threads: HashMap::new(),
            retired: Vec::new(),
            rounds: 0,
            born_in_window: 0,
            seen_late: 0,
            last_error: None,
        }
    }

    /// One round over the threads of `tree`.
    pub fn sample(&mut self, tree: &[i32]) {
        for &pid in tree {
            let tids = match crate::procfs::threads(pid) {
                Ok(t) => t,
                Err(e) => {
                    self.last_error = Some(format!("/proc/{pid}/task: {e}"));
                    continue;
                }
            };
            for tid in tids {
                let path = format!("/proc/{pid}/task/{tid}/schedstat");
                match std::fs::read_to_string(&path) {
                    Ok(text) => match parse_schedstat(&text) {
                        Some(s) => self.record(pid, tid, s, || {
                            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
                                .ok()
                                .as_deref()
                                .and_then(parse_stat_start)
                        }),
                        None => self.last_error = Some(format!("{path}: not three numbers")),
                    },
                    // The thread exited between the listing and the read.
                    Err(e) => self.last_error = Some(format!("{path}: {e}")),
                }
            }
        }
        self.rounds += 1;
    }

    /// Records reading `s` of thread `tid` of `pid`; `stat` gives its start
    /// time and name, asked only for a thread not seen before.
    fn record(
        &mut self,
        pid: i32,
        tid: i32,
        s: Stat,
        stat: impl FnOnce() -> Option<(u64, String)>,
    ) {
        if let Some(t) = self.threads.get_mut(&tid) {
            if !s.went_back_from(&t.last) {
                t.last = s;
                return;
            }
            // The tid now names another thread: keep the old one's share.
            if let Some(old) = self.threads.remove(&tid) {
                self.retired.push(old);
            }
        }
        let (start, comm) = stat().map_or((None, String::new()), |(s, c)| (Some(s), c));
        let born_in_window = matches!((start, self.start_ticks), (Some(b), Some(w)) if b > w);
        let base = if born_in_window {
            self.born_in_window += 1;
            Stat::default()
        } else {
            if self.rounds > 0 {
                self.seen_late += 1;
            }
            s
        };
        self.threads.insert(
            tid,
            Track {
                pid,
                tid,
                comm,
                base,
                last: s,
            },
        );
    }

    /// The evidence, or why there is none.
    pub fn finish(self) -> Result<SchedEvidence, String> {
        if self.threads.is_empty() && self.retired.is_empty() {
            return Err(match self.last_error {
                Some(e) => format!("no thread of the target could be read ({e})"),
                None => "no thread of the target was seen".into(),
            });
        }
        let per: Vec<(&Track, Stat)> = self
            .retired
            .iter()
            .chain(self.threads.values())
            .map(|t| (t, t.last.since(&t.base)))
            .collect();
        let mut total = Stat::default();
        for (_, d) in &per {
            total.add(d);
        }
        // The thread that waited longest (ties: the lower tid).
        let worst = per
            .iter()
            .filter(|(_, d)| d.wait_ns > 0)
            .max_by(|a, b| a.1.wait_ns.cmp(&b.1.wait_ns).then(b.0.tid.cmp(&a.0.tid)))
            .map(|(t, d)| ThreadSched {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.clone(),
                on_cpu_s: d.on_cpu_ns as f64 / 1e9,
                runqueue_wait_s: d.wait_ns as f64 / 1e9,
                wait_share: share(d),
            });
        Ok(SchedEvidence {
            source: "/proc/PID/task/TID/schedstat of every thread of the target's tree, \
                     sampled; baseline: a thread's first sample, or 0 when its start time \
                     (/proc/PID/task/TID/stat) is after the window opened"
                .into(),
            threads: per.len() as u64,
            on_cpu_s: total.on_cpu_ns as f64 / 1e9,
            runqueue_wait_s: total.wait_ns as f64 / 1e9,
            wait_share: share(&total),
            timeslices: total.slices,
            rounds: self.rounds,
            threads_born_in_window: self.born_in_window,
            threads_seen_late: self.seen_late,
            worst_thread: worst,
        })
    }
}

/// wait / (wait + on CPU); 0 when neither.
fn share(s: &Stat) -> f64 {
    let runnable = s.wait_ns + s.on_cpu_ns;
    if runnable == 0 {
        0.0
    } else {
        s.wait_ns as f64 / runnable as f64
    }
}

/// Now, in clock ticks since boot (CLOCK_BOOTTIME, the clock of a task's
/// start time in /proc/PID/stat), rounded down.
fn boot_ticks_now() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    // SAFETY: timespec is plain data filled by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and clock id.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
    Some((ns * hz as u128 / 1_000_000_000) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_stat_parse_and_garbage_does_not() {
        assert_eq!(
            parse_schedstat("257951781 110678119 914\n"),
            Some(Stat {
                on_cpu_ns: 257_951_781,
                wait_ns: 110_678_119,
                slices: 914
            })
        );
        for bad in ["", "1 2", "1 2 3 4", "a b c", "-1 2 3", "1 2 3x"] {
            assert_eq!(parse_schedstat(bad), None, "{bad:?}");
        }
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 2 0 \
                    1866120 12345 100 18446744073709551615";
        assert_eq!(
            parse_stat_start(stat),
            Some((1_866_120, "a (weird) name".to_string()))
        );
        assert_eq!(parse_stat_start("4242 (x) S 1"), None);
        assert_eq!(parse_stat_start("garbage"), None);
        assert_eq!(parse_stat_start(")("), None);
    }

    fn st(on: u64, wait: u64, slices: u64) -> Stat {
        Stat {
            on_cpu_ns: on,
            wait_ns: wait,
            slices,
        }
    }

    fn sampler_at(ticks: u64) -> Sampler {
        Sampler {
            start_ticks: Some(ticks),
            ..Sampler::new()
        }
    }

    #[test]
    fn deltas_from_first_sample_or_birth_and_tid_reuse() {
        let mut s = sampler_at(1000);
        let old = || Some((500, "main".to_string()));
        let new = || Some((1001, "worker".to_string()));
        // Round 1: an old thread.
        s.record(10, 10, st(5_000_000_000, 1_000_000_000, 100), old);
        s.rounds += 1;
        // Round 2: it went on; a worker was born in the window.
        s.record(10, 10, st(6_000_000_000, 1_500_000_000, 150), old);
        s.record(10, 11, st(200_000_000, 600_000_000, 20), new);
        // A thread born before the window, first seen now: from its first
        // sample.
        s.record(12, 12, st(9_000_000_000, 9_000_000_000, 9), old);
        s.rounds += 1;
        s.record(12, 12, st(9_100_000_000, 9_000_000_000, 10), old);
        // Tid 11 is reused by another new thread (its counts restart).
        s.record(10, 11, st(100_000_000, 0, 1), new);
        s.rounds += 1;
        let e = s.finish().unwrap();
        assert_eq!(e.threads, 4);
        assert_eq!(e.threads_born_in_window, 2);
        assert_eq!(e.threads_seen_late, 1);
        // on: 1.0 + 0.2 + 0.1 + 0.1 s; wait: 0.5 + 0.6 + 0 + 0 s.
        assert!((e.on_cpu_s - 1.4).abs() < 1e-9, "{}", e.on_cpu_s);
        assert!(
            (e.runqueue_wait_s - 1.1).abs() < 1e-9,
            "{}",
            e.runqueue_wait_s
        );
        assert!((e.wait_share - 1.1 / 2.5).abs() < 1e-9);
        assert_eq!(e.timeslices, 50 + 20 + 1 + 1);
        let w = e.worst_thread.unwrap();
        assert_eq!((w.pid, w.comm.as_str()), (10, "worker"));
        assert!((w.wait_share - 0.75).abs() < 1e-9);
    }

    #[test]
    fn nothing_read_is_an_error_and_this_process_is_read() {
        let e = Sampler::new().finish().unwrap_err();
        assert!(e.contains("no thread"), "{e}");
        let mut s = Sampler::new();
        s.sample(&[i32::MAX]);
        let e = s.finish().unwrap_err();
        assert!(e.contains(&format!("/proc/{}/task", i32::MAX)), "{e}");
        let mut s = Sampler::new();
        let me = std::process::id() as i32;
        s.sample(&[me]);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        s.sample(&[me]);
        let e = s.finish().unwrap();
        assert!(e.threads >= 1);
        assert!(e.on_cpu_s > 0.0, "{e:?}");
        assert_eq!(e.rounds, 2);
    }
}
