//! The artifacts of the reference servers (`serve echo|relay|udp-sink
//! --json`): their schemas, which profile and `bench relay` read back, and
//! the counters they carry. serve/ fills them and prints their summaries.

pub mod echo;
pub mod relay;
pub mod udp_sink;
