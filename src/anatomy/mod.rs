//! Request anatomy: each request's time at the server, seen from the
//! socket layer and split into queue wait, CPU wait, service and send
//! (src/bpf/anatomy.bpf.c says how turns are delimited; docs/anatomy.md
//! says what the parts mean and where the picture stops).
//!
//! It hooks no syscall: only the socket tracepoints (sk_data_ready,
//! sock_recv_length, sock_send_length, inet_sock_set_state) and, in tree
//! scope, sched_process_fork, so neither the target nor any other process
//! pays the syscall hooks' slow path. CPU wait is the kernel's per-thread
//! run-queue sum (sched_info, CONFIG_SCHED_INFO), read at those hooks: no
//! hook runs on the machine's context switches. It runs with the syscall
//! tracer or alone.
//!
//! [`Session::start`] loads and attaches the programs on a thread of their
//! own, registers the target's processes and served ports, and opens the
//! window; [`Session::finish`] closes it and returns what was [`Recorded`];
//! [`report`] turns that into the artifact's section.
//!
//! Layout: `abi` (the skeleton), `bpf` (load, attach, read), `counts` (the
//! kernel's figures as Rust values), `ports` (the ports a process serves),
//! `summary` (percentiles, compositions, cost: pure).

mod abi;
pub mod bpf;
pub mod counts;
pub mod ends;
pub mod h2names;
pub mod ports;
pub mod service_cost;
pub mod summary;
pub mod tls;

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

pub use self::counts::{Counts, NameCounts, Part, PortTurns, Transport, Wire};
pub use self::ports::{ServedPort, ServedUnix, served_ports, served_unix};
use crate::probe::ScopeFilter;
use crate::recorder::Recorder;
use crate::report::anatomy::{AnatomyInterval, AnatomyReport, AnatomySampling};

/// Ports that keep their own statistics; turns on further ones are added
/// to the totals only.
pub const DEFAULT_MAX_PORTS: u32 = 64;

/// Request names (endpoints) each port keeps by default; the rest of its
/// requests are summed as "(other)".
pub const DEFAULT_MAX_ENDPOINTS: u32 = 64;

/// The most `--max-endpoints` takes (the kernel's names map is bounded
/// whatever is asked: src/anatomy/bpf.rs).
pub const MAX_ENDPOINTS_LIMIT: u32 = 4096;

/// Where the tail of the requests begins (`--tail`): at a percentile of
/// the window's server time, or at a given server time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailSpec {
    /// A percentile in hundredths of a percent: `p99` is 9900.
    Percentile(u32),
    /// A server time, ns.
    At(u64),
}

impl Default for TailSpec {
    fn default() -> Self {
        TailSpec::Percentile(9900)
    }
}

impl TailSpec {
    /// Parses `p99`, `p99.9`, `p90` (a percentile of the window's server
    /// time) or a duration (`5ms`, `250us`).
    pub fn parse(s: &str) -> std::result::Result<TailSpec, String> {
        let t = s.trim();
        if let Some(p) = t.strip_prefix('p').or_else(|| t.strip_prefix('P')) {
            let v: f64 = p
                .parse()
                .map_err(|_| format!("--tail {s:?}: a percentile is p50..p99.99 (e.g. p99)"))?;
            if !(50.0..=99.99).contains(&v) {
                return Err(format!(
                    "--tail {s:?}: the percentile must be between p50 and p99.99"
                ));
            }
            return Ok(TailSpec::Percentile((v * 100.0).round() as u32));
        }
        let d = humantime::parse_duration(t)
            .map_err(|e| format!("--tail {s:?}: a percentile (p99) or a server time (5ms): {e}"))?;
        if d.is_zero() || d > Duration::from_secs(3600) {
            return Err(format!(
                "--tail {s:?}: the server time must be above 0 and at most 1h"
            ));
        }
        Ok(TailSpec::At(d.as_nanos() as u64))
    }

    /// How the report names it: `p99`, `p99.9`, or `5ms`.
    pub fn text(&self) -> String {
        match self {
            TailSpec::Percentile(h) => format!("p{}", f64::from(*h) / 100.0),
            TailSpec::At(ns) => crate::report::units::human_ns(*ns),
        }
    }

