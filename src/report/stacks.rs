//! The stacks section of a profile or trace artifact: on-CPU samples and
//! off-CPU time as folded stacks (root first, the process name as the
//! root frame, kernel frames marked `_[k]` as FlameGraph's
//! stackcollapse-perf marks them), the top functions, the modules that had
//! no symbols, and what the sampling cost.
//!
//! [`StackGraph::build`] is the one place a graph is made from stacks
//! (the producer calls it); [`folded_text`] writes a graph as the lines
//! FlameGraph and inferno read. Everything that renders a graph (the
//! flame graphs of `report::flame`, the tables of `report::stacks_text`,
//! `report::stacks_compare`) reads these types only.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// What the stacks of a run say.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StacksReport {
    /// The cpu-clock sampling frequency per CPU (Hz).
    pub hz: u32,
    /// Where the CPU went: one unit of weight per sample.
    pub on_cpu: StackGraph,
    /// Where the threads waited: weight in ns of off-CPU time. Absent when
    /// off-CPU sampling was off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<StackGraph>,
    /// Modules whose frames could not be named, and what would name them.
    #[serde(default)]
    pub unsymbolized: Vec<ModuleNote>,
    /// What the sampling, unwinding and symbolization cost.
    pub cost: StacksCost,
    /// Caveats (samples lost, unwinding cut short, processes gone before
    /// they could be symbolized).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The unit of a graph's weights.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WeightUnit {
    /// cpu-clock samples.
    #[default]
    Samples,
    /// Nanoseconds (off-CPU time).
    Nanoseconds,
}

/// One graph: the folded stacks and what they add up to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StackGraph {
    /// What a weight counts.
    pub unit: WeightUnit,
    /// The sum of the stacks' weights.
    pub total: u64,
    /// Share of the weight (0..1) whose user stack was unwound to its
    /// outermost frame (`_start`, a thread's start routine); the rest was
    /// cut short (copy too small, no unwind information, a corrupt frame).
    pub complete_share: f64,
    /// Share of the weight (0..1) with more than three frames.
    pub deep_share: f64,
    /// Distinct stacks, heaviest first.
    pub stacks: Vec<FoldedStack>,
    /// The functions with the most weight, by self weight, from the
    /// stacks that did not pass through sockscope's own hooks.
    pub top: Vec<TopFunction>,
    /// Weight of the stacks with a frame in one of sockscope's own BPF
    /// programs ([`SOCKSCOPE_MODULE`]): its hooks' cost seen from the
    /// target's stacks, left out of `top` (0 in older artifacts).
    #[serde(default)]
    pub sockscope_weight: u64,
    /// The module of each frame (by its folded text; the first seen when
    /// two modules have a function of one name): pprof's mappings. Empty
    /// in artifacts older than this map.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modules: BTreeMap<String, String>,
}

/// One distinct stack and its weight.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FoldedStack {
    /// Frames root first: the process name, then user frames from the
    /// outermost, then kernel frames (each ending in `_[k]`).
    pub frames: Vec<String>,
    /// Samples, or ns.
    pub weight: u64,
    /// The weight by thread name (the threads' comm), heaviest first;
    /// empty in artifacts older than this breakdown. pprof's `thread`
    /// label is read from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadWeight>,
}

/// One thread name's part of a stack's weight.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadWeight {
    /// The thread's name, sanitized as a frame is.
    pub thread: String,
    /// Samples, or ns.
    pub weight: u64,
}

/// One function's weight.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TopFunction {
    /// The function's name (or `module+0xoffset` when it had none).
    pub name: String,
    /// The module it is in (`[kernel]` for the kernel).
    pub module: String,
    /// A kernel function.
    pub kernel: bool,
    /// Weight of the samples it was the innermost frame of.
    pub self_weight: u64,
    /// Weight of the samples it was anywhere on the stack of (once each).
    pub total_weight: u64,
    /// `self_weight` over the graph's total.
    pub self_share: f64,
    /// `total_weight` over the graph's total.
    pub total_share: f64,
}

