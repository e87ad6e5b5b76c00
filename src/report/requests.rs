//! The `sockscope.requests` artifact: what `trace --requests-only` wrote
//! (the request anatomy alone, with no syscall trace), and its text.

use serde::{Deserialize, Serialize};

use super::anatomy::AnatomyReport;
use super::header::ArtifactHeader;
use super::trace::{Target, Window};

/// Schema name of this artifact.
pub const SCHEMA: &str = "sockscope.requests";
/// Its version.
pub const SCHEMA_VERSION: u32 = super::header::CURRENT;

/// The target's CPU time over the window, and where it was read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TargetCpu {
    /// `cgroup cpu.stat` (a cgroup's usage_usec: exited tasks included)
    /// or `/proc stat` (user + system of the processes seen at the start
    /// or the end of the window: one that exited inside it is missing).
    pub source: String,
    /// Seconds of CPU, when they could be read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu_s: Option<f64>,
}

/// `trace --requests-only`'s result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RequestsReport {
    /// Schema, version, build.
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// What was followed (mode `attach`, or a scope).
    pub target: Target,
    /// The window.
    pub window: Window,
    /// The target's CPU over the window (the cost's share is of it).
    pub target_cpu: TargetCpu,
    /// Caveats a reader needs to interpret the figures.
    pub notes: Vec<String>,
    /// The request anatomy.
    pub anatomy: AnatomyReport,
}

/// What was followed, as the head line names it ("pid 12 (nginx)",
/// "cgroup system.slice/x.service"); the name is as recorded, for the
/// caller to escape.
pub fn who(r: &RequestsReport) -> String {
    match &r.target.scope {
        Some(s) => format!("{} {}", s.kind, r.target.comm),
        None => format!("pid {} ({})", r.target.pid, r.target.comm),
    }
}

/// The text: a head line naming the target and the window, the anatomy's
/// table, and the notes.
pub fn render(r: &RequestsReport) -> String {
    let who = crate::text::escape(&who(r)).into_owned();
    let mut out = format!(
        "sockscope trace --requests-only: {who}, {:.2} s, ended by {}\n",
        r.window.duration_s,
        r.window.end_reason.replace('_', " ")
    );
    out.push_str(&super::anatomy::render(&r.anatomy));
    if let Some(t) = r.anatomy.commands_text() {
        out.push_str(&t);
    }
    for n in &r.notes {
        out.push_str(&format!("note: {}\n", crate::text::escape(n)));
    }
    out
}
