//! The request anatomy's card, on a profile's page and on that of a
//! `sockscope.requests` artifact: what the turns at each server-time
//! percentile were made of (one stacked bar each: queue wait, CPU wait,
//! service, send) with the client's latency at the same percentile beside
//! it, the parts' means over time, the table of the parts, and the
//! sentences.

use super::{card, list, table};
use crate::report::anatomy::{AnatomyReport, PERCENTILES};
use crate::report::svg::{self, LineChart, Scale, Series, StackChart};
use crate::report::units::{self, human_ns};

/// The parts in the order they are stacked.
const PARTS: [&str; 4] = ["queue wait", "CPU wait", "service", "send"];

/// The card of one anatomy (a profile's, or a `sockscope.requests`
/// artifact's): the bars, the table of the parts, the parts over time and
/// the sentences.
pub fn anatomy_card(p: &str, a: &AnatomyReport) -> String {
    let id = format!("{p}anatomy");
    let lead = "Where each request's time at the server went, seen from the socket layer: \
                queued before the target read it, runnable but not running (CPU wait), \
                reading to the first byte of the response (service), and writing it (send). \
                Each bar is the turns at that percentile of server time, their parts' means; \
                the client's latency at the same percentile is beside it.";
    if a.turns == 0 {
        return card(
            &id,
            "Anatomy of a request",
            lead,
            &list(&a.sentences(), "insights"),
        );
    }
    let mut inner = bars(p, a);
    inner.push_str(&parts_table(a));
    inner.push_str(&over_time(p, a));
    inner.push_str(&list(&a.sentences(), "insights"));
    card(&id, "Anatomy of a request", lead, &inner)
}

/// One stacked bar per percentile, its label naming the client's latency.
pub fn bars(p: &str, a: &AnatomyReport) -> String {
    let rows = PERCENTILES
        .iter()
        .filter_map(|name| {
            let c = a.composition(name)?;
            let client = a.client.as_ref().map(|cl| match *name {
                "p50" => cl.p50_ns,
                "p90" => cl.p90_ns,
                "p99" => cl.p99_ns,
                _ => cl.p999_ns,
            });
            let label = match client {
                Some(ns) => format!("{name} (client {})", human_ns(ns)),
                None => (*name).to_string(),
            };
            Some((label, c.parts().iter().map(|(_, ns)| *ns as f64).collect()))
        })
        .collect();
    svg::stack_chart(&StackChart {
        id: &format!("{p}chart-anatomy"),
        title: "What the turns at each server-time percentile were made of",
        x_label: "time at the server",
        parts: PARTS.iter().map(|s| s.to_string()).collect(),
        rows,
        fmt: units::fmt_ns,
    })
}

/// The parts at p50..p99.9 and the client's latency, with the labels of
/// the bars' segments as numbers.
fn parts_table(a: &AnatomyReport) -> String {
    let s = &a.parts;
    let mut rows: Vec<Vec<String>> = [
        ("queue wait", &s.queue_wait),
        ("CPU wait", &s.cpu_wait),
        ("service", &s.service),
        ("send", &s.send),
        ("server time", &s.server_time),
    ]
    .iter()
    .map(|(n, s)| {
        vec![
            n.to_string(),
            human_ns(s.p50_ns),
            human_ns(s.p90_ns),
            human_ns(s.p99_ns),
            human_ns(s.p999_ns),
            units::fmt_ns(s.mean_ns),
        ]
    })
    .collect();
    if let Some(c) = &a.client {
        rows.push(vec![
            format!("client ({})", c.source),
            human_ns(c.p50_ns),
            human_ns(c.p90_ns),
            human_ns(c.p99_ns),
            human_ns(c.p999_ns),
            String::new(),
        ]);
        let mut d = vec!["outside the server".to_string()];
        d.extend(c.difference_ns.iter().map(|v| {
            if *v < 0 {
                format!("-{}", human_ns(v.unsigned_abs()))
            } else {
                human_ns(*v as u64)
            }
        }));
        d.push(String::new());
        rows.push(d);
    }
    for c in &a.at_percentile {
        let mut row = vec![format!("turns at {} of server time", c.percentile)];
        row.push(format!(
            "{} = {}",
            human_ns(c.server_ns),
            c.parts()
                .iter()
                .map(|(n, ns)| format!("{n} {}", human_ns(*ns)))
                .collect::<Vec<_>>()
                .join(" + ")
        ));
        row.extend(std::iter::repeat_n(String::new(), 4));
        rows.push(row);
    }
    table(
        &["part", "p50", "p90", "p99", "p99.9", "mean"],
        &rows,
        &[1, 2, 3, 4, 5],
    )
}

/// The parts' means per interval, one line each (nothing with fewer than
/// two intervals).
fn over_time(p: &str, a: &AnatomyReport) -> String {
    if a.intervals.len() < 2 {
        return String::new();
    }
    let line = |name: &str, f: fn(&crate::report::anatomy::AnatomyInterval) -> f64| Series {
        name: name.to_string(),
        points: a
            .intervals
            .iter()
            .filter(|i| i.turns > 0)
            .map(|i| (i.t_s, f(i)))
            .collect(),
    };
    svg::line_chart(&LineChart {
        id: &format!("{p}chart-anatomy-time"),
        title: "The parts over time (means per interval)",
        x_label: "seconds into the window",
        y_label: "mean per turn",
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_ticks: None,
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_ns,
        series: vec![
            line("queue wait", |i| i.queue_wait_mean_ns),
            line("CPU wait", |i| i.cpu_wait_mean_ns),
            line("service", |i| i.service_mean_ns),
            line("send", |i| i.send_mean_ns),
        ],
    })
}
