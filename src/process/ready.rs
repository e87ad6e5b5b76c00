//! Readiness: the sockets a process itself owns, found by matching the
//! socket inodes of /proc/PID/fd against the rows of the process's own
//! /proc/PID/net/{tcp,tcp6,udp,udp6} (its network namespace). Nothing here
//! connects to anything: a port is learned from the kernel's tables, never
//! assumed, and never confirmed by whoever answers on it.

use std::collections::HashSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Transport protocol of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// A TCP socket in LISTEN state.
    TcpListen,
    /// A bound UDP socket.
    Udp,
}

/// A socket owned by a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedSocket {
    /// The process that holds it (one of them, when several do).
    pub pid: i32,
    /// What kind.
    pub proto: Proto,
    /// Local address and port.
    pub local: SocketAddr,
    /// Socket inode.
    pub inode: u64,
}

/// Socket inodes among the open descriptors of `pid` (empty when the
/// process is gone or unreadable).
pub fn socket_inodes(pid: i32) -> HashSet<u64> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let link = fs::read_link(e.path()).ok()?;
            let s = link.to_str()?;
            s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// Every TCP listener and bound UDP socket that `pid` itself holds.
pub fn owned_sockets(pid: i32) -> Vec<OwnedSocket> {
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (file, proto) in [
        ("tcp", Proto::TcpListen),
        ("tcp6", Proto::TcpListen),
        ("udp", Proto::Udp),
        ("udp6", Proto::Udp),
    ] {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{file}")) else {
            continue;
        };
        for row in parse_table(&text) {
            let wanted_state = match proto {
                Proto::TcpListen => row.state == 0x0A,
                Proto::Udp => row.local.port() != 0,
            };
            if wanted_state && inodes.contains(&row.inode) {
                out.push(OwnedSocket {
                    pid,
                    proto,
                    local: row.local,
                    inode: row.inode,
                });
            }
        }
    }
    out
}

/// Every TCP listener and bound UDP socket held by `root` or one of its
/// descendants (the tree a trace with follow-forks covers), each once: a
/// socket several processes share (a listener inherited across fork) is
/// listed under the first holder found, `root` first.
pub fn tree_sockets(root: i32) -> Vec<OwnedSocket> {
    let mut seen = HashSet::new();
    std::iter::once(root)
        .chain(crate::procfs::descendants(root))
        .flat_map(owned_sockets)
        .filter(|s| seen.insert(s.inode))
        .collect()
}

/// A listening Unix stream socket a process holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnixListener {
    /// The process that holds it (the first holder found).
    pub pid: i32,
    /// Its name as /proc/net/unix prints it: a path, or `@name` for an
    /// abstract one.
    pub name: String,
    /// Socket inode.
    pub inode: u64,
}

/// `__SO_ACCEPTCON` in /proc/net/unix's Flags column: the socket listens.
const SO_ACCEPTCON: u32 = 1 << 16;
/// `SOCK_STREAM` in its Type column.
const UNIX_STREAM: u16 = 1;

/// The listening stream sockets of a /proc/net/unix table, as (inode,
/// name); unnamed sockets and malformed rows are skipped. The name is the
/// rest of the row, so a path holding spaces is kept whole. (The kernel
/// prints a name's bytes as they are: one holding a newline cannot be told
/// from the rows after it; UNIX_DIAG, `procfs::unix_diag`, can.)
pub fn parse_unix_listeners(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let _num = f.next()?;
            let _refs = f.next()?;
            let _proto = f.next()?;
            let flags = u32::from_str_radix(f.next()?, 16).ok()?;
            let kind = u16::from_str_radix(f.next()?, 16).ok()?;
            let _state = f.next()?;
            let inode_text = f.next()?;
            let inode = inode_text.parse().ok()?;
            // The name starts after the inode column, one space apart
            // (af_unix.c `unix_seq_show`); a path may itself start with
            // spaces, so none is trimmed.
            let at = l.find(&format!(" {inode_text} "))? + inode_text.len() + 2;
            let name = l.get(at..)?.to_string();
            (flags & SO_ACCEPTCON != 0 && kind == UNIX_STREAM && !name.is_empty())
                .then_some((inode, name))
        })
        .collect()
}

