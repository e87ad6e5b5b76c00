//! The target's own Unix-domain sockets, sampled through sock_diag
//! (UNIX_DIAG) during the window, when the target serves a Unix socket:
//! each listener's accept queue against its backlog limit, the connected
//! stream sockets (how many, and the bytes queued each way), and the
//! datagram sockets' next waiting datagram.
//!
//! The target's sockets are those whose inode the target's process tree
//! holds, and the connections accepted from one of its listeners (they
//! carry the listener's name, so a connection that lived between two
//! descriptor walks is still seen). Samples are instants: a queue that
//! filled and drained between two samples is not seen.

use serde::{Deserialize, Serialize};

use super::sockets::Quantiles;
use crate::report::units::human_bytes;

/// What the Unix socket samples showed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnixEvidence {
    /// Sampling rounds that read the socket table.
    pub samples: u64,
    /// Rounds whose dump failed (the error is in `errors`).
    #[serde(default)]
    pub failed_samples: u64,
    /// The target's listening sockets.
    #[serde(default)]
    pub listeners: Vec<UnixListener>,
    /// The target's connected stream (and seqpacket) sockets.
    #[serde(default)]
    pub connected: UnixConnections,
    /// The target's datagram sockets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datagram: Vec<UnixDatagram>,
    /// Why some samples were not read (first error of each kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// One listening Unix socket of the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnixListener {
    /// Its name: a path, or `@name` for an abstract one.
    pub name: String,
    /// "stream" or "seqpacket".
    pub kind: String,
    /// The backlog limit the kernel applies (listen()'s argument capped by
    /// net.core.somaxconn; sock_diag's `udiag_wqueue`).
    pub backlog: u32,
    /// Connections waiting to be accepted (`udiag_rqueue`), over the
    /// samples that saw the listener.
    pub accept_queue: Quantiles,
    /// Samples in which the queue was full: above the backlog, where the
    /// kernel makes a connecting client wait (or refuses it with EAGAIN).
    pub samples_full: u64,
    /// Samples that saw this listener.
    pub samples: u64,
}

/// The target's connected stream sockets across the samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnixConnections {
    /// Most seen in one sample.
    pub max: u64,
    /// Mean over the samples.
    pub mean: f64,
    /// Distinct ones seen in at least one sample (by socket cookie).
    pub seen: u64,
    /// Bytes queued for the target to read, over every (socket, sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_q: Option<Quantiles>,
    /// Bytes the target sent that its peer had not read yet (with their
    /// buffers' overhead), over every (socket, sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_q: Option<Quantiles>,
}

/// One datagram socket of the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnixDatagram {
    /// Its name (a path or `@name`), or `inode N` when unbound.
    pub name: String,
    /// Samples in which a datagram waited to be read.
    pub samples_waiting: u64,
    /// Samples that saw the socket.
    pub samples: u64,
    /// Longest waiting datagram seen, bytes (sock_diag reports the next
    /// datagram's length, not the queue's).
    pub next_datagram_max: u32,
}

impl UnixListener {
    /// The sentence about its accept queue: full in some samples, or how
    /// high it went against the limit.
    fn sentence(&self) -> Option<String> {
        if self.samples == 0 {
            return None;
        }
        Some(if self.samples_full > 0 {
            format!(
                "The Unix listener {}'s accept queue was full in {} of {} samples (backlog {}): \
                 connecting clients waited.",
                self.name, self.samples_full, self.samples, self.backlog
            )
        } else {
            format!(
                "The Unix listener {}'s accept queue was never above {} of {} in {} samples.",
                self.name, self.accept_queue.max, self.backlog, self.samples
            )
        })
    }
}

