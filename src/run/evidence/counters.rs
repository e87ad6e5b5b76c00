//! Kernel counter snapshots of the target's network namespace
//! (/proc/PID/net/{snmp,netstat,snmp6}) and of /proc/net/softnet_stat,
//! and their deltas (`report::evidence::counters`).

use std::collections::BTreeMap;

use crate::report::evidence::CounterDeltas;

/// Every counter at one instant, by `Group.Name`.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Values by `Group.Name`.
    pub values: BTreeMap<String, u64>,
    /// Files read, for the report's `source`.
    pub source: String,
}

/// Reads every counter of `pid`'s network namespace; an error says what
/// could not be read.
pub fn snapshot(_pid: i32) -> Result<Snapshot, String> {
    Err("not collected yet".into())
}

/// Increases from `before` to `after`, and a line for each named counter
/// this kernel does not count.
pub fn delta(before: &Snapshot, after: &Snapshot) -> (CounterDeltas, Vec<String>) {
    let deltas = after
        .values
        .iter()
        .map(|(k, v)| {
            let b = before.values.get(k).copied().unwrap_or(*v);
            (k.clone(), v.saturating_sub(b))
        })
        .collect();
    (
        CounterDeltas {
            source: after.source.clone(),
            deltas,
        },
        Vec::new(),
    )
}
