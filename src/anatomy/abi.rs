//! The request-anatomy BPF object as libbpf-rs generated it from
//! src/bpf/anatomy.bpf.c (the skeleton and its `types`), and the limits its
//! header src/bpf/anatomy.h shares with Rust. The only module that includes
//! this skeleton.

use crate::probe::pod::Plain;

mod skel {
    #![allow(clippy::all, clippy::pedantic, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/anatomy.skel.rs"));
}
pub(super) use skel::{AnatomySkel, AnatomySkelBuilder, types};

crate::probe::scope_filter::check_common_abi!(types);

/// The parts of a turn, in the order of the kernel's arrays
/// (`enum ss_anat_part`): queue wait, CPU wait, service, send, server time.
pub const PARTS: usize = types::ss_anat_part::SS_PARTS.0 as usize;
/// Counters the programs keep (`enum ss_anat_count`).
pub const COUNTS: usize = types::ss_anat_count::SS_COUNTS.0 as usize;
/// Programs that count and time their runs (`enum ss_anat_prog`).
pub const PROGS: usize = types::ss_anat_limits::SS_ANAT_PROGS.0 as usize;
/// The proto of a Unix listener's statistics (AF_UNIX).
pub const PROTO_UNIX: u16 = types::ss_anat_limits::SS_ANAT_PROTO_UNIX.0 as u16;
/// Unix listeners followed at most.
pub const UNIX_MAX: usize = types::ss_anat_limits::SS_ANAT_UNIX_MAX.0 as usize;
/// The names map's size when no more is asked for.
pub const NAMES_MIN: u32 = types::ss_anat_limits::SS_RESP_NAMES_MAX.0;

