//! The options of the key-value workloads, redis and memcached: commands
//! built from templates over a key space (docs/load.md, "Key-value
//! workloads"), and the parsers of the values only they take (`--ratio`,
//! `--key-dist`). `keyspace` turns them into templates, keys and the ratio
//! schedule; each protocol's file registers its own workload over them
//! ([`KvOptions`] of its [`KvLoad`]).

use std::fmt;
use std::marker::PhantomData;

use anyhow::Result;
use clap::{Args, FromArgMatches};

use crate::load::Load;
use crate::load::spec::{ConnModel, Options, TcpArgs};

/// A key-value protocol: how its file makes a run of the shared options
/// and of its own.
pub trait KvLoad: Send + 'static {
    /// The options only this protocol takes (redis: `--auth`, `--user`,
    /// `--hello`; [`NoOptions`] for none).
    type Own: Args + FromArgMatches + Clone + fmt::Debug + Send + Sync + 'static;

    /// The run of `a` and `own` (the target in place).
    fn load(a: KvArgs, own: Self::Own) -> Result<Load>;
}

/// A protocol with no options of its own (memcached).
#[derive(Args, Clone, Debug, Default)]
pub struct NoOptions {}

/// The options of key-value protocol `P`: [`KvArgs`] and its own, run by
/// `P`.
#[derive(Args)]
pub struct KvOptions<P: KvLoad> {
    /// The options every key-value workload takes.
    #[command(flatten)]
    pub kv: KvArgs,
    /// The protocol's own.
    #[command(flatten)]
    pub own: P::Own,
    #[arg(skip)]
    protocol: PhantomData<fn() -> P>,
}

impl<P: KvLoad> Clone for KvOptions<P> {
    fn clone(&self) -> Self {
        Self {
            kv: self.kv.clone(),
            own: self.own.clone(),
            protocol: PhantomData,
        }
    }
}

impl<P: KvLoad> fmt::Debug for KvOptions<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KvOptions")
            .field("kv", &self.kv)
            .field("own", &self.own)
            .finish()
    }
}

impl<P: KvLoad> Options for KvOptions<P> {
    fn address(&mut self) -> Option<&mut String> {
        Some(&mut self.kv.addr)
    }

    fn conn(&self) -> ConnModel {
        ConnModel::Persistent
    }

    fn driver(&self) -> Option<&TcpArgs> {
        Some(&self.kv.tcp)
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        let this = *self;
        P::load(this.kv, this.own)
    }
}

/// How a key-value workload picks the key of each request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipf with this exponent: key 0 the most frequent, key k about
    /// 1/(k+1)^S as frequent.
    Zipf(f64),
}

impl std::fmt::Display for KeyDist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uniform => f.write_str("uniform"),
            Self::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// Keys in the key space when `--keys` is not given.
pub const DEFAULT_KEYS: u64 = 100_000;
/// The largest `--keys`.
pub const MAX_KEYS: u64 = 1_000_000_000_000;
/// Bytes of `{value}` when `--value-size` is not given.
pub const DEFAULT_VALUE_SIZE: u32 = 32;
/// The largest `--value-size`.
pub const MAX_VALUE_SIZE: u32 = 64 << 20;

/// A `--ratio`: one weight per command, in their order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ratio(pub Vec<u32>);

/// `load redis` and `load memcached` options: commands built from
/// templates over a key space (docs/load.md, "Key-value workloads").
#[derive(Clone, Debug, Args)]
pub struct KvArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// A command template, repeatable: words separated by spaces, with
    /// the fields {key} (a key of the key space) and {value} (--value-size
    /// bytes); {{ and }} are literal braces. Default: redis
    /// 'SET key:{key} {value}' and 'GET key:{key}', memcached
    /// 'set key:{key} {value}' and 'get key:{key}', at --ratio 1:10.
    #[arg(long = "command", value_name = "TEMPLATE")]
    pub commands: Vec<String>,
    /// How often each --command is sent, in their order (e.g. 1:10: one
    /// SET per ten GETs); default 1 each (1:10 for the default commands).
    #[arg(long, value_name = "A:B:...", value_parser = ratio)]
    pub ratio: Option<Ratio>,
    /// Keys in the key space ({key} is 0 to N-1, zero-padded to one width).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEYS, value_parser = clap::value_parser!(u64).range(1..=MAX_KEYS))]
    pub keys: u64,
    /// Key distribution: uniform, or zipf:S (S > 0, e.g. zipf:0.99; key 0
    /// the hottest).
    #[arg(long, value_name = "uniform|zipf:S", default_value = "uniform", value_parser = key_dist)]
    pub key_dist: KeyDist,
    /// Bytes of {value}.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_VALUE_SIZE, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_VALUE_SIZE)))]
    pub value_size: u32,
    /// Requests in flight per connection.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
}

/// Most slots a --ratio may add up to: the schedule it becomes is a table
/// of that many entries.
pub const MAX_RATIO_SUM: u64 = 1 << 20;

/// A --ratio of the key-value workloads: `A:B:...`, one whole number per
/// command, at least one of them > 0, adding up to at most
/// [`MAX_RATIO_SUM`]. That it has one part per command is checked when
/// the commands are known.
pub fn ratio(s: &str) -> Result<Ratio, String> {
    let parts = s
        .split(':')
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}`: each part of a ratio is a whole number (e.g. 1:10)"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    let sum: u64 = parts.iter().map(|&p| u64::from(p)).sum();
    if sum == 0 {
        return Err(format!("`{s}`: at least one part must be > 0"));
    }
    if sum > MAX_RATIO_SUM {
        return Err(format!(
            "`{s}`: the parts add up to {sum}, more than {MAX_RATIO_SUM}"
        ));
    }
    Ok(Ratio(parts))
}

/// A --key-dist: `uniform` or `zipf:S` with a finite exponent S in (0, 10].
pub fn key_dist(s: &str) -> Result<KeyDist, String> {
    if s == "uniform" {
        return Ok(KeyDist::Uniform);
    }
    let Some(exp) = s.strip_prefix("zipf:") else {
        return Err(format!("`{s}`: give uniform or zipf:S (e.g. zipf:0.99)"));
    };
    match exp.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 10.0 => Ok(KeyDist::Zipf(v)),
        _ => Err(format!(
            "`{s}`: the zipf exponent must be a number > 0 and <= 10 (e.g. zipf:0.99)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_key_distributions_are_checked() {
        assert_eq!(ratio("1:10"), Ok(Ratio(vec![1, 10])));
        assert_eq!(ratio("3"), Ok(Ratio(vec![3])));
        assert_eq!(ratio("0:1"), Ok(Ratio(vec![0, 1])));
        for bad in ["", "1:", ":1", "a:b", "0:0", "-1:2", "1.5:1", "1048576:1"] {
            assert!(ratio(bad).is_err(), "{bad}");
        }
        assert_eq!(key_dist("uniform"), Ok(KeyDist::Uniform));
        assert_eq!(key_dist("zipf:0.99"), Ok(KeyDist::Zipf(0.99)));
        for bad in [
            "zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:inf", "zipf:11", "normal",
        ] {
            assert!(key_dist(bad).is_err(), "{bad}");
        }
    }
}
