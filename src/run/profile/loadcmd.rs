//! `profile --load-cmd 'COMMAND'`: any program as the load (wrk,
//! redis-benchmark, h2load, pgbench, a script). The words `ADDR`, `HOST`
//! and `PORT` are filled with the address the target listens on once it
//! is learned (on a Unix socket: `ADDR` its name, `HOST` its directory, as
//! `pgbench -h` and `psql -h` take it; no `PORT`); the command runs (without a shell: `sh -c '...'` gives one)
//! in its own process group, its output kept (bounded), and the window is
//! its run. It is stopped, with everything it started, when the target
//! dies, on a stop signal, after `--load-timeout`, and if sockscope dies
//! (the launched-process watchdog).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::endpoint::UnixName;
use crate::error;
use crate::process::run_as::RunAs;
use crate::process::target::{self, Launched};
use crate::report::workload::CommandOutput;
use crate::run::exit::{self, fail};
use crate::signals::Signals;

/// The placeholders a command may hold, with what fills them.
pub const PLACEHOLDERS: [&str; 3] = ["ADDR", "HOST", "PORT"];

/// Grace between SIGTERM and SIGKILL for a command stopped early.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A `--load-cmd` command, split, its placeholders still words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadCommand {
    words: Vec<String>,
    /// The longest it may run.
    pub timeout: Duration,
}

impl LoadCommand {
    /// Splits `line` like a shell would (quotes, backslashes); an empty
    /// command is a usage error.
    pub fn parse(line: &str, timeout: Duration) -> Result<Self> {
        let words = shell_words::split(line)
            .map_err(|e| error::usage(format!("--load-cmd {line:?}: {e}")))?;
        if words.is_empty() {
            return Err(error::usage(
                "--load-cmd is empty: give a command, e.g. 'wrk -c 16 -d 10 http://ADDR/'",
            ));
        }
        Ok(LoadCommand { words, timeout })
    }

    /// True when the command names the target's address through a
    /// placeholder (rather than spelling it out).
    pub fn has_placeholders(&self) -> bool {
        self.words
            .iter()
            .any(|w| PLACEHOLDERS.iter().any(|p| find_word(w, p).is_some()))
    }

    /// The command with `ADDR` (HOST:PORT, `[v6]:PORT`), `HOST` (the IP)
    /// and `PORT` filled in wherever they stand as words of their own
    /// within an argument (`http://ADDR/x`; `-hHOST`, `$HOST` and
    /// `${HOST}` are left alone).
    pub fn fill(&self, addr: SocketAddr) -> Vec<String> {
        self.fill_with([
            Some(addr.to_string()),
            Some(addr.ip().to_string()),
            Some(addr.port().to_string()),
        ])
        .expect("every placeholder has a value")
    }

    /// The command for a target on a Unix socket: `ADDR` is its name
    /// (`/path` or `@name`), `HOST` the directory of a socket file
    /// (`pgbench -h HOST`); `PORT` has no value there, nor `HOST` for an
    /// abstract name: a usage error saying so.
    pub fn fill_unix(&self, name: &UnixName) -> Result<Vec<String>> {
        let dir = name
            .path()
            .and_then(Path::parent)
            .map(|d| d.to_string_lossy().into_owned());
        self.fill_with([Some(name.to_string()), dir, None])
            .map_err(|missing| {
                error::usage(format!(
                    "--load-cmd: the target serves unix:{}, which has no {}; write what the \
                     command needs into --load-cmd instead of {missing}",
                    crate::text::escape(&name.to_string()),
                    if missing == "PORT" {
                        "port"
                    } else {
                        "directory (an abstract name)"
                    }
                ))
            })
    }

    /// The words with each placeholder that stands alone replaced by its
    /// value; Err(the placeholder) when one that stands has none.
    fn fill_with(
        &self,
        values: [Option<String>; 3],
    ) -> std::result::Result<Vec<String>, &'static str> {
        self.words
            .iter()
            .map(|w| {
                let mut w = w.clone();
                for (p, v) in PLACEHOLDERS.iter().zip(&values) {
                    while let Some(i) = find_word(&w, p) {
                        let v = v.as_deref().ok_or(*p)?;
                        w.replace_range(i..i + p.len(), v);
                    }
                }
                Ok(w)
            })
            .collect()
    }

    /// Fails (the load's status) when the program cannot be found or run,
    /// before anything is started.
    pub fn check_program(&self) -> Result<()> {
        let prog = &self.words[0];
        let found = if prog.contains('/') {
            executable(Path::new(prog))
        } else {
            std::env::var_os("PATH")
                .unwrap_or_default()
                .to_string_lossy()
                .split(':')
                .filter(|d| !d.is_empty())
                .any(|d| executable(&Path::new(d).join(prog)))
        };
        if found {
            Ok(())
        } else {
            Err(fail(
                exit::LOAD_FAILED,
                format!(
                    "the load command's program {prog:?} was not found{} (--load-cmd runs \
                     it without a shell)",
                    if prog.contains('/') {
                        " or is not executable"
                    } else {
                        " in PATH"
                    }
                ),
            ))
        }
    }
}

