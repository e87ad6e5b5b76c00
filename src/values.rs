//! The value parsers and value types every command shares, below the
//! CLI so that the modules owning the options (load's workloads) can name
//! them too: seconds, rates, wall-clock instants ([`StartAt`]), addresses
//! and escaped strings. One parser per accepted range, named by that
//! range, so two options that take "seconds" say which seconds they take
//! (a warm-up may be 0, a timeout may not; serve's timeouts stop at a day,
//! the others at a year). The parsers only the CLI uses (message sizes,
//! intervals) are in `cli/values.rs`, which re-exports these; a parser
//! that builds a module's own type lives beside that type (load's
//! `--ratio` and `--key-dist` in `load/kv.rs`).
//!
//! The `fn(&str) -> Result<T, String>` parsers are clap `value_parser`s:
//! clap prints their message as `invalid value 'X' for '--opt'` (exit 2).
//! [`resolve`] and [`unescape`] run after parsing, on values clap keeps as
//! strings, and return usage errors (exit 2) themselves.

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::Result;

use crate::error;

/// A day in seconds: the bound of serve's timeouts.
const DAY: f64 = 86_400.0;
/// A year in seconds: the bound of every other duration.
const YEAR: f64 = 365.0 * DAY;

/// Parses seconds in `[0, max]` (`zero_ok`) or `(0, max]`, `max_name`
/// naming the bound in the message.
fn secs_in(s: &str, zero_ok: bool, max: f64, max_name: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    if !(v.is_finite() && low_ok && v <= max) {
        return Err(if zero_ok {
            format!("`{s}`: must be between 0 and {max_name}")
        } else {
            format!("`{s}`: must be > 0 and at most {max_name}")
        });
    }
    Ok(v)
}

/// Seconds in (0, a year]: durations and timeouts (trace `-d`, profile
/// `--ready-timeout`, load `-d`, `--timeout`, `--fin-timeout`).
pub fn positive_secs(s: &str) -> Result<f64, String> {
    secs_in(s, false, YEAR, "a year")
}

/// Seconds in [0, a year]: a span that may be left out (load `--warmup`).
pub fn secs_or_zero(s: &str) -> Result<f64, String> {
    secs_in(s, true, YEAR, "a year")
}

/// Seconds in (0, a day]: serve relay's `--connect-timeout` and
/// `--idle-timeout`.
pub fn positive_secs_up_to_a_day(s: &str) -> Result<f64, String> {
    secs_in(s, false, DAY, "86400 seconds")
}

/// Seconds in [0, a day], 0 meaning never: serve udp-sink's
/// `--idle-timeout`.
pub fn secs_up_to_a_day_or_zero(s: &str) -> Result<f64, String> {
    secs_in(s, true, DAY, "86400 seconds")
}

/// Events per second in (0, 1e9]: load `--rate`, `--connect-rate`.
pub fn rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a rate"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1e9) {
        return Err(format!("`{s}`: the rate must be > 0 and <= 1e9 per second"));
    }
    Ok(v)
}

/// A wall-clock instant given on the command line (load `--start-at`): the
/// text as given, and the instant in ns since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartAt {
    /// As given (`2026-11-23T21:00:00Z`, `@1795467600.5`).
    pub given: String,
    /// The instant, ns since the Unix epoch.
    pub unix_ns: u64,
}

/// How far ahead `--start-at` may lie: a start a day away is a typo (a
/// wrong date), not a plan.
pub const START_AT_MAX_AHEAD_S: u64 = 86_400;
/// How late `--start-at` may already be when sockscope reads it: a
/// generator started a little after the common instant still starts (at
/// once, its lateness recorded); one later than this would not be aligned
/// with the others.
pub const START_AT_MAX_LATE_S: f64 = 1.0;

/// The current wall-clock time, ns since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Parses an absolute start time: RFC 3339 (`2026-11-23T21:00:00Z`,
/// fractional seconds allowed, `Z` or a `+HH:MM`/`-HH:MM` offset) or
/// `@UNIX_SECONDS[.FRACTION]`, and checks it against the clock now: more
/// than [`START_AT_MAX_AHEAD_S`] ahead or more than
/// [`START_AT_MAX_LATE_S`] past is refused.
pub fn start_at(s: &str) -> Result<StartAt, String> {
    start_at_from(s, unix_now_ns())
}

