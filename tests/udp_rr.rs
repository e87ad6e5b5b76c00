//! `sockscope load udp-rr` against real UDP servers each test starts on a
//! free loopback port (and kills afterwards): dnsmasq answering a fixed A
//! query (its query log is the cross-check), memcached's UDP port (its TCP
//! `stats` the cross-check) and sockperf's server; then a server that never
//! answers, a port nothing listens on, and bad options. A missing dnsmasq,
//! memcached or sockperf skips its test with a printed reason, and fails it
//! under CI=true.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

// The tests that send datagrams take common::serial(): they count every
// answer, and in the load binary a UDP burst beside them (load, serve)
// could overflow loopback's backlog and drop theirs.

/// Every load here is bounded by -n or -d; this catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// A third-party server, killed on drop.
struct Daemon(Reaped);

impl Daemon {
    fn spawn(bin: &str, args: &[String]) -> Self {
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        Self(Reaped(child))
    }

    /// Waits until a UDP `probe` to `port` is answered; returns the probes
    /// sent, or the server's status when it exits first (a port another
    /// test took meanwhile).
    fn try_await_udp(&mut self, port: u16, probe: &[u8]) -> Result<u64, std::process::ExitStatus> {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 2048];
        let mut sent = 0;
        loop {
            if let Ok(Some(st)) = self.0.try_wait() {
                return Err(st);
            }
            assert!(Instant::now() < end, "no answer on UDP port {port}");
            let _ = s.send(probe);
            sent += 1;
            if s.recv(&mut buf).is_ok() {
                return Ok(sent);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs `sockscope load udp-rr ARGS --json FILE`; returns the exit code,
/// the report (Null when none was written) and stderr.
fn udp_rr(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut all = vec!["udp-rr"];
    all.extend_from_slice(args);
    load_json(dir, &all, LIMIT)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// A DNS query (id 0x4242, recursion desired) for `name`, type A.
fn dns_query(name: &str) -> Vec<u8> {
    let mut q = vec![0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for l in name.split('.') {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// dnsmasq on a free port answering bench.test with 10.0.0.1 from its own
/// configuration (no upstream, no cache), logging every query to `log`.
fn dnsmasq(test: &str, log: &Path) -> Option<(Daemon, u16)> {
    if !common::require_program("dnsmasq", test) {
        return None;
    }
    // dnsmasq binds TCP too: a port free for UDP can be taken for TCP by
    // a test running beside this one, and dnsmasq then exits (status 2).
    // A few fresh ports make that race harmless.
    Some(ports::on_free_udp_port("dnsmasq", |port| {
        let mut d = Daemon::spawn("dnsmasq", &common::dnsmasq::args(port, log, &[]));
        d.try_await_udp(port, &dns_query("bench.test"))
            .ok()
            .map(|_| (d, port))
    }))
}

/// Queries dnsmasq logged for bench.test so far.
fn logged_queries(log: &Path) -> u64 {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("query[A] bench.test "))
        .count() as u64
}

#[test]
fn dnsmasq_answers_every_query_by_id_and_its_log_counts_the_same() {
    let _serial = serial();
    let dir = scratch("udp-rr-dnsmasq");
    let log = dir.join("dnsmasq.log");
    let Some((_d, port)) = dnsmasq("dnsmasq_answers_every_query", &log) else {
        return;
    };
    let q = dir.join("q.bin");
    std::fs::write(&q, dns_query("bench.test")).unwrap();
    let before = logged_queries(&log);
    let addr = format!("127.0.0.1:{port}");
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--id",
            "dns",
            "--request",
            &format!("@{}", q.display()),
            "--expect-answer",
            "-c",
            "4",
            "-t",
            "2",
            "--pipeline",
            "4",
            "-n",
            "2000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["workload"], "udp-rr");
    assert_eq!(u(&rep["transactions"]), 2000, "{rep}");
    let r = &rep["udp_rr"];
    assert_eq!(r["id"], "dns");
    assert_eq!(u(&r["requests_sent"]), 2000, "{r}");
    assert_eq!(u(&r["answered"]), 2000, "{r}");
    assert_eq!(
        (
            u(&r["lost"]),
            u(&r["late_replies"]),
            u(&r["garbage_replies"])
        ),
        (0, 0, 0),
        "{r}"
    );
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    // Every reply NOERROR, each counted for the query it answered.
    let resp = &rep["responses"];
    assert_eq!(u(&resp["by_status"]["NOERROR"]), 2000, "{resp}");
    assert_eq!(u(&resp["by_command"]["A bench.test"]["answered"]), 2000);
    assert_eq!(u(&rep["connections"]["established"]), 4);
    assert!(u(&rep["latency"]["p50_ns"]) > 0, "{}", rep["latency"]);
    // dnsmasq logged as many queries as the load sent.
    let end = Instant::now() + Duration::from_secs(5);
    while logged_queries(&log) - before < 2000 && Instant::now() < end {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(logged_queries(&log) - before, 2000);
}

#[test]
fn a_query_dnsmasq_drops_is_lost_after_the_timeout() {
    let _serial = serial();
    let dir = scratch("udp-rr-dnsmasq-drop");
    let log = dir.join("dnsmasq.log");
    let Some((_d, port)) = dnsmasq("a_query_dnsmasq_drops_is_lost", &log) else {
        return;
    };
    // A header announcing one question, then half a label: dnsmasq ignores
    // it without a reply.
    let addr = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--id",
            "dns",
            "--request",
            r"\x00\x07\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05ben",
            "-c",
            "3",
            "-n",
            "3",
            "--timeout",
            "0.3",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no reply from"), "{err}");
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let r = &rep["udp_rr"];
    assert_eq!((u(&r["requests_sent"]), u(&r["lost"])), (3, 3), "{r}");
    assert_eq!(r["loss_ratio"].as_f64(), Some(1.0));
    assert_eq!(u(&rep["errors"]["by_class"]["lost"]), 3);
    assert_eq!(rep["complete"], false);
    assert_eq!(u(&rep["transactions"]), 0);
}

/// memcached `stats` over its TCP port.
fn memcached_stats(tcp: u16) -> std::collections::BTreeMap<String, u64> {
    let text = ask(tcp, b"stats\r\n", b"END\r\n");
    text.lines()
        .filter_map(|l| {
            let mut w = l.split(' ').skip(1);
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// Sends `req` over TCP and reads until the answer ends with `end`.
fn ask(port: u16, req: &[u8], end: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(end) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "memcached closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn memcached_udp_replies_reassemble_and_match_its_stats() {
    let _serial = serial();
    let test = "memcached_udp_replies_reassemble";
    if !common::require_program("memcached", test) {
        return;
    }
    let dir = scratch("udp-rr-memcached");
    // UDP is off by default in memcached 1.6: -U turns it on; the TCP port
    // is for the cross-check. -u applies only when run as root. A port found
    // free can be taken by a test beside this one before memcached binds it
    // (seen in CI: exit 71): then another pair of ports.
    let probe = b"\x00\x01\x00\x00\x00\x01\x00\x00version\r\n";
    let (_d, udp, tcp) = ports::on_free_udp_port("memcached", |udp| {
        let tcp = ports::free_tcp();
        let args: Vec<String> = [
            "-U",
            &udp.to_string(),
            "-p",
            &tcp.to_string(),
            "-l",
            "127.0.0.1",
            "-u",
            "nobody",
        ]
        .map(String::from)
        .to_vec();
        let mut d = Daemon::spawn("memcached", &args);
        d.try_await_udp(udp, probe).ok().map(|_| (d, udp, tcp))
    });
    // A value of 3000 bytes: its reply spans three datagrams (1400 each).
    let big = "v".repeat(3000);
    ask(
        tcp,
        format!("set big 0 0 3000\r\n{big}\r\n").as_bytes(),
        b"\r\n",
    );
    let before = memcached_stats(tcp);
    let addr = format!("127.0.0.1:{udp}");
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--id",
            "memcached",
            "--request",
            r"get big\r\n",
            "--expect",
            r"vvvv\r\nEND\r\n",
            "-c",
            "2",
            "--pipeline",
            "4",
            "-n",
            "1000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["udp_rr"];
    assert_eq!(
        (u(&r["requests_sent"]), u(&r["answered"])),
        (1000, 1000),
        "{r}"
    );
    assert_eq!(u(&r["lost"]), 0, "{r}");
    let resp = &rep["responses"];
    assert_eq!(u(&resp["hits"]), 1000, "{resp}");
    assert_eq!(u(&resp["by_command"]["get"]["answered"]), 1000);
    // Three datagrams per reply came in.
    assert!(
        u(&rep["bytes"]["received"]) >= 1000 * 3024,
        "{}",
        rep["bytes"]
    );
    let after = memcached_stats(tcp);
    let delta = |k: &str| after[k] - before[k];
    assert_eq!(delta("cmd_get"), 1000);
    assert_eq!(delta("get_hits"), 1000);

    // A miss is an answer, not a hit; without the expected bytes it is a
    // response_mismatch.
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--id",
            "memcached",
            "--request",
            r"get nothing\r\n",
            "--expect",
            "VALUE",
            "-n",
            "5",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(u(&rep["responses"]["misses"]), 5, "{}", rep["responses"]);
    assert_eq!(u(&rep["errors"]["by_class"]["response_mismatch"]), 5);
}

#[test]
fn sockperf_server_echoes_and_latency_is_recorded() {
    let _serial = serial();
    let test = "sockperf_server_echoes";
    if !common::require_program("sockperf", test) {
        return;
    }
    let dir = scratch("udp-rr-sockperf");
    // sockperf's 14-byte header: sequence number (u64), flags (u16:
    // client | pong request = 3) and length (u32), big-endian; then the
    // payload. The server answers with the message, flags set to 2.
    let mut msg = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 64];
    msg.resize(64, b'x');
    let (_d, port) = ports::on_free_udp_port("sockperf", |port| {
        let args: Vec<String> = ["sr", "-i", "127.0.0.1", "-p", &port.to_string()]
            .map(String::from)
            .to_vec();
        let mut d = Daemon::spawn("sockperf", &args);
        d.try_await_udp(port, &msg).ok().map(|_| (d, port))
    });
    let req = msg
        .iter()
        .map(|b| format!("\\x{b:02x}"))
        .collect::<String>();
    let addr = format!("127.0.0.1:{port}");
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--request",
            &req,
            "--expect",
            r"\x00\x02\x00\x00\x00\x40xxxx",
            "-c",
            "2",
            "-n",
            "2000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["udp_rr"];
    assert_eq!((u(&r["answered"]), u(&r["lost"])), (2000, 0), "{r}");
    assert_eq!(u(&rep["transactions"]), 2000);
    let lat = &rep["latency"];
    assert!(
        u(&lat["p50_ns"]) > 0 && u(&lat["p50_ns"]) <= u(&lat["p99_ns"]),
        "{lat}"
    );
    assert_eq!(u(&rep["bytes"]["sent"]), 2000 * 64);
}

#[test]
fn a_server_that_never_answers_loses_every_request() {
    let _serial = serial();
    let dir = scratch("udp-rr-silent");
    // Bound, so no ICMP comes back; never read.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &addr,
            "--request",
            "hello",
            "-c",
            "4",
            "-d",
            "0.5",
            "--timeout",
            "0.2",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    let r = &rep["udp_rr"];
    assert!(u(&r["lost"]) >= 4, "{r}");
    assert_eq!(u(&r["answered"]), 0);
    assert_eq!(u(&rep["errors"]["by_class"]["lost"]), u(&r["lost"]));
    // Everything sent was lost or still in flight when the run ended.
    assert_eq!(
        u(&r["requests_sent"]),
        u(&r["lost"]) + u(&rep["errors"]["unanswered_at_end"]),
        "{rep}"
    );
    drop(silent);
}

#[test]
fn a_port_nothing_listens_on_is_refused() {
    let _serial = serial();
    let dir = scratch("udp-rr-refused");
    let closed = ports::Closed::udp();
    let port = closed.port;
    let (code, rep, err) = udp_rr(
        &dir,
        &[
            &format!("127.0.0.1:{port}"),
            "--request",
            "x",
            "-n",
            "10",
            "--timeout",
            "0.5",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ECONNREFUSED"), "{err}");
    assert!(u(&rep["udp_rr"]["refused"]) >= 1, "{rep}");
}

#[test]
fn bad_options_are_usage_errors_that_say_why() {
    let dir = scratch("udp-rr-usage");
    for (args, why) in [
        (vec!["127.0.0.1:53"], "--request"),
        (
            vec!["127.0.0.1:53", "--id", "dns", "--request", "tiny"],
            "shorter than a DNS header",
        ),
        (
            vec!["127.0.0.1:53", "--request", "@/nonexistent/q.bin"],
            "cannot read",
        ),
        (vec!["127.0.0.1", "--request", "x"], "not an address"),
        (
            vec!["127.0.0.1:53", "--request", "x", "--pipeline", "4"],
            "--pipeline needs request ids",
        ),
        (
            vec!["127.0.0.1:53", "--request", "x", "--expect-answer"],
            "needs --id dns",
        ),
        (
            vec!["127.0.0.1:11211", "--id", "memcached", "--request", "get k"],
            "ends its line",
        ),
    ] {
        let mut all = vec!["load", "udp-rr"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["-n", "1"]);
        let (st, _out, err) = run_bounded(&all, LIMIT);
        assert_eq!(st.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let _ = dir;
}

/// A fake DNS server on a loopback port: every datagram it receives is
/// answered with `reply(query, n)` (n counts the queries from 0), until
/// `stop` or 30 s. Returns its address and its thread.
fn fake_dns(
    reply: fn(&[u8], u16) -> Vec<u8>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (String, thread::JoinHandle<()>) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = s.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 2048];
        let mut n = 0u16;
        while Instant::now() < end && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((len, from)) = s.recv_from(&mut buf) else {
                continue;
            };
            let _ = s.send_to(&reply(&buf[..len], n), from);
            n = n.wrapping_add(1);
        }
    });
    (addr, h)
}

/// `q` as a NOERROR reply with one A record and the id `id`.
fn answered(q: &[u8], id: u16) -> Vec<u8> {
    let mut r = q.to_vec();
    r[0..2].copy_from_slice(&id.to_be_bytes());
    r[2] |= 0x80;
    r[3] = 0x80;
    r[6..8].copy_from_slice(&1u16.to_be_bytes());
    r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1]);
    r
}

/// Runs udp-rr --id dns against a fake server answering with `reply`.
fn against_fake_dns(
    dir: &Path,
    reply: fn(&[u8], u16) -> Vec<u8>,
    more: &[&str],
) -> (Option<i32>, Value, String) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (addr, h) = fake_dns(reply, stop.clone());
    let q = dir.join("q.bin");
    std::fs::write(&q, dns_query("bench.test")).unwrap();
    let request = format!("@{}", q.display());
    let mut args = vec![
        addr.as_str(),
        "--id",
        "dns",
        "--request",
        &request,
        "--expect-answer",
        "-c",
        "1",
        "-n",
        "10",
        "--timeout",
        "0.1",
    ];
    args.extend_from_slice(more);
    let out = udp_rr(dir, &args);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    out
}

#[test]
fn a_dns_server_answering_with_its_own_ids_answers_nothing() {
    let _serial = serial();
    // Sequential ids (0, 1, 2...) once made a server that numbers its
    // replies itself look like it answered every query.
    let dir = scratch("udp-rr-counter-ids");
    let (code, rep, err) = against_fake_dns(&dir, answered, &["--max-errors", "100"]);
    assert_eq!(code, Some(1), "{err}");
    let r = &rep["udp_rr"];
    // A reply names its query n by chance with odds 1 in 65536: at most
    // one could (and practically none does). With no socket answered, the
    // run stops once a request is lost.
    assert!(u(&r["answered"]) <= 1, "{r}");
    assert!(u(&r["late_replies"]) >= 1 && u(&r["lost"]) >= 1, "{r}");
    if u(&r["answered"]) == 0 {
        assert!(
            err.contains("replies came from 127.0.0.1:") && err.contains("but none was valid"),
            "{err}"
        );
        assert!(err.contains("late"), "{err}");
    }
}

#[test]
fn a_dns_reply_to_another_question_is_a_mismatch_and_rcodes_have_names() {
    let _serial = serial();
    let dir = scratch("udp-rr-other-question");
    // Our id, another name.
    let (code, rep, err) = against_fake_dns(
        &dir,
        |q, _| {
            let mut r = answered(q, u16::from_be_bytes([q[0], q[1]]));
            r[13] = b'X';
            r
        },
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(u(&rep["udp_rr"]["answered"]), 0, "{rep}");
    assert_eq!(
        u(&rep["errors"]["by_class"]["response_mismatch"]),
        10,
        "{rep}"
    );
    assert!(
        err.contains("but none was valid: response_mismatch x10"),
        "{err}"
    );
    // The echo in another case, NXDOMAIN: answered, shown by name.
    let (code, rep, err) = against_fake_dns(
        &dir,
        |q, _| {
            let mut r = answered(q, u16::from_be_bytes([q[0], q[1]]));
            r[13] = r[13].to_ascii_uppercase();
            r[3] = 0x83;
            r[6..8].copy_from_slice(&[0, 0]);
            r.truncate(q.len());
            r
        },
        &[],
    );
    assert_eq!(code, Some(1), "--expect-answer fails NXDOMAIN: {err}");
    assert_eq!(u(&rep["responses"]["by_status"]["NXDOMAIN"]), 10, "{rep}");
    let (code, _, _) = against_fake_dns(
        &dir,
        |q, _| {
            let mut r = answered(q, u16::from_be_bytes([q[0], q[1]]));
            // ANCOUNT 65535, one record: the count is a lie, but a record is
            // there, so the reply answers.
            r[6..8].copy_from_slice(&65_535u16.to_be_bytes());
            r
        },
        &[],
    );
    assert_eq!(code, Some(0));
    let (code, rep, err) = against_fake_dns(
        &dir,
        |q, _| {
            let mut r = answered(q, u16::from_be_bytes([q[0], q[1]]));
            r.truncate(q.len());
            r
        },
        &[],
    );
    assert_eq!(code, Some(1), "ANCOUNT 1 without a record: {err}");
    assert_eq!(u(&rep["errors"]["by_class"]["protocol_error"]), 10, "{rep}");
}

/// Issue 38: `--expect-answer` took an answer record whose owner name is a
/// compression pointer to itself (a name that never ends) as an answer.
#[test]
fn a_dns_answer_whose_name_points_to_itself_is_no_answer() {
    let dir = scratch("udp-rr-pointer-loop");
    let (code, rep, err) = against_fake_dns(
        &dir,
        |q, _| {
            let mut r = answered(q, u16::from_be_bytes([q[0], q[1]]));
            // The owner name (0xc0 0x0c after the question) points at
            // its own offset instead.
            let at = q.len() as u16;
            r[q.len()..q.len() + 2].copy_from_slice(&(0xc000 | at).to_be_bytes());
            r
        },
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(u(&rep["transactions"]), 0, "{rep}");
    assert_eq!(u(&rep["errors"]["by_class"]["protocol_error"]), 10, "{rep}");
}
