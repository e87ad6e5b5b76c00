//! Integration tests of `sockscope serve echo` and `serve udp-sink`: the
//! real binary on real loopback sockets. No BPF: these run as root and as
//! any other user. Every wait is bounded; a server left behind by a failed
//! test is killed when its handle drops.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use sockscope::proto::rr;
use sockscope::proto::udp::{
    HEADER_LEN, Header, Kind, MAX_DATAGRAM, SinkReport, fin_datagram, parse_report,
};

use common::server::{Server, stop_ok};

const IO_TIMEOUT: Duration = Duration::from_secs(10);
const TRANSPORTS: [&str; 3] = ["threaded", "epoll", "uring"];

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn request(seq: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    rr::fill_request(&mut b, seq);
    b
}

/// Reads one framed response to transaction `seq` and checks every byte.
fn read_response(s: &mut TcpStream, seq: u64, req: usize, resp: usize) {
    let mut got = vec![0u8; resp];
    s.read_exact(&mut got).expect("reading a response");
    assert_eq!(
        rr::check_response(&got, 0, seq, req),
        None,
        "response {seq}"
    );
}

/// One framed transaction (request `seq`, 100 bytes -> 1000 bytes).
fn transact(s: &mut TcpStream, seq: u64) {
    s.write_all(&request(seq, 100)).unwrap();
    read_response(s, seq, 100, 1000);
}

fn counters(j: &Value) -> &Value {
    &j["counters"]
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// CPU time (user + system) of `pid` so far, seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat; `after` starts at field 3.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn rss_kb(pid: i32) -> u64 {
    sockscope::procfs::status_kb(pid, "VmRSS").expect("VmRSS")
}

fn json_path(name: &str) -> PathBuf {
    common::scratch(name).join("out.json")
}

