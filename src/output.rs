//! Writing the files a user names (`--json FILE`, `-o FILE`). sockscope
//! runs as root, so a destination is written the way the user meant it and
//! never in a way another local user could redirect:
//!
//! - `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: the
//!   bytes go to that open descriptor as is (a stream, like a shell
//!   redirection); it is never reopened by path.
//! - A character device or a FIFO: opened (never through a link planted
//!   since the check) and written through, never replaced. A FIFO nobody
//!   opens, or whose reader stops reading, fails after a bounded wait.
//! - A regular file, or a name that does not exist yet: the bytes go to a
//!   temporary file with an unpredictable name, created with O_EXCL in the
//!   same directory, fsync'ed, and renamed over the name. A reader or a
//!   crash never sees half a file, and a name planted beforehand (a
//!   symlink at a guessed temporary name) is never followed. A replaced
//!   file keeps its mode, owner and group.
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
pub enum WriteTarget {
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

/// Where a user-named path leads once trusted symbolic links are followed.
#[derive(Debug)]
pub enum Followed {
    /// A descriptor alias (`-`, /dev/stdout, /dev/fd/N, or a trusted link
    /// to one): the path as given or as the link named it.
    Alias(PathBuf),
    /// The final path, which is not a symbolic link, with its metadata
    /// (None: it does not exist yet, and its directory does).
    Path(PathBuf, Option<fs::Metadata>),
}

/// Follows `path` through symbolic links owned by trusted users (refusing
/// any other, and any untrusted link among the directories on the way),
/// up to the kernel's limit. A name that does not exist must have an
/// existing directory. Refusals are usage errors naming `path`.
pub fn follow(path: &Path) -> Result<Followed> {
    if fd_alias(path).is_some() {
        return Ok(Followed::Alias(path.to_path_buf()));
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
                    Ok(m) if m.is_dir() => Ok(Followed::Path(p, None)),
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
        if !meta.file_type().is_symlink() {
            return Ok(Followed::Path(p, Some(meta)));
        }
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
        if fd_alias(&p).is_some() {
            // A trusted link to /dev/stdout and the like.
            return Ok(Followed::Alias(p));
        }
    }
    Err(error::usage(format!(
        "{}: more than {MAX_LINKS} symbolic links",
        path.display()
    )))
}

/// The open descriptor an alias names, if it is open for writing.
fn alias_target(given: &Path, alias: &Path) -> Result<WriteTarget> {
    let fd = fd_alias(alias).expect("an alias");
    // SAFETY: F_GETFL only reads the descriptor's flags.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(error::usage(format!(
            "{}: descriptor {fd} is not open",
            given.display()
        )));
    }
    if fl & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(error::usage(format!(
            "{}: descriptor {fd} is open for reading only",
            given.display()
        )));
    }
    Ok(WriteTarget::Fd(fd))
}

/// Decides where `path`'s bytes would go; refusals are usage errors.
pub fn resolve(path: &Path) -> Result<WriteTarget> {
    let (p, meta) = match follow(path)? {
        Followed::Alias(a) => return alias_target(path, &a),
        Followed::Path(p, meta) => (p, meta),
    };
    let Some(meta) = meta else {
        return Ok(WriteTarget::File(p));
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(WriteTarget::File(p));
    }
    if ft.is_char_device() || ft.is_fifo() {
        return Ok(WriteTarget::Device(p));
    }
    Err(error::usage(format!(
        "{}: {} is {}; give a file name (or - for standard output)",
        path.display(),
        p.display(),
        kind_of(ft)
    )))
}

