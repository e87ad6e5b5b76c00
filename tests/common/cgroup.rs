//! Test cgroups in the cgroup v2 hierarchy: created per test, their
//! processes moved back to the root and the directories removed on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The cgroup v2 mount point (the unified hierarchy of a hybrid layout).
pub fn v2_mount() -> PathBuf {
    let m = std::fs::read_to_string("/proc/self/mounts").unwrap();
    m.lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
        .expect("a cgroup v2 mount")
}

/// A cgroup v2 directory removed (with its children) on drop, after its
/// processes were moved back to the root.
pub struct TestCgroup {
    /// Its directory.
    pub path: PathBuf,
    /// Its path below the v2 mount, with a leading slash (as --cgroup takes it).
    pub rel: String,
    /// A parent made for it, removed on drop too when nothing else is in it.
    parent_made: Option<PathBuf>,
}

impl TestCgroup {
    /// Creates it (named after the tag and the test process).
    pub fn new(tag: &str) -> Self {
        let rel = format!("sockscope-test-{tag}-{}", std::process::id());
        let path = v2_mount().join(&rel);
        let _ = std::fs::create_dir(&path);
        Self {
            path,
            rel: format!("/{rel}"),
            parent_made: None,
        }
    }

    /// `<v2>/system.slice/UNIT`, where systemd puts a system unit (what
    /// `--unit` without systemd accepts). system.slice is made if missing
    /// and, if this test process made it, removed with the last test unit.
    pub fn system_unit(unit: &str) -> Self {
        static SLICE_WAS_THERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let slice = v2_mount().join("system.slice");
        let was_there = *SLICE_WAS_THERE.get_or_init(|| slice.is_dir());
        let path = slice.join(unit);
        // Another test's drop may remove an empty system.slice between our
        // mkdirs: retry.
        let mut made = std::fs::create_dir_all(&path);
        for _ in 0..20 {
            if made.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            made = std::fs::create_dir_all(&path);
        }
        made.unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        Self {
            path,
            rel: format!("/system.slice/{unit}"),
            parent_made: (!was_there).then_some(slice),
        }
    }

    /// A sub-cgroup of it, created.
    pub fn child(&self, name: &str) -> PathBuf {
        let p = self.path.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn remove(dir: &Path) {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    Self::remove(&e.path());
                }
            }
        }
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(v2_mount().join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        Self::remove(&self.path);
        if let Some(p) = &self.parent_made {
            // Fails while another test's unit is in it; its drop retries.
            let _ = std::fs::remove_dir(p);
        }
    }
}

/// Moves process `pid` into the cgroup directory `dir`.
pub fn move_to(dir: &Path, pid: i32) {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
}

/// The cgroup's CPU time so far (cpu.stat usage_usec: every task's
/// sum_exec_runtime as the scheduler adds it up), in seconds.
pub fn cpu_usage_s(dir: &Path) -> f64 {
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).unwrap();
    let usec: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .expect("usage_usec in cpu.stat")
        .trim()
        .parse()
        .unwrap();
    usec as f64 / 1e6
}
