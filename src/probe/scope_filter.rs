//! Which tasks a BPF object follows: the scope every object that filters by
//! process tree, cgroup, name or the whole machine takes as read-only
//! globals (src/bpf/scope.h), and the tree of processes the loader seeds.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

/// Which tasks the programs trace (the BPF side's `scope_mode`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ScopeFilter {
    /// Tasks the loader registers, and their children.
    #[default]
    Tree,
    /// Every task in the cgroup v2 directory with this id, which sits at
    /// this depth below the root, or in one below it.
    Cgroup {
        /// The cgroup id (its directory's inode number).
        id: u64,
        /// Its depth (root = 0).
        level: u32,
    },
    /// Every task whose thread-group leader has this name (NUL-padded).
    Comm([u8; 16]),
    /// Every task but sockscope's own.
    System,
}

/// A [`ScopeFilter`] as the read-only globals every program that filters
/// by scope takes (`scope_mode` and its operands, src/bpf/scope.h); each
/// loader copies them into its own skeleton with [`set_scope_globals!`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScopeWords {
    /// `enum ss_scope_mode`'s value.
    pub mode: u32,
    /// Cgroup scope: the cgroup's id.
    pub cgroup_id: u64,
    /// Cgroup scope: its depth.
    pub cgroup_level: u32,
    /// Comm scope: the name's first 8 bytes, as a native-endian word.
    pub comm_lo: u64,
    /// Comm scope: its last 8 bytes.
    pub comm_hi: u64,
}

impl ScopeFilter {
    /// The globals that select this scope in the programs.
    pub fn words(&self) -> ScopeWords {
        let mut w = ScopeWords::default();
        w.mode = match *self {
            ScopeFilter::Tree => MODE_TREE,
            ScopeFilter::Cgroup { id, level } => {
                w.cgroup_id = id;
                w.cgroup_level = level;
                MODE_CGROUP
            }
            ScopeFilter::Comm(name) => {
                w.comm_lo = u64::from_ne_bytes(name[..8].try_into().expect("8 bytes"));
                w.comm_hi = u64::from_ne_bytes(name[8..].try_into().expect("8 bytes"));
                MODE_COMM
            }
            ScopeFilter::System => MODE_SYSTEM,
        };
        w
    }
}

/// `enum ss_scope_mode` (src/bpf/common.h): each skeleton generates its
/// own twin of the enum, which [`check_common_abi!`] holds to these.
pub const MODE_TREE: u32 = 0;
/// See [`MODE_TREE`].
pub const MODE_CGROUP: u32 = 1;
/// See [`MODE_TREE`].
pub const MODE_COMM: u32 = 2;
/// See [`MODE_TREE`].
pub const MODE_SYSTEM: u32 = 3;

/// Copies a [`ScopeWords`] into a skeleton's read-only globals
/// (`scope_mode`, `scope_cgroup_id`, `scope_cgroup_level`, `scope_comm_lo`,
/// `scope_comm_hi`, declared once in src/bpf/scope.h): each skeleton has
/// its own types, so this is a macro rather than a function.
macro_rules! set_scope_globals {
    ($rodata:expr, $mode_type:path, $words:expr) => {{
        let w: $crate::probe::scope_filter::ScopeWords = $words;
        let ro = $rodata;
        ro.scope_mode = $mode_type(w.mode);
        ro.scope_cgroup_id = w.cgroup_id;
        ro.scope_cgroup_level = w.cgroup_level;
        ro.scope_comm_lo = w.comm_lo;
        ro.scope_comm_hi = w.comm_hi;
    }};
}
pub(crate) use set_scope_globals;

/// Holds a skeleton's twins of src/bpf/common.h's enums to the values the
/// Rust side uses (`probe::hist`, the scope modes), at compile time.
macro_rules! check_common_abi {
    ($types:path) => {
        const _: () = {
            use $crate::probe::{hist, scope_filter as f};
            use $types as t;
            assert!(t::ss_common_limits::SS_HIST_BUCKETS.0 as usize == hist::BUCKETS);
            assert!(t::ss_common_limits::SS_HIST_SUB_BITS.0 == hist::SUB_BITS);
            assert!(t::ss_scope_mode::SS_SCOPE_TREE.0 == f::MODE_TREE);
            assert!(t::ss_scope_mode::SS_SCOPE_CGROUP.0 == f::MODE_CGROUP);
            assert!(t::ss_scope_mode::SS_SCOPE_COMM.0 == f::MODE_COMM);
            assert!(t::ss_scope_mode::SS_SCOPE_SYSTEM.0 == f::MODE_SYSTEM);
        };
    };
}
pub(crate) use check_common_abi;

/// Registers these processes in an object's `tree` map (src/bpf/scope.h):
/// the programs follow them and, through the fork step, their children.
pub fn add_tree(tree: &impl MapCore, tgids: &[i32]) -> Result<()> {
    for &tgid in tgids {
        tree.update(&(tgid as u32).to_ne_bytes(), &[1], MapFlags::ANY)
            .with_context(|| format!("registering process {tgid}"))?;
    }
    Ok(())
}
