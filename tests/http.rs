//! `sockscope load http` against real HTTP servers on loopback: a small
//! in-test server whose paths answer chunked, 204, 304, `Connection:
//! close`, garbage, a response cut short or a body delimited by the close,
//! and a stock nginx started on a free port with its own configuration in a
//! scratch directory (its access log is the server's own count). No
//! privileges needed; under CI=true a missing nginx fails the nginx tests.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use common::pyserver::PyServer;
use common::*;
use serde_json::Value;

/// Every load here is bounded by -n or -d; this only catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `sockscope load http ARGS --json FILE`; returns the exit code,
/// stderr and the JSON (Null when none was written).
fn http(dir: &Path, args: &[&str]) -> (Option<i32>, String, Value) {
    let mut all = vec!["http"];
    all.extend_from_slice(args);
    let (code, rep, err) = load_json(dir, &all, LIMIT);
    (code, err, rep)
}

fn by_class(rep: &Value, class: &str) -> u64 {
    rep["errors"]["by_class"][class].as_u64().unwrap_or(0)
}

// ---------------------------------------------------------------------
// The in-test server.

/// A thread-per-connection HTTP/1.1 server. Paths:
/// `/ok` (2-byte body), `/chunked` (chunks written in separate pieces,
/// with an extension and a trailer), `/204`, `/304` (names a length and
/// sends no body), `/status/NNN`, `/echo` (the request body back),
/// `/token` (200 with `X-Token: secret`, 403 without), `/garbage` (not
/// HTTP), `/cut` (half a body, then close), `/eof` (an HTTP/1.0 body
/// delimited by the close). Every `close_every`-th response on a
/// connection says `Connection: close` and the server closes after it. A
/// request without a Host header gets a 400.
struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Responses written (counted as each starts).
    served: Arc<AtomicU64>,
    /// Request body bytes received.
    body_bytes: Arc<AtomicU64>,
}

