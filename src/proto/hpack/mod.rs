//! HPACK (RFC 7541), shared by the HTTP/2 load engine (load/http2/) and
//! the request anatomy's HTTP/2 names (anatomy/h2names). The decoder
//! builds no header map: it hands each field to a callback, so its user
//! keeps the two or three values it judges by, yet it inserts into the
//! dynamic table as the peer's encoder expects, so later blocks decode
//! right. The encoder writes a request's header block once (static-table indexed
//! where a match exists, otherwise literal without indexing), so the same
//! bytes serve every stream of every connection.

use std::collections::VecDeque;

pub mod huffman;

/// The static table (RFC 7541 Appendix A), index 1 first.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Why a header block could not be decoded: every case is the
/// connection's COMPRESSION_ERROR (RFC 9113 4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a field.
    Truncated,
    /// An integer does not fit 32 bits.
    IntegerOverflow,
    /// An index names no entry of either table.
    BadIndex(usize),
    /// A Huffman-coded string is not valid code.
    Huffman,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE.
    TableSizeTooLarge(usize),
    /// A dynamic table size update after the first field of a block.
    LateTableSizeUpdate,
    /// The decoded fields exceed the header list size we accept.
    ListTooLarge,
}

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => write!(f, "HPACK block cut inside a field"),
            Self::IntegerOverflow => write!(f, "HPACK integer overflows"),
            Self::BadIndex(i) => write!(f, "HPACK index {i} out of range"),
            Self::Huffman => write!(f, "bad HPACK Huffman string"),
            Self::TableSizeTooLarge(s) => write!(f, "HPACK table size {s} above our limit"),
            Self::LateTableSizeUpdate => write!(f, "HPACK table size update after a field"),
            Self::ListTooLarge => write!(f, "header list too large"),
        }
    }
}

/// An entry of the dynamic table: name and value in one allocation.
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    /// Its size as RFC 7541 4.1 counts it.
    fn size(&self) -> usize {
        self.bytes.len() + 32
    }
}

/// A connection's HPACK decoder.
pub struct Decoder {
    /// Newest first (index 62).
    table: VecDeque<Entry>,
    size: usize,
    /// The size the peer's encoder chose (a size update), at most `limit`.
    max: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE.
    limit: usize,
    /// The most a block's fields may add up to (RFC 9113 6.5.2's size).
    max_list: usize,
    names: Memo,
    values: Memo,
}

/// Huffman-coded strings recently decoded, by their coded bytes: a
/// server sends the same header values in every response (nginx: its
/// server, content type, length, etag, last-modified, and the date for a
/// second), literal and to be indexed, so each must be decoded for the
/// table, and a comparison of the coded bytes replaces the decoding.
#[derive(Default)]
struct Memo {
    /// (coded, decoded), direct-mapped by the coded string's length and
    /// last byte.
    slots: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Slots of a [`Memo`].
const MEMO_SLOTS: usize = 32;

impl Memo {
    /// The decoding of `coded`.
    fn decode(&mut self, coded: &[u8]) -> Result<&[u8], HpackError> {
        if self.slots.is_empty() {
            self.slots.resize_with(MEMO_SLOTS, Default::default);
        }
        let i = (coded.len() * 7 + usize::from(coded.last().copied().unwrap_or(0))) % MEMO_SLOTS;
        let (c, d) = &mut self.slots[i];
        if c.as_slice() != coded {
            c.clear();
            d.clear();
            if huffman::decode(coded, d).is_err() {
                d.clear();
                return Err(HpackError::Huffman);
            }
            c.extend_from_slice(coded);
        }
        Ok(d.as_slice())
    }
}

impl Decoder {
    /// A decoder honouring our SETTINGS_HEADER_TABLE_SIZE `limit` and
    /// accepting header lists up to `max_list` bytes.
    pub fn new(limit: usize, max_list: usize) -> Self {
        Self {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
            max_list,
            names: Memo::default(),
            values: Memo::default(),
        }
    }

    /// The bytes it holds: its dynamic table (as RFC 7541 4.1 counts it)
    /// and the Huffman strings it remembers, so a user keeping many
    /// decoders (one per connection and direction) can bound them all.
    pub fn footprint(&self) -> usize {
        let memo = |m: &Memo| -> usize {
            m.slots
                .iter()
                .map(|(c, d)| c.capacity() + d.capacity())
                .sum()
        };
        self.size + memo(&self.names) + memo(&self.values)
    }

    /// Decodes one whole header block, calling `field` with each name and
    /// value in order.
    pub fn decode(
        &mut self,
        block: &[u8],
        field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.decode_wanted(block, |_| true, field)
    }

