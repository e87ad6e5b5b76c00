//! HTTP/2 (h2c) streams named per endpoint from the kernel's ring-buffer
//! records (src/bpf/anatomy.h, `ss_h2_*`). The kernel times each stream
//! but cannot decode HPACK, so it sends the bytes of every header block
//! of a connection, both ways, in order, and each stream's end with its
//! parts; here each connection's two HPACK decoders (the client's
//! encoder's table, the target's) read every block in order, a request
//! block names its stream (a gRPC call by its `:path`, any other request
//! by its method and route template, folded as HTTP/1's), the response
//! blocks give its `:status` and `grpc-status`, and its end files its
//! time under the name, as the kernel's `name_turn_as` files an HTTP/1
//! turn. The counts take [`NameCounts`]' shape, so they join the
//! kernel's names in the report.
//!
//! Peer bytes are hostile, and so, for this code, are the records: every
//! record is checked, none panics, and memory is bounded by [`Limits`]
//! (connections, streams per connection, names, block bytes and the
//! bytes all decoders hold together) whatever the records say.

mod frames;
mod names;
pub mod route;

use std::collections::{BTreeMap, HashMap};
use std::mem::offset_of;

use self::frames::{Decoded, Direction, Lost, Piece};
use self::names::NameTable;
use super::abi::h2;
pub use super::counts::H2Stats;
use super::counts::{GRPC_ABSENT, NameCounts, Transport, Wire};
use crate::probe::pod;

/// The bounds of what [`H2Names`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections followed at once (past it the oldest is dropped).
    pub conns: usize,
    /// Streams per connection awaiting their end (past it the oldest,
    /// the lowest id, is dropped).
    pub streams: usize,
    /// Each decoder's dynamic table, bytes as RFC 7541 counts them (the
    /// SETTINGS that set it are not seen: generous).
    pub table: usize,
    /// A header list's decoded size (RFC 9113's SETTINGS_MAX_HEADER_LIST_SIZE).
    pub list: usize,
    /// A header block's coded bytes.
    pub block: usize,
    /// Names kept, "(other)"s included, every port.
    pub names: usize,
    /// What all connections' decoders and blocks hold together; past it
    /// the oldest connections are dropped.
    pub bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            conns: 16384,
            streams: 1024,
            table: 65536,
            list: 65536,
            block: 65536,
            names: 4096,
            bytes: 256 << 20,
        }
    }
}

/// A stream awaiting its end.
#[derive(Clone, Copy, Debug)]
struct Stream {
    /// Its name's index; None when no room was found.
    name: Option<usize>,
    /// A final `:status` was counted.
    final_seen: bool,
    /// The last `grpc-status` read ([`GRPC_ABSENT`] when not a number).
    grpc: Option<usize>,
}

/// Bytes a kept stream costs, about (the map's node share included).
const STREAM_BYTES: usize = 64;

/// One connection's state.
struct Conn {
    transport: Transport,
    port: u16,
    /// When it was first seen (its place in `H2Names::age`).
    seq: u64,
    dirs: [Direction; 2],
    streams: BTreeMap<u32, Stream>,
    /// Its footprint when last reckoned.
    held: usize,
}

impl Conn {
    fn footprint(&self) -> usize {
        self.dirs[0].footprint() + self.dirs[1].footprint() + self.streams.len() * STREAM_BYTES
    }
}

/// HTTP/2 stream names and counts from the kernel's records.
pub struct H2Names {
    limits: Limits,
    conns: HashMap<u64, Conn>,
    /// Connections by age (seq → connection).
    age: BTreeMap<u64, u64>,
    next_seq: u64,
    names: NameTable,
    /// What the connections hold together.
    held: usize,
    stats: H2Stats,
}

impl H2Names {
    /// Names per port at most `max_endpoints` (both wires together; the
    /// rest go to their wire's "(other)"), within the default limits.
    pub fn new(max_endpoints: u32) -> Self {
        Self::with_limits(max_endpoints, Limits::default())
    }

