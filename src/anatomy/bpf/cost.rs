//! What the programs cost: the kernel's run-time accounting of them, their
//! run counts, and their timed runs per process (for
//! [`crate::anatomy::service_cost`]).

use anyhow::{Context, Result, bail};
use libbpf_rs::{MapCore, MapFlags};

use super::Programs;
use crate::anatomy::abi::{PROGS, types};
use crate::anatomy::service_cost::Timed;
use crate::probe::pod;

impl Programs<'_> {
    /// Holds the kernel's run-time accounting (BPF_ENABLE_STATS) or lets
    /// it go. It costs every program on the machine two clock reads a run
    /// while held, so the caller holds it in short slices. False when the
    /// kernel refuses it.
    pub fn set_kernel_stats(&mut self, on: bool) -> bool {
        if !on {
            self.stats_fd = None;
        } else if self.stats_fd.is_none() {
            self.stats_fd = crate::probe::run_stats::enable().ok();
        }
        !on || self.stats_fd.is_some()
    }

    /// Every run of the programs so far, summed over CPUs (they count each
    /// one, timed or not).
    pub fn runs_total(&mut self) -> Result<u64> {
        let ncpus = self.ncpus.max(1);
        let bss = self.bss()?;
        Ok(bss
            .cpus
            .iter()
            .take(ncpus)
            .flat_map(|c| c.prog.iter().take(PROGS))
            .map(|p| p.matched + p.filtered)
            .sum())
    }

    /// The kernel's run time and run count of the per-request programs so
    /// far (they grow only while its accounting is on); None when the
    /// accounting is off or unreadable.
    pub fn kernel_run_time(&self) -> Option<(u64, u64)> {
        self.stats_fd.as_ref()?;
        let progs = &self.skel.progs;
        let mut sum = (0u64, 0u64);
        for prog in [
            &progs.ss_data_ready,
            &progs.ss_recv,
            &progs.ss_send,
            &progs.ss_sock_state,
        ] {
            let (runs, ns) = crate::probe::run_stats::of(prog)?;
            sum.0 += ns;
            sum.1 += runs;
        }
        Some(sum)
    }

    /// The timed runs per process (the cost slices' `svc_cost` map),
    /// summed over the CPUs.
    pub fn service_costs(&self) -> Result<Vec<(u32, Timed)>> {
        let map = &self.skel.maps.svc_cost;
        let mut out = Vec::new();
        for key in map.keys() {
            let Some(tgid) = pod::read::<u32>(&key) else {
                bail!("short key in the per-process cost");
            };
            // Evicted since the keys were listed: nothing to add.
            let Some(per_cpu) = map
                .lookup_percpu(&key, MapFlags::ANY)
                .context("reading the per-process cost")?
            else {
                continue;
            };
            let mut t = Timed::default();
            for v in &per_cpu {
                let Some(c) = pod::read::<types::ss_anat_svc_cost>(v) else {
                    bail!("short value in the per-process cost");
                };
                t.ns += c.ns;
                t.runs += c.runs;
                t.clock_ns += c.clock_ns;
            }
            out.push((tgid, t));
        }
        Ok(out)
    }
}
