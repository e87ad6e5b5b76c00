//! The request anatomy's HTTP/2 streams (src/bpf/h2.h, named by
//! src/anatomy/h2names.rs) against real servers' own counts: nginx (h2c)
//! under h2load with 8 streams in flight per connection, every stream a
//! request, named and classed as nginx's access log has it, every one
//! timed; a python3-grpcio server's two methods, one failing, named by
//! service and method with their grpc-status; hostile frames give up on
//! their connection only.

use crate::common;

use std::collections::BTreeMap;

use common::anatomy::{add_status_classes, brief, profile_pid, route_template, u};
use common::nginx::Nginx;
use common::pyserver::{GRPC_SERVER, PyServer};
use common::*;
use serde_json::Value;

/// nginx's two locations, one answering 404; no connection closed by
/// nginx during a run.
const LOCATIONS: &str = "keepalive_requests 1000000;\n    \
                         location /a/ { return 200 \"ok\\n\"; }\n    \
                         location = /missing { return 404; }";

/// The anatomy's rows of `protocol` that `which` keeps, by name.
fn endpoints<'a>(
    a: &'a Value,
    protocol: &str,
    which: impl Fn(&Value) -> bool,
) -> BTreeMap<String, &'a Value> {
    a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
        .iter()
        .filter(|e| e["protocol"] == protocol && which(e))
        .map(|e| (e["name"].as_str().unwrap().to_string(), e))
        .collect()
}

/// [`endpoints`] on TCP port `port`.
fn on_port<'a>(a: &'a Value, port: u16, protocol: &str) -> BTreeMap<String, &'a Value> {
    endpoints(a, protocol, |e| {
        e["transport"] == "tcp" && u(&e["port"]) == u64::from(port)
    })
}

/// The access log (h2 format: `$server_protocol $connection
/// $connection_requests $request_method $uri $status`) as (method and
/// route template, status class) -> lines.
fn logged(ngx: &Nginx) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for l in ngx.log() {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 6, "{l}");
        assert_eq!(f[0], "HTTP/2.0", "{l}");
        let class = format!("{}xx", &f[5][..1]);
        *out.entry((format!("{} {}", f[3], route_template(f[4])), class))
            .or_default() += 1;
    }
    out
}

