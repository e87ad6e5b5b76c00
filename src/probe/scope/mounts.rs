//! The cgroup mounts, from `/proc/self/mountinfo`: which one is the v2
//! hierarchy ([`v2_mount`]), which mount a path lies on, and paths below a
//! mount as the kernel names them.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use anyhow::Result;

use crate::error::with_code;

/// The cgroup v2 mount point, from `/proc/self/mountinfo`
/// (`/sys/fs/cgroup/unified` in the hybrid layout, `/sys/fs/cgroup` in the
/// unified one). None mounted: exit 1 saying how to mount it.
pub fn v2_mount() -> Result<PathBuf> {
    let mounts = read_mountinfo()?;
    match pick_v2(&mounts) {
        Some(m) => Ok(m.mount_point.clone()),
        None => Err(with_code(1, v2_missing())),
    }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MountEntry {
    /// Mount id (what name_to_handle_at reports).
    pub(super) id: i32,
    /// The directory of the file system mounted here (`/` unless a subtree
    /// is bind-mounted, or a cgroup namespace hides the rest).
    pub(super) root: String,
    pub(super) mount_point: PathBuf,
    pub(super) fstype: String,
    /// Per-superblock options: the controllers of a cgroup v1 hierarchy.
    pub(super) super_opts: String,
}

pub(super) fn read_mountinfo() -> Result<Vec<MountEntry>> {
    let text = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| with_code(1, format!("cannot read /proc/self/mountinfo: {e}")))?;
    Ok(parse_mountinfo(&text))
}

