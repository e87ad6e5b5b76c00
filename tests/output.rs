//! Files a user names (`trace --json/-o`, `load --json`, `serve --json`):
//! refused destinations are usage errors found before anything is
//! measured; streams and devices are written through, never replaced; a
//! full device is a failed write naming ENOSPC; a link another user could
//! have planted is never followed; files are replaced through an
//! exclusively created temporary file with an unpredictable name.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::Server;
use common::*;

const LIMIT: Duration = Duration::from_secs(60);
/// A refusal must come before any measurement: well under the runs'
/// durations below.
const FAST: Duration = Duration::from_secs(3);

/// An echo server for `load` to measure.
fn echo() -> Server {
    Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--req-size",
        "16",
        "--resp-size",
        "16",
    ])
}

/// True when the tests that need root (chown, mount) may run; like
/// `require_bpf`, a skip outside CI and a failure under CI=true.
fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but not running as root");
    }
    eprintln!("SKIP {test}: not running as root");
    false
}

fn is_char_device(p: &str) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

/// The full device (1, 7) to write to. As root, a node of our own in the
/// test's scratch directory: a regression that replaces its destination
/// then clobbers that node, not the machine's /dev/full. Otherwise
/// /dev/full itself (which a user other than root cannot replace).
fn full_device(test: &str) -> String {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return "/dev/full".into();
    }
    let node = scratch(test).join("full");
    let st = Command::new("mknod")
        .args(["-m", "666"])
        .arg(&node)
        .args(["c", "1", "7"])
        .status()
        .unwrap();
    assert!(st.success(), "mknod {}", node.display());
    node.to_string_lossy().into_owned()
}

#[test]
fn trace_json_to_dev_full_exits_1_naming_enospc_and_keeps_the_device() {
    if !require_bpf("trace_json_to_dev_full_exits_1_naming_enospc_and_keeps_the_device") {
        return;
    }
    let full = full_device("output-full-trace");
    let (st, _, err) = run_bounded(&["trace", "-q", "--json", &full, "--", "true"], LIMIT);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("ENOSPC"), "{err}");
    assert!(is_char_device(&full), "{full} was replaced");
    // The table is not lost to the full destination: it goes to stderr.
    let (st, _, err) = run_bounded(&["trace", "-o", &full, "--", "true"], LIMIT);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("ENOSPC") && err.contains("syscall"), "{err}");
    assert!(is_char_device(&full), "{full} was replaced");
}

