//! `sockscope top` in a real terminal: tmux runs it against `serve echo`
//! under an open-loop load of known rate; the screen, read with
//! `capture-pane`, has the port's row with the load's rate (within 10 %),
//! says so when the window is too small, keeps the last figures when the
//! target exits, and `q` quits leaving the terminal's main screen as it
//! was. `--once` prints the same row for
//! scripts, without a terminal; with `--stacks`, the function a target
//! burns its CPU in heads the hottest functions.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::server::Server;
use common::{read_json, require_bpf, require_program, run_bounded, scratch, sockscope};

/// A private tmux server (its own socket name), killed on drop.
struct Tmux(String);

impl Tmux {
    fn new() -> Self {
        Tmux(format!("sockscope-top-{}", std::process::id()))
    }

    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.0, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits (at most `limit`) for a screen `ok` accepts; returns it.
    fn until(&self, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + limit;
        loop {
            let s = self.screen();
            if ok(&s) || Instant::now() >= end {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

/// The requests/s on the row of `port`, if the screen has it.
fn rate_of(screen: &str, port: u16) -> Option<f64> {
    let row = format!("tcp:{port}");
    let line = screen.lines().find(|l| l.trim_start().starts_with(&row))?;
    let mut cols = line.split_whitespace();
    cols.next()?;
    cols.find_map(|c| c.parse::<f64>().ok())
}

struct Load(Child);

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn top_shows_the_ports_rate_resizes_and_quits_clean() {
    let name = "top_shows_the_ports_rate_resizes_and_quits_clean";
    if !require_bpf(name) || !require_program("tmux", name) {
        return;
    }
    let dir = scratch("top");
    let srv = Server::start(&[
        "serve",
        "echo",
        "--transport",
        "epoll",
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:0",
    ]);
    let port = srv.addr.port();
    let pid = srv.pid.to_string();
    let json = dir.join("l.json");
    let tmux = Tmux::new();
    // A shell waits for top and writes its exit status down: tmux 3.3a
    // sometimes leaves its pane's process an unreaped zombie (seen here 3
    // runs in 10, the pane dead and its status never filled in), so
    // `#{pane_dead_status}` cannot be relied on.
    let status = dir.join("status");
    let quote = |p: &str| format!("'{}'", p.replace('\'', "'\\''"));
    let top = format!(
        "{} top -p {pid} --duration 60; echo $? > {}",
        quote(sockscope()),
        quote(status.to_str().unwrap())
    );
    tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "120",
        "-y",
        "30",
        &top,
    ]);
    tmux.cmd(&["set-option", "-t", "t", "remain-on-exit", "on"]);
    // The row is there (at zero) once the programs are attached and the
    // first second is read.
    let s = tmux.until(Duration::from_secs(30), |s| rate_of(s, port).is_some());
    assert!(rate_of(&s, port).is_some(), "no row for port {port}:\n{s}");
    let load = Load(
        Command::new(sockscope())
            .args(["load", "tcp-rr", &srv.addr.to_string(), "-c", "4"])
            .args([
                "--rate",
                "1000",
                "-d",
                "10",
                "--json",
                json.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The readings of the load's steady seconds (its first and last are
    // partial). The load lasts 10 s so that `top --once` below, which
    // attaches and then reads a whole second, still falls inside it on a
    // busy machine (at 6 s it once read the second after the load).
    std::thread::sleep(Duration::from_millis(2_200));
    let mut rates = Vec::new();
    let mut last = String::new();
    for _ in 0..3 {
        let s = tmux.until(Duration::from_secs(3), |s| *s != last);
        if let Some(r) = rate_of(&s, port) {
            rates.push(r);
        }
        last = s;
    }
    // --once, meanwhile, without a terminal.
    let (st, once, err) = run_bounded(&["top", "--once", "-p", &pid], Duration::from_secs(60));
    assert!(st.success(), "top --once: {err}");
    let once_rate = rate_of(&once, port).unwrap_or_else(|| panic!("no row:\n{once}"));
    let mut load = load;
    assert!(load.0.wait().unwrap().success(), "the load failed");
    let achieved = read_json(&json)["rate_per_s"].as_f64().unwrap();
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    assert!(
        (median - achieved).abs() <= 0.1 * achieved,
        "top's {rates:?} req/s against the load's {achieved:.0}:\n{last}"
    );
    assert!(
        (once_rate - achieved).abs() <= 0.1 * achieved,
        "top --once's {once_rate} req/s against the load's {achieved:.0}:\n{once}"
    );
    assert!(!once.contains('\x1b'), "--once writes no escapes: {once:?}");

    // Too small, then back.
    tmux.cmd(&["resize-window", "-t", "t", "-x", "20", "-y", "5"]);
    let small = tmux.until(Duration::from_secs(5), |s| s.contains("too small"));
    assert!(small.contains("too small"), "{small}");
    tmux.cmd(&["resize-window", "-t", "t", "-x", "120", "-y", "30"]);
    let back = tmux.until(Duration::from_secs(5), |s| rate_of(s, port).is_some());
    assert!(rate_of(&back, port).is_some(), "{back}");

    // The target exiting keeps the last figures on screen, and says so.
    let mut srv = srv;
    srv.kill();
    let gone = tmux.until(Duration::from_secs(5), |s| s.contains("target exited"));
    assert!(
        gone.contains("target exited") && rate_of(&gone, port).is_some(),
        "{gone}"
    );

    // q quits: top ends with status 0 and the main screen is back (none
    // of top's table left on it).
    tmux.cmd(&["send-keys", "-t", "t", "q"]);
    let end = Instant::now() + Duration::from_secs(10);
    let code = loop {
        let code = std::fs::read_to_string(&status).unwrap_or_default();
        if code.ends_with('\n') || Instant::now() >= end {
            break code;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        code.trim(),
        "0",
        "top did not quit with q:\n{}",
        tmux.screen()
    );
    let after = tmux.screen();
    assert!(
        !after.contains("REQ/S"),
        "the alternate screen was left up:\n{after}"
    );
}

/// The share and name of the first function under the functions' title.
fn hottest(screen: &str) -> Option<(f64, String)> {
    let mut lines = screen
        .lines()
        .skip_while(|l| !l.starts_with("HOTTEST FUNCTIONS"));
    lines.next()?;
    let first = lines.next()?;
    let (share, rest) = first.trim_start().split_once('%')?;
    let name = rest.split_whitespace().next()?.to_string();
    Some((share.trim().parse().ok()?, name))
}

#[test]
fn top_stacks_lists_the_function_the_target_burns() {
    let name = "top_stacks_lists_the_function_the_target_burns";
    if !require_bpf(name) {
        return;
    }
    let _g = common::serial();
    // A server whose every request is slow_hash's 2 ms of CPU (-g: named
    // from its symbols), under one closed-loop connection.
    let bin = common::build_c(
        "slow_server.c",
        "slow_server",
        &["-O2", "-g", "-pthread", "-Wall"],
    );
    let (srv, load, port) = common::slow::cpu_under_load(&bin, 30, 8);
    let pid = srv.id().to_string();
    let (st, once, err) = run_bounded(
        &["top", "--once", "--stacks", "-p", &pid],
        Duration::from_secs(60),
    );
    drop(load);
    assert!(st.success(), "top --once --stacks: {err}\n{once}");
    let (share, function) = hottest(&once).unwrap_or_else(|| panic!("no functions:\n{once}"));
    assert_eq!(function, "slow_hash", "{once}");
    assert!(share >= 50.0, "{once}");
    assert!(rate_of(&once, port).is_some(), "{once}");
}

#[test]
fn top_refuses_what_it_cannot_do() {
    // No terminal and no --once; --once with --duration; a bad sort;
    // a rate without --stacks.
    for (args, code) in [
        (&["top", "-p", "1"][..], 2),
        (&["top", "--once", "--duration", "3", "-p", "1"], 2),
        (&["top", "--sort", "nope"], 2),
        (&["top", "--once", "--stack-hz", "49", "-p", "1"], 2),
    ] {
        let out = Command::new(sockscope())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}
