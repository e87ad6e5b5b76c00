//! `bench transport`: serve echo's three transports across connection
//! counts under tcp-rr and tcp-crr, each point a traced profile, so every
//! throughput figure comes with the server's CPU and syscalls per
//! transaction over the same window.

use std::time::Duration;

use anyhow::Result;

use super::BenchContext;
use crate::report::bench::transport::{TransportPoint, TransportResult};
use crate::run::profile::loadline::LoadLine;
use crate::run::profile::{self, ProfileSpec, ProfileTarget};

/// Request and response size of every point.
const MESSAGE: u32 = 100;

/// The points to run.
pub struct TransportPlan {
    transports: &'static [&'static str],
    rr: &'static [u32],
    crr: &'static [u32],
    secs: f64,
}

impl TransportPlan {
    /// The full sweep, or the quick one.
    pub fn new(quick: bool, demo: bool) -> Self {
        match (quick, demo) {
            (true, _) => TransportPlan {
                transports: &["threaded", "epoll", "uring"],
                rr: &[1, 64],
                crr: &[16],
                secs: 0.5,
            },
            (false, true) => TransportPlan {
                transports: &["threaded", "epoll", "uring"],
                rr: &[1, 16, 256, 1000],
                crr: &[1, 16, 256],
                secs: 3.0,
            },
            (false, false) => TransportPlan {
                transports: &["threaded", "epoll", "uring"],
                rr: &[1, 16, 256, 1000],
                crr: &[1, 16, 256, 1000],
                secs: 5.0,
            },
        }
    }

    /// Number of profiles.
    pub fn len(&self) -> usize {
        self.transports.len() * (self.rr.len() + self.crr.len())
    }

    /// True when there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `bench transport`.
pub struct Transport;

impl super::Experiment for Transport {
    fn name(&self) -> &'static str {
        "transport"
    }
    fn about(&self) -> &'static str {
        "Echo transports (threaded, epoll, uring) across connection counts under tcp-rr and \
         tcp-crr, each point a traced profile"
    }
    fn bpf(&self) -> Option<crate::probe::preflight::Programs> {
        Some(crate::probe::preflight::Programs::Tracing)
    }
    fn takes_path(&self) -> bool {
        true
    }
    fn caveats(&self, machine: &crate::report::machine::Machine) -> Vec<String> {
        super::loopback_caveats(machine, &[])
    }
    fn run(
        &self,
        ctx: &mut BenchContext<'_>,
        size: super::Size,
    ) -> Result<(crate::report::bench::ExperimentResult, Vec<String>)> {
        let plan = TransportPlan::new(size.quick, size.demo);
        ctx.progress(&format!("bench transport: {} traced profiles", plan.len()));
        let (t, ins) = run(ctx, &plan)?;
        Ok((t.into(), ins))
    }
}

