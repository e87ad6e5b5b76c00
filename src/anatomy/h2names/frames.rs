//! One direction of an HTTP/2 connection as the kernel's BLOCK records
//! show it: each HEADERS, PUSH_PROMISE or CONTINUATION frame's payload
//! put back together from its pieces, its padding and priority (or
//! promised stream) fields taken off, the fragments of a header block
//! gathered up to END_HEADERS, and each whole block decoded with the
//! direction's HPACK decoder, in order, so its dynamic table stays the
//! peer encoder's. Anything that breaks that order (a piece that does
//! not follow on, a frame that contradicts its flags, a block past the
//! bound, an HPACK error) loses the direction: its table can no longer
//! be trusted, and it is never decoded again.

use crate::proto::hpack::Decoder;

/// Frame types (RFC 9113 6).
pub const HEADERS: u8 = 0x1;
pub const PUSH_PROMISE: u8 = 0x5;
pub const CONTINUATION: u8 = 0x9;
/// Frame flags.
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame payload a frame header can say (24 bits).
const MAX_FRAME: u32 = (1 << 24) - 1;
/// Bytes of a value kept from a field (a path is folded to 64, a gRPC
/// name to 128: past this it is cut anyway).
const VALUE_MAX: usize = 4096;

/// One BLOCK record's bytes of a frame's payload.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    pub stream: u32,
    pub ftype: u8,
    pub flags: u8,
    pub flen: u32,
    pub off: u32,
    pub data: &'a [u8],
}

/// Why a direction was given up on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// A piece that did not follow on from the one before.
    Gap,
    /// A frame that contradicts HTTP/2's framing (a CONTINUATION with no
    /// block open, padding longer than the frame, stream 0...).
    Framing,
    /// A header block past the bound.
    TooLarge,
    /// The block did not decode.
    Hpack,
}

/// What a decoded block said, of the fields names and counts need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub method: Option<Vec<u8>>,
    pub path: Option<Vec<u8>>,
    pub content_type: Option<Vec<u8>>,
    pub status: Option<Vec<u8>>,
    pub grpc_status: Option<Vec<u8>>,
}

/// A whole header block, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The stream of its HEADERS or PUSH_PROMISE frame.
    pub stream: u32,
    /// A PUSH_PROMISE's block (a promised request), not a HEADERS'.
    pub push: bool,
    pub fields: Fields,
}

/// The frame being put back together.
struct Frame {
    stream: u32,
    ftype: u8,
    flags: u8,
    flen: u32,
    got: u32,
    /// Bytes before the fragment: pad length, priority, promised id.
    need: u32,
    prefix: [u8; 6],
    /// The fragment's end (the frame's less its padding), once known.
    end: Option<u32>,
}

/// The header block being gathered.
struct Block {
    stream: u32,
    push: bool,
    bytes: Vec<u8>,
}

/// One direction's state.
pub struct Direction {
    /// None once lost.
    decoder: Option<Decoder>,
    frame: Option<Frame>,
    block: Option<Block>,
    /// The most a block's coded bytes may be.
    max_block: usize,
}

impl Direction {
    /// A direction whose decoder honours a table of `table` bytes and
    /// header lists of `list`, gathering blocks of at most `max_block`.
    pub fn new(table: usize, list: usize, max_block: usize) -> Self {
        Self {
            decoder: Some(Decoder::new(table, list)),
            frame: None,
            block: None,
            max_block,
        }
    }

    /// Whether it was given up on.
    pub fn is_lost(&self) -> bool {
        self.decoder.is_none()
    }

    /// The bytes it holds (the decoder's and the block gathered).
    pub fn footprint(&self) -> usize {
        self.decoder.as_ref().map_or(0, Decoder::footprint)
            + self.block.as_ref().map_or(0, |b| b.bytes.capacity())
    }

    /// Takes one piece: a block decoded when it completes one; an error
    /// when it loses the direction (then, and for a lost direction,
    /// nothing more is done).
    pub fn piece(&mut self, p: &Piece) -> Result<Option<Decoded>, Lost> {
        if self.is_lost() {
            return Ok(None);
        }
        let r = self.take(p);
        if r.is_err() {
            self.decoder = None;
            self.frame = None;
            self.block = None;
        }
        r
    }

