//! The `--path` spec: `rtt=20ms jitter=1ms loss=0.1% rate=1gbit limit=1000`
//! (space or comma separated), or `loopback` for no path.

pub use crate::report::path::fmt_rate;
use std::fmt;
use std::time::Duration;

use anyhow::Result;

use crate::error;

/// The accepted syntax, printed with every spec error.
pub const SYNTAX: &str = "\
accepted: --path 'rtt=DUR [jitter=DUR] [loss=PCT%] [rate=RATE] [limit=PACKETS]' (space or comma \
separated) or --path loopback; DUR is a number with ns, us, ms or s (rtt=20ms); jitter at most \
rtt/2; PCT in [0, 100] (loss=0.1%); RATE a positive number with bit, kbit, mbit or gbit \
(rate=1gbit, decimal prefixes as tc); PACKETS the queue bound per direction, at least 1 \
(default 1000, netem's)";

/// netem's default queue bound, in packets per direction.
pub const DEFAULT_LIMIT: usize = 1000;
/// The largest RTT accepted (a minute: anything longer is a typo).
const MAX_RTT: Duration = Duration::from_secs(60);
/// The largest queue bound accepted per direction.
const MAX_LIMIT: usize = 1_000_000;

/// One emulated path, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct PathSpec {
    /// Round-trip time added: half in each direction.
    pub rtt: Duration,
    /// Per-direction delay variation: each packet's one-way delay is
    /// rtt/2 plus a sample uniform in [-jitter, +jitter] (netem's default
    /// distribution).
    pub jitter: Duration,
    /// Probability that a packet is dropped, per packet and direction
    /// (0.001 for `loss=0.1%`).
    pub loss: f64,
    /// Link rate in bits per second per direction; None: unlimited.
    pub rate_bps: Option<u64>,
    /// Packets queued per direction before arrivals are dropped.
    pub limit: usize,
}

fn bad(msg: impl fmt::Display) -> anyhow::Error {
    error::usage(format!("--path: {msg}; {SYNTAX}"))
}

/// Splits `12.5ms` into (12.5, "ms").
fn number_unit(v: &str) -> Option<(f64, &str)> {
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let n: f64 = v[..end].parse().ok()?;
    n.is_finite().then_some((n, &v[end..]))
}

fn duration(key: &str, v: &str) -> Result<Duration> {
    let (n, unit) = number_unit(v).ok_or_else(|| bad(format!("{key}={v}: not a duration")))?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "" => return Err(bad(format!("{key}={v}: give a unit (ns, us, ms, s)"))),
        u => return Err(bad(format!("{key}={v}: unknown unit {u:?}"))),
    };
    let secs = n * scale;
    if secs > MAX_RTT.as_secs_f64() {
        return Err(bad(format!("{key}={v}: longer than a minute")));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn rate(v: &str) -> Result<u64> {
    let (n, unit) = number_unit(v).ok_or_else(|| bad(format!("rate={v}: not a rate")))?;
    if n <= 0.0 {
        return Err(bad(format!("rate={v}: a rate must be positive")));
    }
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "" => {
            return Err(bad(format!(
                "rate={v}: give a unit (bit, kbit, mbit, gbit)"
            )));
        }
        u => return Err(bad(format!("rate={v}: unknown unit {u:?}"))),
    };
    let bps = n * scale;
    if bps < 1.0 {
        return Err(bad(format!("rate={v}: a rate must be positive")));
    }
    if bps > 1e13 {
        return Err(bad(format!("rate={v}: over 10 tbit")));
    }
    Ok(bps.round() as u64)
}

fn loss(v: &str) -> Result<f64> {
    let n: f64 = v
        .strip_suffix('%')
        .unwrap_or(v)
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| bad(format!("loss={v}: not a percentage")))?;
    if !(0.0..=100.0).contains(&n) {
        return Err(bad(format!("loss={v}: must lie in [0%, 100%]")));
    }
    Ok(n / 100.0)
}

