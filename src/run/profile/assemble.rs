//! The assemble step: the profile report built from what the run
//! measured, once everything is in: the load's command line, the derived
//! figures and their attribution when others serve the address, the
//! sentences, the caveats, the windows and the path. Pure (the one thing
//! read from the machine, the advice's settings, comes in as `advise`), so
//! the report of any combination of parts can be checked without a run.

use crate::endpoint::Endpoint;
use std::time::{Duration, SystemTime};

use super::counted;
use super::driven::Driven;
use super::share::{self, Owners};
use super::spec::ProfileTarget;
use crate::load::LoadOutcome;
use crate::netpath::{NetPath, PathRecord};
use crate::process::ready::is_loopback;
use crate::report::anatomy::AnatomyReport;
use crate::report::evidence::KernelEvidence;
use crate::report::insight::{self, Volume};
use crate::report::load::LoadReport;
use crate::report::machine::Machine;
use crate::report::profile::{
    Derived, ProfileReport, SCHEMA, SCHEMA_VERSION, Sharer, TargetRecord, Windows,
};
use crate::report::trace::TraceReport;
use crate::report::tune::AuditRow;
use crate::report::untraced;
use crate::report::workload::WorkloadRecord;
use crate::run::machine;

/// What stood for the syscall tracer's report.
pub(super) enum Syscalls {
    /// The tracer's report (boxed: it is large).
    Traced(Box<TraceReport>),
    /// No tracer (`--requests-only`): the target's CPU over the anatomy's
    /// window, read from /proc or its cgroup.
    NotTraced(UntracedCpu),
}

/// The target's CPU over the anatomy's window, without the tracer.
pub(super) struct UntracedCpu {
    /// (user, system), s; None when it could not be read.
    pub cpu: Option<(f64, f64)>,
    /// Where it was read (`/proc stat`, `cgroup cpu.stat`).
    pub source: &'static str,
    /// The anatomy's window, s.
    pub window_s: f64,
    /// What limits it (processes gone during the window).
    pub notes: Vec<String>,
}

/// Everything a run measured, gathered before any of it is interpreted.
pub(super) struct Measured {
    /// When the run started.
    pub started_at: SystemTime,
    /// The machine it ran on.
    pub machine: Machine,
    /// The target, as it was found, readied and stopped.
    pub target: TargetRecord,
    /// The address the load was sent to.
    pub addr: Endpoint,
    /// What drove the window.
    pub driven: Driven,
    /// The tracer's report, or the target's CPU without it.
    pub syscalls: Syscalls,
    /// CPU of profile's own control work during the load, s.
    pub control_cpu_s: f64,
    /// Processes outside the traced tree that serve the address too.
    pub shared_with: Vec<Sharer>,
    /// Who held the load's connections, when they were sampled.
    pub owners: Option<Owners>,
    /// The kernel evidence, when collected.
    pub evidence: Option<KernelEvidence>,
    /// The emulated path's record, when the run had one.
    pub path: Option<PathRecord>,
    /// The load and the target may share CPUs.
    pub shares_cpus: bool,
    /// The request anatomy (None: not asked for), or why it failed.
    pub anatomy: Option<Result<AnatomyReport, String>>,
    /// With the tracer: the target's (user, system) CPU over the anatomy's
    /// window, for the per-request CPU of the requests it counted.
    pub anatomy_cpu: Option<(f64, f64)>,
}

