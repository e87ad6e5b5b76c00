//! The report of a finished TCP run, from what its workers measured
//! ([`Merged`] by `engine`, over the measured [`Window`]) and what the
//! watch saw: why the run ended and whether it counts as failed
//! (`verdict`), its caveats, the latency records, per-response counts
//! (statuses, commands, hits) and udp-rr's request accounting. The two
//! input types live here, not in `engine`, so imports point one way:
//! `engine` -> `tcp_report` -> `watch`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use anyhow::Result;

use crate::load::driver::WorkerEnd;
use crate::load::driver::plan::{Stop, TcpPlan};
use crate::load::driver::tally::{self, WorkerTally};
use crate::load::driver::watch::Watched;
use crate::load::workload::ErrorClass;
use crate::report::load::{
    Bytes, CommandCounts, Connections, Errors, Generator, Interval, LatencyRecord, LoadConfig,
    LoadReport, Responses, SCHEMA, SCHEMA_VERSION, UdpRrResult, seal_intervals,
};
use crate::stats::LatencyHist;

/// What a failure says when no error was counted and nothing else
/// explains it; callers that know more (an emulated path) replace it.
pub const NOTHING_REPORTED: &str = "no error reported";

/// The measured window on the run clock.
#[derive(Clone, Copy, Debug)]
pub(in crate::load) struct Window {
    /// Its start (after the warm-up), ns.
    pub(in crate::load) measure_from: u64,
    /// Its end in duration mode, ns.
    pub(in crate::load) end: Option<u64>,
}

impl Window {
    /// The window of `plan`: after its warm-up, for its duration (none in
    /// count mode).
    pub(in crate::load) fn of(plan: &TcpPlan) -> Self {
        let measure_from = plan.warmup.as_nanos() as u64;
        Self {
            measure_from,
            end: match plan.stop {
                Stop::Duration(d) => Some(measure_from + d.as_nanos() as u64),
                Stop::Count(_) => None,
            },
        }
    }
}

/// What the workers measured, merged, and what the run cost.
pub(in crate::load) struct Merged {
    /// The workers' tallies, merged.
    pub(in crate::load) tally: WorkerTally,
    /// What each worker reported besides its tally.
    pub(in crate::load) ends: Vec<WorkerEnd>,
    /// Each worker thread's busy share (CPU / wall).
    pub(in crate::load) shares: Vec<f64>,
    /// When the last worker stopped, on the run clock.
    pub(in crate::load) stopped_at: u64,
    /// The whole process's (user, system) CPU over the run, s.
    pub(in crate::load) cpu_s: (f64, f64),
}

