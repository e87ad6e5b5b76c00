//! TLS on the load's connections (https): what the workload asks for. The
//! record layer over the driver's non-blocking sockets is not built yet, so
//! a TLS load is refused before anything runs.

use std::path::PathBuf;

use anyhow::Result;

use crate::error;

/// How a workload wants TLS spoken on each connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSpec {
    /// The name sent as SNI and checked against the certificate.
    pub server_name: String,
    /// Accept any certificate (self-signed test servers): --insecure.
    pub insecure: bool,
    /// Trust the certificates in this PEM file as well as the system's.
    pub ca_file: Option<PathBuf>,
}

impl TlsSpec {
    /// Refuses what cannot run (today: any TLS load).
    pub fn check(&self) -> Result<()> {
        Err(error::usage(format!(
            "TLS to {} is not supported by this build of the load generator",
            self.server_name
        )))
    }
}
