//! The tail's section: the stack sampler's samples tied to the request
//! anatomy's requests (each sample carries the turn its thread served and
//! the span it stands for; the anatomy wrote the end of every turn a
//! sample fell in, and of every turn near the tail), split by the
//! requests' server time into the tail and the rest, per window and per
//! endpoint; and the tail's queue wait explained by what its reader did
//! meanwhile. Pure: the sessions' results in, `TailReport` out.

use std::collections::{HashMap, HashSet};

use crate::anatomy::ends::{TURN_AFTER_WRITE, TURN_INTERLEAVED, TurnEnd, TurnEnds};
use crate::anatomy::{Counts, Part, TailSpec};
use crate::probe::hist;
use crate::report::slow::{
    self, Groups, Outside, QueueExplained, QueuePart, TailEndpoint, TailReport, TailWaits,
    Unattributed, WaitRow,
};
use crate::report::stacks::{StackGraph, WeightUnit, WeightedStack};
use crate::stacks::tie::{Tied, TiedKind, TiedSample, WaitReason};

/// A sample's turn flags (src/bpf/anatomy.h, `enum ss_anat_tie`).
const TURN_FLAGS: u64 = TURN_INTERLEAVED | TURN_AFTER_WRITE;

/// Functions kept in each group's graph's top table.
const TOP: usize = 30;

/// Which group a request is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Tail,
    Rest,
}

/// The part of a sample inside `[from, to]`: its weight scaled by the
/// overlap of its span (a tick: its instant inside or not).
fn inside(s: &TiedSample, from: u64, to: u64) -> u64 {
    let (b, e) = (s.begin_ns, s.end_ns.max(s.begin_ns));
    if e == b {
        return if b >= from && b <= to { s.weight } else { 0 };
    }
    let lo = b.max(from);
    let hi = e.min(to);
    if hi <= lo {
        return 0;
    }
    ((s.weight as u128 * u128::from(hi - lo)) / u128::from(e - b)) as u64
}

/// Turns counted at or above `threshold` in the window's histogram (the
/// threshold's own bucket split linearly).
fn at_or_above(h: &hist::Histogram, threshold: u64) -> u64 {
    let tb = hist::bucket_of(threshold);
    let mut n = 0u64;
    for (b, c) in h.counts.iter().enumerate() {
        if b > tb {
            n += c;
        } else if b == tb && *c > 0 {
            let lo = hist::lower_bound(b);
            let w = hist::width(b).max(1);
            let above = (lo + w).saturating_sub(threshold) as f64 / w as f64;
            n += (*c as f64 * above.clamp(0.0, 1.0)).round() as u64;
        }
    }
    n
}

/// The threshold of `spec` over histogram `h` (None: no turn).
fn threshold(spec: TailSpec, h: &hist::Histogram) -> Option<u64> {
    match spec {
        TailSpec::At(ns) => Some(ns),
        TailSpec::Percentile(_) => h.quantile(spec.quantile()?),
    }
}

/// One group's samples as graphs and figures.
#[derive(Default)]
struct Side {
    on: Vec<WeightedStack>,
    off: Vec<WeightedStack>,
    on_samples: u64,
    wait_ns: HashMap<WaitReason, u64>,
    /// Per reason: each stack's weight (the heaviest is shown).
    wait_stacks: HashMap<WaitReason, HashMap<u32, u64>>,
    requests: HashSet<u64>,
}

impl Side {
    fn add(&mut self, tied: &Tied, s: &TiedSample, w: u64, turn: u64) {
        if w == 0 {
            return;
        }
        self.requests.insert(turn);
        match s.kind {
            TiedKind::OnCpu => {
                self.on_samples += w;
                self.on.extend(tied.weighted(s.stack, w));
            }
            TiedKind::Wait(r) => {
                *self.wait_ns.entry(r).or_default() += w;
                *self
                    .wait_stacks
                    .entry(r)
                    .or_default()
                    .entry(s.stack)
                    .or_default() += w;
                if r != WaitReason::RunQueue {
                    self.off.extend(tied.weighted(s.stack, w));
                }
            }
        }
    }

    fn wait_total(&self) -> u64 {
        self.wait_ns.values().sum()
    }
}

/// The endpoint key of an end: (transport, port, protocol, name).
type EndpointKey = (String, u16, String, String);

fn endpoint_of(e: &TurnEnd) -> Option<EndpointKey> {
    let (wire, _) = e.endpoint.as_ref()?;
    Some((
        e.transport.map_or("?", |t| t.name()).to_string(),
        e.port,
        wire.name().to_string(),
        e.endpoint_name()?,
    ))
}