/// [`start_at`] with the clock's reading given (for tests).
pub fn start_at_from(s: &str, now_ns: u64) -> Result<StartAt, String> {
    let unix_ns = parse_instant(s.trim())?;
    let ahead = unix_ns as i128 - now_ns as i128;
    if ahead > i128::from(START_AT_MAX_AHEAD_S) * 1_000_000_000 {
        return Err(format!(
            "`{s}` is {:.0} s ahead; at most {START_AT_MAX_AHEAD_S} s (24 h) ahead is accepted",
            ahead as f64 / 1e9
        ));
    }
    if -ahead > (START_AT_MAX_LATE_S * 1e9) as i128 {
        return Err(format!(
            "`{s}` is already {:.3} s past (the clock reads {}); a start more than \
             {START_AT_MAX_LATE_S} s late would not be aligned with the other generators",
            -ahead as f64 / 1e9,
            humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(now_ns)
            )
        ));
    }
    Ok(StartAt {
        given: s.to_string(),
        unix_ns,
    })
}

const INSTANT_SYNTAX: &str = "expected RFC 3339 (2026-11-23T21:00:00Z, 2026-11-23T22:00:00.25+01:00) or @UNIX_SECONDS[.FRACTION]";

/// An instant in ns since the Unix epoch (see [`start_at`] for the forms).
fn parse_instant(s: &str) -> Result<u64, String> {
    if let Some(secs) = s.strip_prefix('@') {
        let (int, frac) = secs.split_once('.').unwrap_or((secs, ""));
        let bad = || format!("`{s}`: {INSTANT_SYNTAX}");
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || int.len() > 11 {
            return Err(bad());
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
            return Err(bad());
        }
        let whole: u64 = int.parse().map_err(|_| bad())?;
        let nanos: u64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse().map_err(|_| bad())?
        };
        // Past 2554 saturates: refused as too far ahead by the caller.
        return Ok(whole
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(nanos))
            .unwrap_or(u64::MAX));
    }
    // humantime reads RFC 3339 in UTC (`Z`); an explicit offset is taken
    // off here and applied after.
    let (utc, offset_s) = split_offset(s).ok_or_else(|| format!("`{s}`: {INSTANT_SYNTAX}"))?;
    let t = humantime::parse_rfc3339(&utc).map_err(|e| format!("`{s}`: {e}; {INSTANT_SYNTAX}"))?;
    let ns = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("`{s}` is before 1970"))?
        .as_nanos() as i128
        - i128::from(offset_s) * 1_000_000_000;
    if ns < 0 {
        return Err(format!("`{s}` is before 1970"));
    }
    // Past 2554 (u64 ns): as far ahead as can be told, which the caller
    // refuses as too far.
    Ok(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// `...Z` -> (as is, 0); `...+HH:MM` / `...-HH:MM` -> (`...Z`, offset in
/// seconds east of UTC); None for anything else.
fn split_offset(s: &str) -> Option<(String, i64)> {
    if s.ends_with('Z') || s.ends_with('z') {
        return Some((format!("{}Z", &s[..s.len() - 1]), 0));
    }
    if s.len() < 6 || !s.is_char_boundary(s.len() - 6) {
        return None;
    }
    let (head, off) = s.split_at(s.len() - 6);
    let sign = match off.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = off[1..].split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if h > 23 || m > 59 || !head.contains('T') {
        return None;
    }
    Some((format!("{head}Z"), sign * (h * 3600 + m * 60)))
}

/// Resolves ADDR (`IP:PORT`, `[IPv6]:PORT` or `HOST:PORT`); a malformed or
/// unresolvable address is a usage error.
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    match addr.to_socket_addrs() {
        Ok(mut it) => it
            .next()
            .ok_or_else(|| error::usage(format!("`{addr}` resolves to no address"))),
        Err(e) => Err(error::usage(format!(
            "`{addr}` is not an address (IP:PORT, [IPv6]:PORT or HOST:PORT): {e}"
        ))),
    }
}

