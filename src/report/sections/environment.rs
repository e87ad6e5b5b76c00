//! How the run was measured (the page's record of the build, the machine,
//! the target, the load and the windows; the summary opens with the same
//! facts) and the notes of the load and the tracer.

use super::ProfileSection;
use crate::report::html::{card, environment, list};
use crate::report::profile::ProfileReport;

/// Everything needed to reproduce the run: every run has it.
pub struct Environment;

impl ProfileSection for Environment {
    fn name(&self) -> &'static str {
        "environment"
    }
    fn present(&self, _r: &ProfileReport) -> bool {
        true
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        let mut extra = vec![
            (
                "target".to_string(),
                format!(
                    "{} (pid {}, {}), at {}",
                    r.target
                        .command
                        .as_ref()
                        .map_or_else(|| "attached".into(), shell_words::join),
                    r.target.pid,
                    r.target.comm,
                    r.target.address
                ),
            ),
            ("load".to_string(), r.load_line()),
            (
                "profile command".to_string(),
                shell_words::join(&r.command_line),
            ),
            ("started".to_string(), r.started_at.clone()),
            ("windows".to_string(), r.windows.note.clone()),
        ];
        if let Some(st) = &r.target.stop {
            extra.push(("target stop".to_string(), st.describe()));
        }
        Some(card(
            &format!("{p}environment"),
            "How it was measured",
            "Everything needed to reproduce the run.",
            &environment(&r.header.build, &r.machine, &extra),
        ))
    }
}

/// The notes of the load and the tracer, when they left any.
pub struct Notes;

/// The notes, the load's first.
fn notes(r: &ProfileReport) -> Vec<String> {
    let mut notes: Vec<String> = r.load.iter().flat_map(|l| l.notes.clone()).collect();
    notes.extend(r.trace.iter().flat_map(|t| t.notes.iter().cloned()));
    notes
}

impl ProfileSection for Notes {
    fn name(&self) -> &'static str {
        "notes"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        !notes(r).is_empty()
    }
    fn html(&self, _p: &str, r: &ProfileReport) -> Option<String> {
        Some(format!(
            "<details><summary>Notes from the load and the tracer</summary>{}</details>",
            list(&notes(r), "notes")
        ))
    }
}
