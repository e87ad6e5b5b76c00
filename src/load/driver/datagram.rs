//! Connected UDP sockets (udp-rr's state machine): each socket keeps up to
//! `pipeline` requests in flight (closed loop), or takes sends at intended
//! times (open loop, --rate), and matches each reply datagram to its
//! request by the exchange's [`Exchange::reply_id`].
//!
//! Each socket is `connect()`ed to the target, so only the target's
//! datagrams reach it and an ICMP port unreachable comes back as
//! ECONNREFUSED: the requests then in flight fail with that class and the
//! socket pauses (the same bounded backoff as a TCP reconnect) before it
//! sends again. A request not answered within --timeout is lost (error
//! class `lost`, checked every 10 ms) and its socket moves on. A reply that
//! matches no request in flight (it came after its request was counted
//! lost, or twice) is counted late, never as a response; a datagram that
//! names no request at all is counted as garbage.
//!
//! Request ids are `seq as u16` (the 16 bits DNS and memcached carry):
//! before a socket reuses an id, the request that held it (65536 requests
//! earlier on that socket) is counted lost, so an id in flight is always
//! unique and a reply finds its request by one binary search.
//!
//! Per request the worker makes one send and, in the common case, one recv
//! (it stops reading once nothing is left in flight instead of paying for
//! a recv that would say EAGAIN); epoll_wait is amortised over every socket
//! that became ready. A worker with a single socket in closed loop has
//! nothing to amortise: it waits for the next reply in recv itself
//! ([`BLOCKING_WAIT`] at a time, then back to the event loop for timeouts
//! and the end of the run), one syscall per request fewer than epoll_wait
//! then recv (measured against sockperf's blocking client in
//! docs/benchmarks.md, section J).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use socket2::{Protocol, SockAddr, Socket, Type};

use crate::endpoint::Endpoint;
use crate::load::driver::plan::{TcpPlan, WorkerCtx};
use crate::load::driver::tally::WorkerTally;
use crate::load::driver::{self, Backoff, DatagramCounts, WorkerConns, WorkerCore, WorkerEnd};
use crate::load::workload::{ErrorClass, Exchange, Parsed, ReplyId};
use crate::poller;

/// Requests a socket may send before an id repeats.
const ID_SPACE: u64 = 1 << 16;
/// Longest a single-socket worker waits in recv before it goes back to its
/// event loop.
const BLOCKING_WAIT: libc::timeval = libc::timeval {
    tv_sec: 0,
    tv_usec: 1000,
};

/// A request in flight.
struct Pending<C> {
    seq: u64,
    intended: u64,
    sent: u64,
    /// The exchange's parse state of this request's reply.
    cursor: C,
}

struct DgramSock<C> {
    sock: Option<Socket>,
    fd: RawFd,
    /// Requests in flight, oldest (lowest seq) first.
    pending: VecDeque<Pending<C>>,
    next_seq: u64,
    /// Not open, or paused after an error: may send again at this time.
    retry_at: Option<u64>,
    /// The last send found the socket buffer full: waiting for EPOLLOUT.
    blocked: bool,
    backoff: Backoff,
    /// A reply came on this socket at least once.
    answered: bool,
    idle_listed: bool,
}

impl<C> DgramSock<C> {
    fn new() -> Self {
        Self {
            sock: None,
            fd: -1,
            pending: VecDeque::new(),
            next_seq: 0,
            retry_at: Some(0),
            blocked: false,
            backoff: Backoff::default(),
            answered: false,
            idle_listed: false,
        }
    }

    /// Open, not paused, not waiting for room: may send now.
    fn usable(&self) -> bool {
        self.sock.is_some() && self.retry_at.is_none() && !self.blocked
    }
}

struct DatagramWorker<'a, E: Exchange> {
    core: WorkerCore<'a>,
    exchange: &'a E,
    pipeline: usize,
    socks: Vec<DgramSock<E::Cursor>>,
    /// The request being written (one per send, reused).
    out: Vec<u8>,
    counts: DatagramCounts,
    /// One socket in closed loop: replies are waited for in recv (its
    /// socket is blocking, with a [`BLOCKING_WAIT`] receive timeout; every
    /// other call passes MSG_DONTWAIT).
    blocking: bool,
}

