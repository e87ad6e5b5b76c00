//! The records the programs emit besides the per-syscall aggregates (task
//! creation, exit and end-of-window usage, per-thread tables, execs), read
//! from the ring buffer or the task iterator through the generated layouts.

use std::mem::size_of;

use anyhow::{Result, anyhow, bail};

use super::super::abi::{MAX_SYSCALLS, NEED_BASELINE, types};
use crate::probe::pod;
use types::ss_event_type as EvType;

/// Per-thread totals for one syscall.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadSyscall {
    /// Calls.
    pub calls: u64,
    /// Errors.
    pub errors: u64,
    /// Entry-to-exit time.
    pub total_ns: u64,
}

/// Kernel resource counters of one task over the window.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskUsage {
    /// Tick-sampled user time (only the user:system ratio is meaningful).
    pub utime_ns: u64,
    /// Tick-sampled system time.
    pub stime_ns: u64,
    /// Precise CPU time (sum_exec_runtime).
    pub runtime_ns: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Minor page faults.
    pub min_flt: u64,
    /// Major page faults.
    pub maj_flt: u64,
}

impl TaskUsage {
    /// Adds `other`'s counters (a task's exit tail to its exit record).
    pub fn add(&mut self, other: &TaskUsage) {
        self.utime_ns = self.utime_ns.saturating_add(other.utime_ns);
        self.stime_ns = self.stime_ns.saturating_add(other.stime_ns);
        self.runtime_ns = self.runtime_ns.saturating_add(other.runtime_ns);
        self.nvcsw = self.nvcsw.saturating_add(other.nvcsw);
        self.nivcsw = self.nivcsw.saturating_add(other.nivcsw);
        self.min_flt = self.min_flt.saturating_add(other.min_flt);
        self.maj_flt = self.maj_flt.saturating_add(other.maj_flt);
    }
}

/// A task's usage record: from the exit hook or the end-of-window pass.
#[derive(Clone, Debug)]
pub struct TaskRecord {
    /// Thread id.
    pub tid: i32,
    /// Process id.
    pub tgid: i32,
    /// Per-thread slot (0 = pooled/unassigned).
    pub slot: u32,
    /// Command name at that moment.
    pub comm: String,
    /// True when the task exited inside the window.
    pub exited: bool,
    /// Last thread of its process (exit records only).
    pub group_dead: bool,
    /// Peak RSS of its address space at exit, KiB (exit records only).
    pub maxrss_kb: u64,
    /// False when the task exited before its baseline could be taken; its
    /// usage then covers its whole life and is left out of the totals.
    pub has_baseline: bool,
    /// In-window usage.
    pub usage: TaskUsage,
    /// Its syscalls since it was traced (what the aggregates counted for it).
    pub syscalls: TaskSyscalls,
}

/// One task's share of the syscall aggregates.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskSyscalls {
    /// Calls.
    pub calls: u64,
    /// Calls that returned an error (0 in count-only mode).
    pub errors: u64,
    /// Entry-to-exit time, ns (0 in count-only mode).
    pub time_ns: u64,
}

/// A task created by a traced task, or registered by sockscope.
#[derive(Clone, Debug)]
pub struct ForkRecord {
    /// New thread id.
    pub tid: i32,
    /// Its process id.
    pub tgid: i32,
    /// Creating thread (0 for a task registered by sockscope).
    pub parent_tid: i32,
    /// Per-thread slot.
    pub slot: u32,
    /// New thread in the same process (vs. a new process).
    pub is_thread: bool,
    /// Name inherited from the parent.
    pub comm: String,
}

/// What a task used after its exit record, up to its last context switch
/// (the rest of do_exit, and run time the scheduler had not yet added up
/// when the exit record read it): to be added to that record.
#[derive(Clone, Copy, Debug)]
pub struct ExitTail {
    /// Thread id of the exit record it completes.
    pub tid: i32,
    /// The usage to add.
    pub usage: TaskUsage,
}

/// Everything the programs emit besides the per-syscall aggregates.
#[derive(Debug)]
pub enum Event {
    /// A traced task created a task that is now traced too.
    Fork(ForkRecord),
    /// A traced task exited (or is alive at the end, from the iterator).
    Task(TaskRecord),
    /// The rest of an exited task's usage, from its last context switch.
    ExitTail(ExitTail),
    /// Per-thread syscall table of the slot, at exec, exit or end of window.
    ThreadStats(u32, Box<[ThreadSyscall; MAX_SYSCALLS]>),
    /// A traced task called execve (and, with `--per-thread`, continues
    /// under a new slot).
    Exec(ExecRecord),
}

/// A traced task's execve.
#[derive(Clone, Debug)]
pub struct ExecRecord {
    /// `--per-thread` ended the task's row here (the slots below mean
    /// something).
    pub split: bool,
    /// Thread id after the exec.
    pub tid: i32,
    /// Process id.
    pub tgid: i32,
    /// Slot its calls before the exec were counted in.
    pub old_slot: u32,
    /// Slot it continues in.
    pub new_slot: u32,
    /// Its new name.
    pub comm: String,
}

/// Counters kept by the fork/exit hooks.
#[derive(Clone, Copy, Debug, Default)]
pub struct HookCounters {
    /// Threads created by traced tasks inside the window.
    pub threads_created: u64,
    /// Processes created by traced tasks inside the window.
    pub processes_created: u64,
    /// Traced tasks that exited inside the window.
    pub exits: u64,
    /// Lifecycle records lost because the ring buffer was full.
    pub ringbuf_drops: u64,
    /// Scope modes: tasks that entered the trace at an in-scope syscall.
    pub joined: u64,
}

