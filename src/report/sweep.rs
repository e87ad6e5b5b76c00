//! A profile's steps (`profile --sweep` and `profile --find-capacity`,
//! run.json `sweep` and `capacity`): one point per step of constant
//! open-loop rate on the live target, the knee of the curve they draw, the
//! capacity a search found against an SLO, and what grew first as the
//! load neared the knee. Pure: every figure comes from the points, so
//! `report` re-renders them from the JSON alone. The text is in
//! `sweep_text.rs`, the page in `html/profile/sweep.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::anatomy::{AnatomyReport, PartSums};
use super::evidence::KernelEvidence;
use super::evidence::counters::NAMED;
use super::load::LoadReport;
use super::units::{fmt_si, human_ns};
use crate::stats::{LatencyHist, TailInterval};

/// The knee: p99 beyond this many times the lowest-rate step's p99.
pub const KNEE_P99_FACTOR: f64 = 3.0;
/// The knee: achieved below this share of the requested rate.
pub const KNEE_ACHIEVED_SHARE: f64 = 0.9;
/// A capacity step passes only when it achieved this share of its rate.
pub const PASS_ACHIEVED_SHARE: f64 = 0.95;

/// The accepted syntax of `--find-capacity`, quoted by every parse error.
pub const SLO_SYNTAX: &str = "'PCT<LIMIT[,errors<SHARE%]', PCT one of p50, p90, p99, p999 \
     (or p99.9), LIMIT a time in us, ms or s: 'p99<5ms', 'p999<20ms,errors<0.1%'";

/// A service-level objective on a client percentile, with an error budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// As given (`p99<5ms`).
    pub text: String,
    /// `p50`, `p90`, `p99` or `p99.9`.
    pub percentile: String,
    /// The limit, ns (a step passes when the percentile's upper interval
    /// bound is below it).
    pub limit_ns: u64,
    /// Errors allowed, as a share of the step's requests (0..1); 0 when
    /// the SLO names none.
    pub max_error_share: f64,
}

impl Slo {
    /// The percentile as a quantile (`p99`: 0.99).
    pub fn quantile(&self) -> f64 {
        match self.percentile.as_str() {
            "p50" => 0.5,
            "p90" => 0.9,
            "p99" => 0.99,
            _ => 0.999,
        }
    }

    /// Parses `--find-capacity`'s text (see [`SLO_SYNTAX`]).
    pub fn parse(s: &str) -> Result<Slo, String> {
        let err = |why: &str| format!("`{s}`: {why}; accepted: {SLO_SYNTAX}");
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let mut parts = text.split(',');
        let first = parts.next().unwrap_or("");
        let (pct, limit) = first
            .split_once('<')
            .ok_or_else(|| err("no `<` in the percentile's bound"))?;
        let percentile = match pct {
            "p50" => "p50",
            "p90" => "p90",
            "p99" => "p99",
            "p999" | "p99.9" => "p99.9",
            _ => return Err(err(&format!("`{pct}` is not one of p50, p90, p99, p999"))),
        };
        let limit_ns = time_ns(limit).map_err(|w| err(&w))?;
        let mut max_error_share = 0.0;
        for extra in parts {
            let share = extra
                .strip_prefix("errors<")
                .and_then(|v| v.strip_suffix('%'))
                .ok_or_else(|| err(&format!("`{extra}` is not `errors<SHARE%`")))?;
            let v: f64 = share
                .parse()
                .map_err(|_| err(&format!("`{share}` is not a percentage")))?;
            if !(v.is_finite() && (0.0..100.0).contains(&v)) {
                return Err(err("the error budget must be >= 0 % and < 100 %"));
            }
            max_error_share = v / 100.0;
        }
        Ok(Slo {
            text: s.trim().to_string(),
            percentile: percentile.to_string(),
            limit_ns,
            max_error_share,
        })
    }
}

/// `5ms`, `500us`, `0.2s` in ns (> 0).
fn time_ns(s: &str) -> Result<u64, String> {
    let (num, mult) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else {
        return Err(format!("`{s}` has no unit (us, ms or s)"));
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a time"))?;
    let ns = v * mult;
    if !(ns.is_finite() && (1.0..=3600e9).contains(&ns)) {
        return Err(format!("`{s}`: the limit must be > 0 and at most an hour"));
    }
    Ok(ns as u64)
}

/// One client percentile of a step, with its 95 % confidence interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The value, ns.
    pub ns: u64,
    /// Its interval (absent without samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<TailInterval>,
}