#[test]
fn h2load_streams_are_requests_named_and_classed_as_nginx_logged_them_and_all_timed() {
    let name = "h2load_streams_are_requests";
    if !require_bpf(name) || !require_program("h2load", name) {
        return;
    }
    let Some(ngx) = Nginx::start_h2_server_conf(name, LOCATIONS) else {
        return;
    };
    const N: u64 = 4000;
    let urls: Vec<String> = ["/a/1", "/a/deadbeef99", "/a/x", "/missing"]
        .iter()
        .map(|p| ngx.url(p))
        .collect();
    let cmd = format!("h2load -n {N} -c 2 -m 8 {}", urls.join(" "));
    let (rep, summary, html) = profile_pid("h2-h2load-run", ngx.child.id(), "--load-cmd", &cmd);
    let a = &rep["anatomy"];
    assert_eq!(ngx.logged(N), N);
    let h2 = &a["http2"];
    // Two connections, both HTTP/2 from their preface; every stream is a
    // request, and every one was timed (8 in flight per connection, as
    // h2load -m 8 keeps them): no turn is "multiplexed" any more.
    assert_eq!(u(&h2["connections"]), 2, "{}", brief(a));
    assert_eq!(u(&h2["unparsed"]), 0, "{}", brief(a));
    assert_eq!(u(&h2["streams"]), N, "{}", brief(a));
    assert_eq!(u(&h2["turns"]), N, "{}", brief(a));
    assert_eq!(u(&a["requests"]), N, "{}", brief(a));
    assert_eq!(u(&a["turns"]), N, "{}", brief(a));
    assert_eq!(u(&a["multiplexed"]["connections"]), 0, "{}", brief(a));
    // Per route template and status class, exactly the access log.
    let rows = on_port(a, ngx.port, "http2");
    let mut got = BTreeMap::new();
    let mut timed = 0;
    for (name, e) in &rows {
        add_status_classes(&mut got, name, e);
        assert_eq!(u(&e["errors"]), u(&e["status"]["5xx"]), "{e}");
        assert_eq!(u(&e["client_errors"]), u(&e["status"]["4xx"]), "{e}");
        assert_eq!(u(&e["count"]), u(&e["turns"]), "{e}");
        timed += u(&e["turns"]);
    }
    assert_eq!(got, logged(&ngx), "{}", brief(a));
    assert_eq!(timed, N);
    // 3 of the 4 paths fold to one template.
    assert_eq!(u(&rows["GET /a/{id}"]["count"]), N / 2, "{rows:?}");
    // Each stream's parts add up to its server time: the endpoints' parts
    // sum to the anatomy's, part by part (means times turns, rounded).
    let mut sums = [0f64; 4];
    for e in rows.values() {
        let m = &e["parts_mean"];
        let t = u(&e["turns"]) as f64;
        for (i, k) in ["queue_wait_ns", "cpu_wait_ns", "service_ns", "send_ns"]
            .iter()
            .enumerate()
        {
            sums[i] += m[k].as_f64().unwrap() * t;
        }
    }
    for (i, k) in ["queue_wait", "cpu_wait", "service", "send"]
        .iter()
        .enumerate()
    {
        let want = u(&a["sums_ns"][k]) as f64;
        assert!(
            (sums[i] - want).abs() <= want * 1e-6 + 4.0 * N as f64,
            "{k}: endpoints {} vs anatomy {want}",
            sums[i]
        );
    }
    assert!(summary.contains("GET /a/{id}"), "{summary}");
    assert!(
        html.contains("GET /missing"),
        "no endpoint row in the report"
    );
}

