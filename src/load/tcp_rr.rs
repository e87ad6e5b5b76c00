//! tcp-rr: persistent connections, each keeping `pipeline` requests in
//! flight (closed loop), or sending at intended times (open loop, --rate).
//!
//! Per transaction the worker makes one write and, in the common case, one
//! read; epoll_wait is amortised over every connection that became ready.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use socket2::Socket;

use super::conn::{self, ReadOutcome};
use super::driver::{self, Workload};
use super::plan::{Backoff, TcpPlan, WorkerCtx};
use super::schedule::Schedule;
use super::tally::{ErrorClass, Tally};
use crate::poller::{self, Poller};

#[derive(Clone, Copy, Debug)]
struct Pending {
    seq: u64,
    intended: u64,
    sent: u64,
}

#[derive(Debug, PartialEq)]
enum State {
    Down { retry_at: u64 },
    Connecting { since: u64 },
    Up,
}

struct Conn {
    sock: Option<Socket>,
    fd: RawFd,
    state: State,
    inflight: VecDeque<Pending>,
    got: usize,
    out: Vec<u8>,
    out_off: usize,
    writing: bool,
    next_seq: u64,
    backoff: Backoff,
    ever_up: bool,
    idle_listed: bool,
    /// Local address of the current socket, once connected.
    local: Option<SocketAddr>,
    /// Responses completed on the current socket.
    answered: u64,
}

impl Conn {
    fn new() -> Self {
        Self {
            sock: None,
            fd: -1,
            state: State::Down { retry_at: 0 },
            inflight: VecDeque::new(),
            got: 0,
            out: Vec::new(),
            out_off: 0,
            writing: false,
            next_seq: 0,
            backoff: Backoff::default(),
            ever_up: false,
            idle_listed: false,
            local: None,
            answered: 0,
        }
    }
}

/// What a worker reports besides its tally.
#[derive(Debug, Default)]
pub struct WorkerEnd {
    /// Connections that were established at least once.
    pub established: usize,
    /// Requests in flight when the run ended (not counted as errors).
    pub unanswered: u64,
    /// Open-loop intended sends dropped because the backlog was full.
    pub backlog_overflow: u64,
    /// Open-loop intended sends still waiting for a free connection.
    pub backlog_at_end: u64,
    /// True when count mode gave up for lack of progress.
    pub stalled: bool,
    /// tcp-rr: every socket that was connected, with the responses it
    /// completed (profile uses them to tell which process served what).
    pub connections: Vec<ConnTally>,
}

/// One connection of a tcp-rr run: its local address and the responses
/// completed on it (warm-up and drain included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnTally {
    /// Local address of the generator's socket.
    pub local: SocketAddr,
    /// Responses completed on it.
    pub transactions: u64,
}

impl WorkerEnd {
    /// Fills in what an open-loop schedule left behind.
    pub fn record_backlog(&mut self, sched: Option<&Schedule>) {
        if let Some(s) = sched {
            self.backlog_overflow = s.overflowed;
            self.backlog_at_end = s.backlog.len() as u64;
        }
    }
}

struct Worker<'a> {
    plan: &'a TcpPlan,
    ctx: &'a WorkerCtx,
    poller: Poller,
    conns: Vec<Conn>,
    buf: Vec<u8>,
    sched: Option<Schedule>,
    idle: Vec<usize>,
    issued_measured: u64,
    resp_len: usize,
    /// Connects started, for --connect-rate.
    connects_started: u64,
    started_at: u64,
    /// Sockets closed so far, with what they completed.
    closed: Vec<ConnTally>,
}

