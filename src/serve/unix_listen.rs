//! Listening on a Unix-domain stream socket, with the care sockscope takes
//! with every file it writes as root (`crate::output`): the path is
//! resolved once into a directory descriptor and a name (links followed
//! only when a trusted user owns them), the socket is bound through that
//! descriptor, only a stale socket is ever replaced (never a file of
//! another kind, nor a socket another user owns or that sits in a
//! directory other users can write), and the file the server created is
//! removed when it stops. An abstract name (`unix:@name`) has no file.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use socket2::{Domain, SockAddr, Socket, Type};

use super::listen::BACKLOG;
use crate::endpoint::{MAX_UNIX_NAME, UnixName};
use crate::error;
use crate::output::{Located, errno_text, locate, owner_name, trusted_owner};

/// A listening Unix stream socket: one descriptor per event loop (the
/// same socket: SO_REUSEPORT does not spread Unix connections), and the
/// socket file, removed on drop.
pub struct UnixListening {
    /// The listening socket, duplicated once per loop.
    pub fds: Vec<OwnedFd>,
    /// The file this server created (None for an abstract name).
    pub file: Option<SocketFile>,
}

/// A socket file this server created: removed on drop, if the name still
/// holds that very socket.
pub struct SocketFile {
    dir: OwnedFd,
    name: OsString,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let name = self.name.as_os_str();
        let same = fstatat(&self.dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| is_socket(&st) && st.st_dev == self.dev && st.st_ino == self.ino);
        if same {
            // Nothing to do about a failure while stopping: the next start
            // replaces a stale socket.
            let _ = unlinkat(&self.dir, name, UnlinkatFlags::NoRemoveDir);
        }
    }
}

fn is_socket(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFSOCK
}

/// Binds and listens on `name`, one descriptor per loop (`count`).
pub fn bind_unix(name: &UnixName, count: usize) -> Result<UnixListening> {
    let shown = format!("unix:{name}");
    let sock = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)
        .context("creating a Unix stream socket")?;
    let file = match name {
        UnixName::Abstract(_) => {
            let addr = name.sock_addr().context("the abstract name")?;
            sock.bind(&addr).map_err(|e| bind_error(&shown, e))?;
            None
        }
        UnixName::Path(path) => Some(bind_path(&sock, path, &shown)?),
    };
    sock.listen(BACKLOG)
        .with_context(|| format!("listen on {shown}"))?;
    sock.set_nonblocking(true)
        .context("making the listener non-blocking")?;
    let first = OwnedFd::from(sock);
    let mut fds = Vec::with_capacity(count);
    for _ in 1..count.max(1) {
        fds.push(
            first
                .try_clone()
                .context("duplicating the listener for another loop")?,
        );
    }
    fds.insert(0, first);
    Ok(UnixListening { fds, file })
}

/// Binds `sock` to the file `path`, replacing only a stale socket there;
/// returns the file, to be removed on drop.
fn bind_path(sock: &Socket, path: &Path, shown: &str) -> Result<SocketFile> {
    let entry = match locate(path)? {
        Located::Entry(e) => e,
        Located::Alias(_) => {
            return Err(error::usage(format!(
                "`{shown}` names a descriptor, not a place for a socket file"
            )));
        }
    };
    if let Some(st) = &entry.stat {
        replace_stale(&entry, st, shown)?;
    }
    // Bound through the directory's descriptor, so a directory on the way
    // swapped after the walk cannot redirect the socket elsewhere.
    let via_fd = format!("/proc/self/fd/{}/", entry.dir.as_raw_fd());
    let mut at = via_fd.into_bytes();
    at.extend_from_slice(entry.name.as_bytes());
    let addr = if at.len() <= MAX_UNIX_NAME {
        SockAddr::unix(std::ffi::OsStr::from_bytes(&at))
    } else {
        // Too long to go through /proc: the path the walk resolved.
        SockAddr::unix(&entry.path)
    }
    .context("the socket's address")?;
    sock.bind(&addr).map_err(|e| bind_error(shown, e))?;
    let st = fstatat(
        &entry.dir,
        entry.name.as_os_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| anyhow!("{shown}: the socket file just bound: {e}"))?;
    Ok(SocketFile {
        dir: entry.dir,
        name: entry.name,
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// Removes what a previous server left at the name, if it may: a socket
/// (nothing else), owned by a trusted user, in a directory no untrusted
/// user owns or can write, that nobody listens on any more.
fn replace_stale(entry: &crate::output::Entry, st: &FileStat, shown: &str) -> Result<()> {
    if !is_socket(st) {
        return Err(error::usage(format!(
            "`{shown}`: {} exists and is not a socket; sockscope replaces only a stale \
             socket: remove it or give another path",
            entry.path.display()
        )));
    }
    if !trusted_owner(st.st_uid) {
        return Err(error::usage(format!(
            "`{shown}`: the socket there is owned by {}; sockscope does not replace another \
             user's socket",
            owner_name(st.st_uid)
        )));
    }
    let dir = fstat(&entry.dir).map_err(|e| anyhow!("{shown}: its directory: {e}"))?;
    let others_write = dir.st_mode & (libc::S_IWOTH | libc::S_IWGRP) != 0;
    if !trusted_owner(dir.st_uid) || others_write {
        return Err(error::usage(format!(
            "`{shown}`: a socket is already there, in a directory {}; sockscope replaces a \
             stale socket only where no other user can plant one: remove it or give another \
             path",
            if others_write {
                "other users can write".to_string()
            } else {
                format!("owned by {}", owner_name(dir.st_uid))
            }
        )));
    }
    if listening(&entry.path) {
        return Err(anyhow!(
            "cannot listen on {shown}: a server is listening on it"
        ));
    }
    unlinkat(
        &entry.dir,
        entry.name.as_os_str(),
        UnlinkatFlags::NoRemoveDir,
    )
    .map_err(|e| {
        anyhow!(
            "{shown}: removing the stale socket: {}",
            errno_text(&e.into())
        )
    })
}

/// True when a connect to the socket file at `path` is accepted.
fn listening(path: &Path) -> bool {
    let Ok(s) = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None) else {
        return false;
    };
    SockAddr::unix(path).is_ok_and(|a| s.connect(&a).is_ok())
}

fn bind_error(shown: &str, e: std::io::Error) -> anyhow::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EADDRINUSE) => " (another socket is bound to that name)",
        Some(libc::EACCES) => " (no permission to create a file in that directory)",
        Some(libc::ENOENT) => " (its directory does not exist)",
        _ => "",
    };
    anyhow!("cannot listen on {shown}: {e}{hint}")
}
