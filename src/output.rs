//! Writing the files a user names (`--json FILE`, `-o FILE`). sockscope
//! runs as root, so a destination is written the way the user meant it and
//! never in a way another local user could redirect:
//!
//! - `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: the
//!   bytes go to that open descriptor as is (a stream, like a shell
//!   redirection); it is never reopened by path.
//! - A character device or a FIFO: opened and written through, never
//!   replaced. A FIFO nobody reads fails after a bounded wait.
//! - A regular file, or a name that does not exist yet: the bytes go to a
//!   temporary file with an unpredictable name, created with O_EXCL in the
//!   same directory, fsync'ed, and renamed over the name. A reader or a
//!   crash never sees half a file, and a name planted beforehand (a
//!   symlink at a guessed temporary name) is never followed.
//! - A symbolic link is followed only when root, sockscope's own user or
//!   the user who ran sudo owns it (the link and every link on the way to
//!   its directory); a link another user could have planted is refused.
//! - Anything else (a directory, a socket, a block device) is refused.
//!
//! Refusals are usage errors (exit 2) and [`check`] finds them before any
//! measurement starts; a write that fails (ENOSPC on /dev/full, a full
//! disk) is exit 1 and names the errno.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::error;

/// Longest wait for a reader to open a FIFO we are asked to write to.
pub const FIFO_WAIT: Duration = Duration::from_secs(10);
/// Most symbolic links followed for one destination (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Where a destination's bytes go.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// An open descriptor of this process (`-`, /dev/stdout, /dev/fd/N).
    Fd(i32),
    /// A character device or a FIFO, written through.
    Device(PathBuf),
    /// A regular file or a new name, replaced atomically (the link's
    /// target when the given path was a trusted symbolic link).
    File(PathBuf),
}

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
fn fd_alias(path: &Path) -> Option<i32> {
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

/// Owners whose symbolic links are followed: root, the effective user and,
/// under sudo, the user who ran it (who could do anything as root anyway).
fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let sudo = std::env::var("SUDO_UID")
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    uid == 0 || uid == euid || (euid == 0 && sudo == Some(uid))
}

fn refuse_link(link: &Path, uid: u32, given: &Path) -> anyhow::Error {
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(
            || format!("uid {uid}"),
            |u| format!("{} (uid {uid})", u.name),
        );
    error::usage(format!(
        "{}: {} is a symbolic link owned by {owner}; sockscope runs as root and does not \
         follow links another user could have planted: give the path it points to",
        given.display(),
        link.display()
    ))
}

/// Checks every symbolic link among the ancestors of `dir` (the kernel
/// follows those itself when the file is created).
fn check_ancestors(dir: &Path, given: &Path) -> Result<()> {
    let mut cur = PathBuf::new();
    for c in dir.components() {
        cur.push(c);
        if matches!(c, Component::Normal(_))
            && let Ok(m) = fs::symlink_metadata(&cur)
            && m.file_type().is_symlink()
            && !trusted_owner(m.uid())
        {
            return Err(refuse_link(&cur, m.uid(), given));
        }
    }
    Ok(())
}

fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Decides where `path`'s bytes would go; refusals are usage errors.
pub fn resolve(path: &Path) -> Result<Target> {
    if let Some(fd) = fd_alias(path) {
        // SAFETY: F_GETFL only reads the descriptor's flags.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if fl < 0 {
            return Err(error::usage(format!(
                "{}: descriptor {fd} is not open",
                path.display()
            )));
        }
        if fl & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(error::usage(format!(
                "{}: descriptor {fd} is open for reading only",
                path.display()
            )));
        }
        return Ok(Target::Fd(fd));
    }
    if path.as_os_str().is_empty() {
        return Err(error::usage("an empty file name"));
    }
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        check_ancestors(&parent_of(&p), path)?;
        let meta = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = parent_of(&p);
                return match fs::metadata(&dir) {
                    Ok(m) if m.is_dir() => Ok(Target::File(p)),
                    Ok(_) => Err(error::usage(format!(
                        "{}: {} is not a directory",
                        path.display(),
                        dir.display()
                    ))),
                    Err(e) => Err(error::usage(format!(
                        "{}: directory {}: {}",
                        path.display(),
                        dir.display(),
                        errno_text(&e)
                    ))),
                };
            }
            Err(e) => {
                return Err(error::usage(format!(
                    "{}: {}",
                    path.display(),
                    errno_text(&e)
                )));
            }
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            if !trusted_owner(meta.uid()) {
                return Err(refuse_link(&p, meta.uid(), path));
            }
            let to = fs::read_link(&p)
                .map_err(|e| error::usage(format!("{}: {}", path.display(), errno_text(&e))))?;
            p = if to.is_absolute() {
                to
            } else {
                parent_of(&p).join(to)
            };
            if let Some(fd) = fd_alias(&p) {
                // A trusted link to /dev/stdout and the like.
                return resolve(&PathBuf::from(format!("/dev/fd/{fd}")));
            }
            continue;
        }
        if ft.is_file() {
            return Ok(Target::File(p));
        }
        if ft.is_char_device() || ft.is_fifo() {
            return Ok(Target::Device(p));
        }
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(error::usage(format!(
            "{}: {} is {what}; give a file name (or - for standard output)",
            path.display(),
            p.display()
        )));
    }
    Err(error::usage(format!(
        "{}: more than {MAX_LINKS} symbolic links",
        path.display()
    )))
}

