//! One list of exit statuses (`sockscope::run::exit::STATUSES`) and
//! everything generated from it or written after it: each command's
//! `--help` lists exactly the statuses it can return, docs/exit-codes.md
//! holds the table as generated, README.md and docs/profile.md list the
//! same statuses, the source returns no status the table lacks, and
//! `sockscope manpage` names only pages `manpage --dir` writes.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use sockscope::run::exit::{self, Code, STATUSES};

const HEADING: &str = "Exit status (all of them: docs/exit-codes.md):";

fn repo_file(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn labels<'a>(statuses: impl Iterator<Item = &'a exit::Status>) -> Vec<String> {
    statuses.map(|s| s.code.label()).collect()
}

/// Every visible command as the words that name it (`["load", "tcp-rr"]`),
/// the top level (`[]`) first.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(at.clone());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut next = at.clone();
            next.push(sub.get_name().to_owned());
            walk(sub, next, out);
        }
    }
    let mut cmd = sockscope::cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, Vec::new(), &mut out);
    out
}

/// The exit-status section of a help text: from its heading to the end,
/// and the statuses it lists (a line `  LABEL  meaning`).
fn exit_section(help: &str) -> (String, Vec<String>) {
    let at = help
        .find(HEADING)
        .unwrap_or_else(|| panic!("no {HEADING:?} in:\n{help}"));
    let section = help[at..].trim_end().to_owned();
    let listed = section
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    (section, listed)
}

#[test]
fn every_help_lists_the_exit_statuses_of_its_command() {
    let paths = command_paths();
    assert!(paths.len() > 20, "{paths:?}");
    for path in paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = run(&args);
        let help = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(
            help.matches("Exit status").count(),
            1,
            "{args:?}: one exit-status list, the generated one:\n{help}"
        );
        let (section, listed) = exit_section(&help);
        let (want, want_text) = match path.first() {
            None => (labels(STATUSES.iter()), exit::help_all()),
            Some(top) => (labels(exit::statuses_of(top)), exit::help_for(top)),
        };
        assert_eq!(listed, want, "{args:?}:\n{section}");
        assert_eq!(section, want_text, "{args:?}");
        for line in section.lines() {
            assert!(
                line.len() <= 100,
                "{args:?}: a line over 100 columns: {line}"
            );
        }
    }
}

#[test]
fn the_table_has_each_status_once_and_every_named_one() {
    let all = labels(STATUSES.iter());
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "{all:?}");
    let named = [
        exit::TARGET_EXITED_EARLY,
        exit::TARGET_DIED,
        exit::PORT_TAKEN,
        exit::TRACER_FAILED,
        exit::LOAD_FAILED,
        exit::TIMED_OUT,
        exit::NO_REQUESTS,
        sockscope::error::FAILURE,
        sockscope::error::USAGE,
        sockscope::error::NOT_EXECUTABLE,
        sockscope::error::NOT_FOUND,
    ];
    for code in named {
        assert!(
            all.contains(&code.to_string()),
            "{code} is not in the table"
        );
    }
    let commands: BTreeSet<String> = command_paths()
        .into_iter()
        .filter_map(|p| p.first().cloned())
        .collect();
    for s in STATUSES {
        for c in s.commands {
            assert!(commands.contains(*c), "{}: no command {c}", s.name);
        }
    }
}

/// Every status the source gives `with_code` or `exit::fail` as a number
/// is in the table: a new one cannot be returned without being listed.
#[test]
fn the_source_returns_no_status_the_table_lacks() {
    fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rs_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    rs_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let table = labels(STATUSES.iter());
    let mut seen = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for call in ["with_code(", "fail("] {
            for (at, _) in text.match_indices(call) {
                let arg: String = text[at + call.len()..]
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                if !arg.is_empty() {
                    seen += 1;
                    assert!(
                        table.contains(&arg),
                        "{}: status {arg} is not in run::exit::STATUSES",
                        f.display()
                    );
                }
            }
        }
    }
    assert!(seen > 10, "the scan found only {seen} numeric statuses");
}

#[test]
fn docs_exit_codes_is_the_generated_table() {
    let doc = repo_file("docs/exit-codes.md");
    assert!(
        doc.contains(&exit::markdown()),
        "docs/exit-codes.md differs from run::exit::markdown(); the table should read:\n{}",
        exit::markdown()
    );
}

#[test]
fn readme_lists_every_status_and_links_the_table() {
    let readme = repo_file("README.md");
    assert!(readme.contains("(docs/exit-codes.md)"), "no link");
    assert!(
        words(&readme).contains(&words(&exit::brief())),
        "README.md should list the statuses as run::exit::brief() does:\n{}",
        exit::brief()
    );
}

/// docs/profile.md explains profile's statuses at length in a table of
/// its own: it lists exactly those the table gives profile.
#[test]
fn docs_profile_lists_the_statuses_of_profile() {
    let doc = repo_file("docs/profile.md");
    let at = doc.find("### Exit statuses").expect("the section");
    let listed: BTreeSet<String> = doc[at..]
        .lines()
        .skip_while(|l| !l.starts_with("| status"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_start_matches('|')
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    let want: BTreeSet<String> = labels(exit::statuses_of("profile")).into_iter().collect();
    assert_eq!(listed, want);
    assert!(exit::statuses_of("profile").all(|s| s.code != Code::Command));
}

/// `manpage` prints sockscope(1); `manpage --dir` writes it and every page
/// a page names (sockscope-profile(1), sockscope-load-tcp-rr(1)...), each
/// with its command's exit statuses.
#[test]
fn manpage_names_only_the_pages_it_writes() {
    let dir = scratch("manpages");
    let out = run(&["manpage", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{:?}", out);
    let written: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let want: BTreeSet<String> = command_paths()
        .iter()
        .map(|p| {
            let mut name = vec!["sockscope".to_owned()];
            name.extend(p.iter().cloned());
            format!("{}.1", name.join("-"))
        })
        .collect();
    assert_eq!(written, want);
    for name in &written {
        let page = std::fs::read_to_string(dir.join(name)).unwrap();
        // roff escapes '-' as '\-' in names.
        for (at, _) in page.match_indices("sockscope\\-") {
            let rest = &page[at..];
            let Some(end) = rest.find("(1)") else {
                continue;
            };
            let named = rest[..end].replace("\\-", "-");
            // Command names are lower case; sockscope-COMMAND(1) is a placeholder.
            let is_name = named
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if is_name {
                assert!(
                    written.contains(&format!("{named}.1")),
                    "{name} names {named}(1)"
                );
            }
        }
        assert!(page.contains("Exit status"), "{name} has no exit statuses");
    }
    let top = run(&["manpage"]);
    assert_eq!(top.status.code(), Some(0));
    assert_eq!(
        top.stdout,
        std::fs::read(dir.join("sockscope.1")).unwrap(),
        "`manpage` prints the page `manpage --dir` writes as sockscope.1"
    );
    assert!(String::from_utf8_lossy(&top.stdout).contains("sockscope\\-profile(1)"));
}
