//! Kernel counter deltas over a profile's window: every field of
//! /proc/net/snmp and /proc/net/netstat (`Tcp.RetransSegs`,
//! `TcpExt.ListenOverflows`, ...), /proc/net/snmp6 (`Udp6.RcvbufErrors`,
//! ...) and the per-CPU sums of /proc/net/softnet_stat (`softnet.dropped`,
//! `softnet.time_squeeze`), read in the target's network namespace.
//!
//! The snmp/netstat/snmp6 counters are per network namespace, not per
//! process: every socket of the namespace counts (the load generator's
//! too when it shares the namespace). softnet_stat is per CPU and
//! machine-wide. Gauges (`Tcp.CurrEstab`) are kept apart, in `gauges`,
//! with their value before and after: an increase of a gauge is not a
//! count of events.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::sockets::SocketEvidence;
use crate::report::load::LoadReport;
use crate::report::units::fmt_count;

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
    /// Where they were read ("/proc/PID/net/{snmp,netstat,snmp6} (the
    /// target's network namespace), /proc/net/softnet_stat (machine-wide,
    /// summed over CPUs)").
    pub source: String,
    /// Every counter's increase (counters that went down, i.e. wrapped or
    /// were reset, count 0).
    pub deltas: BTreeMap<String, u64>,
    /// Gauges (`Tcp.CurrEstab`: connections established at that moment),
    /// before and after the window; not in `deltas`.
    #[serde(default)]
    pub gauges: BTreeMap<String, Gauge>,
}

/// A gauge's value at both ends of the window.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Gauge {
    /// At the start (None: not read then).
    pub before: Option<u64>,
    /// At the end.
    pub after: u64,
}

/// Width the text wraps at (the summary indents it by two).
const WIDTH: usize = 94;

/// The file a counter comes from, for people: its group says which.
pub fn file_of(name: &str) -> &'static str {
    let group = name.split('.').next().unwrap_or("");
    match group {
        "softnet" => "softnet_stat, machine-wide",
        "Ip" | "Icmp" | "IcmpMsg" | "Tcp" | "Udp" | "UdpLite" => "snmp",
        g if g.ends_with('6') => "snmp6",
        _ => "netstat",
    }
}

