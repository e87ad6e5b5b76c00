//! `sockscope report` and `sockscope compare` options (clap): what reads
//! artifacts already written.

use std::path::PathBuf;

use clap::Args;

/// `sockscope report` options.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run.json, bench.json or demo.json, a load artifact (`load
    /// --json`, `merge --out`) or a requests artifact (`trace
    /// --requests-only --json`).
    pub file: PathBuf,
    /// Write report.html and summary.txt here (default: beside FILE).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `sockscope compare` options.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline run.json.
    pub a: PathBuf,
    /// The run.json compared with it.
    pub b: PathBuf,
    /// Also write the comparison as a page here (with the functions that
    /// grew and their differential flame graph when both runs have
    /// stacks).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}