    /// The server time its ends are written from while the window runs
    /// (`Programs::set_tail_floor`), given the window's histogram so far:
    /// for p99, the p98 so far (the final threshold may come out below the
    /// running one; twice the tail's share bounds the records however
    /// tight the distribution), or the given time.
    fn floor(&self, so_far: &Counts) -> Option<u64> {
        match self {
            TailSpec::At(ns) => Some(*ns),
            TailSpec::Percentile(_) => {
                let q = self.quantile()?;
                so_far
                    .total()
                    .histogram(Part::Server)
                    .quantile((2.0 * q - 1.0).max(0.0))
                    .map(|v| v.max(1))
            }
        }
    }

    /// The quantile (0..1) of a percentile; None for a given time.
    pub fn quantile(&self) -> Option<f64> {
        match self {
            TailSpec::Percentile(h) => Some(f64::from(*h) / 10_000.0),
            TailSpec::At(_) => None,
        }
    }
}

/// How a window reads requests from the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// Request names kept per port (`--max-endpoints`).
    pub max_endpoints: u32,
    /// Read TLS plaintext through uprobes on OpenSSL (`--tls-plaintext`).
    pub tls_plaintext: bool,
}

impl Default for Reading {
    fn default() -> Self {
        Reading {
            max_endpoints: DEFAULT_MAX_ENDPOINTS,
            tls_plaintext: false,
        }
    }
}

/// What to follow.
#[derive(Clone, Debug)]
pub struct AnatomyConfig {
    /// Which tasks are the target's.
    pub scope: ScopeFilter,
    /// Tree scope: the processes at the roots of the target's trees (their
    /// descendants now and later are the target's too).
    pub roots: Vec<i32>,
    /// Other scopes: the processes in it now, whose served ports are
    /// followed (a port bound later is learned when it starts listening or,
    /// for UDP, at its first read).
    pub members: Vec<i32>,
    /// Ports with statistics of their own.
    pub max_ports: u32,
    /// Request names kept per port (`--max-endpoints`).
    pub max_endpoints: u32,
    /// Read TLS connections' plaintext through uprobes on the target's
    /// OpenSSL (`--tls-plaintext`; src/bpf/tls.h).
    pub tls_plaintext: bool,
    /// Keep each serving thread's turn for the stack sampler and record
    /// the ends of the turns it sampled, and of those at or above the
    /// tail's threshold ([`Session::threads_map`]), so that samples are
    /// tied to requests (None: not tied).
    pub tie_samples: Option<TailSpec>,
    /// Bytes of the ring buffer of HTTP/2 records and turn ends
    /// ([`bpf::H2_RING_BYTES`], or [`bpf::AGENT_H2_RING_BYTES`] for a node
    /// agent).
    pub ring_bytes: u32,
    /// Length of the intervals the window is cut into.
    pub interval: Duration,
    /// Where the window's counts so far are published, at every interval
    /// and at the end (for `--metrics`), with what the programs cost each
    /// process they ran in ([`service_cost`]).
    pub latest: Option<Latest>,
    /// Command names the per-process cost keeps apart (`--max-series`).
    pub max_services: u32,
    /// Other programs' run time per process (the agent's stack sampler),
    /// put into the per-process cost at each of its readings.
    pub other_runs: Option<service_cost::OtherRuns>,
    /// Sample the window instead of following all of it (None: all).
    pub duty: Option<Duty>,
    /// Where each interval's end is sent as it passes (for `trace
    /// --requests-only --interval`): the seconds since the window opened
    /// and the window's counts so far. Sent with `try_send`, so a reader
    /// that falls behind never holds the anatomy up; it loses nothing but
    /// the split between intervals, the counts being cumulative.
    pub progress: Option<mpsc::SyncSender<(f64, Counts)>>,
}

/// A sampled window: the per-request hooks are attached `on` of every
/// `period` (from the window's start) and detached the rest, when they
/// cost nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Duty {
    /// How long each sample lasts.
    pub on: Duration,
    /// How often one starts.
    pub period: Duration,
}

impl Duty {
    /// Parses `ON/PERIOD` (e.g. `1s/10s`, `200ms/1s`).
    pub fn parse(s: &str) -> std::result::Result<Duty, String> {
        let (on, period) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected ON/PERIOD, e.g. 1s/10s"))?;
        let dur =
            |t: &str| humantime::parse_duration(t.trim()).map_err(|e| format!("{s:?}: {t:?}: {e}"));
        let (on, period) = (dur(on)?, dur(period)?);
        if on < Duration::from_millis(100) {
            return Err(format!("{s:?}: each sample must last at least 100ms"));
        }
        if on >= period {
            return Err(format!(
                "{s:?}: the sample must be shorter than its period (to follow everything, leave \
                 --requests-duty out)"
            ));
        }
        Ok(Duty { on, period })
    }

