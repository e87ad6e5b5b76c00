//! `--find-capacity`'s decisions, pure: a step's verdict against the SLO
//! ([`verdict`]), and the next rate to try from the steps so far
//! ([`next`]): from half the closed-loop ceiling, up by x1.5 while steps
//! pass, then bisection between the highest pass and the lowest fail above
//! it until they are within [`CLOSE_ENOUGH`] of each other, the lowest
//! fail confirmed by a second step at its rate (one noisy step on a busy
//! machine would otherwise cap the answer below the capacity). A
//! generator-limited step is neither a pass nor a fail: tried twice at one
//! rate below the answer, it ends the search with no capacity named.
//!
//! Who limited a step is told apart: the target's own server time (the
//! request anatomy's) over the SLO fails the step whatever the generator
//! did; a client percentile within it passes; and a step is generator-
//! limited only when the generator was late while a connection was free
//! for the send (its CPU, its timer). A send that found every connection
//! busy waited on the target (or the pool of connections), which is a
//! fail, not the generator's doing.

use crate::report::sweep::{PASS_ACHIEVED_SHARE, Slo, SweepPoint};
use crate::report::units::{fmt_si, human_ns};
use crate::stats::TailInterval;

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

/// The verdict on an open-loop step `p` against `slo`. The target's own
/// server time at the SLO's percentile over the limit fails the step,
/// whoever else was late: that time does not include the generator's. A
/// step whose generator lagged still passes when it met the SLO at the
/// rate asked: its latencies run from the intended send times, so the
/// generator's lateness can only have added to them, never hidden the
/// target's. A step that did not pass says nothing of the target when
/// the generator alone could have failed it (it released more sends at
/// least the limit late than the percentile lets be over it), or when it
/// was late with a free connection and neither the connection waits nor
/// the client percentile less its lag are over the limit on their own.
pub fn verdict(p: &SweepPoint, slo: &Slo) -> Verdict {
    if let Some(said) = server_fails(p, slo) {
        return Verdict::Fail(said);
    }
    let v = judge(p, slo);
    if matches!(v, Verdict::Fail(_))
        && let Some(why) = stalled(p, slo)
    {
        return Verdict::Limited(why);
    }
    match (&p.generator_limited, v) {
        (Some(why), Verdict::Pass(said)) => Verdict::Pass(format!(
            "{said}, met with the generator's lag counted in ({why})"
        )),
        // Late, but the sends that waited for a busy connection are alone
        // enough to put the percentile over the limit: the target's (or
        // the pool's) fail, whatever the generator's lateness added.
        (Some(_), Verdict::Fail(said)) if waits_fail(p, slo) => {
            Verdict::Fail(format!("{said}; {}", waited(p).unwrap_or_default()))
        }
        (Some(_), Verdict::Fail(said)) if over_without_lag(p, slo) => Verdict::Fail(format!(
            "{said}, over it even less the generator's send lag p99 ({})",
            human_ns(p.send_lag_p99_ns.unwrap_or(0))
        )),
        (Some(why), _) => Verdict::Limited(why.clone()),
        (None, Verdict::Fail(said)) => Verdict::Fail(match waited(p) {
            Some(w) => format!("{said}; {w}"),
            None => said,
        }),
        (None, v) => v,
    }
}

/// Why the generator alone could have failed the step: it released more
/// sends at least the SLO's limit after their intended time than the
/// percentile lets be over it (a worker held by a CPU quota, or starved).
fn stalled(p: &SweepPoint, slo: &Slo) -> Option<String> {
    let late = p.released_late_over_limit?;
    let sends = (p.transactions + p.errors) as f64;
    (late as f64 > (1.0 - slo.quantile()) * sends).then(|| {
        format!(
            "the generator itself released {late} of {sends:.0} sends at least {} late (its \
             CPU or its timer): more than the {} lets be over the limit",
            human_ns(slo.limit_ns),
            slo.percentile
        )
    })
}

/// Whether the client percentile is over the limit even less the
/// generator's own send lag at its p99 (the most its lateness added to
/// all but 1 % of the sends): at the interval's lower end, so that a
/// percentile of few samples is not over it by luck.
fn over_without_lag(p: &SweepPoint, slo: &Slo) -> bool {
    let (Some(pct), Some(lag)) = (p.percentile(&slo.percentile), p.send_lag_p99_ns) else {
        return false;
    };
    let low = pct.ci.map_or(pct.ns, |c| c.low_ns.min(pct.ns));
    low.saturating_sub(lag) >= slo.limit_ns
}

/// Whether the sends whose wait for a free connection alone reached the
/// limit are more than the percentile lets be over it: then the client
/// percentile is over the limit with no help from the generator.
fn waits_fail(p: &SweepPoint, slo: &Slo) -> bool {
    let Some(over) = p.conn_wait.and_then(|w| w.over_limit) else {
        return false;
    };
    let sends = (p.transactions + p.errors) as f64;
    over as f64 > (1.0 - slo.quantile()) * sends
}

/// Why the target's own time failed the SLO: its server time at the
/// SLO's percentile (the lower end of its interval, so that a percentile
/// of few turns fails only when even that is over) at or over the limit.
fn server_fails(p: &SweepPoint, slo: &Slo) -> Option<String> {
    let s = p.server_percentile(&slo.percentile)?;
    let low = s.ci.map_or(s.ns, |c: TailInterval| c.low_ns.min(s.ns));
    (low >= slo.limit_ns).then(|| {
        format!(
            "the target's own server time {} {} (interval from {}) against {}, whatever the \
             generator did",
            slo.percentile,
            human_ns(s.ns),
            human_ns(low),
            human_ns(slo.limit_ns)
        )
    })
}

