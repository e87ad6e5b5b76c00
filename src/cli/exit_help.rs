//! The exit-status section of every command's `--help`, generated from
//! `run::exit::STATUSES` and appended to whatever the command's own
//! after-help says: `sockscope --help` lists every status with the
//! commands that return it, `sockscope COMMAND [SUB] --help` those COMMAND
//! can return. The man pages are rendered from the same command, so they
//! carry it too.

use clap::Command;

use crate::run::exit;

/// `cmd` (sockscope's whole command line) with the exit-status sections
/// added to it and to each visible subcommand, at every depth.
pub fn add(cmd: Command) -> Command {
    append(cmd, &exit::help_all()).mut_subcommands(|sub| {
        if sub.is_hide_set() {
            return sub;
        }
        let section = exit::help_for(sub.get_name());
        all_depths(sub, &section)
    })
}

fn all_depths(cmd: Command, section: &str) -> Command {
    append(cmd, section).mut_subcommands(|sub| all_depths(sub, section))
}

fn append(cmd: Command, section: &str) -> Command {
    let text = match cmd.get_after_help() {
        Some(own) => format!("{own}\n\n{section}"),
        None => section.to_owned(),
    };
    cmd.after_help(text)
}
