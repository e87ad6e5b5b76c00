//! summary.txt of an experiment or of the demo: each result's text (the
//! text columns of its table, see [`super::Section`]), then the sentences.

use std::fmt::Write as _;

use super::{BenchReport, DemoReport};
use crate::report::sections::text::wrap;

/// Renders one experiment.
pub fn render(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sockscope bench {}{}: {:.0} s on {}",
        r.experiment,
        if r.quick { " --quick" } else { "" },
        r.duration_s,
        r.machine.describe()
    );
    for x in r.results.iter() {
        s.push_str(&x.section().text());
        for n in x.section().noise() {
            let _ = writeln!(s, "  ~ noise: {}", wrap(&n, 96, "    "));
        }
    }
    for i in &r.insights {
        let _ = writeln!(s, "  * {}", wrap(i, 96, "    "));
    }
    for c in &r.caveats {
        let _ = writeln!(s, "  ! {}", wrap(c, 96, "    "));
    }
    s
}

/// Renders the demo: each experiment, then what did not run.
pub fn render_demo(d: &DemoReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sockscope demo{}: {:.0} s, {}",
        if d.quick { " --quick" } else { "" },
        d.duration_s,
        if d.complete {
            "complete"
        } else {
            "INCOMPLETE (see below)"
        }
    );
    for e in &d.experiments {
        let _ = writeln!(s);
        s.push_str(&render(e));
    }
    if !d.not_run.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "not run:");
        for n in &d.not_run {
            let _ = writeln!(s, "  {}: {}", n.experiment, n.reason);
        }
    }
    s
}