/// "a directory", "a socket"...: what a refused destination is.
fn kind_of(ft: fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// True when `path` leads to this process's standard output (so that
/// output meant for people must go to stderr to keep it parseable).
pub fn is_stdout(path: &Path) -> bool {
    match resolve(path) {
        Ok(WriteTarget::Fd(1)) => true,
        Ok(WriteTarget::Fd(fd)) => same_file(fd, 1),
        _ => false,
    }
}

/// True when two open descriptors are the same open file (device, inode).
fn same_file(a: i32, b: i32) -> bool {
    let st = |fd: i32| {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a stat into the buffer, or fails (EBADF for
        // a descriptor that is not open) and leaves it unread.
        (unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0).then(|| {
            // SAFETY: fstat succeeded, so the buffer is initialised.
            let st = unsafe { st.assume_init() };
            (st.st_dev, st.st_ino)
        })
    };
    matches!((st(a), st(b)), (Some(x), Some(y)) if x == y)
}

/// Checks that `path` can be written, before any measurement: a refusal is
/// a usage error naming `what` (`--json`, `-o`). A file's directory must be
/// writable (a read-only filesystem is found here, not after the run).
pub fn check(path: &Path, what: &str) -> Result<()> {
    let usage = |e: anyhow::Error| error::usage(format!("{what} {e:#}"));
    if let WriteTarget::File(p) = resolve(path).map_err(usage)? {
        let dir = parent_of(&p);
        if let Err(e) = writable(&dir) {
            return Err(usage(error::usage(format!(
                "{}: directory {}: {}",
                path.display(),
                dir.display(),
                errno_text(&e)
            ))));
        }
    }
    Ok(())
}

/// access(2) for writing with the effective ids (EROFS, EACCES).
fn writable(dir: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated path; faccessat only reads it.
    let r = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes `bytes` to `path` as the module documentation says.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |doing: &str, e: io::Error| {
        error::with_code(1, format!("{doing} {}: {}", path.display(), errno_text(&e)))
    };
    match resolve(path)? {
        WriteTarget::Fd(fd) => {
            // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if dup < 0 {
                return Err(fail(
                    "duplicating the descriptor of",
                    io::Error::last_os_error(),
                ));
            }
            // SAFETY: `dup` is a fresh descriptor owned by nobody else.
            let f = File::from(unsafe { OwnedFd::from_raw_fd(dup) });
            write_stream(&f, bytes, STALL_LIMIT).map_err(|e| fail("writing", e))
        }
        WriteTarget::Device(p) => {
            let f = open_device(&p).map_err(|e| fail("opening", e))?;
            write_stream(&f, bytes, STALL_LIMIT).map_err(|e| fail("writing", e))
        }
        WriteTarget::File(p) => replace_file(&p, bytes).map_err(|(doing, e)| fail(doing, e)),
    }
}

/// Serialises `value` as pretty JSON and writes it with [`write`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write(path, &bytes)
}

/// Longest time a stream may accept no byte before the write fails (a
/// FIFO whose reader stopped reading, a non-blocking pipe nobody drains).
pub const STALL_LIMIT: Duration = Duration::from_secs(10);