/// A module whose frames had no name.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ModuleNote {
    /// Its path as the process mapped it.
    pub path: String,
    /// Frames (over all samples) that fell in it unnamed.
    pub frames: u64,
    /// What would give it names (its -dbgsym package, an unstripped build).
    pub hint: String,
}

/// What the stacks cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StacksCost {
    /// On-CPU samples taken in scope.
    pub samples: u64,
    /// Off-CPU samples taken.
    pub off_cpu_samples: u64,
    /// Samples lost (ring buffer full, stack copy failed).
    pub lost: u64,
    /// CPU the BPF programs ran for, ns.
    pub bpf_ns: u64,
    /// sockscope's CPU unwinding, ns.
    pub unwind_ns: u64,
    /// sockscope's CPU symbolizing, ns.
    pub symbolize_ns: u64,
    /// The window the samples cover, seconds.
    pub window_s: f64,
    /// `bpf_ns + unwind_ns` over the target's CPU in the window (None when
    /// the target's CPU is unknown).
    pub target_share: Option<f64>,
    /// `bpf_ns + unwind_ns + symbolize_ns` over the machine's CPU time in
    /// the window (window x CPUs).
    pub machine_share: f64,
    /// cpu-clock ticks that fired on every CPU, whatever ran there (0 in
    /// artifacts older than this count).
    #[serde(default)]
    pub ticks: u64,
    /// Periods with no tick, counted on each CPU from the time since its
    /// previous tick: time no cpu-clock sampler saw (a virtual CPU's timer
    /// may not fire for tens of ms at a time, or while that CPU idles).
    #[serde(default)]
    pub ticks_missed: u64,
    /// On-CPU samples over those due at the rate for the target's CPU time
    /// in the window (1.0: every period it ran has its sample; None when
    /// its CPU time is unknown).
    #[serde(default)]
    pub coverage: Option<f64>,
}

/// The suffix FlameGraph's stackcollapse-perf puts on kernel frames, which
/// inferno's palettes colour apart.
pub const KERNEL_SUFFIX: &str = "_[k]";

/// The module a kernel frame is in.
pub const KERNEL_MODULE: &str = "[kernel]";

/// The module of a frame in one of sockscope's own BPF programs (its
/// syscall tracer's, request anatomy's or sampler's hooks, which run in
/// the target's threads): sockscope's cost seen from the target's stacks.
pub const SOCKSCOPE_MODULE: &str = "[sockscope]";

/// What such a frame's name starts with (then the kernel's name of the
/// program, `bpf_prog_<tag>_<name>`), so folded stacks say it too.
pub const SOCKSCOPE_PREFIX: &str = "[sockscope] ";

/// One frame as the symbolizer named it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FrameKey {
    /// The function's name (or `module+0xoffset` when it had none).
    pub name: String,
    /// The module it is in (`[kernel]` for the kernel).
    pub module: String,
    /// A kernel frame.
    pub kernel: bool,
}

/// One sampled stack and its weight, as the producer hands it over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightedStack {
    /// The process's name (its comm), the graph's root frame.
    pub process: String,
    /// The sampled thread's name (its comm; empty when unknown).
    pub thread: String,
    /// The frames, root first: user frames from the outermost, then the
    /// kernel's.
    pub frames: Vec<FrameKey>,
    /// Samples, or ns off-CPU.
    pub weight: u64,
    /// The user stack was unwound to its outermost frame.
    pub complete: bool,
}

/// A name made safe for one frame of a folded line: control characters
/// written out ([`crate::text::escape`], newlines too), `;` (the frame
/// separator) as `:`, as stackcollapse-perf does, and an empty name as
/// `[unknown]`. Idempotent, so a graph read back from JSON can go through
/// it again.
pub fn sanitize(name: &str) -> String {
    let s = crate::text::escape(name.trim()).replace(';', ":");
    if s.is_empty() { "[unknown]".into() } else { s }
}

