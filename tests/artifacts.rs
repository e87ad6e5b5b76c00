//! Artifact directories (`--out` of profile, bench, demo; `report --out`):
//! staged under an unpredictable name, committed atomically, stale staging
//! directories of dead runs cleaned up by the next run, scratch files kept
//! out of --out, and a full filesystem reported as ENOSPC with nothing
//! left behind.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::processes_with;
use common::tmpfs::Tmpfs;
use common::*;

const LIMIT: Duration = Duration::from_secs(120);
/// A short profile: a target and a load of a fraction of a second.
const SHORT_LOAD: &str = "tcp-rr -c 1 -d 0.3";

fn profile(out: &Path, target: &str, load: &str) -> (Option<i32>, String, String) {
    let (st, so, se) = run_bounded(
        &[
            "profile",
            "-q",
            "--target",
            target,
            "--load",
            load,
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    (st.code(), so, se)
}

/// Every file under `d`, relative paths.
fn files_under(d: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(x) = todo.pop() {
        for e in std::fs::read_dir(&x).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p.clone());
            }
            out.push(p.strip_prefix(d).unwrap().to_string_lossy().into_owned());
        }
    }
    out
}

#[test]
fn a_stale_staging_directory_of_a_dead_run_is_cleaned_up_by_the_next_run_into_the_same_out() {
    if !require_bpf(
        "a_stale_staging_directory_of_a_dead_run_is_cleaned_up_by_the_next_run_into_the_same_out",
    ) {
        return;
    }
    let dir = scratch("artifacts-stale");
    let out = dir.join("art");
    let marker = "--max-conns 765431";
    let target = format!("serve echo --transport epoll {marker}");
    let mut child = Command::new(sockscope())
        .args(["profile", "-q", "--target", &target, "--load"])
        .args(["tcp-rr -c 1 -d 30", "--out", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Mid-run: the staging directory exists and the target is up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while staging_dirs(&dir, "art").is_empty() || common::serve_process_with(marker).is_none() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "profile ended before it was killed"
        );
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // The target's output goes to a pipe sockscope reads, never to a file
    // (under --out or anywhere else).
    let target = common::serve_process_with(marker).unwrap();
    let out_fd = std::fs::read_link(format!("/proc/{target}/fd/1")).unwrap();
    assert!(
        out_fd.to_string_lossy().starts_with("pipe:"),
        "the target's stdout is {}",
        out_fd.display()
    );
    child.kill().unwrap(); // SIGKILL: no cleanup runs.
    child.wait().unwrap();
    for pid in processes_with(marker) {
        // SAFETY: the orphaned target of the profile we killed.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let left = staging_dirs(&dir, "art");
    assert_eq!(left.len(), 1, "{left:?}");
    let stale: &PathBuf = &left[0];
    // Only artifacts are ever written under --out: no log, no scratch.
    let inside = files_under(stale);
    assert!(inside.is_empty(), "scratch files under --out: {inside:?}");

    let (c, so, se) = profile(&out, "serve echo --transport epoll", SHORT_LOAD);
    assert_eq!(c, Some(0), "{so}{se}");
    assert!(out.join("run.json").is_file());
    assert!(!stale.exists(), "{} survived the next run", stale.display());
    assert!(
        no_staging_left(&dir, "art"),
        "{:?}",
        staging_dirs(&dir, "art")
    );
}

#[test]
fn a_profile_onto_a_full_filesystem_exits_1_naming_enospc_and_leaves_nothing() {
    if !require_bpf("a_profile_onto_a_full_filesystem_exits_1_naming_enospc_and_leaves_nothing") {
        return;
    }
    let dir = scratch("artifacts-enospc");
    let fs = Tmpfs::mount(&dir.join("fs"), "256k");
    fs.fill();
    let out = fs.0.join("art");
    let (c, so, se) = profile(&out, "serve echo --transport epoll", SHORT_LOAD);
    assert_eq!(c, Some(1), "{so}{se}");
    assert!(se.contains("ENOSPC"), "{se}");
    assert!(!out.exists(), "{} exists after the failure", out.display());
    assert!(
        no_staging_left(&fs.0, "art"),
        "{:?}",
        staging_dirs(&fs.0, "art")
    );
}

#[test]
fn report_out_creates_a_new_directory_and_names_what_is_wrong() {
    if !require_bpf("report_out_creates_a_new_directory_and_names_what_is_wrong") {
        return;
    }
    let dir = scratch("artifacts-report");
    let art = dir.join("art");
    let (c, so, se) = profile(&art, "serve echo --transport epoll", SHORT_LOAD);
    assert_eq!(c, Some(0), "{so}{se}");
    let run_json = art.join("run.json");
    let j = run_json.to_str().unwrap();

    let new = dir.join("new");
    let (st, so, se) = run_bounded(&["report", j, "--out", new.to_str().unwrap()], LIMIT);
    assert!(st.success(), "{so}{se}");
    assert!(new.join("report.html").is_file() && new.join("summary.txt").is_file());
    assert_eq!(
        std::fs::read(new.join("report.html")).unwrap(),
        std::fs::read(art.join("report.html")).unwrap()
    );

    let deep = dir.join("no/such/new");
    let (st, _, se) = run_bounded(&["report", j, "--out", deep.to_str().unwrap()], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("no/such") && se.contains("ENOENT"), "{se}");
    assert!(!se.contains(".tmp"), "names an internal file: {se}");

    let missing = dir.join("missing.json");
    let (st, _, se) = run_bounded(&["report", missing.to_str().unwrap()], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("missing.json") && se.contains("ENOENT"), "{se}");

    let (st, _, se) = run_bounded(&["report", j, "--out", j], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("not a directory"), "{se}");
}

/// tests/fixtures/v1/: artifacts written by sockscope before the shared
/// artifact header (schema version 1, `sockscope_version` in the trace,
/// load and serve reports), and the summaries that version printed for
/// them. A deliberate change to a summary's text updates the .summary.txt
/// files.
fn v1_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1")
        .join(name)
}

#[test]
fn version_1_artifacts_still_render_and_compare() {
    let dir = scratch("artifacts-v1");
    for (json, summary) in [
        ("profile.json", "profile.summary.txt"),
        ("bench-relay.json", "bench-relay.summary.txt"),
    ] {
        let out = dir.join(json.trim_end_matches(".json"));
        let file = v1_fixture(json);
        let (st, so, se) = run_bounded(
            &[
                "report",
                "-q",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            LIMIT,
        );
        assert!(st.success(), "{json}: {so}{se}");
        assert_eq!(
            std::fs::read_to_string(out.join("summary.txt")).unwrap(),
            std::fs::read_to_string(v1_fixture(summary)).unwrap(),
            "{json}: the summary differs from the fixture (what version 1 printed; the relay table since aligns its last column)"
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<td>0.1.0 (6277c6c55df1)</td>"), "{json}");
    }

    let p = v1_fixture("profile.json");
    let p = p.to_str().unwrap();
    let (st, so, se) = run_bounded(&["compare", p, p], LIMIT);
    assert!(st.success(), "{se}");
    assert!(
        so.contains("transactions/s") && so.contains("+0.0%"),
        "{so}"
    );

    // A version this sockscope does not know is refused, naming both.
    let v9 = dir.join("v9.json");
    let text = std::fs::read_to_string(v1_fixture("profile.json")).unwrap();
    std::fs::write(
        &v9,
        text.replacen("\"schema_version\": 1,", "\"schema_version\": 9,", 1),
    )
    .unwrap();
    let (st, _, se) = run_bounded(&["report", v9.to_str().unwrap()], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(
        se.contains(
            "schema_version 9 is not a supported version; this sockscope reads version 1, 2, 3, 4 or 5"
        ),
        "{se}"
    );
    let v9 = v9.to_str().unwrap();
    let (st, _, se) = run_bounded(&["compare", p, v9], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(
        se.contains(
            "is sockscope.profile, but its schema_version 9 is not a supported version; this \
             sockscope reads version 1, 2, 3, 4 or 5"
        ),
        "{se}"
    );
}

/// Stacks as `profile` will write them: `report` renders the folded
/// stacks beside the page (through the same set as summary.txt and
/// report.html), the top functions in the summary and both flame graphs on
/// the page; `compare` ranks the functions that grew (and writes them as a
/// page with `--html`), or says that only one run has stacks. An artifact
/// written before stacks renders as before, without folded files.
#[test]
fn stacks_render_as_folded_files_tables_and_flame_graphs() {
    use sockscope::report::stacks::{
        FrameKey, StackGraph, StacksReport, WeightUnit, WeightedStack,
    };
    let dir = scratch("artifacts-stacks");
    let stack = |names: &[&str], weight: u64| WeightedStack {
        process: "app".into(),
        thread: "worker".into(),
        frames: names
            .iter()
            .map(|n| FrameKey {
                name: n.trim_end_matches("_[k]").into(),
                module: if n.ends_with("_[k]") {
                    "[kernel]"
                } else {
                    "/srv/app"
                }
                .into(),
                kernel: n.ends_with("_[k]"),
            })
            .collect(),
        weight,
        complete: true,
    };
    let stacks = |parse: u64| StacksReport {
        hz: 99,
        on_cpu: StackGraph::build(
            WeightUnit::Samples,
            vec![
                stack(&["main", "serve", "parse"], parse),
                stack(&["main", "serve", "write", "tcp_sendmsg_[k]"], 30),
            ],
            20,
        ),
        off_cpu: Some(StackGraph::build(
            WeightUnit::Nanoseconds,
            vec![stack(&["main", "wait", "schedule_[k]"], 5_000_000)],
            20,
        )),
        ..Default::default()
    };
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(v1_fixture("profile.json")).unwrap())
            .unwrap();
    let mut runs = Vec::new();
    for (name, parse) in [("a", 70), ("b", 210)] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        v["stacks"] = serde_json::to_value(stacks(parse)).unwrap();
        std::fs::write(d.join("run.json"), serde_json::to_vec(&v).unwrap()).unwrap();
        runs.push(d);
    }
    let json = |d: &Path| d.join("run.json").to_str().unwrap().to_string();
    let (st, _, se) = run_bounded(&["report", "-q", &json(&runs[0])], LIMIT);
    assert!(st.success(), "{se}");
    let read = |f: &str| std::fs::read_to_string(runs[0].join(f)).unwrap();
    assert_eq!(
        read("stacks.folded"),
        "app;main;serve;parse 70\napp;main;serve;write;tcp_sendmsg_[k] 30\n"
    );
    assert_eq!(
        read("stacks-offcpu.folded"),
        "app;main;wait;schedule_[k] 5000000\n"
    );
    // And as pprof profiles, written again from run.json.
    let pprof =
        |f: &str| sockscope::report::pprof::read(&std::fs::read(runs[0].join(f)).unwrap()).unwrap();
    let on = pprof("stacks.pb.gz");
    assert_eq!(on.sample.iter().map(|s| s.value[0]).sum::<i64>(), 100);
    assert!(on.string_table.iter().any(|s| s == "worker"));
    assert!(on.string_table.iter().any(|s| s == "tcp_sendmsg_[k]"));
    let off = pprof("stacks-offcpu.pb.gz");
    assert_eq!(
        off.sample.iter().map(|s| s.value[0]).sum::<i64>(),
        5_000_000
    );
    let summary = read("summary.txt");
    assert!(
        summary.contains("Top functions on-CPU at 99 Hz"),
        "{summary}"
    );
    assert!(summary.contains("Top functions off-CPU, where it waits"));
    let html = read("report.html");
    assert!(html.contains("<iframe class=\"flame\" id=\"flame-on-cpu\""));
    assert!(html.contains("<iframe class=\"flame\" id=\"flame-off-cpu\""));

    // Written before stacks: no folded files, the summary as before (the
    // v1 test above holds it to the byte).
    let old = dir.join("old");
    let (st, _, se) = run_bounded(
        &[
            "report",
            "-q",
            v1_fixture("profile.json").to_str().unwrap(),
            "--out",
            old.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{se}");
    assert!(!old.join("stacks.folded").exists() && old.join("summary.txt").is_file());

    let page = dir.join("compare.html");
    let (st, so, se) = run_bounded(
        &[
            "compare",
            &json(&runs[0]),
            &json(&runs[1]),
            "--html",
            page.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{se}");
    let grew = &so[so.find("Functions that grew").expect(&so)..];
    let first = grew.lines().nth(2).unwrap();
    assert!(first.ends_with(" user   parse"), "{grew}");
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(page.contains("<td>parse</td>") && page.contains("id=\"flame-diff\""));
    let old_json = v1_fixture("profile.json");
    let (st, so, se) = run_bounded(
        &["compare", old_json.to_str().unwrap(), &json(&runs[0])],
        LIMIT,
    );
    assert!(st.success(), "{se}");
    assert!(so.contains("Stacks: only B has sampled stacks"), "{so}");
}

/// A schema_version that is not a version is named as found, by report,
/// compare and merge alike (it was "version 0" for "2", -1 and 2.5).
#[test]
fn a_bad_schema_version_is_named_as_found() {
    let dir = scratch("artifacts-bad-version");
    let text = std::fs::read_to_string(v1_fixture("profile.json")).unwrap();
    let good = v1_fixture("profile.json");
    let good = good.to_str().unwrap();
    for (version, said) in [
        ("\"2\"", "schema_version \"2\" is not a number"),
        ("-1", "schema_version -1 is not a supported version"),
        ("2.5", "schema_version 2.5 is not a supported version"),
    ] {
        let file = dir.join("bad.json");
        std::fs::write(
            &file,
            text.replacen(
                "\"schema_version\": 1,",
                &format!("\"schema_version\": {version},"),
                1,
            ),
        )
        .unwrap();
        let f = file.to_str().unwrap();
        for args in [
            vec!["report", f],
            vec!["compare", good, f],
            vec!["merge", "--out", "-", good, f],
        ] {
            let (st, _, se) = run_bounded(&args, LIMIT);
            assert_eq!(st.code(), Some(2), "{args:?}: {se}");
            assert!(se.contains(said), "{args:?}: {se}");
            assert!(!se.contains("version 0"), "{args:?}: {se}");
        }
    }
}

/// `report FILE` writes beside FILE: a refusal there names that, not an
/// --out the user did not give; with --out it names --out.
#[test]
fn a_refused_report_names_out_only_when_given() {
    let dir = scratch("artifacts-report-beside");
    let file = dir.join("profile.json");
    std::fs::copy(v1_fixture("profile.json"), &file).unwrap();
    std::fs::create_dir(dir.join("summary.txt")).unwrap();
    let f = file.to_str().unwrap();
    let (st, _, se) = run_bounded(&["report", "-q", f], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(!se.contains("--out"), "{se}");
    assert!(
        se.contains(&format!("writing beside {f}:")) && se.contains("summary.txt is a directory"),
        "{se}"
    );
    let d = dir.to_str().unwrap();
    let (st, _, se) = run_bounded(&["report", "-q", f, "--out", d], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(
        se.contains("--out") && se.contains("summary.txt is a directory"),
        "{se}"
    );
}

/// tests/fixtures/v2/requests.json: what `trace --requests-only -p PID
/// --duration 4 --json` wrote for a one-thread `serve echo --work-us 100`
/// under `load tcp-rr -c 2 -d 2`, and requests.summary.txt the table that
/// trace printed (its -o) for the same run.
fn requests_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v2")
        .join(name)
}

/// `report` reads a `sockscope.requests` artifact: summary.txt (and
/// stdout) is byte for byte the text `trace --requests-only` printed, and
/// report.html holds the anatomy's card and the window's.
#[test]
fn a_requests_artifact_renders_the_text_its_trace_printed() {
    let dir = scratch("artifacts-requests");
    let file = requests_fixture("requests.json");
    let printed = std::fs::read_to_string(requests_fixture("requests.summary.txt")).unwrap();
    let out = dir.join("out");
    let (st, so, se) = run_bounded(
        &[
            "report",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{so}{se}");
    assert_eq!(
        std::fs::read_to_string(out.join("summary.txt")).unwrap(),
        printed
    );
    assert!(so.starts_with(&printed), "{so}");
    assert!(so.ends_with(&format!("report: {}\n", out.join("report.html").display())));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h3>Anatomy of a request</h3>"), "{html}");
    assert!(html.contains("<h3>Window and cost</h3>"), "{html}");
    assert!(html.contains("pid 3297 (sockscope)"), "{html}");
}

/// A truncated or malformed requests artifact, another schema and an
/// unknown version are usage errors (exit 2) that say which.
#[test]
fn a_broken_requests_artifact_is_refused_naming_why() {
    let dir = scratch("artifacts-requests-broken");
    let text = std::fs::read_to_string(requests_fixture("requests.json")).unwrap();
    let mut no_anatomy = read_json(&requests_fixture("requests.json"));
    no_anatomy.as_object_mut().unwrap().remove("anatomy");
    let mut turns_text = read_json(&requests_fixture("requests.json"));
    turns_text["anatomy"]["turns"] = "many".into();
    let cases: Vec<(&str, String, &str)> = vec![
        ("truncated", text[..text.len() / 2].to_string(), "not JSON"),
        (
            "no-anatomy",
            no_anatomy.to_string(),
            "not a valid sockscope.requests artifact: missing field `anatomy`",
        ),
        (
            "turns-text",
            turns_text.to_string(),
            "not a valid sockscope.requests artifact: invalid type: string \"many\"",
        ),
        (
            "v9",
            text.replacen("\"schema_version\": 2,", "\"schema_version\": 9,", 1),
            "schema \"sockscope.requests\": schema_version 9 is not a supported version; \
             this sockscope reads version 1 or 2",
        ),
        (
            "other-schema",
            text.replacen("\"sockscope.requests\"", "\"sockscope.requests.v0\"", 1),
            "schema \"sockscope.requests.v0\" has no report (expected sockscope.profile, \
             sockscope.bench, sockscope.demo, sockscope.load or sockscope.requests)",
        ),
    ];
    for (name, body, says) in cases {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, body).unwrap();
        let (st, so, se) = run_bounded(&["report", file.to_str().unwrap()], LIMIT);
        assert_eq!(st.code(), Some(2), "{name}: {so}{se}");
        assert!(se.contains(says), "{name}: {se}");
        assert!(
            !dir.join("summary.txt").exists() && !dir.join("report.html").exists(),
            "{name}: a refused artifact writes nothing"
        );
    }
}

/// What `poisoned` appends to an artifact's strings: an OSC that retitles
/// the terminal, BEL, and CSI as one C1 character (then "2J": clear).
const POISON: &str = "\x1b]0;pwn\x07\u{9b}2J";
/// The same, as sockscope writes it out.
const POISON_SHOWN: &str = r"\x1b]0;pwn\x07\u{9b}2J";

/// Fixture `src` written into `dir` (as `file`) with [`POISON`] after
/// every string, but those in `kept` and the fields that must stay
/// readable for the artifact to parse at all.
fn poisoned(src: &Path, dir: &Path, file: &str, kept: &[&str]) -> PathBuf {
    fn walk(v: &mut Value, kept: &[&str]) {
        let poison = |x: &mut Value| match x {
            Value::String(s) => s.push_str(POISON),
            other => walk(other, kept),
        };
        match v {
            Value::Object(o) => o
                .iter_mut()
                .filter(|(k, _)| !kept.contains(&k.as_str()))
                .for_each(|(_, x)| poison(x)),
            Value::Array(a) => a.iter_mut().for_each(poison),
            _ => {}
        }
    }
    let mut v = read_json(src);
    let mut kept = kept.to_vec();
    kept.extend([
        "schema",
        "hdr_histogram",
        "started_at",
        "sockscope_version",
        "version",
        "git_commit",
        "git_dirty",
    ]);
    walk(&mut v, &kept);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    path
}

/// A control character other than a newline: what must not be printed.
fn raw(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}

/// Crafted artifacts carry escape sequences in every string (names,
/// commands, hosts, notes, errors...): report, compare and merge write
/// them out, on stdout, stderr and in summary.txt alike.
#[test]
fn escape_sequences_in_a_crafted_artifact_are_written_out() {
    let dir = scratch("artifacts-escapes");
    for src in [
        v1_fixture("profile.json"),
        v1_fixture("bench-relay.json"),
        v1_fixture("load.json"),
        requests_fixture("requests.json"),
    ] {
        let name = src.file_name().unwrap().to_str().unwrap();
        let sub = dir.join(name.trim_end_matches(".json"));
        // Enums (a syscall's class, a tail interval's method) must parse.
        let file = poisoned(&src, &sub, name, &["class", "method"]);
        let (st, so, se) = run_bounded(&["report", file.to_str().unwrap()], LIMIT);
        assert!(st.success(), "{name}: {se}");
        let summary = std::fs::read_to_string(sub.join("summary.txt")).unwrap();
        assert!(!raw(&so) && !raw(&se), "{name}: {so:?} {se:?}");
        assert!(!raw(&summary), "{name}: {summary:?}");
        assert!(summary.contains(POISON_SHOWN), "{name}: {summary}");
        // The page writes them out too (as text does, then HTML-escaped).
        let html = std::fs::read_to_string(sub.join("report.html")).unwrap();
        assert!(
            !raw(&html),
            "{name}: a raw control character in report.html"
        );
        assert!(html.contains(POISON_SHOWN), "{name}: {html}");
    }

    let p = poisoned(
        &v1_fixture("profile.json"),
        &dir.join("compare"),
        "a.json",
        &["class"],
    );
    let p = p.to_str().unwrap();
    let (st, so, se) = run_bounded(&["compare", p, p], LIMIT);
    assert!(st.success(), "{se}");
    assert!(!raw(&so) && !raw(&se), "{so:?} {se:?}");
    assert!(so.contains(POISON_SHOWN), "{so}");

    // Two runs (two starts) to merge.
    let a = poisoned(&v1_fixture("load.json"), &dir.join("merge"), "a.json", &[]);
    let b = dir.join("merge/b.json");
    let mut v = read_json(&a);
    v["started_at"] = "2026-11-23T13:39:27.632Z".into();
    std::fs::write(&b, v.to_string()).unwrap();
    let m = dir.join("merge/m.json");
    let (st, so, se) = run_bounded(
        &[
            "merge",
            "--out",
            m.to_str().unwrap(),
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{se}");
    assert!(!raw(&so) && !raw(&se), "{so:?} {se:?}");
    assert!(so.contains(POISON_SHOWN), "{so}");

    // A field the parse refuses is quoted in the error, written out.
    let bad = poisoned(
        &v1_fixture("profile.json"),
        &dir.join("bad"),
        "run.json",
        &[],
    );
    let (st, _, se) = run_bounded(&["report", bad.to_str().unwrap()], LIMIT);
    assert_eq!(st.code(), Some(2), "{se}");
    assert!(se.contains("unknown variant") && !raw(&se), "{se:?}");
}

/// A function name of 70,000 characters (a generated symbol, a perf map's
/// line, a crafted artifact) in the stacks and in the advice: `report` and
/// `compare` render it (a table cell over 65,535 characters panicked, exit
/// 101, the whole run lost), cut with a visible marker in the tables of
/// summary.txt, report.html and compare's output, kept whole in the folded
/// stacks.
#[test]
fn a_name_of_70000_characters_is_cut_in_tables_and_kept_whole_in_folded_stacks() {
    use sockscope::report::stacks::{
        FrameKey, StackGraph, StacksReport, WeightUnit, WeightedStack,
    };
    let dir = scratch("artifacts-long-name");
    let long = format!("app::{}", "x".repeat(69_995));
    assert_eq!(long.chars().count(), 70_000);
    let marker = "... [69000 characters cut]";
    let frame = |name: &str| FrameKey {
        name: name.into(),
        module: "/srv/app".into(),
        kernel: false,
    };
    let stacks = |weight: u64| StacksReport {
        hz: 99,
        on_cpu: StackGraph::build(
            WeightUnit::Samples,
            vec![
                WeightedStack {
                    process: "app".into(),
                    thread: "app".into(),
                    frames: vec![frame("main"), frame(&long)],
                    weight,
                    complete: true,
                },
                WeightedStack {
                    process: "app".into(),
                    thread: "app".into(),
                    frames: vec![frame("main"), frame("idle")],
                    weight: 10,
                    complete: true,
                },
            ],
            20,
        ),
        ..Default::default()
    };
    let mut v = read_json(&v1_fixture("profile.json"));
    v["advice"] = serde_json::json!([{
        "setting": long, "current": "1", "advised": "2", "ok": false,
        "why": long, "evidence": long
    }]);
    let mut runs = Vec::new();
    for (name, weight) in [("a", 90), ("b", 300)] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        v["stacks"] = serde_json::to_value(stacks(weight)).unwrap();
        std::fs::write(d.join("run.json"), serde_json::to_vec(&v).unwrap()).unwrap();
        runs.push(d.join("run.json").to_str().unwrap().to_string());
    }
    let (st, so, se) = run_bounded(&["report", "-q", &runs[0]], LIMIT);
    assert_eq!(st.code(), Some(0), "{so}{se}");
    let read = |f: &str| std::fs::read_to_string(dir.join("a").join(f)).unwrap();
    let summary = read("summary.txt");
    assert!(!summary.contains(&long), "the name is whole in summary.txt");
    // The name's own cells (the top functions' row, the advice's setting)
    // say 69,000 were cut; the headline and the advice's why hold more.
    let cuts = |s: &str| s.matches(" characters cut]").count();
    let shown = |s: &str| {
        s.lines()
            .map(|l| l.chars().take(160).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        summary.matches(marker).count() == 2 && cuts(&summary) == 4,
        "{}",
        shown(&summary)
    );
    let html = read("report.html");
    assert!(
        html.matches(marker).count() == 2 && cuts(&html) == 4,
        "the tables and the headline's tile of report.html"
    );
    // Whole where a program reads it.
    assert!(read("stacks.folded").contains(&format!("app;main;{long} 90\n")));

    let (st, so, se) = run_bounded(&["compare", &runs[0], &runs[1]], LIMIT);
    assert_eq!(st.code(), Some(0), "{se}");
    let grew = &so[so.find("Functions that grew").expect(&so)..];
    assert!(grew.contains(marker) && !grew.contains(&long), "{grew}");
}

/// Runs sockscope with `args` under a 2 GiB address-space limit (so a
/// read without a bound fails quickly instead of taking the machine's
/// memory) and a minute's bound, returning (status, stderr).
fn run_capped(args: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(sockscope());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; it only lowers this child's
    // own limit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("running sockscope");
    let mut se = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let st = wait_bounded(&mut child, Duration::from_secs(60));
    (st.code(), err.join().unwrap())
}

#[test]
fn an_endless_device_or_an_oversized_sparse_file_is_refused_before_it_is_read() {
    let dir = scratch("artifacts-unbounded");
    let sparse = dir.join("sparse.json");
    // 64 GiB of holes: nothing on disk, but a reader without a bound
    // would try to hold all of it.
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let (load, profile) = (fixtures.join("load.json"), fixtures.join("profile.json"));
    let (s, l, p) = (
        sparse.to_str().unwrap(),
        load.to_str().unwrap(),
        profile.to_str().unwrap(),
    );
    let out = dir.join("merged.json");
    let o = out.to_str().unwrap();
    for (bad, why) in [
        (
            "/dev/zero",
            "is a character device, not a regular file".to_string(),
        ),
        (
            s,
            format!("larger than 268435456 bytes ({} bytes)", 64u64 << 30),
        ),
    ] {
        for args in [
            vec!["compare", bad, p],
            vec!["compare", p, bad],
            vec!["merge", l, bad, "--out", o],
            vec!["tune", "--from", bad],
            vec!["report", bad, "--out", dir.to_str().unwrap()],
        ] {
            let (code, err) = run_capped(&args);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(err.contains(bad) && err.contains(&why), "{args:?}: {err}");
            assert!(!err.contains("memory"), "{args:?}: {err}");
            // The size in the message shows the file was judged by its
            // stat, before a byte of it was read.
        }
    }
    assert!(!out.exists(), "merge wrote an artifact");
    std::fs::remove_file(&sparse).unwrap();
}