/// Checks that `path` can be written, before any measurement: a refusal is
/// a usage error naming `what` (`--json`, `-o`).
pub fn check(path: &Path, what: &str) -> Result<()> {
    resolve(path)
        .map(|_| ())
        .map_err(|e| error::usage(format!("{what} {e:#}")))
}

/// Writes `bytes` to `path` as the module documentation says.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |doing: &str, e: io::Error| {
        error::with_code(1, format!("{doing} {}: {}", path.display(), errno_text(&e)))
    };
    match resolve(path)? {
        Target::Fd(fd) => {
            // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if dup < 0 {
                return Err(fail(
                    "duplicating the descriptor of",
                    io::Error::last_os_error(),
                ));
            }
            // SAFETY: `dup` is a fresh descriptor owned by nobody else.
            let mut f = File::from(unsafe { OwnedFd::from_raw_fd(dup) });
            f.write_all(bytes).map_err(|e| fail("writing", e))?;
            f.flush().map_err(|e| fail("writing", e))
        }
        Target::Device(p) => {
            let mut f = open_device(&p).map_err(|e| fail("opening", e))?;
            f.write_all(bytes).map_err(|e| fail("writing", e))?;
            f.flush().map_err(|e| fail("writing", e))
        }
        Target::File(p) => replace_file(&p, bytes).map_err(|(doing, e)| fail(doing, e)),
    }
}

/// Serialises `value` as pretty JSON and writes it with [`write`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write(path, &bytes)
}

/// Opens a character device or a FIFO for writing. A FIFO is opened
/// non-blocking first (a blocking open waits forever for a reader), retried
/// for up to FIFO_WAIT, then made blocking for the write.
fn open_device(p: &Path) -> io::Result<File> {
    let deadline = Instant::now() + FIFO_WAIT;
    loop {
        let r = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(p);
        match r {
            Ok(f) => {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
                // SAFETY: plain fcntl on a descriptor we own.
                let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
                // SAFETY: as above.
                if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                return Ok(f);
            }
            // ENXIO: a FIFO with no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Temporary file, fsync, rename over `p`; the directory is synced too.
/// An existing file keeps its permission bits.
fn replace_file(p: &Path, bytes: &[u8]) -> Result<(), (&'static str, io::Error)> {
    let dir = parent_of(p);
    let name: OsString = p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    let mode = fs::metadata(p).map_or(0o666, |m| m.permissions().mode() & 0o7777);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(&dir)
        .map_err(|e| ("creating a temporary file beside", e))?;
    tmp.write_all(bytes).map_err(|e| ("writing", e))?;
    tmp.as_file().sync_all().map_err(|e| ("syncing", e))?;
    tmp.persist(p)
        .map_err(|e| ("renaming a temporary file onto", e.error))?;
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sockscope-output-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn code(e: anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn names_resolve_to_descriptors_devices_and_files() {
        assert_eq!(resolve(Path::new("-")).unwrap(), Target::Fd(1));
        assert_eq!(resolve(Path::new("/dev/stderr")).unwrap(), Target::Fd(2));
        assert_eq!(resolve(Path::new("/dev/fd/2")).unwrap(), Target::Fd(2));
        assert_eq!(
            code(resolve(Path::new("/dev/fd/987")).unwrap_err()),
            Some(2)
        );
        assert_eq!(
            resolve(Path::new("/dev/null")).unwrap(),
            Target::Device("/dev/null".into())
        );
        let d = tmpdir("resolve");
        assert_eq!(code(resolve(&d).unwrap_err()), Some(2));
        assert_eq!(
            code(resolve(&d.join("missing/x.json")).unwrap_err()),
            Some(2)
        );
        let f = d.join("new.json");
        assert_eq!(resolve(&f).unwrap(), Target::File(f.clone()));
        // A link we own is followed; the file it names is what gets replaced.
        std::os::unix::fs::symlink("new.json", d.join("link.json")).unwrap();
        assert_eq!(resolve(&d.join("link.json")).unwrap(), Target::File(f));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn replaces_files_atomically_and_keeps_links() {
        let d = tmpdir("replace");
        let f = d.join("out.json");
        write(&f, b"one").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        write(&f, b"two").unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o640
        );
        std::os::unix::fs::symlink("out.json", d.join("link.json")).unwrap();
        write(&d.join("link.json"), b"three").unwrap();
        assert!(
            fs::symlink_metadata(d.join("link.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&f).unwrap(), b"three");
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_full_device_is_a_failed_write() {
        if Path::new("/dev/full").exists() {
            let e = write(Path::new("/dev/full"), b"x").unwrap_err();
            assert!(format!("{e:#}").contains("ENOSPC"), "{e:#}");
            assert_eq!(code(e), Some(1));
            let e = write(Path::new("/dev/full"), b"x").unwrap_err();
            assert!(format!("{e:#}").contains("ENOSPC"), "{e:#}");
            assert!(
                fs::metadata("/dev/full")
                    .unwrap()
                    .file_type()
                    .is_char_device()
            );
        }
    }
}
