//! Small /proc readers: the threads and descendants of a process, its
//! memory high-water mark, capabilities; and getrusage for this process.
//! Every reader tolerates a process that disappears while it is being read
//! (the caller decides what a vanished task means).

pub mod snmp;
pub mod sock_diag;
pub mod unix_diag;

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io;

/// Thread ids of process `pid` (from /proc/PID/task).
pub fn threads(pid: i32) -> io::Result<Vec<i32>> {
    let mut out: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Parses the fields after the command name in /proc/PID/stat.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain ") ".
    let close = s.rfind(')')?;
    Some(
        s[close + 1..]
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// Parent pid of `pid`.
pub fn ppid(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// All processes that descend from `root` (not including it), found by
/// walking parent links of every process in /proc. Independent of
/// CONFIG_PROC_CHILDREN.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(pp) = ppid(pid) {
                children.entry(pp).or_default().push(pid);
            }
        }
    }
    let mut out = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for c in children.get(&p).into_iter().flatten() {
            if out.insert(*c) {
                stack.push(*c);
            }
        }
    }
    out.into_iter().collect()
}

/// The processes of a tree scope now: each root and its descendants,
/// sorted, each once (what the BPF tree maps are seeded with).
pub fn tree_pids(roots: &[i32]) -> Vec<i32> {
    let mut out: Vec<i32> = roots.to_vec();
    for &r in roots {
        out.extend(descendants(r));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A `Key:   value kB` field of /proc/PID/status, in kB.
pub fn status_kb(pid: i32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Peak resident set size of `pid` (VmHWM) in kB.
pub fn vm_hwm_kb(pid: i32) -> Option<u64> {
    status_kb(pid, "VmHWM")
}

/// Short command name of `pid`.
pub fn comm(pid: i32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// (user, system) CPU time of `who` (RUSAGE_SELF: this process, reaped
/// threads included; RUSAGE_THREAD: the calling thread), ns.
pub fn rusage_ns(who: libc::c_int) -> (u64, u64) {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// Clock ticks per second of the CPU times in /proc (USER_HZ).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// User plus system CPU of process `pid`, every thread included, in clock
/// ticks.
pub fn process_cpu_ticks(pid: i32) -> Option<u64> {
    let f = stat_fields(pid)?;
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the
    // command name.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// User and system CPU of process `pid` apart, every thread included
/// (exited ones too), in clock ticks.
pub fn process_cpu_split_ticks(pid: i32) -> Option<(u64, u64)> {
    let f = stat_fields(pid)?;
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// CPU of the kernel's worker threads (kworker, ksoftirqd), summed over
/// every such thread, in clock ticks. Work the kernel defers (sockmap
/// redirects, softirqs under load) runs there, charged to no user process.
pub fn kernel_worker_cpu_ticks() -> u64 {
    let Ok(dir) = fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            comm(*pid).is_some_and(|c| c.starts_with("kworker") || c.starts_with("ksoftirqd"))
        })
        .filter_map(process_cpu_ticks)
        .sum()
}

/// Busy CPU of the whole machine (user, nice, system, irq, softirq over
/// every CPU) from /proc/stat, in clock ticks.
pub fn machine_busy_ticks() -> Option<u64> {
    let s = fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = s
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    Some(f.first()? + f.get(1)? + f.get(2)? + f.get(5)? + f.get(6)?)
}

/// Effective capability mask of this process.
pub fn effective_caps() -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        assert!(threads(me).unwrap().contains(&me));
        assert_eq!(comm(me).as_deref().map(|c| !c.is_empty()), Some(true));
        assert!(vm_hwm_kb(me).unwrap() > 0);
        assert!(ppid(me).unwrap() > 0);
        assert!(effective_caps().is_some());
        assert!(snmp::read(false).is_some());
        assert!(machine_busy_ticks().unwrap() > 0);
        assert!(clock_ticks() > 0.0);
    }

    #[test]
    fn counts_the_cpu_a_process_burns() {
        let me = std::process::id() as i32;
        let before = process_cpu_ticks(me).unwrap();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        // Spin until the counter moves by 5 ticks (bounded): it must move.
        while process_cpu_ticks(me).unwrap() < before + 5 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
    }

    #[test]
    fn finds_a_child_as_descendant() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let found = descendants(me);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found.contains(&(child.id() as i32)), "{found:?}");
    }
}
