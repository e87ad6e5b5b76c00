//! A stack-sampling window on a thread of its own: loads and attaches the
//! sampler, drains its ring buffer every few tens of ms, unwinds and names
//! each sample at once (while its process still exists) and adds it to the
//! window's folded stacks; [`report`] turns what was collected into the
//! artifact's section.

mod rotation;

use std::collections::{BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use rotation::{Rotation, cache_of};

use super::FastMap;
use super::bpf::{Sampler, SamplerConfig, SamplerCounters};
use super::live::{self, HotCounter, HotFunctions};
use super::resolve::Budget;
use super::sample::{RawSample, SampleKind};
use super::tie::{StackKey, TieBuilder};
use super::{Frame, Resolver};
use crate::probe::ScopeFilter;
use crate::recorder::Recorder;
use crate::report::stacks::{
    FrameKey, ModuleNote, StackGraph, StacksCost, StacksReport, WeightUnit, WeightedStack,
};

/// The default sampling frequency: 99 Hz, as perf's and the profilers'
/// custom, off the 100 Hz of periodic kernel work so the two do not beat.
pub const DEFAULT_HZ: u32 = 99;
/// The highest frequency accepted.
pub const MAX_HZ: u32 = 1000;
/// Bytes of user stack copied per sample (perf's --call-graph dwarf copies
/// 8 KiB by default; deep stacks of interpreters and frameworks need more).
pub const STACK_BYTES: u32 = 16384;
/// Functions in each graph's top table.
const TOP: usize = 30;
/// How often the ring buffer is drained; the last samples of a process
/// that exits within it cannot be named.
const DRAIN: Duration = Duration::from_millis(40);
/// How often a node agent's ring buffer is drained: its few samples a
/// second (19 Hz per CPU) do not need a wake-up every 40 ms (measured:
/// 132-139 us of its thread's CPU per sample at 250 ms, 155-193 at
/// 40 ms); a process that exits within it may lose its last samples'
/// names.
const AGENT_DRAIN: Duration = Duration::from_millis(250);
/// What a node agent's resolver keeps: the modules' unwind and symbol
/// data it samples node-wide (a Rust build's libLLVM and librustc_driver
/// alone would take 40 MB), and the names of the addresses sampled.
const AGENT_BUDGET: Budget = Budget {
    module_bytes: 16 << 20,
    names: 16_384,
};
/// How often processes that are gone are forgotten.
const REAP: Duration = Duration::from_secs(2);

/// What the user asked of the stacks (the CLI's `--stack-hz`,
/// `--off-cpu`, the folded and pprof files, the tail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StacksOptions {
    /// On-CPU samples per second per CPU.
    pub hz: u32,
    /// Also sample off-CPU time.
    pub off_cpu: bool,
    /// Write the on-CPU folded stacks here too.
    pub folded: Option<PathBuf>,
    /// Write the off-CPU folded stacks here too.
    pub offcpu_folded: Option<PathBuf>,
    /// Where the tail of the requests begins (with the request anatomy).
    pub tail: crate::anatomy::TailSpec,
    /// Write the tail's on-CPU folded stacks here.
    pub tail_folded: Option<PathBuf>,
    /// Write the rest's on-CPU folded stacks here.
    pub rest_folded: Option<PathBuf>,
    /// Write the on-CPU stacks as a pprof profile here.
    pub pprof: Option<PathBuf>,
    /// Write the off-CPU stacks as a pprof profile here.
    pub offcpu_pprof: Option<PathBuf>,
}

impl Default for StacksOptions {
    fn default() -> Self {
        StacksOptions {
            hz: DEFAULT_HZ,
            off_cpu: false,
            folded: None,
            offcpu_folded: None,
            tail: crate::anatomy::TailSpec::default(),
            tail_folded: None,
            rest_folded: None,
            pprof: None,
            offcpu_pprof: None,
        }
    }
}

