//! The target's own sockets, sampled through sock_diag during the window:
//! each listener's accept queue against its configured backlog, the
//! target's connections by TCP state, TIME_WAIT on the target's address,
//! Recv-Q/Send-Q distributions, and tcp_info retransmits and RTT.
//!
//! The target's sockets are its listeners and UDP sockets (inodes among
//! the descriptors of the target's process tree), the connections on a
//! listener's address (accepted or still queued), and other connections
//! whose inode the tree holds (its outbound ones). Samples are instants:
//! a queue that filled and drained between two samples is not seen; the
//! counters (`TcpExt.ListenOverflows`) count every overflow.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::load::LoadReport;
use crate::report::units::human_bytes;

/// What the socket samples showed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SocketEvidence {
    /// Sampling rounds that read the socket table.
    pub samples: u64,
    /// Rounds whose dump failed (the error is in `errors`).
    #[serde(default)]
    pub failed_samples: u64,
    /// The target's listening sockets.
    pub listeners: Vec<Listener>,
    /// The target's sockets by TCP state name ("ESTABLISHED",
    /// "CLOSE_WAIT", ...): the most seen in one sample and the mean.
    /// TIME_WAIT sockets belong to no process: see `time_wait`.
    pub states: BTreeMap<String, StateCount>,
    /// Distinct connections of the target seen in at least one sample
    /// (by socket cookie).
    #[serde(default)]
    pub connections_seen: u64,
    /// Receive queues of the target's connections (bytes the application
    /// had not read yet), over every (connection, sample) seen.
    #[serde(default)]
    pub recv_q: Option<Quantiles>,
    /// Send queues of the target's connections (bytes not yet
    /// acknowledged by the peer), over every (connection, sample) seen.
    #[serde(default)]
    pub send_q: Option<Quantiles>,
    /// Smoothed RTT (tcp_info `tcpi_rtt`) of the target's connections,
    /// microseconds, over every (connection, sample) seen.
    #[serde(default)]
    pub rtt_us: Option<Quantiles>,
    /// Retransmitted segments of the target's connections (tcp_info).
    #[serde(default)]
    pub retransmits: Option<Retransmits>,
    /// TIME_WAIT sockets involving the target's address.
    #[serde(default)]
    pub time_wait: Option<TimeWait>,
    /// The target's UDP sockets.
    #[serde(default)]
    pub udp: Vec<UdpSocket>,
    /// Why some samples or parts were not read (first error of each kind).
    #[serde(default)]
    pub errors: Vec<String>,
}

/// One listening socket of the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Listener {
    /// Its local address.
    pub local: String,
    /// The backlog the kernel applies (listen()'s argument capped by
    /// net.core.somaxconn), as sock_diag reports it (`idiag_wqueue`).
    pub backlog: u32,
    /// Longest accept queue (`idiag_rqueue`: connections established but
    /// not yet accepted) seen in one sample.
    pub accept_queue_max: u32,
    /// Mean accept queue over the samples that saw the listener.
    #[serde(default)]
    pub accept_queue_mean: f64,
    /// Samples in which the accept queue was at or above the backlog (the
    /// kernel then drops or refuses new handshakes' completions).
    #[serde(default)]
    pub samples_full: u64,
    /// Samples that saw this listener.
    #[serde(default)]
    pub samples: u64,
    /// Most connections seen in the SYN queue (SYN_RECV on this address)
    /// in one sample.
    #[serde(default)]
    pub syn_queue_max: u64,
}

/// Sockets in one state across the samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StateCount {
    /// Most seen in one sample.
    pub max: u64,
    /// Mean over the samples.
    pub mean: f64,
}

/// A distribution's quantiles.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Quantiles {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

/// Retransmissions counted by tcp_info.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Retransmits {
    /// Sum over the target's connections of the last `tcpi_total_retrans`
    /// each showed (a connection's retransmits after its last sample are
    /// not seen).
    pub total: u64,
    /// Connections with at least one.
    pub connections: u64,
    /// `total` over `SocketEvidence::connections_seen` with tcp_info.
    pub per_connection: f64,
}

