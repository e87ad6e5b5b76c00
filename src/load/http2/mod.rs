//! HTTP/2 load (`load http --http2`, `load grpc`): an engine of its own
//! beside the TCP driver, because the driver keeps one request in flight
//! per connection (or a pipeline answered in order), while HTTP/2 carries
//! many concurrent streams per connection, answered in any order, with
//! per-stream flow control. The codec is our own, built for a load
//! generator ([`frame`], [`hpack`](crate::proto::hpack), [`client`]: no header map, no task or
//! channel per stream, one write per loop turn; docs/dependencies.md says
//! what the `h2` crate cost); each worker thread runs its share of the
//! connections on a tokio current-thread runtime (no work stealing, no
//! cross-thread wake-ups: like the driver's one epoll loop per thread).
//!
//! Each connection has `--streams` stream slots, all driven by the
//! connection's one task; each slot issues a request, waits for its whole
//! response (body read, flow-control window given back, trailers read)
//! and issues the next: at once (closed loop), or, with `--rate`, at the
//! next intended send time its worker's [`pacer`] released (open loop,
//! latency from the intended time).
//! Everything around the workers (threads, the watch, per-second
//! intervals, the merge, the report) is the TCP engine's, through
//! [`WorkerLoop`]: the report has the same shape as every workload's.
//!
//! Errors: a RST_STREAM from the server is `rst_stream:<CODE>` and the
//! connection goes on; a GOAWAY with an error code is `goaway:<CODE>` for
//! each request it cut, and the connection is replaced; a graceful GOAWAY
//! (NO_ERROR, e.g. nginx's keepalive_requests) replaces the connection and
//! issues again the requests it refused, which are not errors (the server
//! did not process them). A response whose status is not accepted (HTTP:
//! `--ok-status`; gRPC: grpc-status not 0) is an error of its class.

pub mod classify;
pub mod client;
pub mod conn;
pub mod frame;
pub mod grpc_body;
pub mod pacer;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use self::conn::{SetupError, Tls, Up, WireBytes};
use self::pacer::Pacer;
use crate::load::driver::engine::WorkerLoop;
use crate::load::driver::plan::{Stop, TcpPlan, WorkerCtx};
use crate::load::driver::tally::WorkerTally;
use crate::load::driver::{Backoff, WorkerEnd};
use crate::load::schedule::Schedule;
use crate::load::workload::{ErrorClass, Outcome};
use crate::proto::hpack;

pub use self::conn::Windows;

/// Refuses the driver's options the HTTP/2 engine does not have (`what`
/// names the workload or option that chose it): connect pacing, several
/// source addresses.
pub fn refuse_driver_options(t: &crate::load::spec::TcpArgs, what: &str) -> anyhow::Result<()> {
    for (given, name) in [
        (t.connect_rate.is_some(), "--connect-rate"),
        (t.source_ips.is_some(), "--source-ips"),
        (t.max_conns.is_some(), "--max-conns"),
    ] {
        if given {
            return Err(crate::error::usage(format!(
                "{name} does not apply to {what} (see docs/load.md)"
            )));
        }
    }
    Ok(())
}

/// Why `name: value` cannot go in a request's header block, if it
/// cannot: a name must be a lowercase token (RFC 9113 8.2.1), a value
/// free of control characters.
pub fn field_error(name: &str, value: &str) -> Option<&'static str> {
    // RFC 9110 5.6.2's token characters.
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Some("not a header name (letters, digits and !#$%&'*+-.^_`|~)");
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some("HTTP/2 header names are lowercase");
    }
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Some("the value holds a control character (CR, LF...)");
    }
    None
}

/// The request every stream sends.
#[derive(Clone, Debug)]
pub struct Call {
    /// Method.
    pub method: String,
    /// `http` or `https` (`:scheme`).
    pub scheme: &'static str,
    /// `:authority`: host, and port when the URL gives one.
    pub authority: String,
    /// `:path`: path and query.
    pub path: String,
    /// Further headers, names lowercase (checked by the caller).
    pub headers: Vec<(String, String)>,
    /// Body (empty: none; the HEADERS frame ends the stream).
    pub body: Bytes,
}

impl Call {
    /// The request's HPACK header block: the same bytes for every stream
    /// (no dynamic table), so it is encoded once.
    pub fn header_block(&self) -> Vec<u8> {
        let mut b = Vec::new();
        hpack::put_field(&mut b, ":method", &self.method);
        hpack::put_field(&mut b, ":scheme", self.scheme);
        hpack::put_field(&mut b, ":authority", &self.authority);
        hpack::put_field(&mut b, ":path", &self.path);
        for (n, v) in &self.headers {
            hpack::put_field(&mut b, n, v);
        }
        b
    }
}

