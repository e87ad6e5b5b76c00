//! Run-queue delay: how long the target's threads were runnable but
//! waiting for a CPU, against their time on a CPU, from
//! /proc/PID/task/TID/schedstat sampled during the window.
//!
//! A thread that waits on a run queue had work to do and no CPU to do it
//! on: its CPUs were busy with other tasks (another process, the load
//! generator, the sampler) or with the target's own other threads. The
//! insight is given when the wait is [`NOTABLE_SHARE`] or more of the
//! threads' runnable time and at least [`NOTABLE_WAIT_S`] in total; the
//! text always shows the figures.

use serde::{Deserialize, Serialize};

use crate::report::units::{fmt_count, fmt_pct, fmt_us};

/// Share of runnable time spent waiting above which a sentence is said:
/// below 5% the wait is the normal cost of sharing CPUs (a wake-up, a
/// timer tick) and not worth a line in the insights.
pub const NOTABLE_SHARE: f64 = 0.05;
/// Least total wait for the sentence, seconds: a few milliseconds of
/// waiting over an idle run is a large share of nothing.
pub const NOTABLE_WAIT_S: f64 = 0.01;

/// The target's threads' scheduling over the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SchedEvidence {
    /// Where it was read.
    pub source: String,
    /// Threads seen.
    pub threads: u64,
    /// Time on a CPU, seconds (summed over threads).
    pub on_cpu_s: f64,
    /// Time runnable but waiting for a CPU, seconds (summed over threads).
    pub runqueue_wait_s: f64,
    /// `runqueue_wait_s / (runqueue_wait_s + on_cpu_s)`: the share of the
    /// threads' runnable time spent waiting.
    pub wait_share: f64,
    /// Time slices run (times a thread was put on a CPU), summed.
    #[serde(default)]
    pub timeslices: u64,
    /// Sampling rounds that read the threads.
    #[serde(default)]
    pub rounds: u64,
    /// Threads born after the window opened, counted from 0.
    #[serde(default)]
    pub threads_born_in_window: u64,
    /// Threads born before the window but first read after its first
    /// round (a process that joined the tree mid-run): counted from their
    /// first sample, so their earlier time in the window is missing.
    #[serde(default)]
    pub threads_seen_late: u64,
    /// The thread that waited longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_thread: Option<ThreadSched>,
}

/// One thread's scheduling over the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadSched {
    /// Its process.
    pub pid: i32,
    /// Its thread id.
    pub tid: i32,
    /// Its name (/proc/PID/task/TID/stat).
    pub comm: String,
    /// Time on a CPU, seconds.
    pub on_cpu_s: f64,
    /// Time runnable but waiting, seconds.
    pub runqueue_wait_s: f64,
    /// Its wait over its runnable time.
    pub wait_share: f64,
}

/// `1 thread`, `3 threads`.
fn threads(n: u64) -> String {
    crate::report::units::counted(n, "thread", "threads")
}

impl SchedEvidence {
    /// Mean wait per time slice, microseconds (None without slices).
    pub fn wait_per_slice_us(&self) -> Option<f64> {
        (self.timeslices > 0).then(|| self.runqueue_wait_s * 1e6 / self.timeslices as f64)
    }

    /// Whether the wait is worth a sentence ([`NOTABLE_SHARE`],
    /// [`NOTABLE_WAIT_S`]).
    pub fn notable(&self) -> bool {
        self.wait_share >= NOTABLE_SHARE && self.runqueue_wait_s >= NOTABLE_WAIT_S
    }

