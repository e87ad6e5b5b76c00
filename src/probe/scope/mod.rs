//! What `trace --cgroup`, `--unit` and `--comm` name, resolved into what the
//! BPF scope filter compares: a cgroup v2 id and its depth, or a 16-byte
//! process name; and cgroup ids named back into paths for `--by cgroup`.
//!
//! sockscope runs as root, while a cgroup directory may be delegated to (owned
//! by) an unprivileged user who may create, rename and remove directories in
//! it, and the path a user types may cross directories anyone could write.
//! So nothing here follows a symbolic link (paths are opened with
//! `openat2(RESOLVE_NO_SYMLINKS)`, or component by component with
//! `O_NOFOLLOW` where openat2 is missing), `..` components are refused
//! rather than interpreted, every directory is checked with `fstatfs` to be
//! on cgroup2 before anything in it is read, and nothing is ever written.
//!
//! `cgroup` resolves `--cgroup`, `unit` resolves `--unit`, `comm` checks
//! `--comm`, `names` names cgroup ids for `--by cgroup`; `mounts`, `open`
//! and `walk` are what they stand on. `run` is the scope modes' run loop.

mod cgroup;
mod comm;
mod mounts;
mod names;
mod open;
mod place;
mod unit;
mod walk;

#[cfg(test)]
mod testutil;

use std::path::PathBuf;

pub use self::cgroup::resolve_cgroup;
pub use self::comm::comm_name;
pub use self::mounts::v2_mount;
pub use self::names::CgroupNames;
pub use self::unit::resolve_unit;

/// A cgroup v2 directory to trace: every task in it or below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupTarget {
    /// Absolute path as opened, e.g.
    /// `/sys/fs/cgroup/unified/system.slice/nginx.service`.
    pub path: PathBuf,
    /// Path below the v2 mount, `/` for the root, e.g.
    /// `/system.slice/nginx.service` (what `/proc/PID/cgroup`'s `0::` line
    /// shows for a process in it).
    pub rel: String,
    /// The cgroup id (what `bpf_get_current_cgroup_id` returns for a task
    /// in it): the kernfs file handle, or the inode number where no handle
    /// can be had (the two are equal on 64-bit kernels).
    pub id: u64,
    /// Depth below the root (root = 0): the `level` to pass to
    /// `bpf_get_current_ancestor_cgroup_id`.
    pub level: u32,
    /// The systemd unit it came from (`--unit`).
    pub unit: Option<String>,
    /// `--unit`: how its cgroup was found.
    pub found_by: Option<UnitFound>,
}

/// How `--unit` found the unit's cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitFound {
    /// systemd runs and named it (`ControlGroup=`).
    Systemd,
    /// No systemd runs: the one directory named like the unit where systemd
    /// would have put a system unit.
    Path,
}

impl UnitFound {
    /// `systemd` or `path`, as the JSON records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Systemd => "systemd",
            Self::Path => "path",
        }
    }
}

impl CgroupTarget {
    /// For `--unit`: the line saying which cgroup it resolved to and how
    /// (`--unit nginx.service: cgroup /sys/fs/cgroup/system.slice/nginx.service
    /// (no systemd running: found by path)`), so a wrong pick is visible.
    pub fn unit_note(&self) -> Option<String> {
        let unit = self.unit.as_ref()?;
        let how = match self.found_by? {
            UnitFound::Systemd => "systemd's ControlGroup",
            UnitFound::Path => "no systemd running: found by path",
        };
        Some(format!(
            "--unit {unit}: cgroup {} ({how})",
            self.path.display()
        ))
    }
}
