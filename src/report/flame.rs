//! Flame graphs of a [`StackGraph`], drawn by inferno: self-contained SVG
//! documents (their own script for search and zoom, no network access),
//! and the frame that puts one on report.html.
//!
//! The page's own charts are inline SVG without script; a flame graph's
//! script looks its elements up by id (`frames`, `search`, `details`) and
//! listens on the whole window, so it gets a document of its own: an
//! iframe whose `srcdoc` is the SVG, sandboxed (scripts and the search
//! prompt allowed, nothing of the page reachable).

use std::fmt::Write as _;

use inferno::flamegraph::{self, Options, Palette, color::MultiPalette};

use super::stacks::{StackGraph, WeightUnit, folded_text};
use super::svg::esc;

/// Past this many distinct stacks in either run, `compare` leaves the
/// differential graph out: it redraws both runs' stacks, and the page
/// would grow by megabytes.
pub const DIFF_MAX_STACKS: usize = 20_000;

/// inferno's options for a graph in `unit`: kernel frames (`_[k]`) orange
/// (the perl palette: the rest red, `::` names yellow), colours from the
/// names' hashes so two renderings of a run look alike, nanoseconds shown
/// as microseconds.
fn options(unit: WeightUnit, title: &str, subtitle: &str) -> Options<'static> {
    let mut o = Options::default();
    o.title = title.to_string();
    o.subtitle = (!subtitle.is_empty()).then(|| subtitle.to_string());
    o.colors = Palette::Multi(MultiPalette::Perl);
    o.hash = true;
    o.name_type = "Function:".into();
    match unit {
        WeightUnit::Samples => o.count_name = "samples".into(),
        WeightUnit::Nanoseconds => {
            o.count_name = "us".into();
            o.factor = 1e-3;
        }
    }
    o
}

