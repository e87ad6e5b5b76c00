//! The `strace -c` / `perf trace -s` style table for people.

use std::fmt::Write as _;

use super::table::{Align, Column, Table, TextLayout};
use super::trace::{
    CostAttribution, GroupRow, Resources, SlowPath, StartupCost, StartupPhase, SyscallRow,
    ThreadRow, Totals, TraceReport, TracerCost,
};
use super::units::{counted, human_ns};
use crate::text::{escape, escape_block};

/// Row order of the syscall table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Total time inside the syscall (default; calls in count-only mode).
    Time,
    /// Number of calls.
    Calls,
    /// Number of errors.
    Errors,
    /// 99th percentile latency.
    P99,
    /// Syscall name.
    Name,
}

/// What to show of the syscall table.
#[derive(Clone, Debug)]
pub struct TableView {
    /// Row order.
    pub sort: SortKey,
    /// Show at most this many rows.
    pub top: Option<usize>,
    /// Only syscalls that returned errors.
    pub errors_only: bool,
}

/// The rows `view` shows, in its order: what the syscall table of a trace
/// and of a profile (text and page alike) list.
pub fn shown_rows<'a>(rows: &'a [SyscallRow], view: &TableView) -> Vec<&'a SyscallRow> {
    let mut out: Vec<&SyscallRow> = rows
        .iter()
        .filter(|r| !view.errors_only || r.errors.unwrap_or(0) > 0)
        .collect();
    let time = |r: &SyscallRow| r.latency.as_ref().map_or(0, |l| l.total_ns);
    let p99 = |r: &SyscallRow| r.latency.as_ref().map_or(0, |l| l.p99_ns);
    match view.sort {
        SortKey::Time => out.sort_by(|a, b| {
            time(b)
                .cmp(&time(a))
                .then(b.calls.cmp(&a.calls))
                .then(a.name.cmp(&b.name))
        }),
        SortKey::Calls => out.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name))),
        SortKey::Errors => out.sort_by(|a, b| {
            b.errors
                .unwrap_or(0)
                .cmp(&a.errors.unwrap_or(0))
                .then(a.name.cmp(&b.name))
        }),
        SortKey::P99 => out.sort_by(|a, b| p99(b).cmp(&p99(a)).then(a.name.cmp(&b.name))),
        SortKey::Name => out.sort_by(|a, b| a.name.cmp(&b.name)),
    }
    if let Some(n) = view.top {
        out.truncate(n);
    }
    out
}