/// `items` after `head`, separated by ", ", in lines of at most `width`
/// characters (an item longer than that gets a line of its own); a
/// continuation line is indented past `head`'s first word.
fn pack(head: &str, items: &[String], width: usize) -> Vec<String> {
    let indent = " ".repeat(head.len() - head.trim_start().len() + 2);
    let mut lines = Vec::new();
    let mut line = head.to_string();
    let mut fresh = true;
    for (i, item) in items.iter().enumerate() {
        let sep = if i + 1 < items.len() { "," } else { "" };
        if !fresh && line.len() + 1 + item.len() + sep.len() > width {
            lines.push(line);
            line = indent.clone();
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(item);
        line.push_str(sep);
        fresh = false;
    }
    lines.push(line);
    lines
}

impl CounterDeltas {
    /// The increase of `name` (`TcpExt.ListenOverflows`), 0 when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.deltas.get(name).copied().unwrap_or(0)
    }

    /// The non-zero counters, the [`NAMED`] ones first (in their order),
    /// then the others by name.
    pub fn moved(&self) -> Vec<(&str, u64)> {
        let named = NAMED
            .iter()
            .filter_map(|n| Some((*n, *self.deltas.get(*n)?)))
            .filter(|(_, v)| *v > 0);
        let others = self
            .deltas
            .iter()
            .filter(|(k, v)| **v > 0 && !NAMED.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), *v));
        named.chain(others).collect()
    }

    /// Text lines: the non-zero counters only, the named ones one a line
    /// with their file, the others grouped a line per group; then the
    /// gauges.
    pub fn text_lines(&self) -> Vec<String> {
        let mut lines = vec![
            "counters, increase over the window (per network namespace, not per process; \
             softnet machine-wide):"
                .to_string(),
        ];
        let moved = self.moved();
        if moved.is_empty() {
            lines.push("  none moved".into());
        }
        let named: Vec<_> = moved
            .iter()
            .filter(|(k, _)| NAMED.contains(k))
            .copied()
            .collect();
        let width = named.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let vwidth = named
            .iter()
            .map(|(_, v)| fmt_count(*v).len() + 1)
            .max()
            .unwrap_or(0);
        for (k, v) in &named {
            lines.push(format!(
                "  {k:<width$} {:>vwidth$}  ({})",
                format!("+{}", fmt_count(*v)),
                file_of(k)
            ));
        }
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (k, v) in moved.iter().filter(|(k, _)| !NAMED.contains(k)) {
            let (group, field) = k.split_once('.').unwrap_or(("", k));
            groups
                .entry(group)
                .or_default()
                .push(format!("{field} +{}", fmt_count(*v)));
        }
        if !groups.is_empty() {
            lines.push("  others that moved:".into());
        }
        for (group, fields) in groups {
            let head = format!("    {group} ({}): ", file_of(&format!("{group}.x")));
            lines.extend(pack(&head, &fields, WIDTH));
        }
        // A gauge at 0 at both ends says nothing.
        for (k, g) in self
            .gauges
            .iter()
            .filter(|(_, g)| g.after > 0 || g.before.unwrap_or(0) > 0)
        {
            lines.push(match g.before {
                Some(b) => format!(
                    "  {k} (a gauge, not a count): {b} at the start, {} at the end",
                    g.after
                ),
                None => format!("  {k} (a gauge, not a count): {} at the end", g.after),
            });
        }
        lines
    }

    /// HTML table of the non-zero counters (named ones first) and the
    /// gauges.
    pub fn html(&self) -> String {
        let mut rows: Vec<Vec<String>> = self
            .moved()
            .iter()
            .map(|(k, v)| {
                vec![
                    (*k).to_string(),
                    format!("+{}", fmt_count(*v)),
                    file_of(k).into(),
                ]
            })
            .collect();
        for (k, g) in &self.gauges {
            rows.push(vec![
                format!("{k} (gauge)"),
                match g.before {
                    Some(b) => format!("{b} \u{2192} {}", g.after),
                    None => g.after.to_string(),
                },
                file_of(k).into(),
            ]);
        }
        let mut s = String::from("<h4>Counters that moved</h4>");
        if rows.is_empty() {
            s.push_str("<p>No counter moved over the window.</p>");
            return s;
        }
        s.push_str(&super::table(&["counter", "increase", "from"], &rows, &[1]));
        let _ = write!(
            s,
            "<p class=\"lead\">Per network namespace, not per process (softnet: every CPU of the \
             machine). Every counter, zeros included, is in run.json.</p>"
        );
        s
    }

    /// Sentences the counters support (with the socket evidence, when
    /// sampled, to name the backlog). Each names the counter it rests on;
    /// a counter that did not move says nothing.
    pub fn sentences(
        &self,
        sockets: Option<&SocketEvidence>,
        transactions: u64,
        load: Option<&LoadReport>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.listen_sentence(sockets, load));
        out.extend(self.retransmit_sentence(transactions));
        out.extend(self.udp_sentences(load));
        let n = |k: &str| fmt_count(self.get(k));
        // `1 connection was`, `2 connections were`.
        let were = |k: &str, one: &str, many: &str| {
            let v = self.get(k);
            format!("{} {}", fmt_count(v), if v == 1 { one } else { many })
        };
        if self.get("TcpExt.TCPTimeWaitOverflow") > 0 {
            out.push(format!(
                "{} closing connections skipped TIME_WAIT because the namespace already held \
                 net.ipv4.tcp_max_tw_buckets of them (TcpExt.TCPTimeWaitOverflow).",
                n("TcpExt.TCPTimeWaitOverflow")
            ));
        }
        if self.get("TcpExt.TCPBacklogDrop") > 0 {
            out.push(format!(
                "{} TCP segments were dropped because a socket's backlog was full while its \
                 owner held the socket (TcpExt.TCPBacklogDrop).",
                n("TcpExt.TCPBacklogDrop")
            ));
        }
        if self.get("TcpExt.TCPRcvQDrop") > 0 {
            out.push(format!(
                "{} TCP segments were dropped because a socket's receive buffer was full: its \
                 reader did not keep up (TcpExt.TCPRcvQDrop).",
                n("TcpExt.TCPRcvQDrop")
            ));
        }
        if self.get("TcpExt.TCPAbortOnClose") > 0 {
            out.push(format!(
                "{} reset because {} closed with unread data in {} \
                 receive queue (TcpExt.TCPAbortOnClose).",
                were(
                    "TcpExt.TCPAbortOnClose",
                    "connection was",
                    "connections were"
                ),
                if self.get("TcpExt.TCPAbortOnClose") == 1 {
                    "it was"
                } else {
                    "they were"
                },
                if self.get("TcpExt.TCPAbortOnClose") == 1 {
                    "its"
                } else {
                    "their"
                }
            ));
        }
        if self.get("TcpExt.TCPAbortOnData") > 0 {
            out.push(format!(
                "{} reset by a close with SO_LINGER 0 or by data arriving after \
                 close (TcpExt.TCPAbortOnData){}.",
                were(
                    "TcpExt.TCPAbortOnData",
                    "connection was",
                    "connections were"
                ),
                if load.is_some_and(|l| l.config.close.as_deref() == Some("rst")) {
                    "; the load closes its connections that way (--close rst)"
                } else {
                    ""
                }
            ));
        }
        if self.get("softnet.dropped") > 0 {
            out.push(format!(
                "{} packets were dropped because a CPU's input backlog was full \
                 (softnet.dropped, machine-wide: net.core.netdev_max_backlog).",
                n("softnet.dropped")
            ));
        }
        if self.get("softnet.time_squeeze") > 0 {
            out.push(format!(
                "The receive softirq ran out of budget with packets left {} times \
                 (softnet.time_squeeze, machine-wide: net.core.netdev_budget, \
                 netdev_budget_usecs).",
                n("softnet.time_squeeze")
            ));
        }
        out
    }

    /// Accept-queue overflows, with the backlog sock_diag saw.
    fn listen_sentence(
        &self,
        sockets: Option<&SocketEvidence>,
        load: Option<&LoadReport>,
    ) -> Option<String> {
        let (over, drops) = (
            self.get("TcpExt.ListenOverflows"),
            self.get("TcpExt.ListenDrops"),
        );
        if over == 0 && drops == 0 {
            return None;
        }
        if over == 0 {
            return Some(format!(
                "{} dropped at a listener without its accept queue \
                 overflowing (TcpExt.ListenDrops; TcpExt.ListenOverflows did not move).",
                if drops == 1 {
                    "1 connection attempt was".to_string()
                } else {
                    format!("{} connection attempts were", fmt_count(drops))
                }
            ));
        }
        let listeners = sockets.map_or(&[][..], |s| s.listeners.as_slice());
        let backlog = match listeners {
            [] => "the listen backlog".to_string(),
            [l] => format!(
                "the listen backlog ({} on {}, listen()'s argument capped by net.core.somaxconn; \
                 at most {} waiting in one sample)",
                fmt_count(u64::from(l.backlog)),
                l.local,
                fmt_count(u64::from(l.accept_queue_max))
            ),
            ls => format!(
                "the listen backlogs ({}; listen()'s argument capped by net.core.somaxconn)",
                ls.iter()
                    .map(|l| format!("{} on {}", fmt_count(u64::from(l.backlog)), l.local))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let burst = match load.map(|l| (l.workload.as_str(), l.config.connections)) {
            Some(("tcp-crr", Some(c))) => {
                format!(" of up to {} connects at once", fmt_count(c as u64))
            }
            _ => String::new(),
        };
        let mut s = format!(
            "The accept queue overflowed {} times (TcpExt.ListenOverflows): {backlog} is below the \
             connect burst{burst}, or the target accepts too slowly",
            fmt_count(over)
        );
        if drops > over {
            let _ = write!(
                s,
                "; {} more connection attempts were dropped at a listener for other reasons \
                 (TcpExt.ListenDrops counts both)",
                fmt_count(drops - over)
            );
        }
        s.push('.');
        Some(s)
    }

    /// Retransmitted segments, per transaction, and the SYNs among them.
    fn retransmit_sentence(&self, transactions: u64) -> Option<String> {
        let (segs, syns) = (
            self.get("Tcp.RetransSegs"),
            self.get("TcpExt.TCPSynRetrans"),
        );
        if segs == 0 && syns == 0 {
            return None;
        }
        let mut s = format!(
            "{} TCP segments were retransmitted (Tcp.RetransSegs)",
            fmt_count(segs)
        );
        if transactions > 0 {
            let per = segs as f64 / transactions as f64;
            let _ = if per >= 0.1 {
                write!(s, ", {per:.2} per transaction")
            } else {
                write!(s, ", {:.2} per 1,000 transactions", per * 1000.0)
            };
        }
        if syns > 0 {
            let _ = write!(
                s,
                "; {} of them SYNs (TcpExt.TCPSynRetrans): each delays its connect by at least \
                 the initial retransmission timeout, 1 s",
                fmt_count(syns)
            );
        }
        s.push('.');
        Some(s)
    }

    /// UDP buffer drops against the load's own loss figure.
    fn udp_sentences(&self, load: Option<&LoadReport>) -> Vec<String> {
        let mut out = Vec::new();
        let names = ["Udp.RcvbufErrors", "Udp6.RcvbufErrors"];
        let rcv: u64 = names.iter().map(|k| self.get(k)).sum();
        let which = names
            .iter()
            .filter(|k| self.get(k) > 0)
            .copied()
            .collect::<Vec<_>>()
            .join(" + ");
        let lost = load.and_then(|l| l.udp.as_ref()).and_then(|u| u.lost);
        if rcv > 0 {
            let tail = match lost {
                Some(l) if l == rcv => format!(": exactly the {} the load lost", fmt_count(l)),
                Some(l) if l > rcv => format!(
                    "; the load lost {}, so {} went missing some other way (in flight at the \
                     end, or dropped elsewhere)",
                    fmt_count(l),
                    fmt_count(l - rcv)
                ),
                Some(l) => format!(
                    "; more than the {} the load lost: other UDP traffic of this namespace \
                     counts too",
                    fmt_count(l)
                ),
                None => String::new(),
            };
            out.push(format!(
                "{} datagrams were dropped because a socket's receive buffer was full \
                 ({which}){tail}.",
                fmt_count(rcv)
            ));
        } else if let Some(l) = lost.filter(|l| *l > 0) {
            out.push(format!(
                "The load lost {} datagrams, none to a full receive buffer (Udp.RcvbufErrors \
                 did not move).",
                fmt_count(l)
            ));
        }
        let snd: u64 = ["Udp.SndbufErrors", "Udp6.SndbufErrors"]
            .iter()
            .map(|k| self.get(k))
            .sum();
        if snd > 0 {
            out.push(format!(
                "{} UDP sends failed for a full send buffer (Udp.SndbufErrors).",
                fmt_count(snd)
            ));
        }
        let other = (self.get("Udp.InErrors") + self.get("Udp6.InErrors")).saturating_sub(rcv);
        if other > 0 {
            out.push(format!(
                "{} UDP receive errors other than a full buffer (Udp.InErrors, which counts \
                 those too: checksum, memory).",
                fmt_count(other)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::sockets::Listener;
    use crate::report::fixtures;
    use crate::report::load::UdpResult;

    fn deltas(v: &[(&str, u64)]) -> CounterDeltas {
        CounterDeltas {
            source: "test".into(),
            deltas: v.iter().map(|(k, n)| ((*k).to_string(), *n)).collect(),
            gauges: BTreeMap::new(),
        }
    }

    fn crr_load(c: usize) -> LoadReport {
        let mut l = fixtures::profile(&fixtures::epoll_echo()).load.unwrap();
        l.workload = "tcp-crr".into();
        l.config.connections = Some(c);
        l
    }

    #[test]
    fn text_lists_only_what_moved_named_first_with_its_file() {
        let mut d = deltas(&[
            ("Tcp.ActiveOpens", 16),
            ("TcpExt.ListenOverflows", 1204),
            ("TcpExt.ListenDrops", 1204),
            ("TcpExt.TCPRcvQDrop", 0),
            ("IpExt.InOctets", 123_456),
            ("softnet.dropped", 0),
            ("Ip6.InReceives", 0),
        ]);
        d.gauges.insert(
            "Tcp.CurrEstab".into(),
            Gauge {
                before: Some(1),
                after: 17,
            },
        );
        let lines = d.text_lines();
        let text = lines.join("\n");
        assert!(text.contains("per network namespace"), "{text}");
        let lo = lines
            .iter()
            .position(|l| l.contains("TcpExt.ListenOverflows"))
            .expect(&text);
        assert!(
            lines[lo].contains("+1,204") && lines[lo].contains("(netstat)"),
            "{text}"
        );
        let others = lines
            .iter()
            .position(|l| l.contains("others"))
            .expect(&text);
        assert!(lo < others);
        assert!(text.contains("Tcp (snmp): ActiveOpens +16"), "{text}");
        assert!(
            text.contains("IpExt (netstat): InOctets +123,456"),
            "{text}"
        );
        assert!(
            !text.contains("TCPRcvQDrop") && !text.contains("softnet.dropped"),
            "{text}"
        );
        assert!(!text.contains("Ip6"), "{text}");
        assert!(
            text.contains("Tcp.CurrEstab (a gauge, not a count): 1 at the start, 17 at the end")
        );
        let html = d.html();
        assert!(
            html.contains("TcpExt.ListenOverflows") && html.contains("+1,204"),
            "{html}"
        );
        assert!(!html.contains("TCPRcvQDrop"));
        assert!(
            deltas(&[("Tcp.InSegs", 0)])
                .text_lines()
                .join("\n")
                .contains("none moved")
        );
        assert!(deltas(&[]).html().contains("No counter moved"));
    }

    #[test]
    fn overflows_name_the_backlog_sock_diag_saw_or_stay_general() {
        let d = deltas(&[
            ("TcpExt.ListenOverflows", 1204),
            ("TcpExt.ListenDrops", 1210),
            ("TcpExt.TCPSynRetrans", 40),
            ("Tcp.RetransSegs", 40),
        ]);
        let transactions = 20_000;
        let sockets = SocketEvidence {
            listeners: vec![Listener {
                local: "127.0.0.1:8080".into(),
                backlog: 1,
                accept_queue_max: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = d.sentences(Some(&sockets), transactions, Some(&crr_load(16)));
        let over = &s[0];
        assert!(
            over.starts_with("The accept queue overflowed 1,204 times (TcpExt.ListenOverflows): the listen backlog (1 on 127.0.0.1:8080"),
            "{over}"
        );
        assert!(over.contains("of up to 16 connects at once"), "{over}");
        assert!(over.contains("6 more connection attempts"), "{over}");
        assert!(
            s[1].contains(
                "40 TCP segments were retransmitted (Tcp.RetransSegs), 2.00 per 1,000 \
                 transactions; 40 of them SYNs"
            ),
            "{s:?}"
        );
        // No socket evidence (or an empty one): no number is invented.
        for socks in [None, Some(&SocketEvidence::default())] {
            let s = d.sentences(socks, transactions, Some(&crr_load(16)));
            assert!(s[0].contains(": the listen backlog is below"), "{}", s[0]);
        }
        // Drops without overflow.
        let s =
            deltas(&[("TcpExt.ListenDrops", 3)]).sentences(None, transactions, Some(&crr_load(1)));
        assert!(
            s[0].contains("3 connection attempts were dropped at a listener without"),
            "{s:?}"
        );
        // Nothing moved: nothing said.
        assert!(
            deltas(&[("Tcp.InSegs", 9)])
                .sentences(None, transactions, Some(&crr_load(1)))
                .is_empty()
        );
    }

    #[test]
    fn udp_buffer_drops_are_set_against_the_loads_loss() {
        let transactions = 0;
        let udp = |lost: Option<u64>| {
            let mut l = fixtures::profile(&fixtures::epoll_echo()).load.unwrap();
            l.workload = "udp".into();
            l.udp = Some(UdpResult {
                published: 20_000,
                lost,
                ..Default::default()
            });
            l
        };
        let d = deltas(&[("Udp.RcvbufErrors", 12_345), ("Udp.InErrors", 12_345)]);
        let s = d.sentences(None, transactions, Some(&udp(Some(12_345))));
        assert_eq!(
            s,
            vec![
                "12,345 datagrams were dropped because a socket's receive buffer was full \
                 (Udp.RcvbufErrors): exactly the 12,345 the load lost."
                    .to_string()
            ]
        );
        let s = d.sentences(None, transactions, Some(&udp(Some(12_400))));
        assert!(
            s[0].contains("the load lost 12,400, so 55 went missing"),
            "{s:?}"
        );
        let s = d.sentences(None, transactions, Some(&udp(Some(10))));
        assert!(s[0].contains("more than the 10 the load lost"), "{s:?}");
        let s = deltas(&[]).sentences(None, transactions, Some(&udp(Some(7))));
        assert!(
            s[0].contains("lost 7 datagrams, none to a full receive buffer"),
            "{s:?}"
        );
        let s = deltas(&[
            ("Udp6.RcvbufErrors", 2),
            ("Udp.InErrors", 5),
            ("Udp.SndbufErrors", 1),
        ])
        .sentences(None, transactions, Some(&udp(None)));
        assert!(
            s[0].starts_with("2 datagrams") && s[0].contains("(Udp6.RcvbufErrors)."),
            "{s:?}"
        );
        assert!(s[1].contains("1 UDP sends failed"), "{s:?}");
        assert!(s[2].starts_with("3 UDP receive errors other than"), "{s:?}");
    }

    #[test]
    fn each_other_named_counter_has_its_sentence() {
        let d = deltas(&[
            ("TcpExt.TCPTimeWaitOverflow", 5),
            ("TcpExt.TCPBacklogDrop", 6),
            ("TcpExt.TCPRcvQDrop", 7),
            ("TcpExt.TCPAbortOnClose", 8),
            ("TcpExt.TCPAbortOnData", 9),
            ("softnet.dropped", 10),
            ("softnet.time_squeeze", 11),
        ]);
        let mut load = crr_load(4);
        load.config.close = Some("rst".into());
        let s = d.sentences(None, 0, Some(&load)).join("\n");
        for needle in [
            "5 closing connections skipped TIME_WAIT",
            "(TcpExt.TCPBacklogDrop)",
            "(TcpExt.TCPRcvQDrop)",
            "8 connections were reset because they were closed with unread data",
            "9 connections were reset by a close with SO_LINGER 0",
            "--close rst",
            "10 packets were dropped",
            "11 times (softnet.time_squeeze, machine-wide",
        ] {
            assert!(s.contains(needle), "{needle} missing from:\n{s}");
        }
    }

    #[test]
    fn long_groups_wrap_between_counters_never_inside_one() {
        let items: Vec<String> = (0..30).map(|i| format!("TCPSomething{i} +1,234")).collect();
        let lines = pack("    TcpExt (netstat): ", &items, WIDTH);
        assert!(lines.len() > 3, "{lines:?}");
        assert!(lines.iter().all(|l| l.len() <= WIDTH), "{lines:?}");
        assert!(lines[1].starts_with("      TCPSomething"), "{lines:?}");
        let joined = lines.join(" ");
        for i in &items {
            assert!(joined.contains(i.as_str()), "{i} split: {lines:?}");
        }
        assert_eq!(pack("  X: ", &["a +1".into()], WIDTH), vec!["  X: a +1"]);
    }

    #[test]
    fn older_artifacts_without_gauges_read() {
        let d: CounterDeltas =
            serde_json::from_str(r#"{"source":"x","deltas":{"Tcp.InSegs":3}}"#).unwrap();
        assert_eq!(d.get("Tcp.InSegs"), 3);
        assert!(d.gauges.is_empty());
        assert_eq!(file_of("Udp6.RcvbufErrors"), "snmp6");
        assert_eq!(file_of("MPTcpExt.MPCapableSYNRX"), "netstat");
        assert_eq!(file_of("UdpLite.InErrors"), "snmp");
    }
}
