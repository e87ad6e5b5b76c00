//! What sockscope launches, and what it reads back from it: everything it
//! started dies with it, SIGKILL included (the target, the target's own
//! children, an experiment's servers and haproxy), and a hostile target
//! running as another user cannot make it print or embed a file only root
//! may read.

use crate::common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::procs::{Seen, established_on, still_running_after, tree, wait_for};
use common::*;
use sockscope::process::ready::{self, Proto};

/// How long everything a SIGKILLed sockscope started may take to die.
const DIE_WITHIN: Duration = Duration::from_secs(2);

fn start(args: &[&str]) -> Child {
    Command::new(sockscope())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sockscope")
}

/// The TCP listener `pid` owns: its address and socket inode.
fn listener_of(pid: i32) -> Option<(SocketAddr, u64)> {
    let sockets = ready::owned_sockets(pid);
    let addr = ready::choose(&sockets, Proto::TcpListen)?;
    let inode = sockets.iter().find(|s| s.local == addr)?.inode;
    Some((addr, inode))
}

/// Waits until a process of `run` that matches `what` listens and the
/// load holds at least `conns` connections to it; returns it and its
/// listener.
fn loaded_server(run: &Child, what: &str, conns: usize) -> (Seen, (SocketAddr, u64)) {
    let found = wait_for(Duration::from_secs(30), || {
        tree(run.id() as i32).into_iter().find_map(|p| {
            let listener = listener_of(p.pid)?;
            (p.cmdline.contains(what) && established_on(listener.0.port()) >= conns)
                .then_some((p, listener))
        })
    });
    found.unwrap_or_else(|| panic!("no loaded server matching {what:?} under pid {}", run.id()))
}

/// SIGKILLs `run` (and reaps it), then checks that every process in
/// `procs` is gone within DIE_WITHIN.
fn kill_and_check(mut run: Child, procs: &[Seen]) {
    run.kill().unwrap();
    run.wait().unwrap();
    let left = still_running_after(procs, DIE_WITHIN);
    assert!(
        left.is_empty(),
        "still running {DIE_WITHIN:?} after sockscope was killed: {left:#?}"
    );
}

