//! `sockscope top`: a live terminal view of the request anatomy of a
//! target (a process tree, a scope or the machine), refreshed each of the
//! anatomy's 1-second intervals. [`model`] makes the rows from two
//! readings, [`view`] draws them (ratatui); `run::top` runs the loop.

pub mod model;
pub mod view;

/// The longest target name shown, in characters (the rest is cut).
pub const MAX_NAME: usize = 48;

/// A name for the title line: control characters written out, cut to
/// [`MAX_NAME`] characters with `…` when longer.
pub fn shown_name(name: &str) -> String {
    let escaped = crate::text::escape(name).into_owned();
    if escaped.chars().count() <= MAX_NAME {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(MAX_NAME - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_name_is_escaped_and_cut() {
        let long = "x".repeat(10_000);
        let s = shown_name(&long);
        assert_eq!(s.chars().count(), MAX_NAME);
        assert!(s.ends_with('…'));
        let evil = shown_name("a\x1b[2Jb\n");
        assert!(!evil.chars().any(char::is_control), "{evil:?}");
        assert_eq!(shown_name("nginx"), "nginx");
    }
}
