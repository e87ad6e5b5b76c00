//! Runs the TCP workers on their threads: starts them with signals
//! blocked, each on its share of the run (connections, rate, count quota),
//! running the connection state machine of the workload's `ConnMode`
//! (`persistent`, `per_txn`, `datagram`) over the workload's exchange;
//! merges their tallies and accounts the generator's own CPU. The main
//! thread meanwhile watches them (`watch`: progress, per-second intervals,
//! Ctrl-C, the caller's abort, a target nobody can connect to), and what
//! they measured becomes the run's `LoadReport` (`tcp_report`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow};
use indicatif::ProgressBar;
use nix::sys::signal::Signal;

use crate::load::driver::clock::{RunClock, rusage_ns, thread_cpu_ns};
use crate::load::driver::datagram;
use crate::load::driver::per_txn;
use crate::load::driver::persistent;
use crate::load::driver::plan::{Stop, TcpPlan, WorkerCtx};
use crate::load::driver::tally::{self, IntervalRecord, ProgressCounters, WorkerTally};
use crate::load::driver::tcp_report::{Merged, Window, report, responses, udp_rr};
use crate::load::driver::watch::{self, Watched, add_interval, progress_bar, wait_for_start};
use crate::load::driver::{ConnTally, WorkerEnd};
use crate::load::workload::{ConnMode, Exchange};
use crate::report::load::{LoadConfig, LoadReport, StartAtRecord};
use crate::signals::Signals;

/// A finished TCP run.
pub struct TcpOutcome {
    /// The result.
    pub report: LoadReport,
    /// Why the run counts as failed (errors over budget, stalled...).
    pub failure: Option<String>,
    /// Persistent connections: each connection's local address and
    /// responses (empty for a connection per transaction).
    pub connections: Vec<ConnTally>,
    /// `--full-log`: what the workers logged.
    pub full_log: Option<FullLogData>,
}

/// The raw transaction log of a run (`--full-log`), for its CSV file.
pub struct FullLogData {
    /// (send time, latency): ns since the Unix epoch, ns; in each
    /// worker's completion order, workers one after the other.
    pub entries: Vec<(u64, u64)>,
    /// Most entries kept over the run.
    pub limit: u64,
    /// Measured transactions left out of it (a worker's share was full).
    pub not_logged: u64,
}

struct WorkerResult {
    tally: WorkerTally,
    end: WorkerEnd,
    cpu_ns: u64,
    wall_ns: u64,
    /// When it stopped, on the run clock: the end of what it recorded.
    stopped_at: u64,
}

/// Raises the soft open-files limit so `conns` sockets fit (up to the hard
/// limit); says so when they cannot.
fn ensure_fd_room(conns: usize) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = conns as u64 + 64;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading RLIMIT_NOFILE")?;
    if soft >= need {
        return Ok(());
    }
    if hard < need {
        return Err(crate::error::with_code(
            1,
            format!(
                "{conns} connections need {need} file descriptors but the hard limit is {hard} \
                 (raise it with ulimit -Hn or /etc/security/limits.conf)"
            ),
        ));
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, hard).context("raising RLIMIT_NOFILE")?;
    Ok(())
}

/// What each worker thread runs: the driver's connection state machines
/// over a workload's [`Exchange`] (every byte-stream workload), or an
/// engine of its own that fills the same tally (HTTP/2's multiplexed
/// streams, `h2`). Everything around the workers (threads, the watch,
/// intervals, the merge, the report) is this module's either way.
pub trait WorkerLoop: Sync {
    /// Runs worker `ctx`'s share of `plan`, counting into `tally`.
    fn run_worker(
        &self,
        plan: &TcpPlan,
        ctx: &WorkerCtx,
        tally: &mut WorkerTally,
    ) -> std::io::Result<WorkerEnd>;

    /// Request size in bytes, when it is fixed (recorded in the report).
    fn request_len(&self) -> Option<usize>;

