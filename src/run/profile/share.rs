//! Which part of the load the traced tree served, when processes outside it
//! serve the same address: a worker among several that share one listening
//! socket (forked after listen), or listeners of their own on the same port
//! (SO_REUSEPORT). Dividing one worker's syscalls by every worker's
//! transactions would be wrong by the number of workers, so profile finds
//! those processes and estimates the tree's share:
//!
//! - tcp-rr: the load counts the responses on each of its connections, and
//!   while it runs this module samples which process holds each
//!   connection's server end: the established socket (sock_diag, or
//!   /proc/PID/net/tcp where that is unavailable) whose remote end is the
//!   connection's local address, its inode looked up in the tree's
//!   /proc/PID/fd. The share is the tree's part of those responses;
//!   connections never seen accepted are settled by the tree's accept count
//!   when it can, else the share is unknown (unless they are a sliver);
//! - tcp-crr, or tcp-rr without a usable sample: the connections the tree
//!   accepted (successful accept/accept4 in its own trace) over the load's
//!   connects;
//! - udp: unknown (a datagram's receiver cannot be seen from outside).
//!
//! Nothing here connects to anything or touches another process's sockets:
//! it reads /proc, dumps the kernel's socket table, and asks the
//! generator's own sockets their addresses.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::load::ConnTally;
use crate::process::ready::{self, OwnedSocket, Proto};
use crate::procfs::sock_diag;
use crate::report::load::LoadReport;
use crate::report::profile::{Attribution, ConnectionOwners, Sharer};
use crate::report::trace::TraceReport;
use crate::signals::StopFlag;

/// First pause between samples; it doubles up to [`MAX_PAUSE`], so a short
/// run is still seen once its connections are up.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between samples.
const MAX_PAUSE: Duration = Duration::from_millis(100);
/// TCP state ESTABLISHED.
const ESTABLISHED: u8 = sock_diag::ESTABLISHED as u8;
/// TCP state LISTEN.
const LISTEN: u8 = sock_diag::LISTEN as u8;

/// `root` and its descendants: the tree a trace with follow-forks covers.
pub fn tree_of(root: i32) -> Vec<i32> {
    std::iter::once(root)
        .chain(crate::procfs::descendants(root))
        .collect()
}

/// Processes outside `tree` that serve `addr` for `proto`: holders of one
/// of the tree's own sockets that serve it (`same_socket`), or of another
/// socket serving it (`reuseport`). The sockets serving `addr` are read
/// once from the kernel's table (the tree root's network namespace); each
/// other process's descriptors are then only matched against them.
pub fn sharers(tree: &[i32], addr: SocketAddr, proto: Proto) -> Vec<Sharer> {
    let Some(&root) = tree.first() else {
        return Vec::new();
    };
    let serving = serving_inodes(root, addr, proto);
    if serving.is_empty() {
        return Vec::new();
    }
    let held: HashSet<u64> = tree.iter().flat_map(|p| ready::socket_inodes(*p)).collect();
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || tree.contains(&pid) {
            continue;
        }
        let theirs: Vec<u64> = ready::socket_inodes(pid)
            .into_iter()
            .filter(|i| serving.contains(i))
            .collect();
        if theirs.is_empty() {
            continue;
        }
        let how = if theirs.iter().any(|i| held.contains(i)) {
            "same_socket"
        } else {
            "reuseport"
        };
        out.push(Sharer {
            pid,
            comm: crate::procfs::comm(pid).unwrap_or_default(),
            how: how.into(),
        });
    }
    out.sort_by_key(|s| s.pid);
    out
}

/// Inodes of the TCP listeners (or bound UDP sockets) in `root`'s network
/// namespace that serve `addr`.
fn serving_inodes(root: i32, addr: SocketAddr, proto: Proto) -> HashSet<u64> {
    let serves = |local: SocketAddr, inode: u64| {
        let sock = OwnedSocket {
            pid: root,
            proto,
            local,
            inode,
        };
        inode != 0 && ready::serves(std::slice::from_ref(&sock), proto, addr)
    };
    if proto == Proto::TcpListen {
        return tcp_sockets(root, LISTEN)
            .into_iter()
            .filter(|s| serves(s.local, s.inode))
            .map(|s| s.inode)
            .collect();
    }
    let mut out = HashSet::new();
    for file in ["udp", "udp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{root}/net/{file}")) else {
            continue;
        };
        for row in ready::parse_table(&text) {
            if row.local.port() != 0 && serves(row.local, row.inode) {
                out.insert(row.inode);
            }
        }
    }
    out
}

/// Adds the sharers in `more` that `list` lacks (a worker started during
/// the run).
pub fn merge_sharers(list: &mut Vec<Sharer>, more: Vec<Sharer>) {
    for s in more {
        if !list.iter().any(|x| x.pid == s.pid) {
            list.push(s);
        }
    }
    list.sort_by_key(|s| s.pid);
}

