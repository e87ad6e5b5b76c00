//! The sections of a profile's report, in one ordered list ([`SECTIONS`])
//! that both summary.txt ([`text`]) and report.html ([`page`]) walk.
//!
//! Each family of sections is one file here: `sweep` (the steps of a sweep
//! or a capacity search), `headline`, `insights`, `load` (latency and
//! throughput of sockscope's load, or the workload it did not drive),
//! `anatomy` (the request anatomy), `commands` (its RESP, memcached and PostgreSQL commands), `syscalls`, `resources` (CPU, and the
//! other resources), `stacks` (flame graphs, top functions), `processes`
//! (attribution, the per-process breakdown), `kernel` (the kernel's
//! evidence), `tracer` (its own cost), `environment` (how it was measured,
//! the notes), `caveats` and `advice` (right after the headline: the one
//! part a reader acts on). Each implements [`ProfileSection`]:
//! whether the run has it, its block of summary.txt and its part of the
//! page. Adding a section is one file and one line in [`SECTIONS`].
//!
//! The page differs from the summary in one way only: the sections marked
//! [`Place::Top`] (the headline, the advice, the caveats) open it, before
//! the rest in the list's order. Above them all, the page's contents bar
//! links to every section it shows. Parts of the HTML that other pages share live in
//! `report/html/` (`latency`: a load's; `anatomy`: an anatomy's card).

pub mod advice;
pub mod anatomy;
pub mod caveats;
pub mod commands;
pub mod environment;
pub mod headline;
pub mod insights;
pub mod kernel;
pub mod load;
pub mod page;
pub mod processes;
pub mod resources;
pub mod stacks;
pub mod sweep;
pub mod syscalls;
pub mod tail;
pub mod text;
pub mod tracer;

use super::profile::ProfileReport;

/// Where a section's part of report.html goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At the top of the page, before every [`Place::Body`] section.
    Top,
    /// In the body, in the list's order.
    Body,
}

/// One section of a profile's report: whether a run has it, what
/// summary.txt says of it and what report.html shows.
pub trait ProfileSection: Sync {
    /// Its name (the key of tests and of the docs).
    fn name(&self) -> &'static str;
    /// Whether this run has it: its figures, or why they are missing.
    fn present(&self, r: &ProfileReport) -> bool;
    /// Its block of summary.txt (whole lines), for a run that has it;
    /// None when the summary leaves it out.
    fn text(&self, _r: &ProfileReport) -> Option<String> {
        None
    }
    /// Its part of report.html (element ids prefixed with `p`), for a run
    /// that has it; None when the page leaves it out.
    fn html(&self, _p: &str, _r: &ProfileReport) -> Option<String> {
        None
    }
    /// Where on the page it goes.
    fn place(&self) -> Place {
        Place::Body
    }
    /// Whether the terminal's brief summary shows its block (what ran,
    /// what it found); the rest stays in summary.txt (`--verbose` prints
    /// it all).
    fn brief(&self) -> bool {
        false
    }
}

/// The registry: one line per section, in the order summary.txt and the
/// page's body show them.
pub static SECTIONS: &[&dyn ProfileSection] = &[
    &sweep::Steps,
    &headline::Headline,
    &advice::Advice,
    &insights::Insights,
    &load::Load,
    &anatomy::Anatomy,
    &commands::Commands,
    &syscalls::Syscalls,
    &resources::Cpu,
    &stacks::Stacks,
    &tail::Tail,
    &resources::Resources,
    &processes::Attribution,
    &processes::Processes,
    &kernel::Kernel,
    &tracer::Tracer,
    &environment::Environment,
    &environment::Notes,
    &caveats::Caveats,
];

/// The sections `r` has, in the list's order.
pub fn present(r: &ProfileReport) -> impl Iterator<Item = &'static dyn ProfileSection> + '_ {
    SECTIONS.iter().copied().filter(|s| s.present(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    /// Runs of every shape the fixtures have: own load or a command's,
    /// with and without the tracer, the anatomy, stacks, a sweep.
    fn runs() -> Vec<(&'static str, ProfileReport)> {
        let echo = || fixtures::profile(&fixtures::epoll_echo());
        let mut full = fixtures::profile(&fixtures::forking_server());
        full.anatomy = Some(fixtures::anatomy());
        full.stacks = Some(fixtures::stacks(1));
        full.caveats.push("a caveat".into());
        let mut failed = echo();
        failed.anatomy_failure = Some("the request anatomy failed".into());
        failed.stacks_failure = Some("perf_event_open: EACCES".into());
        vec![
            ("epoll echo", echo()),
            ("forking server, everything", full),
            ("failures", failed),
            ("untraced", fixtures::untraced(echo())),
            ("under a command", fixtures::under_command(echo())),
        ]
    }

    /// Where each present section's own block starts in `out`, in the
    /// list's order; None when one is missing or out of place.
    fn positions(out: &str, blocks: &[(&str, String)]) -> Result<(), String> {
        let mut from = 0;
        for (name, block) in blocks {
            let Some(at) = out[from..].find(block.as_str()) else {
                return Err(format!("{name} is missing or out of order"));
            };
            from += at + block.len();
        }
        Ok(())
    }

    #[test]
    fn summary_and_page_show_the_present_sections_in_the_list_s_order() {
        let names: Vec<&str> = SECTIONS.iter().map(|s| s.name()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for (what, r) in runs() {
            let summary = text::render(&r);
            let blocks: Vec<(&str, String)> = present(&r)
                .filter_map(|s| Some((s.name(), s.text(&r)?)))
                .collect();
            positions(&summary, &blocks).unwrap_or_else(|e| panic!("{what}, summary: {e}"));
            // Nothing but the sections after the run's first lines.
            let joined = blocks
                .iter()
                .map(|(_, b)| b.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(summary.ends_with(&joined), "{what}");

            let html = page::profile_page(&r);
            let (top, body): (Vec<_>, Vec<_>) = present(&r).partition(|s| s.place() == Place::Top);
            let parts: Vec<(&str, String)> = top
                .into_iter()
                .chain(body)
                .filter_map(|s| Some((s.name(), s.html("", &r)?)))
                .collect();
            positions(&html, &parts).unwrap_or_else(|e| panic!("{what}, page: {e}"));
            assert!(html.contains(&parts.iter().map(|(_, p)| p.as_str()).collect::<String>()));
        }
    }

    #[test]
    fn a_section_the_run_lacks_is_on_neither() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        let gone: Vec<&str> = SECTIONS
            .iter()
            .filter(|s| !s.present(&r))
            .map(|s| s.name())
            .collect();
        for name in ["sweep", "anatomy", "stacks", "caveats", "advice"] {
            assert!(gone.contains(&name), "{name} in {gone:?}");
        }
        let summary = text::render(&r);
        let html = page::profile_page(&r);
        assert!(!summary.contains("Anatomy of a request") && !html.contains("id=\"anatomy\""));
        assert!(!summary.contains("Stacks:") && !html.contains("id=\"stacks\""));
        assert!(!summary.contains("Caveats:") && !html.contains("id=\"caveats\""));
    }
}