/// `lines` (folded stacks, one or two counts each) drawn as an SVG.
fn draw(opts: &mut Options<'_>, lines: &str) -> Result<String, String> {
    let mut out = Vec::new();
    flamegraph::from_lines(opts, lines.lines(), &mut out).map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// The flame graph of `g` as an SVG document; None when nothing was
/// sampled (inferno draws nothing from no stacks).
pub fn svg(g: &StackGraph, title: &str, subtitle: &str) -> Option<Result<String, String>> {
    let folded = folded_text(g);
    if folded.is_empty() {
        return None;
    }
    Some(draw(&mut options(g.unit, title, subtitle), &folded))
}

/// The differential flame graph from `a` to `b` (inferno's difffolded,
/// A scaled to B's total so two runs of different lengths compare): the
/// shape of B, red where a frame grew, blue where it shrank. None when
/// either has no stacks or more than [`DIFF_MAX_STACKS`].
pub fn diff_svg(a: &StackGraph, b: &StackGraph, title: &str) -> Option<Result<String, String>> {
    let too_many = |g: &StackGraph| g.stacks.len() > DIFF_MAX_STACKS;
    let (fa, fb) = (folded_text(a), folded_text(b));
    if fa.is_empty() || fb.is_empty() || too_many(a) || too_many(b) || a.unit != b.unit {
        return None;
    }
    let mut two = Vec::new();
    let diff = inferno::differential::Options {
        normalize: true,
        strip_hex: false,
    };
    if let Err(e) =
        inferno::differential::from_readers(diff, fa.as_bytes(), fb.as_bytes(), &mut two)
    {
        return Some(Err(e.to_string()));
    }
    let two = String::from_utf8_lossy(&two).into_owned();
    let subtitle = "B's stacks; red: more of B's weight than of A's (A scaled to B's total), \
                    blue: less";
    Some(draw(&mut options(b.unit, title, subtitle), &two))
}

/// The height an SVG declares on its root element (px), if it does.
fn declared_height(svg: &str) -> Option<u32> {
    let root = &svg[svg.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let h = &root[root.find(" height=\"")? + 9..];
    h[..h.find('"')?].trim_end_matches("px").parse().ok()
}

/// A flame graph for report.html: the SVG in a sandboxed iframe as tall
/// as the graph, with a link-free fallback sentence for a browser that
/// shows no iframes. `id` is the frame's element id.
pub fn embed(id: &str, title: &str, svg: &str) -> String {
    let height = declared_height(svg).unwrap_or(600) + 8;
    // The document is the value of a single-quoted attribute: only `&`
    // and `'` need escaping there, which keeps a graph of thousands of
    // frames (every one full of `"`, `<` and `>`) about half the size
    // that escaping all four would.
    // An HTML document around the SVG element (its XML prolog dropped):
    // the frame then renders in standards mode, edge to edge. The graph's
    // script drops the root's width to fit its window, and an inline SVG
    // without one is 300 px wide unless the page says otherwise.
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
         <style>html,body{{margin:0}}body>svg{{width:100%}}</style>\
         </head><body>{}</body></html>",
        svg.find("<svg").map_or(svg, |at| &svg[at..])
    );
    let mut s = String::new();
    let _ = write!(
        s,
        "<iframe class=\"flame\" id=\"{}\" title=\"{}\" sandbox=\"allow-scripts allow-modals\" \
         style=\"width:100%;height:{height}px;border:0;display:block\" srcdoc='{}'>\
         This browser shows no frames: the folded stacks beside the report hold the graph.\
         </iframe>",
        esc(id),
        esc(title),
        doc.replace('&', "&amp;").replace('\'', "&#39;")
    );
    s
}

/// A graph's frame for the page: the flame graph, or why there is none.
pub fn figure(id: &str, g: &StackGraph, title: &str, subtitle: &str) -> String {
    match svg(g, title, subtitle) {
        Some(Ok(svg)) => embed(id, title, &svg),
        Some(Err(e)) => format!(
            "<p class=\"lead\">The flame graph could not be drawn: {}.</p>",
            esc(&e)
        ),
        None => "<p class=\"lead\">No stacks were sampled.</p>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stacks::{FrameKey, WeightedStack};

    fn frame(name: &str, kernel: bool) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: if kernel { "[kernel]" } else { "/srv/app" }.into(),
            kernel,
        }
    }

    fn graph(unit: WeightUnit, weights: &[(&[&str], u64)]) -> StackGraph {
        let stacks = weights
            .iter()
            .map(|(names, w)| WeightedStack {
                process: "app".into(),
                thread: "app".into(),
                frames: names
                    .iter()
                    .map(|n| match n.strip_suffix("_[k]") {
                        Some(k) => frame(k, true),
                        None => frame(n, false),
                    })
                    .collect(),
                weight: *w,
                complete: true,
            })
            .collect();
        StackGraph::build(unit, stacks, 10)
    }

    #[test]
    fn the_svg_names_the_functions_and_carries_its_search_script() {
        let g = graph(
            WeightUnit::Samples,
            &[
                (&["main", "serve", "parse_request"], 70),
                (&["main", "serve", "write_reply", "__x64_sys_write_[k]"], 30),
            ],
        );
        let svg = svg(&g, "Where the CPU goes", "100 samples")
            .unwrap()
            .unwrap();
        assert!(svg.starts_with("<?xml"), "a standalone document");
        // inferno shows a kernel frame without its `_[k]`, in its colour.
        for name in [
            "parse_request (",
            "write_reply (",
            "__x64_sys_write (",
            "app (",
        ] {
            assert!(svg.contains(&format!("<title>{name}")), "{name}");
        }
        assert!(svg.contains("<script"), "the script");
        assert!(svg.contains("function search("), "search");
        assert!(svg.contains("function zoom("), "zoom");
        assert!(svg.contains("id=\"search\""), "the search button");
        assert!(
            !svg.contains(" src=") && !svg.contains("href=\"http"),
            "no network"
        );
        assert!(svg.contains("70 samples, 70.00%"), "parse_request's share");
        // Off-CPU time reads in microseconds.
        let off = graph(
            WeightUnit::Nanoseconds,
            &[(&["main", "nanosleep_[k]"], 5_000_000)],
        );
        let svg = super::svg(&off, "Where it waits", "").unwrap().unwrap();
        assert!(
            svg.contains("<title>nanosleep (5,000 us, 100.00%)"),
            "time, not raw ns"
        );
        // Nothing sampled: no graph, a sentence.
        let empty = graph(WeightUnit::Samples, &[]);
        assert!(super::svg(&empty, "x", "").is_none());
        assert!(figure("f", &empty, "x", "").contains("No stacks were sampled"));
    }

    #[test]
    fn kernel_frames_are_coloured_apart() {
        let g = graph(
            WeightUnit::Samples,
            &[(&["main", "do_work", "__x64_sys_write_[k]"], 10)],
        );
        let svg = svg(&g, "t", "").unwrap().unwrap();
        // The frame's group: its title, then its rect with the fill.
        let fill = |name: &str| {
            let at = svg.find(&format!("<title>{name} (")).expect(name);
            let rest = &svg[at..];
            let f = &rest[rest.find("fill=\"").unwrap() + 6..];
            f[..f.find('"').unwrap()].to_string()
        };
        let (k, u) = (fill("__x64_sys_write"), fill("do_work"));
        assert_ne!(k, u, "kernel {k} vs user {u}");
        // Orange: red high, green in the middle, blue low.
        let rgb: Vec<u32> = k
            .trim_start_matches("rgb(")
            .trim_end_matches(')')
            .split(',')
            .map(|c| c.trim().parse().unwrap())
            .collect();
        assert!(rgb[0] > 180 && rgb[1] > 100 && rgb[2] < 100, "{k}");
    }

    #[test]
    fn an_embedded_graph_is_one_escaped_document_in_a_sandboxed_frame() {
        let g = graph(WeightUnit::Samples, &[(&["main", "a<b>&\"c\""], 3)]);
        let html = figure("p-flame-on", &g, "Where the CPU goes", "");
        assert!(html.starts_with("<iframe class=\"flame\" id=\"p-flame-on\""));
        assert!(html.contains("sandbox=\"allow-scripts allow-modals\""));
        // The SVG is an attribute's text: no element reaches the page, so
        // its ids and script cannot collide with the page's charts; the
        // attribute gives back the document exactly.
        let inner = &html[html.find("srcdoc='").unwrap() + 8..html.rfind("'>").unwrap()];
        assert!(!inner.contains('\''), "the attribute ends where it should");
        let doc = inner.replace("&#39;", "'").replace("&amp;", "&");
        let svg = super::svg(&g, "Where the CPU goes", "").unwrap().unwrap();
        assert!(doc.starts_with("<!DOCTYPE html>") && doc.ends_with("</svg></body></html>"));
        // The script drops the root's width to fit the frame; inline in
        // HTML that leaves it 300 px wide (seen in Chromium) unless the
        // document sizes it.
        assert!(doc.contains("body>svg{width:100%}"));
        assert!(
            doc.contains(&svg[svg.find("<svg").unwrap()..]),
            "the SVG, whole"
        );
        assert!(doc.contains("<script") && doc.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
        let h: u32 = html[html.find("height:").unwrap() + 7..]
            .split("px")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((60..2000).contains(&h), "as tall as the graph: {h}");
    }

    #[test]
    fn the_differential_graph_marks_what_grew() {
        let a = graph(
            WeightUnit::Samples,
            &[(&["main", "parse"], 80), (&["main", "write"], 20)],
        );
        let b = graph(
            WeightUnit::Samples,
            &[(&["main", "parse"], 40), (&["main", "write"], 60)],
        );
        let svg = diff_svg(&a, &b, "What changed").unwrap().unwrap();
        // inferno writes the change in each frame's title.
        assert!(svg.contains("write (60 samples, 60.00%; +40.00%)"), "{svg}");
        assert!(svg.contains("parse (40 samples, 40.00%; -40.00%)"));
        let empty = graph(WeightUnit::Samples, &[]);
        assert!(diff_svg(&a, &empty, "x").is_none());
    }
}
