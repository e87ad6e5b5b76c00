//! Errors that decide sockscope's exit status. The statuses every layer
//! may return are here; `run::exit` holds the table of them all.

use std::fmt;

/// Any failure without a status of its own.
pub const FAILURE: u8 = 1;
/// A usage error: a bad option, value or combination; nothing ran.
pub const USAGE: u8 = 2;
/// A command to launch exists but could not be executed (as a shell says).
pub const NOT_EXECUTABLE: u8 = 126;
/// A command to launch was not found (as a shell says).
pub const NOT_FOUND: u8 = 127;

/// An error that ends sockscope with a specific exit status (usage errors
/// exit 2, a command that cannot be run exits 126/127 like a shell would).
/// Any other error exits 1.
#[derive(Debug)]
pub struct Exit {
    /// Process exit status.
    pub code: u8,
    /// What to print after `sockscope: `.
    pub message: String,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// A usage error (bad flag combination, malformed value): exit status 2.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Exit {
        code: USAGE,
        message: message.into(),
    }
    .into()
}

/// An error with an explicit exit status.
pub fn with_code(code: u8, message: impl Into<String>) -> anyhow::Error {
    Exit {
        code,
        message: message.into(),
    }
    .into()
}
