//! The protocol side of one echo connection, shared by every transport:
//! turning bytes read into response bytes ([`Framer`]), holding what could
//! not be written yet ([`OutBuf`]), deciding how much may be read so the
//! output stays bounded ([`Framer::read_budget`]), and counting completed
//! transactions ([`Tally`]). Transports only move bytes.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::proto::rr;

/// Floor of the per-connection output bound: what a connection may have
/// answered but not yet written before it stops reading (backpressure).
pub const OUT_CAP_MIN: usize = 256 << 10;

/// How a connection's bytes are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Return every byte read.
    Echo,
    /// Answer each complete `req`-byte request with `resp` bytes
    /// (crate::proto::rr: the response repeats the request).
    Fixed {
        /// Request size.
        req: usize,
        /// Response size.
        resp: usize,
    },
}

/// What every connection of a server does.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Echo or fixed-size request/response.
    pub framing: Framing,
    /// CPU to burn per request (per read in echo mode).
    pub work: Option<Duration>,
    /// Bound on a connection's unwritten output, bytes.
    pub out_cap: usize,
}

impl Spec {
    /// A spec with the output bound derived from the response size (at
    /// least one whole response must fit).
    pub fn new(framing: Framing, work: Option<Duration>) -> Self {
        let out_cap = match framing {
            Framing::Echo => OUT_CAP_MIN,
            Framing::Fixed { resp, .. } => OUT_CAP_MIN.max(resp),
        };
        Self {
            framing,
            work,
            out_cap,
        }
    }

    /// Response size in framed mode.
    pub fn resp_size(&self) -> Option<usize> {
        match self.framing {
            Framing::Echo => None,
            Framing::Fixed { resp, .. } => Some(resp),
        }
    }
}

/// Per-connection request state: the first bytes of a request that has
/// not arrived whole (framed mode). Holds no memory between requests.
#[derive(Debug, Default)]
pub struct Framer {
    partial: Vec<u8>,
}

impl Framer {
    /// The most bytes the next read may take so that everything it can
    /// produce fits in `pending` + output <= `spec.out_cap`. 0 means "do
    /// not read now" (the peer is not reading its responses).
    ///
    /// In framed mode this never reads past the requests it can answer, so
    /// no unanswered input is ever held beyond one partial request.
    pub fn read_budget(&self, spec: &Spec, pending: usize) -> usize {
        let space = spec.out_cap.saturating_sub(pending);
        match spec.framing {
            Framing::Echo => space,
            Framing::Fixed { req, resp } => {
                let answerable = space / resp;
                if answerable == 0 {
                    return 0;
                }
                // partial < req, so this is at least 1.
                answerable.saturating_mul(req) - self.partial.len()
            }
        }
    }

    /// Answers `data` (bytes just read), appending the responses to `out`.
    /// Returns how many complete requests it answered (0 in echo mode).
    pub fn feed(&mut self, spec: &Spec, mut data: &[u8], out: &mut Vec<u8>) -> u64 {
        let (req, resp) = match spec.framing {
            Framing::Echo => {
                if let Some(w) = spec.work {
                    burn(w);
                }
                out.extend_from_slice(data);
                return 0;
            }
            Framing::Fixed { req, resp } => (req, resp),
        };
        let mut answered = 0;
        if !self.partial.is_empty() {
            let take = (req - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.partial.len() < req {
                return 0;
            }
            respond(spec, &self.partial, resp, out);
            // Free it: an idle connection should hold no request memory.
            self.partial = Vec::new();
            answered += 1;
        }
        while data.len() >= req {
            respond(spec, &data[..req], resp, out);
            data = &data[req..];
            answered += 1;
        }
        if !data.is_empty() {
            self.partial.reserve_exact(req);
            self.partial.extend_from_slice(data);
        }
        answered
    }

    /// Bytes of an incomplete request held.
    pub fn partial_len(&self) -> usize {
        self.partial.len()
    }
}

fn respond(spec: &Spec, request: &[u8], resp: usize, out: &mut Vec<u8>) {
    if let Some(w) = spec.work {
        burn(w);
    }
    let at = out.len();
    out.resize(at + resp, 0);
    rr::fill_response(&mut out[at..], request);
}

/// Burns `d` of CPU in user space: a spin on the monotonic clock (vDSO, no
/// syscall), so it models computation, not waiting.
pub fn burn(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Output answered but not yet written. Empty holds no memory, so an idle
/// connection costs nothing here.
#[derive(Debug, Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl OutBuf {
    /// Unwritten bytes.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Number of unwritten bytes.
    pub fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when everything was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks `n` bytes written; frees the buffer once it is empty.
    pub fn consume(&mut self, n: usize) {
        self.pos += n;
        debug_assert!(self.pos <= self.buf.len());
        if self.pos >= self.buf.len() {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    /// The buffer to append new output to (written bytes already dropped).
    pub fn tail(&mut self) -> &mut Vec<u8> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        &mut self.buf
    }
}

/// Counts transactions as bytes are written: every response has the same
/// size, so the responses completed on a connection are exactly its bytes
/// written divided by that size.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    written: u64,
}

impl Tally {
    /// Records `n` more bytes written; returns how many responses that
    /// completed (always 0 in echo mode).
    pub fn wrote(&mut self, spec: &Spec, n: usize) -> u64 {
        let before = self.written;
        self.written += n as u64;
        match spec.resp_size() {
            Some(r) => self.written / r as u64 - before / r as u64,
            None => 0,
        }
    }
}

/// How a connection ended, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The peer closed (read returned 0) and everything owed was written.
    PeerClosed,
    /// ECONNRESET or EPIPE: the peer went away abruptly.
    Reset,
    /// Any other I/O error.
    Error,
}

