//! The request anatomy's commands (RESP, memcached, PostgreSQL, HTTP/1, DNS): one row per port,
//! protocol and command name, in the summary and on the page
//! (report/commands.rs has the figures and their text).

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::units::human_ns;

/// The per-command table, when the anatomy counted commands.
pub struct Commands;

impl ProfileSection for Commands {
    fn name(&self) -> &'static str {
        "commands"
    }
    fn present(&self, r: &ProfileReport) -> bool {
        r.anatomy.as_ref().is_some_and(|a| a.requests.is_some())
    }
    fn text(&self, r: &ProfileReport) -> Option<String> {
        let t = r.anatomy.as_ref()?.commands_text()?;
        let mut s = String::new();
        for l in t.lines() {
            let _ = writeln!(s, "{l}");
        }
        Some(s)
    }
    fn html(&self, p: &str, r: &ProfileReport) -> Option<String> {
        let a = r.anatomy.as_ref()?;
        let requests = a.requests?;
        let status = a.endpoints.iter().any(|e| e.status.is_some());
        let rows: Vec<Vec<String>> = a
            .endpoints
            .iter()
            .map(|e| {
                let timed = |ns| {
                    if e.turns == 0 {
                        "-".to_string()
                    } else {
                        human_ns(ns)
                    }
                };
                let mut row = vec![
                    e.label(),
                    crate::text::escape(&e.name).into_owned(),
                    e.count.to_string(),
                    format!("{:.0}", e.rate_per_s),
                    e.batched.to_string(),
                    e.noreply.to_string(),
                    timed(e.server_p50_ns),
                    timed(e.server_p90_ns),
                    timed(e.server_p99_ns),
                    timed(e.server_p999_ns),
                ];
                if status {
                    match e.status {
                        Some(s) => {
                            row.extend([s.s2xx, s.s3xx, s.s4xx, s.s5xx].map(|n| n.to_string()))
                        }
                        None => row.extend(["-", "-", "-", "-"].map(String::from)),
                    }
                }
                row
            })
            .collect();
        let mut head = vec![
            "endpoint", "command", "count", "/s", "batched", "noreply", "p50", "p90", "p99",
            "p99.9",
        ];
        let mut numeric = vec![2, 3, 4, 5, 6, 7, 8, 9];
        if status {
            head.extend(["2xx", "3xx", "4xx", "5xx"]);
            numeric.extend([10, 11, 12, 13]);
        }
        let slowest = crate::report::commands::slowest_line(&a.endpoints)
            .map(|l| format!(" The {l}."))
            .unwrap_or_default();
        let lead = format!(
            "The requests as commands, found in the bytes the target read ({}): {requests} \
             commands in {} turns. A pipelined batch is one turn: each of its commands is \
             counted, and its server time (p50, p99 of the turns filed under the command's \
             name, a turn going under its first command) is the batch's. A memcached command \
             sent with noreply gets no response: it is counted, never timed. An HTTP/1 request is \
             named by its method and route template (numbers and ids folded to {{id}}; no query \
             or header value is kept) and its response's status class is counted.{slowest}",
            crate::report::commands::protocols(&a.protocol_counts()),
            crate::report::commands::command_turns(&a.protocol_counts())
        );
        Some(card(
            &format!("{p}commands"),
            "Requests by command",
            &lead,
            &table(&head, &rows, &numeric),
        ))
    }
}
