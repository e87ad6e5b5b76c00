//! `compare`'s endpoints: where both runs' anatomies named their requests
//! (RESP, memcached commands; issue 39), each endpoint's rate and server
//! time side by side, the ones whose p99 grew most first, so "which
//! requests got slower" is the first line to read.
//!
//! An endpoint is its protocol and name, and its port when a run served
//! that protocol on more than one (the same server on another port is the
//! same endpoint, as `compare` treats the same target on another port).

use std::fmt::Write as _;

use super::commands::Endpoint;
use super::profile::ProfileReport;
use super::units::fmt_ns;

/// Rows shown at most; the rest are summed in a closing line.
const MAX_ROWS: usize = 12;

/// Timed turns under which a p99 says little: fewer than 100 leave no
/// turn beyond it (docs/tail-percentiles.md).
const MIN_TURNS_P99: u64 = 100;

/// A p99 change smaller than this fraction is within the histogram's
/// resolution (two 6.25% buckets) and reads as unchanged.
const P99_RESOLUTION: f64 = 0.125;

/// One endpoint of either run, matched across the two.
struct Pair<'a> {
    key: String,
    a: Option<&'a Endpoint>,
    b: Option<&'a Endpoint>,
}

/// The key an endpoint is matched by (text, not yet escaped).
fn key(e: &Endpoint, by_port: bool) -> String {
    if by_port {
        format!("{} {} on {}", e.protocol, e.name, e.label())
    } else {
        format!("{} {}", e.protocol, e.name)
    }
}

/// Does `r` serve `protocol` on more than one port?
fn several_ports(r: &ProfileReport, protocol: &str) -> bool {
    let Some(a) = &r.anatomy else {
        return false;
    };
    let mut labels: Vec<String> = a
        .endpoints
        .iter()
        .filter(|e| e.protocol == protocol)
        .map(Endpoint::label)
        .collect();
    labels.sort();
    labels.dedup();
    labels.len() > 1
}

fn pairs<'a>(a: &'a ProfileReport, b: &'a ProfileReport) -> Vec<Pair<'a>> {
    let empty: &[Endpoint] = &[];
    let ea = a.anatomy.as_ref().map_or(empty, |x| &x.endpoints[..]);
    let eb = b.anatomy.as_ref().map_or(empty, |x| &x.endpoints[..]);
    let by_port = |e: &Endpoint| several_ports(a, &e.protocol) || several_ports(b, &e.protocol);
    let mut out: Vec<Pair> = Vec::new();
    for e in ea {
        out.push(Pair {
            key: key(e, by_port(e)),
            a: Some(e),
            b: None,
        });
    }
    for e in eb {
        let k = key(e, by_port(e));
        match out.iter_mut().find(|p| p.key == k && p.b.is_none()) {
            Some(p) => p.b = Some(e),
            None => out.push(Pair {
                key: k,
                a: None,
                b: Some(e),
            }),
        }
    }
    out
}

/// B's p99 relative to A's, where both were timed on enough turns.
fn p99_ratio(p: &Pair) -> Option<f64> {
    let (a, b) = (p.a?, p.b?);
    if a.turns < MIN_TURNS_P99 || b.turns < MIN_TURNS_P99 || a.server_p99_ns == 0 {
        return None;
    }
    Some(b.server_p99_ns as f64 / a.server_p99_ns as f64)
}

/// The change column: the p99's change in percent, "within resolution",
/// "n/m" (too few turns), "new" or "gone".
fn verdict(p: &Pair) -> String {
    match (p.a, p.b) {
        (None, Some(_)) => "new".into(),
        (Some(_), None) => "gone".into(),
        _ => match p99_ratio(p) {
            None => "n/m".into(),
            Some(r) if (r - 1.0).abs() < P99_RESOLUTION => "~".into(),
            Some(r) => format!("{:+.1}%", 100.0 * (r - 1.0)),
        },
    }
}

