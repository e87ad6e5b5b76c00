//! What the request anatomy's protocol tests share
//! (tests/anatomy_{resp,memcached,postgres,http1}.rs): a profile of a
//! running server under a load, and reading counts out of its anatomy.

use std::time::Duration;

use serde_json::Value;

/// A profile of a short load, on a busy 2-CPU machine; a hung run is
/// killed and fails after it.
const LIMIT: Duration = Duration::from_secs(180);

/// A count of the artifact (the test fails when it is not one).
pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The anatomy's counters without its bulky parts, for a failure's
/// message.
pub fn brief(a: &Value) -> String {
    let mut a = a.clone();
    for k in ["parts", "ports", "cost", "intervals", "at_percentile"] {
        if let Some(o) = a.as_object_mut() {
            o.remove(k);
        }
    }
    a.to_string()
}

/// A profile (`--quiet`) of the running `pid` under `how` (`--load` or
/// `--load-cmd`) `load`, exit 0 asserted: run.json, summary.txt and
/// report.html (empty when the run wrote none).
pub fn profile_pid(
    name: &str,
    pid: impl std::fmt::Display,
    how: &str,
    load: &str,
) -> (Value, String, String) {
    profile_pid_with(name, pid, &[], how, load)
}

/// [`profile_pid`] with `extra` options.
pub fn profile_pid_with(
    name: &str,
    pid: impl std::fmt::Display,
    extra: &[&str],
    how: &str,
    load: &str,
) -> (Value, String, String) {
    let out = super::scratch(name).join("art");
    let pid = pid.to_string();
    let mut args = vec![
        "profile",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--pid",
        &pid,
    ];
    args.extend_from_slice(extra);
    args.extend([how, load]);
    let (st, so, se) = super::run_bounded(&args, LIMIT);
    assert_eq!(st.code(), Some(0), "stdout: {so}\nstderr: {se}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap_or_default();
    (super::read_json(&out.join("run.json")), summary, html)
}

/// The route template of a path as docs/anatomy.md says the anatomy
/// folds it: no query, numeric segments, hex runs of 8+ digits and UUIDs
/// as `{id}`.
pub fn route_template(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.split('/')
        .map(|seg| {
            let hex = !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_hexdigit());
            let digits = !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit());
            let uuid = seg.len() == 36
                && seg.bytes().enumerate().all(|(i, b)| {
                    if [8, 13, 18, 23].contains(&i) {
                        b == b'-'
                    } else {
                        b.is_ascii_hexdigit()
                    }
                });
            if digits || (hex && seg.len() >= 8) || uuid {
                "{id}".to_string()
            } else {
                seg.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// An endpoint row's final responses by status class (`2xx`...`5xx`),
/// the classes it has, added to `got` under (its name, the class).
pub fn add_status_classes(
    got: &mut std::collections::BTreeMap<(String, String), u64>,
    name: &str,
    e: &Value,
) {
    for class in ["2xx", "3xx", "4xx", "5xx"] {
        let n = u(&e["status"][class]);
        if n > 0 {
            got.insert((name.to_string(), class.to_string()), n);
        }
    }
}

/// A profile of a real server under its usual load has the tail's section
/// (issue 40): requests in both groups, the samples that could not be
/// given to one request counted and printed.
pub fn assert_tail_section(rep: &Value, summary: &str) {
    let t = &rep["tail"];
    assert!(t.is_object(), "no tail section: {}", rep["stacks"]["notes"]);
    assert!(
        u(&t["requests"]["tail"]) > 0 && u(&t["requests"]["rest"]) > 0,
        "{}",
        t["requests"]
    );
    for k in ["interleaved_on_cpu", "untimed_on_cpu", "wait_ns"] {
        assert!(t["unattributed"][k].is_u64(), "{}", t["unattributed"]);
    }
    assert!(t["headline"].is_string());
    assert!(
        summary.contains("Tail (why the slow ones were slow)"),
        "{summary}"
    );
    assert!(summary.contains("unattributed:"), "{summary}");
}
