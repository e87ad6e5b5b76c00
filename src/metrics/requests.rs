//! The request anatomy's counts as metric families, the RED metrics an
//! agent exports per served port: requests answered (rate), their time at
//! the server (duration, a histogram with the same classic and native
//! buckets as the syscall latencies), and the four parts that make it up.
//!
//! The series are bounded by the anatomy's own limit on ports with
//! statistics of their own (`anatomy::DEFAULT_MAX_PORTS`, kept in the
//! kernel); turns on further ports are exported under `port="(other)"`.
//!
//! Where the anatomy found requests in the bytes (RESP, memcached; issue
//! 39), each endpoint (port, protocol, command name) has its own requests
//! counter and server-time histogram. The names are peer bytes: bounded
//! in the kernel per port, then here by `--max-series` endpoint series
//! (first come, first kept, so a counter never moves into another
//! series), the rest summed under `endpoint="(other)"` of their port and
//! protocol; their text escaped as every report escapes it.

use std::collections::BTreeMap;

use super::model::{OTHER, Sticky, counter, family, gauge, histogram_of, label, pb};
use crate::anatomy::counts::GRPC_CODES;
use crate::anatomy::service_cost::ServiceCost;
use crate::anatomy::{Counts, NameCounts, Part, PortTurns, Transport, Wire};
use crate::probe::hist::Histogram;
use crate::report::commands::grpc_code_name;

/// The protocols whose responses have a status class.
const HAS_STATUS: [Wire; 3] = [Wire::Http1, Wire::Http2, Wire::Grpc];

/// Label names of a part, as the report names them.
const PART_LABELS: [(Part, &str); 4] = [
    (Part::Queue, "queue_wait"),
    (Part::Cpu, "cpu_wait"),
    (Part::Service, "service"),
    (Part::Send, "send"),
];

fn port_labels(p: &PortTurns, overflow: bool) -> Vec<pb::LabelPair> {
    if overflow {
        vec![label("port", OTHER), label("transport", OTHER)]
    } else {
        vec![
            label("port", p.port.to_string()),
            label("transport", p.transport.name()),
        ]
    }
}

/// An endpoint's identity: transport, port, protocol and name bytes
/// (empty: the kernel's own "(other)" of the port).
type EndpointKey = (Transport, u16, Wire, Vec<u8>);

/// Which endpoints are exported under their own name ([`Sticky`]: first
/// come, first kept, at most `max`); the others are folded into their
/// port's and protocol's `(other)` for good, so every exported counter
/// only grows.
#[derive(Debug)]
pub struct EndpointAdmission(Sticky<EndpointKey>);

impl EndpointAdmission {
    /// At most `max` named endpoint series (plus the `(other)` ones).
    pub fn new(max: usize) -> Self {
        Self(Sticky::new(max))
    }

    fn admit(&mut self, n: &NameCounts) -> bool {
        // The kernel's own "(other)" (no name) is never a name.
        !n.name.is_empty() && self.0.admit(&(n.transport, n.port, n.wire, n.name.clone()))
    }

    /// Endpoints folded into `(other)` so far.
    pub fn folded(&self) -> usize {
        self.0.folded()
    }
}

/// One exported endpoint series: its requests and the server time of the
/// turns filed under it.
struct EndpointSeries {
    requests: u64,
    sum_ns: u64,
    hist: Histogram,
    /// HTTP/1 and HTTP/2: final responses by status class (2xx..5xx).
    status: [u64; 4],
    /// gRPC: ended calls by grpc-status (`NameCounts::grpc`).
    grpc: [u64; GRPC_CODES],
}

fn add_hist(into: &mut Histogram, h: &Histogram) {
    if into.counts.len() < h.counts.len() {
        into.counts.resize(h.counts.len(), 0);
    }
    let empty = into.total() == 0;
    for (a, b) in into.counts.iter_mut().zip(&h.counts) {
        *a += b;
    }
    if h.total() > 0 {
        into.min = if empty { h.min } else { into.min.min(h.min) };
        into.max = into.max.max(h.max);
    }
}

