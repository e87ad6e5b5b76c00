//! `sockscope serve relay` in every mode, on real sockets: byte-exact bulk
//! transfers both ways, many concurrent exchanges, half-close, an upstream
//! that closes or is down, and the sockmap path's own promises (early bytes
//! delivered, no payload through userspace, nothing left loaded after
//! SIGKILL). sockmap needs root and BPF: see common::require_bpf.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::server::{Server, stop_ok};
use common::*;
use serde_json::Value;

const MODES: [&str; 3] = ["userspace", "splice", "sockmap"];
const IO: Duration = Duration::from_secs(20);

/// Modes this run can test: sockmap only with BPF.
fn modes(test: &str) -> Vec<&'static str> {
    MODES
        .iter()
        .copied()
        .filter(|m| *m != "sockmap" || require_bpf(&format!("{test} (sockmap)")))
        .collect()
}

fn echo(json: &std::path::Path) -> Server {
    Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--json",
        json.to_str().unwrap(),
    ])
}

fn relay(upstream: SocketAddr, mode: &str, json: &std::path::Path, extra: &[&str]) -> Server {
    let up = upstream.to_string();
    let mut args = vec![
        "serve",
        "relay",
        "--upstream",
        &up,
        "--mode",
        mode,
        "--json",
        json.to_str().unwrap(),
    ];
    if mode == "sockmap" {
        args.push("--strict");
    }
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// A deterministic byte stream (xorshift), so the receiver can check every
/// byte without keeping a copy.
struct Stream(u64);

impl Stream {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = self.0 as u8;
        }
    }
}

/// Sends `total` bytes through `addr` (an echo behind a relay) while
/// reading the echo back, and checks every byte.
fn echo_transfer(addr: SocketAddr, total: usize, seed: u64) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO)).unwrap();
    s.set_write_timeout(Some(IO)).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let mut source = Stream(seed);
        let mut buf = vec![0u8; 64 << 10];
        let mut left = total;
        while left > 0 {
            let n = left.min(buf.len());
            source.fill(&mut buf[..n]);
            w.write_all(&buf[..n]).unwrap();
            left -= n;
        }
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut check = Stream(seed);
    let mut buf = vec![0u8; 64 << 10];
    let mut want = vec![0u8; 64 << 10];
    let mut got = 0usize;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        check.fill(&mut want[..n]);
        assert!(buf[..n] == want[..n], "byte mismatch after {got} bytes");
        got += n;
    }
    writer.join().unwrap();
    assert_eq!(got, total, "the echo ends after exactly what was sent");
}

fn counters(j: &Value) -> &Value {
    &j["counters"]
}

#[test]
fn bulk_transfers_arrive_byte_exact_in_every_mode() {
    for mode in modes("bulk_transfers") {
        let dir = scratch(&format!("relay-bulk-{mode}"));
        let ej = dir.join("echo.json");
        let rj = dir.join("relay.json");
        let e = echo(&ej);
        let r = relay(e.addr, mode, &rj, &[]);
        echo_transfer(r.addr, 1 << 20, 1);
        echo_transfer(r.addr, 64 << 20, 2);
        let rep = stop_ok(r, &rj);
        let c = counters(&rep);
        let total = (1u64 << 20) + (64u64 << 20);
        assert_eq!(c["bytes_client_to_upstream"], total, "{mode}: {c}");
        assert_eq!(c["bytes_upstream_to_client"], total, "{mode}: {c}");
        assert_eq!(c["closed"], 2, "{mode}: both pairs end in order: {c}");
        assert_eq!(c["reset"], 0, "{mode}: {c}");
        let user = c["bytes_through_userspace"].as_u64().unwrap();
        match mode {
            "userspace" => assert_eq!(user, 2 * total),
            _ => assert_eq!(user, 0, "{mode}: payload must not cross userspace"),
        }
        if mode == "sockmap" {
            assert_eq!(rep["mode"], "sockmap");
            assert_eq!(rep["verdict"]["misses"], 0);
            assert_eq!(rep["verdict"]["redirected_bytes"], 2 * total);
        }
        let _ = stop_ok(e, &ej);
    }
}

