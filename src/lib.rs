//! sockscope: where a Linux network service spends its time, and how that
//! changes under load.
//!
//! The binary (src/main.rs) is a thin dispatcher over these modules:
//! - [`trace`]: the eBPF syscall profiler for a process tree;
//! - [`load`]: the load generator; [`serve`]: the reference targets;
//! - [`proto`]: wire formats load and serve share; [`stats`]: HDR latency
//!   histograms;
//! - [`poller`], [`signals`]: the epoll and signal plumbing event loops share;
//! - [`progress`]: the progress display on stderr every long command shows;
//! - [`procfs`]: small /proc readers;
//! - [`report`]: artifact schemas, text tables, HTML/SVG reports, compare,
//!   atomic writes;
//! - [`run`]: profile (launch, ready, trace under load, stop), the built-in
//!   experiments and the demo;
//! - [`output`]: writing the files users name (--json, -o) safely as root;
//! - [`cli`]: every command's options (clap) and their validation into
//!   plain specs; only `cli` and the binary import it;
//! - [`values`]: the value parsers and value types options share (seconds,
//!   rates, instants, addresses, escapes); [`error`]: exit-status carrying
//!   errors.

pub mod cli;
pub mod error;
pub mod load;
pub mod metrics;
pub mod netpath;
pub mod output;
pub mod poller;
pub mod procfs;
pub mod progress;
pub mod proto;
pub mod report;
pub mod run;
pub mod serve;
pub mod signals;
pub mod stats;
pub mod trace;
pub mod tune;
pub mod values;
