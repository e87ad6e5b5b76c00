//! The programs' own cost: the kernel's run-time accounting
//! (BPF_ENABLE_STATS) per program, and the syscall programs' own timing of
//! traced and filtered runs in .bss, both switched on for sampled slices.

use super::super::abi::types;
use super::Tracer;
use crate::probe::ScopeFilter;

/// Kernel-measured run time of one program (bpf_enable_stats).
#[derive(Clone, Debug)]
pub struct ProgCost {
    /// Program name.
    pub name: &'static str,
    /// Times it ran (for every task on the machine, traced or not).
    pub run_cnt: u64,
    /// Total time spent in it.
    pub run_time_ns: u64,
}

/// One syscall program's own timing over the self-cost slices (its
/// `ss_prog_cost` in src/bpf/syscalls.h, summed over CPUs): raw sums, as
/// the program took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgSplit {
    /// Runs on a traced task's event.
    pub traced_runs: u64,
    /// Sum of their t2 - t1 (one clock read's cost included per run).
    pub traced_ns: u64,
    /// Runs that only filtered another task's syscall out.
    pub filtered_runs: u64,
    /// Sum of their t2 - t1.
    pub filtered_ns: u64,
    /// Sum of t1 - t0 over all timed runs: one clock read each.
    pub clock_ns: u64,
}

impl ProgSplit {
    /// What accumulated since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            traced_runs: self.traced_runs.saturating_sub(earlier.traced_runs),
            traced_ns: self.traced_ns.saturating_sub(earlier.traced_ns),
            filtered_runs: self.filtered_runs.saturating_sub(earlier.filtered_runs),
            filtered_ns: self.filtered_ns.saturating_sub(earlier.filtered_ns),
            clock_ns: self.clock_ns.saturating_sub(earlier.clock_ns),
        }
    }

    fn add(&mut self, p: &types::ss_prog_cost) {
        self.traced_runs += p.traced_runs;
        self.traced_ns += p.traced_ns;
        self.filtered_runs += p.filtered_runs;
        self.filtered_ns += p.filtered_ns;
        self.clock_ns += p.clock_ns;
    }
}

/// Both syscall programs' own timing (see [`ProgSplit`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitSums {
    /// ss_sys_enter.
    pub enter: ProgSplit,
    /// ss_sys_exit (all zero in count-only mode).
    pub exit: ProgSplit,
}

impl SplitSums {
    /// What accumulated since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            enter: self.enter.since(earlier.enter),
            exit: self.exit.since(earlier.exit),
        }
    }
}

impl Tracer<'_> {
    /// Turns the kernel's per-program run-time accounting
    /// (BPF_ENABLE_STATS) and the syscall programs' own timing (.bss
    /// `cost_on`) on or off together. The kernel's accounting is global and
    /// costs two clock reads per program run, the programs' own three more,
    /// so the caller samples it. The flag is raised after the kernel's
    /// accounting is on and lowered before it goes off, so every run the
    /// programs time is one the kernel timed too. Needs CAP_SYS_ADMIN;
    /// returns the reason when it cannot be turned on.
    pub fn set_self_cost(&mut self, on: bool) -> std::result::Result<(), String> {
        if !on {
            self.set_cost_flag(false);
            self.stats_fd = None;
            return Ok(());
        }
        if self.stats_fd.is_some() {
            return Ok(());
        }
        self.stats_fd = Some(crate::probe::run_stats::enable()?);
        self.set_cost_flag(true);
        Ok(())
    }

    fn set_cost_flag(&mut self, on: bool) {
        if let Ok(bss) = self.bss() {
            // Volatile: the programs read it concurrently through the
            // mmapped page; the store must happen here, not be moved.
            // SAFETY: a valid, aligned field of the mapped .bss.
            unsafe { std::ptr::write_volatile(&mut bss.cost_on, u32::from(on)) };
        }
    }

    /// The syscall programs' own timing so far, summed over CPUs (only
    /// runs inside self-cost slices are in it).
    pub fn split_sums(&mut self) -> SplitSums {
        let mut out = SplitSums::default();
        if let Ok(bss) = self.bss() {
            for c in bss.cpu_cost.iter() {
                // SAFETY: a valid, aligned element of the mapped .bss that
                // the programs write concurrently: read it as it is now.
                let c = unsafe { std::ptr::read_volatile(c) };
                out.enter.add(&c.enter);
                out.exit.add(&c.exit);
            }
        }
        out
    }

    /// The syscall programs' own timing on one CPU (see [`Self::split_sums`]).
    pub fn split_sums_on(&mut self, cpu: usize) -> SplitSums {
        let mut out = SplitSums::default();
        if let Ok(bss) = self.bss() {
            if let Some(c) = bss.cpu_cost.get(cpu % bss.cpu_cost.len()) {
                // SAFETY: as in split_sums.
                let c = unsafe { std::ptr::read_volatile(c) };
                out.enter.add(&c.enter);
                out.exit.add(&c.exit);
            }
        }
        out
    }
    /// Run counts and times the kernel accumulated for each program while
    /// run-time accounting was on.
    pub fn prog_costs(&self) -> Option<Vec<ProgCost>> {
        let progs = &self.skel.progs;
        let mut out = Vec::new();
        let named: [(&'static str, &libbpf_rs::ProgramMut<'_>, bool); 7] = [
            ("ss_sys_enter", &progs.ss_sys_enter, true),
            ("ss_sys_exit", &progs.ss_sys_exit, !self.cfg.count_only),
            ("ss_fork", &progs.ss_fork, true),
            ("ss_exit", &progs.ss_exit, true),
            ("ss_exit_tail", &progs.ss_exit_tail, true),
            ("ss_exec", &progs.ss_exec, true),
            (
                "ss_cgroup_attach",
                &progs.ss_cgroup_attach,
                matches!(self.cfg.scope, ScopeFilter::Cgroup { .. }),
            ),
        ];
        for (name, prog, loaded) in named {
            if !loaded {
                continue;
            }
            let (run_cnt, run_time_ns) = crate::probe::run_stats::of(prog)?;
            out.push(ProgCost {
                name,
                run_cnt,
                run_time_ns,
            });
        }
        Some(out)
    }

    /// Names of the programs as the kernel lists them (bpftool prog show).
    pub fn prog_names() -> &'static [&'static str] {
        &[
            "ss_sys_enter",
            "ss_sys_exit",
            "ss_fork",
            "ss_exit",
            "ss_exit_tail",
            "ss_exec",
            "ss_cgroup_attach",
            "ss_iter_task",
        ]
    }
}
