//! What the kernel counted over the window (`report/evidence/`): counter
//! deltas of the target's network namespace, its sockets, its threads'
//! run-queue delay.

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, list};
use crate::report::profile::ProfileReport;

/// The kernel's evidence, unless the run collected none.
pub struct Kernel;

impl ProfileSection for Kernel {
    fn name(&self) -> &'static str {
        "kernel"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.evidence.is_some()
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let e = r.evidence.as_ref()?;
        let mut s = String::from("Kernel evidence over the window:\n");
        for l in e.text().lines() {
            let _ = writeln!(s, "  {l}");
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        let e = r.evidence.as_ref()?;
        Some(card(
            &format!("{p}kernel"),
            "What the kernel counted",
            &format!(
                "Counter deltas of network namespace {} over the window (per namespace, not per \
                 process{}), the target's sockets sampled through sock_diag, and its threads' \
                 run-queue delay.",
                e.netns.id,
                if e.netns.shared_with_generator {
                    "; the load generator shares it"
                } else {
                    ""
                }
            ),
            &format!(
                "{}{}",
                e.html(),
                list(
                    &e.unavailable
                        .iter()
                        .map(|u| format!("not measured: {u}"))
                        .collect::<Vec<_>>(),
                    "notes"
                )
            ),
        ))
    }
}
