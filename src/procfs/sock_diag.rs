//! The kernel's socket table through netlink sock_diag (inet_diag),
//! filtered by state (and optionally by port) in the kernel. /proc/net/tcp
//! prints every socket of the namespace: after a connect-heavy load that is
//! tens of thousands of TIME_WAIT rows and tens of milliseconds per read,
//! far too slow to sample while a load runs. A dump of the ESTABLISHED (or
//! LISTEN) sockets costs only what those sockets cost.
//!
//! Messages are built and parsed by the rust-netlink project's
//! `netlink-packet-sock-diag` (inet_diag_req_v2, inet_diag_msg and its
//! attributes); the socket is `netlink-sys`'s. A netlink socket stays bound
//! to the network namespace it was created in, so [`Diag::open_in`] creates
//! it in a short-lived thread that entered the target's namespace, and the
//! dumps made through it later (from any thread) describe that namespace.
//! Reads are bounded by a receive timeout and a datagram count.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{
    ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags,
};
use netlink_sys::Socket;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;

/// TCP_ESTABLISHED, as a state number (use `1 << state` in a mask).
pub const ESTABLISHED: u32 = 1;
/// TCP_SYN_RECV (with [`NEW_SYN_RECV`]: a connection in the SYN queue).
pub const SYN_RECV: u32 = 3;
/// TCP_TIME_WAIT.
pub const TIME_WAIT: u32 = 6;
/// TCP_LISTEN.
pub const LISTEN: u32 = 10;
/// TCP_NEW_SYN_RECV: how current kernels hold a request in the SYN queue.
pub const NEW_SYN_RECV: u32 = 12;
/// Every TCP state the kernel reports (bits 1..=12).
pub const ALL_STATES: u32 = 0x1ffe;

const NETLINK_HDR: usize = 16;
/// Netlink message types of a dump's replies.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// The request and reply type of every sock_diag family.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Longest wait for one reply datagram.
const RECV_TIMEOUT_S: i64 = 1;
/// Bounds one dump (a namespace with more sockets in the asked states
/// than this many datagrams' worth is cut, and the dump fails).
const MAX_DATAGRAMS: usize = 100_000;
/// Receive buffer: the kernel sizes dump datagrams at most 32 KiB.
const RECV_BUF: usize = 64 * 1024;

/// The name of TCP state `s` as ss(8) prints it.
pub fn state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW_SYN_RECV",
        _ => "UNKNOWN",
    }
}

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

/// One socket of a dump, with the attributes sockscope reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Local address.
    pub local: SocketAddr,
    /// Remote address (unspecified for a listener).
    pub remote: SocketAddr,
    /// State number (TCP states; UDP reports 7 unconnected, 1 connected).
    pub state: u8,
    /// Socket inode (0 for TIME_WAIT, SYN_RECV, and connections not yet
    /// accepted).
    pub inode: u64,
    /// The kernel's socket cookie: unique for the socket's lifetime.
    pub cookie: u64,
    /// Listener: the current accept queue. Otherwise the receive queue
    /// (bytes not yet read by the application).
    pub rqueue: u32,
    /// Listener: the backlog in effect. Otherwise the send queue (bytes
    /// not yet acknowledged by the peer).
    pub wqueue: u32,
    /// From `INET_DIAG_INFO` when asked for and the socket is a full TCP
    /// socket.
    pub tcp: Option<TcpInfo>,
    /// `SK_MEMINFO_DROPS` from `INET_DIAG_SKMEMINFO`, when asked for.
    pub drops: Option<u32>,
}

/// The fields of `struct tcp_info` sockscope uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_rtt`: smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// `tcpi_total_retrans`: segments retransmitted over the socket's life.
    pub total_retrans: u32,
}

/// Offset of `tcpi_rtt` in `struct tcp_info` (8 one-byte fields, then
/// u32s: rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans,
/// fackets, four last_* times, pmtu, rcv_ssthresh, rtt).
const TCPI_RTT: usize = 68;
/// Offset of `tcpi_total_retrans` (after rttvar, snd_ssthresh, snd_cwnd,
/// advmss, reordering, rcv_rtt, rcv_space).
const TCPI_TOTAL_RETRANS: usize = 100;