impl Percentile {
    /// The interval's upper bound, or the value without one: what a
    /// capacity step is judged by.
    pub fn upper_ns(&self) -> u64 {
        self.ci.map_or(self.ns, |c| c.high_ns.max(self.ns))
    }
}

/// The request anatomy of one step: its turns and the exact sums of each
/// part over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointAnatomy {
    /// Turns timed in the step's window.
    pub turns: u64,
    /// The parts' sums, ns.
    pub sums_ns: PartSums,
    /// The server time's percentiles (the target's own time, arrival to
    /// last write; absent in artifacts older than them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<ServerPercentiles>,
}

/// The server time's percentiles over a step, with their intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerPercentiles {
    /// Median.
    pub p50: Percentile,
    /// 90th.
    pub p90: Percentile,
    /// 99th.
    pub p99: Percentile,
    /// 99.9th.
    pub p999: Percentile,
}

impl ServerPercentiles {
    /// The named percentile (`p50`, `p90`, `p99`, `p99.9`).
    pub fn get(&self, name: &str) -> Option<&Percentile> {
        match name {
            "p50" => Some(&self.p50),
            "p90" => Some(&self.p90),
            "p99" => Some(&self.p99),
            "p99.9" => Some(&self.p999),
            _ => None,
        }
    }
}

impl PointAnatomy {
    /// The four parts with their names and shares of server time (0..1).
    pub fn shares(&self) -> [(&'static str, f64); 4] {
        let s = &self.sums_ns;
        let total = s.server_time.max(1) as f64;
        [
            ("queue wait", s.queue_wait as f64 / total),
            ("CPU wait", s.cpu_wait as f64 / total),
            ("service", s.service as f64 / total),
            ("send", s.send as f64 / total),
        ]
    }

    /// The four parts' means per turn, ns.
    pub fn means_ns(&self) -> [(&'static str, f64); 4] {
        let s = &self.sums_ns;
        let n = self.turns.max(1) as f64;
        [
            ("queue wait", s.queue_wait as f64 / n),
            ("CPU wait", s.cpu_wait as f64 / n),
            ("service", s.service as f64 / n),
            ("send", s.send as f64 / n),
        ]
    }

    /// The part with the largest share of server time.
    pub fn largest(&self) -> (&'static str, f64) {
        self.shares()
            .into_iter()
            .fold(("queue wait", -1.0), |a, b| if b.1 > a.1 { b } else { a })
    }
}

/// One step: a constant open-loop rate (or, first in a capacity search,
/// one closed-loop step) held on the live target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// 1-based, in the order run.
    pub step: usize,
    /// The rate asked for, per second (None: the closed-loop step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_per_s: Option<f64>,
    /// The load's measured window, s.
    pub window_s: f64,
    /// Transactions the load completed.
    pub transactions: u64,
    /// transactions / window_s.
    pub achieved_per_s: f64,
    /// Client latency (from the intended send time in open loop).
    pub p50: Percentile,
    /// 90th percentile.
    pub p90: Percentile,
    /// 99th percentile.
    pub p99: Percentile,
    /// 99.9th percentile.
    pub p999: Percentile,
    /// The load's errors.
    pub errors: u64,
    /// Why the step's load counted as failed (errors over its budget),
    /// kept as a point rather than failing the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_failure: Option<String>,
    /// The request anatomy over the step (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<PointAnatomy>,
    /// The target's CPU per request, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// The target's syscalls per request (absent without the tracer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls_per_request: Option<f64>,
    /// The named kernel counters' increases over the step (see
    /// `evidence::counters::NAMED`), those read.
    #[serde(default)]
    pub evidence: BTreeMap<String, u64>,
    /// The target's threads' run-queue wait as a share of their time on
    /// a CPU plus waiting (schedstat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_wait_share: Option<f64>,
    /// Why the generator limited the step (`load::limited`), or None: a
    /// limited step says nothing about the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_limited: Option<String>,
    /// The generator's send lag while a connection was free (its own
    /// lateness: CPU, timer), p99, ns (open-loop steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_p99_ns: Option<u64>,
    /// Sends that found every connection busy and waited for one, and
    /// that wait's p99 from their intended time, ns (open-loop steps with
    /// any such send): the target (or the pool) was the limit then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_wait: Option<ConnWait>,
    /// The sends the generator itself released at least the SLO's limit
    /// after their intended time, free connection or not (a capacity
    /// search's open-loop steps): more than the percentile lets be over
    /// it, and the generator alone could have failed the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_late_over_limit: Option<u64>,
    /// Connections the load opened beyond its `-c` while every one was
    /// busy (`--max-conns`), when it opened any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_added: Option<u64>,
}

/// The sends of a step that waited for a free connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnWait {
    /// How many.
    pub sends: u64,
    /// Their wait's p99 (intended time to send), ns.
    pub p99_ns: u64,
    /// Those whose wait alone reached the SLO's limit (a capacity
    /// search's steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<u64>,
}

