//! `trace --metrics ADDR`: serves what the tracer has counted at
//! `/metrics` for Prometheus, in the text format or, for a scraper that
//! asks for it, the protobuf format with native histograms.
//!
//! The trace loop publishes a fresh [`Snapshot`] every second; scrapes are
//! answered from the latest one on a small server thread, so a scrape never
//! touches the BPF maps and a slow scraper never delays the tracer.

pub mod model;
pub mod text;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use prost::Message;

use crate::error;
use crate::trace::snapshot::{Breakdown, Snapshot, SnapshotSink};

/// Content type of the protobuf format (length-delimited MetricFamily).
pub const PROTOBUF_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
/// Longest request head read.
const MAX_HEAD: usize = 8192;
/// Read and write timeout of one connection.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are answered 503 at once, so a local
/// client holding connections open cannot pile up threads.
const MAX_CONNS: usize = 8;

/// How the exporter labels and bounds its series.
#[derive(Clone, Debug)]
pub struct ExporterOptions {
    /// Labelled (group, syscall) series at most (`--max-series`).
    pub max_series: usize,
    /// What the tracer traces, for `sockscope_trace_info`.
    pub scope: String,
    /// The breakdown of the per-group series.
    pub by: Breakdown,
}

struct State {
    snap: Option<Arc<Snapshot>>,
    detaching: bool,
    admission: model::Admission,
    scope: String,
}

