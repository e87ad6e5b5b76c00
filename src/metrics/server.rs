//! The exporter's HTTP server: one thread, one poll loop over the
//! listening socket and every open connection.
//!
//! Why one loop and not a thread per connection: a thread (or a slot) per
//! connection lets a handful of clients that send one byte a second hold
//! every slot, and then every real scrape is refused for as long as they
//! keep going. Here a connection costs a buffer, not a thread, and three
//! bounds keep the exporter answering under such a flood:
//!
//! - a whole-request deadline ([`REQUEST_DEADLINE`], from accept to the
//!   last byte of the response), not a per-read timeout that a trickle of
//!   bytes keeps renewing;
//! - slots per peer address ([`PER_PEER`]) and in all ([`MAX_CONNS`]): a
//!   new connection over either limit closes that peer's (or anyone's)
//!   oldest unfinished request, so a flood turns over its own connections
//!   while a scraper, whose request comes whole right after connect, is
//!   served;
//! - a request already whole when its batch of accepts ends is answered at
//!   once, before it could lose its slot.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use prost::Message;

use super::{PROTOBUF_TYPE, State, model, text, wants_protobuf};

/// Longest request head read.
pub(super) const MAX_HEAD: usize = 8192;
/// From accept to the last byte of the response.
pub(super) const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections open at once (each costs a buffer of at most
/// [`MAX_HEAD`] bytes, or its response while that is being written).
pub(super) const MAX_CONNS: usize = 256;
/// Unfinished requests open at once from one peer address.
pub(super) const PER_PEER: usize = 32;
/// Connections accepted per loop turn, so a connect flood cannot keep the
/// loop from the connections it already has.
const ACCEPT_BATCH: usize = 64;

/// One connection: reading its request head, then writing its response.
struct Conn {
    stream: TcpStream,
    peer: IpAddr,
    since: Instant,
    head: Vec<u8>,
    /// The response and how much of it is written, once the head is whole.
    out: Option<(Vec<u8>, usize)>,
}

/// What a connection needs next.
#[derive(PartialEq, Eq)]
enum Next {
    /// More bytes to read or write.
    Wait,
    /// Finished (answered, closed by the peer or failed): drop it.
    Close,
}

impl Conn {
    fn deadline(&self) -> Instant {
        self.since + REQUEST_DEADLINE
    }

    /// Reads what has come, answers a whole head, writes what the socket
    /// takes. Never blocks.
    fn step(&mut self, state: &Mutex<State>) -> Next {
        if self.out.is_none() {
            let mut chunk = [0u8; 2048];
            loop {
                match self.stream.read(&mut chunk) {
                    Ok(0) => return Next::Close,
                    Ok(n) => self.head.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return Next::Close,
                }
                if head_end(&self.head).is_some() || self.head.len() >= MAX_HEAD {
                    break;
                }
            }
            let reply = match head_end(&self.head) {
                Some(end) => answer(&self.head[..end], state),
                None if self.head.len() >= MAX_HEAD => {
                    response(431, "text/plain", b"request head too large\n", false)
                }
                None => return Next::Wait,
            };
            self.out = Some((reply, 0));
        }
        let Some((out, done)) = self.out.as_mut() else {
            return Next::Wait;
        };
        while *done < out.len() {
            match self.stream.write(&out[*done..]) {
                Ok(0) => return Next::Close,
                Ok(n) => *done += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        Next::Close
    }
}

/// Where the request head ends (after its blank line; bare LF line ends
/// accepted as HTTP/1.1 allows).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Serves until `stop` becomes readable (its write end closed).
pub(super) fn serve(listener: TcpListener, stop: OwnedFd, state: &Mutex<State>) {
    // This thread starts before the tracer blocks its signals (to read
    // them from a signalfd); were they deliverable here, Ctrl-C would kill
    // the process instead of ending the trace.
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&nix::sys::signal::SigSet::all()),
        None,
    );
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        let now = Instant::now();
        conns.retain(|c| c.deadline() > now);
        let wait = conns
            .iter()
            .map(|c| c.deadline().saturating_duration_since(now))
            .min();
        let timeout = match wait {
            // Rounded up, so the loop does not wake just before a deadline.
            Some(d) => PollTimeout::try_from(d.as_millis() as i32 + 1).unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        let ready: Vec<bool> = {
            let mut fds = Vec::with_capacity(conns.len() + 2);
            fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
            fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
            for c in &conns {
                let want = if c.out.is_some() {
                    PollFlags::POLLOUT
                } else {
                    PollFlags::POLLIN
                };
                fds.push(PollFd::new(c.stream.as_fd(), want));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
            fds.iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect()
        };
        if ready[1] {
            return;
        }
        let mut kept = Vec::with_capacity(conns.len());
        for (mut c, r) in conns.drain(..).zip(&ready[2..]) {
            if !*r || c.step(state) == Next::Wait {
                kept.push(c);
            }
        }
        conns = kept;
        if ready[0] {
            accept_some(&listener, &mut conns, state);
        }
    }
}

/// Accepts up to [`ACCEPT_BATCH`] connections, answering those whose
/// request is whole and admitting the rest.
///
/// Each is read only once the whole batch is accepted, and only then may
/// it close another's slot or lose its own: a scraper writes its request
/// right after its connect returns, which can be just after the accept, and
/// read at once its head was not there yet. Unfinished, it was the kind of
/// request a flood from the same address (a loopback peer) evicts when it
/// connects in a burst.
fn accept_some(listener: &TcpListener, conns: &mut Vec<Conn>, state: &Mutex<State>) {
    let mut fresh = Vec::new();
    for _ in 0..ACCEPT_BATCH {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(_) => break,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        fresh.push(Conn {
            stream,
            peer: peer.ip(),
            since: Instant::now(),
            head: Vec::new(),
            out: None,
        });
    }
    for mut c in fresh {
        if c.step(state) == Next::Close {
            continue;
        }
        admit(conns, c);
    }
}

/// Adds `c`, first closing the oldest unfinished request of its peer when
/// that peer has [`PER_PEER`] of them, or the oldest connection of anyone
/// when [`MAX_CONNS`] are open. A request already begun goes before one
/// that has sent nothing yet: a trickle has, while a scraper delayed
/// between its connect and its write (a busy machine) has not, and from
/// one address (loopback) a trickle's reconnects in a burst otherwise
/// closed it before its request came.
fn admit(conns: &mut Vec<Conn>, c: Conn) {
    let unfinished = |x: &Conn| x.out.is_none();
    let begun = |x: &Conn| x.out.is_none() && !x.head.is_empty();
    let of_peer = conns
        .iter()
        .filter(|x| x.peer == c.peer && unfinished(x))
        .count();
    let victim = if of_peer >= PER_PEER {
        oldest(conns, |x| x.peer == c.peer && begun(x))
            .or_else(|| oldest(conns, |x| x.peer == c.peer && unfinished(x)))
    } else if conns.len() >= MAX_CONNS {
        oldest(conns, begun)
            .or_else(|| oldest(conns, unfinished))
            .or_else(|| oldest(conns, |_| true))
    } else {
        None
    };
    if let Some(i) = victim {
        conns.swap_remove(i);
    }
    conns.push(c);
}

fn oldest(conns: &[Conn], pick: impl Fn(&Conn) -> bool) -> Option<usize> {
    conns
        .iter()
        .enumerate()
        .filter(|(_, c)| pick(c))
        .min_by_key(|(_, c)| c.since)
        .map(|(i, _)| i)
}

/// The whole HTTP response (head and body) with `Connection: close`.
fn response(status: u16, ctype: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    if status == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

/// The last complete window of a node agent's stacks, as a pprof file.
fn profile(query: &str, state: &Mutex<State>, head_only: bool) -> Vec<u8> {
    let shared = state.lock().ok().and_then(|st| st.stacks.clone());
    let Some(shared) = shared else {
        return response(
            404,
            "text/plain",
            b"not found: this exporter samples no stacks (trace --requests-only --stacks)\n",
            head_only,
        );
    };
    let (window, last) = match shared.lock() {
        Ok(e) => (e.window(), e.last_profile()),
        Err(_) => return response(503, "text/plain", b"exporter failed\n", head_only),
    };
    if let Err(why) = super::stacks::check_query(query, window.as_secs()) {
        return response(400, "text/plain", why.as_bytes(), head_only);
    }
    match last {
        Some(pprof) => response(200, "application/octet-stream", &pprof, head_only),
        None => response(
            503,
            "text/plain",
            format!(
                "no complete window yet: the first ends {} s after the sampler started\n",
                window.as_secs()
            )
            .as_bytes(),
            head_only,
        ),
    }
}

/// The response to one whole request head.
fn answer(head: &[u8], state: &Mutex<State>) -> Vec<u8> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let (method, path, accept) = match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.unwrap_or("").to_string(),
            req.path.unwrap_or("").to_string(),
            req.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("accept"))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => return response(400, "text/plain", b"malformed request\n", false),
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return response(405, "text/plain", b"only GET and HEAD\n", false);
    }
    let (route, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
    match route {
        "/metrics" => {}
        "/debug/pprof/profile" => return profile(query, state, head_only),
        "/" => {
            return response(
                200,
                "text/plain; charset=utf-8",
                b"sockscope trace exporter: see /metrics\n",
                head_only,
            );
        }
        _ => return response(404, "text/plain", b"not found: try /metrics\n", head_only),
    }
    let protobuf = wants_protobuf(&accept);
    let Ok(mut st) = state.lock() else {
        return response(503, "text/plain", b"exporter failed\n", head_only);
    };
    if st.detaching {
        return response(
            503,
            "text/plain",
            b"sockscope is detaching: no more data from this tracer\n",
            head_only,
        );
    }
    let requests = st
        .requests
        .as_ref()
        .and_then(|l| l.lock().ok().and_then(|c| c.clone()));
    let snap = st.snap.clone();
    if snap.is_none() && requests.is_none() {
        return response(
            503,
            "text/plain",
            b"no data yet: the tracer publishes its first reading within a second\n",
            head_only,
        );
    }
    let st = &mut *st;
    let mut fams = match &snap {
        Some(snap) => model::families(snap, &st.scope, &mut st.admission),
        None => Vec::new(),
    };
    if let Some(c) = &requests {
        fams.extend(super::requests::families(c, &mut st.endpoints));
    }
    if let Some(e) = st.stacks.as_ref().and_then(|s| s.lock().ok()) {
        fams.extend(super::stacks::families(&e));
    }
    super::agent::extend(&mut fams);
    if protobuf {
        let mut out = Vec::new();
        for f in &fams {
            let _ = f.encode_length_delimited(&mut out);
        }
        response(200, PROTOBUF_TYPE, &out, head_only)
    } else {
        response(
            200,
            text::CONTENT_TYPE,
            text::encode(&fams).as_bytes(),
            head_only,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_ends_at_its_blank_line_crlf_or_bare_lf() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: x\n\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }

    fn state() -> Mutex<State> {
        Mutex::new(State {
            snap: None,
            requests: None,
            stacks: None,
            detaching: false,
            admission: model::Admission::new(4),
            endpoints: super::super::requests::EndpointAdmission::new(4),
            scope: "system".into(),
        })
    }

    fn status_of(resp: &[u8]) -> &str {
        std::str::from_utf8(&resp[9..12]).unwrap()
    }

    #[test]
    fn requests_are_answered_by_method_and_path() {
        let st = state();
        assert_eq!(status_of(&answer(b"GET / HTTP/1.1\r\n\r\n", &st)), "200");
        assert_eq!(status_of(&answer(b"GET /x HTTP/1.1\n\n", &st)), "404");
        assert_eq!(
            status_of(&answer(b"POST /metrics HTTP/1.1\r\n\r\n", &st)),
            "405"
        );
        assert_eq!(status_of(&answer(b"\x00\x01garbage\r\n\r\n", &st)), "400");
        // Before the first reading: 503, and HEAD gets no body.
        let r = answer(b"HEAD /metrics HTTP/1.1\r\n\r\n", &st);
        assert_eq!(status_of(&r), "503");
        assert!(r.ends_with(b"\r\n\r\n"));
    }

    #[test]
    fn request_counts_alone_are_served_without_a_trace_snapshot() {
        let st = state();
        let latest = crate::anatomy::latest();
        st.lock().unwrap().requests = Some(latest.clone());
        // The anatomy's window is not open yet: nothing to serve.
        let get = b"GET /metrics HTTP/1.1\r\n\r\n";
        assert_eq!(status_of(&answer(get, &st)), "503");
        let mut c = crate::anatomy::Counts::empty();
        let mut p = crate::anatomy::PortTurns::empty(7001, crate::anatomy::Transport::Tcp);
        p.turns = 5;
        c.ports.push(p);
        *latest.lock().unwrap() = Some(c);
        let r = answer(get, &st);
        assert_eq!(status_of(&r), "200");
        let body = String::from_utf8_lossy(&r);
        assert!(
            body.contains("sockscope_requests_total{port=\"7001\",transport=\"tcp\"} 5\n"),
            "{body}"
        );
        assert!(!body.contains("sockscope_syscalls_total"), "{body}");
    }

    fn conn_from(l: &TcpListener, peer: IpAddr, since: Instant, done: bool) -> (Conn, TcpStream) {
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (stream, _) = l.accept().unwrap();
        let c = Conn {
            stream,
            peer,
            since,
            head: Vec::new(),
            out: done.then(|| (Vec::new(), 0)),
        };
        (c, client)
    }

    #[test]
    fn a_peer_over_its_slots_loses_its_oldest_unfinished_request() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let mut conns = Vec::new();
        let mut clients = Vec::new();
        // b's one request is older than all of a's.
        let (c, k) = conn_from(&l, b, t0, false);
        conns.push(c);
        clients.push(k);
        for i in 0..PER_PEER {
            let (c, k) = conn_from(&l, a, t0 + Duration::from_millis(1 + i as u64), false);
            conns.push(c);
            clients.push(k);
        }
        let (c, _k) = conn_from(&l, a, t0 + Duration::from_secs(1), false);
        admit(&mut conns, c);
        assert_eq!(conns.len(), PER_PEER + 1);
        assert!(
            conns.iter().any(|c| c.peer == b),
            "another peer's request kept"
        );
        assert!(
            !conns
                .iter()
                .any(|c| c.since == t0 + Duration::from_millis(1)),
            "a's oldest request closed"
        );
    }

    #[test]
    fn a_full_table_closes_the_oldest_unfinished_request_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        let mut conns = Vec::new();
        let mut clients = Vec::new();
        for i in 0..MAX_CONNS {
            // Distinct peers, so only the global limit applies; the very
            // oldest is already writing its answer and is kept.
            let peer = IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
            let (c, k) = conn_from(&l, peer, t0 + Duration::from_millis(i as u64), i == 0);
            conns.push(c);
            clients.push(k);
        }
        let (c, _k) = conn_from(
            &l,
            "127.0.0.9".parse().unwrap(),
            t0 + Duration::from_secs(9),
            false,
        );
        admit(&mut conns, c);
        assert_eq!(conns.len(), MAX_CONNS);
        assert!(
            conns.iter().any(|c| c.since == t0),
            "the answering one kept"
        );
        assert!(
            !conns
                .iter()
                .any(|c| c.since == t0 + Duration::from_millis(1))
        );
    }
}
