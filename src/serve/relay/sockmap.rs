//! The kernel path of `serve relay --mode sockmap`: the SOCKHASH, the peer
//! table and the stream verdict program of src/bpf/relay.bpf.c.
//!
//! Linking a pair (see [`Sockmap::link`]) follows an order that loses and
//! reorders nothing:
//! 1. both peer entries are written first, so the verdict never sees a
//!    socket without knowing its peer;
//! 2. the upstream socket is inserted, then the client (clients usually
//!    talk first, and data that reaches a socket before it is inserted just
//!    waits in its receive queue);
//! 3. SO_RCVLOWAT is set on both, which makes TCP call its data-ready
//!    callback, now the verdict, over whatever arrived before insertion,
//!    in order. Bytes a client sent right after connecting must not sit in
//!    its queue until its next packet, or forever (the trap of the proxy
//!    this relay learned from). Linux 6.18 already runs the verdict over
//!    queued bytes at insertion (tests/relay.rs proves the bytes arrive
//!    either way, with none through userspace); the nudge costs one
//!    setsockopt and covers kernels that do not;
//! 4. a redirect that misses (data on the upstream between steps 2a and 2b)
//!    marks that socket tainted in the BPF program itself: its data then
//!    always goes to its own receive queue and userspace relays it, so no
//!    later redirected byte can overtake it. The loop watches for that.

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsFd, AsRawFd, RawFd};

use anyhow::{Context, Result, anyhow};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject};

mod skel {
    #![allow(clippy::all, clippy::pedantic, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/relay.skel.rs"));
}
use skel::{RelaySkel, RelaySkelBuilder, types};

use crate::probe::pod::{self, Plain, as_bytes};
use crate::report::serve::relay::VerdictStats;

// SAFETY: skeleton structs generated from src/bpf/relay.h: repr(C),
// integers and explicit padding only (see trace/pod.rs).
unsafe impl Plain for types::relay_peer {}
// SAFETY: as above.
unsafe impl Plain for types::relay_stats {}

/// Socket cookies of a linked pair.
#[derive(Clone, Copy, Debug)]
pub struct PairKeys {
    /// The client socket's cookie.
    pub client: u64,
    /// The upstream socket's cookie.
    pub upstream: u64,
}

/// The loaded maps (shared by all relay loops: map updates are syscalls on
/// file descriptors, safe from any thread).
pub struct Sockmap {
    socks: MapHandle,
    peers: MapHandle,
    stats: MapHandle,
    ncpus: usize,
}

/// Keeps the BPF object (and so the verdict program) alive; drop it last.
pub struct Loaded {
    _skel: Box<RelaySkel<'static>>,
}

/// SO_COOKIE of a socket.
pub fn cookie(fd: RawFd) -> io::Result<u64> {
    let mut c: u64 = 0;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: valid fd and out pointers of the right size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&mut c as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(c)
}

