//! Helpers shared by the integration tests: the binaries under test, the
//! ground-truth workload, the root/BPF gate, and one of each tool a test
//! needs around its processes: the kill-and-reap guard ([`Reaped`]), the
//! serial lock ([`serial`]), ports without races (`ports`), and the real
//! peers (`redis`, `memcached`, `nginx`, `prometheus`, `pyserver`, `server` for
//! sockscope's own).
#![allow(dead_code)]

pub mod anatomy;
pub mod cgroup;
pub mod dnsmasq;
pub mod memcached;
pub mod netns;
pub mod nginx;
pub mod ports;
pub mod postgres;
pub mod pprof;
pub mod procs;
pub mod progs;
pub mod prometheus;
pub mod pyserver;
pub mod redis;
pub mod server;
pub mod slow;
pub mod tmpfs;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Path of the sockscope binary built for these tests.
pub fn sockscope() -> &'static str {
    env!("CARGO_BIN_EXE_sockscope")
}

/// The lock of tests that must not run beside each other: those that
/// read or move something machine-wide (a namespace-wide UDP counter, the
/// list of named network namespaces) or need the CPUs to themselves
/// (timings, pinned busy loops). Every test of the `quiet` binary takes it,
/// so that one runs a test at a time. It holds across test binaries too
/// (an flock on target/tmp/serial.lock): `make test` runs two binaries at
/// once (.ci/test-lanes). A test that failed while holding it does not
/// poison it for the rest.
pub fn serial() -> Serial {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serial.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("flock {}: {e}", path.display()));
    Serial {
        _lock: lock,
        _guard: guard,
    }
}

/// Held by a test that took [`serial`]; released on drop (the file lock
/// first, then the binary's own mutex).
pub struct Serial {
    _lock: nix::fcntl::Flock<std::fs::File>,
    _guard: MutexGuard<'static, ()>,
}

/// A scratch directory unique to this test: the tests of one binary share
/// its pid, so a name claimed by two tests (test threads) fails the second.
pub fn scratch(name: &str) -> PathBuf {
    static CLAIMED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let test = std::thread::current().name().unwrap_or("").to_string();
    {
        let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
        match claimed.iter().find(|(n, _)| n == name) {
            Some((_, by)) => assert!(
                *by == test,
                "scratch name {name:?} is used by both {by} and {test}"
            ),
            None => claimed.push((name.to_string(), test)),
        }
    }
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("scratch")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// True when tests that load BPF may run. Outside CI a missing privilege
/// skips the test with a printed reason; under CI=true it fails it.
pub fn require_bpf(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    if root && btf {
        return true;
    }
    let why = if !root {
        "not running as root (BPF needs CAP_BPF/CAP_PERFMON)"
    } else {
        "kernel has no BTF"
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but {why}: BPF tests must run in CI");
    }
    eprintln!("SKIP {test}: {why}");
    false
}

/// True when the test runs as root (ptrace, /proc/PID/map_files and
/// /proc/PID/mem of another process need it). Outside CI it skips with a
/// printed reason; under CI=true it fails.
pub fn require_root(test: &str) -> bool {
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

/// Builds tests/workload/ss_workload.c once (statically, so no dynamic
/// loader adds syscalls) and returns its path.
pub fn workload() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        build_c(
            "ss_workload.c",
            "ss_workload",
            &["-static", "-O2", "-Wall", "-pthread"],
        )
    })
}