    /// Response size in bytes, when it is fixed.
    fn response_len(&self) -> Option<usize>;

    /// True when the report carries per-response counts.
    fn counts_responses(&self) -> bool;

    /// Names of the operations `Outcome::op` indexes.
    fn ops(&self) -> &[String];

    /// How the report names a response status.
    fn status_name(&self, status: u16) -> std::borrow::Cow<'static, str>;

    /// True when every connection opens with an on-connect step
    /// ([`Exchange::on_connect`]).
    fn has_on_connect(&self) -> bool {
        false
    }
}

impl<E: Exchange> WorkerLoop for E {
    fn run_worker(
        &self,
        plan: &TcpPlan,
        ctx: &WorkerCtx,
        t: &mut WorkerTally,
    ) -> std::io::Result<WorkerEnd> {
        match plan.mode {
            ConnMode::Persistent { .. } => persistent::run(plan, self, ctx, t),
            ConnMode::PerTransaction { .. } => per_txn::run(plan, self, ctx, t),
            ConnMode::Datagram { .. } => datagram::run(plan, self, ctx, t),
        }
    }

    fn request_len(&self) -> Option<usize> {
        Exchange::request_len(self)
    }

    fn response_len(&self) -> Option<usize> {
        Exchange::response_len(self)
    }

    fn counts_responses(&self) -> bool {
        Exchange::counts_responses(self)
    }

    fn ops(&self) -> &[String] {
        Exchange::ops(self)
    }

    fn status_name(&self, status: u16) -> std::borrow::Cow<'static, str> {
        Exchange::status_name(self, status)
    }

    fn has_on_connect(&self) -> bool {
        self.on_connect().is_some()
    }
}

/// Runs `plan` with `exchange` and builds the report. `config` is
/// recorded as is.
pub fn run_tcp<E: WorkerLoop>(
    plan: &TcpPlan,
    exchange: &E,
    config: LoadConfig,
    max_errors: u64,
    quiet: bool,
) -> Result<TcpOutcome> {
    ensure_fd_room(plan.max_connections())?;
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    if let Some(at) = &plan.start_at {
        wait_for_start(at, &mut signals, plan.abort.as_deref(), quiet)?;
    }
    // Read back to back: the run clock's zero is this wall-clock instant
    // (to well under a microsecond), which is what maps the full log's
    // send times and the merged timeline to Unix time.
    let started_at = SystemTime::now();
    let clock = RunClock::start();
    let window = Window::of(plan);
    let ctxs = worker_ctxs(plan, clock, window);
    let cpu_before = rusage_ns(libc::RUSAGE_SELF);
    let bar = progress_bar(plan, quiet);
    let (results, watched) = run_workers(plan, exchange, &ctxs, &mut signals, bar.as_ref());
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let cpu_after = rusage_ns(libc::RUSAGE_SELF);
    let mut merged = merge(
        results,
        (
            (cpu_after.0 - cpu_before.0) as f64 / 1e9,
            (cpu_after.1 - cpu_before.1) as f64 / 1e9,
        ),
    )?;
    let full_log = merged.tally.log.take().map(|log| {
        let epoch = crate::report::load::unix_ns(started_at);
        let mut entries = log.entries;
        for e in &mut entries {
            e.0 += epoch;
        }
        FullLogData {
            entries,
            limit: log.cap as u64,
            not_logged: log.not_logged,
        }
    });
    let (mut report, failure) = report(
        plan, config, started_at, window, &merged, watched, max_errors,
    )?;
    report.start_at = plan.start_at.as_ref().map(|at| StartAtRecord {
        requested: at.given.clone(),
        requested_unix_ns: at.unix_ns,
        late_ns: crate::report::load::unix_ns(started_at) as i64 - at.unix_ns as i64,
    });
    if exchange.counts_responses() {
        report.responses = Some(responses(&merged.tally.responses, exchange.ops(), |c| {
            exchange.status_name(c)
        }));
    }
    if plan.mode.datagram() {
        report.udp_rr = Some(udp_rr(&merged, &report));
    }
    let connections = merged
        .ends
        .into_iter()
        .flat_map(|e| e.connections)
        .collect();
    Ok(TcpOutcome {
        report,
        failure,
        connections,
        full_log,
    })
}

