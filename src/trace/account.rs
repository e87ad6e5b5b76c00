//! Turns the tracer's lifecycle records into the report's resource figures
//! and per-thread rows.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::abi::MAX_SYSCALLS;
use super::bpf::{Event, ExecRecord, ExitTail, ForkRecord, TaskRecord, TaskUsage, ThreadSyscall};
use super::launch::RusageSum;
use crate::probe::syscall_names;
use crate::report::trace::{ProcessRow, Resources, ThreadRow, ThreadSyscallRow};

/// Lifecycle records collected during and at the end of the window.
#[derive(Default)]
pub struct EventLog {
    /// Tasks created by traced tasks, and tasks registered by sockscope.
    pub forks: Vec<ForkRecord>,
    /// execve calls of traced tasks that split a per-thread row.
    pub execs: Vec<ExecRecord>,
    /// Per process: its name after its latest execve in the window (at
    /// most [`KEPT_TASKS`] processes; those beyond are named from /proc or
    /// their fork record).
    pub exec_names: HashMap<i32, String>,
    /// Exit records (ring buffer) and live records (end-of-window pass).
    pub tasks: Vec<TaskRecord>,
    /// Per-thread tables by slot; slot 0 pools every task without a slot.
    pub thread_tables: HashMap<u32, Box<[ThreadSyscall; MAX_SYSCALLS]>>,
    /// Records that could not be parsed.
    pub malformed: u64,
    /// Exit records beyond [`KEPT_TASKS`], summed instead of kept (a long
    /// system-wide trace sees unbounded tasks come and go).
    folded: Split,
    /// Exit records folded into `folded`, and those without a baseline.
    pub folded_tasks: u64,
    folded_excluded: u64,
    /// Lifecycle records of tasks that entered the trace beyond
    /// [`KEPT_TASKS`] (counted, not kept), and how many were processes.
    pub forks_folded: u64,
    /// Of those, process leaders.
    pub leaders_folded: u64,
    /// While a snapshot is being read: the tids whose exit record arrived.
    pub exits_watch: Option<Vec<i32>>,
    /// Exit records (with a baseline) whose tail has not arrived yet, oldest
    /// first: a task's tail follows its exit record within microseconds.
    awaiting_tail: VecDeque<(i32, Awaiting)>,
    /// Exit tails that found no exit record (lost to a full ring buffer, or
    /// evicted from `awaiting_tail`); their usage is in the totals only.
    pub unmatched_tails: u64,
}

/// Task and fork records kept one by one; further ones are summed.
pub const KEPT_TASKS: usize = 65_536;

/// Exit records held for their tail at most; older ones are given up on.
const AWAITING_TAILS: usize = 4_096;

/// Where an exit record waiting for its tail is.
#[derive(Debug)]
enum Awaiting {
    /// In `tasks`, at this index.
    Kept(usize),
    /// Beyond [`KEPT_TASKS`]: its usage, folded once the tail is added.
    Folded(TaskUsage),
}

impl EventLog {
    /// Files one event.
    pub fn push(&mut self, ev: Event) {
        match ev {
            Event::Fork(f) if self.forks.len() >= KEPT_TASKS => {
                self.forks_folded += 1;
                self.leaders_folded += u64::from(f.tid == f.tgid);
            }
            Event::Fork(f) => self.forks.push(f),
            Event::Exec(e) => {
                if self.exec_names.len() < KEPT_TASKS || self.exec_names.contains_key(&e.tgid) {
                    self.exec_names.insert(e.tgid, e.comm.clone());
                }
                if e.split {
                    self.execs.push(e);
                }
            }
            Event::Task(t) => {
                if let Some(w) = self.exits_watch.as_mut() {
                    w.push(t.tid);
                }
                if t.exited && self.tasks.len() >= KEPT_TASKS {
                    if t.has_baseline {
                        self.await_tail(t.tid, Awaiting::Folded(t.usage));
                    } else {
                        self.folded_excluded += 1;
                    }
                    self.folded_tasks += 1;
                } else {
                    if t.exited && t.has_baseline {
                        self.await_tail(t.tid, Awaiting::Kept(self.tasks.len()));
                    }
                    self.tasks.push(t);
                }
            }
            Event::ExitTail(tail) => self.add_tail(tail),
            Event::ThreadStats(slot, table) => match self.thread_tables.get_mut(&slot) {
                // Only the pooled slot 0 is shared by several tasks.
                Some(acc) => {
                    for (a, b) in acc.iter_mut().zip(table.iter()) {
                        a.calls += b.calls;
                        a.errors += b.errors;
                        a.total_ns += b.total_ns;
                    }
                }
                None => {
                    self.thread_tables.insert(slot, table);
                }
            },
        }
    }

