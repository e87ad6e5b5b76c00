//! Every exit status sockscope returns, in one table ([`STATUSES`]): the
//! source of the exit-status section of every command's `--help` (and so
//! of the man pages) and of docs/exit-codes.md, which tests/exit_codes.rs
//! checks against it. Here too: the statuses profile, bench and demo use
//! for their specific failures, so a script can tell them apart.

use crate::error;
use crate::report::load::LoadReport;

/// The target exited (or could not be started) before it owned a
/// listening socket.
pub const TARGET_EXITED_EARLY: u8 = 3;
/// The target exited, crashed or failed during the run or at its stop.
pub const TARGET_DIED: u8 = 4;
/// The port was taken: the target could not bind (address in use), or
/// the address given to the load is served by another process.
pub const PORT_TAKEN: u8 = 5;
/// BPF could not be loaded or attached: the tracer, or `bench relay`'s
/// sockmap (not root, no BTF, verifier...).
pub const TRACER_FAILED: u8 = 6;
/// The load failed: errors beyond --max-errors, no connection, stalled.
pub const LOAD_FAILED: u8 = 7;
/// A component did not finish in time: the target never became ready
/// within --ready-timeout, did not stop within its grace period, or the
/// tracer did not finish.
pub const TIMED_OUT: u8 = 8;
/// A run whose requests the request anatomy counts (`profile --load-cmd`,
/// `--duration`) saw none: there is nothing to put per request.
pub const NO_REQUESTS: u8 = 9;

/// An exit status, as the table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// This status exactly.
    Is(u8),
    /// 128 + N, N the number of the signal that interrupted the run.
    Signal,
    /// `trace -- CMD`: CMD's own status, whatever it is.
    Command,
}

impl Code {
    /// How help and docs write it: `3`, `128+N`, `CMD`.
    pub fn label(self) -> String {
        match self {
            Code::Is(n) => n.to_string(),
            Code::Signal => "128+N".into(),
            Code::Command => "CMD".into(),
        }
    }
}

/// One row of [`STATUSES`].
#[derive(Debug)]
pub struct Status {
    /// The status.
    pub code: Code,
    /// A short name for it (`load-failed`).
    pub name: &'static str,
    /// What it means, one sentence for a person.
    pub meaning: &'static str,
    /// The commands that can return it; empty: every command.
    pub commands: &'static [&'static str],
}

impl Status {
    /// Whether the top-level command `command` (`profile`) can return it.
    pub fn applies_to(&self, command: &str) -> bool {
        self.commands.is_empty() || self.commands.contains(&command)
    }
}

/// profile and the commands built on its measurement (bench's experiments
/// run through it, demo runs bench's).
const MEASURING: &[&str] = &["profile", "bench", "demo"];

