//! `--cgroup ARG` ([`resolve_cgroup`]): a path, absolute or below the v2
//! mount, opened without following links, checked to be a cgroup v2
//! directory, and its cgroup id and depth read.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

use anyhow::Result;
use nix::sys::stat::fstat;
use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, fstatfs};

use super::CgroupTarget;
use super::mounts::{MountEntry, below, mount_of, pick_v2, read_mountinfo, rel_below, v2_missing};
use super::open::{OpenFail, normalise, open_dir};
use crate::error::with_code;

/// File-handle type of kernfs (include/linux/exportfs.h): its handle is the
/// 64-bit node id, which for cgroupfs is the cgroup id BPF reports.
const FILEID_KERNFS: i32 = 0xfe;

/// Resolves `--cgroup ARG`.
///
/// An absolute ARG that exists is used as it is; any other ARG (relative,
/// or absolute but absent, like `/system.slice/x.service`) is taken below
/// the cgroup v2 mount. No symbolic link is followed anywhere on the path,
/// and `..` components are refused (usage error, exit 2) rather than
/// interpreted. Errors (exit 1): the path does not exist, is not a
/// directory, is a symbolic link or crosses one, is in a cgroup v1
/// hierarchy (the message names where the same group would live in v2), or
/// is not a cgroup at all.
pub fn resolve_cgroup(arg: &str) -> Result<CgroupTarget> {
    let mounts = read_mountinfo()?;
    resolve_in(arg, &mounts)
}

fn resolve_in(arg: &str, mounts: &[MountEntry]) -> Result<CgroupTarget> {
    let norm = normalise(arg)?;
    let v2 = pick_v2(mounts);
    if norm.is_absolute() {
        let as_is = match open_cgroup(&norm, mounts) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        // Absent as an absolute path: the second rule takes it below the
        // v2 mount (`/system.slice/x.service`).
        let (missing, v2) = match (&as_is, v2) {
            (OpenCgroupFail::Open(OpenFail::NotFound(missing)), Some(v2))
                if !norm.starts_with(&v2.mount_point) =>
            {
                (missing.clone(), v2)
            }
            (OpenCgroupFail::Open(OpenFail::NotFound(_)), None) => {
                return Err(with_code(
                    1,
                    format!(
                        "--cgroup {arg}: {}; {}",
                        explain(&norm, &as_is),
                        v2_missing()
                    ),
                ));
            }
            _ => {
                return Err(with_code(
                    1,
                    format!("--cgroup {arg}: {}", explain(&norm, &as_is)),
                ));
            }
        };
        let below_mount = below(&v2.mount_point, arg);
        let second = match open_cgroup(&below_mount, mounts) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        // Which failure to report: where even the first component is
        // missing from `/`, PATH reads as one below the mount; otherwise as
        // the absolute path it is (saying so when it lies in a v1
        // hierarchy, like /sys/fs/cgroup/cpu/x).
        if missing.parent() == Some(Path::new("/")) {
            return Err(with_code(
                1,
                match second {
                    OpenCgroupFail::Open(OpenFail::NotFound(_)) => format!(
                        "--cgroup {arg}: no such cgroup: neither {} nor {} exists",
                        norm.display(),
                        below_mount.display()
                    ),
                    e => format!("--cgroup {arg}: {}", explain(&below_mount, &e)),
                },
            ));
        }
        let mut msg = format!("--cgroup {arg}: {}", explain(&norm, &as_is));
        if let Some(v1) = mount_of(mounts, &norm, None, |_| true).filter(|m| m.fstype == "cgroup") {
            msg.push_str(&format!(
                ", and it would be in a cgroup v1 hierarchy{}; sockscope needs cgroup v2, \
                 mounted at {}",
                v1_controllers(v1),
                v2.mount_point.display()
            ));
        }
        Err(with_code(1, msg))
    } else {
        let Some(v2) = v2 else {
            return Err(with_code(
                1,
                format!(
                    "--cgroup {arg} is relative to the cgroup v2 mount, but {}",
                    v2_missing()
                ),
            ));
        };
        let path = below(&v2.mount_point, arg);
        open_cgroup(&path, mounts)
            .map_err(|e| with_code(1, format!("--cgroup {arg}: {}", explain(&path, &e))))
    }
}