/// Reads the two fields from the raw attribute. The layout up to
/// `tcpi_total_retrans` has been fixed since Linux 2.6; later kernels only
/// append. The crate's typed `TcpInfo` (feature `rich_nlas`) needs the
/// whole structure of Linux 5.4+ and fails the message on shorter ones,
/// so the raw bytes are read here instead.
pub fn parse_tcp_info(b: &[u8]) -> Option<TcpInfo> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
    Some(TcpInfo {
        rtt_us: u32_at(TCPI_RTT)?,
        total_retrans: u32_at(TCPI_TOTAL_RETRANS)?,
    })
}

/// What to dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// `libc::IPPROTO_TCP` or `libc::IPPROTO_UDP`.
    pub protocol: u8,
    /// `libc::AF_INET` or `libc::AF_INET6`.
    pub family: u8,
    /// Mask of `1 << state`.
    pub states: u32,
    /// Ask for tcp_info (`INET_DIAG_INFO`).
    pub tcp_info: bool,
    /// Ask for socket memory (`INET_DIAG_SKMEMINFO`), for its drop count.
    pub meminfo: bool,
    /// Only sockets with this local port (0: any); the kernel filters.
    pub sport: u16,
    /// Only sockets with this remote port (0: any); the kernel filters.
    pub dport: u16,
}

impl Query {
    /// TCP sockets of `family` in `states`, no attributes, no port filter.
    pub fn tcp(family: u8, states: u32) -> Query {
        Query {
            protocol: libc::IPPROTO_TCP as u8,
            family,
            states,
            tcp_info: false,
            meminfo: false,
            sport: 0,
            dport: 0,
        }
    }
}

/// Both address families, IPv4 first.
pub const FAMILIES: [u8; 2] = [libc::AF_INET as u8, libc::AF_INET6 as u8];

/// A sock_diag netlink socket, bound to the network namespace it was
/// opened in.
pub struct Diag {
    sock: Socket,
    buf: Vec<u8>,
    seq: u32,
}

impl Diag {
    /// A socket in this thread's network namespace.
    pub fn open() -> io::Result<Diag> {
        let sock = Socket::new(NETLINK_SOCK_DIAG)?;
        let tv = libc::timeval {
            tv_sec: RECV_TIMEOUT_S,
            tv_usec: 0,
        };
        // SAFETY: valid option value of the size passed, on an open socket.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Diag {
            sock,
            buf: vec![0; RECV_BUF],
            seq: 0,
        })
    }

    /// A socket in the network namespace of `pid`. Where that is not this
    /// process's, the socket is created by a short-lived thread that
    /// entered it with setns(2) (CAP_SYS_ADMIN); the socket keeps
    /// describing that namespace after the thread is gone.
    pub fn open_in(pid: i32) -> io::Result<Diag> {
        let theirs = format!("/proc/{pid}/ns/net");
        let id = |p: &str| std::fs::read_link(p).map(|l| l.to_string_lossy().into_owned());
        let target =
            id(&theirs).map_err(|e| io::Error::new(e.kind(), format!("reading {theirs}: {e}")))?;
        if id("/proc/thread-self/ns/net").is_ok_and(|own| own == target) {
            return Diag::open();
        }
        let file = std::fs::File::open(&theirs)
            .map_err(|e| io::Error::new(e.kind(), format!("opening {theirs}: {e}")))?;
        std::thread::Builder::new()
            .name("sockscope-netns".into())
            .spawn(move || {
                crate::signals::keep_off_this_thread();
                // SAFETY: setns on this thread only, with an open nsfs file.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    let e = io::Error::last_os_error();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("entering the network namespace of pid {pid} ({target}): {e}"),
                    ));
                }
                Diag::open()
            })?
            .join()
            .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }

    /// Dumps the sockets `q` selects, calling `f` for each. A message the
    /// crate cannot parse is skipped; a netlink error fails the dump.
    pub fn dump(&mut self, q: &Query, mut f: impl FnMut(Entry)) -> io::Result<()> {
        self.request(q)?;
        for _ in 0..MAX_DATAGRAMS {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            let got = &self.buf[..n.min(self.buf.len())];
            if messages(got, |m| Ok(handle(m, &mut f)?.is_some()))? {
                return Ok(());
            }
        }
        Err(io::Error::other("sock_diag dump did not end"))
    }

    /// Dumps with a request this module does not build (`req`: the
    /// family's request structure, e.g. `unix_diag_req`), calling `f` with
    /// the payload of each reply message (the family's message and its
    /// attributes, unparsed). Bounded like [`Diag::dump`]; a netlink error,
    /// or a dump that ends in one, fails it.
    pub fn dump_raw(&mut self, req: &[u8], mut f: impl FnMut(&[u8])) -> io::Result<()> {
        let mut out = Vec::with_capacity(NETLINK_HDR + req.len());
        out.extend_from_slice(&((NETLINK_HDR + req.len()) as u32).to_ne_bytes());
        out.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        out.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        self.seq = self.seq.wrapping_add(1);
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(req);
        if self.sock.send(&out, 0)? != out.len() {
            return Err(io::Error::other("short sock_diag request"));
        }
        for _ in 0..MAX_DATAGRAMS {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            let got = &self.buf[..n.min(self.buf.len())];
            if messages(got, |m| raw_message(m, &mut f))? {
                return Ok(());
            }
        }
        Err(io::Error::other("sock_diag dump did not end"))
    }

    fn request(&mut self, q: &Query) -> io::Result<()> {
        let mut ext = ExtensionFlags::empty();
        if q.tcp_info {
            ext |= ExtensionFlags::INFO;
        }
        if q.meminfo {
            ext |= ExtensionFlags::SKMEMINFO;
        }
        let mut socket_id = if q.family == libc::AF_INET6 as u8 {
            SocketId::new_v6()
        } else {
            SocketId::new_v4()
        };
        socket_id.source_port = q.sport;
        socket_id.destination_port = q.dport;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        self.seq = self.seq.wrapping_add(1);
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family: q.family,
                protocol: q.protocol,
                extensions: ext,
                states: StateFlags::from_bits_retain(q.states),
                socket_id,
            })
            .into(),
        );
        msg.finalize();
        let mut out = vec![0; msg.buffer_len()];
        msg.serialize(&mut out);
        let n = self.sock.send(&out, 0)?;
        if n != out.len() {
            return Err(io::Error::other("short sock_diag request"));
        }
        Ok(())
    }
}

