//! HTTP/2 frames (RFC 9113 4 and 6) as the client reads and writes them.
//! A frame is parsed in place from the read buffer (its payload is a
//! slice of it: nothing is allocated per frame), and every malformed one
//! is a [`ConnError`] with the code the GOAWAY carries: never a panic.

/// Frame types.
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Error codes (RFC 9113 7).
pub const NO_ERROR: u32 = 0;
pub const PROTOCOL_ERROR: u32 = 1;
pub const FLOW_CONTROL_ERROR: u32 = 3;
pub const FRAME_SIZE_ERROR: u32 = 6;
pub const CANCEL: u32 = 8;
pub const COMPRESSION_ERROR: u32 = 9;

/// Settings identifiers.
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 1;
pub const SETTINGS_ENABLE_PUSH: u16 = 2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 6;

/// The client connection preface (RFC 9113 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const HEAD_LEN: usize = 9;

/// The largest flow-control window (RFC 9113 6.9.1).
pub const MAX_WINDOW: i64 = 0x7fff_ffff;

/// A connection error: the code our GOAWAY sends, and why (for the run's
/// first-error message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    /// The HTTP/2 error code.
    pub code: u32,
    /// What was wrong.
    pub why: &'static str,
}

const fn err(code: u32, why: &'static str) -> ConnError {
    ConnError { code, why }
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Payload length.
    pub len: usize,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
}

/// The frame header at the start of `b` (at least [`HEAD_LEN`] bytes).
pub fn head(b: &[u8]) -> Head {
    Head {
        len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
    }
}

/// A frame the client acts on, its payload borrowed from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Response body bytes; `flow` is the whole payload's length (padding
    /// included), which is what flow control counts.
    Data {
        stream: u32,
        end: bool,
        data: &'a [u8],
        flow: usize,
    },
    /// The start of a header block.
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        block: &'a [u8],
    },
    /// More of a header block.
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// The peer's settings (pairs of id and value), or the ACK of ours.
    Settings { ack: bool, pairs: &'a [u8] },
    /// A PING (to be answered unless `ack`).
    Ping { ack: bool, data: [u8; 8] },
    /// The peer is closing the connection.
    GoAway { last: u32, code: u32 },
    /// The peer reset a stream.
    RstStream { stream: u32, code: u32 },
    /// More send window for a stream (or 0: the connection).
    WindowUpdate { stream: u32, inc: u32 },
    /// PRIORITY and unknown types: nothing to do.
    Ignored,
}

/// Strips the padding of a PADDED payload.
fn unpad(flags: u8, p: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    let Some((&pad, rest)) = p.split_first() else {
        return Err(err(FRAME_SIZE_ERROR, "padded frame without its pad length"));
    };
    let pad = usize::from(pad);
    if pad > rest.len() {
        return Err(err(PROTOCOL_ERROR, "padding longer than the frame"));
    }
    Ok(&rest[..rest.len() - pad])
}

fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