/// A folded frame's text: the sanitized name, `_[k]` after a kernel
/// function's.
pub fn frame_text(f: &FrameKey) -> String {
    let name = sanitize(&f.name);
    if f.kernel && !name.ends_with(KERNEL_SUFFIX) {
        name + KERNEL_SUFFIX
    } else {
        name
    }
}

/// The root frame: the process name, sanitized; inferno skips a line that
/// starts with `# ` (a comment), so such a name gets `#_`.
fn root_text(process: &str) -> String {
    let s = sanitize(process);
    match s.strip_prefix("# ") {
        Some(rest) => format!("#_{rest}"),
        None => s,
    }
}

/// `part` over `whole` (0 when `whole` is).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Frames below the process frame beyond which a stack counts as deep.
const DEEP: usize = 3;

impl StackGraph {
    /// The graph of `stacks`: identical folded stacks merged, heaviest
    /// first (ties in frame order, so the same input gives the same
    /// graph); the `top_n` functions by self weight, each function's
    /// total weight counted once per stack even when it recurses; the
    /// complete and deep shares by weight.
    pub fn build(unit: WeightUnit, stacks: Vec<WeightedStack>, top_n: usize) -> StackGraph {
        let mut merged: HashMap<Vec<String>, (u64, BTreeMap<String, u64>)> = HashMap::new();
        let mut modules: BTreeMap<String, String> = BTreeMap::new();
        let mut funcs: HashMap<FrameKey, (u64, u64)> = HashMap::new();
        let (mut total, mut complete, mut deep, mut ours) = (0u64, 0u64, 0u64, 0u64);
        for st in stacks {
            let w = st.weight;
            total += w;
            if st.complete {
                complete += w;
            }
            if st.frames.len() > DEEP {
                deep += w;
            }
            // One key per function: names are compared as they will be
            // shown, so two spellings that sanitize alike are one row.
            let keys: Vec<FrameKey> = st
                .frames
                .iter()
                .map(|f| FrameKey {
                    name: sanitize(&f.name),
                    module: f.module.clone(),
                    kernel: f.kernel,
                })
                .collect();
            // A stack through sockscope's own hooks is its cost, not the
            // target's functions: counted apart, left out of the table.
            if keys.iter().any(|k| k.module == SOCKSCOPE_MODULE) {
                ours += w;
            } else {
                if let Some(inner) = keys.last() {
                    funcs.entry(inner.clone()).or_default().0 += w;
                }
                let mut seen = HashSet::new();
                for k in &keys {
                    if seen.insert(k) {
                        funcs.entry(k.clone()).or_default().1 += w;
                    }
                }
            }
            let texts: Vec<String> = st.frames.iter().map(frame_text).collect();
            for (t, f) in texts.iter().zip(&st.frames) {
                if !modules.contains_key(t) {
                    modules.insert(t.clone(), f.module.clone());
                }
            }
            let folded: Vec<String> = std::iter::once(root_text(&st.process))
                .chain(texts)
                .collect();
            let e = merged.entry(folded).or_default();
            e.0 += w;
            if !st.thread.is_empty() {
                *e.1.entry(sanitize(&st.thread)).or_default() += w;
            }
        }
        let mut stacks: Vec<FoldedStack> = merged
            .into_iter()
            .map(|(frames, (weight, by_thread))| {
                let mut threads: Vec<ThreadWeight> = by_thread
                    .into_iter()
                    .map(|(thread, weight)| ThreadWeight { thread, weight })
                    .collect();
                threads.sort_by(|a, b| {
                    b.weight
                        .cmp(&a.weight)
                        .then_with(|| a.thread.cmp(&b.thread))
                });
                FoldedStack {
                    frames,
                    weight,
                    threads,
                }
            })
            .collect();
        stacks.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| a.frames.cmp(&b.frames))
        });
        let mut top: Vec<TopFunction> = funcs
            .into_iter()
            .map(|(k, (self_weight, total_weight))| TopFunction {
                self_share: share(self_weight, total),
                total_share: share(total_weight, total),
                name: k.name,
                module: k.module,
                kernel: k.kernel,
                self_weight,
                total_weight,
            })
            .collect();
        top.sort_by(|a, b| {
            b.self_weight
                .cmp(&a.self_weight)
                .then(b.total_weight.cmp(&a.total_weight))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.module.cmp(&b.module))
        });
        top.truncate(top_n);
        StackGraph {
            unit,
            total,
            complete_share: share(complete, total),
            deep_share: share(deep, total),
            stacks,
            top,
            sockscope_weight: ours,
            modules,
        }
    }

    /// The share of the weight in sockscope's own hooks.
    pub fn sockscope_share(&self) -> f64 {
        share(self.sockscope_weight, self.total)
    }

    /// The function with the most self weight, if any weight was sampled.
    pub fn hottest(&self) -> Option<&TopFunction> {
        self.top.first().filter(|t| t.self_weight > 0)
    }
}

