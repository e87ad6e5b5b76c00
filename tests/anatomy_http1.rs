//! HTTP/1.1 requests as the request anatomy's requests (issue 39): a real
//! nginx with two locations (`/a/<n>` answered 200, `/missing` 404)
//! profiled under sockscope's own http load, lockstep and pipelined: the
//! requests per route template and status class equal the lines of
//! nginx's access log per path (folded) and status, exactly; and hostile
//! bytes through real sockets (a 100 kB route, a 2^31 Content-Length, a
//! 16-hex-digit chunk size, a flood of routes, garbage after a valid
//! request, a request split at every offset, a chunked body): the parser
//! gives up on the bad connections, counts the rest, keeps the names
//! bounded, and no query value or raw byte reaches the artifacts.

use crate::common;

use std::collections::BTreeMap;

use common::anatomy::{brief, profile_pid, route_template, u};
use common::nginx::Nginx;
use common::*;
use serde_json::Value;

/// nginx's two locations; no connection closed by nginx in a run (its
/// default closes one after 1000 requests, dropping the pipelined requests
/// it read behind the last: read, so counted here, and never logged).
const LOCATIONS: &str = "keepalive_requests 1000000;\n    \
                         location /a/ { return 200 \"ok\\n\"; }\n    \
                         location = /missing { return 404; }";

/// nginx's access log (combined format) from line `from` on, as
/// (method + folded path, status class) -> lines.
fn logged(ngx: &Nginx, from: usize) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for l in ngx.log().iter().skip(from) {
        let parts: Vec<&str> = l.split('"').collect();
        let mut req = parts[1].split(' ');
        let (method, path) = (req.next().unwrap(), req.next().unwrap_or(""));
        let status = parts[2].split_whitespace().next().unwrap();
        let class = format!("{}xx", &status[..1]);
        *out.entry((format!("{method} {}", route_template(path)), class))
            .or_default() += 1;
    }
    out
}

/// The anatomy's http rows of `port` as (name, status class) -> count,
/// and each row's (count, batched, turns) by name.
type Rows = BTreeMap<String, (u64, u64, u64)>;
fn rows(a: &Value, port: u16) -> (BTreeMap<(String, String), u64>, Rows) {
    let mut by_status = BTreeMap::new();
    let mut by_name = Rows::new();
    for e in a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
        .iter()
        .filter(|e| u(&e["port"]) == u64::from(port) && e["protocol"] == "http")
    {
        let name = e["name"].as_str().unwrap().to_string();
        for class in ["2xx", "3xx", "4xx", "5xx"] {
            let n = u(&e["status"][class]);
            if n > 0 {
                by_status.insert((name.clone(), class.to_string()), n);
            }
        }
        assert_eq!(u(&e["errors"]), u(&e["status"]["5xx"]), "{e}");
        assert_eq!(u(&e["client_errors"]), u(&e["status"]["4xx"]), "{e}");
        by_name.insert(name, (u(&e["count"]), u(&e["batched"]), u(&e["turns"])));
    }
    (by_status, by_name)
}

/// sockscope's http load over both locations through a profile: every
/// request counted under its route template and status class exactly as
/// nginx logged it; the requests are the requests, the parser gave up on
/// nothing. Returns the rows and the anatomy.
fn load_counts_equal_access_log(name: &str, extra: &str, n: u64) -> Option<(Rows, Value)> {
    if !require_bpf(name) {
        return None;
    }
    let ngx = Nginx::start_server_conf(&format!("{name}-ngx"), LOCATIONS)?;
    let urls = scratch(&format!("{name}-urls")).join("urls");
    std::fs::create_dir_all(urls.parent().unwrap()).unwrap();
    std::fs::write(
        &urls,
        format!(
            "3 GET http://127.0.0.1:{p}/a/{{seq}}?token=s3cr3t{{seq}}\n\
             1 GET http://127.0.0.1:{p}/missing\n",
            p = ngx.port
        ),
    )
    .unwrap();
    let from = ngx.lines() as usize;
    let load = format!(
        "http --urls {} --ok-status 200,404 -n {n} {extra}",
        urls.display()
    );
    let (rep, summary, html) = profile_pid(name, ngx.child.id(), "--load", &load);
    ngx.logged(from as u64 + n);
    let log = logged(&ngx, from);
    let a = rep["anatomy"].clone();
    let (got, by_name) = rows(&a, ngx.port);
    assert_eq!(log.values().sum::<u64>(), n, "{log:?}");
    assert_eq!(got, log, "anatomy vs access log: {}", brief(&a));
    assert_eq!(
        log.keys().map(|k| k.0.as_str()).collect::<Vec<_>>(),
        ["GET /a/{id}", "GET /missing"]
    );
    let counts: u64 = by_name.values().map(|r| r.0).sum();
    assert_eq!(counts, n, "{by_name:?}");
    assert_eq!(u(&a["requests"]), n, "{}", brief(&a));
    assert_eq!(u(&rep["workload"]["requests"]["count"]), n);
    let h = &a["http"];
    assert!(u(&h["connections"]) >= 2, "{}", brief(&a));
    assert_eq!(u(&h["unparsed"]), 0, "{}", brief(&a));
    assert_eq!(
        h["status_unknown"].as_u64().unwrap_or(0),
        0,
        "{}",
        brief(&a)
    );
    assert!(
        summary.contains("Requests by command (HTTP/1;"),
        "{summary}"
    );
    assert!(summary.contains("GET /a/{id}"), "{summary}");
    // The anatomy stores no query value (the load's own record names the
    // URLs it was given, so only the anatomy's parts are looked at).
    let table: String = summary
        .lines()
        .skip_while(|l| !l.starts_with("Requests by command"))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(table.contains("GET /missing"), "{summary}");
    for text in [&table, &a.to_string()] {
        assert!(!text.contains("s3cr3t"), "a query value was kept: {text}");
    }
    common::anatomy::assert_tail_section(&rep, &summary);
    let _ = html;
    Some((by_name, a))
}

