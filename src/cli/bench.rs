//! `sockscope bench` and `sockscope demo` options (clap): the built-in
//! experiments, one at a time or all in one report.

use std::path::PathBuf;

use clap::Args;

/// `sockscope bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment.
    #[arg(value_enum)]
    pub name: crate::run::bench::Experiment,
    /// Artifact directory (default: bench-NAME-YYYYmmdd-HHMMSS).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fewer points, shorter runs.
    #[arg(long)]
    pub quick: bool,
}

/// `sockscope demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Artifact directory (default: demo-YYYYmmdd-HHMMSS).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Well under a minute instead of about two.
    #[arg(long)]
    pub quick: bool,
}
