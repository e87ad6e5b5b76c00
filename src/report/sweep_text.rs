//! The steps of a sweep or a capacity search in summary.txt (and, through
//! the same [`Table`], on the page): a row per step, the knee, what grew,
//! the capacity line, and the partial mark.

use std::fmt::Write as _;

use super::sweep::{Capacity, Sweep, SweepPoint};
use super::table::{Align, Column, Table};
use super::units::{fmt_si, human_ns};

/// A row per step: step, requested, achieved, p50, p99 [interval],
/// errors, the generator's send lag and the connection wait, the
/// anatomy's largest part, CPU us per request, the verdict.
pub fn table(s: &Sweep, capacity: Option<&Capacity>) -> Table {
    let columns = vec![
        Column::both("step", "step", 4, Align::Right),
        Column::both("requested", "requested", 9, Align::Right),
        Column::both("achieved", "achieved", 8, Align::Right),
        Column::both("p50", "p50", 7, Align::Right),
        Column::both("p99 [95 % interval]", "p99 [interval]", 24, Align::Right),
        Column::both("errors", "errors", 6, Align::Right),
        Column::both(
            "send lag p99 | conn wait p99",
            "lag | wait",
            15,
            Align::Right,
        ),
        Column::both(
            "largest part of server time",
            "largest part",
            16,
            Align::Left,
        ),
        Column::both("target CPU/req", "CPU us/req", 10, Align::Right),
        Column::both("syscalls/req", "sys/req", 7, Align::Right),
        Column::both("verdict", "", 7, Align::Left),
    ];
    let rows = s
        .points
        .iter()
        .map(|p| {
            let verdict = capacity
                .and_then(|c| c.steps_tried.iter().find(|t| t.step == p.step))
                .map(|t| t.verdict.to_uppercase());
            row(
                p,
                s.knee.as_ref().is_some_and(|k| k.step == p.step),
                verdict,
            )
        })
        .collect();
    Table { columns, rows }
}

fn row(p: &SweepPoint, knee: bool, verdict: Option<String>) -> Vec<String> {
    let p99 = match p.p99.ci {
        Some(c) => format!(
            "{} [{}, {}]",
            human_ns(p.p99.ns),
            human_ns(c.low_ns),
            human_ns(c.high_ns)
        ),
        None => human_ns(p.p99.ns),
    };
    let part = p.anatomy.map_or("-".to_string(), |a| {
        let (name, share) = a.largest();
        format!("{name} {:.0} %", share * 100.0)
    });
    let mut flags = Vec::new();
    if let Some(v) = verdict {
        flags.push(v);
    } else if p.generator_limited.is_some() {
        flags.push("LIMITED".to_string());
    }
    // The generator's own lateness (a free connection waiting), then the
    // wait of the sends that found every connection busy.
    let lag = match (p.send_lag_p99_ns, p.conn_wait) {
        (None, None) => "-".to_string(),
        (l, w) => format!(
            "{} | {}",
            l.map_or("-".into(), human_ns),
            w.map_or("-".into(), |w| human_ns(w.p99_ns))
        ),
    };
    if knee {
        flags.push("knee".into());
    }
    if let Some(n) = p.connections_added {
        flags.push(format!("+{n} conns"));
    }
    vec![
        p.step.to_string(),
        p.label(),
        format!("{}/s", fmt_si(p.achieved_per_s)),
        human_ns(p.p50.ns),
        p99,
        p.errors.to_string(),
        lag,
        part,
        p.cpu_us_per_request
            .map_or("-".into(), |v| format!("{v:.1}")),
        p.syscalls_per_request
            .map_or("-".into(), |v| format!("{v:.1}")),
        flags.join(" "),
    ]
}

