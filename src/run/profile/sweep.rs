//! A profile in steps (`--sweep`, `--find-capacity`) on one live target:
//! launched (or found) once, then one window per step ([`Live::window`]:
//! attach, load at a constant rate, finish, judge), each turned into a
//! point; the last step's full report is the artifact's body, with the
//! steps on top (`sweep`, `capacity`).
//!
//! Bounded: no step starts that would end past `--max-duration` (the
//! sweep is then marked partial, the search reports its bracket). A stop
//! signal ends the current step, which is dropped; the steps finished
//! before are kept in an artifact marked partial, and the run exits
//! 128+N (Ctrl-C: 130). Without a finished step nothing is written.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::loadline::LoadLine;
use super::measure::{Live, block_signals, preflight};
use super::search::{self, Next, Outcome, Verdict};
use super::spec::{ProfileSpec, StepPlan, Steps, Workload};
use super::watch::check_signals;
use crate::error::Exit;
use crate::load::schedule::limited::{self, GeneratorSigns};
use crate::report::load::LatencyRecord;
use crate::report::profile::{ProfileReport, SWEEP_SCHEMA_VERSION};
use crate::report::sweep::{self, Capacity, Sweep, SweepPoint, Tried};
use crate::run::exit::{self, fail};
use crate::signals::Signals;

/// A first guess of what a step costs beyond its load window (attach,
/// connect, drain, finish), before one was measured.
const FIRST_OVERHEAD: Duration = Duration::from_secs(3);

/// A finished run in steps: the report to write, and the stop signal that
/// cut it short (the run then exits 128+N once it is written).
pub struct Stepped {
    /// The last step's report with `sweep` (and `capacity`) on top.
    pub report: ProfileReport,
    /// The exit status of the interruption, and its message.
    pub interrupted: Option<Exit>,
}

/// The steps measured so far and what bounds the next.
struct Progress<'a> {
    spec: &'a ProfileSpec,
    line: &'a LoadLine,
    t0: Instant,
    max: Duration,
    /// A step's cost beyond its load window, as last measured.
    overhead: Duration,
    points: Vec<SweepPoint>,
    last: Option<ProfileReport>,
    interrupted: Option<Exit>,
}

/// How a step ended.
enum StepEnd {
    Done,
    /// No time left for it: not run.
    OutOfTime,
    /// A stop signal: not kept.
    Interrupted,
}

impl Progress<'_> {
    /// Runs one step at `rate` (None: closed loop) for `secs`, unless it
    /// would end past `--max-duration`; its point is pushed.
    fn step(
        &mut self,
        live: &mut Live,
        signals: &mut Signals,
        rate: Option<f64>,
        secs: u64,
    ) -> Result<StepEnd> {
        let len = Duration::from_secs(secs);
        if self.t0.elapsed() + len + self.overhead > self.max {
            return Ok(StepEnd::OutOfTime);
        }
        let t = Instant::now();
        let workload = Workload::Own(self.line.step(rate, secs)?);
        let parts = check_signals(signals, "between steps")
            .and_then(|()| live.window(self.spec, signals, &workload, rate.is_some()));
        let parts = match parts {
            Ok(p) => p,
            Err(e) => match interruption(&e) {
                Some(x) => {
                    self.interrupted = Some(x);
                    return Ok(StepEnd::Interrupted);
                }
                None => return Err(e),
            },
        };
        let failure = parts.load_failure.clone();
        let report = live.step_report(self.spec, parts);
        let limited = rate.and_then(|_| limited::judge(signs(&report)));
        let mut point = SweepPoint::of(self.points.len() + 1, rate, &report.step_window(), limited);
        point.load_failure = failure;
        if !self.spec.quiet {
            crate::progress::say!("sockscope: {}", said(&point));
        }
        self.points.push(point);
        self.last = Some(report);
        self.overhead = t.elapsed().saturating_sub(len);
        Ok(StepEnd::Done)
    }

    fn took_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }
}

/// A finished step, in one line (stderr, as the steps go).
fn said(p: &SweepPoint) -> String {
    format!(
        "step {} done: {} requested, {}/s achieved, p99 {}{}",
        p.step,
        p.label(),
        crate::report::units::fmt_si(p.achieved_per_s),
        crate::report::units::human_ns(p.p99.ns),
        if p.generator_limited.is_some() {
            " (LIMITED by the generator)"
        } else {
            ""
        }
    )
}

/// How many of a step's values in `rec` reached `limit_ns` (None: none
/// recorded, or unreadable).
fn over(rec: Option<&LatencyRecord>, limit_ns: u64) -> Option<u64> {
    let h = crate::stats::LatencyHist::from_v2_base64(&rec?.hdr_histogram).ok()?;
    Some(h.count_at_or_above(limit_ns))
}

