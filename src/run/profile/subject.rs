//! The target while it is measured: launched by us (in the emulated
//! path's namespace when there is one) or attached to (a pid, a cgroup's
//! oldest process); stopped at the end, with the server's own report read
//! back; and the errors that name it and quote its output.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, Result};

use super::spec::{ProfileSpec, ProfileTarget, check_target_args};
use crate::netpath::EmulatedPath;
use crate::process::pidfd;
use crate::process::target::{self, Launched, STOP_GRACE, quote_block};
use crate::report::profile::StopRecord;
use crate::run::exit::{self, fail};

/// How much of the target's output an error message quotes.
const LOG_TAIL: u64 = 2000;

/// The target while it is being measured: launched by us, or attached to.
pub(super) struct Subject {
    pub(super) launched: Option<Launched>,
    pub(super) pid: i32,
    pub(super) exit_fd: OwnedFd,
    /// It hands its own report back (a launched `serve echo`/`udp-sink`).
    pub(super) reports: bool,
}

impl Subject {
    pub(super) fn exited(&mut self) -> bool {
        match &mut self.launched {
            Some(l) => l.try_exited().is_some(),
            None => pidfd::wait_pidfd(self.exit_fd.as_fd(), Duration::ZERO),
        }
    }

    pub(super) fn log_tail(&self) -> String {
        self.launched
            .as_ref()
            .map(|l| quote_block(&l.log_tail(LOG_TAIL)))
            .unwrap_or_default()
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "the target (pid {}, {})",
            self.pid,
            crate::text::escape(&crate::procfs::comm(self.pid).unwrap_or_else(|| "gone".into()))
        )
    }
}

/// The processes of a cgroup and of every cgroup below it, oldest first
/// (the lowest pid stands for the service in messages and the evidence).
pub fn cgroup_pids(dir: &std::path::Path) -> Vec<i32> {
    fn walk(dir: &std::path::Path, out: &mut Vec<i32>, depth: u32) {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if depth >= 16 {
            return;
        }
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                // file_type() does not follow links: cgroupfs has none, and
                // a delegated subtree cannot plant one that we would walk.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out, depth + 1);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out, 0);
    out.sort_unstable();
    out.dedup();
    out
}

/// Launches the target, or finds the running one it names.
pub(super) fn start(spec: &ProfileSpec, path: Option<&EmulatedPath>) -> Result<Subject> {
    let (argv, reports): (Vec<OsString>, bool) = match &spec.target {
        ProfileTarget::Cgroup(cg) => {
            let what = cg
                .unit
                .clone()
                .unwrap_or_else(|| format!("cgroup {}", cg.rel));
            let pids = cgroup_pids(&cg.path);
            let Some(first) = pids
                .iter()
                .find_map(|p| pidfd::pidfd_open(*p).ok().map(|fd| (*p, fd)))
            else {
                return Err(fail(
                    exit::TARGET_EXITED_EARLY,
                    format!("{what}: no process is running in {}", cg.path.display()),
                ));
            };
            return Ok(Subject {
                launched: None,
                pid: first.0,
                exit_fd: first.1,
                reports: false,
            });
        }
        ProfileTarget::Pid(pid) => {
            let fd = pidfd::pidfd_open(*pid).map_err(|e| {
                fail(
                    exit::TARGET_EXITED_EARLY,
                    format!("--pid {pid}: no such process ({e})"),
                )
            })?;
            return Ok(Subject {
                launched: None,
                pid: *pid,
                exit_fd: fd,
                reports: false,
            });
        }
        ProfileTarget::Command(argv) => (argv.clone(), false),
        ProfileTarget::Sockscope(args) => {
            check_target_args(args)?;
            let exe = std::env::current_exe().context("locating the sockscope binary")?;
            let mut argv: Vec<OsString> = vec![exe.into()];
            argv.extend(args.iter().map(OsString::from));
            let is_server = args.first().is_some_and(|a| a == "serve")
                && args.get(1).is_some_and(|a| a == "echo" || a == "udp-sink");
            // A serve target listens on 127.0.0.1 by default: on a path it
            // must listen on the path's address instead.
            if let Some(p) = path
                && args.first().is_some_and(|a| a == "serve")
                && !args
                    .iter()
                    .any(|a| a == "--listen" || a.starts_with("--listen="))
            {
                argv.push("--listen".into());
                argv.push(format!("{}:0", p.target_ip).into());
            }
            (argv, is_server)
        }
    };
    let run_as = spec.run_as.as_ref();
    let launched = if let Some(p) = path {
        Launched::spawn_in_netns(&argv, run_as, reports, p.target_netns())
    } else if reports {
        Launched::spawn_reporting(&argv, run_as)
    } else {
        Launched::spawn(&argv, run_as)
    }
    .map_err(|e| {
        fail(
            exit::TARGET_EXITED_EARLY,
            format!("the target could not be started: {e:#}"),
        )
    })?;
    let exit_fd = launched
        .exit_fd()
        .try_clone_to_owned()
        .context("duplicating the target's pidfd")?;
    Ok(Subject {
        pid: launched.pid,
        launched: Some(launched),
        exit_fd,
        reports,
    })
}

/// Stops a launched target (a target that needed SIGKILL, or had already
/// exited, fails the run) and reads the server's own report when it
/// writes one.
pub(super) fn stop(
    subject: &mut Subject,
) -> Result<(Option<StopRecord>, Option<serde_json::Value>)> {
    let stop = subject.launched.as_mut().map(|l| l.stop(STOP_GRACE));
    if let Some(rec) = &stop {
        if rec.signal == "SIGKILL" {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "the target did not stop within {} s of SIGTERM and was killed; its \
                     output:\n{}",
                    STOP_GRACE.as_secs(),
                    subject.log_tail()
                ),
            ));
        }
        if rec.signal == "none" {
            return Err(fail(
                exit::TARGET_DIED,
                format!(
                    "the target exited on its own right after the run; its output:\n{}",
                    subject.log_tail()
                ),
            ));
        }
    }
    let server_report = if subject.reports {
        Some(server_report(subject, stop.as_ref())?)
    } else {
        None
    };
    Ok((stop, server_report))
}