impl Sockmap {
    /// Loads the program and maps sized for `max_pairs` pairs, and attaches
    /// the verdict to the SOCKHASH. Fails with the kernel's or verifier's
    /// reason (the caller falls back to userspace unless --strict).
    pub fn load(max_pairs: u32) -> Result<(Self, Loaded)> {
        // The relay runs until the process ends, so the object's storage
        // lives as long: leaked once, freed by the kernel at exit.
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = RelaySkelBuilder::default()
            .open(storage)
            .context("opening the relay BPF object")?;
        let entries = max_pairs.saturating_mul(2).max(2);
        open.maps
            .socks
            .set_max_entries(entries)
            .context("sizing the sockhash")?;
        open.maps
            .peers
            .set_max_entries(entries)
            .context("sizing the peer table")?;
        let skel = open
            .load()
            .map_err(|e| anyhow!("loading the relay BPF program: {e}"))?;
        skel.progs
            .relay_verdict
            .attach_sockmap(skel.maps.socks.as_fd().as_raw_fd())
            .map_err(|e| anyhow!("attaching the stream verdict to the sockhash: {e}"))?;
        let handle = |m: &libbpf_rs::MapMut<'_>, what: &str| {
            MapHandle::try_from(m).with_context(|| format!("duplicating the {what} fd"))
        };
        let me = Self {
            socks: handle(&skel.maps.socks, "sockhash")?,
            peers: handle(&skel.maps.peers, "peer table")?,
            stats: handle(&skel.maps.stats, "stats")?,
            ncpus: libbpf_rs::num_possible_cpus().context("counting CPUs")?,
        };
        Ok((
            me,
            Loaded {
                _skel: Box::new(skel),
            },
        ))
    }

    /// Hands a connected (client, upstream) pair to the kernel (see the
    /// module docs for the order). On error nothing stays linked.
    pub fn link(&self, client: RawFd, upstream: RawFd) -> Result<PairKeys> {
        let keys = PairKeys {
            client: cookie(client).context("SO_COOKIE of the client")?,
            upstream: cookie(upstream).context("SO_COOKIE of the upstream")?,
        };
        let result = self.link_keys(client, upstream, keys);
        if result.is_err() {
            self.unlink(keys);
        }
        result.map(|_| keys)
    }

    fn link_keys(&self, client: RawFd, upstream: RawFd, k: PairKeys) -> Result<()> {
        let peer = |p: u64| types::relay_peer {
            peer: p,
            ..Default::default()
        };
        self.peers
            .update(
                &k.client.to_ne_bytes(),
                as_bytes(&peer(k.upstream)),
                MapFlags::ANY,
            )
            .context("writing the client's peer entry")?;
        self.peers
            .update(
                &k.upstream.to_ne_bytes(),
                as_bytes(&peer(k.client)),
                MapFlags::ANY,
            )
            .context("writing the upstream's peer entry")?;
        self.socks
            .update(
                &k.upstream.to_ne_bytes(),
                &(upstream as u64).to_ne_bytes(),
                MapFlags::NO_EXIST,
            )
            .context("inserting the upstream socket into the sockhash")?;
        self.socks
            .update(
                &k.client.to_ne_bytes(),
                &(client as u64).to_ne_bytes(),
                MapFlags::NO_EXIST,
            )
            .context("inserting the client socket into the sockhash")?;
        for (fd, who) in [(upstream, "upstream"), (client, "client")] {
            set_rcvlowat(fd, 1).with_context(|| format!("flushing the {who}'s early bytes"))?;
        }
        Ok(())
    }

    /// Removes a pair from both maps (closing the sockets would remove them
    /// from the sockhash too; the peer entries need this).
    pub fn unlink(&self, k: PairKeys) {
        for key in [k.client, k.upstream] {
            let _ = self.socks.delete(&key.to_ne_bytes());
            let _ = self.peers.delete(&key.to_ne_bytes());
        }
    }

    fn peer_entry(&self, cookie: u64) -> Option<types::relay_peer> {
        let v = self
            .peers
            .lookup(&cookie.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()?;
        pod::read(&v)
    }

    /// True once the verdict found no peer for this socket: its data now
    /// reaches userspace, which must relay it.
    pub fn tainted(&self, cookie: u64) -> bool {
        self.peer_entry(cookie)
            .is_some_and(|p| p.tainted == types::relay_taint::RELAY_TAINTED)
    }

    /// Payload bytes the verdict redirected from this socket to its peer
    /// (None once the pair is unlinked).
    pub fn redirected_bytes(&self, cookie: u64) -> Option<u64> {
        self.peer_entry(cookie).map(|p| p.redirected_bytes)
    }

    /// The verdict program's counters.
    pub fn stats(&self) -> VerdictStats {
        let mut out = VerdictStats::default();
        let Ok(Some(per_cpu)) = self.stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) else {
            return out;
        };
        for v in per_cpu.iter().take(self.ncpus) {
            let Some(s) = pod::read::<types::relay_stats>(v) else {
                continue;
            };
            out.redirected_skbs += s.redirected_skbs;
            out.redirected_bytes += s.redirected_bytes;
            out.passed_skbs += s.passed_skbs;
            out.passed_bytes += s.passed_bytes;
            out.misses += s.misses;
            out.empty_skbs += s.empty_skbs;
        }
        out
    }
}

fn set_rcvlowat(fd: RawFd, v: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd and option value.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
