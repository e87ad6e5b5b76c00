//! What drove a profile's window, as it ended: sockscope's own load, a
//! `--load-cmd` command, or an observation.

use std::time::Duration;

use super::loadcmd::CommandRun;
use crate::load::LoadOutcome;

/// What drove the window, as it ended (without a failure: see
/// `verdict::judge`).
pub enum Driven {
    /// sockscope's own load: its arguments after `sockscope load`, its
    /// outcome and its wall time.
    Own {
        argv: Vec<String>,
        outcome: Box<LoadOutcome>,
        wall: Duration,
    },
    /// A `--load-cmd` command that exited with status 0.
    Command(CommandRun),
    /// Observe only, for this long.
    Observed(Duration),
}
