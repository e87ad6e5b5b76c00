//! `sockscope profile` of a target that serves a Unix stream socket (issue
//! 27): the listener learned from the target's descriptors and
//! /proc/net/unix, the load sent there and counted against the server's
//! own count (redis INFO), sockscope's own echo server as `--target`, the
//! request anatomy counting the requests on the target's Unix listeners
//! (against the load's own count and pgbench's), and a socket someone else
//! serves refused (exit 5). BPF, redis and PostgreSQL are required
//! (skipped outside CI with a printed reason).

use crate::common;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::redis::{self, Redis};
use common::server::Server;
use common::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A profile into `dir/art`: its status, stdout+stderr and directory.
fn profile(dir: &Path, extra: &[&str]) -> (Option<i32>, String, PathBuf) {
    let out = dir.join("art");
    let mut args = vec!["profile", "--out", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    let (st, so, se) = run_bounded(&args, LIMIT);
    (st.code(), format!("{so}{se}"), out)
}

/// What every profile of a Unix target records: the address and socket
/// learned, the anatomy's row of the listener, the caveat saying there is
/// no network path, the evidence's Unix socket samples (UNIX_DIAG) with the
/// listener by its path and none of TCP's, nothing said unsampled, and
/// the page and summary rendered. Returns the listener's evidence.
fn assert_unix_run(rep: &Value, out: &Path, listen: &str) -> Value {
    assert_eq!(rep["target"]["address"], listen, "{}", rep["target"]);
    let name = listen.strip_prefix("unix:").unwrap();
    let sockets: Vec<&str> = rep["target"]["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        sockets.iter().any(|s| *s == format!("unix {name}")),
        "{sockets:?}"
    );
    assert!(
        rep["anatomy_failure"].is_null(),
        "{}",
        rep["anatomy_failure"]
    );
    unix_turns(rep, name);
    let caveats = rep["caveats"].to_string();
    assert!(
        caveats.contains("Unix socket:") && caveats.contains("no network path"),
        "{caveats}"
    );
    let ev = &rep["evidence"];
    assert!(ev["sockets"].is_null(), "{ev}");
    let unavailable = ev["unavailable"].to_string();
    assert!(
        !unavailable.contains("sock_diag") && !unavailable.contains("not sampled"),
        "{unavailable}"
    );
    let unix = &ev["unix"];
    assert!(u(&unix["samples"]) >= 1, "{unix}");
    assert_eq!(u(&unix["failed_samples"]), 0, "{unix}");
    let listener = listener(unix, name);
    assert_eq!(listener["kind"], "stream");
    assert_eq!(u(&listener["samples"]), u(&unix["samples"]), "{listener}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains(name), "{summary}");
    assert!(
        summary.contains("target's Unix sockets (sock_diag)")
            && summary.contains(&format!("listener {name} (stream)")),
        "{summary}"
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("</html>") && page.contains("Unix listener"));
    listener
}

/// The requests the request anatomy counted on the Unix listener `name`,
/// the target's only followed socket: the turns timed on its row of
/// `anatomy.ports`, and those of connections it found multiplexed
/// (counted, not timed; under load a Unix connection is sometimes taken
/// for one: docs/anatomy.md), and those whose response was being written
/// when the window closed (the load may have read it by then).
fn unix_turns(rep: &Value, name: &str) -> u64 {
    let a = &rep["anatomy"];
    let row = a["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("no anatomy: {a}"))
        .iter()
        .find(|p| p["socket"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {a}"));
    assert_eq!(row["transport"], "unix", "{row}");
    u(&row["turns"]) + u(&a["multiplexed"]["turns"]) + u(&a["writing_at_end"])
}

/// The anatomy's counters that say where a turn went, for a failure's
/// message.
fn anatomy_counts(a: &Value) -> String {
    [
        "turns",
        "connections",
        "multiplexed",
        "before_window",
        "in_flight_at_end",
        "writing_at_end",
        "read_before_ready",
        "unsolicited_writes",
        "foreign_connections",
        "storage_failures",
        "next_during_write",
        "sampling_cut",
        "close_races",
        "close_unwaited",
    ]
    .iter()
    .map(|k| format!("{k}={}", a[*k]))
    .collect::<Vec<_>>()
    .join(" ")
}

/// The Unix evidence's listener named `name`.
fn listener(unix: &Value, name: &str) -> Value {
    unix["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no listener {name}: {unix}"))
        .clone()
}

/// net.core.somaxconn: what the kernel caps a listen() backlog at.
fn somaxconn() -> u64 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn profile_of_redis_on_a_unix_socket_loads_it_and_counts_what_info_counts() {
    let name = "profile_of_redis_on_a_unix_socket";
    if !require_bpf(name) || !redis::available(name) {
        return;
    }
    let dir = scratch("prof-unix-redis");
    let Some(redis) = Redis::start_unix(name, &dir) else {
        return;
    };
    let listen = redis.addr();
    let before = redis.commands();
    let pid = redis.child.id().to_string();
    let (code, msg, out) = profile(&dir, &["--pid", &pid, "--load", "redis -c 4 -d 1"]);
    assert_eq!(code, Some(0), "{msg}");
    let after = redis.commands();
    let rep = read_json(&out.join("run.json"));
    assert_eq!(rep["load"]["target"], listen.as_str());
    let answered = u(&rep["load"]["responses"]["answered"]);
    assert!(answered > 100, "{}", rep["load"]);
    // The second INFO counts itself; the load's unanswered commands at its
    // end may have been processed.
    let server = after - before - 1;
    let unanswered = u(&rep["load"]["errors"]["unanswered_at_end"]);
    assert!(
        server >= answered && server - answered <= unanswered,
        "redis processed {server}, the load answered {answered} (+ up to {unanswered})"
    );
    let l = assert_unix_run(&rep, &out, &listen);
    // Every answer the load got is a turn at redis's socket, and every
    // turn a command redis counted.
    let turns = unix_turns(&rep, listen.strip_prefix("unix:").unwrap());
    // When redis reads a request before its data-ready has run, the late
    // data-ready (on the client's CPU) and that read can both find the last
    // turn answered at the same moment: one of them closes it
    // (docs/anatomy.md, "Closing an answered turn"), so no turn is
    // recorded twice.
    assert!(
        answered <= turns && turns <= server,
        "the anatomy timed {turns} turns: the load answered {answered}, redis processed {server}; its counts: {}",
        anatomy_counts(&rep["anatomy"])
    );
    // redis listens on its unixsocket with its tcp-backlog (511 by
    // default), which the kernel caps at somaxconn.
    assert_eq!(u(&l["backlog"]), 511.min(somaxconn()), "{l}");
    // The load's 4 connections, accepted by redis, in some sample.
    let connected = &rep["evidence"]["unix"]["connected"];
    assert!(u(&connected["max"]) >= 4, "{connected}");
    assert!(u(&connected["seen"]) >= 4, "{connected}");
    assert!(
        connected["recv_q"]["count"].as_u64().is_some(),
        "{connected}"
    );
}

/// A python3 target with two Unix listeners: an echo server on
/// `DIR/echo.sock` (threads, for the load) and `DIR/full.sock`, listening
/// with backlog 2 and never accepting. Killed on drop.
struct TwoListeners {
    child: Reaped,
    echo: PathBuf,
    full: PathBuf,
}

const TWO_LISTENERS: &str = r#"
import socket, sys, threading
full = socket.socket(socket.AF_UNIX)
full.bind(sys.argv[2])
full.listen(2)
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1])
srv.listen(64)
def echo(c):
    with c:
        while True:
            b = c.recv(65536)
            if not b:
                return
            c.sendall(b)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"#;

impl TwoListeners {
    fn start(dir: &Path) -> Self {
        let (echo, full) = (dir.join("echo.sock"), dir.join("full.sock"));
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", TWO_LISTENERS])
            .args([&echo, &full])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting python3");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let t = TwoListeners {
            child: Reaped(child),
            echo,
            full,
        };
        assert_eq!(line.trim(), "ready", "python3 said {line:?}");
        t
    }
}

/// A listener whose accept queue is full for the whole window: three
/// clients connect before the profile starts (a backlog of 2 holds 3: the
/// kernel refuses the next, checked here) and stay connected until it
/// ends, so every sample finds it full, with no timing involved. The
/// evidence says so, with the backlog the target asked for, and the
/// sentence is among the insights.
#[test]
fn a_full_unix_accept_queue_is_seen_in_every_sample() {
    let name = "a_full_unix_accept_queue_is_seen";
    if !require_bpf(name) || !require_program("/usr/bin/python3", name) {
        return;
    }
    let dir = scratch("prof-unix-full").canonicalize().unwrap();
    let target = TwoListeners::start(&dir);
    let waiting: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&target.full).unwrap())
        .collect();
    let extra = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    extra.set_nonblocking(true).unwrap();
    let refused = extra.connect(&socket2::SockAddr::unix(&target.full).unwrap());
    assert_eq!(
        refused.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "the queue holds backlog + 1"
    );
    drop(extra);
    let echo = format!("unix:{}", target.echo.display());
    // A second of load: rounds inside it see the load's connections
    // (after it, the target may already have closed its ends).
    let load = format!("tcp-rr {echo} -c 2 -d 1");
    let pid = target.child.id().to_string();
    let (code, msg, out) = profile(&dir, &["--pid", &pid, "--load", &load]);
    assert_eq!(code, Some(0), "{msg}");
    let rep = read_json(&out.join("run.json"));
    assert!(u(&rep["load"]["transactions"]) > 0, "{}", rep["load"]);
    assert_unix_run(&rep, &out, &echo);
    let unix = &rep["evidence"]["unix"];
    let full = target.full.to_str().unwrap();
    let l = listener(unix, full);
    assert_eq!(u(&l["backlog"]), 2, "{l}");
    assert_eq!(u(&l["accept_queue"]["max"]), 3, "{l}");
    assert!(u(&l["samples"]) >= 1, "{l}");
    assert_eq!(u(&l["samples_full"]), u(&l["samples"]), "{l}");
    let sentence = format!(
        "The Unix listener {full}'s accept queue was full in {n} of {n} samples (backlog 2): \
         connecting clients waited.",
        n = u(&l["samples"])
    );
    assert!(
        rep["insights"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == sentence.as_str()),
        "{}",
        rep["insights"]
    );
    // The echo listener's queue is the target's too; the load's two
    // connections were accepted there.
    let l = listener(unix, target.echo.to_str().unwrap());
    assert_eq!((u(&l["backlog"]), u(&l["samples_full"])), (64, 0), "{l}");
    assert!(u(&unix["connected"]["max"]) >= 2, "{unix}");
    drop(waiting);
}

