//! RESP commands as the request anatomy's requests (issue 39): a real
//! redis-server profiled with redis-benchmark as the load command, each
//! command name's count against redis's own INFO commandstats, pipelined
//! (`-P 16`: a batch is one turn of 16 commands) and lockstep, over TCP and
//! over redis's Unix socket; and hostile bytes through a real socket (the
//! parser gives up on the connection, the run completes, the names stay
//! bounded).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::anatomy::{brief, profile_pid, u};
use common::redis::{self, Redis};
use common::*;
use serde_json::Value;

/// commandstats `calls` per command (lower case, `config|get` style).
fn calls(redis: &Redis) -> BTreeMap<String, u64> {
    redis
        .info("commandstats")
        .iter()
        .filter_map(|(k, row)| {
            let cmd = k.strip_prefix("cmdstat_")?;
            Some((cmd.to_string(), redis::field(row, "calls")))
        })
        .collect()
}

/// What redis counted between two snapshots, INFO left out (the
/// snapshots' own; the first counts itself once answered, before the
/// window), by the name the anatomy gives: the first word upper-cased
/// (`config|get` is CONFIG).
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, n) in after {
        let d = n - before.get(k).copied().unwrap_or(0);
        let name = k.split('|').next().unwrap().to_uppercase();
        if d > 0 && name != "INFO" {
            *out.entry(name).or_insert(0) += d;
        }
    }
    out
}

/// The anatomy's rows: name -> (count, batched, turns), for one endpoint.
fn rows(a: &Value, label: impl Fn(&Value) -> bool) -> BTreeMap<String, (u64, u64, u64)> {
    a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {a}"))
        .iter()
        .filter(|e| label(e))
        .map(|e| {
            assert_eq!(e["protocol"], "resp", "{e}");
            (
                e["name"].as_str().unwrap().to_string(),
                (u(&e["count"]), u(&e["batched"]), u(&e["turns"])),
            )
        })
        .collect()
}

/// Every command of the load is counted under its name, exactly as redis
/// counted it; the requests are the commands, and so is the headline.
fn assert_commands_as_info(
    rep: &Value,
    summary: &str,
    html: &str,
    want: &BTreeMap<String, u64>,
    endpoint: impl Fn(&Value) -> bool,
) -> BTreeMap<String, (u64, u64, u64)> {
    let a = &rep["anatomy"];
    let got = rows(a, endpoint);
    let counts: BTreeMap<String, u64> = got.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    assert_eq!(&counts, want, "{}", brief(a));
    let total: u64 = want.values().sum();
    assert_eq!(u(&a["requests"]), total, "{}", brief(a));
    assert_eq!(u(&a["resp"]["unparsed"]), 0, "{}", brief(a));
    assert_eq!(u(&rep["workload"]["requests"]["count"]), total);
    assert_eq!(u(&rep["derived"]["transactions"]), total);
    let headline = summary
        .lines()
        .find(|l| l.contains("requests/s"))
        .unwrap_or_else(|| panic!("no headline rate: {summary}"));
    assert!(
        headline.contains(&format!("{total} in")) && headline.contains("RESP requests"),
        "{headline}"
    );
    assert!(summary.contains("Requests by command (RESP"), "{summary}");
    assert!(html.contains("id=\"commands\""), "no commands card");
    got
}

