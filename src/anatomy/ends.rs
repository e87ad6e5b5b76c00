//! The ends of the timed turns a stack sample fell in, as the programs
//! write them (`struct ss_turn_end` through the HTTP/2 ring buffer, kind
//! `SS_H2_REC_TURN`) when samples are tied to requests: what the stack
//! sampler's samples of a turn need to be put in the tail or the rest
//! (its server time, its endpoint) and to explain its queue wait (when it
//! arrived, who read it and when). Nothing is written for a turn no sample
//! fell in, so their number follows the samples, not the requests.

use super::abi::{NAME_LEN, types};
use super::counts::{Transport, Wire};
use crate::probe::pod;

/// A sample's turn flag: its thread interleaves requests (HTTP/2
/// streams), so the sample is no one request's.
pub const TURN_INTERLEAVED: u64 = types::ss_anat_tie::SS_TURN_INTERLEAVED.0 as u64;
/// A sample's turn flag: its thread had written the turn's response
/// before the sample.
pub const TURN_AFTER_WRITE: u64 = types::ss_anat_tie::SS_TURN_AFTER_WRITE.0 as u64;

/// The most ends a window keeps (about 120 MB at most); the rest are
/// counted, and their samples go to the unattributed.
pub const MAX_TURN_ENDS: usize = 1 << 20;

/// One timed turn a sample fell in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnEnd {
    /// The anatomy's number of the turn (what the samples carry).
    pub turn: u64,
    /// The thread that read its request.
    pub tid: u32,
    /// Its port's statistics key.
    pub port: u16,
    /// Its transport (None: a number this build does not know).
    pub transport: Option<Transport>,
    /// Its endpoint: protocol and the name's bytes (HTTP/1: the route's
    /// text once [`TurnEnd::resolve_http1`] ran); None when unnamed.
    pub endpoint: Option<(Wire, Vec<u8>)>,
    /// When its request's data arrived, was first read, and its response
    /// was last written (CLOCK_MONOTONIC ns).
    pub arrival_ns: u64,
    /// See `arrival_ns`.
    pub first_read_ns: u64,
    /// See `arrival_ns`.
    pub last_write_ns: u64,
    /// Queue wait, CPU wait, service, send (ns): they add up to its
    /// server time.
    pub parts: [u64; 4],
}

impl TurnEnd {
    /// Its server time: the four parts' sum.
    pub fn server_ns(&self) -> u64 {
        self.parts.iter().fold(0u64, |a, p| a.saturating_add(*p))
    }

    /// Reads one record (None: not a turn's end, or short).
    pub fn parse(bytes: &[u8]) -> Option<TurnEnd> {
        let e: types::ss_turn_end = pod::read(bytes)?;
        if e.h.kind != super::abi::h2::REC_TURN {
            return None;
        }
        let name = &e.name[..NAME_LEN.min(e.name.len())];
        let len = name.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        let endpoint = (e.named != 0)
            .then(|| Wire::from_number(e.wire).map(|w| (w, name[..len].to_vec())))
            .flatten();
        Some(TurnEnd {
            turn: e.h.conn,
            tid: e.h.stream,
            port: e.h.port,
            transport: Transport::from_number(e.h.proto),
            endpoint,
            arrival_ns: e.arrival,
            first_read_ns: e.first_read,
            last_write_ns: e.last_write,
            parts: e.parts,
        })
    }

    /// The endpoint's name as the anatomy's endpoints show it (None:
    /// unnamed).
    pub fn endpoint_name(&self) -> Option<String> {
        self.endpoint
            .as_ref()
            .map(|(wire, name)| wire.name_text(name))
    }
}

/// The ends a window collected, bounded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnEnds {
    /// The ends kept, in the order they came.
    pub ends: Vec<TurnEnd>,
    /// Ends past [`MAX_TURN_ENDS`], not kept.
    pub dropped: u64,
    /// Records that were no turn's end the reader knows (malformed).
    pub malformed: u64,
}

impl TurnEnds {
    /// Adds one record's end.
    pub fn record(&mut self, bytes: &[u8]) {
        match TurnEnd::parse(bytes) {
            Some(_) if self.ends.len() >= MAX_TURN_ENDS => self.dropped += 1,
            Some(e) => self.ends.push(e),
            None => self.malformed += 1,
        }
    }
}

/// Is this ring-buffer record a turn's end (not an HTTP/2 one)?
pub fn is_turn_end(bytes: &[u8]) -> bool {
    pod::read::<types::ss_h2_head>(bytes).is_some_and(|h| h.kind == super::abi::h2::REC_TURN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(turn: u64, named: bool, wire: u8, name: &[u8], parts: [u64; 4]) -> Vec<u8> {
        let mut e = types::ss_turn_end::default();
        e.h.conn = turn;
        e.h.stream = 77;
        e.h.port = 6379;
        e.h.proto = 6;
        e.h.kind = super::super::abi::h2::REC_TURN;
        e.arrival = 10;
        e.first_read = 20;
        e.last_write = 90;
        e.parts = parts;
        e.wire = wire;
        e.named = u8::from(named);
        for (d, s) in e.name.iter_mut().zip(name) {
            *d = *s;
        }
        pod::as_bytes(&e).to_vec()
    }

    #[test]
    fn a_turn_end_round_trips_with_its_endpoint_and_server_time() {
        let resp = super::super::abi::wire::RESP;
        let bytes = record(42, true, resp, b"GET", [1, 2, 3, 4]);
        assert!(is_turn_end(&bytes));
        let e = TurnEnd::parse(&bytes).unwrap();
        assert_eq!(e.turn, 42);
        assert_eq!(e.tid, 77);
        assert_eq!(e.transport, Some(Transport::Tcp));
        assert_eq!(e.endpoint, Some((Wire::Resp, b"GET".to_vec())));
        assert_eq!(e.endpoint_name().as_deref(), Some("GET"));
        assert_eq!(e.server_ns(), 10);
        assert_eq!(
            (e.arrival_ns, e.first_read_ns, e.last_write_ns),
            (10, 20, 90)
        );
        let unnamed = TurnEnd::parse(&record(43, false, resp, b"GET", [0; 4])).unwrap();
        assert_eq!(unnamed.endpoint, None);
    }

    #[test]
    fn ends_past_the_bound_are_counted_not_kept() {
        let mut t = TurnEnds {
            ends: vec![TurnEnd::parse(&record(2, false, 0, b"", [0; 4])).unwrap(); MAX_TURN_ENDS],
            ..TurnEnds::default()
        };
        t.record(&record(4, false, 0, b"", [0; 4]));
        assert_eq!((t.ends.len(), t.dropped), (MAX_TURN_ENDS, 1));
        t.record(&[1, 2, 3]);
        assert_eq!(t.malformed, 1);
    }

    proptest! {
        #[test]
        fn mutated_turn_ends_never_panic(
            turn in any::<u64>(),
            wire in any::<u8>(),
            name in proptest::collection::vec(any::<u8>(), 0..16),
            parts in any::<[u64; 4]>(),
            flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..8),
            cut in 0usize..200,
        ) {
            let mut bytes = record(turn, true, wire, &name, parts);
            for (at, b) in flips {
                if let Some(x) = bytes.get_mut(at) {
                    *x = b;
                }
            }
            bytes.truncate(cut.min(bytes.len()));
            if let Some(e) = TurnEnd::parse(&bytes) {
                let _ = e.server_ns();
                let _ = e.endpoint_name();
            }
        }
    }
}
