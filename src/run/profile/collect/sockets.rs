//! Samples the target tree's sockets through sock_diag
//! (`report::evidence::sockets`), in the target's network namespace.
//!
//! One round is one kernel-filtered dump of the namespace's TCP sockets in
//! every state but TIME_WAIT, with tcp_info (IPv4 and IPv6), plus the UDP
//! sockets when the target holds any. Which of them are the target's: its
//! listeners and UDP sockets are inodes among the tree's descriptors
//! (walked again every [`INODE_REFRESH`]: listeners rarely change), its
//! server-side connections are those on a listener's address (known every
//! round without walking descriptors, so a connection that lived 2 ms is
//! seen), and its other connections (outbound ones) are inodes among the
//! descriptors. TIME_WAIT sockets belong to no process and can be tens of
//! thousands after a connect-heavy load: they are counted about once a
//! second ([`TIME_WAIT_EVERY`]), by dumps the kernel filters on the
//! target's port, and at the end. A count as the window begins tells the
//! sockets this run put in TIME_WAIT from those earlier runs left (by
//! cookie and both ends): only the former say who closed first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::procfs::sock_diag::{
    self, ALL_STATES, Diag, Entry, FAMILIES, LISTEN, NEW_SYN_RECV, Query, SYN_RECV, TIME_WAIT,
};
use crate::report::evidence::SocketEvidence;
use crate::report::evidence::sockets::{
    Listener, Quantiles, Retransmits, StateCount, TimeWait, TimeWaitEnd, TimeWaitEnds, UdpSocket,
};

/// How often the tree's descriptors are walked for socket inodes.
const INODE_REFRESH: Duration = Duration::from_secs(1);
/// How often TIME_WAIT sockets are counted.
const TIME_WAIT_EVERY: Duration = Duration::from_secs(1);
/// Connections remembered (by cookie) for `connections_seen` and the
/// retransmit sum; past this, new ones are no longer told apart.
const MAX_TRACKED: usize = 1 << 20;
/// Distinct errors kept.
const MAX_ERRORS: usize = 4;

/// Accumulates socket samples over the window.
pub struct Sampler {
    diag: Diag,
    pid: i32,
    addr: SocketAddr,
    inodes: HashSet<u64>,
    tree: Vec<i32>,
    refreshed: Option<Instant>,
    holds_udp: bool,
    entries: Vec<Entry>,
    samples: u64,
    failed_samples: u64,
    listeners: BTreeMap<SocketAddr, ListenerAcc>,
    states: BTreeMap<u8, (u64, u64)>,
    seen: HashSet<u64>,
    retrans: HashMap<u64, u32>,
    recv_q: Histogram<u64>,
    send_q: Histogram<u64>,
    rtt_us: Histogram<u64>,
    tcp_info_seen: bool,
    time_wait: Option<TimeWait>,
    time_wait_at: Option<Instant>,
    /// The TIME_WAIT count as the window began, and the sockets it saw.
    tw_before: Option<(TimeWaitEnds, HashSet<TwKey>)>,
    udp: BTreeMap<u64, UdpAcc>,
    errors: Vec<String>,
}

#[derive(Default)]
struct ListenerAcc {
    backlog: u32,
    max: u32,
    sum: u64,
    samples: u64,
    full: u64,
    syn_max: u64,
}

struct UdpAcc {
    local: SocketAddr,
    recv_q_max: u32,
    drops: Option<(u32, u32)>,
}

/// A TIME_WAIT socket's identity: its cookie (unique while it lives)
/// and both ends.
type TwKey = (u64, SocketAddr, SocketAddr);

/// One TIME_WAIT socket on (`on_target`) or towards the target's address.
struct TwSocket {
    on_target: bool,
    key: TwKey,
}

/// One TIME_WAIT count, split by what was there before the window.
#[derive(Debug, Default, PartialEq, Eq)]
struct TwTally {
    local: u64,
    local_before: u64,
    remote: u64,
    remote_before: u64,
    /// Most new ones towards the target from one client address.
    remote_new_per_source: u64,
}

