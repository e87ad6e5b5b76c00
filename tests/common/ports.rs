//! Loopback ports for test servers, without the race of handing a server a
//! port that was free a moment ago: a server that can bind port 0 does so
//! and is asked where it listens ([`listening`]); one that cannot is
//! started through [`on_free_port`], which tries another port when that
//! one was taken meanwhile. A port that must refuse connections is held
//! bound by the test ([`Closed`]), so nothing else can take it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// How many ports [`on_free_port`] tries before failing the test.
const TRIES: usize = 5;

/// A loopback TCP port free at this moment (bound and released). Another
/// process may take it before the server binds: hand it to a server only
/// through [`on_free_port`].
pub fn free_tcp() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback UDP port free at this moment; as [`free_tcp`].
pub fn free_udp() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts something on a free port: `start(port)` returns what it started,
/// or None when the port turned out to be taken (the server said so, or
/// exited before listening); then another port is tried, up to 5. Any
/// other failure is `start`'s to report (panic).
pub fn on_free_port<T>(what: &str, start: impl FnMut(u16) -> Option<T>) -> T {
    retry(what, free_tcp, start)
}

/// As [`on_free_port`], for a server that listens on a UDP port (and may
/// bind the TCP port of the same number too).
pub fn on_free_udp_port<T>(what: &str, start: impl FnMut(u16) -> Option<T>) -> T {
    retry(what, free_udp, start)
}

fn retry<T>(what: &str, free: fn() -> u16, mut start: impl FnMut(u16) -> Option<T>) -> T {
    for _ in 0..TRIES {
        let port = free();
        if let Some(t) = start(port) {
            return t;
        }
        eprintln!("{what}: port {port} was taken before it bound; another port");
    }
    panic!("{what}: every one of {TRIES} free ports was taken before it bound");
}

/// Waits (10 s at most) until 127.0.0.1:`port` accepts a connection; Err
/// with the child's status when it exits first (a server that could not
/// bind: the port was taken).
pub fn await_tcp(child: &mut Child, port: u16) -> Result<(), ExitStatus> {
    let end = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = child.try_wait().unwrap() {
            return Err(st);
        }
        assert!(
            Instant::now() < end,
            "pid {} did not listen on {port} within 10 s",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The TCP address `child` listens on, once it does (it was told to bind
/// port 0): waits up to `limit`, and fails if the child exits first or
/// ever listens on more than one.
pub fn listening(child: &mut Child, limit: Duration) -> SocketAddr {
    let end = Instant::now() + limit;
    loop {
        let mut addrs = listening_of(child.id() as i32);
        match addrs.len() {
            0 => {}
            1 => return addrs.pop().unwrap(),
            _ => panic!("pid {} listens on several ports: {addrs:?}", child.id()),
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("pid {} exited ({st}) before it listened", child.id());
        }
        assert!(
            Instant::now() < end,
            "pid {} did not listen within {limit:?}",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The IPv4 TCP addresses process `pid` listens on now: its sockets'
/// inodes (/proc/PID/fd) found among /proc/net/tcp's listeners.
pub fn listening_of(pid: i32) -> Vec<SocketAddr> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: Vec<u64> = fds
        .flatten()
        .filter_map(|e| {
            let link = std::fs::read_link(e.path()).ok()?;
            let s = link.to_str()?;
            s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect();
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    tcp.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // local_address, st (0A: LISTEN), inode.
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if *state != "0A" || !inodes.contains(&inode.parse().ok()?) {
                return None;
            }
            let (ip, port) = local.split_once(':')?;
            // The address is the kernel's u32 printed in hex: on this
            // (little-endian) machine, the octets reversed.
            let ip = Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.swap_bytes());
            Some(SocketAddr::from((ip, u16::from_str_radix(port, 16).ok()?)))
        })
        .collect()
}

/// A loopback port held by this test and served by nobody: a TCP socket
/// bound and never listening (a connection to it is refused), or a UDP
/// socket bound and connected to port 1 (a datagram from anyone else finds
/// no socket, so the sender gets ICMP port unreachable). Nothing else can
/// bind the port while this lives.
pub struct Closed {
    _sock: socket2::Socket,
    /// The port.
    pub port: u16,
}

impl Closed {
    /// A TCP port that refuses connections.
    pub fn tcp() -> Self {
        Self::bound(socket2::Type::STREAM)
    }

    /// A UDP port that answers every datagram with port unreachable.
    pub fn udp() -> Self {
        let c = Self::bound(socket2::Type::DGRAM);
        let one = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        c._sock.connect(&one.into()).unwrap();
        c
    }

    fn bound(ty: socket2::Type) -> Self {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, ty, None).unwrap();
        sock.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
            .unwrap();
        let port = sock.local_addr().unwrap().as_socket().unwrap().port();
        Self { _sock: sock, port }
    }

    /// 127.0.0.1:PORT.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}