/// Whose stacks to sample.
#[derive(Clone, Debug)]
pub struct StacksConfig {
    /// Which tasks are the target's.
    pub scope: ScopeFilter,
    /// Tree scope: the processes at the roots of the target's trees.
    pub roots: Vec<i32>,
    /// Samples per second per CPU.
    pub hz: u32,
    /// Also sample off-CPU time.
    pub off_cpu: bool,
    /// The request anatomy's thread map: tie the samples to its requests
    /// (each kept with its turn and span, [`Collected::tied`]).
    pub tie: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// A live view's channel and interval: each interval's hottest
    /// functions are sent on it (`sockscope top --stacks`).
    pub hot: Option<(mpsc::SyncSender<HotFunctions>, Duration)>,
    /// A node agent's export ([`super::export`]): the samples are counted
    /// there as they come, and the graph is published and started afresh
    /// every window, so the window's memory does not grow with time.
    pub export: Option<super::export::Shared>,
    /// With `export`: where the sampler's run time is handed, split by
    /// the process each sample was taken in, for the per-service cost
    /// ([`crate::anatomy::service_cost::OtherRuns`]).
    pub other_runs: Option<crate::anatomy::service_cost::OtherRuns>,
}

/// What a window collected.
#[derive(Debug, Default)]
pub struct Collected {
    on_cpu: Vec<WeightedStack>,
    off_cpu: Option<Vec<WeightedStack>>,
    counters: SamplerCounters,
    unwind_ns: u64,
    symbolize_ns: u64,
    window_ns: u64,
    unsymbolized: Vec<ModuleNote>,
    /// What naming cut short (a perf map past its bound).
    resolve_notes: Vec<String>,
    hz: u32,
    /// Samples tied to requests, when the anatomy ran beside.
    tied: Option<super::tie::Tied>,
}

impl Collected {
    /// The samples tied to requests (None: not tied).
    pub fn tied(&self) -> Option<&super::tie::Tied> {
        self.tied.as_ref()
    }

    /// Whether off-CPU time was sampled.
    pub fn off_cpu(&self) -> bool {
        self.off_cpu.is_some()
    }
}

/// A running stacks window.
pub struct Session(Recorder<Collected>);

impl Session {
    /// Loads and attaches the sampler and registers the target; returns
    /// once samples are being taken (or with why they cannot be).
    pub fn start(cfg: StacksConfig) -> Result<Session> {
        Recorder::start("stacks", "stack sampler", move |stop, ready| {
            run(cfg, stop, ready)
        })
        .map(Session)
    }

    /// Whether the sampler's thread ended on its own (it failed).
    pub fn ended(&self) -> bool {
        self.0.ended()
    }

    /// Ends the window and returns what it collected.
    pub fn finish(self) -> Result<Collected> {
        self.0.finish()
    }
}

/// Loads the sampler, registers the tree and attaches.
fn open<'obj>(
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    cfg: &StacksConfig,
) -> Result<Sampler<'obj>> {
    let mut s = Sampler::load(
        storage,
        &SamplerConfig {
            scope: cfg.scope.clone(),
            hz: cfg.hz,
            off_cpu: cfg.off_cpu,
            stack_bytes: STACK_BYTES,
            ringbuf_bytes: if cfg.export.is_some() {
                agent_ring_bytes(online_cpus(), cfg.hz)
            } else {
                16 << 20
            },
            tie: cfg.tie.clone(),
            // A node agent's samples wake no one: its thread wakes once a
            // drain, not once a sample (measured: a sixth of its CPU went
            // to waking up for each of its 19 Hz samples).
            quiet: cfg.export.is_some(),
        },
    )?;
    if cfg.scope == ScopeFilter::Tree {
        s.add_tree(&crate::procfs::tree_pids(&cfg.roots))?;
    }
    s.attach()?;
    Ok(s)
}

