//! The tail's section ("why the slow ones were slow"): the stack samples
//! and waits of the requests at or above the tail's threshold, set beside
//! those of the rest, per window and per endpoint, and what the tail's
//! serving threads did while its requests waited in the queue. The
//! producer (`run::tail`) joins the sampler's samples to the anatomy's
//! requests; this module holds the artifact's types and their text.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::stacks::{FoldedStack, KERNEL_SUFFIX, StackGraph, shares};
use super::units::{fmt_count, human_ns};

/// run.json's `tail`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailReport {
    /// Where the tail begins: its requests' server time is at or above it.
    pub threshold_ns: u64,
    /// How it was set: `p99` (of the window's server time) or a time.
    pub threshold_from: String,
    /// Timed requests in each group, from the window's histogram of
    /// server time (the tail's count is estimated inside one bucket).
    pub requests: Groups,
    /// Requests in each group that had a sample tied to them.
    pub sampled_requests: Groups,
    /// On-CPU samples tied to each group's requests.
    pub on_cpu_samples: Groups,
    /// What one on-CPU sample stands for (1e9 / Hz), ns.
    pub sample_period_ns: u64,
    /// Where each group's CPU went (one unit per sample).
    pub tail_on_cpu: StackGraph,
    /// See `tail_on_cpu`.
    pub rest_on_cpu: StackGraph,
    /// The functions set side by side: shares of each group's on-CPU
    /// samples, by the tail's lead over the rest.
    pub functions: Vec<TailFunction>,
    /// Off-CPU time of each group's requests by reason (None: off-CPU
    /// time was not sampled; `--off-cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<TailWaits>,
    /// What the tail's serving threads did while its requests waited to be
    /// read (None: no tail request had a queue wait with a record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueExplained>,
    /// Samples taken while a thread served a request they cannot be given
    /// to.
    pub unattributed: Unattributed,
    /// Samples of the target's threads outside any timed request (between
    /// requests, idle, background threads).
    pub outside: Outside,
    /// Per endpoint, each at its own threshold.
    #[serde(default)]
    pub endpoints: Vec<TailEndpoint>,
    /// The section's finding in a sentence.
    pub headline: String,
    /// Caveats.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A figure for the tail and for the rest.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Groups {
    /// The tail's.
    pub tail: u64,
    /// The rest's.
    pub rest: u64,
}

/// One function in both groups (shares 0..1 of each group's on-CPU
/// samples).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailFunction {
    /// As its frames show it (no `_[k]`).
    pub name: String,
    /// The module, where a group's top table names it.
    pub module: String,
    /// A kernel function.
    pub kernel: bool,
    /// Self share in the tail.
    pub tail_self: f64,
    /// Total share in the tail (on the stack at all).
    pub tail_total: f64,
    /// Self share in the rest.
    pub rest_self: f64,
    /// Total share in the rest.
    pub rest_total: f64,
}

impl TailFunction {
    /// The tail's self share less the rest's, in points.
    pub fn self_points(&self) -> f64 {
        100.0 * (self.tail_self - self.rest_self)
    }
    /// The tail's total share less the rest's, in points.
    pub fn total_points(&self) -> f64 {
        100.0 * (self.tail_total - self.rest_total)
    }
}

/// Off-CPU time of each group's requests.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailWaits {
    /// The tail's off-CPU time inside its requests, ns (run-queue waits
    /// included).
    pub tail_ns: u64,
    /// The rest's.
    pub rest_ns: u64,
    /// By reason, the tail's largest first.
    pub reasons: Vec<WaitRow>,
    /// Where each group waited (ns), run-queue waits left out.
    pub tail_off_cpu: StackGraph,
    /// See `tail_off_cpu`.
    pub rest_off_cpu: StackGraph,
}

/// One reason's off-CPU time in each group.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitRow {
    /// run.json's name (`futex`, `disk_io`, `run_queue`, ...).
    pub reason: String,
    /// For people.
    pub text: String,
    /// The tail's time, ns.
    pub tail_ns: u64,
    /// Of the tail's off-CPU time (0..1).
    pub tail_share: f64,
    /// The rest's time, ns.
    pub rest_ns: u64,
    /// Of the rest's off-CPU time.
    pub rest_share: f64,
    /// The tail's heaviest stack for it, root first (empty for run-queue
    /// waits, which carry none).
    pub stack: Vec<String>,
}

