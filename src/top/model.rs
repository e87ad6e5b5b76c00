//! What one screen of `sockscope top` shows, from two readings of the
//! anatomy's cumulative counts: per served port (and per endpoint the
//! anatomy names) the requests per second between them, the errors, the
//! server time's p50 and p99, and what the server time was made of.
//! Pure: the run loop hands it readings, the view draws it.

use crate::anatomy::Counts;
use crate::anatomy::counts::{NameCounts, Part, PortTurns, Transport, Wire};
use crate::probe::hist::Histogram;

/// Endpoints shown under a port, the busiest first; the rest are summed
/// into the port's own row only.
pub const MAX_ENDPOINTS_SHOWN: usize = 8;

/// One row: a port, or an endpoint under it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `tcp:8080`, or the endpoint's name (escaped, as the anatomy's
    /// tables write it).
    pub label: String,
    /// The port's transport and number (an endpoint's: its port's).
    pub port: (Transport, u16),
    /// Its protocol, when the anatomy parsed one.
    pub protocol: Option<&'static str>,
    /// Requests per second: commands where the anatomy names them
    /// (pipelined ones each count), else turns.
    pub rate: f64,
    /// Requests that failed in the interval: HTTP 5xx and gRPC non-OK
    /// statuses. None for protocols with no status the anatomy reads.
    pub errors: Option<u64>,
    /// Server time's median, ns (None: no timed request).
    pub p50_ns: Option<u64>,
    /// Server time's p99, ns.
    pub p99_ns: Option<u64>,
    /// Shares of the server time: queue wait, CPU wait, service, send
    /// (zeros when nothing was timed).
    pub parts: [f64; 4],
    /// An endpoint under a port (drawn indented).
    pub endpoint: bool,
}

/// How ports are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// Busiest first.
    #[default]
    Rate,
    /// Slowest p99 first.
    P99,
    /// Most errors first.
    Errors,
    /// By transport and port number.
    Port,
}

impl SortKey {
    /// The next key (the `s` key cycles through them).
    pub fn next(self) -> Self {
        match self {
            SortKey::Rate => SortKey::P99,
            SortKey::P99 => SortKey::Errors,
            SortKey::Errors => SortKey::Port,
            SortKey::Port => SortKey::Rate,
        }
    }

    /// Its name on screen and in `--sort`.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Rate => "req/s",
            SortKey::P99 => "p99",
            SortKey::Errors => "errors",
            SortKey::Port => "port",
        }
    }

    /// From `--sort`'s value.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "req/s" | "rate" | "rps" => Ok(SortKey::Rate),
            "p99" => Ok(SortKey::P99),
            "errors" => Ok(SortKey::Errors),
            "port" => Ok(SortKey::Port),
            _ => Err(format!("--sort {s}: one of rate, p99, errors, port")),
        }
    }
}

/// A port's group of rows: its own, then its endpoints'.
#[derive(Clone, Debug, PartialEq)]
pub struct PortGroup {
    /// The port's row.
    pub port: Row,
    /// Its busiest endpoints, at most [`MAX_ENDPOINTS_SHOWN`].
    pub endpoints: Vec<Row>,
    /// Endpoints not shown.
    pub hidden: usize,
}

fn quantiles(h: &Histogram) -> (Option<u64>, Option<u64>) {
    (h.quantile(0.5), h.quantile(0.99))
}

fn shares(sums: [u64; 4]) -> [f64; 4] {
    let total: u64 = sums.iter().sum();
    if total == 0 {
        return [0.0; 4];
    }
    sums.map(|s| s as f64 / total as f64)
}

fn has_status(w: Wire) -> bool {
    matches!(w, Wire::Http1 | Wire::Http2 | Wire::Grpc)
}

/// A name's failed requests: 5xx responses, and gRPC calls that ended
/// with a status other than OK (or none).
fn failed(n: &NameCounts) -> u64 {
    let grpc: u64 = n.grpc.iter().skip(1).sum();
    n.status[3] + grpc
}

