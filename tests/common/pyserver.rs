//! A python3 test server started from a `-c` script that prints its port
//! first (tests/http2.rs: an h2 server, a gRPC server; tests/anatomy.rs: a
//! slow reader; tests/http.rs: a server logging each request). Debian's
//! python3-h2 and python3-grpcio are test dependencies (Makefile
//! TEST_PKGS): a missing module skips the test with a printed reason
//! outside CI and fails it under CI=true (a script that needs nothing but
//! the standard library names a module of it, `socket`). Killed on drop.
//! The interpreter is Debian's own, /usr/bin/python3 (the one those
//! packages serve), not whichever python3 comes first in PATH.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use super::Reaped;

/// Debian's python3.
const PYTHON: &str = "/usr/bin/python3";

/// A running python3 server.
pub struct PyServer {
    pub child: Reaped,
    pub port: u16,
}

impl PyServer {
    /// Runs `python3 -c script args...` once `module` imports; None (after
    /// a printed reason) when it does not, outside CI.
    pub fn start(test: &str, module: &str, script: &str, args: &[&str]) -> Option<Self> {
        let found = Command::new(PYTHON)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: python3 module {module} missing under CI (make deps installs it)");
            }
            eprintln!("SKIP {test}: no python3 module {module}");
            return None;
        }
        let mut child = Command::new(PYTHON)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{test}: python3 said {line:?}"));
        Some(Self {
            child: Reaped(child),
            port,
        })
    }
}

/// A gRPC server (python3-grpcio, generic handlers, raw bytes): service
/// test.Echo, method Ping answers `pong:` and the request when the request
/// is argv[1]'s bytes (INVALID_ARGUMENT otherwise), method Fail aborts
/// with NOT_FOUND; service test.Kv, method Put decodes its request by hand
/// (no protobuf library: the check does not share sockscope's) and counts
/// it in the file argv[2] ("matches mismatches") before it answers: a
/// match is exactly the fields key=1 "a", n=2 5, tags=3 "x" in that order
/// and answers the empty PutReply, anything else INVALID_ARGUMENT; but the
/// request key=1 "bad-reply" alone, not counted, answers OK with bytes
/// that are no message (a field cut short).
pub const GRPC_SERVER: &str = r#"
import os, sys, threading, grpc
from concurrent import futures
want = sys.argv[1].encode()
stats = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
lock = threading.Lock()
seen = [0, 0]
def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << shift; shift += 7
        if c < 0x80:
            return v, i
def fields(b):
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0:
            v, i = varint(b, i)
        elif key & 7 == 2:
            n, i = varint(b, i); v = bytes(b[i:i + n]); i += n
        else:
            raise ValueError("wire type %d" % (key & 7))
        out.append((key >> 3, v))
    return out
def put(req, ctx):
    try:
        got = fields(req)
    except (IndexError, ValueError):
        got = None
    if got == [(1, b"bad-reply")]:
        return b"\x0a\x05a"
    ok = got == [(1, b"a"), (2, 5), (3, b"x")]
    with lock:
        seen[0 if ok else 1] += 1
        with open(stats + ".tmp", "w") as f:
            f.write("%d %d" % tuple(seen))
        os.replace(stats + ".tmp", stats)
    if not ok:
        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "not the expected PutRequest")
    return b""
def ping(req, ctx):
    if req != want:
        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unexpected request")
    return b"pong:" + req
def fail(req, ctx):
    ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
h = grpc.method_handlers_generic_handler("test.Echo", {
    "Ping": grpc.unary_unary_rpc_method_handler(ping),
    "Fail": grpc.unary_unary_rpc_method_handler(fail),
})
kv = grpc.method_handlers_generic_handler("test.Kv", {
    "Put": grpc.unary_unary_rpc_method_handler(put),
})
s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
s.add_generic_rpc_handlers((h, kv))
# argv[3], when given, is a Unix socket path to listen on instead.
port = s.add_insecure_port("unix:" + sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1:0")
s.start()
print(port, flush=True)
s.wait_for_termination()
"#;