#[test]
fn redis_benchmark_pipelined_commands_equal_info_commandstats() {
    let name = "redis_benchmark_pipelined_commands_equal_info_commandstats";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let Some(redis) = Redis::start(name) else {
        return;
    };
    let before = calls(&redis);
    let (rep, summary, html) = profile_pid(
        "resp-pipelined",
        redis.pid(),
        "--load-cmd",
        "redis-benchmark -h HOST -p PORT -P 16 -n 20000 -t get,set,incr -q",
    );
    let want = delta(&before, &calls(&redis));
    for c in ["GET", "SET", "INCR"] {
        assert_eq!(want.get(c), Some(&20000), "{want:?}");
    }
    let port = redis.port();
    let got = assert_commands_as_info(&rep, &summary, &html, &want, |e| {
        e["transport"] == "tcp" && u(&e["port"]) == u64::from(port)
    });
    // Every GET, SET and INCR came in a batch of 16 (one read, one turn),
    // and the batches were timed as turns.
    let a = &rep["anatomy"];
    let mut batches = 0;
    for c in ["GET", "SET", "INCR"] {
        let (count, batched, turns) = got[c];
        assert_eq!(batched, count, "{c}: {}", brief(a));
        batches += turns;
    }
    // 1250 batches of 16 per command; a client's last batch may be cut.
    assert!((3750..=3900).contains(&batches), "{batches}: {}", brief(a));
    let turns = u(&a["resp"]["turns"]);
    assert!(
        turns >= batches && u(&a["requests"]) > 15 * turns,
        "{turns} turns: {}",
        brief(a)
    );
    assert!(summary.contains("(per turn; a pipelined batch is one)"));
    common::anatomy::assert_tail_section(&rep, &summary);
}

#[test]
fn redis_benchmark_lockstep_commands_are_one_turn_each() {
    let name = "redis_benchmark_lockstep_commands_are_one_turn_each";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let Some(redis) = Redis::start(name) else {
        return;
    };
    let before = calls(&redis);
    let (rep, summary, html) = profile_pid(
        "resp-lockstep",
        redis.pid(),
        "--load-cmd",
        "redis-benchmark -h HOST -p PORT -c 4 -n 3000 -t get,set -q",
    );
    let want = delta(&before, &calls(&redis));
    let port = redis.port();
    let got = assert_commands_as_info(&rep, &summary, &html, &want, |e| {
        u(&e["port"]) == u64::from(port)
    });
    let a = &rep["anatomy"];
    for c in ["GET", "SET"] {
        let (count, batched, turns) = got[c];
        assert_eq!((count, batched), (3000, 0), "{c}: {}", brief(a));
        assert_eq!(turns, 3000, "{c}: each command its own timed turn");
    }
    // CONFIG GET save and appendonly come in one write: a batch of 2.
    assert_eq!(got["CONFIG"].1, 2, "{}", brief(a));
    // Each row's rate is its count over the window, its percentiles
    // ordered; the table ends with the slowest at p99.
    let window = a["window_s"].as_f64().unwrap();
    for e in a["endpoints"].as_array().unwrap() {
        let rate = e["rate_per_s"].as_f64().unwrap();
        assert!(
            (rate * window - u(&e["count"]) as f64).abs() < 1e-6 * u(&e["count"]) as f64 + 1e-9,
            "{e}"
        );
        if u(&e["turns"]) > 0 {
            let p = |k: &str| u(&e[k]);
            assert!(
                p("server_p50_ns") <= p("server_p90_ns")
                    && p("server_p90_ns") <= p("server_p99_ns")
                    && p("server_p99_ns") <= p("server_p999_ns")
                    && p("server_mean_ns") > 0,
                "{e}"
            );
        }
    }
    assert!(summary.contains("slowest at p99: "), "{summary}");
    let turns = u(&a["turns"]) + u(&a["multiplexed"]["turns"]);
    assert_eq!(turns, 6001, "{}", brief(a));
    assert_eq!(u(&a["resp"]["turns"]), 6001);
    every_timed_turn_s_parts_are_in_its_endpoint(a);
    assert!(
        html.contains("chart-endpoint-tails"),
        "no per-endpoint bars"
    );
}

