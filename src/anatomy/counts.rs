//! What the anatomy programs hold, as plain Rust values: each port's turns
//! (histograms of every part, their exact sums, and the parts' sums per
//! server-time bucket), the counters, and the programs' runs. Values are
//! cumulative since the programs were loaded; [`Counts::since`] gives a
//! window or an interval.

use super::abi::{COUNTS, PARTS, PROGS};
use crate::probe::hist::{self, Histogram};

/// The parts of a turn, in the kernel's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Arrival to the read that takes it, less CPU wait.
    Queue = 0,
    /// Runnable, not running, inside the turn.
    Cpu = 1,
    /// First read to first write, less CPU wait.
    Service = 2,
    /// First to last write, less CPU wait.
    Send = 3,
    /// Arrival to last write: the sum of the four above.
    Server = 4,
}

impl Part {
    /// The four parts that add up to the server time.
    pub const ADDENDS: [Part; 4] = [Part::Queue, Part::Cpu, Part::Service, Part::Send];
    /// All five, in order.
    pub const ALL: [Part; PARTS] = [
        Part::Queue,
        Part::Cpu,
        Part::Service,
        Part::Send,
        Part::Server,
    ];
}

/// Transport of a served port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// TCP (IPPROTO_TCP).
    Tcp,
    /// UDP (IPPROTO_UDP).
    Udp,
    /// A Unix stream listener (AF_UNIX): its "port" is the listener's
    /// number in the window's list of Unix listeners.
    Unix,
}

impl Transport {
    /// The IP protocol number the kernel keys it by.
    pub fn number(self) -> u16 {
        match self {
            Transport::Tcp => 6,
            Transport::Udp => 17,
            Transport::Unix => super::abi::PROTO_UNIX,
        }
    }

    /// From the IP protocol number; None for anything else.
    pub fn from_number(n: u16) -> Option<Self> {
        match n {
            6 => Some(Transport::Tcp),
            17 => Some(Transport::Udp),
            n if n == super::abi::PROTO_UNIX => Some(Transport::Unix),
            _ => None,
        }
    }

    /// "tcp", "udp" or "unix".
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Unix => "unix",
        }
    }
}

/// The turns of one served port (or of the overflow), summed over CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortTurns {
    /// Local port (0 for the overflow).
    pub port: u16,
    /// Its transport.
    pub transport: Transport,
    /// Turns timed.
    pub turns: u64,
    /// Exact sum of each part over the turns.
    pub sum_ns: [u64; PARTS],
    /// Largest value of each part (cumulative: a window's is an upper bound).
    pub max_ns: [u64; PARTS],
    /// Each part's histogram (trace/hist.rs buckets).
    pub hist: [Vec<u64>; PARTS],
    /// Sum of each addend (queue, CPU, service, send) over the turns whose
    /// server time fell in each server-time bucket.
    pub by_server: [Vec<u64>; 4],
}

impl PortTurns {
    /// No turns yet.
    pub fn empty(port: u16, transport: Transport) -> Self {
        Self {
            port,
            transport,
            turns: 0,
            sum_ns: [0; PARTS],
            max_ns: [0; PARTS],
            hist: std::array::from_fn(|_| vec![0; hist::BUCKETS]),
            by_server: std::array::from_fn(|_| vec![0; hist::BUCKETS]),
        }
    }

    /// Adds another CPU's (or port's) figures.
    pub fn add(&mut self, o: &PortTurns) {
        self.turns += o.turns;
        for p in 0..PARTS {
            self.sum_ns[p] += o.sum_ns[p];
            self.max_ns[p] = self.max_ns[p].max(o.max_ns[p]);
            add_into(&mut self.hist[p], &o.hist[p]);
        }
        for p in 0..4 {
            add_into(&mut self.by_server[p], &o.by_server[p]);
        }
    }

