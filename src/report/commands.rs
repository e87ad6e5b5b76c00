//! The request anatomy's commands (run.json's `anatomy.requests`,
//! `anatomy.resp` and `anatomy.endpoints`) and their table: where the
//! anatomy found request boundaries in the bytes (RESP, issue 39), each
//! command is a request, and a turn carries the commands its read(s)
//! completed. A pipelined batch is one turn: each of its commands is
//! counted, and its server time is the batch's.

use serde::{Deserialize, Serialize};

use super::units::fmt_ns;

/// The name of the row of the names past a port's limit.
pub const OTHER: &str = "(other)";

/// What the RESP parser saw over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RespCounts {
    /// Connections whose first read began a RESP array.
    pub connections: u64,
    /// Of them, those the parser gave up on (a malformed header, a count
    /// or length past redis's limits, a read whose buffer it could not
    /// read, or one with more header bytes than it reads): their turns
    /// are timed, their later commands not counted.
    pub unparsed: u64,
    /// Turns closed that carried at least one command.
    pub turns: u64,
    /// Commands whose name found no room (counted in `requests`, in no
    /// row).
    pub unnamed: u64,
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
    /// "resp".
    pub protocol: String,
    /// The command's name as the peer sent it (its first bulk string's
    /// first 16 bytes, upper-cased; bytes that are not UTF-8 as `\xNN`);
    /// [`OTHER`] for the names past the port's limit. Peer bytes: escape
    /// before showing.
    pub name: String,
    /// Commands completed.
    pub count: u64,
    /// Of them, in turns that carried more than one command (pipelined
    /// batches: their server time is the batch's).
    pub batched: u64,
    /// Timed turns filed under this name (a turn goes under its first
    /// command's name).
    pub turns: u64,
    /// Those turns' server time: median.
    pub server_p50_ns: u64,
    /// 99th percentile.
    pub server_p99_ns: u64,
}

impl Endpoint {
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

/// The per-command table, as text, of an anatomy's `requests`, `resp`
/// and `endpoints` (None when no command was counted; see
/// `AnatomyReport::commands_text`).
pub fn render(requests: Option<u64>, resp: &RespCounts, endpoints: &[Endpoint]) -> Option<String> {
    let requests = requests?;
    let mut out = format!(
        "Requests by command (RESP; {requests} commands in {} turns: a pipelined batch is \
         one turn, each of its commands counted, its server time the batch's)\n",
        resp.turns
    );
    out.push_str(&format!(
        "  {:<22} {:<16} {:>10} {:>10} {:>10} {:>10}\n",
        "endpoint", "command", "count", "batched", "p50", "p99"
    ));
    for e in endpoints {
        let timed = |ns: u64| {
            if e.turns == 0 {
                "-".to_string()
            } else {
                fmt_ns(ns as f64)
            }
        };
        out.push_str(&format!(
            "  {:<22} {:<16} {:>10} {:>10} {:>10} {:>10}\n",
            e.label(),
            crate::text::escape(&e.name),
            e.count,
            e.batched,
            timed(e.server_p50_ns),
            timed(e.server_p99_ns)
        ));
    }
    let mut notes = Vec::new();
    if resp.unparsed > 0 {
        notes.push(format!(
            "{} of {} RESP connections given up on (malformed or unreadable bytes): their \
             later turns are timed, their commands not counted",
            resp.unparsed, resp.connections
        ));
    }
    if resp.unnamed > 0 {
        notes.push(format!(
            "{} commands found no room for their name (counted, in no row)",
            resp.unnamed
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
            turns: 3,
            server_p50_ns: 20_000,
            server_p99_ns: 90_000,
        }]
    }

    #[test]
    fn the_table_escapes_peer_names_and_says_what_a_batch_is() {
        let resp = RespCounts {
            connections: 2,
            unparsed: 1,
            turns: 4,
            unnamed: 0,
        };
        let text = render(Some(48), &resp, &rows()).unwrap();
        assert!(text.contains("G\\x1b[31mET"), "{text}");
        assert!(!text.contains('\x1b'));
        assert!(text.contains("48 commands in 4 turns"), "{text}");
        assert!(
            text.contains("1 of 2 RESP connections given up on"),
            "{text}"
        );
        assert!(render(None, &resp, &[]).is_none());
    }

    #[test]
    fn names_keep_every_byte_and_empty_is_other() {
        assert_eq!(name_text(b""), OTHER);
        assert_eq!(name_text(b"GET"), "GET");
        assert_eq!(name_text(b"A\xffB\xc3"), "A\\xffB\\xc3");
        assert_eq!(name_text("É".as_bytes()), "É");
    }
}