    fn await_tail(&mut self, tid: i32, at: Awaiting) {
        self.awaiting_tail.push_back((tid, at));
        if self.awaiting_tail.len() > AWAITING_TAILS {
            if let Some((_, Awaiting::Folded(u))) = self.awaiting_tail.pop_front() {
                self.folded.add(&u);
            }
        }
    }

    /// Adds a task's exit tail to its exit record: the usage is split into
    /// user and system time with the record's, as one task's.
    fn add_tail(&mut self, tail: ExitTail) {
        let found = self
            .awaiting_tail
            .iter()
            .rposition(|(tid, _)| *tid == tail.tid)
            .and_then(|i| self.awaiting_tail.remove(i));
        match found {
            Some((_, Awaiting::Kept(i))) => self.tasks[i].usage.add(&tail.usage),
            Some((_, Awaiting::Folded(mut u))) => {
                u.add(&tail.usage);
                self.folded.add(&u);
            }
            None => {
                self.unmatched_tails += 1;
                self.folded.add(&tail.usage);
            }
        }
    }

    /// The summed usage of the folded exit records, those still waiting for
    /// their tail included.
    fn folded_split(&self) -> Split {
        let mut split = self.folded;
        for (_, at) in &self.awaiting_tail {
            if let Awaiting::Folded(u) = at {
                split.add(u);
            }
        }
        split
    }

    /// Sum of in-window usage over tasks that have a baseline, and the
    /// number of tasks left out for lack of one.
    fn usage_totals(&self) -> (Split, u64) {
        let mut split = self.folded_split();
        let mut excluded = self.folded_excluded;
        for t in &self.tasks {
            if !t.has_baseline {
                excluded += 1;
                continue;
            }
            split.add(&t.usage);
        }
        (split, excluded)
    }

    /// Exit records whose tail has not arrived (see [`ExitTail`]).
    pub fn tails_missing(&self) -> u64 {
        self.awaiting_tail.len() as u64
    }

    /// Largest peak RSS reported by a task exiting inside the window (kB).
    pub fn exited_maxrss_kb(&self) -> Option<u64> {
        self.tasks
            .iter()
            .filter(|t| t.exited)
            .map(|t| t.maxrss_kb)
            .max()
    }
}

/// The usage so far of every task that entered the trace: the exited
/// ones' final records from `log` plus `live` (their current figures, read
/// without closing the window). Tasks without a baseline are left out, as
/// in the final totals.
pub fn usage_now(log: &EventLog, live: &[TaskRecord]) -> super::snapshot::Usage {
    let mut split = log.folded_split();
    for t in log.tasks.iter().filter(|t| t.exited).chain(live) {
        if t.has_baseline {
            split.add(&t.usage);
        }
    }
    super::snapshot::Usage {
        user_cpu_s: split.user_ns / 1e9,
        system_cpu_s: split.system_ns / 1e9,
        voluntary_ctxt_switches: split.nvcsw,
        involuntary_ctxt_switches: split.nivcsw,
        minor_faults: split.min_flt,
        major_faults: split.maj_flt,
        tasks_seen: 0,
    }
}

/// CPU time split the way the kernel's cputime_adjust does: the precise
/// runtime divided in the ratio of the tick-sampled user and system times.
#[derive(Default, Debug, Clone, Copy)]
struct Split {
    user_ns: f64,
    system_ns: f64,
    nvcsw: u64,
    nivcsw: u64,
    min_flt: u64,
    maj_flt: u64,
}

impl Split {
    fn add(&mut self, u: &TaskUsage) {
        let rt = u.runtime_ns as f64;
        let ticks = (u.utime_ns + u.stime_ns) as f64;
        if ticks > 0.0 {
            self.user_ns += rt * u.utime_ns as f64 / ticks;
            self.system_ns += rt * u.stime_ns as f64 / ticks;
        } else {
            // No tick landed in the window: like the kernel, call it user.
            self.user_ns += rt;
        }
        self.nvcsw += u.nvcsw;
        self.nivcsw += u.nivcsw;
        self.min_flt += u.min_flt;
        self.maj_flt += u.maj_flt;
    }
}

