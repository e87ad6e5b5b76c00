//! The kernel's Unix-domain socket table through netlink sock_diag
//! (UNIX_DIAG): each socket's type, state, inode, name, peer and queues,
//! in one dump of a network namespace (Unix sockets are per namespace,
//! like TCP ones). The dump goes through [`Diag`], so a socket opened with
//! [`Diag::open_in`] describes the target's namespace.
//!
//! The request and the replies are built and parsed here: the
//! rust-netlink crate parses `unix_diag_msg` too, but fails a whole
//! message on one attribute it cannot read; here a malformed attribute is
//! skipped and the message's fixed fields are kept.
//!
//! What the queues mean (net/unix/diag.c `sk_diag_show_rqlen`): for a
//! listener, `rqueue` is the connections waiting in its accept queue and
//! `wqueue` its backlog limit (`sk_max_ack_backlog`: listen()'s argument
//! capped by net.core.somaxconn); the kernel refuses (or makes wait) a
//! connect once the queue holds more than the backlog
//! (`unix_recvq_full`), so a full queue holds backlog + 1. For a stream
//! socket `rqueue` is the bytes queued to be read and `wqueue` the bytes
//! (with their buffers' overhead) it sent that the peer has not read yet;
//! for a datagram socket `rqueue` is the length of the next datagram only.

use std::io;

use super::sock_diag::Diag;

/// SOCK_STREAM, as `udiag_type`.
pub const STREAM: u8 = libc::SOCK_STREAM as u8;
/// SOCK_DGRAM.
pub const DGRAM: u8 = libc::SOCK_DGRAM as u8;
/// SOCK_SEQPACKET.
pub const SEQPACKET: u8 = libc::SOCK_SEQPACKET as u8;
/// A connected socket's state (TCP_ESTABLISHED).
pub const ESTABLISHED: u8 = 1;
/// An unconnected socket's state (TCP_CLOSE).
pub const CLOSE: u8 = 7;
/// A listener's state (TCP_LISTEN).
pub const LISTEN: u8 = 10;
/// Every state a Unix socket takes (`1 << state`).
pub const ALL_STATES: u32 = 1 << ESTABLISHED | 1 << CLOSE | 1 << LISTEN;

/// `udiag_show` bits.
const SHOW_NAME: u32 = 0x01;
const SHOW_PEER: u32 = 0x04;
const SHOW_RQLEN: u32 = 0x10;
/// Attribute types.
const ATTR_NAME: u16 = 0;
const ATTR_PEER: u16 = 2;
const ATTR_RQLEN: u16 = 4;
/// `nla_type` bits that are flags, not the type.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// `struct unix_diag_msg`: family, type, state, pad, inode, cookie[2].
const MSG_LEN: usize = 16;
/// An attribute's header: length, type.
const ATTR_HDR: usize = 4;

/// One Unix socket of a dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnixEntry {
    /// [`STREAM`], [`DGRAM`] or [`SEQPACKET`].
    pub kind: u8,
    /// [`ESTABLISHED`], [`CLOSE`] or [`LISTEN`].
    pub state: u8,
    /// Socket inode (as /proc/PID/fd shows `socket:[INODE]`).
    pub inode: u64,
    /// The kernel's socket cookie: unique for the socket's lifetime.
    pub cookie: u64,
    /// The bound name: a path, or an abstract name whose first byte is
    /// NUL. A connection accepted from a listener carries the listener's
    /// name. None: unbound (or the attribute was unreadable).
    pub name: Option<Vec<u8>>,
    /// The peer's inode, for a connected socket.
    pub peer: Option<u64>,
    /// The queues, when reported (see the module's doc for what they are).
    pub queues: Option<Queues>,
}

/// `struct unix_diag_rqlen`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queues {
    /// Listener: connections waiting to be accepted. Otherwise bytes
    /// queued to be read (datagram: the next datagram's length).
    pub rqueue: u32,
    /// Listener: the backlog limit. Otherwise bytes sent and not yet read
    /// by the peer.
    pub wqueue: u32,
}

