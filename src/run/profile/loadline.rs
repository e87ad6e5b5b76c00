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
//!
//! The line is parsed once, through the workload registry, into a
//! [`LoadSpec`] whose target is a slot until [`LoadLine::spec`] fills it
//! with the learned address; the tokens are kept only for the command
//! line profile records.

use anyhow::Result;

use crate::endpoint::Endpoint;
use crate::error;
use crate::load::spec::{PLACEHOLDER, Target, TargetForm};
use crate::load::{LoadSpec, registry};

/// Where the address goes in the line's tokens (the command line profile
/// records); the spec itself holds its target as a [`Target`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrSlot {
    /// Inserted after the workload name.
    Insert,
    /// Replaces every `ADDR` token.
    Placeholder,
    /// Given by the user (kept as is): the HOST:PORT it names.
    Explicit(String),
    /// http: the token at this index is a path (`/index.html`), completed
    /// into `http://ADDR/index.html`.
    UrlPath(usize),
}

/// A validated load line, parsed once: its spec, target still a slot
/// unless the line names one.
#[derive(Clone, Debug)]
pub struct LoadLine {
    tokens: Vec<String>,
    /// Where the address goes.
    pub slot: AddrSlot,
    spec: LoadSpec,
}

impl LoadLine {
    /// Splits, parses and validates `line` (usage errors exit 2). Rejects
    /// what profile must own itself: `--json` (the load's report goes into
    /// run.json) and `--warmup` (the trace window covers the whole load,
    /// so per-transaction figures need every transaction counted).
    pub fn parse(line: &str) -> Result<Self> {
        let tokens =
            shell_words::split(line).map_err(|e| error::usage(format!("--load {line:?}: {e}")))?;
        if tokens.is_empty() {
            return Err(error::usage(
                "--load is empty: give a load line such as 'tcp-rr -c 64 -d 10'",
            ));
        }
        let form = registry::find(&tokens[0]).map(|w| w.form());
        let url = form == Some(TargetForm::Url);
        let has_placeholder = tokens
            .iter()
            .any(|t| t == PLACEHOLDER || (url && t.contains(URL_PLACEHOLDER)));
        let (slot, spec) = match registry::parse_line(&tokens) {
            Ok(spec) if has_placeholder => (AddrSlot::Placeholder, spec),
            Ok(spec) => match spec.target() {
                // A bare path (http): a URL on the address.
                Target::Slot(path) => {
                    let i = tokens.iter().position(|t| t == path).unwrap_or(1);
                    (AddrSlot::UrlPath(i), spec)
                }
                _ => {
                    let endpoint = spec.endpoint()?.unwrap_or_default();
                    (AddrSlot::Explicit(endpoint), spec)
                }
            },
            // No address: the workload's placeholder goes after its name.
            Err(_) if !has_placeholder && form.is_some() => {
                let mut inserted = tokens.clone();
                inserted.insert(1, insert_token(PLACEHOLDER, url));
                (AddrSlot::Insert, registry::parse_line(&inserted)?)
            }
            Err(e) => return Err(e),
        };
        // What only the workload checks (headers, --ok-status, the body
        // file) is checked now, before any target starts.
        spec.check()?;
        reject_owned_options(&spec)?;
        Ok(Self { tokens, slot, spec })
    }

    /// The workload name (`tcp-rr`, `tcp-crr`, `http`, `redis`,
    /// `memcached`, `udp-rr`, `udp`).
    pub fn workload(&self) -> &str {
        self.spec.workload()
    }

    /// True for the UDP workloads, udp and udp-rr (the target then needs a
    /// bound UDP socket, not a TCP listener).
    pub fn is_udp(&self) -> bool {
        self.spec.is_udp()
    }

    /// The load keeps its connections (tcp-rr, http without
    /// --new-connection, redis, memcached): the tree's share of it can be
    /// sampled per connection.
    pub fn persistent(&self) -> bool {
        self.spec.conn() == crate::load::spec::ConnModel::Persistent
    }

    /// The HOST:PORT the line names itself (None: profile fills in the
    /// target's own).
    pub fn explicit(&self) -> Option<&str> {
        match &self.slot {
            AddrSlot::Explicit(a) => Some(a),
            _ => None,
        }
    }

