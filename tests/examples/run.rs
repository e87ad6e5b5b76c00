//! Running a block: each example by bash in the block's directory, servers
//! until they say they listen, background commands until the block ends,
//! every one within its limit.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common;

use super::vocabulary::{Vocabulary, served, shown_listen, unprovided};
use super::*;

/// Runs one block; Err says which example failed and why.
pub(super) fn run_block(block: &Block, index: usize) -> Result<usize, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("examples")
        .join(format!("{index}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let vocab = Vocabulary::for_block(block, &dir, &format!("examples-{index}"));
    let mut local: Vec<(String, String)> = Vec::new();
    let mut background: Vec<(String, Child)> = Vec::new();
    let mut last_pid: Option<u32> = None;
    let mut ran = 0;
    // `$T`: a start time 5 s from the block's start, once its servers are up.
    let start_at = utc_in(5);
    let bin_dir = Path::new(common::sockscope())
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", path.as_str()), ("T", start_at.as_str())];
    let result = (|| {
        for ex in &block.examples {
            let mut text = vocab.apply(&ex.text);
            for (from, to) in &local {
                text = text.replace(from, to);
            }
            if let Some(pid) = last_pid {
                text = text.replace("$!", &pid.to_string());
            }
            let what = format!("{} `{}`", ex.source, ex.text);
            if let Some(why) = unprovided(&ex.text, &served(block)) {
                return Err(format!("{what}: {why}"));
            }
            let serve = text.starts_with("sockscope serve ");
            let bg = text.ends_with('&') || serve;
            let mut run = text.trim_end_matches('&').trim().to_string();
            if serve {
                // A fixed port of the document becomes a free one; the
                // address printed replaces the shown one in later lines.
                let shown = shown_listen(ex);
                if let Some(shown) = shown.as_deref()
                    && let Some((host, _)) = shown.rsplit_once(':')
                    && !shown.starts_with("unix:")
                {
                    run = run.replace(&format!("--listen {shown}"), &format!("--listen {host}:0"));
                }
                let (child, addr) =
                    start_background(&run, &dir, &env, true).map_err(|e| format!("{what}: {e}"))?;
                last_pid = Some(child.id());
                if let Some(shown) = shown {
                    local.push((shown, addr));
                }
                background.push((String::new(), child));
            } else if bg {
                let (child, _) =
                    start_background(&run, &dir, &env, run.contains("sockscope trace"))
                        .map_err(|e| format!("{what}: {e}"))?;
                last_pid = Some(child.id());
                background.push((what.clone(), child));
            } else {
                run_one(&run, &dir, &env).map_err(|e| format!("{what}\n  ran: {run}\n  {e}"))?;
                // `...; wait`: the backgrounded commands before it end first.
                if run.ends_with("; wait") {
                    finish_background(&mut background)?;
                }
            }
            ran += 1;
        }
        finish_background(&mut background)?;
        Ok(ran)
    })();
    for (_, mut child) in background {
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        if wait_limit(&mut child, Duration::from_secs(5)).is_none() {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
    }
    drop(vocab);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

pub(super) fn bash(run: &str, dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", run])
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// The UTC time `secs` from now as `date -u +%Y-%m-%dT%H:%M:%SZ` writes it.
pub(super) fn utc_in(secs: u64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("+{secs} sec"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("running date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits for the backgrounded commands that are not servers (those have
/// an empty label): each must exit 0 within the example limit.
pub(super) fn finish_background(background: &mut [(String, Child)]) -> Result<(), String> {
    for (what, child) in background.iter_mut() {
        if what.is_empty() {
            continue;
        }
        let st = wait_limit(child, LIMIT);
        if !st.is_some_and(|s| s.success()) {
            return Err(format!("{what}: the background command ended with {st:?}"));
        }
        // Waited once: a server now, as far as the block's end goes.
        what.clear();
    }
    Ok(())
}

/// Waits up to `limit`; None when still running.
pub(super) fn wait_limit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() > end {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs one foreground example to its end: exit status 0 within
/// [`LIMIT`], or an error with the tail of its output.
pub(super) fn run_one(run: &str, dir: &Path, env: &[(&str, &str)]) -> Result<(), String> {
    let out_path = dir.join(".example-output");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = bash(run, dir, env)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .map_err(|e| format!("bash: {e}"))?;
    let started = Instant::now();
    let st = wait_limit(&mut child, LIMIT);
    let tail = || {
        let s = std::fs::read_to_string(&out_path).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n    ")
    };
    match st {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!(
            "exited with {s} after {:.1} s; output ends:\n    {}",
            started.elapsed().as_secs_f64(),
            tail()
        )),
        None => {
            // SAFETY: signalling the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            Err(format!(
                "still running after the example limit of {} s (examples must be bounded: -n, -d, \
                 --duration); output ends:\n    {}",
                LIMIT.as_secs(),
                tail()
            ))
        }
    }
}

/// Starts a background example; for a server, waits for its `listening
/// on ADDR` line and returns ADDR; for another command, for sockscope's
/// "attached" line on stderr.
pub(super) fn start_background(
    run: &str,
    dir: &Path,
    env: &[(&str, &str)],
    ready: bool,
) -> Result<(Child, String), String> {
    let server = run.starts_with("sockscope serve ");
    let mut child = bash(run, dir, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("bash: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let seen = Arc::new(Mutex::new(String::new()));
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        let seen = Arc::clone(&seen);
        thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                seen.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    if !ready {
        return Ok((child, String::new()));
    }
    let end = Instant::now() + Duration::from_secs(20);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                if server && let Some(a) = line.strip_prefix("listening on ") {
                    return Ok((child, a.trim().to_string()));
                }
                if !server && line.contains("attached") {
                    return Ok((child, String::new()));
                }
            }
            Err(_) => break,
        }
    }
    // SAFETY: signalling the process group this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let st = child.wait();
    Err(format!(
        "never became ready ({st:?}); output: {}",
        seen.lock().unwrap()
    ))
}