/// The tail's section of a window: `tied` (the sampler's), `ends` and
/// `window` (the anatomy's), `spec` (`--tail`), whether off-CPU time was
/// sampled. None when the window timed no request.
pub fn report(
    tied: &Tied,
    ends: &TurnEnds,
    window: &Counts,
    spec: TailSpec,
    off_cpu: bool,
) -> Option<TailReport> {
    let hist = window.total().histogram(Part::Server);
    let threshold = threshold(spec, &hist)?;
    let total = hist.total();
    let tail_n = at_or_above(&hist, threshold);
    let by_turn: HashMap<u64, &TurnEnd> = ends.ends.iter().map(|e| (e.turn, e)).collect();
    // Each endpoint's own threshold, from its own histogram.
    let mut ep_threshold: HashMap<EndpointKey, u64> = HashMap::new();
    for n in &window.names {
        let key = (
            n.transport.name().to_string(),
            n.port,
            n.wire.name().to_string(),
            n.wire.name_text(&n.name),
        );
        if let Some(t) = crate::run::tail::threshold(spec, &n.histogram()) {
            ep_threshold.insert(key, t);
        }
    }
    let (mut tail, mut rest) = (Side::default(), Side::default());
    let mut per_ep: HashMap<EndpointKey, (Side, Side, u64)> = HashMap::new();
    let mut un = Unattributed {
        dropped: tied.dropped,
        ..Unattributed::default()
    };
    let mut outside = Outside::default();
    for s in &tied.samples {
        let on = matches!(s.kind, TiedKind::OnCpu);
        let miss = |u: &mut Unattributed, interleaved: bool| match (on, interleaved) {
            (true, true) => u.interleaved_on_cpu += s.weight,
            (true, false) => u.untimed_on_cpu += s.weight,
            (false, _) => u.wait_ns += s.weight,
        };
        if s.turn == 0 {
            if on {
                outside.on_cpu += s.weight;
            } else {
                outside.wait_ns += s.weight;
            }
            continue;
        }
        if s.turn & TURN_INTERLEAVED != 0 {
            miss(&mut un, true);
            continue;
        }
        let Some(e) = by_turn.get(&(s.turn & !TURN_FLAGS)) else {
            if s.turn & TURN_AFTER_WRITE != 0 {
                // After its thread wrote the turn's response, and no end
                // came: it followed the turn's last write.
                if on {
                    outside.on_cpu += s.weight;
                } else {
                    outside.wait_ns += s.weight;
                }
                continue;
            }
            miss(&mut un, false);
            continue;
        };
        let w = inside(s, e.first_read_ns, e.last_write_ns);
        if w < s.weight {
            if on {
                outside.on_cpu += s.weight - w;
            } else {
                outside.wait_ns += s.weight - w;
            }
        }
        let server = e.server_ns();
        let group = if server >= threshold {
            Group::Tail
        } else {
            Group::Rest
        };
        match group {
            Group::Tail => tail.add(tied, s, w, e.turn),
            Group::Rest => rest.add(tied, s, w, e.turn),
        }
        if let Some(key) = endpoint_of(e)
            && let Some(t) = ep_threshold.get(&key).copied()
        {
            let slot = per_ep
                .entry(key)
                .or_insert_with(|| (Side::default(), Side::default(), t));
            if server >= t {
                slot.0.add(tied, s, w, e.turn);
            } else {
                slot.1.add(tied, s, w, e.turn);
            }
        }
    }
    let tail_on = StackGraph::build(WeightUnit::Samples, std::mem::take(&mut tail.on), 500);
    let rest_on = StackGraph::build(WeightUnit::Samples, std::mem::take(&mut rest.on), 500);
    let functions = slow::side_by_side(&tail_on, &rest_on);
    let waits = off_cpu.then(|| waits(tied, &mut tail, &mut rest));
    let queue = queue_explained(tied, ends, threshold);
    let endpoints = endpoints(per_ep);
    let mut notes = Vec::new();
    let (written, lost) = window.turn_ends();
    if lost > 0 || ends.dropped > 0 {
        notes.push(format!(
            "{} of {} request ends were lost (ring buffer full, or past the bound of {}): their \
             samples are counted as unattributed",
            lost + ends.dropped,
            written + lost,
            crate::anatomy::ends::MAX_TURN_ENDS
        ));
    }
    if !off_cpu {
        notes.push(
            "off-CPU time was not sampled: the tail's waits and its queue wait's causes other \
             than CPU work need --off-cpu (its cost: docs/stacks.md#cost)"
                .to_string(),
        );
    }
    let mut r = TailReport {
        threshold_ns: threshold,
        threshold_from: match spec {
            TailSpec::Percentile(_) => format!("{} of the window's server time", spec.text()),
            TailSpec::At(_) => format!("--tail {}", spec.text()),
        },
        requests: Groups {
            tail: tail_n,
            rest: total.saturating_sub(tail_n),
        },
        sampled_requests: Groups {
            tail: tail.requests.len() as u64,
            rest: rest.requests.len() as u64,
        },
        on_cpu_samples: Groups {
            tail: tail.on_samples,
            rest: rest.on_samples,
        },
        sample_period_ns: tied.period_ns,
        tail_on_cpu: trimmed(tail_on),
        rest_on_cpu: trimmed(rest_on),
        functions,
        waits,
        queue,
        unattributed: un,
        outside,
        endpoints,
        headline: String::new(),
        notes,
    };
    r.headline = slow::headline(&r, &spec.text());
    Some(r)
}

