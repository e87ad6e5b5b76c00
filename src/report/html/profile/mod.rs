//! The profile's sections of report.html: latency and throughput of the
//! load, the target's syscalls, CPU and other resources, who else served
//! the address, and the per-process breakdown.
//!
//! One file per family of sections: `latency` (latency, throughput), `anatomy`
//! (the request anatomy), `sweep` (the steps of a sweep or a capacity
//! search), `syscalls`,
//! `resources` (CPU, other resources), `stacks` (flame graphs, top
//! functions), `processes` (attribution, the
//! per-process breakdown); this file puts them together into the body and
//! the page.

mod anatomy;
mod latency;
mod processes;
mod resources;
mod stacks;
mod sweep;
mod syscalls;

use std::fmt::Write as _;

use super::{card, caveats_box, environment, list, page, table};
use crate::report::profile::ProfileReport;
use crate::report::units::human_ns;

pub use self::anatomy::{anatomy_card, anatomy_section};
pub use self::latency::{latency_section, throughput_section};
pub use self::processes::{attribution_section, processes_section};
pub use self::resources::{cpu_section, resources_section};
pub use self::stacks::stacks_section;
pub use self::sweep::sweep_section;
pub use self::syscalls::syscall_section;

/// Everything about one profile, element ids prefixed with `p`.
pub fn profile_body(p: &str, r: &ProfileReport) -> String {
    let mut b = sweep_section(p, r);
    let _ = write!(
        b,
        "<section class=\"card\" id=\"{p}insights\"><h3>What this run says</h3>{}</section>",
        list(&r.insights, "insights")
    );
    match &r.load {
        Some(load) => {
            b.push_str(&latency_section(p, load));
            b.push_str(&throughput_section(p, load));
        }
        None => b.push_str(&workload_card(p, &r.workload)),
    }
    b.push_str(&anatomy_section(p, r));
    b.push_str(&syscall_section(p, r));
    b.push_str(&cpu_section(p, r));
    b.push_str(&stacks_section(
        p,
        r.stacks.as_ref(),
        r.stacks_failure.as_deref(),
    ));
    b.push_str(&resources_section(p, r));
    b.push_str(&attribution_section(p, r));
    b.push_str(&processes_section(p, r));
    if let Some(e) = &r.evidence {
        b.push_str(&card(
            &format!("{p}kernel"),
            "What the kernel counted",
            &format!(
                "Counter deltas of network namespace {} over the window (per namespace, not per \
                 process{}), the target's sockets sampled through sock_diag, and its threads' \
                 run-queue delay.",
                e.netns.id,
                if e.netns.shared_with_generator {
                    "; the load generator shares it"
                } else {
                    ""
                }
            ),
            &format!(
                "{}{}",
                e.html(),
                list(
                    &e.unavailable
                        .iter()
                        .map(|u| format!("not measured: {u}"))
                        .collect::<Vec<_>>(),
                    "notes"
                )
            ),
        ));
    }
    // Without the tracer (--requests-only) the anatomy's own cost is in
    // its section.
    if let Some(t) = &r.trace {
        b.push_str(&tracer_card(p, &t.tracer));
    }
    let mut extra = vec![
        (
            "target".to_string(),
            format!(
                "{} (pid {}, {}), at {}",
                r.target
                    .command
                    .as_ref()
                    .map_or_else(|| "attached".into(), shell_words::join),
                r.target.pid,
                r.target.comm,
                r.target.address
            ),
        ),
        ("load".to_string(), r.load_line()),
        (
            "profile command".to_string(),
            shell_words::join(&r.command_line),
        ),
        ("started".to_string(), r.started_at.clone()),
        ("windows".to_string(), r.windows.note.clone()),
    ];
    if let Some(st) = &r.target.stop {
        extra.push(("target stop".to_string(), st.describe()));
    }
    b.push_str(&card(
        &format!("{p}environment"),
        "How it was measured",
        "Everything needed to reproduce the run.",
        &environment(&r.header.build, &r.machine, &extra),
    ));
    let mut notes: Vec<String> = r.load.iter().flat_map(|l| l.notes.clone()).collect();
    notes.extend(r.trace.iter().flat_map(|t| t.notes.iter().cloned()));
    if !notes.is_empty() {
        let _ = write!(
            b,
            "<details><summary>Notes from the load and the tracer</summary>{}</details>",
            list(&notes, "notes")
        );
    }
    if !r.advice.is_empty() {
        b.push_str(&card(
            &format!("{p}advice"),
            "Settings the evidence points at",
            "Rows of `sockscope tune` that this run's own evidence supports; sockscope changed \
             nothing.",
            &super::super::tune::table(&r.advice).to_html(),
        ));
    }
    b
}

