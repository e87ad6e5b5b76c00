//! `sockscope merge`: several generators' load artifacts made into one,
//! exactly. Histograms are merged bucket by bucket (the HdrHistogram V2
//! strings every artifact carries), never percentiles averaged; counts,
//! errors, bytes and CPU are summed; per-second intervals are placed on
//! one wall-clock timeline. The result is a [`LoadReport`] like any other
//! (same schema, so `sockscope report` renders it) with a `merged` section
//! saying what was merged and how well the seconds lined up.
//!
//! This module is pure: it takes parsed artifacts and returns the merged
//! one or the reason it refuses ([`Refusal`], a usage error to the
//! command); reading files and writing the result is `run::merge`'s.

use std::collections::{BTreeMap, BTreeSet};

use super::header::ArtifactHeader;
use super::load::{
    Bytes, Connections, Errors, Generator, Interval, LatencyRecord, LoadReport, MergeAlignment,
    MergeRecord, MergeSource, Responses, SCHEMA, SCHEMA_VERSION, Step, StepErrors, UdpResult,
    UdpRrResult,
};
use crate::stats::LatencyHist;

/// Why artifacts cannot be merged (what `sockscope merge` reports as a
/// usage error, exit 2).
#[derive(Debug)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// What [`merge`] returns.
pub type Result<T> = std::result::Result<T, Refusal>;

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal(message.into())
}

/// One artifact to merge and the name it is reported under (its file).
pub struct Input {
    /// The file, as given.
    pub file: String,
    /// Its content.
    pub report: LoadReport,
}

/// The start of a load's measured window, ns since the Unix epoch:
/// `started_at_unix_ns` (or `started_at`, ms precision, for artifacts
/// older than it) plus the warm-up.
pub fn window_start_ns(r: &LoadReport) -> Result<u64> {
    let start = match r.started_at_unix_ns {
        Some(ns) => ns,
        None => {
            let t = humantime::parse_rfc3339_weak(r.started_at.trim_end_matches('Z'))
                .map_err(|e| refuse(format!("started_at {:?} is not a time: {e}", r.started_at)))?;
            super::load::unix_ns(t)
        }
    };
    let warmup = secs_within_span("config.warmup_s", r.config.warmup_s)?;
    // Past 2262 (i64 ns) is no time a run started at; refusing it keeps
    // every later sum of a start and a bounded span from overflowing.
    if start > i64::MAX as u64 {
        return Err(refuse(format!("started_at_unix_ns {start} is not a time")));
    }
    Ok(start + warmup)
}

/// The longest timeline a merge builds, s: one interval per second, so an
/// input whose start or duration was moved far away cannot make it
/// allocate (or write) gigabytes. A day covers any real load run.
pub const MAX_SPAN_S: u64 = 86_400;

/// `v` seconds as ns, refused unless finite, not negative and within
/// [`MAX_SPAN_S`].
fn secs_within_span(what: &str, v: f64) -> Result<u64> {
    if !v.is_finite() || v < 0.0 || v > MAX_SPAN_S as f64 {
        return Err(refuse(format!(
            "{what} {v} is outside 0..{MAX_SPAN_S} s (a day, the longest merged timeline)"
        )));
    }
    Ok((v * 1e9).round() as u64)
}

/// The options that must match for two runs to be the same load: the
/// config without what only says how it was started (the command line,
/// the count or duration each generator ran for).
fn shape(r: &LoadReport) -> serde_json::Value {
    let mut v = serde_json::to_value(&r.config).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        for k in ["command_line", "count", "duration_s"] {
            o.remove(k);
        }
        // What a TLS run negotiated is an outcome, not an option.
        if let Some(t) = o.get_mut("tls").and_then(|t| t.as_object_mut()) {
            t.remove("protocol_version");
            t.remove("cipher_suite");
        }
    }
    v
}

/// The keys whose values differ between two config objects, sorted.
fn differing(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["config".into()];
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| k.to_string())
        .collect()
}