/// Who holds the server end of one of the load's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// A process of the traced tree.
    Tree,
    /// Someone else.
    Other,
}

/// Who held the server end of each of the load's connections, by the
/// connection's local (generator-side) address, as sampled while it ran.
#[derive(Debug, Default)]
pub struct Owners {
    by_local: HashMap<SocketAddr, Owner>,
    /// Samples taken.
    pub samples: u64,
}

/// The sampler thread; raising its stop flag on drop ends it.
pub struct Sampler {
    stop: Arc<StopFlag>,
    handle: Option<JoinHandle<(Owners, f64)>>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.raise();
    }
}

impl Sampler {
    /// Samples the load's connections to `addr` until stopped; `root` is
    /// the traced tree's root (its descendants are looked up as needed),
    /// `others` the processes outside it that serve the address.
    pub fn start(addr: SocketAddr, root: i32, others: Vec<i32>) -> Result<Self> {
        let stop = Arc::new(StopFlag::new()?);
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("sockscope-share".into())
            .spawn(move || {
                crate::signals::keep_off_this_thread();
                run(addr, root, &others, &flag)
            })
            .context("starting the share sampler thread")?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops it; returns what it saw and the CPU its thread used, s.
    pub fn finish(mut self) -> (Owners, f64) {
        self.stop.raise();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

fn run(addr: SocketAddr, root: i32, others: &[i32], stop: &StopFlag) -> (Owners, f64) {
    let mut o = Owners::default();
    let mut pause = FIRST_PAUSE;
    while !stop.is_raised() {
        let placed = sample(canonical(addr), root, others, &mut o);
        let mut pfd = [PollFd::new(stop.fd(), PollFlags::POLLIN)];
        let _ = poll(
            &mut pfd,
            PollTimeout::try_from(pause.as_millis() as i32).unwrap_or(PollTimeout::MAX),
        );
        // A connection still in the accept queue is looked at again soon.
        pause = if placed {
            (pause * 2).min(MAX_PAUSE)
        } else {
            FIRST_PAUSE
        };
    }
    (o, own_thread_cpu_s())
}

fn own_thread_cpu_s() -> f64 {
    // SAFETY: timespec is plain data filled by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer, valid clock id.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// One pass: the local address of every connection of this process to
/// `addr`; the kernel's table and the descriptors of the tree and of
/// `others` (the processes known to serve the address) are read only when
/// one of them is not placed yet (a persistent connection is placed once).
/// True when every connection seen is placed.
fn sample(addr: SocketAddr, root: i32, others: &[i32], o: &mut Owners) -> bool {
    o.samples += 1;
    let unplaced: Vec<SocketAddr> = own_connections_to(addr)
        .into_iter()
        .filter(|l| !o.by_local.contains_key(l))
        .collect();
    if unplaced.is_empty() {
        return true;
    }
    // The table first, the descriptors second: a connection accepted in
    // between then has an inode its holder is already seen holding.
    let server_end: HashMap<SocketAddr, u64> = tcp_sockets(root, ESTABLISHED)
        .into_iter()
        .filter(|s| s.local.port() == addr.port())
        .map(|s| (canonical(s.remote), s.inode))
        .collect();
    let held: HashSet<u64> = tree_of(root)
        .into_iter()
        .flat_map(ready::socket_inodes)
        .collect();
    // A connection is placed only on positive evidence: its server end's
    // inode seen among the tree's descriptors, or among those of a process
    // known to serve the address. One that nobody watched holds yet (in the
    // accept queue, or being accepted) is looked at again.
    let elsewhere: HashSet<u64> = others
        .iter()
        .flat_map(|p| ready::socket_inodes(*p))
        .collect();
    let mut all = true;
    for local in unplaced {
        let owner = match server_end.get(&local) {
            Some(i) if *i != 0 && held.contains(i) => Owner::Tree,
            Some(i) if *i != 0 && elsewhere.contains(i) => Owner::Other,
            _ => {
                all = false;
                continue;
            }
        };
        o.by_local.insert(local, owner);
    }
    all
}

/// The TCP sockets in `state`: from sock_diag (filtered by the kernel),
/// or from `root`'s /proc/PID/net/tcp{,6} where sock_diag is unavailable.
fn tcp_sockets(root: i32, state: u8) -> Vec<sock_diag::TcpSocket> {
    if let Ok(v) = sock_diag::tcp(1 << state) {
        return v;
    }
    let mut out = Vec::new();
    for file in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{root}/net/{file}")) else {
            continue;
        };
        out.extend(
            ready::parse_table(&text)
                .into_iter()
                .filter(|r| r.state == state)
                .map(|r| sock_diag::TcpSocket {
                    local: r.local,
                    remote: r.remote,
                    state: r.state,
                    inode: r.inode,
                }),
        );
    }
    out
}

/// An IPv4-mapped IPv6 address as the IPv4 one, so both ends compare.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Local addresses of the sockets of this process connected to `peer`.
/// Each descriptor is only queried (getpeername, getsockname); one closed
/// and reused meanwhile is at worst placed under the wrong address.
fn own_connections_to(peer: SocketAddr) -> Vec<SocketAddr> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            if !link.to_str()?.starts_with("socket:[") {
                return None;
            }
            if sock_addr(fd, libc::getpeername).map(canonical) != Some(peer) {
                return None;
            }
            sock_addr(fd, libc::getsockname).map(canonical)
        })
        .collect()
}

