//! The request anatomy's commands (run.json's `anatomy.requests`,
//! `anatomy.resp`, `anatomy.memcached`, `anatomy.postgres`,
//! `anatomy.http`, `anatomy.dns` and `anatomy.endpoints`) and their table:
//! where the anatomy found request boundaries in the bytes (RESP,
//! memcached's text protocol, PostgreSQL's frontend protocol, HTTP/1, DNS
//! queries, HTTP/2 streams and gRPC calls; issue 39), each
//! command (an HTTP/1 request) is a request, and a
//! turn carries the commands its read(s) completed. A pipelined batch is
//! one turn: each of its commands is counted, and its server time is the
//! batch's. A memcached `noreply` command is counted, never timed.

use serde::{Deserialize, Serialize};

use super::units::fmt_ns;

/// The name of the row of the names past a port's limit.
pub const OTHER: &str = "(other)";

/// What one protocol's parser saw over the window (`anatomy.resp`,
/// `anatomy.memcached`, `anatomy.postgres`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolCounts {
    /// Connections found speaking it: RESP, a first read that began an
    /// array; memcached, a first word that was one of its commands (or a
    /// first byte that was its binary protocol's magic); PostgreSQL, a
    /// first read that was a startup packet (SSLRequest's too).
    pub connections: u64,
    /// Of them, those the parser gave up on (malformed bytes, a count or
    /// length past the server's limits, a read whose buffer it could not
    /// read, or one with more header or line bytes than it reads;
    /// memcached's binary protocol): their turns are timed, their later
    /// commands not counted.
    pub unparsed: u64,
    /// Turns closed that carried at least one command.
    pub turns: u64,
    /// Commands whose name found no room (counted in `requests`, in no
    /// row).
    pub unnamed: u64,
    /// memcached: commands sent with `noreply` (counted, never timed: no
    /// response comes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub noreply: u64,
    /// PostgreSQL: connections that went TLS (or GSS) encrypted after
    /// asking (SSLRequest, GSSENCRequest): not readable, their turns are
    /// turns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub encrypted: u64,
    /// HTTP/1: requests whose response's status was not read (a response
    /// read to the close, a write whose buffer could not be read, more
    /// requests waiting than the kernel keeps, a sampled window's pause):
    /// counted, in no status class. DNS: UDP answers whose RCODE was not
    /// read (the send's buffer could not be read).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub status_unknown: u64,
    /// HTTP/1: final responses written with no request read before them
    /// (a request read before the window, or one the parser gave up on).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmatched: u64,
    /// HTTP/1: 1xx interim responses (100 Continue): no request's answer
    /// and no turn's end.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interim: u64,
    /// DNS: UDP datagrams on a socket found speaking DNS that were no
    /// query (malformed, a response, another protocol): each datagram
    /// stands alone, so the socket is never given up on.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub malformed: u64,
    /// HTTP/2: streams begun (each a request; `turns` are those timed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub streams: u64,
    /// HTTP/2: streams reset (RST_STREAM either way): counted, untimed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reset: u64,
    /// HTTP/2: streams counted and named, not timed: begun while their
    /// connection's every timing slot was taken (more open streams than
    /// the kernel times at once), or whose marks came out of order (a
    /// read and a write raced on two CPUs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untimed: u64,
    /// HTTP/2: records (header blocks, stream ends) the ring buffer had no
    /// room for; each ends its connection's parsing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_lost: u64,
    /// HTTP/2: streams whose bytes' arrival was not kept (timed from
    /// their read: no queue wait).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub arrival_unseen: u64,
    /// HTTP/2: header-block directions the loader stopped decoding (a
    /// block that did not decode, broke the framing or passed the bounds):
    /// their later streams are counted and timed, unnamed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub names_lost: u64,
}

/// For `skip_serializing_if`: a count that is 0 is left out.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ProtocolCounts {
    /// Nothing seen (the protocol is left out of run.json).
    pub fn is_empty(&self) -> bool {
        *self == ProtocolCounts::default()
    }
}

