//! Rate schedules (`--rate`): a constant rate, a list or a staircase of
//! rates held for whole seconds each, or a linear ramp. The plan answers
//! two questions exactly, with no drift accumulated over a long run: how
//! many requests are due by a given time (`count_until`) and when the n-th
//! one is due (`time_of`), so an open-loop schedule can place its intended
//! send times on the plan whatever its shape (a ramp from 0/s included).
//!
//! Steps last whole seconds because a run's results are gathered per
//! second: a step is a run of whole intervals, so its counts are sums of
//! the run's own per-second counts.

use std::fmt;
use std::time::Duration;

/// The accepted syntax, quoted by every parse error.
pub const SYNTAX: &str = "RATE (5000 or 5k), 'FROM..TO step STEP every DUR' (a staircase), \
     'R1,R2,... every DUR' (a list, of one rate too) or 'FROM..TO over DUR [every DUR]' (a linear ramp); \
     rates per second, DUR in whole seconds or minutes (5s, 2m)";

/// Most steps a plan may have: more is a typo (`step 1`), not a plan.
pub const MAX_STEPS: usize = 10_000;
/// Longest plan: a day.
pub const MAX_SECONDS: u64 = 86_400;
/// Highest rate, as for a plain `--rate`.
pub const MAX_RATE: f64 = 1e9;

/// A parsed `--rate`.
#[derive(Clone, Debug, PartialEq)]
pub enum RatePlan {
    /// One rate for the whole run (the plain `--rate N`).
    Constant(f64),
    /// Each rate held for `every` seconds, in order.
    Steps {
        /// The rates, per second.
        rates: Vec<f64>,
        /// How long each is held, seconds.
        every: u64,
    },
    /// From `from` to `to` per second, linearly over `over` seconds,
    /// reported in steps of `every` seconds.
    Ramp {
        /// Rate at the start, per second.
        from: f64,
        /// Rate at the end, per second.
        to: f64,
        /// Length of the ramp, seconds.
        over: u64,
        /// Length of a reported step, seconds.
        every: u64,
    },
}

/// One step of a plan, as reported.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanStep {
    /// Start, seconds from the plan's start.
    pub start_s: u64,
    /// Length, seconds.
    pub len_s: u64,
    /// Rate asked for: the step's rate, or a ramp's mean over the step.
    pub rate: f64,
}

impl RatePlan {
    /// Parses `--rate`'s text (see [`SYNTAX`]).
    pub fn parse(s: &str) -> Result<RatePlan, String> {
        let text = s.trim();
        let err = |why: String| format!("`{s}`: {why}; accepted: {SYNTAX}");
        let words: Vec<&str> = text.split_whitespace().collect();
        let plan = match words.as_slice() {
            [one] if !one.contains("..") && !one.contains(',') => {
                RatePlan::Constant(rate(one).map_err(err)?)
            }
            [range, "step", step, "every", dur] => {
                let (from, to) = range_of(range).map_err(err)?;
                let step = rate(step).map_err(err)?;
                let every = seconds(dur).map_err(err)?;
                RatePlan::Steps {
                    rates: staircase(from, to, step).map_err(err)?,
                    every,
                }
            }
            [list, "every", dur] if !list.contains("..") => {
                let rates = list
                    .split(',')
                    .map(rate)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?;
                RatePlan::Steps {
                    rates,
                    every: seconds(dur).map_err(err)?,
                }
            }
            [range, "over", dur, rest @ ..] => {
                let (from, to) = range_of_ramp(range).map_err(err)?;
                let over = seconds(dur).map_err(err)?;
                let every = match rest {
                    [] => 1,
                    ["every", d] => seconds(d).map_err(err)?,
                    _ => return Err(err("unexpected words after the ramp's length".into())),
                };
                if every > over {
                    return Err(err(format!(
                        "a ramp's steps ({every} s) cannot be longer than the ramp ({over} s)"
                    )));
                }
                if over % every != 0 {
                    return Err(err(format!(
                        "the ramp's length ({over} s) is not a whole number of its steps ({every} s)"
                    )));
                }
                RatePlan::Ramp {
                    from,
                    to,
                    over,
                    every,
                }
            }
            [] => return Err(err("empty".into())),
            _ => return Err(err("not a rate or a schedule".into())),
        };
        let (n, total) = match &plan {
            RatePlan::Constant(_) => (1, 0),
            RatePlan::Steps { rates, every } => (rates.len(), rates.len() as u64 * every),
            RatePlan::Ramp { over, every, .. } => ((over / every) as usize, *over),
        };
        if n > MAX_STEPS {
            return Err(err(format!("{n} steps, more than {MAX_STEPS}")));
        }
        if total > MAX_SECONDS {
            return Err(err(format!(
                "the schedule lasts {total} s, more than a day ({MAX_SECONDS} s)"
            )));
        }
        Ok(plan)
    }

