//! The workload registry: one line per workload. Everything that lists or
//! parses workloads goes through it: `sockscope load`'s subcommands and
//! its help (`cli/load.rs`), the load lines of profile's `--load` and of
//! the experiments ([`parse_line`]). A workload's file declares its
//! `static WORKLOAD` ([`Registered`](crate::load::spec::Registered)) next to its
//! options and its exchange; adding one is that file and one line here.

use anyhow::Result;

use crate::error;
use crate::load::spec::{LoadSpec, Workload};

/// Every workload, in the order `load --help` lists them: one line each.
pub static WORKLOADS: &[&dyn Workload] = &[
    &crate::load::workloads::tcp_rr::WORKLOAD,
    &crate::load::workloads::tcp_crr::WORKLOAD,
    &crate::load::http::WORKLOAD,
    &crate::load::workloads::grpc::WORKLOAD,
    &crate::load::workloads::redis::WORKLOAD,
    &crate::load::workloads::memcached::WORKLOAD,
    &crate::load::workloads::udp_rr::WORKLOAD,
    &crate::load::workloads::udp::WORKLOAD,
];

/// The workload named `name`.
pub fn find(name: &str) -> Option<&'static dyn Workload> {
    WORKLOADS.iter().copied().find(|w| w.name() == name)
}

/// The workloads' names, comma separated (`tcp-rr, tcp-crr, ...`): the
/// help texts' list.
pub fn names() -> String {
    WORKLOADS
        .iter()
        .map(|w| w.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cmd` with one subcommand per workload.
pub fn subcommands(cmd: clap::Command) -> clap::Command {
    WORKLOADS.iter().fold(cmd, |cmd, w| {
        // The help text after the arguments: deriving `Args` makes the
        // options struct's doc comment its command's about.
        let sub = w.args(clap::Command::new(w.name()));
        cmd.subcommand(sub.about(w.about()).long_about(None))
    })
}

/// The spec of the workload subcommand `m` matched.
pub fn spec_of(m: &clap::ArgMatches) -> Result<LoadSpec, clap::Error> {
    let Some((name, sub)) = m.subcommand() else {
        return Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand));
    };
    let w =
        find(name).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
    w.spec(sub)
}

/// Parses a load command line (without the `load` word), e.g.
/// `["tcp-rr", "127.0.0.1:8080", "-c", "64", "-d", "10"]`; clap's refusal
/// is a usage error naming the line.
pub fn parse_line(args: &[String]) -> Result<LoadSpec> {
    let refused =
        |e: clap::Error| error::usage(format!("load {}: {}", args.join(" "), e.to_string().trim()));
    let cmd = subcommands(
        clap::Command::new("load")
            .no_binary_name(true)
            .subcommand_required(true)
            .arg_required_else_help(true),
    );
    let m = cmd.try_get_matches_from(args).map_err(refused)?;
    spec_of(&m).map_err(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_reads_a_load_line() {
        let spec = parse_line(&line(&["tcp-rr", "127.0.0.1:80", "-c", "64", "-d", "10"])).unwrap();
        assert_eq!(spec.workload(), "tcp-rr");
        assert_eq!(
            spec.target(),
            &super::super::spec::Target::Given("127.0.0.1:80".into())
        );
        // The options reach the workload as given.
        let options = format!("{spec:?}");
        assert!(options.contains("connections: 64"), "{options}");
        assert!(options.contains("duration: Some(10.0)"), "{options}");
        let e = parse_line(&line(&["tcp-rr", "-c", "x"])).unwrap_err();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
        let e = parse_line(&line(&["nonsense"])).unwrap_err();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = WORKLOADS.iter().map(|w| w.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WORKLOADS.len());
    }
}