/// What a point is made of: one step's window, as its report has it
/// (`ProfileReport::step_window`).
pub struct StepWindow<'a> {
    /// The step's load.
    pub load: Option<&'a LoadReport>,
    /// Its request anatomy.
    pub anatomy: Option<&'a AnatomyReport>,
    /// Its kernel evidence.
    pub evidence: Option<&'a KernelEvidence>,
    /// The target's CPU per request, us (NaN: unknown).
    pub cpu_us_per_request: f64,
    /// The target's syscalls per request (NaN: not traced).
    pub syscalls_per_request: f64,
}

impl SweepPoint {
    /// The point of one step's window (`requested`: its open-loop rate;
    /// `limited`: the generator-limited rule's verdict on it).
    pub fn of(
        step: usize,
        requested: Option<f64>,
        r: &StepWindow<'_>,
        limited: Option<String>,
    ) -> SweepPoint {
        let finite = |v: f64| v.is_finite().then_some(v);
        let load = r.load;
        let lat = load.and_then(|l| l.latency.as_ref());
        let hist = lat.and_then(|l| LatencyHist::from_v2_base64(&l.hdr_histogram).ok());
        let pct = |q: f64, ns: u64, ci: Option<TailInterval>| Percentile {
            ns,
            ci: ci.or_else(|| hist.as_ref().and_then(|h| h.interval_at(q, ns))),
        };
        let (p50, p90, p99, p999) = match lat {
            Some(l) => {
                let s = &l.summary;
                (
                    pct(0.5, s.p50_ns, None),
                    pct(0.9, s.p90_ns, None),
                    pct(0.99, s.p99_ns, s.p99_ci),
                    pct(0.999, s.p999_ns, s.p999_ci),
                )
            }
            None => Default::default(),
        };
        let evidence = r
            .evidence
            .and_then(|e| e.counters.as_ref())
            .map(|c| {
                NAMED
                    .iter()
                    .filter_map(|n| c.deltas.get(*n).map(|v| (n.to_string(), *v)))
                    .collect()
            })
            .unwrap_or_default();
        SweepPoint {
            step,
            requested_per_s: requested,
            window_s: load.map_or(0.0, |l| l.duration_s),
            transactions: load.map_or(0, |l| l.transactions),
            achieved_per_s: load.map_or(0.0, |l| l.rate_per_s),
            p50,
            p90,
            p99,
            p999,
            errors: load.map_or(0, |l| l.errors.total),
            load_failure: None,
            anatomy: r.anatomy.map(point_anatomy),
            cpu_us_per_request: finite(r.cpu_us_per_request),
            syscalls_per_request: finite(r.syscalls_per_request),
            evidence,
            runqueue_wait_share: r
                .evidence
                .and_then(|e| e.sched.as_ref())
                .map(|s| s.wait_share),
            generator_limited: limited,
            send_lag_p99_ns: load
                .and_then(|l| l.send_lag.as_ref())
                .map(|s| s.summary.p99_ns),
            conn_wait: load.and_then(|l| l.conn_wait.as_ref()).map(|w| ConnWait {
                sends: w.summary.count,
                p99_ns: w.summary.p99_ns,
                over_limit: None,
            }),
            released_late_over_limit: None,
            connections_added: load.map(|l| l.connections.added).filter(|&n| n > 0),
        }
    }

