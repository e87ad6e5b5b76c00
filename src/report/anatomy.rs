//! The request anatomy's schema (run.json's and trace's `anatomy`
//! section) and its text: where each request's time at the server went,
//! split into queue wait, CPU wait, service and send, seen from the socket
//! layer (see docs/anatomy.md for how turns are delimited and what each
//! part means).

use serde::{Deserialize, Serialize};

pub use super::commands::{Endpoint, ProtocolCounts};
pub use super::composition::Composition;
use super::units::{fmt_ns, fmt_pct};
use crate::stats::TailInterval;

/// Percentiles of one part of a turn (or of the server time), with the
/// 95 % confidence interval of each: the histogram is the kernel's
/// log-linear one, so a value is the middle of its bucket (within 6.25 %)
/// and an interval runs from bucket edge to bucket edge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartSummary {
    /// Turns.
    pub count: u64,
    /// Exact mean (the kernel's sum over the count).
    pub mean_ns: f64,
    /// Largest value seen.
    pub max_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// The median's interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ci: Option<TailInterval>,
    /// The p90's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_ci: Option<TailInterval>,
    /// The p99's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ci: Option<TailInterval>,
    /// The p99.9's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_ci: Option<TailInterval>,
}

impl PartSummary {
    /// The value at one of the named percentiles ("p50", "p90", "p99",
    /// "p99.9").
    pub fn at(&self, name: &str) -> Option<u64> {
        match name {
            "p50" => Some(self.p50_ns),
            "p90" => Some(self.p90_ns),
            "p99" => Some(self.p99_ns),
            "p99.9" => Some(self.p999_ns),
            _ => None,
        }
    }
}

/// The four parts and the server time, each summarized apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Parts {
    /// Request queued, not read yet (less the reader's CPU wait).
    pub queue_wait: PartSummary,
    /// The serving thread runnable but not running, inside the turn.
    pub cpu_wait: PartSummary,
    /// First read to first write of the response, less CPU wait.
    pub service: PartSummary,
    /// First to last write of the response, less CPU wait.
    pub send: PartSummary,
    /// Arrival to last write: the four above, turn by turn.
    pub server_time: PartSummary,
}

/// The kernel's exact sums of each part over every timed turn:
/// `queue_wait + cpu_wait + service + send == server_time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartSums {
    /// Queue wait, ns.
    pub queue_wait: u64,
    /// CPU wait, ns.
    pub cpu_wait: u64,
    /// Service, ns.
    pub service: u64,
    /// Send, ns.
    pub send: u64,
    /// Server time, ns.
    pub server_time: u64,
}

/// Connections that carried more than one request at a time (pipelining,
/// HTTP/2): their turns are counted here, never timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Multiplexed {
    /// Connections found multiplexed.
    pub connections: u64,
    /// Turns on them after they were (each may hold several requests).
    pub turns: u64,
}

/// One served port's turns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortAnatomy {
    /// Local port.
    pub port: u16,
    /// "tcp", "udp" or "unix" (then `port` is the listener's number).
    pub transport: String,
    /// A Unix listener's name (a path, or `@name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Turns timed.
    pub turns: u64,
    /// Its parts.
    pub parts: Parts,
}

impl PortAnatomy {
    /// `tcp/80`, `udp/53`, or `unix:/run/app.sock` (escaped).
    pub fn label(&self) -> String {
        match &self.socket {
            Some(name) => format!("unix:{}", crate::text::escape(name)),
            None => format!("{}/{}", self.transport, self.port),
        }
    }
}

/// The client's latency in the same run, beside the server time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSide {
    /// Where it was measured ("load": sockscope's own generator).
    pub source: String,
    /// Transactions the client completed.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Client minus server time at p50, p90, p99, p99.9: the network, the
    /// path and the client's own time (negative only within the two
    /// histograms' precision).
    pub difference_ns: [i64; 4],
}