/// The generator's signs over a step, from its load report.
fn signs(r: &ProfileReport) -> GeneratorSigns {
    let load = r.load.as_ref();
    GeneratorSigns {
        send_lag_p99_ns: load
            .and_then(|l| l.send_lag.as_ref())
            .map(|s| s.summary.p99_ns),
        busiest_thread_share: load.map(|l| {
            l.generator
                .thread_cpu_share
                .iter()
                .copied()
                .fold(0.0, f64::max)
        }),
    }
}

/// The interruption an error stands for (128+N), if it is one.
fn interruption(e: &anyhow::Error) -> Option<Exit> {
    e.downcast_ref::<Exit>()
        .filter(|x| x.code > 128)
        .map(|x| Exit {
            code: x.code,
            message: x.message.replace(
                "; nothing was written",
                "; the steps finished before it were written, marked partial",
            ),
        })
}

/// Runs a profile in steps; writes nothing (see [`Stepped`]).
pub fn measure_steps(spec: &ProfileSpec, steps: &Steps) -> Result<Stepped> {
    let line = spec
        .workload
        .own()
        .ok_or_else(|| crate::error::usage("--sweep and --find-capacity need --load"))?;
    let mut signals = block_signals()?;
    preflight(spec)?;
    let mut live = Live::open(spec, &mut signals)?;
    let mut run = Progress {
        spec,
        line,
        t0: Instant::now(),
        max: steps.max_duration,
        overhead: FIRST_OVERHEAD,
        points: Vec::new(),
        last: None,
        interrupted: None,
    };
    let (sweep, capacity) = match &steps.plan {
        StepPlan::Sweep { plan, text } => (
            sweep_steps(&mut run, &mut live, &mut signals, plan, text)?,
            None,
        ),
        StepPlan::Capacity { slo, step_s } => {
            let (s, c) = capacity_steps(&mut run, &mut live, &mut signals, slo, *step_s)?;
            (s, Some(c))
        }
    };
    nothing_measured(&sweep)?;
    let Some(mut report) = run.last.take() else {
        return Err(match run.interrupted {
            Some(x) => crate::error::with_code(
                x.code,
                x.message.replace(
                    "the steps finished before it were written, marked partial",
                    "no step had finished, so nothing was written",
                ),
            ),
            None => fail(
                exit::TIMED_OUT,
                format!(
                    "--max-duration ({:.0} s) leaves no time for one step; nothing was written",
                    steps.max_duration.as_secs_f64()
                ),
            ),
        });
    };
    live.finish_steps(spec, &mut report)?;
    report.header.schema_version = SWEEP_SCHEMA_VERSION;
    if sweep.partial {
        report.caveats.insert(
            0,
            format!(
                "PARTIAL: {}; the steps measured before are kept.",
                sweep.partial_reason.as_deref().unwrap_or("stopped early")
            ),
        );
    }
    if let Some(c) = &capacity {
        report
            .insights
            .insert(0, format!("Capacity: {}.", c.line()));
    }
    report.sweep = Some(sweep);
    report.capacity = capacity;
    Ok(Stepped {
        report,
        interrupted: run.interrupted,
    })
}

/// A sweep whose every step completed no request failed as the load of a
/// plain profile fails (exit 7, nothing written): its curve and "knee"
/// would be drawn from zeros.
fn nothing_measured(sweep: &Sweep) -> Result<()> {
    let n = sweep.points.len();
    if n == 0 || sweep.points.iter().any(|p| p.transactions > 0) {
        return Ok(());
    }
    let why = sweep
        .points
        .iter()
        .find_map(|p| p.load_failure.as_deref())
        .map_or(String::new(), |w| format!("; the load said: {w}"));
    let errors: u64 = sweep.points.iter().map(|p| p.errors).sum();
    Err(fail(
        exit::LOAD_FAILED,
        format!(
            "the load completed no request in any of the {n} step{} ({errors} errors){why}; \
             nothing was written",
            if n == 1 { "" } else { "s" }
        ),
    ))
}

/// What a stopped run's sweep says.
fn partial_reason(run: &Progress<'_>, done: usize, of: Option<usize>) -> Option<String> {
    let of = of.map_or(String::new(), |n| format!(" of {n}"));
    if let Some(x) = &run.interrupted {
        return Some(format!(
            "interrupted (exit {}) after {done}{of} steps",
            x.code
        ));
    }
    Some(format!(
        "--max-duration ({:.0} s) ran out after {done}{of} steps",
        run.max.as_secs_f64()
    ))
}