    /// Is the window sampling at `el` from its start?
    fn on_at(&self, el: Duration) -> bool {
        el.as_nanos() % self.period.as_nanos() < self.on.as_nanos()
    }
}

/// The window's counts so far (everything since it opened, so every
/// figure only grows): None until the window is open. An exporter reads
/// it; the session replaces it at every interval and when it closes.
pub type Latest = Arc<Mutex<Option<Counts>>>;

/// A fresh, empty [`Latest`].
pub fn latest() -> Latest {
    Arc::new(Mutex::new(None))
}

/// The kernel's run-time accounting of the programs, held in slices of its
/// own: what it counted over them (ns, runs; None until a slice ended
/// with figures, or when the kernel refuses the accounting).
#[derive(Default)]
struct KernelSlices {
    on: bool,
    /// The figures when the slice under way began.
    start: Option<(u64, u64)>,
    sliced: Option<(u64, u64)>,
}

impl KernelSlices {
    /// Holds the accounting while `in_slice`, lets it go after, adding
    /// what each slice counted.
    fn step(&mut self, in_slice: bool, progs: &mut bpf::Programs) {
        if in_slice == self.on {
            return;
        }
        self.on = in_slice;
        if in_slice {
            self.start = if progs.set_kernel_stats(true) {
                progs.kernel_run_time()
            } else {
                None
            };
            return;
        }
        if let (Some((n0, c0)), Some((n1, c1))) = (self.start.take(), progs.kernel_run_time()) {
            let k = self.sliced.get_or_insert((0, 0));
            k.0 += n1.saturating_sub(n0);
            k.1 += c1.saturating_sub(c0);
        }
        progs.set_kernel_stats(false);
    }
}

/// The time the per-request hooks were on, ns: the samples that ended
/// (`on_total`) and, while `sampling`, the one under way for `current`.
fn observed(on_total: Duration, sampling: bool, current: Duration) -> u64 {
    (on_total + if sampling { current } else { Duration::ZERO }).as_nanos() as u64
}

/// Publishes `counts`, with a row of no turns for each served port known
/// when the window opened and not yet in them (the kernel keeps a port's
/// figures from its first turn on), so an idle port reads 0 rather than
/// nothing; at most `max_ports` rows, as the kernel keeps.
fn publish(to: Option<&Latest>, mut counts: Counts, served: &[ServedPort], max_ports: u32) {
    let Some(l) = to else {
        return;
    };
    for p in served {
        if counts.ports.len() >= max_ports as usize {
            break;
        }
        if !counts
            .ports
            .iter()
            .any(|c| c.port == p.port && c.transport == p.transport)
        {
            counts.ports.push(PortTurns::empty(p.port, p.transport));
        }
    }
    counts.ports.sort_by_key(|p| (p.transport, p.port));
    counts.ports.dedup_by_key(|p| (p.transport, p.port));
    if let Ok(mut g) = l.lock() {
        *g = Some(counts);
    }
}

/// What a window recorded.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Everything that accumulated in the window.
    pub window: Counts,
    /// The window in intervals.
    pub intervals: Vec<AnatomyInterval>,
    /// Its length, ns.
    pub window_ns: u64,
    /// The served ports known when it opened (Unix listeners included,
    /// numbered as `unix` lists them).
    pub ports: Vec<ServedPort>,
    /// The names of the Unix listeners followed, by number.
    pub unix: Vec<String>,
    /// A sampled window: its duty, and how long it sampled in all, ns.
    pub sampled: Option<(Duty, u64)>,
    /// Request names kept per port.
    pub max_endpoints: u32,
    /// `--tls-plaintext`: the OpenSSL libraries probed (None: not asked).
    pub tls_libraries: Option<Vec<String>>,
    /// Samples tied to requests: the ends of the turns a sample fell in
    /// (None: not tied).
    pub turn_ends: Option<ends::TurnEnds>,
}

