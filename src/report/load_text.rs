//! The load summary for people (neper/netperf style).

use std::fmt::Write as _;

use super::load::{LatencyRecord, LoadReport, UdpResult};
use super::tails;
use super::units::{counted, human_ns};
use crate::stats::LatencySummary;

/// A latency summary: one line of figures, then (where the summary has
/// them) one of its tail percentiles' 95% confidence intervals. A tail
/// percentile that is not meaningful shows as `n/m` in the first and says
/// why in the second.
fn latency_line(label: &str, s: &LatencySummary) -> String {
    let mut out = format!(
        "{label:<13} min {}  mean {}  stddev {}  p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}",
        human_ns(s.min_ns),
        human_ns(s.mean_ns as u64),
        human_ns(s.stddev_ns as u64),
        human_ns(s.p50_ns),
        human_ns(s.p90_ns),
        tails::cell(s.p99_ns, s.p99_ci),
        tails::cell(s.p999_ns, s.p999_ci),
        tails::cell(s.p9999_ns, s.p9999_ci),
        human_ns(s.max_ns)
    );
    if let Some(t) = tails::line(s) {
        out += &format!("\n{:<13} {t}", "");
    }
    out
}

fn record_line(label: &str, r: &Option<LatencyRecord>) -> Option<String> {
    r.as_ref().map(|r| latency_line(label, &r.summary))
}

/// Renders the summary, its control characters written out (a merged or
/// re-read artifact's strings are untrusted; see [`crate::text`]).
pub fn render(rep: &LoadReport) -> String {
    let mut s = String::new();
    title(&mut s, rep);
    match &rep.udp {
        Some(u) => udp_lines(&mut s, rep, u),
        None => tcp_lines(&mut s, rep),
    }
    steps_table(&mut s, rep);
    generator_line(&mut s, rep);
    merged_lines(&mut s, rep);
    for n in &rep.notes {
        let _ = writeln!(s, "note: {n}");
    }
    crate::text::escape_block(&s).into_owned()
}

/// A rate schedule's steps, one row each, and why each flagged step was
/// the generator's limit rather than the target's.
fn steps_table(s: &mut String, rep: &LoadReport) {
    use super::table::{Align, Column, Table};
    let Some(steps) = rep.steps.as_ref().filter(|v| !v.is_empty()) else {
        return;
    };
    let col = |h: &str, w: usize, a: Align| Column::text(h, w, a);
    let mut t = Table {
        columns: vec![
            col("step", 4, Align::Right),
            col("at", 5, Align::Right),
            col("requested/s", 11, Align::Right),
            col("achieved/s", 10, Align::Right),
            col("p50", 7, Align::Right),
            col("p99 (95% interval)", 18, Align::Right),
            col("errors", 6, Align::Right),
            col("", 0, Align::Left),
        ],
        rows: Vec::new(),
    };
    for st in steps {
        let lat = st.latency.as_ref().map(|l| &l.summary);
        let p99 = lat.map_or("-".to_string(), |l| {
            let v = tails::cell(l.p99_ns, l.p99_ci);
            match l.p99_ci.filter(|c| c.meaningful) {
                Some(ci) => format!("{v} ({})", tails::range(&ci)),
                None => v,
            }
        });
        t.rows.push(vec![
            st.index.to_string(),
            format!("{}s", st.start_s),
            format!("{:.0}", st.requested_per_s),
            format!("{:.0}", st.achieved_per_s),
            lat.map_or("-".to_string(), |l| human_ns(l.p50_ns)),
            p99,
            st.errors.total.to_string(),
            if st.generator_limited.is_some() {
                "GENERATOR-LIMITED".into()
            } else {
                String::new()
            },
        ]);
    }
    let _ = writeln!(s, "steps");
    for line in t.to_text().lines() {
        let _ = writeln!(s, "  {}", line.trim_end());
    }
    for st in steps {
        if let Some(why) = &st.generator_limited {
            let _ = writeln!(s, "  step {}: {}", st.index, crate::text::escape(why));
        }
    }
}

/// A merged artifact: its sources, one line each, and how their seconds
/// lined up.
fn merged_lines(s: &mut String, rep: &LoadReport) {
    let Some(m) = &rep.merged else { return };
    let _ = writeln!(
        s,
        "merged        {} generators, seconds aligned within {:.3} ms{}",
        m.sources.len(),
        m.alignment.max_misalignment_ms,
        if m.forced {
            " (--force: different targets)"
        } else {
            ""
        }
    );
    for src in &m.sources {
        let _ = writeln!(
            s,
            "  {}  {}{}  {} transactions in {:.2} s, from second {} ({:+.3} ms)",
            src.file,
            src.started_at,
            src.host
                .as_deref()
                .map_or(String::new(), |h| format!(" on {h}")),
            src.transactions,
            src.duration_s,
            src.offset_s,
            src.misalignment_ms
        );
    }
}