/// How a whole response is judged.
#[derive(Clone)]
pub enum Judge {
    /// HTTP: the status codes that count as success.
    Http(Arc<dyn Fn(u16) -> bool + Send + Sync>),
    /// gRPC: HTTP 200 and grpc-status 0 (from the trailers, or the headers
    /// of a trailers-only response).
    Grpc,
}

/// Whether a whole response body is what the call expects (gRPC with
/// --protoset: one message of the output type).
pub type ReplyCheck = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The most of a response body kept for [`ReplyCheck`]: gRPC's default
/// receive limit and a frame header; a longer first response is not
/// checked.
const CHECKED_BODY: usize = (4 << 20) + 5;

/// An HTTP/2 load: what every stream sends and how its answer counts.
pub struct H2Load {
    /// The request.
    pub call: Call,
    /// How answers are judged.
    pub judge: Judge,
    /// Concurrent streams per connection.
    pub streams: usize,
    /// Flow-control windows asked of the server.
    pub windows: Windows,
    /// `responses.by_command`'s one name (`GET URL`, the gRPC method).
    pub ops: Vec<String>,
    /// Checks each worker's first successful response (only the first:
    /// later bodies are not kept, so the check costs the hot path one
    /// flag per call).
    pub check_reply: Option<ReplyCheck>,
}

impl WorkerLoop for H2Load {
    fn run_worker(
        &self,
        plan: &TcpPlan,
        ctx: &WorkerCtx,
        tally: &mut WorkerTally,
    ) -> std::io::Result<WorkerEnd> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        // The tasks share the tally; it is lent to them for the run and
        // handed back (the placeholder's channel is never used).
        let (tx, _) = std::sync::mpsc::channel();
        let placeholder = WorkerTally::new(0, false, false, false, tx, Arc::default());
        // The pacer's timerfd registers with this runtime's reactor.
        let _entered = rt.enter();
        let pacer = match &ctx.rate {
            Some(r) => Some(Pacer::new(Schedule::new(
                r,
                ctx.clock.now(),
                ctx.measure_from,
                ctx.quota,
            ))?),
            None => None,
        };
        let w = Rc::new(Worker {
            block: self.call.header_block(),
            call: self.call.clone(),
            judge: self.judge.clone(),
            check_reply: self.check_reply.clone(),
            checked: Cell::new(false),
            streams: self.streams,
            windows: self.windows,
            tls: plan.tls.as_ref().map(|t| t.with_alpn(&[b"h2"])),
            plan: plan.clone(),
            ctx: ctx.clone(),
            tally: RefCell::new(std::mem::replace(tally, placeholder)),
            issued: Cell::new(0),
            established: Cell::new(0),
            bytes: Rc::new(WireBytes::default()),
            pacer,
            stuck: Cell::new(None),
            sent_any: Cell::new(false),
            stalled: Cell::new(false),
        });
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, {
            let w = Rc::clone(&w);
            async move {
                let conns: Vec<_> = (0..w.ctx.conns)
                    .map(|_| tokio::task::spawn_local(connection(Rc::clone(&w))))
                    .collect();
                if matches!(w.plan.stop, Stop::Count(_)) {
                    // Dropped with the LocalSet when the run ends first.
                    tokio::task::spawn_local(stall_watch(Rc::clone(&w)));
                }
                if let Some(p) = &w.pacer {
                    let ended = |t: u64| w.ctx.end.is_some_and(|e| t >= e);
                    p.run(
                        || w.now(),
                        |t| !w.ctx.stop.load(Ordering::Relaxed) && !ended(t),
                        w.ctx.end,
                        &w.tally,
                    )
                    .await;
                }
                for c in conns {
                    let _ = c.await;
                }
            }
        });
        drop(local);
        let w =
            Rc::try_unwrap(w).map_err(|_| std::io::Error::other("a stream outlived its run"))?;
        let mut t = w.tally.into_inner();
        t.bytes_sent += w.bytes.sent.get();
        t.bytes_received += w.bytes.received.get();
        t.finish();
        *tally = t;
        let (backlog_at_end, backlog_overflow) = w.pacer.as_ref().map_or((0, 0), Pacer::left);
        Ok(WorkerEnd {
            established: w.established.get(),
            backlog_at_end,
            backlog_overflow,
            idle_why: w.stuck.get().map(client::Stuck::why),
            stalled: w.stalled.get(),
            ..WorkerEnd::default()
        })
    }

    fn request_len(&self) -> Option<usize> {
        None
    }

    fn response_len(&self) -> Option<usize> {
        None
    }

    fn counts_responses(&self) -> bool {
        true
    }

    fn ops(&self) -> &[String] {
        &self.ops
    }

    fn status_name(&self, status: u16) -> Cow<'static, str> {
        match self.judge {
            Judge::Http(_) => Cow::Owned(status.to_string()),
            Judge::Grpc => crate::load::workload::grpc_status_name(status as u8),
        }
    }
}

