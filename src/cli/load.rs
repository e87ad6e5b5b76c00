//! `sockscope load` options (clap): the workloads' subcommands, built from
//! the workload registry (`crate::load::registry`: each workload declares
//! its own options beside its exchange), converted once into a
//! [`LoadSpec`]; and `--path`/`--serve`, the emulated path and the server
//! behind it.
//!
//! Validation beyond what clap checks (addresses, `--request`/`--expect`,
//! option combinations per workload) happens in `crate::load` when the
//! load runs, as for a load line of profile's `--load`.

use anyhow::Result;
use clap::{ArgMatches, Args, FromArgMatches, Subcommand};

use crate::error;
use crate::load::{LoadSpec, registry};

/// `sockscope load`'s workload, one subcommand per registered workload,
/// parsed into its spec.
#[derive(Debug)]
pub struct LoadCommand(pub LoadSpec);

impl FromArgMatches for LoadCommand {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        registry::spec_of(m).map(Self)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for LoadCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        registry::subcommands(cmd)
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        registry::subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        registry::find(name).is_some()
    }
}

/// The help line of `sockscope load`: every registered workload.
pub fn about() -> String {
    format!("Load a server: {}", registry::names())
}

/// `load --path SPEC --serve ARGS`: the load crosses an emulated path to
/// a `sockscope serve` target that sockscope starts behind it.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// Cross an emulated path, e.g. 'rtt=20ms jitter=1ms loss=0.1%
    /// rate=1gbit limit=1000' (needs --serve; see docs/path.md).
    #[arg(long, value_name = "SPEC", global = true, requires = "serve")]
    pub path: Option<String>,
    /// The server behind the path: `sockscope serve` arguments, e.g.
    /// 'echo --transport epoll'; the workload's address is then the word
    /// ADDR (http: http://ADDR/).
    #[arg(long, value_name = "ARGS", global = true, requires = "path")]
    pub serve: Option<String>,
    /// How the path is built: netem, delayline, auto.
    #[arg(
        long,
        value_enum,
        value_name = "BACKEND",
        global = true,
        default_value = "auto"
    )]
    pub path_backend: crate::netpath::BackendChoice,
}

impl PathArgs {
    /// The served path, validated (usage errors exit 2); None without
    /// --path.
    pub fn into_served(self) -> Result<Option<crate::run::pathload::ServedPath>> {
        let (Some(p), Some(s)) = (self.path, self.serve) else {
            return Ok(None);
        };
        let Some(spec) = crate::netpath::PathSpec::parse(&p)? else {
            return Err(error::usage(
                "--path loopback with --serve: run `sockscope serve` and load it directly",
            ));
        };
        let serve =
            shell_words::split(&s).map_err(|e| error::usage(format!("--serve {s:?}: {e}")))?;
        if serve.is_empty() || serve[0] == "serve" {
            return Err(error::usage(
                "--serve: give the serve subcommand and its options, e.g. 'echo --transport \
                 epoll' (without the word serve)",
            ));
        }
        if serve
            .iter()
            .any(|a| a == "--json" || a.starts_with("--json="))
        {
            return Err(error::usage("--serve: leave out --json"));
        }
        Ok(Some(crate::run::pathload::ServedPath {
            spec,
            backend: self.path_backend,
            serve,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn every_workload_is_in_the_help() {
        let mut cli = Cli::command();
        let top = cli.render_help().to_string();
        let load_line = top
            .lines()
            .find(|l| l.trim_start().starts_with("load "))
            .unwrap_or_else(|| panic!("no load line in:\n{top}"));
        let load = cli
            .find_subcommand_mut("load")
            .expect("a load subcommand")
            .render_help()
            .to_string();
        for w in registry::WORKLOADS {
            assert!(
                load_line.contains(w.name()),
                "{} in {load_line:?}",
                w.name()
            );
            assert!(
                load.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{} ", w.name()))),
                "{} listed in:\n{load}",
                w.name()
            );
            assert!(load.contains(w.name()), "{}", w.name());
        }
    }
}