/// What the sends that found every connection busy say, when some did.
fn waited(p: &SweepPoint) -> Option<String> {
    let w = p.conn_wait.filter(|w| w.sends > 0)?;
    Some(format!(
        "{} sends found every connection busy and waited (p99 {}): the target, or the pool \
         of connections, was the limit, not the generator",
        w.sends,
        human_ns(w.p99_ns)
    ))
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
        // Inside a bracket the target itself closed (a pass below, its
        // own fail above): the capacity is the pass, the generator's
        // lateness only kept the bracket from narrowing.
        if let (Some(l), Some(h)) = (lo, hi)
            && l < *r
        {
            return Next::Done(Outcome {
                rate: Some(l),
                bracket: [lo, hi],
                limited_by: None,
                reason: format!(
                    "the highest pass ({}/s) and the lowest fail ({}/s) are {:.0} % apart; \
                     between them the generator could not keep up at {}/s, twice ({why})",
                    fmt_si(l),
                    fmt_si(h),
                    (h - l) / h * 100.0,
                    fmt_si(*r)
                ),
            });
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
        // Limited twice inside a bracket the target closed: the pass is
        // the capacity, the reason says the bracket stayed open there.
        let tried = vec![
            (900.0, pass()),
            (1000.0, fail()),
            (950.0, limited()),
            (950.0, limited()),
        ];
        let Next::Done(o) = next(2000.0, &tried) else {
            panic!("not done")
        };
        assert_eq!((o.rate, o.limited_by), (Some(900.0), None));
        assert!(
            o.reason.contains("could not keep up at 950/s"),
            "{}",
            o.reason
        );
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

    #[test]
    fn the_targets_own_time_fails_a_step_whoever_was_late() {
        use crate::report::sweep::{ConnWait, PointAnatomy, ServerPercentiles};
        let slo = Slo::parse("p99<20ms").unwrap();
        let server = |ms: u64, low_ms: u64| PointAnatomy {
            turns: 5000,
            server_time: Some(ServerPercentiles {
                p99: Percentile {
                    ns: ms * 1_000_000,
                    ci: Some(TailInterval {
                        low_ns: low_ms * 1_000_000,
                        high_ns: (ms + 5) * 1_000_000,
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        // Over the SLO at the client, the generator late: the server's own
        // p99 of 80 ms fails it, not "limited".
        let p = SweepPoint {
            step: 3,
            requested_per_s: Some(2000.0),
            achieved_per_s: 1500.0,
            transactions: 3000,
            p99: Percentile {
                ns: 900_000_000,
                ci: None,
            },
            generator_limited: Some("the generator sent late".into()),
            anatomy: Some(server(80, 70)),
            ..Default::default()
        };
        let v = verdict(&p, &slo);
        assert!(matches!(v, Verdict::Fail(_)), "{v:?}");
        assert!(v.why().contains("own server time p99"), "{v:?}");
        // Its interval reaching under the limit: not the server's fail;
        // the late generator leaves it limited.
        let near = SweepPoint {
            anatomy: Some(server(25, 15)),
            ..p.clone()
        };
        assert!(matches!(verdict(&near, &slo), Verdict::Limited(_)));
        // No generator lateness with a free connection, every connection
        // busy: a fail that says the sends waited.
        let waited = SweepPoint {
            generator_limited: None,
            anatomy: Some(server(4, 3)),
            conn_wait: Some(ConnWait {
                sends: 2500,
                p99_ns: 850_000_000,
                over_limit: None,
            }),
            ..p
        };
        let v = verdict(&waited, &slo);
        assert!(matches!(v, Verdict::Fail(_)), "{v:?}");
        assert!(
            v.why().contains("2500 sends found every connection busy"),
            "{v:?}"
        );
        // The generator late too: the waits over the limit (100 of 3000
        // sends, over the 1 % the p99 allows) make it the target's fail;
        // 20 of them would not.
        let both = |over| SweepPoint {
            generator_limited: Some("the generator sent late".into()),
            conn_wait: Some(ConnWait {
                sends: 2500,
                p99_ns: 850_000_000,
                over_limit: Some(over),
            }),
            ..waited.clone()
        };
        assert!(matches!(verdict(&both(100), &slo), Verdict::Fail(_)));
        assert!(matches!(verdict(&both(20), &slo), Verdict::Limited(_)));
        // Over the limit even less the generator's lag: the target's.
        let lag = |ms: u64| SweepPoint {
            send_lag_p99_ns: Some(ms * 1_000_000),
            ..both(0)
        };
        let v = verdict(&lag(4), &slo);
        assert!(
            v.why().contains("even less the generator's send lag"),
            "{v:?}"
        );
        let mut near = lag(4);
        near.p99 = Percentile {
            ns: 22_000_000,
            ci: None,
        };
        assert!(matches!(verdict(&near, &slo), Verdict::Limited(_)));
        // A generator that itself released 100 of 3000 sends 20 ms late or
        // more (held by a CPU quota: its connections looked busy because
        // it left their answers unread): limited, whatever the waits say;
        // 20 such sends are within the 1 % the p99 lets over.
        let held = |late| SweepPoint {
            released_late_over_limit: Some(late),
            ..both(100)
        };
        let v = verdict(&held(100), &slo);
        assert!(matches!(v, Verdict::Limited(_)), "{v:?}");
        assert!(v.why().contains("released 100 of 3000 sends"), "{v:?}");
        assert!(matches!(verdict(&held(20), &slo), Verdict::Fail(_)));
        // The target's own server time still fails it.
        let own = SweepPoint {
            anatomy: Some(server(80, 70)),
            ..held(100)
        };
        assert!(matches!(verdict(&own, &slo), Verdict::Fail(_)));
    }
}
