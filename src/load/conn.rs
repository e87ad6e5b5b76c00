//! Socket set-up and the request/response exchange shared by the TCP
//! workloads: non-blocking connect, the request bytes, and the matcher that
//! consumes response bytes (and verifies them) as they arrive.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::tally::ErrorClass;
use crate::proto::rr;

/// What a transaction sends and expects back.
#[derive(Clone, Debug)]
pub enum Exchange {
    /// `req` pattern bytes out, `resp` bytes back (the response repeats
    /// the request; see proto::rr).
    Pattern {
        /// Request size.
        req: usize,
        /// Response size.
        resp: usize,
        /// Check every response byte.
        verify: bool,
    },
    /// A fixed request (e.g. `PING\r\n`) and what must come back.
    Fixed {
        /// Request bytes.
        request: Vec<u8>,
        /// Expected response.
        expect: Expect,
    },
}

/// The expected response of a fixed request.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Exactly this many bytes, content unchecked.
    Bytes(usize),
    /// Exactly these bytes.
    Exact(Vec<u8>),
}

impl Exchange {
    /// Request length.
    pub fn req_len(&self) -> usize {
        match self {
            Self::Pattern { req, .. } => *req,
            Self::Fixed { request, .. } => request.len(),
        }
    }

    /// Response length.
    pub fn resp_len(&self) -> usize {
        match self {
            Self::Pattern { resp, .. } => *resp,
            Self::Fixed {
                expect: Expect::Bytes(n),
                ..
            } => *n,
            Self::Fixed {
                expect: Expect::Exact(b),
                ..
            } => b.len(),
        }
    }

    /// True when request contents depend on the transaction number (so a
    /// buffer must be filled per request).
    pub fn per_request_fill(&self) -> bool {
        matches!(self, Self::Pattern { verify: true, .. })
    }

    /// Appends the request of transaction `seq` to `out`.
    pub fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
        match self {
            Self::Pattern { req, verify, .. } => {
                let start = out.len();
                out.resize(start + req, 0);
                // Without --verify every request carries transaction 0's
                // pattern, so nothing is computed per request.
                rr::fill_request(&mut out[start..], if *verify { seq } else { 0 });
            }
            Self::Fixed { request, .. } => out.extend_from_slice(request),
        }
    }

    /// Checks `got`, the response bytes at offset `off` of the response to
    /// transaction `seq`.
    #[inline]
    pub fn check(&self, got: &[u8], off: usize, seq: u64) -> Result<(), ErrorClass> {
        match self {
            Self::Pattern {
                verify: true, req, ..
            } => match rr::check_response(got, off, seq, *req) {
                None => Ok(()),
                Some(_) => Err(ErrorClass::Mismatch),
            },
            Self::Fixed {
                expect: Expect::Exact(want),
                ..
            } => {
                if want[off..off + got.len()] == *got {
                    Ok(())
                } else {
                    Err(ErrorClass::Mismatch)
                }
            }
            _ => Ok(()),
        }
    }
}

/// Starts a non-blocking connect. Returns the socket and whether it is
/// already connected (possible on loopback).
pub fn start_connect(addr: &SocketAddr) -> io::Result<(Socket, bool)> {
    let sock = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    // Request/response: never let Nagle hold a request back.
    sock.set_tcp_nodelay(true)?;
    match sock.connect(&SockAddr::from(*addr)) {
        Ok(()) => Ok((sock, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok((sock, false)),
        Err(e) => Err(e),
    }
}

/// Result of a connect once the socket reported writable.
pub fn finish_connect(sock: &Socket) -> io::Result<()> {
    match sock.take_error()? {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Sets SO_LINGER 0 so close() sends RST and leaves no TIME_WAIT.
pub fn set_linger_zero(sock: &Socket) -> io::Result<()> {
    sock.set_linger(Some(Duration::ZERO))
}

/// Non-blocking write; Ok(0) means "would block".
#[inline]
pub fn write_some(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: valid fd and buffer.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
        _ => Err(e),
    }
}

/// What a non-blocking read produced.
pub enum ReadOutcome {
    /// n bytes.
    Data(usize),
    /// Nothing available now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

/// Non-blocking read.
#[inline]
pub fn read_some(fd: RawFd, buf: &mut [u8]) -> io::Result<ReadOutcome> {
    // SAFETY: valid fd and buffer.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n > 0 {
        return Ok(ReadOutcome::Data(n as usize));
    }
    if n == 0 {
        return Ok(ReadOutcome::Eof);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(ReadOutcome::WouldBlock),
        _ => Err(e),
    }
}

/// Raw fd of a socket.
pub fn fd_of(sock: &Socket) -> RawFd {
    sock.as_raw_fd()
}
