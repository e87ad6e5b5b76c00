//! The `--load` string of profile: a `sockscope load` command line without
//! the `load` word and, usually, without the address, which profile fills
//! in once it has learned where the target listens:
//!
//! * `tcp-rr -c 64 -d 10`: the learned address is inserted after the
//!   workload name;
//! * `tcp-rr ADDR -c 64`: the literal word `ADDR` is replaced by it;
//! * `tcp-rr 127.0.0.1:6379 -c 64`: an explicit address is kept, and must
//!   be one the target itself listens on (checked before any load runs).
//!
//! Split like a shell would (quotes, backslashes), so `--request 'PING\r\n'`
//! works inside the string.

use std::net::SocketAddr;

use anyhow::Result;

use crate::cli::load::{self, LoadCommand};
use crate::error;

/// The placeholder replaced by the learned address.
pub const PLACEHOLDER: &str = "ADDR";
/// Stands in for the address while the line is only being validated.
const PROBE: &str = "127.0.0.1:9";

/// Where the address goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrSlot {
    /// Inserted after the workload name.
    Insert,
    /// Replaces every `ADDR` token.
    Placeholder,
    /// Given by the user (kept as is).
    Explicit(String),
}

/// A validated load line.
#[derive(Clone, Debug)]
pub struct LoadLine {
    tokens: Vec<String>,
    /// Where the address goes.
    pub slot: AddrSlot,
}

impl LoadLine {
    /// Splits and validates `line` (usage errors exit 2). Rejects what
    /// profile must own itself: `--json` (the load's report goes into
    /// run.json) and `--warmup` (the trace window covers the whole load, so
    /// per-transaction figures need every transaction counted).
    pub fn parse(line: &str) -> Result<Self> {
        let tokens =
            shell_words::split(line).map_err(|e| error::usage(format!("--load {line:?}: {e}")))?;
        if tokens.is_empty() {
            return Err(error::usage(
                "--load is empty: give a load line such as 'tcp-rr -c 64 -d 10'",
            ));
        }
        let has_placeholder = tokens.iter().any(|t| t == PLACEHOLDER);
        let substituted: Vec<String> = tokens
            .iter()
            .map(|t| {
                if t == PLACEHOLDER {
                    PROBE.to_string()
                } else {
                    t.clone()
                }
            })
            .collect();
        let (slot, cmd) = match load::parse(&substituted) {
            Ok(cmd) if has_placeholder => (AddrSlot::Placeholder, cmd),
            Ok(cmd) => (AddrSlot::Explicit(addr_of(&cmd).to_string()), cmd),
            Err(_) if !has_placeholder => {
                let mut inserted = tokens.clone();
                inserted.insert(1.min(inserted.len()), PROBE.to_string());
                (AddrSlot::Insert, load::parse(&inserted)?)
            }
            Err(e) => return Err(e),
        };
        reject_owned_options(&cmd)?;
        Ok(Self { tokens, slot })
    }

    /// The workload name (`tcp-rr`, `tcp-crr`, `udp`).
    pub fn workload(&self) -> &str {
        &self.tokens[0]
    }

    /// True for the udp workload (the target then needs a bound UDP
    /// socket, not a TCP listener).
    pub fn is_udp(&self) -> bool {
        self.workload() == "udp"
    }

    /// The line as given (tokens).
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The full argument list with `addr` in place (explicit addresses are
    /// kept).
    pub fn with_addr(&self, addr: SocketAddr) -> Vec<String> {
        let a = addr.to_string();
        match &self.slot {
            AddrSlot::Explicit(_) => self.tokens.clone(),
            AddrSlot::Placeholder => self
                .tokens
                .iter()
                .map(|t| {
                    if t == PLACEHOLDER {
                        a.clone()
                    } else {
                        t.clone()
                    }
                })
                .collect(),
            AddrSlot::Insert => {
                let mut t = self.tokens.clone();
                t.insert(1, a);
                t
            }
        }
    }

    /// Parses the line with `addr` in place.
    pub fn command(&self, addr: SocketAddr) -> Result<LoadCommand> {
        load::parse(&self.with_addr(addr))
    }
}

fn addr_of(cmd: &LoadCommand) -> &str {
    match cmd {
        LoadCommand::TcpRr(a) => &a.addr,
        LoadCommand::TcpCrr(a) => &a.addr,
        LoadCommand::Redis(a) | LoadCommand::Memcached(a) => &a.addr,
        LoadCommand::Udp(a) => &a.addr,
    }
}

fn reject_owned_options(cmd: &LoadCommand) -> Result<()> {
    let (json, warmup) = match cmd {
        LoadCommand::TcpRr(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::TcpCrr(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::Redis(a) | LoadCommand::Memcached(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::Udp(a) => (a.json.is_some(), 0.0),
    };
    if json {
        return Err(error::usage(
            "--load: leave out --json; the load's full report is part of run.json",
        ));
    }
    if warmup > 0.0 {
        return Err(error::usage(
            "--load: --warmup is not supported by profile: the trace covers the whole load, \
             so per-transaction figures must count every transaction",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn inserts_replaces_or_keeps_the_address() {
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let l = LoadLine::parse("tcp-rr -c 64 -d 10").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert_eq!(
            l.with_addr(a),
            ["tcp-rr", "127.0.0.1:4000", "-c", "64", "-d", "10"]
        );
        let l = LoadLine::parse("tcp-crr -c 4 ADDR -n 10").unwrap();
        assert_eq!(l.slot, AddrSlot::Placeholder);
        assert_eq!(l.with_addr(a)[3], "127.0.0.1:4000");
        let l = LoadLine::parse("tcp-rr 127.0.0.1:6379 -c 2").unwrap();
        assert_eq!(l.slot, AddrSlot::Explicit("127.0.0.1:6379".into()));
        assert_eq!(l.with_addr(a)[1], "127.0.0.1:6379");
        let l = LoadLine::parse(r"tcp-rr --request 'PING\r\n' --expect '+PONG\r\n'").unwrap();
        assert_eq!(l.tokens()[2], r"PING\r\n");
        assert!(l.command(a).is_ok());
        let l = LoadLine::parse("redis -c 4 -d 5 --command 'GET k:{key}' --ratio 1").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert_eq!(l.tokens()[6], "GET k:{key}");
        assert_eq!(l.with_addr(a)[1], "127.0.0.1:4000");
        assert!(l.command(a).is_ok());
        let l = LoadLine::parse("memcached ADDR --pipeline 8").unwrap();
        assert_eq!(l.slot, AddrSlot::Placeholder);
        let l = LoadLine::parse("udp --burst 100").unwrap();
        assert!(l.is_udp());
    }

    #[test]
    fn rejects_bad_lines_as_usage_errors() {
        for bad in [
            "",
            "tcp-rr -c x",
            "nonsense",
            "tcp-rr --json out.json",
            "tcp-rr --warmup 1",
            "redis --json out.json",
            "memcached --warmup 1",
            "tcp-rr 'unterminated",
        ] {
            let e = LoadLine::parse(bad).unwrap_err();
            assert_eq!(code(e), Some(2), "{bad}");
        }
    }
}
