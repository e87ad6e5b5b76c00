//! tcp-crr: the raw exchange (`raw`) on a connection per transaction:
//! each slot loops connect, request, response, close (FIN, or RST with
//! `--close rst`). The connections are the driver's (`per_txn`); this file
//! only says what the workload is.

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::load::Load;
use crate::load::spec::{ConnModel, Options, Registered, TargetForm, TcpArgs};
use crate::load::workload::{ConnMode, TcpWorkload};
use crate::load::workloads::raw::{RawArgs, RawExchange};

/// The registration of `load tcp-crr`.
pub static WORKLOAD: Registered<CrrArgs> = Registered::new(
    "tcp-crr",
    "TCP connect, request, response, close, in a loop per slot",
    TargetForm::Addr,
);

/// How tcp-crr closes each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CloseMode {
    /// Orderly close (FIN); the client keeps the TIME_WAIT.
    Fin,
    /// Abortive close (SO_LINGER 0, RST): no TIME_WAIT.
    Rst,
}

/// `load tcp-crr` options.
#[derive(Clone, Debug, Args)]
pub struct CrrArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// What each transaction sends and expects.
    #[command(flatten)]
    pub raw: RawArgs,
    /// How to close each connection.
    #[arg(long, value_enum, default_value_t = CloseMode::Fin)]
    pub close: CloseMode,
}

impl Options for CrrArgs {
    fn address(&mut self) -> Option<&mut String> {
        Some(&mut self.addr)
    }

    fn conn(&self) -> ConnModel {
        ConnModel::PerTransaction
    }

    fn driver(&self) -> Option<&TcpArgs> {
        Some(&self.tcp)
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        Ok(Load::tcp(workload(&self), self.tcp))
    }
}

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