/// The report's section of a recorded window; `target_cpu_ns` (the
/// target's CPU time over the window, when known) gives the cost's share.
pub fn report(rec: &Recorded, target_cpu_ns: Option<u64>) -> AnatomyReport {
    let ncpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cost = summary::cost(&rec.window.progs, rec.window_ns, ncpus, target_cpu_ns);
    let mut r = summary::report(&rec.window, rec.intervals.clone(), cost);
    for p in &mut r.ports {
        if p.transport == Transport::Unix.name() {
            p.socket = rec.unix.get(usize::from(p.port)).cloned();
        }
    }
    for e in &mut r.endpoints {
        if e.transport == Transport::Unix.name() {
            e.socket = rec.unix.get(usize::from(e.port)).cloned();
        }
    }
    if !r.endpoints.is_empty() {
        r.max_endpoints = Some(rec.max_endpoints);
    }
    if let Some(libs) = &rec.tls_libraries {
        r.tls.plaintext_asked = true;
        r.tls.libraries = libs.clone();
    }
    r.window_s = rec.window_ns as f64 / 1e9;
    if r.window_s > 0.0 {
        for e in &mut r.endpoints {
            e.rate_per_s = e.count as f64 / r.window_s;
        }
    }
    r.sampled = rec.sampled.map(|(d, on_ns)| AnatomySampling {
        on_s: d.on.as_secs_f64(),
        period_s: d.period.as_secs_f64(),
        sampled_s: on_ns as f64 / 1e9,
        window_s: rec.window_ns as f64 / 1e9,
    });
    r
}

/// A running anatomy window, on its own thread (it owns the BPF object;
/// the links close with it, and with the process however it ends).
pub struct Session {
    recorder: Recorder<Recorded>,
    threads: Option<Arc<OwnedFd>>,
}

/// The programs time themselves this long in every [`COST_PERIOD`].
const COST_SLICE: Duration = Duration::from_millis(50);
const COST_PERIOD: Duration = Duration::from_millis(500);
/// How often the per-process cost is read (a /proc read per process the
/// programs ran in).
const SERVICE_COST_EVERY: Duration = Duration::from_secs(5);
const TICK: Duration = Duration::from_millis(10);

impl Session {
    /// Loads and attaches the programs, registers the target, and opens
    /// the window; returns once it is open (or with why it could not).
    pub fn start(cfg: AnatomyConfig) -> Result<Session> {
        let slot: Arc<Mutex<Option<OwnedFd>>> = Arc::default();
        let put = Arc::clone(&slot);
        let recorder = Recorder::start("anatomy", "request anatomy", move |stop, ready| {
            run(cfg, stop, ready, &put)
        })?;
        let threads = slot
            .lock()
            .map_err(|_| anyhow!("the anatomy's thread map was poisoned"))?
            .take()
            .map(Arc::new);
        Ok(Session { recorder, threads })
    }

    /// With `tie_samples`: the anatomy's per-thread map, which the stack
    /// sampler reads each serving thread's turn from
    /// (`stacks::StacksConfig::tie`).
    pub fn threads_map(&self) -> Option<Arc<OwnedFd>> {
        self.threads.clone()
    }

    /// Whether the anatomy's thread ended on its own (it failed).
    pub fn ended(&self) -> bool {
        self.recorder.ended()
    }

    /// Closes the window and returns what it recorded.
    pub fn finish(self) -> Result<Recorded> {
        self.recorder.finish()
    }
}

