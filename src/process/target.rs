//! The processes sockscope starts: a profile's target (a sockscope
//! subcommand or any program) and the servers and tools the experiments
//! run; or an existing process given by pid.
//!
//! A launched process runs in its own process group, stdin from /dev/null,
//! its stdout and stderr in one pipe that a reader thread drains into a
//! bounded tail in memory (the end of its output, for messages). A server
//! launched with [`Launched::spawn_reporting`] writes its own JSON report to
//! a memory file sockscope created and hands it as descriptor 3
//! (`--json /dev/fd/3`), read back, bounded, once it has stopped. Nothing a
//! launched process could replace (it may run as another user) is ever
//! opened by path.
//!
//! It dies with sockscope: PR_SET_PDEATHSIG(SIGKILL) for itself, the
//! [`watchdog`](super::watchdog) for the rest of its process group. It is
//! stopped on every path (SIGTERM to the group, a bounded wait, SIGKILL,
//! reap), including when the guard is dropped during an error or a panic.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::cage::Cage;

// Re-exported: what a caller holding a `Launched::exit_fd` waits with.
pub use super::pidfd::{pidfd_open, wait_pidfd};
use super::watchdog;
use crate::process::run_as::RunAs;
use crate::report::profile::StopRecord;
use crate::signals::signal_name;

/// How long a launched target gets to stop after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// How much of a launched process's output is kept: its last 64 KiB.
pub const OUTPUT_KEPT: usize = 64 * 1024;
/// The largest report a launched server may hand back (16 MiB).
pub const REPORT_LIMIT: u64 = 16 << 20;
/// The descriptor a server launched with a report writes it to.
pub const REPORT_FD: RawFd = 3;
/// Longest wait, once a process has exited, for the rest of its output
/// (a child of its own that escaped its group may hold the pipe open).
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// Describes an exit status for people: `exit status 1`, `killed by SIGSEGV`.
pub fn describe_status(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by {}", signal_name(s as u32)),
        _ => st.to_string(),
    }
}

/// The end of a process's output, filled by its reader thread.
#[derive(Default)]
struct Tail {
    state: Mutex<TailState>,
    ended: Condvar,
}

#[derive(Default)]
struct TailState {
    bytes: Vec<u8>,
    /// Earlier output was dropped to keep the bound.
    cut: bool,
    /// Every writer has closed the pipe.
    eof: bool,
    /// Bytes written in all.
    total: u64,
}

impl Tail {
    fn lock(&self) -> std::sync::MutexGuard<'_, TailState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, data: &[u8]) {
        let mut s = self.lock();
        s.total += data.len() as u64;
        s.bytes.extend_from_slice(data);
        // Trimmed in batches (at twice the bound), so a chatty process
        // costs one copy per 64 KiB, not one per read.
        if s.bytes.len() > 2 * OUTPUT_KEPT {
            let extra = s.bytes.len() - OUTPUT_KEPT;
            s.bytes.drain(..extra);
            s.cut = true;
        }
    }

    fn total(&self) -> u64 {
        self.lock().total
    }

    fn finish(&self) {
        self.lock().eof = true;
        self.ended.notify_all();
    }

    /// The last `max` bytes (at most the bound), after waiting up to
    /// `drain` for end-of-file; true when output before them is missing.
    fn last(&self, max: usize, drain: Duration) -> (Vec<u8>, bool) {
        let s = self.lock();
        let (s, _) = self
            .ended
            .wait_timeout_while(s, drain, |s| !s.eof)
            .unwrap_or_else(|p| p.into_inner());
        let start = s.bytes.len().saturating_sub(max.min(OUTPUT_KEPT));
        (s.bytes[start..].to_vec(), s.cut || start > 0)
    }
}