#[test]
fn http1_lockstep_requests_equal_the_access_log_per_route_and_status() {
    let name = "http1_lockstep_requests_equal_access_log";
    let Some((got, a)) = load_counts_equal_access_log(name, "-c 2", 3000) else {
        return;
    };
    for (route, (count, batched, turns)) in &got {
        assert_eq!(*batched, 0, "{route}: {}", brief(&a));
        assert_eq!(turns, count, "{route}: each request its own timed turn");
    }
    assert_eq!(u(&a["http"]["turns"]), 3000, "{}", brief(&a));
    assert_eq!(
        u(&a["turns"]) + u(&a["multiplexed"]["turns"]),
        3000,
        "{}",
        brief(&a)
    );
}

#[test]
fn http1_pipelined_requests_equal_the_access_log_per_route_and_status() {
    let name = "http1_pipelined_requests_equal_access_log";
    let Some((got, a)) = load_counts_equal_access_log(name, "-c 2 --pipeline 8", 8000) else {
        return;
    };
    // Eight in flight, refilled as answers come: reads take several
    // requests at once (batched turns), each counted and named, each
    // response's status matched to its request in order.
    let batched: u64 = got.values().map(|r| r.1).sum();
    let turns = u(&a["http"]["turns"]);
    assert!(batched > 8000 / 2, "{batched} of 8000 batched");
    assert!(turns < 8000 / 2, "{turns} turns for 8000");
    // Every turn that carried a whole request head is an HTTP turn. A
    // read may also end inside a head (nginx reads into what is left of
    // its 1 KiB header buffer) and nginx may then write answers it owed:
    // that turn carried no whole request, its head counted with the next
    // read's turn. Seen once in 1,167 turns in CI; a few in a hundred
    // would mean heads are lost, not cut.
    let all = u(&a["turns"]) + u(&a["multiplexed"]["turns"]);
    assert!(turns <= all, "more HTTP turns than turns: {}", brief(&a));
    assert!(
        (all - turns) * 100 <= all,
        "{} of {all} turns carried no request head: {}",
        all - turns,
        brief(&a)
    );
}

/// The hostile client (argv: the port). Each bad connection sends its
/// bytes and reads what comes back until nginx closes or goes quiet.
const HOSTILE: &str = r#"
import socket, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(0.3)
    return s
def drain(s):
    try:
        while s.recv(65536):
            pass
    except (socket.timeout, ConnectionResetError):
        pass
def until(s, n):
    # n responses' status lines (their bodies are short)
    s.settimeout(5)
    got = b""
    while got.count(b"HTTP/1.1 ") < n or not got.endswith(b"\n"):
        b = s.recv(65536)
        if not b:
            break
        got += b
        time.sleep(0.01)
    return got