/// TIME_WAIT sockets involving the target's serving address, counted in
/// the target's network namespace (a dump about once a second, and once
/// at the end: they are many and cost more to list than the others).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimeWait {
    /// Counts taken.
    pub samples: u64,
    /// Most with the target's address as local end in one count: the
    /// target closed first (server-side active close).
    pub local_max: u64,
    /// Most with the target's address as remote end in one count: a client
    /// in this namespace (a load generator sharing it) closed first; each
    /// holds one of its local ports for 60 s.
    pub remote_max: u64,
    /// Most TIME_WAIT sockets of the whole namespace in one count
    /// (/proc/PID/net/sockstat `tw`).
    pub namespace_max: Option<u64>,
    /// TIME_WAIT sockets on and towards the target's address when the
    /// window began: left by earlier runs or other clients, not this run's.
    /// None: not counted (an artifact written before sockscope took this
    /// count; its `*_max` figures may then include such sockets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<TimeWaitEnds>,
    /// Most in one count that entered TIME_WAIT on the target's address
    /// during the window (absent from `before`): the target closed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_new_max: Option<u64>,
    /// Most in one count that entered TIME_WAIT towards the target's
    /// address during the window: a client in this namespace closed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_new_max: Option<u64>,
    /// `remote_new_max` per client address: the most, from one local
    /// address, in one count. Each holds one of that address's ephemeral
    /// ports towards the target for 60 s (the port range is per source
    /// address and destination), so this is what exhausts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_new_per_source_max: Option<u64>,
    /// The last count, at the end of the window: a snapshot, with how many
    /// of its sockets were already there when the window began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_end: Option<TimeWaitEnd>,
}

/// TIME_WAIT sockets on and towards the target's address at one instant.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TimeWaitEnds {
    /// With the target's address as local end.
    pub local: u64,
    /// With the target's address as remote end.
    pub remote: u64,
}

/// The end-of-window TIME_WAIT snapshot.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TimeWaitEnd {
    /// On the target's address at the end.
    pub local: u64,
    /// Of `local`, those already there when the window began.
    pub local_before: u64,
    /// Towards the target's address at the end.
    pub remote: u64,
    /// Of `remote`, those already there when the window began.
    pub remote_before: u64,
}

/// One UDP socket of the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UdpSocket {
    /// Its local address.
    pub local: String,
    /// Largest receive queue seen, bytes.
    pub recv_q_max: u32,
    /// Datagrams the socket dropped over the window (`SK_MEMINFO_DROPS`,
    /// last sample minus first), when the kernel reports it.
    pub drops: Option<u64>,
}

impl TimeWait {
    /// What the window did, and the end snapshot labelled as one. Only
    /// sockets that entered TIME_WAIT inside the window say who closed
    /// first: those already there were left by earlier runs or other
    /// clients. A count without `before` (an older artifact) is shown as a
    /// count, with no cause.
    pub fn sentences(&self) -> Vec<String> {
        let mut out = Vec::new();
        match (self.local_new_max, self.remote_new_max) {
            (Some(local), Some(remote)) => {
                if local > 0 {
                    out.push(format!(
                        "{local} sockets entered TIME_WAIT on the target's port during the run \
                         (most in one count): the target closed those connections first."
                    ));
                }
                if remote > 0 {
                    out.push(format!(
                        "{remote} sockets entered TIME_WAIT towards the target's port during the \
                         run (most in one count): clients in its namespace closed first, each \
                         holding a local port for 60 s."
                    ));
                }
            }
            _ => {
                if self.local_max + self.remote_max > 0 {
                    out.push(format!(
                        "Most in one count: {} in TIME_WAIT on the target's port, {} towards it \
                         (counts of the namespace's table: they may include sockets left by \
                         earlier runs).",
                        self.local_max, self.remote_max
                    ));
                }
            }
        }
        if let Some(e) = &self.at_end {
            let mut parts = Vec::new();
            if e.local_before > 0 {
                parts.push(format!(
                    "{} in TIME_WAIT on the target's port, {} of them from before this run",
                    e.local, e.local_before
                ));
            }
            if e.remote_before > 0 {
                parts.push(format!(
                    "{} in TIME_WAIT towards it, {} of them from before this run",
                    e.remote, e.remote_before
                ));
            }
            if !parts.is_empty() {
                out.push(format!("At the end: {}.", parts.join("; ")));
            }
        }
        out
    }

