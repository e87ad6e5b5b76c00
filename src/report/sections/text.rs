//! summary.txt of a profile: what ran, then the block of each section the
//! run has ([`super::SECTIONS`], in order), a blank line between them; and
//! the terminal's brief form: what ran and the sections marked
//! [`super::ProfileSection::brief`], every line fit to [`TERMINAL_WIDTH`].

use std::fmt::Write as _;

use crate::report::profile::ProfileReport;

/// The columns the brief summary's lines fit in.
pub const TERMINAL_WIDTH: usize = 100;

/// Renders the whole summary.
pub fn render(r: &ProfileReport) -> String {
    let mut s = header(r);
    for block in super::present(r).filter_map(|sec| sec.text(r)) {
        s.push('\n');
        s.push_str(&block);
    }
    s
}

/// The brief summary a terminal gets: what ran, the headline and what the
/// run says (a sweep's steps too), each line fit to [`TERMINAL_WIDTH`].
pub fn render_brief(r: &ProfileReport) -> String {
    let mut s = header(r);
    for block in super::present(r)
        .filter(|sec| sec.brief())
        .filter_map(|sec| sec.text(r))
    {
        s.push('\n');
        s.push_str(&block);
    }
    fit(&s, TERMINAL_WIDTH)
}

/// What ran: the first lines of both forms.
fn header(r: &ProfileReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "sockscope profile, {}", r.started_at);
    let _ = writeln!(
        s,
        "target   {} (pid {}, {}) at {}",
        r.target
            .command
            .as_ref()
            .map_or_else(|| format!("pid {}", r.target.pid), shell_words::join),
        r.target.pid,
        r.target.comm,
        r.target.address
    );
    let _ = writeln!(s, "load     {}", r.load_line());
    let _ = writeln!(s, "machine  {}", r.machine.describe());
    let _ = writeln!(s, "build    sockscope {}", r.header.build.describe());
    let _ = writeln!(s, "windows  {}", r.windows.note);
    s
}

/// Every line of `text` longer than `width` columns (characters) wrapped
/// at spaces, its continuation lines indented under where its text
/// starts: past a bullet (`* `, `- `), or at the value of a `name   value`
/// line (two spaces or more after its first words), whose start is kept as
/// it is. A word longer than the line stays whole.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let (start, hang) = text_start(line);
        let hang = hang.min(width / 2);
        // `start` is a byte index at a char boundary (spaces and ASCII
        // bullets only before it).
        out.push_str(&line[..start]);
        let mut col = line[..start].chars().count();
        let mut first = true;
        for word in line[start..].split(' ').filter(|w| !w.is_empty()) {
            let n = word.chars().count();
            if !first && col + 1 + n > width {
                out.push('\n');
                out.push_str(&" ".repeat(hang));
                col = hang;
            } else if !first {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += n;
            first = false;
        }
        out.push('\n');
    }
    out
}

/// Where a long line's text starts (a byte index: what precedes it is
/// kept as it is) and the indent of its continuation lines (columns).
fn text_start(line: &str) -> (usize, usize) {
    let lead = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[lead..];
    if rest.starts_with("* ") || rest.starts_with("- ") {
        return (lead + 2, lead + 2);
    }
    // `name   value`: the first run of two spaces or more, early in the
    // line, ends at the value.
    let b = rest.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() && i < 32 {
        if b[i] == b' ' && b[i + 1] == b' ' {
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if rest.is_char_boundary(j) {
                return (lead + j, lead + rest[..j].chars().count());
            }
            break;
        }
        i += 1;
    }
    (lead, lead + 2)
}

