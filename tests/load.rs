//! `sockscope load` against real sockets on loopback: small in-test servers
//! that misbehave on purpose (corrupt, close, stall), a real redis server,
//! and bad input. These need no privileges.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::redis::Redis;
use common::*;

/// How an in-test server treats each connection.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Echo every byte.
    Echo,
    /// Echo, but flip one byte of every 50th request of `size` bytes.
    Corrupt { size: usize },
    /// Echo `n` bytes per connection, then close it.
    CloseAfter { bytes: usize },
    /// Accept and never read.
    Stall,
    /// Echo for 127.0.0.1; close at once a connection from any other
    /// source (PostgreSQL's stock pg_hba.conf, seen from the client).
    LocalhostOnly,
    /// Echo each read after sleeping this long: a connection serves at
    /// most 1000/ms reads a second.
    Slow { ms: u64 },
}

/// A thread-per-connection test server; counts echoed bytes.
struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub echoed: Arc<AtomicU64>,
    /// Source addresses of the connections accepted.
    pub peers: Arc<std::sync::Mutex<std::collections::BTreeSet<std::net::IpAddr>>>,
}

impl TestServer {
    fn start(b: Behaviour) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let echoed = Arc::new(AtomicU64::new(0));
        let peers = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
        let (st, ec, pe) = (Arc::clone(&stop), Arc::clone(&echoed), Arc::clone(&peers));
        thread::spawn(move || {
            let mut held = Vec::new();
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, from)) => {
                        pe.lock().unwrap().insert(from.ip());
                        s.set_nonblocking(false).unwrap();
                        if let Behaviour::Stall = b {
                            held.push(s); // keep it open, never read
                            continue;
                        }
                        if matches!(b, Behaviour::LocalhostOnly)
                            && from.ip() != std::net::Ipv4Addr::LOCALHOST
                        {
                            drop(s);
                            continue;
                        }
                        let (st, ec) = (Arc::clone(&st), Arc::clone(&ec));
                        thread::spawn(move || serve(s, b, &st, &ec));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self {
            addr,
            stop,
            echoed,
            peers,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(mut s: TcpStream, b: Behaviour, stop: &AtomicBool, echoed: &AtomicU64) {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 65536];
    let mut total = 0usize;
    let mut requests_done = 0usize;
    let mut partial = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                continue;
            }
            Err(_) => return,
        };
        let mut out = buf[..n].to_vec();
        if let Behaviour::Slow { ms } = b {
            thread::sleep(Duration::from_millis(ms));
        }
        match b {
            Behaviour::Corrupt { size } => {
                for (k, byte) in out.iter_mut().enumerate() {
                    let pos = partial + k;
                    if pos % size == 0 && (requests_done + pos / size) % 50 == 49 {
                        *byte ^= 0x55;
                    }
                }
                let all = partial + n;
                requests_done += all / size;
                partial = all % size;
            }
            Behaviour::CloseAfter { bytes } if total + n >= bytes => {
                let keep = bytes - total;
                let _ = s.write_all(&out[..keep]);
                let _ = s.shutdown(Shutdown::Both);
                return;
            }
            _ => {}
        }
        total += n;
        if s.write_all(&out).is_err() {
            return;
        }
        echoed.fetch_add(n as u64, Ordering::Relaxed);
    }
}

