//! Writing an artifact directory as a set: every file goes into a staging
//! directory beside the destination, which takes the destination's place
//! only once everything is written. A failed or interrupted run removes the
//! staging directory (the guard's Drop), so no half-written or
//! success-looking directory is ever left at the destination.
//!
//! sockscope runs as root, often in a directory other users can write, so
//! nothing here uses a name another user could predict and plant, nor a
//! path they could redirect:
//!
//! - `--out` is resolved once ([`crate::output::locate`]: trusted links
//!   only, every directory opened with O_NOFOLLOW) into a descriptor of
//!   its directory and a name. The staging directory is made there with
//!   mkdirat, its files with openat, and it is put in place and removed
//!   relative to that descriptor: a directory on the way swapped for a
//!   link during the run redirects nothing.
//! - The staging directory is `.NAME.sockscope-staging-XXXXXXXXXX` (random,
//!   created exclusively with mode 0700) beside `--out NAME`.
//! - It takes the destination's place with one renameat2: RENAME_EXCHANGE
//!   when an earlier artifact is there (the old one ends up under the
//!   staging name and is removed), RENAME_NOREPLACE when nothing is. No
//!   moment exists where the destination is missing or half-written.
//! - Removal walks the tree by descriptors, never following a link.
//! - Each live run holds an flock on its staging directory. A run killed
//!   outright (SIGKILL, power loss) leaves its staging directory behind;
//!   the next run into the same `--out` removes those whose lock is free,
//!   and only real directories (not links) owned by its own user.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, RenameFlags, openat, renameat, renameat2};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::error;
use crate::output::{self, Located, errno_text, file::random_name};

/// Files whose presence marks a directory as a sockscope artifact, which a
/// new run may replace. Anything else at the destination is refused.
pub const MARKERS: &[&str] = &["run.json", "bench.json", "demo.json"];

/// What follows `.NAME.` in a staging directory's name.
const TAG: &str = "sockscope-staging-";
/// Random characters after [`TAG`].
const RAND_LEN: usize = 10;
/// Attempts at a staging directory a concurrent cleanup did not take.
const CREATE_TRIES: usize = 3;

/// An artifact directory being written.
pub struct Staging {
    /// The staging directory, locked while the run lives, removed (with
    /// what it holds) when dropped.
    dir: LockedDir,
    /// The destination's name in the staging directory's parent.
    name: OsString,
    dest: PathBuf,
}

/// Refuses a destination that exists and is not a sockscope artifact
/// directory (a usage error, checked before any measurement starts).
pub fn check_destination(dest: &Path) -> Result<()> {
    destination(dest).map(|_| ())
}

/// The destination resolved: its directory (O_PATH), its name there and
/// its path for messages.
struct Dest {
    parent: OwnedFd,
    name: OsString,
    path: PathBuf,
}

/// [`check_destination`], returning where the artifact will go: `dest`,
/// or the directory a symbolic link there points to when root, sockscope's
/// user or the sudo user owns the link (any other link is refused).
fn destination(dest: &Path) -> Result<Dest> {
    let usage = |e: anyhow::Error| error::usage(format!("--out {e:#}"));
    let e = match output::locate(dest).map_err(usage)? {
        Located::Alias(_) => {
            return Err(error::usage(format!(
                "--out {}: names a descriptor, not a directory",
                dest.display()
            )));
        }
        Located::Entry(e) => e,
    };
    let d = Dest {
        parent: e.dir,
        name: e.name,
        path: e.path,
    };
    if e.stat.is_some() {
        check_existing(&d, dest)?;
    }
    Ok(d)
}

/// An existing destination must be a directory that is empty or holds a
/// sockscope artifact.
fn check_existing(d: &Dest, dest: &Path) -> Result<()> {
    let not_dir = || {
        error::usage(format!(
            "--out {}: exists and is not a directory",
            dest.display()
        ))
    };
    let fd = open_dir_at(&d.parent, &d.name).map_err(|_| not_dir())?;
    let marked = MARKERS.iter().any(|m| {
        fstatat(&fd, *m, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFREG.bits())
    });
    let empty = names_in(&fd).is_ok_and(|n| n.is_empty());
    if empty || marked {
        return Ok(());
    }
    Err(error::usage(format!(
        "--out {}: exists and is not a sockscope artifact directory; \
         choose another directory (sockscope only replaces its own artifacts)",
        dest.display()
    )))
}

