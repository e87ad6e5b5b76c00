//! The verdict step: whether a finished run measured anything, decided
//! from what the load, the tracer and the target watcher returned. Pure:
//! the order of the checks is what picks the exit status when several
//! things went wrong at once (an interrupted load before a failed one,
//! a dead target before a failed tracer, a failed tracer before the
//! load's own failure).

use std::sync::mpsc;

use anyhow::Result;

use super::driven::Driven;
use super::tracer::FINISH_TIMEOUT;
use super::{counted, loadcmd};
use crate::report::anatomy::AnatomyReport;
use crate::report::profile::ProfileReport;
use crate::run::exit::{self, fail};
use crate::trace::TraceOutcome;

/// What recorded the window, as it ended.
pub(super) enum Recorder {
    /// The syscall tracer's outcome (an anatomy beside it is judged once
    /// the artifact is written: [`anatomy_verdict`]); boxed: it is large.
    Tracer(Box<Result<Result<TraceOutcome>, mpsc::RecvTimeoutError>>),
    /// The request anatomy alone (`--requests-only`): why it failed, if it
    /// did. Nothing else recorded the window, so its failure fails the run
    /// as the tracer's would, before anything is written.
    AnatomyAlone(Option<String>),
}

/// The load's and the tracer's outcomes when the run counts (no tracer's
/// with the anatomy alone); else the error with its status ([`exit`]).
/// `target_died` is asked once the load is known to have run
/// uninterrupted: the error for a target that exited during the run, if it
/// did. The returned load has no `failure`.
pub(super) fn judge(
    loaded: Result<Driven>,
    recorder: Recorder,
    target_died: impl FnOnce() -> Option<anyhow::Error>,
) -> Result<(Driven, Option<TraceOutcome>)> {
    let mut driven = match loaded {
        Ok(o) => o,
        Err(e) if e.downcast_ref::<crate::error::Exit>().is_some() => return Err(e),
        Err(e) => {
            return Err(fail(exit::LOAD_FAILED, format!("the load failed: {e:#}")));
        }
    };
    if let Driven::Own { outcome, .. } = &driven {
        exit::load_interrupted(&outcome.report, "during the load")?;
    }
    if let Some(e) = target_died() {
        return Err(e);
    }
    let trace = match recorder {
        Recorder::Tracer(traced) => Some(tracer_result(*traced)?),
        Recorder::AnatomyAlone(None) => None,
        Recorder::AnatomyAlone(Some(why)) => {
            return Err(fail(
                exit::TRACER_FAILED,
                format!(
                    "the request anatomy failed: {why} (--requests-only: nothing else recorded \
                     the window, so nothing was written)"
                ),
            ));
        }
    };
    match &mut driven {
        Driven::Own { outcome, .. } => {
            if let Some(why) = outcome.failure.take() {
                return Err(fail(exit::LOAD_FAILED, format!("the load failed: {why}")));
            }
        }
        Driven::Command(run) if !run.success => return Err(loadcmd::failed(run)),
        _ => {}
    }
    Ok((driven, trace))
}

