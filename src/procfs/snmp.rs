//! The kernel's own UDP counters (/proc/net/snmp `Udp:`, /proc/net/snmp6
//! `Udp6...`), read before and after a sink run so its loss figure can be
//! set beside what the kernel says it dropped. They are per network
//! namespace, not per socket: other UDP traffic in the namespace counts too.
//!
//! Also the general reader of /proc/net/snmp and /proc/net/netstat
//! (`parse_pairs`, `net_counters`), shared by a profile's kernel evidence
//! and the metrics exporter's reset and drop counters.

use std::fs;

/// The UDP drop counters that matter to a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpDrops {
    /// Datagrams dropped because the socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// All receive errors (includes RcvbufErrors, checksum errors...).
    pub in_errors: u64,
}

impl UdpDrops {
    /// Counter increases from `earlier` to `self` (saturating).
    pub fn since(&self, earlier: &UdpDrops) -> UdpDrops {
        UdpDrops {
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(earlier.rcvbuf_errors),
            in_errors: self.in_errors.saturating_sub(earlier.in_errors),
        }
    }
}

/// Where the counters of an IPv4 or IPv6 socket are read from.
pub fn source(ipv6: bool) -> &'static str {
    if ipv6 {
        "/proc/net/snmp6 Udp6RcvbufErrors, Udp6InErrors"
    } else {
        "/proc/net/snmp Udp: RcvbufErrors, InErrors"
    }
}

/// Reads the counters for IPv4 (`Udp:`) or IPv6 (`Udp6...`) sockets; None
/// when /proc is not readable or has no such lines.
pub fn read(ipv6: bool) -> Option<UdpDrops> {
    if ipv6 {
        parse_snmp6(&fs::read_to_string("/proc/net/snmp6").ok()?)
    } else {
        parse_snmp(&fs::read_to_string("/proc/net/snmp").ok()?)
    }
}

/// Parses /proc/net/snmp: a `Udp:` line of field names followed by a
/// `Udp:` line of values.
pub fn parse_snmp(text: &str) -> Option<UdpDrops> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
    let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse().ok()
    };
    Some(UdpDrops {
        rcvbuf_errors: get("RcvbufErrors")?,
        in_errors: get("InErrors")?,
    })
}

/// Parses /proc/net/snmp6: one `Name value` pair per line.
pub fn parse_snmp6(text: &str) -> Option<UdpDrops> {
    let get = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next()? == name).then(|| it.next()?.parse().ok())?
        })
    };
    Some(UdpDrops {
        rcvbuf_errors: get("Udp6RcvbufErrors")?,
        in_errors: get("Udp6InErrors")?,
    })
}

/// Parses /proc/net/snmp or /proc/net/netstat: pairs of lines, `Group:`
/// followed by field names, then `Group:` followed by as many values.
/// A pair whose counts differ is left out whole (its columns cannot be
/// matched); a value that is not a non-negative integer (Tcp MaxConn is
/// -1) is left out alone.
pub fn parse_pairs(text: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(names) = lines.next() {
        let Some((group, names)) = names.split_once(':') else {
            continue;
        };
        let group = group.trim();
        if group.is_empty() || group.contains(char::is_whitespace) {
            continue;
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        // A names line holds names: a line of numbers here is a values
        // line whose names line is missing; left out, and the next line
        // may begin a proper pair.
        if names.is_empty()
            || !names
                .iter()
                .all(|n| n.starts_with(|c: char| c.is_ascii_alphabetic()))
        {
            continue;
        }
        // The values line must be the next line, of the same group.
        let Some((vgroup, values)) = lines.peek().and_then(|l| l.split_once(':')) else {
            continue;
        };
        if vgroup.trim() != group {
            continue;
        }
        lines.next();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            continue;
        }
        for (n, v) in names.iter().zip(&values) {
            if let Ok(v) = v.parse::<u64>() {
                out.push((format!("{group}.{n}"), v));
            }
        }
    }
    out
}