/// The server's own report, read back through its descriptor once it
/// stopped cleanly on SIGTERM; without it the run has no server counters
/// and fails.
fn server_report(subject: &Subject, stop: Option<&StopRecord>) -> Result<serde_json::Value> {
    let clean = stop.is_none_or(|r| r.clean());
    let parsed = subject
        .launched
        .as_ref()
        .context("a report from a target profile did not launch")?
        .report()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).map_err(Into::into));
    match (clean, parsed) {
        (true, Ok(v)) => Ok(v),
        (_, parsed) => Err(fail(
            exit::TARGET_DIED,
            format!(
                "the server did not stop cleanly on SIGTERM ({}{}), so its own counters are \
                 missing; its output:\n{}",
                stop.map_or("?".into(), |r| r.describe()),
                parsed.err().map_or(String::new(), |e| format!("; {e:#}")),
                subject.log_tail()
            ),
        )),
    }
}

/// The error for a target that exited during the run, with its status and
/// (launched targets) its output.
pub(super) fn target_died(subject: &mut Subject) -> anyhow::Error {
    let status = subject
        .launched
        .as_mut()
        .and_then(|l| l.try_exited())
        .map_or_else(String::new, |s| {
            format!(" ({})", target::describe_status(s))
        });
    let output = if subject.launched.is_some() {
        format!("; its output:\n{}", subject.log_tail())
    } else {
        String::new()
    };
    fail(
        exit::TARGET_DIED,
        format!(
            "the target (pid {}) exited during the run{status}; nothing was written{output}",
            subject.pid
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroups_processes_are_read_below_it_sorted_once_each() {
        let root = tempfile::tempdir().unwrap();
        let sub = root.path().join("worker.scope");
        std::fs::create_dir_all(sub.join("deeper")).unwrap();
        std::fs::write(root.path().join("cgroup.procs"), "300\n12\n").unwrap();
        std::fs::write(sub.join("cgroup.procs"), "45\nnot a pid\n12\n").unwrap();
        std::fs::write(sub.join("deeper").join("cgroup.procs"), " 7 \n").unwrap();
        assert_eq!(cgroup_pids(root.path()), vec![7, 12, 45, 300]);
        assert!(cgroup_pids(&root.path().join("absent")).is_empty());
    }
}
