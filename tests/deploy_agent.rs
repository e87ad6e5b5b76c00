//! The node agent's deployment stays true to the exporter: the DaemonSet
//! (deploy/k8s/agent-daemonset.yaml) runs `trace` with flags this build
//! has, names its capabilities one by one, sees the host's pids and mounts
//! cgroup, tracefs and BTF read-only; every metric the recording rules
//! (deploy/prometheus/rules.yml) and the dashboard
//! (deploy/grafana/sockscope-dashboard.json) query is one a running agent
//! exports (scraped while loopback traffic runs), and promtool accepts the
//! rules. A SIGKILLed agent leaves no program loaded, no file behind, and
//! its successor serves on the same address at once.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ports;
use common::progs::{loaded_programs, prog_ids_of};
use common::prometheus::http_get;
use common::server::Server;
use yaml_rust2::{Yaml, YamlLoader};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml(path: &str) -> Vec<Yaml> {
    let text = std::fs::read_to_string(repo(path)).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn daemonset() -> Yaml {
    yaml("deploy/k8s/agent-daemonset.yaml")
        .into_iter()
        .find(|d| d["kind"].as_str() == Some("DaemonSet"))
        .expect("a DaemonSet in deploy/k8s/agent-daemonset.yaml")
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .unwrap_or_else(|| panic!("not a list: {y:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The long and short flags `sockscope trace --help` lists.
fn trace_flags() -> Vec<String> {
    let o = common::run(&["trace", "--help"]);
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .map(|w| w.trim_end_matches('.').to_string())
        .collect()
}

/// The value after `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    &args[i + 1]
}

#[test]
fn the_daemonset_runs_the_agent_with_named_capabilities_and_host_mounts() {
    let ds = daemonset();
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"].as_bool(), Some(true), "hostPID");
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(args[0], "trace", "{args:?}");
    let known = trace_flags();
    for a in args.iter().filter(|a| a.starts_with('-')) {
        assert!(known.contains(a), "{a} is not a flag of `sockscope trace`");
    }
    // The anatomy alone by default: no syscall tracer (issue 41).
    for f in ["--system", "--requests-only", "--metrics-public"] {
        assert!(args.iter().any(|a| a == f), "{f} in {args:?}");
    }
    // Sampled at most a sixtieth of the time: following every request
    // costs a small-request server up to 1.8x its CPU per request
    // (docs/benchmarks.md), and the agent may cost it 2 %.
    let duty = after(&args, "--requests-duty");
    let (on, period) = duty.split_once('/').unwrap();
    let secs = |t: &str| t.trim_end_matches('s').parse::<f64>().unwrap();
    assert!(secs(on) / secs(period) <= 1.0 / 60.0, "{duty}");
    // Stacks at 19 Hz, and the capabilities that name their functions.
    assert!(args.iter().any(|a| a == "--stacks"), "{args:?}");
    assert_eq!(after(&args, "--stack-hz"), "19");
    // The bounds stay explicit, not left to defaults that may change.
    assert!(after(&args, "--max-series").parse::<u32>().unwrap() > 0);
    assert!(
        after(&args, "--metrics").starts_with("$(POD_IP):"),
        "{args:?}"
    );
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("status.podIP")
    );

    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    let caps = strings(&sc["capabilities"]["add"]);
    for needed in ["BPF", "PERFMON", "CHECKPOINT_RESTORE", "SYSLOG"] {
        assert!(caps.iter().any(|c| c == needed), "{needed} in {caps:?}");
    }
    assert!(
        !caps.iter().any(|c| c == "SYS_ADMIN" || c == "ALL"),
        "no catch-all capability: {caps:?}"
    );

    let mounts: Vec<(&str, bool)> = c["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mountPath"].as_str().unwrap(),
                m["readOnly"].as_bool() == Some(true),
            )
        })
        .collect();
    for path in ["/sys/fs/cgroup", "/sys/kernel/tracing", "/sys/kernel/btf"] {
        assert!(
            mounts.contains(&(path, true)),
            "{path} read-only in {mounts:?}"
        );
    }
    assert_eq!(
        c["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/metrics")
    );
    for r in ["requests", "limits"] {
        for k in ["cpu", "memory"] {
            assert!(c["resources"][r][k].as_str().is_some(), "resources.{r}.{k}");
        }
    }
}

/// PromQL words that are not metric names: operators, modifiers, and the
/// aggregations (followed by `by (..)` before their `(`, so not caught as
/// functions).
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "and",
    "or",
    "unless",
    "inf",
    "nan",
];

