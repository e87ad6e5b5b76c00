//! `trace --stacks-only`'s artifact (`sockscope.stacks`): the sampled
//! stacks of a process tree or a scope with no syscall tracer beside them
//! (the cheapest way to see where a production service's CPU goes), the
//! window and the target's CPU the cost is put against.

use serde::{Deserialize, Serialize};

use super::header::ArtifactHeader;
use super::requests::TargetCpu;
use super::stacks::StacksReport;
use super::trace::{Target, Window};

/// The schema name.
pub const SCHEMA: &str = "sockscope.stacks";
/// Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// `trace --stacks-only`'s result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StacksOnlyReport {
    /// Schema, version, build.
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// What was sampled (mode `attach`, or a scope).
    pub target: Target,
    /// The window.
    pub window: Window,
    /// The target's CPU over the window (the cost's share is of it).
    pub target_cpu: TargetCpu,
    /// Caveats a reader needs to interpret the figures.
    pub notes: Vec<String>,
    /// The stacks.
    pub stacks: StacksReport,
}

/// The text: a head line naming the target and the window, the stacks'
/// tables, and the notes.
pub fn render(r: &StacksOnlyReport) -> String {
    let who = match &r.target.scope {
        Some(s) => format!("{} {}", s.kind, r.target.comm),
        None => format!("pid {} ({})", r.target.pid, r.target.comm),
    };
    let mut out = format!(
        "sockscope stacks: {} for {:.1} s ({})\n\n",
        crate::text::escape(&who),
        r.window.duration_s,
        r.window.end_reason.replace('_', " ")
    );
    out.push_str(&super::stacks_text::render(&r.stacks));
    for n in &r.notes {
        out.push_str(&format!("note: {}\n", crate::text::escape(n)));
    }
    out
}
