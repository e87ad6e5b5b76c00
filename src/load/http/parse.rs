//! HTTP/1.1 response framing (RFC 9112 section 6), over httparse: where
//! each response ends, whatever the reads cut it into, without buffering
//! bodies (they are counted down) and without allocating unless a head, a
//! chunk-size line or a trailer section arrives split across reads (its
//! bytes so far are then kept in the cursor, bounded).
//!
//! * The status line and headers: httparse, at most [`MAX_HEAD`] bytes and
//!   [`MAX_HEADERS`] headers, anything else is `protocol_error`. Interim
//!   responses (1xx) are skipped: the final one follows; `101 Switching
//!   Protocols` was never asked for and is an error.
//! * No body, whatever the headers say: a response to HEAD, 204, 304.
//! * `Transfer-Encoding` ending in `chunked`: chunks (sizes read with
//!   `httparse::parse_chunk_size`, 16 hex digits at most, so no overflow),
//!   each followed by CRLF, then the trailer section. With
//!   `Content-Length` as well the response is an error (RFC 9112 6.3: a
//!   sign of request smuggling, to be handled as one).
//! * `Content-Length` (digits only, checked against overflow; repeated
//!   values must agree).
//! * Otherwise the body runs until the server closes the connection
//!   (HTTP/1.0 style, or a transfer coding other than chunked): the
//!   response is whole when the close comes ([`Cursor::ends_at_eof`]) and
//!   the connection is reopened, like after `Connection: close`.
//!
//! The server closes after a response that says `Connection: close`, after
//! an HTTP/1.0 response without `Connection: keep-alive`, and after a body
//! delimited by the close: [`Cursor::closes`].

use std::mem::MaybeUninit;

use httparse::{Header, ParserConfig, Status};

use crate::load::workload::ErrorClass;

/// The longest response head (status line and headers) or trailer
/// section accepted, bytes: nginx's and Apache's defaults are 8 to 64 KiB.
pub const MAX_HEAD: usize = 64 << 10;
/// The most headers in one response head.
pub const MAX_HEADERS: usize = 100;
/// The longest chunk-size line (size and extensions), bytes.
pub const MAX_CHUNK_LINE: usize = 4 << 10;

/// Where in a response the parser is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// The status line and headers.
    #[default]
    Head,
    /// A body of known length: bytes still to come.
    Fixed(u64),
    /// A chunk-size line.
    ChunkSize,
    /// A chunk's data: bytes still to come.
    ChunkData(u64),
    /// The CRLF after a chunk's data: how many of its 2 bytes came.
    ChunkEnd(u8),
    /// The trailer section after the last chunk.
    Trailers,
    /// A body that ends when the server closes the connection.
    UntilClose,
    /// The response is whole.
    Done,
}

/// The parse state of the response awaited on a connection. The driver
/// resets it (to its default) once a response is whole.
#[derive(Debug, Default)]
pub struct Cursor {
    state: State,
    /// The bytes so far of a head, chunk-size line or trailer section that
    /// arrived split across reads.
    pending: Vec<u8>,
    /// The final response's status code (0 until its head is read).
    status: u16,
    /// The server closes the connection after this response.
    close: bool,
    /// Some byte of this response has arrived.
    started: bool,
}

/// What one call to [`Cursor::feed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Every byte was taken; the response is not whole yet.
    Partial,
    /// The response is whole after this many of the bytes.
    Done(usize),
    /// The bytes are not an HTTP response.
    Error(ErrorClass),
}

/// What a response head says about the response.
#[derive(Clone, Copy, Debug)]
struct Head {
    code: u16,
    /// HTTP/1.0, or `Connection: close`, and no `Connection: keep-alive`
    /// on 1.0.
    close: bool,
    /// `Content-Length`.
    length: Option<u64>,
    /// `Transfer-Encoding` present.
    coded: bool,
    /// Its last coding is `chunked`.
    chunked: bool,
}

impl Cursor {
    /// The final response's status code (0 before its head is read).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// True when the server closes the connection after this response.
    pub fn closes(&self) -> bool {
        self.close
    }

