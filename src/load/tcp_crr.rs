//! tcp-crr: each slot loops connect, request, response, close. Connect
//! latency and transaction latency (connect start to response end) are
//! recorded separately; errors are classed and followed by a bounded
//! backoff of that slot, never a spin.

use std::io;
use std::os::fd::RawFd;

use socket2::Socket;

use super::conn::{self, ReadOutcome};
use super::driver::{self, Workload};
use super::plan::{Backoff, TcpPlan, WorkerCtx};
use super::schedule::Schedule;
use super::tally::{ErrorClass, Tally};
use super::tcp_rr::WorkerEnd;
use crate::poller::{self, Poller};

#[derive(Debug, PartialEq)]
enum State {
    /// Waiting to start (closed loop: until retry_at; open loop: for an
    /// intended time).
    Idle {
        retry_at: u64,
    },
    Connecting,
    Exchanging,
}

struct Slot {
    sock: Option<Socket>,
    fd: RawFd,
    state: State,
    /// Intended start (open loop) or connect start (closed loop).
    intended: u64,
    started: u64,
    seq: u64,
    got: usize,
    out: Vec<u8>,
    out_off: usize,
    backoff: Backoff,
    idle_listed: bool,
}

struct Worker<'a> {
    plan: &'a TcpPlan,
    ctx: &'a WorkerCtx,
    poller: Poller,
    slots: Vec<Slot>,
    buf: Vec<u8>,
    sched: Option<Schedule>,
    idle: Vec<usize>,
    issued_measured: u64,
    resp_len: usize,
    established: usize,
}

/// Runs one tcp-crr worker until its share of the run is done.
pub fn run(plan: &TcpPlan, ctx: &WorkerCtx, tally: &mut Tally) -> io::Result<WorkerEnd> {
    let resp_len = plan.exchange.resp_len();
    let mut w = Worker {
        plan,
        ctx,
        poller: Poller::new(1024)?,
        slots: (0..ctx.conns)
            .map(|_| Slot {
                sock: None,
                fd: -1,
                state: State::Idle { retry_at: 0 },
                intended: 0,
                started: 0,
                seq: 0,
                got: 0,
                out: Vec::new(),
                out_off: 0,
                backoff: Backoff::default(),
                idle_listed: false,
            })
            .collect(),
        buf: vec![0u8; resp_len.clamp(64 * 1024, 1 << 20)],
        sched: ctx
            .rate
            .map(|r| Schedule::new(r, ctx.clock.now(), ctx.measure_from, ctx.quota)),
        idle: Vec::new(),
        issued_measured: 0,
        resp_len,
        established: 0,
    };
    if w.sched.is_some() {
        for i in 0..w.slots.len() {
            w.mark_idle(i);
        }
    }
    let stalled = driver::drive(&mut w, plan, ctx, tally)?;
    tally.finish();
    let mut end = WorkerEnd {
        established: w.established,
        unanswered: w
            .slots
            .iter()
            .filter(|s| !matches!(s.state, State::Idle { .. }))
            .count() as u64,
        stalled,
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
        self.slots
            .iter()
            .filter(|s| !matches!(s.state, State::Idle { .. }))
            .count() as u64
    }
    fn close_idle(&mut self) {
        // An idle slot holds no socket: each exchange closes its own.
    }
}