/// One interval of the window: how many turns ended in it, and their
/// parts' means (exact, additive) and server-time percentiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnatomyInterval {
    /// Seconds from the window's start to the interval's end.
    pub t_s: f64,
    /// Turns that ended in it.
    pub turns: u64,
    /// Mean queue wait.
    pub queue_wait_mean_ns: f64,
    /// Mean CPU wait.
    pub cpu_wait_mean_ns: f64,
    /// Mean service.
    pub service_mean_ns: f64,
    /// Mean send.
    pub send_mean_ns: f64,
    /// Server time's median.
    pub server_p50_ns: u64,
    /// Server time's p99.
    pub server_p99_ns: u64,
}

/// One program's share of the cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// Its tracepoint.
    pub name: String,
    /// Runs on the target's sockets and threads.
    pub matched_runs: u64,
    /// Runs that only filtered someone else's event out.
    pub filtered_runs: u64,
    /// Time per matched run, from the timed slices (None: none timed).
    pub matched_ns_per_run: Option<f64>,
    /// Time per filtered run.
    pub filtered_ns_per_run: Option<f64>,
    /// Estimated time over the window: runs times time per run.
    pub total_ns: f64,
}

/// What the anatomy programs cost over the window (the kernel time they
/// ran; nothing else is hooked).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnatomyCost {
    /// Per program.
    pub programs: Vec<ProgramCost>,
    /// Time on the target's events, ns.
    pub target_ns: f64,
    /// Time filtering everyone else's, ns.
    pub others_ns: f64,
    /// As a fraction of the target's CPU time over the window (None when
    /// it is not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_target_cpu: Option<f64>,
    /// As a fraction of the machine's CPU time over the window.
    pub of_machine: f64,
    /// Share of the runs timed (the programs time themselves only in
    /// slices; the rest is extrapolated from them).
    pub timed_fraction: f64,
}

/// How a sampled window was sampled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnatomySampling {
    /// Each sample's length, s.
    pub on_s: f64,
    /// How often a sample started, s.
    pub period_s: f64,
    /// The time sampled in all, s.
    pub sampled_s: f64,
    /// The window's length, s.
    pub window_s: f64,
}

