//! What the tracer costs before its window opens, apart from the
//! per-event cost: wall time and sockscope's own CPU per start-up phase
//! (preflight, BPF load and verification, ring buffer and signals, attach,
//! registering the target). A short run (`trace -- /bin/true`) is mostly
//! this, so it is measured and reported on its own.

use std::time::Instant;

use crate::report::trace::{StartupCost, StartupPhase};

/// This process's CPU time so far (user + system, every thread), ms.
fn process_cpu_ms() -> f64 {
    let (user, system) = crate::procfs::rusage_ns(libc::RUSAGE_SELF);
    (user + system) as f64 / 1e6
}

/// Start-up phases as they pass.
#[derive(Debug)]
pub struct Timeline {
    begun: Instant,
    cpu0: f64,
    last: Instant,
    last_cpu: f64,
    phases: Vec<StartupPhase>,
}

impl Timeline {
    /// Starts timing now. The CPU sockscope used before (its own start,
    /// parsing its arguments) is reported apart (`cpu_before_ms`).
    pub fn begin() -> Self {
        let now = Instant::now();
        let cpu = process_cpu_ms();
        Self {
            begun: now,
            cpu0: cpu,
            last: now,
            last_cpu: cpu,
            phases: Vec::new(),
        }
    }

    /// Ends the phase called `name` now.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        let cpu = process_cpu_ms();
        self.phases.push(StartupPhase {
            name: name.into(),
            ms: (now - self.last).as_secs_f64() * 1e3,
            cpu_ms: (cpu - self.last_cpu).max(0.0),
        });
        self.last = now;
        self.last_cpu = cpu;
    }

    /// The figures once the window has opened.
    pub fn finish(&self) -> StartupCost {
        StartupCost {
            before_window_ms: (self.last - self.begun).as_secs_f64() * 1e3,
            cpu_ms: self.last_cpu,
            cpu_before_ms: self.cpu0,
            phases: self.phases.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_to_the_time_before_the_window() {
        let mut t = Timeline::begin();
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        t.mark("one");
        std::thread::sleep(std::time::Duration::from_millis(2));
        t.mark("two");
        let s = t.finish();
        assert_eq!(s.phases.len(), 2);
        let sum: f64 = s.phases.iter().map(|p| p.ms).sum();
        assert!((sum - s.before_window_ms).abs() < 1e-6, "{s:?}");
        assert!(s.phases[1].ms >= 2.0, "{s:?}");
        let cpu: f64 = s.phases.iter().map(|p| p.cpu_ms).sum();
        assert!((s.cpu_before_ms + cpu - s.cpu_ms).abs() < 1e-6, "{s:?}");
        assert!(s.phases[0].cpu_ms > 0.0, "{s:?}");
    }
}