    /// The target's own server time at the named percentile (the
    /// anatomy's), when the step had it.
    pub fn server_percentile(&self, name: &str) -> Option<&Percentile> {
        self.anatomy.as_ref()?.server_time.as_ref()?.get(name)
    }

    /// The named percentile (`p50`, `p90`, `p99`, `p99.9`).
    pub fn percentile(&self, name: &str) -> Option<&Percentile> {
        match name {
            "p50" => Some(&self.p50),
            "p90" => Some(&self.p90),
            "p99" => Some(&self.p99),
            "p99.9" => Some(&self.p999),
            _ => None,
        }
    }

    /// Errors as a share of the requests the step made.
    pub fn error_share(&self) -> f64 {
        let all = self.transactions + self.errors;
        if all == 0 {
            0.0
        } else {
            self.errors as f64 / all as f64
        }
    }

    /// A short name for people: `4.0k/s` or `closed loop`.
    pub fn label(&self) -> String {
        match self.requested_per_s {
            Some(r) => format!("{}/s", fmt_si(r)),
            None => "closed loop".into(),
        }
    }
}

fn point_anatomy(a: &AnatomyReport) -> PointAnatomy {
    let s = &a.parts.server_time;
    let pct = |ns, ci| Percentile { ns, ci };
    PointAnatomy {
        turns: a.turns,
        sums_ns: a.sums_ns,
        server_time: (s.count > 0).then(|| ServerPercentiles {
            p50: pct(s.p50_ns, s.p50_ci),
            p90: pct(s.p90_ns, s.p90_ci),
            p99: pct(s.p99_ns, s.p99_ci),
            p999: pct(s.p999_ns, s.p999_ci),
        }),
    }
}

/// Where the curve bends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The step (1-based) at the knee.
    pub step: usize,
    /// Its requested rate, per second.
    pub requested_per_s: f64,
    /// Which rule found it, for people.
    pub why: String,
}

/// The open-loop points the curve is drawn from, lowest requested rate
/// first: the closed-loop step and generator-limited steps left out.
pub fn curve(points: &[SweepPoint]) -> Vec<&SweepPoint> {
    let mut v: Vec<&SweepPoint> = points
        .iter()
        .filter(|p| p.requested_per_s.is_some() && p.generator_limited.is_none())
        .collect();
    v.sort_by(|a, b| a.requested_per_s.partial_cmp(&b.requested_per_s).unwrap());
    v
}

/// The knee: in order of requested rate, the first step whose p99 is over
/// [`KNEE_P99_FACTOR`] times the lowest-rate step's, or whose achieved rate
/// fell below [`KNEE_ACHIEVED_SHARE`] of its requested rate.
pub fn knee(points: &[SweepPoint]) -> Option<Knee> {
    let c = curve(points);
    let base = c.first()?.p99.ns.max(1) as f64;
    c.iter().find_map(|p| {
        let req = p.requested_per_s?;
        let why = if p.achieved_per_s < KNEE_ACHIEVED_SHARE * req {
            format!(
                "achieved {}/s, under {:.0} % of the {}/s requested",
                fmt_si(p.achieved_per_s),
                KNEE_ACHIEVED_SHARE * 100.0,
                fmt_si(req)
            )
        } else if p.p99.ns as f64 > KNEE_P99_FACTOR * base {
            format!(
                "p99 {} is over {KNEE_P99_FACTOR}x the lowest rate's ({})",
                human_ns(p.p99.ns),
                human_ns(base as u64)
            )
        } else {
            return None;
        };
        Some(Knee {
            step: p.step,
            requested_per_s: req,
            why,
        })
    })
}