/// The request anatomy of a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnatomyReport {
    /// Turns timed (requests answered on connections that carried one at
    /// a time).
    pub turns: u64,
    /// Connections and UDP sockets followed.
    pub connections: u64,
    /// Serving threads followed.
    pub threads: u64,
    /// Connections that carried several requests at a time.
    pub multiplexed: Multiplexed,
    /// The window it covers, s (0 in artifacts written before it was
    /// recorded).
    #[serde(default)]
    pub window_s: f64,
    /// Timed turns whose data was queued before the window: counted from
    /// the window's start.
    pub before_window: u64,
    /// Turns still waiting for their response when the window closed.
    pub in_flight_at_end: u64,
    /// Turns whose response was being written when the window closed: the
    /// peer may already have it, but the write had not returned, so the
    /// turn is counted, not timed.
    #[serde(default)]
    pub writing_at_end: u64,
    /// Next requests the server read between their queueing and their
    /// data-ready hook (an awake reader): timed, their queue wait taken as
    /// none.
    #[serde(default)]
    pub read_before_ready: u64,
    /// Writes with no request before them (a greeting).
    pub unsolicited_writes: u64,
    /// UDP datagrams answered whose arrival was not seen: counted, not
    /// timed (the kernel signals only a datagram that finds the receive
    /// queue empty; those queued behind it have no arrival time).
    pub udp_arrival_unseen: u64,
    /// UDP datagrams read and not answered before the next read.
    pub udp_unanswered: u64,
    /// Connections read by a process outside the scope.
    pub foreign_connections: u64,
    /// Socket or thread state the kernel could not allocate.
    pub storage_failures: u64,
    /// Turns of ports beyond the per-port limit (in the totals, in no
    /// port's row).
    pub overflow_turns: u64,
    /// TCP: requests that arrived while the previous response's write had
    /// not returned yet (the peer answered the bytes already out, as on
    /// loopback); each still opened its own turn, the previous one ending
    /// at that write's end.
    #[serde(default)]
    pub next_during_write: u64,
    /// Turns under way when a sampled window resumed or paused: not timed.
    #[serde(default)]
    pub sampling_cut: u64,
    /// Answered turns that two hooks came to close at the same moment
    /// (the next request's read and the peer's close, a write's end or the
    /// window's end, on two CPUs): each was closed, and recorded, once.
    #[serde(default)]
    pub close_races: u64,
    /// Of them, those whose second hook did not wait for the close to end
    /// (the closer was beneath it on its own CPU, or slower than the wait
    /// allows): the next turn's start may be missing (not timed).
    #[serde(default)]
    pub close_unwaited: u64,
    /// A sampled window (`--requests-duty`): the turns are those of the
    /// samples only. Absent when the whole window was followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<AnatomySampling>,
    /// Every timed turn's parts.
    pub parts: Parts,
    /// Their exact sums.
    pub sums_ns: PartSums,
    /// What the turns at p50, p90, p99 and p99.9 of server time were made
    /// of.
    pub at_percentile: Vec<Composition>,
    /// Per served port.
    pub ports: Vec<PortAnatomy>,
    /// The client's latency in the same run (profile with a load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientSide>,
    /// Requests the load kept in flight per connection, when more than
    /// one (profile): a batch the client writes at once and the server
    /// answers at once is one turn at the socket layer, so a turn is then
    /// a batch of up to this many requests, timed as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_pipeline: Option<u32>,
    /// The window in intervals.
    #[serde(default)]
    pub intervals: Vec<AnatomyInterval>,
    /// What it cost.
    pub cost: AnatomyCost,
    /// Requests counted from their bytes (RESP, memcached and PostgreSQL
    /// commands, HTTP/1 requests, DNS queries;
    /// see report/commands.rs), where `turns` counts a pipelined batch
    /// once. Absent when no connection's requests were parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// What the RESP parser saw.
    #[serde(default)]
    pub resp: ProtocolCounts,
    /// What the memcached text-protocol parser saw (absent when it saw no
    /// connection).
    #[serde(default, skip_serializing_if = "ProtocolCounts::is_empty")]
    pub memcached: ProtocolCounts,
    /// What the PostgreSQL frontend-protocol parser saw (absent when it
    /// saw no connection).
    #[serde(default, skip_serializing_if = "ProtocolCounts::is_empty")]
    pub postgres: ProtocolCounts,
    /// What the HTTP/1 parser saw (absent when it saw no connection).
    #[serde(default, skip_serializing_if = "ProtocolCounts::is_empty")]
    pub http: ProtocolCounts,
    /// What the DNS parser saw (absent when it saw no query).
    #[serde(default, skip_serializing_if = "ProtocolCounts::is_empty")]
    pub dns: ProtocolCounts,
    /// What the HTTP/2 parser saw (absent when no connection began with
    /// the HTTP/2 preface).
    #[serde(default, skip_serializing_if = "ProtocolCounts::is_empty")]
    pub http2: ProtocolCounts,
    /// What the anatomy saw of TLS (absent when no connection began a TLS
    /// handshake and `--tls-plaintext` was not given).
    #[serde(default, skip_serializing_if = "TlsCounts::is_empty")]
    pub tls: TlsCounts,
    /// Per port and command name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
    /// Names each port kept (`--max-endpoints`): the rest of its requests
    /// are its `(other)` rows. Absent when no request was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_endpoints: Option<u32>,
}

/// TLS connections: whose requests were read (their plaintext, through
/// OpenSSL) and whose only timed as turns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsCounts {
    /// TCP connections whose first read began a TLS handshake.
    pub connections: u64,
    /// Of them, those whose plaintext was read (OpenSSL's).
    pub read_in_plaintext: u64,
    /// Connections whose state the kernel's table (8,192 at once) had to
    /// drop: turns only from then on.
    pub state_lost: u64,
    /// Turns that were a handshake's flight and its answer (their first
    /// read began a handshake record, or TLS 1.3's ChangeCipherSpec):
    /// counted, not timed, no request.
    #[serde(default)]
    pub handshake_turns: u64,
    /// `--tls-plaintext` was given.
    pub plaintext_asked: bool,
    /// The OpenSSL libraries whose SSL_read and SSL_write were probed (as
    /// the target's processes name them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<String>,
}

impl TlsCounts {
    /// Nothing to say.
    pub fn is_empty(&self) -> bool {
        self.connections == 0 && !self.plaintext_asked
    }