/// The /metrics server. Dropping it (or [`Exporter::shutdown`]) stops the
/// server thread and closes the listening socket.
pub struct Exporter {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// Is `addr` on this machine's loopback only?
pub fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(a) => a.ip().is_loopback(),
        SocketAddr::V6(a) => {
            a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

impl Exporter {
    /// Binds `addr` and starts serving (503 until the first publish). A
    /// non-loopback address needs `public` (usage error otherwise); a bind
    /// failure is an error naming the address and the cause (exit 1).
    pub fn bind(addr: SocketAddr, public: bool, opts: ExporterOptions) -> Result<Self> {
        if !public && !is_loopback(&addr) {
            return Err(error::usage(format!(
                "--metrics {addr}: not a loopback address; the metrics would be readable from \
                 other machines. Add --metrics-public to serve them there on purpose"
            )));
        }
        let listener = TcpListener::bind(addr).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::AddrInUse => format!(
                    "address already in use (another exporter there? ss -ltnp 'sport = :{}')",
                    addr.port()
                ),
                std::io::ErrorKind::AddrNotAvailable => "not an address of this machine".into(),
                std::io::ErrorKind::PermissionDenied => {
                    "permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)".into()
                }
                _ => crate::output::errno_text(&e),
            };
            error::with_code(1, format!("--metrics {addr}: cannot serve there: {why}"))
        })?;
        let addr = listener.local_addr().unwrap_or(addr);
        listener.set_nonblocking(true)?;
        let (stop_rx, stop_tx) = nix::unistd::pipe()?;
        let state = Arc::new(Mutex::new(State {
            snap: None,
            detaching: false,
            admission: model::Admission::new(opts.max_series),
            scope: opts.scope,
        }));
        let thread = {
            let state = Arc::clone(&state);
            std::thread::Builder::new()
                .name("sockscope-metrics".into())
                .spawn(move || serve(listener, stop_rx, state))?
        };
        Ok(Self {
            state,
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: the listening socket is closed when this returns.
    pub fn shutdown(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        // Closing the pipe's write end wakes the server's poll.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

impl SnapshotSink for Exporter {
    fn publish(&self, snap: &Arc<Snapshot>) {
        if let Ok(mut st) = self.state.lock() {
            st.snap = Some(Arc::clone(snap));
        }
    }

    fn detaching(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.detaching = true;
        }
    }
}

fn serve(listener: TcpListener, stop: OwnedFd, state: Arc<Mutex<State>>) {
    // This thread starts before the tracer blocks its signals (to read
    // them from a signalfd); were they deliverable here, Ctrl-C would kill
    // the process instead of ending the trace. Scrape threads inherit this.
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&nix::sys::signal::SigSet::all()),
        None,
    );
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        loop {
            let (conn, _) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => break,
            };
            let _ = conn.set_nonblocking(false);
            let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
            let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
            if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNS {
                active.fetch_sub(1, Ordering::SeqCst);
                let mut conn = conn;
                let _ = respond(
                    &mut conn,
                    503,
                    "text/plain",
                    b"too many connections\n",
                    false,
                );
                continue;
            }
            let state = Arc::clone(&state);
            let mine = Arc::clone(&active);
            let spawned = std::thread::Builder::new()
                .name("sockscope-scrape".into())
                .spawn(move || {
                    let mut conn = conn;
                    handle(&mut conn, &state);
                    mine.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

fn respond(
    conn: &mut TcpStream,
    status: u16,
    ctype: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    if status == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    conn.write_all(out.as_bytes())?;
    if !head_only {
        conn.write_all(body)?;
    }
    conn.flush()
}

/// Reads one request head (bounded in size and time) and answers it.
fn handle(conn: &mut TcpStream, state: &Mutex<State>) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head_len = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() >= MAX_HEAD {
            let _ = respond(conn, 431, "text/plain", b"request head too large\n", false);
            return;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let (method, path, accept) = match req.parse(&buf[..head_len]) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.unwrap_or("").to_string(),
            req.path.unwrap_or("").to_string(),
            req.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("accept"))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => {
            let _ = respond(conn, 400, "text/plain", b"malformed request\n", false);
            return;
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let _ = respond(conn, 405, "text/plain", b"only GET and HEAD\n", false);
        return;
    }
    let path = path.split('?').next().unwrap_or("");
    match path {
        "/metrics" => {}
        "/" => {
            let _ = respond(
                conn,
                200,
                "text/plain; charset=utf-8",
                b"sockscope trace exporter: see /metrics\n",
                head_only,
            );
            return;
        }
        _ => {
            let _ = respond(
                conn,
                404,
                "text/plain",
                b"not found: try /metrics\n",
                head_only,
            );
            return;
        }
    }
    let protobuf = wants_protobuf(&accept);
    let (status, ctype, body) = match state.lock() {
        Err(_) => (503, "text/plain", b"exporter failed\n".to_vec()),
        Ok(mut st) => {
            if st.detaching {
                (
                    503,
                    "text/plain",
                    b"sockscope is detaching: no more data from this tracer\n".to_vec(),
                )
            } else if let Some(snap) = st.snap.clone() {
                let st = &mut *st;
                let fams = model::families(&snap, &st.scope, &mut st.admission);
                if protobuf {
                    let mut out = Vec::new();
                    for f in &fams {
                        let _ = f.encode_length_delimited(&mut out);
                    }
                    (200, PROTOBUF_TYPE, out)
                } else {
                    (200, text::CONTENT_TYPE, text::encode(&fams).into_bytes())
                }
            } else {
                (
                    503,
                    "text/plain",
                    b"no data yet: the tracer publishes its first reading within a second\n"
                        .to_vec(),
                )
            }
        }
    };
    let _ = respond(conn, status, ctype, &body, head_only);
}

/// The q-value of one media range's parameters (1 when absent).
fn q_of(params: &[&str]) -> f64 {
    params
        .iter()
        .find_map(|p| p.trim().strip_prefix("q="))
        .and_then(|q| q.trim().parse::<f64>().ok())
        .unwrap_or(1.0)
}

/// True when the Accept header prefers (or only takes) the delimited
/// MetricFamily protobuf format over text, as Prometheus' client
/// libraries decide.
pub fn wants_protobuf(accept: &str) -> bool {
    let mut pb_q: f64 = 0.0;
    let mut text_q: f64 = 0.0;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let params: Vec<&str> = parts.collect();
        let q = q_of(&params);
        let has = |k: &str, v: &str| {
            params.iter().any(|p| {
                let mut kv = p.splitn(2, '=');
                kv.next().is_some_and(|x| x.trim().eq_ignore_ascii_case(k))
                    && kv.next().is_some_and(|x| x.trim() == v)
            })
        };
        if media == "application/vnd.google.protobuf"
            && has("proto", "io.prometheus.client.MetricFamily")
            && has("encoding", "delimited")
        {
            pb_q = pb_q.max(q);
        } else if media == "text/plain" || media == "*/*" || media == "text/*" {
            text_q = text_q.max(q);
        }
    }
    pb_q > 0.0 && pb_q >= text_q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_only_when_the_scraper_prefers_it() {
        let prom_native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
                           encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(wants_protobuf(prom_native));
        let prom_plain = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                          version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(!wants_protobuf(prom_plain));
        assert!(!wants_protobuf(""));
        assert!(!wants_protobuf("*/*"));
        assert!(!wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"
        ));
        assert!(!wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
             encoding=delimited;q=0"
        ));
    }

    #[test]
    fn only_loopback_counts_as_loopback() {
        assert!(is_loopback(&"127.0.0.1:1".parse().unwrap()));
        assert!(is_loopback(&"127.9.9.9:1".parse().unwrap()));
        assert!(is_loopback(&"[::1]:1".parse().unwrap()));
        assert!(is_loopback(&"[::ffff:127.0.0.1]:1".parse().unwrap()));
        assert!(!is_loopback(&"0.0.0.0:1".parse().unwrap()));
        assert!(!is_loopback(&"[::]:1".parse().unwrap()));
        assert!(!is_loopback(&"10.0.0.1:1".parse().unwrap()));
    }
}
