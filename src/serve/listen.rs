//! Binding listening sockets: one, or several sharing a port through
//! SO_REUSEPORT (one per event loop, so the kernel spreads connections over
//! the loops without a shared accept queue).

use std::io;
use std::net::{SocketAddr, TcpListener};

use anyhow::{Context, Result, anyhow};
use socket2::{Domain, Protocol, Socket, Type};

/// Listen backlog; the kernel caps it at net.core.somaxconn.
pub const BACKLOG: i32 = 1024;

/// Binds `count` non-blocking listeners on `addr`. With port 0 the first
/// gets an ephemeral port and the rest bind that port. Returns the
/// listeners and the address they share (from getsockname).
///
/// SO_REUSEPORT would let a process of the same user that already listens
/// on an explicit port with SO_REUSEPORT silently share our connections, so
/// for an explicit port a probe bind without it runs first: if anyone owns
/// the port, this fails with "address in use" instead of sharing it.
pub fn bind_tcp(addr: SocketAddr, count: usize) -> Result<(Vec<TcpListener>, SocketAddr)> {
    let shared = count > 1;
    if shared && addr.port() != 0 {
        let probe = new_socket(addr, false)?;
        probe.bind(&addr.into()).map_err(|e| bind_error(addr, e))?;
    }
    let first = new_socket(addr, shared)?;
    first.bind(&addr.into()).map_err(|e| bind_error(addr, e))?;
    let bound = first
        .local_addr()
        .context("getsockname on the listener")?
        .as_socket()
        .context("the listener has no IP address")?;
    let mut out = Vec::with_capacity(count);
    out.push(first);
    for _ in 1..count {
        let s = new_socket(addr, true)?;
        s.bind(&bound.into())
            .map_err(|e| bind_error(bound, e))
            .context("binding another SO_REUSEPORT listener on the same port")?;
        out.push(s);
    }
    let mut listeners = Vec::with_capacity(count);
    for s in out {
        s.listen(BACKLOG)
            .with_context(|| format!("listen on {bound}"))?;
        s.set_nonblocking(true)
            .context("making the listener non-blocking")?;
        listeners.push(TcpListener::from(s));
    }
    Ok((listeners, bound))
}

fn new_socket(addr: SocketAddr, reuse_port: bool) -> Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .context("creating a TCP socket")?;
    // SO_REUSEADDR only lets us bind over TIME_WAIT leftovers of an earlier
    // run; Linux never lets it share a port someone is listening on.
    s.set_reuse_address(true).context("setting SO_REUSEADDR")?;
    if reuse_port {
        s.set_reuse_port(true).context("setting SO_REUSEPORT")?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true).context("setting IPV6_V6ONLY")?;
    }
    Ok(s)
}

fn bind_error(addr: SocketAddr, e: io::Error) -> anyhow::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EADDRINUSE) => " (another socket is using that port)",
        Some(libc::EADDRNOTAVAIL) => " (no local interface has that address)",
        Some(libc::EACCES) => " (ports below 1024 need CAP_NET_BIND_SERVICE)",
        _ => "",
    };
    anyhow!("cannot listen on {addr}: {e}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuseport_group_shares_one_port_and_refuses_a_taken_one() {
        let (ls, bound) = bind_tcp("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        assert_eq!(ls.len(), 3);
        assert_ne!(bound.port(), 0);
        for l in &ls {
            assert_eq!(l.local_addr().unwrap(), bound);
        }
        let err = bind_tcp(bound, 2).unwrap_err().to_string();
        assert!(err.contains("in use"), "{err}");
        let err = bind_tcp(bound, 1).unwrap_err().to_string();
        assert!(err.contains("in use"), "{err}");
    }
}