/// Parses a frame whose header is `h` and payload `p` (`p.len() ==
/// h.len`, already checked against our maximum frame size).
pub fn parse<'a>(h: &Head, p: &'a [u8]) -> Result<Frame<'a>, ConnError> {
    let on_stream = |f: Frame<'a>| {
        if h.stream == 0 {
            Err(err(PROTOCOL_ERROR, "stream frame on stream 0"))
        } else {
            Ok(f)
        }
    };
    let on_conn = |f: Frame<'a>| {
        if h.stream != 0 {
            Err(err(PROTOCOL_ERROR, "connection frame on a stream"))
        } else {
            Ok(f)
        }
    };
    match h.kind {
        DATA => on_stream(Frame::Data {
            stream: h.stream,
            end: h.flags & END_STREAM != 0,
            data: unpad(h.flags, p)?,
            flow: p.len(),
        }),
        HEADERS => {
            let mut block = unpad(h.flags, p)?;
            if h.flags & PRIORITY_FLAG != 0 {
                block = block
                    .get(5..)
                    .ok_or(err(FRAME_SIZE_ERROR, "HEADERS too short for its priority"))?;
            }
            on_stream(Frame::Headers {
                stream: h.stream,
                end_stream: h.flags & END_STREAM != 0,
                end_headers: h.flags & END_HEADERS != 0,
                block,
            })
        }
        CONTINUATION => on_stream(Frame::Continuation {
            stream: h.stream,
            end_headers: h.flags & END_HEADERS != 0,
            block: p,
        }),
        PRIORITY if p.len() != 5 => Err(err(FRAME_SIZE_ERROR, "PRIORITY not 5 bytes")),
        PRIORITY => on_stream(Frame::Ignored),
        RST_STREAM if p.len() != 4 => Err(err(FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")),
        RST_STREAM => on_stream(Frame::RstStream {
            stream: h.stream,
            code: u32_at(p, 0),
        }),
        SETTINGS => {
            let ack = h.flags & ACK != 0;
            if (ack && !p.is_empty()) || p.len() % 6 != 0 {
                return Err(err(FRAME_SIZE_ERROR, "SETTINGS of a bad length"));
            }
            on_conn(Frame::Settings { ack, pairs: p })
        }
        PUSH_PROMISE => Err(err(PROTOCOL_ERROR, "PUSH_PROMISE though push is disabled")),
        PING => {
            let data: [u8; 8] = p
                .try_into()
                .map_err(|_| err(FRAME_SIZE_ERROR, "PING not 8 bytes"))?;
            on_conn(Frame::Ping {
                ack: h.flags & ACK != 0,
                data,
            })
        }
        GOAWAY if p.len() < 8 => Err(err(FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")),
        GOAWAY => on_conn(Frame::GoAway {
            last: u32_at(p, 0) & 0x7fff_ffff,
            code: u32_at(p, 4),
        }),
        WINDOW_UPDATE if p.len() != 4 => Err(err(FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes")),
        WINDOW_UPDATE => {
            let inc = u32_at(p, 0) & 0x7fff_ffff;
            if inc == 0 {
                return Err(err(PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            Ok(Frame::WindowUpdate {
                stream: h.stream,
                inc,
            })
        }
        _ => Ok(Frame::Ignored),
    }
}

/// The (id, value) pairs of a SETTINGS payload.
pub fn settings(pairs: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    pairs
        .chunks_exact(6)
        .map(|c| (u16::from_be_bytes([c[0], c[1]]), u32_at(c, 2)))
}

/// Appends a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Appends a SETTINGS frame.
pub fn put_settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    put_head(out, pairs.len() * 6, SETTINGS, 0, 0);
    for (id, v) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a frame whose payload is one 32-bit word (RST_STREAM,
/// WINDOW_UPDATE).
pub fn put_word(out: &mut Vec<u8>, kind: u8, stream: u32, word: u32) {
    put_head(out, 4, kind, 0, stream);
    out.extend_from_slice(&word.to_be_bytes());
}

/// Appends a GOAWAY.
pub fn put_goaway(out: &mut Vec<u8>, last: u32, code: u32) {
    put_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a header block as HEADERS and, past `max_frame`, CONTINUATION
/// frames.
pub fn put_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max: usize) {
    let mut chunks = block.chunks(max.max(1)).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or_default();
        let last = chunks.peek().is_none();
        put_head(
            out,
            chunk.len(),
            kind,
            flags | if last { END_HEADERS } else { 0 },
            stream,
        );
        out.extend_from_slice(chunk);
        if last {
            return;
        }
        kind = CONTINUATION;
        flags = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Result<Frame<'_>, ConnError> {
        let h = head(bytes);
        parse(&h, &bytes[HEAD_LEN..HEAD_LEN + h.len])
    }

    #[test]
    fn frames_parse_with_padding_and_priority() {
        // DATA, padded: pad length 2, "hi", 2 bytes of padding.
        let f = [
            0,
            0,
            5,
            DATA,
            PADDED | END_STREAM,
            0,
            0,
            0,
            3,
            2,
            b'h',
            b'i',
            0,
            0,
        ];
        let want = Frame::Data {
            stream: 3,
            end: true,
            data: b"hi",
            flow: 5,
        };
        assert_eq!(one(&f), Ok(want));
        // HEADERS with priority and padding.
        let f = [
            0,
            0,
            8,
            HEADERS,
            PADDED | PRIORITY_FLAG | END_HEADERS,
            0,
            0,
            0,
            1,
            1,
            0,
            0,
            0,
            0,
            16,
            0x88,
            0,
        ];
        let want = Frame::Headers {
            stream: 1,
            end_stream: false,
            end_headers: true,
            block: &[0x88],
        };
        assert_eq!(one(&f), Ok(want));
        // Split header blocks come back whole.
        let mut out = Vec::new();
        put_headers(&mut out, 5, &[7; 40], true, 16);
        let h = head(&out);
        assert_eq!((h.len, h.kind, h.flags), (16, HEADERS, END_STREAM));
        let h = head(&out[HEAD_LEN + 32 + HEAD_LEN..]);
        assert_eq!((h.len, h.kind, h.flags), (8, CONTINUATION, END_HEADERS));
        assert_eq!(out.len(), 3 * HEAD_LEN + 40);
    }

    #[test]
    fn malformed_frames_are_classed_connection_errors() {
        let code = |f: &[u8]| one(f).unwrap_err().code;
        // Padding longer than the payload.
        assert_eq!(
            code(&[0, 0, 2, DATA, PADDED, 0, 0, 0, 1, 5, 0]),
            PROTOCOL_ERROR
        );
        // DATA on stream 0; SETTINGS on a stream; a bad SETTINGS length.
        assert_eq!(code(&[0, 0, 0, DATA, 0, 0, 0, 0, 0]), PROTOCOL_ERROR);
        assert_eq!(code(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 1]), PROTOCOL_ERROR);
        assert_eq!(
            code(&[0, 0, 1, SETTINGS, 0, 0, 0, 0, 0, 0]),
            FRAME_SIZE_ERROR
        );
        assert_eq!(
            code(&[0, 0, 6, SETTINGS, ACK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            FRAME_SIZE_ERROR
        );
        // PUSH_PROMISE, a short PING, a zero WINDOW_UPDATE.
        assert_eq!(
            code(&[0, 0, 0, PUSH_PROMISE, 0, 0, 0, 0, 1]),
            PROTOCOL_ERROR
        );
        assert_eq!(code(&[0, 0, 1, PING, 0, 0, 0, 0, 0, 0]), FRAME_SIZE_ERROR);
        assert_eq!(
            code(&[0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            PROTOCOL_ERROR
        );
        // Unknown types are ignored.
        assert_eq!(one(&[0, 0, 1, 0xfa, 0, 0, 0, 0, 0, 9]), Ok(Frame::Ignored));
    }

    #[test]
    fn random_frames_parse_or_fail_never_panic() {
        let mut errors = 0;
        for seed in 0..20_000u64 {
            let mut b = super::super::hpack::tests::noise(seed, 9 + (seed % 40) as usize);
            // Keep the length within the bytes and the type a known one.
            let len = b.len() - HEAD_LEN;
            b[0] = 0;
            b[1] = 0;
            b[2] = len as u8;
            b[3] %= 11;
            if one(&b).is_err() {
                errors += 1;
            }
        }
        assert!(errors > 0);
    }
}
