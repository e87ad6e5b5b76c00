//! The stacks of a run as tables and sentences, for summary.txt (profile
//! and trace) and report.html: the top functions on-CPU and off-CPU (self
//! and total share, user or kernel, module), the modules without symbols
//! and what would name them, what the sampling cost, and the notes.

use std::fmt::Write as _;

use super::stacks::{StackGraph, StacksCost, StacksReport, TopFunction, WeightUnit};
use super::table::{Align, Column, Table};
use super::units::human_ns;

/// Rows of a top-functions table in summary.txt.
pub const TEXT_TOP: usize = 10;
/// Rows of a top-functions table on the page.
pub const PAGE_TOP: usize = 25;

/// `v` (0..1) in percent with one decimal.
fn pct(v: f64) -> String {
    format!("{:.1}", 100.0 * v)
}

/// Where a function runs.
pub fn side(t: &TopFunction) -> &'static str {
    if t.kernel { "kernel" } else { "user" }
}

/// The top `n` functions of `g` as a table: self and total shares, the
/// self time for off-CPU time, user or kernel, the function, its module.
pub fn top_table(g: &StackGraph, n: usize) -> Table {
    let time = g.unit == WeightUnit::Nanoseconds;
    let mut columns = vec![
        Column::both("self", "self %", 6, Align::Right).unit(" %"),
        Column::both("total", "total %", 7, Align::Right).unit(" %"),
    ];
    if time {
        columns.push(Column::both("self time", "self time", 9, Align::Right));
    }
    columns.extend([
        Column::both("where", "where", 6, Align::Left),
        Column::both("function", "function", 8, Align::Left),
        Column::both("module", "module", 6, Align::Left),
    ]);
    let rows = g
        .top
        .iter()
        .take(n)
        .map(|t| {
            let mut row = vec![pct(t.self_share), pct(t.total_share)];
            if time {
                row.push(human_ns(t.self_weight));
            }
            row.extend([
                side(t).to_string(),
                crate::text::escape(&t.name).into_owned(),
                crate::text::escape(&t.module).into_owned(),
            ]);
            row
        })
        .collect();
    Table { columns, rows }
}

/// What a graph covers, in a sentence: its weight, and how many of its
/// stacks were unwound whole and were deeper than three frames.
pub fn graph_line(g: &StackGraph) -> String {
    let weight = match g.unit {
        WeightUnit::Samples => format!("{} samples", g.total),
        WeightUnit::Nanoseconds => format!("{} of waiting", human_ns(g.total)),
    };
    format!(
        "{weight}; {:.0}% unwound to the outermost frame, {:.0}% deeper than 3 frames",
        100.0 * g.complete_share,
        100.0 * g.deep_share
    )
}

/// The line under a top-functions table when sockscope's own hooks were
/// on the target's stacks: their share, left out of the table.
pub fn hooks_line(g: &StackGraph) -> Option<String> {
    (g.sockscope_weight > 0).then(|| {
        let unit = match g.unit {
            WeightUnit::Samples => "samples".to_string(),
            WeightUnit::Nanoseconds => format!("the waiting ({})", human_ns(g.sockscope_weight)),
        };
        format!(
            "sockscope's tracer hooks: {} % of {unit} (stacks through sockscope's own BPF \
             programs, frames marked [sockscope]: its cost in the target's threads), left out \
             of the top functions; the shares above are of all {}",
            pct(g.sockscope_share()),
            match g.unit {
                WeightUnit::Samples => "samples",
                WeightUnit::Nanoseconds => "the waiting",
            }
        )
    })
}

/// The cost in a sentence: samples, lost, BPF time, unwinding and
/// symbolizing CPU, and their shares of the target's CPU and of the
/// machine's.
pub fn cost_line(c: &StacksCost) -> String {
    let covered = c
        .coverage
        .map(|k| {
            format!(
                " ({:.0}% of the ticks due in the target's CPU time)",
                100.0 * k
            )
        })
        .unwrap_or_default();
    let mut s = format!(
        "{} samples on-CPU{covered}, {} off-CPU, {} lost over {:.2} s; BPF {}, unwinding {}, \
         symbolizing {} of CPU",
        c.samples,
        c.off_cpu_samples,
        c.lost,
        c.window_s,
        human_ns(c.bpf_ns),
        human_ns(c.unwind_ns),
        human_ns(c.symbolize_ns)
    );
    match c.target_share {
        Some(t) => {
            let _ = write!(
                s,
                "; {:.2}% of the target's CPU (BPF and unwinding)",
                100.0 * t
            );
        }
        None => s.push_str("; the target's CPU unknown"),
    }
    let _ = write!(
        s,
        ", {:.2}% of the machine's (all three)",
        100.0 * c.machine_share
    );
    s
}