#[test]
fn many_concurrent_random_exchanges_complete_exactly() {
    for mode in modes("many_concurrent") {
        let dir = scratch(&format!("relay-many-{mode}"));
        let ej = dir.join("echo.json");
        let rj = dir.join("relay.json");
        let e = echo(&ej);
        let r = relay(e.addr, mode, &rj, &[]);
        let addr = r.addr;
        let handles: Vec<_> = (0..200u64)
            .map(|i| {
                thread::spawn(move || {
                    let mut rng = Stream(i * 7919 + 1);
                    let mut sizes = [0u8; 8];
                    rng.fill(&mut sizes);
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_read_timeout(Some(IO)).unwrap();
                    let mut moved = 0u64;
                    // A few request/response exchanges of 1 B .. ~200 KB.
                    for (k, sz) in sizes.iter().take(4).enumerate() {
                        let len = 1 + (*sz as usize) * (1 + (i as usize + k) % 800);
                        let mut req = vec![0u8; len];
                        Stream(i ^ (k as u64 + 99)).fill(&mut req);
                        let mut w = s.try_clone().unwrap();
                        let out = req.clone();
                        let t = thread::spawn(move || w.write_all(&out).unwrap());
                        let mut back = vec![0u8; len];
                        s.read_exact(&mut back).unwrap();
                        t.join().unwrap();
                        assert!(back == req, "exchange {k} of connection {i} corrupted");
                        moved += len as u64;
                    }
                    s.shutdown(Shutdown::Write).unwrap();
                    let mut rest = Vec::new();
                    s.read_to_end(&mut rest).unwrap();
                    assert!(rest.is_empty());
                    moved
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let rep = stop_ok(r, &rj);
        let c = counters(&rep);
        assert_eq!(c["accepted"], 200, "{mode}: {c}");
        assert_eq!(c["closed"], 200, "{mode}: {c}");
        assert_eq!(c["bytes_client_to_upstream"], total, "{mode}: {c}");
        assert_eq!(c["bytes_upstream_to_client"], total, "{mode}: {c}");
        let _ = stop_ok(e, &ej);
    }
}

#[test]
fn a_half_closed_client_still_gets_everything() {
    for mode in modes("half_close") {
        let dir = scratch(&format!("relay-half-{mode}"));
        let ej = dir.join("echo.json");
        let rj = dir.join("relay.json");
        let e = echo(&ej);
        let r = relay(e.addr, mode, &rj, &[]);
        let mut s = TcpStream::connect(r.addr).unwrap();
        s.set_read_timeout(Some(IO)).unwrap();
        let req: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        s.write_all(&req).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        assert!(
            back == req,
            "{mode}: {} of {} bytes came back",
            back.len(),
            req.len()
        );
        let _ = stop_ok(r, &rj);
        let _ = stop_ok(e, &ej);
    }
}

#[test]
fn an_upstream_closing_mid_stream_closes_the_client() {
    for mode in modes("upstream_closes") {
        // The upstream answers the first 1000 bytes with "bye" and closes.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let up = l.local_addr().unwrap();
        let srv = thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 1000];
            c.read_exact(&mut buf).unwrap();
            c.write_all(b"bye").unwrap();
            c.shutdown(Shutdown::Both).unwrap();
        });
        let dir = scratch(&format!("relay-upclose-{mode}"));
        let rj = dir.join("relay.json");
        let r = relay(up, mode, &rj, &[]);
        let mut s = TcpStream::connect(r.addr).unwrap();
        s.set_read_timeout(Some(IO)).unwrap();
        s.write_all(&[1u8; 1000]).unwrap();
        let t0 = Instant::now();
        let mut got = Vec::new();
        let end = s.read_to_end(&mut got);
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{mode}: the client must learn promptly"
        );
        // The bytes before the close arrive; then end of stream (or a reset
        // if the client's own unread data forced one).
        if end.is_ok() {
            assert_eq!(got, b"bye", "{mode}");
        }
        srv.join().unwrap();
        let _ = stop_ok(r, &rj);
    }
}

#[test]
fn an_upstream_that_is_down_gives_a_prompt_close() {
    for mode in modes("upstream_down") {
        // A port held by this test that nothing listens on.
        let closed = common::ports::Closed::tcp();
        let up: SocketAddr = closed.addr().parse().unwrap();
        let dir = scratch(&format!("relay-down-{mode}"));
        let rj = dir.join("relay.json");
        let r = relay(up, mode, &rj, &[]);
        let mut s = TcpStream::connect(r.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let t0 = Instant::now();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("{mode}: got {n} bytes from nowhere"),
            Err(e) => assert!(
                e.kind() == std::io::ErrorKind::ConnectionReset,
                "{mode}: {e}"
            ),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "{mode}: took {:?}",
            t0.elapsed()
        );
        let (st, err) = r.stop();
        assert!(st.success());
        assert!(
            err.contains("closing the client"),
            "{mode}: the reason is logged: {err}"
        );
        let rep = read_json(&rj);
        assert_eq!(counters(&rep)["upstream_failures"], 1, "{mode}");
    }
}

