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
        let code = r.code.unwrap_or(0);
        if (100..=199).contains(&code) && code != 101 {
            // An interim response has no body (a Content-Length there is
            // forbidden, RFC 9110 8.6): its framing headers are skipped
            // with it, never judged, so a malformed one cannot fail the
            // final response that follows.
            return Ok(Self {
                code,
                close: false,
                length: None,
                coded: false,
                chunked: false,
            });
        }
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
            code,
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
        // An interim response's framing headers are skipped with it, even
        // malformed (a proptest case: the reference reader skipped them,
        // the cursor judged them).
        let odd = b"HTTP/1.1 100 Continue\r\nContent-Length: \x8010, 10\r\n\r\n\
                    HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for cut in 0..=odd.len() {
            assert_eq!(
                run(odd, &[cut], false).0,
                [(200, false, odd.len())],
                "{cut}"
            );
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

    // Property tests: responses from a reference model (interim ones
    // first; bodies framed by Content-Length, chunked with extensions and
    // trailers, none, or the close; Connection and HTTP/1.0 rules), read
    // in pipelines under random cuts; mutated ones read alike whatever
    // the reads, never a panic, errors only protocol errors.

    use crate::hostile;
    use proptest::prelude::*;
    use proptest::sample::Index;

    #[derive(Clone, Debug)]
    enum Framing {
        /// Content-Length (the header written `copies` times, or as a list).
        Length {
            body: Vec<u8>,
            copies: u8,
            list: bool,
        },
        /// Chunked: chunks with an optional extension, trailer lines;
        /// `gzip, chunked` when `coded`.
        Chunked {
            chunks: Vec<(Vec<u8>, bool)>,
            trailers: Vec<(String, String)>,
            coded: bool,
            upper: bool,
        },
        /// Nothing says where the body ends: the close does (only last).
        UntilClose { body: Vec<u8>, gzip: bool },
    }

    #[derive(Clone, Debug)]
    struct Response {
        http10: bool,
        interim: Vec<u16>,
        code: u16,
        reason: String,
        headers: Vec<(String, String)>,
        /// Connection: close (Some(true)), keep-alive (Some(false)).
        connection: Option<bool>,
        framing: Framing,
    }

    fn token() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(b"abcXYZ019-_!#$%&'*+.^`|~".to_vec()),
            1..10,
        )
        .prop_map(|v| String::from_utf8(v).unwrap())
    }

    fn field_value() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(b"abcXYZ019 ,;=/\"()".to_vec()), 0..16)
            .prop_map(|v| String::from_utf8(v).unwrap().trim().to_string())
    }

    fn framing(last: bool) -> impl Strategy<Value = Framing> {
        let body = prop::collection::vec(any::<u8>(), 0..64);
        let length = (body.clone(), 1..=2u8, any::<bool>())
            .prop_map(|(body, copies, list)| Framing::Length { body, copies, list });
        let chunked = (
            prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 1..40), any::<bool>()),
                0..4,
            ),
            prop::collection::vec((token(), field_value()), 0..2),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(chunks, trailers, coded, upper)| Framing::Chunked {
                chunks,
                trailers,
                coded,
                upper,
            });
        let until =
            (body, any::<bool>()).prop_map(|(body, gzip)| Framing::UntilClose { body, gzip });
        if last {
            prop_oneof![2 => length, 2 => chunked, 1 => until].boxed()
        } else {
            prop_oneof![length, chunked].boxed()
        }
    }

    fn response(last: bool) -> impl Strategy<Value = Response> {
        let code = prop_oneof![4 => 200..=599u16, 1 => Just(204u16), 1 => Just(304u16)];
        let reserved = ["content-length", "transfer-encoding", "connection"];
        (
            any::<bool>(),
            prop::collection::vec(prop::sample::select(vec![100u16, 102, 103]), 0..2),
            code,
            prop::collection::vec(prop::sample::select(b"OK Fine x".to_vec()), 0..12)
                .prop_map(|v| String::from_utf8(v).unwrap()),
            prop::collection::vec((token(), field_value()), 0..4).prop_map(move |h| {
                h.into_iter()
                    .filter(|(n, _)| !reserved.contains(&n.to_ascii_lowercase().as_str()))
                    .collect()
            }),
            any::<Option<bool>>(),
            framing(last),
        )
            .prop_map(
                |(http10, interim, code, reason, headers, connection, framing)| Response {
                    http10,
                    interim,
                    code,
                    reason,
                    headers,
                    connection,
                    framing,
                },
            )
    }

    /// A header name in a random-looking but fixed mix of cases.
    fn cased(name: &str, upper: bool) -> String {
        name.chars()
            .enumerate()
            .map(|(i, c)| {
                if upper && i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }

    impl Response {
        /// The bytes; to a HEAD request when `head`.
        fn encode(&self, out: &mut Vec<u8>, head: bool) {
            let version = if self.http10 { "1.0" } else { "1.1" };
            for code in &self.interim {
                out.extend_from_slice(
                    format!("HTTP/1.1 {code} Interim\r\nX-I: 1\r\n\r\n").as_bytes(),
                );
            }
            let mut h = format!("HTTP/{version} {} {}\r\n", self.code, self.reason);
            for (n, v) in &self.headers {
                h += &format!("{n}: {v}\r\n");
            }
            match self.connection {
                Some(true) => h += "Connection: keep-alive, close\r\n",
                Some(false) => h += "connection: Keep-Alive\r\n",
                None => {}
            }
            let no_body = head || self.code == 204 || self.code == 304;
            let mut body = Vec::new();
            match &self.framing {
                Framing::Length {
                    body: b,
                    copies,
                    list,
                } => {
                    let n = b.len();
                    if *list {
                        h += &format!("Content-Length: {n}, {n}\r\n");
                    }
                    for i in 0..*copies {
                        h += &format!("{}: {n}\r\n", cased("content-length", i == 1));
                    }
                    body.extend_from_slice(b);
                }
                Framing::Chunked {
                    chunks,
                    trailers,
                    coded,
                    upper,
                } => {
                    let coding = if *coded { "gzip, Chunked" } else { "chunked" };
                    h += &format!("{}: {coding}\r\n", cased("transfer-encoding", *upper));
                    for (c, ext) in chunks {
                        let size = if *upper {
                            format!("{:X}", c.len())
                        } else {
                            format!("{:x}", c.len())
                        };
                        body.extend_from_slice(size.as_bytes());
                        if *ext {
                            body.extend_from_slice(b";name=\"v\";flag");
                        }
                        body.extend_from_slice(b"\r\n");
                        body.extend_from_slice(c);
                        body.extend_from_slice(b"\r\n");
                    }
                    body.extend_from_slice(b"0\r\n");
                    for (n, v) in trailers {
                        body.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
                    }
                    body.extend_from_slice(b"\r\n");
                }
                Framing::UntilClose { body: b, gzip } => {
                    if *gzip {
                        h += "Transfer-Encoding: gzip\r\n";
                    }
                    body.extend_from_slice(b);
                }
            }
            h += "\r\n";
            out.extend_from_slice(h.as_bytes());
            if !no_body {
                out.extend_from_slice(&body);
            }
        }

        /// (status, close, whole before the close) as the cursor must say.
        fn expect(&self, head: bool) -> (u16, bool, bool) {
            let no_body = head || self.code == 204 || self.code == 304;
            let until_close = !no_body && matches!(self.framing, Framing::UntilClose { .. });
            let close = match self.connection {
                Some(true) => true,
                Some(false) => false,
                None => self.http10,
            } || until_close;
            (self.code, close, !until_close)
        }
    }

    /// A whole response as read: status, close, length.
    type Framed = (u16, bool, usize);

    /// Feeds a connection's bytes in reads cut at `cuts`; returns each
    /// whole response (status, close, length) and the cursor after them,
    /// or the error.
    fn feed_all(bytes: &[u8], cuts: &[usize], head: bool) -> (Vec<Framed>, Result<Cursor, Step>) {
        let mut cur = Cursor::default();
        let mut done = Vec::new();
        let mut start = 0;
        let mut edges: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        edges.push(bytes.len());
        edges.sort_unstable();
        let mut from = 0;
        for &to in &edges {
            let mut at = from;
            while at < to {
                match cur.feed(&bytes[at..to], head) {
                    Step::Partial => break,
                    Step::Done(n) => {
                        assert!(n > 0 && at + n <= to, "done after {n} of {}", to - at);
                        done.push((cur.status(), cur.closes(), at + n - start));
                        cur = Cursor::default();
                        at += n;
                        start = at;
                    }
                    e @ Step::Error(_) => return (done, Err(e)),
                }
            }
            from = to;
        }
        (done, Ok(cur))
    }

    fn cut_points(cuts: &[Index], len: usize) -> Vec<usize> {
        cuts.iter().map(|c| c.index(len + 1)).collect()
    }

    /// What the reference reader makes of the bytes at the start.
    #[derive(Debug, PartialEq, Eq)]
    enum Ref {
        /// A whole response: length, status, close.
        Whole(usize, u16, bool),
        /// A head whose body runs to the close: status.
        UntilClose(u16),
        /// The bytes end first.
        More,
        /// Not HTTP.
        Bad,
    }

    /// One response from the start of `b`, read whole by a reader of the
    /// same rules written without the cursor's machinery (no states, no
    /// bytes kept across reads): httparse for heads, chunk-size lines and
    /// trailers, the framing decided and walked here.
    fn reference(b: &[u8], head_request: bool) -> Ref {
        let mut p = 0;
        let (code, close, length, coded, chunked) = loop {
            let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut r = httparse::Response::new(&mut hs);
            let lim = b.len().min(p + MAX_HEAD);
            let n = match r.parse(&b[p..lim]) {
                Ok(Status::Complete(n)) => n,
                Ok(Status::Partial) if lim - p == MAX_HEAD => return Ref::Bad,
                Ok(Status::Partial) => return Ref::More,
                Err(_) => return Ref::Bad,
            };
            p += n;
            let code = r.code.unwrap();
            match code {
                101 | 0..=99 => return Ref::Bad,
                100..=199 => continue,
                _ => {}
            }
            let (mut length, mut coded, mut chunked) = (None, false, false);
            let (mut close, mut keep) = (false, false);
            for h in r.headers.iter() {
                let v = h.value;
                match h.name.to_ascii_lowercase().as_str() {
                    "content-length" => {
                        for one in v.split(|c| *c == b',') {
                            let one = one.trim_ascii();
                            let n = std::str::from_utf8(one)
                                .ok()
                                .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
                                .and_then(|d| d.parse::<u64>().ok());
                            let Some(n) = n else { return Ref::Bad };
                            if length.is_some_and(|m| m != n) {
                                return Ref::Bad;
                            }
                            length = Some(n);
                        }
                    }
                    "transfer-encoding" => {
                        coded = true;
                        let last = v.split(|c| *c == b',').next_back().unwrap_or_default();
                        chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
                    }
                    "connection" => {
                        for o in v.split(|c| *c == b',') {
                            close |= o.trim_ascii().eq_ignore_ascii_case(b"close");
                            keep |= o.trim_ascii().eq_ignore_ascii_case(b"keep-alive");
                        }
                    }
                    _ => {}
                }
            }
            break (
                code,
                close || (r.version == Some(0) && !keep),
                length,
                coded,
                chunked,
            );
        };
        if head_request || code == 204 || code == 304 {
            return Ref::Whole(p, code, close);
        }
        match (coded, chunked, length) {
            (true, _, Some(_)) => return Ref::Bad,
            (true, false, None) | (false, _, None) => return Ref::UntilClose(code),
            (false, _, Some(n)) => {
                return if (b.len() - p) as u64 >= n {
                    Ref::Whole(p + n as usize, code, close)
                } else {
                    Ref::More
                };
            }
            (true, true, None) => {}
        }
        loop {
            let rest = &b[p..];
            match rest.first() {
                None => return Ref::More,
                Some(c) if !c.is_ascii_hexdigit() => return Ref::Bad,
                Some(_) => {}
            }
            let lim = rest.len().min(MAX_CHUNK_LINE);
            let (n, size) = match httparse::parse_chunk_size(&rest[..lim]) {
                Ok(Status::Complete(done)) => done,
                Ok(Status::Partial) if lim == MAX_CHUNK_LINE => return Ref::Bad,
                Ok(Status::Partial) => return Ref::More,
                Err(_) => return Ref::Bad,
            };
            p += n;
            if size == 0 {
                break;
            }
            if (b.len() - p) as u64 <= size {
                return Ref::More;
            }
            p += size as usize;
            for want in *b"\r\n" {
                match b.get(p) {
                    None => return Ref::More,
                    Some(&c) if c == want => p += 1,
                    Some(_) => return Ref::Bad,
                }
            }
        }
        let rest = &b[p..];
        if rest.starts_with(b"\r\n") {
            return Ref::Whole(p + 2, code, close);
        }
        if rest.is_empty() || rest == b"\r" {
            return Ref::More;
        }
        let lim = rest.len().min(MAX_HEAD);
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::parse_headers(&rest[..lim], &mut hs) {
            Ok(Status::Complete((n, _))) => Ref::Whole(p + n, code, close),
            Ok(Status::Partial) if lim == MAX_HEAD => Ref::Bad,
            Ok(Status::Partial) => Ref::More,
            Err(_) => Ref::Bad,
        }
    }

    /// The reference's reading of a connection's bytes: its whole
    /// responses, then how it ends.
    fn reference_all(b: &[u8], head: bool) -> (Vec<Framed>, Ref) {
        let (mut done, mut at) = (Vec::new(), 0);
        loop {
            match reference(&b[at..], head) {
                Ref::Whole(n, code, close) => {
                    done.push((code, close, n));
                    at += n;
                    if at == b.len() {
                        return (done, Ref::More);
                    }
                }
                end => return (done, end),
            }
        }
    }

    fn pipeline() -> impl Strategy<Value = Vec<Response>> {
        (prop::collection::vec(response(false), 0..3), response(true)).prop_map(|(mut v, last)| {
            v.push(last);
            v
        })
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// A pipeline of responses, in reads cut anywhere: each whole one
        /// framed to its length with its status and close; a body that
        /// runs to the close waits for it.
        #[test]
        fn responses_round_trip_in_pipelines_at_any_cuts(
            rs in pipeline(),
            head in any::<bool>(),
            cuts in prop::collection::vec(any::<Index>(), 0..8),
        ) {
            let mut bytes = Vec::new();
            let mut want = Vec::new();
            for r in &rs {
                let from = bytes.len();
                r.encode(&mut bytes, head);
                let (code, close, whole) = r.expect(head);
                if whole {
                    // Interim responses are skipped: they count in the length.
                    want.push((code, close, bytes.len() - from));
                }
            }
            let (done, cur) = feed_all(&bytes, &cut_points(&cuts, bytes.len()), head);
            prop_assert_eq!(&done, &want, "{}", bytes.escape_ascii());
            prop_assert_eq!(&reference_all(&bytes, head).0, &want);
            let cur = cur.unwrap();
            let last = rs.last().unwrap().expect(head);
            prop_assert_eq!(cur.ends_at_eof(), !last.2);
            if !last.2 {
                prop_assert_eq!((cur.status(), cur.closes()), (last.0, true));
            }
        }

        /// Mutated pipelines: the same verdict in one read and in reads
        /// cut anywhere (responses, then an error of the protocol class or
        /// more to come); a whole response is never empty.
        #[test]
        fn mutated_responses_read_alike_at_any_cuts(
            rs in pipeline(),
            head in any::<bool>(),
            ms in hostile::mutations(),
            cuts in prop::collection::vec(any::<Index>(), 1..8),
        ) {
            let mut bytes = Vec::new();
            for r in &rs {
                r.encode(&mut bytes, head);
            }
            let bad = hostile::mutate(&bytes, &ms);
            let (done, end) = feed_all(&bad, &[], head);
            let (done_cut, end_cut) = feed_all(&bad, &cut_points(&cuts, bad.len()), head);
            prop_assert_eq!(&done, &done_cut, "{}", bad.escape_ascii());
            let (ref_done, ref_end) = reference_all(&bad, head);
            prop_assert_eq!(&done, &ref_done, "{}", bad.escape_ascii());
            match (end, end_cut) {
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a, b);
                    prop_assert_eq!(a, Step::Error(ErrorClass::Protocol));
                    prop_assert_eq!(ref_end, Ref::Bad);
                }
                (Ok(a), Ok(b)) => {
                    prop_assert_eq!(a.ends_at_eof(), b.ends_at_eof());
                    let want = if a.ends_at_eof() { Ref::UntilClose(a.status()) } else { Ref::More };
                    prop_assert_eq!(ref_end, want, "{}", bad.escape_ascii());
                }
                (a, b) => prop_assert!(false, "{:?} whole, {:?} cut", a.err(), b.err()),
            }
        }
    }
}
