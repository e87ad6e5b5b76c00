//! Was the generator the limit? An open-loop run (or one step of a rate
//! schedule, or one step of a profile's sweep) whose generator fell behind
//! says nothing about the server at that rate: its latencies and achieved
//! rate are the generator's. Two signs, either enough:
//!
//! - send lag: intended send times released late by the generator's own
//!   loop while a connection was free for them. A send that found every
//!   connection busy would have waited anyway: its wait is the server's
//!   (or the pool's) doing, kept apart as the connection wait, and shows
//!   as latency. A p99 beyond [`SEND_LAG_BOUND_NS`] means the worker
//!   threads could not wake on time: busy, or starved of CPU by the
//!   server they share the machine with;
//! - a worker thread busy for at least [`BUSY_SHARE`] of the window.
//!
//! A saturated server makes the backlog (and the measured latency) grow
//! but releases stay on time, so it is not mistaken for either sign.

/// Send-lag p99 beyond which a step is generator-limited, ns (1 ms).
pub const SEND_LAG_BOUND_NS: u64 = 1_000_000;
/// A worker thread's CPU share of the window beyond which the generator may
/// have been the bottleneck (the load report's `generator.saturated` uses
/// the same bound).
pub const BUSY_SHARE: f64 = 0.9;

/// What a step's generator did, for [`judge`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GeneratorSigns {
    /// The send lag's p99 over the step, ns (None: closed loop, or no send).
    pub send_lag_p99_ns: Option<u64>,
    /// The busiest worker thread's CPU share of the step's wall time (None:
    /// not measured).
    pub busiest_thread_share: Option<f64>,
}

/// Why the generator limited the step, or None when neither sign shows.
pub fn judge(signs: GeneratorSigns) -> Option<String> {
    let mut why = Vec::new();
    if let Some(lag) = signs.send_lag_p99_ns.filter(|&l| l > SEND_LAG_BOUND_NS) {
        why.push(format!(
            "the generator sent late (send lag p99 {:.1} ms > {:.0} ms)",
            lag as f64 / 1e6,
            SEND_LAG_BOUND_NS as f64 / 1e6
        ));
    }
    if let Some(share) = signs.busiest_thread_share.filter(|&s| s >= BUSY_SHARE) {
        why.push(format!(
            "a generator thread was busy {:.0} % of the time (>= {:.0} %)",
            share * 100.0,
            BUSY_SHARE * 100.0
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_sign_limits_and_neither_does_not() {
        assert_eq!(judge(GeneratorSigns::default()), None);
        let calm = GeneratorSigns {
            send_lag_p99_ns: Some(200_000),
            busiest_thread_share: Some(0.5),
        };
        assert_eq!(judge(calm), None);
        let late = judge(GeneratorSigns {
            send_lag_p99_ns: Some(3_500_000),
            ..calm
        })
        .unwrap();
        assert!(late.contains("3.5 ms"), "{late}");
        let busy = judge(GeneratorSigns {
            busiest_thread_share: Some(0.97),
            ..calm
        })
        .unwrap();
        assert!(busy.contains("97 %"), "{busy}");
    }
}