/// Why the run ended (`end_reason`) and, when it counts as failed, why.
fn verdict(
    plan: &TcpPlan,
    m: &Merged,
    watched: &Watched,
    max_errors: u64,
) -> (String, Option<String>) {
    let t = &m.tally;
    let established: u64 = m.ends.iter().map(|e| e.established as u64).sum();
    let stalled = m.ends.iter().any(|e| e.stalled);
    let idle_why = m.ends.iter().find_map(|e| e.idle_why);
    // The error classes, and what kept the connections from sending
    // (their timeouts alone would not say).
    let classes_why = || match (error_classes(&t.errors), idle_why) {
        (Some(c), Some(w)) => Some(format!("{c}; {w}")),
        (c, w) => c.or_else(|| w.map(String::from)),
    };
    let errors_total = t.error_count();
    let end_reason = if let Some(sig) = &watched.interrupted {
        format!("signal:{sig}")
    } else if watched.aborted {
        "aborted".to_string()
    } else if stalled {
        "stalled".to_string()
    } else {
        match plan.stop {
            Stop::Duration(_) => "duration".into(),
            Stop::Count(_) => "count".into(),
        }
    };
    // A TLS failure says why (an untrusted certificate, a name mismatch),
    // not only how often.
    let tls_why = t
        .tls_error
        .as_ref()
        .map_or_else(String::new, |e| format!("; first TLS error: {e}"));
    let failure = if established == 0 && plan.mode.datagram() {
        Some(no_valid_reply(plan, m) + &socket_type_hint(plan, t))
    } else if established == 0 {
        let handshaking: usize = m.ends.iter().map(|e| e.handshaking).sum();
        let why = error_classes(&t.errors).unwrap_or_else(|| {
            if handshaking > 0 {
                // Connected, and the server never finished its side.
                format!(
                    "the TLS handshake did not complete within {:.1} s",
                    m.stopped_at as f64 / 1e9
                )
            } else {
                NOTHING_REPORTED.into()
            }
        });
        let on_connect_why = t.on_connect_error.as_ref().map_or_else(String::new, |e| {
            format!("; the server refused the on-connect step: {e}")
        });
        Some(format!(
            "no connection to {} could be established ({why}){tls_why}{on_connect_why}{}",
            plan.addr,
            socket_type_hint(plan, t),
        ))
    } else if let Some(sig) = &watched.interrupted {
        Some(format!(
            "interrupted by {sig}; the figures cover the run until then"
        ))
    } else if watched.aborted {
        Some("aborted by its caller; the figures cover the run until then".into())
    } else if stalled {
        // Name what went wrong meanwhile (a server answering garbage
        // stalls a count run too: every response fails).
        let classes = classes_why().map_or(String::new(), |c| format!(" ({c})"));
        Some(format!(
            "no transaction completed for {:.1} s: the target stalled before the count was \
             reached{classes}",
            2.0 * plan.timeout.as_secs_f64()
        ))
    } else if errors_total > max_errors {
        Some(format!(
            "{errors_total} errors, more than --max-errors {max_errors} ({}){tls_why}",
            classes_why().unwrap_or_default()
        ))
    } else if t.transactions == 0 && t.failed_answers == 0 {
        // Whole responses in the window that were failed requests (HTTP
        // 404s within --max-errors) show the target answering: not a run
        // that did nothing. Errors within --max-errors say why, else
        // what kept the connections from sending.
        let classes = classes_why().map_or(String::new(), |c| format!(" ({c})"));
        Some(format!(
            "no transaction completed in the measured window{classes}"
        ))
    } else {
        None
    };
    (end_reason, failure)
}

/// What `wrong_socket_type` errors mean here, when there were any: the
/// socket at the address is a datagram socket and the load speaks a
/// stream, or the reverse.
fn socket_type_hint(plan: &TcpPlan, t: &WorkerTally) -> String {
    if !t.errors.contains_key(&ErrorClass::SocketType) {
        return String::new();
    }
    if plan.mode.datagram() {
        format!(
            "; the socket at {} is a stream socket, and this load sends datagrams: load it \
             with a stream workload (tcp-rr, http, redis...)",
            plan.addr
        )
    } else {
        format!(
            "; the socket at {} is a datagram socket (SOCK_DGRAM), and this load speaks a \
             stream: load it with udp-rr",
            plan.addr
        )
    }
}

/// Why a datagram run with no answered socket failed: replies that came
/// but were not valid (mismatched, malformed, late, naming no request)
/// say so, apart from requests that got no reply at all.
fn no_valid_reply(plan: &TcpPlan, m: &Merged) -> String {
    let mut c = crate::load::driver::DatagramCounts::default();
    for e in &m.ends {
        c.add(&e.datagrams);
    }
    let (replies, others): (BTreeMap<_, _>, BTreeMap<_, _>) = m
        .tally
        .errors
        .iter()
        .map(|(k, v)| (*k, *v))
        .partition(|(k, _)| k.judges_a_reply());
    let mut invalid: Vec<String> = error_classes(&replies).into_iter().collect();
    for (n, what) in [(c.late, "late"), (c.garbage, "garbage")] {
        if n > 0 {
            invalid.push(format!("{what} x{n}"));
        }
    }
    if invalid.is_empty() {
        return format!(
            "no reply from {} on any socket ({})",
            plan.addr,
            error_classes(&others).unwrap_or_else(|| NOTHING_REPORTED.into())
        );
    }
    let also = error_classes(&others).map_or(String::new(), |o| format!("; also {o}"));
    format!(
        "replies came from {} but none was valid: {}{also}",
        plan.addr,
        invalid.join(", ")
    )
}

