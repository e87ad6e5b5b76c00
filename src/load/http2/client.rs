//! One HTTP/2 connection of the load, driven by one task: it owns the
//! socket, reads into one buffer and parses frames in place, writes
//! everything a loop turn produced in one write, and runs all of the
//! connection's stream slots itself (no task per stream, no channels):
//! a free slot issues a request when it has a turn (closed loop: at once;
//! open loop: when the worker's pacer releases one), one timer serves
//! the earliest `--timeout` deadline, and flow control runs both ways
//! (our receive windows given back in batches once half is used; request
//! bodies sent within the peer's windows and resumed when they grow).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Sleep;

mod inbound;

use super::classify::{self, Failure, Verdict};
use super::conn::Io;
use super::frame::{self, ConnError, HEAD_LEN};
use super::{Turn, Worker};
use crate::load::workload::{ErrorClass, Outcome};
use crate::proto::hpack::Decoder;

/// The largest frame we accept: the default SETTINGS_MAX_FRAME_SIZE,
/// which we do not raise.
const MAX_FRAME: usize = 16_384;
/// Our SETTINGS_HEADER_TABLE_SIZE: the default, so nothing is sent.
const TABLE_SIZE: usize = 4096;
/// The most a response's header list (or a header block in frames) may
/// hold; advertised as SETTINGS_MAX_HEADER_LIST_SIZE.
const MAX_HEADER_LIST: usize = 1 << 20;
/// The read buffer: several frames per read at high rates.
const READ_BUF: usize = 4 * (HEAD_LEN + MAX_FRAME);
/// The last client stream id; a connection that reaches it is replaced.
const LAST_ID: u32 = 0x7fff_ffff;
/// How often a connection with nothing in flight looks at the run's
/// end (it may be waiting for the peer to allow a stream).
const IDLE_TICK_NS: u64 = 100_000_000;

