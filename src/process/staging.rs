//! Writing an artifact directory as a set: every file goes into a staging
//! directory beside the destination, which takes the destination's place
//! only once everything is written. A failed or interrupted run removes the
//! staging directory (the guard's Drop), so no half-written or
//! success-looking directory is ever left at the destination.
//!
//! sockscope runs as root, often in a directory other users can write, so
//! nothing here uses a name another user could predict and plant:
//!
//! - The staging directory is `.NAME.sockscope-staging-XXXXXXXXXX` (random,
//!   created exclusively with mode 0700 by tempfile) beside `--out NAME`.
//! - It takes the destination's place with one renameat2: RENAME_EXCHANGE
//!   when an earlier artifact is there (the old one ends up under the
//!   staging name and is removed), RENAME_NOREPLACE when nothing is. No
//!   moment exists where the destination is missing or half-written.
//! - Each live run holds an flock on its staging directory. A run killed
//!   outright (SIGKILL, power loss) leaves its staging directory behind;
//!   the next run into the same `--out` removes those whose lock is free,
//!   and only real directories (not links) owned by its own user.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error;
use crate::output::{self, Followed, errno_text};

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
    dest: PathBuf,
}

/// Refuses a destination that exists and is not a sockscope artifact
/// directory (a usage error, checked before any measurement starts).
pub fn check_destination(dest: &Path) -> Result<()> {
    destination(dest).map(|_| ())
}

/// [`check_destination`], returning where the artifact will go: `dest`,
/// or the directory a symbolic link there points to when root, sockscope's
/// user or the sudo user owns the link (any other link is refused).
fn destination(dest: &Path) -> Result<PathBuf> {
    let usage = |e: anyhow::Error| error::usage(format!("--out {e:#}"));
    let (path, meta) = match output::follow(dest).map_err(usage)? {
        Followed::Alias(_) => {
            return Err(error::usage(format!(
                "--out {}: names a descriptor, not a directory",
                dest.display()
            )));
        }
        Followed::Path(p, m) => (p, m),
    };
    let Some(meta) = meta else {
        return Ok(path);
    };
    if !meta.is_dir() {
        return Err(error::usage(format!(
            "--out {}: exists and is not a directory",
            dest.display()
        )));
    }
    if path.file_name().is_none() {
        return Err(error::usage(format!(
            "--out {}: give the directory by name (not . or ..)",
            dest.display()
        )));
    }
    let empty = fs::read_dir(&path)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    if empty || MARKERS.iter().any(|m| path.join(m).is_file()) {
        return Ok(path);
    }
    Err(error::usage(format!(
        "--out {}: exists and is not a sockscope artifact directory; \
         choose another directory (sockscope only replaces its own artifacts)",
        dest.display()
    )))
}

fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `.NAME.sockscope-staging-`: the start of `dest`'s staging names.
fn staging_prefix(dest: &Path) -> Result<Vec<u8>> {
    let name = dest
        .file_name()
        .with_context(|| format!("{} is not a directory path", dest.display()))?;
    let mut p = b".".to_vec();
    p.extend_from_slice(name.as_bytes());
    p.push(b'.');
    p.extend_from_slice(TAG.as_bytes());
    Ok(p)
}

/// True when `name` is one of the staging names `prefix` starts.
fn is_staging_name(name: &OsStr, prefix: &[u8]) -> bool {
    name.as_bytes()
        .strip_prefix(prefix)
        .is_some_and(|r| r.len() == RAND_LEN && r.iter().all(u8::is_ascii_alphanumeric))
}