/// The three most frequent errnos of a syscall: `EAGAIN 2911, EINTR 3`.
pub fn errno_summary(r: &SyscallRow) -> String {
    r.errnos
        .iter()
        .take(3)
        .map(|e| format!("{} {}", e.name, e.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders the whole human-readable report, its control characters written
/// out: process, cgroup and unit names are anyone's to choose (see
/// [`crate::text`]).
pub fn render(rep: &TraceReport, view: &TableView) -> String {
    let mut s = String::new();
    title(&mut s, rep);
    let count_only = rep.options.count_only;
    let _ = writeln!(s);
    s.push_str(&syscall_table(&rep.syscalls, &rep.totals, count_only, view));
    if let (Some(by), Some(groups)) = (&rep.by, &rep.groups) {
        s.push_str(&group_table(groups, by, &rep.totals, count_only, view.top));
    }

    if let Some(threads) = &rep.threads {
        thread_table(&mut s, threads, count_only);
    }

    if let Some(table) = process_table(rep) {
        let _ = write!(s, "\nper process:\n{table}");
    }

    resources(&mut s, &rep.resources);
    tracer(&mut s, &rep.tracer);
    if let Some(a) = &rep.anatomy {
        s.push('\n');
        s.push_str(&super::anatomy::render(a));
        if let Some(t) = a.commands_text() {
            s.push_str(&t);
        }
    }
    if let Some(st) = &rep.stacks {
        s.push('\n');
        s.push_str(&super::stacks_text::render(st));
    }
    if let Some(t) = &rep.tail {
        s.push('\n');
        s.push_str(&super::slow::text(t));
    }
    for n in &rep.notes {
        let _ = writeln!(s, "note: {n}");
    }
    escape_block(&s).into_owned()
}

/// The syscall table (count-only or with latency), with its totals row.
pub fn syscall_table(
    rows: &[SyscallRow],
    totals: &Totals,
    count_only: bool,
    view: &TableView,
) -> String {
    let mut s = String::new();
    let shown = shown_rows(rows, view);
    if count_only {
        count_table(&mut s, totals, &shown);
    } else {
        latency_table(&mut s, totals, &shown);
    }
    if shown.len() < rows.len() {
        let _ = writeln!(
            s,
            "({} of {} syscalls shown; totals cover all)",
            shown.len(),
            rows.len()
        );
    }
    s
}

/// The `--by` breakdown: one line per group (its calls, errors, time and
/// share) with its busiest syscalls, then the totals the groups add up to.
/// `top` bounds the groups shown (the totals still cover all).
pub fn group_table(
    groups: &[GroupRow],
    by: &str,
    totals: &Totals,
    count_only: bool,
    top: Option<usize>,
) -> String {
    let mut s = String::new();
    let name = |g: &GroupRow| {
        if g.other {
            "(other)".to_string()
        } else {
            // A name is one line whatever it holds.
            match (g.pid, &g.comm, &g.cgroup) {
                (Some(p), Some(c), _) => format!("{p} {}", escape(c)),
                (_, Some(c), _) => escape(c).into_owned(),
                (_, _, Some(cg)) => escape(cg).into_owned(),
                _ => "?".into(),
            }
        }
    };
    let _ = writeln!(
        s,
        "
by {by}:"
    );
    let total_time = totals.time_ns.unwrap_or(0).max(1) as f64;
    let total_calls = totals.calls.max(1) as f64;
    let mut columns = if count_only {
        vec![Column::text("% calls", 7, Align::Right)]
    } else {
        vec![
            Column::text("% time", 6, Align::Right),
            Column::text("total", 10, Align::Right),
        ]
    };
    columns.push(Column::text("calls", 10, Align::Right));
    if !count_only {
        columns.push(Column::text("errors", 8, Align::Right));
    }
    columns.push(Column::text(by, 32, Align::Left).gap(2));
    columns.push(Column::text("top syscalls", 0, Align::Left));
    let shown = top.unwrap_or(usize::MAX).min(groups.len());
    let mut rows: Vec<Vec<String>> = groups[..shown]
        .iter()
        .map(|g| {
            let mut by_calls: Vec<&SyscallRow> = g.syscalls.iter().collect();
            by_calls.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
            let tops = by_calls
                .iter()
                .take(3)
                .map(|r| format!("{} {}", r.name, r.calls))
                .collect::<Vec<_>>()
                .join(", ");
            let mut row = if count_only {
                vec![format!("{:.2}", 100.0 * g.calls as f64 / total_calls)]
            } else {
                vec![
                    format!("{:.2}", 100.0 * g.time_ns.unwrap_or(0) as f64 / total_time),
                    human_ns(g.time_ns.unwrap_or(0)),
                ]
            };
            row.push(g.calls.to_string());
            if !count_only {
                row.push(g.errors.unwrap_or(0).to_string());
            }
            row.extend([name(g), tops]);
            row
        })
        .collect();
    rows.push(totals_row(totals, count_only, &[]));
    let table = Table { columns, rows };
    let (body, total) = table.text_parts(&TextLayout {
        footer: 1,
        ruled: false,
        open_end: true,
    });
    s.push_str(&body);
    if shown < groups.len() {
        let _ = writeln!(
            s,
            "({shown} of {} groups shown; totals cover all)",
            groups.len()
        );
    }
    s.push_str(&total);
    s
}

/// The totals row of a syscall or group table: the shares (100.00), time,
/// calls and errors of them all, `blank` cells, and "total".
fn totals_row(totals: &Totals, count_only: bool, blank: &[&str]) -> Vec<String> {
    let mut row = vec!["100.00".to_string()];
    if !count_only {
        row.push(human_ns(totals.time_ns.unwrap_or(0)));
    }
    row.push(totals.calls.to_string());
    if !count_only {
        row.push(totals.errors.unwrap_or(0).to_string());
    }
    row.extend(blank.iter().map(|b| b.to_string()));
    row.push("total".into());
    row
}

/// The layout of a syscall table: ruled off, its names running free.
const SYSCALL_LAYOUT: TextLayout = TextLayout {
    footer: 1,
    ruled: true,
    open_end: true,
};

/// The first line: what was traced, how long, and how it ended.
fn title(s: &mut String, rep: &TraceReport) {
    let what = match (&rep.target.command, &rep.target.scope) {
        (Some(cmd), _) => shell_words::join(cmd),
        (None, Some(_)) => escape(&rep.target.comm).into_owned(),
        (None, None) => format!("pid {} ({})", rep.target.pid, escape(&rep.target.comm)),
    };
    let _ = writeln!(
        s,
        "sockscope trace: {what} [{}], {:.3} s, ended: {}{}",
        rep.target.mode,
        rep.window.duration_s,
        rep.window.end_reason.replace('_', " "),
        if rep.window.complete {
            ""
        } else {
            " (INCOMPLETE window)"
        }
    );
}

/// The syscall table of a count-only trace: calls and their share.
fn count_table(s: &mut String, totals: &Totals, rows: &[&SyscallRow]) {
    let total_calls = totals.calls.max(1) as f64;
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("{:.2}", 100.0 * r.calls as f64 / total_calls),
                r.calls.to_string(),
                r.name.clone(),
            ]
        })
        .collect();
    cells.push(totals_row(totals, true, &[]));
    let table = Table {
        columns: vec![
            Column::text("% calls", 7, Align::Right),
            Column::text("calls", 10, Align::Right),
            Column::text("syscall", 16, Align::Left).gap(2),
        ],
        rows: cells,
    };
    s.push_str(&table.to_text_with(&SYSCALL_LAYOUT));
}

