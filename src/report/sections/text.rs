//! summary.txt of a profile: what ran, then the block of each section the
//! run has ([`super::SECTIONS`], in order), a blank line between them, for
//! a terminal.

use std::fmt::Write as _;

use crate::report::profile::ProfileReport;

/// Renders the whole summary.
pub fn render(r: &ProfileReport) -> String {
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
    for block in super::present(r).filter_map(|sec| sec.text(r)) {
        s.push('\n');
        s.push_str(&block);
    }
    s
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
    use super::wrap;

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
