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

use std::collections::HashMap;
use std::ffi::{CStr, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, fstatfs};

use crate::error::{usage, with_code};

/// How deep below the v2 mount the hierarchy walks look (`--unit` without
/// systemd, and naming ids for `--by cgroup`). systemd services sit at
/// depth 2 (`/system.slice/x.service`), Kubernetes containers at 4 or 5.
const MAX_DEPTH: u32 = 8;

/// How many cgroups one hierarchy walk visits at most, so that a delegated
/// user creating directories by the million cannot make sockscope walk for
/// ever (a busy container host has a few thousand).
const MAX_CGROUPS: usize = 100_000;

/// How long `systemctl show` may take to answer before sockscope gives up.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where systemd says it is the running init (sd_booted(3)).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";

/// File-handle type of kernfs (include/linux/exportfs.h): its handle is the
/// 64-bit node id, which for cgroupfs is the cgroup id BPF reports.
const FILEID_KERNFS: i32 = 0xfe;

/// Unit types systemctl recognises as a name's suffix; any other name gets
/// `.service` appended, as systemctl does.
const UNIT_SUFFIXES: [&str; 11] = [
    ".service",
    ".socket",
    ".target",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".timer",
    ".path",
    ".slice",
    ".scope",
];

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
}

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

/// Resolves `--unit NAME` to the unit's cgroup.
///
/// The name is completed like systemctl does (`nginx` is `nginx.service`).
/// Where systemd runs (`/run/systemd/system` exists) it is asked with
/// `systemctl show`; elsewhere the v2 hierarchy is searched (8 levels deep,
/// 100,000 cgroups at most, no symbolic links) for a directory named
/// exactly like the unit, which also finds container runtimes' scopes.
/// Errors (exit 1): the unit is unknown, not active, has no cgroup, has a
/// cgroup without a process in it or below it, or several cgroups carry
/// its name.
pub fn resolve_unit(name: &str) -> Result<CgroupTarget> {
    let unit = unit_name(name)?;
    let mounts = read_mountinfo()?;
    let Some(v2) = pick_v2(&mounts) else {
        return Err(with_code(1, format!("--unit {unit}: {}", v2_missing())));
    };
    let target = if Path::new(SYSTEMD_RUNNING).is_dir() {
        let show = systemctl_show(Path::new("systemctl"), &unit, SYSTEMCTL_TIMEOUT)?;
        let rel = control_group(&unit, &show)?;
        let path = below(&v2.mount_point, &rel);
        match open_cgroup(&path, &mounts) {
            Ok(t) => t,
            Err(e) => {
                return Err(with_code(
                    1,
                    format!("unit {unit} has ControlGroup={rel}, but {e}"),
                ));
            }
        }
    } else {
        search_unit(&unit, &v2.mount_point, &mounts)?
    };
    ensure_running(&unit, target)
}

/// Validates `--comm NAME` and returns the NUL-padded 16 bytes the BPF side
/// compares with a task's `comm`.
///
/// A process name may hold any byte but NUL (even `/`, through
/// `prctl(PR_SET_NAME)`); the kernel keeps only its first 15 bytes, so a
/// longer NAME could never match: usage error (exit 2) suggesting the
/// prefix the kernel keeps.
pub fn comm_name(arg: &str) -> Result<[u8; 16]> {
    if arg.is_empty() {
        return Err(usage(
            "--comm needs a process name, as `ps -o comm` shows it (such as nginx)",
        ));
    }
    if arg.contains('\0') {
        return Err(usage("--comm: a process name cannot contain a NUL byte"));
    }
    let bytes = arg.as_bytes();
    if bytes.len() > 15 {
        let mut keep = 15;
        while !arg.is_char_boundary(keep) {
            keep -= 1;
        }
        let prefix = &arg[..keep];
        let advice = if keep == 15 {
            format!("such a process is named {prefix:?}: use --comm {prefix}")
        } else {
            format!(
                "the kernel's 15 bytes end inside the character {:?}, so no --comm can \
                 name such a process exactly (the nearest whole-character prefix is {prefix:?})",
                arg[keep..].chars().next().unwrap_or_default()
            )
        };
        return Err(usage(format!(
            "--comm {arg:?} is {} bytes long, but the kernel keeps only the first 15 bytes \
             of a process name (comm); {advice}",
            bytes.len()
        )));
    }
    let mut comm = [0u8; 16];
    comm[..bytes.len()].copy_from_slice(bytes);
    Ok(comm)
}