/// The first line: workload, target, shape of the load and its window.
fn title(s: &mut String, rep: &LoadReport) {
    let c = &rep.config;
    let _ = write!(s, "{} {}: ", rep.workload, rep.target);
    if rep.workload == "udp" {
        let _ = write!(s, "{} B datagrams", c.datagram_bytes.unwrap_or(0));
        if let Some(b) = c.burst {
            let _ = write!(s, ", burst of {b}");
        }
        if let Some(r) = c.rate {
            let _ = write!(s, ", {r:.0}/s");
        }
    } else {
        // A connection per transaction (tcp-crr, http --new-connection)
        // records how it closes.
        let threads = counted(c.threads as u64, "thread", "threads");
        if rep.udp_rr.is_some() {
            let _ = write!(
                s,
                "{} ({} answered) on {}",
                if rep.target.starts_with("unix:") {
                    counted(
                        rep.connections.requested as u64,
                        "datagram socket",
                        "datagram sockets",
                    )
                } else {
                    counted(
                        rep.connections.requested as u64,
                        "UDP socket",
                        "UDP sockets",
                    )
                },
                rep.connections.established,
                threads
            );
        } else if rep.workload == "tcp-crr" || c.close.is_some() {
            let _ = write!(
                s,
                "{} ({}) on {}",
                counted(
                    rep.connections.requested as u64,
                    "connect loop",
                    "connect loops"
                ),
                counted(rep.connections.connects, "connect", "connects"),
                threads
            );
        } else {
            let _ = write!(
                s,
                "{} ({} established) on {}",
                counted(
                    rep.connections.requested as u64,
                    "connection",
                    "connections"
                ),
                rep.connections.established,
                threads
            );
            if let Some(max) = c.max_conns {
                let _ = write!(
                    s,
                    ", {} added (--max-conns {max}: every connection was busy when a send was due)",
                    rep.connections.added
                );
            }
        }
        // HTTP/2 names its protocol, and its requests in flight per
        // connection are streams, not a pipeline.
        let http2 = c.workload_options.get("http2");
        if let Some(proto) = http2.and_then(|h| h["protocol"].as_str()) {
            let _ = write!(s, ", {}", crate::text::escape(proto));
        }
        if let Some(p) = c.pipeline.filter(|p| *p > 1) {
            let what = if http2.is_some() {
                "streams"
            } else {
                "pipeline"
            };
            let _ = write!(s, ", {what} {p}");
        }
        if let Some(r) = c.rate {
            let _ = write!(s, ", open loop at {r:.0}/s");
        }
        if let Some(r) = &c.rate_schedule {
            let _ = write!(s, ", open loop on '{r}'");
        }
    }
    let _ = writeln!(
        s,
        ", {:.2} s{}{}",
        rep.duration_s,
        if c.warmup_s > 0.0 {
            format!(" after {:.1} s warm-up", c.warmup_s)
        } else {
            String::new()
        },
        if rep.complete {
            String::new()
        } else {
            format!(" [INCOMPLETE: {}]", incomplete_why(rep))
        }
    );
}

/// Why an incomplete run is incomplete, for its first line: errors over
/// --max-errors name it (the run stopped on them, or went its whole
/// duration and failed on them), not the end reason `duration`.
fn incomplete_why(rep: &LoadReport) -> String {
    let max = rep.config.max_errors;
    match rep.end_reason.as_str() {
        "max_errors" => format!("stopped at errors over --max-errors {max}"),
        "duration" | "count" if rep.errors.total > max => {
            format!("errors over --max-errors {max}")
        }
        r => r.to_string(),
    }
}

/// A UDP run: published, received and lost, the sink's and the kernel's
/// view, one-way latency.
fn udp_lines(s: &mut String, rep: &LoadReport, u: &UdpResult) {
    let _ = writeln!(
        s,
        "published     {}  ({:.0}/s, {} send errors)",
        u.published, rep.rate_per_s, u.send_errors
    );
    match &u.sink {
        Some(k) => {
            // A REPORT that cannot give the loss (impossible, or for a run
            // the sink stopped tracking) is shown as the sink's word, never
            // as a loss of 0.
            match (u.lost, u.loss_ratio) {
                (Some(lost), Some(ratio)) => {
                    let _ = writeln!(
                        s,
                        "received      {}  lost {} ({:.3}%, tail drops included)  interior gaps {}  reordered {}  duplicates {}",
                        k.received,
                        lost,
                        100.0 * ratio,
                        k.interior_gaps,
                        k.reordered,
                        k.duplicates
                    );
                }
                _ => {
                    let _ = writeln!(
                        s,
                        "received      unknown (the sink's report, which cannot give this run's loss, says {})  lost unknown",
                        k.received
                    );
                }
            }
            let _ = writeln!(
                s,
                "sink          rcvbuf granted {} B, jitter {} (RFC 3550)",
                k.rcvbuf_granted,
                human_ns(k.jitter_ns as u64)
            );
            if let Some(d) = u.kernel_rcvbuf_errors_delta {
                let _ = writeln!(
                    s,
                    "kernel        Udp RcvbufErrors +{d} over the run (machine-wide)"
                );
            }
            if let Some(l) = &u.one_way_latency {
                let _ = writeln!(s, "{}", latency_line("one-way", l));
            }
        }
        None => {
            let _ = writeln!(s, "received      unknown: the sink did not report");
        }
    }
}

