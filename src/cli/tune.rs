//! `sockscope tune` options (clap).

use std::path::PathBuf;

use clap::Args;

use crate::run::tune::TuneSpec;
use crate::tune::Goal;

/// Help after the options.
pub const TUNE_HELP: &str = "Examples:\n  sockscope tune\n  sockscope tune --for latency\n  \
sockscope tune --from out/run.json\n  sockscope tune --for connections --reserve 8080,5432 --emit sysctl > 90-sockscope.conf\n\n\
sockscope only reads: it never writes to /proc/sys. Network sysctls are per network namespace; \
they are read in the one sockscope runs in. docs/tune.md explains every row and its sources.\n\n\
The audit exits 0 whatever it advises; --from a file that is not a profile artifact is a usage \
error (2).";

/// `sockscope tune` options.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// What the server is tuned for.
    #[arg(
        long = "for",
        value_enum,
        default_value = "connections",
        value_name = "GOAL"
    )]
    pub goal: Goal,
    /// Rank the audit by the evidence of this profile artifact (run.json):
    /// the rows it supports first, each quoting its counter.
    #[arg(long, value_name = "RUN.json")]
    pub from: Option<PathBuf>,
    /// Print a sysctl.d snippet of the sysctl changes advised (nothing is
    /// applied).
    #[arg(long, value_name = "FORMAT", value_parser = ["sysctl"], conflicts_with = "json")]
    pub emit: Option<String>,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// The ports your services listen on, to keep out of the ephemeral
    /// range when it is widened (net.ipv4.ip_local_reserved_ports), e.g.
    /// `--reserve 8080,5432`. Default: the --from run's target's ports;
    /// without either no port is proposed (whatever happens to listen now
    /// may be a test server).
    #[arg(long, value_name = "PORT,...", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    pub reserve: Vec<u16>,
}

impl TuneArgs {
    /// The spec `crate::run::tune::run` takes (--quiet changes
    /// nothing: the audit prints only what was asked for).
    pub fn into_spec(self) -> TuneSpec {
        TuneSpec {
            goal: self.goal,
            from: self.from,
            emit_sysctl: self.emit.is_some(),
            json: self.json,
            reserve: self.reserve,
        }
    }
}