fn trimmed(mut g: StackGraph) -> StackGraph {
    g.top.truncate(TOP);
    g
}

fn waits(tied: &Tied, tail: &mut Side, rest: &mut Side) -> TailWaits {
    let (tt, rt) = (tail.wait_total(), rest.wait_total());
    let share = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let mut reasons: Vec<WaitRow> = WaitReason::ALL
        .iter()
        .map(|&r| {
            let t = tail.wait_ns.get(&r).copied().unwrap_or(0);
            let o = rest.wait_ns.get(&r).copied().unwrap_or(0);
            let stack = tail
                .wait_stacks
                .get(&r)
                .and_then(|m| {
                    m.iter()
                        .max_by_key(|(id, w)| (**w, std::cmp::Reverse(**id)))
                })
                .filter(|_| r != WaitReason::RunQueue)
                .and_then(|(id, _)| tied.weighted(*id, 1))
                .map(|ws| {
                    StackGraph::build(WeightUnit::Nanoseconds, vec![ws], 1)
                        .stacks
                        .into_iter()
                        .next()
                        .map(|f| f.frames)
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            WaitRow {
                reason: r.name().to_string(),
                text: r.text().to_string(),
                tail_ns: t,
                tail_share: share(t, tt),
                rest_ns: o,
                rest_share: share(o, rt),
                stack,
            }
        })
        .collect();
    reasons.sort_by(|a, b| b.tail_ns.cmp(&a.tail_ns).then(b.rest_ns.cmp(&a.rest_ns)));
    TailWaits {
        tail_ns: tt,
        rest_ns: rt,
        reasons,
        tail_off_cpu: trimmed(StackGraph::build(
            WeightUnit::Nanoseconds,
            std::mem::take(&mut tail.off),
            TOP,
        )),
        rest_off_cpu: trimmed(StackGraph::build(
            WeightUnit::Nanoseconds,
            std::mem::take(&mut rest.off),
            TOP,
        )),
    }
}

/// What each tail request's reader did from its arrival to its first
/// read: the reader's samples in that span (on CPU for another request,
/// on CPU outside requests, or waiting, by reason).
fn queue_explained(tied: &Tied, ends: &TurnEnds, threshold: u64) -> Option<QueueExplained> {
    let spans: Vec<&TurnEnd> = ends
        .ends
        .iter()
        .filter(|e| e.server_ns() >= threshold && e.first_read_ns > e.arrival_ns)
        .collect();
    if spans.is_empty() {
        return None;
    }
    // Each thread's samples in time order.
    let mut by_tid: HashMap<u32, Vec<&TiedSample>> = HashMap::new();
    for s in &tied.samples {
        by_tid.entry(s.tid).or_default().push(s);
    }
    for v in by_tid.values_mut() {
        v.sort_by_key(|s| s.begin_ns);
    }
    let longest = tied
        .samples
        .iter()
        .map(|s| s.end_ns.saturating_sub(s.begin_ns))
        .max()
        .unwrap_or(0);
    let mut parts: HashMap<&'static str, u64> = HashMap::new();
    let mut waited = 0u64;
    for e in &spans {
        let (from, to) = (e.arrival_ns, e.first_read_ns);
        waited += to - from;
        let Some(samples) = by_tid.get(&e.tid) else {
            continue;
        };
        // Samples that can overlap [from, to]: begun at most `longest`
        // before it.
        let start = samples.partition_point(|s| s.begin_ns < from.saturating_sub(longest));
        for s in &samples[start..] {
            if s.begin_ns > to {
                break;
            }
            let what = match s.kind {
                TiedKind::OnCpu if s.turn != 0 && s.turn & !TURN_FLAGS != e.turn => {
                    "other_requests"
                }
                TiedKind::OnCpu => "other_work",
                TiedKind::Wait(r) => r.name(),
            };
            let ns = match s.kind {
                // A tick stands for one period of CPU.
                TiedKind::OnCpu => {
                    if inside(s, from, to) > 0 {
                        tied.period_ns
                    } else {
                        0
                    }
                }
                TiedKind::Wait(_) => inside(s, from, to),
            };
            *parts.entry(what).or_default() += ns;
        }
    }
    // Each part is an unbiased estimate from sampled waits, whose sum can
    // come out above the time waited: shares are then of that sum.
    let explained: u64 = parts.values().sum();
    let whole = explained.max(waited).max(1);
    let mut rows: Vec<QueuePart> = parts
        .into_iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|(what, ns)| QueuePart {
            what: what.to_string(),
            text: queue_text(what),
            ns,
            share: ns as f64 / whole as f64,
        })
        .collect();
    rows.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.what.cmp(&b.what)));
    Some(QueueExplained {
        requests: spans.len() as u64,
        waited_ns: waited,
        parts: rows,
        unexplained_ns: waited.saturating_sub(explained),
    })
}