/// Wraps `text` at `width` columns, continuation lines indented.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut col = 0;
    for word in text.split_whitespace() {
        if col > 0 && col + 1 + word.len() > width {
            out.push('\n');
            out.push_str(indent);
            col = indent.len();
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{fit, wrap};

    #[test]
    fn long_lines_fit_under_their_text_and_short_ones_stay() {
        let text = "short line\n\
                    target   a b c d e f g h i j k l m n o p q r s t u v w x y z\n  \
                    * one two three four five six seven eight nine ten eleven\n";
        let got = fit(text, 30);
        assert!(got.lines().all(|l| l.chars().count() <= 30), "{got}");
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[0], "short line");
        assert!(lines[1].starts_with("target   a b"), "{got}");
        assert!(lines[2].starts_with("         ") && !lines[2].starts_with("          "));
        let bullet = lines.iter().position(|l| l.starts_with("  * one")).unwrap();
        assert!(lines[bullet + 1].starts_with("    ") && !lines[bullet + 1].starts_with("     "));
        // Only spaces change: the words are all there, in order.
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(&got), words(text));
        // A word longer than the line stays whole.
        let long = "x".repeat(50);
        assert_eq!(
            fit(&format!("a {long} b"), 30),
            format!("a\n  {long}\n  b\n")
        );
    }

    #[test]
    fn the_brief_summary_fits_a_terminal_and_keeps_the_headline_and_findings() {
        use crate::report::fixtures;
        let r = fixtures::profile(&fixtures::epoll_echo());
        let brief = super::render_brief(&r);
        let whole = super::render(&r);
        assert!(
            brief
                .lines()
                .all(|l| l.chars().count() <= super::TERMINAL_WIDTH),
            "{brief}"
        );
        assert!(
            brief.contains("Headline:") && brief.contains("What the run says:"),
            "{brief}"
        );
        assert!(brief.lines().count() < whole.lines().count());
        let syscalls = "Target syscalls over the trace window";
        assert!(
            !brief.contains(syscalls) && whole.contains(syscalls),
            "{whole}"
        );
    }

    #[test]
    fn a_run_without_the_tracer_says_its_syscalls_were_not_recorded() {
        use crate::report::fixtures;
        let r = fixtures::untraced(fixtures::profile(&fixtures::epoll_echo()));
        let s = super::render(&r);
        assert!(s.contains("Anatomy of a request"), "{s}");
        assert!(s.contains(super::super::syscalls::NO_SYSCALLS), "{s}");
        assert!(!s.contains("Target syscalls over the trace window"), "{s}");
        // No figure the tracer would have measured prints as a number.
        assert!(!s.contains("NaN") && !s.contains("syscalls per"), "{s}");
        assert!(s.contains("were not recorded (--requests-only"), "{s}");
    }

    #[test]
    fn the_summary_has_the_anatomy_table_when_the_run_has_one() {
        let mut r = crate::report::fixtures::profile(&crate::report::fixtures::epoll_echo());
        assert!(!super::render(&r).contains("Anatomy of a request"));
        r.anatomy = Some(crate::report::fixtures::anatomy());
        let s = super::render(&r);
        let table = &s[s.find("Anatomy of a request").expect("the table")..];
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with("CPU wait"))
            .unwrap();
        assert!(row.contains("2.90ms"), "{row}");
        assert!(
            table.contains("at p99, 2.90ms of 3.60ms at the server was CPU wait"),
            "{table}"
        );
        // Before the syscalls, after the load.
        assert!(s.find("Anatomy of a request") > s.find("Load:"));
        assert!(s.find("Anatomy of a request") < s.find("Target syscalls"));
    }

    #[test]
    fn a_run_under_a_load_command_says_who_counted_and_what_the_command_said() {
        use crate::report::fixtures;
        let r = fixtures::under_command(fixtures::profile(&fixtures::epoll_echo()));
        let s = super::render(&r);
        assert!(
            s.contains("load     wrk -c16 http://127.0.0.1:35871/ (--load-cmd, exit status 0)"),
            "{s}"
        );
        assert!(!s.contains("\nLoad:"), "{s}");
        assert!(
            s.contains("Workload (an external command, --load-cmd):"),
            "{s}"
        );
        assert!(
            s.contains("requests      399748 in 2.00 s, counted by the anatomy"),
            "{s}"
        );
        assert!(s.contains("    | Running 2s test @"), "{s}");
        assert!(
            s.contains(
                "The target answered 399748 requests in 2.00 s (199874/s) under the load of `wrk"
            ),
            "{s}"
        );
        // No generator: no generator sentence, and nothing prints as NaN.
        assert!(
            !s.contains("load generator used") && !s.contains("NaN"),
            "{s}"
        );
        assert!(
            s.contains("syscalls per request") || s.contains("per request"),
            "{s}"
        );
        // The HTML says the same, and the artifact reads back as it was.
        let html = super::super::page::profile_page(&r);
        assert!(html.contains("The load: an external command"), "{html}");
        assert!(!html.contains("NaN"));
        let mut v = serde_json::to_value(&r).unwrap();
        assert!(v.get("load").is_none(), "{v}");
        assert_eq!(v["workload"]["requests"]["counted_by"], "anatomy");
        assert!(v["derived"]["generator_cpu_us_per_transaction"].is_null());
        v["schema_version"] = crate::report::profile::SCHEMA_VERSION.into();
        let back = crate::report::profile::parse_bytes(v.to_string().as_bytes()).unwrap();
        assert_eq!(back.workload, r.workload);
        assert!(back.load.is_none());
        // compare works across the two kinds of runs, and says they differ.
        let own = fixtures::profile(&fixtures::epoll_echo());
        let c = crate::report::compare::render(&own, &r, "a", "b");
        assert!(c.contains("different loads (workload tcp-rr vs wrk"), "{c}");
    }

    #[test]
    fn wraps_at_width() {
        let w = wrap("aaa bbb ccc ddd", 9, "  ");
        assert_eq!(w, "aaa bbb\n  ccc ddd");
    }
}
