//! Replacing a file relative to its directory's descriptor: a temporary
//! file with an unpredictable name, created exclusively (O_CREAT | O_EXCL
//! | O_NOFOLLOW) in that directory, written and fsync'ed, then renamed
//! over the name; removed again on every failure. Several such files can
//! be prepared first and renamed only once all are written (a set).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat, fstatat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};

/// What failed and the error: `("writing", ENOSPC)`.
pub type Failure = (&'static str, io::Error);

/// Random characters in a temporary name.
const RAND_LEN: usize = 10;
/// Names tried before giving up (another file at a random name).
const TRIES: usize = 8;

/// `len` random letters and digits, from getrandom(2).
pub fn random_name(len: usize) -> io::Result<String> {
    const SET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        // SAFETY: writes at most len - got bytes into the buffer's rest.
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), len - got, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(buf
        .iter()
        .map(|b| SET[usize::from(*b) % SET.len()] as char)
        .collect())
}

/// A written, synced temporary file waiting to be renamed over its name;
/// removed when dropped uncommitted.
pub struct Pending {
    dir: OwnedFd,
    tmp: OsString,
    name: OsString,
    committed: bool,
}

/// Syncs a directory through a descriptor of its own (an O_PATH one
/// cannot be synced); best effort, as a rename already happened.
fn sync_dir(dir: impl AsFd) {
    if let Ok(d) = openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        let _ = File::from(d).sync_all();
    }
}

/// Writes `bytes` into a new temporary file beside `name` in `dir`. An
/// existing regular file at `name` lends its permission bits (not set-id
/// ones) and, when we are root, its owner and group; unless `dir` is a
/// sticky directory others can write and an untrusted user owns it.
pub fn prepare(dir: OwnedFd, name: &OsStr, bytes: &[u8]) -> Result<Pending, Failure> {
    // A file another user may have planted in a sticky directory lends
    // nothing: root's bytes must not land in a file that stays theirs.
    let shared = fstat(&dir).is_ok_and(|d| super::sticky_shared(&d));
    let old = fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .filter(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFREG.bits())
        .filter(|st| !shared || super::trusted_owner(st.st_uid));
    let mode = old.as_ref().map_or(0o666, |st| st.st_mode & 0o777);
    let mut last = io::Error::from_raw_os_error(libc::EEXIST);
    for _ in 0..TRIES {
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(".");
        tmp.push(random_name(RAND_LEN).map_err(|e| ("choosing a temporary name beside", e))?);
        tmp.push(".tmp");
        let fd = match openat(
            &dir,
            tmp.as_bytes(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        ) {
            Ok(fd) => fd,
            Err(nix::Error::EEXIST) => {
                last = io::Error::from_raw_os_error(libc::EEXIST);
                continue;
            }
            Err(e) => return Err(("creating a temporary file beside", e.into())),
        };
        let pending = Pending {
            dir,
            tmp,
            name: name.to_os_string(),
            committed: false,
        };
        let mut f = File::from(fd);
        if let Some(st) = &old {
            // Only root can give a file away; anyone else keeps their own.
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                fchown(
                    &f,
                    Some(Uid::from_raw(st.st_uid)),
                    Some(Gid::from_raw(st.st_gid)),
                )
                .map_err(|e| ("keeping the owner of", e.into()))?;
            }
            // chown may clear mode bits, and the umask narrowed them.
            fchmod(&f, Mode::from_bits_truncate(mode))
                .map_err(|e| ("keeping the mode of", e.into()))?;
        }
        f.write_all(bytes).map_err(|e| ("writing", e))?;
        f.sync_all().map_err(|e| ("syncing", e))?;
        return Ok(pending);
    }
    Err(("creating a temporary file beside", last))
}

impl Pending {
    /// Renames the temporary file over its name, then syncs the directory.
    pub fn commit(mut self) -> Result<(), Failure> {
        renameat(
            &self.dir,
            self.tmp.as_bytes(),
            &self.dir,
            self.name.as_bytes(),
        )
        .map_err(|e| ("renaming a temporary file onto", e.into()))?;
        self.committed = true;
        sync_dir(&self.dir);
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            let _ = unlinkat(&self.dir, self.tmp.as_bytes(), UnlinkatFlags::NoRemoveDir);
        }
    }
}
