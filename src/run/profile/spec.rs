//! What a profile run measures, parsed and validated by `cli::profile`:
//! the target (launched, a pid, a cgroup), the `--load` line, the path.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::Result;

use super::loadcmd::LoadCommand;
use super::loadline::LoadLine;
use crate::process::run_as::RunAs;

/// What to measure.
#[derive(Clone, Debug)]
pub enum ProfileTarget {
    /// Run this sockscope binary with these arguments (`serve echo ...`).
    Sockscope(Vec<String>),
    /// Run this program.
    Command(Vec<OsString>),
    /// Attach to this running process; it is not stopped afterwards.
    Pid(i32),
    /// Trace every process of this cgroup (a service under systemd or a
    /// container runtime); nothing in it is stopped afterwards.
    Cgroup(crate::probe::scope::CgroupTarget),
}

/// What drives the window.
#[derive(Clone, Debug)]
pub enum Workload {
    /// sockscope's own load (`--load`).
    Own(LoadLine),
    /// Any command (`--load-cmd`), run as `run_as`.
    Command(LoadCommand, Option<RunAs>),
    /// No load: the target's own traffic, observed this long
    /// (`--duration`).
    Observe(Duration),
}

impl Workload {
    /// sockscope's own load line, if it is.
    pub fn own(&self) -> Option<&LoadLine> {
        match self {
            Workload::Own(l) => Some(l),
            _ => None,
        }
    }

    /// The target's socket the window is about: a bound UDP socket for a
    /// UDP load, else a TCP listener.
    pub fn is_udp(&self) -> bool {
        self.own().is_some_and(LoadLine::is_udp)
    }
}

/// What records a profile's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorders {
    /// The syscall tracer and the request anatomy beside it (the default).
    Both,
    /// The syscall tracer alone (`--no-requests`).
    Syscalls,
    /// The request anatomy alone (`--requests-only`): no syscall hook, so
    /// the target pays only the anatomy's cost.
    Requests,
}

impl Recorders {
    /// The syscall tracer is attached.
    pub fn syscalls(self) -> bool {
        self != Recorders::Requests
    }

    /// The request anatomy is recorded.
    pub fn requests(self) -> bool {
        self != Recorders::Syscalls
    }
}

/// What a profile in steps does: `--sweep` (a step per schedule step) or
/// `--find-capacity` (a closed-loop step, then the search's open-loop
/// steps).
#[derive(Clone, Debug)]
pub enum StepPlan {
    /// `--sweep`: the schedule and its text as given.
    Sweep {
        /// The parsed schedule.
        plan: crate::load::schedule::rate_plan::RatePlan,
        /// As given.
        text: String,
    },
    /// `--find-capacity`: the SLO, and each step's length (`--step`).
    Capacity {
        /// The objective.
        slo: crate::report::sweep::Slo,
        /// Each step's load window, whole seconds.
        step_s: u64,
    },
}

/// A profile in steps, on one live target.
#[derive(Clone, Debug)]
pub struct Steps {
    /// What the steps are.
    pub plan: StepPlan,
    /// The whole run's bound (`--max-duration`): no step starts that
    /// would end past it.
    pub max_duration: Duration,
}

/// One profile run, parsed and validated.
#[derive(Clone, Debug)]
pub struct ProfileSpec {
    /// The target.
    pub target: ProfileTarget,
    /// What drives the window: sockscope's load line (address filled in
    /// once learned), a command, or nothing (observe).
    pub workload: Workload,
    /// Longest wait for the target to own a listening socket.
    pub ready_timeout: Duration,
    /// Trace with the entry hook only (no latency).
    pub count_only: bool,
    /// What records the window: the syscall tracer, the request anatomy,
    /// or both (the default).
    pub recorders: Recorders,
    /// Collect kernel evidence (counters, sockets, run-queue delay).
    pub evidence: bool,
    /// Launched targets run as this user.
    pub run_as: Option<RunAs>,
    /// No progress bar.
    pub quiet: bool,
    /// The command line recorded in the artifact.
    pub command_line: Vec<String>,
    /// An emulated path between the load and the target (None: loopback
    /// or whatever address the target has).
    pub path: Option<crate::netpath::PathSpec>,
    /// How the path is built.
    pub path_backend: crate::netpath::BackendChoice,
    /// `--sweep` or `--find-capacity` (None: one window).
    pub steps: Option<Steps>,
    /// Sample the target's stacks (`--no-stacks`: None).
    pub stacks: Option<crate::stacks::StacksOptions>,
    /// How the anatomy reads requests (`--max-endpoints`,
    /// `--tls-plaintext`).
    pub reading: crate::anatomy::Reading,
}

/// Checks the arguments of a `--target`: a `--json` of its own is refused.
/// profile hands a serve target a descriptor for its report and embeds the
/// report in run.json; reading back a path the target wrote (it may run as
/// another user, who could put a link to any file there) is what it must
/// never do as root.
pub fn check_target_args(args: &[String]) -> Result<()> {
    if let Some(a) = args
        .iter()
        .find(|a| *a == "--json" || a.starts_with("--json="))
    {
        return Err(crate::error::usage(format!(
            "--target: leave out {a}: profile gives a serve target its own report descriptor \
             and puts the server's report in run.json (target.server_report)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_target_may_not_name_its_own_json() {
        assert!(check_target_args(&words(&["serve", "echo", "--threads", "2"])).is_ok());
        for a in [
            words(&["serve", "echo", "--json", "/tmp/x"]),
            words(&["serve", "udp-sink", "--json=/tmp/x"]),
        ] {
            let e = check_target_args(&a).unwrap_err();
            let x = e
                .downcast_ref::<crate::error::Exit>()
                .expect("a usage error");
            assert_eq!(x.code, 2);
            assert!(
                x.message.starts_with("--target: leave out --json"),
                "{}",
                x.message
            );
            assert!(x.message.contains("target.server_report"), "{}", x.message);
        }
        // Only the option itself: a value that merely contains it is fine.
        assert!(check_target_args(&words(&["serve", "echo", "--listen", "--jsonish"])).is_ok());
    }
}