/// Each worker's share of the run: connections, rate, count quota.
fn worker_ctxs(plan: &TcpPlan, clock: RunClock, window: Window) -> Vec<WorkerCtx> {
    let stop = Arc::new(AtomicBool::new(false));
    (0..plan.threads)
        .map(|i| WorkerCtx {
            index: i,
            conns: WorkerCtx::share(plan.connections as u64, plan.threads, i) as usize,
            max_conns: WorkerCtx::share(plan.max_connections() as u64, plan.threads, i) as usize,
            rate: plan
                .rate
                .as_ref()
                .map(|r| r.scaled(1.0 / plan.threads as f64)),
            connect_rate: plan.connect_rate.map(|r| r / plan.threads as f64),
            quota: match plan.stop {
                Stop::Count(n) => Some(WorkerCtx::share(n, plan.threads, i)),
                Stop::Duration(_) => None,
            },
            clock,
            measure_from: window.measure_from,
            end: window.end,
            stop: Arc::clone(&stop),
            progress: Arc::new(ProgressCounters::default()),
        })
        .collect()
}

/// Runs one worker thread per context and watches them from this one
/// until all have ended.
fn run_workers<E: WorkerLoop>(
    plan: &TcpPlan,
    exchange: &E,
    ctxs: &[WorkerCtx],
    signals: &mut Signals,
    bar: Option<&ProgressBar>,
) -> (Vec<Result<WorkerResult>>, Watched) {
    let (tx, rx) = mpsc::channel::<IntervalRecord>();
    let mut watched = Watched::default();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = ctxs
            .iter()
            .map(|ctx| {
                let tx = tx.clone();
                scope.spawn(move || worker(plan, exchange, ctx, tx))
            })
            .collect();
        drop(tx);
        watch::watch(plan, ctxs, signals, bar, &rx, &mut watched, || {
            handles.iter().all(|h| h.is_finished())
        });
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a load worker panicked")))
            })
            .collect()
    });
    while let Ok(rec) = rx.try_recv() {
        add_interval(&mut watched.intervals, rec);
    }
    (results, watched)
}

/// How much an open-loop worker thread raises its scheduling priority
/// (nice steps).
pub const OPEN_LOOP_NICE_RAISE: i32 = 5;

/// Raises this (open-loop worker) thread's priority by
/// [`OPEN_LOOP_NICE_RAISE`] nice steps, where allowed (root, or
/// CAP_SYS_NICE; otherwise it stays as it was). An open loop's sends are
/// due at set times, and on a machine whose CPUs are busy a worker at the
/// same nice as the busy work waits a scheduler slice (milliseconds) to
/// wake: the sends go out late and in bursts, the target queues the
/// bursts, and the step is judged on the generator's lateness. A higher
/// priority changes when the worker runs, not how much: it sleeps between
/// sends, so the CPU it takes from the target is the same.
fn raise_priority() {
    // SAFETY: gettid and getpriority/setpriority with integer arguments
    // (a tid names this thread alone).
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            let want = (nice - OPEN_LOOP_NICE_RAISE).max(-20);
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, want);
        }
    }
}

