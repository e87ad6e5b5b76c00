//! A stack-sampling window on a thread of its own: loads and attaches the
//! sampler, drains its ring buffer every few tens of ms, unwinds and names
//! each sample at once (while its process still exists) and adds it to the
//! window's folded stacks; [`report`] turns what was collected into the
//! artifact's section.

use std::collections::{BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use super::bpf::{Sampler, SamplerConfig, SamplerCounters};
use super::sample::{RawSample, SampleKind};
use super::{Frame, Resolver};
use crate::recorder::Recorder;
use crate::report::stacks::{
    FrameKey, ModuleNote, StackGraph, StacksCost, StacksReport, WeightUnit, WeightedStack,
};
use crate::trace::bpf::ScopeFilter;

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
/// How often processes that are gone are forgotten.
const REAP: Duration = Duration::from_secs(2);

/// What the user asked of the stacks (the CLI's `--stack-hz`,
/// `--off-cpu`, `--stacks-folded`, `--offcpu-folded`).
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
}

impl Default for StacksOptions {
    fn default() -> Self {
        StacksOptions {
            hz: DEFAULT_HZ,
            off_cpu: false,
            folded: None,
            offcpu_folded: None,
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
    hz: u32,
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
            ringbuf_bytes: 16 << 20,
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
    let mut resolver = Resolver::new();
    let mut last_reap = Instant::now();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping {
            // What is in the ring buffer now was sampled in the window.
            sampler.detach();
        }
        for s in sampler.drain(if stopping { Duration::ZERO } else { DRAIN })? {
            agg.add(&mut resolver, &s);
        }
        if stopping {
            break;
        }
        if last_reap.elapsed() >= REAP {
            agg.reap(&mut resolver);
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
    let (on_cpu, off_cpu) = agg.into_stacks();
    Ok(Collected {
        on_cpu,
        off_cpu,
        counters,
        unwind_ns,
        symbolize_ns,
        window_ns,
        unsymbolized,
        hz: cfg.hz,
    })
}

/// One distinct stack: the process's name and the interned frames, root
/// first.
type StackKey = (u32, Vec<u32>);

/// The window's stacks so far, frames interned (a long window repeats the
/// same few thousand frames millions of times).
struct Aggregate {
    frames: Vec<FrameKey>,
    frame_ids: HashMap<FrameKey, u32>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    /// Per stack: (weight, weight whose unwinding was complete).
    on: HashMap<StackKey, (u64, u64)>,
    off: Option<HashMap<StackKey, (u64, u64)>>,
    /// Each process's name, read once (a thread's own name is not its
    /// process's).
    process_names: HashMap<u32, u32>,
    live: BTreeSet<u32>,
}

impl Aggregate {
    fn new(off_cpu: bool) -> Self {
        Aggregate {
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            names: Vec::new(),
            name_ids: HashMap::new(),
            on: HashMap::new(),
            off: off_cpu.then(HashMap::new),
            process_names: HashMap::new(),
            live: BTreeSet::new(),
        }
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
        let key = FrameKey {
            name: f.name.clone(),
            module: f.module.clone(),
            kernel: f.kernel,
        };
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(key.clone());
        self.frame_ids.insert(key, id);
        id
    }

    fn process_name(&mut self, s: &RawSample) -> u32 {
        if let Some(&id) = self.process_names.get(&s.pid) {
            return id;
        }
        let name = crate::procfs::comm(s.pid as i32).unwrap_or_else(|| {
            let end = s.comm.iter().position(|b| *b == 0).unwrap_or(16);
            String::from_utf8_lossy(&s.comm[..end]).into_owned()
        });
        let id = self.intern_name(name);
        self.process_names.insert(s.pid, id);
        id
    }

    fn add(&mut self, resolver: &mut Resolver, s: &RawSample) {
        let (weight, off) = match s.kind {
            SampleKind::OnCpu => (1, false),
            SampleKind::OffCpu { weight_ns, .. } => (weight_ns, true),
        };
        let resolved = resolver.resolve(s);
        let process = self.process_name(s);
        self.live.insert(s.pid);
        // Innermost first -> root first.
        let frames: Vec<u32> = resolved
            .frames
            .iter()
            .rev()
            .map(|f| self.intern_frame(f))
            .collect();
        let table = if off {
            match self.off.as_mut() {
                Some(t) => t,
                None => return,
            }
        } else {
            &mut self.on
        };
        let e = table.entry((process, frames)).or_insert((0, 0));
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

    fn stacks_of(&self, table: &HashMap<StackKey, (u64, u64)>) -> Vec<WeightedStack> {
        let mut out = Vec::with_capacity(table.len() * 2);
        for ((process, frames), &(weight, complete)) in table {
            let keys: Vec<FrameKey> = frames
                .iter()
                .map(|&i| self.frames[i as usize].clone())
                .collect();
            for (w, c) in [(complete, true), (weight - complete, false)] {
                if w > 0 {
                    out.push(WeightedStack {
                        process: self.names[*process as usize].clone(),
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

/// Online CPUs (the machine's CPU time per second of window).
fn online_cpus() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as u64)
}

/// The share of skipped ticks worth a note: below it, the counts are
/// within what a sampling's own noise moves.
const SKIPPED_NOTE_SHARE: f64 = 0.05;

/// A note when the cpu-clock timer skipped a noticeable share of its
/// ticks. The kernel moves a late timer on by whole periods without a
/// sample for the ones it missed (perf's samples lose them the same way),
/// which on a busy virtual CPU can be most of them: the counts then fall
/// short of CPU time x rate, and the shares are those of the ticks that
/// fired.
fn skipped_ticks_note(ticks: u64, missed: u64) -> Option<String> {
    let due = ticks + missed;
    let share = missed as f64 / due.max(1) as f64;
    (due > 0 && share >= SKIPPED_NOTE_SHARE).then(|| {
        format!(
            "the cpu-clock timer fired late and skipped {missed} of its {due} ticks ({:.0} %):              the sample counts are short by that share of the time sampled, and the shares              are of the ticks that fired (a busy virtual CPU's timer; perf's samples lose the              same ticks)",
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
    notes.extend(skipped_ticks_note(k.ticks, k.ticks_missed));
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
        },
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_ticks_get_a_note_from_five_percent_of_those_due() {
        assert_eq!(skipped_ticks_note(0, 0), None);
        assert_eq!(skipped_ticks_note(1000, 0), None);
        assert_eq!(skipped_ticks_note(1000, 52), None);
        let n = skipped_ticks_note(300, 700).unwrap();
        assert!(n.contains("skipped 700 of its 1000 ticks (70 %)"), "{n}");
        assert!(n.contains("perf's samples lose"), "{n}");
    }
}