    /// The rate of a constant plan; None for a schedule.
    pub fn constant(&self) -> Option<f64> {
        match self {
            RatePlan::Constant(r) => Some(*r),
            _ => None,
        }
    }

    /// The schedule's length; None for a constant rate (the run's
    /// duration or count decides).
    pub fn duration(&self) -> Option<Duration> {
        match self {
            RatePlan::Constant(_) => None,
            RatePlan::Steps { rates, every } => {
                Some(Duration::from_secs(rates.len() as u64 * every))
            }
            RatePlan::Ramp { over, .. } => Some(Duration::from_secs(*over)),
        }
    }

    /// The reported steps (none for a constant rate).
    pub fn steps(&self) -> Vec<PlanStep> {
        match self {
            RatePlan::Constant(_) => Vec::new(),
            RatePlan::Steps { rates, every } => rates
                .iter()
                .enumerate()
                .map(|(i, &rate)| PlanStep {
                    start_s: i as u64 * every,
                    len_s: *every,
                    rate,
                })
                .collect(),
            RatePlan::Ramp { over, every, .. } => (0..over / every)
                .map(|i| {
                    let (a, b) = (i * every, (i + 1) * every);
                    PlanStep {
                        start_s: a,
                        len_s: *every,
                        rate: (self.count_until(b as f64) - self.count_until(a as f64))
                            / *every as f64,
                    }
                })
                .collect(),
        }
    }

    /// The rate asked for at `t` seconds (a schedule's last rate after its
    /// end).
    pub fn rate_at(&self, t: f64) -> f64 {
        let t = t.max(0.0);
        match self {
            RatePlan::Constant(r) => *r,
            RatePlan::Steps { rates, every } => {
                let i = ((t / *every as f64) as usize).min(rates.len() - 1);
                rates[i]
            }
            RatePlan::Ramp { from, to, over, .. } => {
                let f = (t / *over as f64).min(1.0);
                from + (to - from) * f
            }
        }
    }

    /// The highest rate the plan asks for.
    pub fn peak(&self) -> f64 {
        match self {
            RatePlan::Constant(r) => *r,
            RatePlan::Steps { rates, .. } => rates.iter().copied().fold(0.0, f64::max),
            RatePlan::Ramp { from, to, .. } => from.max(*to),
        }
    }

    /// Requests due in the first `t` seconds (the integral of the rate;
    /// a schedule ends at its length).
    pub fn count_until(&self, t: f64) -> f64 {
        let t = t.max(0.0);
        match self {
            RatePlan::Constant(r) => r * t,
            RatePlan::Steps { rates, every } => {
                let e = *every as f64;
                let full = ((t / e) as usize).min(rates.len());
                let done: f64 = rates[..full].iter().sum::<f64>() * e;
                let part = if full < rates.len() {
                    rates[full] * (t - full as f64 * e)
                } else {
                    0.0
                };
                done + part
            }
            RatePlan::Ramp { from, to, over, .. } => {
                let t = t.min(*over as f64);
                let slope = (to - from) / *over as f64;
                from * t + slope * t * t / 2.0
            }
        }
    }

    /// When the count of due requests reaches `n` (n >= 0), seconds from
    /// the start; None when the plan ends first. The n-th intended send of
    /// an open-loop schedule is at `time_of(n)` (the first at
    /// `time_of(0)`, the start).
    pub fn time_of(&self, n: f64) -> Option<f64> {
        if n <= 0.0 {
            return Some(0.0);
        }
        match self {
            RatePlan::Constant(r) => Some(n / r),
            RatePlan::Steps { rates, every } => {
                let e = *every as f64;
                let mut before = 0.0;
                for (i, &r) in rates.iter().enumerate() {
                    let here = r * e;
                    if n < before + here {
                        return Some(i as f64 * e + (n - before) / r);
                    }
                    before += here;
                }
                None
            }
            RatePlan::Ramp { from, to, over, .. } => {
                let len = *over as f64;
                if n >= self.count_until(len) {
                    return None;
                }
                let slope = (to - from) / len;
                if slope.abs() < 1e-12 {
                    return Some(n / from);
                }
                // from*t + slope*t²/2 = n; the root in [0, over]. Written
                // as 2n / (from + sqrt(...)) so that a ramp from 0/s and a
                // falling ramp are both exact, without cancellation.
                let disc = from * from + 2.0 * slope * n;
                Some(2.0 * n / (from + disc.max(0.0).sqrt()))
            }
        }
    }

