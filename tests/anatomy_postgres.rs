//! PostgreSQL's requests as the request anatomy's (issue 39): a real
//! server profiled with pgbench as the load command, in the simple and the
//! extended (`-M prepared`) protocol, over TCP and over its Unix socket,
//! the requests counted by statement kind against pg_stat_statements'
//! calls; and hostile bytes through a real socket (the parser gives up on
//! the connection, the run completes, the names stay bounded).

use crate::common;

use std::collections::BTreeMap;

use common::anatomy::{brief, profile_pid, profile_pid_with, u};
use common::postgres::{Cluster, Server};
use common::*;
use serde_json::Value;

/// pgbench's built-in TPC-B script: its SQL statements per transaction
/// (BEGIN, 3 UPDATEs, SELECT, INSERT, END).
const TPCB_STATEMENTS: u64 = 7;
const CLIENTS: u64 = 2;

/// A cluster with pg_stat_statements, its server started and pgbench's
/// tables made (scale 1), or None (skipped) when something is missing.
fn setup(test: &str) -> Option<(Cluster, Server)> {
    if !require_bpf(test) || !require_program("pgbench", test) || !require_program("psql", test) {
        return None;
    }
    let cluster = Cluster::init(test)?;
    let port = common::ports::free_tcp();
    let server = Server::start(
        &cluster,
        "127.0.0.1",
        port,
        &["shared_preload_libraries=pg_stat_statements"],
    );
    server.query("CREATE EXTENSION pg_stat_statements");
    let out = std::process::Command::new("pgbench")
        .arg("-h")
        .arg(server.sock_dir())
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-i",
            "-s",
            "1",
            "-q",
        ])
        .arg("postgres")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((cluster, server))
}

/// The anatomy's kind of a statement from its first word (docs/anatomy.md).
fn kind(word: &str) -> &'static str {
    match word.to_ascii_uppercase().as_str() {
        "SELECT" => "SELECT",
        "INSERT" => "INSERT",
        "UPDATE" => "UPDATE",
        "DELETE" => "DELETE",
        "BEGIN" | "START" => "BEGIN",
        "COMMIT" | "END" => "COMMIT",
        "ROLLBACK" | "ABORT" => "ROLLBACK",
        _ => "OTHER",
    }
}

/// pg_stat_statements' calls by kind, its own readers left out.
fn calls(server: &Server) -> BTreeMap<String, u64> {
    let rows = server.query(
        "SELECT substring(ltrim(query) from '^[A-Za-z]*'), sum(calls) FROM pg_stat_statements \
         WHERE query NOT LIKE '%pg_stat_statements%' GROUP BY 1",
    );
    let mut out = BTreeMap::new();
    for line in rows.lines().filter(|l| !l.is_empty()) {
        let (word, n) = line.rsplit_once('|').unwrap();
        *out.entry(kind(word).to_string()).or_insert(0) += n.parse::<u64>().unwrap();
    }
    out
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d > 0)
        .collect()
}

/// The anatomy's postgres rows of one endpoint: name -> (count, turns).
fn rows(a: &Value, endpoint: impl Fn(&Value) -> bool) -> BTreeMap<String, (u64, u64)> {
    a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
        .iter()
        .filter(|e| e["protocol"] == "postgres" && endpoint(e))
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                (u(&e["count"]), u(&e["turns"])),
            )
        })
        .collect()
}

/// pgbench's count of what it ran: "number of transactions actually
/// processed: N/N".
fn pgbench_processed(output: &str) -> u64 {
    let line = output
        .lines()
        .find(|l| l.starts_with("number of transactions actually processed:"))
        .unwrap_or_else(|| panic!("pgbench said: {output}"));
    let n = line.rsplit(':').next().unwrap().trim();
    n.split('/').next().unwrap().parse().unwrap()
}

