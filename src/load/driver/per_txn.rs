//! A connection per transaction (tcp-crr's connection state machine):
//! each slot loops connect, request, response, close. Connect latency and
//! transaction latency (connect start to response end) are recorded
//! separately; errors are classed and followed by a bounded backoff of that
//! slot, never a spin.
//!
//! With TLS (`plan.tls`) the handshake runs between the connect and the
//! request, and its time is recorded apart (`tls_handshake_latency`); the
//! transaction's latency still runs from the connect's start to the
//! response's end, handshake included. A successful exchange ends with a
//! close_notify before the FIN (not with --close rst: that is an abort).

use std::io;
use std::os::fd::RawFd;

use socket2::Socket;

use crate::load::driver::plan::{TcpPlan, WorkerCtx};
use crate::load::driver::socket::{self, ReadOutcome};
use crate::load::driver::tally::WorkerTally;
use crate::load::driver::tls::TlsConn;
use crate::load::driver::{self, Backoff, WorkerConns, WorkerCore, WorkerEnd};
use crate::load::workload::{ConnMode, ErrorClass, Exchange, Outcome, Parsed};
use crate::poller;

#[derive(Debug, PartialEq)]
enum SlotState {
    /// Waiting to start (closed loop: until retry_at; open loop: for an
    /// intended time).
    Idle {
        retry_at: u64,
    },
    Connecting,
    /// TLS: connected at `since`, handshaking.
    Handshaking {
        since: u64,
    },
    Exchanging,
}

struct Slot<C> {
    sock: Option<Socket>,
    fd: RawFd,
    /// The socket's TLS session (TLS runs).
    tls: Option<TlsConn>,
    state: SlotState,
    /// Intended start (open loop) or connect start (closed loop).
    intended: u64,
    started: u64,
    seq: u64,
    /// The exchange's parse state of the response.
    cursor: C,
    out: Vec<u8>,
    out_off: usize,
    backoff: Backoff,
    idle_listed: bool,
}

struct PerTxnWorker<'a, E: Exchange> {
    core: WorkerCore<'a>,
    exchange: &'a E,
    close_rst: bool,
    slots: Vec<Slot<E::Cursor>>,
    established: usize,
}

/// Runs one worker of connection-per-transaction slots until its share of
/// the run is done.
pub fn run<E: Exchange>(
    plan: &TcpPlan,
    exchange: &E,
    ctx: &WorkerCtx,
    tally: &mut WorkerTally,
) -> io::Result<WorkerEnd> {
    let mut w = PerTxnWorker {
        core: WorkerCore::new(plan, ctx, exchange.response_len())?,
        exchange,
        close_rst: matches!(plan.mode, ConnMode::PerTransaction { close_rst: true }),
        slots: (0..ctx.conns)
            .map(|_| Slot {
                sock: None,
                fd: -1,
                tls: None,
                state: SlotState::Idle { retry_at: 0 },
                intended: 0,
                started: 0,
                seq: 0,
                cursor: E::Cursor::default(),
                out: Vec::new(),
                out_off: 0,
                backoff: Backoff::default(),
                idle_listed: false,
            })
            .collect(),
        established: 0,
    };
    if w.core.sched.is_some() {
        for i in 0..w.slots.len() {
            w.mark_idle(i);
        }
    }
    driver::run(&mut w, tally)
}

