//! sockscope: where a Linux network service spends its time, and how that
//! changes under load.
//!
//! The binary (src/main.rs) is a thin dispatcher over these modules
//! (dependencies point down the list, roughly: a module imports only the
//! ones below it and the crate-wide utilities):
//! - [`cli`]: every command's options (clap) and their validation into
//!   plain specs; only `cli` and the binary import it;
//! - [`run`]: the commands (profile, trace, bench, demo, report, compare,
//!   merge, `load --path --serve`, the hidden helpers), each one place;
//! - [`process`]: launch, make ready and stop the processes a command
//!   starts or attaches to, the watchdog, and artifact directories staged
//!   and published as a set;
//! - [`metrics`]: the Prometheus exposition of a running trace;
//! - [`top`]: the live terminal view of the request anatomy (its rows
//!   and their drawing);
//! - [`netpath`]: emulated network paths (namespaces, TUN, veth + netem);
//! - [`tune`]: the kernel-settings audit and the advice a run's evidence
//!   supports;
//! - [`stacks`]: sampled on-CPU and off-CPU stacks of the target,
//!   unwound without frame pointers and symbolized;
//! - [`anatomy`]: each request's time at the server from the socket
//!   tracepoints (queue wait, CPU wait, service, send);
//! - [`trace`]: the eBPF syscall profiler for a process tree, a cgroup, a
//!   unit or the machine;
//! - [`probe`]: the BPF plumbing trace, anatomy, stacks and serve share
//!   (what is observed, the scope and its filter, preflight checks,
//!   libbpf's log, map layouts, the histogram layout);
//! - [`load`]: the load generator; [`serve`]: the reference targets;
//! - [`report`]: artifact schemas, text tables, HTML/SVG reports, compare,
//!   merge, atomic writes (a leaf: it imports none of the above);
//! - [`proto`]: wire formats load and serve share; [`stats`]: HDR latency
//!   histograms; [`procfs`]: small /proc and sock_diag readers;
//! - crate-wide utilities: [`clock`] (CLOCK_MONOTONIC, the BPF programs'
//!   clock), [`poller`], [`signals`] (the epoll and signal
//!   plumbing event loops share), [`progress`] (the progress display on
//!   stderr), [`output`] (writing the files users name, --json and -o,
//!   safely as root), [`input`] (reading the files users name as inputs,
//!   bounded), [`cmdline`] (the command line as artifacts record it:
//!   header values redacted), [`values`] (the value parsers and value types options
//!   share: seconds, rates, instants, addresses, escapes), [`error`]
//!   (exit-status carrying errors), [`text`] (untrusted text made safe to
//!   print: control characters written out visibly), [`series`] (bounded
//!   label sets: first come, first kept, the rest `(other)`); in tests,
//!   `hostile` (the mutations and bounded configuration of the parsers'
//!   property tests).

// A failed stderr must not panic a command (exit 101): lines go through
// `progress::say!`, which ignores a failed write. Tests may eprintln!.
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod anatomy;
pub mod cli;
pub mod clock;
pub mod cmdline;
pub mod endpoint;
pub mod error;
#[cfg(test)]
pub(crate) mod hostile;
pub mod input;
pub mod load;
pub mod metrics;
pub mod netpath;
pub mod output;
pub mod poller;
pub mod probe;
pub mod process;
pub mod procfs;
pub mod progress;
pub mod proto;
pub mod recorder;
pub mod report;
pub mod run;
pub mod series;
pub mod serve;
pub mod signals;
pub mod stacks;
pub mod stats;
pub mod text;
pub mod top;
pub mod trace;
pub mod tune;
pub mod values;