/// What the tail's serving threads did while its requests waited to be
/// read (from arrival to first read: queue wait and the CPU wait before
/// the read), estimated from the samples of each request's reader in that
/// span.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueExplained {
    /// Tail requests whose span was looked at.
    pub requests: u64,
    /// Their spans' sum, ns.
    pub waited_ns: u64,
    /// By what the thread did, largest first (shares of `waited_ns`).
    pub parts: Vec<QueuePart>,
    /// The part no sample accounts for (sampling's gaps), ns.
    pub unexplained_ns: u64,
}

/// One thing the thread did while a tail request waited.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QueuePart {
    /// run.json's name: `other_requests` (on CPU serving others),
    /// `other_work` (on CPU outside requests), or a wait reason.
    pub what: String,
    /// For people.
    pub text: String,
    /// Estimated time, ns.
    pub ns: u64,
    /// Of the requests' waiting (0..1).
    pub share: f64,
}

/// Samples that fell in requests but cannot be given to one.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unattributed {
    /// On-CPU samples of threads interleaving requests (HTTP/2 streams).
    pub interleaved_on_cpu: u64,
    /// On-CPU samples of requests that were not timed (pipelined,
    /// in flight at the end, dropped) or whose end was lost.
    pub untimed_on_cpu: u64,
    /// Off-CPU time of both kinds, ns.
    pub wait_ns: u64,
    /// Samples the sampler did not keep for the tie (past its bound).
    pub dropped: u64,
}

impl Unattributed {
    /// On-CPU samples in all.
    pub fn on_cpu(&self) -> u64 {
        self.interleaved_on_cpu + self.untimed_on_cpu
    }
}

/// Samples outside any timed request.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Outside {
    /// On-CPU samples.
    pub on_cpu: u64,
    /// Off-CPU time, ns.
    pub wait_ns: u64,
}

/// One endpoint's tail beside its rest.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailEndpoint {
    /// Local port (a Unix listener's number).
    pub port: u16,
    /// tcp, udp or unix.
    pub transport: String,
    /// The protocol (resp, http, ...).
    pub protocol: String,
    /// The endpoint's name as the anatomy's endpoints show it.
    pub name: String,
    /// Its own threshold (its server time's percentile, or the given time).
    pub threshold_ns: u64,
    /// Its requests with a sample in each group.
    pub sampled_requests: Groups,
    /// Its on-CPU samples in each group.
    pub on_cpu_samples: Groups,
    /// The tail's leading function and its shares (None: no tail sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<TailFunction>,
    /// Its tail's on-CPU stacks (a subset of the tail's graph's): the
    /// pprof file's `endpoint` label is carved from them. Empty in
    /// artifacts older than that label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail_stacks: Vec<FoldedStack>,
    /// Its rest's on-CPU stacks; see `tail_stacks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rest_stacks: Vec<FoldedStack>,
}

/// Rows kept in `functions`.
pub const FUNCTIONS: usize = 15;