/// Parses mountinfo (proc(5)); malformed lines are skipped.
fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty())
            .collect();
        let Some(dash) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        if dash < 6 || fields.len() < dash + 3 {
            continue;
        }
        let Some(id) = std::str::from_utf8(fields[0])
            .ok()
            .and_then(|s| s.parse().ok())
        else {
            continue;
        };
        out.push(MountEntry {
            id,
            root: String::from_utf8_lossy(&unescape(fields[3])).into_owned(),
            mount_point: PathBuf::from(OsString::from_vec(unescape(fields[4]))),
            fstype: String::from_utf8_lossy(fields[dash + 1]).into_owned(),
            super_opts: fields
                .get(dash + 3)
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .unwrap_or_default(),
        });
    }
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\134` for `\`).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\'
            && i + 3 < field.len()
            && field[i + 1..i + 4]
                .iter()
                .all(|c| (b'0'..=b'7').contains(c))
        {
            let v = field[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

/// The cgroup2 mount to use: the first showing the whole hierarchy (root
/// `/`), else the first at all.
pub(super) fn pick_v2(mounts: &[MountEntry]) -> Option<&MountEntry> {
    let v2 = || mounts.iter().filter(|m| m.fstype == "cgroup2");
    v2().find(|m| m.root == "/").or_else(|| v2().next())
}

pub(super) fn v2_missing() -> String {
    "cgroup v2 is not mounted (no cgroup2 file system in /proc/self/mountinfo), and \
     sockscope's cgroup scopes need it: mount it with `mkdir -p /sys/fs/cgroup/unified && \
     mount -t cgroup2 none /sys/fs/cgroup/unified` (or boot with \
     systemd.unified_cgroup_hierarchy=1)"
        .to_owned()
}

/// The mount `path` (symlink-free, lexically normal) lies on: the one with
/// `mount_id` when known, else the longest mount point above it among those
/// `accept` takes.
pub(super) fn mount_of<'a>(
    mounts: &'a [MountEntry],
    path: &Path,
    mount_id: Option<i32>,
    accept: impl Fn(&MountEntry) -> bool,
) -> Option<&'a MountEntry> {
    if let Some(id) = mount_id
        && let Some(m) = mounts.iter().find(|m| m.id == id && accept(m))
        && path.starts_with(&m.mount_point)
    {
        return Some(m);
    }
    // Later lines mount over earlier ones: the last of the longest wins.
    mounts
        .iter()
        .filter(|m| accept(m) && path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
}

/// `path` below `m`, as the kernel names it (`/a/b`, `/` for the root).
pub(super) fn rel_below(m: &MountEntry, path: &Path) -> String {
    let suffix = path.strip_prefix(&m.mount_point).unwrap_or(Path::new(""));
    let mut rel = String::new();
    for part in m.root.split('/').filter(|p| !p.is_empty()) {
        rel.push('/');
        rel.push_str(part);
    }
    for c in suffix.components() {
        if let Component::Normal(part) = c {
            rel.push('/');
            rel.push_str(&part.to_string_lossy());
        }
    }
    if rel.is_empty() { "/".to_owned() } else { rel }
}

/// `rel` (`/a/b` or `a/b`) below mount point `mount`.
pub(super) fn below(mount: &Path, rel: &str) -> PathBuf {
    let mut p = mount.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
        p.push(part);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_parses_cgroup_mounts_and_escapes() {
        let text = b"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
            50 23 0:38 /sub /mnt/with\\040space rw - cgroup2 cgroup2 rw\n\
            garbage line\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].fstype, "cgroup");
        assert_eq!(m[1].super_opts, "rw,memory");
        assert_eq!(m[3].mount_point, Path::new("/mnt/with space"));
        assert_eq!(m[3].root, "/sub");
        assert_eq!(pick_v2(&m).map(|m| m.id), Some(41));
        // Only a subtree mounted: still the one to use.
        assert_eq!(pick_v2(&m[3..]).map(|m| m.id), Some(50));
        assert_eq!(pick_v2(&m[..2]), None);
        assert_eq!(
            rel_below(&m[3], Path::new("/mnt/with space/a/b")),
            "/sub/a/b"
        );
        assert_eq!(rel_below(&m[2], Path::new("/sys/fs/cgroup/unified")), "/");
        let by_prefix = mount_of(&m, Path::new("/sys/fs/cgroup/unified/x"), None, |_| true);
        assert_eq!(by_prefix.map(|m| m.id), Some(41));
    }

    // Property tests: mountinfo lines written the way the kernel writes
    // them (`show_mountinfo`: paths escaped with `\ooo` for space, tab,
    // newline and backslash; optional fields before `-`) parse back to
    // their entries; mutated files parse to entries or fewer, never a
    // panic.

    use crate::hostile;
    use proptest::prelude::*;

    /// The kernel's escape of a path (`seq_escape` with " \t\n\\").
    fn escape(p: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &b in p {
            if b" \t\n\\".contains(&b) {
                out.extend_from_slice(format!("\\{b:03o}").as_bytes());
            } else {
                out.push(b);
            }
        }
        out
    }

    fn path() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(1..=255u8, 0..30).prop_map(|mut v| {
            v.insert(0, b'/');
            v
        })
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn mountinfo_lines_round_trip_and_mutations_never_panic(
            ms_in in prop::collection::vec(
                (1..100_000i32, path(), path(), prop::sample::select(vec!["cgroup2", "ext4", "tmpfs"]),
                 prop::collection::vec(prop::sample::select(vec!["shared:1", "master:7", "propagate_from:2"]), 0..3),
                 prop::sample::select(vec!["rw", "rw,nsdelegate,memory_recursiveprot", "rw,cpu,cpuacct"])),
                0..5,
            ),
            ms in hostile::mutations(),
        ) {
            let mut text = Vec::new();
            let mut want = Vec::new();
            for (id, root, point, fstype, optional, opts) in &ms_in {
                text.extend_from_slice(format!("{id} 1 0:26 ").as_bytes());
                text.extend_from_slice(&escape(root));
                text.push(b' ');
                text.extend_from_slice(&escape(point));
                text.extend_from_slice(b" rw,nosuid");
                for o in optional {
                    text.extend_from_slice(format!(" {o}").as_bytes());
                }
                text.extend_from_slice(format!(" - {fstype} none {opts}\n").as_bytes());
                want.push(MountEntry {
                    id: *id,
                    root: String::from_utf8_lossy(root).into_owned(),
                    mount_point: PathBuf::from(OsString::from_vec(point.clone())),
                    fstype: fstype.to_string(),
                    super_opts: opts.to_string(),
                });
            }
            prop_assert_eq!(parse_mountinfo(&text), want);
            let _ = parse_mountinfo(&hostile::mutate(&text, &ms));
        }
    }
}