fn run(
    cfg: StacksConfig,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<()>>,
) -> Result<Collected> {
    let mut storage = MaybeUninit::uninit();
    let mut sampler = match open(&mut storage, &cfg) {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow!("{e:#}")));
            return Err(e);
        }
    };
    let t0 = Instant::now();
    let mut agg = Aggregate::new(cfg.off_cpu);
    if cfg.tie.is_some() {
        agg.tie = Some(TieBuilder::new(1_000_000_000 / u64::from(cfg.hz.max(1))));
    }
    agg.hot = cfg
        .hot
        .as_ref()
        .map(|(tx, every)| HotCounter::new(tx.clone(), *every));
    let mut rotation = cfg.export.clone().map(|shared| {
        agg.leaves = Some(HashMap::new());
        if cfg.other_runs.is_some() {
            agg.runs = Some(HashMap::new());
        }
        Rotation::new(shared, cfg.other_runs.clone())
    });
    let drain_every = if rotation.is_some() {
        AGENT_DRAIN
    } else {
        DRAIN
    };
    let mut resolver = if rotation.is_some() {
        Resolver::with_budget(AGENT_BUDGET)
    } else {
        Resolver::new()
    };
    let mut last_reap = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            // What the ring buffer holds was sampled in the window, and
            // closing it takes the waits still going on.
            for s in sampler.close()? {
                agg.add(&mut resolver, &s);
            }
            if let Some(r) = rotation.as_mut() {
                r.publish(&mut agg, &sampler.counters()?, cache_of(&resolver));
            }
            break;
        }
        for s in sampler.drain(drain_every)? {
            agg.add(&mut resolver, &s);
        }
        if let Some(hot) = agg.hot.as_mut() {
            let frames = &agg.frames;
            hot.tick(|i| &frames[i as usize]);
        }
        if let Some(r) = rotation.as_mut() {
            r.tick(
                &mut agg,
                || sampler.counters(),
                || cache_of(&resolver),
                cfg.hz,
            )?;
        }
        if last_reap.elapsed() >= REAP {
            agg.reap(&mut resolver);
            resolver.keep_to_budget();
            if rotation.is_some() {
                // What the gone processes, the samples' stack copies and
                // a past window's graph held was freed into the sampling
                // thread's malloc arena, which glibc keeps resident unless
                // asked: an agent's memory is then what it holds, not its
                // churn (measured: 63 MB VmRSS trimmed each window, 51 MB
                // right after a trim).
                // SAFETY: malloc_trim has no preconditions.
                unsafe { libc::malloc_trim(0) };
            }
            last_reap = Instant::now();
        }
    }
    let window_ns = t0.elapsed().as_nanos() as u64;
    let counters = sampler.counters()?;
    let (unwind_ns, symbolize_ns) = resolver.cost();
    let unsymbolized = resolver
        .unsymbolized()
        .into_iter()
        .map(|(path, frames, hint)| ModuleNote { path, frames, hint })
        .collect();
    let resolve_notes = resolver.notes();
    let tied = agg.tie.take().map(TieBuilder::finish);
    let (on_cpu, off_cpu) = agg.into_stacks();
    Ok(Collected {
        tied,
        on_cpu,
        off_cpu,
        counters,
        unwind_ns,
        symbolize_ns,
        window_ns,
        unsymbolized,
        resolve_notes,
        hz: cfg.hz,
    })
}

/// The window's stacks so far, frames interned (a long window repeats the
/// same few thousand frames millions of times).
struct Aggregate {
    frames: Vec<FrameKey>,
    /// Interned frames by (name, module, kernel): shared strings, so a
    /// lookup copies none.
    frame_ids: FastMap<(Arc<str>, Arc<str>, bool), u32>,
    names: Vec<String>,
    name_ids: FastMap<String, u32>,
    /// Per stack: (weight, weight whose unwinding was complete).
    on: FastMap<StackKey, (u64, u64)>,
    off: Option<FastMap<StackKey, (u64, u64)>>,
    /// Each process's name, read once (a thread's own name is not its
    /// process's).
    process_names: FastMap<u32, u32>,
    /// Each thread name's id, by the sample's bytes (no string made per
    /// sample).
    thread_names: FastMap<[u8; 16], u32>,
    live: BTreeSet<u32>,
    /// Samples kept for the tie to requests.
    tie: Option<TieBuilder>,
    /// The live view's counts of the interval.
    hot: Option<HotCounter>,
    /// A node agent's on-CPU samples by (process name, innermost frame)
    /// since they were last handed to the exporter.
    leaves: Option<HashMap<(u32, Option<u32>), u64>>,
    /// A node agent's on-CPU samples by tgid since they were last handed
    /// over: each the sampler's run in that process's context.
    runs: Option<HashMap<u32, u64>>,
}

