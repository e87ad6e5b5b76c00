//! Resolving a destination once, into a descriptor of its directory and a
//! name in it. Every later step (stat, open, create, rename, unlink) is
//! relative to that descriptor, so a directory on the way that another
//! user swaps for a symbolic link after the check cannot redirect it: the
//! walk opens each component with O_PATH | O_NOFOLLOW and follows a link
//! only by reading it through its own descriptor, after checking who owns
//! that very link.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::Result;
use nix::fcntl::{AT_FDCWD, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

use crate::error;

/// Most symbolic links followed for one destination (the kernel's limit).
const MAX_LINKS: usize = 40;

/// `io::Error` for people: `No space left on device (ENOSPC)`.
pub fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let errno = nix::errno::Errno::from_raw(n);
            format!("{} ({errno:?})", errno.desc())
        }
        None => e.to_string(),
    }
}

/// The descriptor a path names without being a file: `-` (stdout),
/// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N.
pub fn fd_alias(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "-" | "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let n = s
        .strip_prefix("/dev/fd/")
        .or_else(|| s.strip_prefix("/proc/self/fd/"))?;
    n.parse::<i32>().ok().filter(|n| *n >= 0)
}

/// Owners whose symbolic links are followed (and whose FIFOs are written
/// in sticky directories): root, the effective user and, under sudo, the
/// user who ran it (who could do anything as root anyway).
pub fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let sudo = std::env::var("SUDO_UID")
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    uid == 0 || uid == euid || (euid == 0 && sudo == Some(uid))
}

/// `nobody (uid 65534)`, or `uid 1234` for a user without a name.
pub fn owner_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(
            || format!("uid {uid}"),
            |u| format!("{} (uid {uid})", u.name),
        )
}

fn refuse_link(link: &Path, uid: u32, given: &Path) -> anyhow::Error {
    error::usage(format!(
        "{}: {} is a symbolic link owned by {}; sockscope runs as root and does not \
         follow links another user could have planted: give the path it points to",
        given.display(),
        link.display(),
        owner_name(uid)
    ))
}

/// The file type bits of a stat.
pub fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// A destination resolved to a directory and a name in it.
#[derive(Debug)]
pub struct Entry {
    /// The directory, an O_PATH descriptor (usable as the `dirfd` of the
    /// `*at` calls, not for reading).
    pub dir: OwnedFd,
    /// The final name in `dir` (never `.`, `..` nor containing `/`).
    pub name: OsString,
    /// The path it was reached by, links followed: for messages.
    pub path: PathBuf,
    /// What the name is now (not followed), None when it does not exist.
    pub stat: Option<FileStat>,
    /// True when a symbolic link named it (the given path's last component
    /// was a link, followed because a trusted user owns it).
    pub via_link: bool,
}

/// Where a user-named path leads.
#[derive(Debug)]
pub enum Located {
    /// A descriptor alias (`-`, /dev/stdout, /dev/fd/N, or a trusted link
    /// to one): the path as given or as the link named it.
    Alias(PathBuf),
    /// A name in a directory.
    Entry(Entry),
}

/// Opens `name` in `dir` itself, never following it, with O_PATH: a
/// directory, a link, a FIFO or a device alike, with no side effect.
fn open_path(dir: impl AsFd, name: &OsStr) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn root() -> nix::Result<OwnedFd> {
    openat(
        AT_FDCWD,
        "/",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn cwd() -> nix::Result<OwnedFd> {
    openat(
        AT_FDCWD,
        ".",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// The parts of a path still to walk.
fn parts(p: &Path) -> VecDeque<Component<'_>> {
    p.components().collect()
}

/// Resolves `given` once: walks its directories from `/` (or the current
/// directory) opening each with O_NOFOLLOW, follows a symbolic link (in a
/// directory or as the last component) only when root, sockscope's user or
/// the sudo user owns it, and stops at the last name, which must be in an
/// existing directory. Refusals are usage errors naming `given`.
pub fn locate(given: &Path) -> Result<Located> {
    if fd_alias(given).is_some() {
        return Ok(Located::Alias(given.to_path_buf()));
    }
    if given.as_os_str().is_empty() {
        return Err(error::usage("an empty file name"));
    }
    let usage = |what: &Path, e: nix::Error| {
        error::usage(format!(
            "{}: {}: {}",
            given.display(),
            what.display(),
            errno_text(&e.into())
        ))
    };
    let start = if given.is_absolute() { root() } else { cwd() };
    let mut dir = start.map_err(|e| usage(Path::new("/"), e))?;
    let mut at = if given.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    // Owned components: a link's target replaces the link's place.
    let mut rest: VecDeque<OsString> = parts(given)
        .into_iter()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    let mut links = 0;
    let mut via_link = false;
    while let Some(c) = rest.pop_front() {
        let last = rest.is_empty();
        if c == "/" {
            dir = root().map_err(|e| usage(Path::new("/"), e))?;
            at = PathBuf::from("/");
            continue;
        }
        if c == "." && !last {
            continue;
        }
        if c == "." || (c == ".." && last) {
            return Err(error::usage(format!(
                "{}: {} is a directory; give a file name",
                given.display(),
                at.join(&c).display()
            )));
        }
        let here = at.join(&c);
        let fd = match open_path(&dir, &c) {
            Ok(fd) => fd,
            Err(nix::Error::ENOENT) if last => {
                return Ok(Located::Entry(Entry {
                    dir,
                    name: c,
                    path: here,
                    stat: None,
                    via_link,
                }));
            }
            Err(e) if last => return Err(usage(&here, e)),
            Err(e) => {
                return Err(error::usage(format!(
                    "{}: directory {}: {}",
                    given.display(),
                    here.display(),
                    errno_text(&e.into())
                )));
            }
        };
        let st = fstat(&fd).map_err(|e| usage(&here, e))?;
        match kind(&st) {
            SFlag::S_IFLNK => {
                if !trusted_owner(st.st_uid) {
                    return Err(refuse_link(&here, st.st_uid, given));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(error::usage(format!(
                        "{}: more than {MAX_LINKS} symbolic links",
                        given.display()
                    )));
                }
                // Read through the descriptor of the link just checked,
                // not by name: the name may be another link by now.
                let to = PathBuf::from(readlinkat(&fd, "").map_err(|e| usage(&here, e))?);
                if last {
                    via_link = true;
                    let whole = if to.is_absolute() {
                        to.clone()
                    } else {
                        at.join(&to)
                    };
                    if fd_alias(&whole).is_some() {
                        // A trusted link to /dev/stdout and the like.
                        return Ok(Located::Alias(whole));
                    }
                }
                for p in parts(&to).into_iter().rev() {
                    rest.push_front(p.as_os_str().to_os_string());
                }
            }
            _ if last => {
                return Ok(Located::Entry(Entry {
                    dir,
                    name: c,
                    path: here,
                    stat: Some(st),
                    via_link,
                }));
            }
            SFlag::S_IFDIR => {
                // O_PATH on a directory: reopened as one, so a `..` from
                // here means this directory's parent.
                dir = fd;
                at = here;
            }
            _ => {
                return Err(error::usage(format!(
                    "{}: {} is not a directory",
                    given.display(),
                    here.display()
                )));
            }
        }
    }
    // Only a path of `.` and `/` parts ends here.
    Err(error::usage(format!(
        "{}: {} is a directory; give a file name",
        given.display(),
        at.display()
    )))
}
