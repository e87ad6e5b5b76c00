//! `--find-capacity`'s decisions, pure: a step's verdict against the SLO
//! ([`verdict`]), and the next rate to try from the steps so far
//! ([`next`]): from half the closed-loop ceiling, up by x1.5 while steps
//! pass, then bisection between the highest pass and the lowest fail above
//! it until they are within [`CLOSE_ENOUGH`] of each other, the lowest
//! fail confirmed by a second step at its rate (one noisy step on a busy
//! machine would otherwise cap the answer below the capacity). A
//! generator-limited step is neither a pass nor a fail: tried twice at one
//! rate below the answer, it ends the search with no capacity named.

use crate::report::sweep::{PASS_ACHIEVED_SHARE, Slo, SweepPoint};
use crate::report::units::{fmt_si, human_ns};

/// The search stops when the lowest fail is within this share above the
/// highest pass.
pub const CLOSE_ENOUGH: f64 = 0.05;
/// The ramp's factor while steps pass.
pub const RAMP: f64 = 1.5;
/// Lowest rate tried, per second: below it no rate is said to pass.
pub const FLOOR_PER_S: f64 = 1.0;
/// The ramp stops passing rates this many times the closed-loop ceiling.
pub const CEILING_FACTOR: f64 = 4.0;

/// What one step says against the SLO.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The percentile's upper bound under the limit, the errors within the
    /// budget, and the rate achieved.
    Pass(String),
    /// Any of these not.
    Fail(String),
    /// The generator could not keep up: nothing is known of the target.
    Limited(String),
}

impl Verdict {
    /// `pass`, `fail`, `limited`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Pass(_) => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::Limited(_) => "limited",
        }
    }

    /// Why, for people.
    pub fn why(&self) -> &str {
        match self {
            Verdict::Pass(w) | Verdict::Fail(w) | Verdict::Limited(w) => w,
        }
    }
}

/// The verdict on an open-loop step `p` against `slo`. A step whose
/// generator lagged still passes when it met the SLO at the rate asked:
/// its latencies run from the intended send times, so the generator's
/// lateness can only have added to them, never hidden the target's. A
/// generator-limited step that did not pass says nothing of the target.
pub fn verdict(p: &SweepPoint, slo: &Slo) -> Verdict {
    let v = judge(p, slo);
    match (&p.generator_limited, v) {
        (Some(why), Verdict::Pass(said)) => Verdict::Pass(format!(
            "{said}, met with the generator's lag counted in ({why})"
        )),
        (Some(why), _) => Verdict::Limited(why.clone()),
        (None, v) => v,
    }
}

/// The verdict on the step's own figures, whoever limited it.
fn judge(p: &SweepPoint, slo: &Slo) -> Verdict {
    let req = p.requested_per_s.unwrap_or(0.0);
    if p.transactions == 0 {
        return Verdict::Fail("no transaction completed".into());
    }
    if p.achieved_per_s < PASS_ACHIEVED_SHARE * req {
        return Verdict::Fail(format!(
            "achieved {}/s, under {:.0} % of {}/s",
            fmt_si(p.achieved_per_s),
            PASS_ACHIEVED_SHARE * 100.0,
            fmt_si(req)
        ));
    }
    if p.error_share() > slo.max_error_share {
        return Verdict::Fail(format!(
            "errors {:.3} % over the budget {:.3} %",
            p.error_share() * 100.0,
            slo.max_error_share * 100.0
        ));
    }
    let Some(pct) = p.percentile(&slo.percentile) else {
        return Verdict::Fail(format!("no {} measured", slo.percentile));
    };
    let upper = pct.upper_ns();
    let said = format!(
        "{} {} (interval up to {}) against {}",
        slo.percentile,
        human_ns(pct.ns),
        human_ns(upper),
        human_ns(slo.limit_ns)
    );
    if upper < slo.limit_ns {
        Verdict::Pass(said)
    } else {
        Verdict::Fail(said)
    }
}

