//! DNS queries as the request anatomy's requests (issue 39): a real
//! dnsmasq (local answers only, its query log the cross-check) profiled
//! under a python3 client sending a known mix of A, AAAA, TXT and MX
//! queries over UDP and over TCP (lockstep, one query cut across
//! segments, three pipelined in one write): each QTYPE's count equals dnsmasq's log lines of that type,
//! every UDP query is a timed turn, and no query name reaches an
//! artifact. Then hostile bytes (a truncated header, a label over 63
//! bytes, a name over 255, a compression pointer, QDCOUNT 2, a TCP length
//! of 0, a response, another protocol, a flood of QTYPEs): the bad TCP
//! connections are given up on, the bad datagrams counted and skipped,
//! the names bounded.

use crate::common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::anatomy::{brief, profile_pid, u};
use common::*;
use serde_json::Value;

/// A label of every query's name: it must appear in no artifact.
const SECRET: &str = "zq7secret";

/// dnsmasq on a free port with local answers for bench.test (A, AAAA, TXT,
/// MX; no upstream, no cache), logging every query to its log.
struct Dnsmasq {
    child: Reaped,
    port: u16,
    log: std::path::PathBuf,
}

impl Dnsmasq {
    fn start(test: &str) -> Option<Self> {
        if !require_program("dnsmasq", test) || !require_program("python3", test) {
            return None;
        }
        let dir = scratch(test);
        let log = dir.join("dnsmasq.log");
        // dnsmasq binds TCP too: a port free for UDP can be taken for TCP
        // by a test beside this one (dnsmasq then exits): another port.
        Some(ports::on_free_udp_port("dnsmasq", |port| {
            let _ = std::fs::remove_file(&log);
            let args = common::dnsmasq::args(
                port,
                &log,
                &[
                    "--address=/bench.test/::1",
                    "--txt-record=bench.test,hello",
                    "--mx-host=bench.test,mail.bench.test,10",
                    // Names under nx.test: NXDOMAIN; outside both
                    // domains: REFUSED (no upstream).
                    "--local=/nx.test/",
                ],
            );
            let child = Command::new("dnsmasq")
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("starting dnsmasq: {e}"));
            let mut d = Dnsmasq {
                child: Reaped(child),
                port,
                log: log.clone(),
            };
            d.answers().then_some(d)
        }))
    }

    /// Waits until an A query is answered over UDP; false when dnsmasq
    /// exits first (its port was taken).
    fn answers(&mut self) -> bool {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let q = [
            0x42, 0x42, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 5, b'b', b'e', b'n', b'c', b'h', 4, b't',
            b'e', b's', b't', 0, 0, 1, 0, 1,
        ];
        let end = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 2048];
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            assert!(Instant::now() < end, "dnsmasq never answered");
            let _ = s.send(&q);
            if s.recv(&mut buf).is_ok() {
                return true;
            }
        }
    }

    /// Queries dnsmasq logged so far, by type (`query[AAAA] ...`).
    fn logged(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for l in std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
        {
            if let Some(rest) = l.split("query[").nth(1)
                && let Some((t, _)) = rest.split_once(']')
            {
                *out.entry(t.to_string()).or_insert(0) += 1;
            }
        }
        out
    }
}

/// What dnsmasq logged between two reads of its log, by type.
fn logged_since(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(t, n)| (t.clone(), n - before.get(t).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// A row's (count, turns), by (transport, name), of the DNS rows on
/// `port`.
type Rows = BTreeMap<(String, String), (u64, u64)>;

fn rows(a: &Value, port: u16) -> Rows {
    let mut out = Rows::new();
    for e in a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
    {
        if u(&e["port"]) != u64::from(port) {
            continue;
        }
        assert_eq!(e["protocol"], "dns", "{e}");
        let k = (
            e["transport"].as_str().unwrap().to_string(),
            e["name"].as_str().unwrap().to_string(),
        );
        let r = out.entry(k).or_insert((0, 0));
        r.0 += u(&e["count"]);
        r.1 += u(&e["turns"]);
    }
    out
}

/// Per name, summed over UDP and TCP.
fn by_name(rows: &Rows) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((_, name), (count, _)) in rows {
        *out.entry(name.clone()).or_insert(0) += count;
    }
    out
}

/// No query name, nor any label of one, in the run's artifacts.
fn no_names(artifacts: &[(&str, &str)]) {
    for (what, text) in artifacts {
        // (dnsmasq's own command line, which run.json may show, names
        // bench.test: the queries' first label is the one no config holds.)
        assert!(!text.contains(SECRET), "a query's name in {what}");
    }
}

/// The client's helpers: queries built by hand (the name's labels are
/// SECRET's, never seen by the tool), UDP and TCP lockstep.
const CLIENT_LIB: &str = r#"
import socket, struct, sys, time
port = int(sys.argv[1])
TYPES = {"A": 1, "MX": 15, "TXT": 16, "AAAA": 28}
def query(qtype, qid=0x1234, name="zq7secret.bench.test", edns=False):
    h = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0)
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack(">HH", qtype, 1)
    if edns:
        q += b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    return h + q
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", port))
    s.settimeout(2)
    return s