/// `e` for `path`, a missing directory said as a missing cgroup.
fn explain(path: &Path, e: &OpenCgroupFail) -> String {
    match e {
        OpenCgroupFail::Open(OpenFail::NotFound(p)) if p == path => {
            format!("no such cgroup: {} does not exist", p.display())
        }
        OpenCgroupFail::Open(OpenFail::NotFound(p)) => format!(
            "no such cgroup: {} ({} does not exist)",
            path.display(),
            p.display()
        ),
        e => e.to_string(),
    }
}

/// Why a symlink-free path is not a cgroup v2 directory.
#[derive(Debug)]
pub(super) enum OpenCgroupFail {
    Open(OpenFail),
    /// In a cgroup v1 hierarchy: the full message.
    V1(String),
    /// Not on a cgroup file system: the full message.
    NotCgroup(String),
}

impl std::fmt::Display for OpenCgroupFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Open(e) => e.fmt(f),
            Self::V1(m) | Self::NotCgroup(m) => f.write_str(m),
        }
    }
}

/// Opens `path` (absolute, normal) and checks it is a cgroup v2 directory.
pub(super) fn open_cgroup(
    path: &Path,
    mounts: &[MountEntry],
) -> Result<CgroupTarget, OpenCgroupFail> {
    let fd = open_dir(path).map_err(OpenCgroupFail::Open)?;
    let fs =
        fstatfs(&fd).map_err(|e| OpenCgroupFail::Open(OpenFail::Other(path.to_path_buf(), e)))?;
    let (id, mount_id) = cgroup_id(fd.as_fd());
    let kind = fs.filesystem_type();
    if kind == CGROUP2_SUPER_MAGIC {
        let m = mount_of(mounts, path, mount_id, |m| m.fstype == "cgroup2");
        let rel = match m {
            Some(m) => rel_below(m, path),
            None => {
                return Err(OpenCgroupFail::NotCgroup(format!(
                    "{} is on cgroup2, but on no cgroup2 mount /proc/self/mountinfo lists",
                    path.display()
                )));
            }
        };
        let level = rel.split('/').filter(|p| !p.is_empty()).count() as u32;
        return Ok(CgroupTarget {
            path: path.to_path_buf(),
            rel,
            id,
            level,
            unit: None,
            found_by: None,
        });
    }
    let v2 = pick_v2(mounts);
    if kind == CGROUP_SUPER_MAGIC {
        let v1 = mount_of(mounts, path, mount_id, |m| m.fstype == "cgroup");
        let controllers = v1.map(v1_controllers).unwrap_or_default();
        let mut msg = format!(
            "{} is in a cgroup v1 hierarchy{controllers}; sockscope needs cgroup v2",
            path.display()
        );
        match (v1, v2) {
            (Some(v1), Some(v2)) => {
                let rel = rel_below(v1, path);
                let there = below(&v2.mount_point, &rel);
                let exists = if open_dir(&there).is_ok() {
                    "exists"
                } else {
                    "does not exist"
                };
                msg.push_str(&format!(
                    ", mounted at {}: the same group there would be {} (which {exists})",
                    v2.mount_point.display(),
                    there.display()
                ));
            }
            (None, Some(v2)) => {
                msg.push_str(&format!(", mounted at {}", v2.mount_point.display()));
            }
            (_, None) => {
                msg.push_str(", and ");
                msg.push_str(&v2_missing());
            }
        }
        return Err(OpenCgroupFail::V1(msg));
    }
    let fstype = mount_of(mounts, path, mount_id, |_| true)
        .map(|m| m.fstype.clone())
        .unwrap_or_else(|| format!("{:#x}", kind.0));
    let hint = match v2 {
        Some(v2) => format!(
            "; cgroup v2 is mounted at {}, and a group below it may be named relative to it \
             (--cgroup system.slice/nginx.service)",
            v2.mount_point.display()
        ),
        None => format!("; {}", v2_missing()),
    };
    Err(OpenCgroupFail::NotCgroup(format!(
        "{} is not a cgroup (its file system is {fstype}, not cgroup2){hint}",
        path.display()
    )))
}

