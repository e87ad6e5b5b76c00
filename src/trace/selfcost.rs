//! Measuring the tracer's own cost without paying for the measurement all
//! the time.
//!
//! The kernel's per-program run-time accounting (BPF_ENABLE_STATS) adds two
//! clock reads to every program run on the machine, about 40 ns each on
//! this class of VM, which would double the overhead being measured. So it
//! is switched on for short slices (10 ms of every 200 ms, the first at the
//! start of the window), together with the syscall programs' own timing
//! (src/bpf/syscalls.h, `ss_prog_cost`), which splits their run time into
//! runs on the traced events and runs that only filter everyone else's
//! syscalls out. The traced part is expressed per event and scaled by the
//! exact number of events in the window (right for bursty workloads, where
//! a time-based scaling would not be); the filtered part is expressed per
//! filtered run and scaled by time (nothing counts other processes'
//! syscalls outside the slices: that would cost them a counter each).

use std::time::{Duration, Instant};

use super::bpf::{ProgCost, ProgSplit, SplitSums, Tracer};
use crate::report::trace::{
    BpfPart, BpfSplit, CostAttribution, ProgramCost, SlowPath, SplitCheck, TracerCost,
};

const PERIOD: Duration = Duration::from_millis(200);
const SLICE: Duration = Duration::from_millis(10);
/// Fewer sampled events than this give no per-event figure.
const MIN_EVENTS: u64 = 100;
/// Clock reads per timed run inside the kernel's run-time window: the
/// programs' three, plus about one of the kernel's own two (the end of the
/// first and the start of the second fall inside its window).
const CLOCK_READS_PER_RUN: f64 = 4.0;

/// Duty-cycles BPF run-time accounting over the window.
pub struct Sampler {
    unavailable: Option<String>,
    on_since: Option<(Instant, u64)>,
    next_toggle: Instant,
    sampled: Duration,
    sampled_events: u64,
    /// The programs' own sums before the window (a calibration used them).
    base: SplitSums,
    /// The kernel's per-program figures summed over this sampler's slices
    /// only: read at each slice's start and end, since the kernel's
    /// accounting is global and another tracer (or kernel.bpf_stats_enabled)
    /// may have it on at other times. None once a read failed.
    kernel: Option<Vec<ProgCost>>,
    slice_kernel0: Option<Vec<ProgCost>>,
}

/// What [`Sampler::finish`] needs to know about the window.
#[derive(Clone, Debug, Default)]
pub struct WindowFacts {
    /// Traced syscall events (exact).
    pub events: u64,
    /// Length of the window.
    pub window: Duration,
    /// Lifecycle records lost.
    pub drops: u64,
    /// CPU time of the traced processes over the window, s.
    pub target_cpu_s: Option<f64>,
    /// Busy CPU of the whole machine over the window, s.
    pub machine_cpu_s: Option<f64>,
    /// The slow-path calibration.
    pub slow_path: Option<SlowPath>,
}

impl Sampler {
    /// Starts the first slice now.
    pub fn start(tracer: &mut Tracer<'_>) -> Self {
        let now = Instant::now();
        let mut s = Self {
            unavailable: None,
            on_since: None,
            next_toggle: now,
            sampled: Duration::ZERO,
            sampled_events: 0,
            base: tracer.split_sums(),
            kernel: Some(Vec::new()),
            slice_kernel0: None,
        };
        s.tick(tracer, now);
        s
    }

    /// When the next slice starts or ends (None once accounting proved
    /// unavailable).
    pub fn deadline(&self) -> Option<Instant> {
        self.unavailable.is_none().then_some(self.next_toggle)
    }

    fn end_slice(&mut self, tracer: &mut Tracer<'_>, now: Instant) -> Option<Instant> {
        let (since, events0) = self.on_since.take()?;
        let _ = tracer.set_self_cost(false);
        let k = tracer.prog_costs();
        self.kernel = match (self.kernel.take(), self.slice_kernel0.take(), k) {
            (Some(sum), Some(k0), Some(k1)) => Some(add_costs(sum, &costs_since(&k1, &k0))),
            _ => None,
        };
        self.sampled += now - since;
        self.sampled_events += tracer.events_counted().saturating_sub(events0);
        Some(since)
    }

