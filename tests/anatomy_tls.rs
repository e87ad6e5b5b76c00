//! The request anatomy on TLS connections (src/bpf/tls.h) against
//! nginx's own access log: with `--tls-plaintext` the plaintext OpenSSL
//! hands nginx is read through uprobes on SSL_read and SSL_write, so an
//! https nginx under h2load gives the same per-route and per-status counts
//! as plain text, every HTTP/2 stream and every HTTP/1.1 request timed;
//! without it a TLS connection's requests are timed as turns and not
//! read, its handshake turns left out; redis-server over TLS under
//! `redis-benchmark --tls -P 16` gives INFO commandstats' calls per
//! command; and a server whose TLS is not OpenSSL's (GnuTLS's
//! gnutls-serv) is counted as not read.

use crate::common;

use std::collections::BTreeMap;

use common::anatomy::{add_status_classes, brief, profile_pid_with, route_template, u};
use common::nginx::Nginx;
use common::*;
use serde_json::Value;

/// nginx's locations, one answering 404; no connection closed by nginx
/// during a run.
const LOCATIONS: &str = "keepalive_requests 1000000;\n    \
                         location /a/ { return 200 \"ok\\n\"; }\n    \
                         location = /missing { return 404; }";

/// The anatomy's rows on `port` of `protocol` as (name, status class) ->
/// requests, with the requests timed in all.
fn rows(a: &Value, port: u16, protocol: &str) -> (BTreeMap<(String, String), u64>, u64) {
    let mut got = BTreeMap::new();
    let mut timed = 0;
    for e in a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
    {
        if e["protocol"] != protocol || u(&e["port"]) != u64::from(port) {
            continue;
        }
        add_status_classes(&mut got, e["name"].as_str().unwrap(), e);
        assert_eq!(u(&e["client_errors"]), u(&e["status"]["4xx"]), "{e}");
        timed += u(&e["turns"]);
    }
    (got, timed)
}

/// The access log as (method and route template, status class) -> lines:
/// the h2 format (`$server_protocol $connection $connection_requests
/// $request_method $uri $status`) or nginx's combined one.
fn logged(ngx: &Nginx) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for l in ngx.log() {
        let (method, uri, status) = if l.starts_with("HTTP/") {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 6, "{l}");
            (f[3].to_string(), f[4].to_string(), f[5].to_string())
        } else {
            // 127.0.0.1 - - [date] "GET /a/1 HTTP/1.1" 200 3 "-" "agent"
            let q: Vec<&str> = l.split('"').collect();
            let req: Vec<&str> = q[1].split(' ').collect();
            let status = q[2].split_whitespace().next().unwrap().to_string();
            (req[0].to_string(), req[1].to_string(), status)
        };
        let class = format!("{}xx", &status[..1]);
        *out.entry((format!("{method} {}", route_template(&uri)), class))
            .or_default() += 1;
    }
    out
}

/// The TLS section, with its connections and handshake turns checked: a
/// TLS 1.3 handshake is two turns per connection (the ClientHello's, the
/// client's ChangeCipherSpec and Finished), none of them a request.
fn tls_section(a: &Value, conns: u64, read: u64) -> &Value {
    let t = &a["tls"];
    assert_eq!(u(&t["connections"]), conns, "{}", brief(a));
    assert_eq!(u(&t["read_in_plaintext"]), read, "{}", brief(a));
    assert_eq!(u(&t["state_lost"]), 0, "{}", brief(a));
    assert_eq!(u(&t["handshake_turns"]), 2 * conns, "{}", brief(a));
    t
}

/// An https nginx (ALPN h2 with `http2`) profiled under `h2load -n N -c 2
/// ARGS` over `paths`, with `flags`: nginx (for its log, all N requests
/// logged), the run's anatomy and its summary; None when a peer is
/// missing (a printed skip outside CI).
fn nginx_under_h2load(
    name: &str,
    http2: bool,
    n: u64,
    paths: &[&str],
    args: &str,
    flags: &[&str],
) -> Option<(Nginx, Value, String)> {
    if !require_bpf(name) || !require_program("h2load", name) {
        return None;
    }
    let ngx = Nginx::start_tls_server_conf(name, http2, LOCATIONS)?;
    let urls: Vec<String> = paths.iter().map(|p| ngx.url(p)).collect();
    let cmd = format!("h2load -n {n} -c 2 {args} {}", urls.join(" "));
    let mut all = vec!["--no-stacks"];
    all.extend_from_slice(flags);
    let (rep, summary, _) = profile_pid_with(
        &format!("{name}-run"),
        ngx.child.id(),
        &all,
        "--load-cmd",
        &cmd,
    );
    assert_eq!(ngx.logged(n), n);
    Some((ngx, rep["anatomy"].clone(), summary))
}

