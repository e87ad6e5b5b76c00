//! tcp-crr: the raw exchange (`raw`) on a connection per transaction:
//! each slot loops connect, request, response, close (FIN, or RST with
//! `--close rst`). The connections are the driver's (`per_txn`); this file
//! only says what the workload is.

use super::raw::RawExchange;
use super::workload::{ConnMode, TcpWorkload};
use super::{CloseMode, CrrArgs};

/// The tcp-crr workload of a command line.
pub fn workload(a: &CrrArgs) -> TcpWorkload<RawExchange> {
    TcpWorkload {
        name: "tcp-crr",
        mode: ConnMode::PerTransaction {
            close_rst: a.close == CloseMode::Rst,
        },
        addr: a.addr.clone(),
        target: None,
        tls: None,
        config: a.raw.config(),
        exchange: RawExchange::from_args(&a.raw),
    }
}