    /// Text lines: always the totals, then the thread that waited most
    /// and how threads that came or went were counted.
    pub fn text_lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "run-queue delay: {} waited {} of their runnable time for a CPU ({:.3} s \
             runnable but waiting against {:.3} s on a CPU; {} time slices{})",
            threads(self.threads),
            fmt_pct(self.wait_share * 100.0),
            self.runqueue_wait_s,
            self.on_cpu_s,
            fmt_count(self.timeslices),
            self.wait_per_slice_us()
                .map_or_else(String::new, |w| format!(", {} waited per slice", fmt_us(w)))
        )];
        if let Some(w) = &self.worst_thread {
            lines.push(format!(
                "  waited most: thread {} ({}) of pid {}: {:.3} s waiting, {:.3} s on a CPU ({})",
                w.tid,
                w.comm,
                w.pid,
                w.runqueue_wait_s,
                w.on_cpu_s,
                fmt_pct(w.wait_share * 100.0)
            ));
        }
        if self.threads_born_in_window > 0 || self.threads_seen_late > 0 {
            lines.push(format!(
                "  {} born in the window counted from their start; {} first seen mid-window \
                 counted from then",
                threads(self.threads_born_in_window),
                self.threads_seen_late
            ));
        }
        lines
    }

    /// HTML: the totals and the thread that waited most.
    pub fn html(&self) -> String {
        let mut rows = vec![vec![
            format!("all {} threads", self.threads),
            format!("{:.3}", self.on_cpu_s),
            format!("{:.3}", self.runqueue_wait_s),
            fmt_pct(self.wait_share * 100.0),
            fmt_count(self.timeslices),
        ]];
        if let Some(w) = &self.worst_thread {
            rows.push(vec![
                format!("waited most: {} ({}) of pid {}", w.tid, w.comm, w.pid),
                format!("{:.3}", w.on_cpu_s),
                format!("{:.3}", w.runqueue_wait_s),
                fmt_pct(w.wait_share * 100.0),
                "-".into(),
            ]);
        }
        format!(
            "<h4>Run-queue delay</h4>{}<p class=\"lead\">Time the target's threads were runnable \
             but waiting for a CPU (schedstat), against their time on one; waiting share = \
             waiting / (waiting + on a CPU).</p>",
            super::table(
                &[
                    "threads",
                    "on a CPU, s",
                    "waiting, s",
                    "waiting share",
                    "time slices"
                ],
                &rows,
                &[1, 2, 3, 4],
            )
        )
    }

    /// The sentence, when the wait is notable ([`Self::notable`]).
    pub fn sentences(&self, transactions: u64) -> Vec<String> {
        if !self.notable() {
            return Vec::new();
        }
        let per_tx = if transactions > 0 {
            format!(
                ", {} of waiting per transaction",
                fmt_us(self.runqueue_wait_s * 1e6 / transactions as f64)
            )
        } else {
            String::new()
        };
        vec![format!(
            "The target's threads waited {} of their runnable time for a CPU ({:.3} s runnable \
             but waiting against {:.3} s on a CPU{per_tx}): their CPUs were busy with other tasks \
             or with each other.",
            fmt_pct(self.wait_share * 100.0),
            self.runqueue_wait_s,
            self.on_cpu_s
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(on: f64, wait: f64) -> SchedEvidence {
        SchedEvidence {
            source: "test".into(),
            threads: 3,
            on_cpu_s: on,
            runqueue_wait_s: wait,
            wait_share: wait / (on + wait),
            timeslices: 12_000,
            rounds: 20,
            threads_born_in_window: 1,
            threads_seen_late: 0,
            worst_thread: Some(ThreadSched {
                pid: 100,
                tid: 101,
                comm: "worker".into(),
                on_cpu_s: on / 2.0,
                runqueue_wait_s: wait,
                wait_share: wait / (on / 2.0 + wait),
            }),
        }
    }

    #[test]
    fn a_notable_wait_is_said_and_always_shown() {
        let e = ev(1.234, 0.554);
        let s = e.sentences(10_000);
        assert_eq!(
            s,
            vec![
                "The target's threads waited 31% of their runnable time for a CPU (0.554 s \
                 runnable but waiting against 1.234 s on a CPU, 55.4 us of waiting per \
                 transaction): their CPUs were busy with other tasks or with each other."
                    .to_string()
            ]
        );
        let t = e.text_lines().join("\n");
        assert!(
            t.contains("3 threads waited 31% of their runnable time"),
            "{t}"
        );
        assert!(
            t.contains("12,000 time slices, 46.2 us waited per slice"),
            "{t}"
        );
        assert!(t.contains("thread 101 (worker) of pid 100"), "{t}");
        assert!(t.contains("1 thread born in the window"), "{t}");
        assert!(e.html().contains("waited most: 101 (worker)"));
    }

    #[test]
    fn a_small_wait_is_shown_but_not_said() {
        // 4% of runnable time: below the threshold.
        let e = ev(1.0, 0.0417);
        assert!(e.sentences(0).is_empty());
        assert!(
            e.text_lines()[0].contains("waited 4% of"),
            "{:?}",
            e.text_lines()
        );
        // A large share of almost nothing: not said either.
        let e = ev(0.001, 0.005);
        assert!(e.wait_share > 0.5);
        assert!(e.sentences(0).is_empty());
        // No transactions: no per-transaction figure.
        let s = ev(1.0, 1.0).sentences(0);
        assert!(
            s[0].contains("50%") && !s[0].contains("per transaction"),
            "{s:?}"
        );
    }

    #[test]
    fn older_fields_default() {
        let e: SchedEvidence = serde_json::from_str(
            r#"{"source":"x","threads":1,"on_cpu_s":1.0,"runqueue_wait_s":0.0,"wait_share":0.0}"#,
        )
        .unwrap();
        assert_eq!(e.timeslices, 0);
        assert!(e.worst_thread.is_none());
        assert_eq!(e.wait_per_slice_us(), None);
    }
}
