//! A stack graph as a pprof profile (profile.proto, gzip'd): what
//! `go tool pprof`, Grafana Pyroscope, Parca and speedscope read.
//!
//! The messages are written here with prost's derive from the format's
//! published field numbers (github.com/google/pprof, proto/profile.proto);
//! only the fields sockscope fills are declared, and a reader skips none
//! it needs. Frames keep their folded names (kernel functions end in
//! `_[k]`); each frame's module is its mapping (`[kernel]` for the
//! kernel), marked as already symbolized so no reader tries to symbolize
//! it again. The process (the folded root frame) and the thread are
//! labels, not frames, so `pprof -tagroot=process` puts them back on top;
//! when the run has a tail, each sample is labelled `requests=tail`,
//! `rest` or `other` (on-CPU time not tied to a timed request), and the
//! tail's and the rest's samples of a named endpoint `endpoint=<name>`
//! and `port=<port>` too (`pprof -tagfocus=endpoint=...`).

use std::collections::HashMap;
use std::io::Write as _;

use anyhow::{Context, Result};
use prost::Message;

use super::stacks::{FoldedStack, StackGraph, WeightUnit};

/// profile.proto's `Profile` (the fields sockscope writes).
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each of a sample's values is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The modules.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// One per distinct frame.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// One per distinct frame.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string, referenced by index; the first is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// When the window began, ns since the Unix epoch (0: not said).
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// The window's length.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sample stands for.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// How much of `period_type` one sample stands for.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free text (indices into the string table).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type a reader shows first.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// profile.proto's `ValueType`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// Its name (string index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Its unit (string index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// profile.proto's `Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// The stack, innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Its labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// profile.proto's `Label` (string labels only here).
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// The key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// The value (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
}

/// profile.proto's `Mapping`: here, one module.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The module's path (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Its functions are named already.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// profile.proto's `Location`: here, one frame.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its module's mapping.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Its function.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// profile.proto's `Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// profile.proto's `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name as the folded stacks write it (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// The same name (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Its module (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The label key of the process's name.
pub const PROCESS_LABEL: &str = "process";
/// The label key of the thread's name.
pub const THREAD_LABEL: &str = "thread";
/// The label key that says which requests a sample's time served.
pub const REQUESTS_LABEL: &str = "requests";
/// The `requests` label of the on-CPU time no part claimed.
pub const OTHER_REQUESTS: &str = "other";
/// The label key of the endpoint a sample's request was for.
pub const ENDPOINT_LABEL: &str = "endpoint";
/// The label key of that endpoint's port.
pub const PORT_LABEL: &str = "port";

/// One part of a graph's weight, with its labels (the tail's stacks
/// `requests=tail`, the rest's): carved out of the graph's own samples,
/// so the file's total stays the graph's. A part's `within` parts carve
/// its own weight further (the tail's per endpoint): what they leave
/// keeps only the part's labels.
pub struct Part<'a> {
    /// The labels, (key, value).
    pub labels: Vec<(&'a str, &'a str)>,
    /// Its stacks (a subset of the graph's samples).
    pub stacks: &'a [FoldedStack],
    /// Parts of this part.
    pub within: Vec<Part<'a>>,
}

impl<'a> Part<'a> {
    /// A part with one label and no parts of its own.
    pub fn new(key: &'a str, value: &'a str, stacks: &'a [FoldedStack]) -> Self {
        Part {
            labels: vec![(key, value)],
            stacks,
            within: Vec::new(),
        }
    }
}

/// What the file describes, beyond its graph.
pub struct Meta<'a> {
    /// The on-CPU sampling rate per CPU (one sample = 1/hz s of CPU).
    pub hz: u32,
    /// The window the samples cover.
    pub window_s: f64,
    /// What the file holds, for its comment (after "sockscope VERSION: ").
    pub comment: &'a str,
    /// When the window began (None: not said).
    pub started: Option<std::time::SystemTime>,
}

/// Strings, interned in first-use order, index 0 the empty string.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    ids: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.id("");
        s
    }

    fn id(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.ids.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.ids.insert(v.to_string(), i);
        i
    }
}

