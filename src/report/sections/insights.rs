//! What the run says: the derived sentences (`report/insight.rs`).

use std::fmt::Write as _;

use super::ProfileSection;
use super::text::wrap;
use crate::report::html::list;
use crate::report::profile::ProfileReport;

/// The sentences: every run has the section, if not always a sentence.
pub struct Insights;

impl ProfileSection for Insights {
    fn name(&self) -> &'static str {
        "insights"
    }
    fn brief(&self) -> bool {
        true
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::from("What the run says:\n");
        for line in &r.insights {
            let _ = writeln!(s, "  * {}", wrap(line, 96, "    "));
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(format!(
            "<section class=\"card\" id=\"{p}insights\"><h3>What this run says</h3>{}</section>",
            list(&r.insights, "insights")
        ))
    }
}