/// The report of a run: `command_line` is profile's own; `advise` gives
/// the tuning rows the evidence supports (`tune::supported_by`), asked only
/// when there is evidence.
pub(super) fn assemble(
    command_line: Vec<String>,
    m: Measured,
    advise: impl FnOnce(&KernelEvidence, Option<&LoadReport>) -> Vec<AuditRow>,
) -> ProfileReport {
    let Measured {
        started_at,
        machine,
        target,
        addr,
        driven,
        syscalls,
        control_cpu_s,
        shared_with,
        owners,
        evidence,
        path,
        shares_cpus,
        mut anatomy,
        anatomy_cpu,
    } = m;
    let anatomy_count = match &anatomy {
        Some(Ok(a)) => Some(counted::requests(a)),
        _ => None,
    };
    let server = target.server_report.clone();
    let (mut load_report, load_conns, load_wall, load_command, workload) = match driven {
        Driven::Own {
            argv,
            outcome,
            wall,
        } => {
            let LoadOutcome {
                report: mut load_report,
                connections,
                ..
            } = *outcome;
            let mut load_command = vec!["sockscope".to_string(), "load".to_string()];
            load_command.extend(argv);
            load_report.config.command_line = load_command.clone();
            let w = WorkloadRecord::own(&load_report, wall.as_secs_f64(), anatomy_count);
            (Some(load_report), connections, Some(wall), load_command, w)
        }
        other => {
            let a = match &anatomy {
                Some(Ok(a)) => Some(a),
                _ => None,
            };
            let w = counted::record(other, a);
            (None, Vec::new(), None, Vec::new(), w)
        }
    };
    let (mut derived, trace_report, window_s, cpu_notes) = match (syscalls, &load_report) {
        (Syscalls::Traced(t), Some(l)) => {
            let d = insight::derive(l, &t, server.as_ref(), control_cpu_s);
            let s = t.window.duration_s;
            (d, Some(*t), s, Vec::new())
        }
        (Syscalls::Traced(t), None) => {
            let mut d = insight::derive_counted(&workload, &t, server.as_ref(), anatomy_cpu);
            d.control_thread_cpu_s = control_cpu_s;
            let s = t.window.duration_s;
            (d, Some(*t), s, Vec::new())
        }
        (Syscalls::NotTraced(c), l) => {
            let mut d = match l {
                Some(l) => untraced::derive(
                    l,
                    c.cpu,
                    c.source,
                    c.window_s,
                    server.as_ref(),
                    control_cpu_s,
                ),
                None => untraced::derive_counted(
                    &workload,
                    c.cpu,
                    c.source,
                    c.window_s,
                    server.as_ref(),
                ),
            };
            d.control_thread_cpu_s = control_cpu_s;
            let mut notes = c.notes;
            if c.cpu.is_none() {
                notes.push(format!(
                    "The target's CPU could not be read ({}): its CPU figures are unknown.",
                    c.source
                ));
            }
            (d, None, c.window_s, notes)
        }
    };
    let vol = match &load_report {
        Some(l) => Volume::Load(l),
        None => Volume::Counted(&workload),
    };
    // Without sockscope's load the anatomy follows the scope's own sockets
    // only: what it counted is the traced tree's share already.
    if let (false, Some(l)) = (shared_with.is_empty(), &load_report) {
        let a = share::attribute(
            shared_with,
            owners.as_ref(),
            &load_conns,
            l,
            trace_report.as_ref(),
        );
        insight::attribute_per_transaction(&mut derived, a);
    }
    let mut insights = match &trace_report {
        Some(t) => insight::sentences(&derived, vol, t),
        None => untraced::sentences(&derived, vol),
    };
    if let (Some(p), Some(l)) = (&path, &load_report) {
        insights.insert(
            1.min(insights.len()),
            crate::report::path_insight::emulated_path_sentence(l, p),
        );
    }
    let advice = evidence.as_ref().map_or_else(Vec::new, |e| {
        insights.extend(e.sentences(derived.transactions, load_report.as_ref()));
        advise(e, load_report.as_ref())
    });
    let (anatomy, anatomy_failure) = match anatomy.take() {
        None => (None, None),
        Some(Ok(mut a)) => {
            if let Some(l) = &mut load_report {
                if let Some(lat) = &l.latency {
                    crate::anatomy::summary::with_client(&mut a, &lat.summary, "load");
                }
                // Pipelined batches reach the server as one turn each.
                // HTTP/2 streams are not a pipeline: the anatomy times
                // each stream on its own (src/bpf/h2.h).
                let h2 = l.config.workload_options.contains_key("http2");
                a.load_pipeline = l
                    .config
                    .pipeline
                    .filter(|k| *k > 1 && !h2)
                    .map(|k| k as u32);
            }
            insights.extend(insight::anatomy_sentences(&a));
            (Some(a), None)
        }
        Some(Err(e)) => (None, Some(format!("the request anatomy failed: {e}"))),
    };
    let mut caveats = caveats(&machine, &addr, shares_cpus, path.as_ref(), &derived);
    caveats.extend(cpu_notes);
    if let Some(f) = &anatomy_failure {
        caveats.push(format!(
            "No request anatomy: {f}. Everything else in this run was measured."
        ));
    }
    let windows = match (&load_report, load_wall) {
        (Some(l), Some(wall)) => windows(l, wall, window_s, trace_report.is_some()),
        _ => counted::windows(&workload, window_s, trace_report.is_some()),
    };
    ProfileReport {
        header: crate::report::header::ArtifactHeader::new(SCHEMA, SCHEMA_VERSION),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        command_line,
        target,
        load_command,
        workload,
        windows,
        machine,
        load: load_report,
        trace: trace_report,
        derived,
        insights,
        caveats,
        evidence,
        advice,
        path: match path {
            Some(p) => Some(NetPath::Emulated(Box::new(p))),
            None if addr.inet().is_some_and(|a| is_loopback(a.ip())) => Some(NetPath::loopback()),
            None => None,
        },
        anatomy,
        anatomy_failure,
        stacks: None,
        stacks_failure: None,
        tail: None,
        sweep: None,
        capacity: None,
    }
}

