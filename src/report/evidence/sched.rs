//! Run-queue delay: how long the target's threads were runnable but
//! waiting for a CPU, against their time on a CPU, from
//! /proc/PID/task/TID/schedstat sampled during the window.

use serde::{Deserialize, Serialize};

use crate::report::profile::Derived;

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
}

impl SchedEvidence {
    /// Text lines.
    pub fn text_lines(&self) -> Vec<String> {
        Vec::new()
    }

    /// HTML.
    pub fn html(&self) -> String {
        String::new()
    }

    /// Sentences the scheduling figures support.
    pub fn sentences(&self, _derived: &Derived) -> Vec<String> {
        Vec::new()
    }
}
