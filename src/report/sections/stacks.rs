//! The stacks of a run: in the summary their top-functions tables
//! (`report/stacks_text.rs`); on the page the flame graphs of where the
//! CPU goes and where the threads wait, the top functions of each, the
//! modules without symbols, and what the sampling cost. Or why they are
//! missing.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::flame;
use crate::report::html::{card, list, table};
use crate::report::profile::ProfileReport;
use crate::report::stacks::StacksReport;
use crate::report::stacks_text::{
    PAGE_TOP, cost_line, graph_line, hooks_line, module_lines, top_table,
};
use crate::report::svg::esc;

/// The stacks, or why they failed; absent when the run did not ask for
/// them (or predates them).
pub struct Stacks;

impl ProfileSection for Stacks {
    fn name(&self) -> &'static str {
        "stacks"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.stacks.is_some() || r.stacks_failure.is_some()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        Some(match (&r.stacks, &r.stacks_failure) {
            (Some(st), _) => crate::report::stacks_text::render(st),
            (None, why) => format!("Stacks: not recorded: {}.\n", why.as_deref()?),
        })
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(stacks_section(
            p,
            r.stacks.as_ref(),
            r.stacks_failure.as_deref(),
        ))
    }
}

/// The "Stacks" card of a run (ids prefixed with `p`): nothing when the
/// run did not ask for stacks (or predates them), the reason when they
/// failed.
fn stacks_section(p: &str, stacks: Option<&StacksReport>, failure: Option<&str>) -> String {
    let id = format!("{p}stacks");
    const TITLE: &str = "Stacks: where the CPU goes and where it waits";
    let Some(r) = stacks else {
        return failure.map_or_else(String::new, |f| {
            card(&id, TITLE, &format!("Not recorded: {f}."), "")
        });
    };
    let mut inner = String::new();
    let _ = write!(
        inner,
        "<h4>On-CPU: where the CPU goes ({})</h4>",
        esc(&graph_line(&r.on_cpu))
    );
    inner.push_str(&flame::figure(
        &format!("{p}flame-on-cpu"),
        &r.on_cpu,
        "Where the CPU goes (on-CPU)",
        &format!("cpu-clock samples at {} Hz; kernel frames in orange", r.hz),
    ));
    inner.push_str(&top_table(&r.on_cpu, PAGE_TOP).to_html());
    if let Some(l) = hooks_line(&r.on_cpu) {
        let _ = write!(inner, "<p class=\"lead\">{}</p>", esc(&l));
    }
    if let Some(off) = &r.off_cpu {
        let _ = write!(
            inner,
            "<h4>Off-CPU: where it waits ({})</h4>",
            esc(&graph_line(off))
        );
        inner.push_str(&flame::figure(
            &format!("{p}flame-off-cpu"),
            off,
            "Where it waits (off-CPU)",
            "time switched out asleep, until woken; kernel frames in orange",
        ));
        inner.push_str(&top_table(off, PAGE_TOP).to_html());
        if let Some(l) = hooks_line(off) {
            let _ = write!(inner, "<p class=\"lead\">{}</p>", esc(&l));
        }
    }
    let modules = module_lines(r);
    if !modules.is_empty() {
        inner.push_str("<h4>Modules without symbols</h4>");
        inner.push_str(&list(&modules, "notes"));
    }
    inner.push_str("<h4>What the stacks cost</h4>");
    let c = &r.cost;
    let pct = |v: f64| format!("{:.2}%", 100.0 * v);
    let rows = vec![
        vec!["summary".to_string(), cost_line(c)],
        vec![
            "of the target's CPU (BPF and unwinding)".to_string(),
            c.target_share.map_or_else(|| "unknown".to_string(), pct),
        ],
        vec![
            "of the machine's CPU (BPF, unwinding, symbolizing)".to_string(),
            pct(c.machine_share),
        ],
    ];
    inner.push_str(&table(&["figure", "value"], &rows, &[]));
    if !r.notes.is_empty() {
        inner.push_str(&list(&r.notes, "notes"));
    }
    card(
        &id,
        TITLE,
        "Sampled stacks of the target over the window. Each flame graph is searchable \
         (Search, or Ctrl-F inside it) and zoomable (click a frame); width is weight, the \
         root frame the process. The folded stacks are beside this page (stacks.folded, \
         stacks-offcpu.folded).",
        &inner,
    )
}

#[cfg(test)]
mod tests {
    use crate::report::fixtures;
    use crate::report::sections::page::profile_page;

    #[test]
    fn the_page_embeds_both_flame_graphs_and_the_tables() {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        let before = profile_page(&r);
        assert!(!before.contains("id=\"stacks\""), "no stacks, no section");
        let charts = before.matches("<svg").count();
        r.stacks = Some(fixtures::stacks(1));
        let html = profile_page(&r);
        let sec = &html[html.find("id=\"stacks\"").expect("the section")..];
        for id in ["flame-on-cpu", "flame-off-cpu"] {
            assert!(
                sec.contains(&format!("<iframe class=\"flame\" id=\"{id}\"")),
                "{id}"
            );
        }
        assert_eq!(html.matches("<iframe").count(), 2);
        // The graphs' SVG stays inside the frames' srcdoc: outside them,
        // the page's inline charts are the same ones as without stacks.
        let mut outside = html.clone();
        while let Some(at) = outside.find("<iframe") {
            let end = at + outside[at..].find("</iframe>").unwrap() + 9;
            assert!(outside[at..end].contains("<script"), "the graph's script");
            outside.replace_range(at..end, "");
        }
        assert_eq!(outside.matches("<svg").count(), charts);
        assert!(!outside.contains("<script"), "no script on the page itself");
        assert!(sec.contains("<td>ngx_http_parse_request_line</td>"));
        assert!(sec.contains("<td class=\"n\">40.0 %</td>"));
        assert!(sec.contains("<td>kernel</td><td>tcp_sendmsg</td>"));
        assert!(sec.contains("install libc6-dbg"));
        assert!(sec.contains("0.42%") && sec.contains("1.26%"));
        assert!(sec.contains("3 samples lost: the ring buffer was full"));
        // A failure says so where the section would be.
        r.stacks = None;
        r.stacks_failure = Some("perf_event_open: <EACCES>".into());
        let html = profile_page(&r);
        assert!(html.contains("Not recorded: perf_event_open: &lt;EACCES&gt;."));
        assert!(!html.contains("<iframe"));
    }
}
