//! The steps of `profile --sweep` / `--find-capacity`: in the summary
//! their table and lines; on the page the partial mark, the capacity, the
//! p50/p99 curve against the achieved rate with the knee marked, the
//! anatomy stacked per step, and the table.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, list};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, LineChart, Scale, Series, StackChart, esc};
use crate::report::sweep::{self, Sweep};
use crate::report::{sweep_text, units};

/// The steps, for a run of several windows.
pub struct Steps;

impl ProfileSection for Steps {
    fn name(&self) -> &'static str {
        "sweep"
    }
    fn brief(&self) -> bool {
        true
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.sweep.is_some()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let sw = r.sweep.as_ref()?;
        let mut s = sweep_text::render(sw, r.capacity.as_ref());
        let _ = write!(
            s,
            "\nThe sections below are the last step's window (step {}).\n",
            sw.points.last().map_or(0, |p| p.step)
        );
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(sweep_section(p, r))
    }
}

/// The steps' card (empty for a single window).
fn sweep_section(p: &str, r: &ProfileReport) -> String {
    let Some(s) = &r.sweep else {
        return String::new();
    };
    let mut inner = String::new();
    if s.partial {
        let _ = write!(
            inner,
            "<p class=\"partial\"><strong>PARTIAL</strong>: {}; the steps below are those \
             measured before.</p>",
            esc(s.partial_reason.as_deref().unwrap_or("stopped early"))
        );
    }
    if let Some(c) = &r.capacity {
        let _ = write!(
            inner,
            "<p><strong>Capacity</strong>: {}</p>",
            esc(&c.line())
        );
        inner.push_str(&list(&c.grew, "insights"));
    }
    inner.push_str(&curve_chart(p, s));
    inner.push_str(&anatomy_chart(p, s));
    inner.push_str(&sweep_text::table(s, r.capacity.as_ref()).to_html());
    inner.push_str(&list(&sweep_text::notes(s), "insights"));
    let _ = write!(
        inner,
        "<p>{}. The sections below are the last step's window.</p>",
        esc(&s.note)
    );
    card(
        &format!("{p}sweep"),
        &format!("Steps: {}", s.schedule),
        "One window per step on the live target; the knee is the first step (by rate) whose p99 \
         is over 3x the lowest rate's, or that achieved under 90 % of its rate.",
        &inner,
    )
}

/// p50 and p99 against the achieved rate, every open-loop step (the
/// generator-limited ones too: the table flags them); the knee a series
/// of its own.
fn curve_chart(p: &str, s: &Sweep) -> String {
    let mut c: Vec<&sweep::SweepPoint> = s
        .points
        .iter()
        .filter(|q| q.requested_per_s.is_some())
        .collect();
    c.sort_by(|a, b| a.achieved_per_s.total_cmp(&b.achieved_per_s));
    if c.is_empty() {
        return String::new();
    }
    let line = |name: &str, f: fn(&sweep::SweepPoint) -> u64| Series {
        name: name.into(),
        points: c.iter().map(|q| (q.achieved_per_s, f(q) as f64)).collect(),
    };
    let mut series = vec![line("p50", |q| q.p50.ns), line("p99", |q| q.p99.ns)];
    if let Some(k) = &s.knee
        && let Some(q) = c.iter().find(|q| q.step == k.step)
    {
        series.push(Series {
            name: format!("knee (step {})", k.step),
            points: vec![(q.achieved_per_s, q.p99.ns as f64)],
        });
    }
    svg::line_chart(&LineChart {
        id: &format!("{p}chart-sweep"),
        title: "Client latency against the achieved rate, per step",
        x_label: "achieved requests/s",
        y_label: "client latency",
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        x_ticks: None,
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_ns,
        series,
    })
}

/// Each step's mean turn, its parts stacked.
fn anatomy_chart(p: &str, s: &Sweep) -> String {
    let rows: Vec<(String, Vec<f64>)> = s
        .points
        .iter()
        .filter_map(|q| {
            let a = q.anatomy.as_ref()?;
            Some((
                format!("step {}: {}", q.step, q.label()),
                a.means_ns().iter().map(|m| m.1).collect(),
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    svg::stack_chart(&StackChart {
        id: &format!("{p}chart-sweep-anatomy"),
        title: "The mean request's time at the server, per step",
        x_label: "mean time at the server per turn",
        parts: ["queue wait", "CPU wait", "service", "send"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows,
        fmt: units::fmt_ns,
    })
}
