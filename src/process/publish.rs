//! Publishing an artifact, the last step of profile, bench, demo and
//! report: its JSON, summary.txt, report.html and its other files (a
//! profile's folded stacks) are written, put in place,
//! and the summary and the page's path printed. One function, so the four
//! commands write the same files the same way.

use std::path::PathBuf;

use anyhow::Result;

use super::staging::Staging;
use crate::report::artifact::{Artifact, PAGE_FILE, SUMMARY_FILE};

/// Where [`publish`] writes.
pub enum Dest {
    /// A new artifact directory written as a set (profile, bench, demo):
    /// the JSON, summary, page and other files go into the staging
    /// directory, which
    /// takes the destination's place once all are written.
    Staged(Staging),
    /// An existing directory (`sockscope report`): the summary, page and
    /// other files are replaced there as a set (all written, then all
    /// renamed); the
    /// JSON is the file they were rendered from, left as it is.
    Existing {
        /// The directory.
        dir: PathBuf,
        /// How a refusal names it: `--out` when the user gave one, else
        /// where it came from (the artifact's own directory).
        named: String,
    },
}

/// What to print on stdout once the artifact is in place.
#[derive(Clone, Copy, Debug)]
pub struct Show {
    /// The summary: its brief form when the artifact has one (with where
    /// the whole one is), else as in summary.txt.
    pub summary: bool,
    /// The whole summary even when the artifact has a brief form
    /// (`--verbose`).
    pub whole: bool,
    /// `report: DIR/report.html`.
    pub path: bool,
}

impl Show {
    /// The summary unless `quiet`, and the page's path always (profile,
    /// report: a quiet run still says where its report went).
    pub fn unless_quiet(quiet: bool) -> Self {
        Show {
            summary: !quiet,
            whole: false,
            path: true,
        }
    }

    /// As [`Show::unless_quiet`], the whole summary when `verbose`.
    pub fn for_terminal(quiet: bool, verbose: bool) -> Self {
        Show {
            whole: verbose,
            ..Self::unless_quiet(quiet)
        }
    }
}

/// Writes `art` into `dest`, puts it in place and prints what `show` asks
/// for. Returns the artifact directory.
pub fn publish(art: &dyn Artifact, dest: Dest, show: Show) -> Result<PathBuf> {
    // An artifact given to `report` may carry escape sequences in any
    // string: summary.txt and the terminal get them written out.
    let summary = crate::text::escape_block(&art.summary()).into_owned();
    let dir = match dest {
        Dest::Staged(staging) => {
            staging.write(art.json_name(), &art.json()?)?;
            staging.write(SUMMARY_FILE, summary.as_bytes())?;
            staging.write(PAGE_FILE, art.page().as_bytes())?;
            for (name, bytes) in art.files() {
                staging.write(name, &bytes)?;
            }
            staging.commit()?
        }
        Dest::Existing { dir, named } => {
            let page = art.page();
            let mut set = vec![
                (dir.join(SUMMARY_FILE), summary.as_bytes().to_vec()),
                (dir.join(PAGE_FILE), page.into_bytes()),
            ];
            set.extend(art.files().into_iter().map(|(n, b)| (dir.join(n), b)));
            // All refused before any is written, all written before any
            // is renamed into place: a failure (a full disk) leaves the old
            // set, never a new summary beside an old page.
            for (path, _) in &set {
                crate::output::check(path, &named)?;
            }
            let refs: Vec<(&std::path::Path, &[u8])> = set
                .iter()
                .map(|(p, b)| (p.as_path(), b.as_slice()))
                .collect();
            crate::output::write_set(&refs)?;
            dir
        }
    };
    // The files are in place: a closed or full stdout now fails the
    // command (exit 1) without losing them.
    let mut shown = String::new();
    match art.brief().filter(|_| show.summary && !show.whole) {
        Some(brief) => {
            shown.push_str(&crate::text::escape_block(&brief));
            shown.push_str(&format!(
                "\nsummary: {} (all of it; --verbose prints it here)\n",
                dir.join(SUMMARY_FILE).display()
            ));
        }
        None if show.summary => shown.push_str(&summary),
        None => {}
    }
    if show.path {
        shown.push_str(&format!("report: {}\n", dir.join(PAGE_FILE).display()));
    }
    crate::output::print(shown.as_bytes(), "the summary")?;
    Ok(dir)
}