/// The modules whose frames had no names, one line each.
pub fn module_lines(r: &StacksReport) -> Vec<String> {
    r.unsymbolized
        .iter()
        .map(|m| {
            format!(
                "{}: {} frames without a name; {}",
                crate::text::escape(&m.path),
                m.frames,
                crate::text::escape(&m.hint)
            )
        })
        .collect()
}

/// The stacks section of summary.txt.
pub fn render(r: &StacksReport) -> String {
    let mut s = String::new();
    let table = |s: &mut String, title: &str, g: &StackGraph| {
        let _ = writeln!(s, "{title} ({}):", graph_line(g));
        if g.top.is_empty() && g.sockscope_weight == 0 {
            let _ = writeln!(s, "  nothing sampled");
            return;
        }
        for l in top_table(g, TEXT_TOP).to_text().lines() {
            let _ = writeln!(s, "  {}", l.trim_end());
        }
        if g.top.len() > TEXT_TOP {
            let _ = writeln!(
                s,
                "  (top {TEXT_TOP} by self share; report.html shows more and the flame graph)"
            );
        }
        if let Some(l) = hooks_line(g) {
            let _ = writeln!(s, "  {l}");
        }
    };
    table(
        &mut s,
        &format!("Top functions on-CPU at {} Hz, where the CPU goes", r.hz),
        &r.on_cpu,
    );
    if let Some(off) = &r.off_cpu {
        let _ = writeln!(s);
        table(&mut s, "Top functions off-CPU, where it waits", off);
    }
    let modules = module_lines(r);
    if !modules.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "Modules without symbols:");
        for l in modules {
            let _ = writeln!(s, "  {l}");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Stacks cost: {}", cost_line(&r.cost));
    for n in &r.notes {
        let _ = writeln!(s, "note: {}", crate::text::escape(n));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    #[test]
    fn the_summary_shows_the_top_functions_modules_cost_and_notes() {
        let r = fixtures::stacks(1);
        let text = render(&r);
        assert!(text.contains(
            "Top functions on-CPU at 99 Hz, where the CPU goes (100 samples; 75% unwound to the \
             outermost frame, 75% deeper than 3 frames):"
        ));
        let line = |needle: &str| {
            text.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{needle}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            line("ngx_http_parse_request_line"),
            [
                "40.0",
                "40.0",
                "user",
                "ngx_http_parse_request_line",
                "/usr/sbin/nginx"
            ]
        );
        assert_eq!(
            line("tcp_sendmsg"),
            ["35.0", "35.0", "kernel", "tcp_sendmsg", "[kernel]"]
        );
        // main: no self weight, all of the total.
        assert_eq!(line(" main ")[..3], ["0.0", "100.0", "user"]);
        // Off-CPU: in time.
        assert!(text.contains("Top functions off-CPU, where it waits (1.52s of waiting;"));
        assert_eq!(
            line(" schedule ")[..4],
            ["100.0", "100.0", "1.52s", "kernel"]
        );
        assert!(text.contains(
            "/usr/lib/x86_64-linux-gnu/libc.so.6: 25 frames without a name; install libc6-dbg"
        ));
        assert!(text.contains(
            "Stacks cost: 100 samples on-CPU (98% of the ticks due in the target's CPU time), 4210 off-CPU, 3 lost over 2.00 s; BPF 1.20ms, \
             unwinding 8.50ms, symbolizing 41.0ms of CPU; 0.42% of the target's CPU (BPF and \
             unwinding), 1.26% of the machine's (all three)"
        ));
        assert!(text.contains("note: 3 samples lost: the ring buffer was full"));
    }

    #[test]
    fn the_summary_keeps_to_the_top_ten() {
        let mut r = fixtures::stacks(1);
        let f = r.on_cpu.top[0].clone();
        r.on_cpu.top = (0..30)
            .map(|i| TopFunction {
                name: format!("f{i}"),
                ..f.clone()
            })
            .collect();
        let text = render(&r);
        assert!(text.contains(" f9 ") && !text.contains(" f10 "));
        assert!(text.contains("(top 10 by self share;"));
        assert_eq!(top_table(&r.on_cpu, PAGE_TOP).rows.len(), 25);
    }
}
