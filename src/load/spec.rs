//! The load spec: what a `sockscope load` command line (or a load line
//! such as profile's `--load`) describes, as plain values: which workload,
//! its options, and its [`Target`], which may still be a slot that is
//! filled ([`LoadSpec::fill`]) once the target listens.
//!
//! A workload registers itself (`registry.rs`, one line) as a
//! [`Workload`]: its name, its help text, its options (a `clap::Args`
//! struct in its own file) and how its target is written. Its options
//! implement [`Options`]: what the rest of sockscope asks of a load
//! without knowing which workload it is (the target, the connection
//! model, `--json`, the run itself). Nothing here matches on workload
//! names.

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{ArgMatches, Args, FromArgMatches};

use crate::endpoint::Endpoint;
use crate::error;
use crate::load::Load;
use crate::load::schedule::rate_plan::RatePlan;
use crate::values;

/// The word that stands for the target's address until it is known
/// (`tcp-rr ADDR -c 4`, `http https://ADDR/x`).
pub const PLACEHOLDER: &str = "ADDR";

/// How a workload writes its target on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// IP:PORT, [IPv6]:PORT or HOST:PORT.
    Addr,
    /// An http(s) URL whose authority is the address; a bare path (`/x`)
    /// is a URL on the address still to be filled.
    Url,
}

/// How a workload uses the network: what profile waits for (a listening
/// TCP socket or a bound UDP one) and whether it can sample the load's
/// connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnModel {
    /// TCP connections kept for the whole run (tcp-rr, http, redis,
    /// memcached).
    Persistent,
    /// A TCP connection per transaction (tcp-crr, http --new-connection).
    PerTransaction,
    /// Connected UDP sockets, request/response (udp-rr).
    Datagram,
    /// A one-way stream of datagrams (udp).
    UdpStream,
}

impl ConnModel {
    /// True for the UDP models: the target then needs a bound UDP socket,
    /// not a TCP listener.
    pub fn is_udp(self) -> bool {
        matches!(self, Self::Datagram | Self::UdpStream)
    }
}

/// Where a load goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Given in full: an address, or for http a URL.
    Given(String),
    /// Still to be filled with the target's address: the word `ADDR`, an
    /// http URL on `ADDR` (`https://ADDR/x`), or (http) a bare path `/x`.
    Slot(String),
    /// Named by the workload's other options (http `--urls FILE`).
    InOptions,
}

impl Target {
    /// Classifies the target as written for a workload of `form`.
    fn of(text: Option<String>, form: TargetForm) -> Self {
        let Some(t) = text else {
            return Self::InOptions;
        };
        let slot = t == PLACEHOLDER
            || (form == TargetForm::Url && (t.contains(URL_PLACEHOLDER) || t.starts_with('/')));
        if slot { Self::Slot(t) } else { Self::Given(t) }
    }

    /// The text as written (None: [`Target::InOptions`]).
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Given(t) | Self::Slot(t) => Some(t),
            Self::InOptions => None,
        }
    }
}

/// `ADDR` inside an http URL (`http://ADDR/x`, `https://ADDR/`).
const URL_PLACEHOLDER: &str = "://ADDR";

/// A workload's own options, as its subcommand parsed them: everything
/// the rest of sockscope asks of a load, whichever workload it is.
pub trait Options: fmt::Debug + Send + Sync + OptionsClone {
    /// The positional `ADDR` of a workload whose target is one: with it,
    /// the target's defaults below need nothing else.
    fn address(&mut self) -> Option<&mut String> {
        None
    }

    /// The driver's options of a TCP-driver workload: with them, the
    /// defaults of `json` and `warmup` need nothing else.
    fn driver(&self) -> Option<&TcpArgs> {
        None
    }

    /// Takes the target as written out of the options (`ADDR`,
    /// `127.0.0.1:6379`, an http URL); None when other options name it
    /// (http `--urls`).
    fn take_target(&mut self) -> Option<String> {
        self.address().map(std::mem::take)
    }

    /// Puts the target back, as the run will use it.
    fn set_target(&mut self, target: String) {
        if let Some(a) = self.address() {
            *a = target;
        }
    }

    /// How the load uses the network.
    fn conn(&self) -> ConnModel;

    /// Where `--json` goes, if anywhere.
    fn json(&self) -> Option<&Path> {
        self.driver().and_then(|t| t.json.as_deref())
    }

    /// `--warmup`, in seconds (0 for a workload without one).
    fn warmup(&self) -> f64 {
        self.driver().map_or(0.0, |t| t.warmup)
    }

    /// The HOST:PORT an explicit target connects to: `target` itself by
    /// default (http: the URL's host and port, or those of the first line
    /// of `--urls`).
    fn endpoint(&self, target: Option<&str>) -> Result<String> {
        Ok(target.unwrap_or_default().to_string())
    }

    /// Checks what only the workload checks (http's headers and
    /// `--ok-status`, udp-rr's request) before any target starts; the
    /// target is in place, possibly still on `ADDR`.
    fn check(&self) -> Result<()> {
        Ok(())
    }

