//! The watchdog: a small process (`sockscope __watchdog`) that kills the
//! process groups of everything sockscope launched once sockscope is gone,
//! however it went (SIGKILL and crashes included).
//!
//! Every launched process gets PR_SET_PDEATHSIG(SIGKILL), so it dies with
//! sockscope; the processes *it* starts do not inherit that (nginx or
//! haproxy workers, a shell wrapper's background jobs), but they stay in its
//! process group, which is what the watchdog kills.
//!
//! The channel is a `SOCK_SEQPACKET` socket pair. The watchdog's stdin is
//! one end; only sockscope holds the other, close-on-exec, so no launched
//! program keeps it open. Messages are `+PGID` (watch this group) and
//! `-PGID` (forget it): a launched process registers its own group between
//! fork and exec, before it can start anything ([`register_self`]), and
//! sockscope unregisters the group once it has killed it and reaped its
//! leader ([`unregister`]), so a registered id is never one the kernel could
//! have handed to an unrelated group. When sockscope exits the kernel closes
//! its end: the watchdog reads end-of-file, SIGKILLs every group still
//! registered and exits. It ignores SIGINT, SIGTERM and SIGHUP (and runs in
//! its own process group), so Ctrl-C leaves sockscope to stop its targets in
//! order.
//!
//! Why a socket pair and not a pipe: each message arrives whole, so those
//! written by launched children and by sockscope never interleave; and
//! `send(MSG_NOSIGNAL)` fails with EPIPE, where a write to a pipe whose
//! reader died would kill a child that has just reset SIGPIPE.
//!
//! The watchdog is used only once a program calls [`enable`] (the sockscope
//! binary does, first thing); a library user that does not gets
//! PR_SET_PDEATHSIG alone.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__watchdog";
/// Longest wait for a fresh watchdog to say it is listening.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for the watchdog to exit once sockscope closes its end.
const EXIT_TIMEOUT: Duration = Duration::from_secs(2);
/// What a watchdog sends once it reads its channel.
const HELLO: &[u8] = b"ok";
/// Longest message: a sign and an i32.
const MSG_MAX: usize = 16;

/// The program run as `PROGRAM __watchdog`, once enabled.
static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
/// The running watchdog, started by the first launch.
static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

struct Running {
    /// sockscope's end of the channel (close-on-exec).
    channel: OwnedFd,
    process: Child,
}

/// Guards every process launched from now on with a watchdog run as
/// `program __watchdog` (started with the first launch). The sockscope
/// binary passes /proc/self/exe, which stays valid when the file on disk
/// is replaced.
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// The descriptor a launched child registers its group on, starting the
/// watchdog first if need be; `None` when the watchdog is not enabled. The
/// descriptor stays open until [`shutdown`].
pub fn channel() -> Result<Option<RawFd>> {
    let Some(program) = PROGRAM.get() else {
        return Ok(None);
    };
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    if running.is_none() {
        *running = Some(start(program)?);
    }
    Ok(running.as_ref().map(|r| r.channel.as_raw_fd()))
}

fn socket_pair() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("socketpair for the watchdog");
    }
    // SAFETY: both descriptors were just created and are ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn start(program: &PathBuf) -> Result<Running> {
    let (ours, theirs) = socket_pair()?;
    // No PR_SET_PDEATHSIG here: the watchdog must outlive sockscope long
    // enough to read end-of-file and kill what is left.
    let mut process = Command::new(program)
        .arg0("sockscope")
        .arg(SUBCOMMAND)
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting the watchdog ({} {SUBCOMMAND})", program.display()))?;
    if let Err(e) = wait_hello(&ours) {
        let _ = process.kill();
        let _ = process.wait();
        return Err(e);
    }
    Ok(Running {
        channel: ours,
        process,
    })
}

