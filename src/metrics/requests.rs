//! The request anatomy's counts as metric families, the RED metrics an
//! agent exports per served port: requests answered (rate), their time at
//! the server (duration, a histogram with the same classic and native
//! buckets as the syscall latencies), and the four parts that make it up.
//!
//! The series are bounded by the anatomy's own limit on ports with
//! statistics of their own (`anatomy::DEFAULT_MAX_PORTS`, kept in the
//! kernel); turns on further ports are exported under `port="(other)"`.

use super::model::{OTHER, counter, family, histogram_of, label, pb};
use crate::anatomy::{Counts, Part, PortTurns};

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

/// Every request family of `c` (the counts since the window opened).
pub fn families(c: &Counts) -> Vec<pb::MetricFamily> {
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
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anatomy::Transport;
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
        let f = families(&c);
        let text = super::super::text::encode(&f);
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
        let text = super::super::text::encode(&families(&c));
        assert!(
            text.contains("sockscope_requests_total{port=\"(other)\",transport=\"(other)\"} 1\n")
        );
    }
}
