//! Wire formats shared by `sockscope load` and `sockscope serve`
//! (documented for people in docs/protocols.md), and the codecs the load
//! generator and the measuring side share.
//!
//! * [`rr`]: the fixed-size request/response exchange of `tcp-rr` and
//!   `tcp-crr`, which needs no framing: the client sends `req` bytes, the
//!   server answers with `resp` bytes once it has them all.
//! * [`udp`]: sequenced datagrams and the end-of-run exchange between
//!   `load udp` and `serve udp-sink`.
//! * [`hpack`]: HPACK (RFC 7541) and its Huffman code, for HTTP/2's
//!   header blocks: the load's client and the anatomy's stream names.

pub mod hpack;
pub mod rr;
pub mod udp;