fn framed(transport: &str, json: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "serve",
        "echo",
        "--transport",
        transport,
        "--req-size",
        "100",
        "--resp-size",
        "1000",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn plain_echo_returns_every_byte() {
    for t in TRANSPORTS {
        let json = json_path(&format!("plain-{t}"));
        let srv = Server::start(&[
            "serve",
            "echo",
            "--transport",
            t,
            "--json",
            json.to_str().unwrap(),
        ]);
        let mut c = connect(srv.addr);
        c.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        // 1 MiB written by one thread while this one reads it back.
        let data: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
        let mut w = c.try_clone().unwrap();
        let sent = data.clone();
        let writer = thread::spawn(move || w.write_all(&sent).unwrap());
        let mut back = vec![0u8; data.len()];
        c.read_exact(&mut back).unwrap();
        writer.join().unwrap();
        assert!(back == data, "{t}: echoed bytes differ");
        drop(c);
        let j = stop_ok(srv, &json);
        assert_eq!(j["transport"], t);
        assert!(
            j["transactions"].is_null(),
            "{t}: plain echo has no transactions"
        );
        assert_eq!(u(&counters(&j)["bytes_in"]), 5 + (1 << 20));
        assert_eq!(u(&counters(&j)["bytes_out"]), 5 + (1 << 20));
        assert_eq!(u(&counters(&j)["accepted"]), 1);
    }
}

#[test]
fn framed_sequential_pipelined_and_split_requests() {
    for t in TRANSPORTS {
        let json = json_path(&format!("framed-{t}"));
        let srv = framed(t, &json, &[]);
        let mut c = connect(srv.addr);
        for seq in 0..5 {
            transact(&mut c, seq);
        }
        // Ten requests in one write.
        let mut batch = Vec::new();
        for seq in 5..15 {
            batch.extend_from_slice(&request(seq, 100));
        }
        c.write_all(&batch).unwrap();
        for seq in 5..15 {
            read_response(&mut c, seq, 100, 1000);
        }
        // One request in three writes, with pauses so they arrive apart.
        let r = request(15, 100);
        for part in [&r[..1], &r[1..60], &r[60..]] {
            c.write_all(part).unwrap();
            thread::sleep(Duration::from_millis(30));
        }
        read_response(&mut c, 15, 100, 1000);
        // Half a request then a pipelined one and a half.
        let mut two = request(16, 100);
        two.extend_from_slice(&request(17, 100));
        c.write_all(&two[..50]).unwrap();
        thread::sleep(Duration::from_millis(30));
        c.write_all(&two[50..]).unwrap();
        read_response(&mut c, 16, 100, 1000);
        read_response(&mut c, 17, 100, 1000);
        drop(c);
        thread::sleep(Duration::from_millis(100));
        let j = stop_ok(srv, &json);
        assert_eq!(u(&j["transactions"]), 18, "{t}");
        assert_eq!(u(&counters(&j)["requests"]), 18, "{t}");
        assert_eq!(u(&counters(&j)["bytes_out"]), 18_000, "{t}");
        assert_eq!(u(&counters(&j)["closed_by_peer"]), 1, "{t}");
    }
}

#[test]
fn many_concurrent_clients_transactions_add_up_exactly() {
    const CLIENTS: u64 = 200;
    const EACH: u64 = 25;
    for t in TRANSPORTS {
        let json = json_path(&format!("many-{t}"));
        let srv = framed(t, &json, &[]);
        let addr = srv.addr;
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                thread::Builder::new()
                    .stack_size(128 << 10)
                    .spawn(move || {
                        let mut c = connect(addr);
                        for k in 0..EACH {
                            transact(&mut c, i * 1000 + k);
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in clients {
            h.join().expect("a client failed");
        }
        let j = stop_ok(srv, &json);
        assert_eq!(u(&j["transactions"]), CLIENTS * EACH, "{t}");
        assert_eq!(u(&counters(&j)["accepted"]), CLIENTS, "{t}");
        assert_eq!(u(&counters(&j)["errors"]), 0, "{t}");
    }
}

#[test]
fn half_closed_client_gets_the_whole_response() {
    for t in TRANSPORTS {
        let json = json_path(&format!("half-{t}"));
        let srv = framed(t, &json, &[]);
        let mut c = connect(srv.addr);
        let mut reqs = request(1, 100);
        reqs.extend_from_slice(&request(2, 100));
        c.write_all(&reqs).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 2000, "{t}");
        assert_eq!(rr::check_response(&got[..1000], 0, 1, 100), None);
        assert_eq!(rr::check_response(&got[1000..], 0, 2, 100), None);
        let j = stop_ok(srv, &json);
        assert_eq!(u(&j["transactions"]), 2, "{t}");
        assert_eq!(u(&counters(&j)["closed_by_peer"]), 1, "{t}");
    }
}

#[test]
fn emfile_is_survived_without_spinning() {
    for t in TRANSPORTS {
        let json = json_path(&format!("emfile-{t}"));
        let srv = Server::spawn(
            &[
                "serve",
                "echo",
                "--transport",
                t,
                "--req-size",
                "100",
                "--resp-size",
                "1000",
                "--json",
                json.to_str().unwrap(),
            ],
            Some(64),
        );
        let mut srv = srv;
        let cpu0 = cpu_seconds(srv.pid);
        let t0 = Instant::now();
        // The kernel completes handshakes into the backlog whether or not
        // the server accepts, so these connects succeed; the server runs
        // out of descriptors part way through accepting them.
        let conns: Vec<TcpStream> = (0..200).map(|_| connect(srv.addr)).collect();
        thread::sleep(Duration::from_millis(1500));
        let cpu1 = cpu_seconds(srv.pid);
        let wall = t0.elapsed().as_secs_f64();
        assert!(srv.alive(), "{t}: server died: {}", srv.stderr());
        assert!(
            cpu1 - cpu0 < 0.5 * wall,
            "{t}: server used {:.2} s CPU in {wall:.2} s: spinning on EMFILE?",
            cpu1 - cpu0
        );
        drop(conns);
        // Once descriptors are free again (after at most one backoff of
        // 1 s), a fresh connection is served.
        let mut c = connect(srv.addr);
        transact(&mut c, 7);
        drop(c);
        let j = stop_ok(srv, &json);
        let ae = &counters(&j)["accept_errors"];
        assert!(u(&ae["emfile"]) > 0, "{t}: no EMFILE counted: {ae}");
        assert!(u(&ae["backoffs"]) > 0, "{t}: {ae}");
        assert_eq!(u(&j["transactions"]), 1, "{t}");
    }
}

#[test]
fn max_conns_refuses_the_extra_connection() {
    for t in TRANSPORTS {
        let json = json_path(&format!("maxc-{t}"));
        let srv = framed(t, &json, &["--max-conns", "5"]);
        let mut five: Vec<TcpStream> = (0..5).map(|_| connect(srv.addr)).collect();
        for (i, c) in five.iter_mut().enumerate() {
            transact(c, i as u64);
        }
        // The sixth is accepted and closed at once: EOF or a reset.
        let mut sixth = connect(srv.addr);
        let _ = sixth.write_all(&request(9, 100));
        let mut buf = [0u8; 1000];
        match sixth.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("{t}: sixth connection got {n} bytes"),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                ),
                "{t}: sixth connection: {e}"
            ),
        }
        for (i, c) in five.iter_mut().enumerate() {
            transact(c, 100 + i as u64);
        }
        // A slot freed is a slot available again.
        drop(five.pop());
        thread::sleep(Duration::from_millis(200));
        let mut again = connect(srv.addr);
        transact(&mut again, 200);
        drop((five, again));
        let j = stop_ok(srv, &json);
        assert_eq!(u(&counters(&j)["rejected_max_conns"]), 1, "{t}");
        assert_eq!(u(&counters(&j)["accepted"]), 6, "{t}");
        assert_eq!(u(&j["transactions"]), 11, "{t}");
    }
}