/// Compiles tests/workload/`src` with `flags` into the test binary's temp
/// directory as `out` (through a per-process name, renamed into place) and
/// returns its path.
pub fn build_c(src: &str, out: &str, flags: &[&str]) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(out);
    // Two tests of one binary may build the same program at once: each
    // writes its own file, and the renames replace one another whole.
    static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = out.with_extension(format!("tmp{}-{n}", std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workload")
        .join(src);
    let st = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .status()
        .expect("running cc (is gcc installed? `make deps` installs it)");
    assert!(st.success(), "compiling {}", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// Runs sockscope with `args`, capturing everything.
pub fn run(args: &[&str]) -> Output {
    Command::new(sockscope())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running sockscope")
}

/// Parses a JSON file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// calls of syscall `name` in a trace report (0 when absent).
pub fn calls(rep: &serde_json::Value, name: &str) -> u64 {
    syscall(rep, name).map_or(0, |s| s["calls"].as_u64().unwrap())
}

/// errors of syscall `name` in a trace report (0 when absent).
pub fn errors(rep: &serde_json::Value, name: &str) -> u64 {
    syscall(rep, name).map_or(0, |s| s["errors"].as_u64().unwrap_or(0))
}

/// The row of syscall `name`.
pub fn syscall<'a>(rep: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    rep["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
}

/// A workload started with `-w`: it has printed `ready <pid>` and waits for
/// a byte on stdin.
pub struct Waiting {
    pub child: Child,
    pub pid: i32,
}

impl Waiting {
    /// Starts the workload with `args` (which must include -w).
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(workload())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = line
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("workload said {line:?}"))
            .trim()
            .parse()
            .unwrap();
        Self { child, pid }
    }

    /// Lets it work.
    pub fn go(&mut self) {
        use std::io::Write;
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"x").unwrap();
    }

    /// Waits for it, with a bound.
    pub fn wait(mut self, limit: Duration) -> std::process::ExitStatus {
        wait_bounded(&mut self.child, limit)
    }
}

