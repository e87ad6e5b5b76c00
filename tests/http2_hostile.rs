//! `load grpc` and `load http --http2` against a tiny hostile HTTP/2
//! server written here frame by frame (no HTTP/2 library would send what
//! it sends): gRPC answers whose body breaks the message framing while
//! their grpc-status says OK, a server that never speaks, and one that
//! allows no stream. Each must fail with its reason, never count as OK.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Every load here is bounded by -n or -d; this only catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// What the server does.
#[derive(Clone, Copy)]
enum Mode {
    /// Each request gets this gRPC body, then grpc-status 0.
    Grpc(&'static [u8]),
    /// 1,000 one-byte messages, then grpc-status 0.
    ThousandMessages,
    /// Accepts and reads, never writes.
    Silent,
    /// SETTINGS_MAX_CONCURRENT_STREAMS 0, then nothing but ACKs.
    NoStreams,
}

const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const DATA: u8 = 0;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK literal field without indexing, its name literal too.
fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0);
    block.push(name.len() as u8);
    block.extend_from_slice(name.as_bytes());
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}

/// The whole answer to stream `sid` in `mode`.
fn answer(mode: Mode, sid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    // :status 200 is the static table's entry 8.
    let mut head = vec![0x88];
    literal(&mut head, "content-type", "application/grpc");
    frame(&mut out, HEADERS, END_HEADERS, sid, &head);
    let body: Vec<u8> = match mode {
        Mode::Grpc(b) => b.to_vec(),
        Mode::ThousandMessages => (0..1000).flat_map(|_| [0, 0, 0, 0, 1, b'x']).collect(),
        Mode::Silent | Mode::NoStreams => unreachable!(),
    };
    for chunk in body.chunks(16_384) {
        frame(&mut out, DATA, 0, sid, chunk);
    }
    let mut trailers = Vec::new();
    literal(&mut trailers, "grpc-status", "0");
    frame(&mut out, HEADERS, END_HEADERS | END_STREAM, sid, &trailers);
    out
}

/// Serves one connection until the client goes.
fn serve(mut c: TcpStream, mode: Mode) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut preface = [0u8; 24];
    if c.read_exact(&mut preface).is_err() {
        return;
    }
    let mut out = Vec::new();
    match mode {
        Mode::Silent => {}
        Mode::NoStreams => frame(&mut out, SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 0]),
        _ => frame(&mut out, SETTINGS, 0, 0, &[]),
    }
    if c.write_all(&out).is_err() {
        return;
    }
    loop {
        let mut head = [0u8; 9];
        if c.read_exact(&mut head).is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if c.read_exact(&mut payload).is_err() {
            return;
        }
        let (kind, flags) = (head[3], head[4]);
        let sid = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut out = Vec::new();
        if kind == SETTINGS && flags & 1 == 0 && !matches!(mode, Mode::Silent) {
            frame(&mut out, SETTINGS, 1, 0, &[]);
        }
        let request_ends = (kind == DATA || kind == HEADERS) && flags & END_STREAM != 0;
        if request_ends && matches!(mode, Mode::Grpc(_) | Mode::ThousandMessages) {
            out.extend_from_slice(&answer(mode, sid));
        }
        if !out.is_empty() && c.write_all(&out).is_err() {
            return;
        }
    }
}

/// Starts the server in `mode` on a thread (one more per connection);
/// they end with the test process.
fn start(mode: Mode) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || serve(c, mode));
        }
    });
    port
}

fn grpc(dir: &Path, port: u16, more: &[&str]) -> (Option<i32>, Value, String) {
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["grpc", addr.as_str(), "--method", "test.Echo/Ping"];
    args.extend_from_slice(more);
    load_json(dir, &args, LIMIT)
}

fn by_class(rep: &Value, class: &str) -> u64 {
    rep["errors"]["by_class"][class].as_u64().unwrap_or(0)
}

/// Issue 38 item 17: each of these answers said grpc-status 0 and was
/// counted OK without --protoset.
#[test]
fn grpc_answers_that_break_the_message_framing_are_protocol_errors() {
    let dir = scratch("h2-hostile-grpc");
    // The control: one whole message is OK.
    let port = start(Mode::Grpc(b"\x00\x00\x00\x00\x02ok"));
    let (code, rep, err) = grpc(&dir, port, &["-n", "20"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["transactions"], 20, "{}", rep["errors"]);
    let cases: [(Mode, &str); 5] = [
        (
            Mode::Grpc(b"\x00\xff\xff\xff\xffabc"),
            "protocol_error:grpc_message_truncated",
        ),
        (
            Mode::Grpc(b"\x01\x00\x00\x00\x02ok"),
            "protocol_error:grpc_compressed_unnegotiated",
        ),
        (
            Mode::Grpc(b"\x80\x00\x00\x00\x02ok"),
            "protocol_error:grpc_bad_flags",
        ),
        (Mode::Grpc(b""), "protocol_error:grpc_no_message"),
        (Mode::ThousandMessages, "protocol_error:grpc_extra_messages"),
    ];
    for (mode, class) in cases {
        let port = start(mode);
        let (code, rep, err) = grpc(&dir, port, &["-n", "20", "--max-errors", "100"]);
        assert_eq!(code, Some(0), "{class}: {err}");
        assert_eq!(by_class(&rep, class), 20, "{class}: {}", rep["errors"]);
        assert_eq!(rep["transactions"], 0, "{class}");
        // A broken body is the server's gRPC, not its HTTP/2: the
        // connection goes on.
        assert_eq!(rep["connections"]["connects"], 1, "{class}");
        // Over the budget, the run fails naming the class.
        let (code, _, err) = grpc(&dir, port, &["-n", "3"]);
        assert_eq!(code, Some(1), "{class}: {err}");
        assert!(err.contains(class), "{class}: {err}");
    }
}

/// Issue 38 (messages): a server that accepts and never speaks HTTP/2,
/// and one whose SETTINGS allow no stream, failed the run with no reason.
#[test]
fn a_server_that_lets_no_request_go_is_named_in_the_failure() {
    let dir = scratch("h2-hostile-stuck");
    let silent = "never sent its HTTP/2 SETTINGS";
    let none = "SETTINGS_MAX_CONCURRENT_STREAMS is 0";
    // Past --timeout the connection fails (ETIMEDOUT), and says why.
    let port = start(Mode::Silent);
    let url = format!("http://127.0.0.1:{port}/");
    let (code, rep, err) = load_json(
        &dir,
        &["http", &url, "--http2", "-n", "5", "--timeout", "0.5"],
        LIMIT,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(silent), "{err}");
    assert!(by_class(&rep, "ETIMEDOUT") >= 1, "{}", rep["errors"]);
    let port = start(Mode::NoStreams);
    let (code, _, err) = grpc(&dir, port, &["-n", "5", "--timeout", "0.5"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(none), "{err}");
    // A run that ends before --timeout says it too.
    let (code, rep, err) = grpc(&dir, port, &["-d", "1", "--timeout", "10"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no transaction completed"), "{err}");
    assert!(err.contains(none), "{err}");
    assert_eq!(rep["errors"]["total"], 0, "{}", rep["errors"]);
}