/// Walks the netlink messages of one reply datagram, calling `on` with
/// each (its header included, within bounds, at least a header long);
/// true once `on` says the dump ended. A length below a header's or past
/// the datagram is an error; a trailing fragment shorter than a header is
/// ignored.
fn messages(mut rest: &[u8], mut on: impl FnMut(&[u8]) -> io::Result<bool>) -> io::Result<bool> {
    while rest.len() >= NETLINK_HDR {
        let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        if len < NETLINK_HDR || len > rest.len() {
            return Err(io::Error::other("malformed sock_diag reply"));
        }
        if on(&rest[..len])? {
            return Ok(true);
        }
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    Ok(false)
}

/// One netlink message of a raw dump, `m` within bounds and at least a
/// header long: true at its end (NLMSG_DONE), an error for NLMSG_ERROR or
/// a DONE that carries one, otherwise `f` gets the payload.
fn raw_message(m: &[u8], f: &mut impl FnMut(&[u8])) -> io::Result<bool> {
    let kind = u16::from_ne_bytes([m[4], m[5]]);
    let payload = &m[NETLINK_HDR..];
    let errno = || {
        payload
            .get(..4)
            .map_or(0, |b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
    };
    match kind {
        NLMSG_DONE => match errno() {
            e if e < 0 => Err(io::Error::from_raw_os_error(e.saturating_neg())),
            _ => Ok(true),
        },
        NLMSG_ERROR => match errno() {
            0 => Ok(false),
            e => Err(io::Error::from_raw_os_error(e.saturating_abs())),
        },
        SOCK_DIAG_BY_FAMILY => {
            f(payload);
            Ok(false)
        }
        _ => Ok(false),
    }
}

/// One netlink message of a dump: Some(()) at its end.
fn handle(m: &[u8], f: &mut impl FnMut(Entry)) -> io::Result<Option<()>> {
    let Ok(msg) = NetlinkMessage::<SockDiagMessage>::deserialize(m) else {
        return Ok(None);
    };
    match msg.payload {
        NetlinkPayload::Done(_) => Ok(Some(())),
        NetlinkPayload::Error(e) => Err(e.to_io()),
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
            f(entry(&r));
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The fields of one inet_diag_msg and its attributes.
pub fn entry(r: &InetResponse) -> Entry {
    let h = &r.header;
    let id = &h.socket_id;
    let mut e = Entry {
        local: SocketAddr::new(id.source_address, id.source_port),
        remote: SocketAddr::new(id.destination_address, id.destination_port),
        state: h.state,
        inode: u64::from(h.inode),
        cookie: u64::from_ne_bytes(id.cookie),
        rqueue: h.recv_queue,
        wqueue: h.send_queue,
        tcp: None,
        drops: None,
    };
    for nla in &r.nlas {
        match nla {
            Nla::TcpInfo(raw) => e.tcp = parse_tcp_info(raw),
            Nla::MemInfo(m) => e.drops = Some(m.drops),
            _ => {}
        }
    }
    e
}

/// Every IPv4 and IPv6 TCP socket of this network namespace whose state
/// is in `states` (a mask of `1 << state`).
pub fn tcp(states: u32) -> io::Result<Vec<TcpSocket>> {
    let mut d = Diag::open()?;
    let mut out = Vec::new();
    for family in FAMILIES {
        d.dump(&Query::tcp(family, states), |e| {
            out.push(TcpSocket {
                local: e.local,
                remote: e.remote,
                state: e.state,
                inode: e.inode,
            })
        })?;
    }
    Ok(out)
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

    #[test]
    fn a_listener_reports_its_backlog_and_queue_and_ports_filter_in_the_kernel() {
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        l.listen(3).unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let _c = std::net::TcpStream::connect(addr).unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut d = Diag::open().unwrap();
        let mut seen = Vec::new();
        let mut q = Query::tcp(libc::AF_INET as u8, 1 << LISTEN | 1 << ESTABLISHED);
        q.sport = addr.port();
        q.tcp_info = true;
        d.dump(&q, |e| seen.push(e)).unwrap();
        assert!(
            seen.iter().all(|e| e.local.port() == addr.port()),
            "{seen:?}"
        );
        assert!(!seen.iter().any(|e| e.local == other.local_addr().unwrap()));
        let listener = seen.iter().find(|e| e.state as u32 == LISTEN).unwrap();
        assert_eq!(listener.wqueue, 3, "the backlog");
        // The handshake completes asynchronously on loopback; it is done
        // by the time connect returns.
        assert_eq!(listener.rqueue, 1, "one connection waits to be accepted");
        let conn = seen.iter().find(|e| e.state as u32 == ESTABLISHED).unwrap();
        let info = conn.tcp.expect("tcp_info of a full socket");
        assert_eq!(info.total_retrans, 0);
        assert_ne!(conn.cookie, 0);
    }

    #[test]
    fn a_raw_dump_ends_at_done_and_fails_on_an_error_reply() {
        let m = |kind: u16, payload: &[u8]| {
            let mut v = ((NETLINK_HDR + payload.len()) as u32)
                .to_ne_bytes()
                .to_vec();
            v.extend_from_slice(&kind.to_ne_bytes());
            v.extend_from_slice(&[0; 10]);
            v.extend_from_slice(payload);
            v
        };
        let mut got = Vec::new();
        let mut f = |p: &[u8]| got.push(p.to_vec());
        assert!(!raw_message(&m(SOCK_DIAG_BY_FAMILY, &[1, 2]), &mut f).unwrap());
        assert!(
            !raw_message(&m(99, &[3]), &mut f).unwrap(),
            "another type: skipped"
        );
        assert!(raw_message(&m(NLMSG_DONE, &0i32.to_ne_bytes()), &mut f).unwrap());
        assert!(raw_message(&m(NLMSG_DONE, &[]), &mut f).unwrap());
        let e = raw_message(&m(NLMSG_DONE, &(-libc::EPERM).to_ne_bytes()), &mut f).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let e = raw_message(&m(NLMSG_ERROR, &(-libc::ENOENT).to_ne_bytes()), &mut f).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(got, [vec![1, 2]]);
    }

    #[test]
    fn tcp_info_fields_at_their_offsets_and_short_buffers_refused() {
        let mut b = vec![0u8; 104];
        b[TCPI_RTT..TCPI_RTT + 4].copy_from_slice(&1234u32.to_ne_bytes());
        b[TCPI_TOTAL_RETRANS..TCPI_TOTAL_RETRANS + 4].copy_from_slice(&7u32.to_ne_bytes());
        assert_eq!(
            parse_tcp_info(&b),
            Some(TcpInfo {
                rtt_us: 1234,
                total_retrans: 7
            })
        );
        assert_eq!(parse_tcp_info(&b[..103]), None);
        assert_eq!(parse_tcp_info(&[]), None);
    }

    #[test]
    fn a_reply_built_in_code_parses_and_a_garbage_one_is_skipped() {
        // inet_diag_msg: family, state, timer, retrans, sockid (sport,
        // dport big-endian, src[16], dst[16], if, cookie[8]), expires,
        // rqueue, wqueue, uid, inode; then an INET_DIAG_INFO attribute.
        let mut m = vec![libc::AF_INET as u8, 10, 0, 0];
        m.extend_from_slice(&8080u16.to_be_bytes());
        m.extend_from_slice(&0u16.to_be_bytes());
        m.extend_from_slice(&[127, 0, 0, 1]);
        m.extend_from_slice(&[0; 12]);
        m.extend_from_slice(&[0; 16]);
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&42u64.to_ne_bytes());
        for v in [0u32, 5, 128, 0, 9999] {
            m.extend_from_slice(&v.to_ne_bytes());
        }
        let mut info = vec![0u8; 104];
        info[TCPI_TOTAL_RETRANS..TCPI_TOTAL_RETRANS + 4].copy_from_slice(&3u32.to_ne_bytes());
        m.extend_from_slice(&((4 + info.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes()); // INET_DIAG_INFO
        m.extend_from_slice(&info);
        let mut msg = ((NETLINK_HDR + m.len()) as u32).to_ne_bytes().to_vec();
        msg.extend_from_slice(&20u16.to_ne_bytes()); // SOCK_DIAG_BY_FAMILY
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&m);
        let mut got = Vec::new();
        assert_eq!(handle(&msg, &mut |e| got.push(e)).unwrap(), None);
        let e = &got[0];
        assert_eq!(e.local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(
            (e.state, e.rqueue, e.wqueue, e.inode, e.cookie),
            (10, 5, 128, 9999, 42)
        );
        assert_eq!(e.tcp.unwrap().total_retrans, 3);
        // A truncated message is skipped, not a panic.
        let mut short = msg.clone();
        short.truncate(40);
        short[0..4].copy_from_slice(&40u32.to_ne_bytes());
        got.clear();
        assert_eq!(handle(&short, &mut |e| got.push(e)).unwrap(), None);
        assert!(got.is_empty());
    }

    // Property tests: inet_diag replies from a reference encoder (IPv4
    // and IPv6 sockets, with tcp_info and skmeminfo attributes or not,
    // several per datagram, then NLMSG_DONE) read back as the entries
    // encoded; mutated datagrams are walked, parsed or refused, never a
    // panic (the netlink crates' parsers included).

    use crate::hostile;
    use proptest::prelude::*;
    use std::net::IpAddr;

    fn nl(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = ((NETLINK_HDR + payload.len()) as u32)
            .to_ne_bytes()
            .to_vec();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::new(IpAddr::from(a), p)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(a, p)| SocketAddr::new(IpAddr::from(a), p)),
        ]
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (
            addr(),
            addr(),
            any::<(u8, u32, u64, u32, u32)>(),
            any::<Option<(u32, u32)>>(),
            any::<Option<u32>>(),
        )
            .prop_map(
                |(local, remote, (state, inode, cookie, rqueue, wqueue), tcp, drops)| {
                    // Both ends of one family.
                    let remote = match (local, remote) {
                        (SocketAddr::V4(_), SocketAddr::V6(r)) => {
                            SocketAddr::new(IpAddr::from([0, 0, 0, 1]), r.port())
                        }
                        (SocketAddr::V6(_), SocketAddr::V4(r)) => {
                            SocketAddr::new(IpAddr::from([0u8; 16]), r.port())
                        }
                        _ => remote,
                    };
                    Entry {
                        local,
                        remote,
                        state,
                        inode: u64::from(inode),
                        cookie,
                        rqueue,
                        wqueue,
                        tcp: tcp.map(|(rtt_us, total_retrans)| TcpInfo {
                            rtt_us,
                            total_retrans,
                        }),
                        drops,
                    }
                },
            )
    }

    /// An inet_diag_msg and its attributes, as the kernel writes them.
    fn encode(e: &Entry) -> Vec<u8> {
        let family = if e.local.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let mut m = vec![family as u8, e.state, 0, 0];
        m.extend_from_slice(&e.local.port().to_be_bytes());
        m.extend_from_slice(&e.remote.port().to_be_bytes());
        for a in [e.local.ip(), e.remote.ip()] {
            let mut b = [0u8; 16];
            match a {
                IpAddr::V4(v) => b[..4].copy_from_slice(&v.octets()),
                IpAddr::V6(v) => b.copy_from_slice(&v.octets()),
            }
            m.extend_from_slice(&b);
        }
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&e.cookie.to_ne_bytes());
        for v in [0u32, e.rqueue, e.wqueue, 0, e.inode as u32] {
            m.extend_from_slice(&v.to_ne_bytes());
        }
        let mut attr = |kind: u16, data: &[u8]| {
            m.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(data);
            while m.len() % 4 != 0 {
                m.push(0);
            }
        };
        if let Some(t) = e.tcp {
            let mut info = vec![0u8; 232];
            info[TCPI_RTT..TCPI_RTT + 4].copy_from_slice(&t.rtt_us.to_ne_bytes());
            info[TCPI_TOTAL_RETRANS..TCPI_TOTAL_RETRANS + 4]
                .copy_from_slice(&t.total_retrans.to_ne_bytes());
            attr(2, &info); // INET_DIAG_INFO
        }
        if let Some(d) = e.drops {
            let mut mem = vec![0u8; 36];
            mem[32..].copy_from_slice(&d.to_ne_bytes());
            attr(7, &mem); // INET_DIAG_SKMEMINFO
        }
        nl(SOCK_DIAG_BY_FAMILY, &m)
    }

    fn walk(datagram: &[u8]) -> io::Result<(Vec<Entry>, bool)> {
        let mut got = Vec::new();
        let done = messages(datagram, |m| Ok(handle(m, &mut |e| got.push(e))?.is_some()))?;
        Ok((got, done))
    }

    #[test]
    fn a_done_or_error_carrying_the_lowest_errno_is_an_error_not_a_panic() {
        // Found by mutated_datagrams_never_panic: -i32::MIN overflows.
        for kind in [NLMSG_DONE, NLMSG_ERROR] {
            let m = nl(kind, &i32::MIN.to_ne_bytes());
            assert!(raw_message(&m, &mut |_| {}).is_err(), "kind {kind}");
        }
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// A datagram of entries then DONE reads back as the entries; a
        /// datagram cut anywhere yields the entries before the cut (or a
        /// malformed-reply error), never a wrong one.
        #[test]
        fn entries_round_trip_through_a_datagram(es in prop::collection::vec(entry(), 0..4)) {
            let mut d: Vec<u8> = es.iter().flat_map(encode).collect();
            d.extend(nl(NLMSG_DONE, &0i32.to_ne_bytes()));
            let (got, done) = walk(&d).unwrap();
            prop_assert_eq!(&got, &es);
            prop_assert!(done);
            for cut in 0..d.len() {
                if let Ok((got, _)) = walk(&d[..cut]) {
                    prop_assert!(es.starts_with(&got), "cut at {}", cut);
                }
            }
        }

        /// Mutated datagrams, and the raw walk of unix_diag dumps over
        /// them: entries, a skipped message or an error; never a panic.
        #[test]
        fn mutated_datagrams_never_panic(
            es in prop::collection::vec(entry(), 1..4),
            ms in hostile::mutations(),
            noise in prop::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut d: Vec<u8> = es.iter().flat_map(encode).collect();
            d.extend(nl(NLMSG_DONE, &0i32.to_ne_bytes()));
            let bad = hostile::mutate(&d, &ms);
            for input in [&bad, &noise] {
                let _ = walk(input);
                let _ = messages(input, |m| raw_message(m, &mut |p| {
                    let _ = super::super::unix_diag::parse(p);
                }));
            }
        }
    }
}