/// The metric names a PromQL expression reads. Strings, label matchers
/// (`{...}`) and ranges (`[...]`) are dropped; the label lists of `by`,
/// `without`, `on`, `ignoring`, `group_left` and `group_right` are
/// dropped; an identifier followed by `(` is a function or aggregation;
/// a number (`0.99`, `1e9`) is skipped whole. What is left are metric
/// names (`rate(x[5m])`, `x{a="b"}`, a bare `x`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut plain = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for ch in expr.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '"' | '\'' | '`' => quote = Some(ch),
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace == 0 && depth_bracket == 0 => plain.push(ch),
            _ => {}
        }
        if matches!(ch, '{' | '}' | '[' | ']') {
            plain.push(' ');
        }
    }
    let chars: Vec<char> = plain.chars().collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let skip_ws = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let ch = chars[i];
        if ch.is_ascii_digit() || (ch == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if !(ch.is_ascii_alphabetic() || ch == '_' || ch == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let next = skip_ws(i);
        let lower = word.to_ascii_lowercase();
        if [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ]
        .contains(&lower.as_str())
        {
            // Its label list, when it has one, is not metric names.
            if chars.get(next) == Some(&'(') {
                i = next;
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
            }
            continue;
        }
        if chars.get(next) == Some(&'(') || KEYWORDS.contains(&lower.as_str()) {
            continue;
        }
        out.insert(word);
    }
    out
}

#[test]
fn the_extractor_finds_metric_names_and_nothing_else() {
    let e = r#"histogram_quantile(0.99, sum by (le, port) (rate(a_bucket{node=~"$node", x="y(z)"}[$__rate_interval])))
        / ignoring(part) group_left sum without (q) (b_total offset 5m) * 1e9 + c:rec:rate1m > bool 0.5"#;
    let got: Vec<String> = metric_names(e).into_iter().collect();
    assert_eq!(got, ["a_bucket", "b_total", "c:rec:rate1m"]);
}

/// (rule outputs, every expression) of deploy/prometheus/rules.yml.
fn rules() -> (BTreeSet<String>, Vec<String>) {
    let docs = yaml("deploy/prometheus/rules.yml");
    let mut records = BTreeSet::new();
    let mut exprs = Vec::new();
    for g in docs[0]["groups"].as_vec().expect("groups") {
        for r in g["rules"].as_vec().expect("rules") {
            if let Some(rec) = r["record"].as_str() {
                records.insert(rec.to_string());
            }
            exprs.push(r["expr"].as_str().expect("expr").to_string());
        }
    }
    assert!(!exprs.is_empty());
    (records, exprs)
}

/// Every PromQL expression of the dashboard: its panels' targets and its
/// template variables' queries (`label_values(METRIC{..}, label)` reads
/// METRIC only).
fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(repo("deploy/grafana/sockscope-dashboard.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(ts) = v["targets"].as_array() {
            for t in ts {
                out.push(t["expr"].as_str().expect("a target's expr").to_string());
            }
        }
        if let Some(ps) = v["panels"].as_array() {
            for p in ps {
                walk(p, out);
            }
        }
    }
    walk(&d, &mut out);
    for var in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = var["query"]["query"].as_str() {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.rsplit_once(','))
                .map(|(m, _)| m.to_string())
                .unwrap_or_else(|| q.to_string());
            out.push(inner);
        }
    }
    assert!(out.len() >= 10, "{out:?}");
    out
}

/// The family names a scrape body declares (`# TYPE name type`), with
/// `_bucket`, `_sum` and `_count` added for histograms.
fn exported(body: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in body.lines() {
        let Some(rest) = l.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (Some(name), Some(ty)) = (it.next(), it.next()) else {
            continue;
        };
        // A family is exported when it has at least one sample.
        if !body
            .lines()
            .any(|s| !s.starts_with('#') && s.starts_with(name))
        {
            continue;
        }
        out.insert(name.to_string());
        if ty == "histogram" {
            for s in ["_bucket", "_sum", "_count"] {
                out.insert(format!("{name}{s}"));
            }
        }
    }
    out
}