/// The syscall table with latency: time, calls, errors, percentiles and
/// the most frequent errnos.
fn latency_table(s: &mut String, totals: &Totals, rows: &[&SyscallRow]) {
    let total_time = totals.time_ns.unwrap_or(0).max(1) as f64;
    let mut columns = vec![
        Column::text("% time", 6, Align::Right),
        Column::text("total", 10, Align::Right),
        Column::text("calls", 10, Align::Right),
        Column::text("errors", 8, Align::Right),
    ];
    for h in ["avg", "min", "p50", "p90", "p99", "max"] {
        columns.push(Column::text(h, 9, Align::Right));
    }
    columns.push(Column::text("syscall", 18, Align::Left).gap(2));
    columns.push(Column::text("errors", 6, Align::Left));
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let l = r.latency.as_ref();
            let g = |f: fn(&super::trace::Latency) -> u64| l.map_or("-".into(), |l| human_ns(f(l)));
            vec![
                format!(
                    "{:.2}",
                    100.0 * l.map_or(0, |l| l.total_ns) as f64 / total_time
                ),
                g(|l| l.total_ns),
                r.calls.to_string(),
                r.errors.unwrap_or(0).to_string(),
                g(|l| l.avg_ns),
                g(|l| l.min_ns),
                g(|l| l.p50_ns),
                g(|l| l.p90_ns),
                g(|l| l.p99_ns),
                g(|l| l.max_ns),
                r.name.clone(),
                errno_summary(r),
            ]
        })
        .collect();
    cells.push(totals_row(totals, false, &[""; 6]));
    let table = Table {
        columns,
        rows: cells,
    };
    s.push_str(&table.to_text_with(&SYSCALL_LAYOUT));
}

/// Per thread: calls, errors, time and top syscalls (--per-thread).
fn thread_table(s: &mut String, threads: &[ThreadRow], count_only: bool) {
    let _ = writeln!(s, "\nper thread:");
    let rows = threads
        .iter()
        .map(|t| {
            let top = t
                .syscalls
                .iter()
                .take(3)
                .map(|c| format!("{} {}", c.name, c.calls))
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                if t.tid == 0 {
                    "other".to_string()
                } else {
                    t.tid.to_string()
                },
                t.pid.to_string(),
                escape(&t.comm).into_owned(),
                t.calls.to_string(),
                t.errors.to_string(),
                if count_only {
                    "-".into()
                } else {
                    human_ns(t.time_ns)
                },
                format!(
                    "{top}{}",
                    match t.ended.as_deref() {
                        Some("exec") => " (then exec'd)",
                        Some(_) => " (exited)",
                        None => "",
                    }
                ),
            ]
        })
        .collect();
    let table = Table {
        columns: vec![
            Column::text("tid", 8, Align::Right),
            Column::text("pid", 8, Align::Right),
            Column::text("comm", 16, Align::Left),
            Column::text("calls", 10, Align::Right),
            Column::text("errors", 8, Align::Right),
            Column::text("time", 10, Align::Right),
            Column::text("top syscalls", 0, Align::Left).gap(2),
        ],
        rows,
    };
    s.push_str(&table.to_text_with(&TextLayout {
        open_end: true,
        ..TextLayout::default()
    }));
}