    fn take(&mut self, p: &Piece) -> Result<Option<Decoded>, Lost> {
        let len = u32::try_from(p.data.len()).map_err(|_| Lost::Framing)?;
        if !matches!(p.ftype, HEADERS | PUSH_PROMISE | CONTINUATION)
            || p.stream == 0
            || p.stream > i32::MAX as u32
            || p.flen > MAX_FRAME
            || u64::from(p.off) + u64::from(len) > u64::from(p.flen)
        {
            return Err(Lost::Framing);
        }
        if p.off == 0 {
            self.begin(p)?;
        }
        let f = self.frame.as_mut().ok_or(Lost::Gap)?;
        if p.off != f.got
            || (p.stream, p.ftype, p.flags, p.flen) != (f.stream, f.ftype, f.flags, f.flen)
        {
            return Err(Lost::Gap);
        }
        let block = self.block.as_mut().ok_or(Lost::Framing)?;
        let (off, end_piece) = (p.off, p.off + len);
        if off < f.need {
            let upto = end_piece.min(f.need);
            for pos in off..upto {
                f.prefix[pos as usize] = p.data[(pos - off) as usize];
            }
            if upto == f.need {
                let pad = if f.flags & PADDED != 0 && f.ftype != CONTINUATION {
                    u32::from(f.prefix[0])
                } else {
                    0
                };
                if f.need + pad > f.flen {
                    return Err(Lost::Framing);
                }
                f.end = Some(f.flen - pad);
            }
        }
        if let Some(end) = f.end {
            let (a, b) = (off.max(f.need), end_piece.min(end));
            if a < b {
                if block.bytes.len() + (b - a) as usize > self.max_block {
                    return Err(Lost::TooLarge);
                }
                block
                    .bytes
                    .extend_from_slice(&p.data[(a - off) as usize..(b - off) as usize]);
            }
        }
        f.got = end_piece;
        if f.got < f.flen {
            return Ok(None);
        }
        if f.end.is_none() {
            return Err(Lost::Framing);
        }
        let done = f.flags & END_HEADERS != 0;
        self.frame = None;
        if !done {
            return Ok(None);
        }
        let Some(block) = self.block.take() else {
            return Err(Lost::Framing);
        };
        let decoder = self.decoder.as_mut().ok_or(Lost::Hpack)?;
        let fields = decode(decoder, &block.bytes)?;
        Ok(Some(Decoded {
            stream: block.stream,
            push: block.push,
            fields,
        }))
    }

    /// A frame's first piece: the frame, and the block it opens or goes on.
    fn begin(&mut self, p: &Piece) -> Result<(), Lost> {
        if self.frame.is_some() {
            return Err(Lost::Gap);
        }
        let padded = u32::from(p.flags & PADDED != 0);
        let need = match p.ftype {
            HEADERS => padded + if p.flags & PRIORITY != 0 { 5 } else { 0 },
            PUSH_PROMISE => padded + 4,
            _ => 0,
        };
        match (p.ftype, &self.block) {
            (CONTINUATION, Some(b)) if b.stream == p.stream => {}
            (HEADERS | PUSH_PROMISE, None) => {
                self.block = Some(Block {
                    stream: p.stream,
                    push: p.ftype == PUSH_PROMISE,
                    bytes: Vec::new(),
                });
            }
            _ => return Err(Lost::Framing),
        }
        self.frame = Some(Frame {
            stream: p.stream,
            ftype: p.ftype,
            flags: p.flags,
            flen: p.flen,
            got: 0,
            need,
            prefix: [0; 6],
            end: (need == 0).then_some(p.flen),
        });
        Ok(())
    }
}

/// Decodes a whole block, keeping the fields names and counts need.
fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<Fields, Lost> {
    let mut f = Fields::default();
    let want = |name: &[u8]| {
        matches!(
            name,
            b":method" | b":path" | b"content-type" | b":status" | b"grpc-status"
        )
    };
    decoder
        .decode_wanted(block, want, |name, value| {
            let slot = match name {
                b":method" => &mut f.method,
                b":path" => &mut f.path,
                b"content-type" => &mut f.content_type,
                b":status" => &mut f.status,
                _ => &mut f.grpc_status,
            };
            // The first of each: a repeated pseudo-header is malformed,
            // and the first is what a server acts on.
            if slot.is_none() {
                *slot = Some(value[..value.len().min(VALUE_MAX)].to_vec());
            }
        })
        .map_err(|_| Lost::Hpack)?;
    Ok(f)
}