type AddrCall = unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32;

fn sock_addr(fd: i32, call: AddrCall) -> Option<SocketAddr> {
    // SAFETY: the closure lets the kernel fill the storage with at most
    // `len` bytes and report the length it wrote; a closed descriptor only
    // makes the call fail.
    let ((), addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            if call(fd, storage.cast(), len) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    }
    .ok()?;
    addr.as_socket()
}

/// A load that opens a connection per transaction (tcp-crr, http
/// --new-connection).
fn per_transaction(load: &LoadReport) -> bool {
    load.config.close.is_some()
}

/// The tree's share of the load, how it was estimated, and the divisor of
/// the per-transaction target figures. `conns` are the load's connections
/// with their responses (tcp-rr), `owners` who served each (sampled).
pub fn attribute(
    shared_with: Vec<Sharer>,
    owners: Option<&Owners>,
    conns: &[ConnTally],
    load: &LoadReport,
    trace: Option<&TraceReport>,
) -> Attribution {
    let by_conns = owners.and_then(|o| connection_share(o, conns, trace.and_then(tree_accepts)));
    // A UDP load says so in its report (`udp`, `udp_rr`). Over TCP a
    // connection per transaction records its close style (`config.close`);
    // persistent connections (tcp-rr, http, redis, memcached) do not.
    let tcp = load.udp.is_none() && load.udp_rr.is_none();
    let (share, method, connections) = match (tcp, per_transaction(load)) {
        (true, false) => match by_conns {
            Some((share, method, c)) => (share, method, Some(c)),
            None => {
                let (share, method) = accept_share(load, trace);
                (share, method, None)
            }
        },
        (true, true) => {
            let (share, method) = accept_share(load, trace);
            (share, method, None)
        }
        (false, _) => (
            None,
            "which process receives a datagram cannot be seen from outside it, so the \
             traced tree's share of the load is unknown"
                .to_string(),
            None,
        ),
    };
    Attribution {
        basis: if share.is_some() {
            "tree_share"
        } else {
            "unknown"
        }
        .into(),
        shared_with,
        share,
        transactions: share.map(|s| s * load.transactions as f64),
        method,
        connections,
    }
}

/// The tree's part of the responses the load completed, connection by
/// connection. A connection never seen accepted is placed by the tree's own
/// accept count (`accepted`) when that settles it (all of the unplaced are
/// the tree's, or none); otherwise it is left out if its responses are
/// under 0.5% of all, and the share is unknown (None inside) if not. None
/// when no connection could be placed at all.
fn connection_share(
    o: &Owners,
    conns: &[ConnTally],
    accepted: Option<u64>,
) -> Option<(Option<f64>, String, ConnectionOwners)> {
    let mut c = ConnectionOwners::default();
    let (mut tree, mut others, mut unknown) = (0u64, 0u64, 0u64);
    for k in conns {
        match o.by_local.get(&canonical(k.local)) {
            Some(Owner::Tree) => {
                c.tree += 1;
                tree += k.transactions;
            }
            Some(Owner::Other) => {
                c.others += 1;
                others += k.transactions;
            }
            None => {
                c.unknown += 1;
                unknown += k.transactions;
            }
        }
    }
    let all = tree + others + unknown;
    let mut method = format!(
        "the load's responses counted per connection, each connection placed by which \
         process held its server end (its inode in /proc/PID/fd; sampled {} \
         times): {} of {} connections ({tree} of {all} responses) held by the traced tree, \
         {} by others",
        o.samples,
        c.tree,
        conns.len(),
        c.others
    );
    if c.unknown > 0 {
        let n = c.unknown;
        match accepted.and_then(|a| a.checked_sub(c.tree)) {
            Some(0) => {
                others += unknown;
                method.push_str(&format!(
                    ", {n} never seen accepted: others', as the tree's own accepts are all \
                     placed"
                ));
            }
            Some(k) if k == n => {
                tree += unknown;
                method.push_str(&format!(
                    ", {n} never seen accepted: the tree's, as it accepted exactly that many \
                     more"
                ));
            }
            _ if unknown * 200 <= all => method.push_str(&format!(
                ", {n} never seen accepted ({unknown} responses, under 0.5%, left out)"
            )),
            _ => {
                method.push_str(&format!(
                    ", {n} never seen accepted carrying {unknown} responses, which the tree's \
                     accept count cannot settle: the share is unknown"
                ));
                return Some((None, method, c));
            }
        }
    }
    if tree + others == 0 {
        return None;
    }
    Some((Some(tree as f64 / (tree + others) as f64), method, c))
}