/// The traced tree's CPU, context switches, faults, memory and tasks.
fn resources(s: &mut String, r: &Resources) {
    let cpu = r.user_cpu_s + r.system_cpu_s;
    let _ = writeln!(s, "\nresources over the window ({}):", r.method);
    let _ = writeln!(
        s,
        "  CPU      user {:.3} s, system {:.3} s{}",
        r.user_cpu_s,
        r.system_cpu_s,
        if cpu > 0.0 {
            format!(
                " ({:.0}% of it in the kernel)",
                100.0 * r.system_cpu_s / cpu
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "  switches {} voluntary, {} involuntary",
        r.voluntary_ctxt_switches, r.involuntary_ctxt_switches
    );
    let _ = writeln!(
        s,
        "  faults   {} minor, {} major",
        r.minor_faults, r.major_faults
    );
    match r.peak_rss_kb {
        Some(kb) => {
            let _ = writeln!(
                s,
                "  peak RSS {:.1} MiB (largest process; high-water mark since its exec)",
                kb as f64 / 1024.0
            );
        }
        None => {
            let _ = writeln!(s, "  peak RSS unknown ({})", r.peak_rss_method);
        }
    }
    let _ = writeln!(
        s,
        "  seen     {} in {}{}",
        counted(r.threads_seen, "thread", "threads"),
        counted(r.processes_seen, "process", "processes"),
        if r.tasks_excluded > 0 {
            format!(" ({} left out of the usage totals)", r.tasks_excluded)
        } else {
            String::new()
        }
    );
}

/// What the tracer itself cost: the total, its parts (BPF on the traced
/// events, BPF filtering everyone else, the syscall hook's slow path), who
/// paid them, and the raw per-program figures.
fn tracer(s: &mut String, t: &TracerCost) {
    let _ = write!(s, "\ntracer: {} syscall events", t.events);
    if let (Some(per), Some(share)) = (t.ns_per_event, t.cpu_share) {
        let _ = write!(
            s,
            "; BPF time {} ({:.0} ns per event, {:.2}% of one CPU)",
            human_ns(t.bpf_time_ns.unwrap_or(0)),
            per,
            100.0 * share
        );
    }
    let _ = writeln!(s);
    for line in tracer_parts(t) {
        let _ = writeln!(s, "  {line}");
    }
    if let Some(st) = &t.startup {
        let _ = writeln!(s, "  {}", startup_line(st));
    }
    if !t.programs.is_empty() {
        let _ = writeln!(
            s,
            "  per program, in the sampled slices (the kernel's figures, the measurement's clock \
             reads included):"
        );
    }
    for p in &t.programs {
        let _ = writeln!(
            s,
            "  {:<14} {:>12} runs x {:>6.1} ns",
            p.name, p.run_count, p.ns_per_run
        );
    }
    if t.ringbuf_drops > 0 {
        let _ = writeln!(
            s,
            "  {} lifecycle records lost (ring buffer full)",
            t.ringbuf_drops
        );
    }
}

fn per_run(enter: f64, exit: Option<f64>) -> String {
    match exit {
        Some(x) => format!("sys_enter {enter:.0} + sys_exit {x:.0}"),
        None => format!("sys_enter {enter:.0}"),
    }
}

fn share(v: Option<f64>, of: &str) -> String {
    v.map_or_else(String::new, |v| format!(" ({:.2}% of {of})", v * 100.0))
}

/// The tracer's cost in parts, one line each (empty when not measured).
pub fn tracer_parts(t: &TracerCost) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(b) = &t.bpf_split {
        out.push(format!(
            "{:<26} {:>8}  ({:.0} ns per event: {})",
            "BPF on the traced events",
            human_ns(b.traced.total_ns),
            b.traced.ns_per_syscall,
            per_run(b.traced.enter_ns_per_run, b.traced.exit_ns_per_run)
        ));
        out.push(format!(
            "{:<26} {:>8}  ({} other syscalls x {:.0} ns: {}; count scaled by time)",
            "BPF filtering the rest",
            human_ns(b.filtered.total_ns),
            b.filtered.syscalls,
            b.filtered.ns_per_syscall,
            per_run(b.filtered.enter_ns_per_run, b.filtered.exit_ns_per_run)
        ));
    }
    if let Some(sp) = &t.slow_path {
        out.push(slow_path_line(sp, t.attributed.as_ref()));
    }
    if let Some(a) = &t.attributed {
        out.push(format!(
            "{:<26} {:>8}  = BPF on its events + slow path of its syscalls{}",
            "cost to the target",
            human_ns(a.target_ns),
            share(a.target_cpu_share, "its CPU time")
        ));
        out.push(format!(
            "{:<26} {:>8}  = filtering + slow path of their syscalls{}",
            "cost to the rest",
            human_ns(a.collateral_ns),
            share(a.collateral_machine_share, "the machine's busy CPU")
        ));
        if let (Some(st), Some(so)) = (a.count_only_saves_target_ns, a.count_only_saves_others_ns) {
            out.push(format!(
                "{:<26} at most {} of the target's cost and {} of the rest's (no sys_exit hook)",
                "--count-only would save",
                human_ns(st),
                human_ns(so)
            ));
        }
    }
    out
}

/// The slow path's line: its figure with the rounds' spread, or, when the
/// calibration could not tell it from the machine's noise, that.
fn slow_path_line(sp: &SlowPath, attributed: Option<&CostAttribution>) -> String {
    let label = "syscall hook slow path";
    if sp.within_noise {
        return format!(
            "{label:<26} not told apart from noise on this machine (rounds {}): charged as 0",
            rounds_range(sp)
        );
    }
    let mut line = format!(
        "{label:<26} {:.0} ns per syscall (rounds {}",
        sp.ns_per_syscall,
        rounds_range(sp)
    );
    if let Some(x) = sp.exit_ns_per_syscall {
        line.push_str(&format!("; sys_exit's part {:.0} ns", x.max(0.0)));
    }
    line.push(')');
    if let Some(a) = attributed {
        line.push_str(&format!(
            ": {} on the traced syscalls, {} on the rest",
            human_ns(a.slow_path_target_ns),
            human_ns(a.slow_path_others_ns)
        ));
    }
    line
}

/// The calibration rounds' spread, as "80 to 92 ns" (a range of signed
/// figures written with a dash reads as a subtraction).
pub fn rounds_range(sp: &SlowPath) -> String {
    format!("{:.0} to {:.0} ns", sp.min_ns, sp.max_ns)
}

/// The start-up line: time before the window opened and sockscope's CPU,
/// the largest phases named.
pub fn startup_line(st: &StartupCost) -> String {
    let mut phases: Vec<&StartupPhase> = st.phases.iter().filter(|p| p.ms >= 0.5).collect();
    phases.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    let parts: Vec<String> = phases
        .iter()
        .take(3)
        .map(|p| format!("{} {:.0} ms", p.name.replace('_', " "), p.ms))
        .collect();
    format!(
        "{:<26} {:.0} ms before the window opened ({}), {:.0} ms of sockscope's CPU",
        "start-up",
        st.before_window_ms,
        if parts.is_empty() {
            "no phase over 0.5 ms".to_string()
        } else {
            parts.join(", ")
        },
        st.cpu_ms
    )
}

/// Processes the text table shows (a system-wide trace can see thousands).
const PROCESS_ROWS: usize = 30;

/// The per-process breakdown as a table, busiest first; None when the
/// trace saw a single process (the totals already say it all).
pub fn process_table(rep: &TraceReport) -> Option<String> {
    if rep.processes.len() < 2 {
        return None;
    }
    let rows = rep
        .processes
        .iter()
        .take(PROCESS_ROWS)
        .map(|p| {
            let mut row = vec![
                p.pid.to_string(),
                escape(&p.comm).into_owned(),
                p.threads.to_string(),
                format!("{:.3}", p.user_cpu_s),
                format!("{:.3}", p.system_cpu_s),
                p.calls.to_string(),
                p.errors.map_or_else(|| "-".into(), |e| e.to_string()),
                p.time_ns.map_or_else(|| "-".into(), human_ns),
                p.minor_faults.to_string(),
                p.major_faults.to_string(),
            ];
            // The row of a process still running stops at its faults.
            if p.exited {
                row.push("(exited)".into());
            }
            row
        })
        .collect();
    let table = Table {
        columns: vec![
            Column::text("pid", 8, Align::Right),
            Column::text("comm", 16, Align::Left),
            Column::text("threads", 7, Align::Right),
            Column::text("user s", 9, Align::Right),
            Column::text("system s", 9, Align::Right),
            Column::text("syscalls", 10, Align::Right),
            Column::text("errors", 8, Align::Right),
            Column::text("sys time", 10, Align::Right),
            Column::text("min flt", 9, Align::Right),
            Column::text("maj flt", 9, Align::Right),
            Column::text("", 0, Align::Left).gap(2),
        ],
        rows,
    };
    let mut s = table.to_text_with(&TextLayout {
        open_end: true,
        ..TextLayout::default()
    });
    if rep.processes.len() > PROCESS_ROWS {
        let _ = writeln!(
            s,
            "({PROCESS_ROWS} of {} processes shown, busiest first; --json has every one)",
            rep.processes.len()
        );
    }
    Some(s)
}
