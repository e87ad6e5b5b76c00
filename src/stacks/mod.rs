//! Sampled stacks: where the target's CPU goes (on-CPU samples from a
//! cpu-clock perf event per CPU) and where its threads wait (off-CPU time,
//! sampled in proportion to its length), with user stacks unwound from a
//! copied slice of the stack with the modules' .eh_frame (so binaries built
//! without frame pointers unwind) and every frame symbolized while the
//! target's processes still exist (docs/stacks.md says why this design).
//!
//! Layout: `sample` (what the BPF side delivers, as Rust values), `abi` and
//! `bpf` (src/bpf/stacks.bpf.c: load, attach, drain), `modules`, `unwind`
//! and `symbolize` (user space: a process's mapped objects, unwinding,
//! names; `perfmap`, JIT code's names) with `resolve` (`Resolver`: the three per sample), `session`
//! (the sampler, resolver and aggregation on a thread of their own, for
//! `profile` and `trace --stacks`), and `export` (what a node agent serves
//! of them: per-command counters and the last window's pprof).

pub mod abi;

/// A hash map with foldhash's hasher: the maps a stack sample goes
/// through once per frame (names by address, interned frames, stacks),
/// where std's SipHash was a tenth of a node agent's time per sample.
/// Seeded per map, as std's is, so keys from a target's binaries cannot
/// be chosen to collide in advance.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub mod bpf;
pub mod export;
pub mod fde;
pub mod kallsyms;
pub mod live;
pub mod modules;
pub mod perfmap;
pub mod resolve;
pub mod sample;
pub mod session;
pub mod symbolize;
pub mod tie;
pub mod unwind;

pub use self::session::{
    Collected, DEFAULT_HZ, MAX_HZ, Session, StacksConfig, StacksOptions, report,
};
pub use resolve::{Frame, Resolved, Resolver};
