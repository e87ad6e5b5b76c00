//! tcp-rr: the raw exchange (`raw`) over persistent connections, each
//! keeping `--pipeline` requests in flight (closed loop), or sending at
//! intended times (open loop, --rate). The connections are the driver's
//! (`persistent`); this file only says what the workload is.

use super::RrArgs;
use super::raw::RawExchange;
use super::workload::{ConnMode, TcpWorkload};

/// The tcp-rr workload of a command line.
pub fn workload(a: &RrArgs) -> TcpWorkload<RawExchange> {
    TcpWorkload {
        name: "tcp-rr",
        mode: ConnMode::Persistent {
            pipeline: a.pipeline as usize,
        },
        addr: a.addr.clone(),
        target: None,
        tls: None,
        config: a.raw.config(),
        exchange: RawExchange::from_args(&a.raw),
    }
}
