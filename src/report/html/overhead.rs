//! The overhead experiment's section: the cost of a getppid call under
//! each tracer.

use super::{card, list};
use crate::report::bench::OverheadResult;
use crate::report::bench_table;
use crate::report::svg::{self, BarChart, Scale};

/// The tracer overhead microbenchmark.
pub fn overhead_body(p: &str, o: &OverheadResult) -> String {
    let chart = svg::bar_chart(&BarChart {
        id: &format!("{p}chart-overhead"),
        title: "Cost of a getppid call under each tracer",
        y_label: "ns per call (log scale)",
        x_label: "configuration",
        categories: o.rows.iter().map(|r| r.config.replace('_', " ")).collect(),
        series: vec![(
            "median ns per call".into(),
            o.rows.iter().map(|r| Some(r.median_ns)).collect(),
        )],
        scale: Scale::Log,
        fmt: |v| format!("{v:.0}"),
        compact: false,
    });
    let mut inner = chart + &bench_table::overhead(o).to_html();
    if !o.skipped.is_empty() {
        inner.push_str(&list(&o.skipped, "skipped"));
    }
    card(
        &format!("{p}overhead"),
        "Tracer overhead (getppid microbenchmark)",
        &format!(
            "A loop of raw getppid calls timed inside the process: {} calls per run ({} under \
             strace and perf trace), median of {} interleaved rounds. \"collateral\" is an \
             untraced process while sockscope traces another one.",
            o.calls, o.slow_calls, o.rounds
        ),
        &inner,
    )
}