    /// True when the server closing the connection now ends this response
    /// (a body delimited by the close) instead of cutting it short.
    pub fn ends_at_eof(&self) -> bool {
        self.state == State::UntilClose
    }

    /// The error when the server closes the connection now, and it does
    /// not end the response: `closed_by_peer` before any byte of it came,
    /// `short_read` after.
    pub fn eof_error(&self) -> ErrorClass {
        if self.started {
            ErrorClass::ShortRead
        } else {
            ErrorClass::Closed
        }
    }

    /// Takes `data`, the next bytes of the response to a request whose
    /// method was HEAD (`head_request`) or not.
    pub fn feed(&mut self, data: &[u8], head_request: bool) -> Step {
        if !data.is_empty() {
            self.started = true;
        }
        let mut p = 0;
        loop {
            if self.state == State::Done {
                return Step::Done(p);
            }
            if p == data.len() {
                return Step::Partial;
            }
            let rest = &data[p..];
            match self.state {
                State::Head => match element(&mut self.pending, rest, MAX_HEAD, head) {
                    Ok(Some((n, h))) => {
                        p += n;
                        if let Err(class) = self.start_body(h, head_request) {
                            return Step::Error(class);
                        }
                    }
                    Ok(None) => return Step::Partial,
                    Err(class) => return Step::Error(class),
                },
                State::Fixed(left) => {
                    let take = left.min(rest.len() as u64);
                    p += take as usize;
                    self.state = if take == left {
                        State::Done
                    } else {
                        State::Fixed(left - take)
                    };
                }
                State::ChunkSize => {
                    match element(&mut self.pending, rest, MAX_CHUNK_LINE, chunk_size) {
                        Ok(Some((n, size))) => {
                            p += n;
                            self.state = if size == 0 {
                                State::Trailers
                            } else {
                                State::ChunkData(size)
                            };
                        }
                        Ok(None) => return Step::Partial,
                        Err(class) => return Step::Error(class),
                    }
                }
                State::ChunkData(left) => {
                    let take = left.min(rest.len() as u64);
                    p += take as usize;
                    self.state = if take == left {
                        State::ChunkEnd(0)
                    } else {
                        State::ChunkData(left - take)
                    };
                }
                State::ChunkEnd(mut seen) => {
                    while seen < 2 && p < data.len() {
                        if data[p] != b"\r\n"[seen as usize] {
                            return Step::Error(ErrorClass::Protocol);
                        }
                        seen += 1;
                        p += 1;
                    }
                    self.state = if seen == 2 {
                        State::ChunkSize
                    } else {
                        State::ChunkEnd(seen)
                    };
                }
                State::Trailers => match element(&mut self.pending, rest, MAX_HEAD, trailers) {
                    Ok(Some((n, ()))) => {
                        p += n;
                        self.state = State::Done;
                    }
                    Ok(None) => return Step::Partial,
                    Err(class) => return Step::Error(class),
                },
                State::UntilClose => p = data.len(),
                State::Done => unreachable!("returned above"),
            }
        }
    }

    /// Decides how the body of the response whose head is `h` is framed.
    fn start_body(&mut self, h: Head, head_request: bool) -> Result<(), ErrorClass> {
        match h.code {
            // An upgrade nobody asked for: what follows is not HTTP/1.1.
            101 => return Err(ErrorClass::Protocol),
            // Interim (100 Continue, 103 Early Hints): the final response
            // follows on the same connection.
            100..=199 => return Ok(()),
            0..=99 => return Err(ErrorClass::Protocol),
            _ => {}
        }
        self.status = h.code;
        self.close = h.close;
        self.state = if head_request || h.code == 204 || h.code == 304 {
            State::Done
        } else if h.coded {
            if h.length.is_some() {
                return Err(ErrorClass::Protocol);
            }
            if h.chunked {
                State::ChunkSize
            } else {
                // A transfer coding that does not delimit itself: the body
                // ends with the connection (RFC 9112 6.3, rule 4).
                self.close = true;
                State::UntilClose
            }
        } else {
            match h.length {
                Some(0) => State::Done,
                Some(n) => State::Fixed(n),
                None => {
                    self.close = true;
                    State::UntilClose
                }
            }
        };
        Ok(())
    }
}

