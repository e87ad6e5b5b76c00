//! `bench overhead`'s results: the schema (`"overhead"` in bench.json),
//! the table of every configuration, and the page's section: the cost of a
//! getppid call under each tracer.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{Section, noise};
use crate::report::html::{card, list};
use crate::report::svg::{self, BarChart, Scale};
use crate::report::table::{Align::Left, Align::Right, Column, Table};

/// The tracer overhead microbenchmark.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OverheadResult {
    /// getppid calls per fast run.
    pub calls: u64,
    /// Calls per strace / perf trace run (ptrace costs ~100 us a call).
    pub slow_calls: u64,
    /// Interleaved rounds.
    pub rounds: u32,
    /// One row per configuration.
    pub rows: Vec<OverheadRow>,
    /// Configurations left out, and why (e.g. perf not installed).
    pub skipped: Vec<String>,
}

/// One configuration of the overhead benchmark.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OverheadRow {
    /// Key: untraced, count_only, latency, strace, perf_trace, collateral.
    pub config: String,
    /// For people.
    pub label: String,
    /// ns per call of each round.
    pub rounds_ns: Vec<f64>,
    /// Median of the rounds.
    pub median_ns: f64,
    /// median / untraced median.
    pub ratio: f64,
    /// median - untraced median.
    pub added_ns: f64,
}

/// Every configuration of the overhead microbenchmark.
pub fn table(o: &OverheadResult) -> Table {
    let columns = vec![
        Column::both("configuration", "configuration", 50, Left),
        Column::both("ns/call (median)", "ns/call", 10, Right),
        Column::both("ratio to untraced", "ratio", 8, Right),
        Column::both("added ns/call", "added ns", 10, Right),
        Column::page("all rounds", Left),
    ];
    let rows = o
        .rows
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                format!("{:.1}", r.median_ns),
                format!("{:.2}x", r.ratio),
                format!("{:.1}", r.added_ns),
                r.rounds_ns
                    .iter()
                    .map(|v| format!("{v:.1}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    Table { columns, rows }
}

impl Section for OverheadResult {
    fn table(&self) -> Table {
        table(self)
    }
    fn text(&self) -> String {
        let mut s = table(self).to_text();
        for sk in &self.skipped {
            let _ = writeln!(s, "skipped: {sk}");
        }
        s
    }
    fn html(&self, p: &str) -> String {
        overhead_body(p, self)
    }
    fn noise(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter_map(|r| noise::outlier_note(&r.label, &r.rounds_ns, " ns"))
            .collect()
    }
}

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
    let mut inner = chart + &table(o).to_html();
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