/// Loads, registers, attaches, reads the baseline and opens the window.
fn open<'obj>(
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    cfg: &AnatomyConfig,
) -> Result<(bpf::Programs<'obj>, Served, Counts, u64)> {
    let mut progs = bpf::Programs::load(
        storage,
        &cfg.scope,
        cfg.max_ports,
        cfg.max_endpoints,
        cfg.tls_plaintext,
        cfg.tie_samples.is_some(),
        cfg.ring_bytes,
    )?;
    let pids = match cfg.scope {
        ScopeFilter::Tree => {
            let pids = crate::procfs::tree_pids(&cfg.roots);
            progs.add_tree(&pids)?;
            pids
        }
        _ => cfg.members.clone(),
    };
    let tls_libraries = if cfg.tls_plaintext {
        let libs = tls::openssl_libraries(&pids);
        if libs.is_empty() {
            bail!(
                "--tls-plaintext: no OpenSSL library (libssl) is mapped by the target's processes \
                 or found in the system's library directories: its TLS plaintext cannot be read"
            );
        }
        let probed = progs.attach_tls(&libs)?;
        crate::progress::say!(
            "sockscope: --tls-plaintext: reading TLS plaintext through uprobes on OpenSSL's \
             SSL_read and SSL_write in {}",
            probed
                .iter()
                .map(|p| crate::text::escape(p).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Some(probed)
    } else {
        None
    };
    // Attached before the ports are read: a listener opened between the
    // two is registered by the LISTEN hook.
    progs.attach()?;
    let mut ports = served_ports(&pids);
    progs.add_ports(&ports)?;
    // Unix listeners: those whose address the programs found (one closed
    // since it was listed is not followed).
    let unix = served_unix(&pids, abi::UNIX_MAX);
    let registered: Vec<(u64, ServedPort)> = unix.iter().map(|u| (u.inode, u.served)).collect();
    let found = progs.add_unix(&registered)?;
    let names = unix.iter().map(|u| u.name.clone()).collect();
    ports.extend(
        unix.iter()
            .filter(|u| found.contains(&u.served.port))
            .map(|u| u.served),
    );
    let before = progs.read()?;
    let start = progs.open_window()?;
    Ok((
        progs,
        Served {
            ports,
            unix: names,
            tls_libraries,
        },
        before,
        start,
    ))
}

/// What a window follows: the served ports (Unix listeners included),
/// the Unix listeners' names by number, and the OpenSSL libraries probed.
struct Served {
    ports: Vec<ServedPort>,
    unix: Vec<String>,
    tls_libraries: Option<Vec<String>>,
}

fn run(
    cfg: AnatomyConfig,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<()>>,
    threads: &Mutex<Option<OwnedFd>>,
) -> Result<Recorded> {
    let mut storage = MaybeUninit::uninit();
    let (
        mut progs,
        Served {
            ports,
            unix,
            tls_libraries,
        },
        before,
        start,
    ) = match open(&mut storage, &cfg).and_then(|v| {
        if cfg.tie_samples.is_some() {
            let fd = v.0.threads_map()?;
            if let Ok(mut g) = threads.lock() {
                *g = Some(fd);
            }
        }
        Ok(v)
    }) {
        Ok(v) => {
            let _ = ready.send(Ok(()));
            v
        }
        Err(e) => {
            let msg = format!("{e:#}");
            let _ = ready.send(Err(e));
            return Err(anyhow!(msg));
        }
    };
    publish(cfg.latest.as_ref(), Counts::empty(), &ports, cfg.max_ports);
    let t0 = Instant::now();
    let mut intervals = Vec::new();
    let mut last = before.clone();
    let mut next_interval = cfg.interval;
    let mut cost_on = false;
    // The per-process cost, when the counts are published.
    let mut services = cfg.latest.as_ref().map(|_| {
        let s = service_cost::ServiceCosts::new(
            cfg.max_services as usize,
            crate::procfs::clock_ticks(),
        );
        match cfg.duty {
            Some(d) => s.sampled(d.period),
            None => s,
        }
    });
    let mut next_services = Duration::ZERO;
    let mut kernel = KernelSlices::default();
    // Sampled windows: whether the per-request hooks are on, since when,
    // and the time they were on in all.
    let (mut sampling, mut since, mut on_total) = (true, Duration::ZERO, Duration::ZERO);
    // The tail's floor: from the start for a given time; from the first
    // figures, then every second, for a percentile.
    let mut next_floor = Duration::from_millis(200);
    if let Some(TailSpec::At(ns)) = cfg.tie_samples {
        progs.set_tail_floor(ns)?;
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        progs.poll()?;
        let el = t0.elapsed();
        if let Some(spec @ TailSpec::Percentile(_)) = cfg.tie_samples
            && el >= next_floor
        {
            next_floor = el + Duration::from_secs(1);
            if let Some(ns) = spec.floor(&progs.read()?.since(&before)) {
                progs.set_tail_floor(ns)?;
            }
        }
        if let Some(d) = cfg.duty {
            let want = d.on_at(el);
            if want != sampling {
                if want {
                    progs.resume()?;
                } else {
                    progs.pause()?;
                    on_total += el - since;
                }
                sampling = want;
                since = el;
            }
        }
        let in_slice = el.as_nanos() % COST_PERIOD.as_nanos() < COST_SLICE.as_nanos();
        if in_slice != cost_on {
            cost_on = in_slice;
            progs.set_cost(cost_on)?;
        }
        // The kernel's accounting in slices of its own, where the programs
        // do not time themselves, and only where the per-process cost is
        // read: it costs every program on the machine while held.
        let in_kernel_slice = services.is_some()
            && (el.as_nanos() + COST_PERIOD.as_nanos() / 2) % COST_PERIOD.as_nanos()
                < COST_SLICE.as_nanos();
        kernel.step(in_kernel_slice, &mut progs);
        if let Some(s) = services.as_mut()
            && el >= next_services
        {
            next_services = el + SERVICE_COST_EVERY;
            let runs = service_cost::Runs {
                all: progs.runs_total()?,
                kernel: kernel.sliced,
            };
            if let Some(o) = &cfg.other_runs {
                s.add_other(std::mem::take(
                    &mut *o.lock().unwrap_or_else(|e| e.into_inner()),
                ));
            }
            s.read(
                el,
                runs,
                &progs.service_costs()?,
                service_cost::ProcStat::read,
            );
        }
        if !cfg.interval.is_zero() && el >= next_interval {
            next_interval += cfg.interval;
            let now = progs.read()?;
            intervals.push(summary::interval_row(el.as_secs_f64(), &now.since(&last)));
            let so_far = now.since(&before);
            if let Some(tx) = &cfg.progress {
                let _ = tx.try_send((el.as_secs_f64(), so_far.clone()));
            }
            let mut so_far = so_far;
            if let Some(s) = services.as_ref() {
                so_far.services = s.costs();
            }
            so_far.observed_ns = observed(on_total, sampling, el - since);
            publish(cfg.latest.as_ref(), so_far, &ports, cfg.max_ports);
            last = now;
        }
    }
    let window_ns = crate::clock::monotonic_ns().saturating_sub(start);
    if sampling {
        on_total += t0.elapsed() - since;
    }
    progs.close_window()?;
    // The ends the closing walk wrote too.
    progs.poll()?;
    let turn_ends = if cfg.tie_samples.is_some() {
        Some(progs.take_turn_ends()?)
    } else {
        None
    };
    let end = progs.read()?;
    if !cfg.interval.is_zero() {
        let tail = end.since(&last);
        if tail.total().turns > 0 {
            intervals.push(summary::interval_row(t0.elapsed().as_secs_f64(), &tail));
        }
    }
    let mut window = end.since(&before);
    window.observed_ns = on_total.as_nanos() as u64;
    if let Some(s) = services.as_ref() {
        window.services = s.costs();
    }
    publish(cfg.latest.as_ref(), window.clone(), &ports, cfg.max_ports);
    Ok(Recorded {
        window,
        intervals,
        window_ns,
        ports,
        unix,
        sampled: cfg.duty.map(|d| (d, on_total.as_nanos() as u64)),
        max_endpoints: cfg.max_endpoints,
        tls_libraries,
        turn_ends,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duty_is_a_sample_shorter_than_its_period_and_on_from_the_start() {
        let d = Duty::parse("300ms/1s").unwrap();
        assert_eq!(d.on, Duration::from_millis(300));
        assert_eq!(d.period, Duration::from_secs(1));
        let at = |ms| d.on_at(Duration::from_millis(ms));
        assert!(at(0) && at(299) && !at(300) && !at(999) && at(1000) && at(1299));
        assert!(Duty::parse(" 1s / 10s ").is_ok());
        for bad in ["1s", "1s/1s", "2s/1s", "50ms/1s", "x/1s", "1s/"] {
            assert!(Duty::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn published_counts_list_idle_served_ports_within_the_port_limit() {
        let l = latest();
        let served = |port| ServedPort {
            netns: 1,
            port,
            transport: Transport::Tcp,
        };
        let mut c = Counts::empty();
        let mut busy = PortTurns::empty(80, Transport::Tcp);
        busy.turns = 3;
        c.ports.push(busy);
        publish(
            Some(&l),
            c.clone(),
            &[served(443), served(80), served(8080)],
            2,
        );
        let got = l.lock().unwrap().clone().unwrap();
        let rows: Vec<(u16, u64)> = got.ports.iter().map(|p| (p.port, p.turns)).collect();
        assert_eq!(rows, vec![(80, 3), (443, 0)]);
    }
}
