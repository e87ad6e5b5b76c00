//! From what the programs counted to the report's `anatomy` section:
//! percentiles with their intervals from the kernel's log-linear
//! histograms, what the turns at each server-time percentile were made of,
//! the per-port rows, the intervals, and the cost. Pure functions.

use std::collections::BTreeMap;

use super::abi::{PROG_NAMES, count};
use super::counts::{BAND_BUCKETS, Counts, NameCounts, Part, PortTurns, ProgRuns, Wire};
use crate::probe::hist::{self, Histogram};
use crate::report::anatomy::{
    AnatomyCost, AnatomyInterval, AnatomyReport, ClientSide, Composition, Multiplexed, PERCENTILES,
    PartSummary, PartSums, Parts, PortAnatomy, ProgramCost,
};
use crate::report::commands::{
    DNS_RCODES, Endpoint, PartMeans, ProtocolCounts, StatusClasses, grpc_code_name,
};
use crate::stats::{LatencySummary, TailInterval, tail};

/// The quantile of a named percentile.
fn quantile_of(name: &str) -> f64 {
    match name {
        "p50" => 0.5,
        "p90" => 0.9,
        "p99" => 0.99,
        _ => 0.999,
    }
}

/// The bucket that holds the sample of rank `rank` (1-based).
fn bucket_at_rank(counts: &[u64], rank: u64) -> usize {
    let mut seen = 0;
    for (b, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return b;
        }
    }
    counts.len().saturating_sub(1)
}

/// The 95 % interval of the q-quantile, bucket edge to bucket edge.
fn interval(h: &Histogram, q: f64) -> Option<TailInterval> {
    let n = h.total();
    if n == 0 {
        return None;
    }
    let (l, u, method) = tail::rank_interval(n, q);
    let low_ns = if l == 0 {
        h.min
    } else {
        hist::lower_bound(bucket_at_rank(&h.counts, l)).max(h.min)
    };
    let high_ns = if u > n {
        h.max
    } else {
        let b = bucket_at_rank(&h.counts, u);
        (hist::lower_bound(b) + hist::width(b) - 1).min(h.max)
    };
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let at = bucket_at_rank(&h.counts, rank);
    let beyond: u64 = h.counts[at + 1..].iter().sum();
    let expected_beyond = n as f64 * (1.0 - q);
    Some(TailInterval {
        low_ns,
        high_ns,
        low_rank: l,
        high_rank: u,
        beyond,
        expected_beyond,
        meaningful: u <= n && expected_beyond >= 10.0,
        method,
    })
}

/// One part's percentiles from its histogram and exact sum.
pub fn part_summary(h: &Histogram, sum_ns: u64) -> PartSummary {
    let n = h.total();
    if n == 0 {
        return PartSummary::default();
    }
    let at = |q: f64| h.quantile(q).unwrap_or(0);
    PartSummary {
        count: n,
        mean_ns: sum_ns as f64 / n as f64,
        max_ns: h.max,
        p50_ns: at(0.5),
        p90_ns: at(0.9),
        p99_ns: at(0.99),
        p999_ns: at(0.999),
        p50_ci: interval(h, 0.5),
        p90_ci: interval(h, 0.9),
        p99_ci: interval(h, 0.99),
        p999_ci: interval(h, 0.999),
    }
}

/// Every part of a set of turns.
pub fn parts_of(t: &PortTurns) -> Parts {
    let s = |p: Part| part_summary(&t.histogram(p), t.sum_ns[p as usize]);
    Parts {
        queue_wait: s(Part::Queue),
        cpu_wait: s(Part::Cpu),
        service: s(Part::Service),
        send: s(Part::Send),
        server_time: s(Part::Server),
    }
}

/// What the turns at each server-time percentile were made of: the
/// turns in the bucket that holds it, their parts' means. The server
/// time shown is the sum of the rounded parts, so the row adds up.
pub fn compositions(t: &PortTurns) -> Vec<Composition> {
    let server = &t.hist[Part::Server as usize];
    let n: u64 = server.iter().sum();
    if n == 0 {
        return Vec::new();
    }
    PERCENTILES
        .iter()
        .map(|name| {
            let q = quantile_of(name);
            let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
            let b = bucket_at_rank(server, rank);
            let sum = |p: Part| t.by_server[p as usize][b];
            Composition::from_sums(
                name,
                server[b],
                [Part::Queue, Part::Cpu, Part::Service, Part::Send].map(sum),
            )
        })
        .collect()
}