#[test]
fn slow_reader_is_held_back_and_others_are_served() {
    for t in TRANSPORTS {
        let json = json_path(&format!("slow-{t}"));
        let srv = framed(t, &json, &[]);
        let rss0 = rss_kb(srv.pid);
        let slow = connect(srv.addr);
        slow.set_write_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let pushed = Arc::new(AtomicBool::new(false));
        let writer = {
            let mut w = slow.try_clone().unwrap();
            let done = Arc::clone(&pushed);
            thread::spawn(move || {
                // 1000 requests per write; each answer is 10x larger.
                let mut chunk = Vec::new();
                for seq in 0..1000 {
                    chunk.extend_from_slice(&request(seq, 100));
                }
                let mut total = 0usize;
                while total < 256 << 20 {
                    match w.write(&chunk) {
                        Ok(n) => total += n,
                        // Blocked for a second: every buffer on the way is
                        // full, the server has stopped reading.
                        Err(_) => break,
                    }
                }
                done.store(true, Ordering::SeqCst);
                total
            })
        };
        let pushed_bytes = writer.join().unwrap();
        assert!(pushed.load(Ordering::SeqCst));
        assert!(
            pushed_bytes < 256 << 20,
            "{t}: the server kept reading {pushed_bytes} bytes from a client that never reads"
        );
        let grown_kb = rss_kb(srv.pid).saturating_sub(rss0);
        assert!(
            grown_kb < 16 << 10,
            "{t}: server RSS grew {grown_kb} kB with one slow reader"
        );
        // Others are still served.
        let mut other = connect(srv.addr);
        for seq in 0..10 {
            transact(&mut other, seq);
        }
        drop(other);
        thread::sleep(Duration::from_millis(200));
        // Stop with the slow reader still owing: the drain gives up after
        // its bound and the server exits 0.
        let t0 = Instant::now();
        let j = stop_ok(srv, &json);
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "{t}: drain not bounded"
        );
        assert_eq!(u(&counters(&j)["open_at_stop"]), 1, "{t}");
        assert_eq!(u(&counters(&j)["drain_timeouts"]), 1, "{t}");
        drop(slow);
    }
}