    /// Switches accounting on or off if a slice boundary has passed.
    pub fn tick(&mut self, tracer: &mut Tracer<'_>, now: Instant) {
        if self.unavailable.is_some() || now < self.next_toggle {
            return;
        }
        if let Some(since) = self.end_slice(tracer, now) {
            self.next_toggle = since + PERIOD;
        } else {
            let events0 = tracer.events_counted();
            self.slice_kernel0 = tracer.prog_costs();
            match tracer.set_self_cost(true) {
                Ok(()) => {
                    self.on_since = Some((now, events0));
                    self.next_toggle = now + SLICE;
                }
                Err(why) => self.unavailable = Some(why),
            }
        }
        if self.next_toggle <= now {
            // Slept past a whole period (a stalled loop): resync from now.
            self.next_toggle = now;
        }
    }

    /// The syscall programs' own run time so far, from their timing in the
    /// sampled slices: ns per traced event (enter + exit, one clock read
    /// each taken out) and ns per filtered run. None until slices have seen
    /// enough runs, or when accounting is unavailable.
    pub fn so_far(&self, tracer: &mut Tracer<'_>) -> (Option<f64>, Option<f64>) {
        if self.unavailable.is_some() {
            return (None, None);
        }
        let split = tracer.split_sums().since(self.base);
        let per = |runs: u64, ns: u64, clock: f64| {
            (runs >= MIN_EVENTS).then(|| (ns as f64 / runs as f64 - clock).max(0.0))
        };
        let clock = |p: &super::bpf::ProgSplit| {
            let runs = p.traced_runs + p.filtered_runs;
            if runs == 0 {
                0.0
            } else {
                p.clock_ns as f64 / runs as f64
            }
        };
        let enter = per(
            split.enter.traced_runs,
            split.enter.traced_ns,
            clock(&split.enter),
        );
        let exit = per(
            split.exit.traced_runs,
            split.exit.traced_ns,
            clock(&split.exit),
        );
        let event = match (enter, exit, tracer.has_exit_hook()) {
            (Some(a), Some(b), true) => Some(a + b),
            (Some(a), _, false) => Some(a),
            _ => None,
        };
        let filtered = per(
            split.enter.filtered_runs,
            split.enter.filtered_ns,
            clock(&split.enter),
        );
        (event, filtered)
    }

    /// Ends sampling and reads the sums the figures are built from, so that
    /// whatever runs the programs afterwards (the slow-path calibration)
    /// is not counted in them.
    pub fn stop(mut self, tracer: &mut Tracer<'_>) -> Stopped {
        self.end_slice(tracer, Instant::now());
        let split = tracer.split_sums().since(self.base);
        Stopped {
            sampler: self,
            split,
        }
    }
}

/// A sampler whose window is over, with its sums read.
pub struct Stopped {
    sampler: Sampler,
    split: SplitSums,
}

impl Stopped {
    /// True when the slices saw enough traced events for a per-event cost
    /// (the only figure the slow-path calibration serves).
    pub fn per_event_measurable(&self) -> bool {
        self.sampler.unavailable.is_none()
            && self.sampler.kernel.is_some()
            && self.sampler.sampled_events >= MIN_EVENTS
    }

    /// Builds the cost figures for the window. Also returns why a figure
    /// is missing.
    pub fn finish(self, facts: &WindowFacts) -> (TracerCost, Option<String>) {
        let Self { sampler, split } = self;
        let base = TracerCost {
            events: facts.events,
            ringbuf_drops: facts.drops,
            slow_path: facts.slow_path.clone(),
            ..Default::default()
        };
        if let Some(why) = sampler.unavailable {
            return (base, Some(why));
        }
        let Some(costs) = sampler.kernel else {
            return (base, Some("could not read BPF program statistics".into()));
        };
        let sample = Sample {
            duration: sampler.sampled,
            events: sampler.sampled_events,
        };
        let cost = cost_figures(&costs, &split, sample, facts);
        let why = cost.ns_per_event.is_none().then(|| {
            format!(
                "the sampled slices ({:.0} ms) saw only {} traced syscalls, too few for a \
                 per-event figure",
                sampler.sampled.as_secs_f64() * 1e3,
                sampler.sampled_events
            )
        });
        (cost, why)
    }
}