/// What grew between a point below the knee (or the capacity) and one
/// above it, as sentences: the anatomy part whose share of server time
/// grew most, and the named counters that went from 0 to more.
pub fn grew(below: &SweepPoint, above: &SweepPoint) -> Vec<String> {
    let between = format!("between {} and {}", below.label(), above.label());
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (&below.anatomy, &above.anatomy) {
        let grown = a
            .shares()
            .into_iter()
            .zip(b.shares())
            .map(|((name, x), (_, y))| (name, x, y))
            .max_by(|l, r| (l.2 - l.1).partial_cmp(&(r.2 - r.1)).unwrap());
        if let Some((name, x, y)) = grown.filter(|g| g.2 > g.1) {
            out.push(format!(
                "{name} grew most: from {:.0} % to {:.0} % of server time {between}",
                x * 100.0,
                y * 100.0
            ));
        }
    }
    for (name, v) in &above.evidence {
        if *v > 0 && below.evidence.get(name).copied().unwrap_or(0) == 0 {
            out.push(format!(
                "{name} went from 0 to {v} {between}{}",
                if name.contains("Listen") {
                    " (the accept queue overflowed)"
                } else {
                    ""
                }
            ));
        }
    }
    if let (Some(x), Some(y)) = (below.runqueue_wait_share, above.runqueue_wait_share)
        && y > x + 0.05
    {
        out.push(format!(
            "the target's threads waited for a CPU {:.0} % of their time at {}, {:.0} % at {}",
            x * 100.0,
            below.label(),
            y * 100.0,
            above.label()
        ));
    }
    out
}

/// run.json `sweep`: every step's point, the knee, and whether the sweep
/// ran to its end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// `--sweep`'s schedule as given, or `find-capacity SLO`.
    pub schedule: String,
    /// How the schedule's steps were run (a ramp's steps at their mean
    /// rate, each step a window of its own).
    pub note: String,
    /// One point per step run, in order.
    pub points: Vec<SweepPoint>,
    /// Where the curve bends (see [`knee`]); None when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Knee>,
    /// What grew between the step below the knee and the knee.
    #[serde(default)]
    pub grew: Vec<String>,
    /// True when the steps stopped early: then `partial_reason` says why
    /// (Ctrl-C, exit 130; `--max-duration`).
    pub partial: bool,
    /// Why the sweep is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    /// From the first step's start to the last one's end, s.
    pub took_s: f64,
}

impl Sweep {
    /// Sets the knee and what grew before it from the points.
    pub fn conclude(&mut self) {
        self.knee = knee(&self.points);
        self.grew = match &self.knee {
            Some(k) => {
                let c = curve(&self.points);
                let i = c.iter().position(|p| p.step == k.step).unwrap_or(0);
                match i.checked_sub(1) {
                    Some(b) => grew(c[b], c[i]),
                    None => Vec::new(),
                }
            }
            None => Vec::new(),
        };
    }
}

/// A capacity step's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    /// The step (1-based, as in `sweep.points`).
    pub step: usize,
    /// Its requested rate, per second.
    pub requested_per_s: f64,
    /// `pass`, `fail` or `limited` (generator-limited: neither).
    pub verdict: String,
    /// Why, for people.
    pub why: String,
}

/// run.json `capacity`: the highest rate that met the SLO.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// The highest passing rate, per second; null when none could be
    /// named (generator-limited, or no rate passed).
    pub rate_per_s: Option<f64>,
    /// [highest pass, lowest fail above it]; either end null when unknown.
    pub bracket: [Option<f64>; 2],
    /// The SLO.
    pub slo: Slo,
    /// The closed-loop step's achieved rate, per second (where the search
    /// started from).
    pub ceiling_per_s: f64,
    /// The open-loop steps and their verdicts, in order.
    pub steps_tried: Vec<Tried>,
    /// `generator` when the generator kept the search from an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// Why the search ended, for people.
    pub reason: String,
    /// What grew between the highest pass and the lowest fail.
    #[serde(default)]
    pub grew: Vec<String>,
    /// The whole search's length, s.
    pub took_s: f64,
}

