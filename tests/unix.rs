//! Unix-domain sockets as load targets and as `serve echo`'s listener
//! (issue 27): `unix:/path`, `unix:@name` and a bare absolute path, against
//! real peers (sockscope's own echo server, redis, nginx, a python3
//! datagram echo), each count set against the peer's own; and the
//! addresses and options that make no sense on a Unix socket, refused with
//! exit 2 and a reason. A missing peer skips its test with a printed
//! reason, and fails it under CI=true.

use crate::common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use common::redis::Redis;
use common::server::{Server, stop_ok};
use common::*;
use serde_json::Value;

/// Every load here is bounded by -n or -d; this catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `sockscope load ARGS --json DIR/l.json`, asserted to exit 0.
fn load_ok(dir: &Path, args: &[&str]) -> Value {
    let (code, rep, err) = load_json(dir, args, LIMIT);
    assert_eq!(code, Some(0), "load {args:?}: {err}");
    rep
}

/// Runs sockscope, asserts exit 2 and a message holding `why`.
fn refused(args: &[&str], why: &str) {
    let (st, _out, err) = run_bounded(args, LIMIT);
    assert_eq!(st.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(why), "{args:?}: expected {why:?} in {err}");
}

#[test]
fn serve_echo_on_a_unix_path_serves_tcp_rr_and_tcp_crr_then_removes_its_socket() {
    let dir = scratch("unix-echo");
    let sock = dir.join("echo.sock");
    let json = dir.join("echo.json");
    let listen = format!("unix:{}", sock.display());
    let srv = Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--threads",
        "2",
        "--listen",
        &listen,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(srv.listen, listen);
    assert!(sock.exists(), "no socket file at {}", sock.display());
    let rr = load_ok(
        &dir,
        &[
            "tcp-rr",
            &listen,
            "-c",
            "4",
            "-n",
            "2000",
            "--connect-rate",
            "1000",
        ],
    );
    assert_eq!(rr["target"], listen.as_str());
    assert_eq!(u(&rr["transactions"]), 2000);
    assert_eq!(u(&rr["connections"]["established"]), 4);
    // A bare absolute path is the same socket.
    let crr = load_ok(
        &dir,
        &["tcp-crr", sock.to_str().unwrap(), "-c", "2", "-n", "300"],
    );
    assert_eq!(crr["target"], listen.as_str());
    assert_eq!(u(&crr["transactions"]), 300);
    assert_eq!(u(&crr["connections"]["connects"]), 300);
    let rep = stop_ok(srv, &json);
    assert_eq!(rep["listen"], listen.as_str());
    // Every connection of both loads reached this server, and no other.
    assert_eq!(u(&rep["counters"]["accepted"]), 4 + 300, "{rep}");
    assert!(!sock.exists(), "the socket file outlived the server");
}

#[test]
fn abstract_names_serve_and_load() {
    let dir = scratch("unix-abstract");
    let name = format!("unix:@sockscope-test-{}", std::process::id());
    let srv = Server::start(&[
        "serve",
        "echo",
        "--transport",
        "threaded",
        "--listen",
        &name,
    ]);
    assert_eq!(srv.listen, name);
    let rep = load_ok(&dir, &["tcp-rr", &name, "-n", "500", "--req", "64"]);
    assert_eq!(rep["target"], name.as_str());
    assert_eq!(u(&rep["transactions"]), 500);
    let (st, err) = srv.stop();
    assert!(st.success(), "{err}");
}