/// Each program's counters minus its counters in `earlier` (matched by name).
pub fn costs_since(now: &[ProgCost], earlier: &[ProgCost]) -> Vec<ProgCost> {
    now.iter()
        .map(|c| {
            let e = earlier.iter().find(|e| e.name == c.name);
            ProgCost {
                name: c.name,
                run_cnt: c.run_cnt.saturating_sub(e.map_or(0, |e| e.run_cnt)),
                run_time_ns: c.run_time_ns.saturating_sub(e.map_or(0, |e| e.run_time_ns)),
            }
        })
        .collect()
}

/// `sum` plus `more`, program by program (matched by name).
pub fn add_costs(mut sum: Vec<ProgCost>, more: &[ProgCost]) -> Vec<ProgCost> {
    for m in more {
        match sum.iter_mut().find(|c| c.name == m.name) {
            Some(c) => {
                c.run_cnt += m.run_cnt;
                c.run_time_ns += m.run_time_ns;
            }
            None => sum.push(m.clone()),
        }
    }
    sum
}

/// What the accounting slices covered.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Total time accounting was on.
    pub duration: Duration,
    /// Traced events during that time.
    pub events: u64,
}

/// One syscall program's run time per run, split, from its own timing and
/// the kernel's figure over the same slices (see [`split_program`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProgFigures {
    /// Per run on a traced event, ns (None: no such run was timed).
    pub traced_per_run: Option<f64>,
    /// Per filtered run, ns (None: no such run was timed).
    pub filtered_per_run: Option<f64>,
    /// Traced work between the clock reads, one read's cost taken out, ns.
    pub traced_ns: f64,
    /// Filtered work likewise, ns.
    pub filtered_ns: f64,
    /// One clock read, ns.
    pub clock_per_read: f64,
    /// The measurement's clock reads inside the kernel's figure, ns.
    pub clock_ns: f64,
    /// Kernel figure - traced - filtered - clock: entry, return, flag test
    /// and stores, shared equally by every run, ns.
    pub residual_ns: f64,
}

/// Splits one program's kernel-measured run time (`kernel`, over the
/// slices) with its own timing (`own`, over the same slices).
///
/// Each timed run read the clock at t0, t1 (back to back) and t2, so
/// t1 - t0 is one read and (t2 - t1) - (t1 - t0) is the run's work. The
/// kernel's window around the run also holds those three reads and about
/// one of its own: they are taken out, and what is left besides the work
/// (the entry and return, the flag test, the stores) is shared equally by
/// every run, since every run pays it once.
pub fn split_program(kernel: &ProgCost, own: &ProgSplit) -> ProgFigures {
    let runs = own.traced_runs + own.filtered_runs;
    if runs == 0 {
        return ProgFigures::default();
    }
    let c = own.clock_ns as f64 / runs as f64;
    let traced = own.traced_ns as f64 - c * own.traced_runs as f64;
    let filtered = own.filtered_ns as f64 - c * own.filtered_runs as f64;
    let clock = CLOCK_READS_PER_RUN * c * runs as f64;
    let residual = kernel.run_time_ns as f64 - traced - filtered - clock;
    let per_run_rest = residual / runs as f64;
    let per = |ns: f64, n: u64| (n > 0).then(|| (ns / n as f64 + per_run_rest).max(0.0));
    ProgFigures {
        traced_per_run: per(traced, own.traced_runs),
        filtered_per_run: per(filtered, own.filtered_runs),
        traced_ns: traced,
        filtered_ns: filtered,
        clock_per_read: c,
        clock_ns: clock,
        residual_ns: residual,
    }
}

fn program_rows(costs: &[ProgCost]) -> Vec<ProgramCost> {
    costs
        .iter()
        .map(|c| ProgramCost {
            name: c.name.into(),
            run_count: c.run_cnt,
            run_time_ns: c.run_time_ns,
            ns_per_run: if c.run_cnt > 0 {
                c.run_time_ns as f64 / c.run_cnt as f64
            } else {
                0.0
            },
        })
        .collect()
}