/// Writes all of `bytes` to a stream. A non-blocking descriptor that is
/// full is waited on with poll, for at most `stall` without progress.
fn write_stream(mut f: &File, bytes: &[u8], stall: Duration) -> io::Result<()> {
    use std::os::fd::AsFd;
    let mut rest = bytes;
    while !rest.is_empty() {
        match f.write(rest) {
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::EIO)),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
                let ms = u16::try_from(stall.as_millis()).unwrap_or(u16::MAX);
                let mut pfd = [PollFd::new(f.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut pfd, PollTimeout::from(ms)) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "the reader took nothing for {} s (ETIMEDOUT)",
                                stall.as_secs()
                            ),
                        ));
                    }
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens a character device or a FIFO for writing, never through a
/// symbolic link (one planted since [`resolve`] looked is refused), and
/// checks what it opened is still a device or a FIFO. A FIFO is opened
/// non-blocking (a blocking open waits forever for a reader), retried for
/// up to FIFO_WAIT, and stays non-blocking so a stalled reader is bounded;
/// a character device is made blocking.
fn open_device(p: &Path) -> io::Result<File> {
    let deadline = Instant::now() + FIFO_WAIT;
    loop {
        let r = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(p);
        match r {
            Ok(f) => {
                let ft = f.metadata()?.file_type();
                if ft.is_char_device() {
                    set_blocking(&f)?;
                } else if !ft.is_fifo() {
                    // Swapped for something else since resolve() looked.
                    return Err(io::Error::from_raw_os_error(libc::EINVAL));
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

fn set_blocking(f: &File) -> io::Result<()> {
    let fd = std::os::fd::AsRawFd::as_raw_fd(f);
    // SAFETY: plain fcntl on a descriptor we own.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Temporary file, fsync, rename over `p`; the directory is synced too.
/// An existing file keeps its permission bits (not set-id ones), owner and
/// group; a hard link to it is left alone (the name gets a new file).
fn replace_file(p: &Path, bytes: &[u8]) -> Result<(), (&'static str, io::Error)> {
    let dir = parent_of(p);
    let name: OsString = p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    let old = fs::symlink_metadata(p).ok().filter(|m| m.is_file());
    let mode = old
        .as_ref()
        .map_or(0o666, |m| m.permissions().mode() & 0o777);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(&dir)
        .map_err(|e| ("creating a temporary file beside", e))?;
    if let Some(m) = &old {
        // Only root can give a file away; anyone else keeps their own.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid()))
                .map_err(|e| ("keeping the owner of", e))?;
            // chown may clear mode bits; put them back.
            tmp.as_file()
                .set_permissions(fs::Permissions::from_mode(mode))
                .map_err(|e| ("keeping the mode of", e))?;
        }
    }
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
        assert_eq!(resolve(Path::new("-")).unwrap(), WriteTarget::Fd(1));
        assert_eq!(
            resolve(Path::new("/dev/stderr")).unwrap(),
            WriteTarget::Fd(2)
        );
        assert_eq!(resolve(Path::new("/dev/fd/2")).unwrap(), WriteTarget::Fd(2));
        assert_eq!(
            code(resolve(Path::new("/dev/fd/987")).unwrap_err()),
            Some(2)
        );
        assert_eq!(
            resolve(Path::new("/dev/null")).unwrap(),
            WriteTarget::Device("/dev/null".into())
        );
        let d = tmpdir("resolve");
        assert_eq!(code(resolve(&d).unwrap_err()), Some(2));
        assert_eq!(
            code(resolve(&d.join("missing/x.json")).unwrap_err()),
            Some(2)
        );
        let f = d.join("new.json");
        assert_eq!(resolve(&f).unwrap(), WriteTarget::File(f.clone()));
        // A link we own is followed; the file it names is what gets replaced.
        std::os::unix::fs::symlink("new.json", d.join("link.json")).unwrap();
        assert_eq!(resolve(&d.join("link.json")).unwrap(), WriteTarget::File(f));
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
        // As root, a node of our own: a regression replaces it, not the
        // machine's /dev/full.
        let d = tmpdir("full");
        let node = d.join("full");
        // SAFETY: geteuid has no preconditions.
        let full = if unsafe { libc::geteuid() } == 0 {
            let dev = libc::makedev(1, 7);
            nix::sys::stat::mknod(
                &node,
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::from_bits_truncate(0o666),
                dev,
            )
            .unwrap();
            node
        } else {
            PathBuf::from("/dev/full")
        };
        for _ in 0..2 {
            let e = write(&full, b"x").unwrap_err();
            assert!(format!("{e:#}").contains("ENOSPC"), "{e:#}");
            assert_eq!(code(e), Some(1));
            let ft = fs::symlink_metadata(&full).unwrap().file_type();
            assert!(ft.is_char_device(), "{} replaced", full.display());
        }
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_are_opened_never_through_a_link_nor_as_a_file() {
        let d = tmpdir("device");
        std::os::unix::fs::symlink("/dev/null", d.join("link")).unwrap();
        let e = open_device(&d.join("link")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        fs::write(d.join("file"), b"keep").unwrap();
        assert!(open_device(&d.join("file")).is_err());
        assert_eq!(fs::read(d.join("file")).unwrap(), b"keep");
        assert!(open_device(Path::new("/dev/null")).is_ok());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_whose_reader_stops_reading_fails_within_the_stall_limit() {
        let d = tmpdir("stall");
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // A reader that never reads: the pipe fills, then nothing moves.
        let _reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let f = open_device(&fifo).unwrap();
        let t0 = Instant::now();
        let e = write_stream(&f, &vec![b'x'; 4 << 20], Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn standard_output_is_recognised_under_its_names() {
        assert!(is_stdout(Path::new("-")));
        assert!(is_stdout(Path::new("/dev/stdout")));
        assert!(is_stdout(Path::new("/proc/self/fd/1")));
        assert!(!is_stdout(Path::new("/dev/null")));
        let d = tmpdir("stdout");
        std::os::unix::fs::symlink("/dev/stdout", d.join("link")).unwrap();
        assert!(is_stdout(&d.join("link")));
        assert!(!is_stdout(&d.join("x.json")));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_replaced_file_keeps_its_owner() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP a_replaced_file_keeps_its_owner: not root");
            return;
        }
        let d = tmpdir("owner");
        let f = d.join("out.json");
        fs::write(&f, b"old").unwrap();
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        write(&f, b"new").unwrap();
        let m = fs::metadata(&f).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
        assert_eq!(m.permissions().mode() & 0o777, 0o640);
        assert_eq!(fs::read(&f).unwrap(), b"new");
        fs::remove_dir_all(&d).unwrap();
    }
}