impl Aggregate {
    fn new(off_cpu: bool) -> Self {
        Aggregate {
            frames: Vec::new(),
            frame_ids: FastMap::default(),
            names: Vec::new(),
            name_ids: FastMap::default(),
            on: FastMap::default(),
            off: off_cpu.then(FastMap::default),
            process_names: FastMap::default(),
            thread_names: FastMap::default(),
            live: BTreeSet::new(),
            tie: None,
            hot: None,
            leaves: None,
            runs: None,
        }
    }

    /// Forgets the window's graph and everything interned for it (a node
    /// agent's next window starts from nothing). The counts not yet handed
    /// over name interned ids, so they must have been handed over first.
    fn new_window(&mut self) {
        debug_assert!(self.leaves.as_ref().is_none_or(HashMap::is_empty));
        self.frames = Vec::new();
        self.frame_ids = FastMap::default();
        self.names = Vec::new();
        self.name_ids = FastMap::default();
        self.on = FastMap::default();
        if let Some(off) = self.off.as_mut() {
            *off = FastMap::default();
        }
        self.process_names = FastMap::default();
        self.thread_names = FastMap::default();
    }

    fn intern_name(&mut self, name: String) -> u32 {
        if let Some(&id) = self.name_ids.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone());
        self.name_ids.insert(name, id);
        id
    }

    fn intern_frame(&mut self, f: &Frame) -> u32 {
        let key = (Arc::clone(&f.name), Arc::clone(&f.module), f.kernel);
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(FrameKey {
            name: f.name.to_string(),
            module: f.module.to_string(),
            kernel: f.kernel,
        });
        self.frame_ids.insert(key, id);
        id
    }

    fn process_name(&mut self, s: &RawSample) -> u32 {
        if let Some(&id) = self.process_names.get(&s.pid) {
            return id;
        }
        let name = crate::procfs::comm(s.pid as i32).unwrap_or_else(|| comm_text(&s.comm));
        let id = self.intern_name(name);
        self.process_names.insert(s.pid, id);
        id
    }

    fn add(&mut self, resolver: &mut Resolver, s: &RawSample) {
        let (weight, off) = match s.kind {
            SampleKind::OnCpu => (1, false),
            SampleKind::OffCpu { weight_ns, .. } => (weight_ns, true),
            SampleKind::RunQueue { .. } => (0, true),
        };
        let resolved = resolver.resolve(s);
        let process = self.process_name(s);
        let thread = match self.thread_names.get(&s.comm) {
            Some(&id) => id,
            None => {
                let id = self.intern_name(comm_text(&s.comm));
                self.thread_names.insert(s.comm, id);
                id
            }
        };
        self.live.insert(s.pid);
        // Innermost first -> root first.
        let frames: Vec<u32> = resolved
            .frames
            .iter()
            .rev()
            .map(|f| self.intern_frame(f))
            .collect();
        let key = StackKey {
            process,
            thread,
            frames,
        };
        if let Some(tie) = self.tie.as_mut() {
            let (names, keys) = (&self.names, &self.frames);
            tie.add(
                s,
                &key,
                &resolved.frames,
                |i| names[i as usize].clone(),
                |i| keys[i as usize].clone(),
            );
        }
        if matches!(s.kind, SampleKind::RunQueue { .. }) {
            // Kept for the tie only: the graphs are of on- and off-CPU time.
            return;
        }
        if !off && let Some(hot) = self.hot.as_mut() {
            let frames = &self.frames;
            hot.add(&key.frames, weight, |i| live::is_ours(&frames[i as usize]));
        }
        if !off && let Some(runs) = self.runs.as_mut() {
            *runs.entry(s.pid).or_default() += 1;
        }
        if !off && let Some(leaves) = self.leaves.as_mut() {
            *leaves
                .entry((key.process, key.frames.last().copied()))
                .or_default() += weight;
        }
        let table = if off {
            match self.off.as_mut() {
                Some(t) => t,
                None => return,
            }
        } else {
            &mut self.on
        };
        let e = table.entry(key).or_insert((0, 0));
        e.0 += weight;
        if resolved.complete {
            e.1 += weight;
        }
    }

    /// Forgets the processes that are gone (their caches in the resolver).
    fn reap(&mut self, resolver: &mut Resolver) {
        let gone: Vec<u32> = self
            .live
            .iter()
            .copied()
            .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        for pid in gone {
            resolver.process_gone(pid);
            self.live.remove(&pid);
            self.process_names.remove(&pid);
        }
    }

    fn stacks_of(&self, table: &FastMap<StackKey, (u64, u64)>) -> Vec<WeightedStack> {
        let mut out = Vec::with_capacity(table.len() * 2);
        for (key, &(weight, complete)) in table {
            let keys: Vec<FrameKey> = key
                .frames
                .iter()
                .map(|&i| self.frames[i as usize].clone())
                .collect();
            for (w, c) in [(complete, true), (weight - complete, false)] {
                if w > 0 {
                    out.push(WeightedStack {
                        process: self.names[key.process as usize].clone(),
                        thread: self.names[key.thread as usize].clone(),
                        frames: keys.clone(),
                        weight: w,
                        complete: c,
                    });
                }
            }
        }
        out
    }

    fn into_stacks(self) -> (Vec<WeightedStack>, Option<Vec<WeightedStack>>) {
        let on = self.stacks_of(&self.on);
        let off = self.off.as_ref().map(|t| self.stacks_of(t));
        (on, off)
    }
}

