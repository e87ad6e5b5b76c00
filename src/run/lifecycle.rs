//! What the binary does around every command: the watchdog that makes
//! whatever sockscope launches die with it, and an error's exit status and
//! message. `main.rs` calls these and one `run::` function per command.

use crate::error;

/// Before the command: whatever this run launches dies with it, SIGKILL
/// included. The watchdog starts with the first launch; /proc/self/exe
/// still names this binary if the file is replaced meanwhile.
pub fn begin() {
    crate::process::watchdog::enable("/proc/self/exe".into());
}

/// After the command, whatever its outcome.
pub fn end() {
    crate::process::watchdog::shutdown();
}

/// A failed command's exit status and its message, escaped: errors quote
/// targets' output, peers' bytes and artifacts' strings.
pub fn failure(e: &anyhow::Error) -> (u8, String) {
    let code = e.downcast_ref::<error::Exit>().map_or(1, |x| x.code);
    let message = format!("{e:#}");
    (code, crate::text::escape_block(&message).into_owned())
}