    /// What accumulated since `earlier` (the same port, read before).
    pub fn since(&self, earlier: &PortTurns) -> PortTurns {
        let mut out = self.clone();
        out.turns = self.turns.saturating_sub(earlier.turns);
        for p in 0..PARTS {
            out.sum_ns[p] = self.sum_ns[p].saturating_sub(earlier.sum_ns[p]);
            sub_from(&mut out.hist[p], &earlier.hist[p]);
        }
        for p in 0..4 {
            sub_from(&mut out.by_server[p], &earlier.by_server[p]);
        }
        out
    }

    /// One part's histogram, for percentiles.
    pub fn histogram(&self, part: Part) -> Histogram {
        let counts = self.hist[part as usize].clone();
        let min = counts
            .iter()
            .position(|c| *c > 0)
            .map(hist::lower_bound)
            .unwrap_or(0);
        Histogram {
            counts,
            min,
            max: self.max_ns[part as usize],
        }
    }
}

fn add_into(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

fn sub_from(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_sub(*y);
    }
}

/// The protocol a command's bytes were parsed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Wire {
    /// RESP (Redis, Valkey).
    Resp,
    /// memcached's text protocol.
    Memcached,
    /// HTTP/1.0 and 1.1.
    Http1,
    /// PostgreSQL's frontend protocol (v3).
    Postgres,
    /// DNS queries (UDP and TCP), named by QTYPE.
    Dns,
    /// HTTP/2 streams (h2c), named by method and route template.
    Http2,
    /// gRPC calls: HTTP/2 streams whose request's content-type is
    /// application/grpc, named by their `:path`.
    Grpc,
}

impl Wire {
    /// Every protocol parsed (each port has an "(other)" per protocol).
    pub const ALL: [Wire; 7] = [
        Wire::Resp,
        Wire::Memcached,
        Wire::Http1,
        Wire::Postgres,
        Wire::Dns,
        Wire::Http2,
        Wire::Grpc,
    ];

    /// From the kernel's number (`enum ss_anat_wire`); None for anything
    /// else.
    pub fn from_number(n: u8) -> Option<Self> {
        match n {
            n if n == super::abi::wire::RESP => Some(Wire::Resp),
            n if n == super::abi::wire::MEMCACHED => Some(Wire::Memcached),
            n if n == super::abi::wire::HTTP1 => Some(Wire::Http1),
            n if n == super::abi::wire::POSTGRES => Some(Wire::Postgres),
            n if n == super::abi::wire::DNS => Some(Wire::Dns),
            n if n == super::abi::wire::HTTP2 => Some(Wire::Http2),
            n if n == super::abi::wire::GRPC => Some(Wire::Grpc),
            _ => None,
        }
    }

    /// "resp", "memcached", "postgres", "http", "dns", "http2" or "grpc"
    /// (run.json's `endpoints[].protocol`).
    pub fn name(self) -> &'static str {
        match self {
            Wire::Resp => "resp",
            Wire::Memcached => "memcached",
            Wire::Http1 => "http",
            Wire::Postgres => "postgres",
            Wire::Dns => "dns",
            Wire::Http2 => "http2",
            Wire::Grpc => "grpc",
        }
    }

    /// A name's bytes (trailing zeros trimmed) as the report shows them:
    /// as sent (escaped), and for PostgreSQL the kind its first byte is,
    /// then the prepared statement's name when it is named
    /// (`SELECT P0_1`); for DNS the QTYPE the two bytes are (`AAAA`,
    /// `TYPE65280`); HTTP/2 and gRPC names escaped as HTTP/1's.
    pub fn name_text(self, bytes: &[u8]) -> String {
        use crate::report::commands::name_text;
        match (self, bytes.split_first()) {
            (Wire::Postgres, Some((code, stmt))) => {
                let kind = super::abi::pg_kind(*code)
                    .map_or_else(|| format!("\\x{code:02x}"), str::to_string);
                if stmt.iter().all(|b| *b == 0) {
                    kind
                } else {
                    let end = stmt.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                    format!("{kind} {}", name_text(&stmt[..end]))
                }
            }
            (Wire::Dns, Some((lo, hi))) => {
                let hi = hi.first().copied().unwrap_or(0);
                crate::report::commands::qtype_text(u16::from_le_bytes([*lo, hi]))
            }
            _ => name_text(bytes),
        }
    }
}

