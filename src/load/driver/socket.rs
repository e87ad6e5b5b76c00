//! The stream socket plumbing of the driver: the one non-blocking connect
//! (TCP from a pool of loopback source addresses, or a Unix-domain stream
//! socket), SO_LINGER 0, and the non-blocking send/recv the connection
//! state machines use.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Protocol, SockAddr, Socket, Type};

use crate::endpoint::Endpoint;

/// Starts a non-blocking connect to `addr` (TCP or a Unix stream socket),
/// from `source` if given (TCP only; the port is still chosen at connect
/// time: IP_BIND_ADDRESS_NO_PORT). Returns the socket and whether it is
/// already connected (possible on loopback, and usual for a Unix socket).
pub fn start_connect(addr: &Endpoint, source: Option<IpAddr>) -> io::Result<(Socket, bool)> {
    let unix = addr.is_unix();
    let sock = Socket::new(
        addr.domain(),
        Type::STREAM.nonblocking().cloexec(),
        (!unix).then_some(Protocol::TCP),
    )?;
    if !unix {
        // Request/response: never let Nagle hold a request back.
        sock.set_tcp_nodelay(true)?;
    }
    if let Some(ip) = source.filter(|_| !unix) {
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
    let to = addr.connect_addr()?;
    match sock.connect(&to.addr) {
        Ok(()) => Ok((sock, true)),
        // A Unix listener whose backlog is full answers EAGAIN to a
        // non-blocking connect: the connect fails like a refused one.
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok((sock, false)),
        Err(e) => {
            if e.raw_os_error() == Some(libc::ECONNREFUSED) {
                to.refused();
            }
            Err(e)
        }
    }
}

/// Source addresses to spread connects over: `n` addresses 127.0.0.2...
/// for an IPv4 loopback target (any 127/8 address reaches it), none
/// otherwise (the kernel picks). With one source address every connect
/// searches the same 28k ephemeral ports, most of them held by TIME_WAIT
/// sockets under tcp-crr, and that search became half the generator's CPU.
/// A Unix socket has no source address: none.
pub fn source_pool(target: &Endpoint, n: usize) -> Vec<IpAddr> {
    match target.inet().map(|a| a.ip()) {
        Some(IpAddr::V4(v4)) if v4.is_loopback() && n > 1 => (0..n)
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
