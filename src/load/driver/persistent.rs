//! Persistent connections (tcp-rr's connection state machine): each
//! connection keeps up to `pipeline` requests in flight (closed loop), or
//! takes sends at intended times (open loop, --rate); a connection that
//! fails reconnects after a bounded backoff.
//!
//! Per transaction the worker makes one write and, in the common case, one
//! read; epoll_wait is amortised over every connection that became ready.
//!
//! With TLS (`plan.tls`) a connection handshakes after its TCP connect and
//! counts as up (established, taking requests) only once the handshake is
//! done; its writes and reads go through its session ([`TlsConn`]). The
//! plain path pays one check of `tls` per write and per read.
//!
//! A workload with an on-connect step ([`Exchange::on_connect`]: redis
//! AUTH/HELLO) writes it once the connection is connected (and
//! handshaken) and takes requests only once its answer came whole; the
//! step is neither timed nor counted as a transaction.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use socket2::Socket;

use crate::load::driver::plan::{TcpPlan, WorkerCtx};
use crate::load::driver::socket::{self, ReadOutcome};
use crate::load::driver::tally::WorkerTally;
use crate::load::driver::tls::TlsConn;
use crate::load::driver::{self, Backoff, ConnTally, WorkerConns, WorkerCore, WorkerEnd};
use crate::load::workload::{ErrorClass, Exchange, Outcome, Parsed};
use crate::poller;

/// A request in flight.
#[derive(Clone, Copy, Debug)]
struct Pending {
    seq: u64,
    intended: u64,
    sent: u64,
}

#[derive(Debug, PartialEq)]
enum ConnState {
    Down {
        retry_at: u64,
    },
    Connecting {
        since: u64,
    },
    /// TLS: connected at `since` after `connect_ns`, handshaking.
    Handshaking {
        since: u64,
        connect_ns: u64,
    },
    /// The on-connect step written at `since`, its answer awaited.
    Opening {
        since: u64,
    },
    Up,
}

struct PersistentConn<C> {
    sock: Option<Socket>,
    fd: RawFd,
    /// The socket's TLS session (TLS runs).
    tls: Option<TlsConn>,
    state: ConnState,
    inflight: VecDeque<Pending>,
    /// Requests that were in flight behind a response after which the
    /// server closed the connection: sent again, first, once it reopens.
    resend: VecDeque<Pending>,
    /// The exchange's parse state of the response awaited first.
    cursor: C,
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

impl<C: Default> PersistentConn<C> {
    fn new() -> Self {
        Self {
            sock: None,
            fd: -1,
            tls: None,
            state: ConnState::Down { retry_at: 0 },
            inflight: VecDeque::new(),
            resend: VecDeque::new(),
            cursor: C::default(),
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

struct PersistentWorker<'a, E: Exchange> {
    core: WorkerCore<'a>,
    exchange: &'a E,
    pipeline: usize,
    conns: Vec<PersistentConn<E::Cursor>>,
    /// Connects started, for --connect-rate.
    connects_started: u64,
    /// Connections closed at the end of the run in their TLS handshake.
    handshaking_at_close: usize,
    started_at: u64,
    /// Sockets closed so far, with what they completed.
    closed: Vec<ConnTally>,
    /// Connections opened beyond its share of -c (--max-conns).
    added: usize,
}

/// Runs one worker of persistent connections until its share of the run
/// is done.
pub fn run<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    ctx: &WorkerCtx,
    tally: &mut WorkerTally,
) -> io::Result<WorkerEnd> {
    let mut w = PersistentWorker {
        core: WorkerCore::new(plan, ctx, exchange.response_len())?,
        exchange,
        pipeline: plan.mode.pipeline().unwrap_or(1),
        conns: (0..ctx.conns).map(|_| PersistentConn::new()).collect(),
        connects_started: 0,
        handshaking_at_close: 0,
        started_at: ctx.clock.now(),
        closed: Vec::new(),
        added: 0,
    };
    driver::run(&mut w, tally)
}

impl<'a, E: Exchange> WorkerConns<'a> for PersistentWorker<'a, E> {
    fn core(&mut self) -> &mut WorkerCore<'a> {
        &mut self.core
    }