/// One program's runs, summed over CPUs (`ss_anat_prog_cost`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgRuns {
    /// Runs on the target's sockets or threads.
    pub matched: u64,
    /// Runs that only found someone else's event.
    pub filtered: u64,
    /// Of them, timed during the cost slices.
    pub timed_matched: u64,
    /// Filtered runs timed.
    pub timed_filtered: u64,
    /// Time of the timed matched runs (one clock read included each).
    pub matched_ns: u64,
    /// Time of the timed filtered runs.
    pub filtered_ns: u64,
    /// What the timing's own clock reads cost (one per timed run).
    pub clock_ns: u64,
}

impl ProgRuns {
    fn since(self, e: ProgRuns) -> ProgRuns {
        ProgRuns {
            matched: self.matched.saturating_sub(e.matched),
            filtered: self.filtered.saturating_sub(e.filtered),
            timed_matched: self.timed_matched.saturating_sub(e.timed_matched),
            timed_filtered: self.timed_filtered.saturating_sub(e.timed_filtered),
            matched_ns: self.matched_ns.saturating_sub(e.matched_ns),
            filtered_ns: self.filtered_ns.saturating_sub(e.filtered_ns),
            clock_ns: self.clock_ns.saturating_sub(e.clock_ns),
        }
    }
}

/// One command name's counts on one served port, in one protocol
/// (`ss_anat_name`): commands counted at the reads that completed them,
/// and the timed turns filed under the name (a turn goes under its first
/// command's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameCounts {
    /// Local port (a Unix listener's number for [`Transport::Unix`]).
    pub port: u16,
    /// Its transport.
    pub transport: Transport,
    /// The protocol the commands were found in.
    pub wire: Wire,
    /// The name's bytes as the peer sent them (RESP's upper-cased), at
    /// most `abi::NAME_LEN`; HTTP/1 and HTTP/2: method and route
    /// template, at most `abi::H1_TEXT` bytes, ending in `…` when the
    /// route was cut; gRPC: the call's `:path`, at most
    /// `h2names::route::GRPC_TEXT` bytes (`…` when cut); empty for
    /// "(other)" (names past the port's limit).
    pub name: Vec<u8>,
    /// Commands completed.
    pub commands: u64,
    /// Of them, in turns that carried more than one command.
    pub batched: u64,
    /// Of them, memcached `noreply` commands (no response: never timed).
    pub noreply: u64,
    /// Timed turns filed under it.
    pub turns: u64,
    /// Their server time's exact sum.
    pub sum_ns: u64,
    /// Their largest server time (cumulative).
    pub max_ns: u64,
    /// Their server time (trace/hist.rs buckets).
    pub hist: Vec<u64>,
    /// HTTP/1 and HTTP/2 (gRPC too): final responses by status class
    /// (2xx, 3xx, 4xx, 5xx).
    pub status: [u64; 4],
    /// gRPC: ended calls by `grpc-status` (0..=16), and at
    /// [`GRPC_ABSENT`] those that ended with none or one that is no code.
    pub grpc: [u64; GRPC_CODES],
    /// The timed turns' parts' sums: queue wait, CPU wait, service, send.
    pub parts: [u64; 4],
    /// The same by band of server time (band `b`, part `p` at `b * 4 +
    /// p`; a band is [`BAND_BUCKETS`] buckets of `hist`).
    pub by_band: Vec<u64>,
}

/// gRPC status codes counted per name: 0 (OK) to 16 (UNAUTHENTICATED),
/// then [`GRPC_ABSENT`].
pub const GRPC_CODES: usize = 18;
/// Where a call that ended with no `grpc-status` (or one that is no code)
/// is counted.
pub const GRPC_ABSENT: usize = GRPC_CODES - 1;

