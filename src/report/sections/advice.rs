//! The settings this run's evidence points at: the rows of `sockscope
//! tune` it supports (`report/tune.rs`'s table); sockscope changes nothing.
//! The one part of the report a reader acts on, so it follows the
//! headline on the page and in the summary.

use std::fmt::Write as _;

use super::{Place, ProfileSection};
use crate::report::html::card;
use crate::report::profile::ProfileReport;
use crate::report::tune::table;

/// The advice, when the evidence supports any.
pub struct Advice;

impl ProfileSection for Advice {
    fn name(&self) -> &'static str {
        "advice"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        !r.advice.is_empty()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::from(
            "Settings this run's evidence points at (sockscope tune --from run.json; nothing \
             was changed):\n",
        );
        for l in table(&r.advice).to_text().lines() {
            let _ = writeln!(s, "  {}", l.trim_end());
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(card(
            &format!("{p}advice"),
            "Settings the evidence points at",
            "Rows of `sockscope tune` that this run's own evidence supports; sockscope changed \
             nothing.",
            &table(&r.advice).to_html(),
        ))
    }
    fn place(&self) -> Place {
        Place::Top
    }
}