fn endpoint_row(n: &NameCounts, secs: f64) -> Row {
    let (p50_ns, p99_ns) = quantiles(&n.histogram());
    let name = n.wire.name_text(&n.name);
    Row {
        label: if name.is_empty() {
            "(other)".into()
        } else {
            name
        },
        port: (n.transport, n.port),
        protocol: Some(n.wire.name()),
        rate: n.commands as f64 / secs,
        errors: has_status(n.wire).then(|| failed(n)),
        p50_ns,
        p99_ns,
        parts: shares(n.parts),
        endpoint: true,
    }
}

fn port_row(p: &PortTurns, names: &[&NameCounts], secs: f64) -> Row {
    let (p50_ns, p99_ns) = quantiles(&p.histogram(Part::Server));
    let commands: u64 = names.iter().map(|n| n.commands).sum();
    let counted = names.iter().any(|n| n.commands > 0);
    let with_status = names.iter().any(|n| has_status(n.wire));
    let protocol = names.first().map(|n| n.wire.name());
    let sums = [0, 1, 2, 3].map(|i| p.sum_ns[i]);
    Row {
        label: format!("{}:{}", p.transport.name(), p.port),
        port: (p.transport, p.port),
        protocol,
        rate: if counted { commands } else { p.turns } as f64 / secs,
        errors: with_status.then(|| names.iter().map(|n| failed(n)).sum()),
        p50_ns,
        p99_ns,
        parts: shares(sums),
        endpoint: false,
    }
}

/// The screen's groups from the counts between two readings `secs`
/// apart (`delta` = later.since(earlier)), sorted by `key`.
pub fn groups(delta: &Counts, secs: f64, key: SortKey) -> Vec<PortGroup> {
    let secs = if secs > 0.0 { secs } else { 1.0 };
    let mut out: Vec<PortGroup> = delta
        .ports
        .iter()
        .map(|p| {
            let names: Vec<&NameCounts> = delta
                .names
                .iter()
                .filter(|n| n.port == p.port && n.transport == p.transport)
                .collect();
            let mut endpoints: Vec<Row> = names
                .iter()
                .filter(|n| n.commands > 0 || n.turns > 0)
                .map(|n| endpoint_row(n, secs))
                .collect();
            endpoints.sort_by(|a, b| order(a, b, SortKey::Rate));
            let hidden = endpoints.len().saturating_sub(MAX_ENDPOINTS_SHOWN);
            endpoints.truncate(MAX_ENDPOINTS_SHOWN);
            PortGroup {
                port: port_row(p, &names, secs),
                endpoints,
                hidden,
            }
        })
        .collect();
    out.sort_by(|a, b| order(&a.port, &b.port, key));
    out
}

