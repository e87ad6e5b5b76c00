//! A node agent's windows ([`Rotation`]): the counts handed to the
//! exporter every second, the graph published as a pprof and started
//! afresh every window, and the sampler's run time split between the
//! processes it ran in, for the per-service cost.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Aggregate, TOP};
use crate::anatomy::service_cost::OtherRuns;
use crate::report::stacks::{StackGraph, WeightUnit};
use crate::stacks::Resolver;
use crate::stacks::bpf::SamplerCounters;
use crate::stacks::export::ModuleCacheStats;

/// What an agent's resolver holds and has dropped, for the exporter.
pub(super) fn cache_of(r: &Resolver) -> ModuleCacheStats {
    ModuleCacheStats {
        held: r.held(),
        budget: r.budget().map_or(0, |b| b.module_bytes),
        evicted: r.evicted(),
    }
}

/// How often an agent's counts are handed to the exporter.
const PUBLISH: Duration = Duration::from_secs(1);

/// A node agent's windows: the counts handed over every [`PUBLISH`], the
/// graph as a pprof and started afresh every window.
pub(super) struct Rotation {
    shared: crate::stacks::export::Shared,
    window: Duration,
    started: Instant,
    started_at: std::time::SystemTime,
    published: Instant,
    /// Where the sampler's run time goes per process, and the counters at
    /// the last handing over.
    other_runs: Option<(OtherRuns, RunMark)>,
}

/// The sampler's counters at a handing over of its run time.
#[derive(Clone, Copy, Debug, Default)]
struct RunMark {
    ticks: u64,
    run_ns: u64,
}

/// Splits the sampler's run time since `mark` (`counters`) between the
/// processes its samples since were taken in (`runs`, drained): each
/// sample is one run; the ticks that left none (an idle CPU's, a sample
/// lost) are in no process's context (tgid 0). Never more than the run
/// time counted: the samples drained and the ticks counted may straddle
/// a handing over.
fn split_runs(
    runs: &mut HashMap<u32, u64>,
    mark: &mut RunMark,
    counters: &SamplerCounters,
) -> HashMap<u32, f64> {
    let ns = counters.bpf_ns.saturating_sub(mark.run_ns) as f64;
    let ticks = counters.ticks.saturating_sub(mark.ticks);
    *mark = RunMark {
        ticks: counters.ticks,
        run_ns: counters.bpf_ns,
    };
    let sampled: u64 = runs.values().sum();
    let all = ticks.max(sampled);
    let mut out = HashMap::with_capacity(runs.len() + 1);
    if all == 0 {
        runs.clear();
        return out;
    }
    for (tgid, n) in runs.drain() {
        *out.entry(tgid).or_default() += ns * n as f64 / all as f64;
    }
    if ticks > sampled {
        *out.entry(0).or_default() += ns * (ticks - sampled) as f64 / all as f64;
    }
    out
}

impl Rotation {
    /// Windows published to `shared`; with `other_runs`, the sampler's
    /// run time handed there too, split by process ([`split_runs`]).
    pub(super) fn new(
        shared: crate::stacks::export::Shared,
        other_runs: Option<OtherRuns>,
    ) -> Self {
        let window = shared
            .lock()
            .map_or(crate::stacks::export::DEFAULT_WINDOW, |e| e.window());
        Rotation {
            shared,
            window,
            started: Instant::now(),
            started_at: std::time::SystemTime::now(),
            published: Instant::now(),
            other_runs: other_runs.map(|o| (o, RunMark::default())),
        }
    }

    /// Hands the counts over once a [`PUBLISH`], and at the window's end
    /// publishes its graph and starts the next; `counters` reads the
    /// sampler's own and `cache` the resolver's (each only when handed
    /// over).
    pub(super) fn tick(
        &mut self,
        agg: &mut Aggregate,
        counters: impl Fn() -> Result<SamplerCounters>,
        cache: impl Fn() -> ModuleCacheStats,
        hz: u32,
    ) -> Result<()> {
        if self.published.elapsed() >= PUBLISH {
            self.publish(agg, &counters()?, cache());
        }
        let length = self.started.elapsed();
        if length < self.window {
            return Ok(());
        }
        // The counts name the window's interned ids: handed over first.
        self.publish(agg, &counters()?, cache());
        let graph = StackGraph::build(WeightUnit::Samples, agg.stacks_of(&agg.on), TOP);
        let what = format!("on-CPU stacks of a node agent's window, {hz} Hz per CPU");
        let pprof = crate::report::pprof::file_bytes(
            &graph,
            &[],
            &crate::report::pprof::Meta {
                hz,
                window_s: length.as_secs_f64(),
                comment: &what,
                started: Some(self.started_at),
            },
        )?;
        if let Ok(mut e) = self.shared.lock() {
            e.set_profile(pprof);
        }
        agg.new_window();
        self.started = Instant::now();
        self.started_at = std::time::SystemTime::now();
        Ok(())
    }

    /// Hands the counts since the last call, and the sampler's counters,
    /// to the exporter.
    pub(super) fn publish(
        &mut self,
        agg: &mut Aggregate,
        counters: &SamplerCounters,
        cache: ModuleCacheStats,
    ) {
        self.published = Instant::now();
        if let (Some((to, mark)), Some(runs)) = (self.other_runs.as_mut(), agg.runs.as_mut()) {
            let split = split_runs(runs, mark, counters);
            let mut to = to.lock().unwrap_or_else(|e| e.into_inner());
            for (tgid, ns) in split {
                *to.entry(tgid).or_default() += ns;
            }
        }
        let Ok(mut e) = self.shared.lock() else {
            return;
        };
        e.set_counters(counters.lost, counters.bpf_ns);
        e.set_cache(cache);
        let Some(leaves) = agg.leaves.as_mut() else {
            return;
        };
        for ((process, leaf), w) in leaves.drain() {
            e.add(
                &agg.names[process as usize],
                leaf.map(|i| &agg.frames[i as usize]),
                w,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_s_run_time_is_split_as_its_samples_were_and_never_exceeded() {
        let counters = |ticks, bpf_ns| SamplerCounters {
            ticks,
            bpf_ns,
            ..Default::default()
        };
        let mut mark = RunMark::default();
        // 5 ticks, 1000 ns: 3 samples in 10, 1 in 20, one tick left none.
        let mut runs = HashMap::from([(10, 3), (20, 1)]);
        let got = split_runs(&mut runs, &mut mark, &counters(5, 1000));
        assert_eq!(got, HashMap::from([(10, 600.0), (20, 200.0), (0, 200.0)]));
        assert!(runs.is_empty());
        // Samples drained ahead of the ticks counted: split, not exceeded.
        let mut runs = HashMap::from([(10, 6)]);
        let got = split_runs(&mut runs, &mut mark, &counters(9, 1600));
        assert_eq!(got, HashMap::from([(10, 600.0)]));
        // Nothing since: nothing.
        let got = split_runs(&mut HashMap::new(), &mut mark, &counters(9, 1600));
        assert!(got.is_empty());
    }
}
