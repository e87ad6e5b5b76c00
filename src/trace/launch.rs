//! Launching the traced command so it is traced from its first instruction:
//! fork, hold the child on a pipe while the tracer registers it, then let it
//! execve. Also reaps the tree (sockscope is its child subreaper) and sums
//! the kernel's rusage of everything reaped.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::unistd::{ForkResult, fork};

use crate::process::run_as::RunAs;

use crate::error;

/// Finds the program like execvp would, but before forking, so "not found"
/// is reported by sockscope (exit 127) and the child makes exactly one
/// execve, as it would under strace.
pub fn resolve_program(arg0: &OsStr) -> Result<PathBuf> {
    let p = Path::new(arg0);
    if arg0.as_bytes().contains(&b'/') {
        if !p.exists() {
            return Err(error::with_code(
                error::NOT_FOUND,
                format!("{}: no such file", p.display()),
            ));
        }
        return Ok(p.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(p);
        if let Ok(meta) = cand.metadata() {
            use std::os::unix::fs::PermissionsExt;
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(cand);
            }
        }
    }
    Err(error::with_code(
        error::NOT_FOUND,
        format!("{}: command not found", arg0.to_string_lossy()),
    ))
}

/// A forked child waiting for `release`.
pub struct Held {
    /// Its pid.
    pub pid: i32,
    release_w: OwnedFd,
    status_r: OwnedFd,
}

fn pipe_cloexec() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: both fds were just created and are owned by us alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn cstrings(items: impl IntoIterator<Item = OsString>) -> Result<Vec<CString>> {
    items
        .into_iter()
        .map(|s| CString::new(s.into_vec()).context("argument or environment contains NUL"))
        .collect()
}

/// Forks the child that will exec `argv`; it blocks until `Held::release`.
///
/// The child gets PR_SET_PDEATHSIG(SIGKILL) (set again after a switch of
/// user, which clears it), so it dies with sockscope, held or running. The
/// kernel sends it when the *thread* that forked exits: call this on a
/// thread that lives as long as the command should (the CLI's main thread).
/// The command's own children do not inherit it.
pub fn spawn_held(program: &Path, argv: &[OsString], run_as: Option<&RunAs>) -> Result<Held> {
    // Everything the child needs is allocated before fork: after it, the
    // child may only make async-signal-safe calls.
    let path = CString::new(program.as_os_str().as_bytes()).context("program path contains NUL")?;
    let args = cstrings(argv.iter().cloned())?;
    let env = cstrings(std::env::vars_os().map(|(k, v)| {
        let mut kv = k;
        kv.push("=");
        kv.push(v);
        kv
    }))?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let groups: Vec<libc::gid_t> = run_as.map(|r| r.groups.clone()).unwrap_or_default();
    let ids = run_as.map(|r| (r.uid, r.gid));

    let (release_r, release_w) = pipe_cloexec()?;
    let (status_r, status_w) = pipe_cloexec()?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };

    // SAFETY: the child branch below only calls async-signal-safe libc
    // functions on memory prepared above, then execs or _exits.
    match unsafe { fork() }.context("fork")? {
        ForkResult::Child => unsafe {
            let status_fd = status_w.as_raw_fd();
            // The parent's ends: holding release_w ourselves would keep the
            // read below from seeing sockscope go away.
            libc::close(release_w.as_raw_fd());
            libc::close(status_r.as_raw_fd());
            die_with_parent(parent, status_fd);
            // Undo what sockscope changed for itself: blocked signals and
            // Rust's SIG_IGN for SIGPIPE would otherwise be inherited.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut b = 0u8;
            loop {
                let n = libc::read(release_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                // sockscope went away before releasing us: do not run untraced.
                libc::_exit(1);
            }
            if let Some((uid, gid)) = ids {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0 {
                    child_fail(status_fd, 1);
                }
                if libc::setgid(gid) != 0 {
                    child_fail(status_fd, 1);
                }
                if libc::setuid(uid) != 0 {
                    child_fail(status_fd, 1);
                }
                // The switch of user cleared it.
                die_with_parent(parent, status_fd);
            }
            libc::execve(path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
            child_fail(status_fd, 2)
        },
        ForkResult::Parent { child } => {
            drop(release_r);
            drop(status_w);
            Ok(Held {
                pid: child.as_raw(),
                release_w,
                status_r,
            })
        }
    }
}

/// Asks for SIGKILL when the parent (thread) dies, then exits at once if
/// `parent` already has.
///
/// # Safety
/// Only async-signal-safe calls: usable in the child between fork and exec.
unsafe fn die_with_parent(parent: libc::pid_t, status_fd: i32) {
    // SAFETY: plain prctl and getppid.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            child_fail(status_fd, 1);
        }
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

/// Reports (stage, errno) to the parent and exits; stage 1 is the switch
/// of user, 2 is execve.
///
/// # Safety
/// Only async-signal-safe calls: usable in the child between fork and exec.
unsafe fn child_fail(fd: i32, stage: i32) -> ! {
    // SAFETY: errno location is thread-local and valid; fd is our pipe.
    unsafe {
        let report = [stage, *libc::__errno_location()];
        libc::write(fd, report.as_ptr().cast(), 8);
        libc::_exit(127)
    }
}

impl Held {
    /// Lets the child exec. Returns once execve has succeeded, or the
    /// reason it failed (the child is then reaped).
    pub fn release(self, program: &Path) -> Result<()> {
        let one = [1u8];
        // SAFETY: writing one byte from a valid buffer to our own pipe.
        let n = unsafe { libc::write(self.release_w.as_raw_fd(), one.as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error()).context("releasing the child");
        }
        drop(self.release_w);
        let mut report = [0i32; 2];
        let got = loop {
            // SAFETY: reading into a valid 8-byte buffer.
            let n = unsafe { libc::read(self.status_r.as_raw_fd(), report.as_mut_ptr().cast(), 8) };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break n;
        };
        if got == 0 {
            return Ok(()); // the CLOEXEC pipe closed: execve succeeded
        }
        // SAFETY: reaping our own child, which has exited or is about to.
        unsafe {
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
        }
        let err = std::io::Error::from_raw_os_error(report[1]);
        let msg = if report[0] == 1 {
            format!("cannot switch to the requested user before exec: {err}")
        } else {
            format!("cannot execute {}: {err}", program.display())
        };
        let code = if report[1] == libc::ENOENT {
            error::NOT_FOUND
        } else {
            error::NOT_EXECUTABLE
        };
        Err(error::with_code(code, msg))
    }

    /// Kills and reaps a child that will not be released.
    pub fn abort(self) {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
        }
    }
}

