//! Errors that decide sockscope's exit status.

use std::fmt;

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
        code: 2,
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