#[test]
fn a_launched_redis_on_a_unix_socket_only_is_ready_on_it() {
    let name = "a_launched_redis_on_a_unix_socket_only";
    if !require_bpf(name) || !redis::available(name) {
        return;
    }
    let dir = scratch("prof-unix-launch");
    let sock = dir.join("redis.sock");
    let command = redis::unix_command(&sock, &dir);
    let mut args = vec!["--load", "redis -c 2 -n 500", "--"];
    args.extend(command.iter().map(String::as_str));
    let (code, msg, out) = profile(&dir, &args);
    assert_eq!(code, Some(0), "{msg}");
    let rep = read_json(&out.join("run.json"));
    assert_eq!(u(&rep["load"]["transactions"]), 500, "{}", rep["load"]);
    assert_unix_run(&rep, &out, &format!("unix:{}", sock.display()));
}

#[test]
fn serve_echo_on_a_unix_socket_as_the_target_under_tcp_rr() {
    let name = "serve_echo_on_a_unix_socket_as_the_target";
    if !require_bpf(name) {
        return;
    }
    // serve binds through its directory's descriptor; profile names the
    // socket by the path that descriptor resolves to.
    let dir = scratch("prof-unix-echo").canonicalize().unwrap();
    let listen = format!("unix:{}", dir.join("echo.sock").display());
    let target = format!("serve echo --transport epoll --listen {listen}");
    let (code, msg, out) = profile(
        &dir,
        &["--target", &target, "--load", "tcp-rr -c 2 -n 2000"],
    );
    assert_eq!(code, Some(0), "{msg}");
    let rep = read_json(&out.join("run.json"));
    assert_eq!(u(&rep["load"]["transactions"]), 2000);
    assert_eq!(rep["load"]["target"], listen.as_str());
    assert_unix_run(&rep, &out, &listen);
}