/// Counts `found`, those in `before` apart (none when not known).
fn tally(found: &[TwSocket], before: Option<&HashSet<TwKey>>) -> TwTally {
    let mut c = TwTally::default();
    let mut per_source: HashMap<IpAddr, u64> = HashMap::new();
    for t in found {
        let old = before.is_some_and(|b| b.contains(&t.key));
        match (t.on_target, old) {
            (true, _) => {
                c.local += 1;
                c.local_before += u64::from(old);
            }
            (false, true) => {
                c.remote += 1;
                c.remote_before += 1;
            }
            (false, false) => {
                c.remote += 1;
                *per_source.entry(canon(t.key.1.ip())).or_default() += 1;
            }
        }
    }
    c.remote_new_per_source = per_source.into_values().max().unwrap_or(0);
    c
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures is a valid histogram")
}

/// An IPv4-mapped IPv6 address as the IPv4 one, so both families compare.
fn canon(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Whether a socket bound to `bound` (possibly a wildcard) serves `local`.
fn serves(bound: SocketAddr, local: SocketAddr) -> bool {
    bound.port() == local.port()
        && (bound.ip().is_unspecified() || canon(bound.ip()) == canon(local.ip()))
}

impl Sampler {
    /// A sampler for the tree of `pid` serving `addr`; an error says why
    /// its sockets cannot be read (sock_diag refused, namespace gone).
    pub fn new(pid: i32, addr: SocketAddr) -> Result<Self, String> {
        let mut diag = Diag::open_in(pid).map_err(|e| format!("opening sock_diag: {e}"))?;
        // One dump now, so a refusal is reported as such rather than as
        // every sample failing.
        diag.dump(&Query::tcp(libc::AF_INET as u8, 1 << LISTEN), |_| {})
            .map_err(|e| format!("sock_diag refused a dump: {e}"))?;
        let mut s = Sampler {
            diag,
            pid,
            addr,
            inodes: HashSet::new(),
            tree: Vec::new(),
            refreshed: None,
            holds_udp: false,
            entries: Vec::new(),
            samples: 0,
            failed_samples: 0,
            listeners: BTreeMap::new(),
            states: BTreeMap::new(),
            seen: HashSet::new(),
            retrans: HashMap::new(),
            recv_q: histogram(),
            send_q: histogram(),
            rtt_us: histogram(),
            tcp_info_seen: false,
            time_wait: None,
            time_wait_at: None,
            tw_before: None,
            udp: BTreeMap::new(),
            errors: Vec::new(),
        };
        s.time_wait_before();
        Ok(s)
    }

    fn error(&mut self, what: &str, e: impl std::fmt::Display) {
        let line = format!("{what}: {e}");
        if self.errors.len() < MAX_ERRORS && !self.errors.contains(&line) {
            self.errors.push(line);
        }
    }

    #[cfg(test)]
    fn refresh_now(&mut self, tree: &[i32]) {
        self.refreshed = None;
        self.refresh(tree);
    }

    /// Walks the tree's descriptors again when due or when the tree
    /// changed; checks whether any of them is a UDP socket.
    fn refresh(&mut self, tree: &[i32]) {
        let due = self.refreshed.is_none_or(|t| t.elapsed() >= INODE_REFRESH);
        if !due && tree == self.tree.as_slice() {
            return;
        }
        self.tree = tree.to_vec();
        self.inodes = tree
            .iter()
            .flat_map(|&p| crate::process::ready::socket_inodes(p))
            .collect();
        self.refreshed = Some(Instant::now());
        let mut found = false;
        for family in FAMILIES {
            let q = Query {
                protocol: libc::IPPROTO_UDP as u8,
                ..Query::tcp(family, ALL_STATES)
            };
            let inodes = &self.inodes;
            let r = self.diag.dump(&q, |e| found |= inodes.contains(&e.inode));
            if let Err(e) = r {
                self.error("UDP sockets", e);
            }
        }
        self.holds_udp = found;
    }

    /// One round over the sockets of `tree`.
    pub fn sample(&mut self, tree: &[i32]) {
        self.refresh(tree);
        self.samples += 1;
        self.entries.clear();
        let states = ALL_STATES & !(1 << TIME_WAIT);
        for family in FAMILIES {
            // Each dump walks the kernel's whole established hash (shared
            // by every namespace unless tcp_child_ehash_entries is set):
            // a family without a socket in the namespace is not dumped.
            let inuse = if family == libc::AF_INET as u8 {
                sockstat(self.pid, "sockstat", "TCP:", "inuse")
            } else {
                sockstat(self.pid, "sockstat6", "TCP6:", "inuse")
            };
            if inuse == Some(0) {
                continue;
            }
            let q = Query {
                tcp_info: true,
                ..Query::tcp(family, states)
            };
            let entries = &mut self.entries;
            if let Err(e) = self.diag.dump(&q, |e| entries.push(e)) {
                self.failed_samples += 1;
                self.error("TCP sockets", e);
                return;
            }
        }
        self.account_tcp();
        if self.holds_udp {
            self.sample_udp();
        }
        if self
            .time_wait_at
            .is_none_or(|t| t.elapsed() >= TIME_WAIT_EVERY)
        {
            let _ = self.count_time_wait();
        }
    }

    /// Folds the entries of one TCP round into the accumulators.
    fn account_tcp(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        let listeners: Vec<&Entry> = entries
            .iter()
            .filter(|e| u32::from(e.state) == LISTEN)
            .filter(|e| {
                self.inodes.contains(&e.inode)
                    || (self.inodes.is_empty() && serves(e.local, self.addr))
            })
            .collect();
        let mut counts: BTreeMap<u8, u64> = BTreeMap::new();
        let mut syn: HashMap<SocketAddr, u64> = HashMap::new();
        for l in &listeners {
            let acc = self.listeners.entry(l.local).or_default();
            acc.backlog = l.wqueue;
            acc.max = acc.max.max(l.rqueue);
            acc.sum += u64::from(l.rqueue);
            acc.samples += 1;
            if l.rqueue > 0 && l.rqueue >= l.wqueue {
                acc.full += 1;
            }
            *counts.entry(LISTEN as u8).or_default() += 1;
        }
        for e in &entries {
            let state = u32::from(e.state);
            if state == LISTEN {
                continue;
            }
            let on_listener = listeners.iter().find(|l| serves(l.local, e.local));
            if state == SYN_RECV || state == NEW_SYN_RECV {
                // A handshake in a listener's SYN queue: no inode, no
                // tcp_info, not a connection yet.
                if let Some(l) = on_listener {
                    *syn.entry(l.local).or_default() += 1;
                    *counts.entry(SYN_RECV as u8).or_default() += 1;
                }
                continue;
            }
            let ours = on_listener.is_some() || (e.inode != 0 && self.inodes.contains(&e.inode));
            if !ours {
                continue;
            }
            *counts.entry(e.state).or_default() += 1;
            if self.seen.len() < MAX_TRACKED {
                self.seen.insert(e.cookie);
            }
            self.recv_q.saturating_record(u64::from(e.rqueue));
            self.send_q.saturating_record(u64::from(e.wqueue));
            if let Some(info) = e.tcp {
                self.tcp_info_seen = true;
                if info.rtt_us > 0 {
                    self.rtt_us.saturating_record(u64::from(info.rtt_us));
                }
                if info.total_retrans > 0
                    && (self.retrans.len() < MAX_TRACKED || self.retrans.contains_key(&e.cookie))
                {
                    let last = self.retrans.entry(e.cookie).or_default();
                    *last = (*last).max(info.total_retrans);
                }
            }
        }
        for (local, n) in syn {
            let acc = self.listeners.entry(local).or_default();
            acc.syn_max = acc.syn_max.max(n);
        }
        // A state not seen this round counts 0 in it: the mean divides by
        // every round, so only the sums and maxima are kept.
        for (state, n) in counts {
            let s = self.states.entry(state).or_default();
            s.0 = s.0.max(n);
            s.1 += n;
        }
        self.entries = entries;
    }

    /// Receive queues and drop counts of the target's UDP sockets.
    fn sample_udp(&mut self) {
        for family in FAMILIES {
            let q = Query {
                protocol: libc::IPPROTO_UDP as u8,
                meminfo: true,
                ..Query::tcp(family, ALL_STATES)
            };
            let (inodes, udp) = (&self.inodes, &mut self.udp);
            let r = self.diag.dump(&q, |e| {
                if !inodes.contains(&e.inode) {
                    return;
                }
                let acc = udp.entry(e.inode).or_insert(UdpAcc {
                    local: e.local,
                    recv_q_max: 0,
                    drops: None,
                });
                acc.recv_q_max = acc.recv_q_max.max(e.rqueue);
                if let Some(d) = e.drops {
                    acc.drops = Some(acc.drops.map_or((d, d), |(first, _)| (first, d)));
                }
            });
            if let Err(e) = r {
                self.error("UDP sockets", e);
            }
        }
    }

    /// The TIME_WAIT sockets on and towards the target's port now (two
    /// kernel-filtered dumps per family), and the namespace's total; None
    /// when a dump failed (the error is kept).
    fn time_wait_now(&mut self) -> Option<(Vec<TwSocket>, Option<u64>)> {
        let addr = self.addr;
        let mut found = Vec::new();
        let ns = sockstat(self.pid, "sockstat", "TCP:", "tw");
        // None in the namespace (both families count there): no dump.
        let families: &[u8] = if ns == Some(0) { &[] } else { &FAMILIES };
        for &family in families {
            for on_target in [true, false] {
                let mut q = Query::tcp(family, 1 << TIME_WAIT);
                if on_target {
                    q.sport = addr.port();
                } else {
                    q.dport = addr.port();
                }
                let r = self.diag.dump(&q, |e| {
                    let end = if on_target { e.local } else { e.remote };
                    if serves(addr, end) {
                        found.push(TwSocket {
                            on_target,
                            key: (e.cookie, e.local, e.remote),
                        });
                    }
                });
                if let Err(e) = r {
                    self.error("TIME_WAIT sockets", e);
                    return None;
                }
            }
        }
        Some((found, ns))
    }

    /// Remembers the TIME_WAIT sockets present as the window begins, so
    /// that later counts tell this run's from those left before it.
    fn time_wait_before(&mut self) {
        let Some((found, _)) = self.time_wait_now() else {
            return;
        };
        let ends = TimeWaitEnds {
            local: found.iter().filter(|t| t.on_target).count() as u64,
            remote: found.iter().filter(|t| !t.on_target).count() as u64,
        };
        // Past MAX_TRACKED the rest count as new: a bound on memory, with
        // a namespace that large far beyond any port range anyway.
        let keys = found.into_iter().take(MAX_TRACKED).map(|t| t.key).collect();
        self.tw_before = Some((ends, keys));
    }

    /// Counts the TIME_WAIT sockets on and towards the target's port and
    /// the namespace's total, telling those that entered TIME_WAIT during
    /// the window from those already there; returns the count (None when
    /// it failed).
    fn count_time_wait(&mut self) -> Option<TwTally> {
        self.time_wait_at = Some(Instant::now());
        let (found, ns) = self.time_wait_now()?;
        let c = tally(&found, self.tw_before.as_ref().map(|b| &b.1));
        let known = self.tw_before.is_some();
        let t = self.time_wait.get_or_insert_with(TimeWait::default);
        t.samples += 1;
        t.local_max = t.local_max.max(c.local);
        t.remote_max = t.remote_max.max(c.remote);
        if let Some(n) = ns {
            t.namespace_max = Some(t.namespace_max.unwrap_or(0).max(n));
        }
        if known {
            let new_max = |m: Option<u64>, v: u64| Some(m.unwrap_or(0).max(v));
            t.local_new_max = new_max(t.local_new_max, c.local - c.local_before);
            t.remote_new_max = new_max(t.remote_new_max, c.remote - c.remote_before);
            t.remote_new_per_source_max =
                new_max(t.remote_new_per_source_max, c.remote_new_per_source);
        }
        Some(c)
    }

    /// The evidence, after a last TIME_WAIT count (they pile up until the
    /// end of a connect-heavy load).
    pub fn finish(mut self) -> SocketEvidence {
        let end = if self.samples > 0 {
            self.count_time_wait()
        } else {
            None
        };
        if let (Some(t), Some((before, _))) = (self.time_wait.as_mut(), &self.tw_before) {
            t.before = Some(*before);
            t.at_end = end.map(|c| TimeWaitEnd {
                local: c.local,
                local_before: c.local_before,
                remote: c.remote,
                remote_before: c.remote_before,
            });
        }
        let rounds = self.samples.saturating_sub(self.failed_samples).max(1) as f64;
        let quantiles = |h: &Histogram<u64>| {
            (!h.is_empty()).then(|| Quantiles {
                count: h.len(),
                p50: h.value_at_quantile(0.5),
                p99: h.value_at_quantile(0.99),
                max: h.max(),
            })
        };
        let connections_seen = self.seen.len() as u64;
        let total: u64 = self.retrans.values().map(|&v| u64::from(v)).sum();
        SocketEvidence {
            samples: self.samples,
            failed_samples: self.failed_samples,
            listeners: self
                .listeners
                .iter()
                .filter(|(_, a)| a.samples > 0)
                .map(|(local, a)| Listener {
                    local: local.to_string(),
                    backlog: a.backlog,
                    accept_queue_max: a.max,
                    accept_queue_mean: a.sum as f64 / a.samples as f64,
                    samples_full: a.full,
                    samples: a.samples,
                    syn_queue_max: a.syn_max,
                })
                .collect(),
            states: self
                .states
                .iter()
                .map(|(&s, &(max, sum))| {
                    (
                        sock_diag::state_name(s).to_string(),
                        StateCount {
                            max,
                            mean: sum as f64 / rounds,
                        },
                    )
                })
                .collect(),
            connections_seen,
            recv_q: quantiles(&self.recv_q),
            send_q: quantiles(&self.send_q),
            rtt_us: quantiles(&self.rtt_us),
            retransmits: self.tcp_info_seen.then(|| Retransmits {
                total,
                connections: self.retrans.len() as u64,
                per_connection: if connections_seen > 0 {
                    total as f64 / connections_seen as f64
                } else {
                    0.0
                },
            }),
            time_wait: self.time_wait.clone(),
            udp: self
                .udp
                .values()
                .map(|u| UdpSocket {
                    local: u.local.to_string(),
                    recv_q_max: u.recv_q_max,
                    drops: u
                        .drops
                        .map(|(first, last)| u64::from(last.wrapping_sub(first))),
                })
                .collect(),
            errors: self.errors.clone(),
        }
    }
}

/// A figure of /proc/PID/net/`file` (sockstat or sockstat6): `key` on
/// the line starting `line` (`TCP: inuse 5 orphan 0 tw 12 alloc 7 mem 1`).
/// These counters are the namespace's and cost one small read.
fn sockstat(pid: i32, file: &str, line: &str, key: &str) -> Option<u64> {
    parse_sockstat(
        &std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).ok()?,
        line,
        key,
    )
}

