//! Orchestration: launch, make ready and stop a target; profile it under
//! load while tracing it; the built-in experiments and the demo built on
//! that; and re-rendering artifacts.
//!
//! - [`profile`]: one traced load window and its artifact;
//! - [`target`], [`ready`]: processes we start, and the sockets they own;
//!   [`watchdog`]: what kills their process groups if sockscope dies;
//!   [`share`]: who else serves the load's address, and the traced tree's
//!   share of the load;
//! - [`loadline`]: the `--load` string; [`machine`]: the kernel, CPU and
//!   sysctls read into report::machine::Machine, and the caveats;
//!   [`staging`]: artifact directories written as a set; [`publish`]: an
//!   artifact's files written, put in place and announced (profile, bench,
//!   demo, report); [`exit`]: the failure statuses;
//! - [`bench`]: the experiments; [`demo`]: all of them with one report;
//! - [`compare`]: two profile artifacts side by side; [`hidden`]: the
//!   helper subcommands sockscope runs itself (`__getppid-loop`, `__idle`).

pub mod bench;
pub mod compare;
pub mod demo;
pub mod evidence;
pub mod exit;
pub mod hidden;
pub mod loadline;
pub mod machine;
pub mod merge;
pub mod pathload;
pub mod profile;
pub mod publish;
pub mod ready;
pub mod share;
pub mod staging;
pub mod target;
pub mod watchdog;

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error;
use crate::report::{self, artifact};
use publish::{Dest, Show, publish};

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
/// descriptors, see [`target::Launched`]): mode 0700, owned by us,
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

/// `sockscope profile`: measures, then writes DIR/run.json, summary.txt
/// and report.html as a set; prints the summary and the report's path.
pub fn run_profile(spec: &profile::ProfileSpec, out: Option<&Path>) -> Result<u8> {
    let dest = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("profile-{}", timestamp())));
    let staging = staging::Staging::new(&dest)?;
    let rep = profile::measure(spec)?;
    publish(&rep, Dest::Staged(staging), Show::unless_quiet(spec.quiet))?;
    Ok(0)
}

/// `sockscope report FILE`: re-renders report.html and summary.txt from a
/// profile, bench or demo artifact, into `out` (default: beside FILE).
pub fn rerender(file: &Path, out: Option<&Path>, quiet: bool) -> Result<u8> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        error::usage(format!(
            "{}: {}",
            file.display(),
            crate::output::errno_text(&e)
        ))
    })?;
    let mut v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| error::usage(format!("{}: not JSON: {e}", file.display())))?;
    let schema = v["schema"].as_str().unwrap_or("").to_string();
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    let wrong = |e: serde_json::Error| {
        error::usage(format!(
            "{}: not a valid {schema} artifact: {e}",
            file.display()
        ))
    };
    // Version 1 artifacts are converted to the current header first.
    if let Err(version) = report::header::upgrade(&mut v) {
        return Err(error::usage(format!(
            "{}: schema {schema:?} version {} is not one this sockscope reads ({})",
            file.display(),
            version.unwrap_or(0),
            report::header::READABLE
        )));
    }
    let art = match artifact::from_value(&schema, v) {
        Some(read) => read.map_err(wrong)?,
        None => {
            return Err(error::usage(format!(
                "{}: schema {schema:?} has no report (expected sockscope.profile, \
                 sockscope.bench, sockscope.demo or sockscope.load)",
                file.display()
            )));
        }
    };
    if out.is_some() {
        ensure_out_dir(&dir)?;
    }
    publish(art.as_ref(), Dest::Existing(dir), Show::unless_quiet(quiet))?;
    Ok(0)
}

/// `report --out DIR`: creates DIR when it does not exist yet (its parent
/// must); an existing DIR must be a directory. Refusals are usage errors.
fn ensure_out_dir(dir: &Path) -> Result<()> {
    use crate::output::{Followed, errno_text, follow};
    let usage = |e: anyhow::Error| error::usage(format!("--out {e:#}"));
    match follow(dir).map_err(usage)? {
        Followed::Path(_, Some(m)) if m.is_dir() => Ok(()),
        Followed::Path(p, None) => std::fs::create_dir(&p).map_err(|e| {
            error::usage(format!(
                "--out {}: creating it: {}",
                dir.display(),
                errno_text(&e)
            ))
        }),
        _ => Err(error::usage(format!(
            "--out {}: exists and is not a directory",
            dir.display()
        ))),
    }
}