/// Names cgroup ids for the `--by cgroup` breakdown.
///
/// Ids are learnt by walking the v2 hierarchy (8 levels, 100,000 cgroups at
/// most, no symbolic links). An id not known yet makes it walk again, but
/// at most once a second, so a flood of unknown ids cannot make it walk per
/// call. A name once learnt is kept, so a cgroup removed during the trace
/// keeps its path; one never seen is `#ID`.
#[derive(Debug)]
pub struct CgroupNames {
    mount: PathBuf,
    names: HashMap<u64, String>,
    last_walk: Option<Instant>,
    min_rewalk: Duration,
    walks: u32,
    /// What the mount shows of the hierarchy (its mountinfo root, empty
    /// for the whole of it), learnt at the first walk, so names match
    /// [`CgroupTarget::rel`] even on a bind-mounted subtree.
    root: Option<String>,
}

impl CgroupNames {
    /// Names ids of the cgroup2 hierarchy mounted at `mount` (see
    /// [`v2_mount`]). Nothing is read until the first [`Self::name_of`].
    pub fn new(mount: PathBuf) -> Self {
        Self::with_rewalk(mount, Duration::from_secs(1))
    }

    fn with_rewalk(mount: PathBuf, min_rewalk: Duration) -> Self {
        Self {
            mount,
            names: HashMap::new(),
            last_walk: None,
            min_rewalk,
            walks: 0,
            root: None,
        }
    }

    /// The path of cgroup `id` below the mount (`/system.slice/x.service`,
    /// `/` for the root), or `#ID` when it is not (or no longer) there.
    pub fn name_of(&mut self, id: u64) -> String {
        if let Some(name) = self.names.get(&id) {
            return name.clone();
        }
        if self
            .last_walk
            .is_none_or(|t| t.elapsed() >= self.min_rewalk)
        {
            self.rewalk();
        }
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("#{id}"))
    }

    fn rewalk(&mut self) {
        self.walks += 1;
        let mount = &self.mount;
        let root = self.root.get_or_insert_with(|| {
            let mounts = read_mountinfo().unwrap_or_default();
            let m = mounts
                .iter()
                .rev()
                .find(|m| m.fstype == "cgroup2" && m.mount_point == *mount);
            m.map(|m| rel_below(m, &m.mount_point))
                .filter(|r| r != "/")
                .unwrap_or_default()
        });
        let names = &mut self.names;
        // A hierarchy that cannot be walked (unmounted meanwhile) leaves the
        // names learnt so far; ids unknown then are named `#ID`, which is
        // the honest answer.
        let _ = walk(mount, &mut |e: &WalkEntry<'_>| {
            let (id, _) = cgroup_id(e.fd);
            let name = match (root.as_str(), e.rel) {
                ("", rel) => rel.to_owned(),
                (root, "/") => root.to_owned(),
                (root, rel) => format!("{root}{rel}"),
            };
            names.insert(id, name);
        });
        self.last_walk = Some(Instant::now());
    }
}

// ---------------------------------------------------------------------------
// Mounts

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MountEntry {
    /// Mount id (what name_to_handle_at reports).
    id: i32,
    /// The directory of the file system mounted here (`/` unless a subtree
    /// is bind-mounted, or a cgroup namespace hides the rest).
    root: String,
    mount_point: PathBuf,
    fstype: String,
    /// Per-superblock options: the controllers of a cgroup v1 hierarchy.
    super_opts: String,
}

