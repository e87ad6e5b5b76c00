//! The stacks of a node agent (`trace --requests-only --stacks --metrics`),
//! as the exporter serves them: per command, on-CPU samples by innermost
//! function since the agent started (counters, bounded by `--max-series`),
//! and the last complete window's whole graph as a pprof profile.
//!
//! An agent runs for days, so nothing here grows with time: the sampling
//! thread keeps one window's graph at a time (`--stack-window`, 60 s by
//! default) and starts afresh after each, and the counters' label sets are
//! admitted first come, first kept, up to the bound; samples past it are
//! counted under their command's `function="(other)"` while that series
//! can be admitted, then under `comm="(other)"`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::report::stacks::{FrameKey, frame_text};
use crate::series::{OTHER, Sticky};

/// The default window of the agent's pprof profile.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// The shortest window accepted.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window accepted (its graph is held in memory).
pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// The function label of a sample with no frame at all.
pub const NO_FRAME: &str = "[no frame]";

/// A counter's labels: (command, function, module).
pub type LeafKey = (String, String, String);

/// What the sampling thread publishes for the exporter.
#[derive(Debug)]
pub struct Exported {
    hz: u32,
    window: Duration,
    leaves: HashMap<LeafKey, u64>,
    admission: Sticky<LeafKey>,
    lost: u64,
    bpf_ns: u64,
    cache: ModuleCacheStats,
    last: Option<Arc<Vec<u8>>>,
}

/// What the agent's resolver holds to unwind and name frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleCacheStats {
    /// Bytes its modules hold now (an estimate: unwind sections, FDE
    /// tables, symbol tables and their index, private copies).
    pub held: u64,
    /// The most it keeps before dropping the least recently sampled.
    pub budget: u64,
    /// Modules dropped to keep to the budget, since the start.
    pub evicted: u64,
}

/// The state the sampling thread and the exporter share.
pub type Shared = Arc<Mutex<Exported>>;

impl Exported {
    /// A fresh state: samples at `hz` per CPU, a pprof per `window`, at
    /// most `max_series` counters under their own labels.
    pub fn shared(hz: u32, window: Duration, max_series: usize) -> Shared {
        Arc::new(Mutex::new(Exported {
            hz,
            window,
            leaves: HashMap::new(),
            admission: Sticky::new(max_series),
            lost: 0,
            bpf_ns: 0,
            cache: ModuleCacheStats::default(),
            last: None,
        }))
    }

    /// Counts `weight` on-CPU samples of process `comm` whose innermost
    /// frame is `leaf` (None: no frame at all).
    pub fn add(&mut self, comm: &str, leaf: Option<&FrameKey>, weight: u64) {
        let comm = crate::text::escape(comm).into_owned();
        let (function, module) = match leaf {
            Some(f) => (frame_text(f), crate::text::escape(&f.module).into_owned()),
            None => (NO_FRAME.to_string(), String::new()),
        };
        // A command's own "(other)" is admitted before its first function,
        // so that once the bound is reached its further functions keep its
        // name; a command first seen past the bound has none.
        let of_comm = (comm.clone(), OTHER.to_string(), String::new());
        let key = if !self.admission.admit_untracked(&of_comm) {
            (OTHER.to_string(), OTHER.to_string(), String::new())
        } else {
            let own = (comm, function, module);
            if self.admission.admit_untracked(&own) {
                own
            } else {
                of_comm
            }
        };
        *self.leaves.entry(key).or_default() += weight;
    }

    /// Sets the sampler's own counters (since it started).
    pub fn set_counters(&mut self, lost: u64, bpf_ns: u64) {
        self.lost = lost;
        self.bpf_ns = bpf_ns;
    }

    /// Sets what the resolver holds and has dropped.
    pub fn set_cache(&mut self, cache: ModuleCacheStats) {
        self.cache = cache;
    }

    /// What the resolver holds and has dropped.
    pub fn cache(&self) -> ModuleCacheStats {
        self.cache
    }

    /// Replaces the last complete window's profile (gzip'd
    /// profile.proto, which says when the window began and how long it
    /// was).
    pub fn set_profile(&mut self, pprof: Vec<u8>) {
        self.last = Some(Arc::new(pprof));
    }

    /// Per label set, the samples counted so far.
    pub fn leaves(&self) -> &HashMap<LeafKey, u64> {
        &self.leaves
    }

    /// Samples per second per CPU.
    pub fn hz(&self) -> u32 {
        self.hz
    }

    /// The pprof's window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Samples lost (the ring buffer was full) since the start.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// The sampler's programs' own run time since the start, ns.
    pub fn bpf_ns(&self) -> u64 {
        self.bpf_ns
    }

    /// The last complete window's profile (None before the first ends).
    pub fn last_profile(&self) -> Option<Arc<Vec<u8>>> {
        self.last.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, module: &str, kernel: bool) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: module.into(),
            kernel,
        }
    }

    #[test]
    fn samples_are_counted_by_command_and_innermost_function_within_the_bound() {
        // Four series: app's "(other)", then three of its functions.
        let shared = Exported::shared(19, DEFAULT_WINDOW, 4);
        let mut e = shared.lock().unwrap();
        let hot = frame("hot", "/srv/app", false);
        e.add("app", Some(&hot), 2);
        e.add("app", Some(&hot), 1);
        e.add("app", Some(&frame("tcp_sendmsg", "[kernel]", true)), 1);
        e.add("app", None, 1);
        // Past the bound: app's next function goes to app's "(other)"; a
        // command first seen now, to the global one.
        e.add("app", Some(&frame("cold", "/srv/app", false)), 4);
        e.add("db", Some(&hot), 5);
        let got = |c: &str, f: &str, m: &str| {
            e.leaves()
                .get(&(c.to_string(), f.to_string(), m.to_string()))
                .copied()
        };
        assert_eq!(got("app", "hot", "/srv/app"), Some(3));
        assert_eq!(got("app", "tcp_sendmsg_[k]", "[kernel]"), Some(1));
        assert_eq!(got("app", NO_FRAME, ""), Some(1));
        assert_eq!(got("app", "cold", "/srv/app"), None);
        assert_eq!(got("app", OTHER, ""), Some(4));
        assert_eq!(got(OTHER, OTHER, ""), Some(5));
        assert_eq!(e.leaves().len(), 5);
    }

    #[test]
    fn a_bound_of_one_keeps_each_command_s_name_for_the_first_only() {
        let shared = Exported::shared(19, DEFAULT_WINDOW, 1);
        let mut e = shared.lock().unwrap();
        e.add("a", Some(&frame("f", "/x", false)), 1);
        e.add("a", Some(&frame("g", "/x", false)), 1);
        e.add("b", Some(&frame("f", "/x", false)), 1);
        let other = |c: &str| {
            e.leaves()
                .get(&(c.to_string(), OTHER.to_string(), String::new()))
                .copied()
        };
        assert_eq!((other("a"), other(OTHER)), (Some(2), Some(1)));
        assert_eq!(e.leaves().len(), 2);
    }

    #[test]
    fn hostile_names_are_escaped_in_every_label() {
        let shared = Exported::shared(19, DEFAULT_WINDOW, 8);
        let mut e = shared.lock().unwrap();
        e.add("ev\nil\"", Some(&frame("f\x1b[2J", "/tmp/a\nb", false)), 1);
        for (c, f, m) in e.leaves().keys() {
            for s in [c, f, m] {
                assert!(!s.chars().any(char::is_control), "{s:?}");
            }
        }
    }
}
