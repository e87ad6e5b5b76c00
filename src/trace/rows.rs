//! The report's rows from the tracer's figures: one per syscall (busiest
//! first), the totals over them, and the `--by` groups.

use super::stat::SyscallStat;
use super::{errno, snapshot};
use crate::probe::syscall_names;
use crate::report::trace::{ErrnoCount, GroupRow, Latency, SyscallRow, Totals};

/// Sums over syscall rows (errors and time absent in count-only mode).
pub(crate) fn totals_of(rows: &[SyscallRow], count_only: bool) -> Totals {
    Totals {
        calls: rows.iter().map(|r| r.calls).sum(),
        errors: (!count_only).then(|| rows.iter().filter_map(|r| r.errors).sum()),
        time_ns: (!count_only).then(|| {
            rows.iter()
                .filter_map(|r| r.latency.as_ref().map(|l| l.total_ns))
                .sum()
        }),
    }
}

/// The report's rows of a `--by` breakdown, busiest (time, then calls)
/// first, the pooled `other` row last.
pub(crate) fn group_rows(groups: &[snapshot::GroupStats], count_only: bool) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = groups
        .iter()
        .map(|g| {
            let syscalls = syscall_rows(&g.syscalls, count_only);
            let t = totals_of(&syscalls, count_only);
            let mut row = GroupRow {
                calls: t.calls,
                errors: t.errors,
                time_ns: t.time_ns,
                syscalls,
                ..Default::default()
            };
            match &g.key {
                snapshot::GroupKey::Process { pid, comm } => {
                    row.pid = Some(*pid);
                    row.comm = Some(comm.clone());
                }
                snapshot::GroupKey::Comm(c) => row.comm = Some(c.clone()),
                snapshot::GroupKey::Cgroup(c) => row.cgroup = Some(c.clone()),
                snapshot::GroupKey::Other => row.other = true,
            }
            row
        })
        .collect();
    rows.sort_by(|a, b| {
        a.other
            .cmp(&b.other)
            .then(b.time_ns.cmp(&a.time_ns))
            .then(b.calls.cmp(&a.calls))
    });
    rows
}

pub(crate) fn syscall_rows(stats: &[SyscallStat], count_only: bool) -> Vec<SyscallRow> {
    let mut rows: Vec<SyscallRow> = stats
        .iter()
        .map(|s| {
            let mut errnos: Vec<ErrnoCount> = s
                .errnos
                .iter()
                .map(|(e, c)| ErrnoCount {
                    name: errno::name(*e),
                    errno: *e,
                    count: *c,
                })
                .collect();
            errnos.sort_by(|a, b| b.count.cmp(&a.count).then(a.errno.cmp(&b.errno)));
            let timed = s.hist.total();
            SyscallRow {
                name: syscall_names::name(s.nr),
                nr: s.nr,
                calls: s.calls,
                errors: (!count_only).then_some(s.errors),
                errnos,
                latency: (!count_only && timed > 0).then(|| Latency {
                    total_ns: s.total_ns,
                    min_ns: s.hist.min,
                    avg_ns: s.total_ns / timed,
                    max_ns: s.hist.max,
                    p50_ns: s.hist.quantile(0.50).unwrap_or(0),
                    p90_ns: s.hist.quantile(0.90).unwrap_or(0),
                    p99_ns: s.hist.quantile(0.99).unwrap_or(0),
                    histogram: s.hist.nonzero().into_iter().map(|(l, c)| [l, c]).collect(),
                }),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let t = |r: &SyscallRow| r.latency.as_ref().map_or(0, |l| l.total_ns);
        t(b).cmp(&t(a))
            .then(b.calls.cmp(&a.calls))
            .then(a.name.cmp(&b.name))
    });
    rows
}