/// The lines after the table: the partial mark, the knee, what grew, the
/// generator-limited steps' reasons.
pub fn notes(s: &Sweep) -> Vec<String> {
    let mut out = Vec::new();
    if s.partial {
        out.push(format!(
            "PARTIAL: {} (the steps above are those measured before)",
            s.partial_reason.as_deref().unwrap_or("stopped early")
        ));
    }
    let judged = super::sweep::curve(&s.points).len();
    match &s.knee {
        Some(k) => out.push(format!(
            "knee at step {} ({}/s): {}",
            k.step,
            fmt_si(k.requested_per_s),
            k.why
        )),
        // Limited steps are not on the curve: say what the knee was looked
        // for among.
        None if judged == 0 => out.push(
            "no knee: every open-loop step was generator-limited, so none says where the \
             target bends"
                .into(),
        ),
        None => out.push(format!(
            "no knee among the {judged} open-loop steps the generator kept up with: none's p99 \
             tripled, and each achieved 90 % of its rate"
        )),
    }
    out.extend(s.grew.iter().cloned());
    for p in &s.points {
        if let Some(why) = &p.generator_limited {
            out.push(format!("step {} LIMITED by the generator: {why}", p.step));
        }
        if let Some(why) = &p.load_failure {
            out.push(format!("step {}: the load failed: {why}", p.step));
        }
    }
    out
}

/// The sweep's block of summary.txt.
pub fn render(s: &Sweep, capacity: Option<&Capacity>) -> String {
    let mut out = String::new();
    let title = if capacity.is_some() {
        "Capacity search"
    } else {
        "Sweep"
    };
    let _ = writeln!(
        out,
        "{title}: {} ({} steps, {:.0} s{})",
        s.schedule,
        s.points.len(),
        s.took_s,
        if s.partial { ", PARTIAL" } else { "" }
    );
    if let Some(c) = capacity {
        let _ = writeln!(out, "  capacity: {}", c.line());
        for g in &c.grew {
            let _ = writeln!(out, "  * {g}");
        }
    }
    for l in table(s, capacity).to_text().lines() {
        let _ = writeln!(out, "  {l}");
    }
    for n in notes(s) {
        let _ = writeln!(out, "  * {n}");
    }
    let _ = writeln!(out, "  ({})", s.note);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sweep::{Percentile, Slo, Tried};

    #[test]
    fn a_partial_sweep_says_so_and_flags_limited_steps() {
        let p = |step, req: f64, ach: f64| SweepPoint {
            step,
            requested_per_s: Some(req),
            achieved_per_s: ach,
            p99: Percentile {
                ns: 1_500_000,
                ci: None,
            },
            ..Default::default()
        };
        let mut s = Sweep {
            schedule: "1000,2000 every 2s".into(),
            note: "each step a window".into(),
            points: vec![
                p(1, 1000.0, 1000.0),
                SweepPoint {
                    generator_limited: Some("the generator sent late".into()),
                    ..p(2, 2000.0, 1200.0)
                },
            ],
            partial: true,
            partial_reason: Some("interrupted by SIGINT".into()),
            took_s: 5.0,
            ..Default::default()
        };
        s.conclude();
        let text = render(&s, None);
        assert!(text.contains("PARTIAL: interrupted by SIGINT"), "{text}");
        assert!(
            text.contains("Sweep: 1000,2000 every 2s (2 steps, 5 s, PARTIAL)"),
            "{text}"
        );
        assert!(text.contains("LIMITED"), "{text}");
        assert!(text.contains("step 2 LIMITED by the generator"), "{text}");
        assert!(
            text.contains("no knee among the 1 open-loop steps the generator kept up with"),
            "{text}"
        );
        let all_limited = Sweep {
            points: vec![SweepPoint {
                generator_limited: Some("late".into()),
                ..p(1, 1000.0, 1000.0)
            }],
            ..Default::default()
        };
        assert!(
            notes(&all_limited)
                .iter()
                .any(|n| n.starts_with("no knee: every open-loop step was generator-limited")),
            "{:?}",
            notes(&all_limited)
        );
        let c = Capacity {
            rate_per_s: Some(1000.0),
            bracket: [Some(1000.0), Some(1100.0)],
            slo: Slo::parse("p99<2ms").unwrap(),
            ceiling_per_s: 1500.0,
            steps_tried: vec![Tried {
                step: 1,
                requested_per_s: 1000.0,
                verdict: "pass".into(),
                why: String::new(),
            }],
            limited_by: None,
            reason: "bracket within 5 %".into(),
            grew: Vec::new(),
            took_s: 30.0,
        };
        let text = render(&s, Some(&c));
        assert!(text.contains("capacity: 1k/s meets p99<2ms"), "{text}");
        assert!(text.contains("PASS"), "{text}");
    }
}
