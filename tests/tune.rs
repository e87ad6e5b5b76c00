//! `sockscope tune`: the audit of this machine, what `--for` changes, the
//! sysctl.d snippet, ranking by a profile's evidence (`--from`), bad
//! `--from` files, and that nothing under /proc/sys changes.

use crate::common;

use std::path::{Path, PathBuf};

use common::netns::Netns;
use common::{run, scratch, sockscope};
use serde_json::{Value, json};

/// The sysctls the audit reads (as in src/tune/settings.rs), by family.
const SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.core.netdev_max_backlog",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.udp_mem",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_syncookies",
    "net.core.busy_poll",
    "net.core.busy_read",
    "fs.file-max",
    "fs.nr_open",
];

fn proc_sys(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key.replace('.', "/"))
}

/// Every audited sysctl's text now (None where absent).
fn snapshot() -> Vec<(String, Option<String>)> {
    SYSCTLS
        .iter()
        .chain(&["net.netfilter.nf_conntrack_max", "net.core.netdev_budget"])
        .map(|k| (k.to_string(), std::fs::read_to_string(proc_sys(k)).ok()))
        .collect()
}

/// `sockscope tune ARGS --json`, parsed.
fn tune_json(args: &[&str]) -> Value {
    let mut a = vec!["tune"];
    a.extend_from_slice(args);
    a.push("--json");
    let o = run(&a);
    assert!(
        o.status.success(),
        "tune {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("tune --json prints JSON")
}

fn rows(v: &Value) -> &Vec<Value> {
    v["rows"].as_array().expect("rows")
}

fn row<'a>(v: &'a Value, setting: &str) -> &'a Value {
    rows(v)
        .iter()
        .find(|r| r["setting"] == setting)
        .unwrap_or_else(|| panic!("no row {setting} in {v:#}"))
}

/// A profile artifact (the version-1 fixture) carrying `evidence`, and the
/// load errors by class given.
fn profile_with(name: &str, evidence: Value, errors: &[(&str, u64)]) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/profile.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    v["evidence"] = evidence;
    for (class, n) in errors {
        v["load"]["errors"]["by_class"][class] = json!(n);
        let total = v["load"]["errors"]["total"].as_u64().unwrap() + n;
        v["load"]["errors"]["total"] = json!(total);
    }
    let p = scratch(name).join("run.json");
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    p
}

fn evidence(deltas: Value, sockets: Value) -> Value {
    json!({
        "netns": {"id": "net:[4026531840]", "shared_with_generator": true},
        "counters": {"source": "/proc/1/net/netstat", "deltas": deltas},
        "sockets": sockets,
        "unavailable": [],
        "cost": {"samples": 20, "interval_ms": 100, "sampler_cpu_s": 0.01, "sampler_cpu_share": 0.005}
    })
}

fn assert_snippet_parses(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("not `key = value`: {line:?}"));
        assert!(
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "key {k:?}"
        );
        assert!(!v.trim().is_empty(), "value of {k}");
        assert!(proc_sys(k).exists(), "{k} is not under /proc/sys");
        out.push((k.to_string(), v.to_string()));
    }
    out
}

