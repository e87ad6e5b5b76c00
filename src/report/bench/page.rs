//! The page of one experiment (report.html of `sockscope bench`) and the
//! demo's page, which holds the sections of every experiment it ran (each
//! result's own, see [`super::Section`]), in the chrome of
//! [`crate::report::html`].

use std::fmt::Write as _;

use super::{BenchReport, DemoReport};
use crate::report::html::{caveats_box, environment, list, page, table};
use crate::report::svg::esc;

/// The sections of one experiment (ids prefixed with `p`).
pub fn bench_body(p: &str, r: &BenchReport) -> String {
    let mut b = String::new();
    if !r.insights.is_empty() {
        let _ = write!(
            b,
            "<section class=\"card\" id=\"{p}insights\"><h3>What the {} experiment says</h3>{}</section>",
            esc(&r.experiment),
            list(&r.insights, "insights")
        );
    }
    for x in r.results.iter() {
        b.push_str(&x.section().html(p));
        let noise = x.section().noise();
        if !noise.is_empty() {
            let _ = write!(
                b,
                "<section class=\"card\" id=\"{p}noise-{}\"><h3>Noise in these numbers</h3>{}</section>",
                x.key(),
                list(&noise, "insights")
            );
        }
    }
    b
}

/// The report page of one experiment.
pub fn bench_page(r: &BenchReport) -> String {
    let body = format!(
        "{}{}<h2 id=\"environment\">Environment</h2>{}",
        caveats_box(&r.caveats),
        bench_body("", r),
        environment(
            &r.header.build,
            &r.machine,
            &[("command".into(), r.command_line.join(" "))]
        )
    );
    page(
        &format!("sockscope bench {}", r.experiment),
        &format!(
            "{}; {:.0} s; {}",
            r.started_at,
            r.duration_s,
            r.machine.describe()
        ),
        &body,
    )
}

/// The demo's page: every experiment that ran, and what did not.
pub fn demo_page(d: &DemoReport) -> String {
    let mut b = String::new();
    if d.complete {
        let _ = write!(
            b,
            "<div class=\"banner good\" id=\"status\">Complete: every experiment of the demo ran \
             ({}).</div>",
            d.experiments
                .iter()
                .map(|e| e.experiment.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        let _ = write!(
            b,
            "<div class=\"banner bad\" id=\"status\">INCOMPLETE: some experiments could not \
             run; the results below are partial.</div>"
        );
    }
    if !d.not_run.is_empty() {
        let rows: Vec<Vec<String>> = d
            .not_run
            .iter()
            .map(|n| vec![n.experiment.clone(), n.reason.clone()])
            .collect();
        let _ = write!(
            b,
            "<section class=\"card\" id=\"not-run\"><h3>Not run</h3>{}</section>",
            table(&["experiment", "why"], &rows, &[])
        );
    }
    let mut caveats: Vec<String> = Vec::new();
    for e in &d.experiments {
        for c in &e.caveats {
            if !caveats.contains(c) {
                caveats.push(c.clone());
            }
        }
    }
    b.push_str(&caveats_box(&caveats));
    for e in &d.experiments {
        let _ = write!(b, "<h2 id=\"exp-{0}\">{0}</h2>", esc(&e.experiment));
        b.push_str(&bench_body(&format!("{}-", e.experiment), e));
    }
    let _ = write!(
        b,
        "<h2 id=\"environment\">Environment</h2>{}",
        environment(&d.header.build, &d.machine, &[])
    );
    page(
        "sockscope demo",
        &format!(
            "{}; {:.0} s{}; {}",
            d.started_at,
            d.duration_s,
            if d.quick { " (--quick)" } else { "" },
            d.machine.describe()
        ),
        &b,
    )
}