fn load(args: &[&str]) -> Output {
    Command::new(sockscope())
        .arg("load")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The per-second intervals of a run that lasted `span_s` seconds: whole
/// seconds, then the second the run ended in, marked partial with the part
/// of it the run covered. `exact`: `span_s` is the run's own length (a UDP
/// run's `duration_s`); otherwise an upper bound (a TCP count run's
/// `duration_s` is taken when the watching thread noticed the end, up to a
/// poll period after the workers stopped, where the intervals are sealed).
fn assert_intervals_cover(rep: &serde_json::Value, span_s: f64, exact: bool) {
    let iv = rep["intervals"].as_array().unwrap();
    assert!(!iv.is_empty(), "{rep}");
    let last = iv.len() - 1;
    for (n, i) in iv.iter().enumerate() {
        assert_eq!(i["t_s"], n as u64, "one interval per second, in order: {i}");
        let covered = i["covered_s"].as_f64().unwrap();
        let left = span_s - n as f64;
        if i["partial"] == false {
            assert_eq!(covered, 1.0, "{i}");
            assert!(
                left >= 1.0 - 1e-3,
                "second {n} of a {span_s} s run is whole: {i}"
            );
            continue;
        }
        assert_eq!(n, last, "only the last second is partial: {iv:?}");
        assert!(covered < 1.0, "{i}");
        if exact {
            assert!(
                (covered - left.max(0.0)).abs() < 1e-5,
                "{covered} vs {left}"
            );
        } else {
            assert!(covered <= left + 1e-5, "{covered} vs at most {left}");
        }
    }
    if exact && span_s.fract() > 1e-3 {
        assert_eq!(
            iv[last]["partial"], true,
            "a {span_s} s run ends mid-second"
        );
    }
}

#[test]
fn a_count_runs_duration_ends_when_its_last_transaction_does() {
    // One connection, closed loop: the transactions follow one another, so
    // the measured window is their latencies end to end plus the loop's own
    // time, never the up-to-100 ms the watching thread takes to notice the
    // workers stopped (a short run then read as twice as long, half its
    // rate).
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-count-duration");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    for _ in 0..3 {
        let out = load(&[
            "tcp-rr",
            &addr,
            "-n",
            "200",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let rep = read_json(&json);
        let d = rep["duration_s"].as_f64().unwrap();
        let busy = rep["latency"]["mean_ns"].as_f64().unwrap() * 200.0 / 1e9;
        assert!(
            d < busy + 0.02,
            "duration_s {d:.4} s for 200 transactions of {:.4} s in all",
            busy
        );
    }
}

#[test]
fn count_mode_completes_exactly_n_transactions() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-count");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "4",
        "-n",
        "5000",
        "--req",
        "64",
        "--verify",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    assert_eq!(rep["schema"], "sockscope.load");
    assert_eq!(rep["transactions"], 5000);
    assert_eq!(rep["errors"]["total"], 0);
    assert_eq!(rep["complete"], true);
    assert_eq!(rep["latency"]["count"], 5000);
    assert!(
        rep["latency"]["hdr_histogram"]
            .as_str()
            .unwrap()
            .starts_with("HISTF")
    );
    assert_eq!(rep["connections"]["established"], 4);
    // Every request byte and response byte crossed the wire once.
    assert_eq!(rep["bytes"]["sent"], 5000 * 64);
    assert_eq!(rep["bytes"]["received"], 5000 * 64);
    assert_eq!(srv.echoed.load(Ordering::Relaxed), 5000 * 64);
    // Well under a second here: one interval, partial.
    assert_intervals_cover(&rep, rep["duration_s"].as_f64().unwrap(), false);
    if rep["duration_s"].as_f64().unwrap() < 0.9 {
        assert_eq!(rep["intervals"][0]["partial"], true, "{rep}");
    }
}

#[test]
fn pipelined_requests_are_matched_in_order() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-pipeline");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "2",
        "--pipeline",
        "16",
        "-n",
        "20000",
        "--req",
        "100",
        "--verify",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    assert_eq!(rep["transactions"], 20000);
    assert_eq!(rep["errors"]["total"], 0);
}

