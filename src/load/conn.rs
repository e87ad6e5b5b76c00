//! Socket set-up and the request/response exchange shared by the TCP
//! workloads: non-blocking connect, the request bytes, and the matcher that
//! consumes response bytes (and verifies them) as they arrive.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
        /// Transaction 0's request, copied as is when not verifying.
        template: Vec<u8>,
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
    /// A pattern exchange of `req` bytes out and `resp` back.
    pub fn pattern(req: usize, resp: usize, verify: bool) -> Self {
        let mut template = vec![0u8; req];
        rr::fill_request(&mut template, 0);
        Self::Pattern {
            req,
            resp,
            verify,
            template,
        }
    }

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
            Self::Pattern {
                req, verify: true, ..
            } => {
                let start = out.len();
                out.resize(start + req, 0);
                rr::fill_request(&mut out[start..], seq);
            }
            // Without --verify every request is transaction 0's: a copy.
            Self::Pattern { template, .. } => out.extend_from_slice(template),
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

/// Starts a non-blocking connect, from `source` if given (the port is still
/// chosen at connect time: IP_BIND_ADDRESS_NO_PORT). Returns the socket and
/// whether it is already connected (possible on loopback).
pub fn start_connect(addr: &SocketAddr, source: Option<IpAddr>) -> io::Result<(Socket, bool)> {
    let sock = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    // Request/response: never let Nagle hold a request back.
    sock.set_tcp_nodelay(true)?;
    if let Some(ip) = source {
        let one: libc::c_int = 1;
        // SAFETY: valid fd and option value.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        sock.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    match sock.connect(&SockAddr::from(*addr)) {
        Ok(()) => Ok((sock, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok((sock, false)),
        Err(e) => Err(e),
    }
}

/// Source addresses to spread connects over: `n` addresses 127.0.0.2...
/// for an IPv4 loopback target (any 127/8 address reaches it), none
/// otherwise (the kernel picks). With one source address every connect
/// searches the same 28k ephemeral ports, most of them held by TIME_WAIT
/// sockets under tcp-crr, and that search became half the generator's CPU.
pub fn source_pool(target: &SocketAddr, n: usize) -> Vec<IpAddr> {
    match target.ip() {
        IpAddr::V4(v4) if v4.is_loopback() && n > 1 => (0..n)
            .map(|i| {
                IpAddr::V4(Ipv4Addr::new(
                    127,
                    0,
                    ((i + 2) >> 8) as u8,
                    ((i + 2) & 0xff) as u8,
                ))
            })
            .collect(),
        _ => Vec::new(),
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