/// One interval's row from what accumulated in it.
pub fn interval_row(t_s: f64, d: &Counts) -> AnatomyInterval {
    let t = d.total();
    let mean = |p: Part| {
        if t.turns == 0 {
            0.0
        } else {
            t.sum_ns[p as usize] as f64 / t.turns as f64
        }
    };
    let server = t.histogram(Part::Server);
    AnatomyInterval {
        t_s,
        turns: t.turns,
        queue_wait_mean_ns: mean(Part::Queue),
        cpu_wait_mean_ns: mean(Part::Cpu),
        service_mean_ns: mean(Part::Service),
        send_mean_ns: mean(Part::Send),
        server_p50_ns: server.quantile(0.5).unwrap_or(0),
        server_p99_ns: server.quantile(0.99).unwrap_or(0),
    }
}

/// Time per run, from the timed runs, less the clock read each timed
/// run's figure includes.
fn per_run(ns: u64, timed: u64, clock_per_run: f64) -> Option<f64> {
    (timed > 0).then(|| (ns as f64 / timed as f64 - clock_per_run).max(0.0))
}

/// The programs' cost over a window of `window_ns` on `ncpus` CPUs; the
/// share of the target's CPU when its CPU time is known.
pub fn cost(
    progs: &[ProgRuns],
    window_ns: u64,
    ncpus: usize,
    target_cpu_ns: Option<u64>,
) -> AnatomyCost {
    let mut out = AnatomyCost::default();
    let (mut runs, mut timed) = (0u64, 0u64);
    for (p, name) in progs.iter().zip(PROG_NAMES) {
        let timed_runs = p.timed_matched + p.timed_filtered;
        let clock = if timed_runs > 0 {
            p.clock_ns as f64 / timed_runs as f64
        } else {
            0.0
        };
        let m = per_run(p.matched_ns, p.timed_matched, clock);
        let f = per_run(p.filtered_ns, p.timed_filtered, clock);
        let target = p.matched as f64 * m.unwrap_or(0.0);
        let others = p.filtered as f64 * f.unwrap_or(0.0);
        out.target_ns += target;
        out.others_ns += others;
        runs += p.matched + p.filtered;
        timed += timed_runs;
        out.programs.push(ProgramCost {
            name: name.to_string(),
            matched_runs: p.matched,
            filtered_runs: p.filtered,
            matched_ns_per_run: m,
            filtered_ns_per_run: f,
            total_ns: target + others,
        });
    }
    let total = out.target_ns + out.others_ns;
    out.of_machine = if window_ns > 0 && ncpus > 0 {
        total / (window_ns as f64 * ncpus as f64)
    } else {
        0.0
    };
    out.of_target_cpu = target_cpu_ns.filter(|c| *c > 0).map(|c| total / c as f64);
    out.timed_fraction = if runs > 0 {
        timed as f64 / runs as f64
    } else {
        0.0
    };
    out
}

