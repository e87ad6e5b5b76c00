//! Figures derived from one profile window, and the plain sentences that
//! say what they mean. Everything is per transaction so runs of different
//! lengths and rates compare.

use serde_json::Value;

use super::load::LoadReport;
use super::profile::{Attribution, Derived, SyscallShare};
use super::trace::TraceReport;
use super::trace_text::human_ns;

/// How many syscalls `top_syscalls` keeps.
pub const TOP: usize = 8;

fn per(x: f64, tx: u64) -> f64 {
    if tx == 0 { 0.0 } else { x / tx as f64 }
}

/// The server's own transaction count and CPU, from its `--json` report
/// (`sockscope.serve.echo`: `transactions`; `sockscope.serve.udp-sink`:
/// datagrams received over all runs).
pub fn server_figures(server: &Value) -> (Option<u64>, Option<f64>) {
    let tx = match server["schema"].as_str() {
        Some("sockscope.serve.echo") => server["transactions"].as_u64(),
        Some("sockscope.serve.udp-sink") => server["runs"].as_array().map(|runs| {
            runs.iter()
                .filter_map(|r| r["report"]["received"].as_u64())
                .sum()
        }),
        _ => None,
    };
    let cpu = match (
        server["cpu_user_s"].as_f64(),
        server["cpu_system_s"].as_f64(),
    ) {
        (Some(u), Some(s)) => Some(u + s),
        _ => None,
    };
    (tx, cpu)
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
    let tx = load.transactions;
    let r = &trace.resources;
    let cpu = r.user_cpu_s + r.system_cpu_s;
    let total_time: u64 = trace.totals.time_ns.unwrap_or(0);
    let count_only = trace.options.count_only;
    let mut rows: Vec<&super::trace::SyscallRow> = trace.syscalls.iter().collect();
    if count_only {
        rows.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
    }
    let top_syscalls = rows
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
    let bpf = trace.tracer.bpf_time_ns;
    Derived {
        transactions: tx,
        rate_per_s: load.rate_per_s,
        target_user_cpu_s: r.user_cpu_s,
        target_system_cpu_s: r.system_cpu_s,
        target_kernel_share: if cpu > 0.0 { r.system_cpu_s / cpu } else { 0.0 },
        target_cpu_us_per_transaction: per(cpu * 1e6, tx),
        target_cpus_busy: if trace.window.duration_s > 0.0 {
            cpu / trace.window.duration_s
        } else {
            0.0
        },
        syscalls_per_transaction: per(trace.totals.calls as f64, tx),
        top_syscalls,
        voluntary_switches_per_transaction: per(r.voluntary_ctxt_switches as f64, tx),
        involuntary_switches_per_transaction: per(r.involuntary_ctxt_switches as f64, tx),
        generator_cpu_us_per_transaction: per(gen_cpu * 1e6, tx),
        control_thread_cpu_s: control_cpu_s,
        generator_saturated: g.saturated,
        tracer_ns_per_syscall: trace.tracer.ns_per_event,
        tracer_bpf_time_ns: bpf,
        tracer_share_of_target_cpu: bpf.filter(|_| cpu > 0.0).map(|b| b as f64 / 1e9 / cpu),
        server_transactions: server_tx,
        server_agreement: agreement,
        server_own_cpu_s: server_cpu,
        attribution: None,
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
    for s in &mut d.top_syscalls {
        s.per_transaction *= factor;
    }
    d.attribution = Some(a);
}

/// Who else serves the address, and what the per-transaction figures
/// cover.
fn attribution_sentence(a: &Attribution, unit: &str) -> String {
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

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} us")
    } else if v >= 10.0 {
        format!("{v:.1} us")
    } else {
        format!("{v:.2} us")
    }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The derived figures in plain sentences, most important first.
pub fn sentences(d: &Derived, load: &LoadReport, trace: &TraceReport) -> Vec<String> {
    let mut out = Vec::new();
    let unit = if load.workload == "udp" {
        "datagram"
    } else {
        "transaction"
    };
    let tx = d.transactions;
    out.push(format!(
        "{} {tx} {unit}s in {:.2} s ({:.0}/s) with {} connection{} ({}).",
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
    ));
    if let Some(a) = &d.attribution {
        out.push(attribution_sentence(a, unit));
        if d.syscalls_per_transaction.is_nan() {
            out.extend(unattributed_sentences(d, trace));
            return out;
        }
    }
    let cpu = d.target_user_cpu_s + d.target_system_cpu_s;
    out.push(format!(
        "Its CPU time over the window was {:.3} s user + {:.3} s system = {} per {unit}, \
         {} of it in the kernel: {}. It kept {:.2} CPUs busy on average.",
        d.target_user_cpu_s,
        d.target_system_cpu_s,
        us(d.target_cpu_us_per_transaction),
        pct(d.target_kernel_share),
        if cpu == 0.0 {
            "too little CPU time to split"
        } else if d.target_kernel_share >= 0.6 {
            "most of the cost is the kernel's socket path, not the program's own code"
        } else if d.target_kernel_share <= 0.4 {
            "most of the cost is the program's own code"
        } else {
            "the cost is split between the program and the kernel"
        },
        d.target_cpus_busy
    ));
    let mix: Vec<String> = d
        .top_syscalls
        .iter()
        .take(4)
        .map(|s| format!("{} {:.2}", s.name, s.per_transaction))
        .collect();
    out.push(format!(
        "Each {unit} cost {:.2} syscalls in the target ({}).",
        d.syscalls_per_transaction,
        mix.join(", ")
    ));
    out.push(format!(
        "Context switches per {unit}: {:.2} voluntary (the target blocked waiting for work) \
         and {:.2} involuntary (it was preempted).",
        d.voluntary_switches_per_transaction, d.involuntary_switches_per_transaction
    ));
    if !trace.options.count_only {
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
        if !by_time.is_empty() {
            out.push(format!(
                "Most time inside syscalls went to {} (wall time from entry to exit, blocking \
                 included: a long epoll_wait means the target was idle, not busy).",
                by_time.join(", ")
            ));
        }
    }
    match (d.tracer_ns_per_syscall, d.tracer_bpf_time_ns) {
        (Some(ns), Some(total)) => out.push(format!(
            "The tracer's own BPF programs cost about {ns:.0} ns per traced syscall, {} over \
             the window ({} of the target's CPU time; {:.1}% of one CPU).",
            human_ns(total),
            d.tracer_share_of_target_cpu
                .map_or_else(|| "n/a".to_string(), |s| format!("{:.1}%", s * 100.0)),
            trace.tracer.cpu_share.unwrap_or(0.0) * 100.0
        )),
        _ => out.push(
            "The tracer's own cost was not measured in this run (see the trace notes).".to_string(),
        ),
    }
    let gen_us = d.generator_cpu_us_per_transaction;
    let tgt = d.target_cpu_us_per_transaction;
    out.push(format!(
        "The load generator used {} of CPU per {unit} against the target's {}{}.",
        us(gen_us),
        us(tgt),
        if d.generator_saturated {
            "; a generator thread was busy 90% of the time or more, so the generator may \
             have been the bottleneck"
        } else if gen_us > tgt {
            ": the generator cost more than the target"
        } else {
            ""
        }
    ));
    if let (Some(s), Some(a)) = (d.server_transactions, &d.server_agreement) {
        out.push(match a.as_str() {
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
        });
    }
    out
}
