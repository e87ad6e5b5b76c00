//! The profile's sections of report.html: latency and throughput of the
//! load, the target's syscalls, CPU and other resources, who else served
//! the address, and the per-process breakdown.

use std::fmt::Write as _;

use super::{card, caveats_box, environment, list, page, table};
use crate::report::load::{Interval, LoadReport};
use crate::report::profile::ProfileReport;
use crate::report::svg::{self, LineChart, Scale, Series, StackChart};
use crate::report::units::{self, human_ns};
use crate::report::{tails, trace_text};

const NINES: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

fn nines_x(q: f64) -> f64 {
    -(1.0 - q).log10()
}

/// Latency percentiles (log scale), with the table of them and the table
/// of the tail percentiles' 95% confidence intervals. A tail percentile
/// that is not meaningful is left out of the chart and shows as `n/m` in
/// the table: the interval table says why.
pub fn latency_section(p: &str, load: &LoadReport) -> String {
    let mut series = Vec::new();
    let mut rows = Vec::new();
    let mut tail_rows = Vec::new();
    let mut add = |name: &str, rec: &Option<crate::report::load::LatencyRecord>| {
        let Some(r) = rec else { return };
        let s = &r.summary;
        let vals = [s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns];
        let cis = [None, None, s.p99_ci, s.p999_ci, s.p9999_ci];
        let mut pts: Vec<(f64, f64)> = NINES
            .iter()
            .zip(vals)
            .zip(cis)
            .filter(|(_, ci)| ci.is_none_or(|ci| ci.meaningful))
            .map(|(((q, _), v), _)| (nines_x(*q), v as f64))
            .collect();
        pts.push((5.0, s.max_ns as f64));
        series.push(Series {
            name: name.to_string(),
            points: pts,
        });
        let mut row = vec![name.to_string(), s.count.to_string(), human_ns(s.min_ns)];
        row.extend(vals.iter().zip(cis).map(|(v, ci)| tails::cell(*v, ci)));
        row.push(human_ns(s.max_ns));
        rows.push(row);
        for (pct, v, ci) in s.tails() {
            let Some(ci) = ci else { continue };
            tail_rows.push(if ci.meaningful {
                vec![
                    name.to_string(),
                    pct.to_string(),
                    human_ns(v),
                    tails::range(&ci),
                    units::fmt_count(ci.beyond),
                    String::new(),
                ]
            } else {
                vec![
                    name.to_string(),
                    pct.to_string(),
                    "n/m".into(),
                    "-".into(),
                    units::fmt_count(ci.beyond),
                    tails::phrase(pct, v, &ci, s.count),
                ]
            });
        }
    };
    add("transaction", &load.latency);
    add(
        "without the intended-time correction",
        &load.latency_uncorrected,
    );
    add("connect", &load.connect_latency);
    add("tls handshake", &load.tls_handshake_latency);
    if series.is_empty() {
        return String::new();
    }
    let mut ticks: Vec<(f64, String)> = NINES
        .iter()
        .map(|(q, l)| (nines_x(*q), l.to_string()))
        .collect();
    ticks.push((5.0, "max".into()));
    let chart = svg::line_chart(&LineChart {
        id: &format!("{p}chart-latency"),
        title: "Latency percentiles",
        x_label: "percentile (each step is ten times rarer)",
        y_label: "latency (log scale)",
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        x_ticks: Some(ticks),
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_ns,
        series,
    });
    let t = table(
        &[
            "latency", "samples", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    let tails_table = if tail_rows.is_empty() {
        String::new()
    } else {
        format!(
            "<p class=\"lead\">How far the tail can be trusted: each percentile's 95% \
             confidence interval, from the order statistics of the samples, and how many \
             samples lie beyond it. n/m: not meaningful, too few samples lie beyond it.</p>{}",
            table(
                &[
                    "latency",
                    "percentile",
                    "value",
                    "95% CI",
                    "samples beyond",
                    "note",
                ],
                &tail_rows,
                &[2, 3, 4],
            )
        )
    };
    card(
        &format!("{p}latency"),
        "Latency percentiles",
        "As the load generator measured it, from send to complete response (log scale: the \
         tail is usually orders of magnitude above the median).",
        &(chart + &t + &tails_table),
    )
}

/// Throughput per second of the load window, and its latency per second.
/// A partial second (the window did not cover all of it) is not drawn:
/// its count is not a rate and its percentiles rest on a few samples. The
/// table lists it, marked, and a line under the charts says why it is not
/// in them.
pub fn throughput_section(p: &str, load: &LoadReport) -> String {
    if load.intervals.is_empty() {
        return String::new();
    }
    let udp = load.workload == "udp";
    let whole: Vec<&Interval> = load.intervals.iter().filter(|i| !i.partial).collect();
    let ticks = match (whole.first(), whole.last()) {
        (Some(a), Some(b)) if b.t_s > a.t_s => svg::whole_ticks(a.t_s as f64, b.t_s as f64),
        (Some(a), _) => svg::whole_ticks(a.t_s as f64, a.t_s as f64 + 1.0),
        _ => Vec::new(),
    };
    let line = |f: fn(&Interval) -> Option<f64>| -> Vec<(f64, f64)> {
        whole
            .iter()
            .filter_map(|i| Some((i.t_s as f64, f(i)?)))
            .collect()
    };
    let chart = svg::line_chart(&LineChart {
        id: &format!("{p}chart-throughput"),
        title: "Throughput over time",
        x_label: "second of the load window",
        y_label: if udp {
            "datagrams sent per second"
        } else {
            "transactions per second"
        },
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_ticks: Some(ticks.clone()),
        x_fmt: units::fmt_si,
        y_fmt: units::fmt_si,
        series: vec![Series {
            name: if udp {
                "published".into()
            } else {
                "transactions".into()
            },
            points: line(|i| Some(i.transactions as f64)),
        }],
    });
    let mut inner = chart;
    if !udp {
        inner.push_str(&svg::line_chart(&LineChart {
            id: &format!("{p}chart-interval-latency"),
            title: "Latency per second",
            x_label: "second of the load window",
            y_label: "latency (log scale)",
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            x_ticks: Some(ticks),
            x_fmt: units::fmt_si,
            y_fmt: units::fmt_ns,
            series: vec![
                Series {
                    name: "p50".into(),
                    points: line(|i| Some(i.p50_ns? as f64)),
                },
                Series {
                    name: "p99".into(),
                    points: line(|i| Some(i.p99_ns? as f64)),
                },
            ],
        }));
    }
    let unit = if udp { "datagrams" } else { "transactions" };
    for i in load.intervals.iter().filter(|i| i.partial) {
        let _ = write!(
            inner,
            "<p class=\"lead partial-note\">Second {} lasted only {} ({} {unit}): \
             a part of a second is not a rate, and its percentiles rest on a few samples, so \
             the charts leave it out; the table lists it, marked partial.</p>",
            i.t_s,
            human_ns((i.covered_s * 1e9).round() as u64),
            i.transactions
        );
    }
    let rows: Vec<Vec<String>> = load
        .intervals
        .iter()
        .map(|i| {
            vec![
                if i.partial {
                    format!(
                        "{} (partial: {})",
                        i.t_s,
                        human_ns((i.covered_s * 1e9).round() as u64)
                    )
                } else {
                    i.t_s.to_string()
                },
                i.transactions.to_string(),
                i.errors.to_string(),
                i.p50_ns.map_or("-".into(), human_ns),
                i.p99_ns.map_or("-".into(), human_ns),
                i.max_ns.map_or("-".into(), human_ns),
            ]
        })
        .collect();
    inner.push_str(&table(
        &[
            "second",
            if udp { "published" } else { "transactions" },
            "errors",
            "p50",
            "p99",
            "max",
        ],
        &rows,
        &[0, 1, 2, 3, 4, 5],
    ));
    card(
        &format!("{p}throughput"),
        "Throughput over time",
        "Per second of the load's measured window; a second the window did not cover whole \
         is listed but not drawn.",
        &inner,
    )
}

/// The target's syscall mix per transaction.
pub fn syscall_section(p: &str, r: &ProfileReport) -> String {
    let d = &r.derived;
    if d.top_syscalls.is_empty() {
        return String::new();
    }
    let target_tx = d.target_transactions();
    let chart = target_tx.map_or_else(String::new, |_| {
        svg::stack_chart(&StackChart {
            id: &format!("{p}chart-syscalls"),
            title: "Syscalls per transaction",
            x_label: "calls per transaction",
            parts: vec!["calls per transaction".into()],
            rows: d
                .top_syscalls
                .iter()
                .map(|s| (s.name.clone(), vec![s.per_transaction]))
                .collect(),
            fmt: |v| format!("{v:.2}"),
        })
    });
    let rows: Vec<Vec<String>> = r
        .trace
        .syscalls
        .iter()
        .take(15)
        .map(|s| {
            let l = s.latency.as_ref();
            let total = r.trace.totals.time_ns.unwrap_or(0);
            vec![
                s.name.clone(),
                s.calls.to_string(),
                target_tx.map_or("-".into(), |t| format!("{:.3}", s.calls as f64 / t)),
                l.map_or("-".into(), |l| human_ns(l.total_ns)),
                l.filter(|_| total > 0).map_or("-".into(), |l| {
                    format!("{:.1}%", 100.0 * l.total_ns as f64 / total as f64)
                }),
                l.map_or("-".into(), |l| human_ns(l.p50_ns)),
                l.map_or("-".into(), |l| human_ns(l.p99_ns)),
                match (s.errors, trace_text::errno_summary(s)) {
                    (None, _) => "-".into(),
                    (Some(e), names) if names.is_empty() => e.to_string(),
                    (Some(e), names) => format!("{e} ({names})"),
                },
            ]
        })
        .collect();
    let t = table(
        &[
            "syscall",
            "calls",
            "per transaction",
            "total time",
            "% of time",
            "p50",
            "p99",
            "errors",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6],
    );
    let cut = shown_of(rows.len(), r.trace.syscalls.len());
    card(
        &format!("{p}syscalls"),
        "Syscall mix of the target",
        &format!(
            "{} Time is wall time from entry to exit: a syscall that blocks (epoll_wait, \
             accept) counts its waiting.",
            match target_tx {
                Some(_) => format!(
                    "{:.2} syscalls per transaction in all{}.",
                    d.syscalls_per_transaction,
                    if d.attribution.is_some() {
                        " (over the traced tree's estimated share of the transactions)"
                    } else {
                        ""
                    }
                ),
                None => "No per-transaction figure: the traced tree's share of the load \
                         is unknown (see the insights)."
                    .to_string(),
            }
        ),
        &(chart + &t + &cut),
    )
}

/// "15 of 25 syscalls shown" under a table that was cut, else nothing.
fn shown_of(shown: usize, all: usize) -> String {
    if shown >= all {
        return String::new();
    }
    format!(
        "<p class=\"lead rows-cut\">{shown} of {all} syscalls shown (the busiest by time, or by \
         calls in count-only mode); totals cover all, and run.json lists every one.</p>"
    )
}

/// What else the target's threads cost over the trace window: page
/// faults, peak memory, the threads and processes seen (as summary.txt
/// lists them).
pub fn resources_section(p: &str, r: &ProfileReport) -> String {
    let res = &r.trace.resources;
    // Over the traced tree's share when others serve the address too.
    let tx = r.derived.target_transactions();
    let per = |v: u64| tx.map_or("-".to_string(), |t| format!("{:.2}", v as f64 / t));
    let rows = vec![
        vec![
            "minor page faults".to_string(),
            res.minor_faults.to_string(),
            per(res.minor_faults),
        ],
        vec![
            "major page faults (needed I/O)".to_string(),
            res.major_faults.to_string(),
            per(res.major_faults),
        ],
        vec![
            "voluntary context switches".to_string(),
            res.voluntary_ctxt_switches.to_string(),
            per(res.voluntary_ctxt_switches),
        ],
        vec![
            "involuntary context switches".to_string(),
            res.involuntary_ctxt_switches.to_string(),
            per(res.involuntary_ctxt_switches),
        ],
        vec![
            "peak RSS (largest process, since its exec)".to_string(),
            res.peak_rss_kb.map_or_else(
                || format!("unknown ({})", res.peak_rss_method),
                |kb| format!("{:.1} MiB", kb as f64 / 1024.0),
            ),
            "-".to_string(),
        ],
        vec![
            "threads seen".to_string(),
            res.threads_seen.to_string(),
            "-".to_string(),
        ],
        vec![
            "processes seen".to_string(),
            res.processes_seen.to_string(),
            "-".to_string(),
        ],
    ];
    let mut lead = format!(
        "The target's threads over the trace window ({}).",
        res.method
    );
    if res.tasks_excluded > 0 {
        let _ = write!(
            lead,
            " {} threads could not be windowed and are left out of the usage totals.",
            res.tasks_excluded
        );
    }
    card(
        &format!("{p}resources"),
        "Page faults, memory, threads and processes",
        &lead,
        &table(
            &["figure", "over the window", "per transaction"],
            &rows,
            &[1, 2],
        ),
    )
}

/// User vs kernel CPU per transaction, target and generator.
pub fn cpu_section(p: &str, r: &ProfileReport) -> String {
    let d = &r.derived;
    let g = &r.load.generator;
    let gen_total = (g.user_cpu_s + g.system_cpu_s).max(1e-12);
    let gen_cpu = d.generator_cpu_us_per_transaction;
    // The generator's control-thread share is taken out pro rata.
    let gu = gen_cpu * g.user_cpu_s / gen_total;
    let gs = gen_cpu * g.system_cpu_s / gen_total;
    // Over the transactions the traced tree served (NaN when unknown).
    let ttx = d.target_transactions().unwrap_or(f64::NAN);
    let tu = d.target_user_cpu_s * 1e6 / ttx;
    let ts = d.target_system_cpu_s * 1e6 / ttx;
    let chart = svg::stack_chart(&StackChart {
        id: &format!("{p}chart-cpu"),
        title: "User vs kernel CPU per transaction",
        x_label: "CPU time per transaction",
        parts: vec!["user".into(), "kernel (system)".into()],
        rows: [
            ("target".to_string(), vec![tu, ts]),
            ("load generator".to_string(), vec![gu, gs]),
        ]
        .into_iter()
        .filter(|(_, v)| v.iter().all(|x| x.is_finite()))
        .collect(),
        fmt: units::fmt_us,
    });
    let rows = vec![
        vec![
            "target".to_string(),
            format!("{:.3} s", d.target_user_cpu_s),
            format!("{:.3} s", d.target_system_cpu_s),
            if ttx.is_finite() {
                units::fmt_us(tu + ts)
            } else {
                "-".into()
            },
            format!("{:.0}%", 100.0 * d.target_kernel_share),
        ],
        vec![
            "load generator".to_string(),
            format!("{:.3} s", g.user_cpu_s),
            format!("{:.3} s", g.system_cpu_s),
            units::fmt_us(gen_cpu),
            format!("{:.0}%", 100.0 * g.system_cpu_s / gen_total),
        ],
    ];
    let t = table(
        &[
            "process",
            "user",
            "system",
            "CPU per transaction",
            "in the kernel",
        ],
        &rows,
        &[1, 2, 3, 4],
    );
    card(
        &format!("{p}cpu"),
        "User vs kernel CPU",
        &format!(
            "Target over the trace window; generator over its run, without profile's own \
             tracing control thread ({:.3} s). {}",
            d.control_thread_cpu_s,
            if ttx.is_finite() {
                format!(
                    "Context switches per transaction: {:.2} voluntary, {:.2} involuntary.",
                    d.voluntary_switches_per_transaction, d.involuntary_switches_per_transaction
                )
            } else {
                "The traced tree's share of the load is unknown: no per-transaction target \
                 figure."
                    .to_string()
            }
        ),
        &(chart + &t),
    )
}

/// Who else serves the load's address, and the traced tree's share of it
/// (empty when only the traced tree serves it).
pub fn attribution_section(p: &str, r: &ProfileReport) -> String {
    let Some(a) = &r.derived.attribution else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = a
        .shared_with
        .iter()
        .map(|s| {
            vec![
                s.pid.to_string(),
                s.comm.clone(),
                if s.how == "same_socket" {
                    "holds the same listening socket".into()
                } else {
                    "its own listener on the port (SO_REUSEPORT)".into()
                },
            ]
        })
        .collect();
    let lead = match (a.share, a.transactions) {
        (Some(share), Some(t)) => format!(
            "Other processes serve the load's address too. The traced tree served an \
             estimated {:.1}% of the load's {} transactions (about {t:.0}); every \
             per-transaction target figure on this page is over those. How: {}.",
            share * 100.0,
            r.derived.transactions,
            a.method
        ),
        _ => format!(
            "UNATTRIBUTED: other processes serve the load's address too and the traced \
             tree's share is unknown ({}); no per-transaction target figure is given.",
            a.method
        ),
    };
    card(
        &format!("{p}shared"),
        "Shared address",
        &lead,
        &table(&["pid", "command", "how"], &rows, &[0]),
    )
}

/// The per-process breakdown of a multi-process target (empty for one
/// process).
pub fn processes_section(p: &str, r: &ProfileReport) -> String {
    let procs = &r.trace.processes;
    if procs.len() < 2 {
        return String::new();
    }
    let rows: Vec<Vec<String>> = procs
        .iter()
        .map(|x| {
            vec![
                x.pid.to_string(),
                format!("{}{}", x.comm, if x.exited { " (exited)" } else { "" }),
                x.threads.to_string(),
                format!("{:.3} s", x.user_cpu_s),
                format!("{:.3} s", x.system_cpu_s),
                x.calls.to_string(),
                x.errors.map_or("-".into(), |e| e.to_string()),
                x.time_ns.map_or("-".into(), human_ns),
                x.minor_faults.to_string(),
                x.major_faults.to_string(),
            ]
        })
        .collect();
    card(
        &format!("{p}processes"),
        "Per process",
        &format!(
            "The traced tree had {} processes; each one's CPU, syscalls and faults over the \
             trace window, busiest first.",
            procs.len()
        ),
        &table(
            &[
                "pid",
                "command",
                "threads",
                "user",
                "system",
                "syscalls",
                "errors",
                "syscall time",
                "minor faults",
                "major faults",
            ],
            &rows,
            &[0, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
    )
}

/// Everything about one profile, element ids prefixed with `p`.
pub fn profile_body(p: &str, r: &ProfileReport) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<section class=\"card\" id=\"{p}insights\"><h3>What this run says</h3>{}</section>",
        list(&r.insights, "insights")
    );
    b.push_str(&latency_section(p, &r.load));
    b.push_str(&throughput_section(p, &r.load));
    b.push_str(&syscall_section(p, r));
    b.push_str(&cpu_section(p, r));
    b.push_str(&resources_section(p, r));
    b.push_str(&attribution_section(p, r));
    b.push_str(&processes_section(p, r));
    if let Some(e) = &r.evidence {
        b.push_str(&card(
            &format!("{p}kernel"),
            "What the kernel counted",
            &format!(
                "Counter deltas of network namespace {} over the window (per namespace, not per \
                 process{}), the target's sockets sampled through sock_diag, and its threads' \
                 run-queue delay.",
                e.netns.id,
                if e.netns.shared_with_generator {
                    "; the load generator shares it"
                } else {
                    ""
                }
            ),
            &format!(
                "{}{}",
                e.html(),
                list(
                    &e.unavailable
                        .iter()
                        .map(|u| format!("not measured: {u}"))
                        .collect::<Vec<_>>(),
                    "notes"
                )
            ),
        ));
    }
    let tracer = &r.trace.tracer;
    let mut trows = vec![vec![
        "syscall events traced".to_string(),
        tracer.events.to_string(),
    ]];
    if let Some(ns) = tracer.ns_per_event {
        trows.push(vec!["BPF time per event".into(), format!("{ns:.0} ns")]);
    }
    if let Some(t) = tracer.bpf_time_ns {
        trows.push(vec!["BPF time over the window".into(), human_ns(t)]);
    }
    if let Some(c) = tracer.cpu_share {
        trows.push(vec![
            "share of one CPU".into(),
            format!("{:.2}%", c * 100.0),
        ]);
    }
    if let Some(sp) = &tracer.bpf_split {
        trows.push(vec![
            "BPF on the traced events".into(),
            format!(
                "{} ({:.0} ns per event)",
                human_ns(sp.traced.total_ns),
                sp.traced.ns_per_syscall
            ),
        ]);
        trows.push(vec![
            "BPF filtering everyone else".into(),
            format!(
                "{} ({} other syscalls x {:.0} ns, count scaled by time)",
                human_ns(sp.filtered.total_ns),
                sp.filtered.syscalls,
                sp.filtered.ns_per_syscall
            ),
        ]);
    }
    if let Some(sl) = &tracer.slow_path {
        trows.push(vec![
            "syscall hook slow path".into(),
            format!(
                "{:.0} ns per syscall ({:.0}..{:.0} ns over {} calibration rounds)",
                sl.ns_per_syscall, sl.min_ns, sl.max_ns, sl.rounds
            ),
        ]);
    }
    if let Some(a) = &tracer.attributed {
        let pct = |v: Option<f64>, of: &str| {
            v.map_or_else(String::new, |v| format!(", {:.2}% of {of}", v * 100.0))
        };
        trows.push(vec![
            "cost to the target (its events' BPF + slow path)".into(),
            format!(
                "{}{}",
                human_ns(a.target_ns),
                pct(a.target_cpu_share, "its CPU time")
            ),
        ]);
        trows.push(vec![
            "cost to the rest of the machine".into(),
            format!(
                "{}{}",
                human_ns(a.collateral_ns),
                pct(a.collateral_machine_share, "the machine's busy CPU")
            ),
        ]);
        if let (Some(st), Some(so)) = (a.count_only_saves_target_ns, a.count_only_saves_others_ns) {
            trows.push(vec![
                "--count-only would save at most".into(),
                format!(
                    "{} of the target's cost, {} of the rest's",
                    human_ns(st),
                    human_ns(so)
                ),
            ]);
        }
    }
    b.push_str(&card(
        &format!("{p}tracer"),
        "The tracer's own cost",
        "BPF time from the kernel's run-time accounting and the programs' own timing in sampled \
         slices; the syscall hook's slow path calibrated at start (docs/trace.md).",
        &table(&["figure", "value"], &trows, &[1]),
    ));
    let mut extra = vec![
        (
            "target".to_string(),
            format!(
                "{} (pid {}, {}), at {}",
                r.target
                    .command
                    .as_ref()
                    .map_or_else(|| "attached".into(), shell_words::join),
                r.target.pid,
                r.target.comm,
                r.target.address
            ),
        ),
        ("load".to_string(), shell_words::join(&r.load_command)),
        (
            "profile command".to_string(),
            shell_words::join(&r.command_line),
        ),
        ("started".to_string(), r.started_at.clone()),
        ("windows".to_string(), r.windows.note.clone()),
    ];
    if let Some(st) = &r.target.stop {
        extra.push(("target stop".to_string(), st.describe()));
    }
    b.push_str(&card(
        &format!("{p}environment"),
        "How it was measured",
        "Everything needed to reproduce the run.",
        &environment(&r.header.build, &r.machine, &extra),
    ));
    let mut notes: Vec<String> = r.load.notes.clone();
    notes.extend(r.trace.notes.iter().cloned());
    if !notes.is_empty() {
        let _ = write!(
            b,
            "<details><summary>Notes from the load and the tracer</summary>{}</details>",
            list(&notes, "notes")
        );
    }
    if !r.advice.is_empty() {
        b.push_str(&card(
            &format!("{p}advice"),
            "Settings the evidence points at",
            "Rows of `sockscope tune` that this run's own evidence supports; sockscope changed \
             nothing.",
            &super::super::tune::table(&r.advice).to_html(),
        ));
    }
    b
}

/// The report page of one profile.
pub fn profile_page(r: &ProfileReport) -> String {
    let body = format!("{}{}", caveats_box(&r.caveats), profile_body("", r));
    page(
        "sockscope profile",
        &format!(
            "{} at {}, under {}; {}",
            r.target.comm,
            r.target.address,
            r.load_command
                .get(2..)
                .map_or(String::new(), |t| t.join(" ")),
            r.started_at
        ),
        &body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    /// The `points` of the polyline of series `name` in chart `id`.
    fn polyline<'a>(html: &'a str, id: &str, name: &str) -> &'a str {
        let chart = &html[html.find(&format!("id=\"{id}\"")).expect(id)..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        let series = &chart[chart.find(&format!("data-name=\"{name}\"")).expect(name)..];
        let pts = &series[series.find("points=\"").unwrap() + 8..];
        &pts[..pts.find('"').unwrap()]
    }

    fn x_tick_labels(html: &str, id: &str) -> Vec<String> {
        let chart = &html[html.find(&format!("id=\"{id}\"")).expect(id)..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        chart
            .split("<line class=\"tickmark\"")
            .skip(1)
            .map(|t| {
                let t = &t[t.find('>').unwrap() + 1..];
                let t = &t[t.find('>').unwrap() + 1..];
                t[..t.find('<').unwrap()].to_string()
            })
            .collect()
    }

    #[test]
    fn a_partial_last_second_is_listed_but_not_drawn() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        assert!(r.load.intervals[2].partial);
        let html = profile_page(&r);
        // Two whole seconds: two points per line, not three.
        for (id, name) in [
            ("chart-throughput", "transactions"),
            ("chart-interval-latency", "p50"),
            ("chart-interval-latency", "p99"),
        ] {
            let pts = polyline(&html, id, name);
            assert_eq!(pts.split(' ').count(), 2, "{id} {name}: {pts}");
        }
        assert!(
            html.contains("Second 2 lasted only 3.10ms (9 transactions)"),
            "the chart must say why the last second is not drawn"
        );
        assert!(html.contains("<td class=\"n\">2 (partial: 3.10ms)</td>"));
        // The p99 of the tail's 9 transactions is in the table, not the chart.
        assert!(html.contains("5.80ms"));
    }

    #[test]
    fn per_second_axes_tick_whole_seconds() {
        let r = fixtures::profile(&fixtures::forking_server());
        let html = profile_page(&r);
        for id in ["chart-throughput", "chart-interval-latency"] {
            let ticks = x_tick_labels(&html, id);
            assert_eq!(ticks, ["0", "1", "2"], "{id}");
        }
    }

    #[test]
    fn the_report_shows_what_the_summary_shows() {
        let mut r = fixtures::profile(&fixtures::forking_server());
        let row = r
            .trace
            .syscalls
            .iter_mut()
            .find(|s| s.name == "pselect6")
            .unwrap();
        row.errors = Some(517);
        row.errnos = vec![crate::report::trace::ErrnoCount {
            name: "ERESTARTNOHAND".into(),
            errno: 514,
            count: 517,
        }];
        let html = profile_page(&r);
        assert!(html.contains("517 (ERESTARTNOHAND 517)"), "errno names");
        assert!(html.contains("15 of 18 syscalls shown"));
        assert!(html.contains("<td>minor page faults</td><td class=\"n\">1185611</td>"));
        assert!(html.contains("<td class=\"n\">376.62</td>"));
        assert!(html.contains("28.7 MiB"));
        assert!(html.contains("<td>processes seen</td><td class=\"n\">3158</td>"));
        assert!(html.contains("SIGTERM after 0.04 s, exit status 0"));
        let text = crate::report::profile_text::render(&r);
        assert!(text.contains("(15 of 18 syscalls shown; totals cover all)"));
        for (what, out) in [("html", &html), ("text", &text)] {
            for debug in ["Some(", "None", "[\"", "\\\""] {
                assert!(
                    !out.contains(debug),
                    "{what} holds Rust debug text {debug:?}"
                );
            }
        }
    }
}
