//! Opening a directory without following any symbolic link
//! (`openat2(RESOLVE_NO_SYMLINKS)`, or component by component with
//! `O_NOFOLLOW` where openat2 is missing), saying why when it cannot, and
//! the lexical normal form of a path (`..` refused).

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::Result;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};

use crate::error::usage;

/// Why a path could not be opened as a directory.
#[derive(Debug)]
pub(super) enum OpenFail {
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
pub(super) fn open_dir(path: &Path) -> Result<OwnedFd, OpenFail> {
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

pub(super) fn open_dir_by_components(path: &Path) -> Result<OwnedFd, OpenFail> {
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

pub(super) fn is_dir(st: &nix::sys::stat::FileStat) -> bool {
    file_type(st) == SFlag::S_IFDIR
}

/// `arg` as an absolute path's normal form: `.` components and repeated or
/// trailing slashes dropped; `..` refused, since interpreting it lexically
/// could differ from what the kernel would do past a link, and following it
/// is what a planted link would want.
pub(super) fn normalise(arg: &str) -> Result<PathBuf> {
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