/// A server that never sleeps (busy polling its connections) often reads
/// a request before the kernel's data-ready hook for it has run, on the
/// other CPU: the two hooks then meet on the turn that request ends, and
/// the turn is still recorded once.
#[test]
fn a_busy_polling_server_s_turns_are_each_recorded_once() {
    let name = "a_busy_polling_server_s_turns_are_each_recorded_once";
    if !require_bpf(name) {
        return;
    }
    let dir = scratch("prof-unix-busy").canonicalize().unwrap();
    let sock = dir.join("busy.sock");
    let bin = common::build_c("busy_echo.c", "busy_echo", &["-O2"]);
    // It stops by itself after 60 s, if profile has not stopped it.
    let (code, msg, out) = profile(
        &dir,
        &[
            "--requests-only",
            "--load",
            "tcp-rr -c 1 -n 20000",
            "--",
            bin.to_str().unwrap(),
            sock.to_str().unwrap(),
            "60",
        ],
    );
    assert_eq!(code, Some(0), "{msg}");
    let rep = read_json(&out.join("run.json"));
    assert_eq!(u(&rep["load"]["transactions"]), 20000, "{}", rep["load"]);
    let a = &rep["anatomy"];
    let turns = unix_turns(&rep, sock.to_str().unwrap());
    assert_eq!(turns, 20000, "its counts: {}", anatomy_counts(a));
    assert_eq!(
        u(&a["multiplexed"]["connections"]),
        0,
        "{}",
        anatomy_counts(a)
    );
}