    fn core_ref(&self) -> &WorkerCore<'a> {
        &self.core
    }

    fn in_flight(&self) -> u64 {
        self.conns
            .iter()
            .map(|c| (c.inflight.len() + c.resend.len()) as u64)
            .sum()
    }

    fn close_idle(&mut self, tally: &mut WorkerTally) {
        for i in 0..self.conns.len() {
            if self.conns[i].sock.is_some() && self.conns[i].inflight.is_empty() {
                if matches!(self.conns[i].state, ConnState::Handshaking { .. }) {
                    self.handshaking_at_close += 1;
                }
                self.retire(i);
                let c = &mut self.conns[i];
                if let Some(t) = c.tls.as_mut() {
                    t.close_notify(c.fd, &mut tally.bytes_sent);
                }
                c.tls = None;
                // Dropping the socket closes it (FIN) and leaves epoll.
                c.sock = None;
                c.fd = -1;
                c.out.clear();
                c.out_off = 0;
                c.writing = false;
                c.state = ConnState::Down { retry_at: u64::MAX };
            }
        }
    }

    fn finish(&mut self) -> WorkerEnd {
        let handshaking = self
            .conns
            .iter()
            .filter(|c| matches!(c.state, ConnState::Handshaking { .. }))
            .count()
            + self.handshaking_at_close;
        for i in 0..self.conns.len() {
            self.retire(i);
        }
        WorkerEnd {
            established: self.conns.iter().filter(|c| c.ever_up).count(),
            connections: std::mem::take(&mut self.closed),
            handshaking,
            added: self.added,
            ..Default::default()
        }
    }

    fn take_idle(&mut self, i: usize, _now: u64) -> bool {
        let c = &mut self.conns[i];
        c.idle_listed = false;
        c.state == ConnState::Up && c.inflight.len() < self.pipeline
    }

    fn issue(&mut self, i: usize, intended: u64, now: u64, tally: &mut WorkerTally) {
        self.push_request(i, intended, now);
        self.flush(i, now, tally);
        self.mark_idle(i);
    }

    fn grow(&mut self, waiting: usize, now: u64, tally: &mut WorkerTally) {
        // A connection on its way up (a first connect, a reconnect) takes
        // a waiting send once up: one new connection per send no such
        // connection will take.
        let opening = self
            .conns
            .iter()
            .filter(|c| {
                matches!(
                    c.state,
                    ConnState::Connecting { .. }
                        | ConnState::Handshaking { .. }
                        | ConnState::Opening { .. }
                )
            })
            .count();
        for _ in opening..waiting {
            if self.conns.len() >= self.core.ctx.max_conns || !self.connect_allowed(now) {
                return;
            }
            let i = self.conns.len();
            self.conns.push(PersistentConn::new());
            self.added += 1;
            self.connects_started += 1;
            self.connect(i, now, tally);
        }
    }

    fn handle(&mut self, ev: poller::Ready, tally: &mut WorkerTally) {
        let i = ev.token as usize;
        if i >= self.conns.len() || self.conns[i].sock.is_none() {
            return;
        }
        let now = self.core.ctx.clock.now();
        match self.conns[i].state {
            ConnState::Connecting { .. } => {
                if ev.writable() {
                    self.connected(i, now, tally);
                }
                return;
            }
            ConnState::Handshaking { .. } => {
                self.handshake(i, now, tally);
                return;
            }
            ConnState::Opening { .. } => {
                if ev.writable() && self.conns[i].writing {
                    self.flush(i, now, tally);
                }
                if ev.readable() && self.conns[i].sock.is_some() {
                    self.read_opening(i, now, tally);
                }
                return;
            }
            _ => {}
        }
        if ev.writable() && self.conns[i].writing {
            self.flush(i, now, tally);
        }
        if ev.readable() && self.conns[i].sock.is_some() {
            self.read(i, now, tally);
        }
    }

    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut WorkerTally) {
        for i in 0..self.conns.len() {
            match self.conns[i].state {
                ConnState::Down { retry_at } if retry_at <= now && self.may_reconnect(i, now) => {
                    if !self.connect_allowed(now) {
                        continue;
                    }
                    self.connects_started += 1;
                    self.connect(i, now, tally);
                }
                ConnState::Connecting { since }
                | ConnState::Handshaking { since, .. }
                | ConnState::Opening { since }
                    if now - since > timeout =>
                {
                    self.fail(i, now, ErrorClass::TimedOut, tally);
                }
                ConnState::Up => {
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
}

impl<E: Exchange> PersistentWorker<'_, E> {
    fn connect(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let plan = self.core.plan;
        let src = self.core.source_for(i, 0);
        match socket::start_connect(&plan.addr, src) {
            Ok((sock, done)) => {
                let fd = socket::fd_of(&sock);
                let c = &mut self.conns[i];
                c.fd = fd;
                c.sock = Some(sock);
                if let Err(e) = self.core.poller.add(fd, i as u64, poller::OUT) {
                    self.fail(i, now, ErrorClass::of(&e), tally);
                    return;
                }
                c.state = ConnState::Connecting { since: now };
                if done {
                    self.connected(i, now, tally);
                }
            }
            Err(e) => {
                let c = &mut self.conns[i];
                c.state = ConnState::Down {
                    retry_at: now + c.backoff.next_delay(),
                };
                tally.error(now, ErrorClass::of(&e));
            }
        }
    }

    fn connected(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let c = &mut self.conns[i];
        let ConnState::Connecting { since } = c.state else {
            return;
        };
        if let Some(sock) = &c.sock {
            if let Err(e) = socket::finish_connect(sock) {
                self.fail(i, now, ErrorClass::of(&e), tally);
                return;
            }
        }
        match self.core.tls_session(tally) {
            Ok(None) => {}
            Ok(Some(t)) => {
                c.tls = Some(t);
                c.state = ConnState::Handshaking {
                    since: now,
                    connect_ns: now - since,
                };
                self.handshake(i, now, tally);
                return;
            }
            Err(class) => {
                self.fail(i, now, class, tally);
                return;
            }
        }
        tally.connected(now, now - since);
        self.open(i, now, tally);
    }

    /// TLS: takes connection `i`'s handshake as far as the socket allows
    /// (the driver's one handshake step); once done, the connection is up.
    fn handshake(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let c = &mut self.conns[i];
        let ConnState::Handshaking { since, connect_ns } = c.state else {
            return;
        };
        let Some(t) = c.tls.as_mut() else {
            return;
        };
        match self
            .core
            .handshake(i, c.fd, t, since, connect_ns, now, tally)
        {
            Ok(true) => self.open(i, now, tally),
            Ok(false) => {}
            Err(class) => self.fail(i, now, class, tally),
        }
    }

    /// Connection `i` is connected (and handshaken with TLS): it writes the
    /// workload's on-connect step and waits for its answer, or is up at
    /// once when there is none.
    fn open(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let Some(step) = self.exchange.on_connect() else {
            self.up(i, now, tally);
            return;
        };
        let c = &mut self.conns[i];
        c.state = ConnState::Opening { since: now };
        c.out.clear();
        c.out_off = 0;
        c.out.extend_from_slice(step);
        if let Err(e) = self.core.poller.modify(c.fd, i as u64, poller::IN) {
            self.fail(i, now, ErrorClass::of(&e), tally);
            return;
        }
        self.flush(i, now, tally);
    }

    /// One read of connection `i` (plain or TLS) into the worker's buffer.
    fn read_some(&mut self, i: usize, tally: &mut WorkerTally) -> Result<ReadOutcome, ErrorClass> {
        let c = &mut self.conns[i];
        driver::read_conn(
            c.fd,
            c.tls.as_mut(),
            &mut self.core.wire,
            &mut self.core.buf,
            tally,
        )
    }

    /// Reads the answer to connection `i`'s on-connect step; once it came
    /// whole and says yes, the connection is up.
    fn read_opening(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let got = self.read_some(i, tally);
        let n = match got {
            Ok(ReadOutcome::Data(n)) => n,
            Ok(ReadOutcome::WouldBlock) => return,
            Ok(ReadOutcome::Eof) => {
                let class = self.exchange.on_eof(&self.conns[i].cursor);
                self.fail(i, now, class, tally);
                return;
            }
            Err(class) => {
                self.fail(i, now, class, tally);
                return;
            }
        };
        let c = &mut self.conns[i];
        match self
            .exchange
            .parse_on_connect(&mut c.cursor, &self.core.buf[..n])
        {
            Parsed::Partial => {}
            Parsed::Complete(k, outcome) if outcome.error.is_some() => {
                if tally.on_connect_error.is_none() {
                    let answer = String::from_utf8_lossy(&self.core.buf[..k.min(200)]);
                    tally.on_connect_error = Some(crate::text::escape(answer.trim_end()).into());
                }
                self.fail(i, now, ErrorClass::OnConnect, tally);
            }
            Parsed::Complete(k, _) if k < n => {
                // Bytes beyond the answer, before any request.
                let class = self.exchange.unsolicited();
                self.fail(i, now, class.unwrap_or(ErrorClass::Unexpected), tally);
            }
            Parsed::Complete(..) => {
                c.cursor = E::Cursor::default();
                self.up(i, now, tally);
            }
            Parsed::Error(class) => self.fail(i, now, class, tally),
        }
    }

    /// Connection `i` is up (connected, handshaken with TLS, its on-connect
    /// step answered): it sends again what a server close left unanswered,
    /// then takes requests.
    fn up(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let c = &mut self.conns[i];
        c.state = ConnState::Up;
        c.ever_up = true;
        c.local = c
            .sock
            .as_ref()
            .and_then(|s| s.local_addr().ok()?.as_socket());
        if let Err(e) = self.core.poller.modify(c.fd, i as u64, poller::IN) {
            self.fail(i, now, ErrorClass::of(&e), tally);
            return;
        }
        // Bytes already waiting before any request (a server that greets,
        // or answers ahead of its request) would otherwise be read as the
        // first request's answer. TLS is read through its session (a
        // session ticket may lawfully be waiting): its read path checks.
        if let Some(class) = self.exchange.unsolicited() {
            if c.tls.is_none() && bytes_waiting(c.fd) {
                self.fail(i, now, class, tally);
                return;
            }
        }
        if !c.resend.is_empty() {
            let resend = std::mem::take(&mut c.resend);
            for p in resend {
                self.exchange.push_request(&mut c.out, p.seq);
                c.inflight.push_back(p);
            }
            self.flush(i, now, tally);
            if self.conns[i].sock.is_none() {
                return;
            }
        }
        if self.core.sched.is_some() {
            self.mark_idle(i);
        } else {
            self.fill_closed_loop(i, now, tally);
        }
    }

    /// The server closes connection `i` after the response just completed
    /// (HTTP `Connection: close`): not an error. Requests pipelined behind
    /// it are sent again on the new connection, which opens at once.
    fn server_closed(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        tally.reconnect();
        self.retire(i);
        let c = &mut self.conns[i];
        // The server closes: no close_notify from us (it may have sent
        // its own, or simply closed).
        c.tls = None;
        c.sock = None;
        c.fd = -1;
        let behind = std::mem::take(&mut c.inflight);
        c.resend.extend(behind);
        c.cursor = E::Cursor::default();
        c.out.clear();
        c.out_off = 0;
        c.writing = false;
        c.state = ConnState::Down { retry_at: now };
        if self.may_reconnect(i, now) && self.connect_allowed(now) {
            self.connects_started += 1;
            self.connect(i, now, tally);
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
    fn fail(&mut self, i: usize, now: u64, class: ErrorClass, tally: &mut WorkerTally) {
        tally.error(now, class);
        self.retire(i);
        let c = &mut self.conns[i];
        // Dropping the socket closes it, which also removes it from epoll.
        c.tls = None;
        c.sock = None;
        c.fd = -1;
        c.inflight.clear();
        c.resend.clear();
        c.cursor = E::Cursor::default();
        c.out.clear();
        c.out_off = 0;
        c.writing = false;
        c.state = ConnState::Down {
            retry_at: now + c.backoff.next_delay(),
        };
    }

    fn mark_idle(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.idle_listed && c.state == ConnState::Up && c.inflight.len() < self.pipeline {
            c.idle_listed = true;
            self.core.idle.push(i);
        }
    }

    /// Queues one request on connection `i`.
    fn push_request(&mut self, i: usize, intended: u64, now: u64) {
        let c = &mut self.conns[i];
        let seq = c.next_seq;
        c.next_seq += 1;
        self.exchange.push_request(&mut c.out, seq);
        c.inflight.push_back(Pending {
            seq,
            intended,
            sent: now,
        });
        self.core.count_issued(intended);
    }

    fn fill_closed_loop(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        while self.conns[i].inflight.len() < self.pipeline
            && self.core.ctx.may_issue(self.core.issued_measured, now)
        {
            self.push_request(i, now, now);
        }
        self.flush(i, now, tally);
    }

    /// Writes what connection `i` has queued; waits for EPOLLOUT if the
    /// socket buffer is full (with TLS: also while records the session
    /// took wait for room).
    fn flush(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let c = &mut self.conns[i];
        // `writing` is set only while something waits for room.
        if c.out_off >= c.out.len() && !c.writing {
            return;
        }
        let wrote = driver::write_conn(c.fd, c.tls.as_mut(), &c.out[c.out_off..], tally);
        match wrote {
            Ok(n) => {
                c.out_off += n;
                let done = c.out_off == c.out.len();
                if done {
                    c.out.clear();
                    c.out_off = 0;
                }
                if done && !c.tls.as_ref().is_some_and(TlsConn::wants_write) {
                    if c.writing {
                        c.writing = false;
                        let (fd, ev) = (c.fd, poller::IN);
                        if let Err(e) = self.core.poller.modify(fd, i as u64, ev) {
                            self.fail(i, now, ErrorClass::of(&e), tally);
                        }
                    }
                } else if !c.writing {
                    c.writing = true;
                    let fd = c.fd;
                    if let Err(e) = self
                        .core
                        .poller
                        .modify(fd, i as u64, poller::IN | poller::OUT)
                    {
                        self.fail(i, now, ErrorClass::of(&e), tally);
                    }
                }
            }
            Err(class) => self.fail(i, now, class, tally),
        }
    }

    fn read(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let got = self.read_some(i, tally);
        let n = match got {
            Ok(ReadOutcome::Data(n)) => n,
            Ok(ReadOutcome::WouldBlock) => return,
            Ok(ReadOutcome::Eof) => {
                self.eof(i, now, tally);
                return;
            }
            Err(class) => {
                self.fail(i, now, class, tally);
                return;
            }
        };
        // One read may end several pipelined responses.
        let mut p = 0;
        let mut completed = false;
        while p < n {
            let c = &mut self.conns[i];
            let Some(front) = c.inflight.front().copied() else {
                let class = self.exchange.unsolicited();
                self.fail(i, now, class.unwrap_or(ErrorClass::Unexpected), tally);
                return;
            };
            match self
                .exchange
                .parse(&mut c.cursor, &self.core.buf[p..n], front.seq)
            {
                Parsed::Partial => p = n,
                Parsed::Complete(k, outcome) => {
                    p += k;
                    self.answered(i, now, &outcome, tally);
                    completed = true;
                    if outcome.close {
                        // Whatever follows is not an answer: the server
                        // is closing.
                        self.server_closed(i, now, tally);
                        break;
                    }
                }
                Parsed::Error(class) => {
                    self.fail(i, now, class, tally);
                    return;
                }
            }
        }
        if completed {
            self.go_on(i, now, tally);
        }
        // TLS: more came with these bytes (the peer's close_notify, or
        // plaintext left in the session) that the socket may never wake
        // the poller for.
        if self.conns[i].tls.as_ref().is_some_and(TlsConn::read_again) {
            self.read(i, now, tally);
        }
    }

    /// Counts the response to connection `i`'s first request in flight,
    /// whole, as `outcome` says.
    fn answered(&mut self, i: usize, now: u64, outcome: &Outcome, tally: &mut WorkerTally) {
        let c = &mut self.conns[i];
        let Some(front) = c.inflight.pop_front() else {
            return;
        };
        c.cursor = E::Cursor::default();
        c.backoff.reset();
        c.answered += 1;
        tally.answer(now, outcome, front.intended, front.sent);
    }

    /// After responses completed on connection `i`: its next requests
    /// (closed loop) or its place among the free connections (open loop).
    fn go_on(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        // Up: not failed, and not reopening after a server close (the new
        // connection takes requests once it is up).
        if self.conns[i].state != ConnState::Up {
            return;
        }
        if self.core.sched.is_some() {
            self.mark_idle(i);
            driver::release_and_dispatch(self, now, tally);
        } else {
            self.fill_closed_loop(i, now, tally);
        }
    }

    /// The server closed connection `i`: the end of the response awaited
    /// when the close delimits it (an HTTP body without a length), an
    /// error otherwise.
    fn eof(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let c = &self.conns[i];
        let ends = c
            .inflight
            .front()
            .and_then(|front| self.exchange.complete_at_eof(&c.cursor, front.seq));
        match ends {
            Some(outcome) => {
                self.answered(i, now, &outcome, tally);
                self.server_closed(i, now, tally);
                self.go_on(i, now, tally);
            }
            None => {
                let class = self.exchange.on_eof(&self.conns[i].cursor);
                self.fail(i, now, class, tally);
            }
        }
    }

    /// --connect-rate: has this worker's budget of new connects room?
    fn connect_allowed(&self, now: u64) -> bool {
        self.core.ctx.connect_rate.is_none_or(|r| {
            let budget = (now - self.started_at) as f64 / 1e9 * r + 1.0;
            (self.connects_started as f64) < budget
        })
    }

    /// No point connecting when nothing more will be sent (requests to
    /// send again on connection `i` count).
    fn may_reconnect(&self, i: usize, now: u64) -> bool {
        let ctx = self.core.ctx;
        if ctx.end.is_some_and(|e| now >= e) {
            return false;
        }
        if !self.conns[i].resend.is_empty() {
            return true;
        }
        match &self.core.sched {
            Some(s) => !s.exhausted() || !s.backlog.is_empty(),
            None => ctx.may_issue(self.core.issued_measured, now),
        }
    }
}
/// True when bytes from the peer wait unread on `fd` (a peek that takes
/// nothing).
fn bytes_waiting(fd: RawFd) -> bool {
    let mut b = 0u8;
    // SAFETY: valid fd and a one-byte buffer.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}
