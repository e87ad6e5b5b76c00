//! The progress display on stderr that every long-running command shows
//! (trace while attached, load while it runs): one place that decides
//! whether to show one and how it looks, so the commands look alike.
//!
//! A display belongs on stderr only when stderr is a terminal (a pipe or a
//! file would collect escape sequences) and never with `--quiet`.

use std::io::IsTerminal;

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