    /// The same plan with every rate multiplied by `f` (a worker's share).
    pub fn scaled(&self, f: f64) -> RatePlan {
        match self {
            RatePlan::Constant(r) => RatePlan::Constant(r * f),
            RatePlan::Steps { rates, every } => RatePlan::Steps {
                rates: rates.iter().map(|r| r * f).collect(),
                every: *every,
            },
            RatePlan::Ramp {
                from,
                to,
                over,
                every,
            } => RatePlan::Ramp {
                from: from * f,
                to: to * f,
                over: *over,
                every: *every,
            },
        }
    }
}

impl fmt::Display for RatePlan {
    /// The canonical text, which parses back to the same plan.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RatePlan::Constant(r) => write!(f, "{r}"),
            RatePlan::Steps { rates, every } => {
                let list: Vec<String> = rates.iter().map(|r| r.to_string()).collect();
                write!(f, "{} every {every}s", list.join(","))
            }
            RatePlan::Ramp {
                from,
                to,
                over,
                every,
            } => {
                write!(f, "{from}..{to} over {over}s")?;
                if *every != 1 {
                    write!(f, " every {every}s")?;
                }
                Ok(())
            }
        }
    }
}

/// A rate: a positive number, `k` for thousands.
fn rate(s: &str) -> Result<f64, String> {
    let (num, mult) = match s.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1e3),
        None => (s, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a rate per second"))?;
    let v = v * mult;
    if !(v.is_finite() && v > 0.0 && v <= MAX_RATE) {
        return Err(format!("`{s}`: a rate must be > 0 and <= 1e9 per second"));
    }
    Ok(v)
}

/// A ramp's end: 0 is allowed (a ramp may start or end idle).
fn ramp_end(s: &str) -> Result<f64, String> {
    if s.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(0.0);
    }
    rate(s)
}

fn range_of(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a range FROM..TO"))?;
    Ok((rate(a)?, rate(b)?))
}

fn range_of_ramp(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a range FROM..TO"))?;
    let (from, to) = (ramp_end(a)?, ramp_end(b)?);
    if from == 0.0 && to == 0.0 {
        return Err("a ramp from 0 to 0 sends nothing".into());
    }
    Ok((from, to))
}

/// FROM, FROM±STEP, ... up to TO (TO itself when it falls on a step).
fn staircase(from: f64, to: f64, step: f64) -> Result<Vec<f64>, String> {
    let span = (to - from).abs();
    let n = (span / step + 1e-9).floor();
    if n + 1.0 > MAX_STEPS as f64 {
        return Err(format!(
            "{} steps of {step}/s from {from} to {to}, more than {MAX_STEPS}",
            n + 1.0
        ));
    }
    let sign = if to >= from { 1.0 } else { -1.0 };
    Ok((0..=n as usize)
        .map(|i| from + sign * step * i as f64)
        .collect())
}