/// Cost figures for the window from the slices' figures: the split parts
/// (traced scaled by the exact event count, filtered and lifecycle by
/// time), their sum, and who paid what (with the slow path).
pub fn cost_figures(
    costs: &[ProgCost],
    split: &SplitSums,
    sample: Sample,
    facts: &WindowFacts,
) -> TracerCost {
    let events = facts.events;
    let window = facts.window;
    let mut out = TracerCost {
        events,
        programs: program_rows(costs),
        sampled_fraction: Some(if window.is_zero() {
            1.0
        } else {
            (sample.duration.as_secs_f64() / window.as_secs_f64()).min(1.0)
        }),
        sampled_events: Some(sample.events),
        ringbuf_drops: facts.drops,
        slow_path: facts.slow_path.clone(),
        ..Default::default()
    };
    if sample.events < MIN_EVENTS {
        return out;
    }
    let kernel = |name: &str| {
        costs
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .unwrap_or(ProgCost {
                name: "",
                run_cnt: 0,
                run_time_ns: 0,
            })
    };
    let (k_enter, k_exit) = (kernel("ss_sys_enter"), kernel("ss_sys_exit"));
    let timed = split.enter.traced_runs + split.enter.filtered_runs;
    if timed == 0 {
        // The programs' own timing saw nothing (an object without it):
        // the kernel's figure per sampled event, as before the split.
        let sampled_ns: u64 = costs.iter().map(|c| c.run_time_ns).sum();
        let per = sampled_ns as f64 / sample.events as f64;
        out.ns_per_event = Some(per);
        out.bpf_time_ns = Some((per * events as f64).round() as u64);
        out.cpu_share = Some(per * events as f64 / window.as_nanos().max(1) as f64);
        return out;
    }
    let enter = split_program(&k_enter, &split.enter);
    let exit = split_program(&k_exit, &split.exit);
    let has_exit = k_exit.run_cnt > 0 || split.exit != ProgSplit::default();
    // Time scaling for what is not counted exactly over the window.
    let scale = if sample.duration.is_zero() {
        0.0
    } else {
        window.as_secs_f64() / sample.duration.as_secs_f64()
    };

    let traced_enter = enter.traced_per_run.unwrap_or(0.0);
    let traced_exit = has_exit.then(|| exit.traced_per_run.unwrap_or(0.0));
    let traced_per = traced_enter + traced_exit.unwrap_or(0.0);
    let traced = BpfPart {
        syscalls: events,
        ns_per_syscall: traced_per,
        enter_ns_per_run: traced_enter,
        exit_ns_per_run: traced_exit,
        total_ns: (traced_per * events as f64).round() as u64,
    };
    let f_enter = enter.filtered_per_run.unwrap_or(0.0);
    let f_exit = has_exit.then(|| exit.filtered_per_run.unwrap_or(0.0));
    let others = (split.enter.filtered_runs as f64 * scale).round() as u64;
    let filtered_total = (f_enter * split.enter.filtered_runs as f64
        + f_exit.unwrap_or(0.0) * split.exit.filtered_runs as f64)
        * scale;
    let filtered = BpfPart {
        syscalls: others,
        ns_per_syscall: if others > 0 {
            filtered_total / others as f64
        } else {
            0.0
        },
        enter_ns_per_run: f_enter,
        exit_ns_per_run: f_exit,
        total_ns: filtered_total.round() as u64,
    };
    // The fork/exit/exec programs: the kernel's figure less its own clock
    // read per run, scaled by time (they run for every task's fork/exit).
    let lifecycle: f64 = costs
        .iter()
        .filter(|c| c.name != "ss_sys_enter" && c.name != "ss_sys_exit")
        .map(|c| (c.run_time_ns as f64 - enter.clock_per_read * c.run_cnt as f64).max(0.0))
        .sum::<f64>()
        * scale;
    let bpf_time = traced.total_ns + filtered.total_ns + lifecycle.round() as u64;
    out.bpf_time_ns = Some(bpf_time);
    out.ns_per_event = Some(if events > 0 {
        bpf_time as f64 / events as f64
    } else {
        0.0
    });
    out.cpu_share = Some(bpf_time as f64 / window.as_nanos().max(1) as f64);
    let runs_timed = |p: &ProgSplit| p.traced_runs + p.filtered_runs;
    let sampled = SplitCheck {
        kernel_run_time_ns: k_enter.run_time_ns + k_exit.run_time_ns,
        kernel_runs: k_enter.run_cnt + k_exit.run_cnt,
        timed_runs: runs_timed(&split.enter) + runs_timed(&split.exit),
        traced_ns: (enter.traced_ns + exit.traced_ns).round().max(0.0) as u64,
        filtered_ns: (enter.filtered_ns + exit.filtered_ns).round().max(0.0) as u64,
        clock_ns_per_read: (split.enter.clock_ns + split.exit.clock_ns) as f64
            / (runs_timed(&split.enter) + runs_timed(&split.exit)).max(1) as f64,
        clock_ns: (enter.clock_ns + exit.clock_ns).round() as u64,
        residual_ns: (enter.residual_ns + exit.residual_ns).round() as i64,
    };
    out.attributed = facts
        .slow_path
        .as_ref()
        .map(|sp| attribute(&traced, &filtered, sp, facts, split, scale, &exit));
    out.bpf_split = Some(BpfSplit {
        traced,
        filtered,
        lifecycle_ns: lifecycle.round() as u64,
        sampled,
    });
    out
}