/// A TCP run: transactions, errors and the latency records.
fn tcp_lines(s: &mut String, rep: &LoadReport) {
    let _ = writeln!(
        s,
        "transactions  {}  ({:.0}/s)  errors {}{}",
        rep.transactions,
        rep.rate_per_s,
        rep.errors.total,
        end_of_run(&rep.errors)
    );
    if !rep.errors.by_class.is_empty() {
        let classes: Vec<String> = rep
            .errors
            .by_class
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "error classes {}", classes.join(", "));
    }
    if let Some(r) = &rep.responses {
        responses_lines(s, r);
    }
    if let Some(u) = &rep.udp_rr {
        udp_rr_line(s, u);
    }
    if let Some(t) = &rep.config.tls {
        tls_line(s, t);
    }
    let corrected = if rep.latency_uncorrected.is_some() {
        "latency*"
    } else {
        "latency"
    };
    for line in [
        record_line(corrected, &rep.latency),
        record_line("uncorrected", &rep.latency_uncorrected),
        record_line("send lag", &rep.send_lag),
        record_line("release lag", &rep.release_lag),
        record_line("conn wait", &rep.conn_wait),
        record_line("connect", &rep.connect_latency),
        record_line("tls handshake", &rep.tls_handshake_latency),
    ]
    .into_iter()
    .flatten()
    {
        let _ = writeln!(s, "{line}");
    }
    if rep.latency_uncorrected.is_some() {
        let _ = writeln!(
            s,
            "              * from the intended send time (coordinated omission corrected); \
             send lag is the generator's own share of it"
        );
    }
}

/// What became of a udp-rr run's requests.
fn udp_rr_line(s: &mut String, u: &crate::report::load::UdpRrResult) {
    let _ = writeln!(
        s,
        "requests      {} sent (id {}): {} answered, {} lost ({:.3}%), {} refused; late replies {}, garbage {}",
        u.requests_sent,
        u.id,
        u.answered,
        u.lost,
        100.0 * u.loss_ratio,
        u.refused,
        u.late_replies,
        u.garbage_replies
    );
}

/// How the run spoke TLS.
fn tls_line(s: &mut String, t: &crate::report::load::TlsConfig) {
    let negotiated = match (&t.protocol_version, &t.cipher_suite) {
        (Some(v), Some(c)) => format!("{v}, {c}"),
        _ => "no handshake completed".into(),
    };
    let _ = writeln!(
        s,
        "tls           {negotiated}; server name {}{}; full handshakes (no resumption)",
        t.server_name,
        if t.insecure {
            ", certificate not checked (--insecure)"
        } else {
            ""
        }
    );
}

/// What a protocol workload's responses said (whole run).
fn responses_lines(s: &mut String, r: &crate::report::load::Responses) {
    let mut line = format!("responses     {} (whole run)", r.answered);
    if !r.by_status.is_empty() {
        let st: Vec<String> = r
            .by_status
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect();
        line += &format!("; status {}", st.join(", "));
    }
    if let (Some(h), Some(m), Some(ratio)) = (r.hits, r.misses, r.hit_ratio) {
        line += &format!("; hits {h}, misses {m} ({:.1}% hit)", 100.0 * ratio);
    }
    if r.reconnects > 0 {
        line += &format!("; {} reconnects after the server closed", r.reconnects);
    }
    let _ = writeln!(s, "{line}");
    if !r.by_command.is_empty() {
        let cmds: Vec<String> = r
            .by_command
            .iter()
            .map(|(k, c)| {
                let mut t = format!("{k} {}", c.answered);
                if c.errors > 0 {
                    t += &format!(" ({} errors)", c.errors);
                }
                if let (Some(h), Some(m)) = (c.hits, c.misses) {
                    t += &format!(" ({h} hits, {m} misses)");
                }
                t
            })
            .collect();
        let _ = writeln!(s, "commands      {}", cmds.join(", "));
    }
}

