//! The hidden subcommands sockscope runs as its own helper processes:
//! `__getppid-loop` (the timed loop of `bench overhead`) and `__idle` (an
//! idle process to trace) and `__watchdog` (the process that stops
//! whatever sockscope launched once sockscope is gone).

use std::time::Duration;

use anyhow::Result;

/// `__getppid-loop CALLS`: times the loop and prints
/// `ns_per_call=... calls=...` for the experiment to read.
pub fn getppid_loop(calls: u64) -> Result<u8> {
    let ns = super::bench::overhead::getppid_loop(calls);
    println!("ns_per_call={ns:.1} calls={calls}");
    Ok(0)
}

/// `__idle SECS`: sleeps, doing nothing else.
pub fn idle(secs: u64) -> Result<u8> {
    std::thread::sleep(Duration::from_secs(secs));
    Ok(0)
}

/// `__watchdog`: [`crate::process::watchdog::run`].
pub fn watchdog() -> Result<u8> {
    crate::process::watchdog::run()
}