    /// What to tell about them, if anything.
    pub fn sentence(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        if !self.plaintext_asked {
            return Some(format!(
                "{} TLS connections: timed as turns ({} handshake turns left out), their \
                 requests not read (the bytes are ciphertext; --tls-plaintext reads OpenSSL's \
                 plaintext through uprobes)",
                self.connections, self.handshake_turns
            ));
        }
        let libs = self
            .libraries
            .iter()
            .map(|l| crate::text::escape(l).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        let mut s = format!(
            "{} TLS connections, {} of them read in plaintext through uprobes on OpenSSL \
             ({libs}); {} handshake turns left out",
            self.connections, self.read_in_plaintext, self.handshake_turns
        );
        let unread = self.connections.saturating_sub(self.read_in_plaintext);
        if unread > 0 {
            s.push_str(&format!(
                "; {unread} not read (their TLS is not that OpenSSL's: Go's crypto/tls, rustls, \
                 a statically linked BoringSSL or OpenSSL; or no request in the window): timed \
                 as turns"
            ));
        }
        if self.state_lost > 0 {
            s.push_str(&format!(
                "; {} lost their kernel state (over 8,192 at once): turns only from then on",
                self.state_lost
            ));
        }
        Some(s)
    }
}

/// Percentiles every anatomy table shows.
pub const PERCENTILES: [&str; 4] = ["p50", "p90", "p99", "p99.9"];

impl AnatomyReport {
    /// Each protocol whose requests are parsed from the bytes: its name
    /// for people and what its parser saw.
    pub fn protocol_counts(&self) -> [(&'static str, &ProtocolCounts); 6] {
        use super::commands::{DNS, HTTP1, HTTP2, MEMCACHED, POSTGRES, RESP};
        [
            (RESP, &self.resp),
            (MEMCACHED, &self.memcached),
            (POSTGRES, &self.postgres),
            (HTTP1, &self.http),
            (DNS, &self.dns),
            (HTTP2, &self.http2),
        ]
    }

    /// The composition at a named percentile.
    pub fn composition(&self, name: &str) -> Option<&Composition> {
        self.at_percentile.iter().find(|c| c.percentile == name)
    }

    /// The part that dominates the turns at `name`, with its share of
    /// their server time.
    pub fn dominant(&self, name: &str) -> Option<(&'static str, u64, u64)> {
        let c = self.composition(name)?;
        let (part, ns) = c.parts().into_iter().max_by_key(|(_, ns)| *ns)?;
        Some((part, ns, c.server_ns))
    }

    /// The per-command table (report/commands.rs), when commands were
    /// counted.
    pub fn commands_text(&self) -> Option<String> {
        super::commands::render(
            self.requests,
            &self.protocol_counts(),
            &self.endpoints,
            self.max_endpoints,
        )
    }

    /// Sentences that say which part dominates the tail, quoted.
    pub fn sentences(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(k) = self.load_pipeline {
            out.push(format!(
                "the load kept {k} requests in flight per connection: the server took each \
                 batch as one turn (the socket layer cannot split it), so these are the times \
                 of batches of up to {k} requests, not of single requests"
            ));
        }
        out.extend(self.tls.sentence());
        if self.turns == 0 {
            if self.multiplexed.turns > 0 {
                out.push(format!(
                    "every turn was on a multiplexed connection ({} connections, {} turns): \
                     they carry several requests at a time and are not timed",
                    self.multiplexed.connections, self.multiplexed.turns
                ));
            }
            return out;
        }
        for p in ["p50", "p99"] {
            let Some((part, ns, server)) = self.dominant(p) else {
                continue;
            };
            if server == 0 {
                continue;
            }
            let why = match part {
                "queue wait" => "requests waited in the socket before the target read them",
                "CPU wait" => "the target's threads were runnable but not running",
                "service" => "the target's own work between reading a request and answering",
                _ => "writing the response took that long",
            };
            out.push(format!(
                "at {p}, {} of {} at the server was {part}: {why}",
                fmt_ns(ns as f64),
                fmt_ns(server as f64),
            ));
        }
        if let Some(c) = &self.client {
            let server = self.parts.server_time.p50_ns;
            if c.p50_ns > 0 {
                out.push(format!(
                    "the client saw p50 {}; {} of it was at the server, {} outside it \
                     (network, path and the client itself)",
                    fmt_ns(c.p50_ns as f64),
                    fmt_ns(server as f64),
                    fmt_ns(c.difference_ns[0].max(0) as f64),
                ));
            }
        }
        if self.multiplexed.connections > 0 {
            out.push(format!(
                "{} connection{} carried several requests at a time ({} turns): counted \
                 apart, not timed",
                self.multiplexed.connections,
                if self.multiplexed.connections == 1 {
                    ""
                } else {
                    "s"
                },
                self.multiplexed.turns
            ));
        }
        out
    }
}

/// A duration in seconds as a user writes it ("1s", "200ms").
fn fmt_secs(s: f64) -> String {
    if s >= 1.0 && (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round())
    } else {
        format!("{}ms", (s * 1000.0).round())
    }
}

/// The "Anatomy of a request" table and its notes, as text.
pub fn render(a: &AnatomyReport) -> String {
    let mut out = match a.load_pipeline {
        Some(k) => format!(
            "Anatomy of a request (at the server, from the socket layer; turns are batches of \
             up to {k} pipelined requests)\n"
        ),
        None => String::from("Anatomy of a request (at the server, from the socket layer)\n"),
    };
    if a.turns == 0 {
        out.push_str(&format!(
            "  no turn timed ({} connections followed, {} multiplexed turns)\n",
            a.connections, a.multiplexed.turns
        ));
        return out;
    }
    out.push_str(&format!(
        "  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "part", "p50", "p90", "p99", "p99.9", "mean"
    ));
    let rows = [
        ("queue wait", &a.parts.queue_wait),
        ("CPU wait", &a.parts.cpu_wait),
        ("service", &a.parts.service),
        ("send", &a.parts.send),
        ("server time", &a.parts.server_time),
    ];
    for (name, s) in rows {
        out.push_str(&format!(
            "  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
            name,
            fmt_ns(s.p50_ns as f64),
            fmt_ns(s.p90_ns as f64),
            fmt_ns(s.p99_ns as f64),
            fmt_ns(s.p999_ns as f64),
            fmt_ns(s.mean_ns),
        ));
    }
    if let Some(c) = &a.client {
        out.push_str(&format!(
            "  {:<12} {:>10} {:>10} {:>10} {:>10}\n",
            "client",
            fmt_ns(c.p50_ns as f64),
            fmt_ns(c.p90_ns as f64),
            fmt_ns(c.p99_ns as f64),
            fmt_ns(c.p999_ns as f64),
        ));
        let d: Vec<String> = c
            .difference_ns
            .iter()
            .map(|d| {
                if *d < 0 {
                    format!("-{}", fmt_ns(d.unsigned_abs() as f64))
                } else {
                    fmt_ns(*d as f64)
                }
            })
            .collect();
        out.push_str(&format!(
            "  {:<12} {:>10} {:>10} {:>10} {:>10}\n",
            "outside", d[0], d[1], d[2], d[3]
        ));
    }
    out.push_str("  what the turns at each server-time percentile were made of:\n");
    for c in &a.at_percentile {
        let parts: Vec<String> = c
            .parts()
            .iter()
            .map(|(n, ns)| {
                let share = if c.server_ns > 0 {
                    *ns as f64 / c.server_ns as f64
                } else {
                    0.0
                };
                format!("{n} {} ({})", fmt_ns(*ns as f64), fmt_pct(share * 100.0))
            })
            .collect();
        out.push_str(&format!(
            "  {:<6} {:>10} = {}\n",
            c.percentile,
            fmt_ns(c.server_ns as f64),
            parts.join(" + ")
        ));
    }
    out.push_str(&format!(
        "  {} turns on {} connections, {} threads",
        a.turns, a.connections, a.threads
    ));
    if a.multiplexed.connections > 0 {
        out.push_str(&format!(
            "; {} multiplexed connections ({} turns, not timed)",
            a.multiplexed.connections, a.multiplexed.turns
        ));
    }
    if a.before_window > 0 {
        out.push_str(&format!(
            "; {} turns began before the window (counted from its start)",
            a.before_window
        ));
    }
    if a.udp_arrival_unseen > 0 {
        out.push_str(&format!(
            "; {} UDP answers untimed (their arrival was not seen)",
            a.udp_arrival_unseen
        ));
    }
    if a.in_flight_at_end > 0 {
        out.push_str(&format!("; {} unanswered at the end", a.in_flight_at_end));
    }
    if a.writing_at_end > 0 {
        out.push_str(&format!(
            "; {} responses still being written at the end (not timed)",
            a.writing_at_end
        ));
    }
    if a.close_unwaited > 0 {
        out.push_str(&format!(
            "; {} turns whose start met another hook's close (may be untimed)",
            a.close_unwaited
        ));
    }
    out.push('\n');
    if let Some(s) = &a.sampled {
        out.push_str(&format!(
            "  sampled: {} of every {} ({:.1} s of {:.1} s): the turns are those of the samples \
             ({} cut by a pause or a resume, not timed)\n",
            fmt_secs(s.on_s),
            fmt_secs(s.period_s),
            s.sampled_s,
            s.window_s,
            a.sampling_cut
        ));
    }
    if a.ports.len() > 1 {
        for p in &a.ports {
            out.push_str(&format!(
                "  {}: {} turns, server time p50 {} p99 {}\n",
                p.label(),
                p.turns,
                fmt_ns(p.parts.server_time.p50_ns as f64),
                fmt_ns(p.parts.server_time.p99_ns as f64)
            ));
        }
    }
    // Per-request runs on the target's events that no cost slice timed
    // are in no figure: the cost is then a lower bound, and says so (the
    // rare connection and process events are left out of this).
    let per_request = a.cost.programs.iter().filter(|p| {
        ["sk_data_ready", "sock_recv_length", "sock_send_length"].contains(&p.name.as_str())
    });
    let (unmeasured, all) = per_request.fold((0u64, 0u64), |(u, t), p| {
        let missing = if p.matched_ns_per_run.is_none() {
            p.matched_runs
        } else {
            0
        };
        (u + missing, t + p.matched_runs)
    });
    // A run or two in a program no slice caught is noise, not a bound.
    if unmeasured > 0 && unmeasured * 100 >= all {
        out.push_str(&format!(
            "  cost: {unmeasured} program runs on the target's events came outside the cost \
             slices (the programs time themselves part of the time) and are not in the figure \
             below, a lower bound\n"
        ));
    }
    out.push_str(&format!(
        "  cost: {} of BPF time on the target's events, {} filtering others' ({}{} of the machine)\n",
        fmt_ns(a.cost.target_ns),
        fmt_ns(a.cost.others_ns),
        match a.cost.of_target_cpu {
            Some(s) => format!("{} of the target's CPU, ", fmt_pct(s * 100.0)),
            None => String::new(),
        },
        fmt_pct(a.cost.of_machine * 100.0)
    ));
    for s in a.sentences() {
        out.push_str(&format!("  {s}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_missing_per_request_runs_says_it_is_a_lower_bound() {
        let mut a = crate::report::fixtures::anatomy();
        let run = |name: &str, runs: u64, per: Option<f64>| ProgramCost {
            name: name.to_string(),
            matched_runs: runs,
            filtered_runs: 0,
            matched_ns_per_run: per,
            filtered_ns_per_run: None,
            total_ns: 0.0,
        };
        a.cost.programs = vec![
            run("sk_data_ready", 3960, Some(100.0)),
            run("sock_recv_length", 40, None),
            run("inet_sock_set_state", 2, None),
        ];
        let text = render(&a);
        assert!(
            text.contains("cost: 40 program runs on the target's events came outside"),
            "{text}"
        );
        a.cost.programs[1].matched_ns_per_run = Some(50.0);
        assert!(!render(&a).contains("outside the cost"), "{}", render(&a));
        // Under 1 % of the per-request runs: not worth a line.
        a.cost.programs[1].matched_ns_per_run = None;
        a.cost.programs[1].matched_runs = 39;
        assert!(!render(&a).contains("outside the cost"), "{}", render(&a));
    }
}
