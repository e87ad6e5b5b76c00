//! Reading the files users name as inputs (`--body @FILE`, `--request
//! @FILE`, `--urls FILE`, `--cacert FILE`, the artifacts `report`,
//! `compare`, `merge` and `tune --from` read), bounded while reading.
//!
//! Why bounded while reading and not checked after: `@/dev/zero` (or any
//! endless or huge file) would otherwise grow in memory until the machine
//! runs out, long before a size check afterwards could refuse it. And why
//! opened without blocking: a FIFO nobody writes to would hold `open` for
//! ever; opened non-blocking it reads as empty, while a pipe with a writer
//! (`--body @<(cmd)`) is read to its end as usual.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::Result;

use crate::error;
use crate::output::errno_text;

/// Reads at most `limit` bytes of `path`; a longer file is a usage error
/// naming `what` (the option as the user wrote it) and the limit, read no
/// further than one byte past it.
pub fn read_bounded(path: &Path, limit: usize, what: &str) -> Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| error::usage(format!("{what}: cannot read it: {}", errno_text(&e))))?;
    // Blocking again, so a pipe's writer is waited for like any reader
    // would; only the open must not wait for one.
    clear_nonblock(&file);
    let mut out = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| error::usage(format!("{what}: cannot read it: {}", errno_text(&e))))?;
    if out.len() > limit {
        return Err(error::usage(format!(
            "{what}: larger than {limit} bytes, the most it takes"
        )));
    }
    Ok(out)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: usize, what: &str) -> Result<String> {
    String::from_utf8(read_bounded(path, limit, what)?)
        .map_err(|_| error::usage(format!("{what}: not UTF-8 text")))
}

/// Reads a secret (a password) from a regular file the user named, at
/// most `limit` bytes. The path is resolved as output paths are
/// ([`crate::output::locate`]): a symbolic link is followed only when
/// root, sockscope's user or the sudo user owns it, so a link another user
/// planted (in /tmp, to a root-only file) cannot make sockscope, running
/// as root, send that file's bytes to a server. The last name is opened
/// with O_NOFOLLOW relative to its directory's descriptor, and must be a
/// regular file. Errors name `what` and never quote the file's bytes.
pub fn read_secret(path: &Path, limit: usize, what: &str) -> Result<Vec<u8>> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    let entry = match crate::output::locate(path)? {
        crate::output::Located::Entry(e) => e,
        crate::output::Located::Alias(_) => {
            return Err(error::usage(format!(
                "{what}: give a file, not a descriptor or stdout"
            )));
        }
    };
    let fd = openat(
        &entry.dir,
        entry.name.as_os_str(),
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| error::usage(format!("{what}: cannot read it: {}", errno_text(&e.into()))))?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| error::usage(format!("{what}: cannot read it: {}", errno_text(&e))))?;
    if !meta.file_type().is_file() {
        return Err(error::usage(format!("{what}: not a regular file")));
    }
    let mut out = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| error::usage(format!("{what}: cannot read it: {}", errno_text(&e))))?;
    if out.len() > limit {
        return Err(error::usage(format!(
            "{what}: larger than {limit} bytes, the most it takes"
        )));
    }
    Ok(out)
}

/// The largest artifact `report`, `compare`, `merge` and `tune --from`
/// read. A profile's run.json with stacks is a few MiB; parsing one holds
/// several times its size in memory, so a file past this is refused
/// before it is read rather than parsed into gigabytes.
pub const ARTIFACT_MAX: usize = 256 << 20;

