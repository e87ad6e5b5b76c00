//! `sockscope completions SHELL` and `sockscope manpage`: generated from
//! the command line's definition, which the binary hands over (only
//! `cli` and `main.rs` know it). Both are written whole to a buffer
//! first, so a closed or full stdout is an error with a message (exit 1),
//! never a panic halfway through.

use anyhow::{Context, Result};

/// Prints the completion script for `shell`.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> Result<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sockscope", &mut buf);
    print_all(&buf, "the completion script")
}

/// Prints the man page (roff).
pub fn manpage(cmd: clap::Command) -> Result<u8> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut buf)
        .context("rendering the man page")?;
    print_all(&buf, "the man page")
}

fn print_all(bytes: &[u8], what: &str) -> Result<u8> {
    crate::output::print(bytes, what)?;
    Ok(0)
}
