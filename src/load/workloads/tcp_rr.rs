//! tcp-rr: the raw exchange (`raw`) over persistent connections, each
//! keeping `--pipeline` requests in flight (closed loop), or sending at
//! intended times (open loop, --rate). The connections are the driver's
//! (`persistent`); this file only says what the workload is.

use anyhow::Result;
use clap::Args;

use crate::load::Load;
use crate::load::spec::{ConnModel, Options, Registered, TargetForm, TcpArgs};
use crate::load::workload::{ConnMode, TcpWorkload};
use crate::load::workloads::raw::{RawArgs, RawExchange};

/// The registration of `load tcp-rr`.
pub static WORKLOAD: Registered<RrArgs> = Registered::new(
    "tcp-rr",
    "TCP request/response over persistent connections (closed loop, or open loop with --rate)",
    TargetForm::Addr,
);

/// `load tcp-rr` options.
#[derive(Clone, Debug, Args)]
pub struct RrArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// What each transaction sends and expects.
    #[command(flatten)]
    pub raw: RawArgs,
    /// Requests in flight per connection.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
}

impl Options for RrArgs {
    fn address(&mut self) -> Option<&mut String> {
        Some(&mut self.addr)
    }

    fn conn(&self) -> ConnModel {
        ConnModel::Persistent
    }

    fn driver(&self) -> Option<&TcpArgs> {
        Some(&self.tcp)
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        Ok(Load::tcp(workload(&self), self.tcp))
    }
}

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