impl<'a, E: Exchange> WorkerConns<'a> for PerTxnWorker<'a, E> {
    fn core(&mut self) -> &mut WorkerCore<'a> {
        &mut self.core
    }

    fn core_ref(&self) -> &WorkerCore<'a> {
        &self.core
    }

    fn in_flight(&self) -> u64 {
        self.slots
            .iter()
            .filter(|s| !matches!(s.state, SlotState::Idle { .. }))
            .count() as u64
    }

    fn close_idle(&mut self, _tally: &mut WorkerTally) {
        // An idle slot holds no socket: each exchange closes its own.
    }

    fn finish(&mut self) -> WorkerEnd {
        WorkerEnd {
            established: self.established,
            handshaking: self
                .slots
                .iter()
                .filter(|s| matches!(s.state, SlotState::Handshaking { .. }))
                .count(),
            ..Default::default()
        }
    }

    fn take_idle(&mut self, i: usize, now: u64) -> bool {
        let s = &mut self.slots[i];
        s.idle_listed = false;
        // A slot backing off is listed again by housekeeping.
        matches!(s.state, SlotState::Idle { retry_at } if retry_at <= now)
    }

    fn issue(&mut self, i: usize, intended: u64, now: u64, tally: &mut WorkerTally) {
        self.start(i, intended, now, tally);
    }

    fn handle(&mut self, ev: poller::Ready, tally: &mut WorkerTally) {
        let i = ev.token as usize;
        if i >= self.slots.len() || self.slots[i].sock.is_none() {
            return;
        }
        let now = self.core.ctx.clock.now();
        match self.slots[i].state {
            SlotState::Connecting if ev.writable() => self.connected(i, now, tally),
            SlotState::Handshaking { .. } => self.handshake(i, now, tally),
            SlotState::Exchanging => {
                let s = &self.slots[i];
                if ev.writable()
                    && (s.out_off < s.out.len() || s.tls.as_ref().is_some_and(TlsConn::wants_write))
                {
                    self.send(i, now, tally);
                }
                if ev.readable() && self.slots[i].sock.is_some() {
                    self.read(i, now, tally);
                }
            }
            _ => {}
        }
    }

    fn housekeeping(&mut self, now: u64, timeout: u64, tally: &mut WorkerTally) {
        for i in 0..self.slots.len() {
            match self.slots[i].state {
                SlotState::Idle { retry_at } if retry_at <= now => {
                    if self.core.sched.is_some() {
                        self.mark_idle(i);
                    } else if self.core.ctx.may_issue(self.core.issued_measured, now) {
                        self.start(i, now, now, tally);
                    }
                }
                SlotState::Connecting | SlotState::Handshaking { .. } | SlotState::Exchanging
                    if now - self.slots[i].started > timeout =>
                {
                    self.fail(i, now, ErrorClass::TimedOut, tally);
                }
                _ => {}
            }
        }
    }
}

