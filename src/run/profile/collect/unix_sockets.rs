//! Samples the target tree's Unix-domain sockets through sock_diag
//! (UNIX_DIAG, `report::evidence::unix`), in the target's network
//! namespace, when the target serves a Unix socket.
//!
//! One round is one dump of the namespace's Unix sockets with their name,
//! peer and queues. Which of them are the target's: those whose inode the
//! tree's descriptors hold (walked again every [`INODE_REFRESH`], or when
//! the tree changed, as the TCP sampler does), and the connections accepted
//! from one of its listeners: the kernel gives an accepted socket its
//! listener's name, so they are known every round without walking
//! descriptors (a connection that lived between two walks is seen).
//! Connections still in a listener's accept queue are not in the dump:
//! the listener's queue length counts them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::procfs::sock_diag::Diag;
use crate::procfs::unix_diag::{
    self, ALL_STATES, DGRAM, ESTABLISHED, LISTEN, SEQPACKET, STREAM, UnixEntry,
};
use crate::report::evidence::UnixEvidence;
use crate::report::evidence::sockets::Quantiles;
use crate::report::evidence::unix::{UnixConnections, UnixDatagram, UnixListener};

/// How often the tree's descriptors are walked for socket inodes.
const INODE_REFRESH: Duration = Duration::from_secs(1);
/// Connections remembered (by cookie) for `seen`; past this, new ones are
/// no longer told apart.
const MAX_TRACKED: usize = 1 << 20;
/// Listeners and datagram sockets kept (a target with more is unusual;
/// the rest are left out rather than grow without bound).
const MAX_SOCKETS: usize = 256;
/// Distinct errors kept.
const MAX_ERRORS: usize = 4;

/// Accumulates Unix socket samples over the window.
pub struct Sampler {
    diag: Diag,
    /// The tree's socket inodes, each with a process that holds it.
    inodes: HashMap<u64, i32>,
    tree: Vec<i32>,
    refreshed: Option<Instant>,
    entries: Vec<UnixEntry>,
    samples: u64,
    failed_samples: u64,
    listeners: BTreeMap<u64, ListenerAcc>,
    connected_max: u64,
    connected_sum: u64,
    seen: HashSet<u64>,
    recv_q: Histogram<u64>,
    send_q: Histogram<u64>,
    datagram: BTreeMap<u64, DatagramAcc>,
    errors: Vec<String>,
}

struct ListenerAcc {
    name: String,
    kind: u8,
    backlog: u32,
    queue: Histogram<u64>,
    full: u64,
}

struct DatagramAcc {
    name: String,
    waiting: u64,
    samples: u64,
    max: u32,
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures is a valid histogram")
}

fn quantiles(h: &Histogram<u64>) -> Option<Quantiles> {
    (!h.is_empty()).then(|| Quantiles {
        count: h.len(),
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        max: h.max(),
    })
}

/// How a socket is named in the evidence: the path a name bound through
/// a directory descriptor (`/proc/self/fd/N/x.sock`, as `serve` binds)
/// resolves to in `owner`, as the profile's target address names it; an
/// unbound socket by its inode.
fn shown_name(e: &UnixEntry, owner: Option<i32>) -> String {
    match (e.name_text(), owner) {
        (Some(n), Some(pid)) => crate::process::ready::through_fd(pid, n),
        (Some(n), None) => n,
        (None, _) => format!("inode {}", e.inode),
    }
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        STREAM => "stream",
        SEQPACKET => "seqpacket",
        DGRAM => "datagram",
        _ => "unknown",
    }
}

/// Whether the kernel makes the next connect wait: it refuses once the
/// queue holds more than the backlog (`unix_recvq_full`), so a queue of
/// backlog + 1 is full.
fn full(rqueue: u32, backlog: u32) -> bool {
    rqueue > backlog
}