/// The caveats, in order: the path's, the machine's (loopback, virtual
/// machine, shared CPUs), a shared address's, a server that disagrees.
fn caveats(
    machine: &Machine,
    addr: &Endpoint,
    shares_cpus: bool,
    path: Option<&PathRecord>,
    derived: &Derived,
) -> Vec<String> {
    let mut caveats = machine::caveats(machine, addr.inet().map(|a| a.ip()), shares_cpus);
    if addr.is_unix() {
        caveats.push(format!(
            "Unix socket: the load and the target talk over {} on this machine (no network \
             stack, no network path).",
            crate::text::escape(&addr.to_string())
        ));
    }
    if let Some(p) = path {
        caveats.insert(0, p.caveat());
    }
    caveats.extend(attribution_caveat(derived));
    if derived.server_agreement.as_deref() == Some("mismatch") {
        caveats.push(
            "The server's own transaction count disagrees with the load's (see the insights)."
                .into(),
        );
    }
    caveats
}

/// How the artifact names the kind of target.
pub(super) fn mode(target: &ProfileTarget) -> &'static str {
    match target {
        ProfileTarget::Sockscope(_) => "sockscope",
        ProfileTarget::Command(_) => "command",
        ProfileTarget::Pid(_) => "pid",
        ProfileTarget::Cgroup(_) => "cgroup",
    }
}

/// The caveat of a run whose address others serve too.
fn attribution_caveat(d: &Derived) -> Option<String> {
    let a = d.attribution.as_ref()?;
    let pids: Vec<String> = a.shared_with.iter().map(|s| s.pid.to_string()).collect();
    Some(match a.share {
        Some(share) => format!(
            "Shared address: processes outside the traced tree (pids {}) serve it too; the \
             per-transaction target figures are over the traced tree's estimated share ({:.1}%), \
             an estimate ({}).",
            pids.join(", "),
            share * 100.0,
            a.method
        ),
        None => format!(
            "Shared address, UNATTRIBUTED: processes outside the traced tree (pids {}) serve \
             it too and the traced tree's share is unknown; the target's per-transaction \
             figures are null.",
            pids.join(", ")
        ),
    })
}

