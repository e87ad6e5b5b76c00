//! Samples the target tree's sockets through sock_diag
//! (`report::evidence::sockets`).

use std::net::SocketAddr;

use crate::report::evidence::SocketEvidence;

/// Accumulates socket samples over the window.
pub struct Sampler {
    samples: u64,
}

impl Sampler {
    /// A sampler for the tree of `pid` serving `addr`; an error says why
    /// its sockets cannot be read (sock_diag refused, namespace gone).
    pub fn new(_pid: i32, _addr: SocketAddr) -> Result<Self, String> {
        Err("not collected yet".into())
    }

    /// One round over the sockets of `tree`.
    pub fn sample(&mut self, _tree: &[i32]) {
        self.samples += 1;
    }

    /// The evidence.
    pub fn finish(self) -> SocketEvidence {
        SocketEvidence {
            samples: self.samples,
            ..Default::default()
        }
    }
}