/// Merges the histograms named by `get` over the inputs that have one; a
/// warning says when only some do.
/// The steps of inputs that all ran the same rate schedule, summed step by
/// step (each generator's step k covers its own window's seconds, so the
/// sum is as well aligned as the windows are); steps of inputs that ran
/// different schedules, or not all one, are left out with a warning.
fn merge_steps(inputs: &[Input], warnings: &mut Vec<String>) -> Result<Option<Vec<Step>>> {
    let with_steps = inputs.iter().filter(|i| i.report.steps.is_some()).count();
    if with_steps == 0 {
        return Ok(None);
    }
    let schedules: BTreeSet<Option<&str>> = inputs
        .iter()
        .map(|i| i.report.config.rate_schedule.as_deref())
        .collect();
    let counts: BTreeSet<usize> = inputs
        .iter()
        .map(|i| i.report.steps.as_ref().map_or(0, Vec::len))
        .collect();
    if with_steps < inputs.len() || schedules.len() > 1 || counts.len() > 1 {
        warnings.push(format!(
            "per-step results left out: the generators did not all run one rate schedule ({})",
            inputs
                .iter()
                .map(|i| format!(
                    "{}: {}",
                    i.file,
                    i.report.config.rate_schedule.as_deref().unwrap_or("none")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(None);
    }
    let n = counts.into_iter().next().unwrap_or(0);
    let step = |r: &LoadReport, k: usize| r.steps.as_ref().map(|v| v[k].clone());
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let parts: Vec<(&str, Step)> = inputs
            .iter()
            .filter_map(|i| step(&i.report, k).map(|s| (i.file.as_str(), s)))
            .collect();
        let first = &parts[0].1;
        let mut by_class: BTreeMap<String, u64> = BTreeMap::new();
        for (_, p) in &parts {
            for (c, v) in &p.errors.by_class {
                *by_class.entry(c.clone()).or_default() += v;
            }
        }
        let transactions: u64 = parts.iter().map(|(_, p)| p.transactions).sum();
        let limited: Vec<String> = parts
            .iter()
            .filter_map(|(f, p)| p.generator_limited.as_ref().map(|w| format!("{f}: {w}")))
            .collect();
        let mut quiet = Vec::new();
        out.push(Step {
            index: k,
            start_s: first.start_s,
            len_s: first.len_s,
            requested_per_s: parts.iter().map(|(_, p)| p.requested_per_s).sum(),
            achieved_per_s: transactions as f64 / first.len_s.max(1) as f64,
            transactions,
            errors: StepErrors {
                total: parts.iter().map(|(_, p)| p.errors.total).sum(),
                by_class,
            },
            latency: merge_hist(
                inputs,
                &format!("steps[{k}].latency"),
                |r| &r.steps.as_ref().expect("every input has steps")[k].latency,
                &mut quiet,
            )?,
            send_lag: merge_hist(
                inputs,
                &format!("steps[{k}].send_lag"),
                |r| &r.steps.as_ref().expect("every input has steps")[k].send_lag,
                &mut quiet,
            )?,
            busiest_thread_share: parts
                .iter()
                .filter_map(|(_, p)| p.busiest_thread_share)
                .reduce(f64::max),
            generator_limited: (!limited.is_empty()).then(|| limited.join("; ")),
        });
    }
    Ok(Some(out))
}

fn merge_hist(
    inputs: &[Input],
    name: &str,
    get: impl Fn(&LoadReport) -> &Option<LatencyRecord>,
    warnings: &mut Vec<String>,
) -> Result<Option<LatencyRecord>> {
    let mut acc: Option<LatencyHist> = None;
    let mut have = 0;
    for i in inputs {
        let Some(rec) = get(&i.report) else { continue };
        let h = LatencyHist::from_v2_base64(&rec.hdr_histogram)
            .map_err(|e| refuse(format!("{}: {name}.hdr_histogram: {e:#}", i.file)))?;
        if h.len() != rec.summary.count {
            return Err(refuse(format!(
                "{}: {name}.hdr_histogram holds {} samples but its count says {}: the \
                 artifact was altered",
                i.file,
                h.len(),
                rec.summary.count
            )));
        }
        have += 1;
        match acc.as_mut() {
            Some(a) => a.merge(&h),
            None => acc = Some(h),
        }
    }
    if have > 0 && have < inputs.len() {
        warnings.push(format!(
            "{name}: only {have} of {} artifacts have it; the merged {name} covers those only",
            inputs.len()
        ));
    }
    acc.map(|h| {
        Ok(LatencyRecord {
            summary: h.summary(),
            hdr_histogram: h
                .to_v2_base64()
                .map_err(|e| refuse(format!("{name}: encoding the merged histogram: {e:#}")))?,
        })
    })
    .transpose()
}

/// Merges `inputs` (at least two, checked by the caller too). Different
/// targets are a usage error unless `force`; different workloads or
/// options are warnings. `command_line` is recorded as the merged
/// artifact's.
pub fn merge(inputs: &[Input], force: bool, command_line: Vec<String>) -> Result<LoadReport> {
    if inputs.len() < 2 {
        return Err(refuse(
            "merge needs at least two load artifacts (one has nothing to merge with)",
        ));
    }
    let first = &inputs[0].report;
    let mut warnings = Vec::new();

    // Targets: the one thing that makes a merge meaningless.
    let targets: BTreeSet<&str> = inputs.iter().map(|i| i.report.target.as_str()).collect();
    if targets.len() > 1 {
        let list = inputs
            .iter()
            .map(|i| format!("{} -> {}", i.file, i.report.target))
            .collect::<Vec<_>>()
            .join(", ");
        if !force {
            return Err(refuse(format!(
                "the artifacts targeted different servers ({list}); merging them would mix \
                 two services' latencies. --force merges them anyway"
            )));
        }
        warnings.push(format!(
            "merged with --force although the generators targeted different servers: {list}"
        ));
    }
    let workloads: BTreeSet<&str> = inputs.iter().map(|i| i.report.workload.as_str()).collect();
    if workloads.len() > 1 {
        warnings.push(format!(
            "the generators ran different workloads ({}): the merged figures mix them",
            inputs
                .iter()
                .map(|i| format!("{}: {}", i.file, i.report.workload))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let base = shape(first);
    for i in &inputs[1..] {
        let diff = differing(&base, &shape(&i.report));
        if !diff.is_empty() {
            warnings.push(format!(
                "{} ran with different options than {} ({}): the merged figures mix them",
                i.file,
                inputs[0].file,
                diff.join(", ")
            ));
        }
    }

    // The timeline: second 0 is the earliest measured window's start.
    let starts: Vec<u64> = inputs
        .iter()
        .map(|i| window_start_ns(&i.report).map_err(|e| refuse(format!("{}: {e}", i.file))))
        .collect::<Result<_>>()?;
    let earliest = *starts.iter().min().expect("two inputs");
    let latest = *starts.iter().max().expect("two inputs");
    // Bounded before anything is allocated from the inputs' numbers.
    if latest - earliest > MAX_SPAN_S * 1_000_000_000 {
        return Err(refuse(format!(
            "the artifacts' measured windows start {:.0} s apart, more than the {MAX_SPAN_S} s \
             (a day) one merged timeline may span: were they one load?",
            (latest - earliest) as f64 / 1e9
        )));
    }
    for i in inputs {
        let r = &i.report;
        let d = secs_within_span("duration_s", r.duration_s)
            .map_err(|e| refuse(format!("{}: {e}", i.file)))?;
        let limit = d / 1_000_000_000 + 2;
        if let Some(iv) = r.intervals.iter().find(|iv| iv.t_s > limit) {
            return Err(refuse(format!(
                "{}: an interval at second {} of a {:.0} s run (an altered artifact)",
                i.file, iv.t_s, r.duration_s
            )));
        }
    }
    let end = inputs
        .iter()
        .zip(&starts)
        .map(|(i, s)| s + (i.report.duration_s * 1e9).round() as u64)
        .max()
        .unwrap_or(earliest);
    let mut sources = Vec::new();
    let mut intervals: BTreeMap<u64, Interval> = BTreeMap::new();
    let mut max_mis = 0.0f64;
    for (i, &start) in inputs.iter().zip(&starts) {
        let r = &i.report;
        let from_earliest = start - earliest;
        let offset_s = ((from_earliest as f64) / 1e9).round() as u64;
        let mis_ms = (from_earliest as f64 - offset_s as f64 * 1e9) / 1e6;
        max_mis = max_mis.max(mis_ms.abs());
        for iv in &r.intervals {
            let k = iv.t_s + offset_s;
            let m = intervals.entry(k).or_insert_with(|| Interval {
                covered_s: 0.0,
                ..Interval::empty(k)
            });
            m.transactions += iv.transactions;
            m.errors += iv.errors;
            // The largest is exact; per-second percentiles are not stored
            // as histograms, and averaging them would be wrong: left out.
            m.max_ns = match (m.max_ns, iv.max_ns) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            m.partial |= iv.partial;
            m.covered_s = m.covered_s.max(iv.covered_s);
        }
        sources.push(MergeSource {
            file: i.file.clone(),
            started_at: r.started_at.clone(),
            started_at_unix_ns: start - (r.config.warmup_s.max(0.0) * 1e9).round() as u64,
            workload: r.workload.clone(),
            target: r.target.clone(),
            host: r.host.clone(),
            transactions: r.transactions,
            duration_s: r.duration_s,
            offset_s,
            misalignment_ms: (mis_ms * 1000.0).round() / 1000.0,
        });
    }
    if max_mis > 100.0 {
        warnings.push(format!(
            "the generators' seconds are up to {max_mis:.0} ms apart (start them with a common \
             --start-at, on clocks kept in sync): per-second sums mix neighbouring seconds"
        ));
    }
    // A second no source recorded stays in the timeline, as zeros.
    let last = intervals.keys().next_back().copied();
    let intervals: Vec<Interval> = match last {
        Some(last) => (0..=last)
            .map(|k| {
                intervals.remove(&k).map_or_else(
                    || Interval::empty(k),
                    |mut m| {
                        if !m.partial {
                            m.covered_s = 1.0;
                        }
                        m
                    },
                )
            })
            .collect(),
        None => Vec::new(),
    };

    let sum = |f: fn(&LoadReport) -> u64| inputs.iter().map(|i| f(&i.report)).sum::<u64>();
    let transactions = sum(|r| r.transactions);
    let warmup_transactions = sum(|r| r.warmup_transactions);
    let duration_s = (end - earliest) as f64 / 1e9;

    let latency = merge_hist(inputs, "latency", |r| &r.latency, &mut warnings)?;
    let latency_uncorrected = merge_hist(
        inputs,
        "latency_uncorrected",
        |r| &r.latency_uncorrected,
        &mut warnings,
    )?;
    let send_lag = merge_hist(inputs, "send_lag", |r| &r.send_lag, &mut warnings)?;
    let release_lag = merge_hist(inputs, "release_lag", |r| &r.release_lag, &mut warnings)?;
    let conn_wait = merge_hist(inputs, "conn_wait", |r| &r.conn_wait, &mut warnings)?;
    let connect_latency = merge_hist(
        inputs,
        "connect_latency",
        |r| &r.connect_latency,
        &mut warnings,
    )?;
    let tls_handshake_latency = merge_hist(
        inputs,
        "tls_handshake_latency",
        |r| &r.tls_handshake_latency,
        &mut warnings,
    )?;

    let steps = merge_steps(inputs, &mut warnings)?;
    let mut by_class: BTreeMap<String, u64> = BTreeMap::new();
    for i in inputs {
        for (k, v) in &i.report.errors.by_class {
            *by_class.entry(k.clone()).or_default() += v;
        }
    }
    let user: f64 = inputs.iter().map(|i| i.report.generator.user_cpu_s).sum();
    let system: f64 = inputs.iter().map(|i| i.report.generator.system_cpu_s).sum();
    let all_tx = transactions + warmup_transactions;

    let mut config = first.config.clone();
    config.connections = inputs
        .iter()
        .map(|i| i.report.config.connections)
        .sum::<Option<usize>>();
    config.threads = inputs.iter().map(|i| i.report.config.threads).sum();
    config.count = inputs
        .iter()
        .map(|i| i.report.config.count)
        .sum::<Option<u64>>();
    config.rate = inputs
        .iter()
        .map(|i| i.report.config.rate)
        .sum::<Option<f64>>();
    config.duration_s = Some(duration_s);
    config.command_line = command_line;

    let reasons: BTreeSet<&str> = inputs
        .iter()
        .map(|i| i.report.end_reason.as_str())
        .collect();
    let end_reason = if reasons.len() == 1 {
        first.end_reason.clone()
    } else {
        reasons.into_iter().collect::<Vec<_>>().join("+")
    };
    let incomplete: Vec<&str> = inputs
        .iter()
        .filter(|i| !i.report.complete)
        .map(|i| i.file.as_str())
        .collect();
    if !incomplete.is_empty() {
        warnings.push(format!(
            "incomplete runs (their figures are in the merge, as they were measured): {}",
            incomplete.join(", ")
        ));
    }

    let mut notes = vec![format!(
        "merged from {} generators' artifacts: histograms merged bucket by bucket; per-second \
         intervals carry summed counts and the largest latency (per-second percentiles cannot \
         be merged from the artifacts and are left out)",
        inputs.len()
    )];
    notes.extend(warnings.iter().cloned());
    let mut seen: BTreeSet<String> = notes.iter().cloned().collect();
    for i in inputs {
        for n in &i.report.notes {
            if seen.insert(n.clone()) {
                notes.push(n.clone());
            }
        }
    }

    let earliest_source = inputs
        .iter()
        .zip(&starts)
        .min_by_key(|(_, s)| **s)
        .map(|(i, _)| &i.report)
        .expect("two inputs");
    let hosts: BTreeSet<&str> = inputs
        .iter()
        .filter_map(|i| i.report.host.as_deref())
        .collect();

    // One path for all (or none recorded): it is the merged run's path;
    // generators on different paths measured different networks.
    let paths: BTreeSet<String> = inputs
        .iter()
        .map(|i| serde_json::to_string(&i.report.path).unwrap_or_default())
        .collect();
    let path = if paths.len() == 1 {
        first.path.clone()
    } else {
        let w = format!(
            "the generators crossed different network paths ({}): the merged latencies mix them",
            inputs
                .iter()
                .map(|i| format!(
                    "{}: {}",
                    i.file,
                    i.report
                        .path
                        .as_ref()
                        .and_then(|p| p.emulated())
                        .map_or("loopback or unrecorded", |p| p.spec.as_str())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        warnings.push(w.clone());
        notes.push(w);
        None
    };

    Ok(LoadReport {
        header: ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        path,
        workload: if workloads.len() == 1 {
            first.workload.clone()
        } else {
            workloads.into_iter().collect::<Vec<_>>().join("+")
        },
        target: if targets.len() == 1 {
            first.target.clone()
        } else {
            targets.into_iter().collect::<Vec<_>>().join(" + ")
        },
        config,
        started_at: earliest_source.started_at.clone(),
        started_at_unix_ns: Some(
            earliest - (earliest_source.config.warmup_s.max(0.0) * 1e9).round() as u64,
        ),
        start_at: None,
        host: (!hosts.is_empty()).then(|| hosts.into_iter().collect::<Vec<_>>().join(",")),
        full_log: None,
        merged: Some(MergeRecord {
            sources,
            alignment: MergeAlignment {
                window_start_unix_ns: earliest,
                window_end_unix_ns: end,
                max_misalignment_ms: (max_mis * 1000.0).round() / 1000.0,
            },
            warnings,
            forced: force && targets_differ(inputs),
        }),
        duration_s,
        complete: incomplete.is_empty(),
        end_reason,
        connections: Connections {
            requested: inputs.iter().map(|i| i.report.connections.requested).sum(),
            established: sum(|r| r.connections.established),
            connects: sum(|r| r.connections.connects),
            added: sum(|r| r.connections.added),
        },
        transactions,
        rate_per_s: if duration_s > 0.0 {
            transactions as f64 / duration_s
        } else {
            0.0
        },
        warmup_transactions,
        latency,
        latency_uncorrected,
        send_lag,
        release_lag,
        conn_wait,
        connect_latency,
        tls_handshake_latency,
        errors: Errors {
            total: sum(|r| r.errors.total),
            by_class,
            unanswered_at_end: sum(|r| r.errors.unanswered_at_end),
            answered_after_end: sum(|r| r.errors.answered_after_end),
        },
        intervals,
        steps,
        bytes: Bytes {
            sent: sum(|r| r.bytes.sent),
            received: sum(|r| r.bytes.received),
        },
        generator: Generator {
            user_cpu_s: user,
            system_cpu_s: system,
            cpu_us_per_transaction: Generator::cpu_us_per(user, system, all_tx),
            thread_cpu_share: inputs
                .iter()
                .flat_map(|i| i.report.generator.thread_cpu_share.iter().copied())
                .collect(),
            saturated: inputs.iter().any(|i| i.report.generator.saturated),
        },
        responses: merge_responses(inputs),
        udp: merge_udp(inputs),
        udp_rr: merge_udp_rr(inputs),
        notes,
    })
}

fn targets_differ(inputs: &[Input]) -> bool {
    inputs
        .iter()
        .any(|i| i.report.target != inputs[0].report.target)
}

/// Sums what the responses said; None when no input has it.
fn merge_responses(inputs: &[Input]) -> Option<Responses> {
    let mut out: Option<Responses> = None;
    for r in inputs.iter().filter_map(|i| i.report.responses.as_ref()) {
        let o = out.get_or_insert_with(Responses::default);
        o.answered += r.answered;
        o.reconnects += r.reconnects;
        for (k, v) in &r.by_status {
            *o.by_status.entry(k.clone()).or_default() += v;
        }
        for (k, c) in &r.by_command {
            let e = o.by_command.entry(k.clone()).or_default();
            e.answered += c.answered;
            e.errors += c.errors;
            e.hits = add_opt(e.hits, c.hits);
            e.misses = add_opt(e.misses, c.misses);
        }
        o.hits = add_opt(o.hits, r.hits);
        o.misses = add_opt(o.misses, r.misses);
    }
    if let Some(o) = out.as_mut() {
        o.hit_ratio = match (o.hits, o.misses) {
            (Some(h), Some(m)) if h + m > 0 => Some(h as f64 / (h + m) as f64),
            _ => None,
        };
    }
    out
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// Sums the UDP sender's accounting. The sinks' reports (one-way latency,
/// what each sink received) are per sink and are not merged.
fn merge_udp(inputs: &[Input]) -> Option<UdpResult> {
    let parts: Vec<&UdpResult> = inputs
        .iter()
        .filter_map(|i| i.report.udp.as_ref())
        .collect();
    if parts.is_empty() {
        return None;
    }
    let published: u64 = parts.iter().map(|u| u.published).sum();
    let lost = parts.iter().map(|u| u.lost).sum::<Option<u64>>();
    Some(UdpResult {
        published,
        send_errors: parts.iter().map(|u| u.send_errors).sum(),
        sndbuf_granted: parts.iter().map(|u| u.sndbuf_granted).max().unwrap_or(0),
        sink: None,
        lost,
        loss_ratio: lost.map(|l| {
            if published > 0 {
                l as f64 / published as f64
            } else {
                0.0
            }
        }),
        one_way_latency: None,
        kernel_rcvbuf_errors_delta: None,
    })
}

/// Sums the udp-rr accounting and recomputes its loss ratio.
fn merge_udp_rr(inputs: &[Input]) -> Option<UdpRrResult> {
    let parts: Vec<(&UdpRrResult, u64)> = inputs
        .iter()
        .filter_map(|i| {
            i.report
                .udp_rr
                .as_ref()
                .map(|u| (u, i.report.errors.unanswered_at_end))
        })
        .collect();
    let (first, _) = parts.first()?;
    let mut o = UdpRrResult {
        id: first.id.clone(),
        ..UdpRrResult::default()
    };
    let mut unanswered = 0;
    for (u, un) in &parts {
        o.requests_sent += u.requests_sent;
        o.answered += u.answered;
        o.lost += u.lost;
        o.refused += u.refused;
        o.late_replies += u.late_replies;
        o.garbage_replies += u.garbage_replies;
        unanswered += un;
    }
    let settled = o.requests_sent.saturating_sub(unanswered);
    o.loss_ratio = if settled > 0 {
        o.lost as f64 / settled as f64
    } else {
        0.0
    };
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load artifact with `lat` as its latency samples, recorded in one
    /// second per 10 samples, started at `start_ns`.
    fn run(target: &str, start_ns: u64, lat: &[u64]) -> LoadReport {
        let mut r = crate::report::fixtures::profile(&crate::report::fixtures::epoll_echo())
            .load
            .unwrap();
        let mut h = LatencyHist::new();
        for v in lat {
            h.record(*v);
        }
        r.target = target.into();
        r.config.warmup_s = 0.0;
        r.started_at_unix_ns = Some(start_ns);
        r.transactions = lat.len() as u64;
        r.latency = Some(LatencyRecord {
            summary: h.summary(),
            hdr_histogram: h.to_v2_base64().unwrap(),
        });
        r.latency_uncorrected = None;
        r.send_lag = None;
        r.intervals = lat
            .chunks(10)
            .enumerate()
            .map(|(k, c)| Interval {
                transactions: c.len() as u64,
                max_ns: c.iter().max().copied(),
                ..Interval::empty(k as u64)
            })
            .collect();
        r.duration_s = r.intervals.len() as f64;
        r
    }

    fn input(file: &str, r: LoadReport) -> Input {
        Input {
            file: file.into(),
            report: r,
        }
    }

    /// Issue 22: a start moved 10^7 s away took 2.1 GB and wrote a 1.26 GB
    /// file; absurd starts aborted on a failed allocation.
    #[test]
    fn spans_and_numbers_beyond_a_day_are_refused_before_allocating() {
        let lat: Vec<u64> = (1..=20).map(|v| v * 1000).collect();
        let t0 = 1_795_467_600_000_000_000u64;
        let pair = |b: LoadReport| {
            merge(
                &[input("a.json", run("x:1", t0, &lat)), input("b.json", b)],
                false,
                vec![],
            )
        };
        let far = pair(run("x:1", t0 + 10_000_000 * 1_000_000_000, &lat)).unwrap_err();
        assert!(far.0.contains("more than the 86400 s"), "{far}");
        let absurd = pair(run("x:1", u64::MAX - 5, &lat)).unwrap_err();
        assert!(absurd.0.contains("is not a time"), "{absurd}");
        let mut long = run("x:1", t0, &lat);
        long.duration_s = 1e12;
        assert!(pair(long).unwrap_err().0.contains("duration_s"));
        let mut nan = run("x:1", t0, &lat);
        nan.duration_s = f64::NAN;
        assert!(pair(nan).is_err());
        let mut warm = run("x:1", t0, &lat);
        warm.config.warmup_s = -1.0;
        assert!(pair(warm).unwrap_err().0.contains("warmup_s"));
        let mut late = run("x:1", t0, &lat);
        late.intervals[1].t_s = 1 << 40;
        assert!(pair(late).unwrap_err().0.contains("altered artifact"));
        // A day apart exactly is still one timeline.
        assert!(pair(run("x:1", t0 + MAX_SPAN_S * 1_000_000_000, &lat)).is_ok());
    }

    /// Steps of `lat` split in two halves, as a `100,200 every 5s` run.
    fn with_steps(mut r: LoadReport, lat: &[u64]) -> LoadReport {
        let step = |index: usize, part: &[u64], limited: Option<&str>| {
            let mut h = LatencyHist::new();
            part.iter().for_each(|v| h.record(*v));
            Step {
                index,
                start_s: 5 * index as u64,
                len_s: 5,
                requested_per_s: 100.0 * (index + 1) as f64,
                achieved_per_s: part.len() as f64 / 5.0,
                transactions: part.len() as u64,
                errors: StepErrors {
                    total: 1,
                    by_class: [("ECONNRESET".to_string(), 1)].into(),
                },
                latency: Some(LatencyRecord {
                    summary: h.summary(),
                    hdr_histogram: h.to_v2_base64().unwrap(),
                }),
                send_lag: None,
                busiest_thread_share: Some(0.2),
                generator_limited: limited.map(String::from),
            }
        };
        let (a, b) = lat.split_at(lat.len() / 2);
        r.config.rate = None;
        r.config.rate_schedule = Some("100,200 every 5s".into());
        r.steps = Some(vec![step(0, a, None), step(1, b, Some("late"))]);
        r
    }

    #[test]
    fn steps_of_one_schedule_sum_step_by_step_and_others_are_left_out() {
        let lat: Vec<u64> = (1..=40).map(|v| v * 1000).collect();
        let t0 = 1_795_467_600_000_000_000u64;
        let a = with_steps(run("x:1", t0, &lat), &lat);
        let b = with_steps(run("x:1", t0, &lat), &lat);
        let m = merge(
            &[input("a.json", a.clone()), input("b.json", b)],
            false,
            vec![],
        )
        .unwrap();
        let steps = m.steps.expect("merged steps");
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].transactions, 40);
        assert_eq!(steps[0].requested_per_s, 200.0);
        assert_eq!(steps[1].errors.by_class["ECONNRESET"], 2);
        assert_eq!(steps[1].latency.as_ref().unwrap().summary.count, 40);
        assert_eq!(steps[0].generator_limited, None);
        assert_eq!(
            steps[1].generator_limited.as_deref(),
            Some("a.json: late; b.json: late")
        );
        // A generator without the schedule: no steps, and a warning.
        let m = merge(
            &[input("a.json", a), input("c.json", run("x:1", t0, &lat))],
            false,
            vec![],
        )
        .unwrap();
        assert!(m.steps.is_none());
        let w = &m.merged.unwrap().warnings;
        assert!(
            w.iter().any(|w| w.contains("per-step results left out")),
            "{w:?}"
        );
    }

    #[test]
    fn histograms_merge_exactly_and_counts_add_up() {
        let a: Vec<u64> = (1..=50).map(|v| v * 1000).collect();
        let b: Vec<u64> = (1..=30).map(|v| v * 100_000).collect();
        let t0 = 1_795_467_600_000_000_000;
        let m = merge(
            &[
                input("a.json", run("10.0.0.1:7", t0, &a)),
                input("b.json", run("10.0.0.1:7", t0 + 2_000_400_000, &b)),
            ],
            false,
            vec![],
        )
        .unwrap();
        assert_eq!(m.transactions, 80);
        let mut union = LatencyHist::new();
        for v in a.iter().chain(&b) {
            union.record(*v);
        }
        let lat = m.latency.unwrap();
        assert_eq!(lat.summary, union.summary());
        assert_eq!(lat.summary.count, 80);
        // b's second 0 lands on the timeline's second 2, 0.4 ms late.
        let rec = m.merged.unwrap();
        assert_eq!(rec.sources[1].offset_s, 2);
        assert!((rec.sources[1].misalignment_ms - 0.4).abs() < 1e-9);
        assert!((rec.alignment.max_misalignment_ms - 0.4).abs() < 1e-9);
        let per_s: Vec<u64> = m.intervals.iter().map(|i| i.transactions).collect();
        assert_eq!(per_s, vec![10, 10, 20, 20, 20]);
        assert_eq!(m.intervals[4].max_ns, Some(3_000_000));
        assert!(m.intervals.iter().all(|i| i.p99_ns.is_none()));
        // Window: 0 .. 2.0004 + 3 s.
        assert!((m.duration_s - 5.0004).abs() < 1e-9, "{}", m.duration_s);
        assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    }

    #[test]
    fn a_different_target_is_refused_unless_forced_and_options_warn() {
        let t0 = 1_795_467_600_000_000_000;
        let a = run("10.0.0.1:7", t0, &[1000, 2000]);
        let b = run("10.0.0.2:7", t0, &[1000]);
        let e = merge(
            &[input("a", a.clone()), input("b", b.clone())],
            false,
            vec![],
        )
        .unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        let m = merge(&[input("a", a.clone()), input("b", b)], true, vec![]).unwrap();
        assert!(m.merged.as_ref().unwrap().forced);
        assert_eq!(m.transactions, 3);
        let mut c = a.clone();
        c.config.pipeline = Some(8);
        let m = merge(&[input("a", a), input("c", c)], false, vec![]).unwrap();
        let w = &m.merged.unwrap().warnings;
        assert!(w.iter().any(|w| w.contains("pipeline")), "{w:?}");
        assert!(m.notes.iter().any(|n| n.contains("pipeline")));
    }

    #[test]
    fn one_input_is_refused_and_an_altered_histogram_is_caught() {
        let t0 = 1_795_467_600_000_000_000;
        let a = run("x:1", t0, &[1000]);
        assert!(merge(&[input("a", a.clone())], false, vec![]).is_err());
        let mut b = a.clone();
        b.latency.as_mut().unwrap().summary.count = 7;
        let e = merge(&[input("a", a), input("b", b)], false, vec![]).unwrap_err();
        assert!(e.to_string().contains("altered"), "{e}");
    }
}