    /// The text line's figures.
    fn text(&self) -> String {
        let mut s = format!(
            "TIME_WAIT, most in one count: {} on the target's address, {} towards it{}",
            self.local_max,
            self.remote_max,
            self.namespace_max
                .map_or(String::new(), |n| format!(", {n} in the namespace"))
        );
        if let (Some(l), Some(r)) = (self.local_new_max, self.remote_new_max) {
            s.push_str(&format!("; entered during the run: {l} on, {r} towards"));
        }
        if let Some(b) = &self.before {
            s.push_str(&format!(
                "; before the run: {} on, {} towards",
                b.local, b.remote
            ));
        }
        if let Some(e) = &self.at_end {
            s.push_str(&format!(
                "; at the end: {} on ({} from before), {} towards ({} from before)",
                e.local, e.local_before, e.remote, e.remote_before
            ));
        }
        s
    }
}

impl Quantiles {
    pub(super) fn bytes(&self) -> String {
        format!(
            "p50 {}, p99 {}, max {}",
            human_bytes(self.p50),
            human_bytes(self.p99),
            human_bytes(self.max)
        )
    }
}

impl SocketEvidence {
    /// Text lines.
    pub fn text_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "target's sockets (sock_diag): {} samples{}",
            self.samples,
            if self.failed_samples > 0 {
                format!(", {} failed", self.failed_samples)
            } else {
                String::new()
            }
        )];
        for l in &self.listeners {
            out.push(format!(
                "  listener {}: backlog {}, accept queue max {} mean {:.1}, at the backlog in {} of {} samples{}",
                l.local,
                l.backlog,
                l.accept_queue_max,
                l.accept_queue_mean,
                l.samples_full,
                l.samples,
                if l.syn_queue_max > 0 {
                    format!(", SYN queue max {}", l.syn_queue_max)
                } else {
                    String::new()
                }
            ));
        }
        if !self.states.is_empty() {
            let states: Vec<String> = self
                .states
                .iter()
                .map(|(k, v)| format!("{k} {} (mean {:.1})", v.max, v.mean))
                .collect();
            out.push(format!(
                "  by state, most in one sample: {}",
                states.join(", ")
            ));
        }
        if self.connections_seen > 0 {
            out.push(format!("  connections seen: {}", self.connections_seen));
        }
        if let Some(q) = &self.recv_q {
            out.push(format!("  Recv-Q {}", q.bytes()));
        }
        if let Some(q) = &self.send_q {
            out.push(format!("  Send-Q {}", q.bytes()));
        }
        if let Some(q) = &self.rtt_us {
            out.push(format!(
                "  RTT (tcp_info) p50 {} us, p99 {} us, max {} us",
                q.p50, q.p99, q.max
            ));
        }
        if let Some(r) = &self.retransmits {
            out.push(format!(
                "  retransmitted segments (tcp_info): {} on {} ({:.3} per connection)",
                r.total,
                crate::report::units::counted(r.connections, "connection", "connections"),
                r.per_connection
            ));
        }
        if let Some(t) = &self.time_wait {
            out.push(format!("  {}", t.text()));
        }
        for u in &self.udp {
            out.push(format!(
                "  udp {}: Recv-Q max {}{}",
                u.local,
                human_bytes(u64::from(u.recv_q_max)),
                u.drops.map_or(String::new(), |d| format!(", {d} drops"))
            ));
        }
        for e in &self.errors {
            out.push(format!("  not read: {e}"));
        }
        out
    }

    /// HTML tables.
    pub fn html(&self) -> String {
        use super::table;
        let mut s = String::new();
        if !self.listeners.is_empty() {
            let rows: Vec<Vec<String>> = self
                .listeners
                .iter()
                .map(|l| {
                    vec![
                        l.local.clone(),
                        l.backlog.to_string(),
                        l.accept_queue_max.to_string(),
                        format!("{:.1}", l.accept_queue_mean),
                        format!("{} / {}", l.samples_full, l.samples),
                        l.syn_queue_max.to_string(),
                    ]
                })
                .collect();
            s.push_str(&table(
                &[
                    "listener",
                    "backlog",
                    "accept queue max",
                    "mean",
                    "samples at backlog",
                    "SYN queue max",
                ],
                &rows,
                &[1, 2, 3, 5],
            ));
        }
        let mut rows: Vec<Vec<String>> = self
            .states
            .iter()
            .map(|(k, v)| vec![k.clone(), v.max.to_string(), format!("{:.1}", v.mean)])
            .collect();
        if let Some(t) = &self.time_wait {
            rows.push(vec![
                "TIME_WAIT on the target's address".into(),
                t.local_max.to_string(),
                String::new(),
            ]);
            rows.push(vec![
                "TIME_WAIT towards the target's address".into(),
                t.remote_max.to_string(),
                String::new(),
            ]);
            if let Some(n) = t.namespace_max {
                rows.push(vec![
                    "TIME_WAIT in the namespace".into(),
                    n.to_string(),
                    String::new(),
                ]);
            }
            if let (Some(l), Some(r)) = (t.local_new_max, t.remote_new_max) {
                rows.push(vec![
                    "entered TIME_WAIT during the run, on / towards".into(),
                    format!("{l} / {r}"),
                    String::new(),
                ]);
            }
            if let Some(e) = &t.at_end {
                rows.push(vec![
                    "TIME_WAIT at the end, on / towards (from before the run)".into(),
                    format!(
                        "{} ({}) / {} ({})",
                        e.local, e.local_before, e.remote, e.remote_before
                    ),
                    String::new(),
                ]);
            }
        }
        if !rows.is_empty() {
            s.push_str(&table(
                &["sockets by state", "most in one sample", "mean"],
                &rows,
                &[1, 2],
            ));
        }
        let mut rows = Vec::new();
        for (name, q, bytes) in [
            ("Recv-Q", &self.recv_q, true),
            ("Send-Q", &self.send_q, true),
            ("RTT (tcp_info, us)", &self.rtt_us, false),
        ] {
            if let Some(q) = q {
                let f = |v: u64| {
                    if bytes { human_bytes(v) } else { v.to_string() }
                };
                rows.push(vec![name.into(), f(q.p50), f(q.p99), f(q.max)]);
            }
        }
        if !rows.is_empty() {
            s.push_str(&table(
                &["per connection and sample", "p50", "p99", "max"],
                &rows,
                &[1, 2, 3],
            ));
        }
        let mut rows = vec![];
        if self.connections_seen > 0 {
            rows.push(vec![
                "connections seen".to_string(),
                self.connections_seen.to_string(),
            ]);
        }
        if let Some(r) = &self.retransmits {
            rows.push(vec![
                "retransmitted segments (tcp_info)".into(),
                r.total.to_string(),
            ]);
            rows.push(vec![
                "connections that retransmitted".into(),
                r.connections.to_string(),
            ]);
        }
        for u in &self.udp {
            rows.push(vec![
                format!("udp {} Recv-Q max", u.local),
                human_bytes(u64::from(u.recv_q_max)),
            ]);
            if let Some(d) = u.drops {
                rows.push(vec![format!("udp {} drops", u.local), d.to_string()]);
            }
        }
        if !rows.is_empty() {
            s.push_str(&table(&["connections", "value"], &rows, &[1]));
        }
        s
    }

    /// Sentences the samples support.
    pub fn sentences(&self, _transactions: u64, _load: Option<&LoadReport>) -> Vec<String> {
        let mut out = Vec::new();
        for l in &self.listeners {
            if l.samples_full > 0 {
                out.push(format!(
                    "The accept queue of {} reached its backlog ({}) in {} of {} samples: \
                     connections waited for accept().",
                    l.local, l.backlog, l.samples_full, l.samples
                ));
            }
        }
        if let Some(r) = &self.retransmits
            && r.total > 0
        {
            out.push(format!(
                "The target's connections retransmitted {} segments (tcp_info), on {} of {} \
                 connections seen.",
                r.total, r.connections, self.connections_seen
            ));
        }
        if let Some(t) = &self.time_wait {
            out.extend(t.sentences());
        }
        if let Some(c) = self.states.get("CLOSE_WAIT")
            && c.max > 0
        {
            out.push(format!(
                "Up to {} of the target's connections sat in CLOSE_WAIT: the peer had closed and \
                 the target had not yet.",
                c.max
            ));
        }
        for u in &self.udp {
            if let Some(d) = u.drops
                && d > 0
            {
                out.push(format!(
                    "The UDP socket {} dropped {d} datagrams (SK_MEMINFO_DROPS).",
                    u.local
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> LoadReport {
        let f = crate::report::fixtures::epoll_echo();
        crate::report::fixtures::profile(&f).load.unwrap()
    }

    fn sample() -> SocketEvidence {
        SocketEvidence {
            samples: 52,
            listeners: vec![Listener {
                local: "127.0.0.1:8080".into(),
                backlog: 1,
                accept_queue_max: 2,
                accept_queue_mean: 1.4,
                samples_full: 40,
                samples: 52,
                syn_queue_max: 0,
            }],
            states: [("ESTABLISHED".to_string(), StateCount { max: 3, mean: 2.5 })].into(),
            connections_seen: 10,
            retransmits: Some(Retransmits {
                total: 17,
                connections: 4,
                per_connection: 1.7,
            }),
            time_wait: Some(TimeWait {
                samples: 6,
                local_max: 0,
                remote_max: 9,
                namespace_max: Some(9),
                before: Some(TimeWaitEnds::default()),
                local_new_max: Some(0),
                remote_new_max: Some(9),
                remote_new_per_source_max: Some(9),
                at_end: Some(TimeWaitEnd {
                    remote: 9,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn sentences_say_what_was_measured_only() {
        let s = sample().sentences(0, Some(&load()));
        assert!(
            s.contains(
                &"The accept queue of 127.0.0.1:8080 reached its backlog (1) in 40 of 52 samples: \
              connections waited for accept()."
                    .to_string()
            )
        );
        assert!(s.iter().any(|l| l.starts_with(
            "The target's connections retransmitted 17 segments (tcp_info), on 4 of 10"
        )));
        assert!(
            s.iter()
                .any(|l| l.starts_with("9 sockets entered TIME_WAIT towards"))
        );
        // Nothing about what was zero or not measured.
        assert!(
            !s.iter()
                .any(|l| l.contains("on the target's port: the target closed"))
        );
        assert!(
            !s.iter()
                .any(|l| l.contains("CLOSE_WAIT") || l.contains("UDP"))
        );
        assert_eq!(s.len(), 3, "{s:?}");
        let quiet = SocketEvidence {
            samples: 10,
            ..Default::default()
        };
        assert!(quiet.sentences(0, Some(&load())).is_empty());
    }

    /// Issue 22: 183 sockets in TIME_WAIT on the target's port at the end,
    /// 82 of them there before the run: the causal sentence counts only
    /// the window's, and the end count is labelled as a snapshot.
    #[test]
    fn time_wait_left_by_earlier_runs_is_not_this_runs() {
        let t = TimeWait {
            samples: 5,
            local_max: 183,
            remote_max: 0,
            namespace_max: Some(183),
            before: Some(TimeWaitEnds {
                local: 82,
                remote: 0,
            }),
            local_new_max: Some(101),
            remote_new_max: Some(0),
            remote_new_per_source_max: Some(0),
            at_end: Some(TimeWaitEnd {
                local: 183,
                local_before: 82,
                remote: 0,
                remote_before: 0,
            }),
        };
        let s = t.sentences();
        assert_eq!(
            s,
            [
                "101 sockets entered TIME_WAIT on the target's port during the run (most in one \
                 count): the target closed those connections first.",
                "At the end: 183 in TIME_WAIT on the target's port, 82 of them from before this \
                 run."
            ],
            "{s:?}"
        );
        assert!(!s.iter().any(|l| l.contains("183 sockets")));
        // All of them from before: no sentence says the target closed.
        let old = TimeWait {
            local_new_max: Some(0),
            at_end: Some(TimeWaitEnd {
                local: 82,
                local_before: 82,
                ..Default::default()
            }),
            ..t.clone()
        };
        let s = old.sentences();
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].starts_with("At the end: 82 in TIME_WAIT"), "{s:?}");
        // An artifact without the count at the start: a count, no cause.
        let legacy = TimeWait {
            samples: 5,
            local_max: 183,
            ..Default::default()
        };
        let s = legacy.sentences();
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            s[0].contains("may include sockets left by earlier runs"),
            "{s:?}"
        );
        assert!(!s[0].contains("closed"), "{s:?}");
    }

    #[test]
    fn text_and_html_show_the_listener_and_escape() {
        let mut e = sample();
        e.listeners[0].local = "<x>".into();
        let t = e.text_lines().join("\n");
        assert!(t.contains("backlog 1, accept queue max 2 mean 1.4, at the backlog in 40 of 52"));
        assert!(t.contains("17 on 4 connections"));
        let h = e.html();
        assert!(h.contains("&lt;x&gt;") && !h.contains("<x>"));
        assert!(h.contains("samples at backlog"));
    }

    #[test]
    fn an_old_artifact_without_the_new_fields_still_reads() {
        let e: SocketEvidence = serde_json::from_str(
            r#"{"samples":3,"listeners":[{"local":"a","backlog":5,"accept_queue_max":1}],"states":{}}"#,
        )
        .unwrap();
        assert_eq!(e.listeners[0].backlog, 5);
        assert!(e.time_wait.is_none());
    }
}
