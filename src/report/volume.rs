//! What a profile's per-request figures are over: sockscope's own load,
//! or the requests the request anatomy counted at the target's sockets
//! (`--load-cmd`, observe only), and the figures and sentences that differ
//! between the two. Pure.

use serde_json::Value;

use super::load::LoadReport;
use super::profile::Derived;
use super::workload::WorkloadRecord;

/// The server's own transaction count and CPU, from its `--json` report
/// (`sockscope.serve.echo`: `transactions`; `sockscope.serve.udp-sink`:
/// datagrams received over all runs, those whose records the sink dropped
/// included).
pub fn server_figures(server: &Value) -> (Option<u64>, Option<f64>) {
    let tx = match server["schema"].as_str() {
        Some("sockscope.serve.echo") => server["transactions"].as_u64(),
        Some("sockscope.serve.udp-sink") => server["runs"].as_array().map(|runs| {
            let kept: u64 = runs
                .iter()
                .filter_map(|r| r["report"]["received"].as_u64())
                .sum();
            kept + server["runs_dropped"]["received"].as_u64().unwrap_or(0)
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

/// What a profile's per-request figures are over: sockscope's own load,
/// or the requests the request anatomy counted at the target's sockets
/// (a `--load-cmd` command's, or its own traffic observed).
#[derive(Clone, Copy, Debug)]
pub enum Volume<'a> {
    /// sockscope's load counted its transactions.
    Load(&'a LoadReport),
    /// The anatomy counted the requests.
    Counted(&'a WorkloadRecord),
}

impl<'a> Volume<'a> {
    /// What one of them is called in the sentences.
    pub fn unit(self) -> &'static str {
        match self {
            Volume::Load(l) if l.workload == "udp" => "datagram",
            Volume::Load(_) => "transaction",
            Volume::Counted(_) => "request",
        }
    }

    /// sockscope's own load, if it was.
    pub fn load(self) -> Option<&'a LoadReport> {
        match self {
            Volume::Load(l) => Some(l),
            Volume::Counted(_) => None,
        }
    }
}

/// The opening sentence of a run whose requests the anatomy counted.
pub(super) fn counted_sentence(d: &Derived, w: &WorkloadRecord) -> String {
    let c = &w.requests;
    let by = match w.source.as_str() {
        super::workload::COMMAND => format!(
            "under the load of `{}`, which sockscope did not generate",
            w.command
                .as_deref()
                .map(shell_words::join)
                .unwrap_or_default()
        ),
        _ => format!("under its own traffic, observed for {:.2} s", w.window_s),
    };
    format!(
        "The target answered {} requests in {:.2} s ({:.0}/s) {by}; they were counted at its \
         sockets by the request anatomy ({}).",
        d.transactions, c.window_s, d.rate_per_s, c.note
    )
}

/// [`base`] for a run whose requests the request anatomy counted: no
/// generator figures (null), and the server's own count (a serve target)
/// checked against the anatomy's, within the requests the window's edges
/// may cut.
pub fn base_counted(
    w: &WorkloadRecord,
    cpu: (f64, f64),
    window_s: f64,
    server: Option<&Value>,
) -> Derived {
    let c = &w.requests;
    let tx = c.count;
    let total = cpu.0 + cpu.1;
    let (server_tx, server_cpu) = server.map(server_figures).unwrap_or((None, None));
    let bound = c.edge_bound.unwrap_or(0);
    let agreement = server_tx.map(|s| {
        if s == tx {
            "exact"
        } else if s.abs_diff(tx) <= bound {
            "in_flight"
        } else {
            "mismatch"
        }
        .to_string()
    });
    // Without a reading over the anatomy's own window (the profile reads
    // one and replaces this figure: `insight::derive_counted`), the CPU
    // over `window_s` and the count over the anatomy's window are taken
    // as rates; the two windows differ by the anatomy's attach and
    // detach (0.1-0.7 s), which shifts this by as much.
    let rate = if c.window_s > 0.0 {
        tx as f64 / c.window_s
    } else {
        0.0
    };
    let per_request = |x: f64| {
        if rate > 0.0 && window_s > 0.0 {
            x / window_s / rate
        } else {
            f64::NAN
        }
    };
    Derived {
        target_cpu_us_per_transaction: per_request(total * 1e6),
        server_transactions: server_tx,
        server_agreement: agreement,
        server_own_cpu_s: server_cpu,
        ..not_traced(tx, rate, cpu, window_s)
    }
}

/// The figures every profile has before the tracer's are filled in:
/// `tx` requests at `rate`, the target's (user, system) CPU over
/// `window_s`; the figures per request, the generator's and the tracer's
/// NaN (null in run.json) or absent.
pub(super) fn not_traced(tx: u64, rate: f64, cpu: (f64, f64), window_s: f64) -> Derived {
    let (user, system) = cpu;
    let total = user + system;
    Derived {
        transactions: tx,
        rate_per_s: rate,
        target_user_cpu_s: user,
        target_system_cpu_s: system,
        target_kernel_share: if total > 0.0 { system / total } else { 0.0 },
        target_cpu_us_per_transaction: f64::NAN,
        target_cpus_busy: if window_s > 0.0 {
            total / window_s
        } else {
            0.0
        },
        syscalls_per_transaction: f64::NAN,
        voluntary_switches_per_transaction: f64::NAN,
        involuntary_switches_per_transaction: f64::NAN,
        generator_cpu_us_per_transaction: f64::NAN,
        minor_faults_per_transaction: f64::NAN,
        major_faults_per_transaction: f64::NAN,
        tasks_created_per_transaction: f64::NAN,
        execs_per_transaction: f64::NAN,
        ..Derived::default()
    }
}

/// The server's own count against the anatomy's (a serve target under
/// `--load-cmd`): `s` the server's, `a` the agreement.
pub(super) fn counted_agreement(
    d: &Derived,
    w: &WorkloadRecord,
    s: u64,
    a: &str,
    unit: &str,
) -> String {
    let tx = d.transactions;
    let bound = w.requests.edge_bound.unwrap_or(0);
    match a {
        "exact" => {
            format!("The server's own count agrees exactly with the anatomy's: {s} {unit}s.")
        }
        "in_flight" => format!(
            "The server counted {s} {unit}s, the anatomy {tx}: within the {bound} the window's \
             edges may cut."
        ),
        _ => format!(
            "MISMATCH: the server counted {s} {unit}s but the anatomy counted {tx} (the window's \
             edges explain at most {bound}); one side's count is wrong."
        ),
    }
}
