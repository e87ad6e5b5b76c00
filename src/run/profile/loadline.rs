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
//! For http the address goes into a URL: `http -c 64 /index.html` becomes
//! `http http://ADDR/index.html -c 64`, `http -c 64` requests `/`, and
//! `https://ADDR/x` (or `http://ADDR/x`) is filled in where written; a
//! whole URL (or `--urls FILE`) is explicit, its host and port checked
//! like an address.
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
    /// http: the token at this index is a path (`/index.html`), completed
    /// into `http://ADDR/index.html`.
    UrlPath(usize),
}

/// A validated load line.
#[derive(Clone, Debug)]
pub struct LoadLine {
    tokens: Vec<String>,
    /// Where the address goes.
    pub slot: AddrSlot,
    /// The load keeps its connections (tcp-rr, http without
    /// --new-connection, redis, memcached): the tree's share of it can be
    /// sampled per connection.
    pub persistent: bool,
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
        let http = tokens[0] == "http";
        let is_placeholder = |t: &str| t == PLACEHOLDER || (http && t.contains(URL_PLACEHOLDER));
        let has_placeholder = tokens.iter().any(|t| is_placeholder(t));
        let probe: SocketAddr = PROBE.parse().expect("a valid probe address");
        let substituted: Vec<String> = tokens.iter().map(|t| fill(t, probe, http)).collect();
        let (slot, cmd) = match load::parse(&substituted) {
            Ok(cmd) if has_placeholder => (AddrSlot::Placeholder, cmd),
            Ok(cmd) => match url_path(&tokens, &cmd) {
                Some(i) => {
                    let mut filled = tokens.clone();
                    filled[i] = format!("http://{probe}{}", tokens[i]);
                    (AddrSlot::UrlPath(i), load::parse(&filled)?)
                }
                None => (AddrSlot::Explicit(explicit_addr(&cmd)?), cmd),
            },
            Err(_) if !has_placeholder => {
                let mut inserted = tokens.clone();
                inserted.insert(1.min(inserted.len()), insert_token(probe, http));
                (AddrSlot::Insert, load::parse(&inserted)?)
            }
            Err(e) => return Err(e),
        };
        // What only the workload checks (headers, --ok-status, the body
        // file) is checked now, before any target starts.
        match &cmd {
            LoadCommand::Http(a) => {
                crate::load::http::workload(a)?;
            }
            LoadCommand::UdpRr(a) => {
                crate::load::udp_rr::DgramExchange::from_args(a)?;
            }
            _ => {}
        }
        let persistent = match &cmd {
            LoadCommand::TcpRr(_) | LoadCommand::Redis(_) | LoadCommand::Memcached(_) => true,
            LoadCommand::Http(a) => !a.new_connection,
            LoadCommand::TcpCrr(_) | LoadCommand::Udp(_) | LoadCommand::UdpRr(_) => false,
        };
        reject_owned_options(&cmd)?;
        Ok(Self {
            tokens,
            slot,
            persistent,
        })
    }

    /// The workload name (`tcp-rr`, `tcp-crr`, `http`, `redis`,
    /// `memcached`, `udp-rr`, `udp`).
    pub fn workload(&self) -> &str {
        &self.tokens[0]
    }

    /// True for the UDP workloads, udp and udp-rr (the target then needs a
    /// bound UDP socket, not a TCP listener).
    pub fn is_udp(&self) -> bool {
        matches!(self.workload(), "udp" | "udp-rr")
    }

    /// The line as given (tokens).
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The full argument list with `addr` in place (explicit addresses are
    /// kept).
    pub fn with_addr(&self, addr: SocketAddr) -> Vec<String> {
        let http = self.workload() == "http";
        match &self.slot {
            AddrSlot::Explicit(_) => self.tokens.clone(),
            AddrSlot::Placeholder => self.tokens.iter().map(|t| fill(t, addr, http)).collect(),
            AddrSlot::Insert => {
                let mut t = self.tokens.clone();
                t.insert(1, insert_token(addr, http));
                t
            }
            AddrSlot::UrlPath(i) => {
                let mut t = self.tokens.clone();
                t[*i] = format!("http://{addr}{}", t[*i]);
                t
            }
        }
    }

    /// Parses the line with `addr` in place.
    pub fn command(&self, addr: SocketAddr) -> Result<LoadCommand> {
        load::parse(&self.with_addr(addr))
    }
}

/// `ADDR` inside an http URL (`http://ADDR/x`, `https://ADDR/`).
const URL_PLACEHOLDER: &str = "://ADDR";