#[test]
fn sockmap_delivers_bytes_sent_at_connect_without_userspace() {
    if !require_bpf("sockmap_delivers_bytes_sent_at_connect_without_userspace") {
        return;
    }
    let dir = scratch("relay-early");
    let ej = dir.join("echo.json");
    let rj = dir.join("relay.json");
    let e = echo(&ej);
    let r = relay(e.addr, "sockmap", &rj, &[]);
    // Each client writes the instant connect returns, before the relay has
    // even accepted: the bytes wait in the client socket's queue until the
    // pair is linked, and then only the kernel can move them.
    for i in 0..50u8 {
        let mut s = TcpStream::connect(r.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let req = [i; 4096];
        s.write_all(&req).unwrap();
        let mut back = [0u8; 4096];
        s.read_exact(&mut back)
            .unwrap_or_else(|err| panic!("connection {i}: early bytes stuck: {err}"));
        assert!(back == req);
    }
    let rep = stop_ok(r, &rj);
    let c = counters(&rep);
    assert_eq!(c["bytes_through_userspace"], 0, "{c}");
    assert_eq!(c["bytes_client_to_upstream"], 50 * 4096, "{c}");
    assert_eq!(rep["verdict"]["passed_bytes"], 0);
    let _ = stop_ok(e, &ej);
}

#[test]
fn sigkill_releases_the_relays_bpf_program_and_maps() {
    if !require_bpf("sigkill_releases_the_relays_bpf_program_and_maps") {
        return;
    }
    let dir = scratch("relay-kill");
    let ej = dir.join("echo.json");
    let rj = dir.join("relay.json");
    let e = echo(&ej);
    let mut r = relay(e.addr, "sockmap", &rj, &[]);
    echo_transfer(r.addr, 1 << 16, 3);
    let (progs, maps) = bpf_ids_of(r.pid);
    assert!(
        !progs.is_empty() && !maps.is_empty(),
        "the relay holds its program and maps"
    );
    // SAFETY: killing our own child.
    unsafe { libc::kill(r.pid, libc::SIGKILL) };
    let _ = r.kill();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let left_p: Vec<u64> = progs
            .iter()
            .copied()
            .filter(|i| bpftool_ids("prog").contains(i))
            .collect();
        let left_m: Vec<u64> = maps
            .iter()
            .copied()
            .filter(|i| bpftool_ids("map").contains(i))
            .collect();
        if left_p.is_empty() && left_m.is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "left after SIGKILL: progs {left_p:?} maps {left_m:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert!(!rj.exists(), "a killed relay writes no artifact");
    let _ = stop_ok(e, &ej);
}

/// (program ids, map ids) held open by `pid`, from its fdinfo.
fn bpf_ids_of(pid: i32) -> (Vec<u64>, Vec<u64>) {
    let (mut progs, mut maps) = (Vec::new(), Vec::new());
    for ent in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(ent.path()) else {
            continue;
        };
        for l in text.lines() {
            if let Some(v) = l.strip_prefix("prog_id:") {
                progs.push(v.trim().parse().unwrap());
            }
            if let Some(v) = l.strip_prefix("map_id:") {
                maps.push(v.trim().parse().unwrap());
            }
        }
    }
    progs.sort_unstable();
    progs.dedup();
    maps.sort_unstable();
    maps.dedup();
    (progs, maps)
}

