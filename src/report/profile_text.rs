//! summary.txt of a profile: what ran, the headline figures, the derived
//! sentences, the syscall table, the stacks' top functions and the
//! caveats, for a terminal.

use std::fmt::Write as _;

use super::load_text;
use super::profile::ProfileReport;
use super::trace_text::{self, SortKey, TableView};

/// What the summary says in place of the syscall table of a run without
/// the syscall tracer.
pub const NO_SYSCALLS: &str = "Target syscalls: not recorded (--requests-only: no syscall tracer \
     was attached; the request anatomy above is what this run measured at the server).";

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
    let _ = writeln!(s);
    if let Some(sw) = &r.sweep {
        s.push_str(&super::sweep_text::render(sw, r.capacity.as_ref()));
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "The sections below are the last step's window (step {}).",
            sw.points.last().map_or(0, |p| p.step)
        );
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "Headline:");
    for f in super::headline::figures(r) {
        let _ = writeln!(s, "  {:<18}{}", f.label, f.value);
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "What the run says:");
    for line in &r.insights {
        let _ = writeln!(s, "  * {}", wrap(line, 96, "    "));
    }
    let _ = writeln!(s);
    match &r.load {
        Some(load) => {
            let _ = writeln!(s, "Load:");
            for l in load_text::render(load).lines() {
                let _ = writeln!(s, "  {l}");
            }
        }
        None => workload_text(&mut s, &r.workload),
    }
    if let Some(a) = &r.anatomy {
        let _ = writeln!(s);
        for l in super::anatomy::render(a).lines() {
            let _ = writeln!(s, "{l}");
        }
    }
    let _ = writeln!(s);
    match &r.trace {
        Some(trace) => {
            let _ = writeln!(s, "Target syscalls over the trace window (top 15):");
            let view = TableView {
                sort: if trace.options.count_only {
                    SortKey::Calls
                } else {
                    SortKey::Time
                },
                top: Some(15),
                errors_only: false,
            };
            for l in trace_text::render(trace, &view).lines() {
                let _ = writeln!(s, "  {l}");
            }
        }
        None => {
            let _ = writeln!(s, "{NO_SYSCALLS}");
        }
    }
    match (&r.stacks, &r.stacks_failure) {
        (Some(st), _) => {
            let _ = writeln!(s);
            s.push_str(&super::stacks_text::render(st));
        }
        (None, Some(why)) => {
            let _ = writeln!(s);
            let _ = writeln!(s, "Stacks: not recorded: {why}.");
        }
        (None, None) => {}
    }
    if let Some(e) = &r.evidence {
        let _ = writeln!(s);
        let _ = writeln!(s, "Kernel evidence over the window:");
        for l in e.text().lines() {
            let _ = writeln!(s, "  {l}");
        }
    }
    if !r.caveats.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "Caveats:");
        for c in &r.caveats {
            let _ = writeln!(s, "  * {}", wrap(c, 96, "    "));
        }
    }
    if !r.advice.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Settings this run's evidence points at (sockscope tune --from run.json; \
             nothing was changed):"
        );
        for l in super::tune::table(&r.advice).to_text().lines() {
            let _ = writeln!(s, "  {}", l.trim_end());
        }
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

/// The workload section of a run under a `--load-cmd` command or observe
/// only: who counted the requests, and the end of the command's output.
fn workload_text(s: &mut String, w: &crate::report::workload::WorkloadRecord) {
    let c = &w.requests;
    let _ = writeln!(
        s,
        "Workload ({}):",
        if w.source == crate::report::workload::COMMAND {
            "an external command, --load-cmd"
        } else {
            "observed: no load was sent"
        }
    );
    let _ = writeln!(
        s,
        "  requests      {} in {:.2} s, counted by the {} ({})",
        c.count, c.window_s, c.counted_by, c.note
    );
    if let Some(cmd) = &w.command {
        let _ = writeln!(s, "  command       {}", shell_words::join(cmd));
    }
    if let Some(e) = &w.exit {
        let _ = writeln!(s, "  ended         {e} after {:.2} s", w.window_s);
    }
    if let Some(o) = w.output.as_ref().filter(|o| !o.tail.trim().is_empty()) {
        let lines: Vec<&str> = o.tail.trim_end().lines().collect();
        let tail = &lines[lines.len().saturating_sub(OUTPUT_LINES)..];
        let _ = writeln!(
            s,
            "  its output ({} bytes; the last {} lines{}):",
            o.bytes,
            tail.len(),
            if lines.len() > tail.len() || o.cut {
                "; run.json keeps more"
            } else {
                ""
            }
        );
        for l in tail {
            let _ = writeln!(s, "    | {l}");
        }
    }
}

/// Lines of a command's output the summary shows.
const OUTPUT_LINES: usize = 12;

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn a_run_without_the_tracer_says_its_syscalls_were_not_recorded() {
        use crate::report::fixtures;
        let r = fixtures::untraced(fixtures::profile(&fixtures::epoll_echo()));
        let s = super::render(&r);
        assert!(s.contains("Anatomy of a request"), "{s}");
        assert!(s.contains(super::NO_SYSCALLS), "{s}");
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
        let html = crate::report::html::profile::profile_page(&r);
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