/// The warning for exited threads whose CPU stops at their exit record.
pub fn exit_tail_note(log: &EventLog) -> Option<String> {
    let n = log.tails_missing();
    (n > 0).then(|| {
        format!(
            "CPU undercounted: {n} exited thread(s) were not seen at their last context switch \
             (ring buffer full, or the trace ended first); their CPU is counted up to their \
             exit tracepoint only, which can miss most of a short thread's run time"
        )
    })
}

const PEAK_RSS_METHOD: &str = "largest high-water mark of a process of the tree since its \
    exec: hiwater_rss or current RSS read by BPF at exit, VmHWM for processes still running";

/// Resource figures for a launched command, from wait4 rusage; the peak
/// RSS comes from the exit hook (and VmHWM of processes still running),
/// because ru_maxrss of a forked child starts at its parent's size.
pub fn launch_resources(
    ru: &RusageSum,
    orphans: u64,
    log: &EventLog,
    live_hwm_kb: Option<u64>,
    threads: u64,
    processes: u64,
) -> Resources {
    Resources {
        method: if orphans > 0 {
            format!(
                "wait4 rusage of the command and every descendant it reaped, plus {orphans} \
                 orphaned descendant(s) reaped by sockscope"
            )
        } else {
            "wait4 rusage of the command and every descendant it reaped".into()
        },
        user_cpu_s: ru.utime_us as f64 / 1e6,
        system_cpu_s: ru.stime_us as f64 / 1e6,
        voluntary_ctxt_switches: ru.nvcsw,
        involuntary_ctxt_switches: ru.nivcsw,
        minor_faults: ru.minflt,
        major_faults: ru.majflt,
        peak_rss_kb: [log.exited_maxrss_kb(), live_hwm_kb]
            .into_iter()
            .flatten()
            .max(),
        peak_rss_method: PEAK_RSS_METHOD.into(),
        threads_seen: threads,
        processes_seen: processes,
        tasks_excluded: 0,
        exit_tails_missing: log.tails_missing(),
    }
}

/// Resource figures for an attached tree, from BPF task counters.
pub fn attach_resources(
    log: &EventLog,
    live_hwm_kb: Option<u64>,
    threads: u64,
    processes: u64,
) -> Resources {
    let (s, excluded) = log.usage_totals();
    let peak = [live_hwm_kb, log.exited_maxrss_kb()]
        .into_iter()
        .flatten()
        .max();
    Resources {
        method: "per-thread kernel counters (sum_exec_runtime, utime/stime ratio, nvcsw, \
                 nivcsw, min_flt, maj_flt) read by BPF at attach, at each thread's last \
                 context switch and at the end of the window"
            .into(),
        user_cpu_s: s.user_ns / 1e9,
        system_cpu_s: s.system_ns / 1e9,
        voluntary_ctxt_switches: s.nvcsw,
        involuntary_ctxt_switches: s.nivcsw,
        minor_faults: s.min_flt,
        major_faults: s.maj_flt,
        peak_rss_kb: peak,
        peak_rss_method: PEAK_RSS_METHOD.into(),
        threads_seen: threads,
        processes_seen: processes,
        tasks_excluded: excluded,
        exit_tails_missing: log.tails_missing(),
    }
}