/// Parses one element (a head, a chunk-size line, a trailer section) with
/// `f`, which answers `Some((length, value))` once the bytes it is shown
/// hold the whole element. When `data` ends inside it, its bytes are kept
/// in `pending` (at most `limit` in all: beyond that the element is a
/// `protocol_error`) and shown again, with the next bytes after them, on
/// the next call. Returns how many of `data`'s bytes the element took.
fn element<T>(
    pending: &mut Vec<u8>,
    data: &[u8],
    limit: usize,
    f: impl Fn(&[u8]) -> Result<Option<(usize, T)>, ErrorClass>,
) -> Result<Option<(usize, T)>, ErrorClass> {
    if pending.is_empty() {
        // The common case: the element is whole in this read, parsed in
        // place.
        let seen = &data[..data.len().min(limit)];
        return match f(seen)? {
            Some(done) => Ok(Some(done)),
            None if seen.len() == limit => Err(ErrorClass::Protocol),
            None => {
                pending.extend_from_slice(seen);
                Ok(None)
            }
        };
    }
    let before = pending.len();
    let take = data.len().min(limit - before);
    pending.extend_from_slice(&data[..take]);
    match f(pending)? {
        Some((n, v)) => {
            // The bytes kept before were not a whole element, so it ends
            // in this read.
            debug_assert!(n > before);
            pending.clear();
            Ok(Some((n - before, v)))
        }
        None if pending.len() == limit => Err(ErrorClass::Protocol),
        None => Ok(None),
    }
}

/// A response head: status line and headers.
fn head(bytes: &[u8]) -> Result<Option<(usize, Head)>, ErrorClass> {
    let mut headers = [const { MaybeUninit::<Header>::uninit() }; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut []);
    match ParserConfig::default().parse_response_with_uninit_headers(&mut r, bytes, &mut headers) {
        Ok(Status::Complete(n)) => Ok(Some((n, Head::of(&r)?))),
        Ok(Status::Partial) => Ok(None),
        // Not HTTP, or more than MAX_HEADERS headers.
        Err(_) => Err(ErrorClass::Protocol),
    }
}

impl Head {
    /// What the parsed head `r` says about framing and the connection.
    fn of(r: &httparse::Response) -> Result<Self, ErrorClass> {
        let mut length = None;
        let (mut coded, mut chunked) = (false, false);
        let (mut close, mut keep_alive) = (false, false);
        for h in r.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                // A list of identical values is one length (RFC 9110
                // 8.6); different ones are an error.
                for v in h.value.split(|b| *b == b',') {
                    let n = content_length(v)?;
                    if length.is_some_and(|m| m != n) {
                        return Err(ErrorClass::Protocol);
                    }
                    length = Some(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                coded = true;
                // Only the last coding decides (several headers read as
                // one list).
                let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default();
                chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                for opt in h.value.split(|b| *b == b',') {
                    let opt = opt.trim_ascii();
                    close |= opt.eq_ignore_ascii_case(b"close");
                    keep_alive |= opt.eq_ignore_ascii_case(b"keep-alive");
                }
            }
        }
        let http10 = r.version == Some(0);
        Ok(Self {
            code: r.code.unwrap_or(0),
            close: close || (http10 && !keep_alive),
            length,
            coded,
            chunked,
        })
    }
}

/// A `Content-Length` value: decimal digits only, within u64.
fn content_length(v: &[u8]) -> Result<u64, ErrorClass> {
    let v = v.trim_ascii();
    if v.is_empty() {
        return Err(ErrorClass::Protocol);
    }
    v.iter().try_fold(0u64, |n, b| {
        if !b.is_ascii_digit() {
            return Err(ErrorClass::Protocol);
        }
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(ErrorClass::Protocol)
    })
}