fn parse_sockstat(text: &str, line: &str, key: &str) -> Option<u64> {
    let l = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(line))?;
    let mut words = l.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// The tests below sample this very process as the target: each must
    /// not see the sockets another one holds at the same time.
    static THIS_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn alone() -> std::sync::MutexGuard<'static, ()> {
        THIS_PROCESS.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn sockstat_figures_are_read_and_garbage_gives_none() {
        let t =
            "sockets: used 150\nTCP: inuse 5 orphan 0 tw 12 alloc 7 mem 1\nUDP: inuse 1 mem 0\n";
        assert_eq!(parse_sockstat(t, "TCP:", "tw"), Some(12));
        assert_eq!(parse_sockstat(t, "TCP:", "inuse"), Some(5));
        assert_eq!(parse_sockstat(t, "UDP:", "inuse"), Some(1));
        assert_eq!(parse_sockstat("TCP6: inuse 0\n", "TCP6:", "inuse"), Some(0));
        assert_eq!(parse_sockstat("TCP: inuse 5 tw", "TCP:", "tw"), None);
        assert_eq!(parse_sockstat("", "TCP:", "tw"), None);
    }

    #[test]
    fn wildcard_listeners_serve_every_address_of_their_port() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(serves(a("0.0.0.0:80"), a("10.0.0.1:80")));
        assert!(serves(a("[::]:80"), a("127.0.0.1:80")));
        assert!(serves(a("127.0.0.1:80"), a("[::ffff:127.0.0.1]:80")));
        assert!(!serves(a("127.0.0.1:80"), a("127.0.0.2:80")));
        assert!(!serves(a("0.0.0.0:80"), a("127.0.0.1:81")));
    }

    /// This process as the target: its listener with backlog 2 and a
    /// queued connection, an accepted one, and TIME_WAIT after the
    /// client closes first.
    #[test]
    fn samples_this_process_as_a_target() {
        let _alone = alone();
        let l = on_a_clean_port(|| {
            let l =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
                .unwrap();
            l.listen(2).unwrap();
            let port = l.local_addr().unwrap().as_socket().unwrap().port();
            (l, port)
        });
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid, addr).unwrap();
        let mut c1 = TcpStream::connect(addr).unwrap();
        let (mut a1, _) = l.accept().unwrap();
        let _c2 = TcpStream::connect(addr).unwrap();
        let _c3 = TcpStream::connect(addr).unwrap();
        c1.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.sample(&[pid]);
        let mut buf = [0u8; 5];
        a1.read_exact(&mut buf).unwrap();
        drop(c1);
        std::thread::sleep(Duration::from_millis(20));
        drop(a1);
        std::thread::sleep(Duration::from_millis(20));
        s.sample(&[pid]);
        let e = s.finish();
        assert_eq!(e.samples, 2);
        // (Tests beside this one may hold listeners of their own.)
        let li = e
            .listeners
            .iter()
            .find(|l| l.local == addr.to_string())
            .expect("the listener");
        assert_eq!(li.backlog, 2);
        assert_eq!(li.accept_queue_max, 2);
        assert_eq!(li.samples_full, 2, "{li:?}");
        // The accepted one and the two queued ones on the listener, and
        // the three client ends, whose inodes this process holds too.
        // (At least: tests running beside this one in the process hold
        // sockets too.)
        assert!(e.states["ESTABLISHED"].max >= 6, "{:?}", e.states);
        assert!(e.connections_seen >= 6);
        // The 5 unread bytes (other tests' connections in this process
        // may hold more).
        assert!(e.recv_q.as_ref().unwrap().max >= 5);
        assert!(e.rtt_us.as_ref().unwrap().count >= 3);
        // The client closed first: its end waits, towards the target.
        let tw = e.time_wait.unwrap();
        assert_eq!((tw.local_max, tw.remote_max), (0, 1));
        assert!(tw.namespace_max.unwrap() >= 1);
        assert!(e.errors.is_empty(), "{:?}", e.errors);
    }

    /// The TIME_WAIT sockets that have `port` at one end.
    fn time_wait_on(diag: &mut Diag, port: u16) -> usize {
        let mut seen = 0;
        for by_local in [true, false] {
            let mut q = Query::tcp(libc::AF_INET as u8, 1 << TIME_WAIT);
            if by_local {
                q.sport = port;
            } else {
                q.dport = port;
            }
            diag.dump(&q, |_| seen += 1).unwrap();
        }
        seen
    }

    /// Waits (up to 5 s) until `n` TIME_WAIT sockets have `port` at one
    /// end, so the counts below do not race the closing handshakes.
    fn wait_time_wait(port: u16, n: usize) {
        let mut diag = Diag::open().unwrap();
        for _ in 0..500 {
            if time_wait_on(&mut diag, port) >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{n} TIME_WAIT sockets on port {port} never appeared");
    }

    /// A listener made by `listen` on a port no TIME_WAIT socket has at
    /// either end: a port just freed by another test's server can still
    /// have its clients' TIME_WAIT ends (to that port) for a minute, and
    /// the counts below are of this test's own. Ports tried are held until
    /// one is found, so each try gets another.
    fn on_a_clean_port<T>(listen: impl Fn() -> (T, u16)) -> T {
        let mut diag = Diag::open().unwrap();
        let mut tried = Vec::new();
        for _ in 0..100 {
            let (l, port) = listen();
            if time_wait_on(&mut diag, port) == 0 {
                return l;
            }
            tried.push(l);
        }
        panic!("no port free of TIME_WAIT sockets in 100 tries");
    }

    /// A TIME_WAIT socket left on the target's port before the window is
    /// told from those the window made: only the latter are this run's,
    /// and the end snapshot says how many were there before.
    #[test]
    fn time_wait_from_before_the_window_is_not_counted_as_this_runs() {
        let _alone = alone();
        let l = on_a_clean_port(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            (l, port)
        });
        let addr = l.local_addr().unwrap();
        // Before: the target closes first, then the client.
        let c0 = TcpStream::connect(addr).unwrap();
        let (a0, _) = l.accept().unwrap();
        drop(a0);
        drop(c0);
        wait_time_wait(addr.port(), 1);
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid, addr).unwrap();
        // During: once more the target closing first, and a client that
        // closes first.
        let c1 = TcpStream::connect(addr).unwrap();
        let (a1, _) = l.accept().unwrap();
        drop(a1);
        drop(c1);
        let c2 = TcpStream::connect(addr).unwrap();
        let (a2, _) = l.accept().unwrap();
        drop(c2);
        drop(a2);
        wait_time_wait(addr.port(), 3);
        s.sample(&[pid]);
        let tw = s.finish().time_wait.unwrap();
        assert_eq!((tw.local_max, tw.remote_max), (2, 1), "{tw:?}");
        assert_eq!(
            tw.before,
            Some(TimeWaitEnds {
                local: 1,
                remote: 0
            })
        );
        assert_eq!((tw.local_new_max, tw.remote_new_max), (Some(1), Some(1)));
        assert_eq!(tw.remote_new_per_source_max, Some(1));
        assert_eq!(
            tw.at_end,
            Some(TimeWaitEnd {
                local: 2,
                local_before: 1,
                remote: 1,
                remote_before: 0
            })
        );
    }

    #[test]
    fn a_tally_counts_new_ones_per_client_address() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let tw = |on_target, cookie, local: &str, remote: &str| TwSocket {
            on_target,
            key: (cookie, a(local), a(remote)),
        };
        let found = [
            tw(false, 1, "127.0.0.2:40000", "127.0.0.1:80"),
            tw(false, 2, "127.0.0.2:40001", "127.0.0.1:80"),
            tw(false, 3, "127.0.0.3:40000", "127.0.0.1:80"),
            tw(false, 4, "127.0.0.3:40001", "127.0.0.1:80"),
            tw(true, 5, "127.0.0.1:80", "127.0.0.9:5000"),
        ];
        let before: HashSet<TwKey> = [found[2].key, found[3].key, found[4].key].into();
        let c = tally(&found, Some(&before));
        assert_eq!(
            c,
            TwTally {
                local: 1,
                local_before: 1,
                remote: 4,
                remote_before: 2,
                remote_new_per_source: 2,
            }
        );
        // Nothing known before: everything counts as new.
        assert_eq!(tally(&found, None).remote_new_per_source, 2);
    }

    /// With 300 connections (600 sockets in the namespace, 300 of them
    /// the target's) every round sees all of the target's; the CPU time of
    /// a round and of a TIME_WAIT count is printed (`-- --nocapture`) for
    /// docs/benchmarks.md, never asserted (timing belongs to benchmarks).
    #[test]
    fn every_one_of_300_connections_is_seen_and_a_rounds_cost_printed() {
        let _alone = alone();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut keep = Vec::new();
        for _ in 0..300 {
            let c = TcpStream::connect(addr).unwrap();
            keep.push((c, l.accept().unwrap().0));
        }
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid, addr).unwrap();
        s.sample(&[pid]);
        let cpu = || {
            // SAFETY: plain data filled by the kernel for this thread.
            let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer and clock id.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let sys = || {
            // SAFETY: plain data filled by the kernel for this thread.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer.
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
            ru.ru_stime.tv_sec as f64 + ru.ru_stime.tv_usec as f64 / 1e6
        };
        let n = 20;
        let (t0, s0) = (cpu(), sys());
        for _ in 0..n {
            s.sample(&[pid]);
        }
        let (round, round_sys) = ((cpu() - t0) / n as f64, (sys() - s0) / n as f64);
        let t0 = cpu();
        for _ in 0..20 {
            s.refresh_now(&[pid]);
        }
        let walk = (cpu() - t0) / 20.0;
        let t0 = cpu();
        for _ in 0..n {
            let _ = s.count_time_wait();
        }
        let tw = (cpu() - t0) / n as f64;
        eprintln!(
            "one round: {:.3} ms CPU ({:.3} ms in the kernel); descriptor walk and UDP check \
             {:.3} ms, TIME_WAIT count {:.3} ms (each once a second)",
            round * 1e3,
            round_sys * 1e3,
            walk * 1e3,
            tw * 1e3
        );
        let e = s.finish();
        // This process holds both ends of each connection (other tests'
        // sockets of this process may add a few).
        assert!(e.connections_seen >= 600, "{}", e.connections_seen);
        let est = e.states.get("ESTABLISHED").map_or(0, |c| c.max);
        assert!(est >= 600, "{est}");
    }

    #[test]
    fn a_udp_socket_of_the_target_is_sampled() {
        let _alone = alone();
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = u.local_addr().unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", to).unwrap();
        let pid = std::process::id() as i32;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s = Sampler::new(pid, l.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        s.sample(&[pid]);
        let e = s.finish();
        let ours = e
            .udp
            .iter()
            .find(|x| x.local == to.to_string())
            .expect("the UDP socket");
        assert!(ours.recv_q_max > 0);
        assert_eq!(ours.drops, Some(0));
    }
}
