//! Samples tied to requests: when the request anatomy runs beside the
//! sampler (its thread map shared, `StacksConfig::tie`), every sample
//! carries the turn its thread served and the span of time it stands for.
//! The window keeps each such sample here, compactly (its stack interned
//! once), so that once the window's requests are known the tail's samples
//! can be told from the rest's (`run::tail`). The cost grows with the
//! samples, never with the requests.

use std::collections::HashMap;

use super::Frame;
use super::sample::{RawSample, SampleKind};
use crate::report::stacks::{FrameKey, WeightedStack};

/// The most samples a window keeps for the tie (at 99 Hz on 16 CPUs, more
/// than half an hour of on-CPU samples); the rest are counted.
pub const MAX_TIED: usize = 2 << 20;

/// Why a thread waited, from the wait's syscall, state and kernel frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitReason {
    /// Runnable, waiting for a CPU.
    RunQueue,
    /// A futex: a lock, a condition variable, a join.
    Futex,
    /// Block I/O (uninterruptible, in the block layer or waiting on a
    /// page's I/O).
    DiskIo,
    /// A page fault's wait (no syscall).
    PageFault,
    /// A sleep (nanosleep, clock_nanosleep).
    Sleep,
    /// Waiting on sockets: epoll, poll, select, accept, a socket read.
    Socket,
    /// Anything else.
    Other,
}

impl WaitReason {
    /// Every reason, in the report's order.
    pub const ALL: [WaitReason; 7] = [
        WaitReason::RunQueue,
        WaitReason::Futex,
        WaitReason::DiskIo,
        WaitReason::PageFault,
        WaitReason::Sleep,
        WaitReason::Socket,
        WaitReason::Other,
    ];

    /// run.json's name.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::RunQueue => "run_queue",
            WaitReason::Futex => "futex",
            WaitReason::DiskIo => "disk_io",
            WaitReason::PageFault => "page_fault",
            WaitReason::Sleep => "sleep",
            WaitReason::Socket => "socket",
            WaitReason::Other => "other",
        }
    }

    /// For people.
    pub fn text(self) -> &'static str {
        match self {
            WaitReason::RunQueue => "waiting for a CPU (run queue)",
            WaitReason::Futex => "futex (lock) wait",
            WaitReason::DiskIo => "disk I/O",
            WaitReason::PageFault => "page fault",
            WaitReason::Sleep => "sleep",
            WaitReason::Socket => "socket wait",
            WaitReason::Other => "other wait",
        }
    }

    /// An off-CPU wait's reason: its syscall (None: it blocked outside
    /// one, in a page fault), its task state and its kernel frames.
    pub fn of_wait(syscall: Option<u32>, state: char, frames: &[Frame]) -> WaitReason {
        let kernel = |pat: &[&str]| {
            frames
                .iter()
                .any(|f| f.kernel && pat.iter().any(|p| f.name.contains(p)))
        };
        if state == 'D'
            && kernel(&[
                "io_schedule",
                "blk_",
                "bio_",
                "folio_wait",
                "wait_on_page",
                "iomap_dio",
            ])
        {
            return WaitReason::DiskIo;
        }
        let Some(nr) = syscall else {
            return if kernel(&["page_fault", "handle_mm_fault"]) {
                WaitReason::PageFault
            } else {
                WaitReason::Other
            };
        };
        let name = crate::probe::syscall_names::name(nr);
        match name.as_str() {
            "futex" | "futex_waitv" | "futex_wait" => WaitReason::Futex,
            "nanosleep" | "clock_nanosleep" => WaitReason::Sleep,
            "epoll_wait" | "epoll_pwait" | "epoll_pwait2" | "poll" | "ppoll" | "select"
            | "pselect6" | "accept" | "accept4" | "recvfrom" | "recvmsg" | "recvmmsg"
            | "sendto" | "sendmsg" | "connect" => WaitReason::Socket,
            "read" | "readv" | "write" | "writev"
                if kernel(&["sock_", "tcp_", "unix_stream", "udp_", "inet_"]) =>
            {
                WaitReason::Socket
            }
            "read" | "pread64" | "readv" | "preadv" | "preadv2" | "write" | "pwrite64"
            | "fsync" | "fdatasync"
                if state == 'D' =>
            {
                WaitReason::DiskIo
            }
            _ => WaitReason::Other,
        }
    }
}

/// What a kept sample stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TiedKind {
    /// One on-CPU tick.
    OnCpu,
    /// Off-CPU time (ns), and why.
    Wait(WaitReason),
}

/// One sample, kept for the tie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiedSample {
    /// The thread.
    pub tid: u32,
    /// The turn it served (0: none; odd: one that cannot be told).
    pub turn: u64,
    /// What it stands for.
    pub kind: TiedKind,
    /// On-CPU: 1 (a tick); a wait: the ns it stands for.
    pub weight: u64,
    /// The span it stands for (CLOCK_MONOTONIC ns; a tick's: its time).
    pub begin_ns: u64,
    /// See `begin_ns`.
    pub end_ns: u64,
    /// Its stack (`Tied::stacks`).
    pub stack: u32,
}

