//! Readiness: the sockets a process itself owns, found by matching the
//! socket inodes of /proc/PID/fd against the rows of the process's own
//! /proc/PID/net/{tcp,tcp6,udp,udp6} (its network namespace), and against
//! its namespace's Unix listeners through sock_diag (UNIX_DIAG). Nothing here
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
    /// Its name: a path, or `@name` for an
    /// abstract one.
    pub name: String,
    /// Socket inode.
    pub inode: u64,
}

/// Every listening Unix stream socket `pid` itself holds, learned from
/// the kernel's socket table through sock_diag (UNIX_DIAG, in the
/// process's network namespace: abstract names are per namespace), each
/// checked against the process's own descriptors (`socket:[INODE]` in
/// /proc/PID/fd). Never from /proc/net/unix: the kernel prints a name's
/// bytes there as they are, so a target bound to a name holding a newline
/// could write a row of its own naming any socket (a root-only one) with
/// its inode; UNIX_DIAG carries the name as a length-delimited attribute.
/// Empty when the process is gone or its namespace cannot be entered.
pub fn owned_unix_listeners(pid: i32) -> Vec<UnixListener> {
    use crate::procfs::sock_diag::Diag;
    use crate::procfs::unix_diag;
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(mut diag) = Diag::open_in(pid) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let dumped = unix_diag::dump(&mut diag, 1 << unix_diag::LISTEN, |e| {
        if e.kind != unix_diag::STREAM || e.state != unix_diag::LISTEN {
            return;
        }
        if !inodes.contains(&e.inode) {
            return;
        }
        if let Some(name) = e.name_text().filter(|n| !n.is_empty()) {
            out.push(UnixListener {
                pid,
                name: through_fd(pid, name),
                inode: e.inode,
            });
        }
    });
    // A dump cut short is not the whole table: nothing rather than a part.
    if dumped.is_err() {
        return Vec::new();
    }
    out
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
    // Hex digits only: the words below are sliced by byte (a mutated
    // table's multi-byte character would fall across a boundary).
    if !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
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

    /// Found while /proc/net/unix was read: one socket of the namespace
    /// bound to a name that is not UTF-8 (any local user can) made the
    /// whole table unreadable as a String, and with it every Unix
    /// listener of every target.
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

    // Property tests: tables written the way the kernel writes them
    // (/proc/net/{tcp,udp}[6]: `tcp4_seq_show`, `tcp6_seq_show`) parse
    // back to their rows; mutated tables parse to rows or skip them, never
    // a panic. (Unix listeners come from UNIX_DIAG, whose parser has its
    // own properties in `procfs::unix_diag`.)

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

    #[test]
    fn an_address_with_a_multibyte_character_is_refused() {
        // 32 bytes, a 3-byte character across a word's boundary.
        assert_eq!(
            parse_addr("4F4DADF5B798B3\u{fffd}843CD783377FF66:0050"),
            None
        );
        assert_eq!(parse_addr("0100007\u{e9}:0050"), None);
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
    }
}
