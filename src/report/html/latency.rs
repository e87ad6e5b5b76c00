//! A load's sections, on a profile's page and on that of a load artifact:
//! latency percentiles (log scale) with their table and
//! the tail percentiles' confidence intervals, and throughput and latency
//! per second of the load window.

use std::fmt::Write as _;

use super::{card, table};
use crate::report::load::{Interval, LoadReport};
use crate::report::svg::{self, LineChart, Scale, Series};
use crate::report::tails;
use crate::report::units::{self, human_ns};

const NINES: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

fn nines_x(q: f64) -> f64 {
    -(1.0 - q).log10()
}

/// Latency percentiles (log scale), with the table of them and the table
/// of the tail percentiles' 95% confidence intervals. A tail percentile
/// that is not meaningful is left out of the chart and shows as `n/m` in
/// the table: the interval table says why.
pub fn latency_section(p: &str, load: &LoadReport) -> String {
    let mut series = Vec::new();
    let mut rows = Vec::new();
    let mut tail_rows = Vec::new();
    let mut add = |name: &str, rec: &Option<crate::report::load::LatencyRecord>| {
        let Some(r) = rec else { return };
        let s = &r.summary;
        let vals = [s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns];
        let cis = [None, None, s.p99_ci, s.p999_ci, s.p9999_ci];
        let mut pts: Vec<(f64, f64)> = NINES
            .iter()
            .zip(vals)
            .zip(cis)
            .filter(|(_, ci)| ci.is_none_or(|ci| ci.meaningful))
            .map(|(((q, _), v), _)| (nines_x(*q), v as f64))
            .collect();
        pts.push((5.0, s.max_ns as f64));
        series.push(Series {
            name: name.to_string(),
            points: pts,
        });
        let mut row = vec![name.to_string(), s.count.to_string(), human_ns(s.min_ns)];
        row.extend(vals.iter().zip(cis).map(|(v, ci)| tails::cell(*v, ci)));
        row.push(human_ns(s.max_ns));
        rows.push(row);
        for (pct, v, ci) in s.tails() {
            let Some(ci) = ci else { continue };
            tail_rows.push(if ci.meaningful {
                vec![
                    name.to_string(),
                    pct.to_string(),
                    human_ns(v),
                    tails::range(&ci),
                    units::fmt_count(ci.beyond),
                    String::new(),
                ]
            } else {
                vec![
                    name.to_string(),
                    pct.to_string(),
                    "n/m".into(),
                    "-".into(),
                    units::fmt_count(ci.beyond),
                    tails::phrase(pct, v, &ci, s.count),
                ]
            });
        }
    };
    add("transaction", &load.latency);
    add(
        "without the intended-time correction",
        &load.latency_uncorrected,
    );
    add("connect", &load.connect_latency);
    add("tls handshake", &load.tls_handshake_latency);
    if series.is_empty() {
        return String::new();
    }
    let mut ticks: Vec<(f64, String)> = NINES
        .iter()
        .map(|(q, l)| (nines_x(*q), l.to_string()))
        .collect();
    ticks.push((5.0, "max".into()));
    let chart = svg::line_chart(&LineChart {
        id: &format!("{p}chart-latency"),
        title: "Latency percentiles",
        x_label: "percentile (each step is ten times rarer)",
        y_label: "latency (log scale)",
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        x_ticks: Some(ticks),
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_ns,
        series,
    });
    let t = table(
        &[
            "latency", "samples", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    let tails_table = if tail_rows.is_empty() {
        String::new()
    } else {
        format!(
            "<p class=\"lead\">How far the tail can be trusted: each percentile's 95% \
             confidence interval, from the order statistics of the samples, and how many \
             samples lie beyond it. n/m: not meaningful, too few samples lie beyond it.</p>{}",
            table(
                &[
                    "latency",
                    "percentile",
                    "value",
                    "95% CI",
                    "samples beyond",
                    "note",
                ],
                &tail_rows,
                &[2, 3, 4],
            )
        )
    };
    card(
        &format!("{p}latency"),
        "Latency percentiles",
        "As the load generator measured it, from send to complete response (log scale: the \
         tail is usually orders of magnitude above the median).",
        &(chart + &t + &tails_table),
    )
}

/// Throughput per second of the load window, and its latency per second.
/// A partial second (the window did not cover all of it) is not drawn:
/// its count is not a rate and its percentiles rest on a few samples. The
/// table lists it, marked, and a line under the charts says why it is not
/// in them.
pub fn throughput_section(p: &str, load: &LoadReport) -> String {
    if load.intervals.is_empty() {
        return String::new();
    }
    let udp = load.workload == "udp";
    let whole: Vec<&Interval> = load.intervals.iter().filter(|i| !i.partial).collect();
    let ticks = match (whole.first(), whole.last()) {
        (Some(a), Some(b)) if b.t_s > a.t_s => svg::whole_ticks(a.t_s as f64, b.t_s as f64),
        (Some(a), _) => svg::whole_ticks(a.t_s as f64, a.t_s as f64 + 1.0),
        _ => Vec::new(),
    };
    let line = |f: fn(&Interval) -> Option<f64>| -> Vec<(f64, f64)> {
        whole
            .iter()
            .filter_map(|i| Some((i.t_s as f64, f(i)?)))
            .collect()
    };
    let chart = svg::line_chart(&LineChart {
        id: &format!("{p}chart-throughput"),
        title: "Throughput over time",
        x_label: "second of the load window",
        y_label: if udp {
            "datagrams sent per second"
        } else {
            "transactions per second"
        },
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_ticks: Some(ticks.clone()),
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_si,
        series: vec![Series {
            name: if udp {
                "published".into()
            } else {
                "transactions".into()
            },
            points: line(|i| Some(i.transactions as f64)),
        }],
    });
    let mut inner = chart;
    if !udp {
        inner.push_str(&svg::line_chart(&LineChart {
            id: &format!("{p}chart-interval-latency"),
            title: "Latency per second",
            x_label: "second of the load window",
            y_label: "latency (log scale)",
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            x_ticks: Some(ticks),
            x_fmt: units::fmt_si,
            y_fmt: units::fmt_ns,
            series: vec![
                Series {
                    name: "p50".into(),
                    points: line(|i| Some(i.p50_ns? as f64)),
                },
                Series {
                    name: "p99".into(),
                    points: line(|i| Some(i.p99_ns? as f64)),
                },
            ],
        }));
    }
    let unit = if udp { "datagrams" } else { "transactions" };
    for i in load.intervals.iter().filter(|i| i.partial) {
        let _ = write!(
            inner,
            "<p class=\"lead partial-note\">Second {} lasted only {} ({} {unit}): \
             a part of a second is not a rate, and its percentiles rest on a few samples, so \
             the charts leave it out; the table lists it, marked partial.</p>",
            i.t_s,
            human_ns((i.covered_s * 1e9).round() as u64),
            i.transactions
        );
    }
    let rows: Vec<Vec<String>> = load
        .intervals
        .iter()
        .map(|i| {
            vec![
                if i.partial {
                    format!(
                        "{} (partial: {})",
                        i.t_s,
                        human_ns((i.covered_s * 1e9).round() as u64)
                    )
                } else {
                    i.t_s.to_string()
                },
                i.transactions.to_string(),
                i.errors.to_string(),
                i.p50_ns.map_or("-".into(), human_ns),
                i.p99_ns.map_or("-".into(), human_ns),
                i.max_ns.map_or("-".into(), human_ns),
            ]
        })
        .collect();
    inner.push_str(&table(
        &[
            "second",
            if udp { "published" } else { "transactions" },
            "errors",
            "p50",
            "p99",
            "max",
        ],
        &rows,
        &[0, 1, 2, 3, 4, 5],
    ));
    card(
        &format!("{p}throughput"),
        "Throughput over time",
        "Per second of the load's measured window; a second the window did not cover whole \
         is listed but not drawn.",
        &inner,
    )
}
