//! Exit statuses of profile, bench and demo: one per way a run can fail,
//! so a script can tell them apart (docs/profile.md lists them). 0 is
//! success, 1 any other failure, 2 a usage error, 128+N an interruption by
//! signal N (Ctrl-C: 130).

use crate::error;

/// The target exited (or could not be started) before it owned a
/// listening socket.
pub const TARGET_EXITED_EARLY: u8 = 3;
/// The target exited, crashed or failed during the run or at its stop.
pub const TARGET_DIED: u8 = 4;
/// The port was taken: the target could not bind (address in use), or
/// the address given to the load is served by another process.
pub const PORT_TAKEN: u8 = 5;
/// The tracer could not attach (not root, no BTF, verifier...).
pub const TRACER_FAILED: u8 = 6;
/// The load failed: errors beyond --max-errors, no connection, stalled.
pub const LOAD_FAILED: u8 = 7;
/// A component did not finish in time: the target never became ready
/// within --ready-timeout, did not stop within its grace period, or the
/// tracer did not finish.
pub const TIMED_OUT: u8 = 8;

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