/// The endpoint families: `sockscope_endpoint_requests_total` and
/// `sockscope_endpoint_server_seconds`, labelled by port, transport,
/// protocol and endpoint.
fn endpoint_families(names: &[NameCounts], adm: &mut EndpointAdmission) -> Vec<pb::MetricFamily> {
    use pb::MetricType::{Counter, Gauge, Histogram as Hist};
    let mut series: BTreeMap<(Transport, u16, &'static str, String), EndpointSeries> =
        BTreeMap::new();
    for n in names {
        let name = if adm.admit(n) {
            crate::text::escape(&n.wire.name_text(&n.name)).into_owned()
        } else {
            OTHER.to_string()
        };
        let e = series
            .entry((n.transport, n.port, n.wire.name(), name))
            .or_insert_with(|| EndpointSeries {
                requests: 0,
                sum_ns: 0,
                hist: Histogram {
                    counts: Vec::new(),
                    min: 0,
                    max: 0,
                },
                status: [0; 4],
                grpc: [0; GRPC_CODES],
            });
        e.requests += n.commands;
        e.sum_ns += n.sum_ns;
        add_hist(&mut e.hist, &n.histogram());
        for (a, b) in e.status.iter_mut().zip(n.status) {
            *a += b;
        }
        for (a, b) in e.grpc.iter_mut().zip(n.grpc) {
            *a += b;
        }
    }
    let labels = |k: &(Transport, u16, &'static str, String)| {
        vec![
            label("port", k.1.to_string()),
            label("transport", k.0.name()),
            label("protocol", k.2),
            label("endpoint", k.3.clone()),
        ]
    };
    if series.is_empty() {
        return Vec::new();
    }
    vec![
        family(
            "sockscope_endpoint_requests_total",
            "Requests (commands) found in the bytes a served port read, per protocol and \
             command name; a pipelined batch counts each of its commands.",
            Counter,
            series
                .iter()
                .map(|(k, e)| counter(labels(k), e.requests as f64))
                .collect(),
        ),
        family(
            "sockscope_endpoint_server_seconds",
            "Time at the server of the turns filed under an endpoint (a turn goes under its \
             first command; a pipelined batch is one turn, timed as a whole).",
            Hist,
            series
                .iter()
                .map(|(k, e)| pb::Metric {
                    label: labels(k),
                    histogram: Some(histogram_of(&e.hist, e.sum_ns)),
                    ..Default::default()
                })
                .collect(),
        ),
        family(
            "sockscope_endpoint_responses_total",
            "HTTP/1 and HTTP/2 (gRPC too) final responses per endpoint and status class (2xx, \
             3xx, 4xx, 5xx), read from the target's writes; responses whose status was not \
             read are in none.",
            Counter,
            series
                .iter()
                .filter(|(k, _)| HAS_STATUS.iter().any(|w| k.2 == w.name()))
                .flat_map(|(k, e)| {
                    ["2xx", "3xx", "4xx", "5xx"]
                        .iter()
                        .zip(e.status)
                        .map(move |(class, n)| {
                            let mut l = labels(k);
                            l.push(label("status", *class));
                            counter(l, n as f64)
                        })
                })
                .collect(),
        ),
        family(
            "sockscope_endpoint_grpc_status_total",
            "gRPC calls per endpoint that ended with each grpc-status (code=\"OK\", \
             \"NOT_FOUND\", ...; \"(absent)\": none, or one that is no code), read from the \
             target's response headers and trailers.",
            Counter,
            series
                .iter()
                .filter(|(k, _)| k.2 == Wire::Grpc.name())
                .flat_map(|(k, e)| {
                    e.grpc
                        .iter()
                        .enumerate()
                        .filter(|(_, n)| **n > 0)
                        .map(move |(code, n)| {
                            let mut l = labels(k);
                            l.push(label("code", grpc_code_name(code)));
                            counter(l, *n as f64)
                        })
                })
                .collect(),
        ),
        family(
            "sockscope_endpoint_series_folded",
            "Endpoints counted in their port's endpoint=\"(other)\" series instead of their own \
             (beyond --max-series).",
            Gauge,
            vec![gauge(vec![], adm.folded() as f64)],
        ),
    ]
}

/// Every request family of `c` (the counts since the window opened),
/// the endpoint series admitted by `adm`.
pub fn families(c: &Counts, adm: &mut EndpointAdmission) -> Vec<pb::MetricFamily> {
    use pb::MetricType::{Counter, Histogram};
    let mut rows: Vec<(Vec<pb::LabelPair>, &PortTurns)> =
        c.ports.iter().map(|p| (port_labels(p, false), p)).collect();
    if c.other.turns > 0 {
        rows.push((port_labels(&c.other, true), &c.other));
    }
    let server = Part::Server as usize;
    vec![
        family(
            "sockscope_requests_total",
            "Requests answered on a served port (turns: request in, response out, on \
             connections carrying one request at a time).",
            Counter,
            rows.iter()
                .map(|(l, p)| counter(l.clone(), p.turns as f64))
                .collect(),
        ),
        family(
            "sockscope_request_server_seconds",
            "Time at the server per request: arrival of its first byte to the response's last \
             write.",
            Histogram,
            rows.iter()
                .map(|(l, p)| pb::Metric {
                    label: l.clone(),
                    histogram: Some(histogram_of(&p.histogram(Part::Server), p.sum_ns[server])),
                    ..Default::default()
                })
                .collect(),
        ),
        family(
            "sockscope_request_part_seconds_total",
            "Time at the server summed per part (queue_wait, cpu_wait, service, send); the \
             four add up to the server time.",
            Counter,
            rows.iter()
                .flat_map(|(l, p)| {
                    PART_LABELS.iter().map(move |(part, name)| {
                        let mut l = l.clone();
                        l.push(label("part", *name));
                        counter(l, p.sum_ns[*part as usize] as f64 / 1e9)
                    })
                })
                .collect(),
        ),
        family(
            "sockscope_requests_observed_seconds_total",
            "How long the request anatomy has followed requests: all the time it ran when it \
             follows every request, only its samples' time under --requests-duty. Every \
             request counter and histogram grows only then: a rate of requests is \
             rate(sockscope_requests_total) / rate(sockscope_requests_observed_seconds_total).",
            Counter,
            vec![counter(Vec::new(), c.observed_ns as f64 / 1e9)],
        ),
    ]
    .into_iter()
    .chain(endpoint_families(&c.names, adm))
    .chain(cost_families(&c.services))
    .collect()
}

/// What the request anatomy's programs cost each command name's
/// processes (none until the first reading with a delta).
fn cost_families(services: &[ServiceCost]) -> Vec<pb::MetricFamily> {
    use pb::MetricType::{Counter, Gauge};
    if services.is_empty() {
        return Vec::new();
    }
    let comm = |s: &ServiceCost| vec![label("comm", &s.name)];
    vec![
        family(
            "sockscope_agent_target_bpf_seconds_total",
            "Run time of the agent's BPF programs in the context of a command's processes \
             since they were first seen: the request anatomy's (the kernel's cost of a run, or \
             the programs' own timing without CAP_SYS_ADMIN, times every run, split as the \
             runs timed in slices of 50 ms every 500 ms were) and, with --stacks, the stack \
             sampler's (its own timing of every run, split as its samples were).",
            Counter,
            services.iter().map(|s| counter(comm(s), s.bpf_s)).collect(),
        ),
        family(
            "sockscope_agent_target_cpu_seconds_total",
            "CPU time of the same processes over the same span (/proc, clock ticks).",
            Counter,
            services.iter().map(|s| counter(comm(s), s.cpu_s)).collect(),
        ),
        family(
            "sockscope_agent_target_cpu_share",
            "The agent's BPF run time (the anatomy's and the stack sampler's) over the \
             processes' CPU time, in the last 60 s: what the agent costs them (the \
             tracepoints' own dispatch left out).",
            Gauge,
            services
                .iter()
                .filter_map(|s| Some(gauge(comm(s), s.share?)))
                .collect(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hist;

    fn port(port: u16, servers: &[u64]) -> PortTurns {
        let mut t = PortTurns::empty(port, Transport::Tcp);
        for &s in servers {
            t.turns += 1;
            // All service, so the parts add up.
            for p in [Part::Service, Part::Server] {
                t.sum_ns[p as usize] += s;
                t.hist[p as usize][hist::bucket_of(s)] += 1;
                t.max_ns[p as usize] = t.max_ns[p as usize].max(s);
            }
        }
        t
    }

    #[test]
    fn per_port_counter_histogram_and_parts() {
        let mut c = Counts::empty();
        c.ports.push(port(7001, &[300_000, 310_000, 2_000_000]));
        c.ports.push(port(53, &[]));
        c.ports[1].transport = Transport::Udp;
        c.observed_ns = 2_500_000_000;
        let f = families(&c, &mut EndpointAdmission::new(8));
        let text = super::super::text::encode(&f);
        let observed = text
            .lines()
            .find_map(|l| l.strip_prefix("sockscope_requests_observed_seconds_total "))
            .and_then(|v| v.parse::<f64>().ok());
        assert_eq!(observed, Some(2.5), "{text}");
        assert!(
            text.contains("sockscope_requests_total{port=\"7001\",transport=\"tcp\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("sockscope_requests_total{port=\"53\",transport=\"udp\"} 0\n"));
        assert!(text.contains(
            "sockscope_request_server_seconds_count{port=\"7001\",transport=\"tcp\"} 3\n"
        ));
        let value = |prefix: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("{prefix} in {text}"))
                .trim()
                .parse()
                .unwrap()
        };
        let sum = value("sockscope_request_server_seconds_sum{port=\"7001\",transport=\"tcp\"} ");
        assert!((sum - 0.00261).abs() < 1e-12, "{sum}");
        let service = value(
            "sockscope_request_part_seconds_total{port=\"7001\",transport=\"tcp\",part=\"service\"} ",
        );
        assert!((service - 0.00261).abs() < 1e-12, "{service}");
        // No overflow series while nothing overflowed.
        assert!(!text.contains(OTHER), "{text}");
        c.other = port(0, &[1000]);
        let text = super::super::text::encode(&families(&c, &mut EndpointAdmission::new(8)));
        assert!(
            text.contains("sockscope_requests_total{port=\"(other)\",transport=\"(other)\"} 1\n")
        );
    }

    fn name(n: &[u8], port: u16, commands: u64, servers: &[u64]) -> NameCounts {
        let mut hist = vec![0; hist::BUCKETS];
        for &s in servers {
            hist[hist::bucket_of(s)] += 1;
        }
        NameCounts {
            port,
            transport: Transport::Tcp,
            wire: Wire::Resp,
            name: n.to_vec(),
            commands,
            batched: 0,
            noreply: 0,
            turns: servers.len() as u64,
            sum_ns: servers.iter().sum(),
            max_ns: servers.iter().copied().max().unwrap_or(0),
            hist,
            status: [0; 4],
            grpc: [0; GRPC_CODES],
            parts: [0; 4],
            by_band: Vec::new(),
        }
    }

    #[test]
    fn endpoints_get_their_own_series_until_the_limit_then_other_for_good() {
        let mut c = Counts::empty();
        c.names = vec![
            name(b"GET", 6379, 10, &[1000, 2000]),
            name(b"S\x1bET", 6379, 4, &[5000]),
            name(b"", 6379, 3, &[7000]),
        ];
        let mut adm = EndpointAdmission::new(1);
        let text = super::super::text::encode(&families(&c, &mut adm));
        let l = |e: &str| {
            format!("{{port=\"6379\",transport=\"tcp\",protocol=\"resp\",endpoint=\"{e}\"}}")
        };
        assert!(
            text.contains(&format!(
                "sockscope_endpoint_requests_total{} 10\n",
                l("GET")
            )),
            "{text}"
        );
        // The second name is past the limit: with the kernel's own
        // "(other)", in one series.
        assert!(
            text.contains(&format!(
                "sockscope_endpoint_requests_total{} 7\n",
                l(OTHER)
            )),
            "{text}"
        );
        assert!(text.contains(&format!(
            "sockscope_endpoint_server_seconds_count{} 2\n",
            l(OTHER)
        )));
        assert!(!text.contains('\x1b'), "{text}");
        assert!(
            text.contains("sockscope_endpoint_series_folded 1\n"),
            "{text}"
        );
        // Once folded, always folded, even with room made: the counter
        // never jumps between series.
        c.names.remove(0);
        let text = super::super::text::encode(&families(&c, &mut adm));
        // (the text format writes the escape's backslash as two)
        assert!(!text.contains("S\\\\x1bET"), "{text}");
        // A wider limit keeps the name, escaped.
        let text = super::super::text::encode(&families(&c, &mut EndpointAdmission::new(8)));
        assert!(
            text.contains(&format!(
                "sockscope_endpoint_requests_total{} 4\n",
                l("S\\\\x1bET")
            )),
            "{text}"
        );
    }

    #[test]
    fn http_endpoints_count_their_responses_per_status_class() {
        let mut c = Counts::empty();
        let mut get = name(b"GET /a/{id}", 8080, 12, &[1000]);
        get.wire = Wire::Http1;
        get.status = [9, 0, 2, 1];
        c.names = vec![get, name(b"GET", 6379, 3, &[1000])];
        let text = super::super::text::encode(&families(&c, &mut EndpointAdmission::new(8)));
        let l = "port=\"8080\",transport=\"tcp\",protocol=\"http\",endpoint=\"GET /a/{id}\"";
        for (class, n) in [("2xx", 9), ("3xx", 0), ("4xx", 2), ("5xx", 1)] {
            assert!(
                text.contains(&format!(
                    "sockscope_endpoint_responses_total{{{l},status=\"{class}\"}} {n}\n"
                )),
                "{text}"
            );
        }
        // RESP has no status: no response series.
        assert!(
            !text.contains("protocol=\"resp\",endpoint=\"GET\",status"),
            "{text}"
        );
    }

    #[test]
    fn http2_and_grpc_endpoints_count_statuses_and_grpc_codes() {
        let mut c = Counts::empty();
        let mut h2 = name(b"GET /b", 8080, 5, &[1000]);
        h2.wire = Wire::Http2;
        h2.status = [4, 0, 1, 0];
        let mut call = name(b"/helloworld.Greeter/SayHello", 50051, 10, &[1000]);
        call.wire = Wire::Grpc;
        call.status = [10, 0, 0, 0];
        call.grpc[0] = 7;
        call.grpc[5] = 2;
        call.grpc[crate::anatomy::counts::GRPC_ABSENT] = 1;
        c.names = vec![h2, call];
        let text = super::super::text::encode(&families(&c, &mut EndpointAdmission::new(8)));
        let l = "port=\"8080\",transport=\"tcp\",protocol=\"http2\",endpoint=\"GET /b\"";
        assert!(
            text.contains(&format!(
                "sockscope_endpoint_responses_total{{{l},status=\"4xx\"}} 1\n"
            )),
            "{text}"
        );
        let g = "port=\"50051\",transport=\"tcp\",protocol=\"grpc\",\
                 endpoint=\"/helloworld.Greeter/SayHello\"";
        for (code, n) in [("OK", 7), ("NOT_FOUND", 2), ("(absent)", 1)] {
            assert!(
                text.contains(&format!(
                    "sockscope_endpoint_grpc_status_total{{{g},code=\"{code}\"}} {n}\n"
                )),
                "{text}"
            );
        }
        assert!(!text.contains("code=\"CANCELLED\""), "{text}");
    }

    #[test]
    fn no_named_requests_no_endpoint_families() {
        let mut c = Counts::empty();
        c.ports.push(port(7001, &[1000]));
        let text = super::super::text::encode(&families(&c, &mut EndpointAdmission::new(8)));
        assert!(!text.contains("sockscope_endpoint"), "{text}");
    }
}