/// The counters' indices (see src/bpf/anatomy.h for what each counts).
pub mod count {
    use super::types::ss_anat_count as C;
    /// Turns timed into the histograms.
    pub const TURNS: usize = C::SS_CNT_TURNS.0 as usize;
    /// Turns on multiplexed connections.
    pub const MUX_TURNS: usize = C::SS_CNT_MUX_TURNS.0 as usize;
    /// Connections found multiplexed.
    pub const MUX_CONNS: usize = C::SS_CNT_MUX_CONNS.0 as usize;
    /// Turns whose data was queued before the window.
    pub const BEFORE_WINDOW: usize = C::SS_CNT_BEFORE_WINDOW.0 as usize;
    /// Writes with no request before them.
    pub const UNSOLICITED: usize = C::SS_CNT_UNSOLICITED.0 as usize;
    /// UDP datagrams answered whose arrival was not seen (untimed).
    pub const UDP_UNSEEN: usize = C::SS_CNT_UDP_UNSEEN.0 as usize;
    /// Connections and UDP sockets followed.
    pub const CONNS: usize = C::SS_CNT_CONNS.0 as usize;
    /// Socket or task storage the kernel could not allocate.
    pub const STORAGE_FULL: usize = C::SS_CNT_STORAGE_FULL.0 as usize;
    /// Sockets read by a task outside the scope.
    pub const FOREIGN: usize = C::SS_CNT_FOREIGN.0 as usize;
    /// Serving threads followed.
    pub const THREADS: usize = C::SS_CNT_THREADS.0 as usize;
    /// Turns added to the overflow port.
    pub const SERIES_FULL: usize = C::SS_CNT_SERIES_FULL.0 as usize;
    /// Turns still waiting for their response when the window closed.
    pub const IN_FLIGHT: usize = C::SS_CNT_IN_FLIGHT.0 as usize;
    /// UDP datagrams read and not answered before the next read.
    pub const UNANSWERED: usize = C::SS_CNT_UNANSWERED.0 as usize;
    /// TCP: next requests that arrived while a response's write had not
    /// returned.
    pub const NEXT_IN_WRITE: usize = C::SS_CNT_NEXT_IN_WRITE.0 as usize;
    /// Turns cut by a sampled window's pause or resume: untimed.
    pub const RESYNC: usize = C::SS_CNT_RESYNC.0 as usize;
    /// Turns whose response was being written when the window closed
    /// (answered, their write's end not seen): untimed.
    pub const WRITING_AT_END: usize = C::SS_CNT_WRITING_AT_END.0 as usize;
    /// Next requests read before their data-ready hook ran (their arrival
    /// is taken at that read).
    pub const READ_BEFORE_READY: usize = C::SS_CNT_READ_BEFORE_READY.0 as usize;
    /// Commands completed (read whole), every protocol.
    pub const COMMANDS: usize = C::SS_CNT_COMMANDS.0 as usize;
    /// RESP: turns closed that carried at least one command.
    pub const CMD_TURNS: usize = C::SS_CNT_CMD_TURNS.0 as usize;
    /// Connections whose first read began a RESP array.
    pub const RESP_CONNS: usize = C::SS_CNT_RESP_CONNS.0 as usize;
    /// RESP connections the parser gave up on.
    pub const RESP_GAVE_UP: usize = C::SS_CNT_RESP_GAVE_UP.0 as usize;
    /// RESP commands whose name found no room in the names map.
    pub const NAMES_FULL: usize = C::SS_CNT_NAMES_FULL.0 as usize;
    /// Connections whose first word was a memcached command (or whose
    /// first byte was the binary protocol's magic).
    pub const MC_CONNS: usize = C::SS_CNT_MC_CONNS.0 as usize;
    /// memcached connections the parser gave up on (the binary ones too).
    pub const MC_GAVE_UP: usize = C::SS_CNT_MC_GAVE_UP.0 as usize;
    /// memcached: turns closed that carried at least one command.
    pub const MC_TURNS: usize = C::SS_CNT_MC_TURNS.0 as usize;
    /// memcached commands whose name found no room in the names map.
    pub const MC_NAMES_FULL: usize = C::SS_CNT_MC_NAMES_FULL.0 as usize;
    /// memcached `noreply` commands (counted, never timed).
    pub const MC_NOREPLY: usize = C::SS_CNT_MC_NOREPLY.0 as usize;
    /// Connections whose first read began an HTTP/1 request line.
    pub const H1_CONNS: usize = C::SS_CNT_H1_CONNS.0 as usize;
    /// HTTP/1 connections the parser gave up on.
    pub const H1_GAVE_UP: usize = C::SS_CNT_H1_GAVE_UP.0 as usize;
    /// HTTP/1: turns closed that carried at least one request.
    pub const H1_TURNS: usize = C::SS_CNT_H1_TURNS.0 as usize;
    /// HTTP/1 requests whose route found no room in the names map.
    pub const H1_NAMES_FULL: usize = C::SS_CNT_H1_NAMES_FULL.0 as usize;
    /// HTTP/1 requests whose response's status was not read.
    pub const H1_STATUS_UNKNOWN: usize = C::SS_CNT_H1_STATUS_UNKNOWN.0 as usize;
    /// HTTP/1 final responses written with no request read before them.
    pub const H1_UNMATCHED: usize = C::SS_CNT_H1_UNMATCHED.0 as usize;
    /// HTTP/1 1xx interim responses (100 Continue): no turn's end.
    pub const H1_INTERIM: usize = C::SS_CNT_H1_INTERIM.0 as usize;
    /// Connections whose first read was a PostgreSQL startup packet.
    pub const PG_CONNS: usize = C::SS_CNT_PG_CONNS.0 as usize;
    /// PostgreSQL connections the parser gave up on.
    pub const PG_GAVE_UP: usize = C::SS_CNT_PG_GAVE_UP.0 as usize;
    /// PostgreSQL: turns closed that carried at least one request.
    pub const PG_TURNS: usize = C::SS_CNT_PG_TURNS.0 as usize;
    /// PostgreSQL requests whose name found no room in the names map.
    pub const PG_NAMES_FULL: usize = C::SS_CNT_PG_NAMES_FULL.0 as usize;
    /// PostgreSQL connections gone TLS or GSS encrypted: not readable.
    pub const PG_ENCRYPTED: usize = C::SS_CNT_PG_ENCRYPTED.0 as usize;
    /// TCP connections and UDP sockets whose first DNS query parsed.
    pub const DNS_CONNS: usize = C::SS_CNT_DNS_CONNS.0 as usize;
    /// DNS TCP connections the parser gave up on.
    pub const DNS_GAVE_UP: usize = C::SS_CNT_DNS_GAVE_UP.0 as usize;
    /// DNS: turns closed that carried at least one query.
    pub const DNS_TURNS: usize = C::SS_CNT_DNS_TURNS.0 as usize;
    /// DNS queries whose QTYPE found no room in the names map.
    pub const DNS_NAMES_FULL: usize = C::SS_CNT_DNS_NAMES_FULL.0 as usize;
    /// UDP datagrams on a DNS socket that were no query.
    pub const DNS_MALFORMED: usize = C::SS_CNT_DNS_MALFORMED.0 as usize;
    /// DNS: UDP answers whose RCODE was not read.
    pub const DNS_RCODE_UNKNOWN: usize = C::SS_CNT_DNS_RCODE_UNKNOWN.0 as usize;
    /// TCP connections whose first read began a TLS handshake.
    pub const TLS_CONNS: usize = C::SS_CNT_TLS_CONNS.0 as usize;
    /// Of them, read in plaintext (OpenSSL's, `--tls-plaintext`).
    pub const TLS_READ: usize = C::SS_CNT_TLS_READ.0 as usize;
    /// TLS connections whose state the kernel's table evicted.
    pub const TLS_LOST: usize = C::SS_CNT_TLS_LOST.0 as usize;
    /// TLS handshake turns (no request: not timed).
    pub const TLS_HANDSHAKES: usize = C::SS_CNT_TLS_HANDSHAKES.0 as usize;
    /// Ends of turns a stack sample fell in, written.
    pub const TURN_ENDS: usize = C::SS_CNT_TURN_ENDS.0 as usize;
    /// Of them, the ring buffer had no room for.
    pub const TURN_ENDS_LOST: usize = C::SS_CNT_TURN_ENDS_LOST.0 as usize;
    /// Answered turns two hooks came to close at the same moment (the
    /// next request's read and the peer's close, a write's end or the
    /// window's end, on two CPUs): closed and recorded once.
    pub const CLOSE_RACES: usize = C::SS_CNT_CLOSE_RACES.0 as usize;
    /// Of them, those whose losing hook did not see the close end (its
    /// closer beneath it on its CPU, or slower than it waits): what that
    /// hook came to do (mark an arrival, begin a turn) was left undone.
    pub const CLOSE_UNWAITED: usize = C::SS_CNT_CLOSE_UNWAITED.0 as usize;
    /// Connections whose first read began with the HTTP/2 preface.
    pub const H2_CONNS: usize = C::SS_CNT_H2_CONNS.0 as usize;
    /// Of them, given up on (bounds, an unreadable buffer, a lost record).
    pub const H2_GAVE_UP: usize = C::SS_CNT_H2_GAVE_UP.0 as usize;
    /// HTTP/2 streams begun.
    pub const H2_STREAMS: usize = C::SS_CNT_H2_STREAMS.0 as usize;
    /// HTTP/2 streams timed.
    pub const H2_TIMED: usize = C::SS_CNT_H2_TIMED.0 as usize;
    /// HTTP/2 streams reset either way (untimed).
    pub const H2_RESET: usize = C::SS_CNT_H2_RESET.0 as usize;
    /// HTTP/2 streams begun with their slot taken (untimed).
    pub const H2_NO_SLOT: usize = C::SS_CNT_H2_NO_SLOT.0 as usize;
    /// HTTP/2 records the ring buffer had no room for.
    pub const H2_EVENTS_LOST: usize = C::SS_CNT_H2_EVENTS_LOST.0 as usize;
    /// HTTP/2 streams whose bytes' arrival was not kept.
    pub const H2_ARRIVAL_UNSEEN: usize = C::SS_CNT_H2_ARRIVAL_UNSEEN.0 as usize;
}