#[test]
fn serve_replaces_only_a_stale_socket_it_may_replace() {
    let dir = scratch("unix-stale");
    // A socket nobody listens on any more (its listener closed) is replaced.
    let stale = dir.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let listen = format!("unix:{}", stale.display());
    let srv = Server::start(&["serve", "echo", "--transport", "epoll", "--listen", &listen]);
    let (st, err) = srv.stop();
    assert!(st.success(), "{err}");
    // A live one is not, and neither is a file of another kind.
    let live_path = dir.join("live.sock");
    let _live = UnixListener::bind(&live_path).unwrap();
    let (st, _out, err) = run_bounded(
        &[
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--listen",
            &format!("unix:{}", live_path.display()),
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("a server is listening on it"), "{err}");
    assert!(live_path.exists());
    let file = dir.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    refused(
        &[
            "serve",
            "echo",
            "--transport",
            "epoll",
            "--listen",
            &format!("unix:{}", file.display()),
        ],
        "exists and is not a socket",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn bad_unix_addresses_and_tcp_only_options_exit_2_saying_why() {
    let dir = scratch("unix-refused");
    let file = dir.join("plain");
    std::fs::write(&file, "").unwrap();
    let file_target = format!("unix:{}", file.display());
    let long = format!("unix:/{}", "x".repeat(107));
    for (args, why) in [
        (vec!["load", "tcp-rr", "unix:"], "names no socket"),
        (
            vec!["load", "redis", "unix:run/redis.sock"],
            "relative path",
        ),
        (vec!["load", "tcp-rr", &long], "at most 107"),
        (
            vec!["load", "tcp-rr", &file_target, "-n", "1"],
            "is not a socket (a regular file)",
        ),
        (
            vec!["load", "http", &file_target, "-n", "1"],
            "is not a socket",
        ),
        (
            vec!["load", "tcp-rr", "unix:@x", "--source-ips", "4", "-n", "1"],
            "--source-ips spreads TCP connects",
        ),
        (
            vec!["load", "tcp-crr", "unix:@x", "--close", "rst", "-n", "1"],
            "has no reset",
        ),
        (vec!["load", "udp", "unix:@x", "--burst", "1"], "use udp-rr"),
        (
            vec!["serve", "echo", "--transport", "epoll", "--listen", "unix:"],
            "names no socket",
        ),
        (
            vec![
                "serve",
                "echo",
                "--transport",
                "epoll",
                "--listen",
                "unix:x.sock",
            ],
            "relative path",
        ),
    ] {
        refused(&args, why);
    }
}

#[test]
fn udp_rr_over_a_unix_datagram_socket_gets_every_reply() {
    if !require_program("python3", "udp_rr_over_a_unix_datagram_socket") {
        return;
    }
    let dir = scratch("unix-dgram");
    let sock = dir.join("dgram.sock");
    // Echoes each datagram to its sender (the load's autobind name) and
    // counts them; exits after 30 s in any case.
    let script = "import socket,sys,signal\n\
        s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM);s.bind(sys.argv[1])\n\
        n=0\n\
        def done(*a):\n    open(sys.argv[2],'w').write(str(n));sys.exit(0)\n\
        signal.signal(signal.SIGTERM,done);signal.alarm(30)\n\
        while True:\n    d,a=s.recvfrom(65536);n+=1;s.sendto(d,a)\n";
    let count = dir.join("count");
    let child = Command::new("python3")
        .args([
            "-c",
            script,
            sock.to_str().unwrap(),
            count.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let end = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < end, "python3 did not bind");
        thread::sleep(Duration::from_millis(20));
    }
    let target = format!("unix:{}", sock.display());
    let rep = load_ok(
        &dir,
        &[
            "udp-rr",
            &target,
            "--request",
            "ping",
            "--expect",
            "ping",
            "-c",
            "2",
            "-n",
            "1000",
        ],
    );
    assert_eq!(rep["target"], target.as_str());
    assert_eq!(u(&rep["transactions"]), 1000);
    assert_eq!(
        u(&rep["udp_rr"]["answered"]),
        u(&rep["udp_rr"]["requests_sent"])
    );
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = wait_bounded(&mut child, Duration::from_secs(10));
    assert!(st.success());
    let served: u64 = std::fs::read_to_string(&count).unwrap().parse().unwrap();
    assert_eq!(served, u(&rep["udp_rr"]["requests_sent"]));
}

#[test]
fn redis_on_a_unix_socket_processes_exactly_the_commands_answered() {
    let dir = scratch("unix-redis");
    let Some(redis) = Redis::start_unix("redis_on_a_unix_socket", &dir) else {
        return;
    };
    let before = redis.commands();
    let target = redis.addr();
    let rep = load_ok(&dir, &["redis", &target, "-c", "4", "-d", "1"]);
    let after = redis.commands();
    assert_eq!(rep["target"], target.as_str());
    let answered = u(&rep["responses"]["answered"]);
    assert!(answered > 100, "{rep}");
    // One of the two INFO calls counts itself in the delta.
    let server = after - before - 1;
    let unanswered = u(&rep["errors"]["unanswered_at_end"]);
    assert!(
        server >= answered && server - answered <= unanswered,
        "redis processed {server}, the load had {answered} answered (+ up to {unanswered})"
    );
}

#[test]
fn nginx_on_a_unix_socket_logs_every_request() {
    let Some(nginx) = Nginx::start_unix("unix-nginx") else {
        return;
    };
    let dir = scratch("unix-nginx-load");
    let target = nginx.url("/index.html");
    let rep = load_ok(&dir, &["http", &target, "-c", "2", "-n", "400"]);
    assert_eq!(rep["target"], target.as_str());
    assert_eq!(u(&rep["transactions"]), 400);
    assert_eq!(u(&rep["responses"]["by_status"]["200"]), 400, "{rep}");
    assert_eq!(nginx.logged(400), 400);
    // One connection per request: the same count.
    let rep = load_ok(&dir, &["http", &target, "--new-connection", "-n", "100"]);
    assert_eq!(u(&rep["transactions"]), 100);
    assert_eq!(nginx.logged(500), 500);
}

#[test]
fn load_artifacts_with_a_unix_target_merge() {
    let dir = scratch("unix-merge");
    let name = format!("unix:@sockscope-merge-{}", std::process::id());
    let srv = Server::start(&["serve", "echo", "--transport", "epoll", "--listen", &name]);
    let mut files = Vec::new();
    for i in 0..2 {
        let rep = load_ok(&dir, &["tcp-rr", &name, "-n", "300"]);
        assert_eq!(u(&rep["transactions"]), 300);
        let f = dir.join(format!("gen{i}.json"));
        std::fs::rename(dir.join("l.json"), &f).unwrap();
        files.push(f);
    }
    let merged = dir.join("merged.json");
    let (st, out, err) = run_bounded(
        &[
            "merge",
            files[0].to_str().unwrap(),
            files[1].to_str().unwrap(),
            "-o",
            merged.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{out}\n{err}");
    let m = read_json(&merged);
    assert_eq!(m["target"], name.as_str(), "{m}");
    assert_eq!(u(&m["transactions"]), 600);
    let (st, err) = srv.stop();
    assert!(st.success(), "{err}");
}

/// Memcached `stats` over the Unix socket `sock`: `name -> value`.
fn memcached_stats(sock: &Path) -> std::collections::BTreeMap<String, u64> {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"stats\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "memcached closed");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ').skip(1);
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn memcached_on_a_unix_socket_counts_every_get_and_set() {
    if !require_program("memcached", "memcached_on_a_unix_socket") {
        return;
    }
    let dir = scratch("unix-memcached");
    // memcached drops to nobody before it binds: the directory must let it.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let sock = dir.join("mc.sock");
    let child = Command::new("memcached")
        .args(["-s", sock.to_str().unwrap(), "-a", "0700", "-u", "nobody"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = Reaped(child);
    let end = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < end, "memcached did not listen on {sock:?}");
        thread::sleep(Duration::from_millis(20));
    }
    let target = format!("unix:{}", sock.display());
    let rep = load_ok(&dir, &["memcached", &target, "-c", "2", "-n", "2000"]);
    assert_eq!(rep["target"], target.as_str());
    assert_eq!(u(&rep["transactions"]), 2000);
    let stats = memcached_stats(&sock);
    assert_eq!(
        stats["cmd_get"] + stats["cmd_set"],
        u(&rep["responses"]["answered"])
    );
    drop(guard);
}

/// Issue 38 (messages): a stream load to a datagram Unix socket failed as
/// `other x7`. The class says what it is, and the failure what to use;
/// and the reverse (udp-rr to a stream socket) too. (Nothing connected:
/// the run writes no JSON, its stderr says it all.)
#[test]
fn a_socket_of_the_other_type_is_named_with_what_to_use() {
    let dir = scratch("unix-wrong-type");
    let dgram = dir.join("dgram.sock");
    let _d = std::os::unix::net::UnixDatagram::bind(&dgram).unwrap();
    let target = format!("unix:{}", dgram.display());
    let (st, _, err) = run_bounded(&["load", "tcp-rr", &target, "-n", "5"], LIMIT);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("(wrong_socket_type x"), "{err}");
    assert!(!err.contains("other x"), "{err}");
    assert!(err.contains("is a datagram socket (SOCK_DGRAM)"), "{err}");
    assert!(err.contains("load it with udp-rr"), "{err}");
    let stream = dir.join("stream.sock");
    let _l = UnixListener::bind(&stream).unwrap();
    let target = format!("unix:{}", stream.display());
    let (st, _, err) = run_bounded(
        &[
            "load",
            "udp-rr",
            &target,
            "--request",
            "x",
            "-n",
            "5",
            "--timeout",
            "0.2",
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("(wrong_socket_type x"), "{err}");
    assert!(err.contains("is a stream socket"), "{err}");
}

#[test]
fn a_link_another_user_planted_to_a_socket_is_not_followed() {
    if !require_root("a_link_another_user_planted_to_a_socket_is_not_followed") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("unix-planted");
    // The victim: a server root reaches through a directory of its own.
    let private = dir.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = private.join("v.sock");
    let json = dir.join("victim.json");
    let srv = Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--listen",
        &format!("unix:{}", victim.display()),
        "--json",
        json.to_str().unwrap(),
    ]);
    // A sticky directory anyone can write, like /tmp, and in it a link
    // nobody made to the victim.
    let sticky = dir.join("tmp");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = sticky.join("app.sock");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
    for workload in ["tcp-rr", "tcp-crr"] {
        refused(
            &[
                "load",
                workload,
                &format!("unix:{}", planted.display()),
                "-n",
                "10",
            ],
            "is a symbolic link owned by nobody",
        );
    }
    // Through a directory that is nobody's link, the same.
    let via = sticky.join("dir");
    std::os::unix::fs::symlink(&private, &via).unwrap();
    std::os::unix::fs::lchown(&via, Some(65534), Some(65534)).unwrap();
    refused(
        &[
            "load",
            "tcp-rr",
            &format!("unix:{}/v.sock", via.display()),
            "-n",
            "10",
        ],
        "is a symbolic link owned by nobody",
    );
    // Root's own link there is followed: the server is reachable, and the
    // one connection it saw is this load's.
    let own = sticky.join("own.sock");
    std::os::unix::fs::symlink(&victim, &own).unwrap();
    let rep = load_ok(
        &dir,
        &[
            "tcp-rr",
            &format!("unix:{}", own.display()),
            "-c",
            "1",
            "-n",
            "10",
        ],
    );
    assert_eq!(u(&rep["transactions"]), 10);
    let rep = stop_ok(srv, &json);
    assert_eq!(u(&rep["counters"]["accepted"]), 1, "{rep}");
}

/// Run as nobody: binds a Unix listener whose name holds a newline and,
/// after it, a row the way /proc/net/unix prints one, with this socket's
/// own inode and another path (`/v`); prints the inode once listening.
const FORGER: &str = r#"
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ino = os.fstat(s.fileno()).st_ino
row = "0000000000000000: 00000002 00000000 00010000 0001 01 %d /v" % ino
path = os.path.join(sys.argv[1], "a\n" + row)
os.makedirs(os.path.dirname(path))
s.bind(path)
s.listen(1)
print(ino, flush=True)
time.sleep(60)
"#;

#[test]
fn a_listener_name_holding_a_newline_forges_no_listener() {
    let test = "a_listener_name_holding_a_newline_forges_no_listener";
    if !require_root(test) || !require_program("setpriv", test) {
        return;
    }
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("ss-forge")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["/usr/bin/python3", "-c", FORGER])
        .arg(dir.path())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let inode: u64 = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
    let found = sockscope::process::ready::owned_unix_listeners(pid);
    let _ = child.kill();
    let _ = child.wait();
    let real = format!(
        "{}/a\n0000000000000000: 00000002 00000000 00010000 0001 01 {inode} /v",
        dir.path().display()
    );
    // The one listener, named whole; no row its name wrote.
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].name, real);
    assert_eq!(found[0].inode, inode);
}