/// The protocols' names, for people: "RESP", "memcached", "PostgreSQL",
/// "HTTP/1".
pub const RESP: &str = "RESP";
/// See [`RESP`].
pub const MEMCACHED: &str = "memcached";
/// See [`RESP`].
pub const POSTGRES: &str = "PostgreSQL";
/// See [`RESP`].
pub const HTTP1: &str = "HTTP/1";
/// See [`RESP`].
pub const DNS: &str = "DNS";
/// See [`RESP`].
pub const HTTP2: &str = "HTTP/2";

/// A DNS QTYPE as dig writes it: its mnemonic for the common types,
/// `TYPE<n>` for the rest (RFC 3597).
pub fn qtype_text(qtype: u16) -> String {
    let known = match qtype {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        41 => "OPT",
        43 => "DS",
        46 => "RRSIG",
        48 => "DNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        251 => "IXFR",
        252 => "AXFR",
        255 => "ANY",
        257 => "CAA",
        _ => return format!("TYPE{qtype}"),
    };
    known.to_string()
}

/// gRPC's status codes (grpc/grpc doc/statuscodes.md), 0 to 16.
pub const GRPC_CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// What a call that ended with no grpc-status (or one that is no code)
/// is counted as.
pub const GRPC_ABSENT: &str = "(absent)";

/// A gRPC status code's name (`NOT_FOUND`); [`GRPC_ABSENT`] past 16.
pub fn grpc_code_name(code: usize) -> &'static str {
    GRPC_CODE_NAMES.get(code).copied().unwrap_or(GRPC_ABSENT)
}

/// gRPC calls by status code name, `OK` first, then by count (most
/// first): "OK 90, NOT_FOUND 10".
pub fn grpc_status_text(codes: &std::collections::BTreeMap<String, u64>) -> String {
    codes_text(codes, "OK")
}

/// An endpoint's codes (gRPC's grpc-status or DNS's RCODE), for people:
/// the success code first, then by count.
pub fn endpoint_codes_text(e: &Endpoint) -> Option<String> {
    if let Some(c) = e.grpc_status.as_ref().filter(|c| !c.is_empty()) {
        return Some(codes_text(c, "OK"));
    }
    e.rcode
        .as_ref()
        .filter(|c| !c.is_empty())
        .map(|c| codes_text(c, "NOERROR"))
}

