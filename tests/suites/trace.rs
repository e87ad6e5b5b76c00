//! The tracer on real processes: `trace` (exact counts, attach and
//! detach, its own cost), the scope modes, CPU time of short-lived
//! threads, the Prometheus exporter, what sockscope launches, the node
//! agent's deployment, `trace --requests-only`, and the stack sampler's
//! BPF side and user unwinding.
//!
//! One binary for these files (docs/architecture.md, "Tests"): each file is
//! a module; their tests run on parallel threads.

#[path = "../common/mod.rs"]
mod common;

#[path = "../anatomy_trace.rs"]
mod anatomy_trace;
#[path = "../cpu.rs"]
mod cpu;
#[path = "../deploy_agent.rs"]
mod deploy_agent;
#[path = "../launched.rs"]
mod launched;
#[path = "../metrics.rs"]
mod metrics;
#[path = "../scope.rs"]
mod scope;
#[path = "../stacks_resolve.rs"]
mod stacks_resolve;
#[path = "../stacks_sampler.rs"]
mod stacks_sampler;
#[path = "../top.rs"]
mod top;
#[path = "../trace.rs"]
mod trace;