/// A weight by (frames, thread), taken from as the graph's samples are
/// labelled.
type Claims = HashMap<(Vec<String>, String), u64>;

/// A stack's weight by thread name, the part no thread claims (an older
/// artifact's, all of it) under "", parts of weight 0 left out.
fn by_thread(st: &FoldedStack) -> Vec<(&str, u64)> {
    let mut out = Vec::with_capacity(st.threads.len() + 1);
    let mut left = st.weight;
    for t in &st.threads {
        let w = t.weight.min(left);
        out.push((t.thread.as_str(), w));
        left -= w;
    }
    out.push(("", left));
    out.retain(|(_, w)| *w > 0);
    out
}

fn claims_of(stacks: &[FoldedStack]) -> Claims {
    let mut c = Claims::new();
    for st in stacks {
        for (thread, w) in by_thread(st) {
            *c.entry((st.frames.clone(), thread.to_string()))
                .or_default() += w;
        }
    }
    c
}

/// Takes up to `want` of the part's weight for `frames` on `thread` (or
/// on no thread, when the part's stacks carry none).
fn take(c: &mut Claims, frames: &[String], thread: &str, want: u64) -> u64 {
    let tries: &[&str] = if thread.is_empty() {
        &[""]
    } else {
        &[thread, ""]
    };
    let mut got = 0;
    for t in tries {
        if let Some(w) = c.get_mut(&(frames.to_vec(), t.to_string())) {
            let n = (*w).min(want - got);
            *w -= n;
            got += n;
        }
    }
    got
}

/// A part's labels and what it has left to claim, its own parts inside.
struct Claimant {
    labels: Vec<Label>,
    claims: Claims,
    within: Vec<Claimant>,
}

impl Claimant {
    fn of(part: &Part<'_>, s: &mut Strings) -> Self {
        Claimant {
            labels: part
                .labels
                .iter()
                .map(|(k, v)| Label {
                    key: s.id(k),
                    str: s.id(v),
                })
                .collect(),
            claims: claims_of(part.stacks),
            within: part.within.iter().map(|p| Claimant::of(p, s)).collect(),
        }
    }
}

/// Splits `w` of `frames` on `thread` among `parts`, each taking what it
/// has left and its own parts splitting that: (labels, weight) pieces,
/// the remainder last with no labels.
fn split(
    parts: &mut [Claimant],
    frames: &[String],
    thread: &str,
    w: u64,
) -> Vec<(Vec<Label>, u64)> {
    let mut pieces = Vec::new();
    let mut rest = w;
    for p in parts.iter_mut() {
        if rest == 0 {
            break;
        }
        let got = take(&mut p.claims, frames, thread, rest);
        if got == 0 {
            continue;
        }
        rest -= got;
        for (mut inner, w) in split(&mut p.within, frames, thread, got) {
            let mut labels = p.labels.clone();
            labels.append(&mut inner);
            pieces.push((labels, w));
        }
    }
    if rest > 0 {
        pieces.push((Vec::new(), rest));
    }
    pieces
}

