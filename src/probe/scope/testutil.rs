//! Helpers the scope tests share: a cgroup v2 test environment, test
//! cgroups removed on drop, unique names, exit codes of errors.

use std::process::Child;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::mounts::{pick_v2, read_mountinfo};

/// The v2 mount, when this test can create cgroups (root, cgroup2
/// mounted); otherwise a printed skip, or a failure under CI=true.
pub(super) fn cgroup_env(test: &str) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mount = read_mountinfo()
        .ok()
        .and_then(|m| pick_v2(&m).map(|m| m.mount_point.clone()));
    let why = match (&mount, root) {
        (Some(_), true) => return mount,
        (None, _) => "cgroup v2 is not mounted",
        (Some(_), false) => "not running as root (creating cgroups needs it)",
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but {why}: cgroup tests must run in CI");
    }
    eprintln!("SKIP {test}: {why}");
    None
}

/// Test cgroups and the processes put in them, all removed on drop
/// (a failing assertion included).
pub(super) struct Groups {
    mount: PathBuf,
    dirs: Vec<PathBuf>,
    children: Vec<Child>,
}

impl Groups {
    pub(super) fn new(mount: &Path) -> Self {
        Self {
            mount: mount.to_path_buf(),
            dirs: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Creates `rel` (and its missing parents) below the mount.
    pub(super) fn mkdir(&mut self, rel: &str) -> PathBuf {
        let mut path = self.mount.clone();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            path.push(part);
            if !path.exists() {
                std::fs::create_dir(&path)
                    .unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
                self.dirs.push(path.clone());
            }
        }
        path
    }

    /// Starts a `sleep` and moves it into cgroup `dir`; its pid.
    pub(super) fn spawn_in(&mut self, dir: &Path) -> u32 {
        let child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        self.children.push(child);
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("move {pid} into {}: {e}", dir.display()));
        pid
    }

    /// Removes one created directory now.
    pub(super) fn rmdir(&mut self, path: &Path) {
        rmdir_retry(path);
        self.dirs.retain(|d| d != path);
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for d in self.dirs.iter().rev() {
            rmdir_retry(d);
        }
    }
}

/// rmdir, retrying while the kernel still counts a just-reaped process.
pub(super) fn rmdir_retry(path: &Path) {
    for _ in 0..100 {
        match std::fs::remove_dir(path) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return,
        }
    }
    eprintln!("could not remove test cgroup {}", path.display());
}

pub(super) fn unique(tag: &str) -> String {
    format!("sockscope-test-{}-{tag}", std::process::id())
}

pub(super) fn message(e: &anyhow::Error) -> (u8, String) {
    let exit = e
        .downcast_ref::<crate::error::Exit>()
        .expect("an Exit error");
    (exit.code, exit.message.clone())
}