fn order(a: &Row, b: &Row, key: SortKey) -> std::cmp::Ordering {
    let by_port = a.port.cmp(&b.port);
    match key {
        SortKey::Rate => b.rate.total_cmp(&a.rate).then(by_port),
        SortKey::P99 => b.p99_ns.cmp(&a.p99_ns).then(by_port),
        SortKey::Errors => b.errors.cmp(&a.errors).then(by_port),
        SortKey::Port => by_port,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hist;

    fn port(n: u16, turns: u64, server_ns: u64, parts: [u64; 4]) -> PortTurns {
        let mut p = PortTurns::empty(n, Transport::Tcp);
        p.turns = turns;
        for (i, v) in parts.iter().enumerate() {
            p.sum_ns[i] = *v;
        }
        p.hist[Part::Server as usize][hist::bucket_of(server_ns)] = turns;
        p.max_ns[Part::Server as usize] = server_ns;
        p
    }

    fn name(port: u16, wire: Wire, text: &str, commands: u64, status: [u64; 4]) -> NameCounts {
        let mut n = NameCounts::empty(port, Transport::Tcp, wire, text.as_bytes().to_vec());
        n.commands = commands;
        n.turns = commands;
        n.status = status;
        n
    }

    fn counts(ports: Vec<PortTurns>, names: Vec<NameCounts>) -> Counts {
        let mut c = Counts::empty();
        c.ports = ports;
        c.names = names;
        c
    }

    #[test]
    fn a_ports_rate_is_its_turns_per_second_when_no_protocol_names_them() {
        let c = counts(vec![port(7, 2_000, 300_000, [1, 1, 6, 2])], vec![]);
        let g = groups(&c, 2.0, SortKey::Rate);
        assert_eq!(g.len(), 1);
        let r = &g[0].port;
        assert_eq!(r.label, "tcp:7");
        assert!((r.rate - 1_000.0).abs() < 1e-9);
        assert_eq!(r.errors, None);
        assert!(r.p50_ns.unwrap() >= 250_000 && r.p50_ns.unwrap() <= 350_000);
        assert!((r.parts[2] - 0.6).abs() < 1e-9);
        assert!(g[0].endpoints.is_empty());
    }

    #[test]
    fn http_endpoints_count_commands_and_5xx_and_sort_under_their_port() {
        let c = counts(
            vec![port(80, 100, 1_000_000, [0, 0, 1, 0])],
            vec![
                name(80, Wire::Http1, "GET /a", 60, [55, 0, 0, 5]),
                name(80, Wire::Http1, "POST /b", 40, [40, 0, 0, 0]),
            ],
        );
        let g = groups(&c, 1.0, SortKey::Rate);
        assert_eq!(g[0].port.errors, Some(5));
        assert!((g[0].port.rate - 100.0).abs() < 1e-9);
        let names: Vec<&str> = g[0].endpoints.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(names, ["GET /a", "POST /b"]);
        assert_eq!(g[0].endpoints[0].errors, Some(5));
    }

    #[test]
    fn pipelined_commands_each_count() {
        let c = counts(
            vec![port(6379, 10, 50_000, [0, 0, 1, 0])],
            vec![name(6379, Wire::Resp, "GET", 160, [0; 4])],
        );
        let g = groups(&c, 1.0, SortKey::Rate);
        assert!((g[0].port.rate - 160.0).abs() < 1e-9);
        assert_eq!(g[0].port.errors, None, "RESP has no status read");
    }

    #[test]
    fn sort_keys_order_the_ports() {
        let c = counts(
            vec![
                port(1, 10, 9_000_000, [0, 0, 1, 0]),
                port(2, 500, 10_000, [0, 0, 1, 0]),
            ],
            vec![],
        );
        let labels = |k| -> Vec<String> {
            groups(&c, 1.0, k)
                .into_iter()
                .map(|g| g.port.label)
                .collect()
        };
        assert_eq!(labels(SortKey::Rate), ["tcp:2", "tcp:1"]);
        assert_eq!(labels(SortKey::P99), ["tcp:1", "tcp:2"]);
        assert_eq!(labels(SortKey::Port), ["tcp:1", "tcp:2"]);
        assert_eq!(SortKey::parse("p99"), Ok(SortKey::P99));
        assert!(SortKey::parse("x").is_err());
        let mut k = SortKey::Rate;
        for _ in 0..4 {
            k = k.next();
        }
        assert_eq!(k, SortKey::Rate);
    }

    #[test]
    fn a_port_with_many_endpoints_shows_the_busiest_and_counts_the_rest() {
        let names = (0..20)
            .map(|i| name(80, Wire::Http1, &format!("GET /{i}"), i + 1, [0; 4]))
            .collect();
        let c = counts(vec![port(80, 210, 1_000, [0, 0, 1, 0])], names);
        let g = groups(&c, 1.0, SortKey::Rate);
        assert_eq!(g[0].endpoints.len(), MAX_ENDPOINTS_SHOWN);
        assert_eq!(g[0].hidden, 20 - MAX_ENDPOINTS_SHOWN);
        assert_eq!(g[0].endpoints[0].label, "GET /19");
    }

    #[test]
    fn zero_seconds_does_not_divide_by_zero() {
        let c = counts(vec![port(7, 5, 1_000, [0, 0, 1, 0])], vec![]);
        let g = groups(&c, 0.0, SortKey::Rate);
        assert!(g[0].port.rate.is_finite());
    }
}