#[test]
fn sigterm_with_idle_connections_drains_at_once() {
    for t in TRANSPORTS {
        let json = json_path(&format!("term-{t}"));
        let srv = framed(t, &json, &[]);
        let mut conns: Vec<TcpStream> = (0..3).map(|_| connect(srv.addr)).collect();
        for (i, c) in conns.iter_mut().enumerate() {
            transact(c, i as u64);
        }
        let t0 = Instant::now();
        let (st, err) = srv.stop();
        assert!(st.success(), "{t}: {st}: {err}");
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "{t}: idle drain took {:?}",
            t0.elapsed()
        );
        assert!(err.contains("stopped by SIGTERM"), "{t}: {err}");
        let j = common::read_json(&json);
        assert_eq!(j["schema"], "sockscope.serve.echo");
        assert_eq!(j["stop_reason"], "signal:SIGTERM");
        assert_eq!(u(&counters(&j)["open_at_stop"]), 3, "{t}");
        assert_eq!(u(&j["transactions"]), 3, "{t}");
        assert!(j["cpu_user_s"].as_f64().is_some());
        assert!(j["cpu_system_s"].as_f64().is_some());
        // The server closed them: each client now reads EOF.
        for mut c in conns {
            let mut b = [0u8; 1];
            assert_eq!(c.read(&mut b).unwrap_or(0), 0, "{t}");
        }
    }
}

