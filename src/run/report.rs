//! `sockscope report FILE`: re-renders report.html and summary.txt from
//! the JSON of a profile, bench, demo, load or requests artifact alone.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error;
use crate::process::publish::{Dest, Show, publish};
use crate::report::{self, artifact};

/// `sockscope report FILE`: re-renders report.html and summary.txt from a
/// profile, bench, demo, load or requests artifact, into `out` (default: beside FILE).
pub fn run(file: &Path, out: Option<&Path>, quiet: bool, verbose: bool) -> Result<u8> {
    let text = crate::input::read_artifact(
        file,
        crate::input::ARTIFACT_MAX,
        &file.display().to_string(),
    )?;
    let mut v: serde_json::Value = serde_json::from_slice(&text)
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
    if let Err(why) = report::header::upgrade(&mut v) {
        return Err(error::usage(format!(
            "{}: schema {schema:?}: {why}; this sockscope reads version {}",
            file.display(),
            report::header::readable(&schema)
        )));
    }
    let art = match artifact::from_value(&schema, v) {
        Some(read) => read.map_err(wrong)?,
        None => {
            return Err(error::usage(format!(
                "{}: schema {schema:?} has no report (expected sockscope.profile, \
                 sockscope.bench, sockscope.demo, sockscope.load or sockscope.requests)",
                file.display()
            )));
        }
    };
    // A refusal names --out only when it was given.
    let (named, made) = if out.is_some() {
        ("--out".to_string(), ensure_out_dir(&dir)?)
    } else {
        (format!("writing beside {}:", file.display()), None)
    };
    let published = publish(
        art.as_ref(),
        Dest::Existing { dir, named },
        Show::for_terminal(quiet, verbose),
    );
    if published.is_err()
        && let Some(m) = made
    {
        m.undo();
    }
    published?;
    Ok(0)
}

/// A directory `report --out` created: the descriptor of its parent, its
/// name there and its identity, so a failed run removes it again and
/// nothing else.
struct MadeDir {
    parent: std::os::fd::OwnedFd,
    name: std::ffi::OsString,
    id: (u64, u64),
}

impl MadeDir {
    /// Removes the directory if it is still the one made (not swapped for
    /// another since) and still empty (rmdir refuses one with files: a
    /// set whose files arrived, and only stdout failed, stays).
    fn undo(self) {
        use nix::fcntl::AtFlags;
        use nix::unistd::{UnlinkatFlags, unlinkat};
        let now = nix::sys::stat::fstatat(
            &self.parent,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        );
        if now.is_ok_and(|st| (st.st_dev, st.st_ino) == self.id) {
            let _ = unlinkat(
                &self.parent,
                self.name.as_os_str(),
                UnlinkatFlags::RemoveDir,
            );
        }
    }
}

/// `report --out DIR`: creates DIR when it does not exist yet (its parent
/// must; made relative to the parent's descriptor, see `crate::output`)
/// and returns it as made; an existing DIR must be a directory, and is
/// never removed. Refusals are usage errors.
fn ensure_out_dir(dir: &Path) -> Result<Option<MadeDir>> {
    use crate::output::{Located, errno_text, locate};
    use nix::sys::stat::{Mode, SFlag};
    let usage = |e: anyhow::Error| error::usage(format!("--out {e:#}"));
    let not_dir = || {
        error::usage(format!(
            "--out {}: exists and is not a directory",
            dir.display()
        ))
    };
    let e = match locate(dir).map_err(usage)? {
        Located::Entry(e) => e,
        Located::Alias(_) => return Err(not_dir()),
    };
    match e.stat {
        Some(st) if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits() => Ok(None),
        Some(_) => Err(not_dir()),
        None => {
            let failed = |err: nix::Error| {
                error::usage(format!(
                    "--out {}: creating it: {}",
                    dir.display(),
                    errno_text(&err.into())
                ))
            };
            nix::sys::stat::mkdirat(&e.dir, e.name.as_os_str(), Mode::from_bits_truncate(0o777))
                .map_err(failed)?;
            let st = nix::sys::stat::fstatat(
                &e.dir,
                e.name.as_os_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(failed)?;
            Ok(Some(MadeDir {
                parent: e.dir,
                name: e.name,
                id: (st.st_dev, st.st_ino),
            }))
        }
    }
}
