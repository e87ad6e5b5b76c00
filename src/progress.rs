//! The progress display on stderr that every long-running command shows
//! (trace while attached, load while it runs): one place that decides
//! whether to show one and how it looks, so the commands look alike.
//!
//! A display belongs on stderr only when stderr is a terminal (a pipe or a
//! file would collect escape sequences) and never with `--quiet`.

use std::io::IsTerminal;

/// `eprintln!` for what a command says on stderr while it runs (progress,
/// notes, warnings, errors): a stderr that fails (`2>/dev/full`, a pipe
/// whose reader left) loses the line instead of panicking (exit 101), and
/// the command's exit status stays its own. `eprintln!` is denied outside
/// tests (lib.rs) so that no new line panics.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

use indicatif::{ProgressBar, ProgressStyle};

/// True when a progress display should be shown: not `quiet`, and stderr
/// is a terminal.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// A bar of `len` steps (an open-ended one when `len` is None) drawn with
/// `template` (indicatif's syntax, e.g. `"load [{bar:30}] {msg}"`), filled
/// with `=`, its head `>`.
pub fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = len.map_or_else(ProgressBar::new_spinner, ProgressBar::new);
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// A spinner for work of unknown length, drawn with `template` (which
/// should contain `{spinner}`).
pub fn spinner(template: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar
}
