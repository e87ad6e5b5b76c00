//! What a command observes: a command it launches, a running process tree,
//! or a scope (a cgroup, a process name, the machine). The syscall tracer,
//! the request anatomy and the stack sampler all take it.

use std::ffi::OsString;
use std::time::Duration;

use super::scope;
use crate::process::run_as::RunAs;

/// What to observe.
#[derive(Clone, Debug)]
pub enum TargetSpec {
    /// Start this command and trace it from its first instruction.
    Launch {
        /// argv of the command.
        argv: Vec<OsString>,
        /// Run it as this user (see `process::run_as::resolve`).
        run_as: Option<RunAs>,
    },
    /// Trace a running process.
    Attach {
        /// Its pid.
        pid: i32,
        /// Detach after this long (else on Ctrl-C/SIGTERM or its exit).
        duration: Option<Duration>,
    },
    /// Trace every task of a scope (a cgroup, a name, the machine), those
    /// that join it later included.
    Scope {
        /// Which tasks.
        scope: ScopeTarget,
        /// Detach after this long (else on Ctrl-C/SIGTERM).
        duration: Option<Duration>,
    },
}

/// The tasks a scope mode traces.
#[derive(Clone, Debug)]
pub enum ScopeTarget {
    /// Every task in this cgroup v2 directory or below it.
    Cgroup(scope::CgroupTarget),
    /// Every task whose process (thread-group leader) has this name.
    Comm(String),
    /// Every task on the machine but sockscope's own.
    System,
}

impl ScopeTarget {
    /// How the scope is named in messages and labels: `cgroup:/a/b`,
    /// `unit:nginx.service`, `comm:nginx`, `system`.
    pub fn describe(&self) -> String {
        match self {
            Self::Cgroup(c) => match &c.unit {
                Some(u) => format!("unit:{u}"),
                None => format!("cgroup:{}", c.rel),
            },
            Self::Comm(n) => format!("comm:{n}"),
            Self::System => "system".into(),
        }
    }
}