/// The endpoints table (not yet escaped: the names are peer bytes and the
/// caller escapes the whole text), or empty when neither run named any.
pub fn text(a: &ProfileReport, b: &ProfileReport) -> String {
    let mut ps = pairs(a, b);
    if ps.is_empty() {
        return String::new();
    }
    // Slower first (by the p99 ratio), then the unmatched, then by count.
    let count = |p: &Pair| p.a.map_or(0, |e| e.count) + p.b.map_or(0, |e| e.count);
    ps.sort_by(|x, y| {
        let rx = p99_ratio(x).unwrap_or(f64::NEG_INFINITY);
        let ry = p99_ratio(y).unwrap_or(f64::NEG_INFINITY);
        ry.total_cmp(&rx).then(count(y).cmp(&count(x)))
    });
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Endpoints (server time of the turns filed under each command; slower at p99 first)"
    );
    let _ = writeln!(
        s,
        "  {:<32} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "endpoint", "A /s", "B /s", "A p50", "B p50", "A p99", "B p99", "p99 change"
    );
    let rate = |e: Option<&Endpoint>| e.map_or("-".into(), |e| format!("{:.0}", e.rate_per_s));
    let time = |e: Option<&Endpoint>, f: fn(&Endpoint) -> u64| {
        e.filter(|e| e.turns > 0)
            .map_or("-".into(), |e| fmt_ns(f(e) as f64))
    };
    for p in ps.iter().take(MAX_ROWS) {
        let _ = writeln!(
            s,
            "  {:<32} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
            p.key,
            rate(p.a),
            rate(p.b),
            time(p.a, |e| e.server_p50_ns),
            time(p.b, |e| e.server_p50_ns),
            time(p.a, |e| e.server_p99_ns),
            time(p.b, |e| e.server_p99_ns),
            verdict(p)
        );
    }
    if ps.len() > MAX_ROWS {
        let _ = writeln!(
            s,
            "  ... and {} more endpoints (run.json's anatomy.endpoints has them all)",
            ps.len() - MAX_ROWS
        );
    }
    let _ = writeln!(
        s,
        "  p99 change: ~ within the histogram's resolution ({:.1}%); n/m: fewer than {} timed \
         turns in a run; a pipelined batch is one turn, timed as a whole",
        100.0 * P99_RESOLUTION,
        MIN_TURNS_P99
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    fn ep(name: &str, port: u16, turns: u64, p99: u64) -> Endpoint {
        Endpoint {
            port,
            transport: "tcp".into(),
            protocol: "resp".into(),
            name: name.into(),
            count: turns,
            turns,
            server_p50_ns: p99 / 2,
            server_p99_ns: p99,
            rate_per_s: turns as f64 / 10.0,
            ..Endpoint::default()
        }
    }

    fn with(endpoints: Vec<Endpoint>) -> ProfileReport {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        let mut a = fixtures::anatomy();
        a.endpoints = endpoints;
        r.anatomy = Some(a);
        r
    }

    #[test]
    fn the_endpoint_that_got_slower_comes_first_and_others_say_why_not() {
        let a = with(vec![
            ep("GET", 6379, 1000, 100_000),
            ep("SET", 6379, 1000, 100_000),
            ep("HGETALL", 6379, 50, 100_000),
            ep("DEL", 6379, 500, 100_000),
        ]);
        let b = with(vec![
            ep("GET", 6380, 1000, 105_000),
            ep("SET", 6380, 1000, 400_000),
            ep("HGETALL", 6380, 50, 900_000),
            ep("INCR", 6380, 500, 100_000),
        ]);
        let t = text(&a, &b);
        let lines: Vec<&str> = t.lines().skip(2).collect();
        // Another port, the same endpoints.
        assert!(lines[0].starts_with("  resp SET "), "{t}");
        assert!(lines[0].ends_with("+300.0%"), "{t}");
        let line = |k: &str| {
            *lines
                .iter()
                .find(|l| l.starts_with(&format!("  resp {k} ")))
                .unwrap_or_else(|| panic!("{k} in {t}"))
        };
        assert!(line("GET").ends_with(" ~"), "{t}");
        assert!(line("HGETALL").ends_with(" n/m"), "{t}");
        assert!(line("DEL").ends_with(" gone"), "{t}");
        assert!(line("INCR").ends_with(" new"), "{t}");
    }

    #[test]
    fn several_ports_keep_their_endpoints_apart_and_no_names_no_table() {
        let a = with(vec![
            ep("GET", 6379, 1000, 100_000),
            ep("GET", 6380, 1000, 200_000),
        ]);
        let t = text(&a, &a);
        assert!(t.contains("resp GET on tcp/6379"), "{t}");
        assert!(t.contains("resp GET on tcp/6380"), "{t}");
        let none = with(Vec::new());
        assert!(text(&none, &none).is_empty());
    }
}