/// Reads an artifact a command was given: a regular file of at most
/// `limit` bytes, or a pipe (`<(zcat run.json.gz)`, `/dev/stdin` from a
/// pipe), read to at most `limit` bytes. A device (`/dev/zero`), a
/// directory or a socket is refused before anything is read, and a
/// regular file whose size is over the limit before it is read (a sparse
/// file of gigabytes costs nothing). Refusals are usage errors (exit 2)
/// naming `what`.
pub fn read_artifact(path: &Path, limit: usize, what: &str) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    let unreadable =
        |e: &std::io::Error| error::usage(format!("{what}: cannot read it: {}", errno_text(e)));
    // Checked before the open too: opening a device may act (a tape
    // rewinds), and a FIFO without a writer is opened without waiting.
    let kind_ok = |t: std::fs::FileType| t.is_file() || t.is_fifo();
    let before = std::fs::metadata(path).map_err(|e| unreadable(&e))?;
    if !kind_ok(before.file_type()) {
        return Err(not_regular(before.file_type(), what));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| unreadable(&e))?;
    // The file opened, not the one stat'ed: the name may have changed.
    let meta = file.metadata().map_err(|e| unreadable(&e))?;
    if !kind_ok(meta.file_type()) {
        return Err(not_regular(meta.file_type(), what));
    }
    if meta.file_type().is_file() && meta.len() > limit as u64 {
        return Err(too_large(what, limit, Some(meta.len())));
    }
    clear_nonblock(&file);
    let mut out = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| unreadable(&e))?;
    if out.len() > limit {
        return Err(too_large(what, limit, None));
    }
    Ok(out)
}

/// The refusal of an input that is not a file one can read to its end.
fn not_regular(t: std::fs::FileType, what: &str) -> anyhow::Error {
    let is = crate::endpoint::describe_type(&t);
    error::usage(format!(
        "{what}: is {is}, not a regular file; give an artifact file"
    ))
}

fn too_large(what: &str, limit: usize, size: Option<u64>) -> anyhow::Error {
    let size = size.map_or_else(String::new, |n| format!(" ({n} bytes)"));
    error::usage(format!(
        "{what}: larger than {limit} bytes{size}, the most an artifact may be"
    ))
}

fn clear_nonblock(file: &File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns; F_GETFL
    // and F_SETFL touch only its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "--body @/dev/zero").unwrap_err();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
        assert!(
            e.to_string()
                .contains("--body @/dev/zero: larger than 1048576"),
            "{e}"
        );
    }

    #[test]
    fn an_artifact_must_be_a_file_or_a_pipe_within_the_limit() {
        let code = |e: anyhow::Error| e.downcast_ref::<error::Exit>().map(|x| x.code);
        let e = read_artifact(Path::new("/dev/zero"), 1 << 20, "A").unwrap_err();
        assert!(e.to_string().contains("A: is a character device"), "{e}");
        assert_eq!(code(e), Some(2));
        let d = tempfile::tempdir().unwrap();
        let e = read_artifact(d.path(), 10, "D").unwrap_err().to_string();
        assert!(e.contains("D: is a directory"), "{e}");
        let p = d.path().join("big");
        let f = File::create(&p).unwrap();
        f.set_len(11).unwrap();
        let e = read_artifact(&p, 10, "B").unwrap_err().to_string();
        assert!(e.contains("larger than 10 bytes (11 bytes)"), "{e}");
        f.set_len(10).unwrap();
        assert_eq!(read_artifact(&p, 10, "B").unwrap(), vec![0; 10]);
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_artifact(&fifo, 10, "F").unwrap(), b"");
    }

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_bounded(&p, 5, "x").unwrap(), b"hello");
        assert!(read_bounded(&p, 4, "x").is_err());
        assert_eq!(read_text_bounded(&p, 5, "x").unwrap(), "hello");
    }

    #[test]
    fn a_fifo_without_a_writer_reads_as_empty_instead_of_hanging() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_bounded(&p, 10, "x").unwrap(), b"");
    }

    #[test]
    fn a_missing_file_names_the_option() {
        let e = read_bounded(Path::new("/no/such/file"), 10, "--request @/no/such/file")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--request @/no/such/file: cannot read it"),
            "{e}"
        );
        assert!(e.contains("ENOENT"), "{e}");
    }
}