/// One worker thread: its connections, by the workload's mode, until its
/// share of the run is done.
fn worker<E: WorkerLoop>(
    plan: &TcpPlan,
    exchange: &E,
    ctx: &WorkerCtx,
    sink: mpsc::Sender<IntervalRecord>,
) -> Result<WorkerResult> {
    // Timer slack would delay every paced send by up to 50 us and show up
    // as target latency in open loop.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    if ctx.rate.is_some() {
        raise_priority();
    }
    let cpu0 = thread_cpu_ns();
    let t0 = ctx.clock.now();
    let mut t = WorkerTally::new(
        ctx.measure_from,
        plan.rate.is_some(),
        plan.mode.per_transaction(),
        plan.tls.is_some(),
        sink,
        Arc::clone(&ctx.progress),
    );
    t.worker = ctx.index;
    if let Some(limit) = plan.full_log {
        let share = WorkerCtx::share(limit as u64, plan.threads, ctx.index);
        t.log = Some(tally::FullLog::new(share as usize));
    }
    let end = exchange
        .run_worker(plan, ctx, &mut t)
        .with_context(|| format!("load worker {}", ctx.index))?;
    let stopped_at = ctx.clock.now();
    Ok(WorkerResult {
        tally: t,
        end,
        cpu_ns: thread_cpu_ns() - cpu0,
        wall_ns: stopped_at - t0,
        stopped_at,
    })
}

