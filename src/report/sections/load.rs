//! What drove the window: sockscope's own load (its latency and
//! throughput; on the page the load's charts of `report/html/latency.rs`)
//! or a workload it did not drive (a `--load-cmd` command, or the target's
//! own traffic: who counted the requests, the command's output).

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::latency::{latency_section, throughput_section};
use crate::report::html::{card, table};
use crate::report::load_text;
use crate::report::profile::ProfileReport;
use crate::report::svg::esc;
use crate::report::workload::{COMMAND, WorkloadRecord};

/// The load, or the workload: every run has one.
pub struct Load;

impl ProfileSection for Load {
    fn name(&self) -> &'static str {
        "load"
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::new();
        match &r.load {
            Some(load) => {
                let _ = writeln!(s, "Load:");
                for l in load_text::render(load).lines() {
                    let _ = writeln!(s, "  {l}");
                }
            }
            None => workload_text(&mut s, &r.workload),
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(match &r.load {
            Some(load) => latency_section(p, load) + &throughput_section(p, load),
            None => workload_card(p, &r.workload),
        })
    }
}

/// The workload section of a run under a `--load-cmd` command or observe
/// only: who counted the requests, and the end of the command's output.
fn workload_text(s: &mut String, w: &WorkloadRecord) {
    let c = &w.requests;
    let _ = writeln!(
        s,
        "Workload ({}):",
        if w.source == COMMAND {
            "an external command, --load-cmd"
        } else {
            "observed: no load was sent"
        }
    );
    let _ = writeln!(
        s,
        "  requests      {} in {:.2} s, counted by the {} ({})",
        c.count, c.window_s, c.counted_by, c.note
    );
    if let Some(cmd) = &w.command {
        let _ = writeln!(s, "  command       {}", shell_words::join(cmd));
    }
    if let Some(e) = &w.exit {
        let _ = writeln!(s, "  ended         {e} after {:.2} s", w.window_s);
    }
    if let Some(o) = w.output.as_ref().filter(|o| !o.tail.trim().is_empty()) {
        let lines: Vec<&str> = o.tail.trim_end().lines().collect();
        let tail = &lines[lines.len().saturating_sub(OUTPUT_LINES)..];
        let _ = writeln!(
            s,
            "  its output ({} bytes; the last {} lines{}):",
            o.bytes,
            tail.len(),
            if lines.len() > tail.len() || o.cut {
                "; run.json keeps more"
            } else {
                ""
            }
        );
        for l in tail {
            let _ = writeln!(s, "    | {l}");
        }
    }
}

/// Lines of a command's output the summary shows.
const OUTPUT_LINES: usize = 12;

/// The workload of a run whose load was not sockscope's: who counted the
/// requests, the command and how it ended, and the end of its output.
fn workload_card(p: &str, w: &WorkloadRecord) -> String {
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
    let (title, lead) = if w.source == COMMAND {
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