/// Buckets of a name's server-time histogram in one band of its parts'
/// sums (SS_HIST_SUB: one power of two).
pub const BAND_BUCKETS: usize = 1 << hist::SUB_BITS;

impl NameCounts {
    /// A name with nothing counted (histogram and bands sized as the
    /// kernel's).
    pub fn empty(port: u16, transport: Transport, wire: Wire, name: Vec<u8>) -> Self {
        NameCounts {
            port,
            transport,
            wire,
            name,
            commands: 0,
            batched: 0,
            noreply: 0,
            turns: 0,
            sum_ns: 0,
            max_ns: 0,
            hist: vec![0; hist::BUCKETS],
            status: [0; 4],
            grpc: [0; GRPC_CODES],
            parts: [0; 4],
            by_band: vec![0; hist::BUCKETS / BAND_BUCKETS * 4],
        }
    }

    /// A timed turn (queue, CPU, service, send) filed under the name, as
    /// the kernel's `name_turn_as` (src/bpf/names.h) files one: server
    /// time the parts' sum, its bucket, the parts' sums overall and in the
    /// bucket's band.
    pub fn add_turn(&mut self, parts: &[u64; 4]) {
        let server = parts.iter().fold(0u64, |s, p| s.wrapping_add(*p));
        self.turns += 1;
        self.sum_ns = self.sum_ns.wrapping_add(server);
        self.max_ns = self.max_ns.max(server);
        let b = hist::bucket_of(server);
        self.hist[b] += 1;
        let band = b / BAND_BUCKETS;
        for (p, ns) in parts.iter().enumerate() {
            self.parts[p] = self.parts[p].wrapping_add(*ns);
            if let Some(cell) = self.by_band.get_mut(band * 4 + p) {
                *cell = cell.wrapping_add(*ns);
            }
        }
    }

    /// What accumulated since `e` (the same port and name, read before).
    pub fn since(&self, e: &NameCounts) -> NameCounts {
        let mut out = self.clone();
        out.commands = self.commands.saturating_sub(e.commands);
        out.batched = self.batched.saturating_sub(e.batched);
        out.noreply = self.noreply.saturating_sub(e.noreply);
        out.turns = self.turns.saturating_sub(e.turns);
        out.sum_ns = self.sum_ns.saturating_sub(e.sum_ns);
        sub_from(&mut out.hist, &e.hist);
        sub_from(&mut out.status, &e.status);
        sub_from(&mut out.grpc, &e.grpc);
        sub_from(&mut out.parts, &e.parts);
        sub_from(&mut out.by_band, &e.by_band);
        out
    }

    /// The server-time histogram of its turns.
    pub fn histogram(&self) -> Histogram {
        let min = self
            .hist
            .iter()
            .position(|c| *c > 0)
            .map(hist::lower_bound)
            .unwrap_or(0);
        Histogram {
            counts: self.hist.clone(),
            min,
            max: self.max_ns,
        }
    }

    fn key(&self) -> (Transport, u16, Wire, &[u8]) {
        (self.transport, self.port, self.wire, &self.name)
    }
}

/// Everything the programs hold at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Counts {
    /// Per served port, sorted by transport and port.
    pub ports: Vec<PortTurns>,
    /// Turns of ports beyond the series limit.
    pub other: PortTurns,
    /// The counters (`abi::count`).
    pub count: [u64; COUNTS],
    /// Each program's runs (`abi::PROG_NAMES` order).
    pub progs: [ProgRuns; PROGS],
    /// Command names, sorted by transport, port, protocol and name.
    pub names: Vec<NameCounts>,
    /// What the loader's HTTP/2 decoding saw (cumulative, as `count`).
    pub h2: H2Stats,
    /// What the programs cost each command name's processes (the node
    /// agent's; empty elsewhere). Totals since the start: `since` keeps
    /// them as they are.
    pub services: Vec<super::service_cost::ServiceCost>,
    /// How long the per-request hooks were attached, ns, from the
    /// window's start to this reading: all of it when following every
    /// request, the samples' time under `--requests-duty`. What an
    /// exporter divides the request counters by for a rate (0 where the
    /// counts are not published; `since` keeps it as it is).
    pub observed_ns: u64,
}