/// Per-process rows, busiest (CPU, then syscalls) first: every task's
/// last record (exit, or alive at the end) summed by process. CPU, switches
/// and faults leave out tasks without a baseline, as the totals do;
/// syscalls count every task.
pub fn process_rows(log: &EventLog, count_only: bool) -> Vec<ProcessRow> {
    struct Acc {
        split: Split,
        row: ProcessRow,
        main_comm: Option<String>,
        all_exited: bool,
    }
    let mut by_pid: BTreeMap<i32, Acc> = BTreeMap::new();
    for t in &log.tasks {
        let a = by_pid.entry(t.tgid).or_insert_with(|| Acc {
            split: Split::default(),
            row: ProcessRow {
                pid: t.tgid,
                comm: t.comm.clone(),
                ..Default::default()
            },
            main_comm: None,
            all_exited: true,
        });
        a.row.threads += 1;
        a.all_exited &= t.exited;
        if t.tid == t.tgid {
            a.main_comm = Some(t.comm.clone());
        }
        if t.has_baseline {
            a.split.add(&t.usage);
        } else {
            a.row.tasks_excluded += 1;
        }
        a.row.calls += t.syscalls.calls;
        a.row.errors = Some(a.row.errors.unwrap_or(0) + t.syscalls.errors);
        a.row.time_ns = Some(a.row.time_ns.unwrap_or(0) + t.syscalls.time_ns);
    }
    let mut rows: Vec<ProcessRow> = by_pid
        .into_values()
        .map(|a| {
            let s = a.split;
            ProcessRow {
                comm: a.main_comm.unwrap_or(a.row.comm),
                exited: a.all_exited,
                user_cpu_s: s.user_ns / 1e9,
                system_cpu_s: s.system_ns / 1e9,
                voluntary_ctxt_switches: s.nvcsw,
                involuntary_ctxt_switches: s.nivcsw,
                minor_faults: s.min_flt,
                major_faults: s.maj_flt,
                errors: a.row.errors.filter(|_| !count_only),
                time_ns: a.row.time_ns.filter(|_| !count_only),
                ..a.row
            }
        })
        .collect();
    let cpu = |r: &ProcessRow| r.user_cpu_s + r.system_cpu_s;
    rows.sort_by(|a, b| {
        cpu(b)
            .total_cmp(&cpu(a))
            .then(b.calls.cmp(&a.calls))
            .then(a.pid.cmp(&b.pid))
    });
    rows
}

