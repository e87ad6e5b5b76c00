//! The commands: each one orchestrates the measuring modules (`trace`,
//! `load`, `serve`, `netpath`) through the process primitives of
//! [`crate::process`], and writes its artifact through
//! [`crate::process::publish`]. One command is one file or folder here.
//!
//! - [`profile`]: one traced load window and its artifact (its collectors:
//!   `profile::collect`, `profile::share`; its `--load` line:
//!   `profile::loadline`);
//! - [`trace`]: `sockscope trace` (the tracer's outputs, the Prometheus
//!   exporter; `--requests-only`, `--stacks-only` and their parts);
//! - [`load`]: `sockscope load` (the summary, `--json`, the exit status);
//!   [`pathload`]: `load --path --serve`; [`serve`]: `sockscope serve`;
//!   [`tune`]: `sockscope tune` (the audit's table, JSON or sysctl.d);
//! - [`bench`]: the experiments; [`demo`]: all of them with one report;
//! - [`report`]: re-renders an artifact; [`compare`]: two profile
//!   artifacts side by side; [`merge`]: load artifacts merged;
//! - [`hidden`]: the helper subcommands sockscope runs itself
//!   (`__getppid-loop`, `__idle`, `__watchdog`); `trace::stacks_raw`:
//!   `__stacks-raw`, the stack sampler alone, for its tests;
//! - [`help`]: `completions` and `manpage`, from the definition `main.rs`
//!   hands over;
//! - [`lifecycle`]: what every command's process does first and last (the
//!   watchdog), and an error's exit status and message;
//! - shared by them: [`machine`] (the kernel, CPU and sysctls read into
//!   report::machine::Machine, and the caveats), [`exit`] (the failure
//!   statuses), [`timestamp`], [`scratch_dir`].

pub mod bench;
pub mod compare;
pub mod demo;
pub mod exit;
pub mod help;
pub mod hidden;
pub mod lifecycle;
pub mod load;
pub mod machine;
pub mod merge;
pub mod pathload;
pub mod profile;
pub mod report;
pub mod serve;
pub mod tail;
pub mod top;
pub mod trace;
pub mod tune;

use anyhow::Result;

use crate::error;
use crate::process::staging;

/// UTC time as YYYYmmdd-HHMMSS, for default directory names.
pub fn timestamp() -> String {
    let s = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-22T15:04:05Z -> 20261122-150405
    s.trim_end_matches('Z')
        .replace(['-', ':'], "")
        .replace('T', "-")
}

/// A private directory for one command's scratch files (a generated
/// haproxy.cfg; launched processes' output and reports come back through
/// descriptors, see [`crate::process::target::Launched`]): mode 0700, owned by us,
/// with an unpredictable name under $TMPDIR (or /tmp), locked while the
/// command lives and removed when the guard drops. Never under --out: only
/// the artifacts go there. Scratch directories of commands killed outright
/// (their lock is free) are removed first.
pub fn scratch_dir() -> Result<staging::LockedDir> {
    const PREFIX: &[u8] = b"sockscope-scratch-";
    let tmp = std::env::temp_dir();
    staging::remove_stale_in(&tmp, PREFIX);
    staging::LockedDir::create(&tmp, PREFIX).map_err(|e| {
        error::with_code(
            1,
            format!(
                "creating a private scratch directory in {}: {}",
                tmp.display(),
                crate::output::errno_text(&e)
            ),
        )
    })
}
