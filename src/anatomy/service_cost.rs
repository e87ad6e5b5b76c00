//! What the request anatomy costs each process it runs in: its programs'
//! run time in that process's context over the process's CPU time, per
//! command name (the node agent's `sockscope_agent_target_*` families).
//!
//! Two figures make it. What a run costs: the kernel's own run-time
//! accounting (BPF_ENABLE_STATS), held 50 ms of every 500 ms while the
//! programs do not time themselves, over the runs it counted; times
//! every run of the programs since the last reading (they count each
//! one). And how that splits between processes: during the cost slices
//! (another 50 ms of every 500 ms) the programs time themselves and add
//! each timed run to the process whose context it ran in (the `svc_cost`
//! map, per CPU). Outside the slices nothing is timed or written. The
//! split is the slices' sample, so a process that bursts between them is
//! seen less exactly than a steady one; the whole is exact in runs.
//! A run on the receive path (sk_data_ready) runs in the context of
//! whoever was on the CPU when the packet arrived: on loopback the sender.
//! The stack sampler's program, where the agent runs it, is added
//! ([`OtherRuns`]): it times every run itself, and its run time since the
//! last handing over is split between processes as its samples were
//! (each sample one run; ticks that left no sample, such as those of an
//! idle CPU, in no process's). The share leaves out the tracepoints' own
//! dispatch (tens of ns per run) and the programs' entry and exit around
//! the sampler's own timing; docs/metrics.md says so.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

/// The label of the processes past the series limit.
pub const OTHER: &str = "(other)";
/// The label of the runs in processes that exited before a reading named
/// them (a reading every 5 s): counted, with no CPU and no share.
pub const EXITED: &str = "(exited)";
/// The label of the runs in no process's context (tgid 0: the idle task,
/// whose CPU's softirq work, a timer's or a packet's, they were):
/// counted, with no CPU and no share.
pub const KERNEL: &str = "(kernel)";
/// The share gauge's window (at least; a whole number of a duty's
/// periods under `--requests-duty`).
pub const SHARE_WINDOW: Duration = Duration::from_secs(60);
/// How much earlier than a window's start a reading may be taken and still
/// be left out of it (the readings come on the agent's 10 ms ticks: a
/// window of 60 s holds the last 12 readings 5 s apart, not 13).
const READ_SLACK: Duration = Duration::from_secs(1);

/// One process's timed runs, summed over the CPUs (the `svc_cost` map).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timed {
    /// Run time, ns.
    pub ns: u64,
    /// Runs.
    pub runs: u64,
    /// The cost of one clock read per run, summed, ns.
    pub clock_ns: u64,
}

/// What /proc says of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Its command name.
    pub comm: String,
    /// User plus system CPU, clock ticks (every thread, exited ones too).
    pub cpu_ticks: u64,
    /// Its start time, clock ticks after boot (tells a reused pid apart).
    pub start: u64,
}

impl ProcStat {
    /// Parses /proc/PID/stat's text.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let comm = text.get(open + 1..close)?.to_string();
        let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
        // After the name: field 3 (state) is f[0]; utime, stime (14, 15)
        // are f[11], f[12]; starttime (22) is f[19].
        let utime: u64 = f.get(11)?.parse().ok()?;
        let stime: u64 = f.get(12)?.parse().ok()?;
        Some(ProcStat {
            comm,
            cpu_ticks: utime.saturating_add(stime),
            start: f.get(19)?.parse().ok()?,
        })
    }

    /// Reads /proc/`tgid`/stat; None when the process is gone.
    pub fn read(tgid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{tgid}/stat")).ok()?)
    }
}

/// The published cost of one command name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceCost {
    /// The command name (or [`OTHER`]).
    pub name: String,
    /// The programs' estimated run time in its processes' context, s.
    pub bpf_s: f64,
    /// Its processes' CPU time over the same readings, s.
    pub cpu_s: f64,
    /// bpf over cpu over the last [`SHARE_WINDOW`] (None: no CPU in it,
    /// or, under a duty, the name not read for a whole window yet).
    pub share: Option<f64>,
}

#[derive(Debug)]
struct Tracked {
    start: u64,
    name: String,
    cpu_ticks: u64,
}