/// The profile of `g`: one sample per (stack, thread, part) with weight;
/// on-CPU values are samples and CPU nanoseconds (samples x 1/hz),
/// off-CPU values nanoseconds waited.
pub fn profile(g: &StackGraph, parts: &[Part<'_>], meta: &Meta<'_>) -> Profile {
    let mut s = Strings::new();
    let on_cpu = g.unit == WeightUnit::Samples;
    let period_ns = 1_000_000_000 / i64::from(meta.hz.max(1));
    let (sample_type, period_type, period) = if on_cpu {
        let samples = ValueType {
            r#type: s.id("samples"),
            unit: s.id("count"),
        };
        let cpu = ValueType {
            r#type: s.id("cpu"),
            unit: s.id("nanoseconds"),
        };
        (vec![samples, cpu.clone()], cpu, period_ns)
    } else {
        let off = ValueType {
            r#type: s.id("off_cpu"),
            unit: s.id("nanoseconds"),
        };
        (vec![off.clone()], off, 1)
    };
    let default_sample_type = sample_type.last().map_or(0, |t| t.r#type);
    let keys = [s.id(PROCESS_LABEL), s.id(THREAD_LABEL)];
    let mut mappings: HashMap<String, u64> = HashMap::new();
    let mut mapping = Vec::new();
    let mut functions: HashMap<&str, u64> = HashMap::new();
    let (mut function, mut location) = (Vec::new(), Vec::new());
    let mut claimants: Vec<Claimant> = parts.iter().map(|p| Claimant::of(p, &mut s)).collect();
    // What no part claims is `requests=other` when there are parts.
    let other = (!parts.is_empty()).then(|| Label {
        key: s.id(REQUESTS_LABEL),
        str: s.id(OTHER_REQUESTS),
    });
    let mut sample = Vec::new();
    for st in g.stacks.iter().filter(|st| st.weight > 0) {
        let Some((root, frames)) = st.frames.split_first() else {
            continue;
        };
        let mut ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            let id = match functions.get(f.as_str()) {
                Some(&id) => id,
                None => {
                    let module = g.modules.get(f).map_or("[unknown]", String::as_str);
                    let mapping_id = match mappings.get(module) {
                        Some(&m) => m,
                        None => {
                            let m = mapping.len() as u64 + 1;
                            mapping.push(Mapping {
                                id: m,
                                filename: s.id(module),
                                has_functions: true,
                            });
                            mappings.insert(module.to_string(), m);
                            m
                        }
                    };
                    let id = function.len() as u64 + 1;
                    let name = s.id(f);
                    function.push(Function {
                        id,
                        name,
                        system_name: name,
                        filename: s.id(module),
                    });
                    location.push(Location {
                        id,
                        mapping_id,
                        line: vec![Line { function_id: id }],
                    });
                    functions.insert(f.as_str(), id);
                    id
                }
            };
            ids.push(id);
        }
        let process = Label {
            key: keys[0],
            str: s.id(root),
        };
        // What no thread claims has no thread label.
        for (thread, w) in by_thread(st) {
            let mut labels = vec![process.clone()];
            if !thread.is_empty() {
                labels.push(Label {
                    key: keys[1],
                    str: s.id(thread),
                });
            }
            // Each part takes what it has of this stack on this thread;
            // the remainder is `other`.
            for (mut part, w) in split(&mut claimants, &st.frames, thread, w) {
                let mut label = labels.clone();
                if part.is_empty() {
                    label.extend(other.clone());
                }
                label.append(&mut part);
                let w = i64::try_from(w).unwrap_or(i64::MAX);
                let value = if on_cpu {
                    vec![w, w.saturating_mul(period_ns)]
                } else {
                    vec![w]
                };
                sample.push(Sample {
                    location_id: ids.clone(),
                    value,
                    label,
                });
            }
        }
    }
    let comment = vec![s.id(&format!(
        "sockscope {}: {}",
        env!("CARGO_PKG_VERSION"),
        meta.comment
    ))];
    Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: s.table,
        time_nanos: meta
            .started
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        duration_nanos: (meta.window_s.max(0.0) * 1e9) as i64,
        period_type: Some(period_type),
        period,
        comment,
        default_sample_type,
    }
}

/// The profile of `g` as a pprof file's bytes: the message, gzip'd (as
/// profile.proto asks for on disk).
pub fn file_bytes(g: &StackGraph, parts: &[Part<'_>], meta: &Meta<'_>) -> Result<Vec<u8>> {
    let raw = profile(g, parts, meta).encode_to_vec();
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).context("compressing the pprof profile")?;
    z.finish().context("compressing the pprof profile")
}