impl Sampler {
    /// A sampler for the tree of `pid`; an error says why its sockets
    /// cannot be read (sock_diag refused, namespace gone).
    pub fn new(pid: i32) -> Result<Self, String> {
        let mut diag = Diag::open_in(pid).map_err(|e| format!("opening sock_diag: {e}"))?;
        // One dump now, so a refusal is reported as such rather than as
        // every sample failing.
        unix_diag::dump(&mut diag, 1 << LISTEN, |_| {})
            .map_err(|e| format!("sock_diag refused a UNIX_DIAG dump: {e}"))?;
        Ok(Sampler {
            diag,
            inodes: HashMap::new(),
            tree: Vec::new(),
            refreshed: None,
            entries: Vec::new(),
            samples: 0,
            failed_samples: 0,
            listeners: BTreeMap::new(),
            connected_max: 0,
            connected_sum: 0,
            seen: HashSet::new(),
            recv_q: histogram(),
            send_q: histogram(),
            datagram: BTreeMap::new(),
            errors: Vec::new(),
        })
    }

    fn error(&mut self, what: &str, e: impl std::fmt::Display) {
        let line = format!("{what}: {e}");
        if self.errors.len() < MAX_ERRORS && !self.errors.contains(&line) {
            self.errors.push(line);
        }
    }

    /// Walks the tree's descriptors again when due or when the tree changed.
    fn refresh(&mut self, tree: &[i32]) {
        let due = self.refreshed.is_none_or(|t| t.elapsed() >= INODE_REFRESH);
        if !due && tree == self.tree.as_slice() {
            return;
        }
        self.tree = tree.to_vec();
        self.inodes = tree
            .iter()
            .flat_map(|&p| {
                crate::process::ready::socket_inodes(p)
                    .into_iter()
                    .map(move |i| (i, p))
            })
            .collect();
        self.refreshed = Some(Instant::now());
    }

    /// One round over the Unix sockets of `tree`.
    pub fn sample(&mut self, tree: &[i32]) {
        self.refresh(tree);
        self.samples += 1;
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        if let Err(e) = unix_diag::dump(&mut self.diag, ALL_STATES, |e| entries.push(e)) {
            self.failed_samples += 1;
            self.error("Unix sockets", e);
        } else {
            self.account(&entries);
        }
        self.entries = entries;
    }

    /// Folds one round's entries into the accumulators.
    fn account(&mut self, entries: &[UnixEntry]) {
        let ours = |e: &UnixEntry| e.inode != 0 && self.inodes.contains_key(&e.inode);
        let listeners: Vec<&UnixEntry> = entries
            .iter()
            .filter(|e| e.state == LISTEN && ours(e))
            .collect();
        let accepted_from = |e: &UnixEntry| {
            e.name.is_some()
                && listeners
                    .iter()
                    .any(|l| l.kind == e.kind && l.name == e.name)
        };
        let mut connected = 0;
        for e in entries {
            let stream = e.kind == STREAM || e.kind == SEQPACKET;
            if !(stream && e.state == ESTABLISHED && (ours(e) || accepted_from(e))) {
                continue;
            }
            connected += 1;
            if self.seen.len() < MAX_TRACKED {
                self.seen.insert(e.cookie);
            }
            if let Some(q) = e.queues {
                self.recv_q.saturating_record(u64::from(q.rqueue));
                self.send_q.saturating_record(u64::from(q.wqueue));
            }
        }
        self.connected_max = self.connected_max.max(connected);
        self.connected_sum += connected;
        for l in &listeners {
            let Some(q) = l.queues else { continue };
            if self.listeners.len() >= MAX_SOCKETS && !self.listeners.contains_key(&l.inode) {
                continue;
            }
            let owner = self.inodes.get(&l.inode).copied();
            let acc = self
                .listeners
                .entry(l.inode)
                .or_insert_with(|| ListenerAcc {
                    name: shown_name(l, owner),
                    kind: l.kind,
                    backlog: q.wqueue,
                    queue: histogram(),
                    full: 0,
                });
            acc.backlog = q.wqueue;
            acc.queue.saturating_record(u64::from(q.rqueue));
            acc.full += u64::from(full(q.rqueue, q.wqueue));
        }
        for e in entries.iter().filter(|e| e.kind == DGRAM && ours(e)) {
            if self.datagram.len() >= MAX_SOCKETS && !self.datagram.contains_key(&e.inode) {
                continue;
            }
            let owner = self.inodes.get(&e.inode).copied();
            let acc = self.datagram.entry(e.inode).or_insert_with(|| DatagramAcc {
                name: shown_name(e, owner),
                waiting: 0,
                samples: 0,
                max: 0,
            });
            acc.samples += 1;
            if let Some(q) = e.queues {
                acc.waiting += u64::from(q.rqueue > 0);
                acc.max = acc.max.max(q.rqueue);
            }
        }
    }

