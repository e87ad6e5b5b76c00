//! Figures derived from one profile window, and the plain sentences that
//! say what they mean. Everything is per transaction so runs of different
//! lengths and rates compare.

use serde_json::Value;

use super::load::LoadReport;
use super::profile::{Attribution, ClassShare, Derived, SyscallShare};
use super::syscall_class::{EXECS, SyscallClass, TASK_CREATING};
use super::trace::TraceReport;
use super::units::{counted, fmt_us, human_ns};
use super::volume;
pub use super::volume::{Volume, base_counted, server_figures};
use super::workload::WorkloadRecord;

/// Which kernel path, in a run without the syscall tracer.
const UNTRACED_KERNEL: &str = "which kernel path is not known: no syscall was recorded";
/// How many syscalls `top_syscalls` keeps.
pub const TOP: usize = 8;

fn per(x: f64, tx: u64) -> f64 {
    if tx == 0 { 0.0 } else { x / tx as f64 }
}

/// Requests in flight when the load's window ended: answered during the
/// drain, or never. The server may have counted any of them.
fn owed_at_end(load: &LoadReport) -> u64 {
    load.errors.unanswered_at_end + load.errors.answered_after_end
}

/// Derives the per-transaction figures. `control_cpu_s` is the CPU that
/// profile's own tracing control thread used during the load (it runs in
/// the generator's process and is taken out of the generator's figure).
pub fn derive(
    load: &LoadReport,
    trace: &TraceReport,
    server: Option<&Value>,
    control_cpu_s: f64,
) -> Derived {
    let r = &trace.resources;
    let d = base(
        load,
        (r.user_cpu_s, r.system_cpu_s),
        trace.window.duration_s,
        server,
        control_cpu_s,
    );
    with_trace(d, trace)
}

/// The per-request figures of a run whose requests the request anatomy
/// counted (`--load-cmd`, observe only): [`base_counted`], then the
/// tracer's figures over its count. `anatomy_cpu` is the target's (user,
/// system) CPU over the anatomy's own window, when it was read: the CPU
/// per request is then divided within that one window.
pub fn derive_counted(
    w: &WorkloadRecord,
    trace: &TraceReport,
    server: Option<&Value>,
    anatomy_cpu: Option<(f64, f64)>,
) -> Derived {
    let r = &trace.resources;
    let mut d = base_counted(
        w,
        (r.user_cpu_s, r.system_cpu_s),
        trace.window.duration_s,
        server,
    );
    if let Some((user, system)) = anatomy_cpu.filter(|_| d.transactions > 0) {
        d.target_cpu_us_per_transaction = (user + system) * 1e6 / d.transactions as f64;
    }
    with_trace(d, trace)
}

/// Fills the figures only the syscall tracer measures into `d` (made by
/// [`base`] or [`base_counted`]), per `d.transactions`.
pub fn with_trace(mut d: Derived, trace: &TraceReport) -> Derived {
    let tx = d.transactions;
    let r = &trace.resources;
    let cpu = r.user_cpu_s + r.system_cpu_s;
    let total_time: u64 = trace.totals.time_ns.unwrap_or(0);
    let mut rows: Vec<&super::trace::SyscallRow> = trace.syscalls.iter().collect();
    if trace.options.count_only {
        rows.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
    }
    d.top_syscalls = rows
        .iter()
        .take(TOP)
        .map(|s| {
            let t = s.latency.as_ref().map(|l| l.total_ns);
            SyscallShare {
                name: s.name.clone(),
                calls: s.calls,
                per_transaction: per(s.calls as f64, tx),
                time_ns: t,
                time_share: t
                    .filter(|_| total_time > 0)
                    .map(|t| t as f64 / total_time as f64),
            }
        })
        .collect();
    let bpf = trace.tracer.bpf_time_ns;
    let attributed = trace.tracer.attributed.as_ref();
    let calls_of = |names: &[&str]| -> u64 {
        trace
            .syscalls
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .map(|s| s.calls)
            .sum()
    };
    d.syscalls_per_transaction = per(trace.totals.calls as f64, tx);
    d.voluntary_switches_per_transaction = per(r.voluntary_ctxt_switches as f64, tx);
    d.involuntary_switches_per_transaction = per(r.involuntary_ctxt_switches as f64, tx);
    d.tracer_ns_per_syscall = trace.tracer.ns_per_event;
    d.tracer_bpf_time_ns = bpf;
    d.tracer_share_of_target_cpu = bpf.filter(|_| cpu > 0.0).map(|b| b as f64 / 1e9 / cpu);
    d.tracer_target_ns = attributed.map(|a| a.target_ns);
    d.tracer_target_share = attributed.and_then(|a| a.target_cpu_share);
    d.tracer_collateral_ns = attributed.map(|a| a.collateral_ns);
    d.tracer_collateral_machine_share = attributed.and_then(|a| a.collateral_machine_share);
    d.tracer_count_only_saves_ns = attributed.and_then(|a| a.count_only_saves_target_ns);
    d.minor_faults_per_transaction = per(r.minor_faults as f64, tx);
    d.major_faults_per_transaction = per(r.major_faults as f64, tx);
    d.threads_seen = r.threads_seen;
    d.processes_seen = r.processes_seen;
    d.tasks_created_per_transaction = per(calls_of(&TASK_CREATING) as f64, tx);
    d.execs_per_transaction = per(calls_of(&EXECS) as f64, tx);
    d.syscall_classes = classes(trace, tx);
    d
}