/// One reading's figures for one name: its BPF ns paired with CPU (the
/// process's first reading left out) and its CPU ns.
type NameDelta = (String, f64, f64);

/// What a reading needs besides the per-process sums, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    /// Every run of the programs so far (exact: the programs count them).
    pub all: u64,
    /// The kernel's run time and run count of the programs over its own
    /// slices, where the programs do not time themselves (None: the
    /// kernel's accounting is not available).
    pub kernel: Option<(u64, u64)>,
}

/// Accumulates [`ServiceCost`]s from successive readings.
#[derive(Debug)]
pub struct ServiceCosts {
    max_names: usize,
    ns_per_tick: f64,
    procs: HashMap<u32, Tracked>,
    /// The names given out (at most `max_names`, [`OTHER`] aside).
    names: std::collections::HashSet<String>,
    /// Per name: (bpf ns, cpu ns) since the start.
    totals: BTreeMap<String, (f64, f64)>,
    /// Per reading: when, and its per-name deltas.
    recent: VecDeque<(Duration, Vec<NameDelta>)>,
    /// The agent's own process, left out (its cost is its own CPU).
    own: u32,
    /// Every entry's sums at the last reading.
    raw: HashMap<u32, Timed>,
    /// The run counts at the last reading.
    runs: Runs,
    /// The cost of a run the last reading used, ns.
    per_run: Option<f64>,
    /// The share's window.
    window: Duration,
    /// How long a name must have been read before its share is given
    /// (under a duty: a window, so that the CPU of a whole window is put
    /// against the runs of the samples in it).
    settle: Duration,
    /// When each name was first read.
    first: HashMap<String, Duration>,
    /// When the last reading was.
    last: Duration,
    /// Other programs' run time per tgid ([`ServiceCosts::add_other`]),
    /// put with the next reading.
    other: HashMap<u32, f64>,
}

/// Run time of programs other than the anatomy's (the stack sampler's,
/// which run in whatever task a tick interrupts), ns per tgid: their
/// owner adds, each reading of the anatomy's costs takes it all.
pub type OtherRuns = std::sync::Arc<std::sync::Mutex<HashMap<u32, f64>>>;

/// Fewer kernel-counted runs than this between two readings leave the
/// cost of a run as it was.
const MIN_KERNEL_RUNS: u64 = 100;

impl ServiceCosts {
    /// At most `max_names` names (the rest under [`OTHER`]); `tick_hz` is
    /// the clock tick rate /proc counts CPU in.
    pub fn new(max_names: usize, tick_hz: f64) -> Self {
        Self {
            max_names: max_names.max(1),
            ns_per_tick: 1e9 / tick_hz.max(1.0),
            procs: HashMap::new(),
            names: Default::default(),
            totals: BTreeMap::new(),
            recent: VecDeque::new(),
            own: std::process::id(),
            raw: HashMap::new(),
            runs: Runs::default(),
            per_run: None,
            window: SHARE_WINDOW,
            settle: Duration::ZERO,
            first: HashMap::new(),
            last: Duration::ZERO,
            other: HashMap::new(),
        }
    }

    /// Adds other programs' run time in each tgid's context, ns, to the
    /// next reading (tgid 0: in no process's).
    pub fn add_other(&mut self, runs: HashMap<u32, f64>) {
        for (tgid, ns) in runs {
            *self.other.entry(tgid).or_default() += ns;
        }
    }

    /// For a window sampled `on` of every `period` (`--requests-duty`):
    /// the programs' runs come in bursts, the CPU all the time, so the
    /// share's window is a whole number of periods (at least
    /// [`SHARE_WINDOW`]) and a name's share is given only once it has been
    /// read for a whole window; before, its runs' burst would be put
    /// against less than a window's CPU.
    pub fn sampled(mut self, period: Duration) -> Self {
        let p = period.as_millis().max(1);
        let n = SHARE_WINDOW.as_millis().div_ceil(p);
        self.window = Duration::from_millis(u64::try_from(n * p).unwrap_or(u64::MAX));
        self.settle = self.window;
        self
    }

