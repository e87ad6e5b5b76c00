//! `trace --metrics ADDR`: serves what the tracer has counted at
//! `/metrics` for Prometheus, in the text format or, for a scraper that
//! asks for it, the protobuf format with native histograms.
//!
//! With `--requests` or `--requests-only` it also serves the request
//! anatomy's per-port counts (`requests`), read from the session's
//! [`crate::anatomy::Latest`]; with `--requests-only` those alone.
//!
//! With `--requests-only --stacks` it serves the sampled stacks too: per
//! command and innermost function on `/metrics`, and the last complete
//! window's pprof profile on `/debug/pprof/profile` (`stacks`).
//!
//! Every scrape also carries the agent's own cost (CPU, resident memory,
//! series) and its network namespace's reset and drop counters (`agent`).
//!
//! The trace loop publishes a fresh [`Snapshot`] every second; scrapes are
//! answered from the latest one by one server thread (`server`: a poll
//! loop with a whole-request deadline and slots per peer, so slow clients
//! cannot starve scrapers), so a scrape never touches the BPF maps and a
//! slow scraper never delays the tracer.

pub mod agent;
pub mod model;
pub mod requests;
mod server;
pub mod stacks;
pub mod text;

use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Result;

use crate::error;
use crate::trace::snapshot::{Breakdown, Snapshot, SnapshotSink};

/// Content type of the protobuf format (length-delimited MetricFamily).
pub const PROTOBUF_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// How the exporter labels and bounds its series.
#[derive(Clone, Debug)]
pub struct ExporterOptions {
    /// Labelled (group, syscall) series at most, and endpoint series at
    /// most (`--max-series`).
    pub max_series: usize,
    /// What the tracer traces, for `sockscope_trace_info`.
    pub scope: String,
    /// The breakdown of the per-group series.
    pub by: Breakdown,
}

struct State {
    snap: Option<Arc<Snapshot>>,
    /// The request anatomy's counts (`--requests`, `--requests-only`).
    requests: Option<crate::anatomy::Latest>,
    /// A node agent's stacks (`--requests-only --stacks`).
    stacks: Option<crate::stacks::export::Shared>,
    detaching: bool,
    admission: model::Admission,
    /// The endpoint series' own admission (same `--max-series`).
    endpoints: requests::EndpointAdmission,
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
            requests: None,
            stacks: None,
            detaching: false,
            admission: model::Admission::new(opts.max_series),
            endpoints: requests::EndpointAdmission::new(opts.max_series),
            scope: opts.scope,
        }));
        let thread = {
            let state = Arc::clone(&state);
            std::thread::Builder::new()
                .name("sockscope-metrics".into())
                .spawn(move || {
                    crate::signals::keep_off_this_thread();
                    server::serve(listener, stop_rx, &state)
                })?
        };
        Ok(Self {
            state,
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Serves the request anatomy's counts from `latest` too (or alone,
    /// when no trace publishes snapshots: `--requests-only`).
    pub fn serve_requests(&self, latest: crate::anatomy::Latest) {
        if let Ok(mut st) = self.state.lock() {
            st.requests = Some(latest);
        }
    }

    /// Serves a node agent's stacks too: their families on `/metrics` and
    /// the last complete window's profile on `/debug/pprof/profile`.
    pub fn serve_stacks(&self, stacks: crate::stacks::export::Shared) {
        if let Ok(mut st) = self.state.lock() {
            st.stacks = Some(stacks);
        }
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