/// Drains `pipe` into `tail` until every writer has closed it. The thread
/// outlives its `Launched` only while something still holds the write end
/// (a process that left the group), keeping at most the bound meanwhile.
fn start_reader(pipe: OwnedFd, tail: Arc<Tail>) -> Result<()> {
    std::thread::Builder::new()
        .name("sockscope-output".into())
        .spawn(move || {
            crate::signals::keep_off_this_thread();
            let mut f = File::from(pipe);
            let mut buf = [0u8; 8192];
            loop {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => tail.push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            tail.finish();
        })
        .context("starting the output reader thread")?;
    Ok(())
}

/// An output tail for people: control characters and bytes that are not
/// UTF-8 written out (see [`crate::text`]), from a line start when earlier
/// output is missing, trailing blanks trimmed.
fn tail_text(bytes: &[u8], cut: bool) -> String {
    let text = crate::text::escape_block_bytes(bytes);
    let text = if cut {
        text.split_once('\n')
            .map_or(text.clone(), |(_, rest)| rest.to_string())
    } else {
        text
    };
    text.trim_end().to_string()
}

/// Moves a descriptor above the standard ones (sockscope may have been
/// started with one of them closed), close-on-exec.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error()).context("duplicating a descriptor");
    }
    // SAFETY: fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// A close-on-exec pipe (read end, write end), both above stdio.
