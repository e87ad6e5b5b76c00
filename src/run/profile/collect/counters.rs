//! Kernel counter snapshots of the target's network namespace
//! (/proc/PID/net/{snmp,netstat,snmp6}) and of /proc/net/softnet_stat,
//! and their deltas (`report::evidence::counters`).
//!
//! /proc/PID/net is the network namespace of PID, so the counters are the
//! target's namespace's, whichever namespace sockscope runs in; softnet_stat
//! is per CPU and machine-wide (every namespace's packets). The parsers are
//! pure and total: a malformed line, a value that is not a number or a
//! names line without its values is left out, never a panic.

use std::collections::BTreeMap;

pub use crate::procfs::snmp::parse_pairs;
use crate::report::evidence::CounterDeltas;
use crate::report::evidence::counters::{Gauge, NAMED};

/// Values that are not counters: a gauge (connections established now)
/// goes to `gauges`, with its value before and after, not into `deltas`,
/// where an increase would misread as events.
pub const GAUGES: &[&str] = &["Tcp.CurrEstab"];

/// Fields that are settings, not counts (the RTO algorithm and bounds,
/// MaxConn = -1, IP forwarding, the default TTL): not kept at all.
const SETTINGS: &[&str] = &[
    "Tcp.RtoAlgorithm",
    "Tcp.RtoMin",
    "Tcp.RtoMax",
    "Tcp.MaxConn",
    "Ip.Forwarding",
    "Ip.DefaultTTL",
];

/// The machine-wide per-CPU file.
const SOFTNET: &str = "/proc/net/softnet_stat";

/// Every counter at one instant, by `Group.Name`.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Counter values by `Group.Name`.
    pub values: BTreeMap<String, u64>,
    /// Gauge values ([`GAUGES`]) by `Group.Name`.
    pub gauges: BTreeMap<String, u64>,
    /// Files read, for the report's `source`.
    pub source: String,
    /// Optional files that could not be read (snmp6 without IPv6,
    /// softnet_stat), with why: the named counters they hold are then
    /// reported unavailable for that reason.
    pub unreadable: Vec<(String, String)>,
}

/// Reads every counter of `pid`'s network namespace; an error says what
/// could not be read. snmp and netstat are required (the target exiting
/// makes them unreadable, and the error says so); snmp6 (absent without
/// IPv6) and softnet_stat are optional.
pub fn snapshot(pid: i32) -> Result<Snapshot, String> {
    let mut snap = Snapshot::default();
    for file in ["snmp", "netstat"] {
        let path = format!("/proc/{pid}/net/{file}");
        let text = std::fs::read_to_string(&path).map_err(|e| unreadable(pid, &path, &e))?;
        add(&mut snap, parse_pairs(&text));
    }
    let snmp6 = format!("/proc/{pid}/net/snmp6");
    let mut files = vec!["snmp", "netstat"];
    match std::fs::read_to_string(&snmp6) {
        Ok(text) => {
            add(&mut snap, parse_snmp6(&text));
            files.push("snmp6");
        }
        Err(e) => snap.unreadable.push((snmp6, e.to_string())),
    }
    let mut source = format!("/proc/{pid}/net/{{{}}} (the target's network namespace)", {
        files.join(",")
    });
    match std::fs::read_to_string(SOFTNET) {
        Ok(text) => {
            add(&mut snap, parse_softnet(&text));
            source.push_str(", /proc/net/softnet_stat (machine-wide, summed over CPUs)");
        }
        Err(e) => snap.unreadable.push((SOFTNET.into(), e.to_string())),
    }
    snap.source = source;
    Ok(snap)
}

/// The error for a required file: the target's exit is the usual reason.
fn unreadable(pid: i32, path: &str, e: &std::io::Error) -> String {
    if std::fs::metadata(format!("/proc/{pid}")).is_err() {
        format!("{path}: {e} (the target, pid {pid}, has exited)")
    } else {
        format!("{path}: {e}")
    }
}

/// Sorts parsed values into counters and gauges, dropping settings.
fn add(snap: &mut Snapshot, values: Vec<(String, u64)>) {
    for (k, v) in values {
        if GAUGES.contains(&k.as_str()) {
            snap.gauges.insert(k, v);
        } else if !SETTINGS.contains(&k.as_str()) {
            snap.values.insert(k, v);
        }
    }
}

