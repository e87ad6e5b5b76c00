//! `sockscope compare A.json B.json`: reads two profile artifacts and
//! prints their differences (the table itself: `report::compare`), and
//! with `--html FILE` writes them as a page.

use std::path::Path;

use anyhow::Result;

use crate::error;
use crate::report;

/// Prints the comparison on stdout and, with `html`, writes its page
/// there; an artifact that cannot be read is a usage error (exit 2), a
/// page that cannot be written a failure (exit 1) after the text.
pub fn run(a: &Path, b: &Path, html: Option<&Path>) -> Result<u8> {
    let ra = report::profile::read(a).map_err(|e| error::usage(format!("{e:#}")))?;
    let rb = report::profile::read(b).map_err(|e| error::usage(format!("{e:#}")))?;
    let (na, nb) = (a.display().to_string(), b.display().to_string());
    print!("{}", report::compare::render(&ra, &rb, &na, &nb));
    if let Some(path) = html {
        crate::output::write(path, report::compare::page(&ra, &rb, &na, &nb).as_bytes())?;
    }
    Ok(0)
}