/// Runs one worker of UDP sockets until its share of the run is done.
pub fn run<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    ctx: &WorkerCtx,
    tally: &mut WorkerTally,
) -> io::Result<WorkerEnd> {
    let mut w = DatagramWorker {
        core: WorkerCore::new(plan, ctx, exchange.response_len())?,
        exchange,
        pipeline: plan.mode.pipeline().unwrap_or(1),
        socks: (0..ctx.conns).map(|_| DgramSock::new()).collect(),
        out: Vec::with_capacity(exchange.request_len().unwrap_or(512)),
        counts: DatagramCounts::default(),
        blocking: ctx.conns == 1 && ctx.rate.is_none(),
    };
    driver::run(&mut w, tally)
}

/// A datagram socket connected to `addr` (UDP, or a Unix datagram
/// socket), bound to `source` first when given (UDP) or to an autobind
/// abstract name (Unix: a server can only reply to a named client):
/// non-blocking, or `blocking` with a [`BLOCKING_WAIT`] receive timeout.
fn open_socket(
    addr: &Endpoint,
    source: Option<std::net::IpAddr>,
    blocking: bool,
) -> io::Result<Socket> {
    let ty = if blocking {
        Type::DGRAM.cloexec()
    } else {
        Type::DGRAM.nonblocking().cloexec()
    };
    let unix = addr.is_unix();
    let sock = Socket::new(addr.domain(), ty, (!unix).then_some(Protocol::UDP))?;
    if blocking {
        // SAFETY: valid fd and option value.
        let rc = unsafe {
            libc::setsockopt(
                crate::load::driver::socket::fd_of(&sock),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&BLOCKING_WAIT as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if unix {
        // An empty name asks the kernel for a unique abstract one.
        sock.bind(&SockAddr::unix("")?)?;
    } else if let Some(ip) = source {
        sock.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    let to = addr.connect_addr()?;
    sock.connect(&to.addr).inspect_err(|e| {
        if e.raw_os_error() == Some(libc::ECONNREFUSED) {
            to.refused();
        }
    })?;
    Ok(sock)
}

/// What one send did.
enum Sent {
    /// The request is in flight.
    Ok,
    /// Not sent: the socket waits for room, or paused after an error.
    No,
}

impl<'a, E: Exchange> WorkerConns<'a> for DatagramWorker<'a, E> {
    fn core(&mut self) -> &mut WorkerCore<'a> {
        &mut self.core
    }

    fn core_ref(&self) -> &WorkerCore<'a> {
        &self.core
    }

    fn in_flight(&self) -> u64 {
        self.socks.iter().map(|s| s.pending.len() as u64).sum()
    }

    fn close_idle(&mut self, _tally: &mut WorkerTally) {
        for s in &mut self.socks {
            if s.sock.is_some() && s.pending.is_empty() {
                // Dropping the socket closes it and leaves epoll.
                s.sock = None;
                s.fd = -1;
                s.retry_at = Some(u64::MAX);
            }
        }
    }

    fn finish(&mut self) -> WorkerEnd {
        WorkerEnd {
            established: self.socks.iter().filter(|s| s.answered).count(),
            datagrams: self.counts,
            ..Default::default()
        }
    }

    fn take_idle(&mut self, i: usize, _now: u64) -> bool {
        let s = &mut self.socks[i];
        s.idle_listed = false;
        s.usable() && s.pending.len() < self.pipeline
    }

    fn issue(&mut self, i: usize, intended: u64, now: u64, tally: &mut WorkerTally) {
        match self.send(i, Some(intended), now, tally) {
            Sent::Ok => self.mark_idle(i),
            Sent::No => {
                // The intended time waits for another socket (or this one).
                if let Some(s) = self.core.sched.as_mut() {
                    s.backlog.push_front(intended);
                }
            }
        }
    }

    fn handle(&mut self, ev: poller::Ready, tally: &mut WorkerTally) {
        let i = ev.token as usize;
        if i >= self.socks.len() || self.socks[i].sock.is_none() {
            return;
        }
        let now = self.core.ctx.clock.now();
        if ev.writable() && self.socks[i].blocked {
            self.socks[i].blocked = false;
            let fd = self.socks[i].fd;
            if let Err(e) = self.core.poller.modify(fd, i as u64, poller::IN) {
                self.pause(i, now, ErrorClass::of(&e), tally);
                return;
            }
        }
        if ev.readable() {
            self.read(i, now, tally);
        }
        self.go_on(i, now, tally);
        if self.blocking {
            self.wait_replies(i, now, tally);
        }
    }

    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut WorkerTally) {
        for i in 0..self.socks.len() {
            // Requests past their timeout are lost; the oldest goes first.
            let mut expired = false;
            while self.socks[i]
                .pending
                .front()
                .is_some_and(|p| now.saturating_sub(p.sent) > timeout)
            {
                self.socks[i].pending.pop_front();
                tally.error(now, ErrorClass::Lost);
                expired = true;
            }
            let retry_at = self.socks[i].retry_at;
            match retry_at {
                Some(at) if at <= now && self.may_send_more(now) => {
                    if self.socks[i].sock.is_none() {
                        self.open(i, now, tally);
                    } else {
                        self.socks[i].retry_at = None;
                    }
                    self.go_on(i, now, tally);
                }
                None if expired => self.go_on(i, now, tally),
                _ => {}
            }
        }
    }
}

