//! `sockscope compare A.json B.json`: reads two profile artifacts and
//! prints their differences (the table itself: `report::compare`), and
//! with `--html FILE` writes them as a page.

use std::path::Path;

use anyhow::Result;

use crate::error;
use crate::input;
use crate::report;

/// Prints the comparison on stdout and, with `html`, writes its page
/// there; an artifact that cannot be read is a usage error (exit 2), a
/// page that cannot be written or a closed or full stdout a failure
/// (exit 1) once both were tried.
pub fn run(a: &Path, b: &Path, html: Option<&Path>) -> Result<u8> {
    let ra = read(a)?;
    let rb = read(b)?;
    let (na, nb) = (a.display().to_string(), b.display().to_string());
    let printed = crate::output::print(
        report::compare::render(&ra, &rb, &na, &nb).as_bytes(),
        "the comparison",
    );
    // The page is written even when stdout failed.
    let page = html.map_or(Ok(()), |path| {
        crate::output::write(path, report::compare::page(&ra, &rb, &na, &nb).as_bytes())
    });
    crate::output::both(page, printed)?;
    Ok(0)
}

/// One profile artifact, read bounded ([`input::read_artifact`]); what is
/// not one is a usage error saying what it is.
fn read(p: &Path) -> Result<report::profile::ProfileReport> {
    let what = format!("compare {}", p.display());
    let bytes = input::read_artifact(p, input::ARTIFACT_MAX, &what)?;
    report::profile::from_bytes(&bytes, p, "compare").map_err(|e| error::usage(format!("{e:#}")))
}