def ask_udp(s, q):
    s.send(q)
    return s.recv(65536)
def tcp():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(2)
    return s
def read_answer(s):
    got = b""
    while len(got) < 2 or len(got) < 2 + struct.unpack(">H", got[:2])[0]:
        b = s.recv(65536)
        if not b:
            raise SystemExit("closed after %d bytes" % len(got))
        got += b
    return got
def ask_tcp(s, q):
    s.sendall(struct.pack(">H", len(q)) + q)
    return read_answer(s)
"#;

/// The known mix: UDP 40 A (10 with EDNS), 30 AAAA, 20 TXT, 10 MX, then
/// 3 A answered NXDOMAIN and 2 REFUSED; TCP on two connections 12 A, 8
/// AAAA, 6 TXT, 4 MX, lockstep, one A cut into single-byte segments, and
/// A, AAAA, MX pipelined in one write. The RCODEs of the UDP answers, as
/// the client read them, go to the file argv[2] ("QTYPE RCODE": count).
const MIX: &str = r#"
import json
mix = ["A"] * 4 + ["AAAA"] * 3 + ["TXT"] * 2 + ["MX"]
rcodes = {}
def note(t, r):
    k = "%s %d" % (t, r[3] & 15)
    rcodes[k] = rcodes.get(k, 0) + 1
s = udp()
for i in range(100):
    t = mix[i % 10]
    note(t, ask_udp(s, query(TYPES[t], qid=i, edns=(t == "A" and i % 40 < 10))))
for i, n in enumerate(["zq7secret.nx.test"] * 3 + ["zq7secret.example"] * 2):
    note("A", ask_udp(s, query(1, qid=200 + i, name=n)))
json.dump(rcodes, open(sys.argv[2], "w"))
for c in range(2):
    s = tcp()
    for i in range(15):
        t = mix[i % 10] if i < 10 else ["A", "A", "AAAA", "TXT", "MX"][i - 10]
        ask_tcp(s, query(TYPES[t], qid=i, edns=(i == 3)))
    s.close()
s = tcp()
m = query(1)
m = struct.pack(">H", len(m)) + m
for b in m:
    s.send(bytes([b]))
    time.sleep(0.005)
read_answer(s)
s.close()
s = tcp()
s.sendall(b"".join(struct.pack(">H", len(q)) + q for q in (query(1), query(28), query(15))))
got, n = b"", 0
while n < 3:
    while len(got) < 2 or len(got) < 2 + struct.unpack(">H", got[:2])[0]:
        got += s.recv(65536)
    got = got[2 + struct.unpack(">H", got[:2])[0]:]
    n += 1
s.close()
"#;