/// A node agent's ring buffer: four drains' worth of samples at `hz` on
/// every CPU (each at most the stack copied and its header), a power of
/// two from 1 MiB. The kernel maps a ring's pages twice and they stay
/// resident once written, so the 16 MiB a report's window uses cost the
/// agent 32 MiB of its resident memory (measured: 97 MB VmRSS at 60 s).
fn agent_ring_bytes(cpus: u64, hz: u32) -> u32 {
    let per_drain = cpus as f64 * f64::from(hz) * AGENT_DRAIN.as_secs_f64();
    let bytes = (4.0 * per_drain.ceil() * f64::from(STACK_BYTES + 1024)) as u64;
    let bytes = bytes.clamp(1 << 20, 256 << 20).next_power_of_two();
    u32::try_from(bytes).unwrap_or(256 << 20)
}

/// A kernel-kept name (NUL-padded, 16 bytes) as text.
fn comm_text(comm: &[u8; 16]) -> String {
    let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

/// Online CPUs (the machine's CPU time per second of window).
fn online_cpus() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as u64)
}

/// The shortfall worth a note: below it, the counts are within what a
/// sampling's own noise moves.
const SHORT_NOTE_SHARE: f64 = 0.10;

/// Fewer samples due than this make no note: a short or idle window's
/// count is too noisy to judge.
const SHORT_NOTE_MIN_DUE: f64 = 50.0;

/// The on-CPU samples taken over those the target's CPU time makes due at
/// `hz` (None when its CPU time is unknown or zero).
fn coverage(samples: u64, target_cpu_ns: Option<u64>, hz: u32) -> Option<(f64, f64)> {
    let due = target_cpu_ns.filter(|n| *n > 0)? as f64 * f64::from(hz) / 1e9;
    Some((samples as f64 / due, due))
}

/// A note when the samples fall short of the target's CPU time x rate.
///
/// The one cause seen: a CPU's cpu-clock timer that stops firing for tens
/// of milliseconds at a time. On this project's 2-vCPU VM the second vCPU's
/// does, one timer at a time (two samplers in one window lose different
/// ticks), and never fires while that vCPU idles; perf's cpu-clock samples
/// lose the same ticks. Shares are then of the samples taken, which are
/// not an even sample of the target's time.
fn short_samples_note(samples: u64, due: f64, lost: u64) -> Option<String> {
    let share = 1.0 - samples as f64 / due;
    (due >= SHORT_NOTE_MIN_DUE && share >= SHORT_NOTE_SHARE).then(|| {
        let lost = if lost > 0 {
            format!(" or lost ({lost} samples)")
        } else {
            String::new()
        };
        format!(
            "{samples} on-CPU samples for the target's CPU time, where {due:.0} were due: \
             {:.0} % of its running time has no sample (ticks the cpu-clock timer did not fire, \
             as a virtual CPU's timer may not for tens of ms at a time, perf's alike{lost}); \
             the shares are of the samples taken",
            share * 100.0
        )
    })
}

