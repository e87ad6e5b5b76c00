//! The HTTP/2 and gRPC names and their counts, bounded as the kernel
//! bounds its names (src/bpf/names.h `name_entry`: per port, every wire
//! together, the rest to their wire's "(other)"), and a timed stream
//! filed under its name as `name_turn_as` files a turn.

use std::collections::HashMap;

use crate::anatomy::counts::{NameCounts, Transport, Wire};

/// A name's identity.
type NameKey = (Transport, u16, Wire, Vec<u8>);

/// Names in the order they were made, found by key.
pub struct NameTable {
    names: Vec<NameCounts>,
    index: HashMap<NameKey, usize>,
    /// Names given room per port (both wires).
    per_port: HashMap<(Transport, u16), u32>,
    max_endpoints: u32,
    /// Names kept at most, "(other)"s included.
    limit: usize,
}

impl NameTable {
    /// At most `max_endpoints` names per port and `limit` in all.
    pub fn new(max_endpoints: u32, limit: usize) -> Self {
        Self {
            names: Vec::new(),
            index: HashMap::new(),
            per_port: HashMap::new(),
            max_endpoints,
            limit,
        }
    }

    /// Names kept.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The name made `i`-th.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut NameCounts> {
        self.names.get_mut(i)
    }

    /// Every name, sorted by transport, port, wire and name.
    pub fn sorted(&self) -> Vec<NameCounts> {
        let mut out = self.names.clone();
        out.sort_by(|a, b| {
            (a.transport, a.port, a.wire, &a.name).cmp(&(b.transport, b.port, b.wire, &b.name))
        });
        out
    }

    /// The entry of (port, wire, name), made if new: past the port's
    /// `max_endpoints` names, its wire's "(other)"; None past the limit.
    pub fn entry(
        &mut self,
        transport: Transport,
        port: u16,
        wire: Wire,
        name: Vec<u8>,
    ) -> Option<usize> {
        let key = (transport, port, wire, name);
        if let Some(i) = self.index.get(&key) {
            return Some(*i);
        }
        let given = self.per_port.entry((transport, port)).or_insert(0);
        let key = if *given < self.max_endpoints && self.names.len() < self.limit {
            *given += 1;
            key
        } else {
            let other = (transport, port, wire, Vec::new());
            if let Some(i) = self.index.get(&other) {
                return Some(*i);
            }
            if self.names.len() >= self.limit {
                return None;
            }
            other
        };
        let i = self.names.len();
        self.names
            .push(NameCounts::empty(key.1, key.0, key.2, key.3.clone()));
        self.index.insert(key, i);
        Some(i)
    }
}