/// Waits (bounded) for the watchdog's hello, so a program that does not
/// understand `__watchdog` is an error now, not an unguarded run.
fn wait_hello(ours: &OwnedFd) -> Result<()> {
    if !super::pidfd::wait_readable(ours.as_fd(), HELLO_TIMEOUT) {
        bail!(
            "the watchdog did not answer within {} s",
            HELLO_TIMEOUT.as_secs()
        );
    }
    let mut buf = [0u8; MSG_MAX];
    // SAFETY: reading into a valid buffer from our own socket.
    let n = unsafe { libc::recv(ours.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 || &buf[..n as usize] != HELLO {
        bail!("the watchdog exited or answered something else at start");
    }
    Ok(())
}

/// Writes `+N` or `-N` into `out` without allocating (usable between fork
/// and exec); returns its length.
fn encode(sign: u8, n: i32, out: &mut [u8; MSG_MAX]) -> usize {
    out[0] = sign;
    let mut digits = [0u8; 11];
    let mut len = 0;
    let mut v = n.unsigned_abs();
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..len {
        out[1 + i] = digits[len - 1 - i];
    }
    1 + len
}

/// Sends one message; false when it could not be sent whole.
fn send(fd: RawFd, sign: u8, n: i32) -> bool {
    let mut buf = [0u8; MSG_MAX];
    let len = encode(sign, n, &mut buf);
    loop {
        // SAFETY: sending from a valid buffer; MSG_NOSIGNAL turns a gone
        // watchdog into EPIPE instead of SIGPIPE.
        let sent = unsafe { libc::send(fd, buf.as_ptr().cast(), len, libc::MSG_NOSIGNAL) };
        if sent == len as isize {
            return true;
        }
        // SAFETY: reading the calling thread's errno.
        if sent < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// Registers the calling process's own group (it must lead it) on
/// `channel`. Only async-signal-safe calls: meant for a child between fork
/// and exec, before it can start anything of its own.
pub fn register_self(channel: RawFd) -> std::io::Result<()> {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    if send(channel, b'+', me) {
        Ok(())
    } else {
        Err(std::io::Error::other(
            "the watchdog is gone: refusing to start a process it would not guard",
        ))
    }
}

/// Forgets group `pgid`: call once it has been killed and its leader
/// reaped. A watchdog that is gone has nothing to forget.
pub fn unregister(pgid: i32) {
    let running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = running.as_ref() {
        send(r.channel.as_raw_fd(), b'-', pgid);
    }
}

/// Closes sockscope's end and reaps the watchdog (bounded: it is killed if
/// it does not exit in time). Call when nothing launched is left running,
/// at the very end: a group still registered is killed by the watchdog.
pub fn shutdown() {
    let taken = RUNNING.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(Running {
        channel,
        mut process,
    }) = taken
    else {
        return;
    };
    drop(channel);
    let exited = super::pidfd::pidfd_open(process.id() as i32)
        .map(|fd| super::pidfd::wait_pidfd(fd.as_fd(), EXIT_TIMEOUT))
        .unwrap_or(false);
    if !exited {
        let _ = process.kill();
    }
    let _ = process.wait();
}

/// One message read by the watchdog.
#[derive(Debug, PartialEq, Eq)]
enum Msg {
    Watch(i32),
    Forget(i32),
}

/// Parses `+N` / `-N`; anything else, and any group id that would make
/// kill(2) reach more than one group (0, 1, negative), is ignored.
fn parse(msg: &[u8]) -> Option<Msg> {
    let (sign, num) = msg.split_first()?;
    let n: i32 = std::str::from_utf8(num).ok()?.trim().parse().ok()?;
    if n <= 1 {
        return None;
    }
    match sign {
        b'+' => Some(Msg::Watch(n)),
        b'-' => Some(Msg::Forget(n)),
        _ => None,
    }
}

/// `sockscope __watchdog`: reads its channel on stdin until end-of-file,
/// then SIGKILLs every group still registered. The set is bounded by the
/// number of live process groups (sockscope registers only groups it leads
/// and forgets each once reaped).
pub fn run() -> Result<u8> {
    // Started as /proc/self/exe, whose name ("exe") would say nothing in ps.
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"sockscope".as_ptr(), 0, 0, 0) };
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: installing SIG_IGN has no preconditions.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // SAFETY: plain syscall on our stdin.
    let hello = unsafe { libc::send(0, HELLO.as_ptr().cast(), HELLO.len(), libc::MSG_NOSIGNAL) };
    if hello != HELLO.len() as isize {
        bail!("stdin is not the watchdog channel");
    }
    // SAFETY: getpgrp has no preconditions.
    let own = unsafe { libc::getpgrp() };
    let mut groups = BTreeSet::new();
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reading into a valid buffer from stdin.
        let n = unsafe { libc::recv(0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n == 0 {
            break;
        }
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        match parse(&buf[..n as usize]) {
            Some(Msg::Watch(g)) if g != own => {
                groups.insert(g);
            }
            Some(Msg::Forget(g)) => {
                groups.remove(&g);
            }
            _ => {}
        }
    }
    for g in groups {
        // SAFETY: plain kill(2) of a group sockscope registered.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_encode_and_parse() {
        let mut buf = [0u8; MSG_MAX];
        for n in [2, 10, 4_194_304, i32::MAX] {
            let len = encode(b'+', n, &mut buf);
            assert_eq!(&buf[..len], format!("+{n}").as_bytes());
            assert_eq!(parse(&buf[..len]), Some(Msg::Watch(n)));
            let len = encode(b'-', n, &mut buf);
            assert_eq!(parse(&buf[..len]), Some(Msg::Forget(n)));
        }
    }

    #[test]
    fn groups_that_would_reach_too_far_are_ignored() {
        for bad in ["+0", "+1", "+-5", "-1", "+", "x12", "+12x", ""] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad}");
        }
    }
}
