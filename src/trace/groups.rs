//! `--by`: the kernel's per-group aggregates named as groups (process and
//! its name, process name, cgroup path), with what must outlive the
//! kernel's entries: exited processes are read one last time, removed from
//! the map (freeing their series) and pooled, the first of them kept for
//! the final report's rows.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;

use super::bpf::RawGroup;
use super::snapshot::{Breakdown, GroupKey, GroupStats};
use super::stat::{SyscallStat, add_stat};
use super::{Session, account};
use crate::probe::scope;

/// Exited processes the final report still lists one by one.
const RETIRED_ROWS: usize = 4096;

/// Turns the kernel's per-group aggregates into named groups, and keeps
/// what must outlive the kernel's entries: processes that exited are read
/// one last time, removed from the kernel's map (freeing their series) and
/// pooled into the `other` group here.
#[derive(Default)]
pub struct GroupReader {
    cgroups: Option<scope::CgroupNames>,
    comms: HashMap<i32, String>,
    /// Per syscall: processes folded in after they exited.
    retired: BTreeMap<u32, SyscallStat>,
    /// The first exited processes one by one, for the final report's rows
    /// (bounded: a long system-wide run sees unbounded pids).
    retired_detail: Vec<(GroupKey, BTreeMap<u32, SyscallStat>)>,
    /// Per syscall: exited processes beyond that bound.
    retired_undetailed: BTreeMap<u32, SyscallStat>,
    /// Processes found gone at the previous reading.
    gone_before: HashMap<i32, ()>,
    /// The last reading: no process is retired.
    final_read: bool,
    /// (process, syscall) series pooled into `retired` so far.
    retired_series: u64,
    /// Of them, those pooled into `retired_undetailed`.
    retired_undetailed_series: u64,
    /// Label sets the last reading pooled into `other`.
    folded: u64,
}

impl GroupReader {
    /// The name of process `tgid`: the one it took at its latest exec in
    /// the window, else its name now (or at its fork, once it is gone).
    /// The exec is looked up every time, since a name remembered before
    /// an exec would name the process after the shell or tool that
    /// launched it.
    fn process_name(&mut self, tgid: i32, log: &account::EventLog) -> String {
        if let Some(n) = log.exec_names.get(&tgid) {
            return n.clone();
        }
        if let Some(n) = self.comms.get(&tgid) {
            return n.clone();
        }
        let name = crate::procfs::comm(tgid)
            .or_else(|| {
                log.forks
                    .iter()
                    .rev()
                    .find(|f| f.tid == tgid)
                    .map(|f| f.comm.clone())
            })
            .unwrap_or_else(|| "?".into());
        self.comms.insert(tgid, name.clone());
        name
    }

    /// Label sets the last reading pooled into the `other` group: every
    /// (process, syscall) series retired into it, plus one per syscall
    /// with calls in the kernel's overflow slot (which keeps no group
    /// apart, so that part is a lower bound). What the metrics exporter
    /// reports as folded, beside what its own `--max-series` folds.
    pub(super) fn folded(&self) -> u64 {
        self.folded
    }

    /// Reads every group's final figures (the programs are detached):
    /// nothing is retired, exited processes keep their own rows.
    pub(super) fn read_final(
        &mut self,
        s: &mut Session<'_, '_>,
        by: Breakdown,
    ) -> Result<Vec<GroupStats>> {
        self.gone_before.clear();
        self.final_read = true;
        self.read(s, by)
    }

    /// Reads every group's cumulative figures.
    pub(super) fn read(
        &mut self,
        s: &mut Session<'_, '_>,
        by: Breakdown,
    ) -> Result<Vec<GroupStats>> {
        if by == Breakdown::None {
            return Ok(Vec::new());
        }
        let raw = s.tracer.group_stats()?;
        let overflow = s.tracer.group_overflow()?;
        let mut groups: BTreeMap<GroupKey, BTreeMap<u32, SyscallStat>> = BTreeMap::new();
        let mut gone_now: HashMap<i32, Vec<u32>> = HashMap::new();
        let log = std::rc::Rc::clone(&s.log);
        let log = log.borrow();
        for (g, stat) in raw {
            let key = match g {
                RawGroup::Process(tgid) => {
                    if !self.final_read && !std::path::Path::new(&format!("/proc/{tgid}")).exists()
                    {
                        gone_now.entry(tgid).or_default().push(stat.nr);
                        if self.gone_before.contains_key(&tgid) {
                            // Gone for a whole reading: nothing can add to
                            // it any more, so it moves to `other` for good.
                            add_into(&mut self.retired, &stat);
                            self.retired_series += 1;
                            let key = GroupKey::Process {
                                pid: tgid,
                                comm: self.process_name(tgid, &log),
                            };
                            let room = self.retired_detail.len() < RETIRED_ROWS;
                            match self.retired_detail.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, m)) => add_into(m, &stat),
                                None if room => {
                                    let mut m = BTreeMap::new();
                                    add_into(&mut m, &stat);
                                    self.retired_detail.push((key, m));
                                }
                                None => {
                                    add_into(&mut self.retired_undetailed, &stat);
                                    self.retired_undetailed_series += 1;
                                }
                            }
                            continue;
                        }
                    }
                    GroupKey::Process {
                        pid: tgid,
                        comm: self.process_name(tgid, &log),
                    }
                }
                RawGroup::Comm(name) => GroupKey::Comm(RawGroup::comm_text(&name)),
                RawGroup::Cgroup(id) => {
                    let names = self.cgroups.get_or_insert_with(|| {
                        scope::CgroupNames::new(
                            scope::v2_mount().unwrap_or_else(|_| "/sys/fs/cgroup".into()),
                        )
                    });
                    GroupKey::Cgroup(names.name_of(id))
                }
            };
            add_into(groups.entry(key).or_default(), &stat);
        }
        drop(log);
        for (tgid, nrs) in &gone_now {
            if self.gone_before.contains_key(tgid) {
                s.tracer.forget_process(*tgid, nrs);
                self.comms.remove(tgid);
                s.log.borrow_mut().exec_names.remove(tgid);
            }
        }
        self.gone_before = gone_now
            .into_keys()
            .filter(|t| !self.gone_before.contains_key(t))
            .map(|t| (t, ()))
            .collect();
        // Snapshots pool exited processes (bounded series); the final
        // report gives each its row again, as far as they were kept.
        let retired_series = if self.final_read {
            self.retired_undetailed_series
        } else {
            self.retired_series
        };
        self.folded = retired_series + overflow.len() as u64;
        let pooled = if self.final_read {
            for (k, m) in &self.retired_detail {
                let g = groups.entry(k.clone()).or_default();
                for st in m.values() {
                    add_into(g, st);
                }
            }
            &self.retired_undetailed
        } else {
            &self.retired
        };
        let other = groups.entry(GroupKey::Other).or_default();
        for st in overflow.iter().chain(pooled.values()) {
            add_into(other, st);
        }
        if other.is_empty() {
            groups.remove(&GroupKey::Other);
        }
        Ok(groups
            .into_iter()
            .map(|(key, m)| GroupStats {
                key,
                syscalls: m.into_values().collect(),
            })
            .collect())
    }
}

fn add_into(m: &mut BTreeMap<u32, SyscallStat>, st: &SyscallStat) {
    match m.get_mut(&st.nr) {
        Some(a) => add_stat(a, st),
        None => {
            m.insert(st.nr, st.clone());
        }
    }
}