fn read_mountinfo() -> Result<Vec<MountEntry>> {
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
fn pick_v2(mounts: &[MountEntry]) -> Option<&MountEntry> {
    let v2 = || mounts.iter().filter(|m| m.fstype == "cgroup2");
    v2().find(|m| m.root == "/").or_else(|| v2().next())
}

fn v2_missing() -> String {
    "cgroup v2 is not mounted (no cgroup2 file system in /proc/self/mountinfo), and \
     sockscope's cgroup scopes need it: mount it with `mkdir -p /sys/fs/cgroup/unified && \
     mount -t cgroup2 none /sys/fs/cgroup/unified` (or boot with \
     systemd.unified_cgroup_hierarchy=1)"
        .to_owned()
}

/// The mount `path` (symlink-free, lexically normal) lies on: the one with
/// `mount_id` when known, else the longest mount point above it among those
/// `accept` takes.
fn mount_of<'a>(
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
fn rel_below(m: &MountEntry, path: &Path) -> String {
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
fn below(mount: &Path, rel: &str) -> PathBuf {
    let mut p = mount.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
        p.push(part);
    }
    p
}

// ---------------------------------------------------------------------------
// Opening without following symbolic links

/// Why a path could not be opened as a directory.
#[derive(Debug)]
enum OpenFail {
    /// This prefix of the path does not exist.
    NotFound(PathBuf),
    /// This prefix of the path is not a directory.
    NotDir(PathBuf),
    /// This prefix of the path is a symbolic link (to the second path).
    Symlink(PathBuf, PathBuf),
    /// Anything else (permissions, I/O).
    Other(PathBuf, Errno),
}

impl std::fmt::Display for OpenFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(p) => write!(f, "{} does not exist", p.display()),
            Self::NotDir(p) => write!(f, "{} is not a directory, so not a cgroup", p.display()),
            Self::Symlink(p, target) => write!(
                f,
                "{} is a symbolic link (to {}): sockscope runs as root and follows no symbolic \
                 link in a cgroup path, since the owner of a delegated directory could plant \
                 one; name the real directory",
                p.display(),
                target.display()
            ),
            Self::Other(p, e) => write!(f, "cannot open {}: {}", p.display(), e.desc()),
        }
    }
}

/// Opens absolute, lexically normal `path` (no `.` or `..`) as an `O_PATH`
/// directory, following no symbolic link on the way.
fn open_dir(path: &Path) -> Result<OwnedFd, OpenFail> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match openat2(AT_FDCWD, path, how) {
        Ok(fd) => Ok(fd),
        // Whatever failed (no openat2 before Linux 5.6 or under a seccomp
        // filter, or a real error), the component-wise walk is equally safe
        // and names the component at fault.
        Err(_) => open_dir_by_components(path),
    }
}

fn open_dir_by_components(path: &Path) -> Result<OwnedFd, OpenFail> {
    let root = Path::new("/");
    let mut fd = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| OpenFail::Other(root.to_path_buf(), e))?;
    let mut sofar = root.to_path_buf();
    for c in path.components() {
        let name = match c {
            Component::RootDir => continue,
            Component::Normal(name) => name,
            // Callers normalise; anything else here is refused, not guessed.
            _ => return Err(OpenFail::Other(path.to_path_buf(), Errno::EINVAL)),
        };
        sofar.push(name);
        let next = openat(
            &fd,
            name,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        match next {
            // O_PATH|O_NOFOLLOW may hand back the link itself: check.
            Ok(next) if fstat(&next).is_ok_and(|st| is_dir(&st)) => fd = next,
            Ok(_) => return Err(diagnose(fd.as_fd(), name, sofar, Errno::ENOTDIR)),
            Err(e) => return Err(diagnose(fd.as_fd(), name, sofar, e)),
        }
    }
    Ok(fd)
}

/// Why `name` in `parent` could not be opened as a directory.
fn diagnose(parent: BorrowedFd<'_>, name: &OsStr, sofar: PathBuf, e: Errno) -> OpenFail {
    match fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => OpenFail::NotFound(sofar),
        Ok(st) if file_type(&st) == SFlag::S_IFLNK => {
            // Reading a link's text follows nothing.
            let target = readlinkat(parent, name).unwrap_or_default();
            OpenFail::Symlink(sofar, PathBuf::from(target))
        }
        Ok(st) if !is_dir(&st) => OpenFail::NotDir(sofar),
        _ if e == Errno::ENOENT => OpenFail::NotFound(sofar),
        _ => OpenFail::Other(sofar, e),
    }
}