/// The window's kept samples and their stacks.
#[derive(Clone, Debug, Default)]
pub struct Tied {
    /// In the order they came.
    pub samples: Vec<TiedSample>,
    /// Distinct stacks: the process's name, the thread's, and the frames,
    /// root first.
    pub stacks: Vec<(String, String, Vec<FrameKey>)>,
    /// Samples past [`MAX_TIED`], not kept.
    pub dropped: u64,
    /// The on-CPU period (1e9/hz ns): what one tick stands for.
    pub period_ns: u64,
}

impl Tied {
    /// The weighted stack of `stack`, weighing `weight`.
    pub fn weighted(&self, stack: u32, weight: u64) -> Option<WeightedStack> {
        let (process, thread, frames) = self.stacks.get(stack as usize)?;
        Some(WeightedStack {
            process: process.clone(),
            thread: thread.clone(),
            frames: frames.clone(),
            weight,
            complete: true,
        })
    }
}

/// One distinct stack: the process's name, the thread's and the interned
/// frames, root first (the session's interned ids).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct StackKey {
    pub(super) process: u32,
    pub(super) thread: u32,
    pub(super) frames: Vec<u32>,
}

/// Builds [`Tied`] as samples come (stacks interned by their frames' ids).
#[derive(Debug, Default)]
pub(super) struct TieBuilder {
    tied: Tied,
    ids: HashMap<StackKey, u32>,
}

impl TieBuilder {
    pub(super) fn new(period_ns: u64) -> Self {
        TieBuilder {
            tied: Tied {
                period_ns,
                ..Tied::default()
            },
            ids: HashMap::new(),
        }
    }

    /// Keeps `s`, whose stack is `key` (process, thread and frame ids, root
    /// first), made of `frames` (innermost first, for its reason); `name`
    /// and `frame` give the ids' values the first time a stack is seen.
    pub(super) fn add(
        &mut self,
        s: &RawSample,
        key: &StackKey,
        frames: &[Frame],
        name: impl Fn(u32) -> String,
        frame: impl Fn(u32) -> FrameKey,
    ) {
        if self.tied.samples.len() >= MAX_TIED {
            self.tied.dropped += 1;
            return;
        }
        let (kind, weight) = match s.kind {
            SampleKind::OnCpu => (TiedKind::OnCpu, 1),
            SampleKind::RunQueue { weight_ns } => (TiedKind::Wait(WaitReason::RunQueue), weight_ns),
            SampleKind::OffCpu {
                weight_ns, state, ..
            } => (
                TiedKind::Wait(WaitReason::of_wait(s.syscall, state, frames)),
                weight_ns,
            ),
        };
        let next = self.tied.stacks.len() as u32;
        let stack = *self.ids.entry(key.clone()).or_insert_with(|| {
            let frames = key.frames.iter().map(|&i| frame(i)).collect();
            self.tied
                .stacks
                .push((name(key.process), name(key.thread), frames));
            next
        });
        self.tied.samples.push(TiedSample {
            tid: s.tid,
            turn: s.turn,
            kind,
            weight,
            begin_ns: s.span_ns.0,
            end_ns: s.span_ns.1,
            stack,
        });
    }

    pub(super) fn finish(self) -> Tied {
        self.tied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str) -> Frame {
        Frame {
            name: name.into(),
            module: "[kernel]".into(),
            kernel: true,
            symbolized: true,
        }
    }

    fn nr(name: &str) -> Option<u32> {
        crate::probe::syscall_names::number(name)
    }

    #[test]
    fn waits_are_named_by_syscall_state_and_kernel_frames() {
        let sched = [k("schedule"), k("futex_wait_queue")];
        assert_eq!(
            WaitReason::of_wait(nr("futex"), 'S', &sched),
            WaitReason::Futex
        );
        assert_eq!(
            WaitReason::of_wait(nr("clock_nanosleep"), 'S', &[]),
            WaitReason::Sleep
        );
        assert_eq!(
            WaitReason::of_wait(nr("epoll_wait"), 'S', &[]),
            WaitReason::Socket
        );
        assert_eq!(
            WaitReason::of_wait(
                nr("pread64"),
                'D',
                &[k("io_schedule"), k("blk_mq_submit_bio")]
            ),
            WaitReason::DiskIo
        );
        assert_eq!(
            WaitReason::of_wait(nr("pread64"), 'D', &[k("schedule")]),
            WaitReason::DiskIo
        );
        assert_eq!(
            WaitReason::of_wait(
                None,
                'D',
                &[k("folio_wait_bit_common"), k("exc_page_fault")]
            ),
            WaitReason::DiskIo
        );
        assert_eq!(
            WaitReason::of_wait(None, 'S', &[k("handle_mm_fault")]),
            WaitReason::PageFault
        );
        assert_eq!(
            WaitReason::of_wait(nr("read"), 'S', &[k("sock_read_iter")]),
            WaitReason::Socket
        );
        assert_eq!(
            WaitReason::of_wait(nr("read"), 'S', &[k("pipe_read")]),
            WaitReason::Other
        );
        assert_eq!(
            WaitReason::of_wait(Some(99_999), 'S', &[]),
            WaitReason::Other
        );
    }
}