/// Lockstep, every timed turn carried one command: the endpoints' timed
/// turns are the anatomy's, and their parts (mean times turns) add up to
/// the anatomy's exact sums, part by part; each endpoint's p50 and p99
/// compositions add up to their server time.
fn every_timed_turn_s_parts_are_in_its_endpoint(a: &Value) {
    let endpoints = a["endpoints"].as_array().unwrap();
    let timed: Vec<&Value> = endpoints.iter().filter(|e| u(&e["turns"]) > 0).collect();
    let turns: u64 = timed.iter().map(|e| u(&e["turns"])).sum();
    assert_eq!(turns, u(&a["turns"]), "{}", brief(a));
    for (mean, sum) in [
        ("queue_wait_ns", "queue_wait"),
        ("cpu_wait_ns", "cpu_wait"),
        ("service_ns", "service"),
        ("send_ns", "send"),
    ] {
        let got: f64 = timed
            .iter()
            .map(|e| e["parts_mean"][mean].as_f64().unwrap() * u(&e["turns"]) as f64)
            .sum();
        let want = u(&a["sums_ns"][sum]) as f64;
        assert!(
            (got - want).abs() <= 1.0,
            "{sum}: {got} vs {want}: {}",
            brief(a)
        );
    }
    for e in &timed {
        for c in e["at_percentile"].as_array().unwrap() {
            let parts: u64 = ["queue_wait_ns", "cpu_wait_ns", "service_ns", "send_ns"]
                .iter()
                .map(|k| u(&c[*k]))
                .sum();
            assert_eq!(parts, u(&c["server_ns"]), "{c}");
            assert!(u(&c["turns"]) > 0, "{c}");
        }
        assert_eq!(e["at_percentile"].as_array().unwrap().len(), 2, "{e}");
    }
}

#[test]
fn redis_benchmark_over_the_unix_socket_counts_its_commands() {
    let name = "redis_benchmark_over_the_unix_socket_counts_its_commands";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let dir = scratch("resp-unix").canonicalize().unwrap();
    let Some(redis) = Redis::start_unix(name, &dir) else {
        return;
    };
    let before = calls(&redis);
    let sock = redis.sock().to_str().unwrap().to_string();
    let cmd = format!("redis-benchmark -s {sock} -P 16 -n 20000 -t get,set,incr -q");
    let (rep, summary, html) = profile_pid("resp-unix-run", redis.pid(), "--load-cmd", &cmd);
    let want = delta(&before, &calls(&redis));
    let got = assert_commands_as_info(&rep, &summary, &html, &want, |e| {
        e["transport"] == "unix" && e["socket"] == sock.as_str()
    });
    assert_eq!(got["GET"].1, 20000, "{}", brief(&rep["anatomy"]));
    assert!(summary.contains(&format!("unix:{sock}")), "{summary}");
}

/// The exporter's `sockscope_endpoint_requests_total` per endpoint name of
/// `port` (RESP), when served.
fn scraped_endpoints(addr: std::net::SocketAddr, port: u16) -> Option<BTreeMap<String, u64>> {
    let (status, _, body) = common::prometheus::http_get(addr, "/metrics", None)?;
    if status != 200 {
        return None;
    }
    let want = format!(
        "sockscope_endpoint_requests_total{{port=\"{port}\",transport=\"tcp\",protocol=\"resp\",endpoint=\""
    );
    Some(
        String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| {
                let (name, n) = l.strip_prefix(want.as_str())?.split_once("\"} ")?;
                Some((name.to_string(), n.trim().parse().ok()?))
            })
            .collect(),
    )
}