/// The systemd unit's `ExecStart` command line, its continuations joined,
/// split on white space (it quotes nothing).
fn systemd_exec_start() -> Vec<String> {
    let unit = std::fs::read_to_string(repo("deploy/systemd/sockscope-metrics.service")).unwrap();
    let mut line = String::new();
    let mut inside = false;
    for l in unit.lines() {
        if let Some(rest) = l.strip_prefix("ExecStart=") {
            inside = true;
            line.push_str(rest);
        } else if inside {
            line.push(' ');
            line.push_str(l.trim());
        } else {
            continue;
        }
        if line.ends_with('\\') {
            line.pop();
        } else {
            break;
        }
    }
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_systemd_unit_runs_the_agent_s_defaults() {
    let cmd = systemd_exec_start();
    assert!(cmd[0].ends_with("/sockscope"), "{cmd:?}");
    assert_eq!(cmd[1], "trace", "{cmd:?}");
    let known = trace_flags();
    for a in cmd.iter().filter(|a| a.starts_with('-')) {
        assert!(known.contains(a), "{a} is not a flag of `sockscope trace`");
    }
    // The same defaults as the DaemonSet: the anatomy alone, sampled as
    // it samples, the series bounded.
    assert!(cmd.iter().any(|a| a == "--requests-only"), "{cmd:?}");
    let ds = strings(&daemonset()["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert_eq!(
        after(&cmd, "--requests-duty"),
        after(&ds, "--requests-duty")
    );
    assert!(cmd.iter().any(|a| a == "--stacks"), "{cmd:?}");
    assert_eq!(after(&cmd, "--stack-hz"), after(&ds, "--stack-hz"));
    assert!(after(&cmd, "--max-series").parse::<u32>().unwrap() > 0);
    assert!(
        after(&cmd, "--metrics").starts_with("127.0.0.1:"),
        "{cmd:?}"
    );
}

/// A one-thread echo server on loopback.
fn echo_server() -> Server {
    Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:0",
    ])
}

/// The agent's command as the DaemonSet runs it (its arguments, read from
/// the manifest), exporting on `maddr` instead of the pod's address, and
/// sampling 1 s of every 2 s instead of its duty's longer period, so that
/// seconds of traffic are followed (tests/metrics.rs checks what a duty
/// exports).
fn agent_args(maddr: SocketAddr) -> Vec<String> {
    let args = strings(&daemonset()["spec"]["template"]["spec"]["containers"][0]["args"]);
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--metrics" {
            it.next();
            out.extend(["--metrics".to_string(), maddr.to_string()]);
        } else if a == "--requests-duty" {
            it.next();
            out.extend(["--requests-duty".to_string(), "1s/2s".to_string()]);
        } else {
            out.push(a);
        }
    }
    out
}