fn comm_str(c: &[i8]) -> String {
    let bytes: Vec<u8> = c
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| *b as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn usage_of(r: &types::ss_res) -> TaskUsage {
    TaskUsage {
        utime_ns: r.utime_ns,
        stime_ns: r.stime_ns,
        runtime_ns: r.runtime_ns,
        nvcsw: r.nvcsw,
        nivcsw: r.nivcsw,
        min_flt: r.min_flt,
        maj_flt: r.maj_flt,
    }
}
/// Parses one lifecycle record (ring buffer or iterator output).
/// Returns the event and the bytes it used.
pub fn parse_record(data: &[u8]) -> Result<(Event, usize)> {
    let ty: EvType = pod::read(data).ok_or_else(|| anyhow!("truncated tracer record"))?;
    match ty {
        EvType::SS_EV_FORK | EvType::SS_EV_REGISTERED => {
            let e: types::ss_ev_fork =
                pod::read(data).ok_or_else(|| anyhow!("truncated fork record"))?;
            Ok((
                Event::Fork(ForkRecord {
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    parent_tid: e.parent_tid as i32,
                    slot: e.slot,
                    is_thread: e.is_thread != 0,
                    comm: comm_str(&e.comm),
                }),
                size_of::<types::ss_ev_fork>(),
            ))
        }
        EvType::SS_EV_EXEC => {
            let e: types::ss_ev_exec =
                pod::read(data).ok_or_else(|| anyhow!("truncated exec record"))?;
            Ok((
                Event::Exec(ExecRecord {
                    split: e.split != 0,
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    old_slot: e.old_slot,
                    new_slot: e.new_slot,
                    comm: comm_str(&e.comm),
                }),
                size_of::<types::ss_ev_exec>(),
            ))
        }
        EvType::SS_EV_EXIT | EvType::SS_EV_LIVE => {
            let e: types::ss_ev_task =
                pod::read(data).ok_or_else(|| anyhow!("truncated task record"))?;
            Ok((
                Event::Task(TaskRecord {
                    tid: e.tid as i32,
                    tgid: e.tgid as i32,
                    slot: e.slot,
                    comm: comm_str(&e.comm),
                    exited: ty == EvType::SS_EV_EXIT,
                    group_dead: e.group_dead != 0,
                    maxrss_kb: e.maxrss_pages * page_kb(),
                    has_baseline: e.flags & NEED_BASELINE == 0,
                    usage: usage_of(&e.res),
                    syscalls: TaskSyscalls {
                        calls: e.sc.calls,
                        errors: e.sc.errors,
                        time_ns: e.sc.time_ns,
                    },
                }),
                size_of::<types::ss_ev_task>(),
            ))
        }
        EvType::SS_EV_EXIT_TAIL => {
            let e: types::ss_ev_task =
                pod::read(data).ok_or_else(|| anyhow!("truncated exit tail record"))?;
            Ok((
                Event::ExitTail(ExitTail {
                    tid: e.tid as i32,
                    usage: usage_of(&e.res),
                }),
                size_of::<types::ss_ev_task>(),
            ))
        }
        EvType::SS_EV_THREAD_STATS => {
            // 12 KiB: read onto the heap, not the stack.
            let e: Box<types::ss_thread_stats> =
                pod::read_boxed(data).ok_or_else(|| anyhow!("truncated per-thread record"))?;
            let mut table = Box::new([ThreadSyscall::default(); MAX_SYSCALLS]);
            for (row, sc) in table.iter_mut().zip(e.sc.iter()) {
                *row = ThreadSyscall {
                    calls: sc.calls,
                    errors: sc.errors,
                    total_ns: sc.total_ns,
                };
            }
            Ok((
                Event::ThreadStats(e.slot, table),
                size_of::<types::ss_thread_stats>(),
            ))
        }
        other => bail!("unknown tracer record type {}", other.0),
    }
}

/// Parses back-to-back records (iterator output).
pub(super) fn parse_all(mut rest: &[u8]) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (ev, used) = parse_record(rest)?;
        out.push(ev);
        rest = &rest[used..];
    }
    Ok(out)
}

fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 / 1024 } else { 4 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::pod::as_bytes;

    #[test]
    fn records_parse_through_the_generated_layouts() {
        let mut ts = Box::new(types::ss_thread_stats {
            r#type: EvType::SS_EV_THREAD_STATS,
            slot: 7,
            ..Default::default()
        });
        ts.sc[39].calls = 5;
        ts.sc[MAX_SYSCALLS - 1].total_ns = 9;
        let mut fork = types::ss_ev_fork {
            r#type: EvType::SS_EV_REGISTERED,
            tid: 42,
            tgid: 41,
            slot: 3,
            ..Default::default()
        };
        fork.comm[..3].copy_from_slice(&[b'a' as i8, b'b' as i8, b'c' as i8]);
        let mut data = as_bytes(&*ts).to_vec();
        data.extend_from_slice(as_bytes(&fork));
        let events = parse_all(&data).unwrap();
        match &events[..] {
            [Event::ThreadStats(7, table), Event::Fork(f)] => {
                assert_eq!(table[39].calls, 5);
                assert_eq!(table[MAX_SYSCALLS - 1].total_ns, 9);
                assert_eq!((f.tid, f.tgid, f.slot, f.parent_tid), (42, 41, 3, 0));
                assert_eq!(f.comm, "abc");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(parse_record(&data[..100]).is_err(), "truncated");
        let unknown = 99u32.to_ne_bytes();
        let err = parse_record(&unknown).unwrap_err().to_string();
        assert!(err.contains("unknown tracer record type 99"), "{err}");
    }
}
