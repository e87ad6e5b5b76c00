//! Writing the files a user names (`--json FILE`, `-o FILE`). sockscope
//! runs as root, so a destination is written the way the user meant it and
//! never in a way another local user could redirect:
//!
//! - `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: the
//!   bytes go to that open descriptor as is (a stream, like a shell
//!   redirection); it is never reopened by path.
//! - The path is resolved once ([`walk::locate`]): each directory on the
//!   way is opened with O_PATH | O_NOFOLLOW from the one before, and every
//!   later step (stat, open, create, rename, unlink) is relative to the
//!   final directory's descriptor. A directory another user swaps for a
//!   symbolic link after the check (a rename-exchange race) cannot
//!   redirect the write: the descriptor still names the directory checked.
//! - A symbolic link (a directory on the way or the last name) is followed
//!   only when root, sockscope's own user or the user who ran sudo owns
//!   that very link (read through its own descriptor, after the owner is
//!   checked); a link another user could have planted is refused.
//! - A character device or a FIFO: opened with O_NOFOLLOW relative to its
//!   directory, checked to be the one resolved, and written through, never
//!   replaced. Only when the user named it directly: one reached through a
//!   symbolic link is refused, and so is one in a sticky directory others
//!   can write (like /tmp) owned by someone other than root, sockscope's
//!   user or the sudo user (another user may have planted it to read what
//!   root writes). A FIFO nobody opens fails after [`FIFO_WAIT`] saying
//!   so; one whose reader stops reading fails after [`STALL_LIMIT`].
//! - A regular file, or a name that does not exist yet: the bytes go to a
//!   temporary file `.NAME.XXXXXXXXXX.tmp` (random), created with O_EXCL
//!   and O_NOFOLLOW in the same directory, fsync'ed, and renamed over the
//!   name; removed on any failure. A reader or a crash never sees half a
//!   file, and a name planted beforehand is never followed. A replaced
//!   file keeps its mode, owner and group; one in a sticky directory
//!   others can write (like /tmp) owned by someone other than root,
//!   sockscope's user or the sudo user is refused like such a FIFO (it
//!   would stay theirs, holding what root wrote), and one planted there
//!   between the check and the write is replaced by a fresh file of
//!   sockscope's own, its owner and mode not kept.
//! - Several files written as a set ([`write_set`], `report --out`): every
//!   temporary file is written before any is renamed, so a failure (a full
//!   disk) leaves the old set, never a new file beside an old one.
//! - Anything else (a directory, a socket, a block device) is refused.
//!
//! Refusals are usage errors (exit 2) and [`check`] finds them before any
//! measurement starts; a write that fails (ENOSPC on /dev/full, a full
//! disk) is exit 1 and names the errno.

pub mod file;
pub mod walk;

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

use crate::error;
pub use walk::{Entry, Located, errno_text, locate, owner_name, trusted_owner};
use walk::{fd_alias, kind};

/// Longest wait for a reader to open a FIFO we are asked to write to.
pub const FIFO_WAIT: Duration = Duration::from_secs(10);

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

/// A destination resolved for writing: the descriptor, or the directory
/// descriptor and name every later step uses.
enum Plan {
    Fd(i32),
    Device(Entry),
    File(Entry),
}

/// The open descriptor an alias names, if it is open for writing.
fn alias_fd(given: &Path, alias: &Path) -> Result<i32> {
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
    Ok(fd)
}

/// "a FIFO", "a character device", "a regular file": what a destination
/// already is.
fn node_kind(st: &FileStat) -> &'static str {
    match kind(st) {
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFREG => "a regular file",
        _ => "a character device",
    }
}

/// Refuses a FIFO or device root did not name itself: one reached through
/// a symbolic link, or one another user may have planted ([`check_planted`]).
fn check_node(given: &Path, e: &Entry, st: &FileStat) -> Result<()> {
    if e.via_link {
        return Err(error::usage(format!(
            "{}: leads through a symbolic link to {}, {}; sockscope writes into a FIFO \
             or device only when it is named directly",
            given.display(),
            e.path.display(),
            node_kind(st)
        )));
    }
    check_planted(given, e, st)
}