/// A chunk-size line: the size (hex) and any extensions, up to its CRLF.
fn chunk_size(bytes: &[u8]) -> Result<Option<(usize, u64)>, ErrorClass> {
    // httparse reads an empty size ("\r\n") as 0; a size has a digit.
    match bytes.first() {
        None => return Ok(None),
        Some(b) if !b.is_ascii_hexdigit() => return Err(ErrorClass::Protocol),
        Some(_) => {}
    }
    match httparse::parse_chunk_size(bytes) {
        Ok(Status::Complete(done)) => Ok(Some(done)),
        Ok(Status::Partial) => Ok(None),
        Err(_) => Err(ErrorClass::Protocol),
    }
}

/// The trailer section after the last chunk: header lines, then an empty
/// line (usually the empty line alone).
fn trailers(bytes: &[u8]) -> Result<Option<(usize, ())>, ErrorClass> {
    if bytes.starts_with(b"\r\n") {
        return Ok(Some((2, ())));
    }
    if bytes == b"\r" {
        return Ok(None);
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(bytes, &mut headers) {
        Ok(Status::Complete((n, _))) => Ok(Some((n, ()))),
        Ok(Status::Partial) => Ok(None),
        Err(_) => Err(ErrorClass::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces cut at `cuts`, as one connection's reads;
    /// returns each response's (status, close, length) and what came
    /// after the last whole one (None: nothing, Some(step)).
    fn run(bytes: &[u8], cuts: &[usize], head: bool) -> (Vec<(u16, bool, usize)>, Option<Step>) {
        let mut cur = Cursor::default();
        let mut done = Vec::new();
        let mut start = 0; // where the current response began
        let mut edges: Vec<usize> = cuts.to_vec();
        edges.push(bytes.len());
        let mut from = 0;
        for &to in &edges {
            let mut piece = &bytes[from..to];
            let mut at = from;
            while !piece.is_empty() {
                match cur.feed(piece, head) {
                    Step::Partial => break,
                    Step::Done(n) => {
                        done.push((cur.status(), cur.closes(), at + n - start));
                        cur = Cursor::default();
                        start = at + n;
                        at += n;
                        piece = &piece[n..];
                    }
                    e @ Step::Error(_) => return (done, Some(e)),
                }
            }
            from = to;
        }
        let tail = (start < bytes.len()).then_some(Step::Partial);
        (done, tail)
    }

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\
        Content-Type: text/plain\r\n\r\n5;ext=1\r\nhello\r\n1A\r\n\
        abcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: yes\r\n\r\n";
    const LENGTH: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\
        Server: t\r\n\r\nnot found";

    #[test]
    fn a_response_split_at_every_byte_is_framed_the_same() {
        for (resp, status) in [(CHUNKED, 200), (LENGTH, 404)] {
            // Two in a row, so a cut can also fall between them.
            let two = [resp, resp].concat();
            let whole = (status, false, resp.len());
            for cut in 0..=two.len() {
                let (done, tail) = run(&two, &[cut], false);
                assert_eq!(done, [whole, whole], "cut at {cut}");
                assert_eq!(tail, None, "cut at {cut}");
            }
            // And one byte per read.
            let cuts: Vec<usize> = (1..two.len()).collect();
            assert_eq!(run(&two, &cuts, false).0, [whole, whole]);
        }
    }

    #[test]
    fn pipelined_responses_in_one_read_are_told_apart() {
        let no_body = b"HTTP/1.1 204 No Content\r\nServer: t\r\n\r\n";
        let all = [LENGTH, CHUNKED, no_body, LENGTH].concat();
        let (done, tail) = run(&all, &[], false);
        assert_eq!(
            done,
            [
                (404, false, LENGTH.len()),
                (200, false, CHUNKED.len()),
                (204, false, no_body.len()),
                (404, false, LENGTH.len()),
            ]
        );
        assert_eq!(tail, None);
    }

    #[test]
    fn head_204_and_304_have_no_body_whatever_the_length_says() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(run(head, &[], true).0, [(200, false, head.len())]);
        // The same head to a GET waits for its 1000 bytes.
        assert_eq!(run(head, &[], false), (vec![], Some(Step::Partial)));
        let chunked_head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(run(chunked_head, &[], true).0.len(), 1);
        for r in [
            &b"HTTP/1.1 204 No Content\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"x\"\r\n\r\n",
        ] {
            let code = if r[9] == b'2' { 204 } else { 304 };
            assert_eq!(run(r, &[], false).0, [(code, false, r.len())]);
        }
    }

    #[test]
    fn interim_responses_are_skipped() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
                  HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        for cut in 0..=r.len() {
            assert_eq!(run(r, &[cut], false).0, [(201, false, r.len())], "{cut}");
        }
        let up = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
        assert_eq!(
            run(up, &[], false).1,
            Some(Step::Error(ErrorClass::Protocol))
        );
    }

    #[test]
    fn garbage_and_broken_frames_are_protocol_errors() {
        let proto = Some(Step::Error(ErrorClass::Protocol));
        for bad in [
            &b"garbage\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n",
        ] {
            assert_eq!(run(bad, &[], false).1, proto, "{}", bad.escape_ascii());
            // The same split in two: the verdict does not depend on reads.
            assert_eq!(
                run(bad, &[bad.len() / 2], false).1,
                proto,
                "{}",
                bad.escape_ascii()
            );
        }
        // Repeated equal lengths are one length.
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(run(ok, &[], false).0, [(200, false, ok.len())]);
    }

    #[test]
    fn huge_sizes_are_bounded() {
        let proto = Some(Step::Error(ErrorClass::Protocol));
        // Past u64: an error, not a wrap.
        let big = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert_eq!(run(big, &[], false).1, proto);
        let big = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n";
        assert_eq!(run(big, &[], false).1, proto);
        // The largest u64 is a length like any other: counted down.
        let max = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc";
        let mut cur = Cursor::default();
        assert_eq!(cur.feed(max, false), Step::Partial);
        assert_eq!(cur.state, State::Fixed(u64::MAX - 3));
        // A head that never ends stops at MAX_HEAD, in one read or many.
        let mut endless = b"HTTP/1.1 200 OK\r\n".to_vec();
        while endless.len() <= MAX_HEAD {
            endless.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert_eq!(run(&endless, &[], false).1, proto);
        let cuts: Vec<usize> = (1..endless.len() / 1000).map(|i| i * 1000).collect();
        assert_eq!(run(&endless, &cuts, false).1, proto);
        let mut too_many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            too_many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        too_many.extend_from_slice(b"\r\n");
        assert_eq!(run(&too_many, &[], false).1, proto);
        // A chunk-size line of endless extensions.
        let mut ext = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5".to_vec();
        ext.extend(std::iter::repeat_n(b';', MAX_CHUNK_LINE + 1));
        assert_eq!(run(&ext, &[60], false).1, proto);
    }

    #[test]
    fn connection_close_and_http_1_0_close_the_connection() {
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(run(close, &[], false).0, [(200, true, close.len())]);
        let listed = b"HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(run(listed, &[], false).0, [(200, true, listed.len())]);
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(run(old, &[], false).0, [(200, true, old.len())]);
        let kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(run(kept, &[], false).0, [(200, false, kept.len())]);
    }

    #[test]
    fn a_body_without_length_ends_with_the_connection() {
        for r in [
            &b"HTTP/1.0 200 OK\r\n\r\nbody until close"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b...",
        ] {
            let mut cur = Cursor::default();
            assert_eq!(cur.feed(r, false), Step::Partial);
            assert!(cur.ends_at_eof());
            assert!(cur.closes());
            assert_eq!(cur.status(), 200);
        }
    }

    #[test]
    fn a_close_mid_response_is_a_short_read() {
        let cur = Cursor::default();
        assert!(!cur.ends_at_eof());
        assert_eq!(cur.eof_error(), ErrorClass::Closed);
        for cut in 1..LENGTH.len() {
            let mut cur = Cursor::default();
            assert_eq!(cur.feed(&LENGTH[..cut], false), Step::Partial);
            assert!(!cur.ends_at_eof());
            assert_eq!(cur.eof_error(), ErrorClass::ShortRead, "{cut}");
        }
    }
}