    /// Decodes one whole header block, calling `field` with each name
    /// `want` accepts. The value of a field not wanted and not to be
    /// indexed is skipped, not Huffman-decoded: a response's other
    /// headers (nginx sends its server, date, type, length, etag... as
    /// Huffman-coded literals without indexing) then cost the decoder
    /// their length, not a table walk of every nibble; their coding is
    /// therefore not checked.
    pub fn decode_wanted(
        &mut self,
        block: &[u8],
        want: impl Fn(&[u8]) -> bool,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut p = 0;
        let mut list = 0usize;
        let mut first = true;
        while p < block.len() {
            let b = block[p];
            if b & 0x80 != 0 {
                let i = integer(block, &mut p, 7)?;
                let (name, value) = lookup(&self.table, i)?;
                list += name.len() + value.len() + 32;
                if want(name) {
                    field(name, value);
                }
            } else if b & 0xe0 == 0x20 {
                let size = integer(block, &mut p, 5)?;
                if !first {
                    return Err(HpackError::LateTableSizeUpdate);
                }
                if size > self.limit {
                    return Err(HpackError::TableSizeTooLarge(size));
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                let indexing = b & 0x40 != 0;
                let i = integer(block, &mut p, if indexing { 6 } else { 4 })?;
                let name = if i == 0 {
                    string(block, &mut p, &mut self.names)?
                } else {
                    lookup(&self.table, i)?.0
                };
                let wanted = want(name);
                if !indexing && !wanted {
                    list += name.len() + skip_string(block, &mut p)? + 32;
                } else {
                    let value = string(block, &mut p, &mut self.values)?;
                    list += name.len() + value.len() + 32;
                    if wanted {
                        field(name, value);
                    }
                    if indexing {
                        let mut bytes = Vec::with_capacity(name.len() + value.len());
                        bytes.extend_from_slice(name);
                        bytes.extend_from_slice(value);
                        let e = Entry {
                            bytes: bytes.into_boxed_slice(),
                            name_len: name.len(),
                        };
                        self.insert(e);
                    }
                }
            }
            first = false;
            if list > self.max_list {
                return Err(HpackError::ListTooLarge);
            }
        }
        Ok(())
    }

    /// Adds an entry, evicting the oldest to make room (an entry larger
    /// than the table empties it and is not kept: RFC 7541 4.4).
    fn insert(&mut self, e: Entry) {
        let size = e.size();
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front(e);
        }
    }

    /// Evicts until `room` more bytes fit (or the table is empty).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some(e) = self.table.pop_back() else {
                break;
            };
            self.size -= e.size();
        }
    }
}

/// The name and value at `index` of the static then the dynamic table.
fn lookup(table: &VecDeque<Entry>, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match index {
        0 => Err(HpackError::BadIndex(0)),
        1..=61 => {
            let (n, v) = STATIC[index - 1];
            Ok((n.as_bytes(), v.as_bytes()))
        }
        _ => table
            .get(index - 62)
            .map(|e| (e.name(), e.value()))
            .ok_or(HpackError::BadIndex(index)),
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 5.1) at `*p`, which moves
/// past it; values beyond 32 bits are errors.
fn integer(b: &[u8], p: &mut usize, n: u32) -> Result<usize, HpackError> {
    let mask = (1u32 << n) - 1;
    let first = u32::from(*b.get(*p).ok_or(HpackError::Truncated)?) & mask;
    *p += 1;
    if first < mask {
        return Ok(first as usize);
    }
    let mut value = u64::from(mask);
    let mut shift = 0;
    loop {
        let byte = *b.get(*p).ok_or(HpackError::Truncated)?;
        *p += 1;
        value += u64::from(byte & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(HpackError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return Ok(value as usize);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
}

/// A string literal (RFC 7541 5.2) at `*p`: a slice of the block, or,
/// Huffman-coded, its decoding (through `memo`).
fn string<'a>(b: &'a [u8], p: &mut usize, memo: &'a mut Memo) -> Result<&'a [u8], HpackError> {
    let huff = *b.get(*p).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer(b, p, 7)?;
    let raw = b.get(*p..*p + len).ok_or(HpackError::Truncated)?;
    *p += len;
    if !huff {
        return Ok(raw);
    }
    memo.decode(raw)
}

/// Skips a string literal at `*p`; its length as coded.
fn skip_string(b: &[u8], p: &mut usize) -> Result<usize, HpackError> {
    let len = integer(b, p, 7)?;
    if b.len() - *p < len {
        return Err(HpackError::Truncated);
    }
    *p += len;
    Ok(len)
}

/// Appends an integer with an `n`-bit prefix whose other bits are `flags`.
fn put_integer(out: &mut Vec<u8>, flags: u8, n: u32, mut v: usize) {
    let mask = (1usize << n) - 1;
    if v < mask {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | mask as u8);
    v -= mask;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a string literal, not Huffman-coded.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends one field (`name` lowercase): the static table's index when it
/// holds the field, else a literal without indexing, naming the static
/// table's entry when it holds the name. Never the dynamic table, so the
/// block is valid whatever the peer's table size and in any order.
pub fn put_field(out: &mut Vec<u8>, name: &str, value: &str) {
    let mut name_index = 0;
    for (i, &(n, v)) in STATIC.iter().enumerate() {
        if n == name {
            if v == value {
                put_integer(out, 0x80, 7, i + 1);
                return;
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    put_integer(out, 0, 4, name_index);
    if name_index == 0 {
        put_string(out, name.as_bytes());
    }
    put_string(out, value.as_bytes());
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod props;