/// Runs pgbench (`mode`, at `host`) under a profile and checks that the
/// requests counted by kind are pg_stat_statements' calls, PARSE apart
/// (the prepares, which execute nothing): the rows, by name.
fn pgbench_counts_as_the_server(
    name: &str,
    server: &Server,
    mode: &str,
    host: &str,
    endpoint: impl Fn(&Value) -> bool,
) -> BTreeMap<String, (u64, u64)> {
    let tx = 150;
    let before = calls(server);
    let cmd = format!(
        "pgbench -h {host} -p {} -U postgres -n -M {mode} -c {CLIENTS} -t {tx} postgres",
        server.port
    );
    let (rep, summary, _) = profile_pid(name, server.pid(), "--load-cmd", &cmd);
    let mut want = delta(&before, &calls(server));
    let a = &rep["anatomy"];
    let txs = pgbench_processed(rep["workload"]["output"]["tail"].as_str().unwrap());
    assert_eq!(txs, CLIENTS * tx);
    if mode == "prepared" {
        // pg_stat_statements counts a utility statement run through the
        // extended protocol once per connection (its first execution),
        // not per call: BEGIN and END are pgbench's transactions'.
        for k in ["BEGIN", "COMMIT"] {
            assert_eq!(want.get(k), Some(&CLIENTS), "{want:?}");
            want.insert(k.to_string(), txs);
        }
    }
    let got = rows(a, endpoint);
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for (n, (count, _)) in &got {
        let k = n.split(' ').next().unwrap();
        if k != "PARSE" {
            *by_kind.entry(k.to_string()).or_insert(0) += count;
        }
    }
    assert_eq!(by_kind, want, "{}", brief(a));
    // The script's statements, each transaction's: BEGIN, END, 3 UPDATEs.
    assert_eq!(want["BEGIN"], txs, "{want:?}");
    assert_eq!(want["COMMIT"], txs, "{want:?}");
    assert_eq!(want["UPDATE"], 3 * txs, "{want:?}");
    let total: u64 = got.values().map(|v| v.0).sum();
    assert_eq!(u(&a["requests"]), total, "{}", brief(a));
    assert_eq!(u(&a["postgres"]["unparsed"]), 0, "{}", brief(a));
    assert_eq!(
        u(&a["postgres"]["connections"]),
        CLIENTS + 1,
        "{}",
        brief(a)
    );
    // pgbench waits for each answer: one request per turn, each timed.
    let turns: u64 = got.values().map(|v| v.1).sum();
    assert_eq!(turns, total, "{}", brief(a));
    assert_eq!(u(&a["postgres"]["turns"]), total, "{}", brief(a));
    // The requests are the headline's, not the turns: the turns that
    // carried none are each connection's start-up (and a few more:
    // pgbench's connections send more than one message at their start).
    let requests = u(&rep["workload"]["requests"]["count"]);
    let connections = CLIENTS + 1;
    assert!(
        (total + connections..=total + 2 * connections).contains(&requests),
        "{requests}: {}",
        brief(a)
    );
    let headline = summary
        .lines()
        .find(|l| l.contains("requests/s"))
        .unwrap_or_else(|| panic!("no headline rate: {summary}"));
    assert!(
        headline.contains(&format!("{requests} in")) && headline.contains("PostgreSQL requests"),
        "{headline}"
    );
    assert!(
        summary.contains("Requests by command (PostgreSQL"),
        "{summary}"
    );
    assert!(txs * TPCB_STATEMENTS <= total);
    got
}

#[test]
fn pgbench_simple_queries_by_kind_equal_pg_stat_statements() {
    let name = "pgbench_simple_queries_by_kind_equal_pg_stat_statements";
    let Some((_cluster, server)) = setup(name) else {
        return;
    };
    let port = server.port;
    let tcp = pgbench_counts_as_the_server("pg-simple-tcp", &server, "simple", "127.0.0.1", |e| {
        e["transport"] == "tcp" && u(&e["port"]) == u64::from(port)
    });
    // Simple queries have no statement name, and no Sync.
    assert!(
        tcp.keys().all(|k| !k.contains(' ') && k != "PARSE"),
        "{tcp:?}"
    );
    let sock = server
        .sock_dir()
        .join(format!(".s.PGSQL.{port}"))
        .to_str()
        .unwrap()
        .to_string();
    let host = server.sock_dir().to_str().unwrap().to_string();
    let unix = pgbench_counts_as_the_server("pg-simple-unix", &server, "simple", &host, |e| {
        e["transport"] == "unix" && e["socket"] == sock.as_str()
    });
    // The same load over either transport: the same requests.
    let counts = |rows: &BTreeMap<String, (u64, u64)>| -> BTreeMap<String, u64> {
        rows.iter().map(|(k, v)| (k.clone(), v.0)).collect()
    };
    assert_eq!(counts(&unix), counts(&tcp));
}