/// A python3-grpcio server (on a loopback port, or on a Unix socket)
/// under two of sockscope's gRPC loads through a profile: every call a
/// request named by its service and method, with its grpc-status, every
/// one timed.
fn grpc_methods_named(name: &str, unix: bool) {
    if !require_bpf(name) {
        return;
    }
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("grpc.sock");
    let _ = std::fs::remove_file(&sock);
    let args: Vec<&str> = if unix {
        vec!["ping", "", sock.to_str().unwrap()]
    } else {
        vec!["ping"]
    };
    let Some(srv) = PyServer::start(name, "grpc", GRPC_SERVER, &args) else {
        return;
    };
    let target = if unix {
        format!("unix:{}", sock.display())
    } else {
        format!("127.0.0.1:{}", srv.port)
    };
    let (ok, failed) = (600u64, 150u64);
    let load = |method: &str, n: u64| {
        format!(
            "{} load grpc {target} --method {method} --data ping --streams 4 -c 2 -n {n} \
             --max-errors {n} --quiet",
            sockscope()
        )
    };
    // --load-cmd runs one program (its words split as a shell would,
    // not through one): sh runs the two loads in turn.
    let cmd = format!(
        "sh -c '{} && {}'",
        load("test.Echo/Ping", ok),
        load("test.Echo/Fail", failed)
    );
    let (rep, summary, _) =
        profile_pid(&format!("{name}-run"), srv.child.0.id(), "--load-cmd", &cmd);
    let a = &rep["anatomy"];
    let h2 = &a["http2"];
    assert_eq!(u(&h2["connections"]), 4, "{}", brief(a));
    assert_eq!(u(&h2["unparsed"]), 0, "{}", brief(a));
    assert_eq!(u(&h2["streams"]), ok + failed, "{}", brief(a));
    assert_eq!(u(&h2["turns"]), ok + failed, "{}", brief(a));
    let rows = endpoints(a, "grpc", |e| {
        if unix {
            e["transport"] == "unix"
        } else {
            u(&e["port"]) == u64::from(srv.port)
        }
    });
    let ping = rows
        .get("/test.Echo/Ping")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(u(&ping["count"]), ok, "{ping}");
    assert_eq!(u(&ping["turns"]), ok, "{ping}");
    assert_eq!(u(&ping["grpc_status"]["OK"]), ok, "{ping}");
    assert_eq!(u(&ping["errors"]), 0, "{ping}");
    let fail = &rows["/test.Echo/Fail"];
    assert_eq!(u(&fail["count"]), failed, "{fail}");
    assert_eq!(u(&fail["grpc_status"]["NOT_FOUND"]), failed, "{fail}");
    assert_eq!(u(&fail["errors"]), failed, "{fail}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(summary.contains("/test.Echo/Fail"), "{summary}");
}

#[test]
fn grpc_methods_are_named_by_service_and_method_with_their_grpc_status() {
    grpc_methods_named("grpc_methods_are_named", false);
}

#[test]
fn grpc_over_a_unix_socket_is_named_and_timed_too() {
    grpc_methods_named("grpc_over_unix_named", true);
}

/// An HTTP/2 frame header: length, type, flags, stream.
fn frame(len: u32, ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[ty, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn hostile_http2_frames_give_up_on_their_connection_only() {
    let name = "hostile_http2_frames";
    if !require_bpf(name) || !require_program("h2load", name) {
        return;
    }
    let Some(ngx) = Nginx::start_h2_server_conf(name, LOCATIONS) else {
        return;
    };
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let settings = frame(0, 4, 0, 0, &[]);
    // A HEADERS frame announcing 16 MB (more header block than the kernel
    // passes on), one of 20 kB, and bytes that are no frame at all.
    let huge = [PREFACE, &settings, &frame(0xff_ffff, 1, 4, 1, &[0x82; 64])].concat();
    let long = [PREFACE, &settings, &frame(20_000, 1, 5, 1, &[0x41; 2000])].concat();
    let junk = [PREFACE, &[0xffu8; 300][..]].concat();
    // The load: h2load's 400 good streams, then each hostile connection
    // written and closed (by python3, from files this test wrote).
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (i, bytes) in [huge, long, junk].iter().enumerate() {
        let f = dir.join(format!("hostile-{i}.bin"));
        std::fs::write(&f, bytes).unwrap();
        files.push(format!("'{}'", f.display()));
    }
    let send = format!(
        "import socket, sys, time\nfor f in sys.argv[1:]:\n    s = socket.create_connection(\
         ('127.0.0.1', {}))\n    s.sendall(open(f, 'rb').read())\n    time.sleep(0.1)\n    \
         s.close()\n",
        ngx.port
    );
    let py = dir.join("send.py");
    std::fs::write(&py, send).unwrap();
    let cmd = format!(
        "sh -c \"h2load -n 400 -c 1 -m 4 {} && /usr/bin/python3 '{}' {}\"",
        ngx.url("/a/1"),
        py.display(),
        files.join(" ")
    );
    let (rep, _, _) = profile_pid("h2-hostile-run", ngx.child.id(), "--load-cmd", &cmd);
    let a = &rep["anatomy"];
    let h2 = &a["http2"];
    // The good connection's streams are all there and timed; each hostile
    // connection that reached the parser's bounds was given up on.
    let rows = on_port(a, ngx.port, "http2");
    assert_eq!(u(&rows["GET /a/{id}"]["turns"]), 400, "{}", brief(a));
    // The two oversized header blocks end their connections' parsing;
    // the junk is frames of an unknown type, passed by their length.
    assert_eq!(u(&h2["connections"]), 4, "{}", brief(a));
    assert_eq!(u(&h2["unparsed"]), 2, "{}", brief(a));
    // Nothing of the hostile bytes became a name.
    assert!(
        rows.keys().all(|n| n == "GET /a/{id}"),
        "{rows:?}: {}",
        brief(a)
    );
}
