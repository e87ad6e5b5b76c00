//! `sockscope serve`: reference targets to compare kernel paths.
//! (Being built; see issue 3.)

use anyhow::Result;
use clap::Subcommand;

/// `sockscope serve` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// TCP echo / request-response server (threaded, epoll or io_uring).
    Echo,
    /// UDP sink that accounts sequenced datagrams and their loss.
    UdpSink,
}

/// Runs a serve subcommand; returns the exit status.
pub fn run(cmd: ServeCommand, _quiet: bool) -> Result<u8> {
    Err(crate::error::usage(format!(
        "serve {cmd:?} is not built yet"
    )))
}
