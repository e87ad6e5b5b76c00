//! Connecting to a Unix socket file the way output paths are resolved
//! (`crate::output::locate`): sockscope runs as root, and `connect(2)` on
//! a path follows every symbolic link in it, so a link another user
//! planted (`/tmp/app.sock` -> `/run/victim.sock`) would make root connect
//! wherever that user chose. Instead the path is walked once with
//! O_NOFOLLOW, a link followed only when root, sockscope's user or the
//! sudo user owns it, and the socket file itself opened with O_PATH |
//! O_NOFOLLOW; every connect then names that very inode through
//! `/proc/self/fd/N`, so nothing swapped in on the way afterwards is
//! followed either.
//!
//! The descriptor is kept for the process (one per path) and shared by
//! every worker; a connect refused on it (the server went away and a new
//! one bound the name again) forgets it, and the next connect resolves the
//! path anew. A name that does not exist yet is not an error here: the
//! connect fails like a refused one, as the server may not be up yet.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};
use socket2::SockAddr;

use crate::output::{Located, locate};

/// Socket files resolved so far, by the path the user gave.
static PINNED: Mutex<Vec<(PathBuf, Arc<OwnedFd>)>> = Mutex::new(Vec::new());

/// Where one connect goes: `/proc/self/fd/N`, and the descriptor `N`,
/// held until the connect returned.
pub struct Pinned {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

impl Pinned {
    /// The kernel address naming the pinned inode.
    pub fn sock_addr(&self) -> io::Result<SockAddr> {
        SockAddr::unix(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Forgets this resolution (after a refused connect: the socket file
    /// may have been bound again), so the next connect resolves anew.
    pub fn forget(&self) {
        let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
        pinned.retain(|(p, fd)| !(p == &self.path && Arc::ptr_eq(fd, &self.fd)));
    }
}

/// The socket file at `path`, resolved once and cached. Errors are
/// `io::Error`s a connect could have given: NotFound for a missing name,
/// ENOTSOCK for something that is not a socket, EACCES (with the reason)
/// for a link another user owns.
pub fn pin(path: &Path) -> io::Result<Pinned> {
    let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, fd)) = pinned.iter().find(|(p, _)| p == path) {
        return Ok(Pinned {
            path: path.to_path_buf(),
            fd: Arc::clone(fd),
        });
    }
    let fd = Arc::new(open(path)?);
    pinned.push((path.to_path_buf(), Arc::clone(&fd)));
    Ok(Pinned {
        path: path.to_path_buf(),
        fd,
    })
}

/// Resolves `path` as output paths are and opens its socket file with
/// O_PATH | O_NOFOLLOW.
fn open(path: &Path) -> io::Result<OwnedFd> {
    let entry = match locate(path) {
        Ok(Located::Entry(e)) => e,
        Ok(Located::Alias(_)) => return Err(io::Error::from_raw_os_error(libc::ENOTSOCK)),
        // A refusal (a link another user owns), said in full.
        Err(e) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{e:#}"),
            ));
        }
    };
    let fd = openat(
        &entry.dir,
        entry.name.as_os_str(),
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let st = fstat(&fd).map_err(io::Error::from)?;
    if st.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFSOCK.bits() {
        return Err(io::Error::from_raw_os_error(libc::ENOTSOCK));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Socket, Type};
    use std::os::unix::net::UnixListener;

    fn connect(p: &Pinned) -> io::Result<()> {
        Socket::new(Domain::UNIX, Type::STREAM, None)?.connect(&p.sock_addr()?)
    }

    #[test]
    fn a_socket_file_is_connected_through_its_pinned_descriptor_until_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.sock");
        let first = UnixListener::bind(&p).unwrap();
        let pinned = pin(&p).unwrap();
        connect(&pinned).unwrap();
        first.accept().unwrap();
        // The same path again shares the descriptor.
        assert_eq!(
            pin(&p).unwrap().fd.as_raw_fd(),
            pinned.fd.as_raw_fd(),
            "resolved twice"
        );
        // A restarted server binds a new socket file: the old inode
        // refuses, and once forgotten the path is resolved to the new one.
        drop(first);
        std::fs::remove_file(&p).unwrap();
        let second = UnixListener::bind(&p).unwrap();
        let e = connect(&pinned).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
        pinned.forget();
        connect(&pin(&p).unwrap()).unwrap();
        second.accept().unwrap();
    }

    #[test]
    fn a_missing_name_or_another_kind_of_file_fails_like_a_connect() {
        let d = tempfile::tempdir().unwrap();
        let missing = pin(&d.path().join("none.sock")).err().unwrap();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let f = d.path().join("file");
        std::fs::write(&f, b"").unwrap();
        let e = pin(&f).err().unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTSOCK));
    }

    #[test]
    fn a_link_another_user_owns_is_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP a_link_another_user_owns_is_refused: not root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.sock");
        let _l = UnixListener::bind(&p).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = pin(&link).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("owned by nobody"), "{e}");
    }
}
