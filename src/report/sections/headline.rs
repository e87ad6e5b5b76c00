//! The headline (the figures of `report/headline.rs`): the summary's first
//! block after the steps, the page's first card. A value longer than a
//! table cell (a generated function name) is cut as a cell is in the
//! summary; on the page its tile wraps it over at most five lines and
//! holds it whole in its title.

use std::fmt::Write as _;

use super::{Place, ProfileSection};
use crate::report::headline::figures;
use crate::report::html::anatomy::bars;
use crate::report::html::card;
use crate::report::profile::ProfileReport;
use crate::report::svg::esc;
use crate::report::table::shown;

/// The headline: every run has one.
pub struct Headline;

impl ProfileSection for Headline {
    fn name(&self) -> &'static str {
        "headline"
    }
    fn brief(&self) -> bool {
        true
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::from("Headline:\n");
        for f in figures(r) {
            let _ = writeln!(s, "  {:<18}{}", f.label, shown(&f.value));
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(headline_card(p, r))
    }
    fn place(&self) -> Place {
        Place::Top
    }
}

/// The headline card: the figures a reader looks for first, and one
/// picture (what the turns at each server-time percentile were made of,
/// or without the anatomy, nothing).
fn headline_card(p: &str, r: &ProfileReport) -> String {
    let mut inner = String::from("<div class=\"headline\">");
    for f in figures(r) {
        let _ = write!(
            inner,
            "<div class=\"figure\"><div class=\"label\">{}</div>\
             <div class=\"value\" title=\"{}\">{}</div></div>",
            esc(f.label),
            esc(&f.value),
            esc(&shown(&f.value))
        );
    }
    inner.push_str("</div>");
    if let Some(a) = r.anatomy.as_ref().filter(|a| a.parts.server_time.count > 0) {
        inner.push_str(&bars(&format!("{p}headline-"), a));
    }
    card(
        &format!("{p}headline"),
        "Headline",
        "The key figures of this run; everything below explains them.",
        &inner,
    )
}
