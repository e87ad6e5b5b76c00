//! `compare`'s view of two runs' stacks: the functions that grew, each
//! with its self and total share of the on-CPU samples in each run and
//! the change in points, biggest growth first; and the differential flame
//! graph for the page.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::flame;
use super::stacks::{KERNEL_SUFFIX, StackGraph, StacksReport, shares};
use super::table::{Align, Column, Table};

/// Rows of the view.
pub const TOP: usize = 10;

/// Below this change (a share, 0..1) a function did not grow.
const NOISE: f64 = 0.0005;

/// One function in both runs: shares of each run's total (0..1).
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    /// The function's name as its frames show it (no `_[k]`).
    pub name: String,
    /// A kernel function.
    pub kernel: bool,
    /// The module it is in, where either run's top functions name it.
    pub module: String,
    /// Self share in A and in B.
    pub self_share: (f64, f64),
    /// Total share in A and in B.
    pub total_share: (f64, f64),
}

impl Growth {
    /// B's self share less A's.
    pub fn self_change(&self) -> f64 {
        self.self_share.1 - self.self_share.0
    }
    /// B's total share less A's.
    pub fn total_change(&self) -> f64 {
        self.total_share.1 - self.total_share.0
    }
}

/// The functions whose self or total share grew from `a` to `b`, by the
/// growth of their self share, then of their total share.
pub fn grew(a: &StackGraph, b: &StackGraph) -> Vec<Growth> {
    let (sa, sb) = (shares(a), shares(b));
    let module = |name: &str, kernel: bool| {
        a.top
            .iter()
            .chain(&b.top)
            .find(|t| t.name == name && t.kernel == kernel)
            .map_or_else(String::new, |t| t.module.clone())
    };
    let names: HashSet<&str> = sa.keys().chain(sb.keys()).copied().collect();
    let mut out: Vec<Growth> = names
        .into_iter()
        .map(|frame| {
            let (kernel, name) = match frame.strip_suffix(KERNEL_SUFFIX) {
                Some(n) => (true, n),
                None => (false, frame),
            };
            let (a_self, a_total) = sa.get(frame).copied().unwrap_or_default();
            let (b_self, b_total) = sb.get(frame).copied().unwrap_or_default();
            Growth {
                name: name.to_string(),
                kernel,
                module: module(name, kernel),
                self_share: (a_self, b_self),
                total_share: (a_total, b_total),
            }
        })
        .filter(|g| g.self_change() > NOISE || g.total_change() > NOISE)
        .collect();
    out.sort_by(|x, y| {
        y.self_change()
            .total_cmp(&x.self_change())
            .then(y.total_change().total_cmp(&x.total_change()))
            .then_with(|| x.name.cmp(&y.name))
    });
    out
}

fn pct(v: f64) -> String {
    format!("{:.1}", 100.0 * v)
}

fn points(v: f64) -> String {
    format!("{:+.1}", 100.0 * v)
}

/// The view as a table (text and page).
pub fn table(rows: &[Growth]) -> Table {
    let columns = vec![
        Column::both("self A", "self A", 6, Align::Right).unit(" %"),
        Column::both("self B", "self B", 6, Align::Right).unit(" %"),
        Column::both("self change", "change", 6, Align::Right).unit(" pp"),
        Column::both("total A", "total A", 7, Align::Right).unit(" %"),
        Column::both("total B", "total B", 7, Align::Right).unit(" %"),
        Column::both("total change", "change", 6, Align::Right).unit(" pp"),
        Column::both("where", "where", 6, Align::Left),
        Column::both("function", "function", 8, Align::Left),
        Column::page("module", Align::Left),
    ];
    let rows = rows
        .iter()
        .take(TOP)
        .map(|g| {
            vec![
                pct(g.self_share.0),
                pct(g.self_share.1),
                points(g.self_change()),
                pct(g.total_share.0),
                pct(g.total_share.1),
                points(g.total_change()),
                if g.kernel { "kernel" } else { "user" }.to_string(),
                crate::text::escape(&g.name).into_owned(),
                crate::text::escape(&g.module).into_owned(),
            ]
        })
        .collect();
    Table { columns, rows }
}

/// What `compare` says of the stacks: None when neither run has them;
/// otherwise the sentence when only one does, or the lead and the rows.
pub enum View<'a> {
    /// Only one run has stacks: which.
    OnlyOne(&'static str),
    /// Both: their graphs and the functions that grew.
    Both(&'a StackGraph, &'a StackGraph, Vec<Growth>),
}

/// The view of `a` and `b`'s stacks, if either has any.
pub fn view<'a>(a: Option<&'a StacksReport>, b: Option<&'a StacksReport>) -> Option<View<'a>> {
    match (a, b) {
        (None, None) => None,
        (Some(_), None) => Some(View::OnlyOne("A")),
        (None, Some(_)) => Some(View::OnlyOne("B")),
        (Some(a), Some(b)) => Some(View::Both(&a.on_cpu, &b.on_cpu, grew(&a.on_cpu, &b.on_cpu))),
    }
}

const LEAD: &str = "Functions that grew (share of each run's on-CPU samples, self: as the \
                    innermost frame, total: anywhere on the stack; change in points), biggest \
                    growth first";