/// A run whose requests the anatomy counts (`--load-cmd`, observe only):
/// without the anatomy, or with no request in its window, there is nothing
/// to put per request, and nothing is written.
pub(super) fn counted_verdict(
    anatomy: Option<&std::result::Result<AnatomyReport, String>>,
    driven: &Driven,
) -> Result<()> {
    let a = match anatomy {
        Some(Ok(a)) => a,
        Some(Err(why)) => {
            return Err(fail(
                exit::TRACER_FAILED,
                format!(
                    "the request anatomy failed: {why}; it is what counts the requests of a \
                     --load-cmd or observe-only run, so nothing was written"
                ),
            ));
        }
        None => {
            return Err(fail(
                exit::TRACER_FAILED,
                "the request anatomy did not run; it is what counts the requests of a \
                 --load-cmd or observe-only run, so nothing was written",
            ));
        }
    };
    if counted::requests(a) > 0 {
        return Ok(());
    }
    let (what, secs) = match driven {
        Driven::Command(run) => (
            format!("while `{}` ran", shell_words::join(&run.argv)),
            run.wall.as_secs_f64(),
        ),
        Driven::Observed(d) => ("while it was observed".to_string(), d.as_secs_f64()),
        Driven::Own { .. } => return Ok(()),
    };
    Err(fail(
        exit::NO_REQUESTS,
        format!(
            "no requests: the target answered none on its listening sockets {what} ({secs:.2} \
             s; {} connection{} seen); nothing was written. Is the load aimed at the target's \
             address ({})?",
            a.connections,
            if a.connections == 1 { "" } else { "s" },
            if a.ports.is_empty() {
                "its listening ports".to_string()
            } else {
                a.ports
                    .iter()
                    .map(|p| p.label())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    ))
}

/// After the artifact is written: a request anatomy that was asked for and
/// failed fails the run (the tracer's status), though the rest of it was
/// measured and written.
pub(super) fn anatomy_verdict(rep: &ProfileReport) -> Result<()> {
    match &rep.anatomy_failure {
        Some(why) => Err(fail(
            exit::TRACER_FAILED,
            format!("{why} (run.json has everything else; --no-requests leaves it out)"),
        )),
        None => Ok(()),
    }
}

/// The tracer's outcome, or the error that says why there is none.
fn tracer_result(
    traced: Result<Result<TraceOutcome>, mpsc::RecvTimeoutError>,
) -> Result<TraceOutcome> {
    Ok(match traced {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            return Err(fail(
                exit::TRACER_FAILED,
                format!("the tracer failed: {e:#}"),
            ));
        }
        Err(_) => {
            return Err(fail(
                exit::TIMED_OUT,
                format!(
                    "the tracer did not finish within {} s of the load's end",
                    FINISH_TIMEOUT.as_secs()
                ),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::load::LoadOutcome;
    use crate::report::fixtures;
    use crate::report::workload::CommandOutput;
    use crate::run::profile::loadcmd::CommandRun;

    fn outcomes() -> (LoadOutcome, TraceOutcome) {
        let r = fixtures::profile(&fixtures::epoll_echo());
        (
            LoadOutcome {
                report: r.load.expect("a run under sockscope's load"),
                failure: None,
                connections: Vec::new(),
            },
            TraceOutcome {
                report: r.trace.expect("the fixture is traced"),
                exit_code: 0,
            },
        )
    }

    fn code(r: Result<(Driven, Option<TraceOutcome>)>) -> (u8, String) {
        let e = r.err().expect("an error");
        let x = e
            .downcast_ref::<crate::error::Exit>()
            .expect("an exit status");
        (x.code, x.message.clone())
    }

    fn own(outcome: LoadOutcome) -> Driven {
        Driven::Own {
            argv: Vec::new(),
            outcome: Box::new(outcome),
            wall: Duration::ZERO,
        }
    }

    fn outcome_of(d: Driven) -> LoadOutcome {
        match d {
            Driven::Own { outcome, .. } => *outcome,
            _ => panic!("not sockscope's load"),
        }
    }

    fn command(exit: &str, success: bool) -> Driven {
        Driven::Command(CommandRun {
            argv: vec!["wrk".into(), "http://127.0.0.1:8080/".into()],
            exit: exit.into(),
            success,
            output: CommandOutput {
                tail: "unable to connect to 127.0.0.1:8080 Connection refused\n".into(),
                bytes: 55,
                cut: false,
            },
            wall: Duration::from_millis(300),
        })
    }

    #[test]
    fn a_load_command_that_failed_fails_the_run_with_its_status_and_output() {
        let (_, trace) = outcomes();
        let (c, m) = code(judge(
            Ok(command("exit status 3", false)),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            alive,
        ));
        assert_eq!(c, exit::LOAD_FAILED, "{m}");
        assert!(
            m.starts_with("the load command failed (exit status 3)"),
            "{m}"
        );
        assert!(m.contains("Connection refused"), "{m}");
        // The target's death comes first, as with sockscope's load.
        let (_, trace) = outcomes();
        let (c, _) = code(judge(
            Ok(command("killed by SIGTERM", false)),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            died,
        ));
        assert_eq!(c, exit::TARGET_DIED);
        let (_, trace) = outcomes();
        assert!(
            judge(
                Ok(command("exit status 0", true)),
                Recorder::Tracer(Box::new(Ok(Ok(trace)))),
                alive
            )
            .is_ok()
        );
    }

    #[test]
    fn a_counted_run_without_requests_or_anatomy_is_refused() {
        let mut a = fixtures::anatomy();
        let run = command("exit status 0", true);
        assert!(counted_verdict(Some(&Ok(a.clone())), &run).is_ok());
        a.turns = 0;
        let e = counted_verdict(Some(&Ok(a.clone())), &run).unwrap_err();
        let x = e.downcast_ref::<crate::error::Exit>().unwrap();
        assert_eq!(x.code, exit::NO_REQUESTS);
        assert!(
            x.message
                .starts_with("no requests: the target answered none"),
            "{}",
            x.message
        );
        assert!(x.message.contains("nothing was written"), "{}", x.message);
        let watched = Driven::Observed(Duration::from_secs(2));
        let e = counted_verdict(Some(&Err("no BTF".into())), &watched).unwrap_err();
        let x = e.downcast_ref::<crate::error::Exit>().unwrap();
        assert_eq!(x.code, exit::TRACER_FAILED);
        assert!(x.message.contains("no BTF"), "{}", x.message);
    }

    fn alive() -> Option<anyhow::Error> {
        None
    }

    fn died() -> Option<anyhow::Error> {
        Some(fail(exit::TARGET_DIED, "the target exited during the run"))
    }

    #[test]
    fn a_failed_anatomy_fails_the_written_run_with_the_tracer_status() {
        let mut rep = fixtures::profile(&fixtures::epoll_echo());
        assert!(anatomy_verdict(&rep).is_ok());
        rep.anatomy_failure = Some("the request anatomy failed: no BTF".into());
        let e = anatomy_verdict(&rep).unwrap_err();
        let x = e.downcast_ref::<crate::error::Exit>().expect("a status");
        assert_eq!(x.code, exit::TRACER_FAILED);
        assert!(
            x.message.starts_with("the request anatomy failed: no BTF"),
            "{}",
            x.message
        );
    }

    #[test]
    fn a_clean_run_passes_both_outcomes_through() {
        let (load, trace) = outcomes();
        let duration_s = load.report.duration_s;
        let (l, t) = judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            alive,
        )
        .unwrap();
        let l = outcome_of(l);
        assert!(l.failure.is_none());
        assert_eq!(l.report.duration_s, duration_s);
        assert_eq!(t.expect("the tracer's outcome").exit_code, 0);
    }

    #[test]
    fn the_order_of_the_checks_picks_the_status() {
        // A load that could not run: 7, and nothing else is asked.
        let (_, trace) = outcomes();
        let (c, m) = code(judge(
            Err(anyhow::anyhow!("connect refused")),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            || panic!("the target is not looked at"),
        ));
        assert_eq!(
            (c, m.as_str()),
            (exit::LOAD_FAILED, "the load failed: connect refused")
        );
        // A load error that carries its own status keeps it.
        let (c, _) = code(judge(
            Err(fail(exit::TIMED_OUT, "slow")),
            Recorder::Tracer(Box::new(Err(mpsc::RecvTimeoutError::Timeout))),
            alive,
        ));
        assert_eq!(c, exit::TIMED_OUT);
        // Interrupted (the load read the signal): 128+N before the target.
        let (mut load, trace) = outcomes();
        load.report.end_reason = "signal:SIGINT".into();
        let (c, m) = code(judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            died,
        ));
        assert_eq!(c, 130, "{m}");
        assert!(m.contains("during the load"), "{m}");
        // A dead target before a failed tracer and a failed load.
        let (mut load, _) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, _) = code(judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Ok(Err(anyhow::anyhow!("maps unreadable"))))),
            died,
        ));
        assert_eq!(c, exit::TARGET_DIED);
        // A failed tracer before the load's own failure.
        let (mut load, _) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, m) = code(judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Ok(Err(anyhow::anyhow!("maps unreadable"))))),
            alive,
        ));
        assert_eq!(
            (c, m.as_str()),
            (exit::TRACER_FAILED, "the tracer failed: maps unreadable")
        );
        // A tracer that never answered: timed out.
        let (load, _) = outcomes();
        let (c, m) = code(judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Err(mpsc::RecvTimeoutError::Timeout))),
            alive,
        ));
        assert_eq!(c, exit::TIMED_OUT);
        assert!(m.contains("within 30 s of the load's end"), "{m}");
        // Last: the load's own failure.
        let (mut load, trace) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, m) = code(judge(
            Ok(own(load)),
            Recorder::Tracer(Box::new(Ok(Ok(trace)))),
            alive,
        ));
        assert_eq!(
            (c, m.as_str()),
            (exit::LOAD_FAILED, "the load failed: errors over budget")
        );
    }

    #[test]
    fn the_anatomy_alone_fails_the_run_as_the_tracer_would_before_anything_is_written() {
        // It ran: no tracer's outcome, the load passed through.
        let (load, _) = outcomes();
        let (l, t) = judge(Ok(own(load)), Recorder::AnatomyAlone(None), alive).unwrap();
        let l = outcome_of(l);
        assert!(t.is_none() && l.failure.is_none());
        // It failed: the tracer's status, and the message says nothing was
        // written (run() publishes only what measure returns).
        let (mut load, _) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, m) = code(judge(
            Ok(own(load)),
            Recorder::AnatomyAlone(Some("maps unreadable".into())),
            alive,
        ));
        assert_eq!(c, exit::TRACER_FAILED, "{m}");
        assert!(
            m.starts_with("the request anatomy failed: maps unreadable (--requests-only"),
            "{m}"
        );
        assert!(m.contains("nothing was written"), "{m}");
        // A dead target still comes first.
        let (load, _) = outcomes();
        let (c, _) = code(judge(
            Ok(own(load)),
            Recorder::AnatomyAlone(Some("maps unreadable".into())),
            died,
        ));
        assert_eq!(c, exit::TARGET_DIED);
    }
}