/// True when `dir` is sticky and others can write it (like /tmp): a name
/// there may have been created by any user.
fn sticky_shared(dir: &FileStat) -> bool {
    dir.st_mode & libc::S_ISVTX != 0 && dir.st_mode & (libc::S_IWOTH | libc::S_IWGRP) != 0
}

/// Refuses a destination (a FIFO, a device, a regular file) in a sticky
/// directory others can write, owned by someone other than root,
/// sockscope's user or the sudo user (`st` is its stat): another user may
/// have planted it to read what root writes (a FIFO) or to own the file
/// root fills (a regular file keeps its owner and mode when replaced).
fn check_planted(given: &Path, e: &Entry, st: &FileStat) -> Result<()> {
    let dir = fstat(&e.dir).map_err(|err| {
        error::usage(format!(
            "{}: its directory: {}",
            given.display(),
            errno_text(&err.into())
        ))
    })?;
    if sticky_shared(&dir) && !trusted_owner(st.st_uid) {
        return Err(error::usage(format!(
            "{}: {} owned by {} in a sticky directory other users can write; another \
             user may have planted it to read what sockscope writes as root: remove it or \
             give another path",
            given.display(),
            node_kind(st),
            owner_name(st.st_uid)
        )));
    }
    Ok(())
}

/// Resolves `given` once and decides how it is written; refusals are
/// usage errors naming it.
fn plan(given: &Path) -> Result<Plan> {
    let e = match locate(given)? {
        Located::Alias(a) => return alias_fd(given, &a).map(Plan::Fd),
        Located::Entry(e) => e,
    };
    let Some(st) = e.stat else {
        return Ok(Plan::File(e));
    };
    let k = kind(&st);
    if k == SFlag::S_IFREG {
        check_planted(given, &e, &st)?;
        return Ok(Plan::File(e));
    }
    if k == SFlag::S_IFCHR || k == SFlag::S_IFIFO {
        check_node(given, &e, &st)?;
        return Ok(Plan::Device(e));
    }
    Err(error::usage(format!(
        "{}: {} is {}; give a file name (or - for standard output)",
        given.display(),
        e.path.display(),
        kind_of(k)
    )))
}

/// Decides where `path`'s bytes would go; refusals are usage errors.
pub fn resolve(path: &Path) -> Result<WriteTarget> {
    Ok(match plan(path)? {
        Plan::Fd(fd) => WriteTarget::Fd(fd),
        Plan::Device(e) => WriteTarget::Device(e.path),
        Plan::File(e) => WriteTarget::File(e.path),
    })
}

/// "a directory", "a socket"...: what a refused destination is.
fn kind_of(k: SFlag) -> &'static str {
    match k {
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
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
    if let Plan::File(e) = plan(path).map_err(usage)? {
        writable(&e).map_err(usage)?;
    }
    Ok(())
}

/// access(2) for writing, with the effective ids, on an entry's directory
/// (EROFS, EACCES); a usage error naming the path.
fn writable(e: &Entry) -> Result<()> {
    nix::unistd::faccessat(
        &e.dir,
        ".",
        nix::unistd::AccessFlags::W_OK,
        AtFlags::AT_EACCESS,
    )
    .map_err(|err| {
        let dir = e.path.parent().unwrap_or(Path::new("."));
        error::usage(format!(
            "{}: directory {}: {}",
            e.path.display(),
            dir.display(),
            errno_text(&err.into())
        ))
    })
}

fn failure(path: &Path, doing: &str, e: &io::Error) -> anyhow::Error {
    error::with_code(1, format!("{doing} {}: {}", path.display(), errno_text(e)))
}

/// Writes all of `bytes` to an open descriptor of this process, through a
/// duplicate of it.
fn write_fd(path: &Path, fd: i32, bytes: &[u8]) -> Result<()> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(failure(
            path,
            "duplicating the descriptor of",
            &io::Error::last_os_error(),
        ));
    }
    // SAFETY: `dup` is a fresh descriptor owned by nobody else.
    let f = File::from(unsafe { OwnedFd::from_raw_fd(dup) });
    write_stream(&f, bytes, STALL_LIMIT).map_err(|e| failure(path, "writing", &e))
}