/// What the load generator itself cost.
fn generator_line(s: &mut String, rep: &LoadReport) {
    let g = &rep.generator;
    let _ = writeln!(
        s,
        "generator     user {:.2} s, system {:.2} s, {:.2} us CPU per {}; busiest thread {:.0}%",
        g.user_cpu_s,
        g.system_cpu_s,
        g.cpu_us_per_transaction,
        if rep.workload == "udp" {
            "datagram"
        } else {
            "transaction"
        },
        100.0 * g.thread_cpu_share.iter().cloned().fold(0.0, f64::max)
    );
}

/// What the end of a tcp run left: answers that came during the drain
/// after the window, and requests never answered.
fn end_of_run(e: &crate::report::load::Errors) -> String {
    let mut parts = Vec::new();
    if e.answered_after_end > 0 {
        parts.push(format!("answered after end: {}", e.answered_after_end));
    }
    if e.unanswered_at_end > 0 {
        parts.push(format!("unanswered at end: {}", e.unanswered_at_end));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("  ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;

    #[test]
    fn a_schedule_prints_its_steps_and_flags_a_generator_limited_one() {
        use crate::report::load::{Step, StepErrors};
        let mut rep = fixtures::profile(&fixtures::epoll_echo()).load.unwrap();
        let h = crate::stats::testing::evenly(3000, 50_000, 20);
        let step = |index: usize, limited: Option<&str>| Step {
            index,
            start_s: 2 * index as u64,
            len_s: 2,
            requested_per_s: 1500.0,
            achieved_per_s: 1499.5,
            transactions: 2999,
            errors: StepErrors::default(),
            latency: Some(LatencyRecord {
                summary: h.summary(),
                hdr_histogram: h.to_v2_base64().unwrap(),
            }),
            send_lag: None,
            busiest_thread_share: None,
            generator_limited: limited.map(String::from),
        };
        rep.config.rate = None;
        rep.config.rate_schedule = Some("1500,1500 every 2s".into());
        rep.steps = Some(vec![step(0, None), step(1, Some("sent\nlate"))]);
        let text = render(&rep);
        assert!(text.contains("open loop on '1500,1500 every 2s'"), "{text}");
        let rows: Vec<&str> = text.lines().skip_while(|l| *l != "steps").collect();
        assert!(rows[1].contains("requested/s") && rows[1].contains("p99 (95% interval)"));
        assert!(rows[2].contains(" 1500 ") && !rows[2].contains("GENERATOR-LIMITED"));
        assert!(rows[3].trim_end().ends_with("GENERATOR-LIMITED"), "{text}");
        let ci = h.summary().p99_ci.unwrap();
        assert!(
            rows[2].contains(&format!("({})", tails::range(&ci))),
            "{text}"
        );
        // The reason is an artifact's string: one line, escaped.
        assert!(rows[4].starts_with("  step 1: sent"), "{text}");
        assert!(!text.lines().any(|l| l == "late"), "{text}");
    }

    #[test]
    fn tail_percentiles_print_with_their_intervals_or_as_not_meaningful() {
        let mut rep = fixtures::profile(&fixtures::epoll_echo()).load.unwrap();
        let h = crate::stats::testing::evenly(3000, 50_000, 20);
        rep.latency = Some(LatencyRecord {
            summary: h.summary(),
            hdr_histogram: h.to_v2_base64().unwrap(),
        });
        let text = render(&rep);
        let mut lines = text.lines().skip_while(|l| !l.starts_with("latency "));
        let first = lines.next().expect(&text);
        assert!(first.contains("  p99.9 n/m  p99.99 n/m  max "), "{first}");
        let ci = rep.latency.as_ref().unwrap().summary.p99_ci.unwrap();
        let second = lines.next().unwrap();
        assert_eq!(
            second,
            format!(
                "{:<13} p99 {} (95% CI {}, {} beyond); p99.9: not meaningful from 3,000 \
                 samples (3 expected beyond it); p99.99: not meaningful from 3,000 samples \
                 (0.3 expected beyond it)",
                "",
                human_ns(rep.latency.as_ref().unwrap().summary.p99_ns),
                tails::range(&ci),
                ci.beyond
            )
        );
        // A record without intervals (its histogram unreadable) prints
        // the figures alone, as before.
        rep.latency.as_mut().unwrap().summary.p99_ci = None;
        rep.latency.as_mut().unwrap().summary.p999_ci = None;
        rep.latency.as_mut().unwrap().summary.p9999_ci = None;
        let text = render(&rep);
        let mut lines = text.lines().skip_while(|l| !l.starts_with("latency "));
        assert!(!lines.next().unwrap().contains("n/m"));
        assert!(!lines.next().unwrap_or("").contains("95% CI"), "{text}");
    }
}
