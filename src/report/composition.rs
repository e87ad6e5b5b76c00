//! What a set of timed turns was made of: the four parts' means of the
//! turns at a server-time percentile (the whole anatomy's, report/anatomy.rs,
//! and each endpoint's, report/commands.rs).

use serde::{Deserialize, Serialize};

/// What the turns at one server-time percentile were made of: the turns
/// whose server time fell in the histogram bucket that holds the
/// percentile (an endpoint's: the power of two that holds it), their
/// parts' means (which add up to their server time's mean exactly).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Composition {
    /// "p50", "p90", "p99" or "p99.9".
    pub percentile: String,
    /// Turns in that bucket (or band).
    pub turns: u64,
    /// Their mean server time.
    pub server_ns: u64,
    /// Their mean queue wait.
    pub queue_wait_ns: u64,
    /// Their mean CPU wait.
    pub cpu_wait_ns: u64,
    /// Their mean service.
    pub service_ns: u64,
    /// Their mean send.
    pub send_ns: u64,
}

impl Composition {
    /// The composition at `percentile` of `turns` turns whose parts
    /// (queue, CPU, service, send) sum to `sums`: their rounded means, the
    /// server time being their sum so the row adds up.
    pub fn from_sums(percentile: &str, turns: u64, sums: [u64; 4]) -> Self {
        let [queue, cpu, service, send] =
            sums.map(|s| (s as f64 / turns.max(1) as f64).round() as u64);
        Composition {
            percentile: percentile.to_string(),
            turns,
            server_ns: queue + cpu + service + send,
            queue_wait_ns: queue,
            cpu_wait_ns: cpu,
            service_ns: service,
            send_ns: send,
        }
    }

    /// The parts with their names, in order.
    pub fn parts(&self) -> [(&'static str, u64); 4] {
        [
            ("queue wait", self.queue_wait_ns),
            ("CPU wait", self.cpu_wait_ns),
            ("service", self.service_ns),
            ("send", self.send_ns),
        ]
    }
}
