//! The request anatomy's commands (RESP, memcached, PostgreSQL, HTTP/1, DNS, HTTP/2, gRPC): one row per port,
//! protocol and command name, in the summary and on the page
//! (report/commands.rs has the figures and their text).

use std::fmt::Write as _;

use super::ProfileSection;
use crate::report::html::{card, table};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, StackChart};
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
        let grpc = a
            .endpoints
            .iter()
            .any(|e| e.grpc_status.is_some() || e.rcode.is_some());
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
                if grpc {
                    row.push(
                        crate::report::commands::endpoint_codes_text(e)
                            .unwrap_or_else(|| "-".to_string()),
                    );
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
        if grpc {
            head.push("codes (gRPC status, DNS RCODE)");
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
             or header value is kept) and its response's status class is counted; an HTTP/2 \
             stream is named and counted the same way, a gRPC call by its method's path, with \
             the grpc-status it ended with.{slowest}",
            crate::report::commands::protocols(&a.protocol_counts()),
            crate::report::commands::command_turns(&a.protocol_counts())
        );
        let mut inner = table(&head, &rows, &numeric);
        inner.push_str(&tails(p, &a.endpoints));
        Some(card(
            &format!("{p}commands"),
            "Requests by command",
            &lead,
            &inner,
        ))
    }
}

/// Endpoints whose p99 turns are drawn, slowest first.
const TAIL_BARS: usize = 12;

/// One stacked bar per endpoint (the slowest at p99 first): what its
/// turns at its own p99 of server time were made of. Nothing when no
/// endpoint has a composition.
fn tails(p: &str, endpoints: &[crate::report::commands::Endpoint]) -> String {
    let mut timed: Vec<_> = endpoints
        .iter()
        .filter_map(|e| Some((e, e.composition("p99")?)))
        .collect();
    if timed.is_empty() {
        return String::new();
    }
    timed.sort_by_key(|(e, _)| std::cmp::Reverse(e.server_p99_ns));
    let rows = timed
        .iter()
        .take(TAIL_BARS)
        .map(|(e, c)| {
            let label = format!("{} {}", crate::text::escape(&e.name), e.label());
            (label, c.parts().iter().map(|(_, ns)| *ns as f64).collect())
        })
        .collect();
    svg::stack_chart(&StackChart {
        id: &format!("{p}chart-endpoint-tails"),
        title: "What each endpoint's turns at its p99 of server time were made of (the turns \
                within the same power of two as its p99)",
        x_label: "time at the server",
        parts: ["queue wait", "CPU wait", "service", "send"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows,
        fmt: crate::report::units::fmt_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::commands::{Endpoint, StatusClasses};
    use crate::report::fixtures;

    #[test]
    fn grpc_rows_show_their_status_codes_on_the_page() {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        let mut a = fixtures::anatomy();
        a.requests = Some(12);
        a.endpoints = vec![
            Endpoint {
                port: 50051,
                transport: "tcp".into(),
                protocol: "grpc".into(),
                name: "/helloworld.Greeter/SayHello".into(),
                count: 10,
                status: Some(StatusClasses::from_counts([10, 0, 0, 0])),
                errors: Some(2),
                grpc_status: Some([("OK".into(), 8), ("NOT_FOUND".into(), 2)].into()),
                ..Endpoint::default()
            },
            Endpoint {
                port: 8080,
                transport: "tcp".into(),
                protocol: "http2".into(),
                name: "GET /a/{id}".into(),
                count: 2,
                status: Some(StatusClasses::from_counts([2, 0, 0, 0])),
                ..Endpoint::default()
            },
        ];
        r.anatomy = Some(a);
        let html = Commands.html("", &r).unwrap();
        assert!(html.contains("gRPC status"), "{html}");
        assert!(html.contains("OK 8, NOT_FOUND 2"), "{html}");
        let text = Commands.text(&r).unwrap();
        assert!(
            text.contains(
                "gRPC status of /helloworld.Greeter/SayHello on tcp/50051: OK 8, NOT_FOUND 2"
            ),
            "{text}"
        );
    }
}