/// Token `t` with the address in place of a placeholder: a whole `ADDR`
/// token (for http, a URL to `/`), or `://ADDR` inside an http URL.
fn fill(t: &str, addr: SocketAddr, http: bool) -> String {
    if t == PLACEHOLDER {
        insert_token(addr, http)
    } else if http && t.contains(URL_PLACEHOLDER) {
        t.replacen(URL_PLACEHOLDER, &format!("://{addr}"), 1)
    } else {
        t.to_string()
    }
}

/// What goes in when the line names no target: the address, or for http
/// a URL to `/` there.
fn insert_token(addr: SocketAddr, http: bool) -> String {
    if http {
        format!("http://{addr}/")
    } else {
        addr.to_string()
    }
}

/// http: the index of the URL token when it is a bare path (`/x`).
fn url_path(tokens: &[String], cmd: &LoadCommand) -> Option<usize> {
    let LoadCommand::Http(a) = cmd else {
        return None;
    };
    let url = a.url.as_deref().filter(|u| u.starts_with('/'))?;
    tokens.iter().position(|t| t == url)
}

/// The address an explicit target names: HOST:PORT, or for http the
/// host and port of the URL (of the first line of --urls).
fn explicit_addr(cmd: &LoadCommand) -> Result<String> {
    Ok(match cmd {
        LoadCommand::TcpRr(a) => a.addr.clone(),
        LoadCommand::TcpCrr(a) => a.addr.clone(),
        LoadCommand::Udp(a) => a.addr.clone(),
        LoadCommand::UdpRr(a) => a.addr.clone(),
        LoadCommand::Redis(a) | LoadCommand::Memcached(a) => a.addr.clone(),
        LoadCommand::Http(a) => {
            let url = match (&a.url, &a.urls) {
                (Some(u), _) => u.clone(),
                (None, Some(file)) => crate::load::http::request::read_urls(file, &a.method)?
                    .first()
                    .map(|t| t.url.to_string())
                    .ok_or_else(|| error::usage(format!("--urls {}: no URL", file.display())))?,
                (None, None) => unreachable!("clap requires a URL or --urls"),
            };
            let u = crate::load::http::request::parse_url(&url)?;
            let host = u.host_str().unwrap_or_default();
            format!("{host}:{}", u.port_or_known_default().unwrap_or(80))
        }
    })
}

fn reject_owned_options(cmd: &LoadCommand) -> Result<()> {
    let (json, warmup) = match cmd {
        LoadCommand::TcpRr(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::TcpCrr(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::Http(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::Redis(a) | LoadCommand::Memcached(a) => (a.tcp.json.is_some(), a.tcp.warmup),
        LoadCommand::UdpRr(a) => (a.tcp.json.is_some(), a.tcp.warmup),
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
        let l = LoadLine::parse(r"udp-rr -c 4 -d 5 --id memcached --request 'get k\r\n'").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert!(l.is_udp() && !l.persistent);
        assert_eq!(l.with_addr(a)[1], "127.0.0.1:4000");
        assert!(LoadLine::parse("udp-rr ADDR --request x --warmup 1").is_err());
        assert!(LoadLine::parse("udp-rr --id dns --request short").is_err());
    }

    #[test]
    fn http_takes_the_address_into_its_url() {
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let l = LoadLine::parse("http -c 64 -d 10 /index.html").unwrap();
        assert_eq!(l.slot, AddrSlot::UrlPath(5));
        assert_eq!(l.with_addr(a)[5], "http://127.0.0.1:4000/index.html");
        assert!(l.command(a).is_ok());
        assert!(l.persistent);
        let l = LoadLine::parse("http -c 2 --new-connection").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert_eq!(l.with_addr(a)[1], "http://127.0.0.1:4000/");
        assert!(!l.persistent);
        let l = LoadLine::parse("http https://ADDR/x?y=1 --insecure").unwrap();
        assert_eq!(l.slot, AddrSlot::Placeholder);
        assert_eq!(l.with_addr(a)[1], "https://127.0.0.1:4000/x?y=1");
        let v6: SocketAddr = "[::1]:4000".parse().unwrap();
        assert_eq!(l.with_addr(v6)[1], "https://[::1]:4000/x?y=1");
        let l = LoadLine::parse("http http://localhost:8080/ -c 2").unwrap();
        assert_eq!(l.slot, AddrSlot::Explicit("localhost:8080".into()));
        let l = LoadLine::parse("http http://127.0.0.1/").unwrap();
        assert_eq!(l.slot, AddrSlot::Explicit("127.0.0.1:80".into()));
        for bad in [
            "http ftp://x/",
            "http /x --ok-status nonsense",
            "http -H nocolon /",
        ] {
            let e = LoadLine::parse(bad).unwrap_err();
            assert_eq!(code(e), Some(2), "{bad}");
        }
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