/// Parses /proc/net/snmp6: `Name value` per line (`Udp6RcvbufErrors 3`),
/// named here `Udp6.RcvbufErrors`: the group is the leading letters and
/// digits up to the first capital after them (`Ip6`, `Icmp6`, `Udp6`,
/// `UdpLite6`). Lines without a number are left out.
pub fn parse_snmp6(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let v = it.next()?.parse::<u64>().ok()?;
            if it.next().is_some() {
                return None;
            }
            Some((snmp6_name(name)?, v))
        })
        .collect()
}

/// `Udp6RcvbufErrors` -> `Udp6.RcvbufErrors`; the group ends at the first
/// `6` (every snmp6 group is an IPv6 one); None when there is none or
/// nothing follows it.
fn snmp6_name(name: &str) -> Option<String> {
    let i = name.find('6')?;
    let (group, field) = name.split_at(i + 1);
    if group.len() < 2 || field.is_empty() || !group.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some(format!("{group}.{field}"))
}

/// Parses /proc/net/softnet_stat: one line per CPU of hexadecimal
/// columns, the first three processed, dropped and time_squeeze; summed
/// over CPUs into `softnet.processed`, `softnet.dropped` and
/// `softnet.time_squeeze`. A line with fewer than three hexadecimal
/// columns is left out; no valid line, no values.
pub fn parse_softnet(text: &str) -> Vec<(String, u64)> {
    let mut sums = [0u64; 3];
    let mut any = false;
    for l in text.lines() {
        let cols: Vec<u64> = l
            .split_whitespace()
            .take(3)
            .map_while(|c| u64::from_str_radix(c, 16).ok())
            .collect();
        if cols.len() < 3 {
            continue;
        }
        any = true;
        for (s, c) in sums.iter_mut().zip(cols) {
            *s = s.wrapping_add(c);
        }
    }
    if !any {
        return Vec::new();
    }
    [
        "softnet.processed",
        "softnet.dropped",
        "softnet.time_squeeze",
    ]
    .iter()
    .zip(sums)
    .map(|(n, v)| ((*n).to_string(), v))
    .collect()
}

/// Increases from `before` to `after` of every counter of `after` (a
/// counter that went down, i.e. was reset or wrapped, counts 0; one that
/// appeared counts 0), the gauges before and after, and a line for each
/// [`NAMED`] counter this kernel does not have.
pub fn delta(before: &Snapshot, after: &Snapshot) -> (CounterDeltas, Vec<String>) {
    let deltas = after
        .values
        .iter()
        .map(|(k, v)| {
            let b = before.values.get(k).copied().unwrap_or(*v);
            (k.clone(), v.saturating_sub(b))
        })
        .collect();
    let gauges = after
        .gauges
        .iter()
        .map(|(k, v)| {
            let g = Gauge {
                before: before.gauges.get(k).copied(),
                after: *v,
            };
            (k.clone(), g)
        })
        .collect();
    let missing = NAMED
        .iter()
        .filter(|n| !after.values.contains_key(**n))
        .map(|n| match why_missing(n, after) {
            Some((file, why)) => format!("{n}: {file} could not be read ({why})"),
            None => format!("{n}: not counted by this kernel"),
        })
        .collect();
    (
        CounterDeltas {
            source: after.source.clone(),
            deltas,
            gauges,
        },
        missing,
    )
}