#[test]
fn tls_h2load_streams_read_in_plaintext_equal_the_access_log_and_all_timed() {
    const N: u64 = 3000;
    let paths = ["/a/1", "/a/deadbeef99", "/a/x", "/missing"];
    let Some((ngx, a, summary)) = nginx_under_h2load(
        "tls_h2_plaintext",
        true,
        N,
        &paths,
        "-m 8",
        &["--tls-plaintext"],
    ) else {
        return;
    };
    let a = &a;
    let t = tls_section(a, 2, 2);
    assert_eq!(t["plaintext_asked"], true, "{}", brief(a));
    assert!(
        t["libraries"].as_array().is_some_and(|l| l
            .iter()
            .any(|p| p.as_str().unwrap_or("").contains("libssl.so"))),
        "{t}"
    );
    // Every stream a request, every one timed, no turn "multiplexed".
    let h2 = &a["http2"];
    assert_eq!(u(&h2["connections"]), 2, "{}", brief(a));
    assert_eq!(u(&h2["unparsed"]), 0, "{}", brief(a));
    assert_eq!(u(&h2["streams"]), N, "{}", brief(a));
    assert_eq!(u(&h2["turns"]), N, "{}", brief(a));
    assert_eq!(u(&a["requests"]), N, "{}", brief(a));
    assert_eq!(u(&a["turns"]), N, "{}", brief(a));
    assert_eq!(u(&a["multiplexed"]["connections"]), 0, "{}", brief(a));
    let (got, timed) = rows(a, ngx.port, "http2");
    assert_eq!(got, logged(&ngx), "{}", brief(a));
    assert_eq!(timed, N);
    assert!(summary.contains("read in plaintext"), "{summary}");
}

#[test]
fn tls_http1_requests_read_in_plaintext_equal_the_access_log_and_all_timed() {
    const N: u64 = 2000;
    let paths = ["/a/1", "/a/22", "/missing"];
    let Some((ngx, a, _)) = nginx_under_h2load(
        "tls_h1_plaintext",
        false,
        N,
        &paths,
        "--h1",
        &["--tls-plaintext"],
    ) else {
        return;
    };
    let a = &a;
    tls_section(a, 2, 2);
    // One request a turn (h2load --h1 waits for each answer): each read
    // from its plaintext, each timed as its turn.
    assert_eq!(u(&a["http"]["connections"]), 2, "{}", brief(a));
    assert_eq!(u(&a["http"]["unparsed"]), 0, "{}", brief(a));
    assert_eq!(u(&a["http"]["turns"]), N, "{}", brief(a));
    assert_eq!(u(&a["requests"]), N, "{}", brief(a));
    assert_eq!(u(&a["turns"]), N, "{}", brief(a));
    let (got, timed) = rows(a, ngx.port, "http");
    assert_eq!(got, logged(&ngx), "{}", brief(a));
    assert_eq!(timed, N);
}

#[test]
fn tls_without_plaintext_times_turns_and_reads_no_request() {
    const N: u64 = 1000;
    let Some((_ngx, a, summary)) =
        nginx_under_h2load("tls_no_plaintext", false, N, &["/a/1"], "--h1", &[])
    else {
        return;
    };
    let a = &a;
    let t = tls_section(a, 2, 0);
    assert_eq!(t["plaintext_asked"], false, "{}", brief(a));
    // Each request is a turn of its own, timed; the handshakes are not
    // among them; no request is read from ciphertext.
    assert_eq!(u(&a["turns"]), N, "{}", brief(a));
    assert!(a.get("requests").is_none(), "{}", brief(a));
    assert!(a.get("endpoints").is_none(), "{}", brief(a));
    assert!(summary.contains("--tls-plaintext"), "{summary}");
}