impl UnixEntry {
    /// The name as text: a path as it is, an abstract name as `@name`
    /// (as ss(8) shows it); bytes that are not UTF-8 replaced.
    pub fn name_text(&self) -> Option<String> {
        let n = self.name.as_deref()?;
        Some(match n.split_first() {
            Some((0, rest)) => format!("@{}", String::from_utf8_lossy(rest)),
            _ => String::from_utf8_lossy(n).into_owned(),
        })
    }
}

/// The `unix_diag_req` of a dump of the sockets in `states` with their
/// name, peer and queues.
fn request(states: u32) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[0] = libc::AF_UNIX as u8;
    r[4..8].copy_from_slice(&states.to_ne_bytes());
    // udiag_ino and the cookie stay 0: a dump, not one socket.
    r[12..16].copy_from_slice(&(SHOW_NAME | SHOW_PEER | SHOW_RQLEN).to_ne_bytes());
    r
}

/// Dumps the Unix sockets of `diag`'s namespace whose state is in
/// `states` (a mask of `1 << state`), calling `f` for each. A message too
/// short to be one is skipped.
pub fn dump(diag: &mut Diag, states: u32, mut f: impl FnMut(UnixEntry)) -> io::Result<()> {
    diag.dump_raw(&request(states), |m| {
        if let Some(e) = parse(m) {
            f(e)
        }
    })
}