/// The functions of both graphs side by side, by the tail's lead in self
/// share, then in total share (the first is the tail's own function).
pub fn side_by_side(tail: &StackGraph, rest: &StackGraph) -> Vec<TailFunction> {
    let (st, sr) = (shares(tail), shares(rest));
    let module = |name: &str, kernel: bool| {
        tail.top
            .iter()
            .chain(&rest.top)
            .find(|t| t.name == name && t.kernel == kernel)
            .map_or_else(String::new, |t| t.module.clone())
    };
    let names: HashSet<&str> = st.keys().chain(sr.keys()).copied().collect();
    let mut rows: Vec<TailFunction> = names
        .into_iter()
        .map(|frame| {
            let (kernel, name) = match frame.strip_suffix(KERNEL_SUFFIX) {
                Some(n) => (true, n),
                None => (false, frame),
            };
            let (ts, tt) = st.get(frame).copied().unwrap_or_default();
            let (rs, rt) = sr.get(frame).copied().unwrap_or_default();
            TailFunction {
                name: name.to_string(),
                module: module(name, kernel),
                kernel,
                tail_self: ts,
                tail_total: tt,
                rest_self: rs,
                rest_total: rt,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.self_points()
            .total_cmp(&a.self_points())
            .then(b.total_points().total_cmp(&a.total_points()))
            .then_with(|| a.name.cmp(&b.name))
    });
    rows.truncate(FUNCTIONS);
    rows
}

fn pct(v: f64) -> String {
    format!("{:.0} %", 100.0 * v)
}

/// The finding in a sentence: what made the tail slow, as the evidence
/// says it (its own function on CPU, a wait reason, or a queue behind a
/// thread that did something else).
pub fn headline(r: &TailReport, tail_label: &str) -> String {
    let who = format!(
        "the slowest requests ({tail_label}, server time >= {})",
        human_ns(r.threshold_ns)
    );
    // The tail's time in three estimates: its CPU (samples times their
    // period), its waits inside the requests, and its wait to be read.
    let cpu_ns = r.on_cpu_samples.tail.saturating_mul(r.sample_period_ns);
    let wait_ns = r.waits.as_ref().map_or(0, |w| w.tail_ns);
    let queue_ns = r.queue.as_ref().map_or(0, |q| q.waited_ns);
    // The queue first when it is most of the tail's time and explained.
    if let Some(q) = &r.queue
        && let Some(top) = q.parts.first()
        && top.share >= 0.3
        && queue_ns > cpu_ns
        && queue_ns > wait_ns
    {
        let behind = match top.what.as_str() {
            "run_queue" => "behind a thread that waited for a CPU".to_string(),
            "other_requests" => "behind a thread busy serving other requests".to_string(),
            "other_work" => "behind a thread busy outside requests".to_string(),
            _ => format!("behind a thread in {}", top.text),
        };
        return format!(
            "{who}: queue wait {behind} ({} of the time they waited to be read, {} in all)",
            pct(top.share),
            human_ns(queue_ns)
        );
    }
    if r.sampled_requests.tail == 0 {
        return format!("{who}: no sample fell in them");
    }
    // A wait leads when it is most of the tail's off-CPU time and a tail
    // request spends at least twice what a request of the rest does in it
    // (shares alone mislead when the rest hardly waits at all).
    let wait = r.waits.as_ref().and_then(|w| {
        let top = w.reasons.first()?;
        let per_tail = top.tail_ns as f64 / r.requests.tail.max(1) as f64;
        let per_rest = top.rest_ns as f64 / r.requests.rest.max(1) as f64;
        (top.tail_share >= 0.5 && per_tail >= 2.0 * per_rest).then_some((w, top))
    });
    // A function leads only from enough samples to say so, and only when
    // the tail's CPU is not dwarfed by its waiting.
    let func = r
        .functions
        .first()
        .filter(|f| f.self_points() >= 20.0 && r.on_cpu_samples.tail >= MIN_SAMPLES);
    let waits_lead = wait.is_some_and(|(w, _)| w.tail_ns > cpu_ns);
    match (func, wait) {
        (Some(f), Some((_, top))) if !waits_lead => format!(
            "{who} spent {} of their CPU in `{}` ({} in the rest), and waited mostly in {} ({} \
             of their off-CPU time, {} in the rest)",
            pct(f.tail_self),
            crate::text::clip(&f.name, 200),
            pct(f.rest_self),
            top.text,
            pct(top.tail_share),
            pct(top.rest_share)
        ),
        (Some(f), None) => format!(
            "{who} spent {} of their CPU in `{}` ({} in the rest)",
            pct(f.tail_self),
            crate::text::clip(&f.name, 200),
            pct(f.rest_self)
        ),
        (_, Some((w, top))) => format!(
            "{who} waited mostly in {} ({} of their off-CPU time, {} in the rest; {} off CPU \
             against {} on CPU)",
            top.text,
            pct(top.tail_share),
            pct(top.rest_share),
            human_ns(w.tail_ns),
            human_ns(cpu_ns)
        ),
        (None, None) => format!(
            "{who}: their samples look like the rest's (no function or wait leads by 20 points \
             from {} on-CPU samples)",
            r.on_cpu_samples.tail
        ),
    }
}

/// On-CPU samples of the tail a function's lead needs to be named.
pub const MIN_SAMPLES: u64 = 20;

/// The section as summary.txt's lines.
pub fn text(r: &TailReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "Tail (why the slow ones were slow): {}", r.headline);
    let _ = writeln!(
        s,
        "  threshold {} ({}); requests {} tail / {} rest; with samples {} / {}; on-CPU samples \
         {} / {}",
        human_ns(r.threshold_ns),
        r.threshold_from,
        fmt_count(r.requests.tail),
        fmt_count(r.requests.rest),
        fmt_count(r.sampled_requests.tail),
        fmt_count(r.sampled_requests.rest),
        fmt_count(r.on_cpu_samples.tail),
        fmt_count(r.on_cpu_samples.rest),
    );
    if !r.functions.is_empty() {
        let _ = writeln!(
            s,
            "  {:>7} {:>7} {:>7} {:>7} {:>7}  function",
            "tail", "rest", "points", "tail", "rest"
        );
        let _ = writeln!(
            s,
            "  {:>7} {:>7} {:>7} {:>7} {:>7}",
            "self", "self", "self", "total", "total"
        );
        for f in r.functions.iter().take(8) {
            let _ = writeln!(
                s,
                "  {:>6.1}% {:>6.1}% {:>+7.1} {:>6.1}% {:>6.1}%  {}{}",
                100.0 * f.tail_self,
                100.0 * f.rest_self,
                f.self_points(),
                100.0 * f.tail_total,
                100.0 * f.rest_total,
                crate::text::clip(&f.name, 120),
                if f.kernel { " [k]" } else { "" }
            );
        }
    }
    if let Some(w) = &r.waits {
        let _ = writeln!(
            s,
            "  off-CPU in the requests: tail {} / rest {}",
            human_ns(w.tail_ns),
            human_ns(w.rest_ns)
        );
        for row in w.reasons.iter().filter(|r| r.tail_ns > 0 || r.rest_ns > 0) {
            let _ = writeln!(
                s,
                "    {:<30} tail {:>5.1}% ({})  rest {:>5.1}% ({}){}",
                row.text,
                100.0 * row.tail_share,
                human_ns(row.tail_ns),
                100.0 * row.rest_share,
                human_ns(row.rest_ns),
                row.stack
                    .last()
                    .map(|f| format!("  at {}", crate::text::clip(f, 80)))
                    .unwrap_or_default()
            );
        }
    }
    if let Some(q) = &r.queue {
        let _ = writeln!(
            s,
            "  while {} tail requests waited to be read ({} in all), their threads were:",
            fmt_count(q.requests),
            human_ns(q.waited_ns)
        );
        for p in &q.parts {
            let _ = writeln!(s, "    {:<40} {:>5.1}%", p.text, 100.0 * p.share);
        }
        if q.waited_ns > 0 {
            let _ = writeln!(
                s,
                "    {:<40} {:>5.1}%",
                "no sample (sampling's gaps)",
                100.0 * q.unexplained_ns as f64 / q.waited_ns as f64
            );
        }
    }
    for e in r.endpoints.iter().take(10) {
        let f = e
            .function
            .as_ref()
            .map(|f| {
                format!(
                    "`{}` {} ({} in the rest)",
                    crate::text::clip(&f.name, 80),
                    pct(f.tail_self),
                    pct(f.rest_self)
                )
            })
            .unwrap_or_else(|| "no tail sample".to_string());
        let _ = writeln!(
            s,
            "  endpoint {} {} (>= {}): {} tail / {} rest requests sampled; {}",
            e.protocol,
            crate::text::clip(&e.name, 80),
            human_ns(e.threshold_ns),
            e.sampled_requests.tail,
            e.sampled_requests.rest,
            f
        );
    }
    let u = &r.unattributed;
    let _ = writeln!(
        s,
        "  unattributed: {} on-CPU samples ({} interleaved, {} in untimed requests), {} off \
         CPU; outside requests: {} on-CPU samples, {} off CPU",
        u.on_cpu(),
        u.interleaved_on_cpu,
        u.untimed_on_cpu,
        human_ns(u.wait_ns),
        r.outside.on_cpu,
        human_ns(r.outside.wait_ns)
    );
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stacks::{FrameKey, WeightUnit, WeightedStack};

    fn stack(frames: &[&str], weight: u64) -> WeightedStack {
        WeightedStack {
            process: "srv".into(),
            thread: "srv".into(),
            frames: frames
                .iter()
                .map(|f| FrameKey {
                    name: f.to_string(),
                    module: "srv".into(),
                    kernel: false,
                })
                .collect(),
            weight,
            complete: true,
        }
    }

    #[test]
    fn the_tails_own_function_leads_the_side_by_side_rows() {
        let tail = StackGraph::build(
            WeightUnit::Samples,
            vec![
                stack(&["main", "serve", "hash"], 90),
                stack(&["main", "serve"], 10),
            ],
            30,
        );
        let rest = StackGraph::build(
            WeightUnit::Samples,
            vec![
                stack(&["main", "serve"], 97),
                stack(&["main", "serve", "hash"], 3),
            ],
            30,
        );
        let rows = side_by_side(&tail, &rest);
        assert_eq!(rows[0].name, "hash");
        assert!((rows[0].tail_self - 0.9).abs() < 1e-9);
        assert!((rows[0].rest_self - 0.03).abs() < 1e-9);
        assert!((rows[0].self_points() - 87.0).abs() < 1e-9);
        let serve = rows.iter().find(|r| r.name == "serve").unwrap();
        assert!((serve.tail_total - 1.0).abs() < 1e-9);
        let mut r = TailReport {
            threshold_ns: 2_000_000,
            sampled_requests: Groups { tail: 5, rest: 50 },
            on_cpu_samples: Groups {
                tail: 100,
                rest: 100,
            },
            sample_period_ns: 10_101_010,
            functions: rows,
            ..TailReport::default()
        };
        r.headline = headline(&r, "p99");
        assert!(r.headline.contains("`hash`"), "{}", r.headline);
        assert!(r.headline.contains("90 %"), "{}", r.headline);
        assert!(text(&r).contains("hash"));
    }

    #[test]
    fn a_symbol_name_of_66000_characters_is_clipped_not_a_panic() {
        let long = "x".repeat(66_000);
        let tail = StackGraph::build(WeightUnit::Samples, vec![stack(&["main", &long], 90)], 30);
        let rest = StackGraph::build(WeightUnit::Samples, vec![stack(&["main"], 90)], 30);
        let mut r = TailReport {
            sampled_requests: Groups { tail: 5, rest: 5 },
            on_cpu_samples: Groups { tail: 90, rest: 90 },
            sample_period_ns: 10_000_000,
            functions: side_by_side(&tail, &rest),
            tail_on_cpu: tail,
            rest_on_cpu: rest,
            ..TailReport::default()
        };
        r.headline = headline(&r, "p99");
        let t = text(&r);
        assert!(
            t.lines().all(|l| l.chars().count() < 1000),
            "a line runs long"
        );
        let page = crate::report::sections::tail::page("p", &r);
        assert!(page.contains("…"));
    }

    #[test]
    fn a_wait_leads_by_time_per_request_even_when_the_rest_waits_only_in_it() {
        let row = |reason: &str, tail_ns, tail_share, rest_ns, rest_share| WaitRow {
            reason: reason.into(),
            text: reason.into(),
            tail_ns,
            tail_share,
            rest_ns,
            rest_share,
            stack: Vec::new(),
        };
        let r = TailReport {
            threshold_ns: 1_000_000,
            requests: Groups {
                tail: 1_500,
                rest: 150_000,
            },
            sampled_requests: Groups {
                tail: 150,
                rest: 50,
            },
            on_cpu_samples: Groups { tail: 6, rest: 180 },
            sample_period_ns: 10_000_000,
            waits: Some(TailWaits {
                tail_ns: 1_750_000_000,
                rest_ns: 500_000,
                reasons: vec![row("futex", 1_700_000_000, 0.97, 500_000, 1.0)],
                ..TailWaits::default()
            }),
            ..TailReport::default()
        };
        let h = headline(&r, "1ms");
        assert!(h.contains("waited mostly in futex"), "{h}");
    }

    #[test]
    fn a_queue_behind_a_cpu_wait_is_named_when_no_function_leads() {
        let r = TailReport {
            threshold_ns: 5_000_000,
            sampled_requests: Groups { tail: 5, rest: 50 },
            on_cpu_samples: Groups {
                tail: 10,
                rest: 100,
            },
            sample_period_ns: 10_000_000,
            queue: Some(QueueExplained {
                requests: 40,
                waited_ns: 1_000_000_000,
                parts: vec![QueuePart {
                    what: "run_queue".into(),
                    text: "waiting for a CPU".into(),
                    ns: 710_000_000,
                    share: 0.71,
                }],
                unexplained_ns: 0,
            }),
            ..TailReport::default()
        };
        let h = headline(&r, "p99");
        assert!(h.contains("behind a thread that waited for a CPU"), "{h}");
        assert!(h.contains("71 %"), "{h}");
    }
}