/// Who paid what: the traced processes their events' BPF runs and the slow
/// path of their syscalls, everyone else the filter runs and the slow path
/// of theirs; and what dropping the sys_exit hook (`--count-only`) saves.
fn attribute(
    traced: &BpfPart,
    filtered: &BpfPart,
    sp: &SlowPath,
    facts: &WindowFacts,
    split: &SplitSums,
    scale: f64,
    exit: &ProgFigures,
) -> CostAttribution {
    // A calibration lost in noise can come out below zero: nothing is paid.
    let slow = sp.ns_per_syscall.max(0.0);
    let slow_target = (slow * traced.syscalls as f64).round() as u64;
    let slow_others = (slow * filtered.syscalls as f64).round() as u64;
    let target = traced.total_ns + slow_target;
    let collateral = filtered.total_ns + slow_others;
    let (saves_target, saves_others) = match (traced.exit_ns_per_run, sp.exit_ns_per_syscall) {
        (Some(x), Some(slow_exit)) => {
            let slow_exit = slow_exit.clamp(0.0, slow);
            let t = (x + slow_exit) * traced.syscalls as f64;
            let o = exit.filtered_per_run.unwrap_or(0.0) * split.exit.filtered_runs as f64 * scale
                + slow_exit * filtered.syscalls as f64;
            (Some(t.round() as u64), Some(o.round() as u64))
        }
        _ => (None, None),
    };
    CostAttribution {
        slow_path_target_ns: slow_target,
        slow_path_others_ns: slow_others,
        target_ns: target,
        target_cpu_share: facts
            .target_cpu_s
            .filter(|c| *c > 0.0)
            .map(|c| target as f64 / (c * 1e9)),
        collateral_ns: collateral,
        machine_cpu_s: facts.machine_cpu_s,
        collateral_machine_share: facts
            .machine_cpu_s
            .filter(|c| *c > 0.0)
            .map(|c| collateral as f64 / (c * 1e9)),
        count_only_saves_target_ns: saves_target,
        count_only_saves_others_ns: saves_others,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program's own sums for runs of `traced_body` / `filtered_body` ns
    /// of work, with `clock` ns per clock read; and the kernel's figure for
    /// the same runs with `rest` ns of entry/return per run.
    fn prog(
        name: &'static str,
        (traced, traced_body): (u64, u64),
        (filtered, filtered_body): (u64, u64),
        clock: u64,
        rest: u64,
    ) -> (ProgCost, ProgSplit) {
        let runs = traced + filtered;
        let own = ProgSplit {
            traced_runs: traced,
            traced_ns: traced * (traced_body + clock),
            filtered_runs: filtered,
            filtered_ns: filtered * (filtered_body + clock),
            clock_ns: runs * clock,
        };
        let kernel = ProgCost {
            name,
            run_cnt: runs,
            run_time_ns: traced * traced_body
                + filtered * filtered_body
                + runs * (4 * clock + rest),
        };
        (kernel, own)
    }

    fn sample_data() -> (Vec<ProgCost>, SplitSums) {
        let (ke, enter) = prog("ss_sys_enter", (100, 40), (900, 10), 20, 5);
        let (kx, exit) = prog("ss_sys_exit", (100, 60), (900, 8), 20, 5);
        let fork = ProgCost {
            name: "ss_fork",
            run_cnt: 10,
            run_time_ns: 1000,
        };
        (vec![ke, kx, fork], SplitSums { enter, exit })
    }

    fn facts(slow: Option<SlowPath>) -> WindowFacts {
        WindowFacts {
            events: 10_000,
            window: Duration::from_secs(2),
            drops: 0,
            target_cpu_s: Some(0.1),
            machine_cpu_s: Some(1.0),
            slow_path: slow,
        }
    }

    const SAMPLE: Sample = Sample {
        duration: Duration::from_millis(100),
        events: 100,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn one_program_splits_into_work_clock_and_an_equal_share_of_the_rest() {
        let (k, own) = prog("ss_sys_enter", (100, 40), (900, 10), 20, 5);
        let f = split_program(&k, &own);
        assert!(close(f.clock_per_read, 20.0), "{f:?}");
        assert!(
            close(f.traced_ns, 4000.0) && close(f.filtered_ns, 9000.0),
            "{f:?}"
        );
        assert!(close(f.clock_ns, 80_000.0), "{f:?}");
        assert!(close(f.residual_ns, 5000.0), "{f:?}");
        assert!(close(f.traced_per_run.unwrap(), 45.0), "{f:?}");
        assert!(close(f.filtered_per_run.unwrap(), 15.0), "{f:?}");
        // The parts, the clock reads and the rest add up to the kernel's
        // figure exactly.
        let parts = f.traced_per_run.unwrap() * 100.0 + f.filtered_per_run.unwrap() * 900.0;
        assert!(close(parts + f.clock_ns, k.run_time_ns as f64));
        // No filtered run timed: no per-run figure for it.
        let (k, own) = prog("ss_sys_enter", (100, 40), (0, 0), 20, 5);
        assert_eq!(split_program(&k, &own).filtered_per_run, None);
        assert_eq!(
            split_program(&k, &ProgSplit::default()),
            ProgFigures::default()
        );
    }

    #[test]
    fn traced_part_scales_by_events_filtered_by_time() {
        let (costs, split) = sample_data();
        let c = cost_figures(&costs, &split, SAMPLE, &facts(None));
        let s = c.bpf_split.as_ref().expect("split");
        assert!(close(s.traced.enter_ns_per_run, 45.0), "{s:?}");
        assert!(close(s.traced.exit_ns_per_run.unwrap(), 65.0), "{s:?}");
        assert!(close(s.traced.ns_per_syscall, 110.0), "{s:?}");
        assert_eq!(s.traced.syscalls, 10_000);
        assert_eq!(s.traced.total_ns, 1_100_000);
        // 900 filtered runs in 100 ms of a 2 s window.
        assert_eq!(s.filtered.syscalls, 18_000);
        assert_eq!(s.filtered.total_ns, 504_000);
        assert!(close(s.filtered.ns_per_syscall, 28.0), "{s:?}");
        // ss_fork: 1000 ns less one clock read per run, scaled by time.
        assert_eq!(s.lifecycle_ns, 16_000);
        // The old fields are the sum of the parts.
        assert_eq!(c.bpf_time_ns, Some(1_620_000));
        assert!(close(c.ns_per_event.unwrap(), 162.0));
        assert!(close(c.cpu_share.unwrap(), 1_620_000.0 / 2e9));
        assert!(close(c.sampled_fraction.unwrap(), 0.05));
        // The check adds up to the kernel's figure of both programs.
        let k = &s.sampled;
        assert_eq!(k.kernel_run_time_ns, 196_200);
        assert_eq!(k.kernel_runs, 2000);
        assert_eq!(k.timed_runs, 2000);
        assert_eq!(
            (k.traced_ns, k.filtered_ns, k.clock_ns),
            (10_000, 16_200, 160_000)
        );
        assert_eq!(k.residual_ns, 10_000);
        assert!(close(k.clock_ns_per_read, 20.0));
        assert_eq!(
            k.traced_ns + k.filtered_ns + k.clock_ns + k.residual_ns as u64,
            k.kernel_run_time_ns
        );
        assert_eq!(c.attributed, None, "no slow path, no attribution");
        assert!((c.programs[1].ns_per_run - 98.2).abs() < 1e-9);
    }

    fn slow(ns: f64, exit: f64) -> SlowPath {
        SlowPath {
            ns_per_syscall: ns,
            exit_ns_per_syscall: Some(exit),
            ..Default::default()
        }
    }

    #[test]
    fn attribution_adds_the_slow_path_to_each_side() {
        let (costs, split) = sample_data();
        let c = cost_figures(&costs, &split, SAMPLE, &facts(Some(slow(100.0, 30.0))));
        let a = c.attributed.expect("attributed");
        assert_eq!(a.slow_path_target_ns, 1_000_000);
        assert_eq!(a.slow_path_others_ns, 1_800_000);
        assert_eq!(a.target_ns, 2_100_000);
        assert!(close(a.target_cpu_share.unwrap(), 0.021));
        assert_eq!(a.collateral_ns, 2_304_000);
        assert!(close(a.collateral_machine_share.unwrap(), 0.002304));
        // --count-only: sys_exit's runs and its share of the slow path.
        assert_eq!(a.count_only_saves_target_ns, Some(950_000));
        assert_eq!(a.count_only_saves_others_ns, Some(234_000 + 540_000));
    }

    #[test]
    fn a_negative_calibration_charges_nothing() {
        let (costs, split) = sample_data();
        let c = cost_figures(&costs, &split, SAMPLE, &facts(Some(slow(-7.0, -3.0))));
        let a = c.attributed.unwrap();
        assert_eq!((a.slow_path_target_ns, a.slow_path_others_ns), (0, 0));
        assert_eq!(a.target_ns, 1_100_000);
        assert_eq!(a.count_only_saves_target_ns, Some(650_000));
    }

    #[test]
    fn count_only_has_no_exit_part() {
        let (costs, split) = sample_data();
        let costs: Vec<ProgCost> = costs
            .into_iter()
            .filter(|c| c.name != "ss_sys_exit")
            .collect();
        let split = SplitSums {
            enter: split.enter,
            exit: ProgSplit::default(),
        };
        let sp = SlowPath {
            ns_per_syscall: 100.0,
            ..Default::default()
        };
        let c = cost_figures(&costs, &split, SAMPLE, &facts(Some(sp)));
        let s = c.bpf_split.unwrap();
        assert_eq!(s.traced.exit_ns_per_run, None);
        assert!(close(s.traced.ns_per_syscall, 45.0));
        assert_eq!(s.filtered.exit_ns_per_run, None);
        let a = c.attributed.unwrap();
        assert_eq!(a.count_only_saves_target_ns, None);
    }

    #[test]
    fn without_own_timing_the_kernel_figure_per_event_is_kept() {
        let (costs, _) = sample_data();
        let c = cost_figures(&costs, &SplitSums::default(), SAMPLE, &facts(None));
        assert!(close(c.ns_per_event.unwrap(), 197_200.0 / 100.0));
        assert_eq!(c.bpf_split, None);
    }

    #[test]
    fn too_few_sampled_events_give_no_figure() {
        let (costs, split) = sample_data();
        let few = Sample {
            duration: Duration::from_millis(100),
            events: 10,
        };
        let c = cost_figures(&costs, &split, few, &facts(None));
        assert_eq!(c.ns_per_event, None);
        assert_eq!(c.bpf_time_ns, None);
        assert_eq!(c.bpf_split, None);
        assert_eq!(c.programs.len(), 3);
    }

    #[test]
    fn costs_since_subtracts_by_name() {
        let now = [ProgCost {
            name: "ss_sys_enter",
            run_cnt: 10,
            run_time_ns: 500,
        }];
        let before = [ProgCost {
            name: "ss_sys_enter",
            run_cnt: 4,
            run_time_ns: 200,
        }];
        let d = costs_since(&now, &before);
        assert_eq!((d[0].run_cnt, d[0].run_time_ns), (6, 300));
        assert_eq!(costs_since(&now, &[])[0].run_cnt, 10);
        let sum = add_costs(Vec::new(), &d);
        let sum = add_costs(sum, &d);
        assert_eq!((sum[0].run_cnt, sum[0].run_time_ns), (12, 600));
    }
}