/// The report of a window: what accumulated in it (`window`), its
/// intervals, and its length.
pub fn report(
    window: &Counts,
    intervals: Vec<AnatomyInterval>,
    cost: AnatomyCost,
) -> AnatomyReport {
    let total = window.total();
    let c = &window.count;
    AnatomyReport {
        turns: c[count::TURNS],
        connections: c[count::CONNS],
        threads: c[count::THREADS],
        multiplexed: Multiplexed {
            connections: c[count::MUX_CONNS],
            turns: c[count::MUX_TURNS],
        },
        window_s: 0.0,
        before_window: c[count::BEFORE_WINDOW],
        in_flight_at_end: c[count::IN_FLIGHT],
        writing_at_end: c[count::WRITING_AT_END],
        read_before_ready: c[count::READ_BEFORE_READY],
        unsolicited_writes: c[count::UNSOLICITED],
        udp_arrival_unseen: c[count::UDP_UNSEEN],
        udp_unanswered: c[count::UNANSWERED],
        foreign_connections: c[count::FOREIGN],
        storage_failures: c[count::STORAGE_FULL],
        overflow_turns: c[count::SERIES_FULL],
        next_during_write: c[count::NEXT_IN_WRITE],
        sampling_cut: c[count::RESYNC],
        close_races: c[count::CLOSE_RACES],
        close_unwaited: c[count::CLOSE_UNWAITED],
        sampled: None,
        parts: parts_of(&total),
        sums_ns: PartSums {
            queue_wait: total.sum_ns[Part::Queue as usize],
            cpu_wait: total.sum_ns[Part::Cpu as usize],
            service: total.sum_ns[Part::Service as usize],
            send: total.sum_ns[Part::Send as usize],
            server_time: total.sum_ns[Part::Server as usize],
        },
        at_percentile: compositions(&total),
        ports: window
            .ports
            .iter()
            .filter(|p| p.turns > 0)
            .map(|p| PortAnatomy {
                port: p.port,
                transport: p.transport.name().to_string(),
                socket: None,
                turns: p.turns,
                parts: parts_of(p),
            })
            .collect(),
        client: None,
        load_pipeline: None,
        intervals,
        cost,
        requests: (c[count::RESP_CONNS] > 0
            || c[count::MC_CONNS] > 0
            || c[count::H1_CONNS] > 0
            || c[count::PG_CONNS] > 0
            || c[count::DNS_CONNS] > 0
            || c[count::H2_CONNS] > 0
            || c[count::COMMANDS] > 0)
            .then_some(c[count::COMMANDS]),
        resp: ProtocolCounts {
            connections: c[count::RESP_CONNS],
            unparsed: c[count::RESP_GAVE_UP],
            turns: c[count::CMD_TURNS],
            unnamed: c[count::NAMES_FULL],
            ..ProtocolCounts::default()
        },
        memcached: ProtocolCounts {
            connections: c[count::MC_CONNS],
            unparsed: c[count::MC_GAVE_UP],
            turns: c[count::MC_TURNS],
            unnamed: c[count::MC_NAMES_FULL],
            noreply: c[count::MC_NOREPLY],
            ..ProtocolCounts::default()
        },
        http: ProtocolCounts {
            connections: c[count::H1_CONNS],
            unparsed: c[count::H1_GAVE_UP],
            turns: c[count::H1_TURNS],
            unnamed: c[count::H1_NAMES_FULL],
            noreply: 0,
            status_unknown: c[count::H1_STATUS_UNKNOWN],
            unmatched: c[count::H1_UNMATCHED],
            interim: c[count::H1_INTERIM],
            ..ProtocolCounts::default()
        },
        postgres: ProtocolCounts {
            connections: c[count::PG_CONNS],
            unparsed: c[count::PG_GAVE_UP],
            turns: c[count::PG_TURNS],
            unnamed: c[count::PG_NAMES_FULL],
            encrypted: c[count::PG_ENCRYPTED],
            ..ProtocolCounts::default()
        },
        dns: ProtocolCounts {
            connections: c[count::DNS_CONNS],
            unparsed: c[count::DNS_GAVE_UP],
            turns: c[count::DNS_TURNS],
            unnamed: c[count::DNS_NAMES_FULL],
            malformed: c[count::DNS_MALFORMED],
            status_unknown: c[count::DNS_RCODE_UNKNOWN],
            ..ProtocolCounts::default()
        },
        http2: ProtocolCounts {
            connections: c[count::H2_CONNS],
            unparsed: c[count::H2_GAVE_UP],
            turns: c[count::H2_TIMED],
            unnamed: window.h2.unnamed,
            streams: c[count::H2_STREAMS],
            reset: c[count::H2_RESET],
            untimed: c[count::H2_NO_SLOT],
            records_lost: c[count::H2_EVENTS_LOST],
            arrival_unseen: c[count::H2_ARRIVAL_UNSEEN],
            names_lost: window.h2.directions_lost,
            ..ProtocolCounts::default()
        },
        tls: crate::report::anatomy::TlsCounts {
            connections: c[count::TLS_CONNS],
            read_in_plaintext: c[count::TLS_READ],
            state_lost: c[count::TLS_LOST],
            handshake_turns: c[count::TLS_HANDSHAKES],
            ..Default::default()
        },
        endpoints: endpoints(&window.names),
        max_endpoints: None,
    }
}

/// Percentiles each endpoint's composition is given at.
const ENDPOINT_PERCENTILES: [&str; 2] = ["p50", "p99"];