/// The protocols commands are found in (`enum ss_anat_wire`).
pub mod wire {
    use super::types::ss_anat_wire as W;
    /// RESP (src/bpf/resp.h).
    pub const RESP: u8 = W::SS_WIRE_RESP.0 as u8;
    /// memcached's text protocol (src/bpf/memcached.h).
    pub const MEMCACHED: u8 = W::SS_WIRE_MEMCACHED.0 as u8;
    /// HTTP/1.0 and 1.1 (src/bpf/http1.h).
    pub const HTTP1: u8 = W::SS_WIRE_HTTP1.0 as u8;
    /// PostgreSQL's frontend protocol (src/bpf/postgres.h).
    pub const POSTGRES: u8 = W::SS_WIRE_POSTGRES.0 as u8;
    /// DNS queries over UDP and TCP (src/bpf/dns.h).
    pub const DNS: u8 = W::SS_WIRE_DNS.0 as u8;
    /// HTTP/2 streams (src/bpf/h2.h).
    pub const HTTP2: u8 = W::SS_WIRE_HTTP2.0 as u8;
    /// gRPC: HTTP/2 streams named by the loader (never set by the kernel).
    pub const GRPC: u8 = W::SS_WIRE_GRPC.0 as u8;
}

/// HTTP/2's ring-buffer records (src/bpf/anatomy.h, `ss_h2_*`).
pub mod h2 {
    pub use super::types::{ss_h2_block as Block, ss_h2_end as End, ss_h2_head as Head};
    use super::types::{ss_h2_end_how as How, ss_h2_limits as L, ss_h2_record as R};
    /// A record of header-block bytes.
    pub const REC_BLOCK: u8 = R::SS_H2_REC_BLOCK.0 as u8;
    /// A stream ended.
    pub const REC_END: u8 = R::SS_H2_REC_END.0 as u8;
    /// A connection ended or is no longer parsed.
    pub const REC_CLOSE: u8 = R::SS_H2_REC_CLOSE.0 as u8;
    /// A timed turn a stack sample fell in ended (`ss_turn_end`, not
    /// HTTP/2's: `anatomy::ends`).
    pub const REC_TURN: u8 = R::SS_H2_REC_TURN.0 as u8;
    /// The target wrote the stream's END_STREAM.
    pub const END_STREAM: u8 = How::SS_H2_END_STREAM.0 as u8;
    /// The target reset the stream.
    pub const END_RESET_SERVER: u8 = How::SS_H2_END_RESET_SERVER.0 as u8;
    /// The client reset the stream.
    pub const END_RESET_CLIENT: u8 = How::SS_H2_END_RESET_CLIENT.0 as u8;
    /// Header-block bytes a record carries at most.
    pub const CHUNK: usize = L::SS_H2_CHUNK.0 as usize;
}