/// Merges the workers' tallies; `cpu_s` is the process's (user, system)
/// CPU over the run.
fn merge(results: Vec<Result<WorkerResult>>, cpu_s: (f64, f64)) -> Result<Merged> {
    let mut parts = Vec::new();
    let mut ends = Vec::new();
    let mut shares = Vec::new();
    let mut stopped_at = 0;
    for r in results {
        let r = r?;
        stopped_at = stopped_at.max(r.stopped_at);
        shares.push(r.cpu_ns as f64 / r.wall_ns.max(1) as f64);
        parts.push(r.tally);
        ends.push(r.end);
    }
    let tally = tally::merge(parts).ok_or_else(|| anyhow!("no load worker ran"))?;
    Ok(Merged {
        tally,
        ends,
        shares,
        stopped_at,
        cpu_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::load::workload::ErrorClass;

    /// A framed exchange unlike the raw one: each response is a line of
    /// varying length (`ok:<request>\n`), recognised by its newline.
    struct LineExchange;

    impl Exchange for LineExchange {
        type Cursor = ();
        fn request_len(&self) -> Option<usize> {
            None
        }
        fn response_len(&self) -> Option<usize> {
            None
        }
        fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
            out.extend_from_slice(format!("req {seq}\n").as_bytes());
        }
        fn parse(&self, _: &mut (), data: &[u8], _seq: u64) -> crate::load::workload::Parsed {
            use crate::load::workload::Parsed;
            match data.iter().position(|b| *b == b'\n') {
                Some(i) => Parsed::Complete(i + 1, crate::load::workload::Outcome::OK),
                None => Parsed::Partial,
            }
        }
        fn on_eof(&self, _: &()) -> ErrorClass {
            ErrorClass::Closed
        }
    }

    /// A line server on loopback: answers each line with `ok:<line>`,
    /// written in two pieces so responses also arrive split.
    fn line_server() -> std::net::SocketAddr {
        use std::io::{BufRead, BufReader, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                std::thread::spawn(move || {
                    s.set_nodelay(true).unwrap();
                    let mut w = s.try_clone().unwrap();
                    for line in BufReader::new(s).lines() {
                        let Ok(line) = line else { return };
                        if w.write_all(b"ok:").is_err()
                            || w.write_all(format!("{line}\n").as_bytes()).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn plan(addr: std::net::SocketAddr, mode: ConnMode, n: u64) -> TcpPlan {
        TcpPlan {
            workload: "line",
            mode,
            addr: addr.into(),
            tls: None,
            target: None,
            connections: 3,
            threads: 2,
            stop: Stop::Count(n),
            warmup: Duration::ZERO,
            rate: None,
            timeout: Duration::from_secs(5),
            connect_rate: None,
            max_conns: None,
            sources: Vec::new(),
            abort: None,
            start_at: None,
            full_log: None,
        }
    }

    #[test]
    fn a_framed_exchange_runs_on_both_connection_modes() {
        let addr = line_server();
        for mode in [
            ConnMode::Persistent { pipeline: 3 },
            ConnMode::PerTransaction { close_rst: false },
        ] {
            let p = plan(addr, mode, 300);
            let out = run_tcp(&p, &LineExchange, LoadConfig::default(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 300, "{mode:?}");
            assert_eq!(out.report.errors.total, 0, "{mode:?}");
            assert_eq!(out.report.workload, "line");
            assert_eq!(
                out.report.connect_latency.is_some(),
                mode.per_transaction(),
                "{mode:?}"
            );
        }
    }

    /// The line exchange, with outcomes read from the answered sequence
    /// number: every 7th request fails with a 404, every 5th response
    /// closes the connection, requests alternate between two operations,
    /// every 3rd is a hit.
    struct OutcomeExchange {
        ops: Vec<String>,
    }

    impl Exchange for OutcomeExchange {
        type Cursor = Vec<u8>;
        fn request_len(&self) -> Option<usize> {
            None
        }
        fn response_len(&self) -> Option<usize> {
            None
        }
        fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
            out.extend_from_slice(format!("req {seq}\n").as_bytes());
        }
        fn parse(
            &self,
            line: &mut Vec<u8>,
            data: &[u8],
            seq: u64,
        ) -> crate::load::workload::Parsed {
            use crate::load::workload::{Outcome, Parsed};
            let Some(i) = data.iter().position(|b| *b == b'\n') else {
                line.extend_from_slice(data);
                return Parsed::Partial;
            };
            line.extend_from_slice(&data[..i]);
            // The answer must be to the request awaited: resent requests
            // keep their place.
            if *line != format!("ok:req {seq}").into_bytes() {
                return Parsed::Error(ErrorClass::Mismatch);
            }
            Parsed::Complete(
                i + 1,
                Outcome {
                    status: Some(if seq % 7 == 3 { 404 } else { 200 }),
                    op: (seq % 2) as u16,
                    hit: Some(seq % 3 == 0),
                    error: (seq % 7 == 3).then_some(ErrorClass::Status(404)),
                    close: seq % 5 == 4,
                },
            )
        }
        fn on_eof(&self, _: &Vec<u8>) -> ErrorClass {
            ErrorClass::Closed
        }
        fn ops(&self) -> &[String] {
            &self.ops
        }
        fn counts_responses(&self) -> bool {
            true
        }
    }

    #[test]
    fn outcomes_are_counted_and_a_server_close_reopens_without_loss() {
        let addr = line_server();
        let ex = OutcomeExchange {
            ops: vec!["A".into(), "B".into()],
        };
        for mode in [
            ConnMode::Persistent { pipeline: 3 },
            ConnMode::PerTransaction { close_rst: false },
        ] {
            let p = plan(addr, mode, 300);
            let out = run_tcp(&p, &ex, LoadConfig::default(), u64::MAX, true).unwrap();
            let rep = &out.report;
            let r = rep.responses.as_ref().expect("responses counted");
            let failed = rep.errors.by_class.get("status_404").copied().unwrap_or(0);
            assert!(failed > 0, "{mode:?}: {:?}", rep.errors);
            assert_eq!(rep.errors.total, failed, "{mode:?}: {:?}", rep.errors);
            assert_eq!(r.answered, rep.transactions + failed, "{mode:?}");
            assert_eq!(r.by_status["404"], failed, "{mode:?}");
            assert_eq!(r.by_status["200"], rep.transactions, "{mode:?}");
            let by_cmd: u64 = r.by_command.values().map(|c| c.answered).sum();
            assert_eq!(by_cmd, r.answered, "{mode:?}");
            assert_eq!(r.by_command["A"].errors + r.by_command["B"].errors, failed);
            assert_eq!(r.hits.unwrap() + r.misses.unwrap(), r.answered, "{mode:?}");
            assert_eq!(rep.errors.unanswered_at_end, 0, "{mode:?}");
            if mode.per_transaction() {
                assert_eq!(r.reconnects, 0);
            } else {
                assert!(r.reconnects >= 300 / 5 - 1, "{mode:?}: {}", r.reconnects);
                // The last close may come when nothing is left to send.
                let c = rep.connections.connects;
                assert!(c <= r.reconnects + 3 && c + 3 >= r.reconnects + 3, "{c}");
            }
        }
    }

    /// A TLS line server on loopback (rustls, a self-signed certificate for
    /// `localhost` made now): answers each line with `ok:<line>`, padded
    /// to 300 KB (several TLS records, more than a read) for every 10th request, so
    /// responses span records and reads. Returns its address and the
    /// certificate (PEM).
    fn tls_line_server() -> (std::net::SocketAddr, String) {
        use std::io::{BufRead, BufReader, Write};
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![ck.cert.der().clone()], key)
                .unwrap(),
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let config = Arc::clone(&config);
                std::thread::spawn(move || {
                    s.set_nodelay(true).unwrap();
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut r = BufReader::new(rustls::StreamOwned::new(conn, s));
                    let mut line = String::new();
                    loop {
                        line.clear();
                        // A client that refused the certificate ends here.
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let req = line.trim_end();
                        let seq: u64 = req
                            .strip_prefix("req ")
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(1);
                        let pad = if seq % 10 == 0 { 300_000 } else { 0 };
                        let resp = format!("ok:{req}{}\n", "x".repeat(pad));
                        let w = r.get_mut();
                        if w.write_all(resp.as_bytes())
                            .and_then(|_| w.flush())
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (addr, ck.cert.pem())
    }

    fn tls_plan(
        addr: std::net::SocketAddr,
        mode: ConnMode,
        n: u64,
        spec: crate::load::driver::tls::TlsSpec,
    ) -> TcpPlan {
        TcpPlan {
            tls: Some(spec.client().unwrap()),
            ..plan(addr, mode, n)
        }
    }

    fn spec(
        insecure: bool,
        ca_file: Option<std::path::PathBuf>,
    ) -> crate::load::driver::tls::TlsSpec {
        crate::load::driver::tls::TlsSpec {
            server_name: "localhost".into(),
            insecure,
            ca_file,
        }
    }

    fn tls_config() -> LoadConfig {
        LoadConfig {
            tls: Some(crate::report::load::TlsConfig::default()),
            ..LoadConfig::default()
        }
    }

    const MODES: [ConnMode; 2] = [
        ConnMode::Persistent { pipeline: 3 },
        ConnMode::PerTransaction { close_rst: false },
    ];

    #[test]
    fn tls_runs_on_both_connection_modes_and_times_its_handshakes() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            let p = tls_plan(addr, mode, 300, spec(true, None));
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(rep.transactions, 300, "{mode:?}");
            assert_eq!(rep.errors.total, 0, "{mode:?}");
            // Every 10th response is 300 KB: the bytes counted are
            // the records', more than the plaintext.
            assert!(
                rep.bytes.received > 20 * 300_000,
                "{mode:?}: {}",
                rep.bytes.received
            );
            let hs = rep
                .tls_handshake_latency
                .as_ref()
                .expect("handshakes timed");
            // One handshake per connection: each transaction's own with a
            // connection per transaction.
            assert_eq!(hs.summary.count, rep.connections.connects, "{mode:?}");
            if mode.per_transaction() {
                assert!(hs.summary.count >= 300, "{mode:?}: {}", hs.summary.count);
                let connect = rep.connect_latency.as_ref().unwrap();
                assert_eq!(connect.summary.count, hs.summary.count);
            } else {
                assert_eq!(hs.summary.count, 3, "{mode:?}");
            }
            let tls = rep.config.tls.as_ref().unwrap();
            assert_eq!(tls.protocol_version.as_deref(), Some("TLSv1_3"));
            assert!(tls.cipher_suite.as_deref().unwrap().starts_with("TLS13_"));
            let text = crate::report::load_text::render(rep);
            assert!(text.contains("\ntls           TLSv1_3, TLS13_"), "{text}");
            assert!(text.contains("\ntls handshake min "), "{text}");
        }
    }

    #[test]
    fn tls_runs_open_loop_and_drains_a_duration_run() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            // Open loop: sends wait for a connection that is up (its
            // handshake done), none is lost.
            let p = TcpPlan {
                rate: Some(crate::load::schedule::rate_plan::RatePlan::Constant(2000.0)),
                ..tls_plan(addr, mode, 200, spec(true, None))
            };
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 200, "{mode:?}");
            // A duration run ends with the drain's orderly closes.
            let p = TcpPlan {
                stop: Stop::Duration(Duration::from_millis(300)),
                ..tls_plan(addr, mode, 0, spec(true, None))
            };
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert!(rep.transactions > 0, "{mode:?}");
            assert_eq!(rep.errors.total, 0, "{mode:?}: {:?}", rep.errors);
            assert_eq!(rep.errors.unanswered_at_end, 0, "{mode:?}");
        }
    }

    #[test]
    fn an_untrusted_certificate_fails_the_run_with_tls_errors() {
        let (addr, _) = tls_line_server();
        for mode in MODES {
            let p = tls_plan(addr, mode, 100, spec(false, None));
            let t0 = std::time::Instant::now();
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            let rep = &out.report;
            let why = out.failure.expect("the run fails");
            assert!(why.contains("tls_error"), "{mode:?}: {why}");
            assert!(why.contains("UnknownIssuer"), "{mode:?}: {why}");
            assert!(t0.elapsed() < Duration::from_secs(4), "{mode:?}: no hang");
            assert_eq!(rep.transactions, 0);
            assert_eq!(rep.connections.established, 0);
            assert!(rep.errors.by_class["tls_error"] > 0, "{:?}", rep.errors);
            assert_eq!(rep.errors.total, rep.errors.by_class["tls_error"]);
            assert!(rep.tls_handshake_latency.is_none());
        }
    }

    #[test]
    fn a_ca_file_makes_the_test_certificate_trusted() {
        let (addr, pem) = tls_line_server();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, pem).unwrap();
        for mode in MODES {
            let p = tls_plan(addr, mode, 50, spec(false, Some(ca.clone())));
            let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
            assert!(out.failure.is_none(), "{mode:?}: {:?}", out.failure);
            assert_eq!(out.report.transactions, 50, "{mode:?}");
        }
        // The same name with a certificate for another one is refused.
        let other = crate::load::driver::tls::TlsSpec {
            server_name: "example.com".into(),
            ..spec(false, Some(ca))
        };
        let p = TcpPlan {
            tls: Some(other.client().unwrap()),
            ..plan(addr, MODES[0], 50)
        };
        let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
        let why = out.failure.expect("a name mismatch fails");
        assert!(why.contains("not valid for name"), "{why}");
    }

    #[test]
    fn a_peer_that_does_not_speak_tls_is_a_tls_error() {
        use std::io::{Read, Write};
        // Answers the ClientHello as a plain HTTP server would, or closes
        // at once: both end the handshake, neither hangs it.
        for reply in [&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], b""] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                for s in l.incoming() {
                    let Ok(mut s) = s else { return };
                    // Read the ClientHello first: closing on unread bytes
                    // would reset the connection instead.
                    let _ = s.read(&mut [0u8; 4096]);
                    let _ = s.write_all(reply);
                }
            });
            for mode in MODES {
                let p = tls_plan(addr, mode, 10, spec(true, None));
                let out = run_tcp(&p, &LineExchange, tls_config(), 0, true).unwrap();
                assert!(out.failure.is_some(), "{mode:?}");
                let e = &out.report.errors;
                assert!(e.by_class.get("tls_error").is_some_and(|n| *n > 0), "{e:?}");
            }
        }
    }
}
