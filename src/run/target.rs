//! The process a profile measures: launched by sockscope (a sockscope
//! subcommand or any program) or an existing process given by pid. A
//! launched target runs in its own process group with its output in a log
//! file, and is stopped on every path (SIGTERM to the group, a bounded
//! wait, SIGKILL, reap), including when the guard is dropped during an
//! error or a panic.

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::{Deserialize, Serialize};

use crate::signals::signal_name;
use crate::trace::launch::RunAs;

/// How long a launched target gets to stop after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a launched target ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StopRecord {
    /// `SIGTERM` when it stopped on it, `SIGKILL` when it had to be
    /// killed, `none` when it had already exited by itself.
    pub signal: String,
    /// Seconds from the signal to its exit.
    pub after_s: f64,
    /// Its exit code, if it exited.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub killed_by: Option<String>,
}

impl StopRecord {
    /// For people: `SIGTERM after 0.01 s, exit status 0`, `SIGKILL after
    /// 5.00 s, killed by SIGKILL`, `none after 0.00 s, status unknown`.
    pub fn describe(&self) -> String {
        let status = match (self.exit_code, &self.killed_by) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by {sig}"),
            (None, None) => "status unknown".to_string(),
        };
        format!("{} after {:.2} s, {status}", self.signal, self.after_s)
    }

    /// True when it exited with status 0 without needing SIGKILL.
    pub fn clean(&self) -> bool {
        self.signal != "SIGKILL" && self.exit_code == Some(0)
    }
}

/// Describes an exit status for people: `exit status 1`, `killed by SIGSEGV`.
pub fn describe_status(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by {}", signal_name(s as u32)),
        _ => st.to_string(),
    }
}

/// Opens a pidfd for `pid` (readable once the process exits).
pub fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; a returned fd is ours.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh fd returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

/// True when the pidfd is readable within `timeout` (the process exited).
pub fn wait_pidfd(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        let mut pfd = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(
            &mut pfd,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) if n > 0 => return true,
            Ok(_) => return false,
            Err(nix::errno::Errno::EINTR) if !left.is_zero() => continue,
            Err(_) => return false,
        }
    }
}

/// A process sockscope started; stopped (and reaped) at the latest when
/// dropped.
pub struct Launched {
    child: Option<Child>,
    /// Its pid (also its process group id).
    pub pid: i32,
    pidfd: OwnedFd,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
    /// The argv it was started with.
    pub argv: Vec<String>,
    stop: Option<StopRecord>,
}

