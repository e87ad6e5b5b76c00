//! `sockscope merge` options (clap): several load artifacts into one.

use std::path::PathBuf;

use clap::Args;

/// `sockscope merge` options.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Load artifacts (`load --json` files, or profiles' run.json: their
    /// load), at least two, each given once.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the merged artifact here (schema sockscope.load); - for stdout
    /// (the summary then goes to stderr).
    #[arg(short, long, visible_alias = "json", value_name = "FILE")]
    pub out: PathBuf,
    /// Merge even when the artifacts targeted different servers (recorded
    /// in the result's `merged.forced` and its notes).
    #[arg(long)]
    pub force: bool,
}