fn only_one(which: &str) -> String {
    format!(
        "Stacks: only {which} has sampled stacks; the functions cannot be compared (profile \
         the other run with stacks)."
    )
}

/// The view for the terminal (nothing when neither run has stacks).
pub fn text(a: Option<&StacksReport>, b: Option<&StacksReport>) -> String {
    let mut s = String::new();
    match view(a, b) {
        None => {}
        Some(View::OnlyOne(which)) => {
            let _ = writeln!(s, "{}", only_one(which));
        }
        Some(View::Both(_, _, rows)) => {
            let _ = writeln!(s, "{LEAD}:");
            if rows.is_empty() {
                let _ = writeln!(s, "  no function's share grew");
            }
            if !rows.is_empty() {
                for l in table(&rows).to_text().lines() {
                    let _ = writeln!(s, "  {}", l.trim_end());
                }
            }
            if rows.len() > TOP {
                let _ = writeln!(s, "  ({} more grew; the top {TOP} shown)", rows.len() - TOP);
            }
        }
    }
    s
}

/// The view for a page: the table and, when cheap, the differential flame
/// graph (empty when neither run has stacks).
pub fn html(a: Option<&StacksReport>, b: Option<&StacksReport>) -> String {
    use super::html::card;
    match view(a, b) {
        None => String::new(),
        Some(View::OnlyOne(which)) => card("stacks", "Functions that grew", &only_one(which), ""),
        Some(View::Both(ga, gb, rows)) => {
            let mut inner = if rows.is_empty() {
                "<p>No function's share grew.</p>".to_string()
            } else {
                table(&rows).to_html()
            };
            match flame::diff_svg(ga, gb, "What changed on-CPU, A to B") {
                Some(Ok(svg)) => inner.push_str(&flame::embed(
                    "flame-diff",
                    "What changed on-CPU, A to B",
                    &svg,
                )),
                Some(Err(e)) => {
                    let _ = write!(
                        inner,
                        "<p>The differential flame graph could not be drawn: {}.</p>",
                        super::svg::esc(&e)
                    );
                }
                None => inner.push_str(
                    "<p>No differential flame graph: a run without samples, or too many \
                     distinct stacks to draw both.</p>",
                ),
            }
            card("stacks", "Functions that grew", LEAD, &inner)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    #[test]
    fn the_function_that_grew_most_comes_first() {
        // B spends four times the samples in request parsing.
        let (a, b) = (fixtures::stacks(1), fixtures::stacks(4));
        let rows = grew(&a.on_cpu, &b.on_cpu);
        assert_eq!(rows[0].name, "ngx_http_parse_request_line");
        assert_eq!(rows[0].module, "/usr/sbin/nginx");
        // 40 of 100 samples, then 160 of 220.
        let (sa, sb) = rows[0].self_share;
        assert!((sa - 0.40).abs() < 1e-9 && (sb - 160.0 / 220.0).abs() < 1e-9);
        // Its caller grew in total only, so comes after it.
        assert_eq!(rows[1].name, "ngx_process_events_and_timers");
        assert_eq!(rows[1].self_change(), 0.0);
        assert!(rows[1].total_change() > 0.3);
        // What shrank is not listed; main (100% in both) neither.
        assert!(
            rows.iter()
                .all(|r| r.name != "tcp_sendmsg" && r.name != "main")
        );
        let text = text(Some(&a), Some(&b));
        let first = text.lines().nth(2).unwrap();
        assert_eq!(
            first.split_whitespace().collect::<Vec<_>>(),
            [
                "40.0",
                "72.7",
                "+32.7",
                "40.0",
                "72.7",
                "+32.7",
                "user",
                "ngx_http_parse_request_line"
            ]
        );
        // Kernel functions say so.
        let back = grew(&b.on_cpu, &a.on_cpu);
        let k = back.iter().find(|g| g.name == "tcp_sendmsg").unwrap();
        assert!(k.kernel && k.module == "[kernel]");
        // Nothing grew: said so.
        assert!(super::text(Some(&a), Some(&a)).contains("no function's share grew"));
    }

    #[test]
    fn only_one_run_with_stacks_is_said_and_none_is_silent() {
        let a = fixtures::stacks(1);
        assert!(text(None, Some(&a)).contains("only B has sampled stacks"));
        assert!(text(Some(&a), None).contains("only A has sampled stacks"));
        assert!(html(Some(&a), None).contains("only A has sampled stacks"));
        assert_eq!(text(None, None), "");
        assert_eq!(html(None, None), "");
    }

    #[test]
    fn the_page_view_has_the_table_and_the_differential_graph() {
        let (a, b) = (fixtures::stacks(1), fixtures::stacks(4));
        let h = html(Some(&a), Some(&b));
        assert!(h.contains("<td>ngx_http_parse_request_line</td>"));
        assert!(h.contains("<td class=\"n\">+32.7 pp</td>"));
        assert!(h.contains("<iframe class=\"flame\" id=\"flame-diff\""));
        assert!(
            h.contains("+32.73%"),
            "inferno's change in the frame's title"
        );
    }
}