impl PathSpec {
    /// Parses a spec; `loopback` (alone) is None. Errors are usage errors
    /// (exit 2) that end with the accepted syntax.
    pub fn parse(text: &str) -> Result<Option<PathSpec>> {
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Err(bad("empty"));
        }
        if words == ["loopback"] {
            return Ok(None);
        }
        let mut seen: Vec<&str> = Vec::new();
        let (mut rtt, mut jitter, mut lossp, mut rate_bps, mut limit) =
            (None, Duration::ZERO, 0.0, None, DEFAULT_LIMIT);
        for w in words {
            if w == "loopback" {
                return Err(bad("loopback stands alone"));
            }
            let Some((k, v)) = w.split_once('=') else {
                return Err(bad(format!("{w:?} is not KEY=VALUE")));
            };
            if seen.contains(&k) {
                return Err(bad(format!("{k} given twice")));
            }
            seen.push(k);
            match k {
                "rtt" => rtt = Some(duration(k, v)?),
                "jitter" => jitter = duration(k, v)?,
                "loss" => lossp = loss(v)?,
                "rate" => rate_bps = Some(rate(v)?),
                "limit" => {
                    limit = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            bad(format!("limit={v}: a packet count in [1, {MAX_LIMIT}]"))
                        })?
                }
                _ => return Err(bad(format!("unknown key {k:?}"))),
            }
        }
        let rtt = rtt.ok_or_else(|| bad("rtt is required"))?;
        if jitter * 2 > rtt {
            return Err(bad(format!(
                "jitter={} exceeds rtt/2 ({}): a one-way delay would go negative",
                fmt_duration(jitter),
                fmt_duration(rtt / 2)
            )));
        }
        Ok(Some(PathSpec {
            rtt,
            jitter,
            loss: lossp,
            rate_bps,
            limit,
        }))
    }

    /// The one-way base delay (rtt/2).
    pub fn one_way(&self) -> Duration {
        self.rtt / 2
    }
}

/// `20ms`, `1.5ms`, `250us`, `2s`: the shortest exact unit the spec syntax
/// reads back.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".into()
    } else if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

impl fmt::Display for PathSpec {
    /// The canonical spec (parses back to the same value).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rtt={}", fmt_duration(self.rtt))?;
        if !self.jitter.is_zero() {
            write!(f, " jitter={}", fmt_duration(self.jitter))?;
        }
        if self.loss > 0.0 {
            write!(f, " loss={}%", self.loss * 100.0)?;
        }
        if let Some(r) = self.rate_bps {
            write!(f, " rate={}", fmt_rate(r))?;
        }
        write!(f, " limit={}", self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> String {
        let e = PathSpec::parse(text).unwrap_err();
        let exit = e
            .downcast_ref::<crate::error::Exit>()
            .expect("a usage error");
        assert_eq!(exit.code, 2, "{text}");
        exit.message.clone()
    }

    #[test]
    fn parses_the_full_grammar_with_spaces_or_commas() {
        let a = PathSpec::parse("rtt=20ms jitter=1ms loss=0.1% rate=1gbit limit=1000")
            .unwrap()
            .unwrap();
        let b = PathSpec::parse("rtt=20ms,jitter=1000us,loss=0.1,rate=1000mbit")
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rtt, Duration::from_millis(20));
        assert_eq!(a.jitter, Duration::from_millis(1));
        assert!((a.loss - 0.001).abs() < 1e-12);
        assert_eq!(a.rate_bps, Some(1_000_000_000));
        assert_eq!(a.limit, 1000);
        assert_eq!(a.one_way(), Duration::from_millis(10));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "rtt=20ms",
            "rtt=1500us jitter=250us loss=2.5% rate=10mbit limit=50",
            "rtt=2s rate=1500kbit",
        ] {
            let p = PathSpec::parse(s).unwrap().unwrap();
            let again = PathSpec::parse(&p.to_string()).unwrap().unwrap();
            assert_eq!(p, again, "{s} -> {p}");
        }
    }

    #[test]
    fn loopback_is_no_path() {
        assert_eq!(PathSpec::parse("loopback").unwrap(), None);
        assert_eq!(PathSpec::parse(" loopback ").unwrap(), None);
    }

    #[test]
    fn bad_specs_are_usage_errors_with_the_syntax() {
        for (s, why) in [
            ("", "empty"),
            ("jitter=1ms", "rtt is required"),
            ("rtt=20", "give a unit"),
            ("rtt=20ms rate=0mbit", "must be positive"),
            ("rtt=20ms rate=0", "must be positive"),
            ("rtt=20ms rate=10mbps", "unknown unit"),
            ("rtt=20ms loss=101%", "[0%, 100%]"),
            ("rtt=20ms loss=-1%", "must lie in [0%, 100%]"),
            ("rtt=20ms jitter=11ms", "exceeds rtt/2"),
            ("rtt=20ms delay=1ms", "unknown key"),
            ("rtt=20ms rtt=10ms", "given twice"),
            ("rtt=20ms limit=0", "limit=0"),
            ("rtt", "not KEY=VALUE"),
            ("loopback rtt=1ms", "stands alone"),
            ("rtt=2min", "unknown unit"),
        ] {
            let m = code(s);
            assert!(m.contains(why), "{s:?}: {m}");
            assert!(m.contains("accepted: --path"), "{s:?}: {m}");
        }
    }
}