/// The figures that need no syscall tracer: the load's, the target's CPU
/// (`cpu`: user, system, s) over a window of `window_s`, the generator's
/// and the server's own. Those only the tracer measures are NaN (null in
/// run.json: not recorded), empty or absent until [`derive`] fills them.
pub fn base(
    load: &LoadReport,
    cpu: (f64, f64),
    window_s: f64,
    server: Option<&Value>,
    control_cpu_s: f64,
) -> Derived {
    let tx = load.transactions;
    let total = cpu.0 + cpu.1;
    let g = &load.generator;
    let gen_cpu = (g.user_cpu_s + g.system_cpu_s - control_cpu_s).max(0.0);
    let (server_tx, server_cpu) = server.map(server_figures).unwrap_or((None, None));
    let agreement = server_tx.map(|s| {
        if s == tx {
            "exact"
        } else if s > tx && s - tx <= owed_at_end(load) {
            "in_flight"
        } else {
            "mismatch"
        }
        .to_string()
    });
    Derived {
        target_cpu_us_per_transaction: per(total * 1e6, tx),
        generator_cpu_us_per_transaction: per(gen_cpu * 1e6, tx),
        control_thread_cpu_s: control_cpu_s,
        generator_saturated: g.saturated,
        server_transactions: server_tx,
        server_agreement: agreement,
        server_own_cpu_s: server_cpu,
        ..volume::not_traced(tx, load.rate_per_s, cpu, window_s)
    }
}

/// The trace's syscalls summed by kind, most calls first.
pub fn classes(trace: &TraceReport, tx: u64) -> Vec<ClassShare> {
    let mut sums: Vec<(SyscallClass, u64, Option<u64>)> = SyscallClass::ALL
        .iter()
        .map(|c| (*c, 0, (!trace.options.count_only).then_some(0)))
        .collect();
    for s in &trace.syscalls {
        let i = SyscallClass::ALL
            .iter()
            .position(|c| *c == SyscallClass::of(&s.name))
            .expect("ALL lists every class");
        sums[i].1 += s.calls;
        if let (Some(t), Some(l)) = (sums[i].2.as_mut(), s.latency.as_ref()) {
            *t += l.total_ns;
        }
    }
    let calls: u64 = sums.iter().map(|s| s.1).sum();
    let time: u64 = sums.iter().filter_map(|s| s.2).sum();
    let mut out: Vec<ClassShare> = sums
        .into_iter()
        .filter(|s| s.1 > 0)
        .map(|(class, n, t)| ClassShare {
            class,
            calls: n,
            per_transaction: per(n as f64, tx),
            call_share: n as f64 / calls.max(1) as f64,
            time_ns: t,
            time_share: t.filter(|_| time > 0).map(|t| t as f64 / time as f64),
        })
        .collect();
    // Stable: ties keep the order of SyscallClass::ALL.
    out.sort_by_key(|c| std::cmp::Reverse(c.calls));
    out
}

/// Page faults stand out when the target entered the kernel for them at
/// least once per transaction and more often than for syscalls.
pub fn faults_stand_out(d: &Derived) -> bool {
    let faults = d.minor_faults_per_transaction + d.major_faults_per_transaction;
    faults >= 1.0 && faults >= d.syscalls_per_transaction
}

/// Process (or thread) creation stands out at one new task, or one exec,
/// per ten transactions or more: each costs far more than a socket call
/// (a fork copies page tables, and the copy-on-write faults follow).
pub fn creation_stands_out(d: &Derived) -> bool {
    d.tasks_created_per_transaction >= 0.1 || d.execs_per_transaction >= 0.1
}

/// `process` when most of the tasks seen were processes of their own,
/// `thread` otherwise (clone makes either; the trace counts both).
fn created_kind(d: &Derived) -> &'static str {
    if d.processes_seen * 2 > d.threads_seen {
        "process"
    } else {
        "thread"
    }
}