/// The search's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The highest passing rate (None: none named).
    pub rate: Option<f64>,
    /// [highest pass, lowest fail above it].
    pub bracket: [Option<f64>; 2],
    /// `generator` when generator-limited steps kept it from an answer.
    pub limited_by: Option<&'static str>,
    /// Why it ended.
    pub reason: String,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Run a step at this rate, per second.
    Run(f64),
    /// Stop with this answer.
    Done(Outcome),
}

/// The bracket of the steps so far: the highest pass, and the lowest fail
/// above it.
pub fn bracket(tried: &[(f64, Verdict)]) -> [Option<f64>; 2] {
    let lo = tried
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Pass(_)))
        .map(|(r, _)| *r)
        .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))));
    let hi = tried
        .iter()
        .filter(|(r, v)| matches!(v, Verdict::Fail(_)) && lo.is_none_or(|l| *r > l))
        .map(|(r, _)| *r)
        .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.min(r))));
    [lo, hi]
}

/// The next step from the steps so far (`tried`, in order) and the
/// closed-loop `ceiling`, per second.
pub fn next(ceiling: f64, tried: &[(f64, Verdict)]) -> Next {
    let [lo, hi] = bracket(tried);
    // A limited step where the answer may lie: rerun it once, then give up.
    if let Some((r, Verdict::Limited(why))) = tried.last()
        && hi.is_none_or(|h| *r < h)
    {
        let times = tried
            .iter()
            .filter(|(x, v)| x == r && matches!(v, Verdict::Limited(_)))
            .count();
        if times < 2 {
            return Next::Run(*r);
        }
        return Next::Done(Outcome {
            rate: None,
            bracket: [lo, hi],
            limited_by: Some("generator"),
            reason: format!(
                "the generator could not keep up at {}/s, twice ({why}), below any failing rate",
                fmt_si(*r)
            ),
        });
    }
    let done = |rate, reason: String| {
        Next::Done(Outcome {
            rate,
            bracket: [lo, hi],
            limited_by: None,
            reason,
        })
    };
    let fails_at = |r: f64| {
        tried
            .iter()
            .filter(|(x, v)| *x == r && matches!(v, Verdict::Fail(_)))
            .count()
    };
    match (lo, hi) {
        _ if tried.is_empty() => Next::Run((ceiling / 2.0).max(FLOOR_PER_S)),
        // One noisy step must not cap the answer: the lowest fail is run
        // again before the bracket is taken as closed.
        (Some(l), Some(h)) if h - l <= CLOSE_ENOUGH * h && fails_at(h) < 2 => Next::Run(h),
        (Some(l), Some(h)) if h - l <= CLOSE_ENOUGH * h => done(
            Some(l),
            format!(
                "the highest pass ({}/s) and the lowest fail ({}/s) are within {:.0} %",
                fmt_si(l),
                fmt_si(h),
                CLOSE_ENOUGH * 100.0
            ),
        ),
        (Some(l), Some(h)) => Next::Run((l + h) / 2.0),
        (Some(l), None) if l >= CEILING_FACTOR * ceiling => done(
            Some(l),
            format!(
                "every rate passed up to {}/s, {CEILING_FACTOR}x the closed-loop ceiling",
                fmt_si(l)
            ),
        ),
        (Some(l), None) => Next::Run(l * RAMP),
        (None, Some(h)) if h / 2.0 < FLOOR_PER_S => done(
            None,
            format!("no rate met the SLO, down to {}/s", fmt_si(h)),
        ),
        (None, Some(h)) => Next::Run(h / 2.0),
        // Only limited steps, each tried twice (handled above) or none.
        (None, None) => Next::Run((ceiling / 2.0).max(FLOOR_PER_S)),
    }
}

