//! The delayline backend: a TUN device in each namespace, and a relay
//! thread in sockscope that moves every IP packet from one device to the
//! other through a queue with netem's semantics (the approach of
//! mahimahi's delay, loss and link shells). It needs no qdisc, so it runs
//! where sch_netem is missing.
//!
//! Per direction, a packet read from one device:
//! 1. is dropped with probability `loss` (counted as `dropped_loss`);
//! 2. is dropped when `limit` packets are already queued (`dropped_limit`);
//! 3. otherwise leaves the "wire" once it has been serialized at `rate`
//!    after the previous packet's end (len * 8 / rate, the IP packet's
//!    length: TUN carries no link-layer header), and is written to the
//!    other device at that time + rtt/2 + a jitter sample uniform in
//!    [-jitter, +jitter] (netem's default distribution). Like netem's
//!    time-ordered queue, jitter can reorder packets.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::spec::PathSpec;
use super::{DirectionStats, RelayStats};
use crate::signals::StopFlag;

/// Read buffer: larger than any packet a TUN device with the default MTU
/// (1500) hands out.
const BUF: usize = 65536;
/// Packets read from one device per wake-up before the other is served.
const BATCH: usize = 64;

/// A queued packet: release time, arrival order (ties), payload.
type Queued = Reverse<(Instant, u64, Vec<u8>)>;

/// One direction: packets read from `from`, written to `to`.
struct Direction {
    from: RawFd,
    to: RawFd,
    queue: BinaryHeap<Queued>,
    /// When the link finishes serializing the last accepted packet.
    wire_free: Instant,
    stats: DirectionStats,
}

impl Direction {
    fn new(from: RawFd, to: RawFd, now: Instant) -> Self {
        Direction {
            from,
            to,
            queue: BinaryHeap::new(),
            wire_free: now,
            stats: DirectionStats::default(),
        }
    }
}

/// The running relay; stops (and is joined) on drop.
pub struct Relay {
    stop: Arc<StopFlag>,
    handle: Option<JoinHandle<RelayStats>>,
    /// Keeps both devices (and through them both namespaces) alive.
    _tuns: Arc<(OwnedFd, OwnedFd)>,
}

impl Relay {
    /// Starts relaying between `gen_tun` (the generator's side) and
    /// `target_tun` under `spec`.
    pub fn start(spec: &PathSpec, gen_tun: OwnedFd, target_tun: OwnedFd) -> Result<Relay> {
        let stop = Arc::new(StopFlag::new()?);
        let tuns = Arc::new((gen_tun, target_tun));
        let (s, t, sp) = (Arc::clone(&stop), Arc::clone(&tuns), spec.clone());
        let handle = std::thread::Builder::new()
            .name("sockscope-path".into())
            .spawn(move || {
                crate::signals::keep_off_this_thread();
                relay(&sp, t.0.as_raw_fd(), t.1.as_raw_fd(), &s)
            })
            .context("starting the path relay thread")?;
        Ok(Relay {
            stop,
            handle: Some(handle),
            _tuns: tuns,
        })
    }

    /// Stops the relay and returns its counters.
    pub fn finish(mut self) -> RelayStats {
        self.stop.raise();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The relay loop; returns the counters once `stop` is raised.
fn relay(spec: &PathSpec, gen_fd: RawFd, target_fd: RawFd, stop: &StopFlag) -> RelayStats {
    // The default 50 us timer slack would add up to 50 us to every
    // release; 1 ns makes the wake-ups as precise as the timer allows.
    // SAFETY: prctl on this thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let cpu0 = thread_cpu_s();
    let now = Instant::now();
    let mut dirs = [
        Direction::new(gen_fd, target_fd, now),
        Direction::new(target_fd, gen_fd, now),
    ];
    let mut rng = SmallRng::seed_from_u64(u64::from(std::process::id()) ^ 0x5eed);
    let mut buf = vec![0u8; BUF];
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut seq = 0u64;
    let one_way = spec.one_way();
    let jitter_ns = spec.jitter.as_nanos() as i64;
    let mut max_queued = 0usize;
    loop {
        let now = Instant::now();
        // Release every due packet.
        for d in dirs.iter_mut() {
            while d.queue.peek().is_some_and(|Reverse((t, _, _))| *t <= now) {
                let Some(Reverse((_, _, pkt))) = d.queue.pop() else {
                    break;
                };
                // SAFETY: writing an owned buffer to our TUN descriptor.
                let n = unsafe { libc::write(d.to, pkt.as_ptr().cast(), pkt.len()) };
                if n < 0 {
                    d.stats.write_errors += 1;
                } else {
                    d.stats.delivered += 1;
                }
                pool.push(pkt);
            }
        }
        let next = dirs
            .iter()
            .filter_map(|d| d.queue.peek().map(|Reverse((t, _, _))| *t))
            .min();
        let timeout = next.map(|t| t.saturating_duration_since(Instant::now()));
        let mut pfds = [
            libc::pollfd {
                fd: gen_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: target_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        // SAFETY: three valid pollfds; the timespec outlives the call.
        let rc = unsafe {
            libc::ppoll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                ts.as_ref().map_or(std::ptr::null(), |t| t as *const _),
                std::ptr::null(),
            )
        };
        if rc < 0 {
            continue; // EINTR: go round.
        }
        if pfds[2].revents != 0 {
            break;
        }
        for (i, d) in dirs.iter_mut().enumerate() {
            if pfds[i].revents == 0 {
                continue;
            }
            for _ in 0..BATCH {
                // SAFETY: reading into our buffer from our TUN descriptor.
                let n = unsafe { libc::read(d.from, buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    break;
                }
                let n = n as usize;
                let arrival = Instant::now();
                d.stats.packets += 1;
                d.stats.bytes += n as u64;
                if spec.loss > 0.0 && rng.random::<f64>() < spec.loss {
                    d.stats.dropped_loss += 1;
                    continue;
                }
                if d.queue.len() >= spec.limit {
                    d.stats.dropped_limit += 1;
                    continue;
                }
                let sent = match spec.rate_bps {
                    Some(bps) => {
                        let ser = Duration::from_nanos(
                            (n as u128 * 8 * 1_000_000_000 / u128::from(bps)) as u64,
                        );
                        d.wire_free = d.wire_free.max(arrival) + ser;
                        d.wire_free
                    }
                    None => arrival,
                };
                let mut release = sent + one_way;
                if jitter_ns > 0 {
                    let j = rng.random_range(-jitter_ns..=jitter_ns);
                    release = if j >= 0 {
                        release + Duration::from_nanos(j as u64)
                    } else {
                        release - Duration::from_nanos(j.unsigned_abs())
                    };
                }
                let mut pkt = pool.pop().unwrap_or_default();
                pkt.clear();
                pkt.extend_from_slice(&buf[..n]);
                seq += 1;
                d.queue.push(Reverse((release, seq, pkt)));
                max_queued = max_queued.max(d.queue.len());
            }
        }
    }
    let [a, b] = dirs;
    RelayStats {
        to_target: a.stats,
        to_generator: b.stats,
        max_queued,
        cpu_s: (thread_cpu_s() - cpu0).max(0.0),
    }
}