impl<E: Exchange> DatagramWorker<'_, E> {
    /// Opens socket `i`; a failure is counted and retried after a backoff.
    fn open(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let plan = self.core.plan;
        let src = self.core.source_for(i, 0);
        let opened = open_socket(&plan.addr, src, self.blocking).and_then(|sock| {
            let fd = crate::load::driver::socket::fd_of(&sock);
            self.core.poller.add(fd, i as u64, poller::IN)?;
            Ok((sock, fd))
        });
        let s = &mut self.socks[i];
        match opened {
            Ok((sock, fd)) => {
                s.sock = Some(sock);
                s.fd = fd;
                s.retry_at = None;
            }
            Err(e) => {
                s.retry_at = Some(now + s.backoff.next_delay());
                tally.error(now, ErrorClass::of(&e));
            }
        }
    }

    /// Sends the next request of socket `i`, meant for `intended` (open
    /// loop) or for now (closed loop: None). The send time is read just
    /// before the send, so the latency leaves out the generator's own
    /// bookkeeping of the reply before it.
    fn send(&mut self, i: usize, intended: Option<u64>, now: u64, tally: &mut WorkerTally) -> Sent {
        let s = &mut self.socks[i];
        let seq = s.next_seq;
        // The id about to be used must not name a request still in flight.
        while s.pending.front().is_some_and(|p| seq - p.seq >= ID_SPACE) {
            s.pending.pop_front();
            tally.error(now, ErrorClass::Lost);
        }
        self.out.clear();
        self.exchange.push_request(&mut self.out, seq);
        let at = self.core.ctx.clock.now();
        let intended = intended.unwrap_or(at);
        // SAFETY: valid fd and buffer.
        let n = unsafe {
            libc::send(
                s.fd,
                self.out.as_ptr().cast(),
                self.out.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            s.next_seq += 1;
            s.pending.push_back(Pending {
                seq,
                intended,
                sent: at,
                cursor: E::Cursor::default(),
            });
            tally.bytes_sent += n as u64;
            self.counts.sent += 1;
            self.core.count_issued(intended);
            return Sent::Ok;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                s.blocked = true;
                let fd = s.fd;
                if let Err(e) = self
                    .core
                    .poller
                    .modify(fd, i as u64, poller::IN | poller::OUT)
                {
                    self.pause(i, now, ErrorClass::of(&e), tally);
                }
            }
            _ => self.pause(i, now, ErrorClass::of(&e), tally),
        }
        Sent::No
    }

    /// An error on socket `i` (an ICMP port unreachable reported as
    /// ECONNREFUSED, a failed send): the requests in flight fail with its
    /// class (at least one error is counted), and the socket pauses for a
    /// backoff before it sends again.
    fn pause(&mut self, i: usize, now: u64, class: ErrorClass, tally: &mut WorkerTally) {
        let s = &mut self.socks[i];
        let n = s.pending.len().max(1);
        s.pending.clear();
        for _ in 0..n {
            tally.error(now, class);
        }
        s.retry_at = Some(now + s.backoff.next_delay());
    }

    /// One recv of a datagram on socket `i` into the read buffer (`flags`
    /// beside MSG_TRUNC, so a datagram larger than the buffer shows its
    /// real length); its bytes are counted.
    fn recv_one(&mut self, i: usize, flags: i32, tally: &mut WorkerTally) -> io::Result<usize> {
        let buf = &mut self.core.buf;
        // SAFETY: valid fd and buffer.
        let n = unsafe {
            libc::recv(
                self.socks[i].fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        tally.bytes_received += n as u64;
        Ok(n as usize)
    }

    /// A recv that failed: nothing to read now (EAGAIN, EINTR) is not an
    /// error; anything else pauses the socket.
    fn recv_failed(&mut self, i: usize, now: u64, e: &io::Error, tally: &mut WorkerTally) {
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => {}
            _ => self.pause(i, now, ErrorClass::of(e), tally),
        }
    }

    /// The `n` bytes in the read buffer as a reply on socket `i`; false
    /// when they are larger than any reply this workload reads (64 KiB+):
    /// counted as garbage.
    fn take_reply(&mut self, i: usize, n: usize, now: u64, tally: &mut WorkerTally) -> bool {
        if n > self.core.buf.len() {
            self.counts.garbage += 1;
            return false;
        }
        reply(
            self.exchange,
            &mut self.socks[i],
            &self.core.buf[..n],
            now,
            tally,
            &mut self.counts,
        );
        true
    }

    /// Reads socket `i`'s datagrams until none is left or nothing is in
    /// flight any more.
    fn read(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        loop {
            let n = match self.recv_one(i, libc::MSG_DONTWAIT, tally) {
                Ok(n) => n,
                Err(e) => return self.recv_failed(i, now, &e, tally),
            };
            // After garbage, read on: it answered nothing.
            if self.take_reply(i, n, now, tally) && self.socks[i].pending.is_empty() {
                return;
            }
        }
    }

    /// A single-socket worker in closed loop: waits for socket `i`'s
    /// replies in recv and sends the next requests, until nothing is in
    /// flight, a wait times out ([`BLOCKING_WAIT`]), the run is stopped, or
    /// a housekeeping period has passed since `since`; the event loop then
    /// takes over (timeouts, the end of the run).
    fn wait_replies(&mut self, i: usize, since: u64, tally: &mut WorkerTally) {
        let ctx = self.core.ctx;
        let until = since + driver::HOUSEKEEPING_NS;
        while self.socks[i].usable()
            && !self.socks[i].pending.is_empty()
            && !ctx.stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            // The socket is blocking with a receive timeout, so this waits
            // at most BLOCKING_WAIT.
            let got = self.recv_one(i, 0, tally);
            let now = ctx.clock.now();
            let n = match got {
                Ok(n) => n,
                Err(e) => return self.recv_failed(i, now, &e, tally),
            };
            let ended = ctx.end.is_some_and(|e| now >= e);
            if ended {
                // As the event loop's drain would: an answer after the
                // window is not a transaction.
                tally.close_window();
            }
            self.take_reply(i, n, now, tally);
            self.go_on(i, now, tally);
            if ended || now >= until {
                return;
            }
        }
    }

    /// After socket `i` changed (replies, a loss, room to write, the end
    /// of a pause): its next requests (closed loop) or its place among the
    /// free sockets (open loop).
    fn go_on(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        if !self.socks[i].usable() {
            return;
        }
        if self.core.sched.is_some() {
            self.mark_idle(i);
            driver::release_and_dispatch(self, now, tally);
        } else {
            while self.socks[i].usable()
                && self.socks[i].pending.len() < self.pipeline
                && self.core.ctx.may_issue(self.core.issued_measured, now)
            {
                if let Sent::No = self.send(i, None, now, tally) {
                    break;
                }
            }
        }
    }

    fn mark_idle(&mut self, i: usize) {
        let s = &mut self.socks[i];
        if !s.idle_listed && s.usable() && s.pending.len() < self.pipeline {
            s.idle_listed = true;
            self.core.idle.push(i);
        }
    }

    /// Nothing is worth sending once the window ended, the count quota
    /// went out, or the open-loop schedule is done.
    fn may_send_more(&self, now: u64) -> bool {
        let ctx = self.core.ctx;
        if ctx.end.is_some_and(|e| now >= e) {
            return false;
        }
        match &self.core.sched {
            Some(s) => !s.exhausted() || !s.backlog.is_empty(),
            None => ctx.may_issue(self.core.issued_measured, now),
        }
    }
}

