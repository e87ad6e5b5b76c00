//! The verdict step: whether a finished run measured anything, decided
//! from what the load, the tracer and the target watcher returned. Pure:
//! the order of the checks is what picks the exit status when several
//! things went wrong at once (an interrupted load before a failed one,
//! a dead target before a failed tracer, a failed tracer before the
//! load's own failure).

use std::sync::mpsc;

use anyhow::Result;

use super::tracer::FINISH_TIMEOUT;
use crate::load::LoadOutcome;
use crate::report::profile::ProfileReport;
use crate::run::exit::{self, fail};
use crate::trace::TraceOutcome;

/// The load's and the tracer's outcomes when the run counts; else the
/// error with its status ([`exit`]). `target_died` is asked once the load
/// is known to have run uninterrupted: the error for a target that exited
/// during the run, if it did. The returned load has no `failure`.
pub(super) fn judge(
    loaded: Result<LoadOutcome>,
    traced: Result<Result<TraceOutcome>, mpsc::RecvTimeoutError>,
    target_died: impl FnOnce() -> Option<anyhow::Error>,
) -> Result<(LoadOutcome, TraceOutcome)> {
    let mut load = match loaded {
        Ok(o) => o,
        Err(e) if e.downcast_ref::<crate::error::Exit>().is_some() => return Err(e),
        Err(e) => {
            return Err(fail(exit::LOAD_FAILED, format!("the load failed: {e:#}")));
        }
    };
    exit::load_interrupted(&load.report, "during the load")?;
    if let Some(e) = target_died() {
        return Err(e);
    }
    let trace = tracer_result(traced)?;
    if let Some(why) = load.failure.take() {
        return Err(fail(exit::LOAD_FAILED, format!("the load failed: {why}")));
    }
    Ok((load, trace))
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
    use super::*;
    use crate::report::fixtures;

    fn outcomes() -> (LoadOutcome, TraceOutcome) {
        let r = fixtures::profile(&fixtures::epoll_echo());
        (
            LoadOutcome {
                report: r.load,
                failure: None,
                connections: Vec::new(),
            },
            TraceOutcome {
                report: r.trace,
                exit_code: 0,
            },
        )
    }

    fn code(r: Result<(LoadOutcome, TraceOutcome)>) -> (u8, String) {
        let e = r.err().expect("an error");
        let x = e
            .downcast_ref::<crate::error::Exit>()
            .expect("an exit status");
        (x.code, x.message.clone())
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
        let (l, t) = judge(Ok(load), Ok(Ok(trace)), alive).unwrap();
        assert!(l.failure.is_none());
        assert_eq!(l.report.duration_s, duration_s);
        assert_eq!(t.exit_code, 0);
    }

    #[test]
    fn the_order_of_the_checks_picks_the_status() {
        // A load that could not run: 7, and nothing else is asked.
        let (_, trace) = outcomes();
        let (c, m) = code(judge(
            Err(anyhow::anyhow!("connect refused")),
            Ok(Ok(trace)),
            || panic!("the target is not looked at"),
        ));
        assert_eq!(
            (c, m.as_str()),
            (exit::LOAD_FAILED, "the load failed: connect refused")
        );
        // A load error that carries its own status keeps it.
        let (c, _) = code(judge(
            Err(fail(exit::TIMED_OUT, "slow")),
            Err(mpsc::RecvTimeoutError::Timeout),
            alive,
        ));
        assert_eq!(c, exit::TIMED_OUT);
        // Interrupted (the load read the signal): 128+N before the target.
        let (mut load, trace) = outcomes();
        load.report.end_reason = "signal:SIGINT".into();
        let (c, m) = code(judge(Ok(load), Ok(Ok(trace)), died));
        assert_eq!(c, 130, "{m}");
        assert!(m.contains("during the load"), "{m}");
        // A dead target before a failed tracer and a failed load.
        let (mut load, _) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, _) = code(judge(
            Ok(load),
            Ok(Err(anyhow::anyhow!("maps unreadable"))),
            died,
        ));
        assert_eq!(c, exit::TARGET_DIED);
        // A failed tracer before the load's own failure.
        let (mut load, _) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, m) = code(judge(
            Ok(load),
            Ok(Err(anyhow::anyhow!("maps unreadable"))),
            alive,
        ));
        assert_eq!(
            (c, m.as_str()),
            (exit::TRACER_FAILED, "the tracer failed: maps unreadable")
        );
        // A tracer that never answered: timed out.
        let (load, _) = outcomes();
        let (c, m) = code(judge(Ok(load), Err(mpsc::RecvTimeoutError::Timeout), alive));
        assert_eq!(c, exit::TIMED_OUT);
        assert!(m.contains("within 30 s of the load's end"), "{m}");
        // Last: the load's own failure.
        let (mut load, trace) = outcomes();
        load.failure = Some("errors over budget".into());
        let (c, m) = code(judge(Ok(load), Ok(Ok(trace)), alive));
        assert_eq!(
            (c, m.as_str()),
            (exit::LOAD_FAILED, "the load failed: errors over budget")
        );
    }
}