/// Successful accept/accept4 calls in the tree's trace (None in count-only
/// mode, which has no error counts).
fn tree_accepts(trace: &TraceReport) -> Option<u64> {
    (!trace.options.count_only).then(|| {
        trace
            .syscalls
            .iter()
            .filter(|r| r.name == "accept" || r.name == "accept4")
            .map(|r| r.calls - r.errors.unwrap_or(0))
            .sum()
    })
}

/// Connections the tree accepted over the load's connects: the
/// transactions' share for tcp-crr, the connections' for tcp-rr.
fn accept_share(load: &LoadReport, trace: Option<&TraceReport>) -> (Option<f64>, String) {
    let Some(trace) = trace else {
        return (
            None,
            "without the syscall tracer (--requests-only) the traced tree's accepts are not \
             counted, so its share of the load's connections is unknown"
                .into(),
        );
    };
    let Some(accepted) = tree_accepts(trace) else {
        return (
            None,
            "count-only tracing does not tell successful accepts from failed ones, so the \
             traced tree's share of the load's connections is unknown"
                .into(),
        );
    };
    let connects = load.connections.connects;
    if connects == 0 {
        return (None, "the load made no connection".into());
    }
    let share = (accepted as f64 / connects as f64).min(1.0);
    let what = if per_transaction(load) {
        "one transaction each"
    } else {
        "assuming each connection carried as many transactions"
    };
    (
        Some(share),
        format!(
            "connections the traced tree accepted (successful accept/accept4 in its trace: \
             {accepted}) over the load's connects ({connects}), {what}; other clients of the \
             address would inflate it"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_its_own_connection_by_who_holds_the_server_end() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(addr).unwrap();
        let _srv = l.accept().unwrap();
        let local = c.local_addr().unwrap();
        assert_eq!(own_connections_to(addr), vec![local]);
        let conns = [ConnTally {
            local,
            transactions: 7,
        }];
        // This process holds the server end: with it as the tree, the
        // connection is the tree's; with another root, someone else's, once
        // that someone is known to serve the address.
        let me = std::process::id() as i32;
        let mut o = Owners::default();
        sample(addr, me, &[], &mut o);
        let (share, _, c) = connection_share(&o, &conns, None).unwrap();
        assert_eq!((share, c.tree, c.others), (Some(1.0), 1, 0));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let mut o = Owners::default();
        sample(addr, child.id() as i32, &[], &mut o);
        assert!(o.by_local.is_empty(), "held by no process it watches");
        sample(addr, child.id() as i32, &[me], &mut o);
        child.kill().unwrap();
        child.wait().unwrap();
        let (share, _, c) = connection_share(&o, &conns, None).unwrap();
        assert_eq!((share, c.tree, c.others), (Some(0.0), 0, 1));
    }
}

#[cfg(test)]
mod unplaced_tests {
    use super::*;

    fn conn(port: u16, tx: u64) -> ConnTally {
        ConnTally {
            local: SocketAddr::from(([127, 0, 0, 1], port)),
            transactions: tx,
        }
    }

    #[test]
    fn the_accept_count_settles_unplaced_connections_or_the_share_is_unknown() {
        let mut o = Owners::default();
        o.by_local.insert(conn(1, 0).local, Owner::Tree);
        o.by_local.insert(conn(2, 0).local, Owner::Other);
        let conns = [conn(1, 100), conn(2, 300), conn(3, 600)];
        // The tree accepted 2: the unplaced one is its.
        let (s, _, _) = connection_share(&o, &conns, Some(2)).unwrap();
        assert_eq!(s, Some(0.7));
        // It accepted 1: the unplaced one is someone else's.
        let (s, _, _) = connection_share(&o, &conns, Some(1)).unwrap();
        assert_eq!(s, Some(0.1));
        // Unknown accepts, and too much unplaced: no share.
        let (s, why, c) = connection_share(&o, &conns, None).unwrap();
        assert_eq!((s, c.unknown), (None, 1));
        assert!(why.contains("unknown"), "{why}");
        // A sliver unplaced is left out.
        let conns = [conn(1, 1000), conn(2, 3000), conn(3, 1)];
        let (s, _, _) = connection_share(&o, &conns, None).unwrap();
        assert_eq!(s, Some(0.25));
    }
}
