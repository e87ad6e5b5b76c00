//! report.html: one self-contained page (inline CSS and SVG; no fonts, no
//! network; no script but the flame graphs', each in a frame of its own) with a chart and the table of its numbers for
//! every figure, the derived sentences and the caveats.
//!
//! This file is the page's chrome (style sheet, header, cards, tables,
//! the environment table) and the parts several pages share: [`latency`]
//! (a load's latency and throughput) and [`anatomy`] (a request anatomy's
//! card). A profile's sections are `report/sections/`, [`load`] the page
//! of a load artifact, [`requests`] that of a `sockscope.requests`
//! artifact; each experiment's section lives
//! with its results (`report/bench/<name>.rs`), and `report::bench::page`
//! puts them on the page of one experiment or of the demo.

pub mod anatomy;
pub mod latency;
pub mod load;
pub mod requests;

use std::fmt::Write as _;

use super::machine::{Build, Machine};
use super::svg::esc;
use super::table::Table;

pub use load::load_page;
pub use requests::requests_page;

const CSS: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #1b1f24;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
header { background: #1b2a3a; color: #fff; padding: 22px 28px; }
header .inner { max-width: 1180px; margin: 0 auto; }
header h1 { margin: 0 0 4px; font-size: 24px; font-weight: 650; }
header p { margin: 0; color: #c9d4df; font-size: 14px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #d8dde3; }
h3 { font-size: 16px; margin: 26px 0 6px; }
section.card h3 { margin-top: 2px; }
section.card { background: #fff; border: 1px solid #dde2e8; border-radius: 8px; padding: 14px 18px 16px; margin: 16px 0; }
p.lead { font-size: 14px; color: #47515c; margin: 2px 0 10px; }
ul.insights li { margin: 4px 0; }
.banner { padding: 12px 16px; border-radius: 8px; margin: 16px 0; font-weight: 600; }
.banner.bad { background: #fde8e6; border: 1px solid #d55e00; color: #7a2300; }
.banner.good { background: #e6f4ee; border: 1px solid #009e73; color: #00543d; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 6px 18px; }
.grid2 h4 { margin: 8px 0 0; font-size: 14px; font-weight: 600; }
.caveats { background: #fff8e6; border: 1px solid #e6b14a; border-radius: 8px; padding: 10px 18px; }
.caveats h3 { margin-top: 6px; }
svg.chart { display: block; width: 100%; height: auto; margin: 6px 0 4px; }
svg.chart text { font-family: inherit; fill: #1b1f24; }
svg.chart .tick { font-size: 12px; fill: #47515c; }
svg.chart .axis-label { font-size: 13px; fill: #1b1f24; }
svg.chart .legend { font-size: 13px; }
svg.chart .bar-label { font-size: 11.5px; fill: #1b1f24; }
svg.chart .seg-label { font-size: 11px; fill: #fff; }
svg.chart .row-label { font-size: 13px; }
svg.chart .grid { stroke: #e3e7ec; stroke-width: 1; }
svg.chart .axis, svg.chart .tickmark { stroke: #5b6570; stroke-width: 1; }
.tw { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 6px 0 4px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 9px; border-bottom: 1px solid #e3e7ec; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.n, th.n { text-align: right; white-space: nowrap; }
th { vertical-align: bottom; }
th.n { white-space: normal; }
tr:nth-child(even) td { background: #fafbfc; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #0b5394; }
footer { color: #6a737d; font-size: 12.5px; margin-top: 36px; }
.headline { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 10px; margin: 6px 0 12px; }
.headline .figure { border: 1px solid #e3e7ec; border-radius: 6px; padding: 8px 10px; background: #fafbfc; min-width: 0; }
.headline .label { color: #6a737d; font-size: 12.5px; }
.headline .value { font-size: 16px; font-weight: 600; overflow-wrap: anywhere;
  display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 5; line-clamp: 5; overflow: hidden; }
iframe.flame { background: #fff; margin: 6px 0 4px; }
nav.contents { display: flex; flex-wrap: wrap; gap: 4px 6px; align-items: baseline; margin: 0 0 4px;
  padding: 8px 12px; background: #fff; border: 1px solid #dde2e8; border-radius: 8px; font-size: 13.5px; }
nav.contents .label { font-weight: 600; color: #47515c; margin-right: 6px; }
nav.contents a { color: #0b5394; text-decoration: none; padding: 1px 7px; border-radius: 4px; background: #eef3f9; }
nav.contents a:hover { text-decoration: underline; }
[id] { scroll-margin-top: 8px; }
@media (max-width: 900px) {
  main { padding: 16px 10px 36px; }
  header { padding: 16px 12px; }
  section.card { padding: 10px 10px 12px; }
  .grid2 { grid-template-columns: 1fr; }
  table { font-size: 12px; }
  th, td { padding: 3px 4px; }
}
"#;

/// A whole HTML document around `body`, which opens with its contents
/// bar ([`contents`]) when it has more than one part to link to.
pub fn page(title: &str, subtitle: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t}</title><style>{CSS}</style></head><body>\
         <header><div class=\"inner\"><h1>{t}</h1><p>{s}</p></div></header>\
         <main>{nav}{body}<footer>Generated by sockscope. Every chart is followed by the table of \
         its numbers; the JSON artifact beside this page holds everything.</footer></main>\
         </body></html>\n",
        t = esc(title),
        s = esc(subtitle),
        nav = contents(body)
    )
}

/// The openings of the parts a contents bar links to, as this file's
/// helpers write them: a titled `<h2>`, a card and the caveats box.
const ANCHORS: [(&str, &str, &str); 3] = [
    ("<h2 id=\"", "\">", "</h2>"),
    ("<section class=\"card\" id=\"", "\"><h3>", "</h3>"),
    ("<div class=\"caveats\" id=\"", "\"><h3>", "</h3>"),
];

/// The contents bar of a page: a link to each part of `body` in order,
/// its titles read from the markup this file writes (already escaped).
/// A page that has headings (`<h2 id>`: the demo's experiments) links to
/// them and to the boxes outside them; one without (a profile's page)
/// links to every card. Empty for a page of one part. Plain links: no
/// script, nothing outside the page.
pub fn contents(body: &str) -> String {
    let mut parts: Vec<(usize, bool, &str, &str)> = Vec::new();
    for (open, mid, close) in ANCHORS {
        let heading = open.starts_with("<h2");
        let mut from = 0;
        while let Some(at) = body[from..].find(open) {
            let start = from + at;
            let rest = &body[start + open.len()..];
            from = start + open.len();
            let Some(id_end) = rest.find('"') else { break };
            let (id, after) = rest.split_at(id_end);
            let Some(title) = after
                .strip_prefix(mid)
                .and_then(|t| t.find(close).map(|e| &t[..e]))
            else {
                continue;
            };
            parts.push((start, heading, id, title));
        }
    }
    parts.sort_by_key(|p| p.0);
    if let Some(first) = parts.iter().position(|p| p.1) {
        // Keep what comes before the first heading (the status, the
        // caveats) and the headings themselves.
        let first = parts[first].0;
        parts.retain(|p| p.1 || p.0 < first);
    }
    if parts.len() < 2 {
        return String::new();
    }
    let mut s = String::from(
        "<nav class=\"contents\" id=\"contents\"><span class=\"label\">Contents</span>",
    );
    for (_, _, id, title) in parts {
        let _ = write!(s, "<a href=\"#{id}\">{title}</a>");
    }
    s.push_str("</nav>");
    s
}

/// An HTML table; columns listed in `numeric` are right-aligned.
pub fn table(headers: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> String {
    Table::for_page(headers, numeric, rows.to_vec()).to_html()
}

/// A card: a titled section with a lead paragraph.
pub fn card(id: &str, title: &str, lead: &str, inner: &str) -> String {
    format!(
        "<section class=\"card\" id=\"{}\"><h3>{}</h3><p class=\"lead\">{}</p>{inner}</section>",
        esc(id),
        esc(title),
        esc(lead)
    )
}

/// A list of sentences, with a class.
pub fn list(items: &[String], class: &str) -> String {
    let mut s = format!("<ul class=\"{class}\">");
    for i in items {
        let _ = write!(s, "<li>{}</li>", esc(i));
    }
    s.push_str("</ul>");
    s
}

/// The caveats box (nothing without caveats).
pub fn caveats_box(caveats: &[String]) -> String {
    if caveats.is_empty() {
        return String::new();
    }
    format!(
        "<div class=\"caveats\" id=\"caveats\"><h3>Caveats</h3>{}</div>",
        list(caveats, "caveat-list")
    )
}

/// Build and machine facts as a table.
pub fn environment(build: &Build, machine: &Machine, extra: &[(String, String)]) -> String {
    let mut rows = vec![
        vec!["sockscope".to_string(), build.describe()],
        vec![
            "kernel".to_string(),
            format!("{} ({})", machine.kernel_release, machine.kernel_version),
        ],
        vec![
            "CPU".to_string(),
            format!("{} x {}", machine.cpus, machine.cpu_model),
        ],
        vec![
            "virtual machine".to_string(),
            machine
                .virtualization_evidence
                .clone()
                .unwrap_or_else(|| "no sign of one".into()),
        ],
    ];
    for (k, v) in &machine.sysctls {
        rows.push(vec![
            k.clone(),
            v.clone().unwrap_or_else(|| "unreadable".into()),
        ]);
    }
    for (k, v) in extra {
        rows.push(vec![k.clone(), v.clone()]);
    }
    table(&["what", "value"], &rows, &[])
}