/// One `unix_diag_msg` and its attributes. None when the message is
/// shorter than its fixed part or not AF_UNIX; an attribute that is too
/// short for its type is skipped, and one whose length runs past the
/// message ends the walk (the fields read so far are kept).
pub fn parse(m: &[u8]) -> Option<UnixEntry> {
    if m.len() < MSG_LEN || m[0] != libc::AF_UNIX as u8 {
        return None;
    }
    let u32_at = |b: &[u8], o: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
    };
    let mut e = UnixEntry {
        kind: m[1],
        state: m[2],
        inode: u64::from(u32_at(m, 4)?),
        cookie: u64::from(u32_at(m, 8)?) | u64::from(u32_at(m, 12)?) << 32,
        ..UnixEntry::default()
    };
    let mut rest = &m[MSG_LEN..];
    while rest.len() >= ATTR_HDR {
        let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK;
        if len < ATTR_HDR || len > rest.len() {
            break;
        }
        let data = &rest[ATTR_HDR..len];
        match kind {
            ATTR_NAME if !data.is_empty() => {
                // A path's name ends in its NUL (the kernel counts it in
                // the address length); an abstract one starts with NUL and
                // is taken whole.
                let name = if data[0] == 0 {
                    data
                } else {
                    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                    &data[..end]
                };
                e.name = Some(name.to_vec());
            }
            ATTR_PEER => e.peer = u32_at(data, 0).map(u64::from),
            ATTR_RQLEN => {
                if let (Some(rqueue), Some(wqueue)) = (u32_at(data, 0), u32_at(data, 4)) {
                    e.queues = Some(Queues { rqueue, wqueue });
                }
            }
            _ => {}
        }
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};

    fn msg(kind: u8, state: u8, inode: u32, cookie: u64) -> Vec<u8> {
        let mut m = vec![libc::AF_UNIX as u8, kind, state, 0];
        m.extend_from_slice(&inode.to_ne_bytes());
        m.extend_from_slice(&(cookie as u32).to_ne_bytes());
        m.extend_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
        m
    }

    fn attr(m: &mut Vec<u8>, kind: u16, data: &[u8]) {
        m.extend_from_slice(&((ATTR_HDR + data.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(data);
        while m.len() % 4 != 0 {
            m.push(0);
        }
    }

    fn rqlen(r: u32, w: u32) -> Vec<u8> {
        [r.to_ne_bytes(), w.to_ne_bytes()].concat()
    }

    #[test]
    fn a_listener_with_its_name_and_queues_parses() {
        let mut m = msg(STREAM, LISTEN, 4242, 0x1_0000_0007);
        attr(&mut m, ATTR_NAME, b"/run/x.sock\0");
        attr(&mut m, 7, &[1, 2, 3]); // an attribute not read: skipped
        attr(&mut m, ATTR_RQLEN, &rqlen(3, 511));
        let e = parse(&m).unwrap();
        assert_eq!(
            (e.kind, e.state, e.inode, e.cookie),
            (STREAM, LISTEN, 4242, 0x1_0000_0007)
        );
        assert_eq!(e.name_text().as_deref(), Some("/run/x.sock"));
        assert_eq!(
            e.queues,
            Some(Queues {
                rqueue: 3,
                wqueue: 511
            })
        );
        assert_eq!(e.peer, None);
    }

    #[test]
    fn an_abstract_name_and_a_peer_and_a_nested_flag_parse() {
        let mut m = msg(SEQPACKET, ESTABLISHED, 9, 1);
        attr(&mut m, ATTR_NAME, b"\0bus\0x");
        // NLA_F_NESTED / NLA_F_NET_BYTEORDER set on the type: still PEER.
        attr(&mut m, ATTR_PEER | 0x8000, &77u32.to_ne_bytes());
        let e = parse(&m).unwrap();
        assert_eq!(e.name.as_deref(), Some(&b"\0bus\0x"[..]));
        assert_eq!(e.name_text().as_deref(), Some("@bus\u{0}x"));
        assert_eq!(e.peer, Some(77));
        assert_eq!(e.queues, None);
    }

    #[test]
    fn malformed_attributes_are_skipped_and_short_messages_refused() {
        // Too short for their types: skipped, the later ones still read.
        let mut m = msg(STREAM, ESTABLISHED, 5, 2);
        attr(&mut m, ATTR_RQLEN, &[1, 2, 3, 4]);
        attr(&mut m, ATTR_PEER, &[1]);
        attr(&mut m, ATTR_NAME, b"");
        attr(&mut m, ATTR_NAME, b"/a\0");
        let e = parse(&m).unwrap();
        assert_eq!((e.queues, e.peer), (None, None));
        assert_eq!(e.name_text().as_deref(), Some("/a"));
        // A length past the end stops the walk; what came before stays.
        let mut m = msg(STREAM, LISTEN, 6, 3);
        attr(&mut m, ATTR_RQLEN, &rqlen(1, 2));
        let at = m.len();
        attr(&mut m, ATTR_NAME, b"/b\0");
        m[at..at + 2].copy_from_slice(&200u16.to_ne_bytes());
        let e = parse(&m).unwrap();
        assert_eq!(e.queues.unwrap().wqueue, 2);
        assert_eq!(e.name, None);
        // A length below the header's: the walk ends, no endless loop.
        let mut m = msg(STREAM, LISTEN, 6, 3);
        m.extend_from_slice(&[2, 0, 4, 0, 9, 9, 9, 9]);
        assert_eq!(parse(&m).unwrap().queues, None);
        // A trailing fragment shorter than a header is ignored.
        let mut m = msg(DGRAM, CLOSE, 8, 4);
        m.extend_from_slice(&[8, 0]);
        assert_eq!(parse(&m).unwrap().inode, 8);
        // Shorter than the fixed part, or another family: not a socket.
        assert_eq!(parse(&msg(STREAM, LISTEN, 1, 1)[..15]), None);
        assert_eq!(parse(&[]), None);
        let mut other = msg(STREAM, LISTEN, 1, 1);
        other[0] = libc::AF_INET as u8;
        assert_eq!(parse(&other), None);
        // Every truncation of a good message parses or is refused: no panic.
        let mut m = msg(STREAM, LISTEN, 1, 1);
        attr(&mut m, ATTR_NAME, b"/c\0");
        attr(&mut m, ATTR_RQLEN, &rqlen(1, 2));
        attr(&mut m, ATTR_PEER, &1u32.to_ne_bytes());
        for n in 0..m.len() {
            let _ = parse(&m[..n]);
        }
    }

    // Property tests: entries from a reference model, encoded as the
    // kernel does (attributes in any order, unknown ones among them, flag
    // bits on the type), parse back whole; cut anywhere, the fixed part
    // and every attribute before the cut survive; mutated, never a panic.

    use crate::hostile;
    use proptest::prelude::*;
    use proptest::sample::Index;

    /// A bound name: a path (no NUL; the kernel sends it NUL-terminated)
    /// or an abstract name (a NUL, then any bytes).
    fn name() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(1..=255u8, 1..100),
            prop::collection::vec(any::<u8>(), 0..100).prop_map(|mut v| {
                v.insert(0, 0);
                v
            }),
        ]
    }

    fn entry() -> impl Strategy<Value = UnixEntry> {
        (
            any::<(u8, u8, u32, u64)>(),
            prop::option::of(name()),
            any::<Option<u32>>(),
            any::<Option<(u32, u32)>>(),
        )
            .prop_map(
                |((kind, state, inode, cookie), name, peer, queues)| UnixEntry {
                    kind,
                    state,
                    inode: u64::from(inode),
                    cookie,
                    name,
                    peer: peer.map(u64::from),
                    queues: queues.map(|(rqueue, wqueue)| Queues { rqueue, wqueue }),
                },
            )
    }

    /// The attributes of `e` (and unknown ones), in the order `order`
    /// draws; the type's flag bits set from `flags`.
    fn encode(
        e: &UnixEntry,
        extra: &[(u16, Vec<u8>)],
        order: &[Index],
        flags: u16,
    ) -> (Vec<u8>, Vec<(u16, usize)>) {
        let mut attrs: Vec<(u16, Vec<u8>)> = extra
            .iter()
            .map(|(t, d)| (*t % 13 + 5, d.clone()))
            .collect();
        if let Some(n) = &e.name {
            let mut d = n.clone();
            if n.first() != Some(&0) {
                d.push(0);
            }
            attrs.push((ATTR_NAME, d));
        }
        if let Some(p) = e.peer {
            attrs.push((ATTR_PEER, (p as u32).to_ne_bytes().to_vec()));
        }
        if let Some(q) = e.queues {
            attrs.push((ATTR_RQLEN, rqlen(q.rqueue, q.wqueue)));
        }
        for (i, o) in order.iter().enumerate() {
            let n = attrs.len();
            if n > 1 {
                attrs.swap(i % n, o.index(n));
            }
        }
        let mut m = msg(e.kind, e.state, e.inode as u32, e.cookie);
        let mut ends = Vec::new();
        for (t, d) in &attrs {
            attr(&mut m, *t | (flags & 0xc000), d);
            // Where the attribute's own bytes end (before its padding).
            ends.push((*t, m.len() - (4 - (ATTR_HDR + d.len()) % 4) % 4));
        }
        (m, ends)
    }

    fn extra() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
        prop::collection::vec(
            (any::<u16>(), prop::collection::vec(any::<u8>(), 0..12)),
            0..3,
        )
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// An entry round-trips, and every cut keeps the fixed part and
        /// exactly the attributes wholly before it.
        #[test]
        fn entries_round_trip_and_cuts_keep_what_came_whole(
            e in entry(),
            x in extra(),
            order in prop::collection::vec(any::<Index>(), 0..6),
            flags in any::<u16>(),
        ) {
            let (m, ends) = encode(&e, &x, &order, flags);
            prop_assert_eq!(parse(&m), Some(e.clone()));
            for cut in 0..m.len() {
                let got = parse(&m[..cut]);
                if cut < MSG_LEN {
                    prop_assert_eq!(got, None);
                    continue;
                }
                let mut want = UnixEntry { name: None, peer: None, queues: None, ..e.clone() };
                for &(t, _) in ends.iter().filter(|(_, end)| *end <= cut) {
                    match t {
                        ATTR_NAME => want.name = e.name.clone(),
                        ATTR_PEER => want.peer = e.peer,
                        ATTR_RQLEN => want.queues = e.queues,
                        _ => {}
                    }
                }
                prop_assert_eq!(got, Some(want), "cut at {}", cut);
            }
        }

        /// Mutated messages and any bytes: an entry or None, never a
        /// panic; an entry read with its fixed part intact keeps it.
        #[test]
        fn mutated_messages_never_panic(
            e in entry(),
            x in extra(),
            ms in hostile::mutations(),
            noise in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let (m, _) = encode(&e, &x, &[], 0);
            let bad = hostile::mutate(&m, &ms);
            if let Some(got) = parse(&bad) {
                if bad.get(..MSG_LEN) == m.get(..MSG_LEN) {
                    prop_assert_eq!((got.inode, got.cookie), (e.inode, e.cookie));
                }
            }
            let _ = parse(&noise);
            let mut family = noise.clone();
            if let Some(b) = family.first_mut() {
                *b = libc::AF_UNIX as u8;
            }
            let _ = parse(&family);
        }
    }

    #[test]
    fn the_request_asks_for_a_dump_of_names_peers_and_queues() {
        let r = request(1 << LISTEN);
        assert_eq!(r[0], libc::AF_UNIX as u8);
        assert_eq!(u32::from_ne_bytes(r[4..8].try_into().unwrap()), 1 << 10);
        assert_eq!(r[8..12], [0; 4], "no inode: a dump");
        assert_eq!(u32::from_ne_bytes(r[12..16].try_into().unwrap()), 0x15);
    }

    fn inode_of(fd: &impl std::os::fd::AsRawFd) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let s = link.to_str().unwrap();
        s["socket:[".len()..s.len() - 1].parse().unwrap()
    }

    /// The kernel's own replies: a listener with backlog 2 and three
    /// connections queued (its limit: backlog + 1), an accepted
    /// connection with unread bytes and its peer, and a datagram socket.
    #[test]
    fn the_kernel_reports_a_full_listener_a_connection_and_a_datagram_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sock");
        let l = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        l.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
        l.listen(2).unwrap();
        let l = UnixListener::from(std::os::fd::OwnedFd::from(l));
        let mut c1 = UnixStream::connect(&path).unwrap();
        let (a1, _) = l.accept().unwrap();
        let _queued: Vec<UnixStream> = (0..3)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        c1.write_all(b"hello").unwrap();
        let d = UnixDatagram::unbound().unwrap();
        let dpath = dir.path().join("d.sock");
        let r = UnixDatagram::bind(&dpath).unwrap();
        d.send_to(b"12345678", &dpath).unwrap();
        let mut diag = Diag::open().unwrap();
        let mut all = Vec::new();
        dump(&mut diag, ALL_STATES, |e| all.push(e)).unwrap();
        let find = |ino: u64| all.iter().find(|e| e.inode == ino).cloned();
        let li = find(inode_of(&l)).expect("the listener");
        assert_eq!((li.kind, li.state), (STREAM, LISTEN));
        assert_eq!(li.name_text(), Some(path.to_str().unwrap().to_string()));
        assert_eq!(
            li.queues,
            Some(Queues {
                rqueue: 3,
                wqueue: 2
            })
        );
        let acc = find(inode_of(&a1)).expect("the accepted connection");
        assert_eq!(acc.state, ESTABLISHED);
        assert_eq!(
            acc.name, li.name,
            "an accepted connection has the listener's name"
        );
        assert_eq!(acc.peer, Some(inode_of(&c1)));
        assert_eq!(acc.queues.unwrap().rqueue, 5);
        let client = find(inode_of(&c1)).unwrap();
        assert_eq!(client.name, None);
        assert!(client.queues.unwrap().wqueue >= 5, "{client:?}");
        let dg = find(inode_of(&r)).expect("the datagram socket");
        assert_eq!((dg.kind, dg.state), (DGRAM, CLOSE));
        assert_eq!(dg.queues.unwrap().rqueue, 8);
        // The state mask filters in the kernel.
        let mut listeners = Vec::new();
        dump(&mut diag, 1 << LISTEN, |e| listeners.push(e)).unwrap();
        assert!(listeners.iter().all(|e| e.state == LISTEN));
        assert!(listeners.iter().any(|e| e.inode == li.inode));
    }
}