/// The load and trace windows (without the tracer, the anatomy's window
/// stands for the trace's), and the note that says how they differ.
fn windows(load_report: &LoadReport, load_wall: Duration, trace_s: f64, traced: bool) -> Windows {
    let (window, how, covered) = if traced {
        (
            "trace window",
            "",
            "Target CPU and syscalls cover the trace window",
        )
    } else {
        (
            "request anatomy's window",
            "; no syscall tracer, --requests-only",
            "Target CPU and the anatomy cover the anatomy's window",
        )
    };
    Windows {
        load_s: load_report.duration_s,
        load_wall_s: load_wall.as_secs_f64(),
        trace_s,
        note: format!(
            "The {window} ({trace_s:.3} s{how}) opens before the load starts and closes after \
             it returns, so it is {:.1} ms longer than the load's wall time ({:.3} s, connection \
             set-up and teardown included); the load's own measured window is {:.3} s. \
             {covered}; transactions cover the load.",
            ((trace_s - load_wall.as_secs_f64()) * 1e3).max(0.0),
            load_wall.as_secs_f64(),
            load_report.duration_s,
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::report::fixtures;

    /// The parts of the fixture profile, as a run on 127.0.0.1 that
    /// shares nothing.
    fn measured() -> Measured {
        let r = fixtures::profile(&fixtures::epoll_echo());
        let mut machine = r.machine;
        machine.virtualization_evidence = None;
        Measured {
            started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_000_000_123),
            machine,
            target: r.target,
            addr: Endpoint::parse("127.0.0.1:35871").unwrap(),
            driven: Driven::Own {
                argv: vec![
                    "tcp-rr".into(),
                    "127.0.0.1:35871".into(),
                    "-c".into(),
                    "4".into(),
                ],
                outcome: Box::new(LoadOutcome {
                    report: r.load.expect("a run under sockscope's load"),
                    failure: None,
                    connections: Vec::new(),
                }),
                wall: Duration::from_millis(2_050),
            },
            syscalls: Syscalls::Traced(Box::new(r.trace.expect("the fixture is traced"))),
            control_cpu_s: 0.01,
            shared_with: Vec::new(),
            owners: None,
            evidence: None,
            path: None,
            shares_cpus: false,
            anatomy: None,
            anatomy_cpu: None,
        }
    }

    fn outcome(m: &mut Measured) -> &mut LoadOutcome {
        match &mut m.driven {
            Driven::Own { outcome, .. } => outcome,
            _ => panic!("not sockscope's load"),
        }
    }

    fn no_advice(_: &KernelEvidence, _: Option<&LoadReport>) -> Vec<AuditRow> {
        panic!("advice asked without evidence")
    }

    #[test]
    fn the_report_is_assembled_from_its_parts() {
        let mut m = measured();
        let target = m.target.clone();
        let Syscalls::Traced(t) = &m.syscalls else {
            unreachable!()
        };
        let trace_s = t.window.duration_s;
        let load_s = outcome(&mut m).report.duration_s;
        let rep = assemble(vec!["sockscope".into(), "profile".into()], m, no_advice);
        assert_eq!(rep.header.schema, SCHEMA);
        assert_eq!(rep.header.schema_version, SCHEMA_VERSION);
        assert_eq!(rep.started_at, "2026-11-18T11:06:40.123Z");
        assert_eq!(rep.command_line, ["sockscope", "profile"]);
        assert_eq!(
            serde_json::to_value(&rep.target).unwrap(),
            serde_json::to_value(&target).unwrap()
        );
        let load = ["sockscope", "load", "tcp-rr", "127.0.0.1:35871", "-c", "4"];
        assert_eq!(rep.load_command, load);
        assert_eq!(rep.load.as_ref().unwrap().config.command_line, load);
        assert_eq!(rep.windows.load_s, load_s);
        assert_eq!(rep.windows.load_wall_s, 2.05);
        assert_eq!(rep.windows.trace_s, trace_s);
        assert_eq!(rep.derived.control_thread_cpu_s, 0.01);
        assert!(rep.derived.attribution.is_none());
        assert!(rep.evidence.is_none() && rep.advice.is_empty());
        assert!(!rep.insights.is_empty());
        assert_eq!(rep.path, Some(NetPath::loopback()));
        assert_eq!(rep.caveats.len(), 1, "{:?}", rep.caveats);
        assert!(rep.caveats[0].starts_with("Loopback:"), "{:?}", rep.caveats);
    }

    #[test]
    fn a_remote_address_has_no_path_and_no_loopback_caveat() {
        let mut m = measured();
        m.addr = Endpoint::parse("10.0.0.7:8080").unwrap();
        m.shares_cpus = true;
        let rep = assemble(Vec::new(), m, no_advice);
        assert_eq!(rep.path, None);
        assert_eq!(rep.caveats.len(), 1, "{:?}", rep.caveats);
        assert!(
            rep.caveats[0].contains("share the same 2 CPUs"),
            "{:?}",
            rep.caveats
        );
    }

    #[test]
    fn a_unix_socket_has_no_network_path() {
        let mut m = measured();
        m.addr = Endpoint::parse("unix:/run/app.sock").unwrap();
        let rep = assemble(Vec::new(), m, no_advice);
        assert_eq!(rep.path, None);
        assert_eq!(rep.caveats.len(), 1, "{:?}", rep.caveats);
        let c = &rep.caveats[0];
        assert!(
            c.starts_with("Unix socket:") && c.contains("unix:/run/app.sock"),
            "{c}"
        );
        assert!(c.contains("no network path"), "{c}");
    }

    #[test]
    fn evidence_adds_its_sentences_and_the_advice_it_supports() {
        let mut m = measured();
        m.evidence = Some(KernelEvidence {
            sched: Some(crate::report::evidence::SchedEvidence {
                on_cpu_s: 1.0,
                runqueue_wait_s: 1.0,
                wait_share: 0.5,
                ..Default::default()
            }),
            ..Default::default()
        });
        let asked = Cell::new(0);
        let rep = assemble(Vec::new(), m, |_, load| {
            asked.set(asked.get() + 1);
            assert_eq!(
                load.unwrap().config.command_line[..2],
                ["sockscope", "load"]
            );
            vec![AuditRow::default()]
        });
        assert_eq!(asked.get(), 1);
        assert_eq!(rep.advice.len(), 1);
        assert!(rep.evidence.is_some());
        assert!(
            rep.insights
                .last()
                .is_some_and(|s| s.starts_with("The target's threads waited 50%")),
            "{:?}",
            rep.insights
        );
    }

    #[test]
    fn a_shared_address_is_attributed_and_said() {
        let mut m = measured();
        m.shared_with = vec![Sharer {
            pid: 4242,
            comm: "worker".into(),
            how: "reuseport".into(),
        }];
        let rep = assemble(Vec::new(), m, no_advice);
        let a = rep.derived.attribution.as_ref().expect("an attribution");
        assert_eq!(a.shared_with.len(), 1);
        let c = rep.caveats.last().unwrap();
        assert!(
            c.starts_with("Shared address") && c.contains("pids 4242"),
            "{c}"
        );
    }

    #[test]
    fn the_attribution_caveat_says_the_share_or_that_it_is_unknown() {
        let mut d = Derived::default();
        assert_eq!(attribution_caveat(&d), None);
        d.attribution = Some(crate::report::profile::Attribution {
            shared_with: vec![Sharer {
                pid: 7,
                comm: "w".into(),
                how: "same_socket".into(),
            }],
            share: Some(0.25),
            method: "accepts".into(),
            ..Default::default()
        });
        let c = attribution_caveat(&d).unwrap();
        assert!(c.contains("(pids 7)") && c.contains("share (25.0%)"), "{c}");
        assert!(c.contains("an estimate (accepts)"), "{c}");
        d.attribution.as_mut().unwrap().share = None;
        let c = attribution_caveat(&d).unwrap();
        assert!(c.starts_with("Shared address, UNATTRIBUTED"), "{c}");
    }

    #[test]
    fn the_windows_note_says_how_much_longer_the_trace_was() {
        let mut load = fixtures::profile(&fixtures::epoll_echo()).load.unwrap();
        load.duration_s = 2.0;
        let w = windows(&load, Duration::from_millis(2_100), 2.1254, true);
        assert_eq!((w.load_s, w.load_wall_s, w.trace_s), (2.0, 2.1, 2.1254));
        assert!(
            w.note.starts_with("The trace window (2.125 s)"),
            "{}",
            w.note
        );
        assert!(w.note.contains("it is 25.4 ms longer"), "{}", w.note);
        assert!(w.note.contains("window is 2.000 s"), "{}", w.note);
        // Never a negative difference.
        let w = windows(&load, Duration::from_secs(3), 2.0, true);
        assert!(w.note.contains("it is 0.0 ms longer"), "{}", w.note);
    }

    #[test]
    fn without_the_tracer_the_report_has_no_trace_and_says_what_is_missing() {
        let mut m = measured();
        let tx = outcome(&mut m).report.transactions as f64;
        m.syscalls = Syscalls::NotTraced(UntracedCpu {
            cpu: Some((0.5, 1.5)),
            source: "/proc stat",
            window_s: 2.0,
            notes: vec!["1 process(es) exited during the window".into()],
        });
        m.anatomy = Some(Ok(fixtures::anatomy()));
        let rep = assemble(Vec::new(), m, no_advice);
        assert!(rep.trace.is_none());
        let d = &rep.derived;
        assert_eq!(d.target_cpu_source.as_deref(), Some("/proc stat"));
        assert!((d.target_cpu_us_per_transaction - 2e6 / tx).abs() < 1e-6);
        assert_eq!(d.target_cpus_busy, 1.0);
        assert!(d.syscalls_per_transaction.is_nan() && d.top_syscalls.is_empty());
        assert!(
            rep.insights
                .contains(&crate::report::untraced::NOT_RECORDED.to_string()),
            "{:?}",
            rep.insights
        );
        assert!(rep.anatomy.is_some() && rep.anatomy_failure.is_none());
        assert_eq!(rep.windows.trace_s, 2.0);
        assert!(
            rep.windows
                .note
                .starts_with("The request anatomy's window (2.000 s; no syscall tracer"),
            "{}",
            rep.windows.note
        );
        assert!(
            rep.caveats
                .iter()
                .any(|c| c.contains("exited during the window"))
        );
        // CPU unread: said, and no per-transaction figure.
        let mut m = measured();
        m.syscalls = Syscalls::NotTraced(UntracedCpu {
            cpu: None,
            source: "cgroup cpu.stat",
            window_s: 2.0,
            notes: Vec::new(),
        });
        let rep = assemble(Vec::new(), m, no_advice);
        assert!(rep.derived.target_cpu_us_per_transaction.is_nan());
        assert!(
            rep.caveats
                .iter()
                .any(|c| c.starts_with("The target's CPU could not be read (cgroup cpu.stat)")),
            "{:?}",
            rep.caveats
        );
    }

    #[test]
    fn a_pipelining_load_makes_the_anatomy_say_its_turns_are_batches() {
        let mut m = measured();
        m.anatomy = Some(Ok(fixtures::anatomy()));
        outcome(&mut m).report.config.pipeline = Some(8);
        let rep = assemble(Vec::new(), m, no_advice);
        let a = rep.anatomy.as_ref().expect("the anatomy");
        assert_eq!(a.load_pipeline, Some(8));
        assert!(a.sentences()[0].contains("batches of up to 8 requests"));
        let text = crate::report::anatomy::render(a);
        assert!(text.starts_with("Anatomy of a request"), "{text}");
        assert!(
            text.contains("turns are batches of up to 8 pipelined requests"),
            "{text}"
        );
        // One request in flight: single requests, nothing said.
        let mut m = measured();
        m.anatomy = Some(Ok(fixtures::anatomy()));
        outcome(&mut m).report.config.pipeline = Some(1);
        let rep = assemble(Vec::new(), m, no_advice);
        assert_eq!(rep.anatomy.as_ref().unwrap().load_pipeline, None);
        // HTTP/2 streams are not batches: no pipeline note.
        let mut m = measured();
        m.anatomy = Some(Ok(fixtures::anatomy()));
        let l = &mut outcome(&mut m).report;
        l.config.pipeline = Some(8);
        l.config
            .workload_options
            .insert("http2".into(), serde_json::json!({"streams": 8}));
        let rep = assemble(Vec::new(), m, no_advice);
        assert_eq!(rep.anatomy.as_ref().unwrap().load_pipeline, None);
    }

    #[test]
    fn the_anatomy_gets_the_clients_latency_and_its_sentences() {
        let mut m = measured();
        m.anatomy = Some(Ok(fixtures::anatomy()));
        let client = outcome(&mut m).report.latency.as_ref().unwrap().summary;
        let rep = assemble(Vec::new(), m, no_advice);
        let a = rep.anatomy.as_ref().expect("the anatomy");
        let c = a.client.as_ref().expect("the client's latency");
        assert_eq!((c.source.as_str(), c.count), ("load", client.count));
        assert_eq!(c.p99_ns, client.p99_ns);
        assert_eq!(c.difference_ns[2], client.p99_ns as i64 - 3_600_000);
        assert!(rep.anatomy_failure.is_none());
        assert!(
            rep.insights.iter().any(|s| s
                == "At p99, 2.90ms of 3.60ms at the server was CPU wait: the \
                               target's threads were runnable but not running."),
            "{:?}",
            rep.insights
        );
    }

    #[test]
    fn a_failed_anatomy_is_recorded_and_the_rest_kept() {
        let mut m = measured();
        m.anatomy = Some(Err("loading anatomy.bpf.o: no BTF".into()));
        let rep = assemble(Vec::new(), m, no_advice);
        assert!(rep.anatomy.is_none());
        assert_eq!(
            rep.anatomy_failure.as_deref(),
            Some("the request anatomy failed: loading anatomy.bpf.o: no BTF")
        );
        let c = rep.caveats.last().unwrap();
        assert!(
            c.starts_with("No request anatomy: the request anatomy failed"),
            "{c}"
        );
        assert!(!rep.insights.is_empty());
        // Not asked for: neither.
        let rep = assemble(Vec::new(), measured(), no_advice);
        assert!(rep.anatomy.is_none() && rep.anatomy_failure.is_none());
    }

    #[test]
    fn modes_are_named() {
        assert_eq!(mode(&ProfileTarget::Sockscope(Vec::new())), "sockscope");
        assert_eq!(mode(&ProfileTarget::Command(Vec::new())), "command");
        assert_eq!(mode(&ProfileTarget::Pid(1)), "pid");
    }
}