impl HttpServer {
    fn start(close_every: u64) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let body_bytes = Arc::new(AtomicU64::new(0));
        let (st, sv, bb) = (stop.clone(), served.clone(), body_bytes.clone());
        thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let (sv, bb) = (sv.clone(), bb.clone());
                        thread::spawn(move || serve_http(s, close_every, &sv, &bb));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self {
            addr,
            stop,
            served,
            body_bytes,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Closes the way a careful server does: FIN first, then reads what the
/// client may still send (pipelined requests) until it closes, so the
/// kernel does not answer unread data with a reset that could overtake
/// the last response.
fn linger_close(mut s: TcpStream) {
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn serve_http(mut s: TcpStream, close_every: u64, served: &AtomicU64, body_bytes: &AtomicU64) {
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut answered = 0u64;
    loop {
        // One request: head, then its Content-Length body.
        let (head_len, method, path, host, token, length) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let get = |name: &str| {
                        req.headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case(name))
                            .map(|h| String::from_utf8_lossy(h.value).into_owned())
                    };
                    let length: usize = get("content-length").map_or(0, |v| v.parse().unwrap());
                    break (
                        n,
                        req.method.unwrap().to_string(),
                        req.path.unwrap().to_string(),
                        get("host"),
                        get("x-token"),
                        length,
                    );
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return,
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_len + length {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf[head_len..head_len + length].to_vec();
        buf.drain(..head_len + length);
        body_bytes.fetch_add(length as u64, Ordering::Relaxed);
        answered += 1;
        let close = close_every > 0 && answered % close_every == 0;
        let conn = if close { "Connection: close\r\n" } else { "" };
        let head_only = method == "HEAD";
        // The response, as pieces written one by one (so the client also
        // sees responses split across reads).
        let pieces: Vec<Vec<u8>> = match path.as_str() {
            _ if host.is_none() => {
                vec![format!("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n{conn}\r\n").into()]
            }
            "/garbage" => vec![b"THIS IS NOT HTTP\r\n\r\n".to_vec()],
            "/cut" => {
                served.fetch_add(1, Ordering::Relaxed);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
                return linger_close(s);
            }
            "/eof" => {
                served.fetch_add(1, Ordering::Relaxed);
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n");
                let _ = s.write_all(b"a body that ends when the connection does");
                return linger_close(s);
            }
            "/chunked" => {
                let mut v = vec![
                    format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n{conn}\r\n").into(),
                ];
                if !head_only {
                    v.push(b"4\r\nchun\r\n".to_vec());
                    v.push(b"3;ext=1\r\nked\r\n".to_vec());
                    v.push(b"0\r\nX-Trailer: t\r\n\r\n".to_vec());
                }
                v
            }
            "/204" => vec![format!("HTTP/1.1 204 No Content\r\n{conn}\r\n").into()],
            "/304" => vec![
                format!("HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n{conn}\r\n").into(),
            ],
            "/token" => {
                let code = if token.as_deref() == Some("secret") {
                    "200 OK"
                } else {
                    "403 Forbidden"
                };
                vec![format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n{conn}\r\n").into()]
            }
            "/echo" => {
                let mut v = vec![
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n{conn}\r\n").into(),
                ];
                if !head_only {
                    v.push(body);
                }
                v
            }
            p if p.starts_with("/status/") => {
                let code = &p["/status/".len()..];
                vec![format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n{conn}\r\n").into()]
            }
            _ => {
                let mut v =
                    vec![format!("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n{conn}\r\n").into()];
                if !head_only {
                    v.push(b"ok".to_vec());
                }
                v
            }
        };
        // Counted before it goes out: the client may have read it and
        // exited before this thread runs again.
        served.fetch_add(1, Ordering::Relaxed);
        for p in pieces {
            if s.write_all(&p).is_err() {
                return;
            }
        }
        if close {
            return linger_close(s);
        }
    }
}

#[test]
fn chunked_204_304_and_head_are_framed_and_a_server_close_reopens_without_error() {
    let srv = HttpServer::start(7);
    let dir = scratch("http-framing");
    let urls = dir.join("urls");
    std::fs::write(
        &urls,
        format!(
            "# weight method url\n3 {}\n{}\n{}\nHEAD {}\n",
            srv.url("/chunked"),
            srv.url("/204"),
            srv.url("/304"),
            srv.url("/ok")
        ),
    )
    .unwrap();
    for pipeline in ["1", "4"] {
        let before = srv.served.load(Ordering::Relaxed);
        let (code, err, rep) = http(
            &dir,
            &[
                "--urls",
                urls.to_str().unwrap(),
                "-c",
                "3",
                "-n",
                "1200",
                "--pipeline",
                pipeline,
                "--ok-status",
                "2xx,304",
            ],
        );
        assert_eq!(code, Some(0), "pipeline {pipeline}: {err}");
        assert_eq!(rep["workload"], "http");
        assert_eq!(rep["transactions"], 1200, "{rep}");
        assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
        let r = &rep["responses"];
        assert_eq!(r["answered"], 1200);
        // Every 7th response closes: reopened, never an error.
        assert!(r["reconnects"].as_u64().unwrap() >= 1200 / 7 - 3, "{r}");
        // Weighted 3:1:1:1, interleaved on each connection: counts follow
        // the weights, give or take the part of a round (6 requests) each
        // of the 3 connections was in when the count ran out.
        let cmd = &r["by_command"];
        let count = |name: String| cmd[&name]["answered"].as_u64().unwrap_or(0);
        let chunked = count(format!("GET {}", srv.url("/chunked")));
        let no_content = count(format!("GET {}", srv.url("/204")));
        let not_modified = count(format!("GET {}", srv.url("/304")));
        let head = count(format!("HEAD {}", srv.url("/ok")));
        assert_eq!(chunked + no_content + not_modified + head, 1200, "{cmd}");
        for (got, want) in [
            (chunked, 600),
            (no_content, 200),
            (not_modified, 200),
            (head, 200),
        ] {
            assert!(got.abs_diff(want) <= 9, "{got} for {want}: {cmd}");
        }
        assert_eq!(r["by_status"]["200"], chunked + head, "{r}");
        assert_eq!(r["by_status"]["204"], no_content, "{r}");
        assert_eq!(r["by_status"]["304"], not_modified, "{r}");
        // The server answered exactly what was counted: nothing pipelined
        // behind a close was lost or answered twice.
        assert_eq!(srv.served.load(Ordering::Relaxed) - before, 1200);
        assert!(
            rep["target"]
                .as_str()
                .unwrap()
                .ends_with("/chunked (+3 more)"),
            "{}",
            rep["target"]
        );
        let opts = &rep["config"]["workload_options"];
        assert_eq!(opts["urls"].as_array().unwrap().len(), 4, "{opts}");
        assert_eq!(opts["urls"][0]["weight"], 3, "{opts}");
    }
}

#[test]
fn garbage_is_a_protocol_error_a_cut_response_a_short_read_and_neither_hangs() {
    let srv = HttpServer::start(0);
    let dir = scratch("http-bad-server");
    let (code, err, rep) = http(&dir, &[&srv.url("/garbage"), "-n", "5"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("protocol_error"), "{err}");
    assert_eq!(by_class(&rep, "protocol_error"), 5, "{}", rep["errors"]);
    let (code, err, rep) = http(&dir, &[&srv.url("/cut"), "-n", "5", "--timeout", "2"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(by_class(&rep, "short_read"), 5, "{}", rep["errors"]);
    // The same in a connection per request.
    let (code, err, rep) = http(&dir, &[&srv.url("/garbage"), "-n", "3", "--new-connection"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(by_class(&rep, "protocol_error"), 3, "{}", rep["errors"]);
}

/// A server whose first connection gets a whole response right after
/// accept, before any request; then every connection is answered normally
/// (`ok`, 2 bytes), one request at a time. Stops after 20 s at most.
fn answers_before_asked() -> (SocketAddr, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        l.set_nonblocking(true).unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        let mut first = true;
        let mut workers = Vec::new();
        while Instant::now() < end {
            let Ok((mut s, _)) = l.accept() else {
                thread::sleep(Duration::from_millis(2));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if std::mem::take(&mut first) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly");
            }
            workers.push(thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = s.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(k) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..k + 4);
                        let _ = s.write_all(ok);
                    }
                }
            }));
            // The load's connections: the first, and the one after it.
            if workers.len() >= 2 {
                break;
            }
        }
        for w in workers {
            let _ = w.join();
        }
    });
    (addr, h)
}

#[test]
fn a_response_before_its_request_is_a_protocol_error_and_answers_nothing() {
    let dir = scratch("http-early-response");
    let (addr, h) = answers_before_asked();
    // Open loop at 4/s: whether the early response lands before the first
    // request goes out (caught before it is sent) or just after (the real
    // answer then comes with nothing outstanding), it is a protocol error
    // and closes the connection; the next connection is answered.
    let url = format!("http://{addr}/");
    let (code, err, rep) = http(&dir, &[&url, "-n", "3", "--rate", "4", "--max-errors", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(by_class(&rep, "protocol_error"), 1, "{}", rep["errors"]);
    assert_eq!(by_class(&rep, "unexpected_bytes"), 0, "{}", rep["errors"]);
    assert_eq!(rep["transactions"], 3, "{rep}");
    drop(rep);
    h.join().unwrap();
}

#[test]
fn a_body_delimited_by_the_close_completes_and_reopens() {
    let srv = HttpServer::start(0);
    let dir = scratch("http-eof");
    for mode in [&[][..], &["--new-connection"]] {
        let mut args = vec![
            srv.url("/eof"),
            "-c".into(),
            "2".into(),
            "-n".into(),
            "50".into(),
        ];
        args.extend(mode.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err, rep) = http(&dir, &args);
        assert_eq!(code, Some(0), "{mode:?}: {err}");
        assert_eq!(rep["transactions"], 50, "{mode:?}");
        assert_eq!(rep["errors"]["total"], 0, "{mode:?}");
        if mode.is_empty() {
            // Every response closes its connection.
            assert!(
                rep["responses"]["reconnects"].as_u64().unwrap() >= 48,
                "{rep}"
            );
        }
    }
}

#[test]
fn status_codes_are_errors_by_class_unless_ok_status_says_otherwise() {
    let srv = HttpServer::start(0);
    let dir = scratch("http-status");
    let url = srv.url("/status/503");
    let (code, err, rep) = http(&dir, &[&url, "-c", "2", "-n", "40"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("status_503 x40"), "{err}");
    assert_eq!(by_class(&rep, "status_503"), 40);
    assert_eq!(rep["responses"]["by_status"]["503"], 40);
    assert_eq!(rep["responses"]["answered"], 40);
    // Within --max-errors the run passes, the errors still counted.
    let (code, err, rep) = http(&dir, &[&url, "-n", "40", "--max-errors", "40"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(by_class(&rep, "status_503"), 40);
    // --ok-status makes them successes.
    let (code, err, rep) = http(&dir, &[&url, "-n", "40", "--ok-status", "2xx,500-599"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 40);
    assert_eq!(
        rep["config"]["workload_options"]["ok_status"],
        "2xx,500-599"
    );
}

#[test]
fn headers_method_and_body_are_sent() {
    let srv = HttpServer::start(5);
    let dir = scratch("http-request");
    let (code, err, rep) = http(&dir, &[&srv.url("/token"), "-n", "20"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(by_class(&rep, "status_403"), 20);
    let (code, err, rep) = http(
        &dir,
        &[&srv.url("/token"), "-n", "20", "-H", "X-Token: secret"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["config"]["workload_options"]["headers"][0], "X-Token");
    // Issue 22: the value was stored verbatim in the recorded command
    // line; the artifact keeps the name only, unless asked.
    let text = rep.to_string();
    assert!(!text.contains("secret"), "{text}");
    assert!(text.contains("X-Token: <redacted>"), "{text}");
    let (code, err, rep) = http(
        &dir,
        &[
            &srv.url("/token"),
            "-n",
            "5",
            "-H",
            "X-Token: secret",
            "--record-header-values",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(rep.to_string().contains("X-Token: secret"));
    // A body from a file, echoed back: every byte sent and received.
    let body = dir.join("body");
    std::fs::write(&body, vec![b'x'; 3000]).unwrap();
    let before = srv.body_bytes.load(Ordering::Relaxed);
    let arg = format!("@{}", body.display());
    let (code, err, rep) = http(
        &dir,
        &[
            &srv.url("/echo"),
            "--method",
            "POST",
            "--body",
            &arg,
            "-c",
            "2",
            "-n",
            "30",
            "--pipeline",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(srv.body_bytes.load(Ordering::Relaxed) - before, 30 * 3000);
    assert!(rep["bytes"]["received"].as_u64().unwrap() >= 30 * 3000);
    assert_eq!(rep["config"]["workload_options"]["body_bytes"], 3000);
    let name = format!("POST {}", srv.url("/echo"));
    assert_eq!(rep["responses"]["by_command"][&name]["answered"], 30);
}

#[test]
fn bad_input_is_a_usage_error() {
    let srv = HttpServer::start(0);
    let dir = scratch("http-usage");
    let two_hosts = dir.join("two-hosts");
    std::fs::write(
        &two_hosts,
        format!("{}\nhttp://127.0.0.2:9/\n", srv.url("/")),
    )
    .unwrap();
    let bad_line = dir.join("bad-line");
    std::fs::write(&bad_line, "1 2 3 4\n").unwrap();
    let url = srv.url("/");
    let (tmpl_foo, tmpl_seq, tmpl_key) = (srv.url("/{foo}"), srv.url("/{seq}"), srv.url("/{key}"));
    for (args, says) in [
        (vec!["ftp://127.0.0.1/x"], "not ftp://"),
        (vec!["127.0.0.1:80"], "URL"),
        // An unresolvable host names the URL given, not only the
        // authority taken from it.
        (
            vec!["http://nosuch.invalid:8080/x"],
            "http://nosuch.invalid:8080/x: `nosuch.invalid:8080` is not an address",
        ),
        (vec![&url, "-H", "NoColon"], "Name: value"),
        (vec![&url, "-H", "Content-Length: 3"], "Content-Length"),
        (vec![&url, "--ok-status", "9xx"], "--ok-status"),
        (vec![&url, "--method", "BAD METHOD"], "--method"),
        (vec![&url, "--insecure"], "https"),
        (vec![&url, "--body", "@/nonexistent/file"], "--body"),
        (
            vec!["--urls", two_hosts.to_str().unwrap()],
            "same scheme, host and port",
        ),
        (vec!["--urls", bad_line.to_str().unwrap()], "line 1"),
        (vec!["--urls", "/nonexistent/urls"], "--urls"),
        (
            vec![&url, "--new-connection", "--pipeline", "2"],
            "--pipeline",
        ),
        (vec![], "URL"),
        // Templates (issue 27).
        (
            vec![&tmpl_foo],
            "unknown field {foo}: the fields are {key}, {value} and {seq}",
        ),
        (vec!["http://{key}.example/"], "path or query only"),
        (vec![&url, "--keys", "10"], "--keys given but no URL"),
        (vec![&tmpl_seq, "--key-dist", "zipf:1"], "--key-dist given"),
        (vec![&tmpl_key, "--value-size", "5"], "--value-size given"),
        (
            vec![&url, "-H", "X-Id: {id}"],
            "-H `X-Id: {id}`: unknown field {id}",
        ),
        (vec![&url, "--body", "{key}}"], "--body: stray '}'"),
        (vec![&tmpl_key, "--keys", "0"], "--keys"),
    ] {
        let (code, err, rep) = http(&dir, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(rep.is_null(), "{args:?}: no JSON for a usage error");
    }
    assert_eq!(srv.served.load(Ordering::Relaxed), 0, "nothing was sent");
}

// ---------------------------------------------------------------------
// Templates, against a python3 server that logs every request it reads.

/// A python3 HTTP/1.1 keep-alive server (one thread per connection) that
/// writes each request as a JSON line (method, target, X-Id header, body)
/// to the file in argv[1] before answering 200 `ok`.
const LOGGING_SERVER: &str = r#"
import http.server, json, sys, threading
log = open(sys.argv[1], "a")
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("latin-1")
        line = {"m": self.command, "p": self.path, "h": self.headers.get("X-Id"), "b": body}
        with lock:
            log.write(json.dumps(line) + "\n")
            log.flush()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    do_GET = do_POST = do_PUT = answer
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// The python3 logging server; killed on drop.
struct LoggingServer {
    srv: PyServer,
    log: std::path::PathBuf,
}

impl LoggingServer {
    fn start(test: &str, dir: &Path) -> Option<Self> {
        let log = dir.join("requests.jsonl");
        let srv = PyServer::start(
            test,
            "http.server",
            LOGGING_SERVER,
            &[log.to_str().unwrap()],
        )?;
        Some(Self { srv, log })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.srv.port)
    }

    /// The requests logged since the last call (the log is emptied; the
    /// server appends, so it writes on from the start).
    fn take(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        std::fs::write(&self.log, "").unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Issue 27: one request built per URL could not vary its key; the
/// server now sees a key of the key space, the run's sequence number and
/// the value in each request's URL, header and body.
#[test]
fn templates_reach_the_server_expanded_per_request() {
    let test = "http-templates";
    let dir = scratch(test);
    let Some(srv) = LoggingServer::start(test, &dir) else {
        return;
    };
    let url = srv.url("/item/{key}?n={seq}");
    let (code, err, rep) = http(
        &dir,
        &[
            &url,
            "--method",
            "POST",
            "-H",
            "X-Id: id-{key}-{seq}",
            "--body",
            r#"{{"k":"{key}","v":"{value}"}}"#,
            "--keys",
            "50",
            "--value-size",
            "100",
            "-c",
            "3",
            "-n",
            "600",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 600);
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    let o = &rep["config"]["workload_options"];
    assert_eq!(
        o["template"]["fields"],
        serde_json::json!(["key", "value", "seq"])
    );
    assert_eq!(
        o["template"]["in"],
        serde_json::json!(["url", "header X-Id", "body"])
    );
    assert_eq!(
        (o["keys"].as_u64(), o["value_size"].as_u64()),
        (Some(50), Some(100))
    );
    assert_eq!(o["key_dist"], "uniform");
    assert_eq!(o["urls"][0]["url"], url);
    let value: String = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        .chars()
        .cycle()
        .take(100)
        .collect();
    let seen = srv.take();
    assert_eq!(seen.len(), 600);
    let mut seqs = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for r in &seen {
        let path = r["p"].as_str().unwrap();
        let (key, n) = path
            .strip_prefix("/item/")
            .and_then(|rest| rest.split_once("?n="))
            .unwrap_or_else(|| panic!("{r}"));
        // Two digits: keys 0 to 49 all written at one width.
        assert_eq!(key.len(), 2, "{r}");
        assert!(key.parse::<u64>().unwrap() < 50, "{r}");
        assert_eq!(r["m"], "POST");
        assert_eq!(r["h"], format!("id-{key}-{n}"), "{r}");
        assert_eq!(r["b"], format!(r#"{{"k":"{key}","v":"{value}"}}"#), "{r}");
        seqs.push(n.parse::<u64>().unwrap());
        keys.insert(key.to_string());
    }
    // {seq}: unique across the 3 connections and contiguous from 0.
    seqs.sort_unstable();
    assert_eq!(seqs, (0..600).collect::<Vec<u64>>());
    // Uniform over 50 keys, 600 draws: a key is missed with probability
    // (49/50)^600 < 1e-5, so nearly all are seen.
    assert!(keys.len() >= 45, "{keys:?}");

    // Zipf in the URL, with {value} there too (letters and digits: a
    // valid request target as they are).
    let (code, err, _) = http(
        &dir,
        &[
            &srv.url("/v/{value}/{key}"),
            "--keys",
            "1000",
            "--key-dist",
            "zipf:1.5",
            "--value-size",
            "10",
            "-c",
            "2",
            "-n",
            "300",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let mut count = std::collections::BTreeMap::<String, u64>::new();
    for r in srv.take() {
        let path = r["p"].as_str().unwrap();
        let key = path
            .strip_prefix("/v/0123456789/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(key.len() == 3 && key.parse::<u64>().unwrap() < 1000, "{r}");
        *count.entry(key.to_string()).or_default() += 1;
    }
    assert_eq!(count.values().sum::<u64>(), 300);
    // Zipf 1.5: key 0 takes about 2/5 of the draws, key 1 about 1/7.
    let top = count.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(top.0, "000", "{count:?}");
}

// ---------------------------------------------------------------------
// nginx.

#[test]
fn nginx_keepalive_requests_reopen_without_error_and_its_log_agrees() {
    let Some(ngx) = Nginx::start("http-nginx-keepalive") else {
        return;
    };
    let dir = scratch("http-nginx-keepalive-run");
    let url = ngx.url("/index.html");
    // One connection, 3000 requests: nginx closes it after every 1000th
    // (keepalive_requests) with Connection: close.
    let (code, err, rep) = http(&dir, &[&url, "-c", "1", "-n", "3000"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 3000);
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    let r = &rep["responses"];
    assert!(r["reconnects"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(r["by_status"]["200"], 3000, "{r}");
    assert_eq!(ngx.logged(3000), r["answered"].as_u64().unwrap());
    // Pipelined: requests sent behind the 1000th are sent again on the
    // new connection, and every one is answered exactly once.
    let (code, err, rep) = http(&dir, &[&url, "-c", "4", "--pipeline", "8", "-n", "20000"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 20000);
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    assert_eq!(rep["config"]["pipeline"], 8);
    assert!(rep["responses"]["reconnects"].as_u64().unwrap() >= 16);
    assert_eq!(ngx.logged(23000), 23000);
}

#[test]
fn nginx_missing_path_is_status_404_and_new_connection_works() {
    let Some(ngx) = Nginx::start("http-nginx-404") else {
        return;
    };
    let dir = scratch("http-nginx-404-run");
    let missing = ngx.url("/missing.html");
    let (code, err, rep) = http(&dir, &[&missing, "-c", "2", "-n", "100"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("status_404"), "{err}");
    let answered = rep["responses"]["answered"].as_u64().unwrap();
    assert_eq!(answered, 100);
    assert_eq!(by_class(&rep, "status_404"), answered);
    assert_eq!(rep["transactions"], 0);
    let (code, err, rep) = http(&dir, &[&missing, "-n", "100", "--ok-status", "404"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 100);
    // One connection per request.
    let (code, err, rep) = http(
        &dir,
        &[
            &ngx.url("/index.html"),
            "-c",
            "4",
            "-n",
            "400",
            "--new-connection",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 400);
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    assert_eq!(rep["connections"]["connects"], 400);
    assert_eq!(rep["config"]["close"], "fin");
    assert!(rep["connect_latency"]["count"].as_u64().unwrap() > 0);
    assert_eq!(ngx.logged(600), 600);
}

#[test]
fn nginx_duration_run_drains_and_the_log_counts_every_answer() {
    let Some(ngx) = Nginx::start("http-nginx-duration") else {
        return;
    };
    let dir = scratch("http-nginx-duration-run");
    let (code, err, rep) = http(
        &dir,
        &[
            &ngx.url("/index.html"),
            "-c",
            "16",
            "-t",
            "2",
            "-d",
            "1",
            "--pipeline",
            "2",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    let r = &rep["responses"];
    // answered counts the warm-up and the drain too: the server's count.
    let answered = r["answered"].as_u64().unwrap();
    assert_eq!(
        answered,
        rep["transactions"].as_u64().unwrap()
            + rep["errors"]["answered_after_end"].as_u64().unwrap()
    );
    // A request still unanswered when the drain gave up (a loaded
    // machine) may or may not have reached nginx.
    let unanswered = rep["errors"]["unanswered_at_end"].as_u64().unwrap();
    let logged = ngx.logged(answered);
    assert!(
        (answered..=answered + unanswered).contains(&logged),
        "nginx logged {logged}, the load counted {answered} answered and {unanswered} \
         unanswered: {rep}"
    );
}

#[test]
fn https_to_nginx_insecure_or_trusting_its_certificate_and_refused_otherwise() {
    let Some(ngx) = Nginx::start_with("http-nginx-tls", true, "") else {
        return;
    };
    let dir = scratch("http-nginx-tls-run");
    let url = ngx.url("/index.html");
    // Keep-alive over TLS: nginx's keepalive_requests closes reopen too.
    let (code, err, rep) = http(&dir, &[&url, "-c", "2", "-n", "3000", "--insecure"]);
    assert_eq!(code, Some(0), "{err}");
    let keepalive = rep.clone();
    assert_eq!(rep["transactions"], 3000);
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
    assert!(rep["responses"]["reconnects"].as_u64().unwrap() >= 2);
    assert_eq!(
        ngx.logged(3000),
        rep["responses"]["answered"].as_u64().unwrap()
    );
    assert!(rep["tls_handshake_latency"]["count"].as_u64().unwrap() >= 4);
    // Its own certificate trusted by name: one handshake per request.
    let cert = ngx.dir.join("cert.pem");
    let named = format!("https://localhost:{}/index.html", ngx.port);
    let (code, err, rep) = http(
        &dir,
        &[
            &named,
            "-n",
            "100",
            "--new-connection",
            "--cacert",
            cert.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 100);
    assert_eq!(rep["connections"]["connects"], 100);
    assert_eq!(rep["tls_handshake_latency"]["count"], 100);
    // Issue 22: a reopened connection's handshake was timed against the
    // batch's cached clock and recorded as 1 ns. A TLS handshake over
    // loopback takes at least tens of microseconds.
    for r in [&rep, &keepalive] {
        let min = r["tls_handshake_latency"]["min_ns"].as_u64().unwrap();
        assert!(min >= 10_000, "handshake min {min} ns");
    }
    // Neither: the self-signed certificate is refused, classed, named.
    let (code, err, rep) = http(&dir, &[&url, "-n", "10"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(by_class(&rep, "tls_error") > 0 || rep.is_null(), "{rep}");
    assert!(err.contains("certificate"), "{err}");
}

#[test]
fn profile_fills_nginx_address_into_the_load_url() {
    if !require_bpf("profile_fills_nginx_address_into_the_load_url") {
        return;
    }
    let Some(ngx) = Nginx::start("http-nginx-profile") else {
        return;
    };
    let out = scratch("http-nginx-profile-run").join("art");
    let pid = ngx.child.id().to_string();
    let (st, so, se) = run_bounded(
        &[
            "profile",
            "--pid",
            &pid,
            "--load",
            "http -c 2 -n 2500 /index.html",
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "profile failed ({st}):\n{so}\n{se}");
    let rep = read_json(&out.join("run.json"));
    let load = &rep["load"];
    assert_eq!(load["workload"], "http");
    assert_eq!(
        load["target"],
        format!("http://127.0.0.1:{}/index.html", ngx.port)
    );
    assert_eq!(load["transactions"], 2500);
    assert_eq!(load["errors"]["total"], 0, "{}", load["errors"]);
    // keepalive_requests 1000: each of the 2 connections was reopened.
    assert!(load["responses"]["reconnects"].as_u64().unwrap() >= 1);
    assert_eq!(ngx.logged(2500), 2500);
}