impl Worker<'_> {
    fn count_done(&self) -> bool {
        self.ctx
            .issued_all(self.sched.as_ref(), self.issued_measured)
            && self
                .slots
                .iter()
                .all(|s| matches!(s.state, State::Idle { .. }))
    }

    fn mark_idle(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if !s.idle_listed && matches!(s.state, State::Idle { .. }) {
            s.idle_listed = true;
            self.idle.push(i);
        }
    }

    /// Starts transaction `intended` on slot `i`.
    fn start(&mut self, i: usize, intended: u64, now: u64, tally: &mut Tally) {
        if intended >= self.ctx.measure_from {
            self.issued_measured += 1;
        }
        let s = &mut self.slots[i];
        s.intended = intended;
        s.started = now;
        s.got = 0;
        s.seq = s.seq.wrapping_add(1);
        s.out.clear();
        s.out_off = 0;
        self.plan.exchange.push_request(&mut s.out, s.seq);
        let src = (!self.plan.sources.is_empty()).then(|| {
            let k = self.ctx.index * 7919 + i + self.slots[i].seq as usize;
            self.plan.sources[k % self.plan.sources.len()]
        });
        match conn::start_connect(&self.plan.addr, src) {
            Ok((sock, done)) => {
                if self.plan.close_rst {
                    if let Err(e) = conn::set_linger_zero(&sock) {
                        self.fail(i, now, ErrorClass::of(&e), tally);
                        return;
                    }
                }
                let s = &mut self.slots[i];
                s.fd = conn::fd_of(&sock);
                s.sock = Some(sock);
                s.state = State::Connecting;
                if let Err(e) = self.poller.add(self.slots[i].fd, i as u64, poller::OUT) {
                    self.fail(i, now, ErrorClass::of(&e), tally);
                    return;
                }
                if done {
                    self.connected(i, now, tally);
                }
            }
            Err(e) => self.fail(i, now, ErrorClass::of(&e), tally),
        }
    }

    fn connected(&mut self, i: usize, now: u64, tally: &mut Tally) {
        if let Some(sock) = &self.slots[i].sock {
            if let Err(e) = conn::finish_connect(sock) {
                self.fail(i, now, ErrorClass::of(&e), tally);
                return;
            }
        }
        self.established += 1;
        let started = self.slots[i].started;
        tally.connected(now, now - started);
        self.slots[i].state = State::Exchanging;
        self.send(i, now, tally);
    }

    fn send(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let s = &mut self.slots[i];
        match conn::write_some(s.fd, &s.out[s.out_off..]) {
            Ok(n) => {
                tally.bytes_sent += n as u64;
                s.out_off += n;
                let ev = if s.out_off == s.out.len() {
                    poller::IN
                } else {
                    poller::IN | poller::OUT
                };
                let fd = s.fd;
                if let Err(e) = self.poller.modify(fd, i as u64, ev) {
                    self.fail(i, now, ErrorClass::of(&e), tally);
                }
            }
            Err(e) => self.fail(i, now, ErrorClass::of(&e), tally),
        }
    }

    /// Ends slot `i`'s transaction with an error; the slot waits out its
    /// backoff before the next one.
    fn fail(&mut self, i: usize, now: u64, class: ErrorClass, tally: &mut Tally) {
        tally.error(now, class);
        let s = &mut self.slots[i];
        s.sock = None;
        s.fd = -1;
        s.state = State::Idle {
            retry_at: now + s.backoff.next_delay(),
        };
    }

    /// Ends slot `i`'s transaction successfully and starts the next one
    /// (closed loop) or offers the slot to the schedule (open loop).
    fn done(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let s = &mut self.slots[i];
        // Closing (FIN, or RST with SO_LINGER 0) is part of the loop but
        // not of the measured transaction: the response has arrived.
        s.sock = None;
        s.fd = -1;
        s.backoff.reset();
        s.state = State::Idle { retry_at: now };
        tally.transaction(now, s.intended, s.started);
        if self.sched.is_some() {
            self.mark_idle(i);
            self.release_and_dispatch(now, tally);
        } else if self.ctx.may_issue(self.issued_measured, now) {
            self.start(i, now, now, tally);
        }
    }

    fn release_and_dispatch(&mut self, now: u64, tally: &mut Tally) {
        // Nothing new starts once the window has ended (the drain).
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
            self.slots[i].idle_listed = false;
            match self.slots[i].state {
                State::Idle { retry_at } if retry_at <= now => {}
                State::Idle { .. } => continue, // backing off; housekeeping re-lists it
                _ => continue,
            }
            if let Some(s) = self.sched.as_mut() {
                s.backlog.pop_front();
            }
            self.start(i, intended, now, tally);
        }
    }

    fn handle(&mut self, ev: poller::Ready, tally: &mut Tally) {
        let i = ev.token as usize;
        if i >= self.slots.len() || self.slots[i].sock.is_none() {
            return;
        }
        let now = self.ctx.clock.now();
        match self.slots[i].state {
            State::Connecting if ev.writable() => self.connected(i, now, tally),
            State::Exchanging => {
                if ev.writable() && self.slots[i].out_off < self.slots[i].out.len() {
                    self.send(i, now, tally);
                }
                if ev.readable() && self.slots[i].sock.is_some() {
                    self.read(i, now, tally);
                }
            }
            _ => {}
        }
    }

    fn read(&mut self, i: usize, now: u64, tally: &mut Tally) {
        let fd = self.slots[i].fd;
        let n = match conn::read_some(fd, &mut self.buf) {
            Ok(ReadOutcome::Data(n)) => n,
            Ok(ReadOutcome::WouldBlock) => return,
            Ok(ReadOutcome::Eof) => {
                let class = if self.slots[i].got > 0 {
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
        let s = &self.slots[i];
        if s.got + n > self.resp_len {
            self.fail(i, now, ErrorClass::Unexpected, tally);
            return;
        }
        if let Err(class) = self.plan.exchange.check(&self.buf[..n], s.got, s.seq) {
            self.fail(i, now, class, tally);
            return;
        }
        self.slots[i].got += n;
        if self.slots[i].got == self.resp_len {
            self.done(i, now, tally);
        }
    }

    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut Tally) {
        for i in 0..self.slots.len() {
            match self.slots[i].state {
                State::Idle { retry_at } if retry_at <= now => {
                    if self.sched.is_some() {
                        self.mark_idle(i);
                    } else if self.ctx.may_issue(self.issued_measured, now) {
                        self.start(i, now, now, tally);
                    }
                }
                State::Connecting | State::Exchanging if now - self.slots[i].started > timeout => {
                    self.fail(i, now, ErrorClass::TimedOut, tally);
                }
                _ => {}
            }
        }
    }
}