#[test]
fn dns_queries_by_qtype_equal_dnsmasqs_log_and_udp_queries_are_timed_turns() {
    let name = "dns_queries_equal_dnsmasq_log";
    if !require_bpf(name) {
        return;
    }
    let Some(d) = Dnsmasq::start(name) else {
        return;
    };
    let script = scratch("dns-mix").join("client.py");
    std::fs::write(&script, format!("{CLIENT_LIB}{MIX}")).unwrap();
    let before = d.logged();
    let answers = script.with_file_name("rcodes.json");
    let cmd = format!(
        "python3 {} {} {}",
        script.display(),
        d.port,
        answers.display()
    );
    let (rep, summary, html) = profile_pid("dns-mix-run", d.child.id(), "--load-cmd", &cmd);
    let logged = logged_since(&before, &d.logged());
    let a = &rep["anatomy"];
    let got = rows(a, d.port);
    // dnsmasq's own count of each type, and the client's.
    let want: BTreeMap<String, u64> = [("A", 45 + 12 + 2), ("AAAA", 39), ("TXT", 26), ("MX", 15)]
        .into_iter()
        .map(|(t, n)| (t.to_string(), n))
        .collect();
    assert_eq!(logged, want, "dnsmasq's log");
    assert_eq!(by_name(&got), want, "{got:?}\n{}", brief(a));
    // Every UDP query its own timed turn (lockstep: each datagram's
    // arrival seen).
    for ((transport, qtype), (count, turns)) in &got {
        if transport == "udp" {
            assert_eq!(turns, count, "{qtype}: {got:?}");
        }
    }
    let udp: u64 = got
        .iter()
        .filter(|((t, _), _)| t == "udp")
        .map(|(_, r)| r.0)
        .sum();
    assert_eq!(udp, 105, "{got:?}");
    // Each UDP answer's RCODE, classed as the client read it.
    let read: BTreeMap<String, u64> =
        serde_json::from_str(&std::fs::read_to_string(&answers).expect("the client's RCODEs"))
            .unwrap();
    let mut want_rcodes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (k, n) in &read {
        let (t, rc) = k.split_once(' ').unwrap();
        let class = match rc {
            "0" => "NOERROR",
            "3" => "NXDOMAIN",
            "2" => "SERVFAIL",
            _ => "other (REFUSED, FORMERR, ...)",
        };
        *want_rcodes
            .entry(t.to_string())
            .or_default()
            .entry(class.to_string())
            .or_default() += n;
    }
    assert_eq!(want_rcodes["A"]["NXDOMAIN"], 3, "{read:?}");
    let mut got_rcodes = BTreeMap::new();
    for e in a["endpoints"].as_array().unwrap() {
        if e["transport"] == "udp" && u(&e["port"]) == u64::from(d.port) {
            let codes: BTreeMap<String, u64> =
                serde_json::from_value(e["rcode"].clone()).unwrap_or_default();
            let bad: u64 = codes
                .iter()
                .filter(|(c, _)| *c != "NOERROR" && *c != "NXDOMAIN")
                .map(|(_, n)| n)
                .sum();
            assert_eq!(u(&e["errors"]), bad, "{e}");
            got_rcodes.insert(e["name"].as_str().unwrap().to_string(), codes);
        }
    }
    assert_eq!(got_rcodes, want_rcodes, "{}", brief(a));
    let dns = &a["dns"];
    // The UDP socket and the four TCP connections.
    assert_eq!(u(&dns["connections"]), 5, "{}", brief(a));
    assert_eq!(u(&dns["unparsed"]), 0, "{}", brief(a));
    assert!(dns["malformed"].is_null(), "{}", brief(a));
    // One turn per lockstep query; the pipelined three take one to
    // three (dnsmasq reads them one by one from what is queued).
    let turns = u(&dns["turns"]);
    assert!((137..=139).contains(&turns), "{}", brief(a));
    assert_eq!(u(&a["requests"]), 139, "{}", brief(a));
    assert_eq!(u(&rep["workload"]["requests"]["count"]), 139);
    assert!(summary.contains("Requests by command (DNS;"), "{summary}");
    let json = serde_json::to_string(&rep).unwrap();
    no_names(&[
        ("run.json", &json),
        ("summary.txt", &summary),
        ("report.html", &html),
    ]);
}

/// Hostile bytes: each bad TCP connection first has one good A query
/// answered (so it is DNS), then its bad message; the bad datagrams go to
/// the UDP socket after a good query made it DNS; then a flood of 80
/// QTYPEs over UDP.
const HOSTILE: &str = r#"
def bad_tcp(data):
    s = tcp()
    ask_tcp(s, query(1))
    s.sendall(data)
    time.sleep(0.1)
    s.close()
def msg(q):
    return struct.pack(">H", len(q)) + q