    /// A reading at `el` (time since the start): `runs` the programs' run
    /// counts, `timed` the per-process map's content (tgid, sums), `stat`
    /// what /proc says of a tgid. The programs' run time since the last
    /// reading (the cost of a run times every run) is split between the
    /// processes as their timed runs were; a process's CPU is counted from
    /// its first reading, its runs from its first timed run.
    pub fn read(
        &mut self,
        el: Duration,
        runs: Runs,
        timed: &[(u32, Timed)],
        mut stat: impl FnMut(u32) -> Option<ProcStat>,
    ) {
        let (weights, whole) = self.weights(timed);
        let all = runs.all.saturating_sub(self.runs.all) as f64;
        let per_run = self.cost_of_a_run(runs, &whole);
        self.runs = runs;
        let share_of = |d: &Timed| {
            if whole.ns == 0 {
                0.0
            } else {
                per_run * all * d.ns as f64 / whole.ns as f64
            }
        };
        let other = std::mem::take(&mut self.other);
        let ns_of = |tgid: u32| {
            weights.get(&tgid).map_or(0.0, share_of) + other.get(&tgid).copied().unwrap_or(0.0)
        };
        let mut tgids: Vec<u32> = timed.iter().map(|&(t, _)| t).collect();
        tgids.extend(other.keys().filter(|t| !weights.contains_key(t)));
        // Processes followed before and in neither now (one the stack
        // sampler alone saw, between its samples): their CPU goes on
        // counting, against no runs, while they live; dropped, the next
        // sample would find them new and leave its runs out of the share.
        tgids.extend(
            self.procs
                .keys()
                .filter(|t| !weights.contains_key(t) && !other.contains_key(t)),
        );
        // Per name: bpf ns, cpu ns, and the bpf ns paired with that CPU.
        let mut deltas: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        let mut seen = Vec::with_capacity(tgids.len());
        for tgid in tgids {
            if tgid == self.own {
                continue;
            }
            // Tgid 0 (the idle task) has no /proc entry.
            let Some(st) = (tgid != 0).then(|| stat(tgid)).flatten() else {
                // No process, or one gone: its runs since the last reading
                // still cost what they cost, with no name nor CPU to put
                // them with.
                let ns = ns_of(tgid);
                if ns > 0.0 {
                    let label = if tgid == 0 { KERNEL } else { EXITED };
                    deltas.entry(label.to_string()).or_default().0 += ns;
                }
                continue;
            };
            seen.push(tgid);
            let known = self.procs.get(&tgid).map(|p| p.start == st.start);
            let (cpu_base, name) = match known {
                Some(true) => {
                    let p = &self.procs[&tgid];
                    (p.cpu_ticks, p.name.clone())
                }
                // Reused pid: the map's entry carries on (same key), the
                // CPU starts from now under the new process's name.
                // First seen: the CPU from now, its past not being the
                // programs' doing.
                _ => (st.cpu_ticks, self.name_for(&st.comm)),
            };
            let ns = ns_of(tgid);
            let cpu = st.cpu_ticks.saturating_sub(cpu_base) as f64 * self.ns_per_tick;
            self.procs.insert(
                tgid,
                Tracked {
                    start: st.start,
                    name: name.clone(),
                    cpu_ticks: st.cpu_ticks,
                },
            );
            let d = deltas.entry(name).or_default();
            d.0 += ns;
            d.1 += cpu;
            // A process's first reading pairs its runs with no CPU: the
            // share leaves it out, the counter keeps the runs.
            if known.is_some() {
                d.2 += ns;
            }
        }
        // Processes gone from the map (evicted) or from /proc.
        seen.sort_unstable();
        self.procs.retain(|k, _| seen.binary_search(k).is_ok());
        for (name, (b, c, _)) in &deltas {
            let t = self.totals.entry(name.clone()).or_default();
            t.0 += b;
            t.1 += c;
            self.first.entry(name.clone()).or_insert(el);
        }
        self.recent.push_back((
            el,
            deltas.into_iter().map(|(n, (_, c, p))| (n, p, c)).collect(),
        ));
        let keep = self.window.saturating_sub(READ_SLACK);
        while self
            .recent
            .front()
            .is_some_and(|(t, _)| el.saturating_sub(*t) >= keep)
        {
            self.recent.pop_front();
        }
        self.last = el;
    }