/// The unreadable file that would have held `name`, if that is why.
fn why_missing<'a>(name: &str, snap: &'a Snapshot) -> Option<&'a (String, String)> {
    let file = if name.starts_with("softnet.") {
        "softnet_stat"
    } else if name.contains("6.") {
        "snmp6"
    } else {
        return None;
    };
    snap.unreadable.iter().find(|(f, _)| f.ends_with(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abridged from a 6.1 kernel's /proc/net/snmp.
    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams
Ip: 1 64 266487 0 2 0
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs
Icmp: 45 0 0 45
IcmpMsg: InType3 OutType3
IcmpMsg: 45 45
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 70012 69990 12 30 7 9000000 9100000 1234 0 55 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 100 2 17 90 15 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    /// Abridged from /proc/net/netstat.
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPBacklogDrop TCPTimeWaitOverflow TCPAbortOnData TCPAbortOnClose TCPSynRetrans TCPRcvQDrop
TcpExt: 0 0 1204 1210 0 0 3 1 40 0
IpExt: InNoRoutes InTruncatedPkts InOctets OutOctets
IpExt: 0 0 266487948919 266176217245
MPTcpExt: MPCapableSYNRX MPCapableSYNTX
MPTcpExt: 0 0
";

    fn map(v: Vec<(String, u64)>) -> BTreeMap<String, u64> {
        v.into_iter().collect()
    }

    #[test]
    fn snmp_and_netstat_pairs_name_every_field_by_group() {
        let m = map(parse_pairs(SNMP));
        assert_eq!(m["Ip.InReceives"], 266_487);
        assert_eq!(m["Icmp.InDestUnreachs"], 45);
        assert_eq!(m["IcmpMsg.OutType3"], 45);
        assert_eq!(m["Tcp.RetransSegs"], 1234);
        assert_eq!(m["Tcp.CurrEstab"], 7);
        assert_eq!(m["Udp.RcvbufErrors"], 15);
        assert_eq!(m["UdpLite.InDatagrams"], 0);
        // MaxConn is -1: not a count, left out alone.
        assert!(!m.contains_key("Tcp.MaxConn"));
        assert_eq!(m["Tcp.InErrs"], 0);
        let n = map(parse_pairs(NETSTAT));
        assert_eq!(n["TcpExt.ListenOverflows"], 1204);
        assert_eq!(n["IpExt.OutOctets"], 266_176_217_245);
        assert_eq!(n["MPTcpExt.MPCapableSYNTX"], 0);
        assert_eq!(n.len(), 10 + 4 + 2);
    }

    #[test]
    fn malformed_pairs_are_left_out_never_a_panic() {
        // Counts differ: the pair is dropped whole; a bad value alone; a
        // names line at the end without values; a values line of another
        // group; lines with no colon; garbage.
        let text = "\
Tcp: A B C
Tcp: 1 2
Udp: X Y Z
Udp: 1 zz 3
Ip: P Q
IcmpMsg: 4 5
nonsense without colon
: 1 2
Two Words: 1
Two Words: 1
TcpExt: Last
";
        let m = map(parse_pairs(text));
        assert_eq!(
            m,
            map(vec![("Udp.X".into(), 1), ("Udp.Z".into(), 3)]),
            "{m:?}"
        );
        for junk in ["", ":", "\n\n", "a:\nb:", "Tcp:\nTcp:", "\u{0}:\u{0}"] {
            assert!(parse_pairs(junk).is_empty(), "{junk:?}");
        }
        // A values line of the wrong group after a names line: the next
        // proper pair still parses.
        let m = map(parse_pairs("Tcp: A\nUdp: 1\nUdp: B\nUdp: 9\n"));
        assert_eq!(m, map(vec![("Udp.B".into(), 9)]));
    }

    #[test]
    fn snmp6_names_get_a_group() {
        let text = "Ip6InReceives                   \t8968\n\
                    Icmp6InMsgs 3\n\
                    Icmp6OutType133 1\n\
                    Udp6RcvbufErrors 2\n\
                    UdpLite6InDatagrams 0\n\
                    Ip6InOctets 18446744073709551615\n\
                    NoSixHere 4\n\
                    Udp6InErrors notanumber\n\
                    Udp6SndbufErrors 1 extra\n\
                    6Lead 1\n\
                    Ip6 5\n";
        let m = map(parse_snmp6(text));
        assert_eq!(
            m,
            map(vec![
                ("Ip6.InReceives".into(), 8968),
                ("Icmp6.InMsgs".into(), 3),
                ("Icmp6.OutType133".into(), 1),
                ("Udp6.RcvbufErrors".into(), 2),
                ("UdpLite6.InDatagrams".into(), 0),
                ("Ip6.InOctets".into(), u64::MAX),
            ]),
            "{m:?}"
        );
    }

    #[test]
    fn softnet_sums_the_first_three_columns_over_cpus() {
        let text = "07095acb 00000000 00000078 00000000 00000000 00000000\n\
                    06620c3f 00000002 00000077 00000000 00000000 00000000\n\
                    zz 1 2\n\
                    00000001 00000001\n";
        let m = map(parse_softnet(text));
        assert_eq!(m["softnet.processed"], 0x0709_5acb + 0x0662_0c3f);
        assert_eq!(m["softnet.dropped"], 2);
        assert_eq!(m["softnet.time_squeeze"], 0x78 + 0x77);
        assert!(parse_softnet("garbage\n").is_empty());
        assert!(parse_softnet("").is_empty());
    }

    fn snap(values: &[(&str, u64)]) -> Snapshot {
        let mut s = Snapshot {
            source: "test".into(),
            ..Default::default()
        };
        add(
            &mut s,
            values.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        );
        s
    }

    #[test]
    fn deltas_keep_gauges_apart_and_name_what_the_kernel_lacks() {
        let before = snap(&[
            ("TcpExt.ListenOverflows", 10),
            ("Tcp.RetransSegs", 100),
            ("Tcp.CurrEstab", 5),
            ("Tcp.MaxConn", 0),
            ("Udp.InDatagrams", 50),
        ]);
        let mut after = snap(&[
            ("TcpExt.ListenOverflows", 1214),
            ("Tcp.RetransSegs", 90),
            ("Tcp.CurrEstab", 3),
            ("Udp.InDatagrams", 50),
            ("Ip.InReceives", 7),
        ]);
        after
            .unreadable
            .push((SOFTNET.into(), "Permission denied".into()));
        let (d, missing) = delta(&before, &after);
        assert_eq!(d.get("TcpExt.ListenOverflows"), 1204);
        // Went down (reset): 0, not a wrap to 2^64.
        assert_eq!(d.get("Tcp.RetransSegs"), 0);
        // Appeared during the window: 0.
        assert_eq!(d.get("Ip.InReceives"), 0);
        assert!(!d.deltas.contains_key("Tcp.CurrEstab"));
        assert!(!d.deltas.contains_key("Tcp.MaxConn"));
        assert_eq!(
            d.gauges["Tcp.CurrEstab"],
            Gauge {
                before: Some(5),
                after: 3
            }
        );
        assert!(missing.contains(&"TcpExt.TCPRcvQDrop: not counted by this kernel".to_string()));
        assert!(
            missing.contains(
                &"softnet.dropped: /proc/net/softnet_stat could not be read (Permission denied)"
                    .to_string()
            ),
            "{missing:?}"
        );
        assert!(
            !missing
                .iter()
                .any(|m| m.starts_with("TcpExt.ListenOverflows"))
        );
    }

    #[test]
    fn this_machine_snapshots_itself_and_a_gone_pid_says_it_exited() {
        let me = std::process::id() as i32;
        let s = snapshot(me).expect("own counters");
        assert!(
            s.values.contains_key("Tcp.ActiveOpens"),
            "{:?}",
            s.values.keys()
        );
        assert!(s.values.contains_key("TcpExt.ListenOverflows"));
        assert!(s.source.contains("network namespace"), "{}", s.source);
        // A pid above pid_max never exists.
        let e = snapshot(i32::MAX).unwrap_err();
        assert!(e.contains("has exited"), "{e}");
    }

    // Property tests: /proc/net/snmp6 and /proc/net/softnet_stat written
    // from a model parse back to their counters (softnet summed over the
    // CPUs); mutated files parse to counters or fewer, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn snmp6_and_softnet_round_trip_and_mutations_never_panic(
            six in prop::collection::vec(
                (prop::sample::select(vec!["Ip6", "Icmp6", "Udp6", "UdpLite6"]),
                 prop::collection::vec(prop::char::range('A', 'Z'), 1..10),
                 any::<u64>(),
                 1..30usize),
                0..6,
            ),
            cpus in prop::collection::vec(prop::collection::vec(any::<u32>(), 3..14), 0..5),
            ms in hostile::mutations(),
        ) {
            let mut t = String::new();
            let mut want = Vec::new();
            for (group, field, v, pad) in &six {
                let field: String = field.iter().collect();
                t += &format!("{group}{field}{}{v}\n", " ".repeat(*pad));
                want.push((format!("{group}.{field}"), *v));
            }
            prop_assert_eq!(parse_snmp6(&t), want);
            let _ = parse_snmp6(&hostile::mutate_text(&t, &ms));
            let mut soft = String::new();
            let mut sums = [0u64; 3];
            for cols in &cpus {
                let line: Vec<String> = cols.iter().map(|c| format!("{c:08x}")).collect();
                soft += &line.join(" ");
                soft += "\n";
                for (s, c) in sums.iter_mut().zip(cols) {
                    *s += u64::from(*c);
                }
            }
            let got = parse_softnet(&soft);
            if cpus.is_empty() {
                prop_assert!(got.is_empty());
            } else {
                let names = ["softnet.processed", "softnet.dropped", "softnet.time_squeeze"];
                let want: Vec<(String, u64)> =
                    names.iter().zip(sums).map(|(n, v)| (n.to_string(), v)).collect();
                prop_assert_eq!(got, want);
            }
            let _ = parse_softnet(&hostile::mutate_text(&soft, &ms));
        }
    }
}