    /// The same within `limits`.
    pub fn with_limits(max_endpoints: u32, limits: Limits) -> Self {
        Self {
            limits,
            conns: HashMap::new(),
            age: BTreeMap::new(),
            next_seq: 0,
            names: NameTable::new(max_endpoints, limits.names),
            held: 0,
            stats: H2Stats::default(),
        }
    }

    /// One ring-buffer record as the kernel wrote it. Never panics; a
    /// malformed record is counted.
    pub fn record(&mut self, bytes: &[u8]) {
        self.stats.records += 1;
        let Some(head) = pod::read::<h2::Head>(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        let ok = match head.kind {
            k if k == h2::REC_BLOCK => self.block(&head, bytes),
            k if k == h2::REC_END => self.end(bytes),
            k if k == h2::REC_CLOSE => {
                self.drop_conn(head.conn);
                true
            }
            _ => false,
        };
        if !ok {
            self.stats.malformed += 1;
        }
    }

    /// Cumulative per-name counts so far (wires Http2 and Grpc), sorted
    /// by transport, port, wire and name, as the kernel's names are.
    pub fn names(&self) -> Vec<NameCounts> {
        self.names.sorted()
    }

    /// Its own counters.
    pub fn stats(&self) -> H2Stats {
        self.stats
    }

    /// Connections followed now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The most streams any connection keeps now.
    pub fn most_streams(&self) -> usize {
        self.conns
            .values()
            .map(|c| c.streams.len())
            .max()
            .unwrap_or(0)
    }

    /// Bytes the connections hold together (decoders, blocks, streams).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Names kept now.
    pub fn name_count(&self) -> usize {
        self.names.len()
    }

    /// A BLOCK record; false when malformed.
    fn block(&mut self, head: &h2::Head, bytes: &[u8]) -> bool {
        let at = |o: usize, n: usize| bytes.get(o..o + n);
        let (Some(off), Some(len)) = (
            at(offset_of!(h2::Block, off), 4),
            at(offset_of!(h2::Block, len), 2),
        ) else {
            return false;
        };
        let off = u32::from_ne_bytes([off[0], off[1], off[2], off[3]]);
        let len = usize::from(u16::from_ne_bytes([len[0], len[1]]));
        let data_at = offset_of!(h2::Block, data);
        let (Some(data), Some(transport)) = (
            bytes.get(data_at..data_at + len),
            Transport::from_number(head.proto),
        ) else {
            return false;
        };
        if len > h2::CHUNK || head.dir > 1 || head.conn == 0 {
            return false;
        }
        let piece = Piece {
            stream: head.stream,
            ftype: head.ftype,
            flags: head.fflags,
            flen: head.flen,
            off,
            data,
        };
        let id = head.conn;
        if !self.conns.contains_key(&id) {
            self.open(id, transport, head.port);
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return true;
        };
        let dir = usize::from(head.dir);
        if conn.dirs[dir].is_lost() {
            self.stats.after_loss += 1;
            return true;
        }
        match conn.dirs[dir].piece(&piece) {
            Ok(Some(d)) => {
                self.stats.blocks += 1;
                self.decoded(id, dir, d);
            }
            Ok(None) => {}
            Err(why) => {
                self.stats.directions_lost += 1;
                *match why {
                    Lost::Gap => &mut self.stats.lost_gap,
                    Lost::Framing => &mut self.stats.lost_framing,
                    Lost::TooLarge => &mut self.stats.lost_too_large,
                    Lost::Hpack => &mut self.stats.lost_hpack,
                } += 1;
            }
        }
        self.reckon(id);
        true
    }

    /// A connection's first record: room made for it.
    fn open(&mut self, id: u64, transport: Transport, port: u16) {
        while self.conns.len() >= self.limits.conns.max(1) {
            let Some((_, oldest)) = self.age.first_key_value().map(|(s, c)| (*s, *c)) else {
                break;
            };
            self.stats.conns_dropped += 1;
            self.drop_conn(oldest);
        }
        let l = &self.limits;
        let dir = || Direction::new(l.table, l.list, l.block);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.conns.insert(
            id,
            Conn {
                transport,
                port,
                seq,
                dirs: [dir(), dir()],
                streams: BTreeMap::new(),
                held: 0,
            },
        );
        self.age.insert(seq, id);
        self.stats.connections += 1;
    }

    /// A connection's state dropped (closed, or past a bound).
    fn drop_conn(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            self.age.remove(&c.seq);
            self.held -= c.held;
            self.stats.closed_pending += c.streams.len() as u64;
        }
    }