/// Every listening Unix stream socket `pid` itself holds, read from its
/// own /proc/PID/net/unix (its network namespace: abstract names are per
/// namespace).
pub fn owned_unix_listeners(pid: i32) -> Vec<UnixListener> {
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    // Bytes, not a String: the kernel prints names as they are, and one
    // socket anywhere in the namespace named in bytes that are not UTF-8
    // must not hide the target's (its own name is compared as text).
    let Ok(bytes) = fs::read(format!("/proc/{pid}/net/unix")) else {
        return Vec::new();
    };
    parse_unix_listeners(&String::from_utf8_lossy(&bytes))
        .into_iter()
        .filter(|(inode, _)| inodes.contains(inode))
        .map(|(inode, name)| UnixListener {
            pid,
            name: through_fd(pid, name),
            inode,
        })
        .collect()
}

/// The real path of a socket bound through a directory descriptor
/// (`/proc/self/fd/N/name`, as `serve` binds to avoid following a planted
/// link; the kernel records the path as given): the directory that
/// descriptor of `pid` holds, joined with the name. Kept as printed when
/// the descriptor is gone.
pub fn through_fd(pid: i32, name: String) -> String {
    let Some(rest) = name.strip_prefix("/proc/self/fd/") else {
        return name;
    };
    let Some((fd, file)) = rest.split_once('/') else {
        return name;
    };
    if fd.parse::<u32>().is_err() || file.contains('/') {
        return name;
    }
    match fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
        Ok(dir) if dir.is_absolute() => dir.join(file).to_string_lossy().into_owned(),
        _ => name,
    }
}

/// Processes (pid, comm) outside `except` holding a Unix listener named
/// `name`: who else serves that socket. Names written out as one line.
pub fn unix_listeners_named(name: &str, except: &[i32]) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if except.contains(&pid) {
            continue;
        }
        if owned_unix_listeners(pid).iter().any(|l| l.name == name) {
            let comm = crate::procfs::comm(pid).unwrap_or_default();
            out.push((pid, crate::text::escape(&comm).into_owned()));
        }
    }
    out
}

/// One row of /proc/net/{tcp,udp}[6].
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    /// Local address.
    pub local: SocketAddr,
    /// Remote address (the any-address for listeners).
    pub remote: SocketAddr,
    /// Socket state (TCP: 0x0A is LISTEN).
    pub state: u8,
    /// Socket inode.
    pub inode: u64,
}

/// Parses a /proc/net/{tcp,tcp6,udp,udp6} table; malformed rows are
/// skipped.
pub fn parse_table(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = parse_addr(f.get(1)?)?;
            let remote = parse_addr(f.get(2)?)?;
            let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
            let inode = f.get(9)?.parse().ok()?;
            Some(Row {
                local,
                remote,
                state,
                inode,
            })
        })
        .collect()
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6): the address is
/// printed as 32-bit words in host byte order.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(
            u32::from_str_radix(addr, 16).ok()?.to_ne_bytes(),
        )),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                let w = u32::from_str_radix(&addr[i * 8..i * 8 + 8], 16).ok()?;
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    }
}

/// Picks the socket a load should be sent to, among those of `proto`:
/// loopback first, then the any-address (IPv4 before IPv6), then the
/// rest; and returns the address to connect to (the any-address becomes
/// the loopback address of its family).
pub fn choose(sockets: &[OwnedSocket], proto: Proto) -> Option<SocketAddr> {
    let rank = |a: &SocketAddr| -> u8 {
        let ip = a.ip();
        match (is_loopback(ip), ip.is_unspecified(), ip.is_ipv4()) {
            (true, _, true) => 0,
            (true, _, false) => 1,
            (_, true, true) => 2,
            (_, true, false) => 3,
            _ => 4,
        }
    };
    let best = sockets
        .iter()
        .filter(|s| s.proto == proto)
        .min_by_key(|s| (rank(&s.local), s.local.port()))?;
    let mut a = best.local;
    if a.ip().is_unspecified() {
        a.set_ip(if a.is_ipv4() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        });
    }
    Some(a)
}

/// True when `addr` is served by one of `sockets` of `proto` (same port,
/// and the same address or a socket bound to the any-address).
pub fn serves(sockets: &[OwnedSocket], proto: Proto, addr: SocketAddr) -> bool {
    sockets.iter().any(|s| {
        s.proto == proto
            && s.local.port() == addr.port()
            && (s.local.ip() == addr.ip()
                || (s.local.ip().is_unspecified() && s.local.is_ipv4() == addr.is_ipv4())
                || (s.local.ip().is_unspecified() && s.local.is_ipv6()))
    })
}