/// A note, when the target's CPU time is unknown, that the cpu-clock timer
/// had no tick in a noticeable share of its periods across the CPUs: time
/// no sampler saw, idle or not (the periods are counted whatever ran).
fn skipped_ticks_note(ticks: u64, missed: u64) -> Option<String> {
    let due = ticks + missed;
    let share = missed as f64 / due.max(1) as f64;
    (due > 0 && share >= SHORT_NOTE_SHARE).then(|| {
        format!(
            "the cpu-clock timer had no tick in {missed} of its {due} periods across the CPUs \
             ({:.0} %; a virtual CPU's timer may not fire for tens of ms at a time, perf's \
             alike): the target's counts are short by the part of that time it ran, which is \
             unknown here as its CPU time was not measured",
            share * 100.0
        )
    })
}

/// The artifact's section: both graphs, the modules without names, the
/// cost as shares of the target's CPU (`target_cpu_ns` over the same
/// window, when known) and of the machine's.
pub fn report(c: &Collected, target_cpu_ns: Option<u64>) -> StacksReport {
    let on_cpu = StackGraph::build(WeightUnit::Samples, c.on_cpu.clone(), TOP);
    let off_cpu = c
        .off_cpu
        .as_ref()
        .map(|s| StackGraph::build(WeightUnit::Nanoseconds, s.clone(), TOP));
    let k = &c.counters;
    let window_s = c.window_ns as f64 / 1e9;
    let in_target = k.bpf_ns + c.unwind_ns;
    let all = in_target + c.symbolize_ns;
    let machine_ns = c.window_ns as f64 * online_cpus() as f64;
    let mut notes = Vec::new();
    if k.lost > 0 {
        notes.push(format!(
            "{} samples were lost (the ring buffer was full); the graphs are short by that many",
            k.lost
        ));
    }
    let covered = coverage(k.samples, target_cpu_ns, c.hz);
    match covered {
        Some((_, due)) => notes.extend(short_samples_note(k.samples, due, k.lost)),
        None => notes.extend(skipped_ticks_note(k.ticks, k.ticks_missed)),
    }
    if k.copy_failed > 0 {
        notes.push(format!(
            "{} samples' user stacks could not be copied (the stack's page was not resident); \
             they show their kernel frames and the sampled function only",
            k.copy_failed
        ));
    }
    if on_cpu.total > 0 && on_cpu.complete_share < 0.9 {
        notes.push(format!(
            "{:.0} % of the on-CPU samples were unwound to the thread's first frame; the rest \
             stop early (a stack deeper than the {} KiB copied, or code without unwind \
             information)",
            on_cpu.complete_share * 100.0,
            STACK_BYTES / 1024
        ));
    }
    notes.extend(c.resolve_notes.iter().cloned());
    if on_cpu.total == 0 {
        notes.push(
            "no on-CPU sample of the target: it did not run on a CPU while sampled".to_string(),
        );
    }
    StacksReport {
        hz: c.hz,
        on_cpu,
        off_cpu,
        unsymbolized: c.unsymbolized.clone(),
        cost: StacksCost {
            samples: k.samples,
            off_cpu_samples: k.off_cpu_samples,
            lost: k.lost,
            bpf_ns: k.bpf_ns,
            unwind_ns: c.unwind_ns,
            symbolize_ns: c.symbolize_ns,
            window_s,
            target_share: target_cpu_ns
                .filter(|n| *n > 0)
                .map(|n| in_target as f64 / n as f64),
            machine_share: if machine_ns > 0.0 {
                all as f64 / machine_ns
            } else {
                0.0
            },
            ticks: k.ticks,
            ticks_missed: k.ticks_missed,
            coverage: covered.map(|(c, _)| c),
        },
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::export::ModuleCacheStats;

    fn on_cpu(comm: &[u8]) -> RawSample {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm);
        RawSample {
            kind: SampleKind::OnCpu,
            pid: std::process::id(),
            tid: 0,
            comm: c,
            ts_ns: 0,
            kernel: Vec::new(),
            user_regs: None,
            user_stack: Vec::new(),
            syscall: None,
            turn: 0,
            span_ns: (0, 0),
        }
    }

    #[test]
    fn an_agent_s_ring_holds_four_drains_from_one_mib() {
        // 2 CPUs at 19 Hz: 10 samples a drain, 40 of 17 KiB.
        assert_eq!(agent_ring_bytes(2, 19), 1 << 20);
        // 64 CPUs: 304 a drain, 1,216 of 17 KiB, 20 MiB: 32 MiB.
        assert_eq!(agent_ring_bytes(64, 19), 32 << 20);
        assert_eq!(agent_ring_bytes(4096, 1000), 256 << 20);
        assert!(agent_ring_bytes(1, 1).is_power_of_two());
    }

    #[test]
    fn an_agent_s_window_starts_afresh_while_its_counters_keep_growing() {
        use super::super::export::{Exported, NO_FRAME};
        // A window of zero: every tick ends one.
        let shared = Exported::shared(19, Duration::ZERO, 64);
        let mut agg = Aggregate::new(false);
        agg.leaves = Some(HashMap::new());
        let mut rotation = Rotation::new(shared.clone(), None);
        let mut resolver = Resolver::new();
        let counters = || Ok(SamplerCounters::default());
        for _ in 0..3 {
            agg.add(&mut resolver, &on_cpu(b"agent-test"));
        }
        rotation
            .tick(&mut agg, counters, ModuleCacheStats::default, 19)
            .unwrap();
        let samples_of = |pprof: &[u8]| -> i64 {
            let p = crate::report::pprof::read(pprof).unwrap();
            assert!(p.time_nanos > 0);
            p.sample.iter().map(|s| s.value[0]).sum()
        };
        let first = shared.lock().unwrap().last_profile().unwrap();
        assert_eq!(samples_of(&first), 3);
        assert!(agg.on.is_empty() && agg.names.is_empty() && agg.frames.is_empty());

        for _ in 0..2 {
            agg.add(&mut resolver, &on_cpu(b"agent-test"));
        }
        rotation
            .tick(&mut agg, counters, ModuleCacheStats::default, 19)
            .unwrap();
        let e = shared.lock().unwrap();
        // The window holds its own samples; the counter, every sample.
        assert_eq!(samples_of(&e.last_profile().unwrap()), 2);
        let name = crate::procfs::comm(std::process::id() as i32).unwrap();
        let key = (name, NO_FRAME.to_string(), String::new());
        assert_eq!(e.leaves().get(&key), Some(&5), "{:?}", e.leaves());
    }

    #[test]
    fn a_shortfall_against_the_targets_cpu_gets_a_note_from_ten_percent() {
        // 2 s of CPU at 99 Hz: 198 due.
        let (c, due) = coverage(190, Some(2_000_000_000), 99).unwrap();
        assert!((due - 198.0).abs() < 1e-9 && (c - 190.0 / 198.0).abs() < 1e-9);
        assert_eq!(coverage(10, None, 99), None);
        assert_eq!(coverage(10, Some(0), 99), None);
        assert_eq!(short_samples_note(190, 198.0, 0), None);
        let n = short_samples_note(99, 198.0, 0).unwrap();
        assert!(
            n.contains("99 on-CPU samples") && n.contains("198 were due"),
            "{n}"
        );
        assert!(n.contains("50 % of its running time"), "{n}");
        assert!(!n.contains("lost"), "{n}");
        assert!(
            short_samples_note(99, 198.0, 7)
                .unwrap()
                .contains("7 samples")
        );
        // Too few due to judge.
        assert_eq!(short_samples_note(10, 40.0, 0), None);
    }

    #[test]
    fn skipped_ticks_get_a_note_from_ten_percent_of_the_periods() {
        assert_eq!(skipped_ticks_note(0, 0), None);
        assert_eq!(skipped_ticks_note(1000, 0), None);
        assert_eq!(skipped_ticks_note(1000, 105), None);
        let n = skipped_ticks_note(300, 700).unwrap();
        assert!(
            n.contains("no tick in 700 of its 1000 periods across the CPUs (70 %"),
            "{n}"
        );
        assert!(n.contains("perf's"), "{n}");
    }
}