/// Opens and writes a FIFO or device entry.
fn write_node(path: &Path, e: &Entry, bytes: &[u8]) -> Result<()> {
    let f = open_device(e, FIFO_WAIT).map_err(|err| failure(path, "opening", &err))?;
    write_stream(&f, bytes, STALL_LIMIT).map_err(|err| failure(path, "writing", &err))
}

/// Writes `bytes` to `path` as the module documentation says.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    match plan(path)? {
        Plan::Fd(fd) => write_fd(path, fd, bytes),
        Plan::Device(e) => write_node(path, &e, bytes),
        Plan::File(e) => file::prepare(e.dir, &e.name, bytes)
            .and_then(file::Pending::commit)
            .map_err(|(doing, err)| failure(path, doing, &err)),
    }
}

/// Writes several files as a set: every destination is resolved (and
/// refused) first, every file's temporary copy written and synced, then
/// the streams written, and only then the files renamed into place. A
/// failure before the renames leaves every destination as it was.
pub fn write_set(files: &[(&Path, &[u8])]) -> Result<()> {
    let plans = files
        .iter()
        .map(|(p, _)| plan(p))
        .collect::<Result<Vec<_>>>()?;
    let mut pending = Vec::new();
    let mut streams = Vec::new();
    for (plan, (path, bytes)) in plans.into_iter().zip(files) {
        match plan {
            Plan::File(e) => pending.push((
                file::prepare(e.dir, &e.name, bytes)
                    .map_err(|(doing, err)| failure(path, doing, &err))?,
                *path,
            )),
            other => streams.push((other, *path, *bytes)),
        }
    }
    for (plan, path, bytes) in streams {
        match plan {
            Plan::Fd(fd) => write_fd(path, fd, bytes)?,
            Plan::Device(e) => write_node(path, &e, bytes)?,
            Plan::File(_) => unreachable!("files are pending"),
        }
    }
    for (p, path) in pending {
        p.commit()
            .map_err(|(doing, err)| failure(path, doing, &err))?;
    }
    Ok(())
}

/// Prints a command's result on standard output, whole, and flushes it. A
/// closed pipe (`| true`: EPIPE) or a full device (`> /dev/full`:
/// ENOSPC) is a failure (exit 1) naming `what` and the errno, returned
/// for the caller to report once the files it was asked for are written;
/// `print!` would panic (exit 101) and lose them.
pub fn print(bytes: &[u8], what: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| {
            error::with_code(
                1,
                format!("writing {what} to standard output: {}", errno_text(&e)),
            )
        })
}

/// The first of two results' failures, the second's message appended
/// when both failed (`--json` unwritable and stdout closed).
pub fn both(first: Result<()>, second: Result<()>) -> Result<()> {
    match (first, second) {
        (Ok(()), r) | (r, Ok(())) => r,
        (Err(a), Err(b)) => {
            let code = a.downcast_ref::<error::Exit>().map_or(1, |x| x.code);
            Err(error::with_code(code, format!("{a:#}; and {b:#}")))
        }
    }
}

/// Serialises `value` as pretty JSON and writes it with [`write`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write(path, &bytes)
}

