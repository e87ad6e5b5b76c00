//! The syscall tracepoint's slow path, calibrated once the trace's window
//! has closed (so the traced command never waits for it).
//!
//! While any program is attached to raw_syscalls:sys_enter or sys_exit,
//! the kernel sends every syscall of every task on the machine through its
//! slow entry and exit path (the tracepoint work flag) and dispatches each
//! tracepoint to BPF; that costs more than the programs themselves on a VM,
//! and the kernel's BPF accounting sees none of it. So sockscope measures
//! it on itself after the trace's programs are detached: a tight loop of
//! getppid calls on the calling thread (sockscope never traces itself) with
//! no program attached, with sys_enter's, with both; and once with the
//! programs timing themselves, which gives what their filter runs cost in
//! that loop. Slow path per syscall = attached - untraced - filter runs.
//! Four rounds of four short batches per phase; each phase's least disturbed
//! batch gives the figure, the rounds the spread; 50-100 ms in all on a VM,
//! most of it the kernel attaching and detaching the programs. A run too
//! short for a per-event cost skips it (see `trace::finish`).

use std::time::{Duration, Instant};

use super::bpf::{ProgSplit, SyscallHook, Tracer};
use super::selfcost::{costs_since, split_program};
use crate::report::trace::SlowPath;

/// Up, down, up, down: re-attaching after a detach waits for an RCU grace
/// period (the kernel's tracepoint code, on a 1 -> 0 -> 1 transition), tens
/// of ms on a VM, so the rounds keep that to one cycle.
const ROUNDS: usize = 4;
const BATCHES: usize = 4;
/// Each batch runs about this long.
const BATCH: Duration = Duration::from_micros(400);

/// ns per call of `n` getppid calls in a row.
fn batch(n: u64) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: getppid has no arguments and cannot fail.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
    t0.elapsed().as_nanos() as f64 / n.max(1) as f64
}

/// After a detach: the kernel's deferred work (RCU callbacks freeing the
/// old tracepoint arrays, text patching) runs on this CPU first, outside
/// the timed batches, and the loop is warm again.
fn settle(n: u64) {
    std::thread::sleep(Duration::from_millis(1));
    batch(n);
}

/// The best of a few batches: a batch that was preempted or interrupted
/// measures the machine, not the path.
fn phase(n: u64) -> f64 {
    least((0..BATCHES).map(|_| batch(n)))
}

/// One round's figures, ns per getppid.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Round {
    /// No program attached.
    pub untraced: f64,
    /// sys_enter's program attached.
    pub enter_only: f64,
    /// Both attached (equal to enter_only in count-only mode).
    pub attached: f64,
    /// The programs' own run time per filtered getppid: (enter, exit).
    pub filter: Option<(f64, f64)>,
}

impl Round {
    /// Slow path per syscall: attached - untraced - the filter runs.
    pub fn slow(&self) -> f64 {
        let (fe, fx) = self.filter.unwrap_or((0.0, 0.0));
        self.attached - self.untraced - fe - fx
    }

    /// The sys_exit hook's share: attached - enter only - its filter run.
    pub fn slow_exit(&self) -> f64 {
        let fx = self.filter.map_or(0.0, |f| f.1);
        self.attached - self.enter_only - fx
    }
}

/// The smallest of `v` (not empty).
fn least(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::INFINITY, f64::min)
}

/// The report's figures from the rounds (not empty). Each phase's cost is
/// its least disturbed batch over all the rounds: noise (a preemption, an
/// interrupt, deferred work after a detach) only ever adds time, so the
/// smallest batch is the closest to the path's own cost, and taking it per
/// phase rather than per round keeps one disturbed phase from turning a
/// round's difference upside down. The per-round differences give the
/// spread, which always brackets the figure.
pub fn summarize(rounds: &[Round], has_exit: bool, calls: u64, took: Duration) -> SlowPath {
    let slow: Vec<f64> = rounds.iter().map(Round::slow).collect();
    let measured_filter = rounds.iter().all(|r| r.filter.is_some());
    let best = Round {
        untraced: least(rounds.iter().map(|r| r.untraced)),
        enter_only: least(rounds.iter().map(|r| r.enter_only)),
        attached: least(rounds.iter().map(|r| r.attached)),
        filter: rounds[0].filter,
    };
    let filter = best.filter.map_or(0.0, |(e, x)| e + x);
    let hooks = if has_exit {
        "sys_enter and sys_exit"
    } else {
        "sys_enter"
    };
    let ns_per_syscall = best.slow();
    SlowPath {
        ns_per_syscall,
        within_noise: ns_per_syscall <= 0.0,
        min_ns: least(slow.iter().copied()),
        max_ns: slow.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        exit_ns_per_syscall: has_exit.then(|| best.slow_exit()),
        untraced_ns_per_call: best.untraced,
        attached_ns_per_call: best.attached,
        filter_ns_per_call: filter,
        rounds: rounds.len() as u32,
        calls_per_batch: calls,
        took_ms: took.as_secs_f64() * 1e3,
        method: format!(
            "getppid loop in sockscope itself (untraced) after the trace: with no program, \
             with {hooks} attached{}; each phase the least disturbed of {} rounds x {BATCHES} \
             batches of {calls} calls",
            if measured_filter {
                ", less the programs' own filter runs measured in the same loop"
            } else {
                " (the programs' filter runs could not be measured and are included)"
            },
            rounds.len()
        ),
    }
}

