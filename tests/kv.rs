//! `sockscope load redis` and `load memcached` against real servers each
//! test starts on a free loopback port (and kills afterwards), against
//! in-test servers that answer garbage or close mid-response, and with bad
//! options. The cross-checks set the load's own counts against the
//! servers' counters (redis `INFO commandstats`/`stats`, memcached
//! `stats`). A missing redis or memcached server skips a test with a
//! printed reason, and fails it under CI=true.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::memcached::Memcached;
use common::redis::{Redis, field};
use common::*;
use serde_json::Value;

/// Every load here is bounded by -n or -d; this catches a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// A redis for a kv test, or None when it is missing (outside CI).
fn redis() -> Option<Redis> {
    Redis::start("a test with redis")
}

/// Runs `sockscope load ARGS --json FILE`; returns the exit code, the
/// report (Null when none was written) and stderr.
fn load(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    load_json(dir, args, LIMIT)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The server's count `server` of what the load counted as `ours`: equal,
/// or above by at most the requests still unanswered at the end (sent, and
/// maybe processed, but never answered).
fn agrees(what: &str, server: u64, ours: u64, rep: &Value) {
    let unanswered = u(&rep["errors"]["unanswered_at_end"]);
    assert!(
        server >= ours && server - ours <= unanswered,
        "{what}: server counted {server}, the load {ours} (+ up to {unanswered} unanswered)"
    );
}

#[test]
fn redis_counts_agree_with_info_commandstats_and_keyspace_hits() {
    let Some(redis) = redis() else { return };
    let dir = scratch("kv-redis-counts");
    // A duration run with a warm-up and requests in flight at the end: the
    // responses cover the whole run, and what was never answered is the
    // only slack.
    let (code, rep, err) = load(
        &dir,
        &[
            "redis",
            &redis.addr(),
            "-c",
            "8",
            "--pipeline",
            "8",
            "--warmup",
            "0.3",
            "-d",
            "1",
            "--keys",
            "2000",
            "--key-dist",
            "zipf:0.99",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["workload"], "redis");
    let r = &rep["responses"];
    let (get, set) = (&r["by_command"]["GET"], &r["by_command"]["SET"]);
    assert!(u(&get["answered"]) > 1000, "{r}");
    // The default mix: one SET per ten GETs. Each connection's answers
    // are a prefix of its schedule, so the SETs are a round's share of
    // them to within one per connection.
    let total = u(&get["answered"]) + u(&set["answered"]);
    assert!(u(&set["answered"]).abs_diff(total / 11) <= 16, "{r}");
    assert_eq!(u(&r["answered"]), u(&get["answered"]) + u(&set["answered"]));
    agrees("GET calls", redis.calls("get"), u(&get["answered"]), &rep);
    agrees("SET calls", redis.calls("set"), u(&set["answered"]), &rep);
    // Redis counts a GET's hit or miss in keyspace_hits/misses (SET does
    // not look keys up).
    let stats = redis.info("stats");
    let (hits, misses) = (u(&r["hits"]), u(&r["misses"]));
    assert_eq!(hits + misses, u(&get["answered"]));
    assert!(hits > 0 && misses > 0, "{r}");
    let unanswered = u(&rep["errors"]["unanswered_at_end"]);
    let server_hits: u64 = stats["keyspace_hits"].parse().unwrap();
    let server_misses: u64 = stats["keyspace_misses"].parse().unwrap();
    assert!(
        server_hits >= hits && server_misses >= misses,
        "{server_hits}/{server_misses} vs {hits}/{misses}"
    );
    assert!(server_hits + server_misses - hits - misses <= unanswered);
    let ratio = r["hit_ratio"].as_f64().unwrap();
    assert!((ratio - hits as f64 / (hits + misses) as f64).abs() < 1e-9);
    assert_eq!(
        rep["config"]["workload_options"]["commands"],
        serde_json::json!(["SET key:{key} {value}", "GET key:{key}"])
    );
    assert_eq!(rep["config"]["workload_options"]["ratio"], "1:10");
    assert_eq!(rep["config"]["workload_options"]["key_dist"], "zipf:0.99");
    assert_eq!(rep["config"]["pipeline"], 8);
}

#[test]
fn redis_gets_after_a_set_phase_all_hit_and_other_keys_all_miss() {
    let Some(redis) = redis() else { return };
    let dir = scratch("kv-redis-hits");
    let addr = redis.addr();
    // 20000 SETs over 500 keys leave no key unset (a key is missed with
    // probability (1 - 1/500)^20000, about 4e-18).
    let (code, rep, err) = load(
        &dir,
        &[
            "redis",
            &addr,
            "-c",
            "4",
            "-n",
            "20000",
            "--keys",
            "500",
            "--command",
            "SET k:{key} {value}",
            "--value-size",
            "100",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(u(&rep["responses"]["by_command"]["SET"]["answered"]), 20000);
    assert!(rep["responses"]["hits"].is_null(), "SET is no lookup");
    let (code, rep, err) = load(
        &dir,
        &[
            "redis",
            &addr,
            "-n",
            "10000",
            "--keys",
            "500",
            "--command",
            "GET k:{key}",
            "--command",
            "GET never:{key}",
            "--ratio",
            "3:1",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["responses"];
    // One GET row for both templates, as redis counts them.
    assert_eq!(u(&r["by_command"]["GET"]["answered"]), 10000);
    assert_eq!(u(&r["hits"]), 7500, "{r}");
    assert_eq!(u(&r["misses"]), 2500, "{r}");
    assert_eq!(r["hit_ratio"].as_f64(), Some(0.75));
    // The payload came back whole: 100 value bytes per hit.
    assert!(u(&rep["bytes"]["received"]) >= 7500 * 100);
    assert_eq!(redis.calls("get"), 10000);
    assert_eq!(redis.calls("set"), 20000);
    let stats = redis.info("stats");
    assert_eq!(stats["keyspace_hits"], "7500");
    assert_eq!(stats["keyspace_misses"], "2500");
}

#[test]
fn redis_error_replies_are_server_errors_and_the_connection_goes_on() {
    let Some(redis) = redis() else { return };
    let dir = scratch("kv-redis-err");
    let addr = redis.addr();
    // Every one of 50 keys holds a string that is not a number (2000 SETs
    // miss a key with probability 50 * (49/50)^2000, about 1e-16).
    let (code, _, err) = load(
        &dir,
        &[
            "redis",
            &addr,
            "-n",
            "2000",
            "--keys",
            "50",
            "--command",
            "SET k:{key} notanumber",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    // INCR of such a value, and a command redis does not know: both are
    // answered with -ERR; GET still works on the same connection.
    let args = [
        "redis",
        &addr,
        "-n",
        "3000",
        "--keys",
        "50",
        "--command",
        "INCR k:{key}",
        "--command",
        "NOSUCHCOMMAND k:{key}",
        "--command",
        "GET k:{key}",
    ];
    let (code, rep, err) = load(&dir, &args);
    assert_eq!(
        code,
        Some(1),
        "errors over --max-errors fail the run: {err}"
    );
    assert!(err.contains("server_error"), "{err}");
    assert_eq!(rep["complete"], false);
    assert_eq!(u(&rep["errors"]["by_class"]["server_error"]), 2000);
    let mut tolerant = args.to_vec();
    tolerant.extend_from_slice(&["--max-errors", "2000"]);
    let before = redis.info("errorstats");
    let before_err = field(&before["errorstat_ERR"], "count");
    let incr_before = redis.calls("incr");
    let failed_before = field(&redis.info("commandstats")["cmdstat_incr"], "failed_calls");
    let (code, rep, err) = load(&dir, &tolerant);
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["responses"];
    let by = &r["by_command"];
    assert_eq!(u(&rep["errors"]["total"]), 2000, "{}", rep["errors"]);
    assert_eq!(u(&rep["errors"]["by_class"]["server_error"]), 2000);
    assert_eq!(u(&by["INCR"]["errors"]), 1000, "{by}");
    assert_eq!(u(&by["NOSUCHCOMMAND"]["errors"]), 1000, "{by}");
    assert_eq!(u(&by["GET"]["errors"]), 0, "{by}");
    assert_eq!(u(&by["GET"]["hits"]), 1000, "{by}");
    // The same connection carried on: one connect, every request answered.
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    assert_eq!(u(&r["answered"]), 3000);
    assert_eq!(u(&rep["transactions"]), 1000);
    // Redis's own count of its -ERR replies, and of the INCRs it ran and
    // failed (a command it does not know is rejected before it counts as
    // a call).
    let after_err = field(&redis.info("errorstats")["errorstat_ERR"], "count");
    assert_eq!(after_err - before_err, 2000);
    assert_eq!(redis.calls("incr") - incr_before, 1000);
    let failed = field(&redis.info("commandstats")["cmdstat_incr"], "failed_calls");
    assert_eq!(failed - failed_before, 1000);
}

#[test]
fn redis_pipeline_16_counts_exactly() {
    let Some(redis) = redis() else { return };
    let dir = scratch("kv-redis-p16");
    let (code, rep, err) = load(
        &dir,
        &[
            "redis",
            &redis.addr(),
            "-c",
            "4",
            "-t",
            "2",
            "--pipeline",
            "16",
            "-n",
            "40000",
            "--ratio",
            "1:3",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["responses"];
    assert_eq!(u(&rep["transactions"]), 40000);
    assert_eq!(u(&rep["errors"]["unanswered_at_end"]), 0);
    assert_eq!(u(&r["answered"]), 40000);
    let (get, set) = (
        u(&r["by_command"]["GET"]["answered"]),
        u(&r["by_command"]["SET"]["answered"]),
    );
    assert_eq!(redis.calls("get"), get);
    assert_eq!(redis.calls("set"), set);
    // 1:3 per connection, within one round of the schedule on each.
    assert!(set.abs_diff(10000) <= 4, "{set}");
    assert_eq!(rep["config"]["pipeline"], 16);
}

#[test]
fn memcached_counts_agree_with_stats() {
    let Some(mc) = Memcached::start() else {
        return;
    };
    let dir = scratch("kv-mc-counts");
    let before = mc.memcached_stats();
    let (code, rep, err) = load(
        &dir,
        &[
            "memcached",
            &mc.addr(),
            "-c",
            "8",
            "--pipeline",
            "4",
            "--warmup",
            "0.2",
            "-d",
            "1",
            "--keys",
            "1000",
            "--key-dist",
            "zipf:1.1",
            "--value-size",
            "200",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(rep["workload"], "memcached");
    let after = mc.memcached_stats();
    let delta = |k: &str| after[k] - before.get(k).copied().unwrap_or(0);
    let r = &rep["responses"];
    let (get, set) = (&r["by_command"]["get"], &r["by_command"]["set"]);
    assert!(u(&get["answered"]) > 1000, "{r}");
    agrees("cmd_get", delta("cmd_get"), u(&get["answered"]), &rep);
    agrees("cmd_set", delta("cmd_set"), u(&set["answered"]), &rep);
    agrees("get_hits", delta("get_hits"), u(&r["hits"]), &rep);
    agrees("get_misses", delta("get_misses"), u(&r["misses"]), &rep);
    let unanswered = u(&rep["errors"]["unanswered_at_end"]);
    assert!(
        delta("cmd_get") + delta("cmd_set") - u(&r["answered"]) <= unanswered,
        "{r}"
    );
    assert!(u(&r["hits"]) > 0 && u(&r["misses"]) > 0, "{r}");
    assert_eq!(u(&get["hits"]), u(&r["hits"]));
    // A count run drains: the counts are then exact.
    let before = mc.memcached_stats();
    let (code, rep, err) = load(
        &dir,
        &[
            "memcached",
            &mc.addr(),
            "-c",
            "2",
            "--pipeline",
            "16",
            "-n",
            "20000",
            "--keys",
            "1000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let after = mc.memcached_stats();
    let delta = |k: &str| after[k] - before.get(k).copied().unwrap_or(0);
    let r = &rep["responses"];
    assert_eq!(delta("cmd_get"), u(&r["by_command"]["get"]["answered"]));
    assert_eq!(delta("cmd_set"), u(&r["by_command"]["set"]["answered"]));
    assert_eq!(delta("get_hits"), u(&r["hits"]));
    assert_eq!(delta("get_misses"), u(&r["misses"]));
    assert_eq!(u(&r["answered"]), 20000);
}

#[test]
fn memcached_server_and_client_errors_are_counted_by_class() {
    let Some(mc) = Memcached::start() else {
        return;
    };
    let dir = scratch("kv-mc-err");
    let addr = mc.addr();
    // A value over memcached's 1 MiB item limit: SERVER_ERROR (memcached
    // swallows the data and goes on).
    let (code, rep, err) = load(
        &dir,
        &[
            "memcached",
            &addr,
            "-n",
            "40",
            "--command",
            "set big:{key} {value}",
            "--command",
            "get big:{key}",
            "--value-size",
            "2000000",
            "--max-errors",
            "1000",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let e = &rep["errors"]["by_class"];
    assert_eq!(u(&e["server_error"]), 20, "{e}");
    let r = &rep["responses"];
    assert_eq!(u(&r["by_command"]["set"]["errors"]), 20);
    assert_eq!(u(&r["misses"]), 20, "nothing was stored");
    assert_eq!(u(&rep["connections"]["connects"]), 1);
    // incr of a value that is not a number: CLIENT_ERROR. First every one
    // of 5 keys gets such a value (200 sets miss one with probability
    // 5 * (4/5)^200, about 1e-19), then 100 incrs, and a get between each.
    let (code, _, err) = load(
        &dir,
        &[
            "memcached",
            &addr,
            "-n",
            "200",
            "--keys",
            "5",
            "--command",
            "set n:{key} abc",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, rep, err) = load(
        &dir,
        &[
            "memcached",
            &addr,
            "-n",
            "200",
            "--keys",
            "5",
            "--command",
            "incr n:{key} 1",
            "--command",
            "get n:{key}",
            "--max-errors",
            "100",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let by = &rep["responses"]["by_command"];
    assert_eq!(u(&rep["errors"]["by_class"]["client_error"]), 100);
    assert_eq!(u(&rep["errors"]["total"]), 100, "{}", rep["errors"]);
    assert_eq!(u(&by["incr"]["errors"]), 100, "{by}");
    assert_eq!(u(&by["get"]["hits"]), 100, "{by}");
    assert_eq!(u(&rep["connections"]["connects"]), 1);
}

/// A server that answers every read with `answer` and then closes when
/// `close` (else keeps the connection open).
fn scripted_server(answer: &'static [u8], close: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(answer).is_err() {
                        return;
                    }
                    if close {
                        let _ = s.shutdown(Shutdown::Both);
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_server_answering_garbage_is_a_protocol_error() {
    let dir = scratch("kv-garbage");
    for (proto, garbage) in [
        ("redis", &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..]),
        ("memcached", b"HTTP/1.1 400 Bad Request\r\n\r\n"),
        ("redis", b"$99999999999999\r\n"),
        ("memcached", b"VALUE k 0 99999999999999\r\n"),
    ] {
        let addr = scripted_server(garbage, false).to_string();
        // A duration run ends on time with the errors over --max-errors.
        let (code, rep, err) = load(&dir, &[proto, &addr, "-c", "2", "-d", "0.5"]);
        assert_eq!(code, Some(1), "{proto}: {err}");
        assert!(
            err.contains("more than --max-errors 0 (protocol_error x"),
            "{proto}: {err}"
        );
        assert!(
            u(&rep["errors"]["by_class"]["protocol_error"]) >= 1,
            "{rep}"
        );
        assert_eq!(u(&rep["transactions"]), 0);
        // A count run cannot reach its count: it stops after twice the
        // timeout without an answer, naming the class.
        let t0 = Instant::now();
        let (code, rep, err) = load(&dir, &[proto, &addr, "-n", "100", "--timeout", "0.5"]);
        assert_eq!(code, Some(1), "{proto}: {err}");
        assert!(
            err.contains("stalled") && err.contains("protocol_error"),
            "{proto}: {err}"
        );
        assert!(
            u(&rep["errors"]["by_class"]["protocol_error"]) >= 1,
            "{rep}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{proto}: {:?}",
            t0.elapsed()
        );
    }
}

#[test]
fn a_server_closing_mid_response_is_a_short_read() {
    let dir = scratch("kv-short");
    for (proto, partial) in [
        ("redis", &b"$10\r\nabc"[..]),
        ("redis", b"*2\r\n+OK\r\n"),
        ("memcached", b"VALUE key:1 0 32\r\nabc"),
        ("memcached", b"STO"),
    ] {
        let addr = scripted_server(partial, true).to_string();
        let (code, rep, err) = load(&dir, &[proto, &addr, "-d", "0.5"]);
        assert_eq!(code, Some(1), "{proto}: {err}");
        assert!(err.contains("short_read"), "{proto} {partial:?}: {err}");
        assert!(u(&rep["errors"]["by_class"]["short_read"]) >= 1, "{rep}");
    }
    // A close between responses is closed_by_peer.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            drop(s);
        }
    });
    let (code, _, err) = load(&dir, &["redis", &addr, "-d", "0.5"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("closed_by_peer") || err.contains("ECONNRESET"),
        "{err}"
    );
}

#[test]
fn bad_kv_options_are_usage_errors() {
    let dir = scratch("kv-usage");
    for (args, says) in [
        (
            vec!["redis", "127.0.0.1:1", "--command", "GET k:{id}"],
            "unknown field {id}",
        ),
        (
            vec![
                "redis",
                "127.0.0.1:1",
                "--command",
                "GET k",
                "--ratio",
                "1:2",
            ],
            "has 2 parts but there are 1 --command",
        ),
        (
            vec!["memcached", "127.0.0.1:1", "--ratio", "1:2:3"],
            "2 default commands",
        ),
        (
            vec!["memcached", "127.0.0.1:1", "--command", "GET k{key}"],
            "not a command this workload sends",
        ),
        (
            vec![
                "memcached",
                "127.0.0.1:1",
                "--command",
                "set k{key} {value} noreply",
            ],
            "noreply",
        ),
        (
            vec!["redis", "127.0.0.1:1", "--key-dist", "zipf:0"],
            "zipf exponent",
        ),
        (vec!["redis", "127.0.0.1:1", "--ratio", "0:0"], "> 0"),
        (vec!["redis", "127.0.0.1:1", "--keys", "0"], "--keys"),
        (
            vec!["redis", "127.0.0.1:1", "--pipeline", "0"],
            "--pipeline",
        ),
        (vec!["redis", "nonsense", "-n", "1"], "not an address"),
    ] {
        let (code, rep, err) = load(&dir, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(rep.is_null(), "{args:?} wrote a report");
    }
}

/// A password file for `--auth @FILE`, mode 600, under `dir`.
fn password_file(dir: &Path, name: &str, password: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    format!("@{}", path.display())
}

#[test]
fn redis_with_a_password_authenticates_every_connection_once_and_never_records_it() {
    let test = "redis_with_a_password";
    // The default user's password, and an ACL user of its own (redis.conf's
    // `user` directive as command-line words).
    let (default_pw, acl_pw) = ("d3fault-Pw", "acl-user-Pw");
    let acl_rule = format!(">{acl_pw}");
    let extra = [
        "--user",
        "loadgen",
        "on",
        acl_rule.as_str(),
        "~*",
        "&*",
        "+@all",
    ];
    let Some(redis) = Redis::start_with(test, &extra, Some(default_pw)) else {
        return;
    };
    let dir = scratch("kv-redis-auth");
    let good = password_file(&dir, "default.pass", default_pw);
    let acl = password_file(&dir, "acl.pass", acl_pw);
    let wrong = password_file(&dir, "wrong.pass", "not-the-password");
    let addr = redis.addr();

    // Without a password the server refuses every request: NOAUTH replies
    // are server errors, and no AUTH was sent.
    let (_, rep, err) = load(&dir, &["redis", &addr, "-c", "2", "-n", "50"]);
    assert!(
        u(&rep["errors"]["by_class"]["server_error"]) > 0,
        "{rep} {err}"
    );
    assert_eq!(redis.calls("auth"), 0);

    // --auth @FILE: one AUTH per connection, then the commands, every one
    // in the server's counters; the password in no artifact.
    let before_auth = redis.calls("auth");
    let (code, rep, err) = load(
        &dir,
        &["redis", &addr, "-c", "4", "-n", "2000", "--auth", &good],
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["responses"];
    assert_eq!(u(&r["answered"]), 2000, "{r}");
    let connects = u(&rep["connections"]["connects"]);
    assert!(connects >= 4, "{rep}");
    assert_eq!(
        redis.calls("auth") - before_auth,
        connects,
        "one AUTH per connection"
    );
    let gets = u(&r["by_command"]["GET"]["answered"]);
    agrees("GET calls", redis.calls("get"), gets, &rep);
    let step = rep["config"]["workload_options"]["on_connect"]
        .as_str()
        .unwrap();
    assert!(step.starts_with("AUTH ("), "{step}");
    let text = serde_json::to_string(&rep).unwrap();
    assert!(
        !text.contains(default_pw) && !err.contains(default_pw),
        "the password leaked"
    );

    // An ACL user over RESP3: HELLO 3 AUTH user pass opens each
    // connection; RESP3's null answers a GET miss, still a miss.
    let before_hello = redis.calls("hello");
    let (code, rep, err) = load(
        &dir,
        &[
            "redis", &addr, "-c", "2", "-n", "500", "--auth", &acl, "--user", "loadgen",
        ]
        .into_iter()
        .chain(["--hello", "3", "--keys", "1000000"])
        .collect::<Vec<_>>(),
    );
    assert_eq!(code, Some(0), "{err}");
    let r = &rep["responses"];
    assert_eq!(u(&r["answered"]), 500, "{r}");
    assert!(u(&r["misses"]) > 0, "a GET of 1,000,000 keys misses: {r}");
    assert_eq!(
        redis.calls("hello") - before_hello,
        u(&rep["connections"]["connects"]),
        "one HELLO per connection"
    );
    let step = rep["config"]["workload_options"]["on_connect"]
        .as_str()
        .unwrap();
    assert!(
        step.starts_with("HELLO 3") && step.contains("AUTH loadgen"),
        "{step}"
    );
    let text = serde_json::to_string(&rep).unwrap();
    assert!(
        !text.contains(acl_pw) && !err.contains(acl_pw),
        "the password leaked"
    );

    // A wrong password: the run fails saying what the server answered, and
    // no request was sent.
    let gets_before = redis.calls("get");
    let (code, rep, err) = load(
        &dir,
        &["redis", &addr, "-c", "2", "-n", "100", "--auth", &wrong],
    );
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("WRONGPASS") && err.contains("on-connect"),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");
    assert_eq!(u(&rep["responses"]["answered"]), 0, "{rep}");
    assert_eq!(
        redis.calls("get"),
        gets_before,
        "a request went out unauthenticated"
    );

    // REDISCLI_AUTH, as redis-cli reads it; a password as a word is refused.
    let json = dir.join("env.json");
    let out = Command::new(sockscope())
        .args(["load", "redis", &addr, "-c", "1", "-n", "100", "--json"])
        .arg(&json)
        .env("REDISCLI_AUTH", default_pw)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(u(&read_json(&json)["responses"]["answered"]), 100);
    let (code, _, err) = load(&dir, &["redis", &addr, "-n", "1", "--auth", default_pw]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("@FILE") && !err.contains(default_pw), "{err}");
}