/// The controllers of v1 hierarchy `m`, as ` (cpu,cpuacct)`, or nothing.
fn v1_controllers(m: &MountEntry) -> String {
    let c = m
        .super_opts
        .split(',')
        .filter(|o| !matches!(*o, "rw" | "ro") && !o.starts_with("release_agent"))
        .collect::<Vec<_>>()
        .join(",");
    if c.is_empty() { c } else { format!(" ({c})") }
}

/// The cgroup id of directory `fd` and, when name_to_handle_at answers,
/// the id of the mount it is on. The kernfs file handle is the cgroup id
/// itself; the inode number is the fallback (equal on 64-bit kernels, the
/// low 32 bits elsewhere).
pub(super) fn cgroup_id(fd: BorrowedFd<'_>) -> (u64, Option<i32>) {
    #[repr(C)]
    struct Handle {
        handle_bytes: libc::c_uint,
        handle_type: libc::c_int,
        f_handle: [u8; 128],
    }
    let mut h = Handle {
        handle_bytes: 128,
        handle_type: 0,
        f_handle: [0; 128],
    };
    let mut mount_id: libc::c_int = -1;
    // SAFETY: `h` starts with the layout of `struct file_handle` and has
    // room for handle_bytes (128 = MAX_HANDLE_SZ) bytes after its header;
    // the path is an empty C string, used with AT_EMPTY_PATH.
    let rc = unsafe {
        libc::name_to_handle_at(
            fd.as_raw_fd(),
            c"".as_ptr(),
            (&raw mut h).cast::<libc::file_handle>(),
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    };
    let mount_id = (rc == 0).then_some(mount_id);
    if rc == 0 && h.handle_type == FILEID_KERNFS && h.handle_bytes == 8 {
        let mut id = [0u8; 8];
        id.copy_from_slice(&h.f_handle[..8]);
        return (u64::from_ne_bytes(id), mount_id);
    }
    let ino = fstat(fd).map(|st| st.st_ino).unwrap_or(0);
    (ino, mount_id)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::super::testutil::*;
    use super::*;
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};

    use super::super::mounts::v2_mount;
    use super::super::open::open_dir_by_components;

    #[test]
    fn relative_and_absolute_paths_resolve_to_the_same_cgroup() {
        let Some(mount) = cgroup_env("relative_and_absolute_paths_resolve_to_the_same_cgroup")
        else {
            return;
        };
        let mut g = Groups::new(&mount);
        let top = unique("rel");
        let path = g.mkdir(&format!("{top}/sub"));
        let rel = format!("/{top}/sub");
        let forms = [
            path.display().to_string(),
            format!("{}/", path.display()),
            format!("{}/./{top}//sub", mount.display()),
            format!("{top}/sub"),
            format!("./{top}/sub"),
            rel.clone(),
        ];
        for form in forms {
            let t = resolve_cgroup(&form).unwrap_or_else(|e| panic!("{form}: {e}"));
            assert_eq!(t.path, path, "{form}");
            assert_eq!(t.rel, rel, "{form}");
            assert_eq!(t.level, 2, "{form}");
            assert_eq!(t.unit, None);
        }
        let top_t = resolve_cgroup(&top).unwrap();
        assert_eq!(top_t.level, 1);
        assert_eq!(top_t.rel, format!("/{top}"));
        let root = resolve_cgroup(&mount.display().to_string()).unwrap();
        assert_eq!((root.rel.as_str(), root.level), ("/", 0));
        // The root cgroup's id is 1.
        assert_eq!(root.id, 1);
    }

    #[test]
    fn id_and_rel_match_what_the_kernel_reports_for_a_process_in_it() {
        let Some(mount) =
            cgroup_env("id_and_rel_match_what_the_kernel_reports_for_a_process_in_it")
        else {
            return;
        };
        let mut g = Groups::new(&mount);
        let path = g.mkdir(&format!("{}/a/b", unique("id")));
        let pid = g.spawn_in(&path);
        let t = resolve_cgroup(&path.display().to_string()).unwrap();
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let v2_line = cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a 0:: line");
        assert_eq!(v2_line, t.rel);
        assert_eq!(t.level, 3);
        // The file handle and the inode number agree on a 64-bit kernel.
        assert_eq!(t.id, std::fs::metadata(&path).unwrap().ino());
        let fd = open_dir(&path).unwrap();
        let (id, mount_id) = cgroup_id(fd.as_fd());
        assert_eq!(id, t.id);
        assert!(mount_id.is_some(), "name_to_handle_at answers on cgroup2");
        // Distinct groups, distinct ids.
        let parent = resolve_cgroup(&path.parent().unwrap().display().to_string()).unwrap();
        assert_ne!(parent.id, t.id);
        assert_eq!(parent.level, 2);
    }

    #[test]
    fn nonexistent_paths_say_which_paths_were_tried() {
        let Some(mount) = v2_mount().ok() else {
            eprintln!("SKIP nonexistent_paths_say_which_paths_were_tried: no cgroup v2");
            return;
        };
        let name = unique("nope");
        let e = resolve_cgroup(&format!("{name}/x")).unwrap_err();
        let (code, msg) = message(&e);
        assert_eq!(code, 1);
        assert!(
            msg.contains(&format!("{}/{name} does not exist", mount.display())),
            "{msg}"
        );
        let e = resolve_cgroup(&format!("/{name}")).unwrap_err();
        let (code, msg) = message(&e);
        assert_eq!(code, 1);
        assert!(
            msg.contains(&format!(
                "neither /{name} nor {}/{name} exists",
                mount.display()
            )),
            "{msg}"
        );
        let e = resolve_cgroup(&format!("{}/{name}", mount.display())).unwrap_err();
        let msg = message(&e).1;
        assert!(
            msg.contains("does not exist") && !msg.contains("neither"),
            "{msg}"
        );
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for arg in ["", "a/../b", "../x", "/sys/fs/cgroup/unified/..", "a\0b"] {
            let e = resolve_cgroup(arg).unwrap_err();
            assert_eq!(message(&e).0, 2, "{arg:?}: {e}");
        }
        assert!(
            message(&resolve_cgroup("a/../b").unwrap_err())
                .1
                .contains("`..` is refused")
        );
    }

    #[test]
    fn cgroup_v1_paths_are_refused_naming_the_v2_mount() {
        let mounts = read_mountinfo().unwrap();
        let (Some(v1), Some(v2)) = (
            mounts.iter().find(|m| m.fstype == "cgroup"),
            pick_v2(&mounts),
        ) else {
            eprintln!(
                "SKIP cgroup_v1_paths_are_refused_naming_the_v2_mount: no v1 and v2 mounts here"
            );
            return;
        };
        let e = resolve_cgroup(&v1.mount_point.display().to_string()).unwrap_err();
        let (code, msg) = message(&e);
        assert_eq!(code, 1);
        assert!(msg.contains("is in a cgroup v1 hierarchy"), "{msg}");
        assert!(
            msg.contains(&format!(
                "sockscope needs cgroup v2, mounted at {}",
                v2.mount_point.display()
            )),
            "{msg}"
        );
        // The v1 hierarchy's root maps onto the v2 root, which exists.
        assert!(
            msg.contains(&format!(
                "would be {} (which exists)",
                v2.mount_point.display()
            )),
            "{msg}"
        );
        // Absent below a v1 mount: the error says it would be v1 anyway.
        let absent = v1.mount_point.join(unique("v1"));
        let msg = message(&resolve_cgroup(&absent.display().to_string()).unwrap_err()).1;
        assert!(
            msg.contains(&format!(
                "{} does not exist, and it would be in a cgroup v1 hierarchy",
                absent.display()
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("mounted at {}", v2.mount_point.display())),
            "{msg}"
        );
    }

    #[test]
    fn without_a_v2_mount_errors_say_how_to_mount_it() {
        let mounts = read_mountinfo().unwrap();
        let no_v2: Vec<MountEntry> = mounts
            .iter()
            .filter(|m| m.fstype != "cgroup2")
            .cloned()
            .collect();
        let (code, msg) = message(&resolve_in("system.slice/x.service", &no_v2).unwrap_err());
        assert_eq!(code, 1);
        assert!(msg.contains("relative to the cgroup v2 mount, but cgroup v2 is not mounted"));
        assert!(
            msg.contains("mount -t cgroup2 none /sys/fs/cgroup/unified"),
            "{msg}"
        );
        let name = unique("absent");
        let msg = message(&resolve_in(&format!("/{name}"), &no_v2).unwrap_err()).1;
        assert!(
            msg.contains(&format!("/{name} does not exist; cgroup v2 is not mounted")),
            "{msg}"
        );
        if let Some(v1) = no_v2.iter().find(|m| m.fstype == "cgroup") {
            let msg =
                message(&resolve_in(&v1.mount_point.display().to_string(), &no_v2).unwrap_err()).1;
            assert!(
                msg.contains("sockscope needs cgroup v2, and cgroup v2 is not mounted"),
                "{msg}"
            );
        }
    }

    #[test]
    fn files_and_other_file_systems_are_not_cgroups() {
        let Some(mount) = v2_mount().ok() else {
            eprintln!("SKIP files_and_other_file_systems_are_not_cgroups: no cgroup v2");
            return;
        };
        let procs = mount.join("cgroup.procs");
        let msg = message(&resolve_cgroup(&procs.display().to_string()).unwrap_err()).1;
        assert!(
            msg.contains(&format!("{} is not a directory", procs.display())),
            "{msg}"
        );
        let below_file = format!("{}/x", procs.display());
        let msg = message(&resolve_cgroup(&below_file).unwrap_err()).1;
        assert!(
            msg.contains(&format!("{} is not a directory", procs.display())),
            "{msg}"
        );
        let tmp = tempfile::tempdir().unwrap();
        let e = resolve_cgroup(&tmp.path().display().to_string()).unwrap_err();
        let (code, msg) = message(&e);
        assert_eq!(code, 1);
        assert!(
            msg.contains("is not a cgroup (its file system is "),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("cgroup v2 is mounted at {}", mount.display())),
            "{msg}"
        );
    }

    #[test]
    fn symbolic_links_are_refused_wherever_they_are() {
        let Some(mount) = cgroup_env("symbolic_links_are_refused_wherever_they_are") else {
            return;
        };
        let mut g = Groups::new(&mount);
        let group = g.mkdir(&format!("{}/inner", unique("link")));
        let tmp = tempfile::tempdir().unwrap();
        // A link to the mount, crossed on the way; a link as the last part.
        std::os::unix::fs::symlink(&mount, tmp.path().join("to-mount")).unwrap();
        std::os::unix::fs::symlink(&group, tmp.path().join("to-group")).unwrap();
        let through = tmp
            .path()
            .join("to-mount")
            .join(group.strip_prefix(&mount).unwrap());
        for path in [through, tmp.path().join("to-group")] {
            let e = resolve_cgroup(&path.display().to_string()).unwrap_err();
            let (code, msg) = message(&e);
            assert_eq!(code, 1, "{msg}");
            assert!(msg.contains("is a symbolic link"), "{msg}");
            assert!(msg.contains("follows no symbolic link"), "{msg}");
        }
        // openat2 itself is what refuses them here (ELOOP), where it exists.
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
        let through = tmp
            .path()
            .join("to-mount")
            .join(group.strip_prefix(&mount).unwrap());
        match openat2(AT_FDCWD, &through, how) {
            Err(Errno::ELOOP) => {}
            Err(Errno::ENOSYS) => eprintln!("no openat2 here: the fallback did the work"),
            other => panic!("openat2 through a link: {other:?}"),
        }
        // The component-wise fallback (no openat2) refuses them just as well.
        let through = tmp
            .path()
            .join("to-mount")
            .join(group.strip_prefix(&mount).unwrap());
        match open_dir_by_components(&through) {
            Err(OpenFail::Symlink(at, target)) => {
                assert_eq!(at, tmp.path().join("to-mount"));
                assert_eq!(target, mount);
            }
            other => panic!("{other:?}"),
        }
        assert!(open_dir_by_components(&group).is_ok());
    }
}