    /// The run these options describe (the target in place); options that
    /// cannot make one are usage errors.
    fn into_load(self: Box<Self>) -> Result<Load>;
}

/// Cloning boxed [`Options`] (a spec is cloned when one load line runs
/// more than once, e.g. a profile's at each step).
pub trait OptionsClone {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn Options>;
}

impl<T: Options + Clone + 'static> OptionsClone for T {
    fn clone_box(&self) -> Box<dyn Options> {
        Box::new(self.clone())
    }
}

/// One entry of the workload registry.
pub trait Workload: Sync {
    /// Its subcommand (`tcp-rr`), also the report's `workload`.
    fn name(&self) -> &'static str;

    /// Its one-line help text.
    fn about(&self) -> &'static str;

    /// How its target is written.
    fn form(&self) -> TargetForm;

    /// Adds its arguments to `cmd`, its subcommand.
    fn args(&self, cmd: clap::Command) -> clap::Command;

    /// Its spec, from what its subcommand matched.
    fn spec(&self, m: &ArgMatches) -> Result<LoadSpec, clap::Error>;
}

/// The [`Workload`] of an options struct `O`: what a workload file
/// declares as its `static WORKLOAD`.
pub struct Registered<O> {
    name: &'static str,
    about: &'static str,
    form: TargetForm,
    options: PhantomData<fn() -> O>,
}

impl<O> Registered<O> {
    /// A workload named `name` (its subcommand), described by `about`,
    /// whose target is written as `form`.
    pub const fn new(name: &'static str, about: &'static str, form: TargetForm) -> Self {
        Self {
            name,
            about,
            form,
            options: PhantomData,
        }
    }
}

impl<O: Options + Args + FromArgMatches + 'static> Workload for Registered<O> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn form(&self) -> TargetForm {
        self.form
    }

    fn args(&self, cmd: clap::Command) -> clap::Command {
        O::augment_args(cmd)
    }

    fn spec(&self, m: &ArgMatches) -> Result<LoadSpec, clap::Error> {
        Ok(LoadSpec::new(
            self.name,
            self.form,
            Box::new(O::from_arg_matches(m)?),
        ))
    }
}

/// A load: one workload, its options, and its target.
#[derive(Debug)]
pub struct LoadSpec {
    workload: &'static str,
    form: TargetForm,
    target: Target,
    options: Box<dyn Options>,
}

impl Clone for LoadSpec {
    fn clone(&self) -> Self {
        Self {
            workload: self.workload,
            form: self.form,
            target: self.target.clone(),
            options: self.options.clone_box(),
        }
    }
}

impl LoadSpec {
    /// The spec of workload `workload` with `options` (their target taken
    /// out and classified).
    pub fn new(workload: &'static str, form: TargetForm, mut options: Box<dyn Options>) -> Self {
        let target = Target::of(options.take_target(), form);
        Self {
            workload,
            form,
            target,
            options,
        }
    }

    /// The workload's name (`tcp-rr`).
    pub fn workload(&self) -> &'static str {
        self.workload
    }

    /// How its target is written.
    pub fn form(&self) -> TargetForm {
        self.form
    }

    /// Where the load goes.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Fills a [`Target::Slot`] with `addr`: `ADDR` becomes the address
    /// (http: `http://ADDR/`), `://ADDR` in a URL its authority, and a
    /// bare path `/x` the URL `http://ADDR/x`. A given target is kept.
    /// On a Unix socket an http URL becomes `unix:PATH:/URI` (the form
    /// the http workload takes).
    pub fn fill(&mut self, addr: &Endpoint) {
        let Target::Slot(t) = &self.target else {
            return;
        };
        let filled = match (addr, self.form) {
            (Endpoint::Unix(_), TargetForm::Addr) => t.replace(PLACEHOLDER, &addr.to_string()),
            (Endpoint::Unix(_), TargetForm::Url) => {
                let uri = if t == PLACEHOLDER {
                    "/"
                } else if t.starts_with('/') {
                    t.as_str()
                } else {
                    t.split_once(URL_PLACEHOLDER)
                        .map_or("/", |(_, rest)| if rest.is_empty() { "/" } else { rest })
                };
                format!("{addr}:{uri}")
            }
            (Endpoint::Inet(addr), form) => Self::fill_inet(t, *addr, form),
        };
        self.target = Target::Given(filled);
    }

    fn fill_inet(t: &str, addr: SocketAddr, form: TargetForm) -> String {
        match form {
            TargetForm::Addr => t.replace(PLACEHOLDER, &addr.to_string()),
            TargetForm::Url if t == PLACEHOLDER => format!("http://{addr}/"),
            TargetForm::Url if t.starts_with('/') => format!("http://{addr}{t}"),
            TargetForm::Url => t.replacen(URL_PLACEHOLDER, &format!("://{addr}"), 1),
        }
    }

    /// How the load uses the network.
    pub fn conn(&self) -> ConnModel {
        self.options.conn()
    }

    /// True for the UDP workloads (udp, udp-rr).
    pub fn is_udp(&self) -> bool {
        self.conn().is_udp()
    }

    /// Where `--json` goes, if anywhere.
    pub fn json(&self) -> Option<&Path> {
        self.options.json()
    }

    /// Where `--json` goes, owned.
    pub fn json_path(&self) -> Option<PathBuf> {
        self.json().map(Path::to_path_buf)
    }

    /// `--warmup`, in seconds.
    pub fn warmup(&self) -> f64 {
        self.options.warmup()
    }

    /// The HOST:PORT a given target names (http: of its URL, or of the
    /// first line of `--urls`); None for a slot.
    pub fn endpoint(&self) -> Result<Option<String>> {
        match &self.target {
            Target::Slot(_) => Ok(None),
            t => self.options.endpoint(t.text()).map(Some),
        }
    }

    /// Checks what only the workload checks, before any target starts; a
    /// slot is checked as written (`http://ADDR/x`). Usage errors exit 2.
    pub fn check(&self) -> Result<()> {
        let mut options = self.options.clone_box();
        match (&self.target, self.form) {
            (Target::Slot(t), TargetForm::Url) => {
                let url = if t == PLACEHOLDER {
                    format!("http://{PLACEHOLDER}/")
                } else if t.starts_with('/') {
                    format!("http://{PLACEHOLDER}{t}")
                } else {
                    t.clone()
                };
                if url.contains(&format!("{URL_PLACEHOLDER}:")) {
                    return Err(error::usage(format!(
                        "`{t}`: ADDR stands for the target's address with its port; leave \
                         the port out"
                    )));
                }
                options.set_target(url);
            }
            (t, _) => {
                if let Some(text) = t.text() {
                    options.set_target(text.to_string());
                }
            }
        }
        options.check()
    }

    /// The run, with the target in place as it is now.
    pub fn into_load(self) -> Result<Load> {
        let mut options = self.options;
        if let Some(t) = self.target.text() {
            options.set_target(t.to_string());
        }
        options.into_load()
    }
}

