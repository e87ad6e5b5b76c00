//! Measuring the tracer's own cost without paying for the measurement all
//! the time.
//!
//! The kernel's per-program run-time accounting (BPF_ENABLE_STATS) adds two
//! clock reads to every program run on the machine, about 40 ns each on
//! this class of VM, which would double the overhead being measured. So it
//! is switched on for short slices (10 ms of every 200 ms, the first at the
//! start of the window). Each slice also counts the traced events it saw,
//! so the cost is expressed per event (BPF time in slices / events in
//! slices) and scaled by the exact number of events in the window, which
//! stays right for bursty workloads where a time-based scaling would not.

use std::time::{Duration, Instant};

use super::bpf::{ProgCost, Tracer};
use crate::report::trace::{ProgramCost, TracerCost};

const PERIOD: Duration = Duration::from_millis(200);
const SLICE: Duration = Duration::from_millis(10);
/// Fewer sampled events than this give no per-event figure.
const MIN_EVENTS: u64 = 100;

/// Duty-cycles BPF run-time accounting over the window.
pub struct Sampler {
    unavailable: Option<String>,
    on_since: Option<(Instant, u64)>,
    next_toggle: Instant,
    sampled: Duration,
    sampled_events: u64,
}

impl Sampler {
    /// Starts the first slice now.
    pub fn start(tracer: &mut Tracer<'_>) -> Self {
        let now = Instant::now();
        let mut s = Self {
            unavailable: None,
            on_since: None,
            next_toggle: now,
            sampled: Duration::ZERO,
            sampled_events: 0,
        };
        s.tick(tracer, now);
        s
    }

    /// When the next slice starts or ends (None once accounting proved
    /// unavailable).
    pub fn deadline(&self) -> Option<Instant> {
        self.unavailable.is_none().then_some(self.next_toggle)
    }

    fn end_slice(&mut self, tracer: &mut Tracer<'_>, now: Instant) -> Option<Instant> {
        let (since, events0) = self.on_since.take()?;
        let _ = tracer.set_self_cost(false);
        self.sampled += now - since;
        self.sampled_events += tracer.events_counted().saturating_sub(events0);
        Some(since)
    }

    /// Switches accounting on or off if a slice boundary has passed.
    pub fn tick(&mut self, tracer: &mut Tracer<'_>, now: Instant) {
        if self.unavailable.is_some() || now < self.next_toggle {
            return;
        }
        if let Some(since) = self.end_slice(tracer, now) {
            self.next_toggle = since + PERIOD;
        } else {
            let events0 = tracer.events_counted();
            match tracer.set_self_cost(true) {
                Ok(()) => {
                    self.on_since = Some((now, events0));
                    self.next_toggle = now + SLICE;
                }
                Err(why) => self.unavailable = Some(why),
            }
        }
        if self.next_toggle <= now {
            // Slept past a whole period (a stalled loop): resync from now.
            self.next_toggle = now;
        }
    }

    /// Ends sampling and builds the cost figures for a window of `window`
    /// with `events` traced syscalls. Also returns why a figure is missing.
    pub fn finish(
        mut self,
        tracer: &mut Tracer<'_>,
        events: u64,
        window: Duration,
        drops: u64,
    ) -> (TracerCost, Option<String>) {
        self.end_slice(tracer, Instant::now());
        let base = TracerCost {
            events,
            ringbuf_drops: drops,
            ..Default::default()
        };
        if let Some(why) = self.unavailable {
            return (base, Some(why));
        }
        let Some(costs) = tracer.prog_costs() else {
            return (base, Some("could not read BPF program statistics".into()));
        };
        let sample = Sample {
            duration: self.sampled,
            events: self.sampled_events,
        };
        let cost = cost_figures(&costs, events, window, sample, drops);
        let why = cost.ns_per_event.is_none().then(|| {
            format!(
                "the sampled slices ({:.0} ms) saw only {} traced syscalls, too few for a \
                 per-event figure",
                self.sampled.as_secs_f64() * 1e3,
                self.sampled_events
            )
        });
        (cost, why)
    }
}

/// What the accounting slices covered.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Total time accounting was on.
    pub duration: Duration,
    /// Traced events during that time.
    pub events: u64,
}

/// Cost figures from the sampled program run times: per event over the
/// slices, scaled to the window's exact event count.
pub fn cost_figures(
    costs: &[ProgCost],
    events: u64,
    window: Duration,
    sample: Sample,
    drops: u64,
) -> TracerCost {
    let sampled_ns: u64 = costs.iter().map(|c| c.run_time_ns).sum();
    let per_event = (sample.events >= MIN_EVENTS).then(|| sampled_ns as f64 / sample.events as f64);
    let total = per_event.map(|p| p * events as f64);
    TracerCost {
        events,
        programs: costs
            .iter()
            .map(|c| ProgramCost {
                name: c.name.into(),
                run_count: c.run_cnt,
                run_time_ns: c.run_time_ns,
                ns_per_run: if c.run_cnt > 0 {
                    c.run_time_ns as f64 / c.run_cnt as f64
                } else {
                    0.0
                },
            })
            .collect(),
        sampled_fraction: Some(if window.is_zero() {
            1.0
        } else {
            (sample.duration.as_secs_f64() / window.as_secs_f64()).min(1.0)
        }),
        sampled_events: Some(sample.events),
        bpf_time_ns: total.map(|t| t.round() as u64),
        ns_per_event: per_event,
        cpu_share: total.map(|t| t / window.as_nanos().max(1) as f64),
        ringbuf_drops: drops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> [ProgCost; 2] {
        [
            ProgCost {
                name: "ss_sys_enter",
                run_cnt: 1000,
                run_time_ns: 30_000,
            },
            ProgCost {
                name: "ss_sys_exit",
                run_cnt: 1000,
                run_time_ns: 70_000,
            },
        ]
    }

    #[test]
    fn scales_by_events_not_time() {
        let c = cost_figures(
            &costs(),
            1_000_000,
            Duration::from_secs(2),
            Sample {
                duration: Duration::from_millis(100),
                events: 1000,
            },
            0,
        );
        assert!((c.ns_per_event.unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(c.bpf_time_ns, Some(100_000_000));
        assert!((c.cpu_share.unwrap() - 0.05).abs() < 1e-12);
        assert!((c.sampled_fraction.unwrap() - 0.05).abs() < 1e-12);
        assert!((c.programs[1].ns_per_run - 70.0).abs() < 1e-9);
    }

    #[test]
    fn too_few_sampled_events_give_no_figure() {
        let c = cost_figures(
            &costs(),
            1_000_000,
            Duration::from_secs(2),
            Sample {
                duration: Duration::from_millis(100),
                events: 10,
            },
            0,
        );
        assert_eq!(c.ns_per_event, None);
        assert_eq!(c.bpf_time_ns, None);
        assert_eq!(c.programs.len(), 2);
    }
}
