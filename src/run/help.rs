//! `sockscope completions SHELL` and `sockscope manpage [--dir DIR]`:
//! generated from the command line's definition, which the binary hands
//! over (only `cli` and `main.rs` know it). Both are rendered whole to
//! memory first, so a closed or full stdout is an error with a message
//! (exit 1), never a panic halfway through.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Prints the completion script for `shell`.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> Result<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sockscope", &mut buf);
    print_all(&buf, "the completion script")
}

/// Prints sockscope(1) (roff); with `dir`, writes every page into it as
/// one set instead, so that each sockscope-COMMAND(1) the pages name exists.
pub fn manpage(cmd: clap::Command, dir: Option<&Path>) -> Result<u8> {
    let pages = pages(cmd)?;
    let Some(dir) = dir else {
        let (_, top) = pages.first().context("rendering the man page: no page")?;
        return print_all(top, "the man page");
    };
    let paths: Vec<PathBuf> = pages.iter().map(|(name, _)| dir.join(name)).collect();
    let files: Vec<(&Path, &[u8])> = paths
        .iter()
        .zip(&pages)
        .map(|(p, (_, bytes))| (p.as_path(), bytes.as_slice()))
        .collect();
    crate::output::write_set(&files)?;
    Ok(0)
}

/// Every visible command's page, sockscope(1) first, as (file name,
/// roff). Without a `help` subcommand: sockscope(1) would name a
/// sockscope-help(1) that clap_mangen does not render.
pub fn pages(cmd: clap::Command) -> Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    collect(cmd, &mut out)?;
    Ok(out)
}

fn collect(cmd: clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let man = clap_mangen::Man::new(cmd);
    let mut buf = Vec::new();
    man.render(&mut buf)
        .with_context(|| format!("rendering the man page {}", man.get_filename()))?;
    out.push((man.get_filename(), buf));
    for sub in subs {
        collect(sub, out)?;
    }
    Ok(())
}

fn print_all(bytes: &[u8], what: &str) -> Result<u8> {
    crate::output::print(bytes, what)?;
    Ok(0)
}