/// The on-CPU graph of `report` as a pprof file, the tail's and the
/// rest's samples labelled when `tail` is given.
pub fn on_cpu_file(
    report: &super::stacks::StacksReport,
    tail: Option<&super::slow::TailReport>,
) -> Result<Vec<u8>> {
    let ports: Vec<String> = tail
        .map(|t| t.endpoints.iter().map(|e| e.port.to_string()).collect())
        .unwrap_or_default();
    let parts: Vec<Part<'_>> = tail
        .map(|t| {
            let group =
                |label, stacks, of: fn(&super::slow::TailEndpoint) -> &[FoldedStack]| Part {
                    within: t
                        .endpoints
                        .iter()
                        .zip(&ports)
                        .map(|(e, port)| Part {
                            labels: vec![(ENDPOINT_LABEL, e.name.as_str()), (PORT_LABEL, port)],
                            stacks: of(e),
                            within: Vec::new(),
                        })
                        .collect(),
                    ..Part::new(REQUESTS_LABEL, label, stacks)
                };
            vec![
                group("tail", &t.tail_on_cpu.stacks, |e| &e.tail_stacks),
                group("rest", &t.rest_on_cpu.stacks, |e| &e.rest_stacks),
            ]
        })
        .unwrap_or_default();
    let what = format!("on-CPU stacks, {} Hz per CPU", report.hz);
    file_bytes(&report.on_cpu, &parts, &meta_of(report, &what))
}

/// The file's description of `report`'s graph, `what` in its comment.
fn meta_of<'a>(report: &super::stacks::StacksReport, what: &'a str) -> Meta<'a> {
    Meta {
        hz: report.hz,
        window_s: report.cost.window_s,
        comment: what,
        started: None,
    }
}

/// The off-CPU graph of `report` as a pprof file (None when off-CPU time
/// was not sampled).
pub fn off_cpu_file(report: &super::stacks::StacksReport) -> Option<Result<Vec<u8>>> {
    let g = report.off_cpu.as_ref()?;
    Some(file_bytes(
        g,
        &[],
        &meta_of(report, "off-CPU stacks, nanoseconds waited"),
    ))
}