/// The driver's options, shared by every request/response workload (tcp-rr,
/// tcp-crr, the protocol workloads, udp-rr).
#[derive(Clone, Debug, Args)]
pub struct TcpArgs {
    /// Connections (tcp-rr) or concurrent connect loops (tcp-crr).
    #[arg(short = 'c', long = "connections", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Worker threads, one epoll loop each (default: min(connections, CPUs)).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Measure for this long (default 10 s unless -n).
    #[arg(short = 'd', long, value_name = "SECS", value_parser = values::positive_secs, conflicts_with = "count")]
    pub duration: Option<f64>,
    /// Measure this many transactions instead of a duration.
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Run this long first and leave it out of the results.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = values::secs_or_zero)]
    pub warmup: f64,
    /// Open loop: this many transactions per second in total (5000, 5k),
    /// or a schedule that sets the run's length: '1000..20000 step 1000
    /// every 5s', '1000,5000,10000 every 10s', '0..50000 over 60s [every
    /// 5s]'. Latency is measured from the intended send time; a schedule
    /// reports each step apart (`steps`).
    #[arg(long, value_name = "RATE|SCHEDULE", value_parser = RatePlan::parse)]
    pub rate: Option<RatePlan>,
    /// Connect and response timeout.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = values::positive_secs)]
    pub timeout: f64,
    /// Spread connections over this many source addresses 127.0.0.2...
    /// (IPv4 loopback targets only; default: 16 for tcp-crr, 1 for tcp-rr).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub source_ips: Option<u32>,
    /// tcp-rr: open at most this many connections per second (so a server
    /// whose accept loop is slow is not handed a full listen backlog).
    #[arg(long, value_name = "PER_SEC", value_parser = values::rate)]
    pub connect_rate: Option<f64>,
    /// Open loop (--rate) on persistent connections: when a send is due
    /// and every connection has a request in flight, open another, up to N
    /// in all (as an open-loop generator must to keep its schedule against
    /// a slow target); the report says how many were added. Without it
    /// such a send waits for a free connection (`conn_wait`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_conns: Option<u32>,
    /// Errors tolerated before the run counts as failed (exit 1).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Write the full result as JSON (schema: docs/load-json.md); - for
    /// stdout (the summary then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Start the run (warm-up included) at this wall-clock instant, so that
    /// several generators start together (`sockscope merge` then aligns
    /// their seconds): RFC 3339 (2026-11-23T21:00:00Z, fractions and
    /// +HH:MM offsets allowed) or @UNIX_SECONDS[.FRACTION]. At most 24 h
    /// ahead; more than 1 s past is refused. Ctrl-C while waiting exits 130.
    #[arg(long, value_name = "TIME", value_parser = values::start_at)]
    pub start_at: Option<values::StartAt>,
    /// Write every measured transaction's send time (unix ns) and latency
    /// (ns) to FILE as CSV (`send_unix_ns,latency_ns`) at the end of the
    /// run; kept in memory, at most 16,777,216 transactions (256 MiB) per
    /// run: beyond that the file and the notes say it is partial.
    #[arg(long, value_name = "FILE")]
    pub full_log: Option<PathBuf>,
}