/// Maps stream ids to slots. Client ids are odd and sequential, so a
/// multiply spreads them well; SipHash showed in the profile.
type IdMap = HashMap<u32, usize, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`].
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = ((self.0 << 8) | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id >> 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A stream in flight.
struct Stream {
    id: u32,
    turn: Turn,
    sent: u64,
    intended: u64,
    /// The final status, once the response's headers came.
    status: Option<u16>,
    /// grpc-status of the headers, else of the trailers.
    grpc: Option<Option<u8>>,
    /// Request body bytes sent so far.
    body_off: usize,
    /// The peer's window for this stream.
    send_window: i64,
    /// Bytes received and not yet given back by WINDOW_UPDATE.
    unacked: usize,
    /// The body is kept for the worker's reply check.
    keep: bool,
    kept: Vec<u8>,
    /// gRPC: the body's message framing so far.
    messages: super::grpc_body::Messages,
}

/// How a stream ended.
enum Done {
    Answer(Outcome),
    Error(ErrorClass),
    /// Not processed by the server (a graceful GOAWAY): the turn goes
    /// back, no error.
    Retry,
}

/// A connection's state.
struct Client<'w> {
    w: &'w Worker,
    out: Vec<u8>,
    dec: Decoder,
    slots: Vec<Option<Stream>>,
    free: Vec<usize>,
    by_id: IdMap,
    /// (deadline, stream id) in the order sent: the timeout is the same
    /// for every stream, so the front is the earliest.
    deadlines: VecDeque<(u64, u32)>,
    next_id: u32,
    peer_max_streams: usize,
    peer_max_frame: usize,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE.
    peer_window: i64,
    /// The peer's connection window for our DATA.
    conn_send: i64,
    /// Received bytes not yet given back on the connection.
    conn_unacked: usize,
    stream_half: usize,
    conn_half: usize,
    /// Streams whose request body is not all sent.
    sending: usize,
    /// The server's preface (its first SETTINGS) came: streams wait for
    /// it, so none is refused for a SETTINGS_MAX_CONCURRENT_STREAMS the
    /// server announced while our first requests were on the way.
    settled: bool,
    /// A GOAWAY came: no new streams.
    goaway: bool,
    /// The connection failed: its streams were cut with an error.
    failed: bool,
    /// The connection failed (its streams were cut) or the peer closed it.
    dead: bool,
    /// The socket can still take our closing GOAWAY.
    writable: bool,
    /// A header block in CONTINUATION frames: its stream and END_STREAM.
    cont: Option<(u32, bool)>,
    hblock: Vec<u8>,
}

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// The run ended on it.
    RunOver,
    /// The server closed it gracefully (GOAWAY NO_ERROR): replaced, no
    /// error (`responses.reconnects`).
    ByServer,
    /// It failed (its errors are counted) or we closed it (stream ids
    /// used up): replaced.
    Replaced,
}

/// Why a connection that came up could never send a request, if it could
/// not: a server that never sent its SETTINGS, or one that allows no
/// stream. Said when a run completes nothing, which otherwise has no
/// error to name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stuck {
    /// Connected, and the server's preface (its SETTINGS) never came.
    Silent,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS is 0.
    NoStreams,
}

impl Stuck {
    /// The sentence for a failed run.
    pub(super) fn why(self) -> &'static str {
        match self {
            Self::Silent => {
                "the server accepted the connection and never sent its HTTP/2 SETTINGS \
                 (is it an HTTP/2 server? h2c needs prior knowledge, https needs --tls)"
            }
            Self::NoStreams => {
                "the server's SETTINGS_MAX_CONCURRENT_STREAMS is 0: it allows no request"
            }
        }
    }
}

/// Runs a connection that is up until the run ends or the connection
/// does (and is to be replaced).
pub(super) async fn drive(w: &Worker, mut io: Box<dyn Io>) -> Ended {
    let mut c = Client::new(w);
    let mut rbuf = vec![0u8; READ_BUF];
    let (mut start, mut end) = (0, 0);
    let base = (tokio::time::Instant::now(), w.now());
    let mut timer = Box::pin(tokio::time::sleep(Duration::ZERO));
    let mut armed = None;
    let mut pacer_done = w.pacer.is_none();
    // A server that never lets a request go (no SETTINGS, no stream
    // allowed) fails the connection after --timeout, saying why.
    let stuck_by = base.1.saturating_add(w.plan.timeout.as_nanos() as u64);
    loop {
        if !c.dead {
            if w.pacer.is_none() {
                while c.can_open() {
                    let Some(turn) = w.closed_turn() else { break };
                    c.open(turn);
                }
            }
            c.send_bodies();
        }
        if !c.out.is_empty() && c.writable {
            let r = tokio::time::timeout(w.plan.timeout, write(&mut io, &c.out)).await;
            c.out.clear();
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => c.fail_io(classify::io_class(&e)),
                Err(_) => c.fail_io(ErrorClass::TimedOut),
            }
        }
        if let Some(gone) = c.over(pacer_done) {
            // A run that ends before --timeout on a server that let no
            // request go says why as well.
            if let Some(stuck) = c.stuck().filter(|_| !w.sent_any.get()) {
                w.stuck.set(Some(stuck));
            }
            if c.writable && !c.dead {
                // A polite end (a failed connection sent its GOAWAY with
                // the error above); the socket closes when dropped anyway.
                c.out.clear();
                frame::put_goaway(&mut c.out, 0, frame::NO_ERROR);
                let _ = tokio::time::timeout(Duration::from_secs(1), write(&mut io, &c.out)).await;
            }
            return gone;
        }
        let mut deadline = c.next_deadline().unwrap_or_else(|| w.now() + IDLE_TICK_NS);
        if c.stuck().is_some() && !c.dead {
            deadline = deadline.min(stuck_by);
        }
        // Armed no later than the earliest deadline; an early wake-up
        // times nothing out and re-arms, far cheaper than a reset for
        // every stream that finishes.
        if armed.is_none_or(|a| a > deadline) {
            let at = base.0 + Duration::from_nanos(deadline.saturating_sub(base.1));
            timer.as_mut().reset(at);
            armed = Some(deadline);
        }
        let want_turn = !pacer_done && c.can_open();
        match next_event(&mut io, &mut rbuf[end..], timer.as_mut(), w, want_turn).await {
            Event::Read(Ok(0)) => c.eof(start != end),
            Event::Read(Ok(n)) => {
                end += n;
                start = c.on_bytes(&rbuf[..end], start);
                if start == end {
                    (start, end) = (0, 0);
                } else if rbuf.len() - end < HEAD_LEN + MAX_FRAME {
                    rbuf.copy_within(start..end, 0);
                    (start, end) = (0, end - start);
                }
            }
            Event::Read(Err(e)) => c.fail_io(classify::io_class(&e)),
            Event::Timer => {
                armed = None;
                let now = w.now();
                c.expire(now);
                if let Some(stuck) = c.stuck().filter(|_| now >= stuck_by && !c.dead) {
                    w.stuck.set(Some(stuck));
                    c.fail(Failure {
                        io: Some(ErrorClass::TimedOut),
                        ..Failure::default()
                    });
                }
            }
            Event::Turn(Some(turn)) => c.open(turn),
            Event::Turn(None) => pacer_done = true,
        }
    }
}

/// What woke a connection up.
enum Event {
    /// Bytes from the socket (0: the peer closed it).
    Read(std::io::Result<usize>),
    /// The earliest deadline (or the idle tick).
    Timer,
    /// The pacer released a send (None: it has no more).
    Turn(Option<Turn>),
}

/// Waits for the socket, the timer or (`want_turn`) the pacer, in that
/// order of preference.
async fn next_event(
    io: &mut Box<dyn Io>,
    buf: &mut [u8],
    mut timer: Pin<&mut Sleep>,
    w: &Worker,
    want_turn: bool,
) -> Event {
    let mut read = std::pin::pin!(io.read(buf));
    let turn = async {
        if want_turn {
            w.take_turn().await
        } else {
            std::future::pending().await
        }
    };
    let mut turn = std::pin::pin!(turn);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = read.as_mut().poll(cx) {
            return Poll::Ready(Event::Read(r));
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Event::Timer);
        }
        if let Poll::Ready(t) = turn.as_mut().poll(cx) {
            return Poll::Ready(Event::Turn(t));
        }
        Poll::Pending
    })
    .await
}

/// Writes `b` whole (TLS: through to the socket).
async fn write(io: &mut Box<dyn Io>, b: &[u8]) -> std::io::Result<()> {
    io.write_all(b).await?;
    io.flush().await
}

impl<'w> Client<'w> {
    fn new(w: &'w Worker) -> Self {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, w.windows.stream),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
            ],
        );
        // The connection window starts at 65535 whatever SETTINGS say.
        if let Some(more) = w.windows.connection.checked_sub(65_535).filter(|&m| m > 0) {
            frame::put_word(&mut out, frame::WINDOW_UPDATE, 0, more);
        }
        Self {
            w,
            out,
            dec: Decoder::new(TABLE_SIZE, MAX_HEADER_LIST),
            slots: (0..w.streams).map(|_| None).collect(),
            free: (0..w.streams).rev().collect(),
            by_id: IdMap::with_capacity_and_hasher(w.streams * 2, Default::default()),
            deadlines: VecDeque::with_capacity(w.streams),
            next_id: 1,
            peer_max_streams: usize::MAX,
            peer_max_frame: MAX_FRAME,
            peer_window: 65_535,
            conn_send: 65_535,
            conn_unacked: 0,
            stream_half: (w.windows.stream as usize / 2).max(1),
            conn_half: (w.windows.connection as usize / 2).max(1),
            sending: 0,
            settled: false,
            goaway: false,
            failed: false,
            dead: false,
            writable: true,
            cont: None,
            hblock: Vec::new(),
        }
    }

    fn active(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// May a new stream start now?
    fn can_open(&self) -> bool {
        self.settled
            && !self.goaway
            && !self.dead
            && !self.free.is_empty()
            && self.active() < self.peer_max_streams
            && self.next_id <= LAST_ID
    }

    /// Whether the connection is over, and how.
    fn over(&self, pacer_done: bool) -> Option<Ended> {
        let replaced = || {
            if self.goaway && !self.failed {
                Ended::ByServer
            } else {
                Ended::Replaced
            }
        };
        if self.dead {
            return Some(replaced());
        }
        if self.active() > 0 {
            return None;
        }
        if self.goaway || self.next_id > LAST_ID {
            return Some(replaced());
        }
        let run_over = if self.w.pacer.is_some() {
            pacer_done
        } else {
            !self.w.may_continue()
        };
        run_over.then_some(Ended::RunOver)
    }

    /// Why this connection never sent a request, if it never did and a
    /// server's word is the reason.
    fn stuck(&self) -> Option<Stuck> {
        if self.next_id > 1 {
            return None;
        }
        if !self.settled {
            Some(Stuck::Silent)
        } else if self.peer_max_streams == 0 {
            Some(Stuck::NoStreams)
        } else {
            None
        }
    }

    /// Starts a stream for `turn`: its HEADERS (and what the peer's
    /// windows take of its body) go out with this loop turn's write.
    fn open(&mut self, turn: Turn) {
        let Some(slot) = self.free.pop() else {
            self.w.give_back(turn);
            return;
        };
        let w = self.w;
        let id = self.next_id;
        self.next_id += 2;
        let sent = w.now();
        let intended = match turn {
            Turn::Open { intended } => intended,
            Turn::Closed { .. } => sent,
        };
        w.sent_any.set(true);
        let end = w.call.body.is_empty();
        frame::put_headers(&mut self.out, id, &w.block, end, self.peer_max_frame);
        if !end {
            self.sending += 1;
        }
        let deadline = sent.saturating_add(w.plan.timeout.as_nanos() as u64);
        self.deadlines.push_back((deadline, id));
        self.by_id.insert(id, slot);
        self.slots[slot] = Some(Stream {
            id,
            turn,
            sent,
            intended,
            status: None,
            grpc: None,
            body_off: 0,
            send_window: self.peer_window,
            unacked: 0,
            keep: w.check_reply.is_some() && !w.checked.get(),
            kept: Vec::new(),
            messages: super::grpc_body::Messages::default(),
        });
    }

    /// Sends what the peer's windows allow of the request bodies left,
    /// in frames of at most its maximum size.
    fn send_bodies(&mut self) {
        if self.sending == 0 {
            return;
        }
        let body = &self.w.call.body;
        for s in self.slots.iter_mut().flatten() {
            while s.body_off < body.len() {
                let n = (body.len() - s.body_off)
                    .min(self.peer_max_frame)
                    .min(s.send_window.max(0) as usize)
                    .min(self.conn_send.max(0) as usize);
                if n == 0 {
                    break;
                }
                let last = s.body_off + n == body.len();
                let flags = if last { frame::END_STREAM } else { 0 };
                frame::put_head(&mut self.out, n, frame::DATA, flags, s.id);
                self.out
                    .extend_from_slice(&body[s.body_off..s.body_off + n]);
                s.body_off += n;
                s.send_window -= n as i64;
                self.conn_send -= n as i64;
                if last {
                    self.sending -= 1;
                }
            }
        }
    }

    /// The earliest deadline of a stream in flight.
    fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&(at, id)) = self.deadlines.front() {
            if self.by_id.contains_key(&id) {
                return Some(at);
            }
            self.deadlines.pop_front();
        }
        None
    }

    /// Times out the streams whose deadline passed: RST_STREAM CANCEL,
    /// and a timed_out error each; the connection goes on.
    fn expire(&mut self, now: u64) {
        while let Some(&(at, id)) = self.deadlines.front() {
            let Some(&slot) = self.by_id.get(&id) else {
                self.deadlines.pop_front();
                continue;
            };
            if at > now {
                break;
            }
            self.deadlines.pop_front();
            frame::put_word(&mut self.out, frame::RST_STREAM, id, frame::CANCEL);
            self.finish(slot, Done::Error(ErrorClass::TimedOut));
        }
    }

    /// Frees a stream's slot and counts how it ended.
    fn finish(&mut self, slot: usize, done: Done) {
        let Some(s) = self.slots[slot].take() else {
            return;
        };
        self.by_id.remove(&s.id);
        self.free.push(slot);
        if s.body_off < self.w.call.body.len() {
            self.sending -= 1;
        }
        let w = self.w;
        let now = w.now();
        let mut t = w.tally.borrow_mut();
        if w.ctx.end.is_some_and(|e| now >= e) {
            t.close_window();
        }
        match done {
            Done::Answer(o) => t.answer(now, &o, s.intended, s.sent),
            Done::Error(class) => t.error(now, class),
            Done::Retry => {
                drop(t);
                w.give_back(s.turn);
            }
        }
    }

    /// The connection failed: every stream in flight is an error of the
    /// failure's class (one error when none was, and the run goes on).
    fn fail(&mut self, f: Failure) {
        if self.dead {
            return;
        }
        self.dead = true;
        self.failed = true;
        let class = match classify::verdict(f) {
            Verdict::Connection(c) | Verdict::Stream(c) => c,
            Verdict::Retry => ErrorClass::Protocol,
        };
        let mut cut = 0;
        for slot in 0..self.slots.len() {
            if self.slots[slot].is_some() {
                self.finish(slot, Done::Error(class));
                cut += 1;
            }
        }
        if cut == 0 && self.w.may_continue() {
            self.w.error(class);
        }
    }

    /// A socket error (or our write timed out).
    fn fail_io(&mut self, class: ErrorClass) {
        self.writable = false;
        self.fail(Failure {
            io: Some(class),
            ..Failure::default()
        });
    }

    /// The peer broke the protocol: GOAWAY with the code, the streams cut.
    fn protocol(&mut self, e: ConnError) {
        frame::put_goaway(&mut self.out, 0, e.code);
        self.fail(Failure {
            code: Some(e.code),
            ..Failure::default()
        });
    }

    /// The peer closed the connection (`partial`: inside a frame).
    fn eof(&mut self, partial: bool) {
        self.writable = false;
        if self.active() == 0 && self.goaway && !partial {
            self.dead = true;
            return;
        }
        // With streams open, as a broken pipe; cut inside a frame, short.
        let class = if partial {
            ErrorClass::ShortRead
        } else {
            ErrorClass::Reset
        };
        self.fail_io(class);
    }
}

/// A connection error of `code`.
fn bad(code: u32, why: &'static str) -> ConnError {
    ConnError { code, why }
}

/// A :status value: three digits.
fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a, b, c] if v.iter().all(u8::is_ascii_digit) => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}
