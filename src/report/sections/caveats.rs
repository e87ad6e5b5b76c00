//! What limits the run's figures: near the end of the summary, at the top
//! of the page (under the headline).

use std::fmt::Write as _;

use super::text::wrap;
use super::{Place, ProfileSection};
use crate::report::html::caveats_box;
use crate::report::profile::ProfileReport;

/// The caveats, when there are any.
pub struct Caveats;

impl ProfileSection for Caveats {
    fn name(&self) -> &'static str {
        "caveats"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        !r.caveats.is_empty()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let mut s = String::from("Caveats:\n");
        for c in &r.caveats {
            let _ = writeln!(s, "  * {}", wrap(c, 96, "    "));
        }
        Some(s)
    }
    fn html(&self, _p: &str, r: &ProfileReport) -> Option<String> {
        Some(caveats_box(&r.caveats))
    }
    fn place(&self) -> Place {
        Place::Top
    }
}