impl Counts {
    /// Ends of turns a stack sample fell in: (written, the ring buffer had
    /// no room for).
    pub fn turn_ends(&self) -> (u64, u64) {
        (
            self.count[super::abi::count::TURN_ENDS],
            self.count[super::abi::count::TURN_ENDS_LOST],
        )
    }

    /// Nothing counted.
    pub fn empty() -> Self {
        Self {
            ports: Vec::new(),
            other: PortTurns::empty(0, Transport::Tcp),
            count: [0; COUNTS],
            progs: [ProgRuns::default(); PROGS],
            names: Vec::new(),
            h2: Default::default(),
            services: Vec::new(),
            observed_ns: 0,
        }
    }

    /// What accumulated since `earlier` (ports new since then kept whole).
    pub fn since(&self, earlier: &Counts) -> Counts {
        let ports = self
            .ports
            .iter()
            .map(|p| {
                match earlier
                    .ports
                    .iter()
                    .find(|e| e.port == p.port && e.transport == p.transport)
                {
                    Some(e) => p.since(e),
                    None => p.clone(),
                }
            })
            .collect();
        let mut count = self.count;
        for (c, e) in count.iter_mut().zip(earlier.count) {
            *c = c.saturating_sub(e);
        }
        let mut progs = self.progs;
        for (p, e) in progs.iter_mut().zip(earlier.progs) {
            *p = p.since(e);
        }
        let names = self
            .names
            .iter()
            .map(
                |n| match earlier.names.iter().find(|e| e.key() == n.key()) {
                    Some(e) => n.since(e),
                    None => n.clone(),
                },
            )
            .collect();
        Counts {
            ports,
            other: self.other.since(&earlier.other),
            count,
            progs,
            names,
            h2: self.h2.since(&earlier.h2),
            services: self.services.clone(),
            observed_ns: self.observed_ns,
        }
    }

    /// Every port's turns (and the overflow's) in one.
    pub fn total(&self) -> PortTurns {
        let mut t = PortTurns::empty(0, Transport::Tcp);
        for p in &self.ports {
            t.add(p);
        }
        t.add(&self.other);
        t
    }
}

/// What the loader's HTTP/2 decoding (`h2names::H2Names`) counted of its
/// own (cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct H2Stats {
    /// Records read.
    pub records: u64,
    /// Records ignored as malformed: too short, an unknown kind or
    /// direction, a transport that is none, a length past the chunk.
    pub malformed: u64,
    /// Connections seen (their first BLOCK record).
    pub connections: u64,
    /// Header blocks decoded, every kind.
    pub blocks: u64,
    /// Requests named (a stream's first client block with a `:method`).
    pub requests: u64,
    /// Stream ends read.
    pub ends: u64,
    /// Of them, resets (either side).
    pub resets: u64,
    /// Of them, timed and filed under their stream's name.
    pub timed: u64,
    /// Ends of streams with no name (their request block lost, in a lost
    /// direction, or dropped past a bound): filed nowhere.
    pub unnamed: u64,
    /// Of them, timed.
    pub unnamed_timed: u64,
    /// Requests whose name, and their port's "(other)", found no room
    /// (past `Limits::names`): counted here only.
    pub names_full: u64,
    /// Directions given up on (their decoder's table no longer known):
    /// the four below added.
    pub directions_lost: u64,
    /// Of them, at a piece that did not follow on from the one before.
    pub lost_gap: u64,
    /// At a frame that broke HTTP/2's framing.
    pub lost_framing: u64,
    /// At a header block past `Limits::block`.
    pub lost_too_large: u64,
    /// At a block that did not decode (HPACK's COMPRESSION_ERROR).
    pub lost_hpack: u64,
    /// BLOCK records of lost directions, ignored.
    pub after_loss: u64,
    /// Response blocks on a stream with no request kept.
    pub responses_unmatched: u64,
    /// PUSH_PROMISE blocks the target wrote (decoded, not named).
    pub pushes: u64,
    /// Streams dropped awaiting their end, past `Limits::streams`.
    pub streams_dropped: u64,
    /// Connections dropped, oldest first, past `Limits::conns` or
    /// `Limits::bytes`.
    pub conns_dropped: u64,
    /// Streams still awaiting their end when their connection closed or
    /// was dropped.
    pub closed_pending: u64,
}