    /// The line as given (tokens).
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The full argument list with `addr` in place (explicit addresses are
    /// kept): the load's command line as profile records it.
    /// On a Unix socket an http URL is written `unix:PATH:/URI`.
    pub fn with_addr(&self, addr: &Endpoint) -> Vec<String> {
        let url = self.spec.form() == TargetForm::Url;
        if url && addr.is_unix() {
            // The filled spec's target is the one form http takes there.
            return self.with_filled_target(addr);
        }
        let addr = addr.to_string();
        match &self.slot {
            AddrSlot::Explicit(_) => self.tokens.clone(),
            AddrSlot::Placeholder => self.tokens.iter().map(|t| fill(t, &addr, url)).collect(),
            AddrSlot::Insert => {
                let mut t = self.tokens.clone();
                t.insert(1, insert_token(&addr, url));
                t
            }
            AddrSlot::UrlPath(i) => {
                let mut t = self.tokens.clone();
                t[*i] = format!("http://{addr}{}", t[*i]);
                t
            }
        }
    }

    /// The options a profile in steps sets on every step itself: the
    /// line may not hold them (usage error, exit 2), and must take them
    /// (an open-loop workload with `--rate` and `-d`).
    pub fn check_steppable(&self, mode: &str) -> Result<()> {
        let owned = ["-d", "--duration", "-n", "--count", "--rate", "--warmup"];
        if let Some(t) = self.tokens.iter().find(|t| {
            owned
                .iter()
                .any(|o| *t == o || t.starts_with(&format!("{o}=")))
                || (t.starts_with("-d") || t.starts_with("-n")) && !t.starts_with("--")
        }) {
            return Err(error::usage(format!(
                "{mode}: leave {t} out of --load: each step's load gets its own --rate and -d from the steps"
            )));
        }
        self.step(Some(1.0), 1).map_err(|e| {
            error::usage(format!(
                "{mode} needs an open-loop load (--rate and -d): {}: {e:#}",
                self.workload()
            ))
        })?;
        Ok(())
    }

    /// The line of one step: open loop at `rate` per second (None: closed
    /// loop) for `secs` seconds.
    pub fn step(&self, rate: Option<f64>, secs: u64) -> Result<LoadLine> {
        let mut words = self.tokens.clone();
        if let Some(r) = rate {
            words.extend(["--rate".to_string(), format!("{r:.1}")]);
        }
        words.extend(["-d".to_string(), secs.to_string()]);
        LoadLine::parse(&shell_words::join(&words))
    }

    /// The spec with `addr` in place of its slot (a given target is
    /// kept): the line is not parsed again.
    pub fn spec(&self, addr: &Endpoint) -> LoadSpec {
        let mut spec = self.spec.clone();
        spec.fill(addr);
        spec
    }

    /// The tokens with the slot replaced by the filled spec's target (http
    /// on a Unix socket, whose URL is not `http://ADDR/...`).
    fn with_filled_target(&self, addr: &Endpoint) -> Vec<String> {
        let filled = match self.spec(addr).target() {
            Target::Given(t) => t.clone(),
            _ => return self.tokens.clone(),
        };
        let mut t = self.tokens.clone();
        match &self.slot {
            AddrSlot::Explicit(_) => {}
            AddrSlot::Insert => t.insert(1, filled),
            AddrSlot::UrlPath(i) => t[*i] = filled,
            AddrSlot::Placeholder => {
                for tok in &mut t {
                    if tok == PLACEHOLDER || tok.contains(URL_PLACEHOLDER) {
                        *tok = filled.clone();
                    }
                }
            }
        }
        t
    }
}

/// `ADDR` inside an http URL (`http://ADDR/x`, `https://ADDR/`).
const URL_PLACEHOLDER: &str = "://ADDR";

/// Token `t` with the address in place of a placeholder: a whole `ADDR`
/// token (for http, a URL to `/`), or `://ADDR` inside an http URL.
fn fill(t: &str, addr: &str, url: bool) -> String {
    if t == PLACEHOLDER {
        insert_token(addr, url)
    } else if url && t.contains(URL_PLACEHOLDER) {
        t.replacen(URL_PLACEHOLDER, &format!("://{addr}"), 1)
    } else {
        t.to_string()
    }
}

/// What goes in when the line names no target: the address, or for http
/// a URL to `/` there.
fn insert_token(addr: &str, url: bool) -> String {
    if url {
        format!("http://{addr}/")
    } else {
        addr.to_string()
    }
}

fn reject_owned_options(spec: &LoadSpec) -> Result<()> {
    if spec.json().is_some() {
        return Err(error::usage(
            "--load: leave out --json; the load's full report is part of run.json",
        ));
    }
    if spec.warmup() > 0.0 {
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
    use std::net::SocketAddr;

    fn given(t: &str) -> Target {
        Target::Given(t.to_string())
    }

    fn code(e: anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn a_unix_socket_fills_the_slot_in_each_workloads_form() {
        let u = &Endpoint::parse("unix:/run/app.sock").unwrap();
        let l = LoadLine::parse("redis -c 4 -d 1").unwrap();
        assert_eq!(l.with_addr(u)[1], "unix:/run/app.sock");
        assert_eq!(l.spec(u).target(), &given("unix:/run/app.sock"));
        let l = LoadLine::parse("http -c 4 /index.html").unwrap();
        assert_eq!(l.with_addr(u)[3], "unix:/run/app.sock:/index.html");
        assert_eq!(l.spec(u).target(), &given("unix:/run/app.sock:/index.html"));
        let l = LoadLine::parse("http -c 4").unwrap();
        assert_eq!(l.with_addr(u)[1], "unix:/run/app.sock:/");
        let l = LoadLine::parse("http http://ADDR/x?y=1 -c 4").unwrap();
        assert_eq!(l.with_addr(u)[1], "unix:/run/app.sock:/x?y=1");
    }

    #[test]
    fn inserts_replaces_or_keeps_the_address() {
        let a = &Endpoint::from("127.0.0.1:4000".parse::<SocketAddr>().unwrap());
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
        assert_eq!(l.spec(a).target(), &given("127.0.0.1:4000"));
        let l = LoadLine::parse("redis -c 4 -d 5 --command 'GET k:{key}' --ratio 1").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert_eq!(l.tokens()[6], "GET k:{key}");
        assert_eq!(l.with_addr(a)[1], "127.0.0.1:4000");
        assert_eq!(l.spec(a).target(), &given("127.0.0.1:4000"));
        let l = LoadLine::parse("memcached ADDR --pipeline 8").unwrap();
        assert_eq!(l.slot, AddrSlot::Placeholder);
        let l = LoadLine::parse("udp --burst 100").unwrap();
        assert!(l.is_udp());
        let l = LoadLine::parse(r"udp-rr -c 4 -d 5 --id memcached --request 'get k\r\n'").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert!(l.is_udp() && !l.persistent());
        assert_eq!(l.with_addr(a)[1], "127.0.0.1:4000");
        assert!(LoadLine::parse("udp-rr ADDR --request x --warmup 1").is_err());
        assert!(LoadLine::parse("udp-rr --id dns --request short").is_err());
    }

    #[test]
    fn http_takes_the_address_into_its_url() {
        let a = &Endpoint::from("127.0.0.1:4000".parse::<SocketAddr>().unwrap());
        let l = LoadLine::parse("http -c 64 -d 10 /index.html").unwrap();
        assert_eq!(l.slot, AddrSlot::UrlPath(5));
        assert_eq!(l.with_addr(a)[5], "http://127.0.0.1:4000/index.html");
        assert_eq!(
            l.spec(a).target(),
            &given("http://127.0.0.1:4000/index.html")
        );
        assert!(l.persistent());
        let l = LoadLine::parse("http -c 2 --new-connection").unwrap();
        assert_eq!(l.slot, AddrSlot::Insert);
        assert_eq!(l.with_addr(a)[1], "http://127.0.0.1:4000/");
        assert!(!l.persistent());
        let l = LoadLine::parse("http https://ADDR/x?y=1 --insecure").unwrap();
        assert_eq!(l.slot, AddrSlot::Placeholder);
        assert_eq!(l.with_addr(a)[1], "https://127.0.0.1:4000/x?y=1");
        let v6 = &Endpoint::from("[::1]:4000".parse::<SocketAddr>().unwrap());
        assert_eq!(l.with_addr(v6)[1], "https://[::1]:4000/x?y=1");
        assert_eq!(l.spec(v6).target(), &given("https://[::1]:4000/x?y=1"));
        let l = LoadLine::parse("http -c 2 --new-connection").unwrap();
        assert_eq!(l.spec(a).target(), &given("http://127.0.0.1:4000/"));
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
    fn the_line_is_parsed_once_and_errors_show_no_stand_in_address() {
        // The spec keeps its slot until filled; filling never parses again.
        let l = LoadLine::parse("tcp-rr -c 2").unwrap();
        assert_eq!(l.spec.target(), &Target::Slot("ADDR".into()));
        let l = LoadLine::parse("tcp-rr 127.0.0.1:6379").unwrap();
        assert_eq!(l.explicit(), Some("127.0.0.1:6379"));
        let a = &Endpoint::from("127.0.0.1:4000".parse::<SocketAddr>().unwrap());
        assert_eq!(l.spec(a).target(), &given("127.0.0.1:6379"));
        for (bad, says) in [
            ("tcp-rr -c x", "load tcp-rr ADDR -c x: "),
            ("nonsense", "load nonsense: "),
            ("http https://ADDR:80/", "leave the port out"),
        ] {
            let e = LoadLine::parse(bad).unwrap_err();
            let text = format!("{e:#}");
            assert!(text.contains(says), "{bad}: {text}");
            assert!(!text.contains("127.0.0.1:9"), "{bad}: {text}");
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
