//! The ports a target serves on, as the anatomy programs key them: a TCP
//! listener or an unconnected bound UDP socket, in the network namespace of
//! the process that holds it (the inode number of /proc/PID/ns/net). Found
//! by matching the socket inodes of /proc/PID/fd against the process's own
//! /proc/PID/net tables, as readiness does; nothing connects anywhere.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;

use super::counts::Transport;
use crate::process::ready::{parse_table, socket_inodes};

/// One served port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServedPort {
    /// Network namespace (nsfs inode number).
    pub netns: u32,
    /// Local port.
    pub port: u16,
    /// TCP listener or UDP socket.
    pub transport: Transport,
}

/// The network namespace `pid` is in (None once it is gone).
pub fn netns_of(pid: i32) -> Option<u32> {
    fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino() as u32)
}

/// A Unix stream listener the target holds, numbered as the programs key
/// its connections' statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedUnix {
    /// Its socket inode (how the programs find it).
    pub inode: u64,
    /// Its name: a path, or `@name` for an abstract one.
    pub name: String,
    /// Its statistics' key: transport Unix, its number as the port.
    pub served: ServedPort,
}

/// Every Unix stream listener the processes `pids` hold (learned through
/// sock_diag, each checked against the holder's descriptors: never from
/// /proc/net/unix), each once, numbered from 0; at most `max`.
pub fn served_unix(pids: &[i32], max: usize) -> Vec<ServedUnix> {
    let mut out: Vec<ServedUnix> = Vec::new();
    for &pid in pids {
        let Some(netns) = netns_of(pid) else { continue };
        for l in crate::process::ready::owned_unix_listeners(pid) {
            if out.len() >= max || out.iter().any(|u| u.inode == l.inode) {
                continue;
            }
            let port = out.len() as u16;
            out.push(ServedUnix {
                inode: l.inode,
                name: l.name,
                served: ServedPort {
                    netns,
                    port,
                    transport: Transport::Unix,
                },
            });
        }
    }
    out
}

/// Every port the processes `pids` serve on, each once.
pub fn served_ports(pids: &[i32]) -> Vec<ServedPort> {
    let mut out = BTreeSet::new();
    for &pid in pids {
        let Some(netns) = netns_of(pid) else { continue };
        let inodes = socket_inodes(pid);
        if inodes.is_empty() {
            continue;
        }
        for (file, transport) in [
            ("tcp", Transport::Tcp),
            ("tcp6", Transport::Tcp),
            ("udp", Transport::Udp),
            ("udp6", Transport::Udp),
        ] {
            let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{file}")) else {
                continue;
            };
            for row in parse_table(&text) {
                if !inodes.contains(&row.inode) || row.local.port() == 0 {
                    continue;
                }
                let serves = match transport {
                    Transport::Tcp => row.state == 0x0A,
                    // Unconnected: a server's socket, not a client's.
                    Transport::Udp => row.remote.port() == 0,
                    Transport::Unix => false,
                };
                if serves {
                    out.insert(ServedPort {
                        netns,
                        port: row.local.port(),
                        transport,
                    });
                }
            }
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    #[test]
    fn finds_this_process_listeners_and_unconnected_udp_only() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.connect(u.local_addr().unwrap()).unwrap();
        let _s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let me = std::process::id() as i32;
        let ports = served_ports(&[me]);
        let has =
            |port: u16, t: Transport| ports.iter().any(|p| p.port == port && p.transport == t);
        assert!(has(l.local_addr().unwrap().port(), Transport::Tcp));
        assert!(has(u.local_addr().unwrap().port(), Transport::Udp));
        assert!(!has(c.local_addr().unwrap().port(), Transport::Udp));
        assert!(ports.iter().all(|p| Some(p.netns) == netns_of(me)));
    }

    #[test]
    fn finds_this_process_unix_listeners_numbered_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.sock");
        let b = dir.path().join("b.sock");
        let _la = std::os::unix::net::UnixListener::bind(&a).unwrap();
        let _lb = std::os::unix::net::UnixListener::bind(&b).unwrap();
        let me = std::process::id() as i32;
        let got = served_unix(&[me, me], 64);
        let names: Vec<&str> = got.iter().map(|u| u.name.as_str()).collect();
        assert!(names.contains(&a.to_str().unwrap()), "{got:?}");
        assert!(names.contains(&b.to_str().unwrap()), "{got:?}");
        for (i, u) in got.iter().enumerate() {
            assert_eq!(u.served.port, i as u16);
            assert_eq!(u.served.transport, Transport::Unix);
        }
        assert_eq!(served_unix(&[me], 1).len(), 1);
    }
}