#[test]
fn load_json_to_dev_full_exits_1_naming_enospc_and_keeps_the_device() {
    let full = full_device("output-full-load");
    let srv = echo();
    let addr = srv.addr.to_string();
    let (st, out, err) = run_bounded(
        &[
            "load", "tcp-rr", &addr, "-n", "200", "--req", "16", "--json", &full,
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(1), "{out}{err}");
    assert!(err.contains("ENOSPC"), "{err}");
    // What was measured was shown before the write failed.
    assert!(out.contains("transactions"), "summary missing: {out}");
    assert!(is_char_device(&full), "{full} was replaced");
}

#[test]
fn json_into_a_fifo_with_a_reader_arrives_and_it_stays_a_fifo() {
    let dir = scratch("output-fifo");
    let fifo = dir.join("pipe");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let srv = echo();
    let addr = srv.addr.to_string();
    let (st, out, err) = run_bounded(
        &[
            "load",
            "tcp-rr",
            &addr,
            "-n",
            "100",
            "--req",
            "16",
            "--json",
            fifo.to_str().unwrap(),
        ],
        LIMIT,
    );
    let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    // Checked before joining: a reader of a replaced FIFO waits forever.
    assert!(ft.is_fifo(), "the FIFO was replaced by {ft:?}");
    assert!(st.success(), "{out}{err}");
    // A reader still waiting for a writer that never came gets its EOF.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let text = reader.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON through the FIFO");
    assert_eq!(v["transactions"], 100);
}

#[test]
fn load_json_dash_streams_parseable_json_on_stdout() {
    let srv = echo();
    let addr = srv.addr.to_string();
    for dest in ["-", "/dev/stdout"] {
        let (st, out, err) = run_bounded(
            &[
                "load", "tcp-rr", &addr, "-n", "50", "--req", "16", "--json", dest,
            ],
            LIMIT,
        );
        assert!(st.success(), "{dest}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("--json {dest}: stdout is not JSON ({e}): {out:?}"));
        assert_eq!(v["transactions"], 50);
        // The summary for people moved to stderr.
        assert!(err.contains("transactions"), "{dest}: {err}");
    }
    assert!(!Path::new("-").exists(), "a file named - was written");
}

#[test]
fn trace_json_dash_streams_parseable_json_on_stdout() {
    if !require_bpf("trace_json_dash_streams_parseable_json_on_stdout") {
        return;
    }
    let (st, out, err) = run_bounded(&["trace", "--json", "-", "--", "true"], LIMIT);
    assert!(st.success(), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:?}"));
    assert_eq!(v["schema"], "sockscope.trace");
    assert!(err.contains("syscall"), "the table goes to stderr: {err}");
}

#[test]
fn serve_json_dash_streams_parseable_json_and_the_ready_line_moves_to_stderr() {
    let mut child = Command::new(sockscope())
        .args(["serve", "echo", "--transport", "epoll", "--req-size", "8"])
        .args(["--resp-size", "8", "--json", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("ready line on stderr, got {line:?}"))
        .trim()
        .to_string();
    let (st, _, err) = run_bounded(&["load", "tcp-rr", &addr, "-n", "10", "--req", "8"], LIMIT);
    assert!(st.success(), "{err}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let st = wait_bounded(&mut child, LIMIT);
    assert!(st.success(), "serve exited {st}");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:?}"));
    assert_eq!(v["transactions"], 10);
}

/// Runs sockscope expecting a usage error (exit 2) naming `needle`, fast.
fn assert_refused_fast(args: &[&str], needle: &str) {
    let t0 = Instant::now();
    let (st, out, err) = run_bounded(args, LIMIT);
    let took = t0.elapsed();
    assert_eq!(st.code(), Some(2), "{args:?}: {out}{err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err}"
    );
    assert!(
        took < FAST,
        "{args:?}: refused only after {took:?}: something was measured first"
    );
}

#[test]
fn directory_socket_device_and_missing_parent_destinations_exit_2_before_measuring() {
    let dir = scratch("output-refused");
    let sock_path = dir.join("sock");
    let _sock = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    let d = dir.to_str().unwrap();
    let s = sock_path.to_str().unwrap();
    let missing = dir.join("no/such/dir/out.json");
    let m = missing.to_str().unwrap();
    let block = std::fs::read_dir("/dev")
        .unwrap()
        .flatten()
        .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()))
        .map(|e| e.path().to_string_lossy().into_owned());
    // Nothing listens on port 1: a load that started would fail with 1.
    let mut dests = vec![
        (d, "is a directory"),
        (s, "is a socket"),
        (m, "No such file"),
    ];
    if let Some(b) = block.as_deref() {
        dests.push((b, "is a block device"));
    }
    for (dest, needle) in dests {
        assert_refused_fast(
            &["load", "tcp-rr", "127.0.0.1:1", "-d", "5", "--json", dest],
            needle,
        );
        assert_refused_fast(&["trace", "--json", dest, "--", "sleep", "5"], needle);
        assert_refused_fast(&["trace", "-o", dest, "--", "sleep", "5"], needle);
        assert_refused_fast(
            &["serve", "echo", "--transport", "epoll", "--json", dest],
            needle,
        );
    }
    assert!(
        std::fs::symlink_metadata(&sock_path)
            .unwrap()
            .file_type()
            .is_socket()
    );
}

#[test]
fn a_link_owned_by_nobody_is_refused_and_what_it_names_is_untouched() {
    if !require_root("a_link_owned_by_nobody_is_refused_and_what_it_names_is_untouched") {
        return;
    }
    let dir = scratch("output-link");
    let victim = dir.join("root-owned");
    std::fs::write(&victim, "keep me\n").unwrap();
    let link = dir.join("out.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let st = Command::new("chown")
        .args(["-h", "nobody"])
        .arg(&link)
        .status()
        .unwrap();
    assert!(st.success(), "chown -h nobody");
    let l = link.to_str().unwrap();
    assert_refused_fast(
        &["load", "tcp-rr", "127.0.0.1:1", "-d", "5", "--json", l],
        "owned by nobody",
    );
    assert_refused_fast(
        &["trace", "--json", l, "--", "sleep", "5"],
        "owned by nobody",
    );
    assert_refused_fast(
        &["serve", "echo", "--transport", "epoll", "--json", l],
        "owned by nobody",
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// The temporary file `load --json OUT` created under strace: its name and
/// whether the open had O_CREAT|O_EXCL, and whether it was renamed onto OUT.
fn traced_temp_file(out: &Path, addr: &str) -> (String, bool, bool) {
    let log = out.with_extension("strace");
    let st = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=openat,rename,renameat,renameat2",
            "-o",
        ])
        .arg(&log)
        .arg(sockscope())
        .args([
            "-q", "load", "tcp-rr", addr, "-n", "20", "--req", "16", "--json",
        ])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running strace (installed by `make deps`)");
    assert!(st.success(), "load under strace: {st}");
    let text = std::fs::read_to_string(&log).unwrap();
    let dir = out.parent().unwrap().to_str().unwrap();
    let name = out.file_name().unwrap().to_str().unwrap();
    let open = text
        .lines()
        .find(|l| l.contains("openat(") && l.contains(&format!("{dir}/.{name}.")))
        .unwrap_or_else(|| panic!("no temporary file opened beside {name}:\n{text}"));
    let tmp = open.split('"').nth(1).unwrap().to_string();
    let excl = open.contains("O_CREAT") && open.contains("O_EXCL");
    let renamed = text.lines().any(|l| {
        l.contains("rename")
            && l.contains(&format!("\"{tmp}\""))
            && l.contains(&format!("\"{}\"", out.display()))
    });
    (tmp, excl, renamed)
}

#[test]
fn files_are_replaced_through_an_exclusive_temporary_file_with_an_unpredictable_name() {
    let dir = scratch("output-strace");
    let out = dir.join("out.json");
    let srv = echo();
    let addr = srv.addr.to_string();
    let (a, excl, renamed) = traced_temp_file(&out, &addr);
    assert!(excl, "{a} not created with O_CREAT|O_EXCL");
    assert!(renamed, "{a} not renamed onto {}", out.display());
    let (b, excl, renamed) = traced_temp_file(&out, &addr);
    assert!(excl && renamed);
    assert_ne!(a, b, "the same temporary name twice: predictable");
    // Random, not the pid or a counter: a long run of letters and digits.
    let random = |t: &str| {
        t.rsplit('/')
            .next()
            .unwrap()
            .trim_start_matches(".out.json.")
            .trim_end_matches(".tmp")
            .to_string()
    };
    for t in [&a, &b] {
        let r = random(t);
        assert!(
            r.len() >= 6 && r.chars().all(|c| c.is_ascii_alphanumeric()),
            "{t}: not a random name"
        );
        assert!(!r.chars().all(|c| c.is_ascii_digit()), "{t}: a number");
    }
    assert!(common::read_json(&out)["transactions"] == 20);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}
