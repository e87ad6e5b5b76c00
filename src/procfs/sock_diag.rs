//! The kernel's TCP socket table through netlink sock_diag (inet_diag),
//! filtered by state in the kernel. /proc/net/tcp prints every socket of the
//! namespace: after a connect-heavy load that is tens of thousands of
//! TIME_WAIT rows and tens of milliseconds per read, far too slow to sample
//! while a load runs. A dump of the ESTABLISHED (or LISTEN) sockets costs
//! only what those sockets cost. The dump is of this process's network
//! namespace. Reads are bounded by a receive timeout.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// TCP_ESTABLISHED, as a state number (use `1 << state` in a mask).
pub const ESTABLISHED: u32 = 1;
/// TCP_LISTEN.
pub const LISTEN: u32 = 10;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
const REQ_LEN: usize = NLMSG_HDR + 56;
const DIAG_MSG_LEN: usize = 72;
/// Longest wait for one reply datagram.
const RECV_TIMEOUT_S: i64 = 1;
/// Bounds one dump (a namespace with more sockets in the asked states
/// than this many datagrams' worth is cut, and the dump fails).
const MAX_DATAGRAMS: usize = 100_000;

/// One TCP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address.
    pub local: SocketAddr,
    /// Remote address (unspecified for a listener).
    pub remote: SocketAddr,
    /// TCP state number (1 ESTABLISHED, 10 LISTEN, ...).
    pub state: u8,
    /// Socket inode (0 while a connection waits in an accept queue).
    pub inode: u64,
}

/// Every IPv4 and IPv6 TCP socket of this network namespace whose state
/// is in `states` (a mask of `1 << state`).
pub fn tcp(states: u32) -> io::Result<Vec<TcpSocket>> {
    let fd = open()?;
    let mut out = Vec::new();
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        request(&fd, family, states)?;
        receive(&fd, &mut out)?;
    }
    Ok(out)
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor returned by the kernel, owned here only.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let tv = libc::timeval {
        tv_sec: RECV_TIMEOUT_S,
        tv_usec: 0,
    };
    // SAFETY: valid option value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn request(fd: &OwnedFd, family: u8, states: u32) -> io::Result<()> {
    let mut req = [0u8; REQ_LEN];
    req[0..4].copy_from_slice(&(REQ_LEN as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext, pad, states, then a zeroed
    // inet_diag_sockid (no filter on addresses).
    req[NLMSG_HDR] = family;
    req[NLMSG_HDR + 1] = libc::IPPROTO_TCP as u8;
    req[NLMSG_HDR + 4..NLMSG_HDR + 8].copy_from_slice(&states.to_ne_bytes());
    // SAFETY: a zeroed sockaddr_nl addresses the kernel (pid 0).
    let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: buffer and address are valid for the lengths passed.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if n != req.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn receive(fd: &OwnedFd, out: &mut Vec<TcpSocket>) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..MAX_DATAGRAMS {
        // SAFETY: the kernel writes at most buf.len() bytes.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut rest = &buf[..n as usize];
        while rest.len() >= NLMSG_HDR {
            let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
            let ty = u16::from_ne_bytes(rest[4..6].try_into().expect("2 bytes"));
            if len < NLMSG_HDR || len > rest.len() {
                return Err(io::Error::other("malformed sock_diag reply"));
            }
            match ty {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let code = rest
                        .get(NLMSG_HDR..NLMSG_HDR + 4)
                        .map_or(0, |b| i32::from_ne_bytes(b.try_into().expect("4 bytes")));
                    return Err(io::Error::from_raw_os_error(-code));
                }
                SOCK_DIAG_BY_FAMILY => out.extend(parse(&rest[NLMSG_HDR..len])),
                _ => {}
            }
            rest = &rest[((len + 3) & !3).min(rest.len())..];
        }
    }
    Err(io::Error::other("sock_diag dump did not end"))
}

/// One inet_diag_msg.
fn parse(m: &[u8]) -> Option<TcpSocket> {
    if m.len() < DIAG_MSG_LEN {
        return None;
    }
    let family = m[0];
    let addr = |off: usize| -> Option<IpAddr> {
        let b = &m[off..off + 16];
        Some(if family == libc::AF_INET as u8 {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        } else {
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?))
        })
    };
    // inet_diag_sockid at 4: sport, dport (big-endian), src[16], dst[16].
    let sport = u16::from_be_bytes([m[4], m[5]]);
    let dport = u16::from_be_bytes([m[6], m[7]]);
    Some(TcpSocket {
        local: SocketAddr::new(addr(8)?, sport),
        remote: SocketAddr::new(addr(24)?, dport),
        state: m[1],
        inode: u64::from(u32::from_ne_bytes(m[68..72].try_into().ok()?)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_a_connection_and_its_listener_with_inodes() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(addr).unwrap();
        let socks = tcp(1 << ESTABLISHED | 1 << LISTEN).unwrap();
        let listener = socks
            .iter()
            .find(|s| s.local == addr && s.state as u32 == LISTEN)
            .expect("the listener");
        assert!(listener.inode > 0);
        // Not accepted yet: the server end has no inode.
        let server_end = socks
            .iter()
            .find(|s| s.local == addr && s.remote == c.local_addr().unwrap())
            .expect("the server end");
        assert_eq!(server_end.inode, 0);
        let _accepted = l.accept().unwrap();
        let socks = tcp(1 << ESTABLISHED).unwrap();
        let server_end = socks
            .iter()
            .find(|s| s.local == addr && s.remote == c.local_addr().unwrap())
            .unwrap();
        assert!(server_end.inode > 0);
        assert!(socks.iter().all(|s| s.state as u32 == ESTABLISHED));
    }
}