GET = b"GET /a/1 HTTP/1.1\r\nHost: x\r\nX-Token: hdr-s3cr3t\r\n\r\n"
# Given up on (3): after a valid request, a 100 kB route; a valid
# request, then garbage; a chunked body whose size has 16 hex digits.
s = conn(); s.sendall(GET); until(s, 1)
s.sendall(b"GET /" + b"r" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"); drain(s); s.close()
s = conn(); s.sendall(GET); until(s, 1)
s.sendall(b"\x00\x01\x1b[31mgarbage\r\n\r\n"); drain(s); s.close()
s = conn()
s.sendall(b"POST /chunk16 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
time.sleep(0.05)
s.sendall(b"ffffffffffffffff\r\n"); drain(s); s.close()
# A Content-Length of 2^31: passed by its length (nginx answers 413).
s = conn()
s.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 2147483648\r\n\r\nxyz")
drain(s); s.close()
# Not HTTP/1 (3): a RESP inline command, HTTP/0.9, lower case.
for b in (b"GET key\r\n", b"GET /a/1\r\n", b"get /a/1 HTTP/1.1\r\n\r\n"):
    s = conn(); s.sendall(b); drain(s); s.close()
# A POST with a body, split across two reads at every offset, each on a
# connection of its own; then a chunked one and a GET behind it.
req = b"POST /a/77?q=s3cr3t HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
for o in range(1, len(req)):
    s = conn()
    s.sendall(req[:o]); time.sleep(0.01); s.sendall(req[o:])
    until(s, 1); s.close()
s = conn()
s.sendall(b"POST /a/5 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: s3cr3t\r\n\r\n"
          b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
until(s, 2); s.close()
# Routes that are not UTF-8, and ids of every kind.
s = conn()
for p in (b"/caf\xc3\xa9/\xff", b"/a/0123abcd", b"/a/deadbeefcafe",
          b"/a/123e4567-e89b-12d3-a456-426614174000", b"/a/v2"):
    s.sendall(b"GET " + p + b" HTTP/1.1\r\nHost: x\r\n\r\n"); until(s, 1)
s.close()
# A flood of routes on one connection, each answered 404.
s = conn()
for i in range(200):
    s.sendall(b"GET /r%dx HTTP/1.1\r\nHost: x\r\n\r\n" % i); until(s, 1)
s.close()
"#;

#[test]
fn hostile_http1_bytes_give_up_on_their_connection_and_names_stay_bounded() {
    let name = "hostile_http1_bytes_give_up_on_their_connection";
    if !require_bpf(name) || !require_program("python3", name) {
        return;
    }
    let Some(ngx) = Nginx::start_server_conf(name, LOCATIONS) else {
        return;
    };
    let dir = scratch("h1-hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("hostile.py");
    std::fs::write(&script, HOSTILE).unwrap();
    let from = ngx.lines() as usize;
    let cmd = format!("python3 {} PORT", script.display());
    let (rep, summary, html) = profile_pid("h1-hostile-run", ngx.child.id(), "--load-cmd", &cmd);
    ngx.logged(from as u64 + 250);
    let log = logged(&ngx, from);
    let a = &rep["anatomy"];
    let (got, by_name) = rows(a, ngx.port);
    let h = &a["http"];
    // Given up on: the 100 kB route, the garbage, the 16-digit chunk size.
    assert_eq!(u(&h["unparsed"]), 3, "{}", brief(a));
    // Those 3, the 2^31 one, 64 split, the chunked one, the ids', the
    // flood's: not the RESP inline, HTTP/0.9 or lower-case ones (below).
    assert_eq!(u(&h["connections"]), 3 + 1 + 64 + 1 + 1 + 1, "{}", brief(a));
    let status = |n: &str, class: &str| got.get(&(n.to_string(), class.to_string())).copied();
    // The split POSTs and the chunked one, each counted once, each 200.
    assert_eq!(status("POST /a/{id}", "2xx"), Some(65), "{got:?}");
    assert_eq!(by_name["POST /a/{id}"].0, 65, "{by_name:?}");
    // The GET behind the chunked body and its trailers.
    assert_eq!(status("GET /missing", "4xx"), Some(1), "{got:?}");
    // A Content-Length of 2^31 passed by length: the request is counted,
    // its 413 too; the 16-digit chunk size's request counted before it.
    assert_eq!(by_name["POST /big"].0, 1, "{by_name:?}");
    assert_eq!(status("POST /big", "4xx"), Some(1), "{got:?}");
    assert_eq!(by_name["POST /chunk16"].0, 1, "{by_name:?}");
    // Numbers, hex runs of 8+ and UUIDs fold; a segment that is no id
    // stays; bytes that are not UTF-8 are escaped.
    assert_eq!(status("GET /a/{id}", "2xx"), Some(2 + 3), "{got:?}");
    assert_eq!(status("GET /a/v2", "2xx"), Some(1), "{got:?}");
    assert_eq!(by_name["GET /caf\u{e9}/\\xff"].0, 1, "{by_name:?}");
    // The lower-case request line was memcached's `get` (its first word
    // is one): the port's names are all protocols' together.
    let mc: Vec<&Value> = a["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["protocol"] == "memcached")
        .collect();
    assert_eq!(mc.len(), 1, "{mc:?}");
    // 7 HTTP/1 names and memcached's before the flood; it fills the
    // port's 64 (the default --max-endpoints), the rest of it is (other),
    // each 404.
    assert_eq!(
        by_name.len(),
        63 + 1,
        "{} names: {by_name:?}",
        by_name.len()
    );
    assert_eq!(by_name["(other)"].0, 200 - 56, "{by_name:?}");
    assert_eq!(status("(other)", "4xx"), Some(200 - 56), "{got:?}");
    // Every request counted was logged by nginx with the same status.
    for ((n, class), count) in &got {
        if n == "(other)" || n.starts_with("GET /r") || n.contains("caf") {
            continue;
        }
        assert!(
            log.get(&(n.clone(), class.clone()))
                .is_some_and(|l| l >= count),
            "{n} {class}: {count} counted, log {log:?}"
        );
    }
    for text in [&summary, &html, &rep.to_string()] {
        assert!(!text.contains("s3cr3t"), "a query or header value was kept");
        assert!(!text.contains('\u{1b}'), "a raw escape reached an artifact");
        assert!(
            !text.contains("rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr")
        );
    }
    assert!(
        summary.contains("3 of 71 HTTP/1 connections given up on"),
        "{summary}"
    );
}
