//! The request anatomy: its table and sentences in the summary, its card
//! (`report/html/anatomy.rs`, which a `sockscope.requests` page shows too)
//! on the page, or there why it is missing.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::anatomy::anatomy_card;
use crate::report::html::card;
use crate::report::profile::ProfileReport;

/// The anatomy, or (on the page) why it failed.
pub struct Anatomy;

impl ProfileSection for Anatomy {
    fn name(&self) -> &'static str {
        "anatomy"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.anatomy.is_some() || r.anatomy_failure.is_some()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        // A run whose anatomy failed says so among its caveats; the summary
        // has no block for it.
        let a = r.anatomy.as_ref()?;
        let mut s = String::new();
        for l in crate::report::anatomy::render(a).lines() {
            let _ = writeln!(s, "{l}");
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        Some(match (&r.anatomy, &r.anatomy_failure) {
            (Some(a), _) => anatomy_card(p, a),
            (None, f) => card(
                &format!("{p}anatomy"),
                "Anatomy of a request",
                &format!("Not recorded: {}.", f.as_deref()?),
                "",
            ),
        })
    }
}