impl Launched {
    /// Starts `argv` in its own process group, stdin from /dev/null, stdout
    /// and stderr appended to `log`, as `run_as` when given. A program that
    /// cannot be started is an error naming it.
    pub fn spawn(argv: &[OsString], log: &Path, run_as: Option<&RunAs>) -> Result<Self> {
        let (prog, args) = argv.split_first().context("empty command")?;
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log descriptor")?;
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own group: Ctrl-C on the terminal reaches sockscope only,
            // which then stops the target in order; and a stop reaches the
            // target's own children too.
            .process_group(0);
        let ra = run_as.cloned();
        // SAFETY: only async-signal-safe calls between fork and exec (no
        // allocation: `ra` was cloned before the fork).
        unsafe {
            cmd.pre_exec(move || {
                // sockscope blocks its stop signals to read them from a
                // signalfd, and a blocked mask survives execve: a target
                // that inherited it would never see our SIGTERM.
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(ra) = &ra {
                    if libc::setgroups(ra.groups.len(), ra.groups.as_ptr()) != 0
                        || libc::setgid(ra.gid) != 0
                        || libc::setuid(ra.uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", prog.to_string_lossy()))?;
        let pid = child.id() as i32;
        let pidfd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                let mut c = child;
                let _ = c.kill();
                let _ = c.wait();
                return Err(e).context("pidfd_open on the target");
            }
        };
        Ok(Self {
            child: Some(child),
            pid,
            pidfd,
            log: log.to_path_buf(),
            argv: argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            stop: None,
        })
    }

    /// Readable once the target has exited.
    pub fn exit_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Its exit status if it has exited (reaps it).
    pub fn try_exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Stops it: SIGTERM to its process group, up to `grace` for it to
    /// exit, then SIGKILL; reaps it. Idempotent: a second call returns the
    /// first record.
    pub fn stop(&mut self, grace: Duration) -> StopRecord {
        if let Some(r) = &self.stop {
            return r.clone();
        }
        let Some(mut child) = self.child.take() else {
            return StopRecord {
                signal: "none".into(),
                after_s: 0.0,
                exit_code: None,
                killed_by: None,
            };
        };
        let t0 = Instant::now();
        let (signal, status) = match child.try_wait() {
            Ok(Some(st)) => ("none", Some(st)),
            _ => {
                // SAFETY: signalling the process group we created.
                unsafe { libc::kill(-self.pid, libc::SIGTERM) };
                if wait_pidfd(self.pidfd.as_fd(), grace) {
                    ("SIGTERM", child.wait().ok())
                } else {
                    // SAFETY: as above.
                    unsafe { libc::kill(-self.pid, libc::SIGKILL) };
                    // SIGKILL cannot be caught: the wait ends promptly
                    // (bounded anyway, so a D-state process cannot hang us).
                    wait_pidfd(self.pidfd.as_fd(), grace);
                    ("SIGKILL", child.try_wait().ok().flatten())
                }
            }
        };
        // Whatever is left of the group (children the target started).
        // SAFETY: as above; ESRCH when the group is gone is fine.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        let rec = StopRecord {
            signal: signal.into(),
            after_s: t0.elapsed().as_secs_f64(),
            exit_code: status.and_then(|s| s.code()),
            killed_by: status
                .and_then(|s| s.signal())
                .map(|s| signal_name(s as u32)),
        };
        self.stop = Some(rec.clone());
        rec
    }

    /// The last lines of its output (at most `max_bytes`), for messages.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        log_tail(&self.log, max_bytes)
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.stop(STOP_GRACE);
    }
}

/// The end of a log file, at most `max_bytes`, starting at a line boundary.
pub fn log_tail(path: &Path, max_bytes: u64) -> String {
    let Ok(mut f) = fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max_bytes);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(max_bytes).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let text = if start > 0 {
        text.split_once('\n')
            .map_or(text.clone(), |(_, rest)| rest.to_string())
    } else {
        text
    };
    text.trim_end().to_string()
}

/// Indents a multi-line text for an error message (`  | line`).
pub fn quote_block(text: &str) -> String {
    if text.is_empty() {
        return "  (it printed nothing)".into();
    }
    text.lines()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sockscope-target-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn stops_with_sigterm_and_captures_output() {
        let d = tmp("term");
        let log = d.join("log");
        let argv: Vec<OsString> = ["sh", "-c", "echo hello; echo oops >&2; exec sleep 30"]
            .iter()
            .map(OsString::from)
            .collect();
        let mut t = Launched::spawn(&argv, &log, None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(t.try_exited().is_none());
        let r = t.stop(Duration::from_secs(5));
        assert_eq!(r.signal, "SIGTERM");
        assert_eq!(r.killed_by.as_deref(), Some("SIGTERM"));
        let tail = t.log_tail(1000);
        assert!(tail.contains("hello") && tail.contains("oops"), "{tail}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_blocked_signal_mask_is_not_inherited() {
        use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
        let d = tmp("mask");
        // Block SIGTERM on this thread, as profile does, then launch.
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old)).unwrap();
        let argv: Vec<OsString> = ["sleep", "30"].iter().map(OsString::from).collect();
        let mut t = Launched::spawn(&argv, &d.join("log"), None).unwrap();
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let r = t.stop(Duration::from_secs(5));
        assert_eq!(r.signal, "SIGTERM", "{r:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn kills_what_ignores_sigterm() {
        let d = tmp("kill");
        let argv: Vec<OsString> = ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]
            .iter()
            .map(OsString::from)
            .collect();
        let mut t = Launched::spawn(&argv, &d.join("log"), None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let r = t.stop(Duration::from_millis(300));
        assert_eq!(r.signal, "SIGKILL");
        assert_eq!(r.killed_by.as_deref(), Some("SIGKILL"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn tail_starts_at_a_line() {
        let d = tmp("tail");
        let p = d.join("log");
        fs::write(&p, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(log_tail(&p, 15), "third");
        assert_eq!(log_tail(&p, 1000), "first line\nsecond line\nthird");
        fs::remove_dir_all(&d).unwrap();
    }
}
