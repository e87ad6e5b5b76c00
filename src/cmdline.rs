//! The command line as artifacts record it (run.json, load and bench
//! JSON, summary.txt, report.html): every argument as given, except the
//! values of HTTP request headers (`-H 'Authorization: Bearer ...'`),
//! which are credentials often enough that an artifact meant to be shared
//! must not carry them. Header names are kept (they say what was sent);
//! `--record-header-values` keeps the values too.
//!
//! Headers hide in three shapes: `-H 'N: v'` / `--header 'N: v'`,
//! `--header='N: v'` / `-H'N: v'`, and inside a profile's `--load` line (one
//! argument holding a whole load command, split and re-joined here as a
//! shell would).

use std::sync::atomic::{AtomicBool, Ordering};

/// What stands in for a redacted value.
pub const REDACTED: &str = "<redacted>";

static KEEP_VALUES: AtomicBool = AtomicBool::new(false);

/// Keep header values in recorded command lines (`--record-header-values`).
pub fn keep_header_values(keep: bool) {
    KEEP_VALUES.store(keep, Ordering::Relaxed);
}

/// This process's command line, as artifacts record it.
pub fn recorded() -> Vec<String> {
    record(std::env::args().collect())
}

/// `args` as artifacts record them (header values redacted unless asked
/// to keep them).
pub fn record(args: Vec<String>) -> Vec<String> {
    if KEEP_VALUES.load(Ordering::Relaxed) {
        args
    } else {
        redact(args)
    }
}

/// What the argument after an option is.
#[derive(Clone, Copy)]
enum Operand {
    Header,
    LoadLine,
}

/// `args` with every header value replaced by [`REDACTED`].
pub fn redact(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut operand = None;
    for a in args {
        match operand.take() {
            Some(Operand::Header) => out.push(redact_header(&a)),
            Some(Operand::LoadLine) => out.push(redact_line(&a)),
            None if a == "-H" || a == "--header" => {
                operand = Some(Operand::Header);
                out.push(a);
            }
            None if a == "--load" => {
                operand = Some(Operand::LoadLine);
                out.push(a);
            }
            None => out.push(redact_inline(a)),
        }
    }
    out
}

/// One argument that carries its own header or load line (`--header=`,
/// `-HName: v`, `--load=`), redacted; any other as it is.
fn redact_inline(a: String) -> String {
    if let Some(h) = a.strip_prefix("--header=") {
        format!("--header={}", redact_header(h))
    } else if let Some(l) = a.strip_prefix("--load=") {
        format!("--load={}", redact_line(l))
    } else if let Some(h) = a.strip_prefix("-H").filter(|h| !h.is_empty()) {
        format!("-H{}", redact_header(h))
    } else {
        a
    }
}

/// `Name: value` -> `Name: <redacted>` (a header without a colon is kept:
/// it has no value, and load refuses it anyway).
fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, v)) if !v.trim().is_empty() => format!("{name}: {REDACTED}"),
        _ => h.to_string(),
    }
}

/// A whole load line (profile's `--load`): its headers redacted; a line
/// that does not split as a shell would is kept only up to its first
/// header option, since its words cannot be told apart.
fn redact_line(line: &str) -> String {
    match shell_words::split(line) {
        Ok(words) => {
            let red = redact(words.clone());
            if red == words {
                line.to_string()
            } else {
                shell_words::join(red)
            }
        }
        Err(_) => match line.find("-H").or_else(|| line.find("--header")) {
            Some(i) => format!("{}{REDACTED}", &line[..i]),
            None => line.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn header_values_are_redacted_in_every_shape_and_names_kept() {
        let got = redact(v(&[
            "sockscope",
            "load",
            "http",
            "http://x/",
            "-H",
            "Authorization: Bearer s3cret",
            "--header=X-Api-Key: k",
            "-HCookie: a=b",
            "--header",
            "Accept: */*",
            "-c",
            "4",
        ]));
        assert_eq!(
            got,
            v(&[
                "sockscope",
                "load",
                "http",
                "http://x/",
                "-H",
                "Authorization: <redacted>",
                "--header=X-Api-Key: <redacted>",
                "-HCookie: <redacted>",
                "--header",
                "Accept: <redacted>",
                "-c",
                "4",
            ])
        );
        assert!(!got.concat().contains("s3cret"));
    }

    #[test]
    fn a_profile_load_line_is_redacted_inside() {
        let got = redact(v(&[
            "profile",
            "--load",
            "http -c 2 -H 'Authorization: Bearer s3cret' /x",
            "--",
            "srv",
        ]));
        assert_eq!(got[2], "http -c 2 -H 'Authorization: <redacted>' /x");
        let got = redact(v(&["profile", "--load=http -H 'X: y' /"]));
        assert_eq!(got[1], "--load=http -H 'X: <redacted>' /");
        // A line without headers is kept byte for byte.
        let line = "tcp-rr -c 64 --request 'PING\\r\\n'";
        assert_eq!(redact(v(&["--load", line]))[1], line);
        // One that does not split: cut at its first header option.
        let got = redact(v(&["--load", "http -H 'Auth: x"]));
        assert_eq!(got[1], "http <redacted>");
    }

    #[test]
    fn other_arguments_are_untouched() {
        let a = v(&["load", "tcp-rr", "127.0.0.1:1", "-Hx", "--hello", "-q"]);
        // `-Hx` has no colon: no value to hide.
        assert_eq!(redact(a.clone()), a);
    }
}