/// Processes (pid, comm) outside `except` whose sockets include a TCP
/// listener on `port`: who else is listening there. The names are for
/// messages, so written out as one line ([`crate::text::escape`]).
pub fn listeners_on_port(port: u16, proto: Proto, except: &[i32]) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if except.contains(&pid) {
            continue;
        }
        if owned_sockets(pid)
            .iter()
            .any(|s| s.proto == proto && s.local.port() == port)
        {
            let comm = crate::procfs::comm(pid).unwrap_or_default();
            out.push((pid, crate::text::escape(&comm).into_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn unix_table_keeps_named_stream_listeners_only() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 4242 /run/redis/redis.sock
0000000000000000: 00000002 00000000 00010000 0001 01 4243 @abstract name
0000000000000000: 00000003 00000000 00000000 0001 03 4244 /run/redis/redis.sock
0000000000000000: 00000002 00000000 00010000 0002 01 4245 /run/dgram.sock
0000000000000000: 00000002 00000000 00010000 0001 01 4246
";
        assert_eq!(
            parse_unix_listeners(table),
            vec![
                (4242, "/run/redis/redis.sock".to_string()),
                (4243, "@abstract name".to_string())
            ]
        );
    }

    #[test]
    fn a_socket_bound_through_a_directory_descriptor_is_named_by_its_real_path() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let d = fs::File::open(dir.path()).unwrap();
        let fd = d.as_raw_fd();
        let me = std::process::id() as i32;
        let name = format!("/proc/self/fd/{fd}/x.sock");
        let real = dir.path().canonicalize().unwrap().join("x.sock");
        assert_eq!(through_fd(me, name), real.to_str().unwrap());
        assert_eq!(through_fd(me, "/run/a.sock".into()), "/run/a.sock");
        // A descriptor that is not open: kept as printed.
        let gone = "/proc/self/fd/99999/x.sock".to_string();
        assert_eq!(through_fd(me, gone.clone()), gone);
    }

    #[test]
    fn finds_our_own_unix_listener() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let me = std::process::id() as i32;
        let found = owned_unix_listeners(me);
        assert!(
            found.iter().any(|l| l.name == path.to_str().unwrap()),
            "{found:?}"
        );
        assert!(unix_listeners_named(path.to_str().unwrap(), &[me]).is_empty());
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("127.0.0.2".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn parses_v4_and_v6_tables() {
        let rows = parse_table(TCP);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(rows[0].state, 0x0A);
        assert_eq!(rows[0].inode, 12345);
        assert_eq!(rows[1].state, 1);
        assert_eq!(rows[1].remote, "127.0.0.1:8080".parse().unwrap());
        let rows = parse_table(TCP6);
        assert_eq!(rows[0].local, "[::1]:8081".parse().unwrap());
        assert_eq!(rows[0].inode, 777);
    }

    #[test]
    fn finds_our_own_listener_and_prefers_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let any = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let me = std::process::id() as i32;
        let socks = owned_sockets(me);
        let addr = l.local_addr().unwrap();
        assert!(
            socks
                .iter()
                .any(|s| s.local == addr && s.proto == Proto::TcpListen),
            "{socks:?}"
        );
        let only_any: Vec<OwnedSocket> = socks
            .iter()
            .filter(|s| s.local.port() == any.local_addr().unwrap().port())
            .cloned()
            .collect();
        let chosen = choose(&only_any, Proto::TcpListen).unwrap();
        assert_eq!(chosen.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(serves(&socks, Proto::TcpListen, addr));
        assert!(serves(&socks, Proto::TcpListen, chosen));
        let mut other = addr;
        other.set_port(1);
        assert!(!serves(&socks, Proto::TcpListen, other));
    }

    /// Found while writing the properties below: one socket of the
    /// namespace bound to a name that is not UTF-8 (any local user can)
    /// made the whole of /proc/net/unix unreadable as a String, and with
    /// it every Unix listener of every target.
    #[test]
    fn a_name_that_is_not_utf8_hides_no_other_listener() {
        use std::os::linux::net::SocketAddrExt;
        let mut raw = b"sockscope-".to_vec();
        raw.push(0xff);
        raw.extend_from_slice(format!("-{}", std::process::id()).as_bytes());
        let odd_name = std::os::unix::net::SocketAddr::from_abstract_name(&raw).unwrap();
        let _odd = std::os::unix::net::UnixListener::bind_addr(&odd_name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ok.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let found = owned_unix_listeners(std::process::id() as i32);
        assert!(
            found.iter().any(|l| l.name == path.to_str().unwrap()),
            "{found:?}"
        );
    }

    /// A path that starts with a space is kept whole.
    #[test]
    fn a_path_starting_with_a_space_is_not_trimmed() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01     7  /tmp/x y
";
        assert_eq!(parse_unix_listeners(table), [(7, " /tmp/x y".to_string())]);
    }

    // Property tests: tables written the way the kernel writes them
    // (/proc/net/{tcp,udp}[6]: `tcp4_seq_show`, `tcp6_seq_show`;
    // /proc/net/unix: `unix_seq_show`) parse back to their rows; mutated
    // tables parse to rows or skip them, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    fn socket_addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::new(IpAddr::from(a), p)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(a, p)| SocketAddr::new(IpAddr::from(a), p)),
        ]
    }

    /// `%08X:%04X` of the address as the kernel's words in host order.
    fn hex_addr(a: SocketAddr) -> String {
        let words: Vec<u32> = match a.ip() {
            IpAddr::V4(v) => vec![u32::from_ne_bytes(v.octets())],
            IpAddr::V6(v) => v
                .octets()
                .chunks(4)
                .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
                .collect(),
        };
        let w: String = words.iter().map(|w| format!("{w:08X}")).collect();
        format!("{w}:{:04X}", a.port())
    }

    fn rows() -> impl Strategy<Value = Vec<(Row, u32, u32)>> {
        let row = (
            socket_addr(),
            socket_addr(),
            any::<u8>(),
            any::<u64>(),
            any::<(u32, u32)>(),
        )
            .prop_map(|(local, remote, state, inode, (tx, uid))| {
                // One family per table row.
                let remote = if local.is_ipv4() == remote.is_ipv4() {
                    remote
                } else {
                    SocketAddr::new(
                        if local.is_ipv4() {
                            IpAddr::from([0u8; 4])
                        } else {
                            IpAddr::from([0u8; 16])
                        },
                        remote.port(),
                    )
                };
                (
                    Row {
                        local,
                        remote,
                        state,
                        inode,
                    },
                    tx,
                    uid,
                )
            });
        prop::collection::vec(row, 0..6)
    }

    fn table(rows: &[(Row, u32, u32)]) -> String {
        let mut t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n".to_string();
        for (i, (r, tx, uid)) in rows.iter().enumerate() {
            t += &format!(
                "{i:4}: {} {} {:02X} {tx:08X}:00000000 00:00000000 00000000 {uid:5} 0 {} 1 ffff8e0a4c3b0000 100 0 0 10 0\n",
                hex_addr(r.local),
                hex_addr(r.remote),
                r.state,
                r.inode
            );
        }
        t
    }

    /// A Unix socket row: flags, type, state, inode, name.
    fn unix_rows() -> impl Strategy<Value = Vec<(u32, u16, u8, u64, Option<String>)>> {
        let name = prop_oneof![
            // Paths: any characters but a newline, spaces included.
            prop::collection::vec(
                any::<char>().prop_filter("no line end", |c| *c != '\n' && *c != '\r'),
                1..30
            )
            .prop_map(|v| v.into_iter().collect::<String>()),
            prop::collection::vec(prop::char::range('a', 'z'), 1..8)
                .prop_map(|v| format!("@{} x", v.into_iter().collect::<String>())),
        ];
        let row = (
            prop_oneof![Just(0x10000u32), Just(0u32), any::<u32>()],
            prop_oneof![Just(1u16), Just(2), Just(5)],
            any::<u8>(),
            any::<u64>(),
            prop::option::of(name),
        );
        prop::collection::vec(row, 0..6)
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// A table parses back to its rows; mutated, to rows or fewer.
        #[test]
        fn socket_tables_round_trip_and_mutations_never_panic(
            rs in rows(),
            ms in hostile::mutations(),
        ) {
            let t = table(&rs);
            let want: Vec<Row> = rs.into_iter().map(|(r, _, _)| r).collect();
            prop_assert_eq!(parse_table(&t), want);
            let _ = parse_table(&hostile::mutate_text(&t, &ms));
        }

        /// The named stream listeners of a Unix table, names whole
        /// (spaces and all); mutated, listeners or fewer, never a panic.
        #[test]
        fn unix_tables_round_trip_and_mutations_never_panic(
            rs in unix_rows(),
            ms in hostile::mutations(),
        ) {
            let mut t = "Num       RefCount Protocol Flags    Type St Inode Path\n".to_string();
            let mut want = Vec::new();
            for (flags, kind, state, inode, name) in &rs {
                t += &format!("0000000000000000: 00000002 00000000 {flags:08X} {kind:04X} {state:02X} {inode:5}");
                if let Some(n) = name {
                    t += &format!(" {n}");
                    if flags & SO_ACCEPTCON != 0 && *kind == UNIX_STREAM {
                        want.push((*inode, n.clone()));
                    }
                }
                t += "\n";
            }
            prop_assert_eq!(parse_unix_listeners(&t), want);
            let _ = parse_unix_listeners(&hostile::mutate_text(&t, &ms));
        }
    }
}
