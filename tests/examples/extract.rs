//! The examples, found: fenced blocks of the markdown files by the
//! convention of docs/examples.md, the `Example:` lines of every `--help`,
//! and the rules that excuse one a machine may lack.

use std::process::Command;

use crate::common;

/// One command line to run: where it was found and its text (continuation
/// lines joined).
#[derive(Clone, Debug)]
pub(super) struct Example {
    pub(super) source: String,
    pub(super) text: String,
    /// The address its `listening on` line printed in the document (a
    /// console block's output), replaced by the real one in later lines.
    pub(super) shown_listen: Option<String>,
}

/// Examples that run in order in one directory (a shell session): a
/// fenced block, or one `--help` example.
#[derive(Clone, Debug)]
pub(super) struct Block {
    pub(super) source: String,
    pub(super) examples: Vec<Example>,
}

/// Why an example is not run here. Each rule is a fact about what the
/// example needs that one machine may lack; the docs' convention says
/// such an example states it in its text.
pub(super) fn excused(text: &str) -> Option<&'static str> {
    if text.contains("--unit ") {
        return Some("needs the systemd unit it names (docs/examples.md: --unit examples)");
    }
    if text.contains("docker-0123abcd.scope") {
        return Some("needs a container's cgroup (the name is an illustration)");
    }
    if text.contains("--protoset kv.protoset") {
        return Some("needs the user's gRPC service (test.Kv) and its .proto compiled by protoc");
    }
    if text.contains("sockscope top") && !text.contains("--once") {
        return Some("draws on a terminal (tests/top.rs runs it in tmux); --once is run here");
    }
    if non_loopback(text) {
        return Some("aims at another machine (a merge across generators)");
    }
    None
}

/// True when `text` names an IPv4 address outside 127.0.0.0/8 as a
/// host:port (what a generator on another machine would target).
pub(super) fn non_loopback(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
        .filter_map(|w| w.split_once(':'))
        .filter(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|(ip, _)| ip.parse::<std::net::Ipv4Addr>().ok())
        .any(|ip| !ip.is_loopback())
}

/// A line of a fenced block that starts a sockscope command: after an
/// optional `$ ` prompt, `sockscope ` (or `sudo sockscope`, which the test
/// rejects: sockscope runs as root and a fresh Debian has no sudo).
pub(super) fn command_start(line: &str, console: bool) -> Option<&str> {
    let t = line.trim_start();
    // In a console block only the prompt's lines are commands.
    let t = match t.strip_prefix("$ ") {
        Some(c) => c,
        None if console => return None,
        None => t,
    };
    // Environment assignments may come first (`REDISCLI_AUTH=... sockscope`).
    let mut rest = t;
    while let Some((word, after)) = rest.split_once(' ')
        && word.contains('=')
        && word.split('=').next().is_some_and(|n| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        })
    {
        rest = after;
    }
    (rest.starts_with("sockscope ") || rest.starts_with("sudo sockscope ")).then_some(t)
}

/// The blocks of one markdown file, by the convention of docs/examples.md.
/// Errors: a sockscope line in an untagged block.
pub(super) fn from_markdown(name: &str, text: &str, errors: &mut Vec<String>) -> Vec<Block> {
    let mut blocks = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let Some(info) = t.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let info = info.trim().to_string();
        let start = i + 1;
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            i += 1;
        }
        let body = &lines[start..i.min(lines.len())];
        i += 1;
        let console = info == "console";
        if info != "sh" && !console {
            if info.is_empty() {
                for (k, l) in body.iter().enumerate() {
                    if command_start(l, false).is_some() {
                        errors.push(format!(
                            "{name}:{}: a sockscope command in an untagged block: tag the block \
                             ```sh or ```console (examples, run by the test) or ```text \
                             (synopses and output)",
                            start + k + 1
                        ));
                    }
                }
            }
            continue;
        }
        let mut examples = Vec::new();
        let mut k = 0;
        while k < body.len() {
            let line = body[k];
            let Some(first) = command_start(line, console) else {
                k += 1;
                continue;
            };
            let source = format!("{name}:{}", start + k + 1);
            let mut cmd = first.trim_end().to_string();
            while cmd.ends_with('\\') && k + 1 < body.len() {
                cmd.pop();
                k += 1;
                cmd.push(' ');
                cmd.push_str(body[k].trim());
            }
            k += 1;
            // A console block shows what a server printed on the next line.
            let shown_listen = if console {
                body.get(k)
                    .and_then(|l| l.trim().strip_prefix("listening on "))
                    .map(|a| a.trim().to_string())
            } else {
                None
            };
            examples.push(Example {
                source,
                text: cmd,
                shown_listen,
            });
        }
        if !examples.is_empty() {
            blocks.push(Block {
                source: examples[0].source.clone(),
                examples,
            });
        }
    }
    blocks
}

/// Every subcommand path (`load tcp-rr`, `serve echo`...) from the help's
/// "Commands:" lists, walked from the top.
pub(super) fn subcommands(prefix: &[String]) -> Vec<Vec<String>> {
    let help = help_of(prefix);
    let mut out = vec![prefix.to_vec()];
    let mut inside = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            let Some(rest) = line.strip_prefix("  ") else {
                break;
            };
            let name = rest.split_whitespace().next().unwrap_or("");
            if name.is_empty() || name == "help" || rest.starts_with(' ') {
                continue;
            }
            let mut p = prefix.to_vec();
            p.push(name.to_string());
            out.extend(subcommands(&p));
        }
    }
    out
}

pub(super) fn help_of(cmd: &[String]) -> String {
    let out = Command::new(common::sockscope())
        .args(cmd)
        .arg("--help")
        .output()
        .expect("running sockscope --help");
    assert!(out.status.success(), "sockscope {cmd:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The examples of every command's `--help`: lines under an `Example:` or
/// `Examples:` heading that start with `sockscope `, each its own block.
pub(super) fn from_help() -> Vec<Block> {
    let mut blocks = Vec::new();
    for cmd in subcommands(&[]) {
        let help = help_of(&cmd);
        let lines: Vec<&str> = help.lines().collect();
        let mut under = false;
        let mut k = 0;
        while k < lines.len() {
            let l = lines[k];
            // A section runs from its heading ("Examples:", "Example:",
            // "Examples (a note over lines):") to the next empty line.
            if l.starts_with("Example") {
                under = true;
            }
            if l.trim().is_empty() {
                under = false;
            }
            if !l.starts_with(' ') {
                k += 1;
                continue;
            }
            let Some(first) = command_start(l, false).filter(|_| under) else {
                k += 1;
                continue;
            };
            let source = format!("sockscope {} --help", cmd.join(" "));
            let mut text = first.trim_end().to_string();
            while text.ends_with('\\') && k + 1 < lines.len() {
                text.pop();
                k += 1;
                text.push(' ');
                text.push_str(lines[k].trim());
            }
            k += 1;
            let ex = Example {
                source: source.clone(),
                text,
                shown_listen: None,
            };
            // An example that reads a file the one before it names (merge,
            // then report merged.json) runs after it, in its directory.
            let reads_previous = blocks.last().is_some_and(|b: &Block| {
                b.source == source
                    && ex.text.split_whitespace().any(|w| {
                        w.ends_with(".json")
                            && b.examples.last().is_some_and(|p| p.text.contains(w))
                    })
            });
            if reads_previous {
                blocks.last_mut().unwrap().examples.push(ex);
            } else {
                blocks.push(Block {
                    source,
                    examples: vec![ex],
                });
            }
        }
    }
    blocks
}
