//! Files a user names (`trace --json/-o`, `load --json`, `serve --json`):
//! refused destinations are usage errors found before anything is
//! measured; streams and devices are written through, never replaced; a
//! full device is a failed write naming ENOSPC; a link another user could
//! have planted is never followed; files are replaced through an
//! exclusively created temporary file with an unpredictable name, relative
//! to a descriptor of the directory resolved once (a directory swapped for
//! a link meanwhile redirects nothing); a FIFO another user planted in a
//! sticky directory is refused, and so is a regular file planted there;
//! `report --out` writes its files as a set and removes the directory it
//! made when they fail.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::Server;
use common::tmpfs::Tmpfs;
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
    // Relative to the directory's descriptor: `openat(3, ".out.json.X.tmp"`.
    let name = out.file_name().unwrap().to_str().unwrap();
    let open = text
        .lines()
        .find(|l| l.contains("openat(") && l.contains(&format!("\".{name}.")))
        .unwrap_or_else(|| panic!("no temporary file opened beside {name}:\n{text}"));
    let tmp = open.split('"').nth(1).unwrap().to_string();
    let excl = open.contains("O_CREAT") && open.contains("O_EXCL");
    let renamed = text.lines().any(|l| {
        l.contains("rename")
            && l.contains(&format!("\"{tmp}\""))
            && l.contains(&format!("\"{name}\""))
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

/// Swaps `a` and `b` (renameat2 RENAME_EXCHANGE) until `stop` is set: a
/// local user's race against a path root is about to write.
fn exchange_loop(
    a: std::path::PathBuf,
    b: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    use std::os::unix::ffi::OsStrExt;
    std::thread::spawn(move || {
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let (a, b) = (c(&a), c(&b));
        let mut swaps = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: two valid NUL-terminated paths.
            let r = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            swaps += 1;
        }
        swaps
    })
}

/// A user's directory `u` holding a real directory `sub` and, at `swap`,
/// a link owned by nobody to `secret`, a root-only directory beside `u`.
/// Returns (u, secret).
fn racing_tree(test: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let base = scratch(test);
    let (u, secret) = (base.join("u"), base.join("secret"));
    std::fs::create_dir_all(u.join("sub")).unwrap();
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    let swap = u.join("swap");
    std::os::unix::fs::symlink(&secret, &swap).unwrap();
    let st = Command::new("chown")
        .args(["-h", "nobody"])
        .arg(&swap)
        .status()
        .unwrap();
    assert!(st.success(), "chown -h nobody");
    (u, secret)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Whichever of `u/sub` and `u/swap` is the real directory now.
fn real_dir(u: &Path) -> std::path::PathBuf {
    ["sub", "swap"]
        .map(|n| u.join(n))
        .into_iter()
        .find(|p| std::fs::symlink_metadata(p).unwrap().is_dir())
        .unwrap()
}

/// How many times a race runs: bounded in count and in time.
const RACE_ROUNDS: usize = 2000;
const RACE_TIME: Duration = Duration::from_secs(5);

#[test]
fn a_directory_swapped_for_a_link_during_writes_never_redirects_them() {
    if !require_root("a_directory_swapped_for_a_link_during_writes_never_redirects_them") {
        return;
    }
    let (u, secret) = racing_tree("output-race-write");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = exchange_loop(u.join("sub"), u.join("swap"), stop.clone());
    let dest = u.join("sub/x.json");
    let (mut written, mut refused) = (0, 0);
    let t0 = Instant::now();
    for i in 0..RACE_ROUNDS {
        if t0.elapsed() > RACE_TIME {
            break;
        }
        match sockscope::output::write(&dest, format!("{{\"round\": {i}}}\n").as_bytes()) {
            Ok(()) => written += 1,
            Err(e) => {
                // The only failure allowed: the link seen, and refused.
                let code = e.downcast_ref::<sockscope::error::Exit>().map(|x| x.code);
                assert_eq!(code, Some(2), "{e:#}");
                assert!(format!("{e:#}").contains("owned by nobody"), "{e:#}");
                refused += 1;
            }
        }
        assert!(
            names(&secret).is_empty(),
            "round {i}: written into the root-only directory: {:?}",
            names(&secret)
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    eprintln!("{written} written, {refused} refused, {swaps} swaps");
    assert!(names(&secret).is_empty(), "{:?}", names(&secret));
    // Only the file itself: no temporary file left behind.
    assert_eq!(names(&real_dir(&u)), ["x.json"]);
}

#[test]
fn an_artifact_staging_directory_never_lands_in_a_swapped_in_directory() {
    if !require_root("an_artifact_staging_directory_never_lands_in_a_swapped_in_directory") {
        return;
    }
    use sockscope::process::staging::Staging;
    let (u, secret) = racing_tree("output-race-staging");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = exchange_loop(u.join("sub"), u.join("swap"), stop.clone());
    let dest = u.join("sub/art");
    let (mut committed, mut refused) = (0, 0);
    let t0 = Instant::now();
    for i in 0..RACE_ROUNDS {
        if t0.elapsed() > RACE_TIME {
            break;
        }
        match Staging::new(&dest) {
            Ok(s) => {
                s.write("run.json", b"{}\n").unwrap();
                assert!(
                    names(&secret).is_empty(),
                    "round {i}: staged in the root-only directory: {:?}",
                    names(&secret)
                );
                // Every other run fails (dropped): its staging directory
                // must go wherever the directory has moved.
                if i % 2 == 0 {
                    s.commit().unwrap();
                    committed += 1;
                }
            }
            Err(e) => {
                assert!(format!("{e:#}").contains("owned by nobody"), "{e:#}");
                refused += 1;
            }
        }
        assert!(names(&secret).is_empty(), "round {i}: {:?}", names(&secret));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    eprintln!("{committed} committed, {refused} refused, {swaps} swaps");
    assert!(names(&secret).is_empty(), "{:?}", names(&secret));
    let real = real_dir(&u);
    assert!(no_staging_left(&real, "art"), "{:?}", names(&real));
    assert!(names(&real).len() <= 1, "{:?}", names(&real));
}

#[test]
fn a_fifo_another_user_planted_in_a_sticky_directory_is_refused_before_measuring() {
    if !require_root(
        "a_fifo_another_user_planted_in_a_sticky_directory_is_refused_before_measuring",
    ) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("output-sticky-fifo");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let fifo = dir.join("planted");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let st = Command::new("chown")
        .arg("nobody")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success(), "chown nobody");
    let f = fifo.to_str().unwrap();
    let needle = "owned by nobody (uid 65534) in a sticky directory";
    assert_refused_fast(
        &["load", "tcp-rr", "127.0.0.1:1", "-d", "5", "--json", f],
        needle,
    );
    assert_refused_fast(&["trace", "--json", f, "--", "sleep", "5"], needle);
    // Root's own FIFO there, reached through root's own link: refused too,
    // since only a FIFO named directly is written into.
    let own = dir.join("own");
    assert!(Command::new("mkfifo").arg(&own).status().unwrap().success());
    let link = dir.join("link");
    std::os::unix::fs::symlink(&own, &link).unwrap();
    assert_refused_fast(
        &[
            "load",
            "tcp-rr",
            "127.0.0.1:1",
            "-d",
            "5",
            "--json",
            link.to_str().unwrap(),
        ],
        "only when it is named directly",
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_file_another_user_planted_in_a_sticky_directory_is_refused_and_stays_as_it_was() {
    if !require_root(
        "a_file_another_user_planted_in_a_sticky_directory_is_refused_and_stays_as_it_was",
    ) {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = scratch("output-sticky-file");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = dir.join("r.json");
    std::fs::write(&planted, "theirs\n").unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
    let f = planted.to_str().unwrap();
    let needle = "a regular file owned by nobody (uid 65534) in a sticky directory";
    assert_refused_fast(
        &["load", "tcp-rr", "127.0.0.1:1", "-d", "5", "--json", f],
        needle,
    );
    assert_refused_fast(&["trace", "--json", f, "--", "sleep", "5"], needle);
    let m = std::fs::metadata(&planted).unwrap();
    assert_eq!(m.uid(), 65534);
    assert_eq!(std::fs::read_to_string(&planted).unwrap(), "theirs\n");
    // Root's own file in the same directory is replaced as usual.
    let own = dir.join("own.json");
    std::fs::write(&own, "old\n").unwrap();
    let srv = echo();
    let o = run(&[
        "-q",
        "load",
        "tcp-rr",
        &srv.addr.to_string(),
        "-n",
        "10",
        "--req",
        "16",
        "--json",
        own.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(read_json(&own)["transactions"].as_u64() == Some(10));
}

#[test]
fn report_out_on_a_full_filesystem_leaves_no_partial_set() {
    if !require_root("report_out_on_a_full_filesystem_leaves_no_partial_set") {
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/profile.json");
    let fs = Tmpfs::mount(&scratch("output-report-full").join("mnt"), "64k");
    // 16 pages; 14 taken: room for summary.txt (about 6 kB), not for
    // report.html (over 20 kB).
    std::fs::write(fs.0.join("filler"), vec![0u8; 14 * 4096]).unwrap();
    let out = fs.0.join("out");
    let (st, _, err) = run_bounded(
        &[
            "report",
            fixture.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}/", out.display())) && err.contains("(ENOSPC)"),
        "the file and the reason: {err}"
    );
    // Neither file (nor a temporary one): the set is all or nothing, and
    // the directory the run made is gone with it.
    assert!(!out.exists(), "left behind: {:?}", names(&out));
    // A directory that was there before (here another user's) is used and
    // left, failure or not.
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    let (st, _, err) = run_bounded(
        &[
            "report",
            fixture.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(st.code(), Some(1), "{err}");
    assert_eq!(names(&out), Vec::<String>::new());
    // With room, both arrive.
    std::fs::remove_file(fs.0.join("filler")).unwrap();
    let (st, _, err) = run_bounded(
        &[
            "report",
            "-q",
            fixture.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(st.success(), "{err}");
    assert_eq!(names(&out), ["report.html", "summary.txt"]);
}

/// A profile/bench --out set that fills the disk names the file's final
/// path and the errno, never the hidden staging directory's name, and
/// leaves nothing behind.
#[test]
fn a_full_disk_under_a_staged_set_names_the_final_path() {
    if !require_root("a_full_disk_under_a_staged_set_names_the_final_path") {
        return;
    }
    use sockscope::process::staging::Staging;
    let fs = Tmpfs::mount(&scratch("output-staging-full").join("mnt"), "64k");
    let dest = fs.0.join("p");
    let staging = Staging::new(&dest).unwrap();
    let err = staging
        .write("run.json", &vec![b'x'; 128 * 1024])
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!("{}: ", dest.join("run.json").display())),
        "{msg}"
    );
    assert!(msg.contains("(ENOSPC)"), "{msg}");
    assert!(!msg.contains(".p."), "the staging name leaked: {msg}");
    drop(staging);
    assert_eq!(names(&fs.0), Vec::<String>::new());
}

/// `trace --json F -o T` on a full disk: the failure names both files and
/// the errno (the table's was lost behind the JSON's), exits 1, prints the
/// table on stderr instead, and leaves neither file nor a temporary one; as
/// much with --interval, whose last write is the whole trace.
#[test]
fn a_table_that_fills_the_disk_is_named_beside_the_json() {
    if !require_bpf("a_table_that_fills_the_disk_is_named_beside_the_json") {
        return;
    }
    let fs = Tmpfs::mount(&scratch("output-table-full").join("mnt"), "64k");
    fs.fill();
    let json = fs.0.join("t.json");
    let table = fs.0.join("t.txt");
    let (j, t) = (json.to_str().unwrap(), table.to_str().unwrap());
    for extra in [&[][..], &["--interval", "0.2"][..]] {
        let mut args = vec!["trace", "-q", "--json", j, "-o", t];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sleep", "0.5"]);
        let (st, _, err) = run_bounded(&args, LIMIT);
        assert_eq!(st.code(), Some(1), "{extra:?}: {err}");
        for f in [j, t] {
            assert!(
                err.contains(&format!("{f}: No space left on device (ENOSPC)")),
                "{extra:?}: {f} not named: {err}"
            );
        }
        assert!(
            err.contains("clock_nanosleep"),
            "{extra:?}: table lost: {err}"
        );
        assert_eq!(names(&fs.0), ["filler"], "{extra:?}");
    }
}
