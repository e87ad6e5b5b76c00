//! `sockscope profile` end to end: launched and attached targets, external
//! load commands, Unix-socket targets, the request anatomy in a profile
//! (HTTP/1 and HTTP/2, RESP commands against redis, memcached's text
//! commands against memcached, PostgreSQL's requests
//! against pg_stat_statements, DNS queries against dnsmasq's query log), the tail's stacks
//! and waits on a server whose slow requests have a known cause, the socket evidence
//! provoked in network namespaces and the emulated paths. The evidence tests (named namespaces) and the
//! path tests that compare `ip netns list` before and after take
//! `common::serial()`.
//!
//! One binary for these files (docs/architecture.md, "Tests"): each file is
//! a module; their tests run on parallel threads.

#[path = "../common/mod.rs"]
mod common;

#[path = "../anatomy_dns.rs"]
mod anatomy_dns;
#[path = "../anatomy_http1.rs"]
mod anatomy_http1;
#[path = "../anatomy_http2.rs"]
mod anatomy_http2;
#[path = "../anatomy_memcached.rs"]
mod anatomy_memcached;
#[path = "../anatomy_postgres.rs"]
mod anatomy_postgres;
#[path = "../anatomy_profile.rs"]
mod anatomy_profile;
#[path = "../anatomy_resp.rs"]
mod anatomy_resp;
#[path = "../anatomy_tls.rs"]
mod anatomy_tls;
#[path = "../evidence_sockets.rs"]
mod evidence_sockets;
#[path = "../path.rs"]
mod path;
#[path = "../profile.rs"]
mod profile;
#[path = "../profile_external.rs"]
mod profile_external;
#[path = "../profile_unix.rs"]
mod profile_unix;
#[path = "../tail_causes.rs"]
mod tail_causes;
