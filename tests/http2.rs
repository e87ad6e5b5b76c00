//! `sockscope load http --http2` (and `load grpc`) against real HTTP/2
//! peers on loopback: a stock nginx with `listen ... http2` (h2c with prior
//! knowledge, and TLS with ALPN h2), whose access log is the server's own
//! count of HTTP/2.0 requests; a python3-h2 server (tests/http2/h2_server.py)
//! that counts the requests waiting at once (the client's concurrency),
//! resets streams or sends GOAWAY; a python3-grpcio server with one method
//! that answers and one that fails with a known status. No privileges
//! needed; under CI=true a missing peer fails its test.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::nginx::Nginx;
use common::pyserver::{GRPC_SERVER, PyServer};
use common::*;
use serde_json::Value;

/// Every load here is bounded by -n; this only catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

fn load(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    load_json(dir, args, LIMIT)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn by_class(rep: &Value, class: &str) -> u64 {
    rep["errors"]["by_class"][class].as_u64().unwrap_or(0)
}

#[test]
fn h2c_to_nginx_sends_every_request_as_http2_and_survives_its_goaway() {
    let test = "h2c_to_nginx";
    let Some(ng) = Nginx::start_h2(test, false, "") else {
        return;
    };
    let dir = scratch("h2c_to_nginx-load");
    // 3000 requests cross nginx's keepalive_requests (1000) on each
    // connection: its graceful GOAWAY replaces the connection, no error.
    let url = ng.url("/index.html");
    let (code, rep, err) = load(
        &dir,
        &[
            "http",
            &url,
            "--http2",
            "--streams",
            "8",
            "-c",
            "2",
            "-n",
            "3000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 3000, "{rep}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(ng.logged(3000), 3000);
    let log = ng.log();
    assert!(log.iter().all(|l| l.starts_with("HTTP/2.0 ")), "{log:?}");
    assert!(log.iter().all(|l| l.ends_with(" 200")), "{log:?}");
    // At most 1000 requests per nginx connection: at least 3 connections,
    // each replacement counted.
    let conns: BTreeSet<&str> = log.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    assert!(conns.len() >= 3, "{conns:?}");
    assert_eq!(u(&rep["connections"]["connects"]), conns.len() as u64);
    assert!(
        u(&rep["responses"]["reconnects"]) >= 1,
        "{}",
        rep["responses"]
    );
    let h2 = &rep["config"]["workload_options"]["http2"];
    assert_eq!(h2["protocol"], "h2c", "{h2}");
    assert_eq!(h2["streams"], 8, "{h2}");
    assert_eq!(rep["responses"]["by_status"]["200"], 3000);
}

#[test]
fn h2_over_tls_to_nginx_is_chosen_by_alpn() {
    let test = "h2_tls_to_nginx";
    let Some(ng) = Nginx::start_h2(test, true, "") else {
        return;
    };
    let dir = scratch("h2_tls_to_nginx-load");
    let url = ng.url("/index.html");
    let (code, rep, err) = load(
        &dir,
        &[
            "http",
            &url,
            "--http2",
            "--insecure",
            "--streams",
            "4",
            "-c",
            "2",
            "-n",
            "500",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 500, "{rep}");
    assert_eq!(ng.logged(500), 500);
    assert!(ng.log().iter().all(|l| l.starts_with("HTTP/2.0 ")));
    assert_eq!(rep["config"]["workload_options"]["http2"]["protocol"], "h2");
    let version = rep["config"]["tls"]["protocol_version"].as_str().unwrap();
    assert!(version.starts_with("TLSv1_"), "{version}");
    let hs = &rep["tls_handshake_latency"]["count"];
    assert_eq!(u(hs), u(&rep["connections"]["connects"]), "{rep}");
}

#[test]
fn a_tls_server_without_h2_fails_the_run_naming_alpn() {
    let test = "h2_tls_without_alpn_h2";
    // nginx with TLS but no http2: ALPN picks nothing (HTTP/1.1 only).
    let Some(ng) = Nginx::start_with(test, true, "") else {
        return;
    };
    let dir = scratch("h2_tls_without_alpn_h2-load");
    let url = ng.url("/");
    let (code, _rep, err) = load(&dir, &["http", &url, "--http2", "--insecure", "-n", "10"]);
    assert_eq!(code, Some(1), "{err}");
    // nginx refuses the handshake (no_application_protocol alert); a
    // server that completes it without choosing h2 is named as such.
    assert!(
        err.contains("NoApplicationProtocol") || err.contains("did not choose h2 by ALPN"),
        "{err}"
    );
    assert_eq!(ng.lines(), 0);
}

const H2_SERVER: &str = include_str!("http2/h2_server.py");

/// The python3-h2 server in `mode` with its `n`; its stats file.
fn h2_server(test: &str, mode: &str, n: &str) -> Option<(PyServer, std::path::PathBuf)> {
    let stats = scratch(&format!("{test}-server")).join("stats");
    std::fs::create_dir_all(stats.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats);
    let s = PyServer::start(test, "h2", H2_SERVER, &[mode, stats.to_str().unwrap(), n])?;
    Some((s, stats))
}

/// (requests, most waiting at once) from the server's stats file.
fn stats(path: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1])
}

#[test]
fn streams_are_in_flight_together_on_one_connection() {
    let test = "h2_streams_concurrent";
    // The server answers once 8 requests wait (or after 0.2 s).
    let Some((srv, st)) = h2_server(test, "hold", "8") else {
        return;
    };
    let dir = scratch(test);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let (code, rep, err) = load(
        &dir,
        &[
            "http",
            &url,
            "--http2",
            "--streams",
            "8",
            "-c",
            "1",
            "-n",
            "160",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 160);
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    // Eight requests in flight at once on the one connection.
    assert_eq!(stats(&st), (160, 8));
}

/// The server's four counts ("requests max_waiting resets body_bytes")
/// once `done` holds for them (the last reset may land after the client
/// exits), or as they are after 10 s.
fn stats_when(path: &Path, done: impl Fn(&[u64]) -> bool) -> Vec<u64> {
    let read = || -> Vec<u64> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect()
    };
    for _ in 0..200 {
        let v = read();
        if v.len() == 4 && done(&v) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    read()
}

#[test]
fn the_servers_stream_limit_is_honoured_from_its_first_settings() {
    let test = "h2_stream_limit";
    // At most 3 streams (refused beyond, from the server's first
    // SETTINGS on); answers once 3 wait.
    let Some((srv, st)) = h2_server(test, "limit", "3") else {
        return;
    };
    let dir = scratch(test);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let args = ["http", &url, "--http2", "--streams", "8", "-n", "60"];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(u(&rep["transactions"]), 60);
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    // Never more than the limit in flight, and the limit reached.
    assert_eq!(stats(&st), (60, 3));
}

#[test]
fn a_timed_out_stream_is_cancelled_and_the_connection_goes_on() {
    let test = "h2_timeout";
    // Every 4th request is never answered.
    let Some((srv, st)) = h2_server(test, "drop", "4") else {
        return;
    };
    let dir = scratch(test);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let args = [
        "http",
        &url,
        "--http2",
        "--streams",
        "2",
        "-n",
        "16",
        "--timeout",
        "2",
        "--max-errors",
        "100",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(by_class(&rep, "ETIMEDOUT"), 4, "{}", rep["errors"]);
    assert_eq!(u(&rep["errors"]["total"]), 4);
    assert_eq!(u(&rep["transactions"]), 12);
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    // Each timed-out stream was reset (CANCEL) for the server to see.
    let v = stats_when(&st, |v| v[2] >= 4);
    assert_eq!((v[0], v[2]), (16, 4), "{v:?}");
}

#[test]
fn bodies_flow_both_ways_within_small_windows() {
    let test = "h2_flow";
    // 100 kB answers, sent as our 4 kB stream windows allow.
    let Some((srv, st)) = h2_server(test, "big", "100000") else {
        return;
    };
    let dir = scratch(test);
    // 200 kB requests: more than the server's 64 kB windows (and its
    // 16 kB frames), so they go out as WINDOW_UPDATEs allow.
    let body = dir.join("body");
    std::fs::write(&body, vec![b'b'; 200_000]).unwrap();
    let at = format!("@{}", body.display());
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let args = [
        "http",
        &url,
        "--http2",
        "--method",
        "POST",
        "--body",
        &at,
        "--streams",
        "4",
        "--window",
        "4096",
        "--conn-window",
        "65535",
        "-n",
        "12",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(u(&rep["transactions"]), 12);
    let v = stats_when(&st, |v| v[0] >= 12);
    assert_eq!((v[0], v[3]), (12, 12 * 200_000), "{v:?}");
    // Every answer's bytes were read: 12 x 100 kB at least.
    assert!(
        u(&rep["bytes"]["received"]) >= 1_200_000,
        "{}",
        rep["bytes"]
    );
}

#[test]
fn open_loop_paces_the_streams_and_times_requests_from_their_intended_send() {
    let test = "h2_open_loop_hold";
    // The server answers what waits after 0.2 s (8 never wait: only 2
    // streams): 16 requests due within 16 ms take 8 rounds of >= 0.2 s.
    let Some((srv, st)) = h2_server(test, "hold", "8") else {
        return;
    };
    let dir = scratch(test);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let args = [
        "http",
        &url,
        "--http2",
        "--streams",
        "2",
        "-c",
        "1",
        "--rate",
        "1000",
        "-n",
        "16",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 16);
    // Never more in flight than the streams, even with sends overdue.
    assert_eq!(stats(&st), (16, 2));
    // Latency from the intended send: the last request was due at 15 ms
    // and answered in the 8th round; the middle one in the 4th. From the
    // actual send each is one round.
    let lat = &rep["latency"];
    assert!(u(&lat["max_ns"]) >= 1_400_000_000, "{lat}");
    assert!(u(&lat["p50_ns"]) >= 600_000_000, "{lat}");
    let sent = &rep["latency_uncorrected"];
    assert!(
        u(&sent["p50_ns"]) * 2 < u(&lat["p50_ns"]),
        "{sent} vs {lat}"
    );
    assert_eq!(u(&rep["send_lag"]["count"]), 16, "{}", rep["send_lag"]);
    assert_eq!(rep["config"]["rate"], 1000.0);
}

#[test]
fn open_loop_over_h2c_to_nginx_sends_at_the_rate() {
    let test = "h2c_open_loop_nginx";
    let Some(ng) = Nginx::start_h2(test, false, "") else {
        return;
    };
    let dir = scratch("h2c_open_loop_nginx-load");
    let url = ng.url("/index.html");
    let args = [
        "http",
        &url,
        "--http2",
        "--streams",
        "4",
        "-c",
        "2",
        "--rate",
        "1000",
        "-n",
        "600",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 600, "{rep}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(ng.logged(600), 600);
    assert!(ng.log().iter().all(|l| l.starts_with("HTTP/2.0 ")));
    // The 600th send is due 599 ms in: a pacer never sends early.
    let d = rep["duration_s"].as_f64().unwrap();
    assert!(d >= 0.59, "{d}");
    assert_eq!(u(&rep["send_lag"]["count"]), 600);
}

#[test]
fn rst_stream_and_goaway_are_classed_by_their_codes() {
    let test = "h2_rst_goaway";
    let Some((srv, _)) = h2_server(test, "rst", "3") else {
        return;
    };
    let dir = scratch(test);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    // Every 3rd stream reset: the connection goes on.
    let args = [
        "http",
        &url,
        "--http2",
        "--streams",
        "4",
        "-n",
        "99",
        "--max-errors",
        "1000",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        by_class(&rep, "rst_stream:INTERNAL_ERROR"),
        33,
        "{}",
        rep["errors"]
    );
    assert_eq!(u(&rep["errors"]["total"]), 33);
    assert_eq!(u(&rep["transactions"]), 66);
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    // Over the error budget: exit 1.
    let (code, _, err) = load(&dir, &["http", &url, "--http2", "-n", "9"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("rst_stream:INTERNAL_ERROR"), "{err}");
    drop(srv);

    // The 5th request of each connection gets GOAWAY ENHANCE_YOUR_CALM:
    // it counts as an error and the connection is replaced.
    let Some((srv, _)) = h2_server(test, "goaway", "5") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let args = ["http", &url, "--http2", "-n", "50", "--max-errors", "1000"];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        by_class(&rep, "goaway:ENHANCE_YOUR_CALM"),
        10,
        "{}",
        rep["errors"]
    );
    assert_eq!(u(&rep["errors"]["total"]), 10);
    assert_eq!(u(&rep["transactions"]), 40);
    assert_eq!(u(&rep["connections"]["connects"]), 10);
}

#[test]
fn http2_options_that_cannot_apply_are_usage_errors() {
    let dir = scratch("h2_usage");
    let url = "http://127.0.0.1:1/";
    for (args, says) in [
        (vec!["--streams", "4"], "--http2"),
        (
            vec!["--http2", "--connect-rate", "100"],
            "--connect-rate does not apply to --http2",
        ),
        (vec!["--http2", "--pipeline", "2"], "--pipeline"),
        (vec!["--http2", "-H", "Connection: close"], "HTTP/2 forbids"),
        (vec!["--http2", "--streams", "0"], "--streams"),
    ] {
        let mut all = vec!["http", url];
        all.extend(args.iter().copied());
        let (code, rep, err) = load(&dir, &all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(rep.is_null());
    }
}

#[test]
fn grpc_and_h2c_run_over_unix_sockets() {
    let test = "h2_over_unix";
    let dir = scratch(test);
    let sock = dir.join("grpc.sock");
    let _ = std::fs::remove_file(&sock);
    let Some(srv) = PyServer::start(
        test,
        "grpc",
        GRPC_SERVER,
        &["hello-proto", "", sock.to_str().unwrap()],
    ) else {
        return;
    };
    let target = format!("unix:{}", sock.display());
    let args = [
        "grpc",
        target.as_str(),
        "--method",
        "test.Echo/Ping",
        "--data",
        "hello-proto",
        "--streams",
        "4",
        "-n",
        "120",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 120, "{rep}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(rep["target"], target.as_str());
    let mut tls = args.to_vec();
    tls.push("--tls");
    let (code, _, err) = load(&dir, &tls);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls over a Unix socket"), "{err}");
    drop(srv);

    // nginx's h2c on a Unix socket: its log says HTTP/2.0 for each.
    let Some(ng) = Nginx::start_h2_unix("h2c_nginx_unix") else {
        return;
    };
    let url = ng.url("/index.html");
    let args = [
        "http",
        &url,
        "--http2",
        "--streams",
        "4",
        "-c",
        "2",
        "-n",
        "300",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 300, "{rep}");
    assert_eq!(ng.logged(300), 300);
    assert!(ng.log().iter().all(|l| l.starts_with("HTTP/2.0 ")));
}

#[test]
fn grpc_calls_are_counted_and_a_failed_status_is_classed() {
    let test = "grpc_unary";
    let Some(srv) = PyServer::start(test, "grpc", GRPC_SERVER, &["hello-proto"]) else {
        return;
    };
    let dir = scratch(test);
    let data = dir.join("request.bin");
    std::fs::write(&data, b"hello-proto").unwrap();
    let at = format!("@{}", data.display());
    let addr = format!("127.0.0.1:{}", srv.port);
    let base = [
        "grpc",
        addr.as_str(),
        "--data",
        at.as_str(),
        "--streams",
        "4",
        "-c",
        "2",
    ];
    let run = |method: &str, more: &[&str]| {
        let mut all = base.to_vec();
        all.extend_from_slice(&["--method", method]);
        all.extend_from_slice(more);
        load(&dir, &all)
    };
    let (code, rep, err) = run("test.Echo/Ping", &["-n", "200"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 200, "{rep}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    assert_eq!(
        rep["responses"]["by_status"]["OK"], 200,
        "{}",
        rep["responses"]
    );
    assert_eq!(rep["workload"], "grpc");
    // Open loop: the same calls at a rate, each timed from its due time.
    let (code, rep, err) = run("test.Echo/Ping", &["-n", "100", "--rate", "400"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 100, "{rep}");
    assert_eq!(u(&rep["send_lag"]["count"]), 100, "{}", rep["send_lag"]);
    assert!(rep["duration_s"].as_f64().unwrap() >= 0.24, "{rep}");
    // A schedule: one step per rate, the steps adding up to the run.
    let (code, rep, err) = run("test.Echo/Ping", &["--rate", "100,200 every 1s"]);
    assert_eq!(code, Some(0), "{err}");
    let steps = rep["steps"].as_array().expect("steps");
    let asked: Vec<f64> = steps
        .iter()
        .map(|s| s["requested_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(asked, [100.0, 200.0], "{}", rep["steps"]);
    let sum: u64 = steps.iter().map(|s| u(&s["transactions"])).sum();
    assert_eq!(sum, u(&rep["transactions"]));
    assert!(sum >= 150, "{sum} of 300 due");
    // The server's status, by name; the connection goes on.
    let (code, rep, err) = run("test.Echo/Fail", &["-n", "50", "--max-errors", "100"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        by_class(&rep, "grpc_status:NOT_FOUND"),
        50,
        "{}",
        rep["errors"]
    );
    assert_eq!(u(&rep["connections"]["connects"]), 2);
    let (code, _, err) = run("test.Echo/Nope", &["-n", "5"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("grpc_status:UNIMPLEMENTED"), "{err}");
    // Other bytes than the server expects: its INVALID_ARGUMENT.
    let mut all = vec!["grpc", addr.as_str(), "--method", "test.Echo/Ping"];
    all.extend_from_slice(&["--data", "other", "-n", "3"]);
    let (code, _, err) = load(&dir, &all);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("grpc_status:INVALID_ARGUMENT"), "{err}");
}

#[test]
fn grpc_bad_methods_and_addresses_are_usage_errors() {
    let dir = scratch("grpc_usage");
    for (args, says) in [
        (vec!["127.0.0.1:1", "--method", "NoSlash"], "no / between"),
        (vec!["127.0.0.1:1", "--method", "a.B/"], "not an identifier"),
        (vec!["no-port-here", "--method", "a.B/C"], "no-port-here"),
        (
            vec!["127.0.0.1:1", "--method", "a.B/C", "--connect-rate", "5"],
            "--connect-rate",
        ),
        (
            vec!["127.0.0.1:1", "--method", "a.B/C", "--insecure"],
            "--tls",
        ),
        (
            vec!["127.0.0.1:1", "--method", "a.B/C", "-H", "te: x"],
            "set by load grpc",
        ),
    ] {
        let mut all = vec!["grpc"];
        all.extend(args.iter().copied());
        let (code, rep, err) = load(&dir, &all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(rep.is_null());
    }
}

/// The descriptor set of `package test; service Kv { rpc Put(PutRequest)
/// returns (PutReply); rpc Watch(PutRequest) returns (stream PutReply); }
/// message PutRequest { string key = 1; int64 n = 2; repeated string tags
/// = 3; } message PutReply {}`, built as protoc would write it (no protoc
/// needed), in `dir`.
fn kv_protoset(dir: &Path) -> std::path::PathBuf {
    use prost::Message;
    use prost_types::field_descriptor_proto::{Label, Type};
    use prost_types::{
        DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
        MethodDescriptorProto, ServiceDescriptorProto,
    };
    let field = |name: &str, number, ty: Type, label: Label| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        r#type: Some(ty as i32),
        label: Some(label as i32),
        json_name: Some(name.into()),
        ..Default::default()
    };
    let method = |name: &str, server_streaming| MethodDescriptorProto {
        name: Some(name.into()),
        input_type: Some(".test.PutRequest".into()),
        output_type: Some(".test.PutReply".into()),
        server_streaming: Some(server_streaming),
        ..Default::default()
    };
    let file = FileDescriptorProto {
        name: Some("kv.proto".into()),
        package: Some("test".into()),
        syntax: Some("proto3".into()),
        message_type: vec![
            DescriptorProto {
                name: Some("PutRequest".into()),
                field: vec![
                    field("key", 1, Type::String, Label::Optional),
                    field("n", 2, Type::Int64, Label::Optional),
                    field("tags", 3, Type::String, Label::Repeated),
                ],
                ..Default::default()
            },
            DescriptorProto {
                name: Some("PutReply".into()),
                ..Default::default()
            },
        ],
        service: vec![ServiceDescriptorProto {
            name: Some("Kv".into()),
            method: vec![method("Put", false), method("Watch", true)],
            ..Default::default()
        }],
        ..Default::default()
    };
    let path = dir.join("kv.protoset");
    let set = FileDescriptorSet { file: vec![file] };
    std::fs::write(&path, set.encode_to_vec()).unwrap();
    path
}

#[test]
fn grpc_json_requests_are_converted_through_the_protoset() {
    let test = "grpc_json";
    let dir = scratch(test);
    let seen = dir.join("seen");
    let Some(srv) = PyServer::start(
        test,
        "grpc",
        GRPC_SERVER,
        &["unused", seen.to_str().unwrap()],
    ) else {
        return;
    };
    let set = kv_protoset(&dir);
    let addr = format!("127.0.0.1:{}", srv.port);
    let json = r#"{"key":"a","n":"5","tags":["x"]}"#;
    let (code, rep, err) = load(
        &dir,
        &[
            "grpc",
            &addr,
            "--protoset",
            set.to_str().unwrap(),
            "--method",
            "test.Kv/Put",
            "--data-json",
            json,
            "-n",
            "50",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["transactions"]), 50, "{rep}");
    assert_eq!(u(&rep["errors"]["total"]), 0, "{}", rep["errors"]);
    // The server's own count: every call carried exactly that message.
    assert_eq!(stats(&seen), (50, 0));
    let opts = &rep["config"]["workload_options"];
    assert_eq!(opts["request"], "json", "{opts}");
    assert_eq!(opts["protoset"]["file"], set.to_str().unwrap(), "{opts}");
    assert_eq!(opts["protoset"]["input_type"], "test.PutRequest", "{opts}");
    assert_eq!(opts["protoset"]["output_type"], "test.PutReply", "{opts}");
    // 0a 01 'a' 10 05 1a 01 'x'.
    assert_eq!(opts["message_bytes"], 8, "{opts}");

    // The same JSON from a file; another message is the server's
    // mismatch, so the count above proves it checks.
    let file = dir.join("put.json");
    std::fs::write(&file, r#"{"key": "b", "n": 5, "tags": ["x"]}"#).unwrap();
    let at = format!("@{}", file.display());
    let (code, _, err) = load(
        &dir,
        &[
            "grpc",
            &addr,
            "--protoset",
            set.to_str().unwrap(),
            "--method",
            "test.Kv/Put",
            "--data-json",
            &at,
            "-n",
            "3",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("grpc_status:INVALID_ARGUMENT"), "{err}");
    assert_eq!(stats(&seen), (50, 3));

    // Answers OK that are no PutReply: one worker's first is checked and
    // classed, the 19 after it are read and not decoded.
    let (code, rep, err) = load(
        &dir,
        &[
            "grpc",
            &addr,
            "--protoset",
            set.to_str().unwrap(),
            "--method",
            "test.Kv/Put",
            "--data-json",
            r#"{"key":"bad-reply"}"#,
            "-n",
            "20",
            "-c",
            "1",
            "-t",
            "1",
            "--max-errors",
            "5",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(by_class(&rep, "grpc_bad_response"), 1, "{}", rep["errors"]);
    assert_eq!(u(&rep["errors"]["total"]), 1, "{}", rep["errors"]);
    assert_eq!(u(&rep["transactions"]), 19, "{rep}");
    assert_eq!(stats(&seen), (50, 3));
}

#[test]
fn grpc_protoset_and_json_mistakes_are_usage_errors() {
    let dir = scratch("grpc_json_usage");
    let set = kv_protoset(&dir);
    let set = set.to_str().unwrap();
    let junk = dir.join("junk");
    std::fs::write(&junk, b"hello, world").unwrap();
    let junk = junk.to_str().unwrap();
    // Over 4 MiB as protobuf: a key of 4 MiB and a byte.
    let big = dir.join("big.json");
    std::fs::write(
        &big,
        format!(r#"{{"key":"{}"}}"#, "k".repeat((4 << 20) + 1)),
    )
    .unwrap();
    let big = format!("@{}", big.display());
    let put = "test.Kv/Put";
    let ok = r#"{"key":"a"}"#;
    for (args, says) in [
        (
            vec!["--protoset", "/nonexistent/kv.protoset", "--method", put],
            "cannot read it",
        ),
        (
            vec!["--protoset", junk, "--method", put],
            "not a FileDescriptorSet",
        ),
        (
            vec![
                "--protoset",
                set,
                "--method",
                put,
                "--data-json",
                r#"{"key":"#,
            ],
            "--data-json: not JSON",
        ),
        (
            vec![
                "--protoset",
                set,
                "--method",
                put,
                "--data-json",
                r#"{"nope":1}"#,
            ],
            "nope",
        ),
        (
            vec![
                "--protoset",
                set,
                "--method",
                put,
                "--data-json",
                r#"{"n":"five"}"#,
            ],
            "not a test.PutRequest at n:",
        ),
        (
            vec![
                "--protoset",
                set,
                "--method",
                put,
                "--data-json",
                r#"{"tags":[1]}"#,
            ],
            "at tags[0]",
        ),
        (vec!["--method", put, "--data-json", ok], "--protoset"),
        (
            vec![
                "--protoset",
                set,
                "--method",
                put,
                "--data-json",
                ok,
                "--data",
                "x",
            ],
            "cannot be used with",
        ),
        (
            vec!["--protoset", set, "--method", put, "--data-json", &big],
            "a gRPC message is at most 4194304",
        ),
        (
            vec!["--protoset", set, "--method", put, "--data", "\x0a\x05a"],
            "does not decode as test.PutRequest",
        ),
        (
            vec!["--protoset", set, "--method", "test.Kv2/Put"],
            "no service test.Kv2; its services: test.Kv",
        ),
        (
            vec!["--protoset", set, "--method", "test.Kv/Get"],
            "no method Get; its methods: Put, Watch",
        ),
        (
            vec!["--protoset", set, "--method", "test.Kv/Watch"],
            "server-streaming: load grpc runs unary calls only",
        ),
    ] {
        let mut all = vec!["grpc", "127.0.0.1:1"];
        all.extend(args.iter().copied());
        let (code, rep, err) = load(&dir, &all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(rep.is_null());
    }
}
