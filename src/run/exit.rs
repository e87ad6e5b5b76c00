//! Exit statuses of profile, bench and demo: one per way a run can fail,
//! so a script can tell them apart (docs/profile.md lists them). 0 is
//! success, 1 any other failure, 2 a usage error, 128+N an interruption by
//! signal N (Ctrl-C: 130).

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