/// One worker's run, shared by its tasks (one thread: no locks).
struct Worker {
    call: Call,
    /// The call's header block, encoded once.
    block: Vec<u8>,
    judge: Judge,
    check_reply: Option<ReplyCheck>,
    /// A response was checked (or none is to be).
    checked: Cell<bool>,
    streams: usize,
    windows: Windows,
    tls: Option<Tls>,
    plan: TcpPlan,
    ctx: WorkerCtx,
    tally: RefCell<WorkerTally>,
    /// Measured requests issued (the count quota's).
    issued: Cell<u64>,
    /// Connection slots that came up at least once.
    established: Cell<usize>,
    bytes: Rc<WireBytes>,
    /// Open loop: the intended send times (None: closed loop).
    pacer: Option<Pacer>,
    /// Why a connection that came up sent no request (the last seen).
    stuck: Cell<Option<client::Stuck>>,
    /// A request went out on some connection.
    sent_any: Cell<bool>,
    /// Count mode saw no transaction complete for twice --timeout: the
    /// run is over for this worker, as the TCP driver's stall.
    stalled: Cell<bool>,
}

/// A turn to issue a request.
#[derive(Clone, Copy)]
enum Turn {
    /// Closed loop: whether it counts against the quota.
    Closed { measured: bool },
    /// Open loop: its intended send time (the quota is the schedule's).
    Open { intended: u64 },
}

impl Worker {
    fn now(&self) -> u64 {
        self.ctx.clock.now()
    }

    /// May the run go on (no stop, quota and time left)?
    fn may_continue(&self) -> bool {
        self.run_going() && !self.pacer.as_ref().is_some_and(Pacer::finished)
    }

    /// Has the run neither been stopped nor reached its end (time, or the
    /// closed loop's quota)? (Open loop: whether sends are left is the
    /// pacer's.)
    fn run_going(&self) -> bool {
        !self.ctx.stop.load(Ordering::Relaxed)
            && !self.stalled.get()
            && self.ctx.may_issue(self.issued.get(), self.now())
    }

    /// A turn to issue a request, if the run has one left: at once in
    /// closed loop, when the pacer releases one in open loop.
    async fn take_turn(&self) -> Option<Turn> {
        let Some(pacer) = &self.pacer else {
            return self.closed_turn();
        };
        let intended = pacer.take().await?;
        if !self.run_going() {
            // The run ended while it waited: the send stays in the backlog
            // (reported as left at the end), for no loop to take.
            pacer.give_back(intended);
            return None;
        }
        Some(Turn::Open { intended })
    }

    /// A closed-loop turn, if the run has one left.
    fn closed_turn(&self) -> Option<Turn> {
        if !self.may_continue() {
            return None;
        }
        let measured = self.tally.borrow().measuring(self.now());
        if measured {
            self.issued.set(self.issued.get() + 1);
        }
        Some(Turn::Closed { measured })
    }

    /// Gives back a turn whose request was never processed.
    fn give_back(&self, turn: Turn) {
        match (turn, &self.pacer) {
            (Turn::Closed { measured: true }, _) => self.issued.set(self.issued.get() - 1),
            (Turn::Open { intended }, Some(p)) => p.give_back(intended),
            _ => {}
        }
    }

    fn error(&self, class: ErrorClass) {
        let now = self.now();
        self.tally.borrow_mut().error(now, class);
    }
}