/// Runs one tcp-rr worker until its share of the run is done.
pub fn run(plan: &TcpPlan, ctx: &WorkerCtx, tally: &mut Tally) -> io::Result<WorkerEnd> {
    let resp_len = plan.exchange.resp_len();
    let mut w = Worker {
        plan,
        ctx,
        poller: Poller::new(1024)?,
        conns: (0..ctx.conns).map(|_| Conn::new()).collect(),
        buf: vec![0u8; resp_len.clamp(64 * 1024, 1 << 20)],
        sched: ctx
            .rate
            .map(|r| Schedule::new(r, ctx.clock.now(), ctx.measure_from, ctx.quota)),
        idle: Vec::new(),
        issued_measured: 0,
        resp_len,
        connects_started: 0,
        started_at: ctx.clock.now(),
        closed: Vec::new(),
    };
    let stalled = driver::drive(&mut w, plan, ctx, tally)?;
    tally.finish();
    for i in 0..w.conns.len() {
        w.retire(i);
    }
    let mut end = WorkerEnd {
        established: w.conns.iter().filter(|c| c.ever_up).count(),
        unanswered: w.conns.iter().map(|c| c.inflight.len() as u64).sum(),
        stalled,
        connections: std::mem::take(&mut w.closed),
        ..Default::default()
    };
    end.record_backlog(w.sched.as_ref());
    Ok(end)
}

impl Workload for Worker<'_> {
    fn poller(&mut self) -> &mut Poller {
        &mut self.poller
    }
    fn schedule(&self) -> Option<&Schedule> {
        self.sched.as_ref()
    }
    fn count_done(&self) -> bool {
        Worker::count_done(self)
    }
    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut Tally) {
        Worker::housekeeping(self, now, timeout, tally)
    }
    fn release_and_dispatch(&mut self, now: u64, tally: &mut Tally) {
        Worker::release_and_dispatch(self, now, tally)
    }
    fn handle(&mut self, ev: poller::Ready, tally: &mut Tally) {
        Worker::handle(self, ev, tally)
    }
    fn in_flight(&self) -> u64 {
        self.conns.iter().map(|c| c.inflight.len() as u64).sum()
    }
    fn close_idle(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].sock.is_some() && self.conns[i].inflight.is_empty() {
                self.retire(i);
                let c = &mut self.conns[i];
                // Dropping the socket closes it (FIN) and leaves epoll.
                c.sock = None;
                c.fd = -1;
                c.out.clear();
                c.out_off = 0;
                c.writing = false;
                c.state = State::Down { retry_at: u64::MAX };
            }
        }
    }
}