/// A pprof file read back (gunzip, then decode), bounded: for tests and
/// for checking a file sockscope wrote.
pub fn read(bytes: &[u8]) -> Result<Profile> {
    use std::io::Read as _;
    /// Past this a file is refused rather than inflated into memory.
    const MAX_RAW: u64 = 512 << 20;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_RAW + 1)
        .read_to_end(&mut raw)
        .context("not a gzip'd pprof profile")?;
    anyhow::ensure!(
        raw.len() as u64 <= MAX_RAW,
        "the pprof profile inflates past {MAX_RAW} bytes"
    );
    Profile::decode(raw.as_slice()).context("not a pprof profile")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stacks::{FrameKey, KERNEL_MODULE, WeightedStack};
    use proptest::prelude::*;

    fn frame(name: &str, module: &str) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: module.into(),
            kernel: module == KERNEL_MODULE,
        }
    }

    fn ws(thread: &str, frames: &[(&str, &str)], weight: u64) -> WeightedStack {
        WeightedStack {
            process: "srv".into(),
            thread: thread.into(),
            frames: frames.iter().map(|(n, m)| frame(n, m)).collect(),
            weight,
            complete: true,
        }
    }

    fn meta() -> Meta<'static> {
        Meta {
            hz: 100,
            window_s: 2.0,
            comment: "test",
            started: None,
        }
    }

    fn graph(stacks: Vec<WeightedStack>) -> StackGraph {
        StackGraph::build(WeightUnit::Samples, stacks, 10)
    }

    fn label<'a>(p: &'a Profile, s: &Sample, key: &str) -> Option<&'a str> {
        s.label
            .iter()
            .find(|l| p.string_table[l.key as usize] == key)
            .map(|l| p.string_table[l.str as usize].as_str())
    }

    fn leaf<'a>(p: &'a Profile, s: &Sample) -> &'a str {
        let loc = &p.location[s.location_id[0] as usize - 1];
        let f = &p.function[loc.line[0].function_id as usize - 1];
        &p.string_table[f.name as usize]
    }

    #[test]
    fn samples_keep_the_graphs_weights_names_modules_and_threads() {
        let app = "/srv/app";
        let g = graph(vec![
            ws("w1", &[("main", app), ("hot", app)], 6),
            ws("w2", &[("main", app), ("hot", app)], 2),
            ws(
                "w1",
                &[("main", app), ("send", app), ("tcp_sendmsg", KERNEL_MODULE)],
                3,
            ),
        ]);
        let p = read(&file_bytes(&g, &[], &meta()).unwrap()).unwrap();
        assert_eq!(p.string_table[0], "");
        let samples: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(samples as u64, g.total);
        let cpu: i64 = p.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(cpu, 11 * 10_000_000);
        assert_eq!(p.period, 10_000_000);
        let hot_w1: i64 = p
            .sample
            .iter()
            .filter(|s| leaf(&p, s) == "hot" && label(&p, s, THREAD_LABEL) == Some("w1"))
            .map(|s| s.value[0])
            .sum();
        assert_eq!(hot_w1, 6);
        assert!(
            p.sample
                .iter()
                .all(|s| label(&p, s, PROCESS_LABEL) == Some("srv"))
        );
        assert!(
            p.sample
                .iter()
                .all(|s| label(&p, s, REQUESTS_LABEL).is_none())
        );
        let k = p
            .sample
            .iter()
            .find(|s| leaf(&p, s) == "tcp_sendmsg_[k]")
            .expect("the kernel frame, marked");
        let loc = &p.location[k.location_id[0] as usize - 1];
        let m = &p.mapping[loc.mapping_id as usize - 1];
        assert_eq!(p.string_table[m.filename as usize], KERNEL_MODULE);
        assert!(p.mapping.iter().all(|m| m.has_functions));
        // Innermost first: the kernel frame, then send, then main.
        assert_eq!(k.location_id.len(), 3);
    }

    #[test]
    fn parts_carve_the_requests_label_out_of_the_graph() {
        let app = "/srv/app";
        let all = graph(vec![
            ws("w", &[("main", app), ("slow", app)], 5),
            ws("w", &[("main", app), ("fast", app)], 7),
        ]);
        let tail = graph(vec![ws("w", &[("main", app), ("slow", app)], 4)]);
        let rest = graph(vec![
            ws("w", &[("main", app), ("fast", app)], 6),
            // More than the graph has: only what is there is claimed.
            ws("w", &[("main", app), ("slow", app)], 9),
        ]);
        let parts = [
            Part::new(REQUESTS_LABEL, "tail", &tail.stacks),
            Part::new(REQUESTS_LABEL, "rest", &rest.stacks),
        ];
        let p = profile(&all, &parts, &meta());
        let by = |leaf_name: &str, req: &str| -> i64 {
            p.sample
                .iter()
                .filter(|s| leaf(&p, s) == leaf_name && label(&p, s, REQUESTS_LABEL) == Some(req))
                .map(|s| s.value[0])
                .sum()
        };
        assert_eq!(by("slow", "tail"), 4);
        assert_eq!(by("slow", "rest"), 1);
        assert_eq!(by("fast", "rest"), 6);
        assert_eq!(by("fast", OTHER_REQUESTS), 1);
        let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(total as u64, all.total);
    }

    #[test]
    fn a_parts_own_parts_label_its_weight_further_and_leave_the_rest_to_it() {
        let app = "/srv/app";
        let all = graph(vec![
            ws("w", &[("main", app), ("slow", app)], 10),
            ws("w", &[("main", app), ("fast", app)], 5),
        ]);
        let tail = graph(vec![ws("w", &[("main", app), ("slow", app)], 8)]);
        let rest = graph(vec![ws("w", &[("main", app), ("fast", app)], 5)]);
        // /a's tail has 5 of the slow samples, /b's 2 (1 of the tail's is
        // no endpoint's); /b claims more of the rest than the rest has.
        let a_tail = graph(vec![ws("w", &[("main", app), ("slow", app)], 5)]);
        let b_tail = graph(vec![ws("w", &[("main", app), ("slow", app)], 2)]);
        let b_rest = graph(vec![ws("w", &[("main", app), ("fast", app)], 9)]);
        let ep = |name, stacks| Part {
            labels: vec![(ENDPOINT_LABEL, name), (PORT_LABEL, "80")],
            stacks,
            within: Vec::new(),
        };
        let parts = [
            Part {
                within: vec![ep("/a", &a_tail.stacks), ep("/b", &b_tail.stacks)],
                ..Part::new(REQUESTS_LABEL, "tail", &tail.stacks)
            },
            Part {
                within: vec![ep("/b", &b_rest.stacks)],
                ..Part::new(REQUESTS_LABEL, "rest", &rest.stacks)
            },
        ];
        let p = profile(&all, &parts, &meta());
        let by = |req: &str, endpoint: Option<&str>| -> i64 {
            p.sample
                .iter()
                .filter(|s| {
                    label(&p, s, REQUESTS_LABEL) == Some(req)
                        && label(&p, s, ENDPOINT_LABEL) == endpoint
                })
                .map(|s| s.value[0])
                .sum()
        };
        assert_eq!(by("tail", Some("/a")), 5);
        assert_eq!(by("tail", Some("/b")), 2);
        assert_eq!(by("tail", None), 1);
        assert_eq!(by("rest", Some("/b")), 5);
        assert_eq!(by("rest", None), 0);
        assert_eq!(by(OTHER_REQUESTS, None), 2);
        assert!(
            p.sample
                .iter()
                .filter(|s| label(&p, s, ENDPOINT_LABEL).is_some())
                .all(|s| label(&p, s, PORT_LABEL) == Some("80"))
        );
        let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(total as u64, all.total);
    }

    #[test]
    fn off_cpu_graphs_are_nanoseconds_waited() {
        let g = StackGraph::build(
            WeightUnit::Nanoseconds,
            vec![ws(
                "w",
                &[("main", "/a"), ("futex_wait", KERNEL_MODULE)],
                5_000,
            )],
            10,
        );
        let p = profile(&g, &[], &meta());
        assert_eq!(p.sample_type.len(), 1);
        assert_eq!(p.string_table[p.sample_type[0].r#type as usize], "off_cpu");
        assert_eq!(p.sample[0].value, vec![5_000]);
    }

    #[test]
    fn a_graph_from_an_older_artifact_without_threads_or_modules_still_writes() {
        let mut g = graph(vec![ws("", &[("main", "/a")], 3)]);
        g.modules.clear();
        let p = profile(&g, &[], &meta());
        assert_eq!(p.sample.len(), 1);
        assert_eq!(label(&p, &p.sample[0], THREAD_LABEL), None);
        let m = &p.mapping[0];
        assert_eq!(p.string_table[m.filename as usize], "[unknown]");
    }

    proptest! {
        /// Any graph's file decodes to samples adding up to its total,
        /// every id it references defined.
        #[test]
        fn any_graph_round_trips_with_its_total(
            stacks in prop::collection::vec(
                (
                    prop::collection::vec("[a-z;\\n _]{0,6}", 0..6),
                    "[a-z]{0,3}",
                    1u64..1000,
                ),
                0..20,
            ),
        ) {
            let g = graph(
                stacks
                    .iter()
                    .map(|(fs, t, w)| WeightedStack {
                        process: "p".into(),
                        thread: t.clone(),
                        frames: fs.iter().map(|f| frame(f, "/m")).collect(),
                        weight: *w,
                        complete: true,
                    })
                    .collect(),
            );
            let p = read(&file_bytes(&g, &[], &meta()).unwrap()).unwrap();
            let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
            prop_assert_eq!(total as u64, g.total);
            for s in &p.sample {
                for id in &s.location_id {
                    prop_assert!(*id >= 1 && (*id as usize) <= p.location.len());
                }
                for l in &s.label {
                    prop_assert!((l.key as usize) < p.string_table.len());
                    prop_assert!((l.str as usize) < p.string_table.len());
                }
            }
        }

        /// Bytes that are not a profile are an error, never a panic.
        #[test]
        fn mutated_files_never_panic(flips in prop::collection::vec((0usize..4096, any::<u8>()), 1..8)) {
            let g = graph(vec![ws("w", &[("main", "/a"), ("hot", "/a")], 3)]);
            let mut bytes = file_bytes(&g, &[], &meta()).unwrap();
            for (at, b) in flips {
                let n = bytes.len();
                bytes[at % n] ^= b;
            }
            let _ = read(&bytes);
            let _ = Profile::decode(bytes.as_slice());
        }
    }
}