/// Every status sockscope returns, in order: the one list help and docs
/// are generated from.
pub const STATUSES: &[Status] = &[
    Status {
        code: Code::Is(0),
        name: "success",
        meaning: "the command did what was asked (profile, bench, demo: the output directory \
                  holds the artifact and its report)",
        commands: &[],
    },
    Status {
        code: Code::Is(error::FAILURE),
        name: "failure",
        meaning: "any other failure; the message on stderr says what (load: no connection, \
                  errors over --max-errors, stalled, interrupted while running; trace: the \
                  tracer failed, or the attached process exited before --duration; a write \
                  that failed, a full disk)",
        commands: &[],
    },
    Status {
        code: Code::Is(error::USAGE),
        name: "usage",
        meaning: "usage error: a bad option, value or combination, an output path refused; \
                  nothing ran",
        commands: &[],
    },
    Status {
        code: Code::Is(TARGET_EXITED_EARLY),
        name: "target-exited-early",
        meaning: "the target exited (or could not be started) before it was ready",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(TARGET_DIED),
        name: "target-died",
        meaning: "the target died during the run, or did not stop cleanly",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(PORT_TAKEN),
        name: "port-taken",
        meaning: "port taken: the target could not bind, or another process owns the address \
                  the load was given",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(TRACER_FAILED),
        name: "tracer-failed",
        meaning: "BPF could not be loaded or attached (not root, no BTF, the verifier): the \
                  tracer, the request anatomy, or an experiment's sockmap",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(LOAD_FAILED),
        name: "load-failed",
        meaning: "the load failed: errors over --max-errors, no connection, stalled, a sweep \
                  that measured nothing; a --load-cmd command not found or exiting non-zero",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(TIMED_OUT),
        name: "timed-out",
        meaning: "a component timed out: not ready within --ready-timeout, no stop, the \
                  tracer, a --load-cmd command past --load-timeout",
        commands: MEASURING,
    },
    Status {
        code: Code::Is(NO_REQUESTS),
        name: "no-requests",
        meaning: "no requests: with --load-cmd or --duration, the target answered none in the \
                  window",
        commands: &["profile"],
    },
    Status {
        code: Code::Is(error::NOT_EXECUTABLE),
        name: "not-executable",
        meaning: "trace -- CMD: CMD was found but could not be executed",
        commands: &["trace"],
    },
    Status {
        code: Code::Is(error::NOT_FOUND),
        name: "not-found",
        meaning: "trace -- CMD: CMD was not found",
        commands: &["trace"],
    },
    Status {
        code: Code::Command,
        name: "command-status",
        meaning: "trace -- CMD: CMD ran, and sockscope exits with its status (128+N if signal \
                  N killed it)",
        commands: &["trace"],
    },
    Status {
        code: Code::Signal,
        name: "interrupted",
        meaning: "interrupted by signal N (Ctrl-C: 130), nothing written but a sweep's finished \
                  steps (load: only while waiting for --start-at)",
        commands: &["profile", "bench", "demo", "load"],
    },
];

/// The statuses the top-level command `command` can return.
pub fn statuses_of(command: &str) -> impl Iterator<Item = &'static Status> + '_ {
    STATUSES.iter().filter(move |s| s.applies_to(command))
}

/// Width of a help line: statuses' meanings wrap within it.
const HELP_WIDTH: usize = 100;

/// The exit-status section of `sockscope COMMAND --help`: the statuses
/// COMMAND can return, one per line, meanings wrapped to 100 columns.
pub fn help_for(command: &str) -> String {
    help_section(statuses_of(command).map(|s| (s, s.meaning.to_owned())))
}

/// The exit-status section of `sockscope --help`: every status, each
/// naming the commands that return it.
pub fn help_all() -> String {
    help_section(STATUSES.iter().map(|s| {
        let meaning = match s.commands {
            [] => s.meaning.to_owned(),
            cmds => format!("{} [{}]", s.meaning, cmds.join(", ")),
        };
        (s, meaning)
    }))
}

fn help_section<'a>(rows: impl Iterator<Item = (&'a Status, String)>) -> String {
    const INDENT: usize = 9;
    let mut out = String::from("Exit status (all of them: docs/exit-codes.md):");
    for (s, meaning) in rows {
        let mut line = format!("\n  {:<w$}", s.code.label(), w = INDENT - 2);
        let mut width = INDENT;
        for word in meaning.split_whitespace() {
            if width > INDENT && width + 1 + word.len() > HELP_WIDTH {
                line.push_str(&format!("\n{:INDENT$}", ""));
                width = INDENT;
            } else if width > INDENT {
                line.push(' ');
                width += 1;
            }
            line.push_str(word);
            width += word.len();
        }
        out.push_str(&line);
    }
    out
}

/// Every status in one line, as README.md lists them: `0 success, 1
/// failure, ..., 128+N interrupted`.
pub fn brief() -> String {
    let all: Vec<String> = STATUSES
        .iter()
        .map(|s| format!("{} {}", s.code.label(), s.name))
        .collect();
    all.join(", ")
}

