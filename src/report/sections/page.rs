//! report.html of a profile: the sections the run has
//! ([`super::SECTIONS`]), those placed at the top first (the headline, the
//! caveats), then the rest in the list's order.

use super::{Place, present};
use crate::report::html::page;
use crate::report::profile::ProfileReport;

/// The parts of the sections `r` has that go in `place`, ids prefixed
/// with `p`.
fn parts(p: &str, r: &ProfileReport, place: Place) -> String {
    present(r)
        .filter(|s| s.place() == place)
        .filter_map(|s| s.html(p, r))
        .collect()
}

/// Everything about one profile below its top, element ids prefixed with
/// `p`.
pub fn profile_body(p: &str, r: &ProfileReport) -> String {
    parts(p, r, Place::Body)
}

/// The report page of one profile: the headline first, then the caveats,
/// then everything else.
pub fn profile_page(r: &ProfileReport) -> String {
    let body = parts("", r, Place::Top) + &profile_body("", r);
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
        let text = super::super::text::render(&r);
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