impl<E: Exchange> PerTxnWorker<'_, E> {
    fn mark_idle(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if !s.idle_listed && matches!(s.state, SlotState::Idle { .. }) {
            s.idle_listed = true;
            self.core.idle.push(i);
        }
    }

    /// Starts transaction `intended` on slot `i`.
    fn start(&mut self, i: usize, intended: u64, now: u64, tally: &mut WorkerTally) {
        self.core.count_issued(intended);
        let plan = self.core.plan;
        let s = &mut self.slots[i];
        s.intended = intended;
        s.started = now;
        s.cursor = E::Cursor::default();
        s.seq = s.seq.wrapping_add(1);
        s.out.clear();
        s.out_off = 0;
        self.exchange.push_request(&mut s.out, s.seq);
        let src = self.core.source_for(i, self.slots[i].seq as usize);
        match socket::start_connect(&plan.addr, src) {
            Ok((sock, done)) => {
                if self.close_rst {
                    if let Err(e) = socket::set_linger_zero(&sock) {
                        self.fail(i, now, ErrorClass::of(&e), tally);
                        return;
                    }
                }
                let s = &mut self.slots[i];
                s.fd = socket::fd_of(&sock);
                s.sock = Some(sock);
                s.state = SlotState::Connecting;
                if let Err(e) = self
                    .core
                    .poller
                    .add(self.slots[i].fd, i as u64, poller::OUT)
                {
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

    fn connected(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        if let Some(sock) = &self.slots[i].sock {
            if let Err(e) = socket::finish_connect(sock) {
                self.fail(i, now, ErrorClass::of(&e), tally);
                return;
            }
        }
        match self.core.tls_session(tally) {
            Ok(None) => {}
            Ok(Some(t)) => {
                let s = &mut self.slots[i];
                s.tls = Some(t);
                s.state = SlotState::Handshaking { since: now };
                self.handshake(i, now, tally);
                return;
            }
            Err(class) => {
                self.fail(i, now, class, tally);
                return;
            }
        }
        self.established += 1;
        let started = self.slots[i].started;
        tally.connected(now, now - started);
        self.slots[i].state = SlotState::Exchanging;
        self.send(i, now, tally);
    }

    /// TLS: takes slot `i`'s handshake as far as the socket allows (the
    /// driver's one handshake step); once done, the connection counts as
    /// established and the request goes.
    fn handshake(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let s = &mut self.slots[i];
        let SlotState::Handshaking { since } = s.state else {
            return;
        };
        let Some(t) = s.tls.as_mut() else {
            return;
        };
        let connect_ns = since - s.started;
        match self
            .core
            .handshake(i, s.fd, t, since, connect_ns, now, tally)
        {
            Ok(true) => {
                self.established += 1;
                self.slots[i].state = SlotState::Exchanging;
                self.send(i, now, tally);
            }
            Ok(false) => {}
            Err(class) => self.fail(i, now, class, tally),
        }
    }

    fn send(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let s = &mut self.slots[i];
        let wrote = driver::write_conn(s.fd, s.tls.as_mut(), &s.out[s.out_off..], tally);
        match wrote {
            Ok(n) => {
                s.out_off += n;
                let waiting =
                    s.out_off < s.out.len() || s.tls.as_ref().is_some_and(TlsConn::wants_write);
                let ev = if waiting {
                    poller::IN | poller::OUT
                } else {
                    poller::IN
                };
                let fd = s.fd;
                if let Err(e) = self.core.poller.modify(fd, i as u64, ev) {
                    self.fail(i, now, ErrorClass::of(&e), tally);
                }
            }
            Err(class) => self.fail(i, now, class, tally),
        }
    }

    /// Ends slot `i`'s transaction with an error; the slot waits out its
    /// backoff before the next one.
    fn fail(&mut self, i: usize, now: u64, class: ErrorClass, tally: &mut WorkerTally) {
        tally.error(now, class);
        let s = &mut self.slots[i];
        s.tls = None;
        s.sock = None;
        s.fd = -1;
        s.state = SlotState::Idle {
            retry_at: now + s.backoff.next_delay(),
        };
    }

    /// Ends slot `i`'s transaction successfully and starts the next one
    /// (closed loop) or offers the slot to the schedule (open loop).
    fn done(&mut self, i: usize, now: u64, outcome: &Outcome, tally: &mut WorkerTally) {
        let s = &mut self.slots[i];
        // Closing (FIN, or RST with SO_LINGER 0) is part of the loop but
        // not of the measured transaction: the response has arrived.
        if let Some(mut t) = s.tls.take() {
            if !self.close_rst {
                t.close_notify(s.fd, &mut tally.bytes_sent);
            }
        }
        s.sock = None;
        s.fd = -1;
        s.backoff.reset();
        s.state = SlotState::Idle { retry_at: now };
        tally.answer(now, outcome, s.intended, s.started);
        if self.core.sched.is_some() {
            self.mark_idle(i);
            driver::release_and_dispatch(self, now, tally);
        } else if self.core.ctx.may_issue(self.core.issued_measured, now) {
            self.start(i, now, now, tally);
        }
    }

    fn read(&mut self, i: usize, now: u64, tally: &mut WorkerTally) {
        let s = &mut self.slots[i];
        let got = driver::read_conn(
            s.fd,
            s.tls.as_mut(),
            &mut self.core.wire,
            &mut self.core.buf,
            tally,
        );
        let n = match got {
            Ok(ReadOutcome::Data(n)) => n,
            Ok(ReadOutcome::WouldBlock) => return,
            Ok(ReadOutcome::Eof) => {
                let s = &self.slots[i];
                // A response delimited by the close ends here.
                match self.exchange.complete_at_eof(&s.cursor, s.seq) {
                    Some(outcome) => self.done(i, now, &outcome, tally),
                    None => {
                        let class = self.exchange.on_eof(&s.cursor);
                        self.fail(i, now, class, tally);
                    }
                }
                return;
            }
            Err(class) => {
                self.fail(i, now, class, tally);
                return;
            }
        };
        let s = &mut self.slots[i];
        match self
            .exchange
            .parse(&mut s.cursor, &self.core.buf[..n], s.seq)
        {
            Parsed::Partial => {
                // TLS: more came with these bytes (the peer's close_notify,
                // or plaintext left in the session) that the socket may
                // never wake the poller for.
                if s.tls.as_ref().is_some_and(TlsConn::read_again) {
                    self.read(i, now, tally);
                }
            }
            Parsed::Complete(k, outcome) if k == n => self.done(i, now, &outcome, tally),
            // Nothing may follow the response on its own connection.
            Parsed::Complete(..) => self.fail(i, now, ErrorClass::Unexpected, tally),
            Parsed::Error(class) => self.fail(i, now, class, tally),
        }
    }
}