/// The headline card: the figures a reader looks for first, and one
/// picture (what the turns at each server-time percentile were made of,
/// or without the anatomy, nothing).
pub fn headline_card(p: &str, r: &ProfileReport) -> String {
    use crate::report::svg::esc;
    let mut inner = String::from("<div class=\"headline\">");
    for f in crate::report::headline::figures(r) {
        let _ = write!(
            inner,
            "<div class=\"figure\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
            esc(f.label),
            esc(&f.value)
        );
    }
    inner.push_str("</div>");
    if let Some(a) = r.anatomy.as_ref().filter(|a| a.parts.server_time.count > 0) {
        inner.push_str(&anatomy::bars(&format!("{p}headline-"), a));
    }
    card(
        &format!("{p}headline"),
        "Headline",
        "The key figures of this run; everything below explains them.",
        &inner,
    )
}

/// The report page of one profile: the headline first, then the caveats,
/// then everything else.
pub fn profile_page(r: &ProfileReport) -> String {
    let body = format!(
        "{}{}{}",
        headline_card("", r),
        caveats_box(&r.caveats),
        profile_body("", r)
    );
    let partial = r.sweep.as_ref().is_some_and(|s| s.partial);
    page(
        if partial {
            "sockscope profile (PARTIAL: stopped early)"
        } else {
            "sockscope profile"
        },
        &format!(
            "{} at {}, under {}; {}",
            r.target.comm,
            r.target.address,
            match &r.load {
                Some(_) => r
                    .load_command
                    .get(2..)
                    .map_or(String::new(), |t| t.join(" ")),
                None => r.load_line(),
            },
            r.started_at
        ),
        &body,
    )
}

/// The workload of a run whose load was not sockscope's: who counted the
/// requests, the command and how it ended, and the end of its output.
fn workload_card(p: &str, w: &crate::report::workload::WorkloadRecord) -> String {
    use crate::report::svg::esc;
    let c = &w.requests;
    let mut rows = vec![
        vec![
            "requests".to_string(),
            format!(
                "{} in {:.2} s ({:.0}/s), counted by the {}",
                c.count,
                c.window_s,
                if c.window_s > 0.0 {
                    c.count as f64 / c.window_s
                } else {
                    0.0
                },
                c.counted_by
            ),
        ],
        vec!["what was counted".to_string(), c.note.clone()],
    ];
    if let Some(cmd) = &w.command {
        rows.push(vec!["command".to_string(), shell_words::join(cmd)]);
    }
    if let Some(e) = &w.exit {
        rows.push(vec![
            "ended".to_string(),
            format!("{e} after {:.2} s", w.window_s),
        ]);
    }
    let mut inner = table(&["", ""], &rows, &[]);
    if let Some(o) = w.output.as_ref().filter(|o| !o.tail.is_empty()) {
        let _ = write!(
            inner,
            "<details><summary>Its output ({} bytes{})</summary><pre class=\"mono\">{}</pre>\
             </details>",
            o.bytes,
            if o.cut { "; the end kept" } else { "" },
            esc(&o.tail)
        );
    }
    let (title, lead) = if w.source == crate::report::workload::COMMAND {
        (
            "The load: an external command",
            "sockscope did not generate this load: the requests were counted at the target's \
             sockets by the request anatomy, and every per-request figure is over that count.",
        )
    } else {
        (
            "The load: the target's own traffic",
            "No load was sent: the target was observed under the traffic it had. The requests \
             were counted at its sockets by the request anatomy, and every per-request figure \
             is over that count.",
        )
    };
    card(&format!("{p}workload"), title, lead, &inner)
}