fn file_type(st: &nix::sys::stat::FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

fn is_dir(st: &nix::sys::stat::FileStat) -> bool {
    file_type(st) == SFlag::S_IFDIR
}

/// `arg` as an absolute path's normal form: `.` components and repeated or
/// trailing slashes dropped; `..` refused, since interpreting it lexically
/// could differ from what the kernel would do past a link, and following it
/// is what a planted link would want.
fn normalise(arg: &str) -> Result<PathBuf> {
    if arg.is_empty() {
        return Err(usage(
            "--cgroup needs a path: absolute (/sys/fs/cgroup/unified/system.slice/x.service) \
             or below the cgroup v2 mount (system.slice/x.service)",
        ));
    }
    if arg.contains('\0') {
        return Err(usage("--cgroup: a path cannot contain a NUL byte"));
    }
    let mut out = PathBuf::new();
    for c in Path::new(arg).components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                return Err(usage(format!(
                    "--cgroup {arg}: `..` is refused in cgroup paths; name the cgroup \
                     without it"
                )));
            }
            Component::Prefix(_) => unreachable!("no path prefixes on Unix"),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Resolution

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
enum OpenCgroupFail {
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
fn open_cgroup(path: &Path, mounts: &[MountEntry]) -> Result<CgroupTarget, OpenCgroupFail> {
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
fn cgroup_id(fd: BorrowedFd<'_>) -> (u64, Option<i32>) {
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

// ---------------------------------------------------------------------------
// Units

/// `name` completed like systemctl does: no unit-type suffix means
/// `.service`.
fn unit_name(name: &str) -> Result<String> {
    if name.is_empty() {
        return Err(usage(
            "--unit needs a systemd unit name, such as nginx.service",
        ));
    }
    if name.contains('/') {
        return Err(usage(format!(
            "--unit {name}: a unit name contains no '/'; for a cgroup path use --cgroup"
        )));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(usage(format!(
            "--unit {name:?}: a unit name contains no spaces or control characters"
        )));
    }
    let has_suffix = UNIT_SUFFIXES
        .iter()
        .any(|s| name.len() > s.len() && name.ends_with(s));
    if UNIT_SUFFIXES.contains(&name) {
        return Err(usage(format!(
            "--unit {name}: a unit type alone is not a unit name (such as nginx{name})"
        )));
    }
    let unit = if has_suffix {
        name.to_owned()
    } else {
        format!("{name}.service")
    };
    // UNIT_NAME_MAX in systemd is 256 including the NUL.
    if unit.len() > 255 {
        return Err(usage(format!(
            "--unit: {} bytes is longer than a unit name can be (255)",
            unit.len()
        )));
    }
    Ok(unit)
}

/// What `systemctl show` says about a unit.
#[derive(Debug, Default, PartialEq, Eq)]
struct UnitShow {
    load_state: String,
    active_state: String,
    control_group: String,
}

fn parse_show(text: &str) -> UnitShow {
    let mut show = UnitShow::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().to_owned();
        match key.trim() {
            "LoadState" => show.load_state = value,
            "ActiveState" => show.active_state = value,
            "ControlGroup" => show.control_group = value,
            _ => {}
        }
    }
    show
}

/// Runs `PROGRAM show -p LoadState,ActiveState,ControlGroup -- UNIT`,
/// killing it after `timeout`.
fn systemctl_show(program: &Path, unit: &str, timeout: Duration) -> Result<UnitShow> {
    let mut child = Command::new(program)
        .args([
            "show",
            "--no-pager",
            "--property=LoadState,ActiveState,ControlGroup",
            "--",
            unit,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            with_code(
                1,
                format!(
                    "--unit {unit}: systemd is running ({SYSTEMD_RUNNING} exists) but {} \
                     could not be run: {e}",
                    program.display()
                ),
            )
        })?;
    // Readers on their own threads, so a chatty child cannot block on a
    // full pipe while we wait for it.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(1 << 20).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(with_code(
                    1,
                    format!(
                        "--unit {unit}: `{} show {unit}` did not answer within {} s",
                        program.display(),
                        timeout.as_secs_f64()
                    ),
                ));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(with_code(
                    1,
                    format!("--unit {unit}: waiting for systemctl: {e}"),
                ));
            }
        }
    };
    // The child is gone; its pipes close unless it left a grandchild
    // holding them, which the 1 MiB cap and the child's exit bound anyway.
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        return Err(with_code(
            1,
            format!(
                "--unit {unit}: `{} show {unit}` failed ({status}): {}",
                program.display(),
                err.trim()
            ),
        ));
    }
    Ok(parse_show(&String::from_utf8_lossy(&out)))
}