fn queue_text(what: &str) -> String {
    match what {
        "other_requests" => "on CPU, serving other requests".to_string(),
        "other_work" => "on CPU, outside requests".to_string(),
        other => WaitReason::ALL
            .iter()
            .find(|r| r.name() == other)
            .map_or_else(|| other.to_string(), |r| r.text().to_string()),
    }
}

fn endpoints(per_ep: HashMap<EndpointKey, (Side, Side, u64)>) -> Vec<TailEndpoint> {
    let mut out: Vec<TailEndpoint> = per_ep
        .into_iter()
        .map(
            |((transport, port, protocol, name), (mut t, mut r, threshold))| {
                let tg = StackGraph::build(WeightUnit::Samples, std::mem::take(&mut t.on), 500);
                let rg = StackGraph::build(WeightUnit::Samples, std::mem::take(&mut r.on), 500);
                let function = (tg.total > 0)
                    .then(|| slow::side_by_side(&tg, &rg).into_iter().next())
                    .flatten();
                TailEndpoint {
                    port,
                    transport,
                    protocol,
                    name,
                    threshold_ns: threshold,
                    sampled_requests: Groups {
                        tail: t.requests.len() as u64,
                        rest: r.requests.len() as u64,
                    },
                    on_cpu_samples: Groups {
                        tail: t.on_samples,
                        rest: r.on_samples,
                    },
                    function,
                    tail_stacks: tg.stacks,
                    rest_stacks: rg.stacks,
                }
            },
        )
        .collect();
    out.sort_by(|a, b| {
        b.on_cpu_samples
            .tail
            .cmp(&a.on_cpu_samples.tail)
            .then_with(|| (a.port, &a.name).cmp(&(b.port, &b.name)))
    });
    out.truncate(64);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(turn: u64, kind: TiedKind, weight: u64, span: (u64, u64)) -> TiedSample {
        TiedSample {
            tid: 7,
            turn,
            kind,
            weight,
            begin_ns: span.0,
            end_ns: span.1,
            stack: 0,
        }
    }

    #[test]
    fn a_sample_counts_for_the_part_of_its_span_inside() {
        let tick = s(2, TiedKind::OnCpu, 1, (50, 50));
        assert_eq!(inside(&tick, 10, 60), 1);
        assert_eq!(inside(&tick, 51, 60), 0);
        let wait = s(2, TiedKind::Wait(WaitReason::Futex), 1000, (0, 100));
        assert_eq!(inside(&wait, 50, 200), 500);
        assert_eq!(inside(&wait, 100, 200), 0);
    }

    #[test]
    fn bucket_counts_at_or_above_a_threshold_split_its_own_bucket() {
        let mut counts = vec![0u64; hist::bucket_of(u64::MAX / 4) + 1];
        counts[hist::bucket_of(1000)] = 10;
        counts[hist::bucket_of(1_000_000)] = 4;
        let h = hist::Histogram {
            counts,
            min: 1000,
            max: 1_000_000,
        };
        assert_eq!(at_or_above(&h, 500_000), 4);
        assert_eq!(at_or_above(&h, 10), 14);
    }
}