#[test]
fn the_exporter_serves_each_commands_count_as_redis_counts_it() {
    let name = "the_exporter_serves_each_commands_count_as_redis_counts_it";
    if !require_bpf(name) || !redis::available(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let Some(redis) = Redis::start(name) else {
        return;
    };
    let mut bg = Background::start(&[
        "trace",
        "--requests-only",
        "-p",
        &redis.pid().to_string(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    bg.attached();
    let maddr = ports::listening(&mut bg.child, Duration::from_secs(10));
    let before = calls(&redis);
    // Bounded by its count, and by timeout(1) should redis stop answering.
    let out = std::process::Command::new("timeout")
        .args([
            "60",
            "redis-benchmark",
            "-h",
            "127.0.0.1",
            "-p",
            &redis.port().to_string(),
            "-P",
            "8",
            "-n",
            "4000",
            "-t",
            "get,set",
            "-q",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running redis-benchmark");
    assert!(
        out.status.success(),
        "redis-benchmark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = delta(&before, &calls(&redis));
    assert_eq!((want["GET"], want["SET"]), (4000, 4000), "{want:?}");
    // The exporter publishes once a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut got = None;
    while std::time::Instant::now() < deadline {
        got = scraped_endpoints(maddr, redis.port());
        if got
            .as_ref()
            .is_some_and(|g| g.get("GET") == Some(&4000) && g.get("SET") == Some(&4000))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(bg.child.id() as i32, libc::SIGINT) };
    let (st, err) = bg.finish(Duration::from_secs(30));
    assert!(st.success(), "sockscope trace: {st}: {err}");
    let got = got.expect("a scrape");
    assert_eq!(
        (got.get("GET"), got.get("SET")),
        (Some(&4000), Some(&4000)),
        "{got:?}"
    );
}

/// The hostile client: each connection sends its bytes and reads what
/// comes back until redis closes or goes quiet.
const HOSTILE: &str = r#"
import socket, sys, random
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(1.0)
    return s
def drain(s):
    try:
        while s.recv(65536):
            pass
    except socket.timeout:
        pass
def once(data):
    s = conn()
    s.sendall(data)
    drain(s)
    s.close()
def ask(s, data):
    s.sendall(data)
    got = b""
    while not got.endswith(b"\r\n"):
        b = s.recv(65536)
        if not b:
            break
        got += b
    return got
once(b"*2147483647\r\n")
once(b"*1\r\n$-5\r\n")
once(b"*3\r\n$3\r\nSET\r\nxx\x00\xff\xfe garbage\r\n")
random.seed(39)
once(b"*" + bytes(random.randrange(256) for _ in range(4096)))
once(b"PING\r\n")
s = conn()
ask(s, b"*2\r\n$100000\r\n" + b"a" * 100000 + b"\r\n$1\r\nx\r\n")
for i in range(100):
    ask(s, b"*1\r\n$4\r\nping\r\n")
for i in range(200):
    n = b"X%d" % i
    ask(s, b"*1\r\n$%d\r\n%s\r\n" % (len(n), n))
s.close()
"#;

#[test]
fn hostile_resp_bytes_give_up_on_their_connection_and_names_stay_bounded() {
    let name = "hostile_resp_bytes_give_up_on_their_connection";
    if !require_bpf(name) || !redis::available(name) || !require_program("python3", name) {
        return;
    }
    let dir = scratch("resp-hostile").canonicalize().unwrap();
    let Some(redis) = Redis::start_unix(name, &dir) else {
        return;
    };
    let script = dir.join("hostile.py");
    std::fs::write(&script, HOSTILE).unwrap();
    let before = calls(&redis);
    let sock = redis.sock().to_str().unwrap().to_string();
    let cmd = format!("python3 {} {sock}", script.display());
    let (rep, _summary, _html) = profile_pid("resp-hostile-run", redis.pid(), "--load-cmd", &cmd);
    let a = &rep["anatomy"];
    let got = rows(a, |e| e["socket"] == sock.as_str());
    // The four malformed connections are given up on; the inline PING's
    // is no RESP connection at all; the last one is parsed to its end.
    assert_eq!(u(&a["resp"]["connections"]), 5, "{}", brief(a));
    assert_eq!(u(&a["resp"]["unparsed"]), 4, "{}", brief(a));
    // A 100 kB name is kept as its first 16 bytes; 200 names more than
    // the port's 64 (the default --max-endpoints) go to (other); PING is
    // counted as redis counted it,
    // but for the inline one (not RESP: not parsed).
    let pings = delta(&before, &calls(&redis))["PING"];
    assert_eq!(pings, 101);
    assert_eq!(got["PING"].0, 100, "{}", brief(a));
    assert_eq!(got["AAAAAAAAAAAAAAAA"].0, 1, "{got:?}");
    // AAAA..., PING and X0..X61 fill the port's 64; X62..X199 are (other).
    assert_eq!(got.len(), 65, "{} names: {got:?}", got.len());
    assert_eq!(got["(other)"].0, 138, "{got:?}");
    assert_eq!(u(&a["max_endpoints"]), 64, "{}", brief(a));
    let all: u64 = got.values().map(|v| v.0).sum();
    assert_eq!(all, 301, "{got:?}");
    assert_eq!(u(&a["requests"]), 301);
    // No name row holds more than a name's bytes.
    assert!(got.keys().all(|k| k.len() <= 16 * 4), "{got:?}");
}
