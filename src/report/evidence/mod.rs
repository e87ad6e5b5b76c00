//! Kernel-side evidence of a profile (run.json `evidence`): what the kernel
//! counted, queued and scheduled around the target during the window.
//! Four parts, each filled by its own collector in `run/profile/collect/`
//! and each rendering its own text lines, HTML and sentences here:
//!
//! - [`counters`]: deltas of /proc/net/snmp, /proc/net/netstat,
//!   /proc/net/snmp6 and /proc/net/softnet_stat over the window, read in the
//!   target's network namespace;
//! - [`sockets`]: the target's own sockets sampled through sock_diag
//!   (accept queue against backlog, states, queues, tcp_info);
//! - [`unix`]: the target's Unix-domain sockets sampled through sock_diag
//!   (UNIX_DIAG) when it serves a Unix socket (accept queue against
//!   backlog, connected sockets and their queues);
//! - [`sched`]: how long the target's threads were runnable but waiting
//!   for a CPU (schedstat), against their time on a CPU.
//!
//! Nothing here measures: the figures come from the artifact, so `report`
//! re-renders them from the JSON alone.

pub mod counters;
pub mod sched;
pub mod sockets;
pub mod unix;

use serde::{Deserialize, Serialize};

pub use counters::CounterDeltas;
pub use sched::SchedEvidence;
pub use sockets::SocketEvidence;
pub use unix::UnixEvidence;

use super::load::LoadReport;
use super::table::Table;

/// Everything the kernel said about the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelEvidence {
    /// The network namespace the counters and sockets were read in.
    pub netns: Netns,
    /// Counter deltas over the window (None when none could be read; the
    /// reason is in `unavailable`).
    #[serde(default)]
    pub counters: Option<CounterDeltas>,
    /// The target's sockets, sampled.
    #[serde(default)]
    pub sockets: Option<SocketEvidence>,
    /// The target's Unix sockets, sampled (a target that serves a Unix
    /// socket; absent otherwise, and in artifacts written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix: Option<UnixEvidence>,
    /// Run-queue delay of the target's threads.
    #[serde(default)]
    pub sched: Option<SchedEvidence>,
    /// What could not be read, one line each ("sock_diag: Operation not
    /// permitted", "TcpExt.TCPRcvQDrop: not counted by this kernel").
    #[serde(default)]
    pub unavailable: Vec<String>,
    /// What collecting the evidence cost.
    pub cost: EvidenceCost,
}

/// Which network namespace the evidence describes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Netns {
    /// `net:[INODE]` of the target (as /proc/PID/ns/net names it).
    pub id: String,
    /// Whether sockscope's load generator ran in the same namespace (its
    /// connections then count in the same counters).
    pub shared_with_generator: bool,
}

/// The cost of the evidence sampler.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EvidenceCost {
    /// Sampling rounds taken (sockets and schedstat).
    pub samples: u64,
    /// Planned pause between rounds, milliseconds.
    pub interval_ms: u64,
    /// CPU time the sampler thread used, seconds.
    pub sampler_cpu_s: f64,
    /// `sampler_cpu_s` over the window: the share of one CPU it used.
    pub sampler_cpu_share: f64,
}

impl KernelEvidence {
    /// The text block of summary.txt (no trailing newline; empty lines are
    /// not produced). Only non-zero counters are listed.
    pub fn text(&self) -> String {
        let mut lines = vec![format!(
            "network namespace {}{}",
            self.netns.id,
            if self.netns.shared_with_generator {
                " (shared with the load generator: its connections count too)"
            } else {
                ""
            }
        )];
        if let Some(c) = &self.counters {
            lines.extend(c.text_lines());
        }
        if let Some(s) = &self.sockets {
            lines.extend(s.text_lines());
        }
        if let Some(u) = &self.unix {
            lines.extend(u.text_lines());
        }
        if let Some(s) = &self.sched {
            lines.extend(s.text_lines());
        }
        for u in &self.unavailable {
            lines.push(format!("not measured: {u}"));
        }
        lines.push(format!(
            "sampler: {} rounds every {} ms, {:.3} s CPU ({:.2}% of one CPU)",
            self.cost.samples,
            self.cost.interval_ms,
            self.cost.sampler_cpu_s,
            self.cost.sampler_cpu_share * 100.0
        ));
        lines.join("\n")
    }

    /// The HTML section body (tables and lists, no `<section>` wrapper).
    pub fn html(&self) -> String {
        let mut s = String::new();
        if let Some(c) = &self.counters {
            s.push_str(&c.html());
        }
        if let Some(k) = &self.sockets {
            s.push_str(&k.html());
        }
        if let Some(u) = &self.unix {
            s.push_str(&u.html());
        }
        if let Some(k) = &self.sched {
            s.push_str(&k.html());
        }
        s
    }

    /// The sentences this evidence supports, for the report's insights;
    /// `transactions`: the profile's `derived.transactions`, for
    /// per-transaction figures; `load`: sockscope's own load, if it was. Nothing is
    /// said that was not measured.
    pub fn sentences(&self, transactions: u64, load: Option<&LoadReport>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.counters {
            out.extend(c.sentences(self.sockets.as_ref(), transactions, load));
        }
        if let Some(s) = &self.sockets {
            out.extend(s.sentences(transactions, load));
        }
        if let Some(u) = &self.unix {
            out.extend(u.sentences());
        }
        if let Some(s) = &self.sched {
            out.extend(s.sentences(transactions));
        }
        out
    }
}

/// An HTML table for an evidence section (the same markup as
/// `report::html::table`, which imports this module's parent schema and so
/// cannot be imported back).
fn table(headers: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> String {
    Table::for_page(headers, numeric, rows.to_vec()).to_html()
}
