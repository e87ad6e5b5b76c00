//! `sockscope serve`: runs one of the reference targets of
//! [`crate::serve`] until it is stopped; each server prints its ready line,
//! its summary and `--json` itself (`serve::finish`).

use anyhow::Result;

use crate::serve::{ServeSpec, echo, relay, udp_sink};

/// Runs a serve command; returns the exit status.
pub fn run(spec: ServeSpec, quiet: bool) -> Result<u8> {
    // A peer that vanishes must cost one connection, not the process; sends
    // also pass MSG_NOSIGNAL, this covers any write that does not.
    // SAFETY: installing SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    match spec {
        ServeSpec::Echo(s) => echo::run(&s, quiet),
        ServeSpec::Relay(s) => relay::run(&s, quiet),
        ServeSpec::UdpSink(s) => udp_sink::run(&s, quiet),
    }
}
