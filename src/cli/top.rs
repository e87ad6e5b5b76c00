//! `sockscope top` options (clap) and their validation into
//! [`crate::run::top::TopSpec`].

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::values;
use crate::error;
use crate::probe::{ScopeTarget, TargetSpec};
use crate::top::model::SortKey;

/// `sockscope top` options.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Watch this running process tree (several pids: the one that is an
    /// ancestor of the others, as `trace -p`).
    #[arg(short = 'p', long = "pid", value_name = "PID", num_args = 1.., conflicts_with_all = ["cgroup", "unit", "comm", "system"])]
    pub pid: Vec<i32>,

    /// Watch every task in this cgroup v2 directory or below it.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["unit", "comm", "system"])]
    pub cgroup: Option<String>,

    /// Watch a systemd unit's cgroup (nginx or nginx.service).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["comm", "system"])]
    pub unit: Option<String>,

    /// Watch every process with this name (its comm, at most 15 bytes).
    #[arg(long, value_name = "NAME", conflicts_with = "system")]
    pub comm: Option<String>,

    /// Watch every server on the machine (the default when no target is
    /// given).
    #[arg(long)]
    pub system: bool,

    /// Print one screen after the first 1-second interval, without colour,
    /// and exit (for scripts and logs).
    #[arg(long)]
    pub once: bool,

    /// Quit after this many seconds.
    #[arg(short, long, value_name = "SECS", value_parser = values::positive_secs)]
    pub duration: Option<f64>,

    /// The first order of the ports: rate, p99, errors or port (the `s`
    /// key cycles through them).
    #[arg(long, value_name = "KEY", default_value = "rate", value_parser = SortKey::parse)]
    pub sort: SortKey,

    /// Follow the requests ON of every PERIOD only (e.g. 1s/10s), as
    /// `trace --requests-only --requests-duty`: the screen then moves
    /// only while they are followed.
    #[arg(long, value_name = "ON/PERIOD", value_parser = crate::anatomy::Duty::parse)]
    pub requests_duty: Option<crate::anatomy::Duty>,

    /// Also sample the target's stacks (as `trace --stacks`) and list
    /// each second's hottest on-CPU functions under the table.
    #[arg(long)]
    pub stacks: bool,

    /// On-CPU samples per second per CPU with --stacks.
    #[arg(long, value_name = "HZ", requires = "stacks",
          value_parser = clap::value_parser!(u32).range(1..=crate::stacks::MAX_HZ as i64))]
    pub stack_hz: Option<u32>,

    /// Request names (HTTP routes, commands) kept per served port.
    #[arg(long, value_name = "N", default_value_t = crate::anatomy::DEFAULT_MAX_ENDPOINTS,
          value_parser = clap::value_parser!(u32).range(1..=crate::anatomy::MAX_ENDPOINTS_LIMIT as i64))]
    pub max_endpoints: u32,
}

impl TopArgs {
    /// The validated spec (usage errors, exit 2).
    pub fn into_spec(self) -> Result<crate::run::top::TopSpec> {
        let duration = self.duration.map(Duration::from_secs_f64);
        let target = match values::tree_root("-p", &self.pid)? {
            Some(pid) => TargetSpec::Attach { pid, duration },
            None => {
                let scope = if let Some(path) = &self.cgroup {
                    ScopeTarget::Cgroup(crate::probe::scope::resolve_cgroup(path)?)
                } else if let Some(unit) = &self.unit {
                    ScopeTarget::Cgroup(crate::probe::scope::resolve_unit(unit)?)
                } else if let Some(name) = &self.comm {
                    crate::probe::scope::comm_name(name)?;
                    ScopeTarget::Comm(name.clone())
                } else {
                    ScopeTarget::System
                };
                TargetSpec::Scope { scope, duration }
            }
        };
        if self.once && self.duration.is_some() {
            return Err(error::usage(
                "--once prints one screen after the first second; --duration is for the live view",
            ));
        }
        Ok(crate::run::top::TopSpec {
            target,
            once: self.once,
            sort: self.sort,
            duty: self.requests_duty,
            reading: crate::anatomy::Reading {
                max_endpoints: self.max_endpoints,
                tls_plaintext: false,
            },
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            stacks_hz: self
                .stacks
                .then(|| self.stack_hz.unwrap_or(crate::stacks::DEFAULT_HZ)),
        })
    }
}