/// What a name's turns at its p50 and p99 of server time were made of:
/// the means of the turns in the band (power of two of server time) that
/// holds the percentile. Empty with no timed turn, or in counts read
/// without bands.
fn name_compositions(n: &NameCounts) -> Vec<Composition> {
    let total: u64 = n.hist.iter().sum();
    if total == 0 || n.by_band.is_empty() {
        return Vec::new();
    }
    ENDPOINT_PERCENTILES
        .iter()
        .filter_map(|name| {
            let rank = ((quantile_of(name) * total as f64).ceil() as u64).clamp(1, total);
            let band = bucket_at_rank(&n.hist, rank) / BAND_BUCKETS;
            let lo = band * BAND_BUCKETS;
            let turns: u64 = n.hist.get(lo..lo + BAND_BUCKETS)?.iter().sum();
            let row = n.by_band.get(band * 4..band * 4 + 4)?;
            Some(Composition::from_sums(
                name,
                turns,
                [row[0], row[1], row[2], row[3]],
            ))
        })
        .collect()
}

/// The exact mean parts of a name's timed turns.
fn name_part_means(n: &NameCounts) -> Option<PartMeans> {
    if n.turns == 0 || n.parts.iter().all(|p| *p == 0) {
        return None;
    }
    let mean = |p: usize| n.parts[p] as f64 / n.turns as f64;
    Some(PartMeans {
        queue_wait_ns: mean(0),
        cpu_wait_ns: mean(1),
        service_ns: mean(2),
        send_ns: mean(3),
    })
}

/// The rows of the command names that counted something in the window.
pub fn endpoints(names: &[NameCounts]) -> Vec<Endpoint> {
    names
        .iter()
        .filter(|n| {
            n.commands > 0
                || n.turns > 0
                || n.status.iter().any(|s| *s > 0)
                || n.grpc.iter().any(|s| *s > 0)
        })
        .map(|n| {
            let h = n.histogram();
            let http = matches!(n.wire, Wire::Http1 | Wire::Http2);
            let grpc = n.wire == Wire::Grpc;
            let dns = n.wire == Wire::Dns;
            let status = (http || grpc).then(|| StatusClasses::from_counts(n.status));
            Endpoint {
                port: n.port,
                transport: n.transport.name().to_string(),
                socket: None,
                protocol: n.wire.name().to_string(),
                name: n.wire.name_text(&n.name),
                count: n.commands,
                batched: n.batched,
                noreply: n.noreply,
                turns: n.turns,
                server_p50_ns: h.quantile(0.5).unwrap_or(0),
                server_p90_ns: h.quantile(0.9).unwrap_or(0),
                server_p99_ns: h.quantile(0.99).unwrap_or(0),
                server_p999_ns: h.quantile(0.999).unwrap_or(0),
                server_mean_ns: n.sum_ns.checked_div(n.turns).unwrap_or(0),
                rate_per_s: 0.0,
                parts_mean: name_part_means(n),
                at_percentile: name_compositions(n),
                errors: if grpc {
                    Some(n.grpc[1..].iter().sum())
                } else if dns {
                    // SERVFAIL and the other codes (NXDOMAIN is an answer).
                    Some(n.status[2] + n.status[3])
                } else {
                    status.map(|s| s.s5xx)
                },
                client_errors: status.filter(|_| http).map(|s| s.s4xx),
                status,
                grpc_status: grpc.then(|| grpc_status(n)),
                rcode: dns.then(|| dns_rcodes(n)),
            }
        })
        .collect()
}

/// A DNS name's UDP answers by RCODE (the kernel's four: NOERROR,
/// NXDOMAIN, SERVFAIL, any other; codes seen only).
fn dns_rcodes(n: &NameCounts) -> BTreeMap<String, u64> {
    DNS_RCODES
        .iter()
        .zip(n.status)
        .filter(|(_, c)| *c > 0)
        .map(|(name, c)| (name.to_string(), c))
        .collect()
}

/// A gRPC name's calls by status code name (codes seen only).
fn grpc_status(n: &NameCounts) -> BTreeMap<String, u64> {
    n.grpc
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(code, c)| (grpc_code_name(code).to_string(), *c))
        .collect()
}