hdr = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0)
long_label = hdr + bytes([64]) + b"x" * 64 + b"\0" + struct.pack(">HH", 16, 1)
long_name = hdr + (bytes([60]) + b"y" * 60) * 5 + b"\0" + struct.pack(">HH", 16, 1)
pointer = hdr + b"\x09zq7secret\xc0\x0c" + struct.pack(">HH", 16, 1)
two = struct.pack(">HHHHHH", 7, 0x0100, 2, 0, 0, 0) + query(16)[12:] + query(16)[12:]
response = struct.pack(">HHHHHH", 7, 0x8180, 1, 0, 0, 0) + query(16)[12:]
# TCP, given up on (6): length 0, a length under a header's, a label of
# 64 bytes, a name of 306, a compression pointer, QDCOUNT 2.
bad_tcp(b"\0\0")
bad_tcp(msg(hdr[:5]))
bad_tcp(msg(long_label))
bad_tcp(msg(long_name))
bad_tcp(msg(pointer))
bad_tcp(msg(two))
# Not DNS at all: no DNS connection.
s = tcp()
s.sendall(b"hello zq7secret\r\n")
time.sleep(0.1)
s.close()
# UDP: a good query, then 7 datagrams that are no query (each answered or
# not: no wait for an answer), then good ones again.
s = udp()
ask_udp(s, query(1))
for d in (hdr[:5], long_label, long_name, pointer, two, response, b"GET / zq7secret\r\n"):
    s.send(d)
    time.sleep(0.05)
try:
    while s.recv(65536):
        pass
except socket.timeout:
    pass
s.settimeout(2)
for i in range(5):
    ask_udp(s, query(1))
# A flood of QTYPEs (1000..1079), each answered.
for t in range(1000, 1080):
    try:
        ask_udp(s, query(t))
    except socket.timeout:
        pass
"#;

#[test]
fn hostile_dns_bytes_give_up_on_tcp_skip_datagrams_and_keep_names_bounded() {
    let name = "hostile_dns_bytes_give_up";
    if !require_bpf(name) {
        return;
    }
    let Some(d) = Dnsmasq::start(name) else {
        return;
    };
    let script = scratch("dns-hostile").join("client.py");
    std::fs::write(&script, format!("{CLIENT_LIB}{HOSTILE}")).unwrap();
    let cmd = format!("python3 {} {}", script.display(), d.port);
    let (rep, summary, html) = profile_pid("dns-hostile-run", d.child.id(), "--load-cmd", &cmd);
    let a = &rep["anatomy"];
    let got = rows(a, d.port);
    let dns = &a["dns"];
    // 6 TCP connections given up on of 6 (the garbage one is no DNS
    // connection), and the UDP socket.
    assert_eq!(u(&dns["connections"]), 7, "{}", brief(a));
    assert_eq!(u(&dns["unparsed"]), 6, "{}", brief(a));
    assert_eq!(u(&dns["malformed"]), 7, "{}", brief(a));
    // The good A queries: 6 over TCP, 1 + 5 over UDP; nothing of the bad
    // ones (all TXT) counted.
    let names = by_name(&got);
    assert_eq!(names.get("A"), Some(&12), "{got:?}");
    assert_eq!(names.get("TXT"), None, "{got:?}");
    // A and TYPE1000..TYPE1062 fill the UDP port's 64 names (TCP has its
    // own port key), TYPE1063..TYPE1079 are (other).
    let udp_names = got.keys().filter(|(t, _)| t == "udp").count();
    assert_eq!(udp_names, 65, "{got:?}");
    assert_eq!(
        got.get(&("udp".to_string(), "(other)".to_string()))
            .map(|r| r.0),
        Some(17),
        "{got:?}"
    );
    assert!(
        got.keys()
            .all(|(_, n)| n == "(other)" || n == "A" || (n.starts_with("TYPE") && n.len() <= 9)),
        "{got:?}"
    );
    let all: u64 = got.values().map(|r| r.0).sum();
    assert_eq!(all, 12 + 80, "{got:?}");
    assert!(
        summary.contains("6 of 7 DNS connections given up on"),
        "{summary}"
    );
    assert!(
        summary.contains("7 DNS datagrams were no query"),
        "{summary}"
    );
    let json = serde_json::to_string(&rep).unwrap();
    no_names(&[
        ("run.json", &json),
        ("summary.txt", &summary),
        ("report.html", &html),
    ]);
}