/// What the evidence says the target's kernel time went to: page faults
/// and process creation when they stand out; the socket path only when
/// socket I/O (with the readiness calls that drive it) makes most of the
/// syscalls; otherwise the kind of syscall that leads.
fn kernel_where(d: &Derived, unit: &str) -> String {
    let mut causes = Vec::new();
    if faults_stand_out(d) {
        causes.push(format!(
            "page faults ({:.0} per {unit}, against {:.2} syscalls)",
            d.minor_faults_per_transaction + d.major_faults_per_transaction,
            d.syscalls_per_transaction
        ));
    }
    if creation_stands_out(d) {
        causes.push(format!(
            "{} creation ({:.2} per {unit})",
            created_kind(d),
            d.tasks_created_per_transaction.max(d.execs_per_transaction)
        ));
    }
    if !causes.is_empty() {
        return format!(
            "in the kernel, {} stand out, so the cost is not the socket path alone",
            causes.join(" and ")
        );
    }
    let share = |c: SyscallClass| {
        d.syscall_classes
            .iter()
            .find(|s| s.class == c)
            .map_or(0.0, |s| s.call_share)
    };
    let socket = share(SyscallClass::SocketIo);
    let network = socket + share(SyscallClass::Readiness);
    match d.syscall_classes.first() {
        None if d.syscalls_per_transaction.is_nan() => UNTRACED_KERNEL.into(),
        None => "the trace saw no syscall to tell which kernel path".into(),
        Some(_) if socket > 0.0 && network >= 0.5 => format!(
            "socket I/O and the readiness calls around it make {:.0}% of its syscalls, so the \
             kernel's part is likely its socket path",
            network * 100.0
        ),
        Some(top) => format!(
            "its syscalls are led by {} ({:.0}% of them), so the syscall mix does not point \
             at the socket path{}",
            top.class.label(),
            top.call_share * 100.0,
            match top.class {
                SyscallClass::ReadWrite => " (read and write may be on sockets or on files)",
                SyscallClass::IoUring => " (io_uring carries socket and file I/O alike)",
                _ => "",
            }
        ),
    }
}

/// Rescales the per-transaction target figures (computed over every
/// transaction of the load) to the transactions the traced tree served,
/// `a.transactions`; when that is unknown or zero they become NaN (null in
/// the JSON): no figure then pretends to cover the whole load. The
/// generator's figure stays over every transaction (it sent them all).
pub fn attribute_per_transaction(d: &mut Derived, a: Attribution) {
    let factor = match a.transactions {
        Some(t) if t > 0.0 && d.transactions > 0 => d.transactions as f64 / t,
        _ => f64::NAN,
    };
    d.target_cpu_us_per_transaction *= factor;
    d.syscalls_per_transaction *= factor;
    d.voluntary_switches_per_transaction *= factor;
    d.involuntary_switches_per_transaction *= factor;
    d.minor_faults_per_transaction *= factor;
    d.major_faults_per_transaction *= factor;
    d.tasks_created_per_transaction *= factor;
    d.execs_per_transaction *= factor;
    for s in &mut d.top_syscalls {
        s.per_transaction *= factor;
    }
    for c in &mut d.syscall_classes {
        c.per_transaction *= factor;
    }
    d.attribution = Some(a);
}

/// Who else serves the address, and what the per-transaction figures
/// cover.
pub(super) fn attribution_sentence(a: &Attribution, unit: &str) -> String {
    let others: Vec<String> = a
        .shared_with
        .iter()
        .map(|s| {
            format!(
                "pid {} ({}, {})",
                s.pid,
                s.comm,
                if s.how == "same_socket" {
                    "holds the same listening socket"
                } else {
                    "its own listener on the port"
                }
            )
        })
        .collect();
    let head = format!(
        "Processes outside the traced tree serve the same address: {}.",
        others.join("; ")
    );
    match (a.share, a.transactions) {
        (Some(share), Some(t)) if t > 0.0 => format!(
            "{head} The traced tree served an estimated {} of the load's {unit}s (about \
             {t:.0}), by {}; every per-{unit} figure of the target below is over those.",
            pct(share),
            a.method
        ),
        (Some(_), _) => format!(
            "{head} The traced tree served none of the load's {unit}s (by {}), so no \
             per-{unit} figure of the target is given (null in run.json).",
            a.method
        ),
        _ => format!(
            "{head} UNATTRIBUTED: {}; the target's figures below cover only the traced tree, \
             and no per-{unit} figure is given (null in run.json). To cover the whole load, \
             profile the process they all descend from (--pid of their master), if any.",
            a.method
        ),
    }
}