/// The table of docs/exit-codes.md: every status, its name, meaning and
/// commands.
pub fn markdown() -> String {
    let mut out = String::from("| status | name | meaning | commands |\n|---|---|---|---|\n");
    for s in STATUSES {
        let commands = match s.commands {
            [] => "all".to_owned(),
            cmds => cmds.join(", "),
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            s.code.label(),
            s.name,
            s.meaning,
            commands
        ));
    }
    out
}

/// An error with one of the statuses above.
pub fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    error::with_code(code, message)
}

/// 128 + the signal number: the conventional status of an interrupted run.
pub fn interrupted(signo: u32, what: &str) -> anyhow::Error {
    error::with_code(
        (128 + signo.min(127)) as u8,
        format!(
            "interrupted by {} {what}; nothing was written",
            crate::signals::signal_name(signo)
        ),
    )
}

/// Fails with the interruption status when an embedded load ended on a
/// signal; `what` says when (`during the load`).
///
/// A load run inside profile or an experiment reads SIGINT, SIGTERM and
/// SIGHUP from its own signalfd while it runs, so the caller's own check
/// finds nothing pending afterwards: the signal survives only in the
/// load's report. Called before the load's failure is looked at, it makes
/// an interrupted run exit 128+N (Ctrl-C: 130) rather than as a failed
/// load (7), and before the processes are checked, since a terminal's
/// Ctrl-C may have reached them too.
pub fn load_interrupted(rep: &LoadReport, what: &str) -> anyhow::Result<()> {
    match ended_by_signal(&rep.end_reason) {
        Some(signo) => Err(interrupted(signo, what)),
        None => Ok(()),
    }
}

/// The signal number in a load's `end_reason` (`signal:SIGTERM` -> 15).
pub fn ended_by_signal(end_reason: &str) -> Option<u32> {
    let name = end_reason.strip_prefix("signal:")?;
    // The load names only signals it watches; an unknown name still means
    // an interruption.
    Some(crate::signals::signal_number(name).unwrap_or(libc::SIGINT as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(reason: &str) -> LoadReport {
        LoadReport {
            header: crate::report::header::ArtifactHeader::new(
                crate::report::load::SCHEMA,
                crate::report::load::SCHEMA_VERSION,
            ),
            workload: "udp".into(),
            target: "127.0.0.1:9".into(),
            config: Default::default(),
            started_at: String::new(),
            started_at_unix_ns: None,
            start_at: None,
            host: None,
            full_log: None,
            merged: None,
            duration_s: 0.0,
            complete: false,
            end_reason: reason.into(),
            connections: Default::default(),
            transactions: 0,
            rate_per_s: 0.0,
            warmup_transactions: 0,
            latency: None,
            latency_uncorrected: None,
            send_lag: None,
            release_lag: None,
            conn_wait: None,
            connect_latency: None,
            tls_handshake_latency: None,
            errors: Default::default(),
            intervals: Vec::new(),
            steps: None,
            bytes: Default::default(),
            generator: Default::default(),
            responses: None,
            udp: None,
            udp_rr: None,
            notes: Vec::new(),
            path: None,
        }
    }

    fn code(e: &anyhow::Error) -> u8 {
        e.downcast_ref::<error::Exit>()
            .expect("an exit status")
            .code
    }

    #[test]
    fn a_load_ended_by_a_signal_is_an_interruption() {
        let e = load_interrupted(&ended("signal:SIGINT"), "during the load").unwrap_err();
        assert_eq!(code(&e), 130);
        assert!(
            e.to_string()
                .contains("interrupted by SIGINT during the load"),
            "{e}"
        );
        let e = load_interrupted(&ended("signal:SIGTERM"), "x").unwrap_err();
        assert_eq!(code(&e), 143);
        assert_eq!(
            code(&load_interrupted(&ended("signal:SIGHUP"), "x").unwrap_err()),
            129
        );
    }

    #[test]
    fn a_load_that_ended_otherwise_is_not() {
        for reason in ["duration", "count", "burst_sent", "aborted", "stalled"] {
            assert!(load_interrupted(&ended(reason), "x").is_ok(), "{reason}");
        }
    }
}