/// Writes a command's `--json` FILE, then its table to `-o` FILE (or to
/// stderr unless `quiet`). Every output is attempted even when an earlier
/// one failed, and a table that could not be written to `-o` is printed
/// on stderr instead, so nothing measured is lost to a full disk; every
/// failure is returned, each naming its file ([`both`]).
pub fn json_and_table<T: serde::Serialize>(
    json: Option<&Path>,
    output: Option<&Path>,
    quiet: bool,
    value: &T,
    table: &str,
) -> Result<()> {
    use std::io::Write as _;
    let json = json.map_or(Ok(()), |path| write_json(path, value));
    let text = match output {
        Some(path) => write(path, table.as_bytes()).inspect_err(|_| {
            let _ = std::io::stderr().write_all(table.as_bytes());
        }),
        None => {
            if !quiet {
                let _ = std::io::stderr().write_all(table.as_bytes());
            }
            Ok(())
        }
    };
    both(json, text)
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

/// Opens a resolved character device or FIFO for writing, relative to its
/// directory and never through a symbolic link, and checks that what it
/// opened is the node resolved (a name swapped since is refused). A FIFO
/// is opened non-blocking (a blocking open waits forever for a reader),
/// retried for up to `wait`, and stays non-blocking so a stalled reader is
/// bounded; a character device is made blocking.
fn open_device(e: &Entry, wait: Duration) -> io::Result<File> {
    let deadline = Instant::now() + wait;
    loop {
        let r = openat(
            &e.dir,
            e.name.as_os_str(),
            OFlag::O_WRONLY
                | OFlag::O_NOCTTY
                | OFlag::O_NONBLOCK
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        match r {
            Ok(fd) => {
                let f = File::from(fd);
                let st = fstat(&f)?;
                let same = e
                    .stat
                    .is_some_and(|was| (was.st_dev, was.st_ino) == (st.st_dev, st.st_ino));
                let k = kind(&st);
                if !same || !(k == SFlag::S_IFCHR || k == SFlag::S_IFIFO) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "it was replaced since it was checked (EINVAL)",
                    ));
                }
                if k == SFlag::S_IFCHR {
                    set_blocking(&f)?;
                }
                return Ok(f);
            }
            // ENXIO: a FIFO with no reader yet.
            Err(nix::Error::ENXIO) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(nix::Error::ENXIO) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no reader opened the FIFO within {} s (ENXIO)",
                        wait.as_secs_f64()
                    ),
                ));
            }
            Err(err) => return Err(err.into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};

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

    fn entry(p: &Path) -> Entry {
        match locate(p).unwrap() {
            Located::Entry(e) => e,
            Located::Alias(a) => panic!("{} is an alias for {}", p.display(), a.display()),
        }
    }

    #[test]
    fn devices_are_written_only_when_named_directly_and_never_as_a_file() {
        let d = tmpdir("device");
        std::os::unix::fs::symlink("/dev/null", d.join("link")).unwrap();
        let e = resolve(&d.join("link")).unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        assert_eq!(code(e), Some(2));
        fs::write(d.join("file"), b"keep").unwrap();
        assert!(open_device(&entry(&d.join("file")), FIFO_WAIT).is_err());
        assert_eq!(fs::read(d.join("file")).unwrap(), b"keep");
        write(Path::new("/dev/null"), b"x").unwrap();
        // Resolved as a FIFO, then swapped for a file: not opened as one.
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = entry(&fifo);
        fs::remove_file(&fifo).unwrap();
        fs::write(&fifo, b"planted").unwrap();
        let err = open_device(&e, FIFO_WAIT).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert_eq!(fs::read(&fifo).unwrap(), b"planted");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_nobody_opens_fails_saying_so() {
        let d = tmpdir("noreader");
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = open_device(&entry(&fifo), Duration::from_millis(200)).unwrap_err();
        assert!(
            err.to_string()
                .contains("no reader opened the FIFO within 0.2 s (ENXIO)"),
            "{err}"
        );
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
        let f = open_device(&entry(&fifo), FIFO_WAIT).unwrap();
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
    fn a_file_planted_in_a_sticky_directory_is_refused_or_replaced_fresh() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP a_file_planted_in_a_sticky_directory_...: not root");
            return;
        }
        let d = tmpdir("sticky-file");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o1777)).unwrap();
        let f = d.join("out.json");
        fs::write(&f, b"theirs").unwrap();
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        // A mode no umask gives a fresh file.
        fs::set_permissions(&f, fs::Permissions::from_mode(0o602)).unwrap();
        let e = write(&f, b"root's").unwrap_err();
        assert!(
            format!("{e:#}").contains("a regular file owned by nobody"),
            "{e:#}"
        );
        assert_eq!(code(e), Some(2));
        assert_eq!(fs::read(&f).unwrap(), b"theirs");
        // Planted after the check (the race): the file written is a fresh
        // one of root's, not theirs with root's bytes in it.
        let e = entry(&f);
        file::prepare(e.dir, &e.name, b"root's")
            .and_then(file::Pending::commit)
            .unwrap();
        let m = fs::metadata(&f).unwrap();
        assert_eq!((m.uid(), m.gid()), (0, 0));
        assert_ne!(m.permissions().mode() & 0o777, 0o602);
        assert_eq!(fs::read(&f).unwrap(), b"root's");
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