impl Capacity {
    /// The one line summary.txt and the page give.
    pub fn line(&self) -> String {
        let hi = match self.bracket[1] {
            Some(h) => format!("{}/s", fmt_si(h)),
            None => "unknown".into(),
        };
        match (self.rate_per_s, &self.limited_by) {
            (Some(r), _) => format!(
                "{}/s meets {} (the next rate tried that failed: {hi}); {} steps in {:.0} s",
                fmt_si(r),
                self.slo.text,
                self.steps_tried.len(),
                self.took_s
            ),
            (None, Some(by)) => format!(
                "none named: limited by the {by}: {}; {} steps in {:.0} s",
                self.reason,
                self.steps_tried.len(),
                self.took_s
            ),
            (None, None) => format!(
                "none named: {}; {} steps in {:.0} s",
                self.reason,
                self.steps_tried.len(),
                self.took_s
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn point(step: usize, req: f64, ach: f64, p99_us: u64) -> SweepPoint {
        SweepPoint {
            step,
            requested_per_s: Some(req),
            achieved_per_s: ach,
            transactions: ach as u64,
            window_s: 1.0,
            p99: Percentile {
                ns: p99_us * 1000,
                ci: None,
            },
            ..Default::default()
        }
    }

    #[test]
    fn slos_parse_and_bad_ones_say_the_syntax() {
        let s = Slo::parse("p99<5ms").unwrap();
        assert_eq!((s.percentile.as_str(), s.limit_ns), ("p99", 5_000_000));
        assert_eq!(s.max_error_share, 0.0);
        let s = Slo::parse("p999 < 250us, errors<0.1%").unwrap();
        assert_eq!((s.percentile.as_str(), s.limit_ns), ("p99.9", 250_000));
        assert!((s.max_error_share - 0.001).abs() < 1e-12);
        assert_eq!(Slo::parse("p50<1s").unwrap().limit_ns, 1_000_000_000);
        for bad in [
            "p98<5ms",
            "p99>5ms",
            "p99<5",
            "p99<xms",
            "p99<0ms",
            "p99<5ms,errors<x%",
            "p99<5ms,errs<1%",
            "p99<5ms,errors<100%",
            "",
        ] {
            let e = Slo::parse(bad).unwrap_err();
            assert!(e.contains("accepted: 'PCT<LIMIT"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_knee_is_the_first_step_past_either_rule() {
        let pts = vec![
            point(1, 1000.0, 1000.0, 100),
            point(2, 2000.0, 1990.0, 250),
            point(3, 3000.0, 2990.0, 400),
            point(4, 4000.0, 3000.0, 2000),
        ];
        let k = knee(&pts).unwrap();
        assert_eq!(k.step, 3, "{k:?}");
        assert!(k.why.contains("over 3x"), "{}", k.why);
        // Achieved under 90 % is a knee whatever the p99.
        let pts = vec![point(1, 1000.0, 1000.0, 100), point(2, 2000.0, 1700.0, 120)];
        let k = knee(&pts).unwrap();
        assert_eq!(k.step, 2);
        assert!(k.why.contains("under 90 %"), "{}", k.why);
        // Order by rate, not by step; limited steps are not on the curve.
        let mut pts = vec![point(1, 3000.0, 3000.0, 110), point(2, 1000.0, 1000.0, 100)];
        assert_eq!(knee(&pts), None);
        pts.push(SweepPoint {
            generator_limited: Some("late".into()),
            ..point(3, 5000.0, 2000.0, 9000)
        });
        assert_eq!(knee(&pts), None);
    }

    #[test]
    fn what_grew_names_the_part_and_the_counters_that_started() {
        let mut a = point(1, 12000.0, 12000.0, 100);
        let mut b = point(2, 16000.0, 15000.0, 900);
        a.anatomy = Some(PointAnatomy {
            turns: 10,
            sums_ns: PartSums {
                queue_wait: 10,
                cpu_wait: 3,
                service: 80,
                send: 7,
                server_time: 100,
            },
            server_time: None,
        });
        b.anatomy = Some(PointAnatomy {
            turns: 10,
            sums_ns: PartSums {
                queue_wait: 10,
                cpu_wait: 61,
                service: 25,
                send: 4,
                server_time: 100,
            },
            server_time: None,
        });
        a.evidence.insert("TcpExt.ListenOverflows".into(), 0);
        b.evidence.insert("TcpExt.ListenOverflows".into(), 18);
        b.evidence.insert("Tcp.RetransSegs".into(), 0);
        let g = grew(&a, &b);
        assert_eq!(
            g[0],
            "CPU wait grew most: from 3 % to 61 % of server time between 12k/s and 16k/s"
        );
        assert!(
            g[1].starts_with("TcpExt.ListenOverflows went from 0 to 18"),
            "{g:?}"
        );
        assert_eq!(g.len(), 2, "{g:?}");
    }
}