/// The byte index of `word` in `s` where it stands alone: not inside a
/// longer run of letters, digits or underscores, and not a shell
/// variable (`$HOST`, `${HOST}`: in `sh -c '...'` those are the shell's,
/// and filling them gave `$127.0.0.1`, which the shell reads as `$1`).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_';
    s.match_indices(word).map(|(i, _)| i).find(|&i| {
        let head = &s[..i];
        let before = head.chars().next_back();
        let after = s[i + word.len()..].chars().next();
        let variable = head.ends_with('$') || head.ends_with("${");
        !variable && !before.is_some_and(is_id) && !after.is_some_and(is_id)
    })
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a command run ended, and what it wrote.
#[derive(Debug)]
pub struct CommandRun {
    /// The command as run.
    pub argv: Vec<String>,
    /// `exit status N` or `killed by SIGX`.
    pub exit: String,
    /// True for exit status 0.
    pub success: bool,
    /// Its output, bounded.
    pub output: CommandOutput,
    /// From its start to its exit.
    pub wall: Duration,
}

/// Why a command's run ended before the command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The target exited (the run then fails as the target's death).
    TargetDied,
    /// A stop signal arrived (its number).
    Signal(u32),
    /// It outran `--load-timeout`.
    Timeout,
}

/// Runs `argv` as `run_as` until it exits, or until `stop` (polled with
/// the target's exit descriptor and the signal descriptor) says the run is
/// over; the command is then stopped with its whole process group.
pub fn run(
    argv: &[String],
    run_as: Option<&RunAs>,
    timeout: Duration,
    target_exit: BorrowedFd<'_>,
    signals: &mut Signals,
) -> Result<(CommandRun, Option<Cut>)> {
    let os: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let t0 = Instant::now();
    let mut child = Launched::spawn(&os, run_as).map_err(|e| {
        fail(
            exit::LOAD_FAILED,
            format!("the load command could not start: {e:#}"),
        )
    })?;
    let deadline = t0 + timeout;
    let cut = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Some(Cut::Timeout);
        }
        let mut pfds = [
            PollFd::new(child.exit_fd(), PollFlags::POLLIN),
            PollFd::new(target_exit, PollFlags::POLLIN),
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
        ];
        let ms = u16::try_from(left.as_millis().min(1000)).unwrap_or(1000);
        let _ = poll(&mut pfds, PollTimeout::from(ms));
        let ready = |i: usize| pfds[i].revents().is_some_and(|r| !r.is_empty());
        if ready(0) {
            break None;
        }
        if ready(1) {
            break Some(Cut::TargetDied);
        }
        if ready(2)
            && let Some(signo) = stop_signal(signals)
        {
            break Some(Cut::Signal(signo));
        }
    };
    let stop = child.stop(STOP_GRACE);
    let wall = t0.elapsed();
    let (tail, bytes, cut_output) = child.output();
    let exit = match (stop.exit_code, &stop.killed_by) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by {s}"),
        (None, None) => "status unknown".into(),
    };
    Ok((
        CommandRun {
            argv: argv.to_vec(),
            success: cut.is_none() && stop.exit_code == Some(0),
            exit,
            output: CommandOutput {
                tail,
                bytes,
                cut: cut_output,
            },
            wall,
        },
        cut,
    ))
}

/// The first stop signal pending (SIGCHLD, which the command's own exit
/// raises, is read and passed over).
pub fn stop_signal(signals: &mut Signals) -> Option<u32> {
    while let Some(si) = signals.pending() {
        if si.ssi_signo != nix::sys::signal::Signal::SIGCHLD as u32 {
            return Some(si.ssi_signo);
        }
    }
    None
}