/// Opens a directory itself, never through a symbolic link.
fn open_dir(p: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
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

/// True when `p` still names the directory open as `f` (not removed, not
/// replaced).
fn still_at(f: &File, p: &Path) -> bool {
    match (f.metadata(), fs::symlink_metadata(p)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Removes the staging directories of `dest` that runs killed before they
/// could clean up left behind: those whose lock is free, that are real
/// directories owned by our effective user. Returns what it removed.
pub fn remove_stale(dest: &Path) -> Result<Vec<PathBuf>> {
    Ok(remove_stale_in(&parent_of(dest), &staging_prefix(dest)?))
}

/// Removes the entries of `parent` named `prefix` + [`RAND_LEN`] random
/// characters that are real directories (a link or a file planted under
/// such a name is left alone) owned by our effective user and not locked
/// by a live [`LockedDir`]. Returns what it removed.
pub fn remove_stale_in(parent: &Path, prefix: &[u8]) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if !is_staging_name(&e.file_name(), prefix) {
            continue;
        }
        let p = e.path();
        // O_NOFOLLOW | O_DIRECTORY: a link or a file fails to open.
        let Ok(f) = open_dir(&p) else { continue };
        let owned = f.metadata().is_ok_and(|m| m.uid() == euid);
        if owned && try_lock(&f) && still_at(&f, &p) && fs::remove_dir_all(&p).is_ok() {
            removed.push(p);
        }
    }
    removed
}

/// A directory with an unpredictable name (`prefix` + [`RAND_LEN`] random
/// characters), created exclusively with mode 0700 and flock'ed for as
/// long as this lives, so [`remove_stale_in`] leaves it alone; removed
/// with what it holds when dropped.
pub struct LockedDir {
    dir: tempfile::TempDir,
    _lock: File,
}

impl LockedDir {
    /// Creates and locks it in `parent`.
    pub fn create(parent: &Path, prefix: &[u8]) -> io::Result<Self> {
        for _ in 0..CREATE_TRIES {
            let dir = tempfile::Builder::new()
                .prefix(OsStr::from_bytes(prefix))
                .rand_bytes(RAND_LEN)
                .permissions(fs::Permissions::from_mode(0o700))
                .tempdir_in(parent)?;
            let lock = open_dir(dir.path())?;
            // Between mkdir and flock a concurrent run may have taken the
            // unlocked directory for a dead run's.
            if try_lock(&lock) && still_at(&lock, dir.path()) {
                return Ok(Self { dir, _lock: lock });
            }
            // Not ours any more: whoever took it removes it.
            let _ = dir.keep();
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "every directory created was taken by a concurrent cleanup",
        ))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The process's umask, read without changing it (umask(2) would, for
/// every thread at once).
fn umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// renameat2(2) relative to the current directory.
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Staging {
    /// Checks the destination, removes staging directories dead runs left
    /// for it, and creates this run's (locked) beside it: same filesystem,
    /// so the final rename is atomic.
    pub fn new(dest: &Path) -> Result<Self> {
        let dest = destination(dest)?;
        let prefix = staging_prefix(&dest)?;
        remove_stale(&dest)?;
        let parent = parent_of(&dest);
        let dir = LockedDir::create(&parent, &prefix).map_err(|e| {
            error::with_code(
                1,
                format!(
                    "creating a staging directory in {}: {}",
                    parent.display(),
                    errno_text(&e)
                ),
            )
        })?;
        Ok(Self { dir, dest })
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

    /// Writes one file of the set (`name` may contain subdirectories). A
    /// failed write (a full filesystem) is exit 1 naming the errno.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path().join(name);
        let fail = |doing: &str, e: io::Error| {
            error::with_code(1, format!("{doing} {}: {}", p.display(), errno_text(&e)))
        };
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).map_err(|e| fail("creating", e))?;
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| fail("creating", e))?;
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
    pub fn commit(self) -> Result<PathBuf> {
        let tmp = self.path().to_path_buf();
        // Readable like any directory the user makes, now that it is whole.
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o777 & !umask()))
            .with_context(|| format!("setting the mode of {}", tmp.display()))?;
        if let Ok(d) = File::open(&tmp) {
            let _ = d.sync_all();
        }
        let replaced = self.swap_into_place(&tmp)?;
        if let Ok(d) = File::open(parent_of(&self.dest)) {
            let _ = d.sync_all();
        }
        let Staging {
            dir: LockedDir { dir, .. },
            dest,
        } = self;
        if replaced {
            // The old artifact, now under the staging name. A failure
            // leaves an unlocked staging directory the next run removes.
            let _ = dir.close();
        } else {
            // The name is free now: nothing of ours is left there.
            let _ = dir.keep();
        }
        Ok(dest)
    }

    /// RENAME_EXCHANGE with an earlier artifact, RENAME_NOREPLACE when
    /// there is none (one retry if the destination appears or vanishes in
    /// between). The destination is checked again: it may have changed
    /// during the run. True when an old artifact is now at `tmp`.
    fn swap_into_place(&self, tmp: &Path) -> Result<bool> {
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
        let mut last = None;
        for _ in 0..2 {
            let exists = fs::symlink_metadata(&self.dest).is_ok();
            let r = if exists {
                destination(&self.dest).map_err(|e| {
                    error::with_code(1, format!("{e:#} (it changed during the run)"))
                })?;
                renameat2(tmp, &self.dest, libc::RENAME_EXCHANGE)
            } else {
                renameat2(tmp, &self.dest, libc::RENAME_NOREPLACE)
            };
            match r {
                Ok(()) => return Ok(exists),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // A filesystem without renameat2 flags (NFS, old FUSE).
                    return self
                        .replace_without_flags(tmp, exists)
                        .map(|()| false)
                        .map_err(fail);
                }
                // The destination appeared (EEXIST) or vanished (ENOENT).
                Err(e) if matches!(e.raw_os_error(), Some(libc::EEXIST | libc::ENOENT)) => {
                    last = Some(e);
                }
                Err(e) => return Err(fail(e)),
            }
        }
        Err(fail(last.expect("a failed attempt")))
    }

    /// For filesystems that refuse renameat2's flags: the old artifact is
    /// renamed onto a fresh empty directory with an unpredictable name (a
    /// directory may replace an empty one), then the set onto the
    /// destination; on failure the old one is put back.
    fn replace_without_flags(&self, tmp: &Path, exists: bool) -> io::Result<()> {
        if !exists {
            return fs::rename(tmp, &self.dest);
        }
        let aside = tempfile::Builder::new()
            .prefix(OsStr::from_bytes(
                &staging_prefix(&self.dest).unwrap_or_default(),
            ))
            .rand_bytes(RAND_LEN)
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir_in(parent_of(&self.dest))?;
        fs::rename(&self.dest, aside.path())?;
        if let Err(e) = fs::rename(tmp, &self.dest) {
            let _ = fs::rename(aside.path(), &self.dest);
            let _ = aside.keep();
            return Err(e);
        }
        // `aside` (the old artifact) is removed as it drops.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let prefix = staging_prefix(&dest).unwrap();
        for s in [&a, &b] {
            assert!(is_staging_name(s.path().file_name().unwrap(), &prefix));
            let m = fs::symlink_metadata(s.path()).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o700);
            // Locked: a third run does not take a live run's directory.
            assert!(!try_lock(&open_dir(s.path()).unwrap()));
        }
        assert!(remove_stale(&dest).unwrap().is_empty());
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
        let removed = remove_stale(&dest).unwrap();
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