/// The unit's cgroup below the v2 mount, if it is loaded and running.
fn control_group(unit: &str, show: &UnitShow) -> Result<String> {
    if show.load_state == "not-found" {
        return Err(with_code(1, format!("unit {unit} not found")));
    }
    if !matches!(show.active_state.as_str(), "active" | "reloading") {
        let state = if show.active_state.is_empty() {
            "unknown"
        } else {
            &show.active_state
        };
        return Err(with_code(
            1,
            format!("unit {unit} is not running (ActiveState={state})"),
        ));
    }
    if show.control_group.is_empty() {
        return Err(with_code(
            1,
            format!(
                "unit {unit} is not running (it is {} but has no cgroup: a {} unit runs no \
                 processes of its own)",
                show.active_state,
                unit.rsplit('.').next().unwrap_or("such")
            ),
        ));
    }
    if show.control_group.split('/').any(|p| p == "..") {
        return Err(with_code(
            1,
            format!(
                "unit {unit}: systemd reports ControlGroup={}, which has `..`",
                show.control_group
            ),
        ));
    }
    Ok(show.control_group.clone())
}

/// Without systemd: the one cgroup named exactly `unit` below `mount`.
fn search_unit(unit: &str, mount: &Path, mounts: &[MountEntry]) -> Result<CgroupTarget> {
    let mut found: Vec<(String, bool)> = Vec::new();
    let summary = walk(mount, &mut |e: &WalkEntry<'_>| {
        if e.name.as_bytes() == unit.as_bytes() {
            found.push((e.rel.to_owned(), populated(e.fd, e.rel).unwrap_or(false)));
        }
    })?;
    match found.as_slice() {
        [] => {
            let limits = if summary.truncated {
                format!(
                    " (the search stopped after {} cgroups, {MAX_DEPTH} levels deep)",
                    summary.visited
                )
            } else {
                String::new()
            };
            Err(with_code(
                1,
                format!(
                    "unit {unit} is not running: no systemd here and no cgroup named {unit} \
                     under {}{limits}",
                    mount.display()
                ),
            ))
        }
        [(rel, _)] => {
            let path = below(mount, rel);
            open_cgroup(&path, mounts)
                .map_err(|e| with_code(1, format!("unit {unit}: its cgroup went away: {e}")))
        }
        several => {
            let list = several
                .iter()
                .map(|(rel, running)| {
                    format!(
                        "{}{}",
                        below(mount, rel).display(),
                        if *running {
                            " (running)"
                        } else {
                            " (no processes)"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            Err(with_code(
                1,
                format!(
                    "unit {unit}: {} cgroups carry that name: {list}; name one with \
                     --cgroup PATH",
                    several.len()
                ),
            ))
        }
    }
}

/// `target` with its unit, if a process is in it or below it.
fn ensure_running(unit: &str, target: CgroupTarget) -> Result<CgroupTarget> {
    let fd = open_dir(&target.path)
        .map_err(|e| with_code(1, format!("unit {unit}: its cgroup went away: {e}")))?;
    match populated(fd.as_fd(), &target.rel) {
        Ok(true) => Ok(CgroupTarget {
            unit: Some(unit.to_owned()),
            ..target
        }),
        Ok(false) => Err(with_code(
            1,
            format!(
                "unit {unit} is not running (its cgroup {} has no processes)",
                target.path.display()
            ),
        )),
        Err(e) => Err(with_code(
            1,
            format!(
                "unit {unit}: cannot tell whether its cgroup {} has processes: {e}",
                target.path.display()
            ),
        )),
    }
}

/// Whether a process is in cgroup `dir` or below it: `populated` in its
/// cgroup.events, or (the root has no cgroup.events) a non-empty
/// cgroup.procs anywhere in the subtree.
fn populated(dir: BorrowedFd<'_>, rel: &str) -> io::Result<bool> {
    match read_small(dir, "cgroup.events") {
        Ok(text) => {
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("populated ") {
                    return Ok(v.trim() != "0");
                }
            }
            Err(io::Error::other("cgroup.events has no `populated` line"))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let mut any = false;
            walk_fd(dir, rel, &mut |e: &WalkEntry<'_>| {
                if !any && read_small(e.fd, "cgroup.procs").is_ok_and(|t| !t.trim().is_empty()) {
                    any = true;
                }
            })?;
            Ok(any)
        }
        Err(e) => Err(e),
    }
}

/// Reads at most 64 KiB of file `name` in directory `dir`, following no
/// link.
fn read_small(dir: BorrowedFd<'_>, name: &str) -> io::Result<String> {
    let fd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )?;
    let mut text = String::new();
    File::from(fd).take(64 << 10).read_to_string(&mut text)?;
    Ok(text)
}

