//! The BPF plumbing every measuring module shares: what a command observes
//! ([`TargetSpec`], [`ScopeTarget`]) and how a scope is named and resolved
//! ([`scope`]: cgroups, units, process names), the scope as the programs
//! take it ([`scope_filter`]: the read-only globals, the tree of
//! processes), the capability checks made before loading ([`preflight`]),
//! libbpf's log for load errors ([`libbpf_log`]), map values as bytes
//! ([`pod`]), the latency histogram's layout ([`hist`]) and the kernel's
//! run-time accounting of programs ([`run_stats`]).
//!
//! The syscall tracer (`trace`), the request anatomy (`anatomy`), the stack
//! sampler (`stacks`) and the relay's sockmap (`serve`) stand on it; it
//! stands on none of them. Its C twins are src/bpf/common.h (constants),
//! scope.h (the scope's globals and test, the tree) and hist.h.

pub mod hist;
pub mod libbpf_log;
pub mod pod;
pub mod preflight;
pub mod run_stats;
pub mod scope;
pub mod scope_filter;
pub mod syscall_names;
mod target;

pub use self::scope_filter::ScopeFilter;
pub use self::target::{ScopeTarget, TargetSpec};