/// A step's or ramp's length: whole seconds (`5s`, `5`) or minutes (`2m`).
fn seconds(s: &str) -> Result<u64, String> {
    let (num, mult) = if s.ends_with("ms") {
        return Err(format!(
            "`{s}`: steps last whole seconds (results are gathered per second)"
        ));
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60)
    } else {
        (s, 1)
    };
    let v: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a length in whole seconds or minutes (5s, 2m)"))?;
    if v == 0 {
        return Err(format!("`{s}`: a step or ramp must last at least 1 s"));
    }
    v.checked_mul(mult)
        .filter(|&v| v <= MAX_SECONDS)
        .ok_or_else(|| format!("`{s}` is longer than a day"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RatePlan {
        RatePlan::parse(s).unwrap()
    }

    #[test]
    fn each_syntax_parses() {
        assert_eq!(p("5000"), RatePlan::Constant(5000.0));
        assert_eq!(p("2.5k"), RatePlan::Constant(2500.0));
        assert_eq!(
            p("1000..5000 step 1000 every 5s"),
            RatePlan::Steps {
                rates: vec![1000.0, 2000.0, 3000.0, 4000.0, 5000.0],
                every: 5
            }
        );
        assert_eq!(
            p("5k..3k step 1k every 1m"),
            RatePlan::Steps {
                rates: vec![5000.0, 4000.0, 3000.0],
                every: 60
            }
        );
        assert_eq!(
            p("1000,5000,10000 every 10s"),
            RatePlan::Steps {
                rates: vec![1000.0, 5000.0, 10000.0],
                every: 10
            }
        );
        // One rate held for a while: a list of one.
        assert_eq!(
            p("5k every 10s"),
            RatePlan::Steps {
                rates: vec![5000.0],
                every: 10
            }
        );
        assert_eq!(
            p("0..50000 over 60s"),
            RatePlan::Ramp {
                from: 0.0,
                to: 50000.0,
                over: 60,
                every: 1
            }
        );
        assert_eq!(
            p(" 100..0 over 1m every 10s "),
            RatePlan::Ramp {
                from: 100.0,
                to: 0.0,
                over: 60,
                every: 10
            }
        );
        // A staircase whose end is not on a step stops below it.
        assert_eq!(
            p("1000..2500 step 1000 every 1s").steps().len(),
            2,
            "1000, 2000"
        );
    }

    #[test]
    fn bad_schedules_say_why_and_quote_the_syntax() {
        for (bad, why) in [
            ("", "empty"),
            ("0", "> 0"),
            ("-5", "> 0"),
            ("fast", "not a rate"),
            ("1000..5000", "not a rate or a schedule"),
            ("1..50000 step 1 every 1s", "more than 10000"),
            ("1000..5000 step 1000 every 500ms", "whole seconds"),
            ("1000..5000 step 1000 every 0s", "at least 1 s"),
            ("1000,0 every 5s", "> 0"),
            ("1000,2000 every", "not a rate or a schedule"),
            ("0..0 over 10s", "sends nothing"),
            ("0..100 over 10s every 3s", "whole number of its steps"),
            ("0..100 over 10s every 20s", "cannot be longer"),
            ("0..100 over 2000m", "longer than a day"),
            ("1,2 every 1000m", "more than a day"),
            ("0..100 over 10s sideways", "unexpected words"),
        ] {
            let e = RatePlan::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.contains("accepted:"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn display_parses_back() {
        for s in [
            "5000",
            "1000..5000 step 1000 every 5s",
            "7..7 step 3 every 2s",
            "9 every 3s",
            "1,2,3 every 1s",
            "0..50000 over 60s",
            "100..0 over 60s every 10s",
        ] {
            let plan = p(s);
            assert_eq!(p(&plan.to_string()), plan, "{s} -> {plan}");
        }
    }

    #[test]
    fn steps_cover_the_plan_and_their_counts_add_up() {
        for s in [
            "1000..5000 step 1000 every 5s",
            "1,2,3 every 2s",
            "0..50000 over 60s",
            "300..100 over 20s every 5s",
        ] {
            let plan = p(s);
            let steps = plan.steps();
            let total = plan.duration().unwrap().as_secs();
            assert_eq!(steps.last().map(|x| x.start_s + x.len_s), Some(total));
            let sum: f64 = steps.iter().map(|x| x.rate * x.len_s as f64).sum();
            let all = plan.count_until(total as f64);
            assert!(
                (sum - all).abs() < 1e-6 * all.max(1.0),
                "{s}: {sum} vs {all}"
            );
        }
        // A ramp's step asks for its mean rate.
        let r = p("0..100 over 10s every 5s").steps();
        assert!((r[0].rate - 25.0).abs() < 1e-9 && (r[1].rate - 75.0).abs() < 1e-9);
    }

    #[test]
    fn time_of_inverts_count_until() {
        for s in [
            "250",
            "1000..5000 step 1000 every 5s",
            "0..50000 over 60s",
            "100..0 over 60s",
            "10..10 over 5s",
        ] {
            let plan = p(s);
            let end = plan.duration().map_or(30.0, |d| d.as_secs_f64());
            let all = plan.count_until(end);
            let mut last = -1.0;
            for k in 0..200 {
                let n = all * k as f64 / 200.0;
                let t = plan.time_of(n).unwrap();
                assert!(t >= last, "{s}: time goes back at n={n}");
                last = t;
                let back = plan.count_until(t);
                assert!(
                    (back - n).abs() < 1e-6 * all.max(1.0),
                    "{s}: n={n} t={t} back={back}"
                );
            }
            if plan.duration().is_some() {
                assert_eq!(plan.time_of(all + 1.0), None, "{s}: past its end");
            }
        }
    }

    #[test]
    fn rate_at_follows_the_plan() {
        let s = p("1000..3000 step 1000 every 5s");
        assert_eq!(s.rate_at(0.0), 1000.0);
        assert_eq!(s.rate_at(5.0), 2000.0);
        assert_eq!(s.rate_at(99.0), 3000.0);
        let r = p("0..100 over 10s");
        assert_eq!(r.rate_at(5.0), 50.0);
        assert_eq!(r.rate_at(20.0), 100.0);
        assert_eq!(r.peak(), 100.0);
        assert_eq!(r.scaled(0.5).rate_at(10.0), 50.0);
    }
}