fn refused(addr: SocketAddr) -> bool {
    matches!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// Checks that the killed run's listener (address, socket inode) is
/// closed. The port is free once it is, and the other tests here start
/// servers on ephemeral ports at the same time, so one of theirs may have
/// taken it since: a listener there with another inode is theirs; the same
/// inode, open in any process, is the run's socket still alive.
fn assert_freed((addr, inode): (SocketAddr, u64), what: &str) {
    if refused(addr) {
        return;
    }
    let holders: Vec<i32> = common::procs::pids()
        .filter(|&pid| ready::socket_inodes(pid).contains(&inode))
        .collect();
    assert!(
        holders.is_empty(),
        "{what}'s listener at {addr} (inode {inode}) is still open in {holders:?}"
    );
    let now = ready::listeners_on_port(addr.port(), Proto::TcpListen, &[]);
    assert!(
        !now.is_empty(),
        "{addr} neither refuses connections nor has a listener"
    );
    eprintln!("{addr} was taken since by another listener: {now:?}");
}

#[test]
fn a_killed_profile_takes_its_target_with_it() {
    if !require_bpf("a_killed_profile_takes_its_target_with_it") {
        return;
    }
    let out = scratch("launched-kill-profile").join("art");
    let run = start(&[
        "profile",
        "--target",
        "serve echo --transport epoll",
        "--load",
        "tcp-rr -c 2 -d 60",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (server, listener) = loaded_server(&run, "serve echo", 2);
    let procs = tree(run.id() as i32);
    assert!(procs.iter().any(|p| p.pid == server.pid));
    kill_and_check(run, &procs);
    assert_freed(listener, "the target");
    assert!(!out.exists());
}

#[test]
fn a_killed_profile_takes_the_targets_children_too() {
    if !require_bpf("a_killed_profile_takes_the_targets_children_too") {
        return;
    }
    let out = scratch("launched-kill-grandchild").join("art");
    // The shell starts a child of its own (which does not inherit the
    // parent-death signal), then becomes the server.
    let script = format!(
        "{s} __idle 600 & exec {s} serve echo --transport epoll",
        s = sockscope()
    );
    let run = start(&[
        "profile",
        "--load",
        "tcp-rr -c 2 -d 60",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let (_, listener) = loaded_server(&run, "serve echo", 2);
    let procs = tree(run.id() as i32);
    assert!(
        procs.iter().any(|p| p.cmdline.contains("__idle 600")),
        "the target's child is not there: {procs:#?}"
    );
    kill_and_check(run, &procs);
    assert_freed(listener, "the target");
}

#[test]
fn a_killed_bench_relay_takes_haproxy_and_its_servers_with_it() {
    if !require_bpf("a_killed_bench_relay_takes_haproxy_and_its_servers_with_it") {
        return;
    }
    let out = scratch("launched-kill-bench").join("art");
    let run = start(&["bench", "relay", "--quick", "--out", out.to_str().unwrap()]);
    // haproxy comes second (after the direct points) when installed; the
    // relays follow either way.
    let haproxy = Path::new("/usr/sbin/haproxy").exists();
    let want = if haproxy { "haproxy" } else { "serve relay" };
    // Listening is enough: it is loaded right after, and a 0.5 s point can
    // slip between two scans on a busy machine.
    let (_, listener) = loaded_server(&run, want, 0);
    let procs = tree(run.id() as i32);
    let upstream = procs
        .iter()
        .find(|p| p.cmdline.contains("serve echo"))
        .unwrap_or_else(|| panic!("no echo upstream: {procs:#?}"));
    let upstream = listener_of(upstream.pid).expect("the upstream listens");
    kill_and_check(run, &procs);
    assert_freed(listener, want);
    assert_freed(upstream, "the echo upstream");
}

/// A file only root may read, holding a unique string.
fn root_only_secret(dir: &Path) -> (std::path::PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("sockscope-secret-{}-{nanos}", std::process::id());
    let path = dir.join("secret.json");
    std::fs::write(&path, format!("{{\"secret\": \"{secret}\"}}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (path, secret)
}

/// A shell script (run as nobody) that replaces every file it can reach
/// through its own descriptors (those of the shell, `$$`: inside `$(...)`
/// stdout is the substitution's pipe), and the directories of the run next to
/// `out`, with a link to `secret`; then runs `then`.
fn hostile_script(secret: &Path, out: &Path, then: &str) -> String {
    let parent = out.parent().unwrap().display();
    format!(
        r#"[ "$(id -u)" != 0 ] || exit 99
plant() {{ [ -d "$1" ] && [ ! -L "$1" ] && return; rm -f "$1" 2>/dev/null; ln -s {secret} "$1" 2>/dev/null; }}
plant_in() {{ for f in "$1"/* "$1"/.[!.]*; do plant "$f"; done; }}
for fd in 0 1 2 3 4 5 6 7 8 9; do
  p=$(readlink /proc/$$/fd/$fd) || continue
  case "$p" in /dev/*|/proc/*) ;; /*) plant_in "$(dirname "$p")"; plant "$p";; esac
done
for d in {parent}/.art* {parent}/.art*/* {parent}/.art*/.work/*; do
  [ -d "$d" ] && plant_in "$d"
done
echo planted
{then}"#,
        secret = secret.display()
    )
}

#[test]
fn a_hostile_target_cannot_make_sockscope_show_a_root_only_file() {
    if !require_bpf("a_hostile_target_cannot_make_sockscope_show_a_root_only_file") {
        return;
    }
    let dir = scratch("launched-hostile");
    let (secret_path, secret) = root_only_secret(&dir);
    let out = dir.join("art");
    let profile = |then: &str| {
        let script = hostile_script(&secret_path, &out, then);
        run_bounded(
            &[
                "profile",
                "-u",
                "nobody",
                "--load",
                "tcp-rr -c 1 -n 200",
                "--ready-timeout",
                "20",
                "--out",
                out.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &script,
            ],
            Duration::from_secs(120),
        )
    };
    // Fails before it is ready: profile quotes the end of its output.
    let (st, so, se) = profile("exit 3");
    assert!(
        !so.contains(&secret) && !se.contains(&secret),
        "leaked:\n{so}\n{se}"
    );
    assert_eq!(st.code(), Some(3), "{so}{se}");
    assert!(se.contains("planted"), "{se}");
    assert!(!out.exists());
    // Succeeds: nothing of the secret in what is printed or written.
    let serve = format!("exec {} serve echo --transport epoll", sockscope());
    let (st, so, se) = profile(&serve);
    assert_eq!(st.code(), Some(0), "{so}{se}");
    assert!(
        !so.contains(&secret) && !se.contains(&secret),
        "leaked:\n{so}\n{se}"
    );
    for f in ["run.json", "summary.txt", "report.html"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(!text.contains(&secret), "{f} embeds the secret");
    }
    assert!(
        std::fs::read_to_string(&secret_path)
            .unwrap()
            .contains(&secret),
        "the secret file itself was touched"
    );
}

#[test]
fn a_serve_target_run_as_nobody_hands_its_report_back() {
    if !require_bpf("a_serve_target_run_as_nobody_hands_its_report_back") {
        return;
    }
    let out = scratch("launched-nobody-report").join("art");
    let (st, so, se) = run_bounded(
        &[
            "profile",
            "-u",
            "nobody",
            "--target",
            "serve echo --transport epoll --req-size 100 --resp-size 100",
            "--load",
            "tcp-rr -c 2 -n 2000 --req 100",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_eq!(st.code(), Some(0), "{so}{se}");
    let rep = read_json(&out.join("run.json"));
    let command: Vec<&str> = rep["target"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(command.ends_with(&["--json", "/dev/fd/3"]), "{command:?}");
    let server = &rep["target"]["server_report"];
    assert!(server.is_object(), "{server}");
    // The server's own count, read back through its descriptor.
    assert_eq!(server["transactions"], 2000, "{server}");
    assert_eq!(rep["derived"]["server_agreement"], "exact");
    // Nothing was left for the target in the artifact directory: only
    // the artifact's own files (the stacks, folded and pprof, among them).
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let own = [
        "run.json",
        "summary.txt",
        "report.html",
        "stacks.folded",
        "stacks.pb.gz",
    ];
    assert!(
        names.len() == own.len() && names.iter().all(|n| own.contains(&n.as_str())),
        "{names:?}"
    );
}