/// True when a worker thread was busy enough to be the bottleneck.
fn saturated_any(m: &Merged) -> bool {
    m.shares
        .iter()
        .any(|s| *s >= crate::load::schedule::limited::BUSY_SHARE)
}

/// Connections spread over several 127.x source addresses that mostly
/// failed right after connect (short reads, resets, closes): servers that
/// admit 127.0.0.1 only (PostgreSQL's stock pg_hba.conf) look like that,
/// so the run says so instead of leaving a bare `short_read`.
/// Why a stream run whose connections were established got no response at
/// all and only timed out: the server never answered a request of this
/// size, most often because it waits for more bytes than the load sends
/// (an echo server framing 100-byte requests, a load sending 1 byte).
/// "ETIMEDOUT x16" alone would not say that.
fn never_answered(plan: &TcpPlan, m: &Merged, request_bytes: Option<usize>) -> Option<String> {
    let t = &m.tally;
    let established: u64 = m.ends.iter().map(|e| e.established as u64).sum();
    let only_timeouts = !t.errors.is_empty() && t.errors.keys().all(|k| *k == ErrorClass::TimedOut);
    if plan.mode.datagram()
        || established == 0
        || t.transactions > 0
        || t.failed_answers > 0
        || !only_timeouts
    {
        return None;
    }
    let size = request_bytes.map_or_else(
        || "its request".to_string(),
        |n| format!("a request of {n} byte{}", if n == 1 { "" } else { "s" }),
    );
    Some(format!(
        "the server never answered {size} within --timeout {:.1} s: does it expect requests of \
         another size (`serve echo --req-size` must match the load's --req)?",
        plan.timeout.as_secs_f64()
    ))
}

fn source_hint(plan: &TcpPlan, t: &WorkerTally) -> Option<String> {
    if plan.sources.len() < 2 {
        return None;
    }
    let class = |k: ErrorClass| t.errors.get(&k).copied().unwrap_or(0);
    let dropped =
        class(ErrorClass::ShortRead) + class(ErrorClass::Reset) + class(ErrorClass::Closed);
    // Most: more dropped connections than completed transactions.
    (dropped > 0 && dropped > t.transactions).then(|| {
        format!(
            "{dropped} connections were dropped right after connect, from {} source addresses: \
             the server may refuse source addresses other than 127.0.0.1: try --source-ips 1",
            plan.sources.len()
        )
    })
}

/// The caveats of a run: a target behind --rate, a saturated generator,
/// shared CPUs.
fn notes(m: &Merged, saturated: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let overflow: u64 = m.ends.iter().map(|e| e.backlog_overflow).sum();
    let backlog_left: u64 = m.ends.iter().map(|e| e.backlog_at_end).sum();
    if overflow > 0 || backlog_left > 0 {
        notes.push(format!(
            "the target could not keep up with --rate: {backlog_left} intended requests were \
             still waiting for a connection at the end and {overflow} were dropped from a full \
             backlog (the latency of those never sent is not in the histogram)"
        ));
    }
    if saturated {
        let busiest = m.shares.iter().cloned().fold(0.0, f64::max);
        notes.push(format!(
            "a load worker thread was busy {:.0}% of the time: the generator itself may have \
             been the bottleneck (try more -t threads, or compare with a lighter load)",
            busiest * 100.0
        ));
    }
    if let Some(e) = &m.tally.tls_error {
        notes.push(format!("first TLS error: {e}"));
    }
    if let Some(e) = &m.tally.on_connect_error {
        notes.push(format!("the server refused the on-connect step: {e}"));
    }
    notes.push(
        "loopback or single-host figures include the generator and the target sharing CPUs".into(),
    );
    notes
}

