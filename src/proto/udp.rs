//! Sequenced UDP datagrams and the end-of-run report.
//!
//! Every datagram starts with a 32-byte little-endian header:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SSU1` |
//! | 4 | 4 | run id (random per `load udp` run) |
//! | 8 | 8 | sequence number (0-based) for DATA; datagrams published for FIN |
//! | 16 | 8 | send time, CLOCK_MONOTONIC ns (one-way latency on one host only) |
//! | 24 | 1 | kind: 0 DATA, 1 FIN, 2 REPORT |
//! | 25 | 7 | zero |
//!
//! DATA is padded to the requested size. At the end the client sends FIN
//! (repeated, bounded) until the sink answers with REPORT, whose payload
//! after the header is a JSON [`SinkReport`] for that run id.

use serde::{Deserialize, Serialize};

/// Header length; the smallest datagram.
pub const HEADER_LEN: usize = 32;
/// Magic bytes at offset 0.
pub const MAGIC: [u8; 4] = *b"SSU1";

/// Datagram kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A sequenced payload datagram.
    Data,
    /// End of run: `seq` holds the number of DATA datagrams published.
    Fin,
    /// The sink's report (JSON payload).
    Report,
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Run id.
    pub run: u32,
    /// Sequence number (DATA) or published count (FIN).
    pub seq: u64,
    /// CLOCK_MONOTONIC send time, ns.
    pub sent_ns: u64,
    /// Kind.
    pub kind: Kind,
}

impl Header {
    /// Writes the header into the first HEADER_LEN bytes of `buf`.
    pub fn encode(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&self.run.to_le_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_le_bytes());
        buf[16..24].copy_from_slice(&self.sent_ns.to_le_bytes());
        buf[24] = match self.kind {
            Kind::Data => 0,
            Kind::Fin => 1,
            Kind::Report => 2,
        };
        buf[25..32].fill(0);
    }

    /// Parses a datagram's header; None for anything that is not ours.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < HEADER_LEN || buf[0..4] != MAGIC {
            return None;
        }
        let kind = match buf[24] {
            0 => Kind::Data,
            1 => Kind::Fin,
            2 => Kind::Report,
            _ => return None,
        };
        Some(Self {
            run: u32::from_le_bytes(buf[4..8].try_into().ok()?),
            seq: u64::from_le_bytes(buf[8..16].try_into().ok()?),
            sent_ns: u64::from_le_bytes(buf[16..24].try_into().ok()?),
            kind,
        })
    }
}

/// What the sink observed for one run, sent back in REPORT and printed by
/// `serve udp-sink`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Run id.
    pub run: u32,
    /// Distinct DATA datagrams received (duplicates not counted).
    pub received: u64,
    /// Sequence numbers skipped and never filled in later: holes below the
    /// highest sequence seen. Tail drops are not visible here; compare
    /// published with received for the loss.
    pub interior_gaps: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub reordered: u64,
    /// Datagrams received more than once.
    pub duplicates: u64,
    /// Highest sequence number seen, if any.
    pub max_seq: Option<u64>,
    /// RFC 3550 interarrival jitter estimate, ns.
    pub jitter_ns: f64,
    /// One-way latency (send stamp to receive), HdrHistogram V2 base64;
    /// meaningful only when sender and sink share a clock (one host).
    pub latency_hist: String,
    /// Receive buffer the kernel granted the sink's socket (getsockopt).
    pub rcvbuf_granted: u64,
}

/// CLOCK_MONOTONIC now, ns (the clock the send stamps use).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_rejects_foreign() {
        let h = Header {
            run: 0xdead_beef,
            seq: 42,
            sent_ns: 123_456_789,
            kind: Kind::Fin,
        };
        let mut buf = [0u8; 64];
        h.encode(&mut buf);
        assert_eq!(Header::decode(&buf), Some(h));
        assert_eq!(Header::decode(&buf[..31]), None);
        buf[0] = b'X';
        assert_eq!(Header::decode(&buf), None);
    }
}