/// A PostgreSQL request's kind (`enum ss_pg_kind`, the first byte of its
/// name), for people; None for a byte that is no kind.
pub fn pg_kind(code: u8) -> Option<&'static str> {
    use types::ss_pg_kind as K;
    let kinds = [
        (K::SS_PG_SELECT, "SELECT"),
        (K::SS_PG_INSERT, "INSERT"),
        (K::SS_PG_UPDATE, "UPDATE"),
        (K::SS_PG_DELETE, "DELETE"),
        (K::SS_PG_BEGIN, "BEGIN"),
        (K::SS_PG_COMMIT, "COMMIT"),
        (K::SS_PG_ROLLBACK, "ROLLBACK"),
        (K::SS_PG_OTHER, "OTHER"),
        (K::SS_PG_PARSE, "PARSE"),
        (K::SS_PG_SYNC, "SYNC"),
        (K::SS_PG_UNKNOWN, "UNKNOWN"),
        (K::SS_PG_FUNCTION, "FUNCTION"),
    ];
    kinds
        .iter()
        .find(|(k, _)| k.0 as u64 == u64::from(code))
        .map(|(_, name)| *name)
}

/// Bytes of an HTTP/1 name's text (method, space, route template) the
/// kernel keeps.
pub const H1_TEXT: usize = types::ss_anat_limits::SS_H1_TEXT.0 as usize;

/// Bytes of a command's name the kernel keeps.
pub const NAME_LEN: usize = types::ss_anat_limits::SS_RESP_NAME_LEN.0 as usize;

/// The programs' names, in the order of `enum ss_anat_prog`.
pub const PROG_NAMES: [&str; PROGS] = [
    "sk_data_ready",
    "sock_recv_length",
    "sock_send_length",
    "inet_sock_set_state",
    "sched_process_fork",
    "uprobe:SSL_read/SSL_write",
    "uretprobe:SSL_read/SSL_write",
];

// SAFETY (all): skeleton structs generated from src/bpf/anatomy.h:
// repr(C), integers and explicit padding only (see trace/pod.rs).
unsafe impl Plain for types::ss_anat_stats {}
// SAFETY: as above (two u64s).
unsafe impl Plain for types::ss_anat_svc_cost {}
// SAFETY: as above.
unsafe impl Plain for types::ss_anat_stats_key {}
// SAFETY: as above.
unsafe impl Plain for types::ss_anat_port_key {}
// SAFETY: as above.
unsafe impl Plain for types::ss_anat_name_key {}
// SAFETY: as above.
unsafe impl Plain for types::ss_anat_name {}
// SAFETY: as above.
unsafe impl Plain for types::ss_h1_route {}
// SAFETY: as above.
unsafe impl Plain for types::ss_h2_head {}
// SAFETY: as above.
unsafe impl Plain for types::ss_h2_block {}
// SAFETY: as above.
unsafe impl Plain for types::ss_h2_end {}
// SAFETY: as above.
unsafe impl Plain for types::ss_turn_end {}

const _: () = assert!(PROG_NAMES.len() == PROGS);