/// One reply datagram on socket `s`: matched to its request, parsed, and
/// counted (a response, an error of its request, late, or garbage).
#[inline]
fn reply<E: Exchange>(
    exchange: &E,
    s: &mut DgramSock<E::Cursor>,
    data: &[u8],
    now: u64,
    tally: &mut WorkerTally,
    counts: &mut DatagramCounts,
) {
    let k = match exchange.reply_id(data) {
        ReplyId::Garbage => {
            counts.garbage += 1;
            return;
        }
        ReplyId::Any if s.pending.is_empty() => {
            counts.late += 1;
            return;
        }
        ReplyId::Any => 0,
        ReplyId::Id(id) => match find(&s.pending, id) {
            Some(k) => k,
            None => {
                counts.late += 1;
                return;
            }
        },
    };
    let p = &mut s.pending[k];
    let parsed = exchange.parse(&mut p.cursor, data, p.seq);
    match parsed {
        Parsed::Partial => {}
        Parsed::Complete(_, outcome) => {
            if let Some(p) = s.pending.remove(k) {
                if !s.answered {
                    s.answered = true;
                    tally.connected(now, 0);
                }
                s.backoff.reset();
                tally.answer(now, &outcome, p.intended, p.sent);
            }
        }
        Parsed::Error(class) => {
            s.pending.remove(k);
            tally.error(now, class);
        }
    }
}