    /// The evidence of the samples taken.
    pub fn finish(self) -> UnixEvidence {
        let rounds = self.samples.saturating_sub(self.failed_samples);
        let mut listeners: Vec<UnixListener> = self
            .listeners
            .values()
            .map(|a| UnixListener {
                name: a.name.clone(),
                kind: kind_name(a.kind).into(),
                backlog: a.backlog,
                accept_queue: quantiles(&a.queue).unwrap_or_default(),
                samples_full: a.full,
                samples: a.queue.len(),
            })
            .collect();
        listeners.sort_by(|a, b| a.name.cmp(&b.name));
        UnixEvidence {
            samples: self.samples,
            failed_samples: self.failed_samples,
            listeners,
            connected: UnixConnections {
                max: self.connected_max,
                mean: if rounds > 0 {
                    self.connected_sum as f64 / rounds as f64
                } else {
                    0.0
                },
                seen: self.seen.len() as u64,
                recv_q: quantiles(&self.recv_q),
                send_q: quantiles(&self.send_q),
            },
            datagram: self
                .datagram
                .into_values()
                .map(|d| UnixDatagram {
                    name: d.name,
                    samples_waiting: d.waiting,
                    samples: d.samples,
                    next_datagram_max: d.max,
                })
                .collect(),
            errors: self.errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::{UnixDatagram as Dgram, UnixListener as Listener, UnixStream};

    /// The tests below sample this very process as the target: each must
    /// not see the sockets another one holds at the same time.
    static THIS_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn alone() -> std::sync::MutexGuard<'static, ()> {
        THIS_PROCESS.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_queue_is_full_above_its_backlog_as_the_kernel_counts() {
        assert!(!full(0, 0) && full(1, 0));
        assert!(!full(2, 2) && full(3, 2));
    }

    /// This process as the target: a listener with backlog 2 that never
    /// accepts, whose queue three connected clients fill (the kernel holds
    /// backlog + 1) before the first sample and keep full through both; a
    /// second listener with an accepted connection and unread bytes; and
    /// a datagram socket with one waiting.
    #[test]
    fn samples_this_process_as_a_unix_target() {
        let _alone = alone();
        let dir = tempfile::tempdir().unwrap();
        let full_path = dir.path().join("full.sock");
        let l = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        l.bind(&socket2::SockAddr::unix(&full_path).unwrap())
            .unwrap();
        l.listen(2).unwrap();
        let waiting: Vec<UnixStream> = (0..3)
            .map(|_| UnixStream::connect(&full_path).unwrap())
            .collect();
        let busy_path = dir.path().join("busy.sock");
        let busy = Listener::bind(&busy_path).unwrap();
        let mut c = UnixStream::connect(&busy_path).unwrap();
        let (accepted, _) = busy.accept().unwrap();
        c.write_all(b"hello").unwrap();
        let dpath = dir.path().join("d.sock");
        let d = Dgram::bind(&dpath).unwrap();
        Dgram::unbound().unwrap().send_to(b"abc", &dpath).unwrap();
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid).unwrap();
        s.sample(&[pid]);
        s.sample(&[pid]);
        let e = s.finish();
        assert_eq!((e.samples, e.failed_samples), (2, 0));
        let name = |p: &std::path::Path| p.to_str().unwrap().to_string();
        let li = e
            .listeners
            .iter()
            .find(|l| l.name == name(&full_path))
            .expect("the full listener");
        assert_eq!((li.kind.as_str(), li.backlog), ("stream", 2));
        assert_eq!(li.accept_queue.max, 3);
        assert_eq!((li.samples_full, li.samples), (2, 2), "{li:?}");
        let other = e
            .listeners
            .iter()
            .find(|l| l.name == name(&busy_path))
            .unwrap();
        assert_eq!((other.accept_queue.max, other.samples_full), (0, 0));
        // The accepted connection, and the four client ends this process
        // holds too (at least: tests beside this one may hold more).
        assert!(e.connected.max >= 5, "{:?}", e.connected);
        assert!(e.connected.seen >= 5);
        assert!(e.connected.recv_q.as_ref().unwrap().max >= 5);
        let dg = e.datagram.iter().find(|x| x.name == name(&dpath)).unwrap();
        assert_eq!(
            (dg.samples_waiting, dg.samples, dg.next_datagram_max),
            (2, 2, 3)
        );
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        drop((waiting, accepted, d));
    }

    /// With 300 connections (600 connected sockets, more than one reply
    /// datagram's worth) every round sees all of them; the CPU time of a
    /// round is printed (`-- --nocapture`), never asserted.
    #[test]
    fn every_one_of_300_unix_connections_is_seen_and_a_rounds_cost_printed() {
        let _alone = alone();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("many.sock");
        let l = Listener::bind(&path).unwrap();
        let keep: Vec<_> = (0..300)
            .map(|_| {
                let c = UnixStream::connect(&path).unwrap();
                (c, l.accept().unwrap().0)
            })
            .collect();
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid).unwrap();
        s.sample(&[pid]);
        let cpu = || {
            // SAFETY: plain data filled by the kernel for this thread.
            let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer and clock id.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let n = 20;
        let t0 = cpu();
        for _ in 0..n {
            s.sample(&[pid]);
        }
        let mut total = 0;
        unix_diag::dump(&mut s.diag, ALL_STATES, |_| total += 1).unwrap();
        eprintln!(
            "one Unix round: {:.3} ms CPU ({total} Unix sockets in the namespace)",
            (cpu() - t0) / n as f64 * 1e3
        );
        let e = s.finish();
        assert_eq!(e.failed_samples, 0, "{:?}", e.errors);
        // This process holds both ends of each (other tests' sockets of
        // this process may add a few).
        assert!(e.connected.max >= 600, "{:?}", e.connected);
        assert!(e.connected.seen >= 600);
        drop(keep);
    }

    /// A connection accepted from the target's listener counts though the
    /// descriptor walk has not seen it yet: it carries the listener's name.
    /// The client's end (another process's: not among the tree's inodes)
    /// and a connection of a listener that is not the target's do not.
    #[test]
    fn an_accepted_connection_counts_before_the_descriptors_are_walked_again() {
        let pid = std::process::id() as i32;
        let mut s = Sampler::new(pid).unwrap();
        s.inodes = [(10, pid)].into();
        let e = |state, inode, name: Option<&[u8]>, rqueue, wqueue| UnixEntry {
            kind: STREAM,
            state,
            inode,
            cookie: inode,
            name: name.map(<[u8]>::to_vec),
            peer: None,
            queues: Some(unix_diag::Queues { rqueue, wqueue }),
        };
        let round = [
            e(LISTEN, 10, Some(b"/run/t.sock"), 0, 128),
            e(ESTABLISHED, 11, Some(b"/run/t.sock"), 7, 0),
            e(ESTABLISHED, 12, None, 0, 7),
            e(LISTEN, 20, Some(b"/run/other.sock"), 0, 5),
            e(ESTABLISHED, 21, Some(b"/run/other.sock"), 0, 0),
        ];
        s.samples += 1;
        s.account(&round);
        let u = s.finish();
        assert_eq!((u.connected.max, u.connected.seen), (1, 1), "{u:?}");
        assert_eq!(u.connected.recv_q.unwrap().max, 7);
        assert_eq!(u.listeners.len(), 1);
        assert_eq!(
            (u.listeners[0].name.as_str(), u.listeners[0].backlog),
            ("/run/t.sock", 128)
        );
    }
}
