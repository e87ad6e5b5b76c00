//! memcached text-protocol commands as the request anatomy's requests
//! (issue 39): a real memcached profiled under sockscope's own memcached
//! workload, each command name's count against memcached's own `stats`
//! (cmd_get, cmd_set), lockstep (every command its own timed turn) and
//! pipelined; and hostile bytes through real sockets (the binary
//! protocol, an over-long line, a huge or non-numeric <bytes>, a command
//! split across reads at every offset, `noreply`, a flood of names): the
//! parser gives up on the bad connections, counts the rest exactly, and
//! keeps the names bounded.

use crate::common;

use std::collections::BTreeMap;

use common::anatomy::{brief, profile_pid, u};
use common::memcached::Memcached;
use common::*;
use serde_json::Value;

/// What memcached counted between two `stats`.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, k: &str) -> u64 {
    after[k] - before.get(k).copied().unwrap_or(0)
}

/// A row's (count, batched, turns, noreply), by name.
type Rows = BTreeMap<String, (u64, u64, u64, u64)>;

/// The anatomy's memcached rows of `port`.
fn rows(a: &Value, port: u16) -> Rows {
    a["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("no endpoints: {}", brief(a)))
        .iter()
        .filter(|e| u(&e["port"]) == u64::from(port))
        .map(|e| {
            assert_eq!(e["protocol"], "memcached", "{e}");
            (
                e["name"].as_str().unwrap().to_string(),
                (
                    u(&e["count"]),
                    u(&e["batched"]),
                    u(&e["turns"]),
                    u(&e["noreply"]),
                ),
            )
        })
        .collect()
}

/// sockscope's memcached load through a profile: every get and set is
/// counted under its name as memcached counted it (single-key gets: one
/// cmd_get each), the requests are the commands, the parser gave up on
/// nothing. Returns the rows and the anatomy.
fn load_counts_equal_stats(name: &str, load: &str) -> Option<(Rows, Value)> {
    if !require_bpf(name) {
        return None;
    }
    let mc = Memcached::start()?;
    let before = mc.memcached_stats();
    let (rep, summary, _) = profile_pid(name, mc.pid(), "--load", load);
    let after = mc.memcached_stats();
    let a = rep["anatomy"].clone();
    let got = rows(&a, mc.port);
    let (gets, sets) = (
        delta(&before, &after, "cmd_get"),
        delta(&before, &after, "cmd_set"),
    );
    assert_eq!(
        gets,
        delta(&before, &after, "get_hits") + delta(&before, &after, "get_misses")
    );
    assert!(gets > 1000 && sets > 100, "{gets} gets, {sets} sets");
    assert_eq!(got.get("get").map(|r| r.0), Some(gets), "{}", brief(&a));
    assert_eq!(got.get("set").map(|r| r.0), Some(sets), "{}", brief(&a));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(u(&a["requests"]), gets + sets, "{}", brief(&a));
    assert_eq!(u(&rep["workload"]["requests"]["count"]), gets + sets);
    let m = &a["memcached"];
    assert!(u(&m["connections"]) >= 2, "{}", brief(&a));
    assert_eq!(u(&m["unparsed"]), 0, "{}", brief(&a));
    assert_eq!(u(&a["resp"]["connections"]), 0, "{}", brief(&a));
    assert!(
        summary.contains("Requests by command (memcached;"),
        "{summary}"
    );
    Some((got, a))
}

#[test]
fn memcached_lockstep_commands_equal_stats_and_each_is_a_timed_turn() {
    let name = "memcached_lockstep_commands_equal_stats";
    let Some((got, a)) = load_counts_equal_stats(name, "memcached -c 4 -n 6000 --keys 1000") else {
        return;
    };
    for c in ["get", "set"] {
        let (count, batched, turns, noreply) = got[c];
        assert_eq!((batched, noreply), (0, 0), "{c}: {}", brief(&a));
        assert_eq!(turns, count, "{c}: each command its own timed turn");
    }
    let total: u64 = got.values().map(|r| r.0).sum();
    assert_eq!(total, 6000);
    assert_eq!(u(&a["memcached"]["turns"]), total, "{}", brief(&a));
    assert_eq!(
        u(&a["turns"]) + u(&a["multiplexed"]["turns"]),
        total,
        "{}",
        brief(&a)
    );
}

#[test]
fn memcached_pipelined_commands_equal_stats_and_each_turn_carries_a_batch() {
    let name = "memcached_pipelined_commands_equal_stats";
    let Some((got, a)) =
        load_counts_equal_stats(name, "memcached -c 2 --pipeline 16 -n 20000 --keys 1000")
    else {
        return;
    };
    // The load keeps 16 in flight, refilled as answers come: reads take
    // several commands at once, and data queued before a response ended
    // makes the connections multiplexed (their turns counted, not timed).
    // The commands are counted exactly all the same, each turn carrying
    // its batch.
    let commands: u64 = got.values().map(|r| r.0).sum();
    let batched: u64 = got.values().map(|r| r.1).sum();
    let turns = u(&a["memcached"]["turns"]);
    assert_eq!(commands, 20000);
    assert!(batched > commands / 2, "{batched} of {commands} batched");
    assert!(turns < commands / 2, "{turns} turns for {commands}");
    assert_eq!(
        u(&a["turns"]) + u(&a["multiplexed"]["turns"]),
        turns,
        "every turn carried commands: {}",
        brief(&a)
    );
}

/// The hostile client (argv: the port). Each bad connection sends its
/// bytes and reads what comes back until memcached closes or goes quiet;
/// the good ones are lockstep.
const HOSTILE: &str = r#"
import socket, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(0.3)
    return s
def drain(s):
    try:
        while s.recv(65536):
            pass
    except (socket.timeout, ConnectionResetError):
        pass
def once(data):
    s = conn()
    s.sendall(data)
    drain(s)
    s.close()
def until(s, end):
    s.settimeout(5)
    got = b""
    while not got.endswith(end):
        b = s.recv(65536)
        if not b:
            raise SystemExit("closed after %r" % got)
        got += b
    return got
# Given up on (5): the binary protocol's noop, an over-long line, a <bytes>
# over 1 GiB, one that is no number, a CR not before LF.
once(b"\x80\x0a" + b"\x00" * 22)
once(b"get " + b"a" * 3000 + b"\r\n")
once(b"set k 0 0 2147483648\r\n")
once(b"set k 0 0 abc\r\n")
once(b"version\rX\n")
# Not memcached at all (2): garbage, and upper case (memcached's words are
# lower case).
once(b"\x01\x02garbage\r\n")
once(b"GET k\r\n")
# A set, then a get, each split across two reads at every offset, each
# on a connection of its own (so the first word is split too).
for cmd, end in ((b"set kk 0 0 5\r\nhello\r\n", b"STORED\r\n"), (b"get kk\r\n", b"END\r\n")):
    for o in range(1, len(cmd)):
        s = conn()
        s.sendall(cmd[:o])
        time.sleep(0.02)
        s.sendall(cmd[o:])
        until(s, end)
        s.close()
# noreply: counted, not timed; the get after it is a turn of its own.
s = conn()
s.sendall(b"set nr 0 0 1 noreply\r\nx\r\n")
time.sleep(0.05)
s.sendall(b"get nr\r\n")
until(s, b"END\r\n")
# A multi-key get: one request (memcached counts 3 cmd_get).
s.sendall(b"get nr kk zz\r\n")
until(s, b"END\r\n")
s.close()
# A flood of names, each answered ERROR.
s = conn()
s.sendall(b"version\r\n")
until(s, b"\r\n")
for i in range(200):
    s.sendall(b"x%d\r\n" % i)
    until(s, b"\r\n")
s.close()
"#;

#[test]
fn hostile_memcached_bytes_give_up_on_their_connection_and_names_stay_bounded() {
    let name = "hostile_memcached_bytes_give_up_on_their_connection";
    if !require_bpf(name) || !require_program("python3", name) {
        return;
    }
    let Some(mc) = Memcached::start() else {
        return;
    };
    let dir = scratch("mc-hostile");
    let script = dir.join("hostile.py");
    std::fs::write(&script, HOSTILE).unwrap();
    let before = mc.memcached_stats();
    let cmd = format!("python3 {} PORT", script.display());
    let (rep, summary, _) = profile_pid("mc-hostile-run", mc.pid(), "--load-cmd", &cmd);
    let after = mc.memcached_stats();
    let a = &rep["anatomy"];
    let got = rows(a, mc.port);
    let m = &a["memcached"];
    // 5 given up on; 20 + 7 split commands, the noreply one, the flood's:
    // 29 parsed; garbage and upper case are no memcached connections.
    assert_eq!(u(&m["unparsed"]), 5, "{}", brief(a));
    assert_eq!(u(&m["connections"]), 34, "{}", brief(a));
    // Every set and get read whole is counted as memcached counted it,
    // but the multi-key get: one request for its 3 keys.
    let (sets, gets) = (
        delta(&before, &after, "cmd_set"),
        delta(&before, &after, "cmd_get"),
    );
    assert_eq!((sets, gets), (21, 7 + 1 + 3), "memcached's own counts");
    let (set, get) = (got["set"], got["get"]);
    assert_eq!(set.0, sets, "{got:?}");
    assert_eq!(get.0, gets - 2, "{got:?}");
    // noreply: counted apart, never timed; every other one lockstep and
    // timed.
    assert_eq!(set.3, 1, "{got:?}");
    assert_eq!(u(&m["noreply"]), 1, "{}", brief(a));
    assert_eq!(set.2, 20, "{got:?}");
    assert_eq!(get.2, get.0, "{got:?}");
    assert_eq!((set.1, get.1), (0, 0), "{got:?}");
    // set, get, version and x0..x60 fill the port's 64 names (the default
    // --max-endpoints); x61..x199 are (other).
    assert_eq!(got.len(), 65, "{} names: {got:?}", got.len());
    assert_eq!(got["(other)"].0, 139, "{got:?}");
    assert_eq!(got["version"].0, 1, "{got:?}");
    let all: u64 = got.values().map(|v| v.0).sum();
    assert_eq!(all, 21 + 9 + 1 + 200, "{got:?}");
    assert_eq!(u(&a["requests"]), all, "{}", brief(a));
    assert!(got.keys().all(|k| k.len() <= 16 * 4), "{got:?}");
    assert!(
        summary.contains("5 of 34 memcached connections given up on"),
        "{summary}"
    );
    assert!(summary.contains("sent with noreply"), "{summary}");
}