/// The agent, started in `cwd`, its stderr to `log`.
fn agent(maddr: SocketAddr, cwd: &Path, log: &Path) -> Child {
    Command::new(common::sockscope())
        .args(agent_args(maddr))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// The agent serving on a port it chose (127.0.0.1:0), and that address.
fn agent_on_port_0(cwd: &Path, log: &Path) -> (Child, SocketAddr) {
    let mut child = agent("127.0.0.1:0".parse().unwrap(), cwd, log);
    let maddr = ports::listening(&mut child, Duration::from_secs(30));
    (child, maddr)
}

/// Stops the agent with SIGTERM; asserts it exits 0.
fn stop(mut child: Child, log: &Path) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = common::wait_bounded(&mut child, Duration::from_secs(30));
    assert!(
        st.success(),
        "agent: {st}: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// A scrape body once `ready` holds for it (the exporter publishes once a
/// second), or the last one after 30 s.
fn scrape_until(maddr: SocketAddr, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some((200, _, body)) = http_get(maddr, "/metrics", None) {
            last = String::from_utf8_lossy(&body).into_owned();
            if ready(&last) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    last
}

/// Three seconds of loopback traffic to `addr`: Redis PINGs (which the
/// echo server sends back), so that the anatomy names an endpoint.
fn traffic(addr: SocketAddr) {
    let (st, _, err) = common::run_bounded(
        &[
            "load",
            "tcp-rr",
            &addr.to_string(),
            "-c",
            "2",
            // Long enough for a sample (1 s of every 2 s) and the cost
            // slices in it (50 ms of every 500 ms) to time some of its
            // runs.
            "-d",
            "3",
            "-q",
            "--request",
            "*1\\r\\n$4\\r\\nPING\\r\\n",
            "--expect",
            "14",
        ],
        Duration::from_secs(60),
    );
    assert!(st.success(), "load: {err}");
}

#[test]
fn every_metric_the_rules_and_dashboard_query_is_exported() {
    // The static half first: every name is a rule output or a family.
    let (records, rule_exprs) = rules();
    let mut queried = BTreeSet::new();
    for e in rule_exprs.iter().chain(dashboard_exprs().iter()) {
        queried.extend(metric_names(e));
    }
    let raw: BTreeSet<String> = queried.difference(&records).cloned().collect();
    assert!(
        raw.iter().all(|m| m.starts_with("sockscope_")),
        "only sockscope's own families are read: {raw:?}"
    );
    if common::require_program(
        "promtool",
        "every_metric_the_rules_and_dashboard_query_is_exported",
    ) {
        let o = Command::new("promtool")
            .args(["check", "rules"])
            .arg(repo("deploy/prometheus/rules.yml"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "promtool check rules: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    if !common::require_bpf("every_metric_the_rules_and_dashboard_query_is_exported") {
        return;
    }
    let dir = common::scratch("agent-queried");
    let srv = echo_server();
    let log = dir.join("agent.log");
    let (child, maddr) = agent_on_port_0(&dir, &log);
    // Served once the programs are attached and the first reading is in.
    scrape_until(maddr, |b| b.contains("sockscope_agent_series "));
    traffic(srv.addr);
    let want = format!("sockscope_requests_total{{port=\"{}\"", srv.addr.port());
    // The per-command cost: a reading every 5 s, of the processes whose
    // programs' runs the cost slices timed; the stacks, handed over once
    // a second.
    let body = scrape_until(maddr, |b| {
        b.contains(&want)
            && b.contains("sockscope_agent_target_bpf_seconds_total{")
            && b.contains("sockscope_stack_samples_total{")
    });
    stop(child, &log);
    assert!(body.contains(&want), "the served port is exported: {body}");
    let have = exported(&body);
    let missing: Vec<&String> = raw.iter().filter(|m| !have.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:?} (exported: {have:?})"
    );
}

#[test]
fn a_killed_agent_leaves_nothing_and_its_successor_serves_at_once() {
    if !common::require_bpf("a_killed_agent_leaves_nothing_and_its_successor_serves_at_once") {
        return;
    }
    let dir = common::scratch("agent-kill");
    // The agent runs in a directory of its own, its log elsewhere, so any
    // file it left would show.
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let log = dir.join("agent.log");
    let srv = echo_server();
    let (mut child, maddr) = agent_on_port_0(&cwd, &log);
    scrape_until(maddr, |b| b.contains("sockscope_agent_series "));
    traffic(srv.addr);
    // Killed while serving: a scrape has just been answered and the
    // tracer and anatomy threads are mid-reading.
    let body = scrape_until(maddr, |b| b.contains("sockscope_requests_total{"));
    assert!(body.contains("sockscope_agent_resident_bytes "), "{body}");
    let held = prog_ids_of(child.id());
    assert!(held.len() > 2, "it holds its programs: {held:?}");
    child.kill().unwrap();
    common::wait_bounded(&mut child, Duration::from_secs(30));
    // Programs are freed after an RCU grace period: wait for it, bounded.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left: Vec<(u32, String)> = Vec::new();
    while Instant::now() < deadline {
        left = loaded_programs()
            .into_iter()
            .filter(|(id, _)| held.contains(id))
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(left.is_empty(), "still loaded after SIGKILL: {left:?}");
    let pins = pinned_by_sockscope();
    assert!(pins.is_empty(), "pinned under /sys/fs/bpf: {pins:?}");
    let files: Vec<_> = std::fs::read_dir(&cwd).unwrap().flatten().collect();
    assert!(files.is_empty(), "nothing written where it ran: {files:?}");
    // The restarted agent binds the same address at once (no refusal for
    // the killed one's connections) and serves.
    let next = agent(maddr, &cwd, &log);
    let body = scrape_until(maddr, |b| b.contains("sockscope_agent_series "));
    stop(next, &log);
    assert!(body.contains("sockscope_agent_series "), "{body}");
}

/// What is pinned under /sys/fs/bpf with sockscope's names (`sockscope`,
/// or its programs' and maps' `ss_` prefix); other users' pins are theirs.
fn pinned_by_sockscope() -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![PathBuf::from("/sys/fs/bpf")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
            let name = e.file_name().to_string_lossy().to_ascii_lowercase();
            if name.contains("sockscope") || name.starts_with("ss_") {
                out.insert(e.path());
            }
        }
    }
    out
}