/// Decodes \r \n \t \\ \0 and \xHH escapes of option `what` (load
/// `--request`, `--expect`); a bad escape is a usage error naming the
/// option.
pub fn unescape(what: &str, s: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let Some(&c) = b.get(i + 1) else {
            return Err(error::usage(format!("{what} `{s}`: trailing backslash")));
        };
        i += 2;
        out.push(match c {
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'0' => 0,
            b'\\' => b'\\',
            b'x' => {
                let hex = s.get(i..i + 2).ok_or_else(|| {
                    error::usage(format!("{what} `{s}`: \\x needs two hex digits"))
                })?;
                i += 2;
                u8::from_str_radix(hex, 16).map_err(|_| {
                    error::usage(format!("{what} `{s}`: \\x{hex} is not two hex digits"))
                })?
            }
            other => {
                return Err(error::usage(format!(
                    "{what} `{s}`: unknown escape \\{}",
                    other as char
                )));
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_at_reads_rfc3339_offsets_and_unix_seconds() {
        // 2026-11-23T21:00:00Z
        let t = 1_795_467_600_000_000_000u64;
        let now = t - 5_000_000_000;
        let z = start_at_from("2026-11-23T21:00:00Z", now).unwrap();
        assert_eq!(z.unix_ns, t);
        let frac = start_at_from("2026-11-23T21:00:00.25Z", now).unwrap();
        assert_eq!(frac.unix_ns, t + 250_000_000);
        let off = start_at_from("2026-11-23T22:00:00+01:00", now).unwrap();
        assert_eq!(off.unix_ns, t);
        let unix = start_at_from("@1795467600.000000001", now).unwrap();
        assert_eq!(unix.unix_ns, t + 1);
        assert_eq!(start_at_from("@1795467600", now).unwrap().unix_ns, t);
        for bad in [
            "tomorrow",
            "@",
            "@12.3.4",
            "@-5",
            "2026-11-23 21:00",
            "@1.1234567891",
        ] {
            assert!(start_at_from(bad, now).is_err(), "{bad}");
        }
        // Beyond what u64 ns hold: too far ahead, not a wrap-around.
        for far in ["@99999999999", "2999-01-01T00:00:00Z"] {
            let e = start_at_from(far, now).unwrap_err();
            assert!(e.contains("24 h"), "{far}: {e}");
        }
    }

    #[test]
    fn start_at_refuses_far_future_and_past() {
        let t = 1_795_467_600_000_000_000u64;
        // 24 h ahead exactly is accepted; a second more is not.
        assert!(start_at_from("@1795467600", t - 86_400_000_000_000).is_ok());
        let e = start_at_from("@1795467600", t - 86_401_000_000_000).unwrap_err();
        assert!(e.contains("24 h"), "{e}");
        // Late by up to a second: still starts; by more: refused.
        assert!(start_at_from("@1795467600", t + 900_000_000).is_ok());
        let e = start_at_from("@1795467600", t + 1_500_000_000).unwrap_err();
        assert!(e.contains("already 1.500 s past"), "{e}");
    }

    #[test]
    fn unescape_decodes_escapes() {
        assert_eq!(unescape("--request", "PING\\r\\n").unwrap(), b"PING\r\n");
        assert_eq!(unescape("--request", "\\x00\\x41\\\\").unwrap(), b"\x00A\\");
        assert!(unescape("--request", "bad\\q").is_err());
        assert!(unescape("--request", "trailing\\").is_err());
        assert!(unescape("--request", "\\x4").is_err());
        // Every refusal names the option it came from.
        for bad in ["\\xZZ", "bad\\q", "trailing\\", "\\x4"] {
            let e = format!("{:#}", unescape("--expect", bad).unwrap_err());
            assert!(e.starts_with("--expect `"), "{e}");
        }
        let e = format!("{:#}", unescape("--expect", "\\xZZ").unwrap_err());
        assert!(e.contains("\\xZZ is not two hex digits"), "{e}");
    }

    #[test]
    fn each_seconds_parser_keeps_its_own_range() {
        // (0, a year]
        assert!(positive_secs("0").is_err());
        assert_eq!(positive_secs("0.5"), Ok(0.5));
        assert_eq!(positive_secs("31536000"), Ok(YEAR));
        assert!(positive_secs("31536001").is_err());
        // [0, a year]
        assert_eq!(secs_or_zero("0"), Ok(0.0));
        assert!(secs_or_zero("31536001").is_err());
        // (0, a day]
        assert!(positive_secs_up_to_a_day("0").is_err());
        assert_eq!(positive_secs_up_to_a_day("86400"), Ok(DAY));
        assert!(positive_secs_up_to_a_day("86401").is_err());
        // [0, a day]
        assert_eq!(secs_up_to_a_day_or_zero("0"), Ok(0.0));
        assert!(secs_up_to_a_day_or_zero("86401").is_err());
        for p in [
            positive_secs,
            secs_or_zero,
            positive_secs_up_to_a_day,
            secs_up_to_a_day_or_zero,
        ] {
            for bad in ["-1", "inf", "NaN", "x", ""] {
                assert!(p(bad).is_err(), "{bad}");
            }
        }
    }

    #[test]
    fn rates_are_bounded() {
        assert!(rate("0").is_err());
        assert_eq!(rate("1e9"), Ok(1e9));
        assert!(rate("1.1e9").is_err());
    }
}