/// Self and total shares of every function (by folded frame text) in
/// `g`, the process frame left out; a function's total counted once per
/// stack (`compare`'s growth and the tail's side-by-side rows read them).
pub fn shares(g: &StackGraph) -> HashMap<&str, (f64, f64)> {
    let mut w: HashMap<&str, (u64, u64)> = HashMap::new();
    for st in &g.stacks {
        let frames = st.frames.get(1..).unwrap_or_default();
        if let Some(inner) = frames.last() {
            w.entry(inner.as_str()).or_default().0 += st.weight;
        }
        let mut seen = HashSet::new();
        for f in frames {
            if seen.insert(f.as_str()) {
                w.entry(f.as_str()).or_default().1 += st.weight;
            }
        }
    }
    let total = g.total.max(1) as f64;
    w.into_iter()
        .map(|(k, (s, t))| (k, (s as f64 / total, t as f64 / total)))
        .collect()
}

/// The graph as folded stacks, one `frame;frame;... weight` line per
/// stack (FlameGraph's and inferno's input). Every frame is sanitized
/// again, so a graph read from an artifact someone edited cannot break
/// a line; a stack of weight 0 or no frames is left out.
pub fn folded_text(g: &StackGraph) -> String {
    let mut s = String::new();
    for st in g.stacks.iter().filter(|st| st.weight > 0) {
        let mut frames = st.frames.iter();
        let Some(root) = frames.next() else {
            continue;
        };
        s.push_str(&root_text(root));
        for f in frames {
            s.push(';');
            s.push_str(&sanitize(f));
        }
        let _ = writeln!(s, " {}", st.weight);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: "/srv/app".into(),
            kernel: false,
        }
    }

    fn kernel(name: &str) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: KERNEL_MODULE.into(),
            kernel: true,
        }
    }

    fn stack(frames: Vec<FrameKey>, weight: u64, complete: bool) -> WeightedStack {
        WeightedStack {
            process: "app".into(),
            thread: "app".into(),
            frames,
            weight,
            complete,
        }
    }

    fn top<'a>(g: &'a StackGraph, name: &str) -> &'a TopFunction {
        g.top.iter().find(|t| t.name == name).expect(name)
    }

    #[test]
    fn stacks_through_sockscopes_hooks_are_counted_apart_and_left_out_of_the_top() {
        let hook = FrameKey {
            name: "[sockscope] bpf_prog_0123456789abcdef_ss_sys_enter".into(),
            module: SOCKSCOPE_MODULE.into(),
            kernel: true,
        };
        let g = StackGraph::build(
            WeightUnit::Samples,
            vec![
                stack(
                    vec![
                        user("main"),
                        kernel("do_syscall_64"),
                        hook.clone(),
                        kernel("bpf_ktime_get_ns"),
                    ],
                    21,
                    true,
                ),
                stack(
                    vec![user("main"), kernel("do_syscall_64"), kernel("tcp_sendmsg")],
                    79,
                    true,
                ),
            ],
            10,
        );
        assert_eq!((g.total, g.sockscope_weight), (100, 21));
        assert!((g.sockscope_share() - 0.21).abs() < 1e-9);
        // Neither the hook nor what it called is a top function; shares
        // stay of all samples.
        assert!(g.top.iter().all(|t| t.module != SOCKSCOPE_MODULE));
        assert!(g.top.iter().all(|t| t.name != "bpf_ktime_get_ns"));
        assert_eq!(top(&g, "tcp_sendmsg").self_share, 0.79);
        assert_eq!(top(&g, "main").total_share, 0.79);
        // The flame graph keeps them, marked.
        assert!(folded_text(&g).contains("[sockscope] bpf_prog_0123456789abcdef_ss_sys_enter_[k]"));
        let line = crate::report::stacks_text::hooks_line(&g).unwrap();
        assert!(
            line.starts_with("sockscope's tracer hooks: 21.0 % of samples"),
            "{line}"
        );
        assert!(line.contains("left out of the top functions"), "{line}");
        let mut r = crate::report::fixtures::stacks(1);
        r.on_cpu = g;
        assert!(
            crate::report::stacks_text::render(&r).contains("sockscope's tracer hooks: 21.0 %")
        );
    }

    #[test]
    fn build_merges_stacks_and_counts_a_recursive_function_once() {
        let rec = || vec![user("main"), user("walk"), user("walk"), user("walk")];
        let g = StackGraph::build(
            WeightUnit::Samples,
            vec![
                stack(rec(), 5, true),
                stack(
                    vec![user("main"), user("send"), kernel("tcp_sendmsg")],
                    3,
                    true,
                ),
                // The same stack again: merged with the first.
                stack(rec(), 2, false),
            ],
            10,
        );
        assert_eq!(g.total, 10);
        assert_eq!(
            g.stacks,
            vec![
                FoldedStack {
                    frames: ["app", "main", "walk", "walk", "walk"]
                        .map(String::from)
                        .to_vec(),
                    weight: 7,
                    threads: vec![ThreadWeight {
                        thread: "app".into(),
                        weight: 7,
                    }],
                },
                FoldedStack {
                    frames: ["app", "main", "send", "tcp_sendmsg_[k]"]
                        .map(String::from)
                        .to_vec(),
                    weight: 3,
                    threads: vec![ThreadWeight {
                        thread: "app".into(),
                        weight: 3,
                    }],
                },
            ],
            "merged, heaviest first, kernel frames marked"
        );
        assert_eq!(g.modules["tcp_sendmsg_[k]"], KERNEL_MODULE);
        assert_eq!(g.modules["walk"], "/srv/app");
        let walk = top(&g, "walk");
        assert_eq!(
            (walk.self_weight, walk.total_weight),
            (7, 7),
            "recursion once"
        );
        assert!((walk.self_share - 0.7).abs() < 1e-9 && (walk.total_share - 0.7).abs() < 1e-9);
        let main = top(&g, "main");
        assert_eq!((main.self_weight, main.total_weight), (0, 10));
        let k = top(&g, "tcp_sendmsg");
        assert!(k.kernel && k.module == KERNEL_MODULE);
        assert_eq!((k.self_weight, k.total_weight), (3, 3));
        assert!(!top(&g, "send").kernel);
        // By self weight, then total.
        let order: Vec<&str> = g.top.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(order, ["walk", "tcp_sendmsg", "main", "send"]);
        assert_eq!(g.hottest().unwrap().name, "walk");
        // 8 of 10 complete (2 of the merged stack's were cut short); only
        // the recursive stack has more than 3 frames below the process.
        assert!(
            (g.complete_share - 0.8).abs() < 1e-9,
            "{}",
            g.complete_share
        );
        assert!((g.deep_share - 0.7).abs() < 1e-9, "{}", g.deep_share);
        // top_n keeps the heaviest.
        let two = StackGraph::build(WeightUnit::Samples, vec![stack(rec(), 1, true)], 1);
        assert_eq!(two.top.len(), 1);
        // Nothing sampled: no shares, no NaN, no hottest function.
        let none = StackGraph::build(WeightUnit::Samples, vec![], 10);
        assert_eq!((none.total, none.complete_share), (0, 0.0));
        assert!(none.hottest().is_none() && folded_text(&none).is_empty());
    }

    #[test]
    fn names_are_sanitized_for_the_folded_format() {
        let g = StackGraph::build(
            WeightUnit::Samples,
            vec![WeightedStack {
                process: "# evil;name\n".into(),
                thread: "t;\nx".into(),
                frames: vec![
                    user("operator<<(std::ostream&; int)"),
                    user("bad\nname\x1b[31m"),
                    user(""),
                    kernel("ksys_write"),
                ],
                weight: 4,
                complete: true,
            }],
            10,
        );
        let text = folded_text(&g);
        assert_eq!(
            text,
            "#_evil:name;operator<<(std::ostream&: int);bad\\nname\\x1b[31m;[unknown];\
             ksys_write_[k] 4\n"
        );
        assert_eq!(text.lines().count(), 1);
        assert!(!text.trim_end().chars().any(char::is_control));
        // The thread's name too, as pprof's label.
        assert_eq!(g.stacks[0].threads[0].thread, "t:\\nx");
        // Sanitizing is idempotent: a graph read back renders the same.
        let again = folded_text(&g);
        assert_eq!(again, text);
        assert_eq!(sanitize(&sanitize("a;b\tc")), sanitize("a;b\tc"));
        // A hand-edited artifact's frame cannot break a line either.
        let mut edited = g.clone();
        edited.stacks[0].frames.push("x;y\nz 9".into());
        let line = folded_text(&edited);
        assert_eq!(line.lines().count(), 1);
        assert!(line.ends_with(";x:y\\nz 9 4\n"), "{line}");
    }

    #[test]
    fn folded_text_is_what_inferno_draws_from() {
        let r = crate::report::fixtures::stacks(1);
        let text = folded_text(&r.on_cpu);
        // Back from the lines: the same stacks and weights.
        let back: Vec<FoldedStack> = text
            .lines()
            .map(|l| {
                let (frames, w) = l.rsplit_once(' ').unwrap();
                FoldedStack {
                    frames: frames.split(';').map(String::from).collect(),
                    weight: w.parse().unwrap(),
                    threads: Vec::new(),
                }
            })
            .collect();
        let mut whole = r.on_cpu.stacks.clone();
        whole.iter_mut().for_each(|s| s.threads.clear());
        assert_eq!(back, whole);
        // inferno reads it as it is (no collapse step) and accounts for
        // every sample.
        let mut svg = Vec::new();
        inferno::flamegraph::from_lines(
            &mut inferno::flamegraph::Options::default(),
            text.lines(),
            &mut svg,
        )
        .unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains(&format!("total_samples=\"{}\"", r.on_cpu.total)));
        assert!(svg.contains("<title>ngx_http_parse_request_line (40 samples, 40.00%)"));
        assert!(svg.contains("<title>tcp_sendmsg (35 samples, 35.00%)"));
    }

    #[test]
    fn an_artifact_without_stacks_fields_still_reads() {
        // Written before off_cpu, unsymbolized and notes existed.
        let old = serde_json::json!({
            "hz": 99,
            "on_cpu": {"unit": "samples", "total": 1, "complete_share": 1.0, "deep_share": 0.0,
                       "stacks": [{"frames": ["a", "b"], "weight": 1}], "top": []},
            "cost": {"samples": 1, "off_cpu_samples": 0, "lost": 0, "bpf_ns": 0, "unwind_ns": 0,
                     "symbolize_ns": 0, "window_s": 1.0, "target_share": null, "machine_share": 0.0}
        });
        let r: StacksReport = serde_json::from_value(old).unwrap();
        assert!(r.off_cpu.is_none() && r.notes.is_empty());
        assert_eq!(folded_text(&r.on_cpu), "a;b 1\n");
    }
}
