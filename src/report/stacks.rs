//! The stacks section of a profile or trace artifact: on-CPU samples and
//! off-CPU time as folded stacks (root first, the process name as the
//! root frame, kernel frames marked `_[k]` as FlameGraph's
//! stackcollapse-perf marks them), the top functions, the modules that had
//! no symbols, and what the sampling cost.

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
    /// The functions with the most weight, by self weight.
    pub top: Vec<TopFunction>,
}

/// One distinct stack and its weight.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FoldedStack {
    /// Frames root first: the process name, then user frames from the
    /// outermost, then kernel frames (each ending in `_[k]`).
    pub frames: Vec<String>,
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
}