/// `.NAME.sockscope-staging-`: the start of `name`'s staging names.
fn staging_prefix(name: &OsStr) -> Vec<u8> {
    let mut p = b".".to_vec();
    p.extend_from_slice(name.as_bytes());
    p.push(b'.');
    p.extend_from_slice(TAG.as_bytes());
    p
}

/// True when `name` is one of the staging names `prefix` starts.
fn is_staging_name(name: &OsStr, prefix: &[u8]) -> bool {
    name.as_bytes()
        .strip_prefix(prefix)
        .is_some_and(|r| r.len() == RAND_LEN && r.iter().all(u8::is_ascii_alphanumeric))
}

/// Opens directory `name` in `dir` for reading, never through a link.
fn open_dir_at(dir: impl AsFd, name: &OsStr) -> nix::Result<File> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(File::from)
}

/// Opens the directory at `p` (as the kernel resolves it: for $TMPDIR,
/// which the administrator sets) as an O_PATH descriptor.
fn open_parent(p: &Path) -> io::Result<OwnedFd> {
    Ok(openat(
        AT_FDCWD,
        p,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in an open directory (not `.` nor `..`).
fn names_in(dir: &impl AsFd) -> nix::Result<Vec<OsString>> {
    let fd = open_dir_at(dir, OsStr::new("."))?;
    let d = nix::dir::Dir::from_fd(fd.into())?;
    Ok(d.into_iter()
        .flatten()
        .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .collect())
}

/// Removes `name` in `dir` and, when it is a directory, what it holds,
/// through descriptors: a link is removed, never followed.
fn remove_tree_at(dir: &impl AsFd, name: &OsStr) -> io::Result<()> {
    let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if st.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFDIR.bits() {
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
        return Ok(());
    }
    let sub = open_dir_at(dir, name)?;
    for n in names_in(&sub)? {
        remove_tree_at(&sub, &n)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(())
}

/// flock(LOCK_EX | LOCK_NB): false when another process holds it.
fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(f),
            libc::LOCK_EX | libc::LOCK_NB,
        ) == 0
    }
}

/// True when `name` in `dir` still is the directory open as `f` (not
/// removed, not replaced).
fn still_at(f: &File, dir: &impl AsFd, name: &OsStr) -> bool {
    match (fstat(f), fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

/// Removes the staging directories of `dest` that runs killed before they
/// could clean up left behind (see [`remove_stale_in`]).
fn remove_stale(d: &Dest) -> Vec<PathBuf> {
    remove_stale_at(&d.parent, parent_of(&d.path), &staging_prefix(&d.name))
}

fn parent_of(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Removes the entries of `parent` named `prefix` + [`RAND_LEN`] random
/// characters that are real directories (a link or a file planted under
/// such a name is left alone) owned by our effective user and not locked
/// by a live [`LockedDir`]. Returns what it removed.
pub fn remove_stale_in(parent: &Path, prefix: &[u8]) -> Vec<PathBuf> {
    match open_parent(parent) {
        Ok(fd) => remove_stale_at(&fd, parent, prefix),
        Err(_) => Vec::new(),
    }
}

fn remove_stale_at(parent: &OwnedFd, shown: &Path, prefix: &[u8]) -> Vec<PathBuf> {
    let Ok(names) = names_in(parent) else {
        return Vec::new();
    };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for n in names {
        if !is_staging_name(&n, prefix) {
            continue;
        }
        // O_NOFOLLOW | O_DIRECTORY: a link or a file fails to open.
        let Ok(f) = open_dir_at(parent, &n) else {
            continue;
        };
        let owned = fstat(&f).is_ok_and(|m| m.st_uid == euid);
        if owned && try_lock(&f) && still_at(&f, parent, &n) && remove_tree_at(parent, &n).is_ok() {
            removed.push(shown.join(&n));
        }
    }
    removed
}

/// A directory with an unpredictable name (`prefix` + [`RAND_LEN`] random
/// characters), created exclusively with mode 0700 in a directory held
/// open, and flock'ed for as long as this lives, so [`remove_stale_in`]
/// leaves it alone; removed with what it holds when dropped.
pub struct LockedDir {
    parent: OwnedFd,
    name: OsString,
    path: PathBuf,
    /// The directory itself, open for reading and locked.
    fd: File,
    keep: bool,
}

impl LockedDir {
    /// Creates and locks it in `parent`.
    pub fn create(parent: &Path, prefix: &[u8]) -> io::Result<Self> {
        Self::create_at(open_parent(parent)?, parent, prefix)
    }

    /// Creates and locks it in the directory open as `parent` (shown as
    /// `shown` in paths and messages).
    fn create_at(parent: OwnedFd, shown: &Path, prefix: &[u8]) -> io::Result<Self> {
        for _ in 0..CREATE_TRIES {
            let mut name = OsStr::from_bytes(prefix).to_os_string();
            name.push(random_name(RAND_LEN)?);
            match mkdirat(&parent, name.as_os_str(), Mode::from_bits_truncate(0o700)) {
                Ok(()) => {}
                Err(nix::Error::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
            let fd = open_dir_at(&parent, &name)?;
            // Between mkdir and flock a concurrent run may have taken the
            // unlocked directory for a dead run's.
            if try_lock(&fd) && still_at(&fd, &parent, &name) {
                let path = shown.join(&name);
                return Ok(Self {
                    parent,
                    name,
                    path,
                    fd,
                    keep: false,
                });
            }
            // Not ours any more: whoever took it removes it.
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "every directory created was taken by a concurrent cleanup",
        ))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LockedDir {
    fn drop(&mut self) {
        // Only the directory created, if it is still under its name.
        if !self.keep && still_at(&self.fd, &self.parent, &self.name) {
            let _ = remove_tree_at(&self.parent, &self.name);
        }
    }
}

/// The process's umask, read without changing it (umask(2) would, for
/// every thread at once).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

impl Staging {
    /// Checks the destination, removes staging directories dead runs left
    /// for it, and creates this run's (locked) beside it: same filesystem,
    /// so the final rename is atomic.
    pub fn new(dest: &Path) -> Result<Self> {
        let d = destination(dest)?;
        remove_stale(&d);
        let prefix = staging_prefix(&d.name);
        let parent = parent_of(&d.path).to_path_buf();
        let dir = LockedDir::create_at(d.parent, &parent, &prefix).map_err(|e| {
            error::with_code(
                1,
                format!(
                    "creating a staging directory in {}: {}",
                    parent.display(),
                    errno_text(&e)
                ),
            )
        })?;
        Ok(Self {
            dir,
            name: d.name,
            dest: d.path,
        })
    }

    /// The staging directory (files written here appear at the
    /// destination on commit).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The final destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Writes one file of the set (`name` may contain subdirectories),
    /// relative to the staging directory's descriptor. A failed write (a
    /// full filesystem) is exit 1 naming the errno and the file's final
    /// path (the staging directory's name means nothing to the user).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.dest.join(name);
        let fail = |doing: &str, e: io::Error| {
            error::with_code(1, format!("{doing} {}: {}", p.display(), errno_text(&e)))
        };
        let mut parts: Vec<&str> = name.split('/').filter(|s| !s.is_empty()).collect();
        let file = parts
            .pop()
            .filter(|f| *f != "." && *f != "..")
            .with_context(|| format!("{name}: not a file name"))?;
        let mut dir = self.dir.fd.try_clone().map_err(|e| fail("opening", e))?;
        for d in parts {
            match mkdirat(&dir, d, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(nix::Error::EEXIST) => {}
                Err(e) => return Err(fail("creating", e.into())),
            }
            dir = open_dir_at(&dir, OsStr::new(d)).map_err(|e| fail("opening", e.into()))?;
        }
        let fd = openat(
            &dir,
            file,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )
        .map_err(|e| fail("creating", e.into()))?;
        let mut f = File::from(fd);
        f.write_all(bytes).map_err(|e| fail("writing", e))?;
        f.sync_all().map_err(|e| fail("syncing", e))
    }

    /// Serialises `value` as pretty JSON into `name`.
    pub fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).context("serialising JSON")?;
        bytes.push(b'\n');
        self.write(name, &bytes)
    }

    /// Puts the set in the destination's place with one atomic rename (see
    /// the module documentation); an earlier artifact there is removed.
    pub fn commit(mut self) -> Result<PathBuf> {
        // Readable like any directory the user makes, now that it is whole.
        fchmod(&self.dir.fd, Mode::from_bits_truncate(0o777 & !umask()))
            .with_context(|| format!("setting the mode of {}", self.path().display()))?;
        let _ = self.dir.fd.sync_all();
        let replaced = self.swap_into_place()?;
        if let Ok(d) = open_dir_at(&self.dir.parent, OsStr::new(".")) {
            let _ = d.sync_all();
        }
        if replaced {
            // The old artifact, now under the staging name. A failure
            // leaves an unlocked staging directory the next run removes.
            let _ = remove_tree_at(&self.dir.parent, &self.dir.name);
        }
        // The set is at the destination: nothing of ours to remove.
        self.dir.keep = true;
        Ok(std::mem::take(&mut self.dest))
    }

    /// RENAME_EXCHANGE with an earlier artifact, RENAME_NOREPLACE when
    /// there is none (one retry if the destination appears or vanishes in
    /// between). The destination is checked again: it may have changed
    /// during the run. True when an old artifact is now at the staging
    /// name.
    fn swap_into_place(&self) -> Result<bool> {
        let fail = |e: io::Error| {
            error::with_code(
                1,
                format!(
                    "moving the artifact into {}: {}",
                    self.dest.display(),
                    errno_text(&e)
                ),
            )
        };
        let (parent, tmp) = (&self.dir.parent, self.dir.name.as_os_str());
        let name = self.name.as_os_str();
        let mut last = None;
        for _ in 0..2 {
            let exists = fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok();
            let r = if exists {
                let d = Dest {
                    parent: parent.try_clone().map_err(fail)?,
                    name: self.name.clone(),
                    path: self.dest.clone(),
                };
                check_existing(&d, &self.dest).map_err(|e| {
                    error::with_code(1, format!("{e:#} (it changed during the run)"))
                })?;
                renameat2(parent, tmp, parent, name, RenameFlags::RENAME_EXCHANGE)
            } else {
                renameat2(parent, tmp, parent, name, RenameFlags::RENAME_NOREPLACE)
            };
            match r {
                Ok(()) => return Ok(exists),
                Err(nix::Error::EINVAL) => {
                    // A filesystem without renameat2 flags (NFS, old FUSE).
                    return self
                        .replace_without_flags(exists)
                        .map(|()| false)
                        .map_err(fail);
                }
                // The destination appeared (EEXIST) or vanished (ENOENT).
                Err(e @ (nix::Error::EEXIST | nix::Error::ENOENT)) => last = Some(e.into()),
                Err(e) => return Err(fail(e.into())),
            }
        }
        Err(fail(last.expect("a failed attempt")))
    }

    /// For filesystems that refuse renameat2's flags: the old artifact is
    /// renamed onto a fresh empty directory with an unpredictable name (a
    /// directory may replace an empty one), then the set onto the
    /// destination; on failure the old one is put back.
    fn replace_without_flags(&self, exists: bool) -> io::Result<()> {
        let (parent, tmp) = (&self.dir.parent, self.dir.name.as_os_str());
        let name = self.name.as_os_str();
        if !exists {
            return Ok(renameat(parent, tmp, parent, name)?);
        }
        let aside = LockedDir::create_at(
            parent.try_clone()?,
            parent_of(&self.dest),
            &staging_prefix(name),
        )?;
        renameat(parent, name, parent, aside.name.as_os_str())?;
        if let Err(e) = renameat(parent, tmp, parent, name) {
            // `aside` is gone (the old artifact took its place and is back).
            let _ = renameat(parent, aside.name.as_os_str(), parent, name);
            return Err(e.into());
        }
        // The old artifact, now at `aside`'s name (which the guard no
        // longer recognises as its own directory).
        let _ = remove_tree_at(parent, aside.name.as_os_str());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn base(name: &str) -> PathBuf {
        let b =
            std::env::temp_dir().join(format!("sockscope-staging-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&b);
        fs::create_dir_all(&b).unwrap();
        b
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commit_replaces_and_drop_cleans() {
        let base = base("commit");
        let dest = base.join("art");
        {
            let s = Staging::new(&dest).unwrap();
            s.write("run.json", b"{}").unwrap();
            // dropped without commit: nothing at dest, no temp left
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(&base).unwrap().count(), 0);
        let s = Staging::new(&dest).unwrap();
        s.write("run.json", b"1").unwrap();
        s.commit().unwrap();
        let s = Staging::new(&dest).unwrap();
        s.write("run.json", b"2").unwrap();
        s.write("sub/x.txt", b"x").unwrap();
        s.commit().unwrap();
        assert_eq!(fs::read(dest.join("run.json")).unwrap(), b"2");
        assert_eq!(names(&base), ["art"]);
        let mode = fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777 & !umask());
        // a foreign directory is refused
        let foreign = base.join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("notes.txt"), b"mine").unwrap();
        let e = Staging::new(&foreign).err().unwrap();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn staging_names_are_random_private_and_locked() {
        let base = base("names");
        let dest = base.join("art");
        let a = Staging::new(&dest).unwrap();
        let b = Staging::new(&dest).unwrap();
        assert_ne!(a.path(), b.path());
        let prefix = staging_prefix(dest.file_name().unwrap());
        for s in [&a, &b] {
            assert!(is_staging_name(s.path().file_name().unwrap(), &prefix));
            let m = fs::symlink_metadata(s.path()).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o700);
            // Locked: a third run does not take a live run's directory.
            assert!(!try_lock(
                &open_dir_at(AT_FDCWD, s.path().as_os_str()).unwrap()
            ));
        }
        assert!(remove_stale(&destination(&dest).unwrap()).is_empty());
        assert!(a.path().is_dir() && b.path().is_dir());
        assert!(!is_staging_name(
            OsStr::new(".art.sockscope-staging-x"),
            &prefix
        ));
        assert!(!is_staging_name(
            OsStr::new(".art.sockscope-staging-abcdefghij.sockscope-staging-abcdefghij"),
            &prefix
        ));
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn stale_directories_of_dead_runs_are_removed_but_not_links() {
        let base = base("stale");
        let dest = base.join("art");
        let dead = base.join(".art.sockscope-staging-AAAAAAAAAA");
        fs::create_dir(&dead).unwrap();
        fs::write(dead.join("run.json"), b"{}").unwrap();
        // A link under a staging name: left alone, and so is what it names.
        let victim = base.join("victim");
        fs::create_dir(&victim).unwrap();
        fs::write(victim.join("keep"), b"k").unwrap();
        let link = base.join(".art.sockscope-staging-BBBBBBBBBB");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        // Another destination's staging directory is not ours to remove.
        let other = base.join(".other.sockscope-staging-CCCCCCCCCC");
        fs::create_dir(&other).unwrap();
        let removed = remove_stale(&destination(&dest).unwrap());
        assert_eq!(removed, std::slice::from_ref(&dead));
        assert!(!dead.exists());
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(victim.join("keep")).unwrap(), b"k");
        assert!(other.is_dir());
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn trusted_links_are_followed_for_the_destination() {
        let base = base("link");
        let real = base.join("run5");
        fs::create_dir(&real).unwrap();
        fs::write(real.join("run.json"), b"old").unwrap();
        let link = base.join("latest");
        std::os::unix::fs::symlink("run5", &link).unwrap();
        let s = Staging::new(&link).unwrap();
        s.write("run.json", b"new").unwrap();
        assert_eq!(s.commit().unwrap(), real);
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(real.join("run.json")).unwrap(), b"new");
        assert_eq!(names(&base), ["latest", "run5"]);
        fs::remove_dir_all(&base).unwrap();
    }
}
