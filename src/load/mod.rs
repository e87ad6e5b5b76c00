//! `sockscope load`: a load generator that is never the bottleneck.
//! (Being built; see issue 3.)

use anyhow::Result;
use clap::Subcommand;

/// `sockscope load` subcommands.
#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// TCP request/response over persistent connections.
    TcpRr,
    /// TCP connect, request, response, close.
    TcpCrr,
    /// Sequenced UDP datagrams with exact loss accounting.
    Udp,
}

/// Runs a load subcommand; returns the exit status.
pub fn run(cmd: LoadCommand, _quiet: bool) -> Result<u8> {
    Err(crate::error::usage(format!("load {cmd:?} is not built yet")))
}
