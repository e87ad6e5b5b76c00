//! sockscope: where a Linux network service spends its time, and how that
//! changes under load.
//!
//! The binary (src/main.rs) is a thin dispatcher over these modules:
//! - [`trace`]: the eBPF syscall profiler for a process tree;
//! - [`procfs`]: small /proc readers;
//! - [`report`]: artifact schemas, text tables, atomic writes;
//! - [`cli`]: the clap definitions; [`error`]: exit-status carrying errors.

pub mod cli;
pub mod error;
pub mod procfs;
pub mod report;
pub mod trace;