/// The tracer's own cost: its BPF time, the syscall hook's slow path, its
/// start-up, and what it cost the target and the rest of the machine.
fn tracer_card(p: &str, tracer: &crate::report::trace::TracerCost) -> String {
    let mut trows = vec![vec![
        "syscall events traced".to_string(),
        tracer.events.to_string(),
    ]];
    if let Some(ns) = tracer.ns_per_event {
        trows.push(vec!["BPF time per event".into(), format!("{ns:.0} ns")]);
    }
    if let Some(t) = tracer.bpf_time_ns {
        trows.push(vec!["BPF time over the window".into(), human_ns(t)]);
    }
    if let Some(c) = tracer.cpu_share {
        trows.push(vec![
            "share of one CPU".into(),
            format!("{:.2}%", c * 100.0),
        ]);
    }
    if let Some(sp) = &tracer.bpf_split {
        trows.push(vec![
            "BPF on the traced events".into(),
            format!(
                "{} ({:.0} ns per event)",
                human_ns(sp.traced.total_ns),
                sp.traced.ns_per_syscall
            ),
        ]);
        trows.push(vec![
            "BPF filtering everyone else".into(),
            format!(
                "{} ({} other syscalls x {:.0} ns, count scaled by time)",
                human_ns(sp.filtered.total_ns),
                sp.filtered.syscalls,
                sp.filtered.ns_per_syscall
            ),
        ]);
    }
    if let Some(sl) = &tracer.slow_path {
        trows.push(vec![
            "syscall hook slow path".into(),
            if sl.within_noise {
                format!(
                    "not told apart from noise ({} over {} calibration rounds): charged as 0",
                    crate::report::trace_text::rounds_range(sl),
                    sl.rounds
                )
            } else {
                format!(
                    "{:.0} ns per syscall ({} over {} calibration rounds)",
                    sl.ns_per_syscall,
                    crate::report::trace_text::rounds_range(sl),
                    sl.rounds
                )
            },
        ]);
    }
    if let Some(st) = &tracer.startup {
        trows.push(vec![
            "start-up".into(),
            format!(
                "{:.0} ms before the window opened, {:.0} ms of sockscope's CPU",
                st.before_window_ms, st.cpu_ms
            ),
        ]);
    }
    if let Some(a) = &tracer.attributed {
        let pct = |v: Option<f64>, of: &str| {
            v.map_or_else(String::new, |v| format!(", {:.2}% of {of}", v * 100.0))
        };
        trows.push(vec![
            "cost to the target (its events' BPF + slow path)".into(),
            format!(
                "{}{}",
                human_ns(a.target_ns),
                pct(a.target_cpu_share, "its CPU time")
            ),
        ]);
        trows.push(vec![
            "cost to the rest of the machine".into(),
            format!(
                "{}{}",
                human_ns(a.collateral_ns),
                pct(a.collateral_machine_share, "the machine's busy CPU")
            ),
        ]);
        if let (Some(st), Some(so)) = (a.count_only_saves_target_ns, a.count_only_saves_others_ns) {
            trows.push(vec![
                "--count-only would save at most".into(),
                format!(
                    "{} of the target's cost, {} of the rest's",
                    human_ns(st),
                    human_ns(so)
                ),
            ]);
        }
    }
    card(
        &format!("{p}tracer"),
        "The tracer's own cost",
        "BPF time from the kernel's run-time accounting and the programs' own timing in sampled \
         slices; the syscall hook's slow path calibrated after the run (docs/trace.md).",
        &table(&["figure", "value"], &trows, &[1]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    /// The `points` of the polyline of series `name` in chart `id`.
    fn polyline<'a>(html: &'a str, id: &str, name: &str) -> &'a str {
        let chart = &html[html.find(&format!("id=\"{id}\"")).expect(id)..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        let series = &chart[chart.find(&format!("data-name=\"{name}\"")).expect(name)..];
        let pts = &series[series.find("points=\"").unwrap() + 8..];
        &pts[..pts.find('"').unwrap()]
    }

    fn x_tick_labels(html: &str, id: &str) -> Vec<String> {
        let chart = &html[html.find(&format!("id=\"{id}\"")).expect(id)..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        chart
            .split("<line class=\"tickmark\"")
            .skip(1)
            .map(|t| {
                let t = &t[t.find('>').unwrap() + 1..];
                let t = &t[t.find('>').unwrap() + 1..];
                t[..t.find('<').unwrap()].to_string()
            })
            .collect()
    }

    #[test]
    fn a_page_without_the_tracer_leaves_its_sections_out() {
        let r = fixtures::untraced(fixtures::profile(&fixtures::forking_server()));
        let html = profile_page(&r);
        assert!(html.contains("Not recorded (--requests-only)"), "{html}");
        for gone in [
            "The tracer&#39;s own cost",
            "The tracer's own cost",
            "id=\"resources\"",
            "id=\"processes\"",
        ] {
            assert!(!html.contains(gone), "{gone}");
        }
        assert!(html.contains("Anatomy of a request"), "the anatomy section");
        assert!(html.contains("Context switches: not recorded (--requests-only)."));
        assert!(html.contains("request anatomy&#39;s window (read from /proc stat)"));
        assert!(!html.contains("NaN"));
    }

    #[test]
    fn the_anatomy_section_stacks_the_parts_per_percentile_beside_the_client() {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        assert!(!profile_body("", &r).contains("id=\"anatomy\""));
        let mut a = fixtures::anatomy();
        a.client = Some(crate::report::anatomy::ClientSide {
            source: "load".into(),
            count: 999,
            p50_ns: 350_000,
            p90_ns: 400_000,
            p99_ns: 3_700_000,
            p999_ns: 4_500_000,
            difference_ns: [30_000, 57_000, 100_000, 190_000],
        });
        r.anatomy = Some(a);
        let html = profile_body("", &r);
        let sec = &html[html.find("id=\"anatomy\"").expect("the section")..];
        let bars = &sec[sec.find("id=\"chart-anatomy\"").expect("the bars")..];
        let bars = &bars[..bars.find("</svg>").unwrap()];
        for label in [
            "p50 (client 350",
            "p90 (client 400",
            "p99 (client 3.7",
            "p99.9 (client 4.5",
        ] {
            assert!(bars.contains(label), "{label}");
        }
        // Four segments per bar, one colour per part.
        assert_eq!(bars.matches("<rect class=\"bar\"").count(), 16);
        assert!(bars.contains("p99 (client 3.70ms): CPU wait = 2.90ms"));
        // The wide segments are labelled with their values.
        assert!(bars.contains("class=\"seg-label\"") && bars.contains(">2.90ms</text>"));
        assert!(
            sec.contains("id=\"chart-anatomy-time\""),
            "the parts over time"
        );
        assert!(sec.contains("outside the server"));
        assert!(
            sec.contains("was CPU wait: the target&#39;s threads")
                || sec.contains("was CPU wait: the target's threads")
        );
        // A failure says so where the section would be.
        r.anatomy = None;
        r.anatomy_failure = Some("the request anatomy failed: <no BTF>".into());
        let html = profile_body("", &r);
        assert!(
            html.contains("Not recorded: the request anatomy failed: &lt;no BTF&gt;."),
            "{html}"
        );
    }

    #[test]
    fn a_partial_last_second_is_listed_but_not_drawn() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        assert!(r.load.as_ref().unwrap().intervals[2].partial);
        let html = profile_page(&r);
        // Two whole seconds: two points per line, not three.
        for (id, name) in [
            ("chart-throughput", "transactions"),
            ("chart-interval-latency", "p50"),
            ("chart-interval-latency", "p99"),
        ] {
            let pts = polyline(&html, id, name);
            assert_eq!(pts.split(' ').count(), 2, "{id} {name}: {pts}");
        }
        assert!(
            html.contains("Second 2 lasted only 3.10ms (9 transactions)"),
            "the chart must say why the last second is not drawn"
        );
        assert!(html.contains("<td class=\"n\">2 (partial: 3.10ms)</td>"));
        // The p99 of the tail's 9 transactions is in the table, not the chart.
        assert!(html.contains("5.80ms"));
    }

    #[test]
    fn per_second_axes_tick_whole_seconds() {
        let r = fixtures::profile(&fixtures::forking_server());
        let html = profile_page(&r);
        for id in ["chart-throughput", "chart-interval-latency"] {
            let ticks = x_tick_labels(&html, id);
            assert_eq!(ticks, ["0", "1", "2"], "{id}");
        }
    }

    #[test]
    fn the_report_shows_what_the_summary_shows() {
        let mut r = fixtures::profile(&fixtures::forking_server());
        let row = r
            .trace
            .as_mut()
            .unwrap()
            .syscalls
            .iter_mut()
            .find(|s| s.name == "pselect6")
            .unwrap();
        row.errors = Some(517);
        row.errnos = vec![crate::report::trace::ErrnoCount {
            name: "ERESTARTNOHAND".into(),
            errno: 514,
            count: 517,
        }];
        let html = profile_page(&r);
        assert!(html.contains("517 (ERESTARTNOHAND 517)"), "errno names");
        assert!(html.contains("15 of 18 syscalls shown"));
        assert!(html.contains("<td>minor page faults</td><td class=\"n\">1185611</td>"));
        assert!(html.contains("<td class=\"n\">376.62</td>"));
        assert!(html.contains("28.7 MiB"));
        assert!(html.contains("<td>processes seen</td><td class=\"n\">3158</td>"));
        assert!(html.contains("SIGTERM after 0.04 s, exit status 0"));
        let text = crate::report::profile_text::render(&r);
        assert!(text.contains("(15 of 18 syscalls shown; totals cover all)"));
        for (what, out) in [("html", &html), ("text", &text)] {
            for debug in ["Some(", "None", "[\"", "\\\""] {
                assert!(
                    !out.contains(debug),
                    "{what} holds Rust debug text {debug:?}"
                );
            }
        }
    }
}