/// The error of a command that did not succeed: its status and the end
/// of its output.
pub fn failed(run: &CommandRun) -> anyhow::Error {
    let lines: Vec<&str> = run.output.tail.lines().collect();
    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
    fail(
        exit::LOAD_FAILED,
        format!(
            "the load command failed ({}): {}; its output:\n{}",
            run.exit,
            shell_words::join(&run.argv),
            target::quote_block(&tail)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> LoadCommand {
        LoadCommand::parse(line, Duration::from_secs(60)).unwrap()
    }

    #[test]
    fn placeholders_are_filled_where_they_stand_alone() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:6379".parse().unwrap();
        assert_eq!(
            cmd("wrk -c 16 -d 2 http://ADDR/index.html").fill(v4),
            [
                "wrk",
                "-c",
                "16",
                "-d",
                "2",
                "http://127.0.0.1:8080/index.html"
            ]
        );
        assert_eq!(
            cmd("redis-benchmark -h HOST -p PORT -n 100").fill(v6),
            ["redis-benchmark", "-h", "::1", "-p", "6379", "-n", "100"]
        );
        assert_eq!(cmd("curl http://ADDR/").fill(v6)[1], "http://[::1]:6379/");
        // Inside a longer word they are left alone; quoted words stay one.
        assert_eq!(
            cmd("x --ADDRESS=1 -H 'X-Port: PORT' ADDR_1 HOSTS").fill(v4),
            ["x", "--ADDRESS=1", "-H", "X-Port: 8080", "ADDR_1", "HOSTS"]
        );
        assert!(cmd("wrk http://ADDR/").has_placeholders());
        assert!(!cmd("wrk http://127.0.0.1:80/ --ADDRESS").has_placeholders());
    }

    #[test]
    fn on_a_unix_socket_addr_is_its_name_and_host_its_directory() {
        let file = UnixName::Path("/run/pg/.s.PGSQL.5432".into());
        assert_eq!(
            cmd("pgbench -h HOST -f x.sql").fill_unix(&file).unwrap(),
            ["pgbench", "-h", "/run/pg", "-f", "x.sql"]
        );
        assert_eq!(
            cmd("redis-benchmark -s ADDR").fill_unix(&file).unwrap()[2],
            "/run/pg/.s.PGSQL.5432"
        );
        let e = cmd("pgbench -h HOST -p PORT").fill_unix(&file).unwrap_err();
        assert!(format!("{e:#}").contains("no port"), "{e:#}");
        let abs = UnixName::Abstract(b"app".to_vec());
        assert_eq!(cmd("x ADDR").fill_unix(&abs).unwrap()[1], "@app");
        let e = cmd("x HOST").fill_unix(&abs).unwrap_err();
        assert!(format!("{e:#}").contains("abstract"), "{e:#}");
        assert_eq!(cmd("x y").fill_unix(&abs).unwrap(), ["x", "y"]);
    }

    #[test]
    fn shell_variables_named_like_placeholders_are_the_shells() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let filled = cmd(r#"sh -c 'curl "http://$HOST:${PORT}/" -H "X: $ADDR" ADDR'"#).fill(v4);
        assert_eq!(
            filled[2],
            r#"curl "http://$HOST:${PORT}/" -H "X: $ADDR" 127.0.0.1:8080"#
        );
        // A placeholder after a variable in the same word is still filled;
        // `$` and `${` alone mark a variable, not `$(` nor `{`.
        assert_eq!(
            cmd("x $HOST:PORT {HOST} $(PORT) $$HOST").fill(v4),
            ["x", "$HOST:8080", "{127.0.0.1}", "$(8080)", "$$HOST"]
        );
        assert!(!cmd("sh -c 'echo $HOST ${PORT}'").has_placeholders());
    }

    #[test]
    fn an_empty_or_unsplittable_command_is_a_usage_error() {
        for line in ["", "   ", "wrk 'unclosed"] {
            let e = LoadCommand::parse(line, Duration::from_secs(1)).unwrap_err();
            let x = e.downcast_ref::<crate::error::Exit>().expect("usage");
            assert_eq!(x.code, 2, "{line:?}: {}", x.message);
        }
    }

    #[test]
    fn a_program_that_is_not_there_fails_as_the_load_before_anything_runs() {
        let e = cmd("sockscope-no-such-program-xyz -c 1")
            .check_program()
            .unwrap_err();
        let x = e.downcast_ref::<crate::error::Exit>().unwrap();
        assert_eq!(x.code, exit::LOAD_FAILED);
        assert!(x.message.contains("not found in PATH"), "{}", x.message);
        assert!(cmd("sh -c true").check_program().is_ok());
        let e = cmd("/nonexistent/wrk").check_program().unwrap_err();
        assert!(format!("{e:#}").contains("or is not executable"));
    }
}