/// Per-thread rows, busiest first.
pub fn thread_rows(log: &EventLog, count_only: bool) -> Vec<ThreadRow> {
    // Identity of each slot: the latest record wins (exit/live records carry
    // the name after any exec).
    let mut who: BTreeMap<u32, (i32, i32, String, Option<&str>)> = BTreeMap::new();
    for f in &log.forks {
        who.insert(f.slot, (f.tid, f.tgid, f.comm.clone(), None));
    }
    for e in &log.execs {
        // The row before the exec ended there; the new one carries the name.
        if let Some(old) = who.get_mut(&e.old_slot) {
            old.3 = Some("exec");
        }
        who.insert(e.new_slot, (e.tid, e.tgid, e.comm.clone(), None));
    }
    for t in &log.tasks {
        if t.slot != 0 {
            who.insert(
                t.slot,
                (t.tid, t.tgid, t.comm.clone(), t.exited.then_some("exit")),
            );
        }
    }
    let mut rows: Vec<ThreadRow> = log
        .thread_tables
        .iter()
        .map(|(slot, table)| {
            let (tid, pid, comm, ended) = if *slot == 0 {
                (0, 0, "(other threads)".to_string(), None)
            } else {
                who.get(slot)
                    .cloned()
                    .unwrap_or((0, 0, "(unknown)".into(), None))
            };
            let mut syscalls: Vec<ThreadSyscallRow> = table
                .iter()
                .enumerate()
                .filter(|(_, c)| c.calls > 0)
                .map(|(nr, c)| ThreadSyscallRow {
                    name: syscall_names::name(nr as u32),
                    calls: c.calls,
                    errors: c.errors,
                    time_ns: c.total_ns,
                })
                .collect();
            if count_only {
                syscalls.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
            } else {
                syscalls.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.name.cmp(&b.name)));
            }
            ThreadRow {
                tid,
                pid,
                comm,
                ended: ended.map(str::to_string),
                calls: syscalls.iter().map(|c| c.calls).sum(),
                errors: syscalls.iter().map(|c| c.errors).sum(),
                time_ns: syscalls.iter().map(|c| c.time_ns).sum(),
                syscalls,
            }
        })
        .filter(|r| r.calls > 0)
        .collect();
    rows.sort_by(|a, b| {
        b.time_ns
            .cmp(&a.time_ns)
            .then(b.calls.cmp(&a.calls))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_follows_tick_ratio_and_keeps_runtime() {
        let mut s = Split::default();
        s.add(&TaskUsage {
            utime_ns: 3,
            stime_ns: 1,
            runtime_ns: 400,
            ..Default::default()
        });
        s.add(&TaskUsage {
            runtime_ns: 50,
            ..Default::default()
        });
        assert!((s.user_ns - 350.0).abs() < 1e-9);
        assert!((s.system_ns - 100.0).abs() < 1e-9);
    }

    fn exit_record(tid: i32, usage: TaskUsage) -> Event {
        Event::Task(TaskRecord {
            tid,
            tgid: 1,
            slot: 0,
            comm: "w".into(),
            exited: true,
            group_dead: false,
            maxrss_kb: 0,
            has_baseline: true,
            usage,
            syscalls: Default::default(),
        })
    }

    fn tail(tid: i32, runtime_ns: u64) -> Event {
        Event::ExitTail(ExitTail {
            tid,
            usage: TaskUsage {
                runtime_ns,
                nvcsw: 1,
                ..Default::default()
            },
        })
    }

    fn cpu_ns(r: &ProcessRow) -> f64 {
        (r.user_cpu_s + r.system_cpu_s) * 1e9
    }

    #[test]
    fn exit_tail_completes_its_own_exit_record_before_the_split() {
        let mut log = EventLog::default();
        let ticks = TaskUsage {
            utime_ns: 3,
            stime_ns: 1,
            runtime_ns: 100,
            ..Default::default()
        };
        log.push(exit_record(7, ticks));
        log.push(exit_record(8, TaskUsage::default()));
        log.push(tail(7, 300));
        assert_eq!(log.tails_missing(), 1, "8's tail has not come");
        assert!(exit_tail_note(&log).unwrap().contains("1 exited thread(s)"));
        log.push(tail(8, 50));
        assert_eq!(log.tails_missing(), 0);
        assert_eq!(exit_tail_note(&log), None);
        let rows = process_rows(&log, false);
        assert!((cpu_ns(&rows[0]) - 450.0).abs() < 1e-6, "{rows:?}");
        // 7's 400 ns split 3:1 by its own ticks; 8 had none: all user.
        assert!((rows[0].system_cpu_s * 1e9 - 100.0).abs() < 1e-6);
        assert_eq!(rows[0].voluntary_ctxt_switches, 2);
        let res = attach_resources(&log, None, 2, 1);
        assert!(((res.user_cpu_s + res.system_cpu_s) * 1e9 - 450.0).abs() < 1e-6);
        assert_eq!(res.exit_tails_missing, 0);
    }

    #[test]
    fn a_reused_tid_gets_the_tail_of_its_latest_exit() {
        let mut log = EventLog::default();
        log.push(exit_record(7, TaskUsage::default()));
        log.push(exit_record(7, TaskUsage::default()));
        log.push(tail(7, 300));
        assert_eq!(log.tasks[0].usage.runtime_ns, 0);
        assert_eq!(log.tasks[1].usage.runtime_ns, 300);
        assert_eq!(log.tails_missing(), 1, "the first one's tail was lost");
    }

    #[test]
    fn tails_of_folded_and_of_lost_exit_records_still_reach_the_totals() {
        let mut log = EventLog::default();
        for tid in 0..KEPT_TASKS as i32 {
            log.push(exit_record(tid, TaskUsage::default()));
            log.push(tail(tid, 1));
        }
        log.push(exit_record(-1, TaskUsage::default()));
        assert_eq!(log.folded_tasks, 1);
        log.push(tail(-1, 1000));
        // No exit record for -2 (lost to a full ring buffer).
        log.push(tail(-2, 10_000));
        assert_eq!(log.unmatched_tails, 1);
        assert_eq!(log.tails_missing(), 0);
        let res = attach_resources(&log, None, 0, 0);
        let total = (res.user_cpu_s + res.system_cpu_s) * 1e9;
        assert!(
            (total - (KEPT_TASKS as f64 + 11_000.0)).abs() < 1e-3,
            "{total}"
        );
    }

    #[test]
    fn pooled_slot_accumulates() {
        let mut log = EventLog::default();
        for _ in 0..2 {
            let mut t = Box::new([ThreadSyscall::default(); MAX_SYSCALLS]);
            t[39].calls = 5;
            log.push(Event::ThreadStats(0, t));
        }
        assert_eq!(log.thread_tables[&0][39].calls, 10);
    }
}
