//! The tail of the requests beside the rest (`tail`, "why the slow ones
//! were slow"): in the summary its headline, functions, waits and queue
//! wait; on the page the two groups' flame graphs side by side, the
//! differential one (rest to tail), and the same tables.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::flame;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::slow::{self, TailReport};
use crate::report::svg::esc;
use crate::report::units::{fmt_count, human_ns};

/// The tail's samples beside the rest's; present when samples were tied
/// to requests.
pub struct Tail;

impl ProfileSection for Tail {
    fn name(&self) -> &'static str {
        "tail"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.tail.is_some()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        r.tail.as_ref().map(slow::text)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        r.tail.as_ref().map(|t| page(p, t))
    }
    fn brief(&self) -> bool {
        true
    }
}

fn pct(v: f64) -> String {
    format!("{:.1}", 100.0 * v)
}

/// The card (element ids prefixed with `p`).
pub fn page(p: &str, t: &TailReport) -> String {
    let mut inner = String::new();
    let _ = write!(
        inner,
        "<p>Threshold {} ({}): {} requests in the tail, {} in the rest; {} and {} of them had a \
         sample; {} and {} on-CPU samples.</p>",
        esc(&human_ns(t.threshold_ns)),
        esc(&t.threshold_from),
        fmt_count(t.requests.tail),
        fmt_count(t.requests.rest),
        fmt_count(t.sampled_requests.tail),
        fmt_count(t.sampled_requests.rest),
        fmt_count(t.on_cpu_samples.tail),
        fmt_count(t.on_cpu_samples.rest),
    );
    inner.push_str("<div class=\"pair\" style=\"display:flex;gap:1em\"><div style=\"flex:1\">");
    inner.push_str(&flame::figure(
        &format!("{p}tail-flame"),
        &t.tail_on_cpu,
        "The tail's CPU",
        "on-CPU samples of the slow requests",
    ));
    inner.push_str("</div><div style=\"flex:1\">");
    inner.push_str(&flame::figure(
        &format!("{p}rest-flame"),
        &t.rest_on_cpu,
        "The rest's CPU",
        "on-CPU samples of the other requests",
    ));
    inner.push_str("</div></div>");
    if let Some(Ok(svg)) = flame::diff_svg(
        &t.rest_on_cpu,
        &t.tail_on_cpu,
        "Differential: the rest (A) to the tail (B)",
    ) {
        inner.push_str(&flame::embed(
            &format!("{p}tail-diff"),
            "Differential: the rest to the tail",
            &svg,
        ));
    }
    if !t.functions.is_empty() {
        let rows: Vec<Vec<String>> = t
            .functions
            .iter()
            .map(|f| {
                vec![
                    crate::text::clip(&f.name, 200).into_owned(),
                    pct(f.tail_self),
                    pct(f.rest_self),
                    format!("{:+.1}", f.self_points()),
                    pct(f.tail_total),
                    pct(f.rest_total),
                ]
            })
            .collect();
        inner.push_str("<h4>Functions: shares of each group's on-CPU samples (%)</h4>");
        inner.push_str(&table(
            &[
                "function",
                "tail self",
                "rest self",
                "points",
                "tail total",
                "rest total",
            ],
            &rows,
            &[1, 2, 3, 4, 5],
        ));
    }
    if let Some(w) = &t.waits {
        let rows: Vec<Vec<String>> = w
            .reasons
            .iter()
            .filter(|r| r.tail_ns > 0 || r.rest_ns > 0)
            .map(|r| {
                vec![
                    r.text.clone(),
                    pct(r.tail_share),
                    human_ns(r.tail_ns),
                    pct(r.rest_share),
                    human_ns(r.rest_ns),
                    r.stack
                        .iter()
                        .rev()
                        .take(6)
                        .map(|f| crate::text::clip(f, 80).into_owned())
                        .collect::<Vec<_>>()
                        .join(" < "),
                ]
            })
            .collect();
        let _ = write!(
            inner,
            "<h4>Off-CPU inside the requests: tail {}, rest {}</h4>",
            esc(&human_ns(w.tail_ns)),
            esc(&human_ns(w.rest_ns))
        );
        inner.push_str(&table(
            &[
                "reason",
                "tail %",
                "tail",
                "rest %",
                "rest",
                "the tail's stack (innermost first)",
            ],
            &rows,
            &[1, 2, 3, 4],
        ));
    }
    if let Some(q) = &t.queue {
        let mut rows: Vec<Vec<String>> = q
            .parts
            .iter()
            .map(|x| vec![x.text.clone(), pct(x.share), human_ns(x.ns)])
            .collect();
        rows.push(vec![
            "no sample (sampling's gaps)".into(),
            pct(q.unexplained_ns as f64 / q.waited_ns.max(1) as f64),
            human_ns(q.unexplained_ns),
        ]);
        let _ = write!(
            inner,
            "<h4>While {} tail requests waited to be read ({} in all), their threads were</h4>",
            fmt_count(q.requests),
            esc(&human_ns(q.waited_ns))
        );
        inner.push_str(&table(&["doing", "%", "time"], &rows, &[1, 2]));
    }
    if !t.endpoints.is_empty() {
        let rows: Vec<Vec<String>> = t
            .endpoints
            .iter()
            .map(|e| {
                vec![
                    format!("{} {}", e.protocol, crate::text::clip(&e.name, 120)),
                    human_ns(e.threshold_ns),
                    format!("{} / {}", e.sampled_requests.tail, e.sampled_requests.rest),
                    e.function.as_ref().map_or_else(String::new, |f| {
                        format!(
                            "{} ({} % / {} %)",
                            crate::text::clip(&f.name, 120),
                            pct(f.tail_self),
                            pct(f.rest_self)
                        )
                    }),
                ]
            })
            .collect();
        inner.push_str("<h4>Per endpoint (each at its own threshold)</h4>");
        inner.push_str(&table(
            &[
                "endpoint",
                "threshold",
                "sampled tail / rest",
                "the tail's function",
            ],
            &rows,
            &[1],
        ));
    }
    let u = &t.unattributed;
    let _ = write!(
        inner,
        "<p>Unattributed: {} on-CPU samples ({} of threads interleaving requests, {} in requests \
         not timed), {} off CPU. Outside requests: {} on-CPU samples, {} off CPU.</p>",
        u.on_cpu(),
        u.interleaved_on_cpu,
        u.untimed_on_cpu,
        esc(&human_ns(u.wait_ns)),
        t.outside.on_cpu,
        esc(&human_ns(t.outside.wait_ns))
    );
    for n in &t.notes {
        let _ = write!(inner, "<p class=\"note\">{}</p>", esc(n));
    }
    card(
        &format!("{p}tail"),
        "Why the slow ones were slow",
        &t.headline,
        &inner,
    )
}