#[test]
fn bad_listen_address_fails_and_writes_nothing() {
    let dir = common::scratch("badlisten");
    let json = dir.join("out.json");
    let j = json.to_str().unwrap();
    let out = common::run(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--listen",
        "256.1.1.1:0",
        "--json",
        j,
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("256.1.1.1:0"));
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for t in TRANSPORTS {
        let out = common::run(&[
            "serve",
            "echo",
            "--transport",
            t,
            "--listen",
            &addr,
            "--json",
            j,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{t}: {err}");
        assert!(err.contains("in use") && err.contains(&addr), "{t}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{t}: announced a port it does not own"
        );
    }
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let uaddr = udp.local_addr().unwrap().to_string();
    let out = common::run(&["serve", "udp-sink", "--listen", &uaddr, "--json", j]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Usage errors.
    for args in [
        &["serve", "echo", "--transport", "threaded", "--threads", "2"][..],
        &["serve", "echo", "--transport", "epoll", "--req-size", "100"][..],
        &[
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--resp-size",
            "0",
            "--req-size",
            "1",
        ][..],
        &[
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--json",
            "/nonexistent/dir/x.json",
        ][..],
    ] {
        let out = common::run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    assert!(!json.exists(), "a failed run wrote {}", json.display());
}

#[test]
fn ipv6_loopback_works() {
    if TcpListener::bind("[::1]:0").is_err() {
        eprintln!("SKIP ipv6_loopback_works: no ::1 here");
        return;
    }
    for t in TRANSPORTS {
        let json = json_path(&format!("v6-{t}"));
        let srv = framed(t, &json, &["--listen", "[::1]:0"]);
        assert!(srv.addr.is_ipv6(), "{}", srv.addr);
        let mut c = connect(srv.addr);
        transact(&mut c, 3);
        drop(c);
        let j = stop_ok(srv, &json);
        assert!(j["listen"].as_str().unwrap().starts_with("[::1]:"));
        assert_eq!(u(&j["transactions"]), 1);
    }
}

#[test]
fn work_us_burns_cpu_per_request() {
    let json = json_path("work");
    let srv = framed("epoll", &json, &["--work-us", "2000", "--threads", "1"]);
    let mut c = connect(srv.addr);
    let t0 = Instant::now();
    for seq in 0..100 {
        transact(&mut c, seq);
    }
    // 100 requests x 2 ms of spinning.
    assert!(t0.elapsed() >= Duration::from_millis(200));
    drop(c);
    let j = stop_ok(srv, &json);
    assert!(j["cpu_user_s"].as_f64().unwrap() >= 0.15, "{j}");
    assert_eq!(u(&j["work_us"]), 2000);
}

// ---------------------------------------------------------------- udp-sink

// The UDP tests take common::serial(): the burst test reads system-wide
// UDP drop counters, which another UDP test could move.

fn datagram(run: u32, seq: u64, kind: Kind, size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size.max(HEADER_LEN)];
    Header {
        run,
        seq,
        sent_ns: sockscope::clock::monotonic_ns(),
        kind,
    }
    .encode(&mut b);
    b
}

/// Sends FIN (published) until a REPORT for `run` comes back (bounded),
/// as `load udp` does: a header-only FIN first, then as long as the sink's
/// NEED says. Every answer must be no longer than the FIN it answers.
fn fin(sock: &UdpSocket, to: SocketAddr, run: u32, published: u64) -> SinkReport {
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    // A REPORT answering an earlier FIN must not be taken for this one.
    sock.set_nonblocking(true).unwrap();
    while sock.recv_from(&mut buf).is_ok() {}
    sock.set_nonblocking(false).unwrap();
    let mut len = HEADER_LEN;
    for _ in 0..50 {
        sock.send_to(&fin_datagram(run, published, len), to)
            .unwrap();
        let Ok((n, _)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some(h) = Header::decode(&buf[..n]) else {
            continue;
        };
        if h.run != run {
            continue;
        }
        assert!(n <= len, "a {n}-byte answer to a {len}-byte FIN");
        match h.kind {
            Kind::Report => {
                assert_eq!(h.seq, published);
                return parse_report(&buf[..n]).expect("REPORT JSON");
            }
            Kind::Need => len = h.seq as usize,
            k => panic!("{k:?} in answer to a FIN"),
        }
    }
    panic!("no REPORT for run {run:x}");
}

fn sink(extra: &[&str], json: &Path) -> Server {
    let mut args = vec!["serve", "udp-sink", "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn udp_sink_accounts_holes_reorders_duplicates_and_late_fills() {
    let _g = common::serial();
    let json = json_path("udp-exact");
    let srv = sink(&[], &json);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let run = 0x5eed_0001;
    // 5, 7, 8 missing; 3 after 4 (reordered); 6 twice; 10, 11 never sent
    // (tail loss: the FIN says 12 were published).
    for seq in [0, 1, 2, 4, 3, 6, 6, 9] {
        tx.send_to(&datagram(run, seq, Kind::Data, 200), srv.addr)
            .unwrap();
    }
    tx.send_to(b"not ours", srv.addr).unwrap();
    let r = fin(&tx, srv.addr, run, 12);
    assert_eq!(r.run, run);
    assert_eq!(r.received, 7);
    assert_eq!(r.duplicates, 1);
    assert_eq!(r.reordered, 1);
    assert_eq!(r.interior_gaps, 3);
    assert_eq!(r.max_seq, Some(9));
    assert!(r.rcvbuf_granted > 0);
    let lat = sockscope::stats::LatencyHist::from_v2_base64(&r.latency_hist).unwrap();
    assert_eq!(lat.len(), 7);
    // A late arrival fills hole 5; the next FIN's REPORT says so.
    tx.send_to(&datagram(run, 5, Kind::Data, 200), srv.addr)
        .unwrap();
    let r = fin(&tx, srv.addr, run, 12);
    assert_eq!((r.received, r.reordered, r.interior_gaps), (8, 2, 2));
    // Another run: only tail loss, no interior gap.
    let run2 = 0x5eed_0002;
    for seq in 0..10 {
        tx.send_to(&datagram(run2, seq, Kind::Data, 100), srv.addr)
            .unwrap();
    }
    let r2 = fin(&tx, srv.addr, run2, 13);
    assert_eq!((r2.received, r2.interior_gaps, r2.reordered), (10, 0, 0));
    let (st, err) = srv.stop();
    assert!(st.success(), "{st}: {err}");
    assert!(err.contains("published 12, received 7, lost 5"), "{err}");
    assert!(err.contains("published 13, received 10, lost 3"), "{err}");
    let j = common::read_json(&json);
    assert_eq!(j["schema"], "sockscope.serve.udp-sink");
    assert_eq!(u(&j["foreign"]), 1);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(u(&runs[0]["lost"]), 4);
    assert_eq!(u(&runs[0]["report"]["interior_gaps"]), 2);
    assert_eq!(u(&runs[1]["lost"]), 3);
    assert_eq!(u(&runs[1]["report"]["interior_gaps"]), 0);
    assert_eq!(u(&runs[1]["published"]), 13);
}

#[test]
fn udp_sink_burst_loss_matches_kernel_rcvbuf_errors() {
    let _g = common::serial();
    const N: u64 = 20_000;
    let json = json_path("udp-burst");
    let srv = sink(&["--rcvbuf", "4096"], &json);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let run = 0xb0b5_0001;
    let before = sockscope::procfs::snmp::read(false).unwrap();
    let softnet0 = softnet_dropped();
    for seq in 0..N {
        tx.send_to(&datagram(run, seq, Kind::Data, 1000), srv.addr)
            .unwrap();
    }
    let r = fin(&tx, srv.addr, run, N);
    let after = sockscope::procfs::snmp::read(false).unwrap();
    let kernel = after.since(&before).rcvbuf_errors;
    let softnet = softnet_dropped() - softnet0;
    assert!(r.received < N, "nothing dropped into a 4 KiB buffer?");
    assert!(r.interior_gaps <= N - r.received);
    // Every datagram published was either received or dropped by the
    // kernel for a full receive buffer; a drop elsewhere (the per-CPU
    // backlog, softnet_stat) is the only accepted explanation of a gap.
    assert_eq!(
        r.received + kernel + softnet,
        N,
        "received {} + RcvbufErrors {kernel} + softnet drops {softnet} != published {N}",
        r.received
    );
    let (st, err) = srv.stop();
    assert!(st.success(), "{st}: {err}");
    let j = common::read_json(&json);
    assert_eq!(u(&j["rcvbuf_requested"]), 4096);
    assert!(u(&j["rcvbuf_granted"]) >= 4096);
    assert_eq!(u(&j["runs"][0]["lost"]), N - r.received);
    assert!(u(&j["kernel"]["rcvbuf_errors"]) >= kernel);
}

/// Sum of the "dropped" column of /proc/net/softnet_stat (hex).
fn softnet_dropped() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .map(|s| {
            s.lines()
                .filter_map(|l| l.split_whitespace().nth(1))
                .filter_map(|v| u64::from_str_radix(v, 16).ok())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn udp_sink_ends_on_expect_and_on_idle() {
    let _g = common::serial();
    let json = json_path("udp-expect");
    let mut srv = sink(&["--expect", "100"], &json);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in 0..100 {
        tx.send_to(&datagram(7, seq, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    let r = fin(&tx, srv.addr, 7, 100);
    assert_eq!(r.received, 100);
    let (st, err) = srv.wait(Duration::from_secs(5));
    assert!(st.success(), "{st}: {err}");
    let j = common::read_json(&json);
    assert_eq!(j["end_reason"], "expect");

    let json = json_path("udp-idle");
    let mut srv = sink(&["--idle-timeout", "0.3"], &json);
    tx.send_to(&datagram(8, 0, Kind::Data, 64), srv.addr)
        .unwrap();
    let (st, err) = srv.wait(Duration::from_secs(5));
    assert!(st.success(), "{st}: {err}");
    let j = common::read_json(&json);
    assert_eq!(j["end_reason"], "idle");
    assert_eq!(u(&j["runs"][0]["report"]["received"]), 1);
    assert!(j["runs"][0]["published"].is_null());
}

/// The next datagram `sock` receives (bounded wait): its length and header.
fn reply(sock: &UdpSocket) -> (usize, Header) {
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut buf = vec![0u8; 65536];
    let (n, _) = sock.recv_from(&mut buf).expect("an answer from the sink");
    (n, Header::decode(&buf[..n]).expect("a sockscope datagram"))
}

#[test]
fn udp_sink_never_answers_with_more_bytes_than_the_fin_carried() {
    let _g = common::serial();
    let json = json_path("udp-noamp");
    let srv = sink(&[], &json);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let run = 0xa3b1_0001;
    // Latencies spread over many buckets: a REPORT far longer than a header.
    let now = sockscope::clock::monotonic_ns();
    for seq in 0..200u64 {
        let mut d = vec![0u8; 64];
        Header {
            run,
            seq,
            sent_ns: now - seq * seq * 997,
            kind: Kind::Data,
        }
        .encode(&mut d);
        tx.send_to(&d, srv.addr).unwrap();
    }
    let mut buf = vec![0u8; 65536];
    // A header-only FIN gets a header-only NEED saying the length needed.
    tx.send_to(&fin_datagram(run, 200, HEADER_LEN), srv.addr)
        .unwrap();
    let (n, h) = reply(&tx);
    assert_eq!((n, h.kind, h.run), (HEADER_LEN, Kind::Need, run));
    let need = h.seq as usize;
    assert!(need > HEADER_LEN + 200 && need <= MAX_DATAGRAM, "{need}");
    // One byte short: NEED again.
    tx.send_to(&fin_datagram(run, 200, need - 1), srv.addr)
        .unwrap();
    let (n, h) = reply(&tx);
    assert_eq!((n, h.kind, h.seq), (HEADER_LEN, Kind::Need, need as u64));
    // Long enough: the REPORT, no longer than the FIN.
    tx.send_to(&fin_datagram(run, 200, need), srv.addr).unwrap();
    let (n, _) = tx.recv_from(&mut buf).unwrap();
    assert!(n <= need, "a {n}-byte REPORT for a {need}-byte FIN");
    assert_eq!(Header::decode(&buf[..n]).unwrap().kind, Kind::Report);
    assert_eq!(parse_report(&buf[..n]).unwrap().received, 200);
    // A version 1 FIN (magic SSU1, answered in full by old sinks) is
    // foreign: the next answer is the one to the FIN after it.
    let mut old = fin_datagram(run, 200, 4096);
    old[0..4].copy_from_slice(b"SSU1");
    tx.send_to(&old, srv.addr).unwrap();
    tx.send_to(&fin_datagram(run, 200, HEADER_LEN), srv.addr)
        .unwrap();
    let (n, h) = reply(&tx);
    assert_eq!((n, h.kind), (HEADER_LEN, Kind::Need));
    let j = stop_ok(srv, &json);
    assert_eq!(u(&j["foreign"]), 1);
    assert_eq!(u(&j["fins_too_short"]), 3);
    assert_eq!(u(&j["report_send_errors"]), 0);
    assert_eq!(u(&j["runs"][0]["fins_answered"]), 1);
}

#[test]
fn udp_sink_answers_a_run_only_at_the_address_of_its_data() {
    let _g = common::serial();
    let json = json_path("udp-source");
    let srv = sink(&[], &json);
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.2:0").unwrap();
    let run = 0xa3b1_0002;
    for seq in 0..10 {
        a.send_to(&datagram(run, seq, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    assert_eq!(fin(&a, srv.addr, run, 10).received, 10);
    // From elsewhere: DATA of A's run, and a long FIN claiming 999
    // published.
    for seq in 10..20 {
        b.send_to(&datagram(run, seq, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    b.send_to(&fin_datagram(run, 999, 4096), srv.addr).unwrap();
    // B's own run is answered; an answer to the forged FIN would have
    // come first.
    let own = 0xa3b1_0003;
    b.send_to(&fin_datagram(own, 0, HEADER_LEN), srv.addr)
        .unwrap();
    let (n, h) = reply(&b);
    assert_eq!((n, h.run, h.kind), (HEADER_LEN, own, Kind::Need));
    let j = stop_ok(srv, &json);
    assert_eq!(u(&j["fins_wrong_source"]), 1);
    assert_eq!(u(&j["data_wrong_source"]), 10);
    let r = &j["runs"][0];
    assert_eq!(u(&r["report"]["run"]), u64::from(run));
    assert_eq!(r["source"], a.local_addr().unwrap().to_string());
    assert_eq!(
        (
            u(&r["published"]),
            u(&r["report"]["received"]),
            u(&r["fins_answered"]),
            u(&r["bytes"])
        ),
        (10, 10, 1, 640)
    );
    assert_eq!(j["runs"][1]["source"], b.local_addr().unwrap().to_string());
}

#[test]
fn udp_sink_flags_a_run_evicted_while_it_was_receiving() {
    use sockscope::serve::udp_sink::table::MAX_LIVE;
    let _g = common::serial();
    let json = json_path("udp-evicted");
    let srv = sink(&[], &json);
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.2:0").unwrap();
    let run = 0xa3b1_0004;
    for seq in 0..5 {
        a.send_to(&datagram(run, seq, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    // A run with a datagram in the last 2 s is never evicted: A pauses
    // longer than that.
    std::thread::sleep(Duration::from_millis(2200));
    // MAX_LIVE new runs from elsewhere, the last one a FIN whose answer
    // says they were all read: the quiet run, A's, is evicted.
    let ids = 0x7e00_0000..0x7e00_0000 + MAX_LIVE as u32;
    for id in ids.clone().take(MAX_LIVE - 1) {
        b.send_to(&datagram(id, 0, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    let last = ids.last().unwrap();
    b.send_to(&fin_datagram(last, 0, HEADER_LEN), srv.addr)
        .unwrap();
    assert_eq!(reply(&b).1.run, last);
    for seq in 5..8 {
        a.send_to(&datagram(run, seq, Kind::Data, 64), srv.addr)
            .unwrap();
    }
    let r = fin(&a, srv.addr, run, 8);
    assert_eq!((r.received, r.after_eviction), (5, 3));
    let j = stop_ok(srv, &json);
    assert_eq!(u(&j["runs_evicted"]), 1);
    assert_eq!(u(&j["untracked_runs"]), 3);
    assert_eq!(u(&j["max_tracked_runs"]), MAX_LIVE as u64);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), MAX_LIVE + 1);
    assert_eq!(runs[0]["evicted"], true);
    assert_eq!(u(&runs[0]["published"]), 8);
    assert_eq!(u(&runs[0]["report"]["after_eviction"]), 3);
    assert_eq!(runs[1]["evicted"], false);
}

#[test]
fn uring_refused_by_seccomp_exits_1_with_the_reason() {
    // A seccomp filter that fails io_uring_setup with EPERM, as a
    // container runtime's default profile does.
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let filter = [
        // seccomp_data.nr
        stmt(LD_W_ABS, 0),
        libc::sock_filter {
            code: JEQ_K,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ];
    let json = json_path("uring-refused");
    let mut cmd = Command::new(common::sockscope());
    cmd.args([
        "serve",
        "echo",
        "--transport",
        "uring",
        "--json",
        json.to_str().unwrap(),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // SAFETY: prctl is async-signal-safe; the filter outlives the call.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn().unwrap();
    let st = common::wait_bounded(&mut child, Duration::from_secs(10));
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(
        err.contains("io_uring") && err.contains("--transport epoll"),
        "{err}"
    );
    // This machine allows io_uring (or the test would have no point), so
    // the message must blame the filter, not the sysctl.
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|v| v.trim() == "0")
    {
        assert!(err.contains("seccomp"), "{err}");
    }
    assert!(out.is_empty(), "announced although it cannot serve: {out}");
    assert!(!json.exists());
}
