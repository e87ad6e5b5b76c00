//! Small /proc readers: the threads and descendants of a process, its
//! memory high-water mark, capabilities. Every reader tolerates a process
//! that disappears while it is being read (the caller decides what a
//! vanished task means).

pub mod snmp;

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
