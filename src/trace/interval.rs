//! `trace --interval`: one table (stderr or -o) and one JSON line
//! (`--json`) per interval, each the difference of two snapshots of the
//! cumulative counters, so nothing falls between intervals: the intervals
//! add up exactly to the final report's totals.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::snapshot::{GroupKey, GroupStats, Snapshot, SnapshotSink, Usage};
use super::stat::{SyscallStat, add_stat, stat_since};
use crate::report::trace::{GroupRow, SyscallRow, Totals};
use crate::report::trace_text::{self, TableView};

/// `schema` of an interval line.
pub const SCHEMA: &str = "sockscope.trace.interval";
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;

/// One interval, as a JSON line.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRecord {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// 1, 2, ...
    pub interval: u64,
    /// Start and end, seconds since the window opened.
    pub start_s: f64,
    /// End, seconds since the window opened.
    pub end_s: f64,
    /// End, ns since the Unix epoch.
    pub end_unix_ns: u64,
    /// What was traced (`cgroup:/a`, `comm:x`, `system`, `pid:N`).
    pub scope: String,
    /// Per syscall, this interval only (min/max are bucket edges).
    pub syscalls: Vec<SyscallRow>,
    /// Sums of this interval.
    pub totals: Totals,
    /// The `--by` breakdown of this interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupRow>>,
    /// The traced tasks' resource usage in this interval (`tasks_seen`:
    /// tasks that entered the trace in it).
    pub usage: Usage,
    /// Traced events in this interval.
    pub events: u64,
    /// BPF run time per traced event so far, ns (sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bpf_ns_per_event: Option<f64>,
}

fn usage_since(now: &Usage, before: Option<&Usage>) -> Usage {
    let b = before.copied().unwrap_or_default();
    Usage {
        user_cpu_s: (now.user_cpu_s - b.user_cpu_s).max(0.0),
        system_cpu_s: (now.system_cpu_s - b.system_cpu_s).max(0.0),
        voluntary_ctxt_switches: now
            .voluntary_ctxt_switches
            .saturating_sub(b.voluntary_ctxt_switches),
        involuntary_ctxt_switches: now
            .involuntary_ctxt_switches
            .saturating_sub(b.involuntary_ctxt_switches),
        minor_faults: now.minor_faults.saturating_sub(b.minor_faults),
        major_faults: now.major_faults.saturating_sub(b.major_faults),
        tasks_seen: now.tasks_seen.saturating_sub(b.tasks_seen),
    }
}

/// Where the interval JSON lines go.
#[derive(Clone, Debug)]
pub enum JsonLines {
    /// Standard output, a line as each interval ends.
    Stdout,
    /// A file, rewritten whole (atomically) after each interval, so it
    /// always holds every interval so far and never a half line.
    File(PathBuf),
}

/// Where the interval tables go.
#[derive(Clone, Debug)]
pub enum Tables {
    /// Standard error.
    Stderr,
    /// A file, rewritten whole after each interval.
    File(PathBuf),
    /// Nowhere (--quiet).
    None,
}

/// Prints each interval as a [`SnapshotSink`].
pub struct IntervalWriter {
    state: Mutex<State>,
}

struct State {
    prev: Option<Arc<Snapshot>>,
    n: u64,
    scope: String,
    view: TableView,
    tables: Tables,
    json: Option<JsonLines>,
    table_text: String,
    json_text: String,
    failure: Option<String>,
}

impl IntervalWriter {
    /// A writer for a trace of `scope`.
    pub fn new(scope: String, view: TableView, tables: Tables, json: Option<JsonLines>) -> Self {
        Self {
            state: Mutex::new(State {
                prev: None,
                n: 0,
                scope,
                view,
                tables,
                json,
                table_text: String::new(),
                json_text: String::new(),
                failure: None,
            }),
        }
    }
}

/// This interval's rows of one group list, matched by key with the last.
/// A process that exited is moved into `other` (cumulative figures and
/// all) once it has been gone for a whole reading; what it brings along
/// was already counted under its own key, so it is taken out of `other`'s
/// difference here.
fn groups_since(now: &[GroupStats], before: Option<&[GroupStats]>) -> Vec<GroupStats> {
    let before_list = before.unwrap_or(&[]);
    let before: BTreeMap<&GroupKey, &GroupStats> =
        before_list.iter().map(|g| (&g.key, g)).collect();
    let now_keys: std::collections::BTreeSet<&GroupKey> = now.iter().map(|g| &g.key).collect();
    // Other's reading before, plus every process folded into it since.
    let mut other_before: BTreeMap<u32, SyscallStat> = BTreeMap::new();
    for g in before_list.iter().filter(|g| {
        g.key == GroupKey::Other
            || (matches!(g.key, GroupKey::Process { .. }) && !now_keys.contains(&g.key))
    }) {
        for st in &g.syscalls {
            match other_before.get_mut(&st.nr) {
                Some(a) => add_stat(a, st),
                None => {
                    other_before.insert(st.nr, st.clone());
                }
            }
        }
    }
    now.iter()
        .filter_map(|g| {
            let b = before.get(&g.key);
            let syscalls: Vec<_> = g
                .syscalls
                .iter()
                .map(|st| {
                    let prev = if g.key == GroupKey::Other {
                        other_before.get(&st.nr)
                    } else {
                        b.and_then(|b| b.syscalls.iter().find(|x| x.nr == st.nr))
                    };
                    stat_since(st, prev)
                })
                .filter(|st| st.calls > 0)
                .collect();
            (!syscalls.is_empty()).then(|| GroupStats {
                key: g.key.clone(),
                syscalls,
            })
        })
        .collect()
}

