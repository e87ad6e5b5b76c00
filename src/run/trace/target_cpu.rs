//! The target's CPU time over a window without the syscall tracer (whose
//! BPF accounting gives it otherwise): `trace --requests-only` and
//! `profile --requests-only` read it before the anatomy's window opens and
//! after it closes. A cgroup's `cpu.stat` (exited tasks included) for a
//! cgroup or unit; the processes' /proc/PID/stat (user and system, exited
//! threads included) for a process tree and for a comm or system scope.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::probe::{ScopeTarget, TargetSpec};

/// Where the target's CPU time is read.
pub enum CpuProbe {
    /// A cgroup's cpu.stat.
    Cgroup(PathBuf),
    /// The root's process tree, now.
    Tree(i32),
    /// A comm or system scope's members, now.
    Members(ScopeTarget),
}

/// One reading: a cgroup's (user, system) usage in us, or each process's
/// (user, system) ticks.
pub enum CpuReading {
    /// cpu.stat's user_usec and system_usec (None: unreadable).
    Usec(Option<(u64, u64)>),
    /// Per process.
    Ticks(BTreeMap<i32, (u64, u64)>),
}

/// The target's CPU over a window, s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSplit {
    /// In user mode.
    pub user_s: f64,
    /// In the kernel.
    pub system_s: f64,
}

impl CpuSplit {
    /// User plus system, s.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

impl CpuProbe {
    /// The probe of a trace target whose root pid (tree modes) is `root`.
    pub fn new(target: &TargetSpec, root: i32) -> Self {
        match target {
            TargetSpec::Scope {
                scope: ScopeTarget::Cgroup(c),
                ..
            } => CpuProbe::Cgroup(c.path.clone()),
            TargetSpec::Scope { scope, .. } => CpuProbe::Members(scope.clone()),
            _ => CpuProbe::Tree(root),
        }
    }

    /// Where it reads, as artifacts name it.
    pub fn source(&self) -> &'static str {
        match self {
            CpuProbe::Cgroup(_) => "cgroup cpu.stat",
            _ => "/proc stat",
        }
    }

    /// One reading, now.
    pub fn read(&self) -> CpuReading {
        let pids = match self {
            CpuProbe::Cgroup(dir) => return CpuReading::Usec(cgroup_usage_usec(dir)),
            CpuProbe::Tree(root) => {
                let mut p = crate::procfs::descendants(*root);
                p.push(*root);
                p
            }
            CpuProbe::Members(scope) => super::requests::members_of(scope),
        };
        CpuReading::Ticks(
            pids.into_iter()
                .filter_map(|p| Some((p, crate::procfs::process_cpu_split_ticks(p)?)))
                .collect(),
        )
    }

    /// The CPU between two readings; a process gone by the second one is
    /// named in a note (its CPU in the window is missing). A process born
    /// in between counts whole (all of its life is in the window).
    pub fn cpu(&self, a: &CpuReading, b: &CpuReading, notes: &mut Vec<String>) -> Option<CpuSplit> {
        match (a, b) {
            (CpuReading::Usec(Some(x)), CpuReading::Usec(Some(y))) => Some(CpuSplit {
                user_s: y.0.saturating_sub(x.0) as f64 / 1e6,
                system_s: y.1.saturating_sub(x.1) as f64 / 1e6,
            }),
            (CpuReading::Ticks(x), CpuReading::Ticks(y)) => {
                let gone = x.keys().filter(|p| !y.contains_key(p)).count();
                if gone > 0 {
                    notes.push(format!(
                        "{gone} process(es) exited during the window: their CPU time is not \
                         in the target's, so the cost's share of it is an upper bound"
                    ));
                }
                let (mut user, mut system) = (0u64, 0u64);
                for (p, (u, s)) in y {
                    let (u0, s0) = x.get(p).copied().unwrap_or((0, 0));
                    user += u.saturating_sub(u0);
                    system += s.saturating_sub(s0);
                }
                let hz = crate::procfs::clock_ticks();
                Some(CpuSplit {
                    user_s: user as f64 / hz,
                    system_s: system as f64 / hz,
                })
            }
            _ => None,
        }
    }
}

/// A cgroup's (user, system) CPU time so far, us (cpu.stat; cgroupfs
/// holds no links, and the file is small).
fn cgroup_usage_usec(dir: &std::path::Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    parse_cpu_stat(&text)
}

/// cpu.stat's user_usec and system_usec.
fn parse_cpu_stat(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?
            .trim()
            .parse()
            .ok()
    };
    Some((field("user_usec")?, field("system_usec")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_cpu_counts_new_processes_whole_and_notes_the_gone() {
        let probe = CpuProbe::Tree(1);
        let a = CpuReading::Ticks([(1, (100, 10)), (2, (50, 5))].into_iter().collect());
        let b = CpuReading::Ticks([(1, (130, 15)), (3, (20, 1))].into_iter().collect());
        let mut notes = Vec::new();
        let c = probe.cpu(&a, &b, &mut notes).unwrap();
        let hz = crate::procfs::clock_ticks();
        assert!((c.user_s - 50.0 / hz).abs() < 1e-9, "{c:?}");
        assert!((c.system_s - 6.0 / hz).abs() < 1e-9, "{c:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn cgroup_cpu_is_the_usage_difference() {
        let probe = CpuProbe::Cgroup(PathBuf::from("/nonexistent"));
        let mut notes = Vec::new();
        let c = probe
            .cpu(
                &CpuReading::Usec(Some((1_000_000, 0))),
                &CpuReading::Usec(Some((3_000_000, 500_000))),
                &mut notes,
            )
            .unwrap();
        assert_eq!((c.user_s, c.system_s, c.total_s()), (2.0, 0.5, 2.5));
        assert!(
            probe
                .cpu(
                    &CpuReading::Usec(None),
                    &CpuReading::Usec(Some((1, 1))),
                    &mut notes
                )
                .is_none()
        );
    }

    #[test]
    fn cpu_stat_gives_user_and_system() {
        let text = "usage_usec 9000\nuser_usec 6000\nsystem_usec 3000\nnr_periods 0\n";
        assert_eq!(parse_cpu_stat(text), Some((6000, 3000)));
        assert_eq!(parse_cpu_stat("usage_usec 9000\n"), None);
    }
}