/// Counts by code name, `first` first, then by count (most first).
fn codes_text(codes: &std::collections::BTreeMap<String, u64>, first: &str) -> String {
    let mut v: Vec<(&String, &u64)> = codes.iter().collect();
    v.sort_by_key(|(name, n)| (name.as_str() != first, std::cmp::Reverse(**n)));
    v.iter()
        .map(|(name, n)| format!("{} {n}", crate::text::escape(name)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// HTTP/1 and HTTP/2 final responses by status class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusClasses {
    /// 2xx.
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    /// 3xx.
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    /// 4xx: client errors.
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    /// 5xx: errors.
    #[serde(rename = "5xx")]
    pub s5xx: u64,
}

impl StatusClasses {
    /// From the kernel's four counts (2xx..5xx).
    pub fn from_counts(c: [u64; 4]) -> Self {
        Self {
            s2xx: c[0],
            s3xx: c[1],
            s4xx: c[2],
            s5xx: c[3],
        }
    }

    /// Responses of every class.
    pub fn total(&self) -> u64 {
        self.s2xx + self.s3xx + self.s4xx + self.s5xx
    }
}

/// Each protocol's name (for people) and counts, as
/// `AnatomyReport::protocol_counts` lists them.
pub type Protocols<'a> = [(&'static str, &'a ProtocolCounts)];

/// The protocols whose connections were parsed, for people ("RESP",
/// "memcached", "RESP and memcached", "RESP, memcached and PostgreSQL");
/// "RESP" when none was.
pub fn protocols(list: &Protocols) -> String {
    let seen: Vec<&str> = list
        .iter()
        .filter(|(_, c)| c.connections > 0)
        .map(|(name, _)| *name)
        .collect();
    match seen.split_last() {
        None => RESP.to_string(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The turns that carried commands, every protocol.
pub fn command_turns(list: &Protocols) -> u64 {
    list.iter().map(|(_, c)| c.turns).sum()
}

/// One command name on one served port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Local port (a Unix listener's number when `transport` is "unix").
    pub port: u16,
    /// "tcp" or "unix".
    pub transport: String,
    /// A Unix listener's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// "resp", "memcached", "postgres", "http", "dns", "http2" or "grpc".
    pub protocol: String,
    /// The command's name as the peer sent it (RESP: its first bulk
    /// string's first 16 bytes, upper-cased; memcached: its line's first
    /// word's first 16 bytes, as sent; PostgreSQL: the statement's kind,
    /// then a prepared statement's name's first 15 bytes when it is named;
    /// HTTP/1: the method and the route template, `GET /users/{id}`, at
    /// most 64 bytes, ending in `…` when cut (HTTP/2 streams too); gRPC:
    /// the call's `:path`, `/helloworld.Greeter/SayHello`, at most 128
    /// bytes; DNS: the query's QTYPE as dig
    /// writes it, `AAAA`, `TYPE65280`, never its name; bytes that are not UTF-8 as
    /// `\xNN`); [`OTHER`] for the names past the port's limit. Peer bytes:
    /// escape before showing.
    pub name: String,
    /// Commands completed.
    pub count: u64,
    /// Of them, in turns that carried more than one command (pipelined
    /// batches: their server time is the batch's).
    pub batched: u64,
    /// Of them, memcached `noreply` commands: no response comes, so they
    /// are in no turn and never timed.
    #[serde(default)]
    pub noreply: u64,
    /// Timed turns filed under this name (a turn goes under its first
    /// command's name).
    pub turns: u64,
    /// Those turns' server time: median.
    pub server_p50_ns: u64,
    /// 90th percentile.
    #[serde(default)]
    pub server_p90_ns: u64,
    /// 99th percentile.
    pub server_p99_ns: u64,
    /// 99.9th percentile.
    #[serde(default)]
    pub server_p999_ns: u64,
    /// Their exact mean (the kernel's sum over `turns`).
    #[serde(default)]
    pub server_mean_ns: u64,
    /// Commands per second of the window (`count` over `window_s`; 0 in
    /// artifacts from before it was recorded).
    #[serde(default)]
    pub rate_per_s: f64,
    /// The timed turns' parts, their exact means (absent with no timed
    /// turn, and in artifacts from before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts_mean: Option<PartMeans>,
    /// What the turns at this endpoint's p50 and p99 of server time were
    /// made of: the means of the turns in the same power of two of server
    /// time (the kernel sums each name's parts by band, not by bucket).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_percentile: Vec<super::composition::Composition>,
    /// HTTP/1, HTTP/2 and gRPC: the final responses to these requests by
    /// status class (absent for the other protocols).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusClasses>,
    /// HTTP/1 and HTTP/2: of them, 5xx (server errors); gRPC: the calls
    /// whose grpc-status was not OK (none read counts); DNS: the UDP
    /// answers whose RCODE was neither NOERROR nor NXDOMAIN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// HTTP/1 and HTTP/2: of them, 4xx (client errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_errors: Option<u64>,
    /// gRPC: the calls ended, by grpc-status ("OK", "NOT_FOUND", ...;
    /// [`GRPC_ABSENT`]: none, or one that is no code); codes seen only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<std::collections::BTreeMap<String, u64>>,
    /// DNS over UDP: the answers by RCODE ("NOERROR", "NXDOMAIN",
    /// "SERVFAIL", [`DNS_OTHER_RCODE`] for the rest: REFUSED, FORMERR,
    /// NOTIMP...); codes seen only. TCP answers are not classed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcode: Option<std::collections::BTreeMap<String, u64>>,
}

/// The RCODEs a DNS endpoint's answers are counted by, in the kernel's
/// order (status[0..4]).
pub const DNS_RCODES: [&str; 4] = ["NOERROR", "NXDOMAIN", "SERVFAIL", DNS_OTHER_RCODE];

/// DNS answers with an RCODE other than NOERROR, NXDOMAIN and SERVFAIL.
pub const DNS_OTHER_RCODE: &str = "other (REFUSED, FORMERR, ...)";

/// The mean parts of a set of timed turns, ns (they add up to the mean
/// server time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartMeans {
    /// Queue wait.
    pub queue_wait_ns: f64,
    /// CPU wait.
    pub cpu_wait_ns: f64,
    /// Service.
    pub service_ns: f64,
    /// Send.
    pub send_ns: f64,
}

impl PartMeans {
    /// The parts with their names, in order.
    pub fn parts(&self) -> [(&'static str, f64); 4] {
        [
            ("queue wait", self.queue_wait_ns),
            ("CPU wait", self.cpu_wait_ns),
            ("service", self.service_ns),
            ("send", self.send_ns),
        ]
    }
}

impl Endpoint {
    /// The composition at `name` ("p50", "p99"), when recorded.
    pub fn composition(&self, name: &str) -> Option<&super::composition::Composition> {
        self.at_percentile.iter().find(|c| c.percentile == name)
    }

    /// The largest part of the turns at `name`: its name, its mean and
    /// their mean server time.
    pub fn dominant_at(&self, name: &str) -> Option<(&'static str, u64, u64)> {
        let c = self.composition(name)?;
        let (part, ns) = c.parts().into_iter().max_by_key(|(_, ns)| *ns)?;
        (c.server_ns > 0).then_some((part, ns, c.server_ns))
    }

    /// `tcp/6379`, or `unix:/run/redis.sock` (escaped).
    pub fn label(&self) -> String {
        match &self.socket {
            Some(name) => format!("unix:{}", crate::text::escape(name)),
            None => format!("{}/{}", self.transport, self.port),
        }
    }
}

/// A name's bytes as text: UTF-8 as it is, other bytes as `\xNN`; empty
/// is [`OTHER`].
pub fn name_text(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return OTHER.to_string();
    }
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Of the endpoints with timed turns, the (at most) three slowest at p99,
/// slowest first (ties: more turns first). Empty when fewer than two
/// endpoints were timed: one row says it all.
pub fn slowest_at_p99(endpoints: &[Endpoint]) -> Vec<&Endpoint> {
    let mut timed: Vec<&Endpoint> = endpoints.iter().filter(|e| e.turns > 0).collect();
    if timed.len() < 2 {
        return Vec::new();
    }
    timed.sort_by(|a, b| {
        b.server_p99_ns
            .cmp(&a.server_p99_ns)
            .then(b.turns.cmp(&a.turns))
    });
    timed.truncate(3);
    timed
}

/// "slowest at p99: HGETALL on tcp/6379 (p99 1.2ms over 40 turns; those
/// near its p99 averaged 1.3ms, mostly CPU wait 1.1ms), ..." (names
/// escaped), or None. "Near" is the turns in the same power of two of
/// server time as the p99 (the kernel sums a name's parts by band).
pub fn slowest_line(endpoints: &[Endpoint]) -> Option<String> {
    let slow = slowest_at_p99(endpoints);
    if slow.is_empty() {
        return None;
    }
    let items: Vec<String> = slow
        .iter()
        .map(|e| {
            format!(
                "{} on {} (p99 {} over {} turns{})",
                crate::text::escape(&e.name),
                e.label(),
                fmt_ns(e.server_p99_ns as f64),
                e.turns,
                e.dominant_at("p99")
                    .map(|(part, ns, of)| format!(
                        "; those near its p99 averaged {}, mostly {part} {}",
                        fmt_ns(of as f64),
                        fmt_ns(ns as f64)
                    ))
                    .unwrap_or_default()
            )
        })
        .collect();
    Some(format!("slowest at p99: {}", items.join(", ")))
}

/// The per-command table, as text, of an anatomy's `requests`, its
/// protocols' counts, `endpoints` and the names kept per port (None when
/// no command was counted; see `AnatomyReport::commands_text`).
pub fn render(
    requests: Option<u64>,
    list: &Protocols,
    endpoints: &[Endpoint],
    max_endpoints: Option<u32>,
) -> Option<String> {
    let requests = requests?;
    let mut out = format!(
        "Requests by command ({}; {requests} commands in {} turns: a pipelined batch is \
         one turn, each of its commands counted, its server time the batch's)\n",
        protocols(list),
        command_turns(list)
    );
    let noreply = endpoints.iter().any(|e| e.noreply > 0);
    let rate = endpoints.iter().any(|e| e.rate_per_s > 0.0);
    let status = endpoints.iter().any(|e| e.status.is_some());
    let opt = |on: bool, v: String| {
        if on {
            format!(" {v:>10}")
        } else {
            String::new()
        }
    };
    let classes = |c: [String; 4]| {
        if status {
            c.iter().map(|c| format!(" {c:>8}")).collect()
        } else {
            String::new()
        }
    };
    let names: Vec<String> = endpoints
        .iter()
        .map(|e| crate::text::escape(&e.name).into_owned())
        .collect();
    // HTTP/1 routes are longer than commands: the column fits them, up to
    // a width that keeps a row on a wide terminal.
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(16, 80);
    out.push_str(&format!(
        "  {:<22} {:<w$} {:>10}{} {:>10} {:>10} {:>10} {:>10}{}{}\n",
        "endpoint",
        "command",
        "count",
        opt(rate, "/s".into()),
        "batched",
        "p50",
        "p99",
        "p99.9",
        opt(noreply, "noreply".into()),
        classes(["2xx", "3xx", "4xx", "5xx"].map(String::from)),
    ));
    for (e, name) in endpoints.iter().zip(&names) {
        let timed = |ns: u64| {
            if e.turns == 0 {
                "-".to_string()
            } else {
                fmt_ns(ns as f64)
            }
        };
        let counts = match e.status {
            Some(s) => [s.s2xx, s.s3xx, s.s4xx, s.s5xx].map(|n| n.to_string()),
            None => ["-", "-", "-", "-"].map(String::from),
        };
        out.push_str(&format!(
            "  {:<22} {:<w$} {:>10}{} {:>10} {:>10} {:>10} {:>10}{}{}\n",
            e.label(),
            name,
            e.count,
            opt(rate, format!("{:.0}", e.rate_per_s)),
            e.batched,
            timed(e.server_p50_ns),
            timed(e.server_p99_ns),
            timed(e.server_p999_ns),
            opt(noreply, e.noreply.to_string()),
            classes(counts),
        ));
    }
    if let Some(line) = slowest_line(endpoints) {
        out.push_str(&format!("  {line}\n"));
    }
    let mut notes = Vec::new();
    for (e, name) in endpoints.iter().zip(&names) {
        if let Some(codes) = e.grpc_status.as_ref().filter(|c| !c.is_empty()) {
            notes.push(format!(
                "gRPC status of {name} on {}: {}",
                e.label(),
                grpc_status_text(codes)
            ));
        }
        if let Some(codes) = e.rcode.as_ref().filter(|c| !c.is_empty()) {
            notes.push(format!(
                "DNS answers to {name} on {}: {}",
                e.label(),
                codes_text(codes, "NOERROR")
            ));
        }
    }
    for (name, c) in list {
        if c.unparsed > 0 {
            notes.push(format!(
                "{} of {} {name} connections given up on (malformed or unreadable bytes): \
                 their later turns are timed, their commands not counted",
                c.unparsed, c.connections
            ));
        }
        if c.malformed > 0 {
            notes.push(format!(
                "{} {name} datagrams were no query (malformed or another protocol): not counted",
                c.malformed
            ));
        }
        if c.encrypted > 0 {
            notes.push(format!(
                "{} of {} {name} connections went TLS or GSS encrypted: not readable, their \
                 turns are turns",
                c.encrypted, c.connections
            ));
        }
    }
    let other: Vec<&Endpoint> = endpoints.iter().filter(|e| e.name == OTHER).collect();
    if !other.is_empty() {
        let count: u64 = other.iter().map(|e| e.count).sum();
        let limit = max_endpoints.map_or_else(String::new, |n| format!(" {n}"));
        notes.push(format!(
            "{count} requests of names past their port's first{limit} (--max-endpoints) \
             are summed as {OTHER}"
        ));
    }
    let unnamed: u64 = list.iter().map(|(_, c)| c.unnamed).sum();
    let memcached = list
        .iter()
        .find(|(name, _)| *name == MEMCACHED)
        .map_or_else(ProtocolCounts::default, |(_, c)| **c);
    if unnamed > 0 {
        notes.push(format!(
            "{unnamed} commands found no room for their name (counted, in no row)"
        ));
    }
    if memcached.noreply > 0 {
        notes.push(format!(
            "{} memcached commands were sent with noreply: counted, never timed (no response \
             comes)",
            memcached.noreply
        ));
    }
    for (name, c) in list {
        if c.status_unknown == 0 {
            continue;
        }
        notes.push(if *name == DNS {
            format!(
                "{} DNS answers over UDP had an RCODE not read (an unreadable send): in no \
                 RCODE",
                c.status_unknown
            )
        } else {
            format!(
                "{} {name} requests' status was not read (a response read to the close, an \
                 unreadable write, or more requests waiting than are kept): in no status class",
                c.status_unknown
            )
        });
    }
    let unmatched: u64 = list.iter().map(|(_, c)| c.unmatched).sum();
    if unmatched > 0 {
        notes.push(format!(
            "{unmatched} HTTP/1 responses answered no request read in the window"
        ));
    }
    for n in notes {
        out.push_str(&format!("  {n}\n"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Endpoint> {
        vec![Endpoint {
            port: 6379,
            transport: "tcp".into(),
            socket: None,
            protocol: "resp".into(),
            name: "G\x1b[31mET".into(),
            count: 48,
            batched: 32,
            noreply: 0,
            turns: 3,
            server_p50_ns: 20_000,
            server_p99_ns: 90_000,
            ..Endpoint::default()
        }]
    }

    #[test]
    fn the_table_escapes_peer_names_and_says_what_a_batch_is() {
        let resp = ProtocolCounts {
            connections: 2,
            unparsed: 1,
            turns: 4,
            unnamed: 0,
            ..ProtocolCounts::default()
        };
        let none = ProtocolCounts::default();
        let list = [(RESP, &resp), (MEMCACHED, &none)];
        let text = render(Some(48), &list, &rows(), Some(64)).unwrap();
        assert!(text.contains("G\\x1b[31mET"), "{text}");
        assert!(!text.contains('\x1b'));
        assert!(text.contains("48 commands in 4 turns"), "{text}");
        assert!(
            text.contains("1 of 2 RESP connections given up on"),
            "{text}"
        );
        assert!(render(None, &list, &[], None).is_none());
    }

    #[test]
    fn memcached_rows_name_their_protocol_and_noreply() {
        let mc = ProtocolCounts {
            connections: 3,
            unparsed: 1,
            turns: 10,
            unnamed: 0,
            noreply: 5,
            ..ProtocolCounts::default()
        };
        let mut rows = rows();
        rows[0].protocol = "memcached".into();
        rows[0].name = "set".into();
        rows[0].noreply = 5;
        let none = ProtocolCounts::default();
        let text = render(
            Some(48),
            &[(RESP, &none), (MEMCACHED, &mc)],
            &rows,
            Some(64),
        )
        .unwrap();
        assert!(text.starts_with("Requests by command (memcached; 48 commands in 10 turns"));
        assert!(text.contains("noreply"), "{text}");
        assert!(
            text.contains("1 of 3 memcached connections given up on"),
            "{text}"
        );
        assert!(
            text.contains("5 memcached commands were sent with noreply"),
            "{text}"
        );
        assert!(!mc.is_empty() && ProtocolCounts::default().is_empty());
        let both = ProtocolCounts {
            connections: 1,
            ..ProtocolCounts::default()
        };
        assert_eq!(
            protocols(&[(RESP, &both), (MEMCACHED, &mc)]),
            "RESP and memcached"
        );
        assert_eq!(
            protocols(&[(RESP, &both), (MEMCACHED, &mc), (POSTGRES, &both)]),
            "RESP, memcached and PostgreSQL"
        );
        assert_eq!(protocols(&[(RESP, &none), (POSTGRES, &both)]), "PostgreSQL");
    }

    #[test]
    fn http_rows_show_their_status_classes_and_the_notes_say_what_is_unknown() {
        let h1 = ProtocolCounts {
            connections: 2,
            turns: 7,
            status_unknown: 3,
            unmatched: 1,
            ..ProtocolCounts::default()
        };
        let mut rows = rows();
        rows[0].protocol = "http".into();
        rows[0].name = "GET /users/{id}/\u{1b}[2J".into();
        rows[0].status = Some(StatusClasses::from_counts([40, 1, 5, 2]));
        rows[0].errors = Some(2);
        rows[0].client_errors = Some(5);
        let none = ProtocolCounts::default();
        let text = render(Some(48), &[(RESP, &none), (HTTP1, &h1)], &rows, Some(64)).unwrap();
        assert!(text.starts_with("Requests by command (HTTP/1; 48 commands in 7 turns"));
        assert!(text.contains("2xx") && text.contains("5xx"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
        let row = text
            .lines()
            .find(|l| l.contains("GET /users/{id}"))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cols[cols.len() - 4..], ["40", "1", "5", "2"], "{row}");
        assert!(
            text.contains("3 HTTP/1 requests' status was not read"),
            "{text}"
        );
        assert!(
            text.contains("1 HTTP/1 responses answered no request"),
            "{text}"
        );
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(json["status"]["4xx"], 5);
        assert_eq!(json["errors"], 2);
        assert_eq!(StatusClasses::from_counts([1, 2, 3, 4]).total(), 10);
    }

    #[test]
    fn grpc_rows_say_their_status_codes() {
        let mut rows = rows();
        rows[0].protocol = "grpc".into();
        rows[0].name = "/helloworld.Greeter/SayHello".into();
        let codes: std::collections::BTreeMap<String, u64> = [
            (grpc_code_name(5).to_string(), 10),
            (grpc_code_name(0).to_string(), 90),
            (grpc_code_name(17).to_string(), 1),
        ]
        .into_iter()
        .collect();
        rows[0].grpc_status = Some(codes);
        rows[0].errors = Some(11);
        let none = ProtocolCounts::default();
        let text = render(Some(101), &[(RESP, &none)], &rows, Some(64)).unwrap();
        assert!(
            text.contains(
                "gRPC status of /helloworld.Greeter/SayHello on tcp/6379: OK 90, NOT_FOUND 10, \
                 (absent) 1"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(json["grpc_status"]["NOT_FOUND"], 10);
        assert_eq!(json["errors"], 11);
        let back: Endpoint = serde_json::from_value(json).unwrap();
        assert_eq!(back, rows[0]);
        assert_eq!(grpc_code_name(16), "UNAUTHENTICATED");
        // Other protocols write no grpc_status.
        let json = serde_json::to_value(&super::tests::rows()[0]).unwrap();
        assert!(json.get("grpc_status").is_none());
    }

    #[test]
    fn postgres_notes_say_what_went_encrypted_or_was_given_up_on() {
        let pg = ProtocolCounts {
            connections: 4,
            unparsed: 1,
            turns: 7,
            unnamed: 0,
            encrypted: 2,
            ..ProtocolCounts::default()
        };
        let mut rows = rows();
        rows[0].protocol = "postgres".into();
        rows[0].name = "SELECT P0_\x1b".into();
        let none = ProtocolCounts::default();
        let text = render(Some(9), &[(RESP, &none), (POSTGRES, &pg)], &rows, Some(64)).unwrap();
        assert!(text.starts_with("Requests by command (PostgreSQL; 9 commands in 7 turns"));
        assert!(
            text.contains("1 of 4 PostgreSQL connections given up on"),
            "{text}"
        );
        assert!(
            text.contains("2 of 4 PostgreSQL connections went TLS"),
            "{text}"
        );
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn the_slowest_endpoints_at_p99_come_first_and_a_lone_one_is_not_singled_out() {
        let row = |name: &str, p99: u64, turns: u64| Endpoint {
            port: 6379,
            transport: "tcp".into(),
            protocol: "resp".into(),
            name: name.into(),
            count: turns,
            turns,
            server_p99_ns: p99,
            ..Endpoint::default()
        };
        let mut rows = vec![
            row("GET", 20_000, 100),
            row("HGET\x1b", 3_000_000, 5),
            row("SET", 90_000, 50),
            row("INCR", 90_000, 70),
            row("NOTIMED", 9_000_000, 0),
        ];
        rows[2].at_percentile = vec![super::super::composition::Composition {
            percentile: "p99".into(),
            turns: 1,
            server_ns: 90_000,
            queue_wait_ns: 80_000,
            cpu_wait_ns: 0,
            service_ns: 10_000,
            send_ns: 0,
        }];
        let slow: Vec<&str> = slowest_at_p99(&rows)
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(slow, ["HGET\x1b", "INCR", "SET"]);
        let line = slowest_line(&rows).unwrap();
        assert!(
            line.starts_with("slowest at p99: HGET\\x1b on tcp/6379 (p99 3.00ms over 5 turns)"),
            "{line}"
        );
        assert!(!line.contains('\x1b'));
        assert!(
            line.ends_with("SET on tcp/6379 (p99 90.0us over 50 turns; those near its p99 averaged 90.0us, mostly queue wait 80.0us)"),
            "{line}"
        );
        assert!(slowest_line(&rows[..1]).is_none());
        let none = ProtocolCounts::default();
        let text = render(Some(230), &[(RESP, &none)], &rows, Some(64)).unwrap();
        assert!(text.contains("slowest at p99: HGET"), "{text}");
        assert!(!text.contains("--max-endpoints"), "{text}");
    }

    #[test]
    fn the_names_past_the_limit_are_said_to_be_summed() {
        let mut rows = rows();
        rows.push(Endpoint {
            name: name_text(b""),
            count: 7,
            ..rows[0].clone()
        });
        let none = ProtocolCounts::default();
        let text = render(Some(12), &[(RESP, &none)], &rows, Some(3)).unwrap();
        assert!(
            text.contains("7 requests of names past their port's first 3 (--max-endpoints) are summed as (other)"),
            "{text}"
        );
    }

    #[test]
    fn names_keep_every_byte_and_empty_is_other() {
        assert_eq!(name_text(b""), OTHER);
        assert_eq!(name_text(b"GET"), "GET");
        assert_eq!(name_text(b"A\xffB\xc3"), "A\\xffB\\xc3");
        assert_eq!(name_text("É".as_bytes()), "É");
    }

    #[test]
    fn qtypes_are_written_as_dig_writes_them() {
        assert_eq!(qtype_text(1), "A");
        assert_eq!(qtype_text(28), "AAAA");
        assert_eq!(qtype_text(65), "HTTPS");
        assert_eq!(qtype_text(257), "CAA");
        assert_eq!(qtype_text(0), "TYPE0");
        assert_eq!(qtype_text(65280), "TYPE65280");
    }

    #[test]
    fn dns_notes_say_how_many_datagrams_were_no_query() {
        let mut rows = rows();
        rows[0].protocol = "dns".into();
        rows[0].name = "AAAA".into();
        let dns = ProtocolCounts {
            connections: 2,
            unparsed: 1,
            turns: 9,
            malformed: 3,
            ..ProtocolCounts::default()
        };
        let none = ProtocolCounts::default();
        let text = render(Some(9), &[(RESP, &none), (DNS, &dns)], &rows, Some(64)).unwrap();
        assert!(
            text.starts_with("Requests by command (DNS; 9 commands in 9 turns"),
            "{text}"
        );
        assert!(text.contains("3 DNS datagrams were no query"), "{text}");
        assert!(
            text.contains("1 of 2 DNS connections given up on"),
            "{text}"
        );
    }
}