/// A child killed and reaped when dropped, unless it already ended: the
/// processes a test starts stop with it, even when an assertion fails.
/// The one guard of that kind: a helper that owns a child holds it in one
/// of these. It derefs to the child.
pub struct Reaped(pub Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for a child, killing it (and failing) after `limit`; the failure
/// names the command and where each of its threads was waiting.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let where_ = hung_at(child.id());
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "child {} did not finish within {limit:?}:\n{where_}",
                child.id()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A running process's command line and, per thread, its name, what it
/// waits in (wchan) and its kernel stack (root only): why it hangs.
fn hung_at(pid: u32) -> String {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let root = std::path::PathBuf::from(format!("/proc/{pid}"));
    let mut out = format!(
        "  cmdline: {}\n",
        read(&root.join("cmdline")).replace('\0', " ")
    );
    let Ok(tasks) = std::fs::read_dir(root.join("task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let p = t.path();
        out.push_str(&format!(
            "  thread {} {} in {}\n",
            t.file_name().to_string_lossy(),
            read(&p.join("comm")).trim(),
            read(&p.join("wchan")).trim()
        ));
        for l in read(&p.join("stack")).lines().take(12) {
            out.push_str(&format!("    {l}\n"));
        }
    }
    out
}

/// A sockscope started in the background with stderr piped; `attached()`
/// waits for its "attached to" line.
pub struct Background {
    pub child: Child,
    stderr: BufReader<std::process::ChildStderr>,
    pub seen: String,
}

impl Background {
    /// Starts sockscope with `args`.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_stdout(args, Stdio::piped())
    }

    /// Starts sockscope with `args`, its stdout going to `stdout` (a file,
    /// for output longer than a pipe holds unread).
    pub fn start_with_stdout(args: &[&str], stdout: impl Into<Stdio>) -> Self {
        let mut child = Command::new(sockscope())
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        Self {
            child,
            stderr,
            seen: String::new(),
        }
    }

    /// Blocks until sockscope reports it is attached; panics with what it
    /// printed if it exits first.
    pub fn attached(&mut self) {
        loop {
            let mut line = String::new();
            let n = self.stderr.read_line(&mut line).unwrap();
            self.seen.push_str(&line);
            if n == 0 {
                let st = self.child.wait().unwrap();
                panic!("sockscope exited ({st}) before attaching: {}", self.seen);
            }
            // Attach mode, or a scope mode's window opening.
            if line.contains("attached to pid") || line.starts_with("sockscope: tracing ") {
                return;
            }
        }
    }

    /// Blocks until a line of stderr contains `needle`; panics with what
    /// it printed if it exits first.
    pub fn line_with(&mut self, needle: &str) {
        loop {
            let mut line = String::new();
            let n = self.stderr.read_line(&mut line).unwrap();
            self.seen.push_str(&line);
            if n == 0 {
                let st = self.child.wait().unwrap();
                panic!(
                    "sockscope exited ({st}) before saying {needle:?}: {}",
                    self.seen
                );
            }
            if line.contains(needle) {
                return;
            }
        }
    }

    /// Waits for exit (bounded) and returns (status, rest of stderr).
    pub fn finish(mut self, limit: Duration) -> (std::process::ExitStatus, String) {
        let st = wait_bounded(&mut self.child, limit);
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        self.seen.push_str(&rest);
        (st, self.seen)
    }
}

/// Runs `sockscope load ARGS --json DIR/l.json` (bounded by `limit`);
/// returns the exit code, the report (Null when none was written) and
/// stderr.
pub fn load_json(
    dir: &Path,
    args: &[&str],
    limit: Duration,
) -> (Option<i32>, serde_json::Value, String) {
    let json = dir.join("l.json");
    let _ = std::fs::remove_file(&json);
    let mut all = vec!["load"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let (st, _out, err) = run_bounded(&all, limit);
    let rep = if json.exists() {
        read_json(&json)
    } else {
        serde_json::Value::Null
    };
    (st.code(), rep, err)
}

/// Runs sockscope with `args` to completion within `limit` (killed and
/// failed after it), capturing stdout and stderr without risking a full
/// pipe.
pub fn run_bounded(args: &[&str], limit: Duration) -> (std::process::ExitStatus, String, String) {
    let mut child = Command::new(sockscope())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running sockscope");
    let (so, se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let (out, err) = (read(Box::new(so)), read(Box::new(se)));
    let st = wait_bounded(&mut child, limit);
    (st, out.join().unwrap(), err.join().unwrap())
}

/// Staging directories of artifact directory `name` in `dir`
/// (`.NAME.sockscope-staging-XXXXXXXXXX`, and the names older versions
/// used, `.NAME.tmp.PID` / `.NAME.old.PID`).
pub fn staging_dirs(dir: &Path, name: &str) -> Vec<PathBuf> {
    let prefixes = [
        format!(".{name}.sockscope-staging-"),
        format!(".{name}.tmp"),
        format!(".{name}.old"),
    ];
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    prefixes.iter().any(|p| n.starts_with(p.as_str()))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// True when no entry of `dir` is named like a staging directory of
/// `name`: a failed run left nothing behind.
pub fn no_staging_left(dir: &Path, name: &str) -> bool {
    staging_dirs(dir, name).is_empty()
}

/// sockscope run as nobody (uid/gid 65534) with no capabilities at all,
/// through util-linux's setpriv; add its arguments. The caller needs root.
pub fn sockscope_as_nobody() -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ])
    .arg(sockscope());
    c
}

/// The launched `sockscope serve ...` process whose arguments contain
/// `marker`: argv[1] must be `serve`, so neither the profile that launched
/// it (whose --target string holds the marker) nor a child caught between
/// fork and exec (it still shows its parent's arguments) is taken for it.
pub fn serve_process_with(marker: &str) -> Option<i32> {
    procs::pids().find(|pid| {
        let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let args: Vec<String> = c
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        args.get(1).is_some_and(|a| a == "serve") && args.join(" ").contains(marker)
    })
}

/// True when `program` runs (`--version`; `-v` for haproxy and `-V` for
/// memcached, which know no other); a missing one skips the test with a printed reason outside
/// CI and fails it under CI=true (make deps installs every test peer).
pub fn require_program(program: &str, test: &str) -> bool {
    let found = Command::new(program)
        .arg(match program {
            "haproxy" => "-v",
            "memcached" => "-V",
            _ => "--version",
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {program} missing under CI (make deps installs it)");
        }
        eprintln!("SKIP {test}: no {program}");
    }
    found
}
