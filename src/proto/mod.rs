//! Wire formats shared by `sockscope load` and `sockscope serve`
//! (documented for people in docs/protocols.md).
//!
//! * [`rr`]: the fixed-size request/response exchange of `tcp-rr` and
//!   `tcp-crr`, which needs no framing: the client sends `req` bytes, the
//!   server answers with `resp` bytes once it has them all.
//! * [`udp`]: sequenced datagrams and the end-of-run exchange between
//!   `load udp` and `serve udp-sink`.

pub mod rr;
pub mod udp;