#[test]
fn pgbench_prepared_syncs_by_kind_equal_pg_stat_statements() {
    let name = "pgbench_prepared_syncs_by_kind_equal_pg_stat_statements";
    let Some((_cluster, server)) = setup(name) else {
        return;
    };
    let port = server.port;
    for (run, host) in [
        ("pg-prepared-tcp", "127.0.0.1".to_string()),
        (
            "pg-prepared-unix",
            server.sock_dir().to_str().unwrap().to_string(),
        ),
    ] {
        let tcp = host.starts_with("127.");
        let got = pgbench_counts_as_the_server(run, &server, "prepared", &host, |e| {
            if tcp {
                e["transport"] == "tcp" && u(&e["port"]) == u64::from(port)
            } else {
                e["transport"] == "unix"
            }
        });
        // Each client prepares each statement once (Parse, Sync: nothing
        // executed), then executes it by its name (P_N) at each Sync.
        assert_eq!(
            got.get("PARSE").map(|v| v.0),
            Some(CLIENTS * TPCB_STATEMENTS),
            "{got:?}"
        );
        let named: u64 = got
            .iter()
            .filter(|(k, _)| k.contains(" P_"))
            .map(|(_, v)| v.0)
            .sum();
        assert_eq!(named, CLIENTS * 150 * TPCB_STATEMENTS, "{got:?}");
        assert!(got.keys().any(|k| k.starts_with("BEGIN P_")), "{got:?}");
    }
}

/// Hostile clients of a PostgreSQL server (a python3 script: the
/// server's port, then what it does).
const HOSTILE: &str = r#"
import socket, struct, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(1.0)
    return s
def msg(t, body):
    return t + struct.pack("!I", len(body) + 4) + body
def startup():
    body = struct.pack("!I", 196608) + b"user\0postgres\0database\0postgres\0\0"
    return struct.pack("!I", len(body) + 4) + body
def until_ready(s):
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            return got
        if not b:
            return got
        got += b
        # ReadyForQuery: 'Z', length 5, status
        if len(got) >= 6 and got[-6:-5] == b"Z" and got[-5:-1] == b"\0\0\0\x05":
            return got
def once(after):
    s = conn()
    s.sendall(startup())
    until_ready(s)
    s.sendall(after)
    until_ready(s)
    s.close()
# A length of 2^31 (passed, never allocated), a length under 4, a type
# byte no frontend message has, a truncated message.
once(b"Q" + struct.pack("!I", 1 << 31) + b"SELECT")
once(b"Q" + struct.pack("!I", 2))
once(b"\xff\xfe garbage \x00")
once(msg(b"Q", b"SELECT 1\0")[:7])
# SSLRequest refused ('N'), then a TLS ClientHello's first bytes anyway:
# not readable (encrypted), not parsed.
s = conn()
s.sendall(struct.pack("!II", 8, 80877103))
assert s.recv(1) == b"N"
s.sendall(b"\x16\x03\x01\x00\x05hello")
until_ready(s)
s.close()
# SSLRequest refused ('N'), then a startup and queries: parsed.
s = conn()
s.sendall(struct.pack("!II", 8, 80877103))
assert s.recv(1) == b"N"
s.sendall(startup())
until_ready(s)
s.sendall(msg(b"Q", b"  /* a comment */ -- and a line\n select 1\0"))
until_ready(s)
s.sendall(msg(b"Q", b"\x1b[31m\0"))
until_ready(s)
# A pipeline: a statement prepared (Parse, Sync), then three Bind,
# Execute, Sync in one write: three requests in one turn (a batch).
s.sendall(msg(b"P", b"s_pipe\0SELECT 1\0\0\0") + msg(b"S", b""))
until_ready(s)
one = msg(b"B", b"\0s_pipe\0\0\0\0\0\0\0") + msg(b"E", b"\0\0\0\0\0") + msg(b"S", b"")
s.sendall(one * 3)
got = b""
while got.count(b"Z\0\0\0\x05") < 3:
    b = s.recv(65536)
    if not b:
        break
    got += b