#[test]
fn the_audit_lists_every_setting_family_with_this_machines_values() {
    let o = run(&["tune"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with("Tuning audit of this machine for connections"),
        "{text}"
    );
    for family in SYSCTLS.iter().chain(&[
        "RLIMIT_NOFILE (soft)",
        "RLIMIT_NOFILE (hard)",
        "transparent_hugepage/enabled",
        "transparent_hugepage/defrag",
        "cpufreq governor",
        "net.netfilter.nf_conntrack_max",
    ]) {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    assert!(
        text.contains("RPS ") || text.contains("RPS/XPS"),
        "RPS/XPS missing:\n{text}"
    );
    assert!(text.lines().all(|l| l == l.trim_end()), "trailing blanks");
    // The values shown are the ones under /proc/sys now.
    let v = tune_json(&[]);
    for key in SYSCTLS {
        let now = std::fs::read_to_string(proc_sys(key)).unwrap();
        let now = now.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(row(&v, key)["current"], now.as_str(), "{key}");
    }
    // No cpufreq (a VM) reads as such; conntrack as "not loaded" when it is not.
    let gov = row(&v, "cpufreq governor");
    if !Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists() {
        assert_eq!(gov["current"], "not exposed (no cpufreq)");
    }
    if !proc_sys("net.netfilter.nf_conntrack_max").exists() {
        assert_eq!(
            row(&v, "net.netfilter.nf_conntrack_max")["current"],
            "not loaded"
        );
    }
}

#[test]
fn for_changes_what_is_advised() {
    let lat = tune_json(&["--for", "latency"]);
    let con = tune_json(&["--for", "connections"]);
    let thr = tune_json(&["--for", "throughput"]);
    assert_eq!(lat["goal"], "latency");
    assert_eq!(row(&lat, "net.core.busy_poll")["advised"], ">= 50");
    assert_eq!(row(&con, "net.core.busy_poll")["advised"], "0");
    assert_eq!(
        row(&lat, "transparent_hugepage/enabled")["advised"],
        "madvise"
    );
    assert_eq!(row(&con, "transparent_hugepage/enabled")["advised"], "-");
    assert_eq!(
        row(&con, "net.ipv4.ip_local_port_range")["advised"],
        "1024 65535"
    );
    assert_eq!(row(&lat, "net.ipv4.ip_local_port_range")["advised"], "-");
    assert_eq!(row(&con, "net.ipv4.tcp_tw_reuse")["advised"], "1");
    assert_eq!(row(&thr, "net.ipv4.tcp_rmem")["advised"], "max >= 16777216");
    assert_eq!(row(&lat, "net.ipv4.tcp_rmem")["advised"], "-");
    // Every row has a reason, and a change only for what is not ok.
    for v in [&lat, &con, &thr] {
        for r in rows(v) {
            assert!(!r["why"].as_str().unwrap().is_empty(), "{r}");
            if r["ok"] == true {
                assert!(r.get("sysctl").is_none(), "{r}");
            }
        }
    }
    let o = run(&["tune", "--for", "speed"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn emit_sysctl_prints_key_value_lines_of_real_sysctls_only_for_changes() {
    for goal in ["latency", "throughput", "connections"] {
        let o = run(&["tune", "--for", goal, "--emit", "sysctl"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.starts_with("# sysctl.d snippet"), "{text}");
        let lines = assert_snippet_parses(&text);
        let v = tune_json(&["--for", goal]);
        let advised: Vec<String> = rows(&v)
            .iter()
            .filter_map(|r| r["sysctl"].as_str().map(String::from))
            .collect();
        let emitted: Vec<String> = lines.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        assert_eq!(emitted, advised, "{goal}");
        if lines.is_empty() {
            assert!(text.contains("No sysctl needs a change"), "{text}");
        }
    }
    for bad in [
        &["tune", "--emit", "json"][..],
        &["tune", "--emit", "sysctl", "--json"],
    ] {
        let o = run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn tune_changes_nothing_under_proc_sys() {
    let before = snapshot();
    let p = profile_with(
        "tune-nochange",
        evidence(
            json!({"TcpExt.ListenOverflows": 5, "softnet.dropped": 3, "Udp.RcvbufErrors": 9}),
            Value::Null,
        ),
        &[("EADDRNOTAVAIL", 10)],
    );
    let from = p.to_str().unwrap();
    for args in [
        &["tune"][..],
        &["tune", "--for", "latency", "--emit", "sysctl"],
        &["tune", "--for", "throughput", "--json"],
        &["tune", "--from", from, "--emit", "sysctl"],
    ] {
        assert!(run(args).status.success(), "{args:?}");
    }
    assert_eq!(snapshot(), before);
}

#[test]
fn from_what_is_not_a_profile_fails_clearly() {
    let dir = scratch("tune-notprofile");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"\x00\xffnot json{").unwrap();
    let other_json = dir.join("other.json");
    std::fs::write(&other_json, br#"{"hello": 1}"#).unwrap();
    let missing = dir.join("missing.json");
    let cases: Vec<(PathBuf, &str)> = vec![
        (fixtures.join("trace.json"), "is a sockscope.trace artifact"),
        (fixtures.join("load.json"), "is a sockscope.load artifact"),
        (garbage, "is not JSON"),
        (other_json, "without a `schema` field"),
        (missing, "No such file"),
        (dir.clone(), "tune --from"),
    ];
    for (path, says) in cases {
        let o = run(&["tune", "--from", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", path.display());
        assert!(err.contains("tune --from"), "{err}");
        assert!(err.contains(says), "{}: {err}", path.display());
        assert!(!err.contains("panicked"), "{err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn from_a_profile_without_evidence_says_so_and_audits_unranked() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/profile.json");
    let o = run(&["tune", "--from", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("has no kernel evidence"), "{text}");
    assert!(text.contains("the audit is not ranked"), "{text}");
    let v = tune_json(&["--from", p.to_str().unwrap()]);
    assert_eq!(v["evidence_rows"], 0);
    assert!(rows(&v).iter().all(|r| r.get("evidence").is_none()));
}

#[test]
fn listen_overflows_put_the_backlog_and_somaxconn_first_quoting_the_counter() {
    let p = profile_with(
        "tune-overflow",
        evidence(
            json!({"TcpExt.ListenOverflows": 1204, "TcpExt.ListenDrops": 1204, "Tcp.RetransSegs": 50}),
            json!({"samples": 20, "listeners": [{"local": "127.0.0.1:8080", "backlog": 1, "accept_queue_max": 2}], "states": {}}),
        ),
        &[],
    );
    let from = p.to_str().unwrap();
    let v = tune_json(&["--from", from, "--for", "latency"]);
    let r = rows(&v);
    assert_eq!(v["evidence_rows"], 2, "{v:#}");
    assert_eq!(r[0]["setting"], "listen() backlog (127.0.0.1:8080)");
    assert_eq!(r[0]["current"], "1");
    assert_eq!(r[0]["ok"], false);
    assert!(r[0].get("sysctl").is_none());
    assert!(
        r[0]["why"]
            .as_str()
            .unwrap()
            .contains("a sysctl cannot fix it")
    );
    assert_eq!(r[1]["setting"], "net.core.somaxconn");
    for x in &r[..2] {
        assert!(
            x["evidence"]
                .as_str()
                .unwrap()
                .starts_with("TcpExt.ListenOverflows +1,204 during the run"),
            "{x}"
        );
    }
    assert_eq!(
        r.iter()
            .filter(|x| x["setting"] == "net.core.somaxconn")
            .count(),
        1
    );
    // The text says the same, first.
    let o = run(&["tune", "--from", from]);
    let text = String::from_utf8(o.stdout).unwrap();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("setting"))
        .collect();
    assert!(
        table[1].starts_with("listen() backlog (127.0.0.1:8080)"),
        "{text}"
    );
    assert!(
        table[1].contains("[TcpExt.ListenOverflows +1,204 during the run"),
        "{text}"
    );
    assert!(table[2].starts_with("net.core.somaxconn"), "{text}");
    assert!(text.contains("2 rows it supports first"), "{text}");
}

#[test]
fn eaddrnotavail_puts_the_port_range_and_tw_reuse_first() {
    let p = profile_with(
        "tune-ports",
        evidence(
            json!({}),
            json!({"samples": 20, "listeners": [], "states": {}, "time_wait": {"samples": 3, "local_max": 0, "remote_max": 28000, "namespace_max": 28000, "before": {"local": 0, "remote": 0}, "local_new_max": 0, "remote_new_max": 28000, "remote_new_per_source_max": 28000}}),
        ),
        &[("EADDRNOTAVAIL", 1500)],
    );
    let from = p.to_str().unwrap();
    let v = tune_json(&["--from", from, "--for", "throughput"]);
    let r = rows(&v);
    // The reserved ports come first when widening takes in a port a
    // service listens on here (tests beside this one may be listening).
    let n = v["evidence_rows"].as_u64().unwrap() as usize;
    let ev: Vec<&Value> = r[..n]
        .iter()
        .filter(|x| x["setting"] != "net.ipv4.ip_local_reserved_ports")
        .collect();
    assert_eq!(ev.len(), 2, "{v:#}");
    assert_eq!(ev[0]["setting"], "net.ipv4.ip_local_port_range", "{v:#}");
    assert_eq!(ev[1]["setting"], "net.ipv4.tcp_tw_reuse");
    for x in &ev {
        assert_eq!(
            x["evidence"],
            "load: EADDRNOTAVAIL x1,500 connect errors; 28,000 client sockets from one address \
             entered TIME_WAIT towards the target during the run (most in one count)"
        );
    }
    assert!(ev[1]["why"].as_str().unwrap().contains("CONNECTING side"));
    // The snippet carries the evidence as a comment above the change.
    let o = run(&["tune", "--from", from, "--emit", "sysctl"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert_snippet_parses(&text);
    let tw = std::fs::read_to_string(proc_sys("net.ipv4.tcp_tw_reuse")).unwrap();
    if tw.trim() != "1" {
        let at = text
            .find("net.ipv4.tcp_tw_reuse = 1")
            .expect("tw_reuse line");
        assert!(
            text[..at].contains("# evidence: load: EADDRNOTAVAIL x1,500"),
            "{text}"
        );
    }
}

/// `sockscope tune ARGS --json` run by `launcher` (inside a namespace).
fn tune_json_in(mut launcher: std::process::Command, args: &[&str]) -> Value {
    let o = launcher
        .arg("tune")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tune {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("tune --json prints JSON")
}

/// Issue 22: inside a network namespace, tune lists that namespace's
/// interfaces only (also under `nsenter -n`, where /sys is still the
/// host's), and the sysctls only the host's namespace has say so instead
/// of "not in this kernel".
#[test]
fn inside_a_network_namespace_tune_audits_that_namespace() {
    let Some(ns) = Netns::new("inside_a_network_namespace_tune_audits_that_namespace") else {
        return;
    };
    let host_ifaces: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|d| d != "lo")
        .collect();
    let mut nsenter = std::process::Command::new("nsenter");
    nsenter
        .arg(format!("--net=/run/netns/{}", ns.name))
        .arg(sockscope());
    let have_nsenter = std::process::Command::new("nsenter")
        .arg("--version")
        .output()
        .is_ok();
    let mut launchers = vec![("ip netns exec", ns.command(sockscope()))];
    if have_nsenter {
        launchers.push(("nsenter -n", nsenter));
    }
    for (how, launcher) in launchers {
        let v = tune_json_in(launcher, &[]);
        assert_eq!(v["child_netns"], true, "{how}: {v:#}");
        for r in rows(&v) {
            let setting = r["setting"].as_str().unwrap();
            // The namespace has only its loopback: no host interface.
            for dev in &host_ifaces {
                assert!(
                    setting != format!("RPS {dev}") && setting != format!("XPS {dev}"),
                    "{how}: the host's {dev} listed: {r}"
                );
            }
            // A sysctl the host has is never "not in this kernel" here.
            if setting.starts_with("net.") && proc_sys(setting).exists() {
                assert_ne!(r["current"], "not in this kernel", "{how}: {r}");
            }
        }
        assert_eq!(
            row(&v, "RPS/XPS")["current"],
            "no non-loopback interface up"
        );
    }
    // busy_poll exists only in the host's namespace (on kernels that
    // register it there alone).
    let inside = ns
        .command("cat")
        .arg("/proc/sys/net/core/busy_poll")
        .output()
        .unwrap();
    let v = tune_json_in(ns.command(sockscope()), &[]);
    if !inside.status.success() && proc_sys("net.core.busy_poll").exists() {
        assert_eq!(
            row(&v, "net.core.busy_poll")["current"],
            "set in the host's namespace (not visible in this one)"
        );
    }
    let o = ns.command(sockscope()).arg("tune").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("is not the host's network namespace"),
        "{text}"
    );
    // On the host itself: not a child namespace.
    assert_eq!(tune_json(&[])["child_netns"], false);
}

#[test]
fn reserved_ports_are_only_those_named_never_whatever_listens_now() {
    let range = std::fs::read_to_string(proc_sys("net.ipv4.ip_local_port_range")).unwrap();
    let lo: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    if lo <= 1100 {
        eprintln!("skipped: the ephemeral range here ({range:?}) is already wide");
        return;
    }
    // A listener below the current range, inside the range widening would
    // give: a port the old audit proposed to reserve.
    let listener = (1100..lo)
        .find_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok())
        .expect("a free port below the ephemeral range");
    let port = listener.local_addr().unwrap().port();
    let key = "net.ipv4.ip_local_reserved_ports";
    let reserved = std::fs::read_to_string(proc_sys(key)).unwrap();
    if !reserved.trim().is_empty() {
        eprintln!("skipped: ports are reserved here already ({reserved:?})");
        return;
    }
    let v = tune_json(&["--for", "connections"]);
    let r = row(&v, key);
    assert!(
        !r.to_string().contains(&port.to_string()),
        "a port that merely listens now was proposed: {r}"
    );
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("--reserve") && notes.contains(&port.to_string()),
        "{notes}"
    );
    // Named, it is proposed.
    let v = tune_json(&["--for", "connections", "--reserve", &format!("{port},9999")]);
    let r = row(&v, key);
    assert_eq!(r["advised"], format!("{port},9999"), "{r}");
    drop(listener);
}
