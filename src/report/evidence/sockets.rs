//! The target's own sockets, sampled through sock_diag during the window:
//! each listener's accept queue against its configured backlog, the
//! target's connections by TCP state, TIME_WAIT on the target's address,
//! Recv-Q/Send-Q distributions, and tcp_info retransmits and RTT.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::load::LoadReport;
use crate::report::profile::Derived;

/// What the socket samples showed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SocketEvidence {
    /// Sampling rounds that read the socket table.
    pub samples: u64,
    /// The target's listening sockets.
    pub listeners: Vec<Listener>,
    /// The target's sockets by TCP state name ("ESTABLISHED",
    /// "CLOSE_WAIT", ...): the most seen in one sample and the mean.
    pub states: BTreeMap<String, StateCount>,
}

/// One listening socket of the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Listener {
    /// Its local address.
    pub local: String,
    /// The backlog the kernel applies (listen()'s argument capped by
    /// net.core.somaxconn).
    pub backlog: u32,
    /// Longest accept queue seen in one sample.
    pub accept_queue_max: u32,
}

/// Sockets in one state across the samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StateCount {
    /// Most seen in one sample.
    pub max: u64,
    /// Mean over the samples.
    pub mean: f64,
}

impl SocketEvidence {
    /// Text lines.
    pub fn text_lines(&self) -> Vec<String> {
        Vec::new()
    }

    /// HTML tables.
    pub fn html(&self) -> String {
        String::new()
    }

    /// Sentences the samples support.
    pub fn sentences(&self, _derived: &Derived, _load: &LoadReport) -> Vec<String> {
        Vec::new()
    }
}
