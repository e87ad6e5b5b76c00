//! Untrusted text made safe for a terminal and for text files: process
//! names (anyone can set theirs with `prctl(PR_SET_NAME)`), cgroup and
//! unit names, a target's output, and every string of an artifact given
//! to `report`, `compare` or `merge` could otherwise carry terminal escape
//! sequences (ESC, CSI, OSC...) to root's terminal or into summary.txt.
//!
//! Control characters are written out visibly instead: `\t`, `\n`, `\r`,
//! `\x1b` (C0 and DEL), `\u{9b}` (C1, and the bidirectional overrides that
//! reorder what a terminal shows), and bytes that are not UTF-8 as `\xNN`.
//! A backslash is left as it is, so escaping twice changes nothing. JSON
//! has serde's own escaping; HTML (`report::svg::esc`) writes control
//! characters out through [`escape_block`] before its own entities.
//! A leaf: it imports nothing of the crate, so every module may use it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` cut to at most `max` characters, ending in `…` when cut (symbol
/// names and endpoints are the target's, and can be any length).
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let end = s
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(0, |(i, _)| i);
            Cow::Owned(format!("{}…", &s[..end]))
        }
    }
}

/// True for what must not reach a terminal as itself: C0 controls, DEL, C1
/// controls, and the invisible marks that reorder or break lines.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

fn escape_char(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_with(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let must = |c: char| is_unsafe(c) && !(keep_newlines && c == '\n');
    let Some(first) = s.find(must) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if must(c) {
            escape_char(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of untrusted text (a name, a field): every control character
/// escaped, newlines included. Borrowed when nothing needed escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_with(s, false)
}

/// A block of lines (a summary, a message quoting output): as [`escape`],
/// but newlines are kept.
pub fn escape_block(s: &str) -> Cow<'_, str> {
    escape_with(s, true)
}

/// Bytes of unknown encoding (a process's output) as a block of lines:
/// valid UTF-8 as [`escape_block`] writes it, other bytes as `\xNN`, so
/// nothing is lost or replaced by U+FFFD.
pub fn escape_block_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape_block(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_written_out_and_plain_text_is_borrowed() {
        assert!(matches!(escape("nginx: worker"), Cow::Borrowed(_)));
        assert!(matches!(escape_block("a\nb\n"), Cow::Borrowed(_)));
        assert_eq!(escape("\x1b]0;pwn\x07x"), "\\x1b]0;pwn\\x07x");
        assert_eq!(escape("a\tb\r\nc\x7f"), "a\\tb\\r\\nc\\x7f");
        assert_eq!(escape_block("a\tb\r\nc"), "a\\tb\\r\nc");
        // C1 (CSI as one character) and a right-to-left override.
        assert_eq!(escape("x\u{9b}31m\u{202e}y"), "x\\u{9b}31m\\u{202e}y");
        // Letters beyond ASCII stay as they are.
        assert_eq!(escape("héllo wörld ✓"), "héllo wörld ✓");
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = escape("\x1b[2J\\x1b\u{85}").into_owned();
        assert_eq!(escape(&once), once);
        assert!(!once.chars().any(is_unsafe));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_as_hex() {
        assert_eq!(
            escape_block_bytes(b"ok\n\x1b[31mred\xff\x9b2J\xc3\xa9\n"),
            "ok\n\\x1b[31mred\\xff\\x9b2J\u{e9}\n"
        );
    }
}