/// One connection slot: connects, runs its streams until the
/// connection ends or the run does, and replaces a connection that ended
/// while the run goes on (after a backoff when it failed to come up).
async fn connection(w: Rc<Worker>) {
    let mut backoff = Backoff::default();
    let mut ever = false;
    while w.may_continue() {
        let t0 = w.now();
        let opened = tokio::time::timeout(
            w.plan.timeout,
            conn::open(&w.plan.addr, w.tls.as_ref(), Rc::clone(&w.bytes), || {
                w.ctx.clock.now()
            }),
        )
        .await
        .unwrap_or(Err(SetupError::Class(ErrorClass::TimedOut)));
        let up = match opened {
            Ok(up) => up,
            Err(e) => {
                setup_failed(&w, e);
                tokio::time::sleep(Duration::from_nanos(backoff.next_delay())).await;
                continue;
            }
        };
        backoff.reset();
        if !ever {
            ever = true;
            w.established.set(w.established.get() + 1);
        }
        let ended = run_connection(&w, up, t0).await;
        if ended == client::Ended::RunOver || !w.may_continue() {
            continue;
        }
        if ended == client::Ended::ByServer {
            w.tally.borrow_mut().reconnect();
        }
    }
}

/// Count mode has no end time: as the TCP driver does, the worker gives
/// up when no transaction completes for twice --timeout (a server that
/// never answers, or lets no request go), instead of running forever.
async fn stall_watch(w: Rc<Worker>) {
    let limit = 2 * w.plan.timeout.as_nanos() as u64;
    let done = |w: &Worker| {
        let t = w.tally.borrow();
        t.transactions + t.warmup_transactions
    };
    let (mut last, mut since) = (done(&w), w.now());
    while w.run_going() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (now, d) = (w.now(), done(&w));
        if d != last {
            (last, since) = (d, now);
        } else if now - since > limit {
            w.stalled.set(true);
            return;
        }
    }
}

/// Counts a connection that did not come up.
fn setup_failed(w: &Worker, e: SetupError) {
    let class = match e {
        SetupError::Class(c) => c,
        SetupError::Tls(f) => w.tally.borrow_mut().tls_failure(f),
        SetupError::NoH2(alpn) => {
            let why = format!(
                "the server did not choose h2 by ALPN ({})",
                alpn.map_or_else(
                    || "it chose no protocol".to_string(),
                    |p| format!("it chose {}", String::from_utf8_lossy(&p))
                )
            );
            let mut t = w.tally.borrow_mut();
            if t.tls_error.is_none() {
                t.tls_error = Some(why);
            }
            ErrorClass::Tls
        }
    };
    w.error(class);
}

/// Runs a connection that is up until it ends or the run does.
async fn run_connection(w: &Rc<Worker>, up: Up, t0: u64) -> client::Ended {
    let now = w.now();
    {
        let mut t = w.tally.borrow_mut();
        t.connected(now, now - t0);
        if let Some((ns, negotiated)) = up.tls {
            t.tls_handshake(now, ns, negotiated);
        }
    }
    client::drive(w, up.io).await
}

/// What a whole response meant.
fn judge(j: &Judge, status: u16, grpc: Option<Option<u8>>) -> Outcome {
    match j {
        Judge::Http(ok) => Outcome {
            status: Some(status),
            error: (!ok(status)).then_some(ErrorClass::Status(status)),
            ..Outcome::OK
        },
        Judge::Grpc => {
            let error = match (status, grpc) {
                (200, Some(Some(0))) => None,
                (200, Some(Some(code))) => Some(ErrorClass::GrpcStatus(code)),
                // No grpc-status, or not a number: not gRPC.
                (200, _) => Some(ErrorClass::Protocol),
                (s, _) => Some(ErrorClass::Status(s)),
            };
            Outcome {
                // Counted by grpc-status (`status_name` names it).
                status: grpc.flatten().map(u16::from),
                error,
                ..Outcome::OK
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_answers_are_judged_by_their_status() {
        let j = Judge::Grpc;
        assert_eq!(judge(&j, 200, Some(Some(0))).error, None);
        let o = judge(&j, 200, Some(Some(5)));
        assert_eq!(o.error, Some(ErrorClass::GrpcStatus(5)));
        assert_eq!(o.status, Some(5));
        assert_eq!(judge(&j, 200, None).error, Some(ErrorClass::Protocol));
        assert_eq!(judge(&j, 200, Some(None)).error, Some(ErrorClass::Protocol));
        assert_eq!(judge(&j, 503, None).error, Some(ErrorClass::Status(503)));
        let h = Judge::Http(Arc::new(|s| (200..300).contains(&s)));
        assert_eq!(judge(&h, 204, None).error, None);
        assert_eq!(judge(&h, 404, None).error, Some(ErrorClass::Status(404)));
    }
}
