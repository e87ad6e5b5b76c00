//! The processes sockscope starts or attaches to, and the files a command
//! leaves behind: the primitives every command shares, below `run/` (the
//! commands) and usable by `netpath` and `serve` without reaching up.
//!
//! - [`target`]: launch a process (own group, captured output, a report
//!   descriptor, a network namespace), stop it (SIGTERM, bounded wait,
//!   SIGKILL, reap) on every path; [`pidfd`]: bounded waits on a process's
//!   exit and on descriptors;
//! - [`watchdog`]: the helper process that kills launched process groups
//!   once sockscope is gone, however it went;
//! - [`ready`]: the sockets a process (or a tree) itself owns, from /proc,
//!   and which of them a load can use;
//! - [`staging`]: artifact and scratch directories written as a set, under
//!   a lock; [`publish`]: an artifact's files written, put in place and
//!   announced (profile, bench, demo, report).
//!
//! It imports `report` (schemas, the `Artifact` trait), `output`, `error`,
//! `signals` and `procfs`; never `run`, `cli`,
//! `load`, `serve` or `netpath`.

pub mod cage;
pub mod pidfd;
pub mod publish;
pub mod ready;
pub mod run_as;
pub mod staging;
pub mod target;
pub mod watchdog;