/// Puts the client's latency of the same run beside the server time.
pub fn with_client(a: &mut AnatomyReport, client: &LatencySummary, source: &str) {
    let s = &a.parts.server_time;
    let diff = |c: u64, s: u64| c as i64 - s as i64;
    a.client = Some(ClientSide {
        source: source.to_string(),
        count: client.count,
        p50_ns: client.p50_ns,
        p90_ns: client.p90_ns,
        p99_ns: client.p99_ns,
        p999_ns: client.p999_ns,
        difference_ns: [
            diff(client.p50_ns, s.p50_ns),
            diff(client.p90_ns, s.p90_ns),
            diff(client.p99_ns, s.p99_ns),
            diff(client.p999_ns, s.p999_ns),
        ],
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns made of (queue, cpu, service, send), on port 80.
    fn turns(values: &[[u64; 4]]) -> PortTurns {
        crate::anatomy::counts::tests::turns(80, values)
    }

    /// A name's counts as the kernel keeps them (name_turn in names.h)
    /// after turns made of (queue, cpu, service, send).
    fn named(values: &[[u64; 4]]) -> NameCounts {
        let mut n = NameCounts::empty(
            80,
            crate::anatomy::Transport::Tcp,
            Wire::Http1,
            b"GET /".to_vec(),
        );
        n.commands = values.len() as u64;
        for v in values {
            n.add_turn(v);
        }
        n
    }

    #[test]
    fn an_endpoint_says_what_its_own_tail_was_made_of() {
        // 95 turns of service, 5 that waited for a CPU: this endpoint's
        // p99 is the waits, its p50 the service.
        let mut v = vec![[1_000, 0, 50_000, 1_000]; 95];
        v.extend(vec![[1_000, 2_900_000, 50_000, 1_000]; 5]);
        let e = &endpoints(&[named(&v)])[0];
        let p50 = e.composition("p50").unwrap();
        assert_eq!(
            (p50.turns, p50.cpu_wait_ns, p50.service_ns),
            (95, 0, 50_000)
        );
        let p99 = e.composition("p99").unwrap();
        assert_eq!((p99.turns, p99.cpu_wait_ns), (5, 2_900_000));
        assert_eq!(p99.server_ns, 2_952_000);
        let m = e.parts_mean.unwrap();
        assert_eq!(m.cpu_wait_ns, 5.0 * 2_900_000.0 / 100.0);
        // The means add up to the exact mean server time.
        let sum: f64 = m.parts().iter().map(|p| p.1).sum();
        assert_eq!(sum.round() as u64, e.server_mean_ns);
        // Turns in one band (a power of two) are averaged together: two
        // service times 1.5x apart are one composition.
        let e = &endpoints(&[named(&[[0, 0, 40_000, 0], [0, 0, 60_000, 0]])])[0];
        assert_eq!(e.composition("p50").unwrap().service_ns, 50_000);
        // No timed turn: no parts.
        let mut untimed = named(&[]);
        untimed.commands = 3;
        let e = &endpoints(&[untimed])[0];
        assert!(e.parts_mean.is_none() && e.at_percentile.is_empty());
    }

    #[test]
    fn http2_rows_have_status_classes_and_grpc_rows_their_codes() {
        let mut h2 = named(&[[0, 0, 1000, 0]]);
        h2.wire = Wire::Http2;
        h2.status = [1, 0, 2, 3];
        let mut call = named(&[[0, 0, 1000, 0]]);
        call.wire = Wire::Grpc;
        call.name = b"/helloworld.Greeter/SayHello".to_vec();
        call.status = [10, 0, 0, 0];
        call.grpc[0] = 7;
        call.grpc[5] = 2;
        call.grpc[crate::anatomy::counts::GRPC_ABSENT] = 1;
        let rows = endpoints(&[h2, call]);
        assert_eq!(rows[0].protocol, "http2");
        assert_eq!(rows[0].name, "GET /");
        assert_eq!((rows[0].errors, rows[0].client_errors), (Some(3), Some(2)));
        assert!(rows[0].grpc_status.is_none());
        assert_eq!(rows[1].protocol, "grpc");
        assert_eq!(rows[1].name, "/helloworld.Greeter/SayHello");
        // Not OK: NOT_FOUND and the call that ended with none.
        assert_eq!((rows[1].errors, rows[1].client_errors), (Some(3), None));
        let codes = rows[1].grpc_status.as_ref().unwrap();
        let got: Vec<(&str, u64)> = codes.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("(absent)", 1), ("NOT_FOUND", 2), ("OK", 7)]);
        assert_eq!(rows[1].status.unwrap().s2xx, 10);
    }

    #[test]
    fn dns_rows_have_their_rcodes_and_count_all_but_noerror_and_nxdomain_as_errors() {
        let mut q = named(&[[0, 0, 1000, 0]]);
        q.wire = Wire::Dns;
        q.name = vec![28];
        q.status = [40, 3, 1, 2];
        let rows = endpoints(&[q]);
        assert_eq!(rows[0].name, "AAAA");
        assert!(rows[0].status.is_none() && rows[0].grpc_status.is_none());
        assert_eq!((rows[0].errors, rows[0].client_errors), (Some(3), None));
        let codes = rows[0].rcode.as_ref().unwrap();
        assert_eq!(codes["NOERROR"], 40);
        assert_eq!(codes["NXDOMAIN"], 3);
        assert_eq!(codes["SERVFAIL"], 1);
        assert_eq!(codes[crate::report::commands::DNS_OTHER_RCODE], 2);
        assert_eq!(
            crate::report::commands::endpoint_codes_text(&rows[0]).unwrap(),
            "NOERROR 40, NXDOMAIN 3, other (REFUSED, FORMERR, ...) 2, SERVFAIL 1"
        );
    }

    #[test]
    fn the_tail_composition_names_the_part_that_made_it() {
        // 990 fast turns of service only, 10 slow ones that waited for a CPU.
        let mut v = vec![[1_000, 0, 50_000, 1_000]; 990];
        v.extend(vec![[1_000, 2_900_000, 50_000, 1_000]; 10]);
        let t = turns(&v);
        let c = compositions(&t);
        let p50 = c.iter().find(|c| c.percentile == "p50").unwrap();
        assert_eq!(p50.cpu_wait_ns, 0);
        assert_eq!(p50.server_ns, 52_000);
        let p999 = c.iter().find(|c| c.percentile == "p99.9").unwrap();
        assert_eq!(p999.cpu_wait_ns, 2_900_000);
        assert_eq!(
            p999.server_ns,
            p999.queue_wait_ns + p999.cpu_wait_ns + p999.service_ns + p999.send_ns
        );
        let mut counts = Counts::empty();
        counts.ports.push(t);
        counts.count[count::TURNS] = 1000;
        let r = report(&counts, Vec::new(), AnatomyCost::default());
        assert_eq!(r.dominant("p99.9").unwrap().0, "CPU wait");
        assert_eq!(r.dominant("p50").unwrap().0, "service");
        assert_eq!(
            r.sums_ns.queue_wait + r.sums_ns.cpu_wait + r.sums_ns.service + r.sums_ns.send,
            r.sums_ns.server_time
        );
        let text = crate::report::anatomy::render(&r);
        assert!(text.contains("at p50"), "{text}");
    }

    #[test]
    fn percentile_intervals_bracket_the_value() {
        let v: Vec<[u64; 4]> = (1..=2000).map(|i| [0, 0, i * 1000, 0]).collect();
        let t = turns(&v);
        let s = part_summary(
            &t.histogram(Part::Service),
            t.sum_ns[Part::Service as usize],
        );
        for (value, ci) in [(s.p50_ns, s.p50_ci), (s.p99_ns, s.p99_ci)] {
            let ci = ci.unwrap();
            assert!(ci.low_ns <= value && value <= ci.high_ns, "{value} {ci:?}");
        }
        assert!((s.mean_ns - 1_000_500.0).abs() < 1.0);
    }

    #[test]
    fn cost_extrapolates_the_timed_runs_and_takes_the_clock_out() {
        let mut p = [ProgRuns::default(); crate::anatomy::abi::PROGS];
        p[0] = ProgRuns {
            matched: 1000,
            filtered: 9000,
            timed_matched: 100,
            timed_filtered: 100,
            matched_ns: 100 * 120,
            filtered_ns: 100 * 40,
            clock_ns: 200 * 20,
        };
        let c = cost(&p, 1_000_000_000, 2, Some(500_000_000));
        assert_eq!(c.programs[0].matched_ns_per_run, Some(100.0));
        assert_eq!(c.programs[0].filtered_ns_per_run, Some(20.0));
        assert_eq!(c.target_ns, 100_000.0);
        assert_eq!(c.others_ns, 180_000.0);
        assert!((c.of_target_cpu.unwrap() - 280_000.0 / 5e8).abs() < 1e-12);
        assert!((c.timed_fraction - 0.02).abs() < 1e-12);
    }
}