impl Worker<'_> {
    fn count_done(&self) -> bool {
        self.ctx
            .issued_all(self.sched.as_ref(), self.issued_measured)
            && self.conns.iter().all(|c| c.inflight.is_empty())
    }

    fn connect(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let src = (!self.plan.sources.is_empty())
            .then(|| self.plan.sources[(self.ctx.index * 7919 + i) % self.plan.sources.len()]);
        match conn::start_connect(&self.plan.addr, src) {
            Ok((sock, done)) => {
                let fd = conn::fd_of(&sock);
                let c = &mut self.conns[i];
                c.fd = fd;
                c.sock = Some(sock);
                if let Err(e) = self.poller.add(fd, i as u64, poller::OUT) {
                    self.fail(i, now, ErrorClass::of(&e), tally);
                    return;
                }
                c.state = State::Connecting { since: now };
                if done {
                    self.connected(i, now, tally);
                }
            }
            Err(e) => {
                let c = &mut self.conns[i];
                c.state = State::Down {
                    retry_at: now + c.backoff.next_delay(),
                };
                tally.error(now, ErrorClass::of(&e));
            }
        }
    }

    fn connected(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let c = &mut self.conns[i];
        let State::Connecting { since } = c.state else {
            return;
        };
        if let Some(sock) = &c.sock {
            if let Err(e) = conn::finish_connect(sock) {
                self.fail(i, now, ErrorClass::of(&e), tally);
                return;
            }
        }
        c.state = State::Up;
        c.ever_up = true;
        c.local = c
            .sock
            .as_ref()
            .and_then(|s| s.local_addr().ok()?.as_socket());
        tally.connected(now, now - since);
        if let Err(e) = self.poller.modify(c.fd, i as u64, poller::IN) {
            self.fail(i, now, ErrorClass::of(&e), tally);
            return;
        }
        if self.sched.is_some() {
            self.mark_idle(i);
        } else {
            self.fill_closed_loop(i, now, tally);
        }
    }

    /// Records what connection `i`'s socket completed, before it closes.
    fn retire(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if let Some(local) = c.local.take() {
            self.closed.push(ConnTally {
                local,
                transactions: std::mem::take(&mut c.answered),
            });
        }
    }

    /// Closes connection `i` after an error and schedules a reconnect.
    fn fail(&mut self, i: usize, now: u64, class: ErrorClass, tally: &mut Tally) {
        tally.error(now, class);
        self.retire(i);
        let c = &mut self.conns[i];
        // Dropping the socket closes it, which also removes it from epoll.
        c.sock = None;
        c.fd = -1;
        c.inflight.clear();
        c.got = 0;
        c.out.clear();
        c.out_off = 0;
        c.writing = false;
        c.state = State::Down {
            retry_at: now + c.backoff.next_delay(),
        };
    }

    fn mark_idle(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.idle_listed && c.state == State::Up && c.inflight.len() < self.plan.pipeline {
            c.idle_listed = true;
            self.idle.push(i);
        }
    }

    /// Queues one request on connection `i`.
    fn push_request(&mut self, i: usize, intended: u64, now: u64) {
        let c = &mut self.conns[i];
        let seq = c.next_seq;
        c.next_seq += 1;
        self.plan.exchange.push_request(&mut c.out, seq);
        c.inflight.push_back(Pending {
            seq,
            intended,
            sent: now,
        });
        if intended >= self.ctx.measure_from {
            self.issued_measured += 1;
        }
    }

    fn fill_closed_loop(&mut self, i: usize, now: u64, tally: &mut Tally) {
        while self.conns[i].inflight.len() < self.plan.pipeline
            && self.ctx.may_issue(self.issued_measured, now)
        {
            self.push_request(i, now, now);
        }
        self.flush(i, now, tally);
    }

    fn release_and_dispatch(&mut self, now: u64, tally: &mut Tally) {
        // Nothing new goes out once the window has ended (the drain).
        if self.ctx.end.is_some_and(|e| now >= e) {
            return;
        }
        let Some(sched) = self.sched.as_mut() else {
            return;
        };
        if self.ctx.end.is_none_or(|e| now < e) {
            sched.release(now, |t, lag| tally.release_lag(t, lag));
        }
        while !self.idle.is_empty() {
            let Some(&intended) = self.sched.as_ref().and_then(|s| s.backlog.front()) else {
                break;
            };
            let i = self.idle.pop().expect("checked non-empty");
            self.conns[i].idle_listed = false;
            if self.conns[i].state != State::Up
                || self.conns[i].inflight.len() >= self.plan.pipeline
            {
                continue;
            }
            if let Some(s) = self.sched.as_mut() {
                s.backlog.pop_front();
            }
            self.push_request(i, intended, now);
            self.flush(i, now, tally);
            self.mark_idle(i);
        }
    }

    /// Writes what connection `i` has queued; waits for EPOLLOUT if the
    /// socket buffer is full.
    fn flush(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let c = &mut self.conns[i];
        if c.out_off >= c.out.len() {
            return;
        }
        match conn::write_some(c.fd, &c.out[c.out_off..]) {
            Ok(n) => {
                tally.bytes_sent += n as u64;
                c.out_off += n;
                if c.out_off == c.out.len() {
                    c.out.clear();
                    c.out_off = 0;
                    if c.writing {
                        c.writing = false;
                        let (fd, ev) = (c.fd, poller::IN);
                        if let Err(e) = self.poller.modify(fd, i as u64, ev) {
                            self.fail(i, now, ErrorClass::of(&e), tally);
                        }
                    }
                } else if !c.writing {
                    c.writing = true;
                    let fd = c.fd;
                    if let Err(e) = self.poller.modify(fd, i as u64, poller::IN | poller::OUT) {
                        self.fail(i, now, ErrorClass::of(&e), tally);
                    }
                }
            }
            Err(e) => self.fail(i, now, ErrorClass::of(&e), tally),
        }
    }

    fn handle(&mut self, ev: poller::Ready, tally: &mut Tally) {
        let i = ev.token as usize;
        if i >= self.conns.len() || self.conns[i].sock.is_none() {
            return;
        }
        let now = self.ctx.clock.now();
        if matches!(self.conns[i].state, State::Connecting { .. }) {
            if ev.writable() {
                self.connected(i, now, tally);
            }
            return;
        }
        if ev.writable() && self.conns[i].writing {
            self.flush(i, now, tally);
        }
        if ev.readable() && self.conns[i].sock.is_some() {
            self.read(i, now, tally);
        }
    }

    fn read(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let fd = self.conns[i].fd;
        let n = match conn::read_some(fd, &mut self.buf) {
            Ok(ReadOutcome::Data(n)) => n,
            Ok(ReadOutcome::WouldBlock) => return,
            Ok(ReadOutcome::Eof) => {
                let class = if self.conns[i].got > 0 {
                    ErrorClass::ShortRead
                } else {
                    ErrorClass::Closed
                };
                self.fail(i, now, class, tally);
                return;
            }
            Err(e) => {
                self.fail(i, now, ErrorClass::of(&e), tally);
                return;
            }
        };
        tally.bytes_received += n as u64;
        let mut p = 0;
        let mut completed = false;
        while p < n {
            let c = &mut self.conns[i];
            let Some(front) = c.inflight.front().copied() else {
                self.fail(i, now, ErrorClass::Unexpected, tally);
                return;
            };
            let take = (self.resp_len - c.got).min(n - p);
            if let Err(class) = self
                .plan
                .exchange
                .check(&self.buf[p..p + take], c.got, front.seq)
            {
                self.fail(i, now, class, tally);
                return;
            }
            c.got += take;
            p += take;
            if c.got == self.resp_len {
                c.got = 0;
                c.inflight.pop_front();
                c.backoff.reset();
                c.answered += 1;
                tally.transaction(now, front.intended, front.sent);
                completed = true;
            }
        }
        if completed {
            if self.sched.is_some() {
                self.mark_idle(i);
                self.release_and_dispatch(now, tally);
            } else {
                self.fill_closed_loop(i, now, tally);
            }
        }
    }

    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut Tally) {
        for i in 0..self.conns.len() {
            match self.conns[i].state {
                State::Down { retry_at } if retry_at <= now && self.may_reconnect(now) => {
                    if !self.connect_allowed(now) {
                        continue;
                    }
                    self.connects_started += 1;
                    self.connect(i, now, tally);
                }
                State::Connecting { since } if now - since > timeout => {
                    self.fail(i, now, ErrorClass::TimedOut, tally);
                }
                State::Up => {
                    let stuck = self.conns[i]
                        .inflight
                        .front()
                        .is_some_and(|p| now - p.sent > timeout);
                    if stuck {
                        self.fail(i, now, ErrorClass::TimedOut, tally);
                    }
                }
                _ => {}
            }
        }
    }

    /// --connect-rate: has this worker's budget of new connects room?
    fn connect_allowed(&self, now: u64) -> bool {
        self.ctx.connect_rate.is_none_or(|r| {
            let budget = (now - self.started_at) as f64 / 1e9 * r + 1.0;
            (self.connects_started as f64) < budget
        })
    }

    /// No point connecting when nothing more will be sent.
    fn may_reconnect(&self, now: u64) -> bool {
        if self.ctx.end.is_some_and(|e| now >= e) {
            return false;
        }
        match &self.sched {
            Some(s) => !s.exhausted() || !s.backlog.is_empty(),
            None => self.ctx.may_issue(self.issued_measured, now),
        }
    }
}