/// Builds one interval's record from two cumulative snapshots.
pub fn record(n: u64, scope: &str, now: &Snapshot, before: Option<&Snapshot>) -> IntervalRecord {
    let total: Vec<_> = now
        .total
        .iter()
        .map(|st| {
            stat_since(
                st,
                before.and_then(|b| b.total.iter().find(|x| x.nr == st.nr)),
            )
        })
        .filter(|st| st.calls > 0)
        .collect();
    let syscalls = super::syscall_rows(&total, now.count_only);
    let totals = super::totals_of(&syscalls, now.count_only);
    let groups = (now.by != super::snapshot::Breakdown::None).then(|| {
        let g = groups_since(&now.groups, before.map(|b| b.groups.as_slice()));
        super::group_rows(&g, now.count_only)
    });
    IntervalRecord {
        schema: SCHEMA,
        schema_version: SCHEMA_VERSION,
        interval: n,
        start_s: before.map_or(0.0, |b| b.window.as_secs_f64()),
        end_s: now.window.as_secs_f64(),
        end_unix_ns: now.taken_unix_ns,
        scope: scope.to_string(),
        syscalls,
        totals,
        groups,
        usage: usage_since(&now.usage, before.map(|b| &b.usage)),
        events: now
            .tracer
            .events
            .saturating_sub(before.map_or(0, |b| b.tracer.events)),
        bpf_ns_per_event: now.tracer.bpf_ns_per_event,
    }
}

/// The table of one interval.
pub fn render(rec: &IntervalRecord, count_only: bool, view: &TableView, by: &str) -> String {
    let mut s = format!(
        "--- interval {}: {:.1}-{:.1} s ({:.1} s), {}, {} syscalls, {:.3} s CPU ---\n",
        rec.interval,
        rec.start_s,
        rec.end_s,
        rec.end_s - rec.start_s,
        rec.scope,
        rec.totals.calls,
        rec.usage.user_cpu_s + rec.usage.system_cpu_s
    );
    if rec.totals.calls == 0 {
        s.push('\n');
        return crate::text::escape_block(&s).into_owned();
    }
    s.push_str(&trace_text::syscall_table(
        &rec.syscalls,
        &rec.totals,
        count_only,
        view,
    ));
    if let Some(g) = &rec.groups {
        s.push_str(&trace_text::group_table(
            g,
            by,
            &rec.totals,
            count_only,
            view.top,
        ));
    }
    s.push('\n');
    // The scope and group names are anyone's to choose.
    crate::text::escape_block(&s).into_owned()
}

impl State {
    /// Sends a table where the tables go; a file is rewritten whole.
    fn emit_table(&mut self, text: &str) -> anyhow::Result<()> {
        match &self.tables {
            Tables::Stderr => {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
            Tables::File(p) => {
                self.table_text.push_str(text);
                crate::output::write(p, self.table_text.as_bytes())?;
            }
            Tables::None => {}
        }
        Ok(())
    }

    /// Sends one JSON line where the lines go; a file is rewritten whole.
    fn emit_json(&mut self, line: &str) -> anyhow::Result<()> {
        match &self.json {
            Some(JsonLines::Stdout) => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{line}")
                    .and_then(|()| out.flush())
                    .map_err(|e| {
                        crate::error::with_code(
                            1,
                            format!(
                                "writing the interval's JSON line to standard output: {}",
                                crate::output::errno_text(&e)
                            ),
                        )
                    })?;
            }
            Some(JsonLines::File(p)) => {
                self.json_text.push_str(line);
                self.json_text.push('\n');
                crate::output::write(p, self.json_text.as_bytes())?;
            }
            None => {}
        }
        Ok(())
    }
}

impl IntervalWriter {
    /// After the trace: the final report's table follows the interval
    /// tables, and its JSON (one line, `sockscope.trace`) follows the
    /// interval lines, so one stream holds the intervals and their sum.
    pub fn finish(
        &self,
        rep: &crate::report::trace::TraceReport,
        view: &TableView,
    ) -> anyhow::Result<()> {
        let Ok(mut st) = self.state.lock() else {
            anyhow::bail!("interval writer poisoned");
        };
        let table = format!("=== whole trace ===\n{}", trace_text::render(rep, view));
        let written = st.emit_table(&table);
        if written.is_err() && matches!(st.tables, Tables::File(_)) {
            // Nothing measured is lost to a full disk: the table goes to
            // stderr instead.
            let _ = std::io::stderr().write_all(table.as_bytes());
        }
        // Both failures are told, each naming its file (a full disk
        // under --json and -o alike).
        let json = st.emit_json(&serde_json::to_string(rep)?);
        crate::output::both(json, written)
    }
}

impl SnapshotSink for IntervalWriter {
    fn publish(&self, snap: &Arc<Snapshot>) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        // The final snapshot can fall right after the last interval: an
        // empty sliver is not worth a table.
        if let Some(p) = &st.prev
            && snap.window.saturating_sub(p.window).as_millis() < 5
        {
            return;
        }
        st.n += 1;
        let rec = record(st.n, &st.scope, snap, st.prev.as_deref());
        let by = match snap.by {
            super::snapshot::Breakdown::Process => "process",
            super::snapshot::Breakdown::Comm => "comm",
            super::snapshot::Breakdown::Cgroup => "cgroup",
            super::snapshot::Breakdown::None => "",
        };
        let text = render(&rec, snap.count_only, &st.view, by);
        let line = serde_json::to_string(&rec).unwrap_or_default();
        if let Err(e) = st.emit_table(&text).and_then(|()| st.emit_json(&line)) {
            st.failure.get_or_insert_with(|| format!("{e:#}"));
        }
        st.prev = Some(Arc::clone(snap));
    }

    fn failure(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.failure.clone())
    }
}