    /// A connection's footprint reckoned again; past the byte budget the
    /// oldest other connections are dropped.
    fn reckon(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let now = c.footprint();
        self.held = self.held - c.held + now;
        c.held = now;
        while self.held > self.limits.bytes {
            let Some(oldest) = self.age.values().copied().find(|c| *c != id) else {
                break;
            };
            self.stats.conns_dropped += 1;
            self.drop_conn(oldest);
        }
    }

    /// A whole block of direction `dir` of connection `id`.
    fn decoded(&mut self, id: u64, dir: usize, d: Decoded) {
        if d.push {
            if dir == 1 {
                self.stats.pushes += 1;
            }
            return;
        }
        let Some(c) = self.conns.get(&id) else {
            return;
        };
        let (transport, port) = (c.transport, c.port);
        if dir == 0 {
            // A stream's first client block with a method is its
            // request; later ones (trailers) and stray ones count nothing.
            let (Some(method), false) = (&d.fields.method, c.streams.contains_key(&d.stream))
            else {
                return;
            };
            let path = d.fields.path.as_deref().unwrap_or_default();
            let grpc = d.fields.content_type.as_deref().is_some_and(route::is_grpc);
            let (wire, text) = if grpc {
                (Wire::Grpc, route::grpc_name(path))
            } else {
                (Wire::Http2, route::http_name(method, path))
            };
            let name = self.names.entry(transport, port, wire, text);
            match name.and_then(|i| self.names.get_mut(i)) {
                Some(n) => n.commands += 1,
                None => self.stats.names_full += 1,
            }
            self.stats.requests += 1;
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            c.streams.insert(
                d.stream,
                Stream {
                    name,
                    final_seen: false,
                    grpc: None,
                },
            );
            while c.streams.len() > self.limits.streams.max(1) {
                c.streams.pop_first();
                self.stats.streams_dropped += 1;
            }
            return;
        }
        let Some(s) = self
            .conns
            .get_mut(&id)
            .and_then(|c| c.streams.get_mut(&d.stream))
        else {
            self.stats.responses_unmatched += 1;
            return;
        };
        let final_status = d
            .fields
            .status
            .as_deref()
            .filter(|st| !s.final_seen && !route::is_interim(st));
        if let Some(status) = final_status {
            s.final_seen = true;
            let n = s.name.and_then(|i| self.names.get_mut(i));
            if let (Some(class), Some(n)) = (route::status_class(status), n) {
                n.status[class] += 1;
            }
        }
        if let Some(g) = &d.fields.grpc_status {
            s.grpc = Some(route::grpc_code(g).map_or(GRPC_ABSENT, usize::from));
        }
    }

    /// An END record; false when malformed.
    fn end(&mut self, bytes: &[u8]) -> bool {
        let Some(e) = pod::read::<h2::End>(bytes) else {
            return false;
        };
        if !matches!(
            e.how,
            h2::END_STREAM | h2::END_RESET_SERVER | h2::END_RESET_CLIENT
        ) {
            return false;
        }
        self.stats.ends += 1;
        if e.how != h2::END_STREAM {
            self.stats.resets += 1;
        }
        let timed = e.timed != 0;
        let stream = self
            .conns
            .get_mut(&e.h.conn)
            .and_then(|c| c.streams.remove(&e.h.stream));
        let Some(s) = stream else {
            self.stats.unnamed += 1;
            self.stats.unnamed_timed += u64::from(timed);
            return true;
        };
        self.reckon(e.h.conn);
        let Some(n) = s.name.and_then(|i| self.names.get_mut(i)) else {
            return true;
        };
        if n.wire == Wire::Grpc {
            n.grpc[s.grpc.unwrap_or(GRPC_ABSENT)] += 1;
        }
        if timed {
            self.stats.timed += 1;
            n.add_turn(&e.parts);
        }
        true
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod props;