/// The figures that need no transaction count, for a run whose traced
/// tree's share of the load is unknown.
fn unattributed_sentences(d: &Derived, trace: &TraceReport) -> Vec<String> {
    let mut out = vec![format!(
        "The traced tree's CPU time over the window was {:.3} s user + {:.3} s system, {} of \
         it in the kernel; it kept {:.2} CPUs busy and made {} syscalls ({}).",
        d.target_user_cpu_s,
        d.target_system_cpu_s,
        pct(d.target_kernel_share),
        d.target_cpus_busy,
        trace.totals.calls,
        d.top_syscalls
            .iter()
            .take(4)
            .map(|s| format!("{} {}", s.name, s.calls))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    if let Some(share) = trace.tracer.cpu_share {
        out.push(format!(
            "The tracer's own BPF programs used {:.1}% of one CPU over the window.",
            share * 100.0
        ));
    }
    out
}

pub(super) fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The syscall mix by kind: calls per transaction, share of calls and of
/// syscall time, the four biggest kinds.
fn classes_sentence(d: &Derived, unit: &str) -> Option<String> {
    if d.syscall_classes.is_empty() {
        return None;
    }
    // Kinds under 1% of the calls are noise here (run.json lists them).
    let parts: Vec<String> = d
        .syscall_classes
        .iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || c.call_share >= 0.01)
        .map(|(_, c)| c)
        .take(4)
        .map(|c| match c.time_share {
            Some(t) => format!(
                "{} {:.2} ({:.0}% of calls, {:.0}% of time)",
                c.class.label(),
                c.per_transaction,
                c.call_share * 100.0,
                t * 100.0
            ),
            None => format!(
                "{} {:.2} ({:.0}% of calls)",
                c.class.label(),
                c.per_transaction,
                c.call_share * 100.0
            ),
        })
        .collect();
    let by_time = d
        .syscall_classes
        .iter()
        .filter(|c| c.time_share.is_some())
        .max_by(|a, b| {
            a.time_share
                .partial_cmp(&b.time_share)
                .expect("finite shares")
        });
    let top = &d.syscall_classes[0];
    let lead = match by_time {
        Some(t) if t.class != top.class => format!(
            "{} leads by calls, {} by time (wall time: waiting in readiness calls or blocking \
             reads counts as time)",
            top.class.label(),
            t.class.label()
        ),
        Some(_) => format!("{} leads by calls and by time", top.class.label()),
        None => format!("{} leads by calls", top.class.label()),
    };
    Some(format!(
        "By kind, its syscalls per {unit} were {}: {lead}.",
        parts.join(", ")
    ))
}

/// Page faults and process creation, named when they stand out.
fn faults_and_creation(d: &Derived, unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    if faults_stand_out(d) {
        out.push(format!(
            "Page faults stand out: {:.1} minor and {:.2} major per {unit}, more than its {:.2} \
             syscalls; each is a trip into the kernel (a freshly forked process faults in its \
             copy-on-write pages, a new thread its stack).",
            d.minor_faults_per_transaction,
            d.major_faults_per_transaction,
            d.syscalls_per_transaction
        ));
    }
    if creation_stands_out(d) {
        let kind = created_kind(d);
        out.push(format!(
            "{} creation stands out: {:.2} new processes or threads per {unit} (fork, vfork, \
             clone, clone3){}, and {} in {} were seen over the window: a \
             {kind} per connection or per request.",
            if kind == "process" {
                "Process"
            } else {
                "Thread"
            },
            d.tasks_created_per_transaction,
            if d.execs_per_transaction > 0.0 {
                format!(" and {:.2} execs", d.execs_per_transaction)
            } else {
                String::new()
            },
            counted(d.threads_seen, "thread", "threads"),
            counted(d.processes_seen, "process", "processes")
        ));
    }
    out
}

/// The derived figures in plain sentences, most important first.
pub fn sentences(d: &Derived, vol: Volume, trace: &TraceReport) -> Vec<String> {
    let mut out = Vec::new();
    let unit = vol.unit();
    out.push(volume_sentence(d, vol, unit));
    if let Some(a) = &d.attribution {
        out.push(attribution_sentence(a, unit));
        if d.syscalls_per_transaction.is_nan() {
            out.extend(unattributed_sentences(d, trace));
            return out;
        }
    }
    out.push(cpu_sentence(d, unit));
    out.push(syscalls_sentence(d, unit));
    out.extend(classes_sentence(d, unit));
    out.extend(faults_and_creation(d, unit));
    out.push(switches_sentence(d, unit));
    out.extend(time_sentence(d, trace));
    out.push(tracer_sentence(d, trace));
    if vol.load().is_some() {
        out.push(generator_sentence(d, unit));
    }
    out.extend(agreement_sentence(d, vol, unit));
    out
}

/// The opening sentence: how many transactions (or datagrams), how fast,
/// over how many connections.
pub(super) fn volume_sentence(d: &Derived, vol: Volume, unit: &str) -> String {
    let tx = d.transactions;
    let load = match vol {
        Volume::Load(l) => l,
        Volume::Counted(w) => return volume::counted_sentence(d, w),
    };
    // Connections --max-conns opened while every one was busy.
    let added = match load.connections.added {
        0 => String::new(),
        n => format!(" and {n} more opened while every one was busy"),
    };
    format!(
        "{} {tx} {unit}s in {:.2} s ({:.0}/s) with {} connection{}{added} ({}).",
        if d.attribution.is_some() {
            "The load completed"
        } else {
            "The target handled"
        },
        load.duration_s,
        d.rate_per_s,
        load.connections.requested,
        if load.connections.requested == 1 {
            ""
        } else {
            "s"
        },
        load.workload
    )
}

/// The target's CPU time, its kernel share, and what that says.
pub(super) fn cpu_sentence(d: &Derived, unit: &str) -> String {
    let cpu = d.target_user_cpu_s + d.target_system_cpu_s;
    format!(
        "Its CPU time over the window was {:.3} s user + {:.3} s system = {} per {unit}, \
         {} of it in the kernel: {}. It kept {:.2} CPUs busy on average.",
        d.target_user_cpu_s,
        d.target_system_cpu_s,
        fmt_us(d.target_cpu_us_per_transaction),
        pct(d.target_kernel_share),
        if cpu == 0.0 {
            "too little CPU time to split".to_string()
        } else if d.target_kernel_share >= 0.6 {
            format!(
                "most of the cost is in the kernel, not the program's own code; {}",
                kernel_where(d, unit)
            )
        } else if d.target_kernel_share <= 0.4 {
            "most of the cost is the program's own code".to_string()
        } else {
            format!(
                "the cost is split between the program and the kernel; {}",
                kernel_where(d, unit)
            )
        },
        d.target_cpus_busy
    )
}

/// Syscalls per transaction, and the four most frequent.
fn syscalls_sentence(d: &Derived, unit: &str) -> String {
    let mix: Vec<String> = d
        .top_syscalls
        .iter()
        .take(4)
        .map(|s| format!("{} {:.2}", s.name, s.per_transaction))
        .collect();
    format!(
        "Each {unit} cost {:.2} syscalls in the target ({}).",
        d.syscalls_per_transaction,
        mix.join(", ")
    )
}

/// Voluntary and involuntary context switches per transaction.
fn switches_sentence(d: &Derived, unit: &str) -> String {
    format!(
        "Context switches per {unit}: {:.2} voluntary (the target blocked waiting for work) \
         and {:.2} involuntary (it was preempted).",
        d.voluntary_switches_per_transaction, d.involuntary_switches_per_transaction
    )
}

/// Where the time inside syscalls went (None in count-only mode, or
/// when no syscall has a time).
fn time_sentence(d: &Derived, trace: &TraceReport) -> Option<String> {
    if trace.options.count_only {
        return None;
    }
    let by_time: Vec<String> = d
        .top_syscalls
        .iter()
        .take(3)
        .filter_map(|s| {
            Some(format!(
                "{} {} ({})",
                s.name,
                human_ns(s.time_ns?),
                pct(s.time_share?)
            ))
        })
        .collect();
    if by_time.is_empty() {
        return None;
    }
    Some(format!(
        "Most time inside syscalls went to {} (wall time from entry to exit, blocking \
         included: a long epoll_wait means the target was idle, not busy).",
        by_time.join(", ")
    ))
}

/// What the tracer cost the target and the rest of the machine, and what
/// `--count-only` would save, when measured.
fn tracer_sentence(d: &Derived, trace: &TraceReport) -> String {
    let t = &trace.tracer;
    if let (Some(a), Some(b), Some(sp)) = (&t.attributed, &t.bpf_split, &t.slow_path) {
        let of = |v: Option<f64>, what: &str| {
            v.map_or_else(String::new, |v| format!(" ({:.1}% of {what})", v * 100.0))
        };
        let slow = if sp.within_noise {
            format!(
                "the kernel's syscall-hook slow path, which the calibration could not tell apart \
                 from the machine's noise ({} over {} rounds) and charges as 0",
                super::trace_text::rounds_range(sp),
                sp.rounds
            )
        } else {
            format!(
                "{:.0} ns of the kernel's syscall-hook slow path (calibrated after the run, {} \
                 over {} rounds)",
                sp.ns_per_syscall,
                super::trace_text::rounds_range(sp),
                sp.rounds
            )
        };
        let mut out = format!(
            "The tracer cost the target {}{}: {:.0} ns of BPF per traced syscall plus {slow}. It \
             cost the rest of the machine {}{}: {} other syscalls, each filtered out in {:.0} ns \
             of BPF and paying the same slow path.",
            human_ns(a.target_ns),
            of(d.tracer_target_share, "its CPU time"),
            b.traced.ns_per_syscall,
            human_ns(a.collateral_ns),
            of(a.collateral_machine_share, "the machine's busy CPU"),
            b.filtered.syscalls,
            b.filtered.ns_per_syscall
        );
        if let (Some(st), Some(so)) = (a.count_only_saves_target_ns, a.count_only_saves_others_ns) {
            let cpu = d.target_user_cpu_s + d.target_system_cpu_s;
            out.push_str(&format!(
                " --count-only (no latency, no errors) would save at most {}{} of that and {} \
                 of the rest's.",
                human_ns(st),
                if cpu > 0.0 {
                    format!(
                        " ({:.1}% of the target's CPU time)",
                        st as f64 / 1e9 / cpu * 100.0
                    )
                } else {
                    String::new()
                },
                human_ns(so)
            ));
        }
        return out;
    }
    match (d.tracer_ns_per_syscall, d.tracer_bpf_time_ns) {
        (Some(ns), Some(total)) => format!(
            "The tracer's own BPF programs cost about {ns:.0} ns per traced syscall, {} over \
             the window ({} of the target's CPU time; {:.1}% of one CPU).",
            human_ns(total),
            d.tracer_share_of_target_cpu
                .map_or_else(|| "n/a".to_string(), |s| format!("{:.1}%", s * 100.0)),
            t.cpu_share.unwrap_or(0.0) * 100.0
        ),
        _ => {
            "The tracer's own cost was not measured in this run (see the trace notes).".to_string()
        }
    }
}

/// The load generator's CPU per transaction against the target's.
pub(super) fn generator_sentence(d: &Derived, unit: &str) -> String {
    let gen_us = d.generator_cpu_us_per_transaction;
    let tgt = d.target_cpu_us_per_transaction;
    format!(
        "The load generator used {} of CPU per {unit} against the target's {}{}.",
        fmt_us(gen_us),
        fmt_us(tgt),
        if d.generator_saturated {
            "; a generator thread was busy 90% of the time or more, so the generator may \
             have been the bottleneck"
        } else if gen_us > tgt {
            ": the generator cost more than the target"
        } else {
            ""
        }
    )
}

/// Whether the server's own transaction count agrees with the load's
/// (None when the server did not report one).
pub(super) fn agreement_sentence(d: &Derived, vol: Volume, unit: &str) -> Option<String> {
    let (Some(s), Some(a)) = (d.server_transactions, &d.server_agreement) else {
        return None;
    };
    let tx = d.transactions;
    let load = match vol {
        Volume::Load(l) => l,
        Volume::Counted(w) => return Some(volume::counted_agreement(d, w, s, a, unit)),
    };
    Some(match a.as_str() {
        "exact" => format!(
            "The server's own count agrees exactly: it answered {s} {unit}s, the load \
             counted {tx}."
        ),
        "in_flight" => format!(
            "The server answered {s} {unit}s, the load counted {tx}: the {} more are \
             requests still in flight when the load's window ended ({} answered while it \
             drained, {} unanswered at the end).",
            s - tx,
            load.errors.answered_after_end,
            load.errors.unanswered_at_end
        ),
        _ => format!(
            "MISMATCH: the server counted {s} {unit}s but the load counted {tx} (only \
             {} requests were in flight at the end); one side's count is wrong.",
            owed_at_end(load)
        ),
    })
}

/// The request anatomy's sentences (which part dominates the median and
/// the tail, quoted; how much of the client's latency was outside the
/// server), as sentences of this list: capitalized, full stop.
pub fn anatomy_sentences(a: &super::anatomy::AnatomyReport) -> Vec<String> {
    a.sentences()
        .into_iter()
        .map(|s| {
            let mut c = s.chars();
            let first = c.next().map(|f| f.to_uppercase().collect::<String>());
            format!("{}{}.", first.unwrap_or_default(), c.as_str())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{self, Shape};
    use super::*;

    #[test]
    fn udp_sink_count_includes_the_dropped_records() {
        let sink = serde_json::json!({
            "schema": "sockscope.serve.udp-sink",
            "runs": [{"report": {"received": 5}}, {"report": {"received": 7}}],
            "runs_dropped": {"runs": 3, "received": 30, "lost": 0},
            "cpu_user_s": 0.5,
            "cpu_system_s": 0.25,
        });
        assert_eq!(server_figures(&sink), (Some(42), Some(0.75)));
        // A sink JSON from before runs_dropped existed.
        let old = serde_json::json!({
            "schema": "sockscope.serve.udp-sink",
            "runs": [{"report": {"received": 5}}],
        });
        assert_eq!(server_figures(&old), (Some(5), None));
    }

    /// Issue 38 item 10: the CPU over the trace window was divided by the
    /// requests over the anatomy's window, 0.1-0.7 s apart (+-5-6 %). With
    /// the CPU over the anatomy's own window, one window divides the other.
    #[test]
    fn counted_requests_divide_the_cpu_of_their_own_window() {
        let mut r = fixtures::under_command(fixtures::profile(&fixtures::epoll_echo()));
        let trace = r.trace.clone().unwrap();
        // The anatomy's window 10 % shorter than the trace's.
        r.workload.requests.window_s = trace.window.duration_s * 0.9;
        let tx = r.workload.requests.count as f64;
        let cpu = trace.resources.user_cpu_s + trace.resources.system_cpu_s;
        let rates = derive_counted(&r.workload, &trace, None, None);
        let want_rates =
            cpu * 1e6 / trace.window.duration_s / (tx / (trace.window.duration_s * 0.9));
        assert!((rates.target_cpu_us_per_transaction - want_rates).abs() < 1e-6);
        let own = derive_counted(&r.workload, &trace, None, Some((0.3, 0.1)));
        assert!((own.target_cpu_us_per_transaction - 0.4e6 / tx).abs() < 1e-6);
        // Only that figure changes: the trace window's CPU stays its own.
        assert_eq!(own.target_user_cpu_s, rates.target_user_cpu_s);
        assert_eq!(own.transactions, rates.transactions);
    }

    fn kernel_sentence(r: &super::super::profile::ProfileReport) -> &str {
        r.insights
            .iter()
            .find(|s| s.starts_with("Its CPU time"))
            .expect("the CPU sentence")
    }

    #[test]
    fn the_tracer_sentence_splits_the_target_from_the_rest() {
        use super::super::trace::{BpfPart, BpfSplit, CostAttribution, SlowPath};
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        let mut trace = r.trace.take().expect("the fixture is traced");
        // An older file: no parts, the old sentence.
        let old = tracer_sentence(&r.derived, &trace);
        assert!(old.contains("BPF programs cost about 398 ns"), "{old}");
        let t = &mut trace.tracer;
        t.bpf_split = Some(BpfSplit {
            traced: BpfPart {
                syscalls: 100_000,
                ns_per_syscall: 250.0,
                enter_ns_per_run: 140.0,
                exit_ns_per_run: Some(110.0),
                total_ns: 25_000_000,
            },
            filtered: BpfPart {
                syscalls: 300_000,
                ns_per_syscall: 150.0,
                enter_ns_per_run: 100.0,
                exit_ns_per_run: Some(50.0),
                total_ns: 45_000_000,
            },
            ..Default::default()
        });
        t.slow_path = Some(SlowPath {
            ns_per_syscall: 90.0,
            min_ns: 80.0,
            max_ns: 120.0,
            exit_ns_per_syscall: Some(30.0),
            rounds: 4,
            ..Default::default()
        });
        t.attributed = Some(CostAttribution {
            slow_path_target_ns: 9_000_000,
            slow_path_others_ns: 27_000_000,
            target_ns: 34_000_000,
            target_cpu_share: Some(0.125),
            collateral_ns: 72_000_000,
            machine_cpu_s: Some(2.0),
            collateral_machine_share: Some(0.036),
            count_only_saves_target_ns: Some(14_000_000),
            count_only_saves_others_ns: Some(24_000_000),
        });
        let d = derive(r.load.as_ref().unwrap(), &trace, None, 0.0);
        assert_eq!(d.tracer_target_ns, Some(34_000_000));
        assert_eq!(d.tracer_target_share, Some(0.125));
        assert_eq!(d.tracer_collateral_ns, Some(72_000_000));
        assert_eq!(d.tracer_collateral_machine_share, Some(0.036));
        assert_eq!(d.tracer_count_only_saves_ns, Some(14_000_000));
        let s = tracer_sentence(&d, &trace);
        for part in [
            "The tracer cost the target 34.0ms (12.5% of its CPU time)",
            "250 ns of BPF per traced syscall plus 90 ns",
            "80 to 120 ns over 4 rounds",
            "rest of the machine 72.0ms (3.6% of the machine's busy CPU)",
            "300000 other syscalls, each filtered out in 150 ns",
            "--count-only (no latency, no errors) would save at most 14.0ms",
            "and 24.0ms of the rest's",
        ] {
            assert!(s.contains(part), "{part:?} not in: {s}");
        }
        // The trace text and the HTML card carry the same parts.
        let text = super::super::trace_text::tracer_parts(&trace.tracer).join("\n");
        assert!(text.contains("BPF filtering the rest"), "{text}");
        assert!(text.contains("cost to the target"), "{text}");
        assert!(
            text.contains("at most 14.0ms of the target's cost"),
            "{text}"
        );
        // A file with the new fields reads back with them.
        let json = serde_json::to_string(&trace.tracer).unwrap();
        let back: super::super::trace::TracerCost = serde_json::from_str(&json).unwrap();
        assert_eq!(back.attributed, trace.tracer.attributed);
        assert_eq!(back.bpf_split, trace.tracer.bpf_split);

        // A calibration lost in noise is said, never printed as a range of
        // negative figures read as a cost.
        if let Some(sp) = trace.tracer.slow_path.as_mut() {
            sp.ns_per_syscall = -20.0;
            sp.min_ns = -46.0;
            sp.max_ns = 87.0;
            sp.within_noise = true;
        }
        let s = tracer_sentence(&d, &trace);
        assert!(
            s.contains(
                "could not tell apart from the machine's noise (-46 to 87 ns over 4 rounds)"
            ),
            "{s}"
        );
        assert!(!s.contains("-46.."), "{s}");
        let text = super::super::trace_text::tracer_parts(&trace.tracer).join("\n");
        assert!(text.contains("not told apart from noise"), "{text}");
    }

    #[test]
    fn a_forking_server_is_not_blamed_on_the_socket_path() {
        let r = fixtures::profile(&fixtures::forking_server());
        let d = &r.derived;
        assert!(
            (d.minor_faults_per_transaction - 376.6).abs() < 0.1,
            "{d:?}"
        );
        assert_eq!(d.tasks_created_per_transaction, 3152.0 / 3148.0);
        assert_eq!((d.threads_seen, d.processes_seen), (3158, 3158));
        assert!(d.target_kernel_share > 0.6);
        let k = kernel_sentence(&r);
        assert!(!k.contains("kernel's socket path"), "{k}");
        assert!(!k.contains("likely its socket path"), "{k}");
        assert!(k.contains("page faults (377 per transaction"), "{k}");
        assert!(k.contains("process creation (1.00 per transaction)"), "{k}");
        let all = r.insights.join("\n");
        assert!(all.contains("Page faults stand out: 376.6 minor"), "{all}");
        assert!(
            all.contains("Process creation stands out: 1.00 new"),
            "{all}"
        );
        assert!(all.contains("a process per connection"), "{all}");
        // The mix by kind: readiness leads by calls here, by time too.
        assert!(
            all.contains("By kind, its syscalls per transaction were"),
            "{all}"
        );
    }

    #[test]
    fn an_epoll_echo_server_is_its_socket_path() {
        let r = fixtures::profile(&fixtures::epoll_echo());
        let k = kernel_sentence(&r);
        assert!(
            k.contains(
                "most of the cost is in the kernel, not the program's own code; socket I/O \
                        and the readiness calls around it make 100% of its syscalls, so the \
                        kernel's part is likely its socket path"
            ),
            "{k}"
        );
        let all = r.insights.join("\n");
        assert!(!all.contains("stand out"), "{all}");
        assert!(
            all.contains("socket I/O 2.00 (77% of calls, 41% of time)"),
            "{all}"
        );
        assert!(
            all.contains("socket I/O leads by calls, readiness/polling by time"),
            "{all}"
        );
        let c = &r.derived.syscall_classes;
        assert_eq!(c[0].class, SyscallClass::SocketIo);
        assert_eq!(c[0].calls, 399_755 + 399_771 + 21 + 16);
    }

    #[test]
    fn count_only_and_io_uring_say_what_the_calls_show() {
        let mut s = fixtures::epoll_echo();
        s.count_only = true;
        let r = fixtures::profile(&s);
        assert!(kernel_sentence(&r).contains("likely its socket path"));
        assert!(r.derived.syscall_classes[0].time_share.is_none());
        let all = r.insights.join("\n");
        assert!(all.contains("socket I/O leads by calls."), "{all}");

        let s = Shape {
            syscalls: vec![
                ("io_uring_enter", 361_452, 2_830_000_000),
                ("close", 16, 67_200),
            ],
            ..fixtures::epoll_echo()
        };
        let k = kernel_sentence(&fixtures::profile(&s)).to_string();
        assert!(
            k.contains(
                "led by io_uring (100% of them), so the syscall mix does not point at the \
                        socket path (io_uring carries socket and file I/O alike)"
            ),
            "{k}"
        );
    }

    #[test]
    fn thread_per_connection_is_named_as_threads() {
        let s = Shape {
            syscalls: vec![
                ("recvfrom", 63_228, 4_200_000_000),
                ("clone3", 31_614, 343_000_000),
                ("sendto", 31_614, 199_000_000),
                ("mmap", 31_635, 333_000_000),
            ],
            transactions: 31_614,
            seen: (31_616, 1),
            minor_faults: 185,
            ..fixtures::epoll_echo()
        };
        let r = fixtures::profile(&s);
        let all = r.insights.join("\n");
        assert!(
            all.contains("Thread creation stands out: 1.00 new"),
            "{all}"
        );
        assert!(all.contains("a thread per connection"), "{all}");
        assert!(!all.contains("Page faults stand out"), "{all}");
        assert!(kernel_sentence(&r).contains("thread creation (1.00 per transaction)"));
    }
}