/// The programs' run time per filtered getppid in the loop, with their own
/// timing on (None when BPF statistics are unavailable). The work per run
/// is read from this CPU's sums only (the calibration is pinned), so other
/// processes' filter runs elsewhere do not mix in, and taken from the best
/// batch; the share of what neither side times (see
/// [`split_program`]) is a per-run constant, taken from every CPU's runs.
fn filter_cost(tracer: &mut Tracer<'_>, n: u64, cpu: usize) -> Option<(f64, f64)> {
    let k0 = tracer.prog_costs()?;
    let g0 = tracer.split_sums();
    tracer.set_self_cost(true).ok()?;
    let mut batches = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let s0 = tracer.split_sums_on(cpu);
        batch(n);
        batches.push(tracer.split_sums_on(cpu).since(s0));
    }
    let _ = tracer.set_self_cost(false);
    let k = costs_since(&tracer.prog_costs()?, &k0);
    let g = tracer.split_sums().since(g0);
    let rest = |name: &str, own: &ProgSplit| -> f64 {
        let runs = own.traced_runs + own.filtered_runs;
        match k.iter().find(|c| c.name == name) {
            // The kernel's run time less the parts measured inside the
            // program: on a busy machine their own clock reads can be
            // disturbed past it, and a negative rest is that noise, not a
            // negative cost.
            Some(kc) if runs > 0 => (split_program(kc, own).residual_ns / runs as f64).max(0.0),
            _ => 0.0,
        }
    };
    let (rest_e, rest_x) = (rest("ss_sys_enter", &g.enter), rest("ss_sys_exit", &g.exit));
    batches
        .iter()
        .filter_map(|b| {
            let calls = b.enter.filtered_runs;
            if calls == 0 {
                return None;
            }
            let fe = filtered_work(&b.enter)? + rest_e;
            let fx = if b.exit.filtered_runs > 0 {
                (filtered_work(&b.exit)? + rest_x) * b.exit.filtered_runs as f64 / calls as f64
            } else {
                0.0
            };
            Some((fe, fx))
        })
        .min_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)))
}

/// A program's filtered work per filtered run, its clock read taken out.
fn filtered_work(p: &ProgSplit) -> Option<f64> {
    let runs = p.traced_runs + p.filtered_runs;
    (p.filtered_runs > 0 && runs > 0).then(|| {
        let c = p.clock_ns as f64 / runs as f64;
        p.filtered_ns as f64 / p.filtered_runs as f64 - c
    })
}

/// Pins the calling thread to the CPU it is on until dropped (the old
/// affinity is restored), so the loop neither migrates nor mixes its runs
/// with another CPU's.
struct Pinned {
    cpu: usize,
    old: Option<libc::cpu_set_t>,
}

impl Pinned {
    fn here() -> Option<Self> {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return None;
        }
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls get
        // its exact size and act on the calling thread (pid 0).
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            let have_old =
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) == 0;
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            let pinned =
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0;
            Some(Self {
                cpu: cpu as usize,
                old: (have_old && pinned).then_some(old),
            })
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            // SAFETY: restores the set read in `here`, for this thread.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
        }
    }
}

