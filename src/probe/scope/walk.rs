//! The bounded walk of the cgroup v2 hierarchy (8 levels, 100,000 cgroups
//! at most, no symbolic links) that `--unit` without systemd and
//! [`CgroupNames`](super::CgroupNames) use.

use std::ffi::{CStr, OsStr, OsString};
use std::io::{self};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::Result;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstat, fstatat};
use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, fstatfs};

use super::open::{is_dir, open_dir};
use crate::error::with_code;

/// How deep below the v2 mount the hierarchy walks look (`--unit` without
/// systemd, and naming ids for `--by cgroup`). systemd services sit at
/// depth 2 (`/system.slice/x.service`), Kubernetes containers at 4 or 5.
pub(super) const MAX_DEPTH: u32 = 8;

/// How many cgroups one hierarchy walk visits at most, so that a delegated
/// user creating directories by the million cannot make sockscope walk for
/// ever (a busy container host has a few thousand).
const MAX_CGROUPS: usize = 100_000;

/// One cgroup met by [`walk`].
pub(super) struct WalkEntry<'a> {
    /// Path below the mount (`/` for the root).
    pub(super) rel: &'a str,
    /// Directory name (empty for the root).
    pub(super) name: &'a OsStr,
    /// The directory, opened `O_PATH`.
    pub(super) fd: BorrowedFd<'a>,
}

#[derive(Debug, Default)]
pub(super) struct WalkSummary {
    pub(super) visited: usize,
    /// The depth or count limit cut the walk short.
    pub(super) truncated: bool,
}

/// Visits the cgroups below `mount` (it included), depth first, at most
/// [`MAX_DEPTH`] levels and [`MAX_CGROUPS`] directories, following no
/// symbolic link and crossing into no other file system.
pub(super) fn walk(mount: &Path, visit: &mut dyn FnMut(&WalkEntry<'_>)) -> Result<WalkSummary> {
    let fd = open_dir(mount).map_err(|e| with_code(1, format!("cgroup v2 mount: {e}")))?;
    match fstatfs(&fd) {
        Ok(fs) if fs.filesystem_type() == CGROUP2_SUPER_MAGIC => {}
        Ok(_) => {
            return Err(with_code(
                1,
                format!("{} is not a cgroup v2 mount", mount.display()),
            ));
        }
        Err(e) => return Err(with_code(1, format!("{}: {}", mount.display(), e.desc()))),
    }
    Ok(walk_fd(fd.as_fd(), "/", visit)?)
}

pub(super) fn walk_fd(
    root: BorrowedFd<'_>,
    rel: &str,
    visit: &mut dyn FnMut(&WalkEntry<'_>),
) -> io::Result<WalkSummary> {
    let dev = fstat(root)?.st_dev;
    let mut summary = WalkSummary::default();
    let mut rel = rel.to_owned();
    walk_dir(root, OsStr::new(""), &mut rel, 0, dev, &mut summary, visit);
    Ok(summary)
}

fn walk_dir(
    fd: BorrowedFd<'_>,
    name: &OsStr,
    rel: &mut String,
    depth: u32,
    dev: libc::dev_t,
    summary: &mut WalkSummary,
    visit: &mut dyn FnMut(&WalkEntry<'_>),
) {
    summary.visited += 1;
    visit(&WalkEntry { rel, name, fd });
    // A directory removed or unreadable meanwhile has nothing to list.
    let Ok(children) = subdirectories(fd) else {
        return;
    };
    if depth >= MAX_DEPTH {
        summary.truncated |= !children.is_empty();
        return;
    }
    for child in children {
        if summary.visited >= MAX_CGROUPS {
            summary.truncated = true;
            return;
        }
        let Ok(cfd) = openat(
            fd,
            child.as_os_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        // Renamed into a link or a file meanwhile, or a mount on top: skip.
        if !fstat(&cfd).is_ok_and(|st| is_dir(&st) && st.st_dev == dev) {
            continue;
        }
        let len = rel.len();
        if !rel.ends_with('/') {
            rel.push('/');
        }
        rel.push_str(&child.to_string_lossy());
        walk_dir(cfd.as_fd(), &child, rel, depth + 1, dev, summary, visit);
        rel.truncate(len);
    }
}

/// Names of the subdirectories of `dir` (symbolic links excluded).
fn subdirectories(dir: BorrowedFd<'_>) -> nix::Result<Vec<OsString>> {
    let fd = openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: fd is an open directory; on success the stream owns it.
    let dirp = unsafe { libc::fdopendir(fd.as_raw_fd()) };
    if dirp.is_null() {
        return Err(Errno::last());
    }
    let _ = fd.into_raw_fd();
    struct Stream(*mut libc::DIR);
    impl Drop for Stream {
        fn drop(&mut self) {
            // SAFETY: the stream is open and closed only here.
            unsafe { libc::closedir(self.0) };
        }
    }
    let stream = Stream(dirp);
    let mut names = Vec::new();
    loop {
        Errno::clear();
        // SAFETY: the stream is open; the entry is read before the next call.
        let ent = unsafe { libc::readdir64(stream.0) };
        if ent.is_null() {
            match Errno::last_raw() {
                0 => break,
                e => return Err(Errno::from_raw(e)),
            }
        }
        // SAFETY: readdir64 returned a valid entry with a NUL-terminated name.
        let (name, d_type) = unsafe { (CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
        let name = name.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name);
        let dir_like = match d_type {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => {
                fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| is_dir(&st))
            }
            _ => false,
        };
        if dir_like {
            names.push(name.to_os_string());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn walk_is_bounded_in_depth() {
        let Some(mount) = cgroup_env("walk_is_bounded_in_depth") else {
            return;
        };
        let mut g = Groups::new(&mount);
        let top = unique("deep");
        let deep: Vec<String> = (1..=9).map(|i| format!("d{i}")).collect();
        g.mkdir(&format!("{top}/{}", deep.join("/")));
        let mut seen = Vec::new();
        let summary = walk(&mount, &mut |e: &WalkEntry<'_>| {
            if e.rel.starts_with(&format!("/{top}")) {
                seen.push(e.rel.to_owned());
            }
        })
        .unwrap();
        // The top is level 1; d7 is level 8, the deepest visited.
        assert_eq!(seen.len(), 8, "{seen:?}");
        assert!(seen.last().unwrap().ends_with("/d7"), "{seen:?}");
        assert!(summary.truncated);
    }
}
