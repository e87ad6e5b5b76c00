//! The report page of a `sockscope.requests` artifact (`trace
//! --requests-only --json`): the request anatomy's card as a profile shows
//! it, then the window and what the anatomy cost.

use super::anatomy::anatomy_card;
use super::{card, caveats_box, page, table};
use crate::report::requests::{self, RequestsReport};
use crate::report::units::{fmt_ns, fmt_pct};

/// The page of one `sockscope.requests` artifact.
pub fn requests_page(r: &RequestsReport) -> String {
    let body = format!(
        "{}{}{}",
        caveats_box(&r.notes),
        anatomy_card("", &r.anatomy),
        window_card(r)
    );
    page(
        "sockscope trace --requests-only",
        &format!(
            "{}: {} turns in {:.2} s; {}",
            requests::who(r),
            r.anatomy.turns,
            r.window.duration_s,
            r.window.started_at
        ),
        &body,
    )
}

/// The window, the target's CPU over it and the programs' cost.
fn window_card(r: &RequestsReport) -> String {
    let c = &r.anatomy.cost;
    let row = |k: &str, v: String| vec![k.to_string(), v];
    let rows = vec![
        row("followed", requests::who(r)),
        row("started at", r.window.started_at.clone()),
        row("window", format!("{:.3} s", r.window.duration_s)),
        row("ended by", r.window.end_reason.replace('_', " ")),
        row(
            &format!("target CPU ({})", r.target_cpu.source),
            match r.target_cpu.cpu_s {
                Some(s) => format!("{s:.3} s"),
                None => "not read".into(),
            },
        ),
        row("BPF time on the target's events", fmt_ns(c.target_ns)),
        row("BPF time filtering others' events", fmt_ns(c.others_ns)),
        row(
            "of the target's CPU",
            c.of_target_cpu
                .map_or("not known".into(), |s| fmt_pct(s * 100.0)),
        ),
        row("of the machine", fmt_pct(c.of_machine * 100.0)),
        row("runs timed", fmt_pct(c.timed_fraction * 100.0)),
    ];
    card(
        "window",
        "Window and cost",
        "Only the socket tracepoints were hooked (no syscall tracer): the cost is the kernel \
         time the anatomy's programs ran, extrapolated from the slices they timed themselves.",
        &table(&["", ""], &rows, &[]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::anatomy::AnatomyReport;
    use crate::report::header::ArtifactHeader;
    use crate::report::requests::TargetCpu;
    use crate::report::trace::{Target, Window};

    #[test]
    fn the_page_holds_the_anatomy_card_the_window_and_escaped_notes() {
        let r = RequestsReport {
            header: ArtifactHeader::new(requests::SCHEMA, requests::SCHEMA_VERSION),
            target: Target {
                mode: "attach".into(),
                command: None,
                pid: 42,
                comm: "<echo>".into(),
                scope: None,
            },
            window: Window {
                started_at: "2026-11-26T04:00:00.000Z".into(),
                duration_s: 3.0,
                end_reason: "signal:SIGINT".into(),
                complete: true,
                exit_code: None,
                killed_by_signal: None,
            },
            target_cpu: TargetCpu {
                source: "/proc stat".into(),
                cpu_s: Some(0.25),
            },
            notes: vec!["a <note>".into()],
            anatomy: AnatomyReport::default(),
        };
        let html = requests_page(&r);
        assert!(html.contains("id=\"anatomy\""), "{html}");
        assert!(html.contains("Anatomy of a request"));
        assert!(html.contains("Window and cost"));
        assert!(html.contains("pid 42 (&lt;echo&gt;)"), "{html}");
        assert!(html.contains("a &lt;note&gt;") && !html.contains("<note>"));
        assert!(html.contains("0.250 s"), "the target's CPU");
    }
}