/// Measures the slow path. Must run while the trace's own syscall
/// programs are detached (before [`Tracer::attach`] or after
/// [`Tracer::detach`]): it attaches and detaches them itself. Returns why
/// when it could not.
///
/// Attaching and detaching are the slow part (each changes the kernel's
/// code and walks every thread), so the rounds zig-zag: an even round goes
/// untraced, enter only, both; an odd one comes back down. The filter runs
/// are measured once, in the first round (turning BPF statistics on and
/// off patches the kernel's code too).
pub fn slow_path(tracer: &mut Tracer<'_>) -> Result<SlowPath, String> {
    let started = Instant::now();
    let pinned = Pinned::here();
    batch(2000); // warm the path
    let probe = batch(2000).max(1.0);
    let n = ((BATCH.as_nanos() as f64 / probe) as u64).clamp(200, 20_000);
    let has_exit = tracer.has_exit_hook();
    let attach = |tracer: &Tracer<'_>, hook| {
        tracer
            .attach_syscall_hook(hook)
            .map_err(|e| format!("{e:#}"))
    };
    let mut enter = None;
    let mut exit = None;
    let mut filter = None;
    let mut rounds = Vec::with_capacity(ROUNDS);
    for r in 0..ROUNDS {
        let mut round = Round::default();
        if r % 2 == 0 {
            settle(n);
            round.untraced = phase(n);
            enter = Some(attach(tracer, SyscallHook::Enter)?);
            round.enter_only = phase(n);
            if has_exit {
                exit = Some(attach(tracer, SyscallHook::Exit)?);
                round.attached = phase(n);
            } else {
                round.attached = round.enter_only;
            }
            if r == 0 {
                filter = pinned.as_ref().and_then(|p| filter_cost(tracer, n, p.cpu));
            }
        } else {
            round.attached = phase(n);
            if has_exit {
                drop(exit.take());
                settle(n);
                round.enter_only = phase(n);
            } else {
                round.enter_only = round.attached;
            }
            drop(enter.take());
            settle(n);
            round.untraced = phase(n);
        }
        rounds.push(round);
    }
    drop(exit);
    drop(enter);
    drop(pinned);
    for r in &mut rounds {
        r.filter = filter;
    }
    Ok(summarize(&rounds, has_exit, n, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(untraced: f64, enter_only: f64, attached: f64, filter: Option<(f64, f64)>) -> Round {
        Round {
            untraced,
            enter_only,
            attached,
            filter,
        }
    }

    #[test]
    fn slow_path_is_attached_less_untraced_less_the_filter_runs() {
        let r = round(100.0, 220.0, 300.0, Some((20.0, 15.0)));
        assert_eq!(r.slow(), 165.0);
        assert_eq!(r.slow_exit(), 65.0);
        let r = round(100.0, 220.0, 300.0, None);
        assert_eq!(r.slow(), 200.0);
    }

    #[test]
    fn summary_takes_each_phase_at_its_least_disturbed_and_reports_the_spread() {
        let rounds = [
            round(100.0, 220.0, 300.0, Some((20.0, 15.0))), // 165
            round(110.0, 230.0, 330.0, Some((20.0, 15.0))), // 185
            round(100.0, 200.0, 280.0, Some((20.0, 15.0))), // 145
        ];
        let s = summarize(&rounds, true, 1000, Duration::from_millis(90));
        // 280 - 100 - 35; sys_exit's part 280 - 200 - 15.
        assert_eq!(s.ns_per_syscall, 145.0);
        assert!(!s.within_noise);
        assert_eq!((s.min_ns, s.max_ns), (145.0, 185.0));
        assert_eq!(s.exit_ns_per_syscall, Some(65.0));
        assert_eq!(s.untraced_ns_per_call, 100.0);
        assert_eq!(s.attached_ns_per_call, 280.0);
        assert_eq!(s.filter_ns_per_call, 35.0);
        assert_eq!(s.rounds, 3);
        assert!(
            s.method.contains("less the programs' own filter runs"),
            "{}",
            s.method
        );
        let s = summarize(&rounds[..2], false, 1000, Duration::ZERO);
        assert_eq!(s.ns_per_syscall, 165.0);
        assert_eq!(s.exit_ns_per_syscall, None);
        assert!(s.method.contains("with sys_enter attached"), "{}", s.method);
    }

    #[test]
    fn a_disturbed_phase_does_not_turn_the_figure_upside_down() {
        // Two rounds whose untraced batches were all disturbed (deferred
        // work after a detach): per round the path would cost less than
        // nothing, but the clean rounds' phases give its cost.
        let f = Some((25.0, 0.0));
        let rounds = [
            round(380.0, 250.0, 275.0, f), // -130
            round(120.0, 240.0, 270.0, f), // 125
            round(390.0, 250.0, 280.0, f), // -135
            round(125.0, 245.0, 272.0, f), // 122
        ];
        let s = summarize(&rounds, false, 1000, Duration::ZERO);
        assert_eq!(s.ns_per_syscall, 270.0 - 120.0 - 25.0);
        assert!(!s.within_noise);
        assert!(s.min_ns <= s.ns_per_syscall && s.ns_per_syscall <= s.max_ns);
        // Noise everywhere: said, not charged as a negative cost.
        let rounds = [round(300.0, 280.0, 290.0, f), round(310.0, 285.0, 295.0, f)];
        let s = summarize(&rounds, false, 1000, Duration::ZERO);
        assert!(s.within_noise, "{s:?}");
        assert!(s.ns_per_syscall <= 0.0);
    }
}
