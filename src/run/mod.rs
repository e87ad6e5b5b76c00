//! The commands: each one orchestrates the measuring modules (`trace`,
//! `load`, `serve`, `netpath`) through the process primitives of
//! [`crate::process`], and writes its artifact through
//! [`crate::process::publish`]. One command is one file or folder here.
//!
//! - [`profile`]: one traced load window and its artifact (its collectors:
//!   `profile::collect`, `profile::share`; its `--load` line:
//!   `profile::loadline`);
//! - [`trace`]: `sockscope trace` (the tracer's outputs, the Prometheus
//!   exporter); [`pathload`]: `load --path --serve`;
//! - [`bench`]: the experiments; [`demo`]: all of them with one report;
//! - [`report`]: re-renders an artifact; [`compare`]: two profile
//!   artifacts side by side; [`merge`]: load artifacts merged;
//! - [`hidden`]: the helper subcommands sockscope runs itself
//!   (`__getppid-loop`, `__idle`; `__watchdog` is
//!   [`crate::process::watchdog::run`]); [`stacks_raw`]: `__stacks-raw`,
//!   the stack sampler alone, for its tests;
//! - shared by them: [`target_cpu`] (the target's CPU without the
//!   tracer, for `--requests-only`), [`machine`] (the kernel, CPU and sysctls read into
//!   report::machine::Machine, and the caveats), [`exit`] (the failure
//!   statuses), [`timestamp`], [`scratch_dir`].

pub mod bench;
pub mod compare;
pub mod demo;
pub mod exit;
pub mod hidden;
pub mod machine;
pub mod merge;
pub mod pathload;
pub mod profile;
pub mod report;
pub mod requests;
pub mod requests_live;
pub mod requests_only;
pub mod stacks;
pub mod stacks_only;
pub mod stacks_raw;
pub mod target_cpu;
pub mod trace;

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