/// Every counter of this process's network namespace's /proc/net/snmp
/// and /proc/net/netstat, by `Group.Name` (a file that cannot be read
/// adds nothing).
pub fn net_counters() -> Vec<(String, u64)> {
    ["/proc/net/snmp", "/proc/net/netstat"]
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|t| parse_pairs(&t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_formats() {
        let v4 = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                  Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                  Udp: 100 2 17 90 15 0\nUdpLite: InDatagrams\nUdpLite: 0\n";
        assert_eq!(
            parse_snmp(v4),
            Some(UdpDrops {
                rcvbuf_errors: 15,
                in_errors: 17
            })
        );
        let v6 = "Udp6InDatagrams                 \t5\nUdp6InErrors 3\nUdp6RcvbufErrors 2\n";
        assert_eq!(
            parse_snmp6(v6),
            Some(UdpDrops {
                rcvbuf_errors: 2,
                in_errors: 3
            })
        );
        assert_eq!(parse_snmp("nothing"), None);
        let a = UdpDrops {
            rcvbuf_errors: 10,
            in_errors: 12,
        };
        assert_eq!(a.since(&UdpDrops::default()), a);
        // The machine's own files parse.
        assert!(read(false).is_some());
    }

    // Property tests: /proc/net/snmp and /proc/net/netstat written from a
    // model (pairs of `Group:` lines of names and values), and snmp6
    // (`Name value` lines), parse back to every counter; mutated files
    // parse to counters or fewer, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    fn word(first: std::ops::RangeInclusive<char>) -> impl Strategy<Value = String> {
        (
            prop::char::range(*first.start(), *first.end()),
            prop::collection::vec(prop::char::range('a', 'z'), 0..8),
        )
            .prop_map(|(c, rest)| std::iter::once(c).chain(rest).collect())
    }

    /// Groups of (name, value) counters; Udp among them.
    fn groups() -> impl Strategy<Value = Vec<(String, Vec<(String, u64)>)>> {
        let counters = prop::collection::btree_map(word('A'..='Z'), any::<u64>(), 1..6)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>());
        let udp = (any::<u64>(), any::<u64>()).prop_map(|(r, e)| {
            (
                "Udp".to_string(),
                vec![("InErrors".to_string(), e), ("RcvbufErrors".to_string(), r)],
            )
        });
        (
            prop::collection::vec((word('A'..='T'), counters), 0..4),
            udp,
        )
            .prop_map(|(mut g, udp)| {
                g.push(udp);
                g
            })
    }

    fn snmp_text(groups: &[(String, Vec<(String, u64)>)]) -> String {
        let mut t = String::new();
        for (g, cs) in groups {
            let names: Vec<&str> = cs.iter().map(|(n, _)| n.as_str()).collect();
            let values: Vec<String> = cs.iter().map(|(_, v)| v.to_string()).collect();
            t += &format!("{g}: {}\n{g}: {}\n", names.join(" "), values.join(" "));
        }
        t
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn snmp_files_round_trip_and_mutations_never_panic(
            gs in groups(),
            ms in hostile::mutations(),
        ) {
            let t = snmp_text(&gs);
            let want: Vec<(String, u64)> = gs
                .iter()
                .flat_map(|(g, cs)| cs.iter().map(move |(n, v)| (format!("{g}.{n}"), *v)))
                .collect();
            prop_assert_eq!(parse_pairs(&t), want);
            let (_, udp) = gs.last().unwrap();
            prop_assert_eq!(
                parse_snmp(&t),
                Some(UdpDrops { in_errors: udp[0].1, rcvbuf_errors: udp[1].1 })
            );
            let v6 = format!(
                "Udp6InDatagrams \t 9\nUdp6InErrors {}\nUdp6RcvbufErrors\t{}\n",
                udp[0].1, udp[1].1
            );
            prop_assert_eq!(
                parse_snmp6(&v6),
                Some(UdpDrops { in_errors: udp[0].1, rcvbuf_errors: udp[1].1 })
            );
            let bad = hostile::mutate_text(&t, &ms);
            let _ = (parse_pairs(&bad), parse_snmp(&bad));
            let _ = parse_snmp6(&hostile::mutate_text(&v6, &ms));
        }
    }
}