# A flood of distinct statement names: Parse, Bind, Execute, Sync each.
for i in range(200):
    name = b"S%d" % i
    s.sendall(msg(b"P", name + b"\0SELECT 1\0\0\0") + msg(b"B", b"\0" + name + b"\0\0\0\0\0\0\0")
              + msg(b"E", b"\0\0\0\0\0") + msg(b"S", b""))
    until_ready(s)
s.sendall(msg(b"X", b""))
s.close()
"#;

#[test]
fn hostile_postgres_bytes_give_up_on_their_connection_and_names_stay_bounded() {
    let name = "hostile_postgres_bytes_give_up_on_their_connection";
    let Some((_cluster, server)) = setup(name) else {
        return;
    };
    if !require_program("python3", name) {
        return;
    }
    let dir = scratch("pg-hostile").canonicalize().unwrap();
    let script = dir.join("hostile.py");
    std::fs::write(&script, HOSTILE).unwrap();
    let cmd = format!("python3 {} {}", script.display(), server.port);
    let (rep, summary, _) = profile_pid_with(
        "pg-hostile-run",
        server.pid(),
        &["--max-endpoints", "100"],
        "--load-cmd",
        &cmd,
    );
    let a = &rep["anatomy"];
    let got = rows(a, |_| true);
    // Six connections: two given up on (a length of 2^31 is passed, not
    // malformed: the server closes that one; the truncated one ends in
    // the middle of its message), one encrypted after its SSLRequest.
    assert_eq!(u(&a["postgres"]["connections"]), 6, "{}", brief(a));
    assert_eq!(u(&a["postgres"]["unparsed"]), 2, "{}", brief(a));
    assert_eq!(u(&a["postgres"]["encrypted"]), 1, "{}", brief(a));
    assert!(
        summary.contains("1 of 6 PostgreSQL connections went TLS or GSS encrypted"),
        "{summary}"
    );
    // The refused SSLRequest's connection is parsed: its commented select,
    // its OTHER, and 200 named statements, past the port's 100 names
    // (other).
    assert_eq!(got["SELECT"].0, 1, "{got:?}");
    assert_eq!(got["OTHER"].0, 1, "{got:?}");
    // The pipeline's three Syncs: three requests in one turn, batched.
    assert_eq!(got["PARSE"], (1, 1), "{got:?}");
    assert_eq!(got["SELECT s_pipe"], (3, 1), "{got:?}");
    let pipe = a["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SELECT s_pipe")
        .unwrap();
    assert_eq!(u(&pipe["batched"]), 3, "{pipe}");
    // SELECT, OTHER, PARSE, SELECT s_pipe and SELECT S0..S95 fill the
    // port's 100 names (--max-endpoints 100).
    assert_eq!(got.len(), 100 + 1, "{} names: {got:?}", got.len());
    let other = got.get("(other)").map_or(0, |v| v.0);
    assert_eq!(other, 104, "{got:?}");
    assert_eq!(u(&a["max_endpoints"]), 100, "{}", brief(a));
    assert!(
        summary.contains(
            "104 requests of names past their port's first 100 (--max-endpoints) are summed as \
             (other)"
        ),
        "{summary}"
    );
    let named: u64 = got
        .iter()
        .filter(|(k, _)| k.starts_with("SELECT S"))
        .map(|(_, v)| v.0)
        .sum();
    assert_eq!(named + other, 200, "{got:?}");
    // Names hold no more than a kind and 15 bytes, escaped.
    assert!(got.keys().all(|k| k.len() <= 9 + 15 * 4), "{got:?}");
    assert!(!summary.contains('\x1b'));
}
