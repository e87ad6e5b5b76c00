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

    use crate::hostile;
    use proptest::prelude::*;

    /// Our SETTINGS_MAX_FRAME_SIZE, as the client checks it before
    /// parsing.
    const MAX: usize = 16_384;

    /// A frame as the reference model writes it.
    #[derive(Clone, Debug)]
    enum Model {
        Data {
            stream: u32,
            end: bool,
            data: Vec<u8>,
            pad: Option<u8>,
        },
        Headers {
            stream: u32,
            end_stream: bool,
            end_headers: bool,
            block: Vec<u8>,
            pad: Option<u8>,
            priority: Option<[u8; 5]>,
        },
        Continuation {
            stream: u32,
            end_headers: bool,
            block: Vec<u8>,
        },
        Settings {
            ack: bool,
            pairs: Vec<(u16, u32)>,
        },
        Ping {
            ack: bool,
            data: [u8; 8],
        },
        GoAway {
            last: u32,
            code: u32,
            debug: Vec<u8>,
        },
        RstStream {
            stream: u32,
            code: u32,
        },
        WindowUpdate {
            stream: u32,
            inc: u32,
        },
        Priority {
            stream: u32,
            payload: [u8; 5],
        },
        Unknown {
            kind: u8,
            flags: u8,
            stream: u32,
            payload: Vec<u8>,
        },
    }

    fn bytes(n: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..n)
    }

    fn model() -> impl Strategy<Value = Model> {
        let stream = 1..=0x7fff_ffffu32;
        prop_oneof![
            (
                stream.clone(),
                any::<bool>(),
                bytes(40),
                any::<Option<u8>>()
            )
                .prop_map(|(stream, end, data, pad)| Model::Data {
                    stream,
                    end,
                    data,
                    pad
                }),
            (
                stream.clone(),
                any::<(bool, bool)>(),
                bytes(40),
                any::<Option<u8>>(),
                any::<Option<[u8; 5]>>()
            )
                .prop_map(
                    |(stream, (end_stream, end_headers), block, pad, priority)| {
                        Model::Headers {
                            stream,
                            end_stream,
                            end_headers,
                            block,
                            pad,
                            priority,
                        }
                    }
                ),
            (stream.clone(), any::<bool>(), bytes(40)).prop_map(|(stream, end_headers, block)| {
                Model::Continuation {
                    stream,
                    end_headers,
                    block,
                }
            }),
            (
                any::<bool>(),
                prop::collection::vec(any::<(u16, u32)>(), 0..6)
            )
                .prop_map(|(ack, pairs)| Model::Settings {
                    ack,
                    pairs: if ack { Vec::new() } else { pairs }
                }),
            any::<(bool, [u8; 8])>().prop_map(|(ack, data)| Model::Ping { ack, data }),
            (0..=0x7fff_ffffu32, any::<u32>(), bytes(20))
                .prop_map(|(last, code, debug)| Model::GoAway { last, code, debug }),
            (stream.clone(), any::<u32>())
                .prop_map(|(stream, code)| Model::RstStream { stream, code }),
            (0..=0x7fff_ffffu32, 1..=0x7fff_ffffu32)
                .prop_map(|(stream, inc)| Model::WindowUpdate { stream, inc }),
            (stream.clone(), any::<[u8; 5]>())
                .prop_map(|(stream, payload)| Model::Priority { stream, payload }),
            (10..=255u8, any::<u8>(), 0..=0x7fff_ffffu32, bytes(20)).prop_map(
                |(kind, flags, stream, payload)| Model::Unknown {
                    kind,
                    flags,
                    stream,
                    payload
                }
            ),
        ]
    }

    impl Model {
        /// The frame on the wire; `reserved` sets the stream id's
        /// reserved bit, which a receiver must ignore.
        fn encode(&self, out: &mut Vec<u8>, reserved: bool) {
            let mut flags = 0;
            let mut p = Vec::new();
            let padded = |p: &mut Vec<u8>, flags: &mut u8, pad: Option<u8>, body: &[u8]| {
                if let Some(n) = pad {
                    *flags |= PADDED;
                    p.push(n);
                    p.extend_from_slice(body);
                    p.extend(std::iter::repeat_n(0xa5, usize::from(n)));
                } else {
                    p.extend_from_slice(body);
                }
            };
            let (kind, stream) = match self {
                Model::Data {
                    stream,
                    end,
                    data,
                    pad,
                } => {
                    flags |= if *end { END_STREAM } else { 0 };
                    padded(&mut p, &mut flags, *pad, data);
                    (DATA, *stream)
                }
                Model::Headers {
                    stream,
                    end_stream,
                    end_headers,
                    block,
                    pad,
                    priority,
                } => {
                    flags |= if *end_stream { END_STREAM } else { 0 };
                    flags |= if *end_headers { END_HEADERS } else { 0 };
                    let mut body = Vec::new();
                    if let Some(pr) = priority {
                        flags |= PRIORITY_FLAG;
                        body.extend_from_slice(pr);
                    }
                    body.extend_from_slice(block);
                    padded(&mut p, &mut flags, *pad, &body);
                    (HEADERS, *stream)
                }
                Model::Continuation {
                    stream,
                    end_headers,
                    block,
                } => {
                    flags |= if *end_headers { END_HEADERS } else { 0 };
                    p.extend_from_slice(block);
                    (CONTINUATION, *stream)
                }
                Model::Settings { ack, pairs } => {
                    flags |= if *ack { ACK } else { 0 };
                    for (id, v) in pairs {
                        p.extend_from_slice(&id.to_be_bytes());
                        p.extend_from_slice(&v.to_be_bytes());
                    }
                    (SETTINGS, 0)
                }
                Model::Ping { ack, data } => {
                    flags |= if *ack { ACK } else { 0 };
                    p.extend_from_slice(data);
                    (PING, 0)
                }
                Model::GoAway { last, code, debug } => {
                    p.extend_from_slice(&last.to_be_bytes());
                    p.extend_from_slice(&code.to_be_bytes());
                    p.extend_from_slice(debug);
                    (GOAWAY, 0)
                }
                Model::RstStream { stream, code } => {
                    p.extend_from_slice(&code.to_be_bytes());
                    (RST_STREAM, *stream)
                }
                Model::WindowUpdate { stream, inc } => {
                    p.extend_from_slice(&inc.to_be_bytes());
                    (WINDOW_UPDATE, *stream)
                }
                Model::Priority { stream, payload } => {
                    p.extend_from_slice(payload);
                    (PRIORITY, *stream)
                }
                Model::Unknown {
                    kind,
                    flags: f,
                    stream,
                    payload,
                } => {
                    flags = *f;
                    p.extend_from_slice(payload);
                    (*kind, *stream)
                }
            };
            let len = (p.len() as u32).to_be_bytes();
            out.extend_from_slice(&len[1..]);
            out.extend_from_slice(&[kind, flags]);
            let id = stream | if reserved { 0x8000_0000 } else { 0 };
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&p);
        }

        /// What the parser must make of it.
        fn expect(&self) -> Frame<'_> {
            match self {
                Model::Data {
                    stream,
                    end,
                    data,
                    pad,
                } => Frame::Data {
                    stream: *stream,
                    end: *end,
                    data,
                    flow: data.len() + pad.map_or(0, |n| 1 + usize::from(n)),
                },
                Model::Headers {
                    stream,
                    end_stream,
                    end_headers,
                    block,
                    ..
                } => Frame::Headers {
                    stream: *stream,
                    end_stream: *end_stream,
                    end_headers: *end_headers,
                    block,
                },
                Model::Continuation {
                    stream,
                    end_headers,
                    block,
                } => Frame::Continuation {
                    stream: *stream,
                    end_headers: *end_headers,
                    block,
                },
                Model::Settings { .. } | Model::Ping { .. } => unreachable!("compared apart"),
                Model::GoAway { last, code, .. } => Frame::GoAway {
                    last: *last,
                    code: *code,
                },
                Model::RstStream { stream, code } => Frame::RstStream {
                    stream: *stream,
                    code: *code,
                },
                Model::WindowUpdate { stream, inc } => Frame::WindowUpdate {
                    stream: *stream,
                    inc: *inc,
                },
                Model::Priority { .. } | Model::Unknown { .. } => Frame::Ignored,
            }
        }

        fn check(&self, got: &Frame<'_>) {
            match (self, got) {
                (Model::Settings { ack, pairs }, Frame::Settings { ack: a, pairs: p }) => {
                    assert_eq!(ack, a);
                    assert_eq!(&settings(p).collect::<Vec<_>>(), pairs);
                }
                (Model::Ping { ack, data }, Frame::Ping { ack: a, data: d }) => {
                    assert_eq!((ack, data), (a, d));
                }
                _ => assert_eq!(got, &self.expect()),
            }
        }
    }

    /// Splits a stream of bytes into frames the way the client's reader
    /// does: whole frames only, a frame over our maximum an error.
    fn frames(buf: &[u8]) -> Vec<Result<Frame<'_>, ConnError>> {
        let mut out = Vec::new();
        let mut at = 0;
        while buf.len() - at >= HEAD_LEN {
            let h = head(&buf[at..]);
            if h.len > MAX {
                out.push(Err(err(FRAME_SIZE_ERROR, "too large")));
                break;
            }
            let Some(p) = buf.get(at + HEAD_LEN..at + HEAD_LEN + h.len) else {
                break;
            };
            at += HEAD_LEN + h.len;
            out.push(parse(&h, p));
        }
        out
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// Frames of every type round-trip, alone and in a stream cut at
        /// every length (a cut yields exactly the frames before it).
        #[test]
        fn frames_round_trip_and_cuts_yield_the_whole_ones(
            ms in prop::collection::vec((model(), any::<bool>()), 1..8)
        ) {
            let mut stream = Vec::new();
            let mut ends = Vec::new();
            for (m, reserved) in &ms {
                m.encode(&mut stream, *reserved);
                ends.push(stream.len());
            }
            let got = frames(&stream);
            prop_assert_eq!(got.len(), ms.len());
            for ((m, _), f) in ms.iter().zip(&got) {
                m.check(f.as_ref().unwrap());
            }
            for cut in 0..stream.len() {
                let whole = ends.iter().filter(|&&e| e <= cut).count();
                prop_assert_eq!(frames(&stream[..cut]).len(), whole, "cut at {}", cut);
            }
        }

        /// A header block written by `put_headers` reads back whole: one
        /// HEADERS then CONTINUATIONs, each within the frame size, the
        /// last one with END_HEADERS.
        #[test]
        fn put_headers_frames_read_back_as_the_block(
            block in bytes(200),
            max in 1..64usize,
            stream in 1..=0x7fff_ffffu32,
            end in any::<bool>(),
        ) {
            let mut out = Vec::new();
            put_headers(&mut out, stream, &block, end, max);
            let got = frames(&out);
            let mut back = Vec::new();
            for (i, f) in got.iter().enumerate() {
                let last = i + 1 == got.len();
                match f.as_ref().unwrap() {
                    Frame::Headers { stream: s, end_stream, end_headers, block: b } if i == 0 => {
                        prop_assert_eq!((*s, *end_stream, *end_headers), (stream, end, last));
                        back.extend_from_slice(b);
                        prop_assert!(b.len() <= max);
                    }
                    Frame::Continuation { stream: s, end_headers, block: b } if i > 0 => {
                        prop_assert_eq!((*s, *end_headers), (stream, last));
                        back.extend_from_slice(b);
                        prop_assert!(b.len() <= max);
                    }
                    other => prop_assert!(false, "frame {}: {:?}", i, other),
                }
            }
            prop_assert_eq!(back, block);
        }

        /// Mutated streams of frames and bytes of any kind: every frame
        /// parses or is a connection error with PROTOCOL_ERROR or
        /// FRAME_SIZE_ERROR; a DATA frame's data lies within what flow
        /// control counts.
        #[test]
        fn mutated_frames_parse_or_are_connection_errors(
            ms in prop::collection::vec((model(), any::<bool>()), 1..6),
            mutations in hostile::mutations(),
            noise in bytes(64),
        ) {
            let mut stream = Vec::new();
            for (m, reserved) in &ms {
                m.encode(&mut stream, *reserved);
            }
            let bad = hostile::mutate(&stream, &mutations);
            for input in [&bad, &noise] {
                for f in frames(input) {
                    match f {
                        Err(e) => prop_assert!(
                            e.code == PROTOCOL_ERROR || e.code == FRAME_SIZE_ERROR,
                            "{:?}", e
                        ),
                        Ok(Frame::Data { data, flow, stream, .. }) => {
                            prop_assert!(data.len() <= flow);
                            prop_assert!(stream != 0);
                        }
                        Ok(Frame::WindowUpdate { inc, .. }) => prop_assert!(inc > 0),
                        Ok(_) => {}
                    }
                }
            }
        }
    }
}