// ---------------------------------------------------------------------------
// Walking the hierarchy

/// One cgroup met by [`walk`].
struct WalkEntry<'a> {
    /// Path below the mount (`/` for the root).
    rel: &'a str,
    /// Directory name (empty for the root).
    name: &'a OsStr,
    /// The directory, opened `O_PATH`.
    fd: BorrowedFd<'a>,
}

#[derive(Debug, Default)]
struct WalkSummary {
    visited: usize,
    /// The depth or count limit cut the walk short.
    truncated: bool,
}

/// Visits the cgroups below `mount` (it included), depth first, at most
/// [`MAX_DEPTH`] levels and [`MAX_CGROUPS`] directories, following no
/// symbolic link and crossing into no other file system.
fn walk(mount: &Path, visit: &mut dyn FnMut(&WalkEntry<'_>)) -> Result<WalkSummary> {
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

fn walk_fd(
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
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::Child;

    use super::*;

    /// The v2 mount, when this test can create cgroups (root, cgroup2
    /// mounted); otherwise a printed skip, or a failure under CI=true.
    fn cgroup_env(test: &str) -> Option<PathBuf> {
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
    struct Groups {
        mount: PathBuf,
        dirs: Vec<PathBuf>,
        children: Vec<Child>,
    }

    impl Groups {
        fn new(mount: &Path) -> Self {
            Self {
                mount: mount.to_path_buf(),
                dirs: Vec::new(),
                children: Vec::new(),
            }
        }

        /// Creates `rel` (and its missing parents) below the mount.
        fn mkdir(&mut self, rel: &str) -> PathBuf {
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
        fn spawn_in(&mut self, dir: &Path) -> u32 {
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
        fn rmdir(&mut self, path: &Path) {
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
    fn rmdir_retry(path: &Path) {
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

    fn unique(tag: &str) -> String {
        format!("sockscope-test-{}-{tag}", std::process::id())
    }

    fn message(e: &anyhow::Error) -> (u8, String) {
        let exit = e
            .downcast_ref::<crate::error::Exit>()
            .expect("an Exit error");
        (exit.code, exit.message.clone())
    }

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
    fn cgroup_names_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<CgroupNames>();
        send::<CgroupTarget>();
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

    #[test]
    fn unit_search_finds_a_running_unit_and_refuses_empty_or_duplicated_ones() {
        let Some(mount) =
            cgroup_env("unit_search_finds_a_running_unit_and_refuses_empty_or_duplicated_ones")
        else {
            return;
        };
        let mounts = read_mountinfo().unwrap();
        let mut g = Groups::new(&mount);
        let top = unique("units");
        let unit = format!("sockscope-test-{}.service", std::process::id());
        let dir = g.mkdir(&format!("{top}/system.slice/{unit}"));

        // Empty: found, but not running.
        let found = search_unit(&unit, &mount, &mounts).unwrap();
        assert_eq!(found.path, dir);
        let msg = message(&ensure_running(&unit, found).unwrap_err()).1;
        assert_eq!(
            msg,
            format!(
                "unit {unit} is not running (its cgroup {} has no processes)",
                dir.display()
            )
        );

        // A process in it (a child group counts too): running.
        let child = g.mkdir(&format!("{top}/system.slice/{unit}/worker"));
        g.spawn_in(&child);
        let found = search_unit(&unit, &mount, &mounts).unwrap();
        let t = ensure_running(&unit, found).unwrap();
        assert_eq!(t.rel, format!("/{top}/system.slice/{unit}"));
        assert_eq!(t.level, 3);
        assert_eq!(t.unit.as_deref(), Some(unit.as_str()));
        if !Path::new(SYSTEMD_RUNNING).is_dir() {
            // The public entry point, the name completed with .service.
            let short = unit.trim_end_matches(".service");
            assert_eq!(resolve_unit(short).unwrap(), t);
        }

        // Twice: refused, listing both.
        let other = g.mkdir(&format!("{top}/other.slice/{unit}"));
        let msg = message(&search_unit(&unit, &mount, &mounts).unwrap_err()).1;
        assert!(msg.contains("2 cgroups carry that name"), "{msg}");
        assert!(
            msg.contains(&format!("{} (running)", dir.display())),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("{} (no processes)", other.display())),
            "{msg}"
        );
        assert!(msg.contains("--cgroup PATH"), "{msg}");

        // Nowhere.
        let missing = format!("{}-missing.service", unique("u"));
        let msg = message(&search_unit(&missing, &mount, &mounts).unwrap_err()).1;
        assert_eq!(
            msg,
            format!(
                "unit {missing} is not running: no systemd here and no cgroup named {missing} \
                 under {}",
                mount.display()
            )
        );
    }

    #[test]
    fn unit_names_are_completed_like_systemctl_does() {
        assert_eq!(unit_name("nginx").unwrap(), "nginx.service");
        assert_eq!(unit_name("nginx.service").unwrap(), "nginx.service");
        assert_eq!(unit_name("user.slice").unwrap(), "user.slice");
        assert_eq!(unit_name("docker-1.scope").unwrap(), "docker-1.scope");
        assert_eq!(unit_name("foo.bar").unwrap(), "foo.bar.service");
        for bad in ["", "a/b.service", ".service", "a b", "a\nb"] {
            assert_eq!(message(&unit_name(bad).unwrap_err()).0, 2, "{bad:?}");
        }
        assert_eq!(message(&unit_name(&"x".repeat(300)).unwrap_err()).0, 2);
    }

    #[test]
    fn systemctl_show_answers_decide_the_cgroup() {
        let show = parse_show(
            "LoadState=loaded\nActiveState=active\nControlGroup=/system.slice/nginx.service\n",
        );
        assert_eq!(
            control_group("nginx.service", &show).unwrap(),
            "/system.slice/nginx.service"
        );
        let reloading = UnitShow {
            active_state: "reloading".into(),
            ..show
        };
        assert!(control_group("nginx.service", &reloading).is_ok());
        let not_found = parse_show("LoadState=not-found\nActiveState=inactive\nControlGroup=\n");
        let (code, msg) = message(&control_group("x.service", &not_found).unwrap_err());
        assert_eq!((code, msg.as_str()), (1, "unit x.service not found"));
        let inactive = parse_show("LoadState=loaded\nActiveState=inactive\nControlGroup=\n");
        let msg = message(&control_group("x.service", &inactive).unwrap_err()).1;
        assert_eq!(msg, "unit x.service is not running (ActiveState=inactive)");
        let failed = parse_show("LoadState=loaded\nActiveState=failed\nControlGroup=/x\n");
        let msg = message(&control_group("x.service", &failed).unwrap_err()).1;
        assert_eq!(msg, "unit x.service is not running (ActiveState=failed)");
        let no_cgroup = parse_show("LoadState=loaded\nActiveState=active\nControlGroup=\n");
        let msg = message(&control_group("x.timer", &no_cgroup).unwrap_err()).1;
        assert!(
            msg.starts_with("unit x.timer is not running (it is active but has no cgroup"),
            "{msg}"
        );
        let sneaky = parse_show("LoadState=loaded\nActiveState=active\nControlGroup=/a/../b\n");
        assert!(control_group("x.service", &sneaky).is_err());
    }

    /// A stand-in systemctl: a shell script printing `body`.
    fn fake_systemctl(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("systemctl");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// systemctl_show, retrying ETXTBSY: another test thread forking while
    /// the script was open for writing holds it open a moment.
    fn show_with(program: &Path, timeout: Duration) -> Result<UnitShow> {
        for _ in 0..50 {
            match systemctl_show(program, "x.service", timeout) {
                Err(e) if e.to_string().contains("Text file busy") => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
        systemctl_show(program, "x.service", timeout)
    }

    #[test]
    fn systemctl_is_asked_with_a_bounded_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let ok = fake_systemctl(
            tmp.path(),
            r#"[ "$1 $3 $4 $5" = "show --property=LoadState,ActiveState,ControlGroup -- x.service" ] || exit 3
printf 'LoadState=loaded\nActiveState=active\nControlGroup=/system.slice/x.service\n'"#,
        );
        let show = show_with(&ok, Duration::from_secs(10)).unwrap();
        assert_eq!(
            show,
            UnitShow {
                load_state: "loaded".into(),
                active_state: "active".into(),
                control_group: "/system.slice/x.service".into(),
            }
        );
        let tmp = tempfile::tempdir().unwrap();
        let failing = fake_systemctl(tmp.path(), "echo 'Failed to connect to bus' >&2; exit 1");
        let msg = message(&show_with(&failing, Duration::from_secs(10)).unwrap_err()).1;
        assert!(msg.contains("Failed to connect to bus"), "{msg}");
        let tmp = tempfile::tempdir().unwrap();
        let hanging = fake_systemctl(tmp.path(), "exec sleep 30");
        let started = Instant::now();
        let msg = message(&show_with(&hanging, Duration::from_millis(300)).unwrap_err()).1;
        assert!(msg.contains("did not answer within 0.3 s"), "{msg}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let msg = message(
            &systemctl_show(
                &tmp.path().join("absent"),
                "x.service",
                Duration::from_secs(1),
            )
            .unwrap_err(),
        )
        .1;
        assert!(msg.contains("could not be run"), "{msg}");
    }

    #[test]
    fn comm_names_are_checked_and_padded() {
        let c = comm_name("nginx").unwrap();
        assert_eq!(&c[..6], b"nginx\0");
        assert!(c[5..].iter().all(|&b| b == 0));
        let fifteen = comm_name("abcdefghijklmno").unwrap();
        assert_eq!(&fifteen[..15], b"abcdefghijklmno");
        assert_eq!(fifteen[15], 0);
        // prctl(PR_SET_NAME) names may hold '/' and spaces.
        assert_eq!(&comm_name("kworker/0:1 x").unwrap()[..13], b"kworker/0:1 x");
        let (code, msg) = message(&comm_name("verylongprocessname").unwrap_err());
        assert_eq!(code, 2);
        assert!(msg.contains("is 19 bytes long"), "{msg}");
        assert!(msg.contains("keeps only the first 15 bytes"), "{msg}");
        assert!(msg.contains("use --comm verylongprocess"), "{msg}");
        // 14 ASCII bytes and a two-byte character: the 15th byte splits it.
        let msg = message(&comm_name("abcdefghijklmné").unwrap_err()).1;
        assert!(
            msg.contains("15 bytes end inside the character 'é'"),
            "{msg}"
        );
        assert_eq!(message(&comm_name("").unwrap_err()).0, 2);
        assert_eq!(message(&comm_name("a\0b").unwrap_err()).0, 2);
    }

    #[test]
    fn cgroup_names_map_ids_and_keep_or_hash_removed_ones() {
        let Some(mount) = cgroup_env("cgroup_names_map_ids_and_keep_or_hash_removed_ones") else {
            return;
        };
        let mut g = Groups::new(&mount);
        let top = unique("names");
        let a = g.mkdir(&format!("{top}/a"));
        let id_a = resolve_cgroup(&a.display().to_string()).unwrap().id;
        let id_top = resolve_cgroup(&top).unwrap().id;

        let mut names = CgroupNames::with_rewalk(mount.clone(), Duration::ZERO);
        assert_eq!(names.name_of(1), "/");
        assert_eq!(names.name_of(id_a), format!("/{top}/a"));
        assert_eq!(names.name_of(id_top), format!("/{top}"));
        // Known ids are answered from memory.
        let walks = names.walks;
        names.name_of(id_a);
        assert_eq!(names.walks, walks);

        // Created after the first walk: found by a re-walk.
        let b = g.mkdir(&format!("{top}/b"));
        let id_b = resolve_cgroup(&b.display().to_string()).unwrap().id;
        assert_eq!(names.name_of(id_b), format!("/{top}/b"));

        // Removed: a name learnt stays; one never learnt is #ID.
        g.rmdir(&b);
        assert_eq!(names.name_of(id_b), format!("/{top}/b"));
        let mut fresh = CgroupNames::new(mount.clone());
        assert_eq!(fresh.name_of(id_b), format!("#{id_b}"));
        assert_eq!(fresh.name_of(id_a), format!("/{top}/a"));

        // Unknown ids do not make it walk more than once per interval.
        let mut slow = CgroupNames::with_rewalk(mount.clone(), Duration::from_secs(3600));
        assert_eq!(slow.name_of(id_a), format!("/{top}/a"));
        let c = g.mkdir(&format!("{top}/c"));
        let id_c = resolve_cgroup(&c.display().to_string()).unwrap().id;
        for _ in 0..1000 {
            assert_eq!(slow.name_of(id_c), format!("#{id_c}"));
            assert_eq!(slow.name_of(u64::MAX), format!("#{}", u64::MAX));
        }
        assert_eq!(slow.walks, 1);
    }

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