fn bpftool_ids(what: &str) -> Vec<u64> {
    let out = std::process::Command::new("bpftool")
        .args(["-j", what, "show"])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn sockmap_delivers_bytes_that_waited_for_a_slow_upstream_connect() {
    if !require_bpf("sockmap_delivers_bytes_that_waited_for_a_slow_upstream_connect") {
        return;
    }
    // An upstream whose accept queue is full drops the relay's SYN, so the
    // relay's connect completes only on the SYN retransmit (~1 s later):
    // the client's bytes certainly sit in its socket before the pair is
    // linked, with nothing arriving after them to wake the kernel path.
    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    l.listen(0).unwrap();
    let l: TcpListener = l.into();
    let up = l.local_addr().unwrap();
    let fillers: Vec<TcpStream> = (0..3)
        .filter_map(|_| TcpStream::connect_timeout(&up, Duration::from_millis(200)).ok())
        .collect();
    let dir = scratch("relay-slow-upstream");
    let rj = dir.join("relay.json");
    let r = relay(up, "sockmap", &rj, &[]);
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[42u8; 5000]).unwrap();
    thread::sleep(Duration::from_millis(300));
    // Free the queue and serve: the fillers, closed, read as end of stream
    // at once; the relay's connection gets its bytes echoed.
    drop(fillers);
    let echo = thread::spawn(move || {
        l.set_nonblocking(false).unwrap();
        let mut conns = Vec::new();
        loop {
            let (mut c, _) = l.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_millis(3000)))
                .unwrap();
            let mut buf = [0u8; 5000];
            if c.read_exact(&mut buf).is_ok() {
                c.write_all(&buf).unwrap();
                conns.push(c);
                return conns;
            }
            conns.push(c);
        }
    });
    let mut back = [0u8; 5000];
    s.read_exact(&mut back)
        .expect("the early bytes reached the upstream and came back");
    assert!(back.iter().all(|b| *b == 42));
    let _conns = echo.join().unwrap();
    let rep = stop_ok(r, &rj);
    let c = counters(&rep);
    assert_eq!(c["bytes_through_userspace"], 0, "{c}");
    assert_eq!(rep["verdict"]["passed_bytes"], 0);
}

#[test]
fn max_conns_idle_timeout_and_emfile_are_survived() {
    // No BPF needed: the hardening is the same code for every mode.
    let dir = scratch("relay-hardening");
    let ej = dir.join("echo.json");
    let e = echo(&ej);

    // --max-conns 3: the 4th concurrent client is closed at once.
    let rj = dir.join("max.json");
    let r = relay(
        e.addr,
        "userspace",
        &rj,
        &["--max-conns", "3", "--threads", "1"],
    );
    let held: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(r.addr).unwrap();
            s.set_read_timeout(Some(IO)).unwrap();
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            s
        })
        .collect();
    let mut extra = TcpStream::connect(r.addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(extra.read(&mut b), Ok(0) | Err(_)),
        "the 4th pair is refused"
    );
    drop(held);
    let rep = stop_ok(r, &rj);
    assert_eq!(counters(&rep)["rejected_max_conns"], 1);

    // --idle-timeout: a silent pair is closed, counted, and the client
    // sees the end.
    let rj = dir.join("idle.json");
    let r = relay(e.addr, "splice", &rj, &["--idle-timeout", "0.3"]);
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let mut b = [0u8; 1];
    assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let rep = stop_ok(r, &rj);
    assert_eq!(counters(&rep)["idle_closed"], 1);

    // 64 descriptors: 200 clients cannot all be relayed (each pair needs
    // two); the relay pauses accepting instead of spinning, stays up, and
    // relays a fresh client afterwards.
    let rj = dir.join("emfile.json");
    let up = e.addr.to_string();
    let mut r = Server::spawn(
        &[
            "serve",
            "relay",
            "--upstream",
            &up,
            "--mode",
            "userspace",
            "--threads",
            "1",
            "--json",
            rj.to_str().unwrap(),
        ],
        Some(64),
    );
    let cpu0 = cpu_ticks(r.pid);
    let t0 = Instant::now();
    let burst: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect_timeout(&r.addr, Duration::from_millis(500)).ok())
        .collect();
    thread::sleep(Duration::from_millis(1500));
    let busy = (cpu_ticks(r.pid) - cpu0) as f64 / 100.0;
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        busy < 0.5 * wall,
        "relay burned {busy} s of CPU in {wall} s: spinning on EMFILE?"
    );
    drop(burst);
    thread::sleep(Duration::from_millis(300));
    assert!(r.alive(), "the relay survived");
    echo_transfer(r.addr, 100_000, 9);
    let rep = stop_ok(r, &rj);
    let errs = &counters(&rep)["accept_errors"];
    assert!(
        errs["emfile"].as_u64().unwrap() + counters(&rep)["upstream_failures"].as_u64().unwrap()
            > 0,
        "{rep}"
    );
    let _ = stop_ok(e, &ej);
}

fn cpu_ticks(pid: i32) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = st[st.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}
