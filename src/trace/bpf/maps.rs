//! Reading what the programs counted: the per-syscall and per-group
//! aggregates summed over CPUs, errno counts, the hook counters in .bss,
//! and the task iterator (baselines, end of window, live peeks).

use std::collections::BTreeMap;
use std::io::Read;

use anyhow::{Context, Result, bail};
use libbpf_rs::{Iter, MapCore, MapFlags, MapHandle};

use super::super::abi::{ERRNO_DIRECT, ERRNO_RESTART_BASE, ERRNO_SLOTS, MAX_SYSCALLS, types};
use super::super::snapshot::Breakdown;
use super::super::stat::SyscallStat;
use super::attach::attach_error;
use super::records::parse_all;
use super::{Event, HookCounters, RawGroup, Tracer};
use crate::probe::hist::{self, Histogram};
use crate::probe::pod::{self, as_bytes};
use types::ss_iter_mode as IterMode;

/// errno slot (as stored by the BPF side) back to the errno value.
fn errno_of_slot(slot: u32) -> u32 {
    if slot >= ERRNO_DIRECT {
        ERRNO_RESTART_BASE + (slot - ERRNO_DIRECT)
    } else {
        slot
    }
}

impl Tracer<'_> {
    fn run_iter(&mut self, mode: IterMode) -> Result<Vec<u8>> {
        // Ordinary store into the mmapped .bss; the iterator runs after the
        // bpf_iter_create syscall below, which orders it.
        self.bss()?.iter_mode = mode;
        if self.iter_link.is_none() {
            let link = self
                .skel
                .progs
                .ss_iter_task
                .attach()
                .map_err(|e| attach_error("the task iterator", e))?;
            self.iter_link = Some(link);
        }
        let link = self.iter_link.as_ref().expect("set above");
        let mut iter = Iter::new(link).context("creating the task iterator")?;
        let mut out = Vec::new();
        iter.read_to_end(&mut out)
            .context("reading the task iterator")?;
        Ok(out)
    }

    /// Records the current counters of every newly registered task as its
    /// baseline and gives it a per-thread slot; returns one record per task.
    pub fn take_baselines(&mut self) -> Result<Vec<Event>> {
        let raw = self.run_iter(IterMode::SS_ITER_BASELINE)?;
        parse_all(&raw)
    }

    /// Closes the resource window: exit records stop, and every traced task
    /// still alive reports its in-window usage (and per-thread table).
    pub fn close_window(&mut self) -> Result<Vec<Event>> {
        self.bss()?.window_closed = 1;
        let raw = self.run_iter(IterMode::SS_ITER_END)?;
        parse_all(&raw)
    }

    /// A handle on the lifecycle ring buffer that does not borrow the tracer.
    pub fn events_map(&self) -> Result<MapHandle> {
        MapHandle::try_from(&self.skel.maps.events).context("duplicating the event ring buffer fd")
    }
    /// Fork/exit hook counters.
    pub fn counters(&mut self) -> Result<HookCounters> {
        let c = self.bss()?.counters;
        Ok(HookCounters {
            threads_created: c.threads_created,
            processes_created: c.processes_created,
            exits: c.exits,
            ringbuf_drops: c.ringbuf_drops,
            joined: c.joined,
        })
    }

    /// Every traced task still alive reports its usage so far, the window
    /// staying open (for a running total of the scope's usage).
    pub fn peek_live(&mut self) -> Result<Vec<Event>> {
        let raw = self.run_iter(IterMode::SS_ITER_PEEK)?;
        parse_all(&raw)
    }

    /// Per-group aggregates (--by), summed over CPUs: one entry per
    /// (group, syscall) with calls.
    pub fn group_stats(&self) -> Result<Vec<(RawGroup, SyscallStat)>> {
        let map = &self.skel.maps.group_stats;
        let mut out = Vec::new();
        for key in map.keys() {
            let Some(k) = pod::read::<types::ss_group_key>(&key) else {
                continue;
            };
            // A key deleted since keys() listed it is simply gone.
            let Some(per_cpu) = map
                .lookup_percpu(&key, MapFlags::ANY)
                .context("reading per-group statistics")?
            else {
                continue;
            };
            let stat = self.sum_cpus(k.nr, &per_cpu)?;
            if stat.calls == 0 {
                continue;
            }
            let group = match self.cfg.by {
                Breakdown::Process => RawGroup::Process(k.a as i32),
                Breakdown::Comm => {
                    let mut name = [0u8; 16];
                    name[..8].copy_from_slice(&k.a.to_ne_bytes());
                    name[8..].copy_from_slice(&k.b.to_ne_bytes());
                    RawGroup::Comm(name)
                }
                Breakdown::Cgroup | Breakdown::None => RawGroup::Cgroup(k.a),
            };
            out.push((group, stat));
        }
        Ok(out)
    }

    /// Removes one process group's aggregates (all its syscalls) after the
    /// caller read them for the last time: the process is gone, so nothing
    /// can add to them any more, and the slots are free for new groups.
    pub fn forget_process(&self, tgid: i32, nrs: &[u32]) {
        for nr in nrs {
            let k = types::ss_group_key {
                a: tgid as u32 as u64,
                b: 0,
                nr: *nr,
                pad: 0,
            };
            let _ = self.skel.maps.group_stats.delete(as_bytes(&k));
        }
    }

    /// Aggregates of the groups that found the series limit reached, per
    /// syscall.
    pub fn group_overflow(&self) -> Result<Vec<SyscallStat>> {
        self.array_stats(&self.skel.maps.group_other, false)
    }

    /// Traced syscall events counted so far (all CPUs); cheap: reads the
    /// mmapped .bss.
    pub fn events_counted(&mut self) -> u64 {
        self.bss()
            .map(|b| b.cpu_events.iter().map(|c| c.n).sum())
            .unwrap_or(0)
    }

    /// Per-syscall aggregates summed over CPUs; only syscalls with calls.
    pub fn syscall_stats(&self) -> Result<Vec<SyscallStat>> {
        self.array_stats(&self.skel.maps.sc_stats, true)
    }

    fn array_stats(&self, map: &impl MapCore, errnos: bool) -> Result<Vec<SyscallStat>> {
        let mut out = Vec::new();
        for nr in 0..MAX_SYSCALLS as u32 {
            let per_cpu = map
                .lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)
                .context("reading per-syscall statistics")?
                .unwrap_or_default();
            let mut agg = self.sum_cpus(nr, &per_cpu)?;
            if agg.calls == 0 {
                continue;
            }
            if errnos && agg.errors > 0 {
                agg.errnos = self.errnos_of(nr)?;
            }
            out.push(agg);
        }
        Ok(out)
    }

    /// One aggregate summed over the CPUs' values.
    fn sum_cpus(&self, nr: u32, per_cpu: &[Vec<u8>]) -> Result<SyscallStat> {
        let mut agg = SyscallStat {
            nr,
            calls: 0,
            errors: 0,
            total_ns: 0,
            hist: Histogram {
                counts: vec![0; hist::BUCKETS],
                min: u64::MAX,
                max: 0,
            },
            errnos: BTreeMap::new(),
        };
        for cpu in per_cpu.iter().take(self.ncpus) {
            let Some(s) = pod::read::<types::ss_sc_stats>(cpu) else {
                bail!("short per-CPU value in the syscall statistics");
            };
            if s.calls == 0 {
                continue;
            }
            agg.calls += s.calls;
            agg.errors += s.errors;
            agg.total_ns += s.total_ns;
            for (a, b) in agg.hist.counts.iter_mut().zip(s.hist.iter()) {
                *a += b;
            }
            if s.hist.iter().any(|c| *c > 0) {
                agg.hist.min = agg.hist.min.min(s.min_ns);
                agg.hist.max = agg.hist.max.max(s.max_ns);
            }
        }
        if agg.hist.min == u64::MAX {
            agg.hist.min = 0;
        }
        Ok(agg)
    }

    fn errnos_of(&self, nr: u32) -> Result<BTreeMap<u32, u64>> {
        let per_cpu = self
            .skel
            .maps
            .sc_errnos
            .lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)
            .context("reading errno counts")?
            .unwrap_or_default();
        let mut sums = vec![0u64; ERRNO_SLOTS as usize];
        for v in per_cpu.iter().take(self.ncpus) {
            for (sum, c) in sums.iter_mut().zip(v.chunks_exact(8)) {
                *sum += pod::read::<u64>(c).unwrap_or(0);
            }
        }
        Ok(sums
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(slot, n)| (errno_of_slot(slot as u32), *n))
            .collect())
    }
}
