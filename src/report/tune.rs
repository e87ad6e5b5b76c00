//! The tuning audit's rows (`sockscope tune`, and a profile's `advice`):
//! one kernel or process setting, its value, what a server of the chosen
//! kind wants, why, and the evidence of a run that makes it matter.

use serde::{Deserialize, Serialize};

/// One audited setting.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AuditRow {
    /// The setting: a sysctl name (`net.core.somaxconn`) or a descriptive
    /// name (`RLIMIT_NOFILE (soft)`, `cpufreq governor`).
    pub setting: String,
    /// Its value now ("4096", "4096 16384 4194304", "?" when unreadable).
    pub current: String,
    /// What the goal wants ("4096", ">= 65535", "performance").
    pub advised: String,
    /// Whether the current value already meets it.
    pub ok: bool,
    /// Why, in one line.
    pub why: String,
    /// The run's evidence that makes this row matter, quoting the counter
    /// ("TcpExt.ListenOverflows +1,204 during the run"); None in a plain
    /// audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The sysctl.d line that applies `advised` (None when the setting is
    /// not a sysctl, or nothing needs to change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysctl: Option<String>,
}

use super::table::{Align, Column, Table};

/// The audit as one table, for the terminal and the page: setting,
/// current, advised, whether it meets it, why (and the evidence, when a
/// run supports the row).
pub fn table(rows: &[AuditRow]) -> Table {
    Table {
        columns: vec![
            Column::both("setting", "setting", 28, Align::Left),
            Column::both("current", "current", 12, Align::Left),
            Column::both("advised", "advised", 12, Align::Left),
            Column::both("", "", 4, Align::Left),
            Column::both("why", "why", 0, Align::Left),
        ],
        rows: rows
            .iter()
            .map(|r| {
                let why = match &r.evidence {
                    Some(e) => format!("{} [{e}]", r.why),
                    None => r.why.clone(),
                };
                vec![
                    r.setting.clone(),
                    r.current.clone(),
                    r.advised.clone(),
                    if r.ok { "ok" } else { "CHANGE" }.into(),
                    why,
                ]
            })
            .collect(),
    }
}
