//! `sockscope merge`: reads the load artifacts, refuses what cannot be
//! merged (unreadable files, other schemas, one input, an input given
//! twice), merges them (`report::merge`), prints the summary and writes
//! the merged artifact.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error;
use crate::report::load::LoadReport;
use crate::report::merge::{self, Input};
use crate::report::{self, header, load_text};

/// Reads one load artifact: a `load --json` file (schema sockscope.load)
/// or a profile's run.json (its `load`). Anything else is a usage error
/// naming the file.
pub fn read(path: &Path) -> Result<LoadReport> {
    let text = crate::input::read_artifact(
        path,
        crate::input::ARTIFACT_MAX,
        &path.display().to_string(),
    )?;
    let mut v: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| error::usage(format!("{}: not JSON: {e}", path.display())))?;
    let schema = v["schema"].as_str().unwrap_or("").to_string();
    if let Err(why) = header::upgrade(&mut v) {
        return Err(error::usage(format!(
            "{}: schema {schema:?}: {why}; this sockscope reads version {}",
            path.display(),
            header::READABLE
        )));
    }
    let load = match schema.as_str() {
        report::load::SCHEMA => v,
        report::profile::SCHEMA => v["load"].take(),
        _ => {
            return Err(error::usage(format!(
                "{}: schema {schema:?} is not a load artifact (merge reads `sockscope load \
                 --json` files, schema sockscope.load, and profiles' run.json)",
                path.display()
            )));
        }
    };
    serde_json::from_value(load).map_err(|e| {
        error::usage(format!(
            "{}: not a valid {schema} artifact: {e}",
            path.display()
        ))
    })
}

/// The same run read twice (a copy under another name): same start to the
/// nanosecond, same host, same histogram.
fn same_run(a: &LoadReport, b: &LoadReport) -> bool {
    a.started_at == b.started_at
        && a.started_at_unix_ns == b.started_at_unix_ns
        && a.host == b.host
        && a.transactions == b.transactions
        && a.latency.as_ref().map(|l| &l.hdr_histogram)
            == b.latency.as_ref().map(|l| &l.hdr_histogram)
}

/// Runs `sockscope merge`; returns the exit status.
pub fn run(files: &[PathBuf], out: &Path, force: bool, quiet: bool) -> Result<u8> {
    if files.len() < 2 {
        return Err(error::usage(
            "merge needs at least two load artifacts (one has nothing to merge with)",
        ));
    }
    // The same file twice would count its run twice.
    let mut seen: BTreeMap<PathBuf, &Path> = BTreeMap::new();
    for f in files {
        let canon = std::fs::canonicalize(f).map_err(|e| {
            error::usage(format!(
                "{}: {}",
                f.display(),
                crate::output::errno_text(&e)
            ))
        })?;
        if let Some(first) = seen.insert(canon.clone(), f) {
            return Err(error::usage(format!(
                "{} is given twice ({} is the same file): its run would count twice",
                f.display(),
                first.display()
            )));
        }
        if !crate::output::is_stdout(out) && std::fs::canonicalize(out).is_ok_and(|o| o == canon) {
            return Err(error::usage(format!(
                "--out {} is one of the inputs; write the merge elsewhere",
                out.display()
            )));
        }
    }
    crate::output::check(out, "--out")?;
    let mut inputs: Vec<Input> = Vec::with_capacity(files.len());
    for f in files {
        let report = read(f)?;
        if let Some(twin) = inputs.iter().find(|i| same_run(&i.report, &report)) {
            return Err(error::usage(format!(
                "{} holds the same run as {} (same start, host and histogram): a copy would \
                 count twice",
                f.display(),
                twin.file
            )));
        }
        inputs.push(Input {
            file: f.display().to_string(),
            report,
        });
    }
    let merged =
        merge::merge(&inputs, force, crate::cmdline::recorded()).map_err(|r| error::usage(r.0))?;
    let mut printed = Ok(());
    if !quiet {
        let text = load_text::render(&merged);
        if crate::output::is_stdout(out) {
            let _ = std::io::stderr().write_all(text.as_bytes());
        } else {
            printed = crate::output::print(text.as_bytes(), "the merged results");
        }
    }
    // The merged artifact is written even when stdout failed.
    crate::output::both(report::write_json(out, &merged), printed)?;
    Ok(0)
}