/// The report of a finished run and, when it counts as failed, why.
pub(in crate::load) fn report(
    plan: &TcpPlan,
    config: LoadConfig,
    started_at: SystemTime,
    window: Window,
    m: &Merged,
    watched: Watched,
    max_errors: u64,
) -> Result<(LoadReport, Option<String>)> {
    let (end_reason, mut failure) = verdict(plan, m, &watched, max_errors);
    let t = &m.tally;
    let mut notes = notes(m, saturated_any(m));
    if let Some(hint) = source_hint(plan, t) {
        failure = failure.map(|f| format!("{f}; {hint}"));
        notes.insert(0, hint);
    }
    if let Some(why) = never_answered(plan, m, config.request_bytes) {
        failure = failure.map(|f| format!("{f}; {why}"));
    }
    let mut config = config;
    if let (Some(c), Some(n)) = (config.tls.as_mut(), t.tls_negotiated) {
        c.protocol_version = Some(n.version.into());
        c.cipher_suite = Some(n.cipher_suite.into());
    }
    let measure_from = window.measure_from;
    // Until the last worker stopped, not until the watching thread noticed
    // (up to one poll period later: a 50 ms count run read as 100 ms).
    let measured_ns = match plan.stop {
        Stop::Duration(_) => m
            .stopped_at
            .saturating_sub(measure_from)
            .min(window.end.unwrap_or(u64::MAX) - measure_from),
        Stop::Count(_) => m.stopped_at.saturating_sub(measure_from),
    };
    let duration_s = measured_ns as f64 / 1e9;
    let (user, system) = m.cpu_s;
    let all_tx = t.transactions + t.warmup_transactions;
    let saturated = saturated_any(m);
    let steps = match &plan.rate {
        Some(p) => crate::load::driver::steps::assemble(p, &watched.intervals)?,
        None => None,
    };
    let report = LoadReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        workload: plan.workload.into(),
        target: plan.target.clone().unwrap_or_else(|| plan.addr.to_string()),
        config,
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        started_at_unix_ns: Some(crate::report::load::unix_ns(started_at)),
        start_at: None,
        host: crate::report::load::host_name(),
        full_log: None,
        merged: None,
        duration_s,
        complete: failure.is_none(),
        end_reason,
        connections: Connections {
            requested: plan.connections,
            established: m.ends.iter().map(|e| e.established as u64).sum(),
            connects: t.connects,
            added: m.ends.iter().map(|e| e.added as u64).sum(),
        },
        transactions: t.transactions,
        warmup_transactions: t.warmup_transactions,
        rate_per_s: if duration_s > 0.0 {
            t.transactions as f64 / duration_s
        } else {
            0.0
        },
        latency: record(&t.latency)?,
        latency_uncorrected: t.uncorrected.as_ref().map(record).transpose()?.flatten(),
        send_lag: t.send_lag.as_ref().map(record).transpose()?.flatten(),
        release_lag: t.release_lag.as_ref().map(record).transpose()?.flatten(),
        conn_wait: t.conn_wait.as_ref().map(record).transpose()?.flatten(),
        connect_latency: t.connect.as_ref().map(record).transpose()?.flatten(),
        tls_handshake_latency: t.tls_handshake.as_ref().map(record).transpose()?.flatten(),
        errors: Errors {
            total: t.error_count(),
            by_class: t
                .errors
                .iter()
                .map(|(k, v)| (k.name().to_string(), *v))
                .collect(),
            unanswered_at_end: m.ends.iter().map(|e| e.unanswered).sum(),
            answered_after_end: t.answered_after_end,
        },
        intervals: seal_intervals(
            watched
                .intervals
                .into_iter()
                .map(|(s, sec)| (s, sec.transactions, sec.errors, sec.hist))
                .map(|(s, tx, er, h)| Interval {
                    t_s: s,
                    transactions: tx,
                    errors: er,
                    // A second with errors only has no latency to show.
                    p50_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.5)),
                    p99_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.99)),
                    max_ns: (!h.is_empty()).then(|| h.max()),
                    ..Interval::empty(s)
                })
                .collect(),
            // Until the last worker stopped: everything the workers
            // recorded.
            m.stopped_at.saturating_sub(measure_from) as f64 / 1e9,
        ),
        steps,
        bytes: Bytes {
            sent: t.bytes_sent,
            received: t.bytes_received,
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: Generator::cpu_us_per(user, system, all_tx),
            thread_cpu_share: m.shares.clone(),
            saturated,
        },
        responses: None,
        udp: None,
        udp_rr: None,
        notes,
        path: None,
    };
    Ok((report, failure))
}

