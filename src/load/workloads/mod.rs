//! The request/response workloads of the TCP driver, one file each
//! (`tcp_rr`, `tcp_crr`, `redis`, `memcached`, `udp_rr`; `grpc` on the
//! HTTP/2 engine; `udp`, its own engine), and the helpers they share: the
//! key-value core `kv` with its options `kv_options` and key spaces
//! `keyspace`, the `{field}` template parser `fields`, DNS questions and
//! answers `dns`, the raw exchange of the tcp workloads `raw`, and gRPC's
//! descriptor sets `protoset`. HTTP/1 (`load::http`) and the HTTP/2 engine
//! (`load::http2`) are folders of their own beside this one.

pub mod dns;
pub mod fields;
pub mod grpc;
pub mod keyspace;
pub mod kv;
pub mod kv_options;
pub mod memcached;
pub mod protoset;
pub mod raw;
pub mod redis;
pub mod tcp_crr;
pub mod tcp_rr;
pub mod udp;
pub mod udp_rr;