#[test]
fn requests_on_a_unix_socket_are_counted_by_the_anatomy_whatever_the_load() {
    let name = "requests_on_a_unix_socket_are_counted";
    if !require_bpf(name) {
        return;
    }
    let dir = scratch("prof-unix-counted").canonicalize().unwrap();
    let sock = dir.join("echo.sock");
    let listen = format!("unix:{}", sock.display());
    let target = format!("serve echo --transport epoll --listen {listen}");
    // sockscope's load alone with the anatomy (--requests-only), and any
    // command as the load (`ADDR` is the socket's path): each of the 300
    // transactions is one turn at the target's socket.
    let own_load = ["--requests-only", "--load", "tcp-rr -c 1 -n 300"];
    let command = format!("{} load tcp-rr unix:ADDR -c 1 -n 300 --quiet", sockscope());
    let external = ["--load-cmd", command.as_str()];
    for (i, extra) in [&own_load[..], &external[..]].into_iter().enumerate() {
        let mut args = vec!["--target", target.as_str()];
        args.extend(extra.iter().copied());
        let run = dir.join(format!("run{i}"));
        std::fs::create_dir_all(&run).unwrap();
        let (code, msg, out) = profile(&run, &args);
        assert_eq!(code, Some(0), "{args:?}: {msg}");
        let rep = read_json(&out.join("run.json"));
        // 300 turns, each recorded once (a read before its data-ready
        // included).
        let turns = unix_turns(&rep, sock.to_str().unwrap());
        assert!(
            turns == 300,
            "{args:?}: the anatomy timed {turns} turns of 300; its counts: {}",
            anatomy_counts(&rep["anatomy"])
        );
        if extra[0] == "--load-cmd" {
            assert_eq!(u(&rep["workload"]["requests"]["count"]), 300);
            let argv = rep["workload"]["command"].to_string();
            assert!(argv.contains(&listen), "ADDR is the socket's path: {argv}");
        } else {
            assert_eq!(u(&rep["load"]["transactions"]), 300);
        }
    }
    // PORT has no value on a Unix socket: refused, saying so.
    let args = ["--target", target.as_str(), "--load-cmd", "true -p PORT"];
    let (code, msg, out) = profile(&dir, &args);
    assert_eq!(code, Some(2), "{msg}");
    assert!(msg.contains("no port"), "{msg}");
    assert!(!out.join("run.json").exists());
}