impl UnixEvidence {
    /// Text lines.
    pub fn text_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "target's Unix sockets (sock_diag): {} samples{}",
            self.samples,
            if self.failed_samples > 0 {
                format!(", {} failed", self.failed_samples)
            } else {
                String::new()
            }
        )];
        for l in &self.listeners {
            let q = &l.accept_queue;
            out.push(format!(
                "  listener {} ({}): backlog {}, accept queue p50 {} p99 {} max {}, full in {} of {} samples",
                l.name, l.kind, l.backlog, q.p50, q.p99, q.max, l.samples_full, l.samples
            ));
        }
        let c = &self.connected;
        out.push(format!(
            "  connected stream sockets: most in one sample {} (mean {:.1}), {} seen",
            c.max, c.mean, c.seen
        ));
        if let Some(q) = &c.recv_q {
            out.push(format!("  Recv-Q {}", q.bytes()));
        }
        if let Some(q) = &c.send_q {
            out.push(format!("  Send-Q {}", q.bytes()));
        }
        for d in &self.datagram {
            out.push(format!(
                "  datagram {}: a datagram waiting in {} of {} samples, longest {}",
                d.name,
                d.samples_waiting,
                d.samples,
                human_bytes(u64::from(d.next_datagram_max))
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
                        l.name.clone(),
                        l.kind.clone(),
                        l.backlog.to_string(),
                        l.accept_queue.p50.to_string(),
                        l.accept_queue.p99.to_string(),
                        l.accept_queue.max.to_string(),
                        format!("{} / {}", l.samples_full, l.samples),
                    ]
                })
                .collect();
            s.push_str(&table(
                &[
                    "Unix listener",
                    "type",
                    "backlog",
                    "accept queue p50",
                    "p99",
                    "max",
                    "samples full",
                ],
                &rows,
                &[2, 3, 4, 5],
            ));
        }
        let c = &self.connected;
        let mut rows = vec![
            vec![
                "connected stream sockets, most in one sample".to_string(),
                c.max.to_string(),
            ],
            vec![
                "connected stream sockets, mean".into(),
                format!("{:.1}", c.mean),
            ],
            vec!["connected stream sockets seen".into(), c.seen.to_string()],
        ];
        for (name, q) in [("Recv-Q", &c.recv_q), ("Send-Q", &c.send_q)] {
            if let Some(q) = q {
                rows.push(vec![format!("{name} p50 / p99 / max"), q.bytes()]);
            }
        }
        for d in &self.datagram {
            rows.push(vec![
                format!("datagram {}: samples with a datagram waiting", d.name),
                format!("{} / {}", d.samples_waiting, d.samples),
            ]);
            rows.push(vec![
                format!("datagram {}: longest waiting datagram", d.name),
                human_bytes(u64::from(d.next_datagram_max)),
            ]);
        }
        s.push_str(&table(&["Unix sockets", "value"], &rows, &[1]));
        s
    }

    /// Sentences the samples support.
    pub fn sentences(&self) -> Vec<String> {
        self.listeners.iter().filter_map(|l| l.sentence()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> UnixEvidence {
        UnixEvidence {
            samples: 50,
            listeners: vec![
                UnixListener {
                    name: "/run/app.sock".into(),
                    kind: "stream".into(),
                    backlog: 2,
                    accept_queue: Quantiles {
                        count: 50,
                        p50: 3,
                        p99: 3,
                        max: 3,
                    },
                    samples_full: 48,
                    samples: 50,
                },
                UnixListener {
                    name: "@<quiet>".into(),
                    kind: "seqpacket".into(),
                    backlog: 511,
                    accept_queue: Quantiles {
                        count: 50,
                        p50: 0,
                        p99: 2,
                        max: 3,
                    },
                    samples_full: 0,
                    samples: 50,
                },
            ],
            connected: UnixConnections {
                max: 4,
                mean: 3.5,
                seen: 6,
                recv_q: Some(Quantiles {
                    count: 175,
                    p50: 0,
                    p99: 512,
                    max: 2048,
                }),
                send_q: None,
            },
            ..Default::default()
        }
    }

    #[test]
    fn sentences_say_full_or_how_high_against_the_backlog() {
        assert_eq!(
            sample().sentences(),
            [
                "The Unix listener /run/app.sock's accept queue was full in 48 of 50 samples \
                 (backlog 2): connecting clients waited.",
                "The Unix listener @<quiet>'s accept queue was never above 3 of 511 in 50 samples."
            ]
        );
        // A listener never sampled says nothing.
        let mut e = sample();
        e.listeners.iter_mut().for_each(|l| l.samples = 0);
        assert!(e.sentences().is_empty());
    }

    #[test]
    fn text_and_html_show_what_was_measured_and_escape() {
        let e = sample();
        let t = e.text_lines().join("\n");
        assert!(t.contains(
            "listener /run/app.sock (stream): backlog 2, accept queue p50 3 p99 3 max 3, full in \
             48 of 50 samples"
        ));
        assert!(t.contains("connected stream sockets: most in one sample 4 (mean 3.5), 6 seen"));
        assert!(t.contains("Recv-Q p50 0 B"), "{t}");
        // Not measured: no line, no zeros.
        assert!(!t.contains("Send-Q") && !t.contains("datagram"), "{t}");
        let h = e.html();
        assert!(h.contains("&lt;quiet&gt;") && !h.contains("<quiet>"));
        assert!(h.contains("48 / 50") && !h.contains("Send-Q"));
    }

    #[test]
    fn a_json_without_the_optional_parts_reads_and_writes_none_of_them() {
        let e: UnixEvidence = serde_json::from_str(r#"{"samples":3}"#).unwrap();
        assert_eq!(e.samples, 3);
        assert!(e.listeners.is_empty() && e.datagram.is_empty());
        let v = serde_json::to_value(&e).unwrap();
        assert!(v.get("datagram").is_none() && v.get("errors").is_none());
        assert!(v["connected"].get("recv_q").is_none());
    }
}