    /// Each entry's timed sums since the last reading, and their sum over
    /// every entry (the agent's own too: the kernel counted its runs).
    fn weights(&mut self, timed: &[(u32, Timed)]) -> (HashMap<u32, Timed>, Timed) {
        let mut whole = Timed::default();
        let mut out = HashMap::with_capacity(timed.len());
        for &(tgid, t) in timed {
            let base = self.raw.get(&tgid).copied().unwrap_or_default();
            // A shrunk entry was evicted and made anew: all of it is new.
            let b = if t.runs >= base.runs {
                base
            } else {
                Timed::default()
            };
            let d = Timed {
                ns: t.ns.saturating_sub(b.ns),
                runs: t.runs.saturating_sub(b.runs),
                clock_ns: t.clock_ns.saturating_sub(b.clock_ns),
            };
            whole.ns += d.ns;
            whole.runs += d.runs;
            whole.clock_ns += d.clock_ns;
            out.insert(tgid, d);
        }
        self.raw = timed.iter().copied().collect();
        (out, whole)
    }

    /// The cost of one run since the last reading, ns: the kernel's own
    /// figure over its slices (where the programs do not time themselves)
    /// less the one clock read of its accounting that falls in its window;
    /// without it, the programs' own timing of their runs (which leaves
    /// out their entry and exit, so it is lower). The last figure when
    /// neither has enough runs.
    fn cost_of_a_run(&mut self, runs: Runs, timed: &Timed) -> f64 {
        let clock = if timed.runs > 0 {
            timed.clock_ns as f64 / timed.runs as f64
        } else {
            0.0
        };
        let kernel = match (runs.kernel, self.runs.kernel) {
            (Some((n1, r1)), Some((n0, r0))) => {
                Some((n1.saturating_sub(n0), r1.saturating_sub(r0)))
            }
            (Some(k), None) => Some(k),
            _ => None,
        };
        let fresh = match kernel {
            Some((ns, r)) if r >= MIN_KERNEL_RUNS => Some((ns as f64 / r as f64 - clock).max(0.0)),
            _ if self.per_run.is_none() && timed.runs >= MIN_KERNEL_RUNS => {
                Some(timed.ns as f64 / timed.runs as f64)
            }
            _ => None,
        };
        if let Some(f) = fresh {
            self.per_run = Some(f);
        }
        self.per_run.unwrap_or(0.0)
    }

    /// The cost of a run the last reading used, ns (None before any).
    pub fn per_run_ns(&self) -> Option<f64> {
        self.per_run
    }

    /// The name a process is counted under: its command, or [`OTHER`] once
    /// `max_names` names are taken.
    fn name_for(&mut self, comm: &str) -> String {
        if self.names.contains(comm) {
            return comm.to_string();
        }
        if self.names.len() < self.max_names {
            self.names.insert(comm.to_string());
            return comm.to_string();
        }
        OTHER.to_string()
    }

