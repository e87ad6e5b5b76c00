//! The load generator and sockscope's own servers against real peers on
//! loopback, no BPF but the relay's sockmap: `load`, `load --rate`
//! schedules, http and https, HTTP/2 and gRPC, redis and memcached,
//! udp-rr, Unix sockets, `serve`, `serve relay`, `merge` (namespaces of
//! its own) and the tail percentiles. The tests that send UDP take
//! `common::serial()`: some read the namespace-wide UDP drop counters, and a
//! burst overflowing loopback's backlog would drop another test's
//! datagrams.
//!
//! One binary for these files (docs/architecture.md, "Tests"): each file is
//! a module; their tests run on parallel threads.

#[path = "../common/mod.rs"]
mod common;

#[path = "../http.rs"]
mod http;
#[path = "../http2.rs"]
mod http2;
#[path = "../http2_hostile.rs"]
mod http2_hostile;
#[path = "../kv.rs"]
mod kv;
#[path = "../load.rs"]
mod load;
#[path = "../load_schedule.rs"]
mod load_schedule;
#[path = "../merge.rs"]
mod merge;
#[path = "../relay.rs"]
mod relay;
#[path = "../serve.rs"]
mod serve;
#[path = "../tail.rs"]
mod tail;
#[path = "../udp_rr.rs"]
mod udp_rr;
#[path = "../unix.rs"]
mod unix;