/// A TLS server of a process that does not use OpenSSL (GnuTLS's
/// gnutls-serv, answering one request per connection): with
/// --tls-plaintext its connections are counted as not read, and the
/// summary says why.
#[test]
fn tls_of_another_library_is_counted_as_not_read() {
    let name = "tls_gnutls_not_read";
    if !require_bpf(name) || !require_program("gnutls-serv", name) {
        return;
    }
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    common::nginx::self_signed_cert(&dir);
    let cert_dir = dir.clone();
    let port = common::ports::free_tcp();
    let mut cmd = std::process::Command::new("gnutls-serv");
    cmd.args(["--http", "-q", "-p", &port.to_string()])
        .arg("--x509certfile")
        .arg(cert_dir.join("cert.pem"))
        .arg("--x509keyfile")
        .arg(cert_dir.join("key.pem"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let srv = common::Reaped(cmd.spawn().expect("starting gnutls-serv"));
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < end,
            "gnutls-serv did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    const CONNS: u64 = 5;
    let client = format!(
        "import socket, ssl\n\
         ctx = ssl.create_default_context()\n\
         ctx.check_hostname = False\n\
         ctx.verify_mode = ssl.CERT_NONE\n\
         for _ in range({CONNS}):\n\
         \x20   with ctx.wrap_socket(socket.create_connection(('127.0.0.1', {port}))) as s:\n\
         \x20       s.sendall(b'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n')\n\
         \x20       while s.recv(65536):\n\
         \x20           pass\n"
    );
    let script = dir.join("client.py");
    std::fs::write(&script, client).unwrap();
    let load = format!("python3 {}", script.display());
    let (rep, summary, _) = profile_pid_with(
        "tls-gnutls-run",
        srv.0.id(),
        &["--tls-plaintext", "--no-stacks"],
        "--load-cmd",
        &load,
    );
    let a = &rep["anatomy"];
    let t = &a["tls"];
    assert_eq!(u(&t["connections"]), CONNS, "{}", brief(a));
    assert_eq!(u(&t["read_in_plaintext"]), 0, "{}", brief(a));
    assert!(a.get("endpoints").is_none(), "{}", brief(a));
    assert!(summary.contains("not read"), "{summary}");
}

/// redis-server with a TLS port, under `redis-benchmark --tls -P 16`:
/// each command of each pipelined batch read from the plaintext, per
/// command exactly INFO commandstats' calls.
#[test]
fn tls_redis_pipelines_read_in_plaintext_equal_commandstats() {
    let name = "tls_redis_plaintext";
    if !require_bpf(name) || !require_program("redis-benchmark", name) {
        return;
    }
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    common::nginx::self_signed_cert(&dir);
    let tls_port = common::ports::free_tcp().to_string();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let extra = [
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--tls-ca-cert-file",
        cert.to_str().unwrap(),
        "--tls-auth-clients",
        "no",
    ];
    let Some(redis) = common::redis::Redis::start_with(name, &extra, None) else {
        return;
    };
    const N: u64 = 4000;
    let load = format!(
        "redis-benchmark --tls --insecure -h 127.0.0.1 -p {tls_port} -c 4 -n {N} -P 16 \
         -t get,set -q"
    );
    let (rep, _, _) = profile_pid_with(
        &format!("{name}-run"),
        redis.pid(),
        &["--tls-plaintext", "--no-stacks", "--requests-only"],
        "--load-cmd",
        &load,
    );
    let a = &rep["anatomy"];
    let t = &a["tls"];
    assert_eq!(
        u(&t["read_in_plaintext"]),
        u(&t["connections"]),
        "{}",
        brief(a)
    );
    assert!(u(&t["connections"]) >= 4, "{}", brief(a));
    let mut got = BTreeMap::new();
    for e in a["endpoints"].as_array().unwrap() {
        if e["protocol"] == "resp" {
            got.insert(e["name"].as_str().unwrap().to_string(), u(&e["count"]));
        }
    }
    for cmd in ["GET", "SET"] {
        let calls = redis.calls(&cmd.to_lowercase());
        assert_eq!(calls, N, "{cmd}");
        assert_eq!(got.get(cmd), Some(&calls), "{}", brief(a));
    }
}