    /// Every name's cost so far.
    pub fn costs(&self) -> Vec<ServiceCost> {
        let mut window: HashMap<&str, (f64, f64)> = HashMap::new();
        for (_, rows) in &self.recent {
            for (n, b, c) in rows {
                let w = window.entry(n.as_str()).or_default();
                w.0 += b;
                w.1 += c;
            }
        }
        self.totals
            .iter()
            .map(|(name, &(b, c))| ServiceCost {
                name: name.clone(),
                bpf_s: b / 1e9,
                cpu_s: c / 1e9,
                share: window
                    .get(name.as_str())
                    .filter(|w| w.1 > 0.0)
                    .filter(|_| {
                        self.first
                            .get(name)
                            .is_some_and(|f| self.last.saturating_sub(*f) >= self.settle)
                    })
                    .map(|w| w.0 / w.1),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stat(comm: &str, cpu_ticks: u64, start: u64) -> ProcStat {
        ProcStat {
            comm: comm.into(),
            cpu_ticks,
            start,
        }
    }

    #[test]
    fn parses_stat_with_a_name_that_has_parentheses_and_spaces() {
        let text = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 \
                    0 777 123456 789 18446744073709551615";
        assert_eq!(ProcStat::parse(text), Some(stat("my (odd) name", 300, 777)));
        assert_eq!(ProcStat::parse("1 (x) S 1 2"), None);
    }

    fn runs(all: u64, kernel: Option<(u64, u64)>) -> Runs {
        Runs { all, kernel }
    }

    #[test]
    fn the_kernels_cost_of_a_run_times_every_run_is_split_as_the_timed_runs_were() {
        // 100 ticks/s: a tick is 10 ms.
        let mut c = ServiceCosts::new(8, 100.0);
        let at = |s: u64| Duration::from_secs(s);
        let t = |ns, runs| Timed {
            ns,
            runs,
            clock_ns: 20 * runs,
        };
        c.read(at(5), runs(0, None), &[(10, t(0, 0)), (11, t(0, 0))], |p| {
            Some(stat(if p == 10 { "nginx" } else { "redis-server" }, 0, 1))
        });
        // 1 000 runs since; the kernel saw 200 of them at 320 ns (20 of it
        // its clock read): 300 ns a run, 300 us in all, split 3:1 as the
        // timed runs' time was.
        c.read(
            at(10),
            runs(1_000, Some((64_000, 200))),
            &[(10, t(30_000, 150)), (11, t(10_000, 50))],
            |p| Some(stat(if p == 10 { "nginx" } else { "redis-server" }, 100, 1)),
        );
        assert_eq!(c.per_run_ns(), Some(300.0));
        let got = c.costs();
        let of = |n: &str| got.iter().find(|s| s.name == n).unwrap().clone();
        assert!((of("nginx").bpf_s - 225e-6).abs() < 1e-12, "{got:?}");
        assert!((of("redis-server").bpf_s - 75e-6).abs() < 1e-12, "{got:?}");
        assert!((of("nginx").cpu_s - 1.0).abs() < 1e-9, "{got:?}");
        assert!(
            (of("nginx").share.unwrap() - 225e-6).abs() < 1e-12,
            "{got:?}"
        );
        // No kernel figures since: the last cost of a run stays.
        c.read(
            at(15),
            runs(2_000, Some((64_000, 200))),
            &[(10, t(60_000, 300)), (11, t(10_000, 50))],
            |p| Some(stat(if p == 10 { "nginx" } else { "redis-server" }, 100, 1)),
        );
        assert_eq!(c.per_run_ns(), Some(300.0));
        assert!((c.costs()[0].bpf_s - 525e-6).abs() < 1e-12);
    }

    #[test]
    fn the_stack_sampler_s_runs_are_added_to_the_process_they_ran_in() {
        let mut c = ServiceCosts::new(8, 100.0);
        let at = |s: u64| Duration::from_secs(s);
        let t = |ns: u64| Timed {
            ns,
            runs: ns,
            clock_ns: 0,
        };
        let stats = |p: u32| match p {
            1 => Some(stat("nginx", 100, 1)),
            // Sampled, never in the anatomy's map: a CPU-bound process.
            3 => Some(stat("cruncher", 200, 1)),
            _ => None,
        };
        c.read(at(5), runs(0, None), &[(1, t(0))], |p| {
            stats(p).map(|s| ProcStat { cpu_ticks: 0, ..s })
        });
        c.add_other(HashMap::from([(3, 1.0)]));
        c.read(at(10), runs(0, None), &[(1, t(0))], |p| {
            stats(p).map(|s| ProcStat { cpu_ticks: 0, ..s })
        });
        // Since: the anatomy 400 ns in nginx; the sampler 100 us in nginx,
        // 300 us in cruncher, 50 us on an idle CPU, handed over in two
        // parts (added up).
        c.add_other(HashMap::from([(1, 60_000.0), (3, 300_000.0)]));
        c.add_other(HashMap::from([(1, 40_000.0), (0, 50_000.0)]));
        c.read(at(15), runs(400, None), &[(1, t(400))], stats);
        let got = c.costs();
        let of = |n: &str| got.iter().find(|s| s.name == n).cloned().unwrap();
        assert!((of("nginx").bpf_s - 100.4e-6).abs() < 1e-12, "{got:?}");
        // 1 s of nginx's CPU, 2 s of cruncher's, since their first reading.
        assert!(
            (of("nginx").share.unwrap() - 100.4e-6).abs() < 1e-12,
            "{got:?}"
        );
        assert!(
            (of("cruncher").share.unwrap() - 150e-6).abs() < 1e-12,
            "{got:?}"
        );
        // Its first reading's run is in the counter, not the share.
        assert!((of("cruncher").bpf_s - 300.001e-6).abs() < 1e-12, "{got:?}");
        assert!((of(KERNEL).bpf_s - 50e-6).abs() < 1e-12, "{got:?}");
        // Taken: the next reading adds nothing of them.
        c.read(at(20), runs(400, None), &[(1, t(400))], stats);
        assert!(
            (c.costs().iter().find(|s| s.name == "nginx").unwrap().bpf_s - 100.4e-6).abs() < 1e-12
        );
    }

    #[test]
    fn a_process_only_the_sampler_saw_is_followed_between_its_samples() {
        let mut c = ServiceCosts::new(8, 100.0);
        let at = |s: u64| Duration::from_secs(s);
        let cpu = std::cell::Cell::new(0);
        let stats = |p: u32| (p == 3).then(|| stat("cruncher", cpu.get(), 1));
        c.add_other(HashMap::from([(3, 1.0)]));
        c.read(at(5), runs(0, None), &[], stats);
        // No sample of it in this reading: its CPU still counts.
        cpu.set(100);
        c.read(at(10), runs(0, None), &[], stats);
        cpu.set(200);
        c.add_other(HashMap::from([(3, 300_000.0)]));
        c.read(at(15), runs(0, None), &[], stats);
        let got = c.costs();
        let of = |n: &str| got.iter().find(|s| s.name == n).cloned().unwrap();
        // 300 us of runs over the 2 s of CPU since its first reading.
        assert!((of("cruncher").cpu_s - 2.0).abs() < 1e-9, "{got:?}");
        assert!(
            (of("cruncher").share.unwrap() - 150e-6).abs() < 1e-12,
            "{got:?}"
        );
        // Gone: no longer followed, nothing more counted.
        c.read(at(20), runs(0, None), &[], |_| None);
        assert!(c.procs.is_empty());
        assert!((c.costs()[0].cpu_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn runs_of_a_process_gone_or_of_no_process_are_counted_apart() {
        let mut c = ServiceCosts::new(8, 100.0);
        let at = |s: u64| Duration::from_secs(s);
        let t = |ns| Timed {
            ns,
            runs: ns,
            clock_ns: 0,
        };
        c.read(at(5), runs(0, None), &[(1, t(0))], |_| {
            Some(stat("srv", 0, 1))
        });
        // 450 runs of 1 ns: 300 timed in the server, 100 in a process
        // that exited before this reading, 50 on an idle CPU (tgid 0,
        // which /proc has no entry for).
        c.read(
            at(10),
            runs(450, None),
            &[(1, t(300)), (2, t(100)), (0, t(50))],
            |p| (p == 1).then(|| stat("srv", 100, 1)),
        );
        let got = c.costs();
        let of = |n: &str| got.iter().find(|s| s.name == n).cloned();
        for (name, ns) in [(EXITED, 100e-9), (KERNEL, 50e-9)] {
            let s = of(name).unwrap_or_else(|| panic!("{name}: {got:?}"));
            assert!((s.bpf_s - ns).abs() < 1e-15, "{got:?}");
            assert_eq!((s.cpu_s, s.share), (0.0, None));
        }
        let all: f64 = got.iter().map(|s| s.bpf_s).sum();
        assert!(
            (all - 450e-9).abs() < 1e-15,
            "every run is in a name: {got:?}"
        );
    }

    #[test]
    fn a_reused_pid_starts_over_and_names_past_the_limit_are_other() {
        let mut c = ServiceCosts::new(1, 100.0);
        let at = |s: u64| Duration::from_secs(s);
        let t = |ns| Timed {
            ns,
            runs: ns,
            clock_ns: 0,
        };
        let stats = |tgid: u32| match tgid {
            1 => Some(stat("a", 10, 1)),
            _ => Some(stat("b", 10, 1)),
        };
        c.read(at(1), runs(0, None), &[(1, t(0)), (2, t(0))], stats);
        c.read(
            at(2),
            runs(200, None),
            &[(1, t(100)), (2, t(100))],
            |tgid| Some(stat(if tgid == 1 { "a" } else { "b" }, 20, 1)),
        );
        let names: Vec<String> = c.costs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, vec!["(other)".to_string(), "a".to_string()]);
        // Without the kernel's figures a run costs what the programs timed
        // (1 ns here): 100 of the 200 runs are a's.
        let a = c.costs().into_iter().find(|s| s.name == "a").unwrap();
        assert!((a.bpf_s - 100e-9).abs() < 1e-15, "{a:?}");
        // Pid 1 now belongs to a process started later: its CPU starts
        // over, under its own name.
        c.read(at(3), runs(200, None), &[(1, t(100))], |_| {
            Some(stat("a", 5, 99))
        });
        let a = c.costs().into_iter().find(|s| s.name == "a").unwrap();
        assert!((a.cpu_s - 0.1).abs() < 1e-9, "{a:?}");
    }

    #[test]
    fn under_a_duty_the_share_puts_one_sample_against_a_whole_windows_cpu() {
        // 1 s of every 60 s; readings every 5 s (at 5.01, 10.01...: the
        // agent's ticks are late by a few ms); 100 ticks/s. The server
        // uses 0.5 CPU all the time; the programs run in it only in the
        // samples: 6,000 runs of 100 ns (0.6 ms) per sample.
        let mut c = ServiceCosts::new(8, 100.0).sampled(Duration::from_secs(60));
        let t = |runs: u64| Timed {
            ns: 100 * runs,
            runs,
            clock_ns: 0,
        };
        let mut all = 0;
        let mut timed = 0;
        let mut shares = Vec::new();
        for i in 1..=60u64 {
            let el = Duration::from_millis(5_000 * i + 10);
            // The reading after each sample's second carries its runs,
            // from the first sample at 60 s (the server was not seen
            // before: no run in its context).
            if i % 12 == 1 && i > 1 {
                all += 6_000;
                timed += 600;
            }
            let kernel = Some((100 * all, all));
            // In the programs' map from its first timed run on.
            let map = if timed > 0 {
                vec![(7, t(timed))]
            } else {
                Vec::new()
            };
            c.read(el, runs(all, kernel), &map, |_| {
                Some(stat("srv", 250 * i, 1))
            });
            let share = c.costs().first().and_then(|s| s.share);
            shares.push((i * 5, share));
        }
        // First read at 65 s: no share for a whole window (until 125 s).
        for &(at, share) in &shares {
            if at < 125 {
                assert_eq!(share, None, "{at} s: {shares:?}");
            }
        }
        // Then every window holds one sample's 0.6 ms against 30 s of CPU.
        for &(at, share) in shares.iter().filter(|(at, _)| *at >= 125) {
            let v = share.unwrap_or_else(|| panic!("{at} s: {shares:?}"));
            assert!((v - 0.6e-3 / 30.0).abs() < 1e-9, "{at} s: {v} ({shares:?})");
        }
    }

    proptest! {
        #[test]
        fn stat_parsing_never_panics(s in ".{0,200}") {
            let _ = ProcStat::parse(&s);
        }

        #[test]
        fn shares_are_never_negative(
            rows in proptest::collection::vec((0u32..5, 0u64..1_000_000, 0u64..1000, 0u64..3), 1..40)
        ) {
            let mut c = ServiceCosts::new(3, 100.0);
            for (i, (tgid, ns, ticks, start)) in rows.into_iter().enumerate() {
                let el = Duration::from_millis(500 * (i as u64 + 1));
                let r = runs(i as u64 * 1000, Some((ns, i as u64 * 150)));
                c.read(el, r, &[(tgid, Timed { ns, runs: ns / 100, clock_ns: 0 })], |_| {
                    Some(stat(&format!("p{tgid}"), ticks, start))
                });
            }
            for s in c.costs() {
                prop_assert!(s.bpf_s >= 0.0 && s.cpu_s >= 0.0);
                prop_assert!(s.share.is_none_or(|v| v >= 0.0));
            }
        }
    }
}