/// The answer when time runs out before [`next`] says done: the bracket
/// so far, its highest pass as the rate.
/// With no pass and a generator-limited step, no rate is named and the
/// generator is said to be the limit.
pub fn out_of_time(tried: &[(f64, Verdict)], limit_s: f64) -> Outcome {
    let [lo, hi] = bracket(tried);
    let limited = lo.is_none() && tried.iter().any(|(_, v)| matches!(v, Verdict::Limited(_)));
    Outcome {
        rate: lo,
        bracket: [lo, hi],
        limited_by: limited.then_some("generator"),
        reason: format!(
            "--max-duration ({limit_s:.0} s) ran out before the bracket closed to {:.0} %{}",
            CLOSE_ENOUGH * 100.0,
            if limited {
                ", and the generator could not keep up at the rates tried"
            } else {
                ""
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sweep::Percentile;
    use crate::stats::TailInterval;

    fn pass() -> Verdict {
        Verdict::Pass(String::new())
    }
    fn fail() -> Verdict {
        Verdict::Fail(String::new())
    }
    fn limited() -> Verdict {
        Verdict::Limited("late".into())
    }

    /// Runs the search against a target that passes below `cap` per
    /// second, with the generator limited from `gen_max` up.
    fn search(ceiling: f64, cap: f64, gen_max: f64) -> (Outcome, Vec<f64>) {
        let mut tried = Vec::new();
        for _ in 0..100 {
            match next(ceiling, &tried) {
                Next::Run(r) => {
                    let v = if r >= gen_max {
                        limited()
                    } else if r < cap {
                        pass()
                    } else {
                        fail()
                    };
                    tried.push((r, v));
                }
                Next::Done(o) => return (o, tried.iter().map(|t| t.0).collect()),
            }
        }
        panic!("no answer in 100 steps: {tried:?}");
    }

    #[test]
    fn ramps_then_bisects_to_within_five_percent() {
        let (o, rates) = search(2000.0, 1900.0, f64::MAX);
        assert_eq!(rates[..3], [1000.0, 1500.0, 2250.0]);
        let r = o.rate.unwrap();
        let [lo, hi] = o.bracket;
        assert_eq!(lo, Some(r));
        assert!((1900.0 * 0.95..1900.0).contains(&r), "{o:?} {rates:?}");
        assert!(hi.unwrap() >= 1900.0 && hi.unwrap() - r <= 0.05 * hi.unwrap());
        assert!(rates.len() < 12, "{rates:?}");
        // A first step that fails: down by halves, then up again.
        let (o, rates) = search(2000.0, 300.0, f64::MAX);
        assert_eq!(rates[..3], [1000.0, 500.0, 250.0]);
        assert!(o.rate.unwrap() >= 285.0 && o.rate.unwrap() < 300.0, "{o:?}");
        // Nothing passes.
        let (o, _) = search(2000.0, 0.5, f64::MAX);
        assert_eq!((o.rate, o.limited_by), (None, None));
        assert!(o.reason.starts_with("no rate met the SLO"), "{}", o.reason);
    }

    #[test]
    fn a_generator_that_cannot_keep_up_names_no_capacity() {
        // Limited below where the target would fail: never a number.
        let (o, rates) = search(2000.0, 5000.0, 1200.0);
        assert_eq!(o.rate, None, "{o:?}");
        assert_eq!(o.limited_by, Some("generator"));
        assert!(
            o.reason.contains("could not keep up at 1.50k/s, twice"),
            "{}",
            o.reason
        );
        assert_eq!(rates, [1000.0, 1500.0, 1500.0]);
        // Limited from the first step.
        let (o, _) = search(2000.0, 5000.0, 10.0);
        assert_eq!((o.rate, o.limited_by), (None, Some("generator")));
        // One limited step, then the same rate fine: the search goes on.
        let tried = vec![(1000.0, limited())];
        assert_eq!(next(2000.0, &tried), Next::Run(1000.0));
        // Limited above a known fail is past the answer: ignored.
        let tried = vec![(1000.0, pass()), (1500.0, fail()), (3000.0, limited())];
        assert_eq!(next(2000.0, &tried), Next::Run(1250.0));
    }

    #[test]
    fn a_fail_that_closes_the_bracket_is_run_again() {
        // A noisy first step failed at 972/s, every step below passed.
        let mut tried = vec![
            (972.0, fail()),
            (486.0, pass()),
            (729.0, pass()),
            (850.0, pass()),
            (911.0, pass()),
            (941.0, pass()),
        ];
        assert_eq!(next(2000.0, &tried), Next::Run(972.0));
        // It passes this time: the ramp goes on above it.
        tried.push((972.0, pass()));
        assert_eq!(next(2000.0, &tried), Next::Run(972.0 * RAMP));
        // Failed twice: the bracket stands.
        let confirmed = vec![(941.0, pass()), (972.0, fail()), (972.0, fail())];
        match next(2000.0, &confirmed) {
            Next::Done(o) => assert_eq!(o.bracket, [Some(941.0), Some(972.0)]),
            n => panic!("{n:?}"),
        }
    }

    #[test]
    fn out_of_time_reports_the_bracket() {
        let tried = vec![(1000.0, pass()), (1500.0, fail())];
        let o = out_of_time(&tried, 60.0);
        assert_eq!(o.rate, Some(1000.0));
        assert_eq!(o.bracket, [Some(1000.0), Some(1500.0)]);
        assert!(o.reason.contains("--max-duration (60 s) ran out"));
        assert_eq!(o.limited_by, None);
        let o = out_of_time(&[(1000.0, limited())], 60.0);
        assert_eq!((o.rate, o.limited_by), (None, Some("generator")));
    }

    #[test]
    fn a_step_is_judged_by_the_upper_bound_errors_and_achieved_rate() {
        let slo = Slo::parse("p99<10ms,errors<1%").unwrap();
        let ci = |high_ms: u64| TailInterval {
            low_ns: 1_000_000,
            high_ns: high_ms * 1_000_000,
            ..Default::default()
        };
        let p = SweepPoint {
            step: 2,
            requested_per_s: Some(1000.0),
            achieved_per_s: 990.0,
            transactions: 990,
            p99: Percentile {
                ns: 8_000_000,
                ci: Some(ci(9)),
            },
            ..Default::default()
        };
        assert!(
            matches!(verdict(&p, &slo), Verdict::Pass(_)),
            "{:?}",
            verdict(&p, &slo)
        );
        // The value under the limit, its interval not: a fail.
        let wide = SweepPoint {
            p99: Percentile {
                ns: 8_000_000,
                ci: Some(ci(12)),
            },
            ..p.clone()
        };
        assert!(matches!(verdict(&wide, &slo), Verdict::Fail(_)));
        let slow = SweepPoint {
            achieved_per_s: 900.0,
            ..p.clone()
        };
        assert!(verdict(&slow, &slo).why().contains("under 95 %"));
        let errs = SweepPoint {
            errors: 20,
            ..p.clone()
        };
        assert!(verdict(&errs, &slo).why().contains("over the budget"));
        // A lagging generator: a step that met the SLO anyway passes (its
        // lag only added to the latencies); one that did not says nothing.
        let lim = SweepPoint {
            generator_limited: Some("busy".into()),
            ..p
        };
        let v = verdict(&lim, &slo);
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        assert!(v.why().contains("lag counted in (busy)"), "{v:?}");
        let lim_wide = SweepPoint {
            generator_limited: Some("busy".into()),
            ..wide
        };
        assert_eq!(verdict(&lim_wide, &slo), Verdict::Limited("busy".into()));
        let lim_slow = SweepPoint {
            generator_limited: Some("busy".into()),
            ..slow
        };
        assert_eq!(verdict(&lim_slow, &slo), Verdict::Limited("busy".into()));
    }
}