/// Kernel rusage summed over every process sockscope reaped. ru_maxrss is
/// left out on purpose: for a forked child it starts at the parent's size.
#[derive(Clone, Copy, Debug, Default)]
pub struct RusageSum {
    /// User CPU, microseconds.
    pub utime_us: u64,
    /// System CPU, microseconds.
    pub stime_us: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Minor faults.
    pub minflt: u64,
    /// Major faults.
    pub majflt: u64,
}

impl RusageSum {
    fn add(&mut self, ru: &libc::rusage) {
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        self.utime_us += us(ru.ru_utime);
        self.stime_us += us(ru.ru_stime);
        self.nvcsw += ru.ru_nvcsw as u64;
        self.nivcsw += ru.ru_nivcsw as u64;
        self.minflt += ru.ru_minflt as u64;
        self.majflt += ru.ru_majflt as u64;
    }
}

/// Reaping state of a launched tree.
#[derive(Debug, Default)]
pub struct Reaper {
    /// wait status of the launched command once reaped.
    pub main_status: Option<i32>,
    /// Orphaned descendants reaped by sockscope as subreaper.
    pub orphans_reaped: u64,
    /// Sum of the rusage of everything reaped.
    pub usage: RusageSum,
}

impl Reaper {
    /// Reaps every exited child without blocking.
    pub fn reap(&mut self, main: i32) {
        loop {
            let mut st = 0;
            // SAFETY: rusage is plain data the kernel fills in.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to locals.
            let p = unsafe { libc::wait4(-1, &mut st, libc::WNOHANG | libc::__WALL, &mut ru) };
            if p <= 0 {
                break;
            }
            if p == main {
                self.main_status = Some(st);
            } else {
                self.orphans_reaped += 1;
            }
            self.usage.add(&ru);
        }
    }
}

/// Makes sockscope the reaper of orphans in the tree it launches, so their
/// rusage is not lost to init.
pub fn become_subreaper() -> Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("prctl(PR_SET_CHILD_SUBREAPER)");
    }
    Ok(())
}
