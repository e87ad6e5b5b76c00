//! `sockscope bench` and `sockscope demo` options (clap): the built-in
//! experiments, one at a time or all in one report.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use crate::run::bench::{EXPERIMENTS, Experiment};

/// `sockscope bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment.
    #[arg(value_parser = experiment_parser())]
    pub name: &'static dyn Experiment,
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
        if spec.is_some() && !self.name.takes_path() {
            let takers: Vec<&str> = EXPERIMENTS
                .iter()
                .filter(|e| e.takes_path())
                .map(|e| e.name())
                .collect();
            return Err(crate::error::usage(format!(
                "--path: bench {} does not drive its load through profile; only bench \
                 {} takes --path",
                self.name.name(),
                takers.join(", bench ")
            )));
        }
        Ok(spec.map(|s| (s, self.path_backend)))
    }
}

/// `bench`'s line in `sockscope --help`, naming every registered experiment.
pub fn about() -> String {
    let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name()).collect();
    format!(
        "Run a built-in experiment ({}) and write bench.json, summary.txt and report.html",
        names.join(", ")
    )
}

/// `bench --help`'s examples and which experiments need BPF, named
/// from the registry (the exit statuses are added by `exit_help`).
pub fn after_help() -> String {
    let bpf: Vec<&str> = EXPERIMENTS
        .iter()
        .filter(|e| e.needs_bpf())
        .map(|e| e.name())
        .collect();
    let needs = match bpf.split_last() {
        None => None,
        Some((last, [])) => Some(format!("{last} needs BPF")),
        Some((last, rest)) => Some(format!("{} and {last} need BPF", rest.join(", "))),
    };
    let bpf = needs.map_or(String::new(), |n| {
        format!(
            "{n}, checked before anything is measured (root, or the capabilities the message \
             names): 6 when it is missing. "
        )
    });
    format!(
        "Examples:\n  sockscope bench transport --quick --out transport\n  \
         sockscope bench udp-rcvbuf --quick\n  sockscope bench overhead --quick\n  \
         sockscope bench relay --quick\n\n\
         {bpf}A signal interrupts the run also during a load (128+N)."
    )
}

/// `bench NAME`: one of the registered experiments ([`EXPERIMENTS`]),
/// each listed in `bench --help` with its sentence.
fn experiment_parser() -> impl TypedValueParser<Value = &'static dyn Experiment> {
    PossibleValuesParser::new(
        EXPERIMENTS
            .iter()
            .map(|e| PossibleValue::new(e.name()).help(e.about())),
    )
    .map(|name| crate::run::bench::find(&name).expect("a registered experiment's name"))
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    #[test]
    fn every_registered_experiment_is_accepted_and_listed_in_help() {
        let mut help = Vec::new();
        <Cli as clap::CommandFactory>::command()
            .find_subcommand_mut("bench")
            .expect("a bench subcommand")
            .write_long_help(&mut help)
            .unwrap();
        let help = String::from_utf8(help).unwrap();
        assert!(!EXPERIMENTS.is_empty());
        for e in EXPERIMENTS {
            let cli = Cli::try_parse_from(["sockscope", "bench", e.name()])
                .unwrap_or_else(|err| panic!("bench {}: {err}", e.name()));
            let Command::Bench(args) = cli.command else {
                panic!("bench {} parsed as another command", e.name());
            };
            assert_eq!(args.name.name(), e.name());
            assert!(
                help.contains(&format!("- {}:", e.name())),
                "{}: {help}",
                e.name()
            );
            let about: String = e
                .about()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(help.contains(&about), "{}: {help}", e.name());
        }
        assert!(Cli::try_parse_from(["sockscope", "bench", "no-such-experiment"]).is_err());
    }
}
