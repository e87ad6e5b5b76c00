//! Sequenced UDP datagrams and the end-of-run report.
//!
//! Every datagram starts with a 32-byte little-endian header:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SSU2` |
//! | 4 | 4 | run id (random per `load udp` run) |
//! | 8 | 8 | DATA: sequence number (0-based); FIN, REPORT: datagrams published; NEED: the FIN length needed |
//! | 16 | 8 | send time, CLOCK_MONOTONIC ns (one-way latency on one host only) |
//! | 24 | 1 | kind: 0 DATA, 1 FIN, 2 REPORT, 3 NEED |
//! | 25 | 7 | zero |
//!
//! DATA is padded to the requested size. At the end the client sends FIN
//! (repeated, bounded) until the sink answers with REPORT, whose payload
//! after the header is a JSON [`SinkReport`] for that run id.
//!
//! The sink never answers with more bytes than the FIN it answers, so it
//! cannot amplify a forged FIN: the client pads its FIN with zeros, and a
//! FIN too short for the REPORT is answered with NEED, a bare header whose
//! `seq` is the FIN length that fits; the client pads to that and asks
//! again. The sink answers only the address the run's first datagram came
//! from. Version 1 (`SSU1`) answered every FIN in full: its datagrams are
//! foreign to version 2.

use serde::{Deserialize, Serialize};

use crate::clock::monotonic_ns;

/// Header length; the smallest datagram.
pub const HEADER_LEN: usize = 32;
/// Magic bytes at offset 0 (the last byte is the format version).
pub const MAGIC: [u8; 4] = *b"SSU2";
/// Largest UDP payload over IPv4: the longest FIN a client sends, so the
/// longest REPORT a sink can return.
pub const MAX_DATAGRAM: usize = 65_507;

/// Datagram kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A sequenced payload datagram.
    Data,
    /// End of run: `seq` holds the number of DATA datagrams published.
    Fin,
    /// The sink's report (JSON payload).
    Report,
    /// The sink's answer to a FIN too short for its REPORT: `seq` holds the
    /// FIN length (bytes, header included) that the REPORT fits in.
    Need,
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Run id.
    pub run: u32,
    /// Sequence number (DATA), published count (FIN, REPORT) or FIN length
    /// needed (NEED).
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
            Kind::Need => 3,
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
            3 => Kind::Need,
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
    /// DATA datagrams that arrived after the sink had evicted this run's
    /// state to make room for other runs: counted in no other figure, so
    /// when non-zero `received` is only a lower bound and loss is unknown.
    #[serde(default)]
    pub after_eviction: u64,
    /// The sink had evicted this run's state before answering: the
    /// figures are those up to the eviction (plus `after_eviction`).
    #[serde(default)]
    pub evicted: bool,
    /// The sink had forgotten this run once (dropped its record to bound
    /// its memory) and tracked it anew: what arrived before is in no
    /// figure, so received and loss are unknown.
    #[serde(default)]
    pub forgotten: bool,
    /// Datagrams of new runs the sink refused so far because every run it
    /// tracked was receiving (sink-wide): with `received` 0, this run may
    /// be one of them.
    #[serde(default)]
    pub runs_refused: u64,
}

/// A FIN for `run` with `published` DATA datagrams, zero-padded to `len`
/// bytes (at least the header).
pub fn fin_datagram(run: u32, published: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(HEADER_LEN)];
    Header {
        run,
        seq: published,
        sent_ns: monotonic_ns(),
        kind: Kind::Fin,
    }
    .encode(&mut b);
    b
}

/// A NEED: the FIN of `run` must be `len` bytes long for its REPORT.
pub fn need_datagram(run: u32, len: usize) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    Header {
        run,
        seq: len as u64,
        sent_ns: monotonic_ns(),
        kind: Kind::Need,
    }
    .encode(&mut b);
    b
}

/// The REPORT datagram for `rep` (header, `seq` = published, then JSON).
pub fn report_datagram(rep: &SinkReport, published: u64) -> serde_json::Result<Vec<u8>> {
    let json = serde_json::to_vec(rep)?;
    let mut b = vec![0u8; HEADER_LEN + json.len()];
    Header {
        run: rep.run,
        seq: published,
        sent_ns: monotonic_ns(),
        kind: Kind::Report,
    }
    .encode(&mut b);
    b[HEADER_LEN..].copy_from_slice(&json);
    Ok(b)
}

/// The SinkReport in a REPORT datagram (`buf` whole, header included).
pub fn parse_report(buf: &[u8]) -> serde_json::Result<SinkReport> {
    serde_json::from_slice(buf.get(HEADER_LEN..).unwrap_or_default())
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
        // Version 1 is foreign to version 2.
        buf[0..4].copy_from_slice(b"SSU1");
        assert_eq!(Header::decode(&buf), None);
    }

    #[test]
    fn fin_need_and_report_datagrams() {
        let fin = fin_datagram(9, 1000, 400);
        assert_eq!(fin.len(), 400);
        let h = Header::decode(&fin).unwrap();
        assert_eq!((h.run, h.seq, h.kind), (9, 1000, Kind::Fin));
        assert_eq!(fin_datagram(9, 1, 0).len(), HEADER_LEN);
        let need = need_datagram(9, 345);
        let h = Header::decode(&need).unwrap();
        assert_eq!((h.run, h.seq, h.kind), (9, 345, Kind::Need));
        let rep = SinkReport {
            run: 9,
            received: 990,
            ..Default::default()
        };
        let b = report_datagram(&rep, 1000).unwrap();
        let h = Header::decode(&b).unwrap();
        assert_eq!((h.run, h.seq, h.kind), (9, 1000, Kind::Report));
        assert_eq!(parse_report(&b).unwrap(), rep);
        assert!(parse_report(&b[..HEADER_LEN + 3]).is_err());
    }

    // Property tests: headers of every kind and REPORTs round-trip;
    // mutated datagrams (from any sender: the sink and the client read
    // what the network brings) decode or are foreign, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    fn header() -> impl Strategy<Value = Header> {
        let kind = prop::sample::select(vec![Kind::Data, Kind::Fin, Kind::Report, Kind::Need]);
        (any::<u32>(), any::<u64>(), any::<u64>(), kind).prop_map(|(run, seq, sent_ns, kind)| {
            Header {
                run,
                seq,
                sent_ns,
                kind,
            }
        })
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn datagrams_round_trip_and_mutations_never_panic(
            h in header(),
            pad in 0..64usize,
            counts in any::<(u64, u64, u64, Option<u64>)>(),
            jitter in -1e12..1e12f64,
            ms in hostile::mutations(),
        ) {
            let mut d = vec![0u8; HEADER_LEN + pad];
            h.encode(&mut d);
            prop_assert_eq!(Header::decode(&d), Some(h));
            let rep = SinkReport {
                run: h.run,
                received: counts.0,
                interior_gaps: counts.1,
                reordered: counts.2,
                max_seq: counts.3,
                jitter_ns: jitter,
                latency_hist: "HISTFAAAAB".into(),
                ..Default::default()
            };
            let r = report_datagram(&rep, h.seq).unwrap();
            prop_assert_eq!(parse_report(&r).unwrap(), rep);
            for bad in [hostile::mutate(&d, &ms), hostile::mutate(&r, &ms)] {
                if let Some(got) = Header::decode(&bad) {
                    prop_assert_eq!(&bad[..4], &MAGIC);
                    prop_assert!(matches!(bad[24], 0..=3));
                    let _ = got;
                }
                let _ = parse_report(&bad);
            }
        }
    }
}