/// Runs every point; each point's profile artifact goes to
/// `runs/TRANSPORT-WORKLOAD-CONNS/run.json` in the experiment directory.
pub fn run(
    ctx: &mut BenchContext<'_>,
    plan: &TransportPlan,
) -> Result<(TransportResult, Vec<String>)> {
    let mut points = Vec::new();
    let total = plan.len();
    for t in plan.transports {
        for (w, conns) in [("tcp-rr", plan.rr), ("tcp-crr", plan.crr)] {
            for &c in conns {
                ctx.check_signals()?;
                let name = format!("{t}-{w}-{c}");
                let spec = ProfileSpec {
                    target: ProfileTarget::Sockscope(
                        [
                            "serve",
                            "echo",
                            "--transport",
                            t,
                            "--req-size",
                            &MESSAGE.to_string(),
                            "--resp-size",
                            &MESSAGE.to_string(),
                        ]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                    ),
                    workload: profile::Workload::Own(LoadLine::parse(&format!(
                        "{w} -c {c} -d {} --req {MESSAGE} --timeout 5",
                        plan.secs
                    ))?),
                    ready_timeout: Duration::from_secs(10),
                    count_only: false,
                    evidence: true,
                    recorders: profile::Recorders::Syscalls,
                    run_as: None,
                    quiet: true,
                    command_line: ctx.command_line.clone(),
                    path: ctx.path.as_ref().map(|p| p.0.clone()),
                    path_backend: ctx.path.as_ref().map(|p| p.1).unwrap_or_default(),
                    // The experiment compares transports' costs: no sampler
                    // beside the tracer to add its own.
                    stacks: None,
                    steps: None,
                    reading: crate::anatomy::Reading::default(),
                };
                let rep = profile::measure(&spec)
                    .map_err(|e| e.context(format!("transport point {name}")))?;
                let run = format!("runs/{name}/run.json");
                ctx.staging.write_json(&run, &rep)?;
                let d = &rep.derived;
                let lat = rep
                    .load
                    .as_ref()
                    .and_then(|l| l.latency.as_ref())
                    .map(|l| &l.summary);
                let point = TransportPoint {
                    transport: t.to_string(),
                    workload: w.to_string(),
                    connections: c,
                    run,
                    transactions: d.transactions,
                    rate_per_s: d.rate_per_s,
                    p50_ns: lat.map_or(0, |l| l.p50_ns),
                    p99_ns: lat.map_or(0, |l| l.p99_ns),
                    server_cpu_us_per_transaction: d.target_cpu_us_per_transaction,
                    server_kernel_share: d.target_kernel_share,
                    syscalls_per_transaction: d.syscalls_per_transaction,
                    generator_cpu_us_per_transaction: d.generator_cpu_us_per_transaction,
                    server_agreement: d.server_agreement.clone(),
                    top_syscalls: d
                        .top_syscalls
                        .iter()
                        .take(4)
                        .map(|s| (s.name.clone(), s.per_transaction))
                        .collect(),
                };
                ctx.progress(&format!(
                    "[{}/{total}] {t:<8} {w:<7} {c:>5} conns: {:>8.0} tx/s  p99 {:>8}  server {:>6.2} us/tx  {:>5.2} syscalls/tx",
                    points.len() + 1,
                    point.rate_per_s,
                    crate::report::units::human_ns(point.p99_ns),
                    point.server_cpu_us_per_transaction,
                    point.syscalls_per_transaction
                ));
                points.push(point);
            }
        }
    }
    let insights = insights(&points);
    Ok((
        TransportResult {
            seconds_per_point: plan.secs,
            message_bytes: MESSAGE,
            points,
        },
        insights,
    ))
}

fn insights(points: &[TransportPoint]) -> Vec<String> {
    let mut out = Vec::new();
    for w in ["tcp-rr", "tcp-crr"] {
        let Some(maxc) = points
            .iter()
            .filter(|p| p.workload == w)
            .map(|p| p.connections)
            .max()
        else {
            continue;
        };
        let mut at: Vec<&TransportPoint> = points
            .iter()
            .filter(|p| p.workload == w && p.connections == maxc)
            .collect();
        at.sort_by(|a, b| b.rate_per_s.total_cmp(&a.rate_per_s));
        if let (Some(best), Some(worst)) = (at.first(), at.last()) {
            let figures: Vec<String> = at
                .iter()
                .map(|p| format!("{} {:.0}/s", p.transport, p.rate_per_s))
                .collect();
            out.push(format!(
                "{w} at {maxc} connections: {} ({} is {:.1}x {}).",
                figures.join(", "),
                best.transport,
                best.rate_per_s / worst.rate_per_s.max(1.0),
                worst.transport
            ));
            let cpu: Vec<String> = at
                .iter()
                .map(|p| {
                    format!(
                        "{} {:.2} us and {:.2} syscalls",
                        p.transport, p.server_cpu_us_per_transaction, p.syscalls_per_transaction
                    )
                })
                .collect();
            out.push(format!(
                "Server cost per {w} transaction at {maxc} connections: {}.",
                cpu.join("; ")
            ));
        }
    }
    let mism: Vec<String> = points
        .iter()
        .filter(|p| p.server_agreement.as_deref() == Some("mismatch"))
        .map(|p| format!("{}-{}-{}", p.transport, p.workload, p.connections))
        .collect();
    if mism.is_empty() {
        out.push(
            "In every point the server's own transaction count agreed with the load's (exactly, \
             or by the requests still in flight at the end)."
                .into(),
        );
    } else {
        out.push(format!(
            "The server's own count disagreed with the load's in: {}.",
            mism.join(", ")
        ));
    }
    out
}