fn pipe(flags: libc::c_int) -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | flags) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: both descriptors were just created and are ours alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// A fresh memory file (named in no directory), close-on-exec.
fn memfd() -> Result<OwnedFd> {
    // SAFETY: a valid C string; a returned descriptor is ours.
    let raw = unsafe { libc::memfd_create(c"sockscope-report".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create for a report");
    }
    // SAFETY: fresh descriptor returned by the kernel.
    above_stdio(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The pid a child wrote before it tried to exec, if it got that far.
fn read_pid(pid_r: &OwnedFd) -> Option<i32> {
    let mut b = [0u8; 4];
    // SAFETY: reading into a valid buffer from our own (non-blocking) pipe.
    let n = unsafe { libc::read(pid_r.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
    (n == 4).then(|| i32::from_ne_bytes(b))
}

/// What the child does between fork and exec, prepared (allocated) before
/// the fork.
struct ChildSetup {
    /// sockscope's pid, to notice that it died before PDEATHSIG was set.
    parent: libc::pid_t,
    run_as: Option<RunAs>,
    /// The watchdog's channel, when enabled.
    watchdog: Option<RawFd>,
    /// Where the child writes its pid (so a failed exec is unregistered).
    pid_w: RawFd,
    /// The report memory file, to become descriptor 3.
    report: Option<RawFd>,
    /// A network namespace to enter before exec (an emulated path's
    /// target side).
    netns: Option<RawFd>,
    /// Its cage's `cgroup.procs`, to move itself in before anything else.
    cage: Option<RawFd>,
}

impl ChildSetup {
    /// # Safety
    /// Only between fork and exec: async-signal-safe calls, no allocation.
    /// The standard library has already made the child lead its own
    /// process group and set up its stdio.
    unsafe fn apply(&self) -> std::io::Result<()> {
        let err = std::io::Error::last_os_error;
        // SAFETY (whole block): plain syscalls on memory prepared before
        // the fork and on descriptors this process holds.
        unsafe {
            // sockscope blocks its stop signals to read them from a
            // signalfd, and a blocked mask survives execve: a target that
            // inherited it would never see our SIGTERM.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(err());
            }
            // Into its cage first, so nothing it starts is outside it.
            if let Some(fd) = self.cage
                && libc::write(fd, b"0".as_ptr().cast(), 1) != 1
            {
                return Err(err());
            }
            // Before the switch of user: setns needs CAP_SYS_ADMIN.
            if let Some(ns) = self.netns
                && libc::setns(ns, libc::CLONE_NEWNET) != 0
            {
                return Err(err());
            }
            let me = libc::getpid().to_ne_bytes();
            libc::write(self.pid_w, me.as_ptr().cast(), me.len());
            // Before exec, so nothing it starts can escape the watchdog.
            if let Some(fd) = self.watchdog {
                watchdog::register_self(fd)?;
            }
            // Last use of other inherited descriptors is above: dup2 may
            // close whichever of them sits at 3.
            if let Some(fd) = self.report {
                // dup2 onto itself would keep close-on-exec.
                let ok = if fd == REPORT_FD {
                    libc::fcntl(fd, libc::F_SETFD, 0) == 0
                } else {
                    libc::dup2(fd, REPORT_FD) == REPORT_FD
                };
                if !ok {
                    return Err(err());
                }
            }
            if let Some(ra) = &self.run_as
                && (libc::setgroups(ra.groups.len(), ra.groups.as_ptr()) != 0
                    || libc::setgid(ra.gid) != 0
                    || libc::setuid(ra.uid) != 0)
            {
                return Err(err());
            }
            // After the switch of user: a change of credentials clears it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(err());
            }
            // sockscope died before the line above: nothing would stop us.
            if libc::getppid() != self.parent {
                libc::_exit(1);
            }
        }
        Ok(())
    }
}

/// Makes a helper command sockscope runs to completion (a version probe)
/// die with it: PR_SET_PDEATHSIG(SIGKILL) in the child, which fires when
/// the calling thread exits, so run it on a thread that waits for it.
pub fn dies_with_us(cmd: &mut Command) -> &mut Command {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    }
}

/// A process sockscope started; stopped (and reaped) at the latest when
/// dropped.
pub struct Launched {
    child: Option<Child>,
    /// Its pid (also its process group id).
    pub pid: i32,
    pidfd: OwnedFd,
    output: Arc<Tail>,
    report: Option<OwnedFd>,
    /// The argv it was started with.
    pub argv: Vec<String>,
    stop: Option<StopRecord>,
    /// Its cgroup: what a stop reaches beyond its process group.
    cage: Option<Cage>,
}

impl Launched {
    /// Starts `argv` in its own process group, stdin from /dev/null, stdout
    /// and stderr captured (see [`Launched::log_tail`]), as `run_as` when
    /// given. A program that cannot be started is an error naming it.
    ///
    /// The process gets PR_SET_PDEATHSIG(SIGKILL), which the kernel sends
    /// when the *thread* that forked it exits: call this on a thread that
    /// lives at least as long as the process should (the main thread, or
    /// the one that stops it). Its group is registered with the watchdog
    /// when one is enabled.
    pub fn spawn(argv: &[OsString], run_as: Option<&RunAs>) -> Result<Self> {
        Self::launch(argv.to_vec(), run_as, None, None)
    }

    /// As [`Launched::spawn`] (or [`Launched::spawn_reporting`] when
    /// `reporting`), inside the network namespace `netns` (setns before
    /// exec): an emulated path's target side.
    pub fn spawn_in_netns(
        argv: &[OsString],
        run_as: Option<&RunAs>,
        reporting: bool,
        netns: RawFd,
    ) -> Result<Self> {
        let mut argv = argv.to_vec();
        let report = if reporting {
            argv.push("--json".into());
            argv.push(format!("/dev/fd/{REPORT_FD}").into());
            Some(memfd()?)
        } else {
            None
        };
        Self::launch(argv, run_as, report, Some(netns))
    }

    /// As [`Launched::spawn`], for a sockscope server that writes its own
    /// report: `--json /dev/fd/3` is appended to `argv`, and descriptor 3 is
    /// a memory file that only this process and sockscope hold. Read it
    /// with [`Launched::report`] once the process has stopped.
    pub fn spawn_reporting(argv: &[OsString], run_as: Option<&RunAs>) -> Result<Self> {
        let mut argv = argv.to_vec();
        argv.push("--json".into());
        argv.push(format!("/dev/fd/{REPORT_FD}").into());
        Self::launch(argv, run_as, Some(memfd()?), None)
    }

    fn launch(
        argv: Vec<OsString>,
        run_as: Option<&RunAs>,
        report: Option<OwnedFd>,
        netns: Option<RawFd>,
    ) -> Result<Self> {
        let (prog, args) = argv.split_first().context("empty command")?;
        let (out_r, out_w) = pipe(0)?;
        let err_w = out_w.try_clone().context("duplicating the output pipe")?;
        let (pid_r, pid_w) = pipe(libc::O_NONBLOCK)?;
        // Without a cage (no cgroup2, not root) the process group is the
        // only reach, as a plain `kill -- -PGID` would have.
        let cage = Cage::create().ok();
        let setup = ChildSetup {
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            run_as: run_as.cloned(),
            watchdog: watchdog::channel()?,
            pid_w: pid_w.as_raw_fd(),
            report: report.as_ref().map(AsRawFd::as_raw_fd),
            netns,
            cage: cage.as_ref().map(Cage::procs_fd),
        };
        let watched = setup.watchdog.is_some();
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w))
            // Its own group: Ctrl-C on the terminal reaches sockscope only,
            // which then stops the target in order; and a stop (or the
            // watchdog) reaches the target's own children too.
            .process_group(0);
        // SAFETY: `apply` makes only async-signal-safe calls.
        unsafe { cmd.pre_exec(move || setup.apply()) };
        let spawned = cmd.spawn();
        // Our copies of the write ends go, so the reader sees end-of-file
        // once the process and its children have closed theirs.
        drop(cmd);
        drop(pid_w);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                // A child that registered and then failed to exec has been
                // reaped by the standard library: its group is gone.
                if let (true, Some(pid)) = (watched, read_pid(&pid_r)) {
                    watchdog::unregister(pid);
                }
                return Err(e).with_context(|| format!("starting {}", prog.to_string_lossy()));
            }
        };
        let pid = child.id() as i32;
        let output = Arc::new(Tail::default());
        let started = pidfd_open(pid)
            .context("pidfd_open on a launched process")
            .and_then(|fd| start_reader(out_r, Arc::clone(&output)).map(|_| fd));
        let pidfd = match started {
            Ok(fd) => fd,
            Err(e) => {
                // SAFETY: killing the group we just created.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                if child.wait().is_ok() && watched {
                    watchdog::unregister(pid);
                }
                return Err(e);
            }
        };
        Ok(Self {
            child: Some(child),
            pid,
            pidfd,
            output,
            report,
            argv: argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            stop: None,
            cage,
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
    /// exit, then SIGKILL; reaps it, SIGKILLs what is left of the group and
    /// unregisters the group from the watchdog. Idempotent: a second call
    /// returns the first record.
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
                // And what left the group (setsid), which may still be
                // ours to stop in order.
                if let Some(c) = &self.cage {
                    c.signal_outside_group(libc::SIGTERM, Some(self.pid));
                }
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
        // Whatever is left of the group (children the target started),
        // and of its cgroup (those that left the group).
        // SAFETY: as above; ESRCH when the group is gone is fine.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        if let Some(c) = &self.cage {
            c.kill(grace);
        }
        // An unreaped leader keeps its id from being reused, so the group
        // stays registered (and is killed again if sockscope dies).
        if status.is_some() {
            watchdog::unregister(self.pid);
        }
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

    /// The end of its output (at most `max_bytes`, and at most the last
    /// 64 KiB it wrote), for messages. Once it has exited, waits up to a
    /// second for the rest of its output to be read.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        let exited = wait_pidfd(self.pidfd.as_fd(), Duration::ZERO);
        let drain = if exited { OUTPUT_DRAIN } else { Duration::ZERO };
        let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        let (bytes, cut) = self.output.last(max, drain);
        tail_text(&bytes, cut)
    }

    /// [`Launched::log_tail`] of at most the whole bound, with the bytes
    /// it wrote in all and whether the tail is cut (earlier output
    /// dropped): a run's record of a command's output.
    pub fn output(&self) -> (String, u64, bool) {
        let exited = wait_pidfd(self.pidfd.as_fd(), Duration::ZERO);
        let drain = if exited { OUTPUT_DRAIN } else { Duration::ZERO };
        let (bytes, cut) = self.output.last(OUTPUT_KEPT, drain);
        (tail_text(&bytes, cut), self.output.total(), cut)
    }

    /// The report a server started with [`Launched::spawn_reporting`]
    /// wrote, read through the descriptor sockscope kept (never by path),
    /// at most [`REPORT_LIMIT`] bytes. Only once it has been stopped; an
    /// empty or oversized report is an error.
    pub fn report(&self) -> Result<Vec<u8>> {
        if self.stop.is_none() {
            bail!("its report is read only once it has stopped");
        }
        let fd = self
            .report
            .as_ref()
            .context("it was started without a report descriptor")?;
        let f = File::from(
            fd.try_clone()
                .context("duplicating the report descriptor")?,
        );
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match f.read_at(&mut buf, bytes.len() as u64) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("reading its report"),
            };
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n]);
            if bytes.len() as u64 > REPORT_LIMIT {
                bail!("its report is larger than {} MiB", REPORT_LIMIT >> 20);
            }
        }
        if bytes.is_empty() {
            bail!("it wrote no report");
        }
        Ok(bytes)
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.stop(STOP_GRACE);
    }
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

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn stops_with_sigterm_and_captures_output() {
        let argv = argv(&["sh", "-c", "echo hello; echo oops >&2; exec sleep 30"]);
        let mut t = Launched::spawn(&argv, None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(t.try_exited().is_none());
        let r = t.stop(Duration::from_secs(5));
        assert_eq!(r.signal, "SIGTERM");
        assert_eq!(r.killed_by.as_deref(), Some("SIGTERM"));
        let tail = t.log_tail(1000);
        assert!(tail.contains("hello") && tail.contains("oops"), "{tail}");
    }

    #[test]
    fn a_blocked_signal_mask_is_not_inherited() {
        use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
        // Block SIGTERM on this thread, as profile does, then launch.
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old)).unwrap();
        let mut t = Launched::spawn(&argv(&["sleep", "30"]), None).unwrap();
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let r = t.stop(Duration::from_secs(5));
        assert_eq!(r.signal, "SIGTERM", "{r:?}");
    }

    /// Whether `pid` is a live process (a zombie is not).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            let state = s.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        })
    }

    /// Whether a launched process gets a cage here. Without one the cage
    /// tests skip with the reason printed, and fail under CI=true, where
    /// the machine has a cgroup v2 mount.
    fn cages_here() -> bool {
        match Cage::create() {
            Ok(_) => true,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "no cgroup for a launched process under CI: {e:#}"
                );
                eprintln!("skipped: a launched process gets no cgroup here ({e:#})");
                false
            }
        }
    }

    #[test]
    fn the_cage_signal_spares_the_group_already_signalled() {
        if !cages_here() {
            return;
        }
        // The leader stays in its group; a job that called setsid left it.
        // stop() sends SIGTERM to the group, then to the cage's others: a
        // second SIGTERM to a server stopping on the first kills it once
        // its handling unblocks signals ("killed by SIGTERM" after it said
        // "stopped by SIGTERM").
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("escaped.pid");
        let script = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 30' & exec sleep 30",
            pidfile.display()
        );
        let mut t = Launched::spawn(&argv(&["sh", "-c", &script]), None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let escaped: i32 = loop {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the setsid job never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        let cage = t.cage.as_ref().expect("a launched process in a cage");
        cage.signal_outside_group(libc::SIGTERM, Some(t.pid));
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(escaped) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !alive(escaped),
            "the job outside the group was not signalled"
        );
        assert!(alive(t.pid), "the group's leader was signalled by the cage");
        let r = t.stop(Duration::from_secs(5));
        assert_eq!(r.signal, "SIGTERM", "{r:?}");
    }

    #[test]
    fn a_child_that_left_the_process_group_is_stopped_too() {
        if !cages_here() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("escaped.pid");
        // A background job that calls setsid: out of the group, still
        // running after the command itself exits 0.
        let script = format!(
            "setsid sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; exec sleep 60' & exit 0",
            pidfile.display()
        );
        let mut t = Launched::spawn(&argv(&["sh", "-c", &script]), None).unwrap();
        let t0 = Instant::now();
        while !pidfile.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the job never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let escaped: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: getpgid has no memory preconditions.
        assert_ne!(
            unsafe { libc::getpgid(escaped) },
            t.pid,
            "setsid left the group"
        );
        assert!(alive(escaped));
        t.stop(Duration::from_secs(5));
        let t0 = Instant::now();
        while alive(escaped) {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "pid {escaped} (setsid) outlived the stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn kills_what_ignores_sigterm() {
        let argv = argv(&["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]);
        let mut t = Launched::spawn(&argv, None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let r = t.stop(Duration::from_millis(300));
        assert_eq!(r.signal, "SIGKILL");
        assert_eq!(r.killed_by.as_deref(), Some("SIGKILL"));
    }

    #[test]
    fn the_output_kept_is_its_bounded_end() {
        // 200,000 numbered lines (about 1.3 MB): only the last 64 KiB stay.
        let argv = argv(&["sh", "-c", "seq 1 200000; echo last line"]);
        let t = Launched::spawn(&argv, None).unwrap();
        assert!(wait_pidfd(t.exit_fd(), Duration::from_secs(30)));
        let tail = t.log_tail(u64::MAX);
        assert!(tail.len() <= OUTPUT_KEPT, "{}", tail.len());
        assert!(
            tail.ends_with("200000\nlast line"),
            "{}",
            &tail[tail.len() - 40..]
        );
        // A cut tail starts at a whole line.
        let first: u32 = tail.lines().next().unwrap().parse().unwrap();
        assert!(first > 190_000, "{first}");
        assert_eq!(t.log_tail(15), "last line");
    }

    #[test]
    fn tail_starts_at_a_line() {
        assert_eq!(
            tail_text(b"ne\nsecond line\nthird\n", true),
            "second line\nthird"
        );
        assert_eq!(
            tail_text(b"first line\nsecond line\nthird\n", false),
            "first line\nsecond line\nthird"
        );
    }

    #[test]
    fn a_report_comes_back_through_its_descriptor() {
        // `sh -c SCRIPT --json /dev/fd/3`: $0 is --json, $1 the descriptor.
        let argv = argv(&["sh", "-c", "printf '{\"n\": 1}' > \"$1\"; exec sleep 30"]);
        let mut t = Launched::spawn_reporting(&argv, None).unwrap();
        assert!(
            t.argv
                .ends_with(&["--json".to_string(), "/dev/fd/3".to_string()])
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(t.report().is_err(), "read before the stop");
        t.stop(Duration::from_secs(5));
        assert_eq!(t.report().unwrap(), b"{\"n\": 1}");
    }

    #[test]
    fn an_oversized_or_missing_report_is_an_error() {
        let big = format!("head -c {} /dev/zero > \"$1\"", REPORT_LIMIT + 1);
        let mut t = Launched::spawn_reporting(&argv(&["sh", "-c", &big]), None).unwrap();
        assert!(wait_pidfd(t.exit_fd(), Duration::from_secs(30)));
        t.stop(Duration::from_secs(5));
        let e = format!("{:#}", t.report().unwrap_err());
        assert!(e.contains("larger than 16 MiB"), "{e}");
        let mut t = Launched::spawn_reporting(&argv(&["sh", "-c", "exit 0"]), None).unwrap();
        t.stop(Duration::from_secs(5));
        let e = format!("{:#}", t.report().unwrap_err());
        assert!(e.contains("no report"), "{e}");
    }

    #[test]
    fn a_program_that_cannot_start_is_named() {
        let Err(e) = Launched::spawn(&argv(&["/nonexistent/sockscope-x"]), None) else {
            panic!("a missing program started");
        };
        assert!(
            format!("{e:#}").contains("starting /nonexistent/sockscope-x"),
            "{e:#}"
        );
    }
}