#[test]
fn a_unix_socket_in_load_that_another_process_serves_exits_5() {
    let name = "a_unix_socket_in_load_that_another_process_serves";
    if !require_bpf(name) {
        return;
    }
    let dir = scratch("prof-unix-taken").canonicalize().unwrap();
    let theirs = format!("unix:{}", dir.join("theirs.sock").display());
    let _other = Server::start(&["serve", "echo", "--transport", "epoll", "--listen", &theirs]);
    let mine = format!("unix:{}", dir.join("mine.sock").display());
    let target = format!("serve echo --transport epoll --listen {mine}");
    let load = format!("tcp-rr {theirs} -c 1 -n 10");
    let (code, msg, out) = profile(
        &dir,
        &["--target", &target, "--load", &load, "--ready-timeout", "5"],
    );
    assert_eq!(code, Some(5), "{msg}");
    assert!(
        msg.contains("another process listens there") && msg.contains(&mine[5..]),
        "{msg}"
    );
    assert!(!out.join("run.json").exists());
}

/// pgbench's count of what it ran: "number of transactions actually
/// processed: N" (with `-t`, "N/N").
fn pgbench_processed(output: &str) -> u64 {
    let line = output
        .lines()
        .find(|l| l.starts_with("number of transactions actually processed:"))
        .unwrap_or_else(|| panic!("pgbench said: {output}"));
    line.rsplit(':')
        .next()
        .unwrap()
        .trim()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Profiles a PostgreSQL server (as user postgres) under pgbench aimed at
/// its Unix socket (`-h SOCKDIR`): 2 clients x 400 transactions of one
/// `SELECT 1` each. `listen` is its TCP listen_addresses (empty: none).
/// Returns the run and pgbench's count.
fn pgbench_over_the_unix_socket(test: &str, listen: &str) -> Option<(Value, u64)> {
    if !require_bpf(test) || !require_program("pgbench", test) {
        return None;
    }
    let pg = common::postgres::Cluster::init(test)?;
    let dir = scratch(test);
    let script = dir.join("select1.sql");
    std::fs::write(&script, "SELECT 1;\n").unwrap();
    let port = common::ports::free_tcp();
    let load = format!(
        "pgbench -h {} -p {port} -U postgres -n -c 2 -t 400 -f {} postgres",
        pg.sock_dir().display(),
        script.display()
    );
    let server = pg.server(listen, port);
    let mut args = vec!["-u", "postgres", "--load-cmd", load.as_str(), "--"];
    args.extend(server.iter().map(String::as_str));
    let (code, msg, out) = profile(&dir, &args);
    assert_eq!(code, Some(0), "{msg}");
    let rep = read_json(&out.join("run.json"));
    let said = rep["workload"]["output"]["tail"]
        .as_str()
        .unwrap()
        .to_string();
    let processed = pgbench_processed(&said);
    assert_eq!(processed, 800, "{said}");
    // The requests counted are the answers on the socket's connections:
    // each transaction's query, and each connection's start-up (its
    // authentication and settings, answered in one write).
    let sock = pg.sock_dir().join(format!(".s.PGSQL.{port}"));
    let turns = unix_turns(&rep, sock.to_str().unwrap());
    let connections = u(&rep["anatomy"]["connections"]);
    assert!((2..=4).contains(&connections), "{}", rep["anatomy"]);
    assert_eq!(
        turns,
        processed + connections,
        "pgbench processed {processed} on {connections} connections; the anatomy's counts: {}",
        anatomy_counts(&rep["anatomy"])
    );
    assert_eq!(u(&rep["workload"]["requests"]["count"]), turns);
    Some((rep, processed))
}

#[test]
fn pgbench_over_postgresqls_unix_socket_is_counted_as_pgbench_counts() {
    let Some((rep, _)) = pgbench_over_the_unix_socket("pgbench_unix_only", "") else {
        return;
    };
    assert!(
        rep["target"]["address"]
            .as_str()
            .unwrap()
            .starts_with("unix:")
    );
}

#[test]
fn pgbench_over_the_unix_socket_of_a_server_with_tcp_too_is_counted() {
    let Some((rep, _)) = pgbench_over_the_unix_socket("pgbench_tcp_and_unix", "127.0.0.1") else {
        return;
    };
    // The target's address is its TCP one; the requests came over the
    // Unix socket and were counted there, none on the TCP port.
    let addr = rep["target"]["address"].as_str().unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let tcp: u64 = rep["anatomy"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["transport"] == "tcp")
        .map(|p| u(&p["turns"]))
        .sum();
    assert_eq!(tcp, 0, "{}", rep["anatomy"]);
}
