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
    /// Run every point's target and load on this emulated path (see
    /// docs/path.md); experiments that drive a load through profile only
    /// (transport).
    #[arg(long, value_name = "SPEC")]
    pub path: Option<String>,
    /// How the path is built: netem, delayline, auto.
    #[arg(long, value_enum, value_name = "BACKEND", default_value = "auto")]
    pub path_backend: crate::netpath::BackendChoice,
}

impl BenchArgs {
    /// The validated `--path` (usage errors exit 2): None without one or
    /// with `loopback`; an experiment that drives no profile load refuses it.
    pub fn path(
        &self,
    ) -> anyhow::Result<Option<(crate::netpath::PathSpec, crate::netpath::BackendChoice)>> {
        let Some(text) = &self.path else {
            return Ok(None);
        };
        let spec = crate::netpath::PathSpec::parse(text)?;
        if spec.is_some() && self.name != crate::run::bench::Experiment::Transport {
            return Err(crate::error::usage(format!(
                "--path: bench {} does not drive its load through profile; only bench \
                 transport takes --path",
                self.name.name()
            )));
        }
        Ok(spec.map(|s| (s, self.path_backend)))
    }
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
