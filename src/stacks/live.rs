//! The hottest functions of each second, for a live view (`sockscope
//! top --stacks`): the sampling thread counts each on-CPU sample under its
//! innermost frame and, once per interval, sends the interval's counts and
//! starts afresh. The window's own graphs are kept as ever; this is a view
//! beside them, not a second sampler.

use std::collections::HashMap;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use crate::report::stacks::{FrameKey, SOCKSCOPE_MODULE, frame_text};

/// Functions kept in each interval's list.
pub const HOT_FUNCTIONS: usize = 20;

/// One function's on-CPU samples in an interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotFunction {
    /// As the folded output names it (escaped; kernel ones end in `_[k]`).
    pub name: String,
    /// Its module (a path, `[kernel]`).
    pub module: String,
    /// Samples whose innermost frame it was.
    pub samples: u64,
}

/// One interval's on-CPU samples by innermost function.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HotFunctions {
    /// The interval's length, s.
    pub interval_s: f64,
    /// The target's on-CPU samples in it (sockscope's own hooks' left out).
    pub samples: u64,
    /// The heaviest functions, at most [`HOT_FUNCTIONS`], heaviest first.
    pub functions: Vec<HotFunction>,
}

/// An innermost frame: a frame id of the window's, or none (a sample
/// with no frame at all).
type Leaf = Option<u32>;

/// Counts the interval's samples and sends them every `every`.
pub(super) struct HotCounter {
    tx: SyncSender<HotFunctions>,
    every: Duration,
    since: Instant,
    samples: u64,
    by_leaf: HashMap<Leaf, u64>,
}

impl HotCounter {
    pub(super) fn new(tx: SyncSender<HotFunctions>, every: Duration) -> Self {
        HotCounter {
            tx,
            every,
            since: Instant::now(),
            samples: 0,
            by_leaf: HashMap::new(),
        }
    }

    /// Counts one on-CPU sample of `weight` whose frames (root first) are
    /// `frames`; `ours` says whether a frame is sockscope's own hook.
    pub(super) fn add(&mut self, frames: &[u32], weight: u64, ours: impl Fn(u32) -> bool) {
        if frames.iter().any(|&f| ours(f)) {
            return;
        }
        self.samples += weight;
        *self.by_leaf.entry(frames.last().copied()).or_default() += weight;
    }

    /// Sends the interval when it is over (a full channel drops it: the
    /// view is behind, and the next one is as good), naming frames with
    /// `frame`.
    pub(super) fn tick<'a>(&mut self, frame: impl Fn(u32) -> &'a FrameKey) {
        let elapsed = self.since.elapsed();
        if elapsed < self.every {
            return;
        }
        let mut rows: Vec<HotFunction> = self
            .by_leaf
            .drain()
            .map(|(leaf, samples)| match leaf {
                Some(id) => {
                    let f = frame(id);
                    HotFunction {
                        name: frame_text(f),
                        module: f.module.clone(),
                        samples,
                    }
                }
                None => HotFunction {
                    name: "[no frame]".into(),
                    module: String::new(),
                    samples,
                },
            })
            .collect();
        rows.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
        rows.truncate(HOT_FUNCTIONS);
        let _ = self.tx.try_send(HotFunctions {
            interval_s: elapsed.as_secs_f64(),
            samples: std::mem::take(&mut self.samples),
            functions: rows,
        });
        self.since = Instant::now();
    }
}

/// Whether a frame is sockscope's own (its BPF programs' hooks).
pub(super) fn is_ours(f: &FrameKey) -> bool {
    f.module == SOCKSCOPE_MODULE
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    fn key(name: &str, kernel: bool) -> FrameKey {
        FrameKey {
            name: name.into(),
            module: if kernel {
                "[kernel]".into()
            } else {
                "/bin/x".into()
            },
            kernel,
        }
    }

    #[test]
    fn an_interval_names_its_innermost_frames_heaviest_first_and_starts_afresh() {
        let frames = [
            key("main", false),
            key("hot", false),
            key("tcp\x1bsend", true),
        ];
        let (tx, rx) = sync_channel(4);
        let mut c = HotCounter::new(tx, Duration::ZERO);
        c.add(&[0, 1], 3, |_| false);
        c.add(&[0, 1, 2], 2, |_| false);
        c.add(&[], 1, |_| false);
        // A stack through sockscope's own hook is left out.
        c.add(&[0, 2], 5, |f| f == 2);
        c.tick(|i| &frames[i as usize]);
        let got = rx.try_recv().unwrap();
        assert_eq!(got.samples, 6);
        let names: Vec<(&str, u64)> = got
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.samples))
            .collect();
        assert_eq!(names[0], ("hot", 3));
        assert_eq!(names[1].1, 2);
        assert!(names[1].0.ends_with("_[k]"), "{names:?}");
        assert!(!names[1].0.chars().any(char::is_control), "{names:?}");
        assert_eq!(names[2], ("[no frame]", 1));
        c.tick(|i| &frames[i as usize]);
        let next = rx.try_recv().unwrap();
        assert_eq!((next.samples, next.functions.len()), (0, 0));
    }

    #[test]
    fn a_full_channel_drops_the_interval_and_the_next_is_whole() {
        let frames = [key("a", false)];
        let (tx, rx) = sync_channel(1);
        let mut c = HotCounter::new(tx, Duration::ZERO);
        for n in 1..=3 {
            c.add(&[0], n, |_| false);
            c.tick(|i| &frames[i as usize]);
        }
        assert_eq!(rx.try_recv().unwrap().samples, 1);
        assert!(rx.try_recv().is_err());
    }
}