#[test]
fn verify_catches_a_corrupting_server() {
    let srv = TestServer::start(Behaviour::Corrupt { size: 32 });
    let dir = scratch("load-corrupt");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "2",
        "-d",
        "1",
        "--req",
        "32",
        "--verify",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("more than --max-errors 0"),
        "{}",
        stderr(&out)
    );
    let rep = read_json(&json);
    assert_eq!(rep["complete"], false);
    assert!(
        rep["errors"]["by_class"]["response_mismatch"]
            .as_u64()
            .unwrap()
            > 0,
        "{rep}"
    );
    // The summary's first line says why the run is incomplete: the errors,
    // not the end of its duration.
    let out_text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out_text.contains("[INCOMPLETE: errors over --max-errors 0]"),
        "{out_text}"
    );
    // Without --verify the corruption goes unnoticed: this is what the
    // option is for.
    let out = load(&["tcp-rr", &addr, "-c", "2", "-d", "0.5", "--req", "32"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn no_transaction_names_the_errors_seen_and_a_tls_stall_is_named() {
    // Every connection closed after 10 bytes of a 100-byte response:
    // errors within --max-errors, and no transaction.
    let srv = TestServer::start(Behaviour::CloseAfter { bytes: 10 });
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-d",
        "0.5",
        "--req",
        "100",
        "--max-errors",
        "1000000",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no transaction completed in the measured window (short_read x"),
        "{}",
        stderr(&out)
    );
    // A server that accepts and never speaks TLS: no error is counted
    // before --timeout, and the failure names the stalled handshake.
    let stall = TestServer::start(Behaviour::Stall);
    let url = format!("https://{}/", stall.addr);
    let out = load(&["http", &url, "--insecure", "-d", "5", "--timeout", "30"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the TLS handshake did not complete within")
            && !err.contains("no error reported"),
        "{err}"
    );
}

#[test]
fn refused_source_addresses_are_named_with_the_way_out() {
    let srv = TestServer::start(Behaviour::LocalhostOnly);
    let addr = srv.addr.to_string();
    // The default 16 source addresses: 15 of 16 connections dropped.
    let out = load(&["tcp-crr", &addr, "-d", "0.5", "--max-errors", "1000000"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        text.contains(
            "the server may refuse source addresses other than 127.0.0.1: try --source-ips 1"
        ),
        "{text}"
    );
    // With one source address the same server answers, and nothing is said.
    let out = load(&["tcp-crr", &addr, "-n", "50", "--source-ips", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("--source-ips 1"));
}

#[test]
fn a_server_that_closes_mid_run_is_reported() {
    // Each connection is closed after 10 requests' worth of bytes.
    let srv = TestServer::start(Behaviour::CloseAfter {
        bytes: 10 * 50 + 25,
    });
    let dir = scratch("load-close");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let t0 = Instant::now();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "2",
        "-d",
        "1",
        "--req",
        "50",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the run must end on time"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rep = read_json(&json);
    let by = &rep["errors"]["by_class"];
    assert!(by["short_read"].as_u64().unwrap_or(0) > 0, "{by}");
    assert!(rep["transactions"].as_u64().unwrap() >= 10, "{rep}");
    // Reconnects are made, with backoff: a few dozen per connection per
    // second at most, never a spin.
    let connects = rep["connections"]["connects"].as_u64().unwrap();
    assert!((2..=400).contains(&connects), "{connects}");
    // A generous error budget makes the same run a success.
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "2",
        "-d",
        "0.5",
        "--req",
        "50",
        "--max-errors",
        "100000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_stalled_server_ends_on_time_with_timeouts() {
    let srv = TestServer::start(Behaviour::Stall);
    let dir = scratch("load-stall");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let t0 = Instant::now();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "3",
        "-d",
        "1.5",
        "--timeout",
        "0.3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(out.status.code(), Some(1));
    let rep = read_json(&json);
    assert!(
        rep["errors"]["by_class"]["ETIMEDOUT"].as_u64().unwrap() >= 3,
        "{rep}"
    );
    assert_eq!(rep["transactions"], 0);
    // Count mode cannot end on time: it gives up after twice the timeout
    // without progress.
    let t0 = Instant::now();
    let out = load(&["tcp-rr", &addr, "-n", "100", "--timeout", "0.3"]);
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("stalled"), "{}", stderr(&out));
}

#[test]
fn an_unreachable_port_fails_fast_without_artifact() {
    // A port held by this test that nothing listens on.
    let closed = ports::Closed::tcp();
    let port = closed.port;
    let dir = scratch("load-refused");
    let json = dir.join("l.json");
    let addr = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "4",
        "-d",
        "30",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "must not wait out -d 30"
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("no connection") && err.contains("ECONNREFUSED"),
        "{err}"
    );
    assert!(!json.exists());
    let out = load(&["tcp-crr", &addr, "-d", "30"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn malformed_input_is_a_usage_error() {
    for args in [
        vec!["tcp-rr", "not-an-address"],
        vec!["tcp-rr", "127.0.0.1"],
        vec!["tcp-rr", "127.0.0.1:99999"],
        vec!["tcp-rr", "127.0.0.1:1", "-c", "0"],
        vec!["tcp-rr", "127.0.0.1:1", "-d", "0"],
        vec!["tcp-rr", "127.0.0.1:1", "-d", "1", "-n", "5"],
        vec!["tcp-rr", "127.0.0.1:1", "--rate", "-5"],
        vec!["tcp-rr", "127.0.0.1:1", "--request", "PING"],
        vec![
            "tcp-rr",
            "127.0.0.1:1",
            "--request",
            "PING\\q",
            "--expect",
            "4",
        ],
        vec!["tcp-crr", "127.0.0.1:1", "--close", "sideways"],
        vec!["udp", "127.0.0.1:1"],
        vec!["udp", "127.0.0.1:1", "--burst", "10", "--size", "8"],
        // --max-conns: open loop only, never below -c, persistent only.
        vec!["tcp-rr", "127.0.0.1:1", "--max-conns", "4"],
        vec![
            "tcp-rr",
            "127.0.0.1:1",
            "-c",
            "8",
            "--rate",
            "100",
            "--max-conns",
            "4",
        ],
        vec![
            "tcp-crr",
            "127.0.0.1:1",
            "--rate",
            "100",
            "--max-conns",
            "4",
        ],
    ] {
        let out = load(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn tcp_rr_drives_a_real_redis_with_ping_pong() {
    let Some(redis) = Redis::start("a test with redis") else {
        return;
    };
    let dir = scratch("load-redis");
    let json = dir.join("l.json");
    let addr = format!("127.0.0.1:{}", redis.port());
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "8",
        "-n",
        "20000",
        "--request",
        "PING\\r\\n",
        "--expect",
        "+PONG\\r\\n",
        "--verify",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    assert_eq!(rep["transactions"], 20000);
    assert_eq!(rep["errors"]["total"], 0);
    assert_eq!(rep["bytes"]["received"], 20000 * 7);
    // Redis counts the commands it processed (the INFO that asks is
    // counted after it answers).
    let mut s = TcpStream::connect(("127.0.0.1", redis.port())).unwrap();
    s.write_all(b"INFO stats\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 8192];
    while !text.contains("total_commands_processed") || !text.ends_with("\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let cmds: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(cmds, 20000, "redis processed exactly our PINGs");
    // A wrong expectation is caught.
    let out = load(&[
        "tcp-rr",
        &addr,
        "-n",
        "10",
        "--request",
        "PING\\r\\n",
        "--expect",
        "+PANG\\r\\n",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn open_loop_rate_is_held_and_reports_both_latencies() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-rate");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "4",
        "-d",
        "2",
        "--rate",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    let rate = rep["rate_per_s"].as_f64().unwrap();
    assert!((1900.0..=2100.0).contains(&rate), "{rate}");
    let c = rep["latency"]["p50_ns"].as_u64().unwrap();
    let u = rep["latency_uncorrected"]["p50_ns"].as_u64().unwrap();
    assert!(c >= u, "corrected {c} >= uncorrected {u}");
    assert!(rep["send_lag"]["count"].as_u64().unwrap() > 0);
    // Two whole seconds; responses that came in after the end, if any,
    // are in a third, partial one.
    let iv = rep["intervals"].as_array().unwrap();
    let whole: Vec<_> = iv.iter().filter(|i| i["partial"] == false).collect();
    assert_eq!(whole.len(), 2, "{iv:?}");
    assert!(iv.len() <= 3, "{iv:?}");
    if let Some(tail) = iv.get(2) {
        assert_eq!(tail["partial"], true, "{tail}");
        assert!(tail["covered_s"].as_f64().unwrap() < 1.0, "{tail}");
    }
}

#[test]
fn max_conns_opens_connections_while_every_one_is_busy() {
    // 20 ms a request: one connection carries 50/s at most; 200/s needs
    // about 4.
    let srv = TestServer::start(Behaviour::Slow { ms: 20 });
    let dir = scratch("load-max-conns");
    let addr = srv.addr.to_string();
    let run = |extra: &[&str], name: &str| {
        let json = dir.join(name);
        let mut args = vec![
            "tcp-rr",
            &addr,
            "-c",
            "1",
            "-t",
            "1",
            "-n",
            "100",
            "--rate",
            "200",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = load(&args);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        (
            read_json(&json),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (fixed, _) = run(&[], "fixed.json");
    let (grown, text) = run(&["--max-conns", "16"], "grown.json");
    for rep in [&fixed, &grown] {
        assert_eq!(rep["transactions"].as_u64(), Some(100));
        assert_eq!(rep["errors"]["total"].as_u64(), Some(0));
    }
    // One connection, its queue growing by 150 sends a second.
    assert_eq!(fixed["connections"]["established"].as_u64(), Some(1));
    assert!(
        fixed["connections"].get("added").is_none(),
        "{}",
        fixed["connections"]
    );
    // Connections were added, each came up, and within the bound.
    let added = grown["connections"]["added"].as_u64().unwrap();
    assert!((1..=15).contains(&added), "{added}");
    assert_eq!(
        grown["connections"]["established"].as_u64(),
        Some(1 + added)
    );
    assert_eq!(grown["config"]["max_conns"].as_u64(), Some(16));
    assert!(
        text.contains(&format!("{added} added (--max-conns 16")),
        "{text}"
    );
    // The fixed pool's sends queue for up to 1.5 s (100 at 50/s, sent
    // over 0.5 s): its median waits longer than the grown pool's p99.
    let fixed_p50 = fixed["latency"]["p50_ns"].as_u64().unwrap();
    let grown_p99 = grown["latency"]["p99_ns"].as_u64().unwrap();
    assert!(
        grown_p99 < fixed_p50,
        "grown p99 {grown_p99} ns, fixed p50 {fixed_p50} ns"
    );
}

#[test]
fn warmup_is_left_out_of_the_results() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-warmup");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "2",
        "-d",
        "1",
        "--warmup",
        "0.5",
        "--rate",
        "1000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    let tx = rep["transactions"].as_u64().unwrap();
    // 1 s at 1000/s measured; the 500 warm-up transactions are not.
    assert!((950..=1050).contains(&tx), "{tx}");
    assert!((0.99..1.05).contains(&rep["duration_s"].as_f64().unwrap()));
}

#[test]
fn connect_rate_paces_new_connections() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-connect-rate");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    // 40 connections at 20/s over a 0.5 s run: about 11 get opened.
    let out = load(&[
        "tcp-rr",
        &addr,
        "-c",
        "40",
        "-t",
        "1",
        "-d",
        "0.5",
        "--connect-rate",
        "20",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    let est = rep["connections"]["established"].as_u64().unwrap();
    assert!(
        (5..=15).contains(&est),
        "{est} connections in 0.5 s at 20/s"
    );
    assert_eq!(rep["config"]["connect_rate"], 20.0);
    let out = load(&["tcp-crr", &addr, "-d", "1", "--connect-rate", "5"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn crr_spreads_source_addresses_on_loopback() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-sources");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "tcp-crr",
        &addr,
        "-c",
        "2",
        "-n",
        "200",
        "--source-ips",
        "8",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&json);
    assert_eq!(rep["transactions"], 200);
    assert_eq!(rep["config"]["source_ips"], 8);
    let seen = srv.peers.lock().unwrap().clone();
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(seen.contains(&"127.0.0.2".parse::<std::net::IpAddr>().unwrap()));
    // The default for tcp-crr on loopback is 16.
    let out = load(&[
        "tcp-crr",
        &addr,
        "-n",
        "20",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_json(&json)["config"]["source_ips"], 16);
    // Not possible for an IPv6 target.
    let out = load(&["tcp-crr", "[::1]:9", "-n", "20", "--source-ips", "4"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn tcp_crr_counts_connects_and_transactions() {
    let srv = TestServer::start(Behaviour::Echo);
    let dir = scratch("load-crr");
    let json = dir.join("l.json");
    let addr = srv.addr.to_string();
    for close in ["fin", "rst"] {
        let out = load(&[
            "tcp-crr",
            &addr,
            "-c",
            "2",
            "-n",
            "300",
            "--req",
            "20",
            "--verify",
            "--close",
            close,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{close}: {}", stderr(&out));
        let rep = read_json(&json);
        assert_eq!(rep["transactions"], 300);
        assert_eq!(rep["connections"]["connects"], 300);
        assert_eq!(rep["connect_latency"]["count"], 300);
        assert_eq!(rep["config"]["close"], close);
    }
}

// ------------------------------------------- against `sockscope serve`

use common::server::{Server, stop_ok};

const TRANSPORTS: [&str; 3] = ["threaded", "epoll", "uring"];

fn echo_server(transport: &str, json: &std::path::Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "serve",
        "echo",
        "--transport",
        transport,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn client_and_server_transaction_counts_agree_exactly() {
    for transport in TRANSPORTS {
        let dir = scratch(&format!("agree-{transport}"));
        let sj = dir.join("server.json");
        // Count mode: every response is read, so both sides count the same.
        let srv = echo_server(transport, &sj, &["--req-size", "100", "--resp-size", "300"]);
        let addr = srv.addr.to_string();
        let cj = dir.join("rr.json");
        let out = load(&[
            "tcp-rr",
            &addr,
            "-c",
            "16",
            "--pipeline",
            "4",
            "-n",
            "40000",
            "--req",
            "100",
            "--resp",
            "300",
            "--verify",
            "--json",
            cj.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{transport}: {}", stderr(&out));
        let crr = dir.join("crr.json");
        let out = load(&[
            "tcp-crr",
            &addr,
            "-c",
            "4",
            "-n",
            "2000",
            "--req",
            "100",
            "--resp",
            "300",
            "--verify",
            "--json",
            crr.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{transport}: {}", stderr(&out));
        // Duration mode: requests in flight when the window ends are
        // answered during the drain (`answered_after_end`) or left
        // `unanswered_at_end`; the server counted them either way.
        let dj = dir.join("rr-d.json");
        let out = load(&[
            "tcp-rr",
            &addr,
            "-c",
            "8",
            "-d",
            "1",
            "--req",
            "100",
            "--resp",
            "300",
            "--json",
            dj.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{transport}: {}", stderr(&out));
        let server = stop_ok(srv, &sj);
        let rr = read_json(&cj);
        let crr = read_json(&crr);
        let d = read_json(&dj);
        assert_eq!(rr["transactions"], 40000);
        assert_eq!(crr["transactions"], 2000);
        let client_total = 40000
            + 2000
            + d["transactions"].as_u64().unwrap()
            + d["errors"]["answered_after_end"].as_u64().unwrap()
            + d["errors"]["unanswered_at_end"].as_u64().unwrap();
        assert_eq!(
            server["transactions"].as_u64().unwrap(),
            client_total,
            "{transport}: {server}"
        );
    }
}

// The UDP tests take common::serial(): one reads the namespace-wide
// RcvbufErrors counter, which another's datagrams could move.

#[test]
fn udp_loss_equals_published_minus_received_and_the_kernel_agrees() {
    // Serialised with the other UDP tests here, but the kernel counter is
    // namespace-wide: the assertion accepts no slack, so a concurrent UDP
    // drop elsewhere would fail it loudly rather than hide.
    let _g = serial();
    let dir = scratch("udp-loss");
    let sj = dir.join("sink.json");
    let srv = Server::start(&[
        "serve",
        "udp-sink",
        "--rcvbuf",
        "4096",
        "--json",
        sj.to_str().unwrap(),
    ]);
    let lj = dir.join("udp.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "udp",
        &addr,
        "--burst",
        "20000",
        "--size",
        "1000",
        "--json",
        lj.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = read_json(&lj);
    let u = &rep["udp"];
    let published = u["published"].as_u64().unwrap();
    let received = u["sink"]["received"].as_u64().unwrap();
    assert_eq!(published, 20000);
    assert!(
        received < published,
        "a 4 KiB buffer must overflow under a 20k burst"
    );
    assert_eq!(u["lost"].as_u64().unwrap(), published - received);
    assert_eq!(
        u["kernel_rcvbuf_errors_delta"].as_u64().unwrap(),
        published - received
    );
    assert_eq!(u["sink"]["duplicates"], 0);
    let per_second: u64 = rep["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["transactions"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, published, "per-second published counts add up");
    assert_intervals_cover(&rep, rep["duration_s"].as_f64().unwrap(), true);
    let _ = stop_ok(srv, &sj);
}

/// Issue 38 item 16: a sink whose REPORT is impossible (more received
/// than published) printed `lost 0 (0.000%)`. Its loss is unknown: the
/// text says so, the JSON's `lost` and `loss_ratio` are null, the run fails.
#[test]
fn an_impossible_report_prints_the_loss_as_unknown_never_zero() {
    use sockscope::proto::udp::{Header, Kind, SinkReport, report_datagram};
    let _g = serial();
    let dir = scratch("udp-impossible");
    let fake = UdpSocket::bind("127.0.0.1:0").unwrap();
    fake.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let addr = fake.local_addr().unwrap();
    let sink = thread::spawn(move || {
        let mut buf = vec![0u8; 70_000];
        while let Ok((n, from)) = fake.recv_from(&mut buf) {
            let Some(h) = Header::decode(&buf[..n]) else {
                continue;
            };
            if h.kind != Kind::Fin {
                continue;
            }
            // Seven more received than the FIN says were published.
            let rep = SinkReport {
                run: h.run,
                received: h.seq + 7,
                max_seq: h.seq.checked_sub(1),
                ..Default::default()
            };
            fake.send_to(&report_datagram(&rep, h.seq).unwrap(), from)
                .unwrap();
            return;
        }
        panic!("no FIN came");
    });
    let lj = dir.join("udp.json");
    let out = load(&[
        "udp",
        &addr.to_string(),
        "--burst",
        "50",
        "--json",
        lj.to_str().unwrap(),
    ]);
    sink.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the sink's REPORT is impossible"),
        "{}",
        stderr(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lost unknown"), "{text}");
    assert!(!text.contains("lost 0"), "{text}");
    let l = read_json(&lj);
    assert_eq!(u(&l["udp"]["published"]), 50);
    assert!(l["udp"]["lost"].is_null(), "{}", l["udp"]);
    assert!(l["udp"]["loss_ratio"].is_null(), "{}", l["udp"]);
    assert_eq!(l["complete"], false);
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn udp_sink(dir: &std::path::Path) -> (Server, std::path::PathBuf) {
    let sj = dir.join("sink.json");
    let srv = Server::start(&["serve", "udp-sink", "--json", sj.to_str().unwrap()]);
    (srv, sj)
}

#[test]
fn udp_sink_gives_each_of_200_sequential_runs_its_report() {
    let _g = serial();
    const RUNS: u64 = 200;
    let dir = scratch("udp-200");
    let (srv, sj) = udp_sink(&dir);
    let addr = srv.addr.to_string();
    for i in 0..RUNS {
        let lj = dir.join("udp.json");
        let out = load(&[
            "udp",
            &addr,
            "--burst",
            "20",
            "--size",
            "64",
            "--json",
            lj.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "run {i}: {}", stderr(&out));
        assert_eq!(u(&read_json(&lj)["udp"]["sink"]["received"]), 20, "run {i}");
    }
    let j = stop_ok(srv, &sj);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len() as u64 + u(&j["runs_dropped"]["runs"]), RUNS);
    assert_eq!(u(&j["runs_evicted"]), RUNS - u(&j["max_tracked_runs"]));
    for r in runs {
        assert_eq!(
            (u(&r["published"]), u(&r["report"]["received"])),
            (20, 20),
            "{r}"
        );
        assert_eq!(u(&r["fins_answered"]), 1, "{r}");
    }
}

/// A DATA datagram of `run` (`seq`), 64 bytes.
fn udp_data(run: u32, seq: u64) -> Vec<u8> {
    use sockscope::clock::monotonic_ns;
    use sockscope::proto::udp::{Header, Kind};
    let mut d = vec![0u8; 64];
    Header {
        run,
        seq,
        sent_ns: monotonic_ns(),
        kind: Kind::Data,
    }
    .encode(&mut d);
    d
}

/// Sends `n` datagrams of made-up runs from another address than the real
/// client's (every other one a FIN), pausing every 50 for the sink's
/// answer to the last FIN so its receive buffer never overflows (the
/// kernel's RcvbufErrors are namespace-wide).
fn spoof_runs(sink: SocketAddr, n: u32) {
    use sockscope::proto::udp::{HEADER_LEN, Header, Kind, fin_datagram};
    let s = UdpSocket::bind("127.0.0.2:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 2048];
    for i in 0..n {
        let id = 0x5900_0000 + i;
        let d = if i % 2 == 0 {
            udp_data(id, 0)
        } else {
            fin_datagram(id, 1, HEADER_LEN)
        };
        s.send_to(&d, sink).unwrap();
        if i % 50 != 49 {
            continue;
        }
        let answered = (0..100).any(|_| {
            let (len, _) = s.recv_from(&mut buf).expect("the sink answers FINs");
            Header::decode(&buf[..len]).is_some_and(|h| h.run == id && h.kind == Kind::Need)
        });
        assert!(answered, "no answer to the FIN of run {id:x}");
    }
}

#[test]
fn udp_sink_still_answers_a_real_run_after_1000_made_up_runs() {
    let _g = serial();
    const SPOOFED: u32 = 1000;
    let dir = scratch("udp-spoofed");
    let (srv, sj) = udp_sink(&dir);
    spoof_runs(srv.addr, SPOOFED);
    // The made-up runs that were receiving are evicted only once quiet for
    // 2 s; until then new runs are refused (and the load would say so).
    std::thread::sleep(Duration::from_millis(2200));
    let lj = dir.join("udp.json");
    let addr = srv.addr.to_string();
    let out = load(&[
        "udp",
        &addr,
        "--burst",
        "100",
        "--size",
        "200",
        "--json",
        lj.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let l = read_json(&lj);
    assert_eq!(u(&l["udp"]["sink"]["received"]), 100);
    assert_eq!(u(&l["udp"]["lost"]), 0);
    let j = stop_ok(srv, &sj);
    let runs = j["runs"].as_array().unwrap();
    // Bounded: 64 tracked + 1024 records at most; every run accounted
    // (each made-up run is one datagram: tracked, dropped or refused).
    assert!(runs.len() as u64 <= u(&j["max_tracked_runs"]) + u(&j["max_run_records"]));
    let refused = u(&j["runs_refused"]);
    assert_eq!(
        runs.len() as u64 + u(&j["runs_dropped"]["runs"]) + refused,
        u64::from(SPOOFED) + 1
    );
    let real = runs.last().unwrap();
    assert_eq!(real["evicted"], false);
    assert_eq!(
        (u(&real["published"]), u(&real["report"]["received"])),
        (100, 100)
    );
    let received: u64 = runs.iter().map(|r| u(&r["report"]["received"])).sum();
    let counted = received + u(&j["runs_dropped"]["received"]);
    // Refused datagrams are DATA or FIN: counted in no run.
    assert!(counted <= u64::from(SPOOFED) / 2 + 100);
    assert!(counted + refused >= u64::from(SPOOFED) / 2 + 100);
}

/// Issue 22: a sustained flood of made-up run ids evicted a real run, and
/// `load udp` then reported 100 % loss with exit 0 while every datagram
/// arrived. A run that is sending is never evicted now: the flood is what
/// gets refused, and the load's figures are the kernel's.
#[test]
fn a_sustained_flood_of_run_ids_cannot_evict_a_sending_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let _g = serial();
    let dir = scratch("udp-flood");
    let (srv, sj) = udp_sink(&dir);
    let addr = srv.addr;
    let lj = dir.join("udp.json");
    let real = Command::new(sockscope())
        .args([
            "load",
            "udp",
            &addr.to_string(),
            "--rate",
            "4",
            "-d",
            "4",
            "--json",
        ])
        .arg(&lj)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The real run is tracked first; then the flood starts.
    std::thread::sleep(Duration::from_millis(600));
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.2:0").unwrap();
            let mut id = 0x6600_0000u32;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..10 {
                    let _ = s.send_to(&udp_data(id, 0), addr);
                    id += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            id - 0x6600_0000
        })
    };
    let out = real.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    let flooded = flood.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let l = read_json(&lj);
    let published = u(&l["udp"]["published"]);
    assert!(published >= 15, "{published}");
    // Whatever the kernel dropped (the flood shares the buffer) is all
    // that may be missing.
    let lost = u(&l["udp"]["lost"]);
    let kernel = l["udp"]["kernel_rcvbuf_errors_delta"].as_u64().unwrap_or(0);
    assert!(lost <= kernel, "lost {lost}, kernel dropped {kernel}");
    let j = stop_ok(srv, &sj);
    assert!(
        u(&j["runs_refused"]) > 0,
        "{flooded} made-up runs, none refused?"
    );
    let real = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| u(&r["published"]) == published)
        .expect("the real run's record");
    // Tracked from its first datagram to its FIN (once ended it may be
    // evicted like any ended run: its record keeps the figures).
    assert_eq!(u(&real["report"]["after_eviction"]), 0, "{real}");
    assert_eq!(real["report"]["forgotten"], false, "{real}");
    assert_eq!(u(&real["report"]["received"]), published - lost, "{real}");
}

#[test]
fn udp_without_a_sink_fails_and_says_so() {
    let closed = ports::Closed::udp();
    let port = closed.port;
    let dir = scratch("udp-nosink");
    let lj = dir.join("udp.json");
    let addr = format!("127.0.0.1:{port}");
    let out = load(&[
        "udp",
        &addr,
        "--burst",
        "100",
        "--fin-timeout",
        "0.5",
        "--json",
        lj.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("did not answer") || err.contains("send errors"),
        "{err}"
    );
    if lj.exists() {
        assert_eq!(read_json(&lj)["complete"], false);
    }
}

/// Issue 22: a --full-log that cannot be written (here /dev/full: ENOSPC)
/// discarded the whole run, summary and --json included. Now every other
/// output is written, then the run fails naming the log; and `--full-log -`
/// with `--json -` (both on stdout) is refused before anything runs.
#[test]
fn a_full_log_that_cannot_be_written_loses_nothing_else() {
    let dir = scratch("full-log-enospc");
    let srv = TestServer::start(Behaviour::Echo);
    let addr = srv.addr.to_string();
    let json = dir.join("run.json");
    let out = load(&[
        "tcp-rr",
        &addr,
        "-n",
        "300",
        "--full-log",
        "/dev/full",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--full-log /dev/full"), "{err}");
    assert!(err.contains("ENOSPC"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("transactions"),
        "the summary"
    );
    let j = read_json(&json);
    assert_eq!(u(&j["transactions"]), 300);
    assert_eq!(j["complete"], false);
    assert!(j["full_log"].is_null());
    assert!(
        j["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("the full log was not written")),
        "{j}"
    );
    let out = load(&[
        "tcp-rr",
        &addr,
        "-n",
        "10",
        "--full-log",
        "-",
        "--json",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("both write to stdout"));
    drop(srv);
}
