//! `sockscope compare A.json B.json`: reads two profile artifacts and
//! prints their differences (the table itself: `report::compare`).

use std::path::Path;

use anyhow::Result;

use crate::error;
use crate::report;

/// Prints the comparison on stdout; an artifact that cannot be read is a
/// usage error (exit 2).
pub fn run(a: &Path, b: &Path) -> Result<u8> {
    let ra = report::profile::read(a).map_err(|e| error::usage(format!("{e:#}")))?;
    let rb = report::profile::read(b).map_err(|e| error::usage(format!("{e:#}")))?;
    print!(
        "{}",
        report::compare::render(&ra, &rb, &a.display().to_string(), &b.display().to_string())
    );
    Ok(0)
}
