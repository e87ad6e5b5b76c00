//! The tests that need the machine to themselves, one at a time: every
//! test here takes `common::serial()` (tests/layering.rs checks it). The
//! request anatomy against its known causes (`anatomy`: timings, a server
//! pinned beside busy loops, the kernel's program list after SIGKILL),
//! sampled stacks end to end (`stacks`: a sleeper's wakeups), the sweeps and
//! the capacity search (`profile_sweep`: rates and latencies, a cgroup v1
//! quota) and the kernel counters provoked (`evidence_counters`: busy loops
//! pinned on CPU 0, run-queue waits).
//!
//! One binary for these files (docs/architecture.md, "Tests"): each file is
//! a module; their tests run on parallel threads.

#[path = "../common/mod.rs"]
mod common;

#[path = "../anatomy.rs"]
mod anatomy;
#[path = "../evidence_counters.rs"]
mod evidence_counters;
#[path = "../profile_sweep.rs"]
mod profile_sweep;
#[path = "../stacks.rs"]
mod stacks;