fn sweep_steps(
    run: &mut Progress<'_>,
    live: &mut Live,
    signals: &mut Signals,
    plan: &crate::load::schedule::rate_plan::RatePlan,
    text: &str,
) -> Result<Sweep> {
    let steps = plan.steps();
    let mut stopped = false;
    for s in &steps {
        match run.step(live, signals, Some(s.rate), s.len_s)? {
            StepEnd::Done => {}
            StepEnd::OutOfTime | StepEnd::Interrupted => {
                stopped = true;
                break;
            }
        }
    }
    let ramp = matches!(
        plan,
        crate::load::schedule::rate_plan::RatePlan::Ramp { .. }
    );
    let mut sweep = Sweep {
        schedule: text.to_string(),
        note: format!(
            "each step is a window of its own on the live target: the tracer, the anatomy and \
             the evidence attached, a constant open-loop load for the step's length{}",
            if ramp {
                "; a ramp's steps run at their mean rate"
            } else {
                ""
            }
        ),
        points: std::mem::take(&mut run.points),
        partial: stopped,
        took_s: run.took_s(),
        ..Default::default()
    };
    if stopped {
        sweep.partial_reason = partial_reason(run, sweep.points.len(), Some(steps.len()));
    }
    sweep.conclude();
    Ok(sweep)
}

fn capacity_steps(
    run: &mut Progress<'_>,
    live: &mut Live,
    signals: &mut Signals,
    slo: &sweep::Slo,
    step_s: u64,
) -> Result<(Sweep, Capacity)> {
    // The closed-loop step: the ceiling the open-loop steps start from.
    let mut ceiling = None;
    if let StepEnd::Done = run.step(live, signals, None, step_s)? {
        let c = run.points[0].achieved_per_s;
        if c <= 0.0 {
            return Err(fail(
                exit::LOAD_FAILED,
                "the closed-loop step completed no transaction: no rate to search from",
            ));
        }
        ceiling = Some(c);
    }
    let mut tried: Vec<(f64, Verdict)> = Vec::new();
    let mut records: Vec<Tried> = Vec::new();
    let mut stopped = ceiling.is_none();
    let outcome = loop {
        let Some(c) = ceiling else {
            break search::out_of_time(&tried, run.max.as_secs_f64());
        };
        let rate = match search::next(c, &tried) {
            Next::Done(o) => break o,
            Next::Run(r) => r,
        };
        match run.step(live, signals, Some(rate), step_s)? {
            StepEnd::Done => {
                let load = run.last.as_ref().and_then(|r| r.load.as_ref());
                let waits = over(load.and_then(|l| l.conn_wait.as_ref()), slo.limit_ns);
                let late = over(load.and_then(|l| l.release_lag.as_ref()), slo.limit_ns);
                let p = run.points.last_mut().expect("a step just ran");
                if let Some(w) = p.conn_wait.as_mut() {
                    w.over_limit = waits;
                }
                p.released_late_over_limit = late;
                let v = search::verdict(p, slo);
                records.push(Tried {
                    step: p.step,
                    requested_per_s: rate,
                    verdict: v.word().into(),
                    why: v.why().into(),
                });
                tried.push((rate, v));
            }
            StepEnd::OutOfTime => break search::out_of_time(&tried, run.max.as_secs_f64()),
            StepEnd::Interrupted => {
                stopped = true;
                let mut o = search::out_of_time(&tried, run.max.as_secs_f64());
                o.reason = "interrupted before the bracket closed".into();
                break o;
            }
        }
    };
    let Outcome {
        rate,
        bracket,
        limited_by,
        reason,
    } = outcome;
    let grew = match bracket {
        [Some(lo), Some(hi)] => {
            let at = |r: f64| {
                run.points
                    .iter()
                    .rev()
                    .find(|p| p.requested_per_s == Some(r))
            };
            match (at(lo), at(hi)) {
                (Some(a), Some(b)) => sweep::grew(a, b),
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    let took_s = run.took_s();
    let capacity = Capacity {
        rate_per_s: rate,
        bracket,
        slo: slo.clone(),
        ceiling_per_s: ceiling.unwrap_or(0.0),
        steps_tried: records,
        limited_by: limited_by.map(String::from),
        reason,
        grew,
        took_s,
    };
    let mut sweep = Sweep {
        schedule: format!("find-capacity {}", slo.text),
        note: format!(
            "a closed-loop step, then open-loop steps of {step_s} s from half its rate: up by \
             x{} while they pass, then bisection; each step a window of its own on the live target",
            search::RAMP
        ),
        points: std::mem::take(&mut run.points),
        partial: stopped && run.interrupted.is_some(),
        took_s,
        ..Default::default()
    };
    if sweep.partial {
        sweep.partial_reason = partial_reason(run, sweep.points.len(), None);
    }
    sweep.conclude();
    Ok((sweep, capacity))
}