/// The index in `pending` (ascending seqs spanning less than the id space)
/// of the request whose id is `id`.
#[inline]
fn find<C>(pending: &VecDeque<Pending<C>>, id: u16) -> Option<usize> {
    let first = pending.front()?.seq;
    let seq = first + u64::from(id.wrapping_sub(first as u16));
    if pending.len() == 1 {
        return (first == seq).then_some(0);
    }
    pending.binary_search_by_key(&seq, |p| p.seq).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(seqs: &[u64]) -> VecDeque<Pending<()>> {
        seqs.iter()
            .map(|&seq| Pending {
                seq,
                intended: 0,
                sent: 0,
                cursor: (),
            })
            .collect()
    }

    #[test]
    fn a_reply_id_finds_its_request_across_the_wrap() {
        let p = pending(&[65_534, 65_535, 65_537, 65_538]);
        assert_eq!(find(&p, 65_535), Some(1));
        assert_eq!(find(&p, 1), Some(2)); // 65_537 as u16
        assert_eq!(find(&p, 0), None); // 65_536: answered already
        assert_eq!(find(&p, 65_533), None); // older than anything in flight
        assert_eq!(find(&pending(&[]), 3), None);
        assert_eq!(find(&pending(&[7]), 7), Some(0));
        assert_eq!(find(&pending(&[7]), 8), None);
    }
}