/// The report's `responses` from the merged tally; `ops` names the
/// operations `Outcome::op` indexes, `status_name` the statuses.
pub(in crate::load) fn responses(
    r: &tally::ResponseTally,
    ops: &[String],
    status_name: impl Fn(u16) -> std::borrow::Cow<'static, str>,
) -> Responses {
    let by_command = r
        .by_op
        .iter()
        .enumerate()
        .filter(|(_, t)| t.answered > 0)
        .filter_map(|(i, t)| {
            let name = ops.get(i)?;
            let lookups = t.hits + t.misses > 0;
            Some((
                name.clone(),
                CommandCounts {
                    answered: t.answered,
                    errors: t.errors,
                    hits: lookups.then_some(t.hits),
                    misses: lookups.then_some(t.misses),
                },
            ))
        })
        .collect();
    let hits: u64 = r.by_op.iter().map(|t| t.hits).sum();
    let misses: u64 = r.by_op.iter().map(|t| t.misses).sum();
    let lookups = hits + misses > 0;
    Responses {
        answered: r.answered,
        by_status: r
            .by_status
            .iter()
            .map(|(c, n)| (status_name(*c).into_owned(), *n))
            .collect(),
        by_command,
        hits: lookups.then_some(hits),
        misses: lookups.then_some(misses),
        hit_ratio: lookups.then(|| hits as f64 / (hits + misses) as f64),
        reconnects: r.reconnects,
    }
}

/// The report's `udp_rr` from the merged workers of a datagram run.
pub(in crate::load) fn udp_rr(m: &Merged, rep: &LoadReport) -> UdpRrResult {
    let mut c = crate::load::driver::DatagramCounts::default();
    for e in &m.ends {
        c.add(&e.datagrams);
    }
    let class = |k: ErrorClass| m.tally.errors.get(&k).copied().unwrap_or(0);
    let lost = class(ErrorClass::Lost);
    let settled = c.sent.saturating_sub(rep.errors.unanswered_at_end);
    UdpRrResult {
        id: rep
            .config
            .workload_options
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or("none")
            .to_string(),
        requests_sent: c.sent,
        answered: m.tally.responses.answered,
        lost,
        refused: class(ErrorClass::Refused),
        loss_ratio: if settled > 0 {
            lost as f64 / settled as f64
        } else {
            0.0
        },
        late_replies: c.late,
        garbage_replies: c.garbage,
    }
}

/// A latency record, or None for an empty histogram.
pub fn record(h: &LatencyHist) -> Result<Option<LatencyRecord>> {
    LatencyRecord::of(h)
}

/// The error classes of a run, most frequent first ("ECONNRESET x10,
/// short_read x2"), so a failure says what went wrong and not only how
/// often; None when there were none.
fn error_classes(errors: &BTreeMap<ErrorClass, u64>) -> Option<String> {
    let mut v: Vec<(&ErrorClass, &u64)> = errors.iter().filter(|(_, n)| **n > 0).collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = v
        .iter()
        .map(|(k, n)| format!("{} x{n}", k.name()))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_classes_name_the_most_frequent_first() {
        let mut e = BTreeMap::new();
        assert_eq!(error_classes(&e), None);
        e.insert(ErrorClass::ShortRead, 2);
        e.insert(ErrorClass::Reset, 10);
        e.insert(ErrorClass::Refused, 0);
        assert_eq!(
            error_classes(&e).as_deref(),
            Some("ECONNRESET x10, short_read x2")
        );
    }
}