impl H2Stats {
    /// What accumulated since `e` (an earlier reading), field by field.
    pub fn since(&self, e: &H2Stats) -> H2Stats {
        H2Stats {
            records: self.records.saturating_sub(e.records),
            malformed: self.malformed.saturating_sub(e.malformed),
            connections: self.connections.saturating_sub(e.connections),
            blocks: self.blocks.saturating_sub(e.blocks),
            requests: self.requests.saturating_sub(e.requests),
            ends: self.ends.saturating_sub(e.ends),
            resets: self.resets.saturating_sub(e.resets),
            timed: self.timed.saturating_sub(e.timed),
            unnamed: self.unnamed.saturating_sub(e.unnamed),
            unnamed_timed: self.unnamed_timed.saturating_sub(e.unnamed_timed),
            names_full: self.names_full.saturating_sub(e.names_full),
            directions_lost: self.directions_lost.saturating_sub(e.directions_lost),
            lost_gap: self.lost_gap.saturating_sub(e.lost_gap),
            lost_framing: self.lost_framing.saturating_sub(e.lost_framing),
            lost_too_large: self.lost_too_large.saturating_sub(e.lost_too_large),
            lost_hpack: self.lost_hpack.saturating_sub(e.lost_hpack),
            after_loss: self.after_loss.saturating_sub(e.after_loss),
            responses_unmatched: self
                .responses_unmatched
                .saturating_sub(e.responses_unmatched),
            pushes: self.pushes.saturating_sub(e.pushes),
            streams_dropped: self.streams_dropped.saturating_sub(e.streams_dropped),
            conns_dropped: self.conns_dropped.saturating_sub(e.conns_dropped),
            closed_pending: self.closed_pending.saturating_sub(e.closed_pending),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Turns made of (queue, cpu, service, send), added as the kernel
    /// adds them (the twin of turn_close's record_turn).
    pub(crate) fn turns(port: u16, values: &[[u64; 4]]) -> PortTurns {
        let mut t = PortTurns::empty(port, Transport::Tcp);
        for v in values {
            let server: u64 = v.iter().sum();
            let sb = hist::bucket_of(server);
            t.turns += 1;
            for (i, x) in v.iter().chain(std::iter::once(&server)).enumerate() {
                t.sum_ns[i] += x;
                t.max_ns[i] = t.max_ns[i].max(*x);
                t.hist[i][hist::bucket_of(*x)] += 1;
            }
            for (i, x) in v.iter().enumerate() {
                t.by_server[i][sb] += x;
            }
        }
        t
    }

    #[test]
    fn since_takes_away_what_was_there_and_keeps_new_ports_whole() {
        let mut before = Counts::empty();
        before.ports.push(turns(80, &[[10, 0, 100, 5]]));
        before.count[0] = 1;
        let mut now = Counts::empty();
        now.ports
            .push(turns(80, &[[10, 0, 100, 5], [20, 3, 200, 7]]));
        now.ports.push(turns(443, &[[1, 1, 1, 1]]));
        now.count[0] = 3;
        let d = now.since(&before);
        assert_eq!(d.count[0], 2);
        assert_eq!(d.ports[0].turns, 1);
        assert_eq!(d.ports[0].sum_ns[Part::Service as usize], 200);
        assert_eq!(d.ports[1].turns, 1);
        let total = d.total();
        assert_eq!(total.turns, 2);
        // The addends' sums equal the server time's, in the window too.
        let addends: u64 = Part::ADDENDS
            .iter()
            .map(|p| total.sum_ns[*p as usize])
            .sum();
        assert_eq!(addends, total.sum_ns[Part::Server as usize]);
    }

    #[test]
    fn names_since_take_away_their_own_earlier_counts_only() {
        let name = |n: &[u8], commands, port| NameCounts {
            port,
            transport: Transport::Tcp,
            wire: Wire::Resp,
            name: n.to_vec(),
            commands,
            batched: commands / 2,
            noreply: 0,
            turns: 1,
            sum_ns: 10,
            max_ns: 10,
            hist: vec![0; hist::BUCKETS],
            status: [0; 4],
            grpc: [0; GRPC_CODES],
            parts: [0; 4],
            by_band: Vec::new(),
        };
        let mut before = Counts::empty();
        before.names = vec![name(b"GET", 10, 6379), name(b"SET", 4, 6379)];
        let mut now = Counts::empty();
        now.names = vec![
            name(b"GET", 25, 6379),
            name(b"GET", 7, 6380),
            name(b"SET", 4, 6379),
        ];
        let d = now.since(&before);
        let got: Vec<(u16, &[u8], u64, u64)> = d
            .names
            .iter()
            .map(|n| (n.port, n.name.as_slice(), n.commands, n.batched))
            .collect();
        assert_eq!(
            got,
            vec![
                (6379, &b"GET"[..], 15, 7),
                (6380, &b"GET"[..], 7, 3),
                (6379, &b"SET"[..], 0, 0)
            ]
        );
    }

    #[test]
    fn a_dns_name_is_its_qtype_never_other_bytes() {
        assert_eq!(Wire::Dns.name_text(&[1]), "A");
        assert_eq!(Wire::Dns.name_text(&[28]), "AAAA");
        assert_eq!(Wire::Dns.name_text(&[1, 1]), "CAA");
        assert_eq!(Wire::Dns.name_text(&[0, 1]), "TYPE256");
        assert_eq!(Wire::Dns.name_text(&[0, 0xff]), "TYPE65280");
        assert_eq!(Wire::Dns.name_text(&[]), crate::report::commands::OTHER);
        assert_eq!(
            Wire::from_number(super::super::abi::wire::DNS),
            Some(Wire::Dns)
        );
        assert_eq!(Wire::Dns.name(), "dns");
    }

    #[test]
    fn a_part_histogram_has_the_observed_bounds() {
        let t = turns(80, &[[1000, 0, 300_000, 0], [2000, 0, 310_000, 0]]);
        let h = t.histogram(Part::Service);
        assert_eq!(h.total(), 2);
        assert_eq!(h.max, 310_000);
        assert!(h.min <= 300_000);
        let p50 = h.quantile(0.5).unwrap();
        assert!((280_000..=330_000).contains(&p50), "{p50}");
    }

    #[test]
    fn postgres_names_are_a_kind_and_an_escaped_statement_name() {
        let w = Wire::Postgres;
        assert_eq!(w.name_text(&[3]), "UPDATE");
        assert_eq!(w.name_text(b"\x01P_2"), "SELECT P_2");
        assert_eq!(w.name_text(b"\x05\x1b[31m\xff"), "BEGIN \x1b[31m\\xff");
        assert_eq!(w.name_text(&[0xee, b'a']), "\\xee a");
        assert_eq!(w.name_text(b""), crate::report::commands::OTHER);
        assert_eq!(Wire::Resp.name_text(b"GET"), "GET");
        for code in 1..=12 {
            assert!(super::super::abi::pg_kind(code).is_some(), "{code}");
        }
        assert!(super::super::abi::pg_kind(13).is_none());
    }
}