/// Classifies a failed read or write on a connection.
pub fn ending_of(e: &io::Error) -> Ending {
    match e.raw_os_error() {
        Some(libc::ECONNRESET | libc::EPIPE | libc::ETIMEDOUT | libc::ECONNABORTED) => {
            Ending::Reset
        }
        _ => Ending::Error,
    }
}

/// recv(2) without flags, EINTR retried.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// send(2) with MSG_NOSIGNAL (a vanished peer is EPIPE, never SIGPIPE),
/// EINTR retried.
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for reads of buf.len() bytes.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(req: usize, resp: usize) -> Spec {
        Spec::new(Framing::Fixed { req, resp }, None)
    }

    #[test]
    fn split_and_pipelined_requests_are_answered_in_order() {
        let spec = fixed(100, 1000);
        let mut reqs = vec![0u8; 300];
        for i in 0..3 {
            rr::fill_request(&mut reqs[i * 100..(i + 1) * 100], i as u64);
        }
        let mut f = Framer::default();
        let mut out = Vec::new();
        // Split: 1 + 98 + (1 + 50) + rest.
        assert_eq!(f.feed(&spec, &reqs[..1], &mut out), 0);
        assert_eq!(f.feed(&spec, &reqs[1..99], &mut out), 0);
        assert_eq!(f.partial_len(), 99);
        assert_eq!(f.feed(&spec, &reqs[99..150], &mut out), 1);
        assert_eq!(f.partial_len(), 50);
        // Pipelined: the rest of request 1 and all of request 2 at once.
        assert_eq!(f.feed(&spec, &reqs[150..], &mut out), 2);
        assert_eq!(f.partial_len(), 0);
        assert_eq!(out.len(), 3000);
        for i in 0..3 {
            let r = &out[i * 1000..(i + 1) * 1000];
            assert_eq!(
                rr::check_response(r, 0, i as u64, 100),
                None,
                "response {i}"
            );
        }
    }

    #[test]
    fn echo_returns_every_byte() {
        let spec = Spec::new(Framing::Echo, None);
        let mut f = Framer::default();
        let mut out = Vec::new();
        assert_eq!(f.feed(&spec, b"hello", &mut out), 0);
        assert_eq!(f.feed(&spec, b" world", &mut out), 0);
        assert_eq!(out, b"hello world");
    }

    #[test]
    fn budget_keeps_output_bounded() {
        let spec = fixed(100, 1000);
        let mut f = Framer::default();
        let cap = spec.out_cap;
        // Empty output: as many whole requests as their responses fit.
        assert_eq!(f.read_budget(&spec, 0), cap / 1000 * 100);
        // A partial request counts against the budget.
        let mut out = Vec::new();
        f.feed(&spec, &[7u8; 40], &mut out);
        assert_eq!(f.read_budget(&spec, 0), cap / 1000 * 100 - 40);
        // Not even one response fits: do not read.
        assert_eq!(f.read_budget(&spec, cap - 999), 0);
        assert_eq!(f.read_budget(&spec, cap), 0);
        // Reading the whole budget never exceeds the cap.
        let mut f = Framer::default();
        let pending = 5000;
        let b = f.read_budget(&spec, pending);
        let mut out = Vec::new();
        f.feed(&spec, &vec![1u8; b], &mut out);
        assert!(pending + out.len() <= cap);
        let echo = Spec::new(Framing::Echo, None);
        assert_eq!(Framer::default().read_budget(&echo, 10), echo.out_cap - 10);
        // A response larger than the floor raises the cap to fit one.
        assert_eq!(fixed(1, 1 << 20).out_cap, 1 << 20);
    }

    #[test]
    fn tally_counts_whole_responses_only() {
        let spec = fixed(10, 100);
        let mut t = Tally::default();
        assert_eq!(t.wrote(&spec, 99), 0);
        assert_eq!(t.wrote(&spec, 1), 1);
        assert_eq!(t.wrote(&spec, 250), 2);
        assert_eq!(t.wrote(&spec, 50), 1);
        let echo = Spec::new(Framing::Echo, None);
        assert_eq!(Tally::default().wrote(&echo, 1000), 0);
    }

    #[test]
    fn outbuf_frees_memory_when_drained() {
        let mut o = OutBuf::default();
        o.tail().extend_from_slice(b"abcdef");
        o.consume(2);
        assert_eq!(o.pending(), b"cdef");
        o.tail().extend_from_slice(b"gh");
        assert_eq!(o.pending(), b"cdefgh");
        o.consume(6);
        assert!(o.is_empty());
        o.tail().extend_from_slice(b"xy");
        o.consume(2);
        assert!(o.is_empty());
        assert_eq!(o.buf.capacity(), 0);
    }

    #[test]
    fn burn_spins_for_about_the_time_asked() {
        let t = Instant::now();
        burn(Duration::from_millis(5));
        let e = t.elapsed();
        assert!(e >= Duration::from_millis(5), "{e:?}");
    }
}
