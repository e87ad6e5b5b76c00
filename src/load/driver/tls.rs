//! TLS on the load's connections (https), with rustls over the driver's
//! own non-blocking sockets.
//!
//! A workload asks for TLS with a [`TlsSpec`]; the run turns it into one
//! [`TlsClient`] (one `Arc<ClientConfig>`: provider, roots, verifier) before
//! anything runs, so a CA file that cannot be used or a server name that is
//! not one is a usage error. Each TCP connection then gets its own
//! [`TlsConn`] (a rustls `ClientConnection`), driven by the connection state
//! machines (`persistent`, `per_txn`) over the same epoll loop as plain
//! connections: after the TCP connect the handshake runs
//! ([`TlsConn::handshake`], interest as rustls wants to read or write),
//! then requests go through [`TlsConn::write`] and responses come back
//! decrypted into the worker's read buffer through [`TlsConn::read`].
//!
//! Reads take the socket's bytes in one `recv` into a worker-wide buffer
//! and feed them all to rustls, draining the plaintext as it goes: rustls'
//! own `read_tls` reads at most 4 KiB a call, which would cost a system
//! call per 4 KiB of a large response. Plaintext is never longer than the
//! records it came in, and rustls holds at most one partial record from
//! the read before, so a `recv` of at most the read buffer's size less one
//! record ([`RECORD_MAX`]) always decrypts into the read buffer whole:
//! nothing is left inside rustls that the (level-triggered) poller would
//! not report. (Should the buffer fill anyway, [`TlsConn::read_again`]
//! says so and the driver reads again without waiting.)
//!
//! Limits (see docs/load.md): no client certificates, no session
//! resumption (every handshake is a full one, so the handshake figures
//! measure one thing), no ALPN (the server picks its default, HTTP/1.1
//! for nginx), no 0-RTT.

use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use rustls::client::Resumption;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{self, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::load::driver::socket::{self, ReadOutcome};
// The spec is the workload's (what it asks for); how it becomes a client
// is this module's.
use crate::error;
use crate::load::workload::ErrorClass;
pub use crate::load::workload::TlsSpec;

/// The longest TLS record on the wire: a 5-byte header and at most
/// 2^14 + 2048 bytes of ciphertext (RFC 5246 6.2.3; TLS 1.3 allows less).
pub const RECORD_MAX: usize = 5 + (1 << 14) + 2048;

impl TlsSpec {
    /// Refuses what cannot run, before anything does: a server name that
    /// is neither a DNS name nor an IP address, a CA file that cannot be
    /// read or holds no usable certificate (usage errors).
    pub fn check(&self) -> Result<()> {
        self.server_name()?;
        if let Some(path) = &self.ca_file {
            read_ca_file(path)?;
        }
        Ok(())
    }

    /// The client every connection of the run shares: the ring provider,
    /// the system's root certificates plus the CA file (or, insecure, a
    /// verifier that accepts any certificate), no session resumption.
    pub fn client(&self) -> Result<TlsClient> {
        let server_name = self.server_name()?;
        let provider = Arc::new(crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| error::usage(format!("TLS configuration: {e}")))?;
        let mut config = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert { provider }))
                .with_no_client_auth()
        } else {
            builder
                .with_root_certificates(self.roots()?)
                .with_no_client_auth()
        };
        // Every handshake a full one: a resumed handshake skips the
        // certificate and its checks, and a histogram mixing both would
        // measure neither (docs/load.md).
        config.resumption = Resumption::disabled();
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
            insecure: self.insecure,
        })
    }

    fn server_name(&self) -> Result<ServerName<'static>> {
        ServerName::try_from(self.server_name.clone()).map_err(|e| {
            error::usage(format!(
                "{:?} is not a TLS server name (a DNS name or an IP address): {e}",
                self.server_name
            ))
        })
    }

    /// The system's roots and the CA file's certificates.
    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        // Certificates of the system store that do not parse are skipped:
        // one odd file in /etc/ssl/certs must not stop every https load.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = &self.ca_file {
            for cert in read_ca_file(path)? {
                roots.add(cert).map_err(|e| {
                    error::usage(format!(
                        "{}: not a usable CA certificate: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        if roots.is_empty() {
            return Err(error::usage(format!(
                "no trusted root certificate to check {} against: the system store is empty \
                 or unreadable ({}); install ca-certificates, give a CA file, or accept any \
                 certificate (--insecure, for test servers only)",
                self.server_name,
                native
                    .errors
                    .first()
                    .map_or_else(|| "no error reported".into(), |e| e.to_string())
            )));
        }
        Ok(roots)
    }
}

/// The certificates of a PEM file, at least one.
fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = crate::input::read_bounded(path, 16 << 20, &format!("CA file {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error::usage(format!("CA file {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(error::usage(format!(
            "CA file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

/// A server certificate verifier that accepts any certificate, for
/// self-signed test servers (--insecure): it checks neither the chain nor
/// the name nor the validity dates. It still checks the signatures of the
/// handshake messages with the certificate's key (through the provider),
/// so the handshake does all the work a verified one does except the
/// certificate checks, and a peer without the key still fails.
#[derive(Debug)]
struct AcceptAnyCert {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS side of a run: one configuration shared by every connection.
#[derive(Clone, Debug)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
    insecure: bool,
}

impl TlsClient {
    /// The run's configuration with `alpn` offered (HTTP/2: `h2`), and the
    /// server name: for an engine that drives its own TLS streams (`h2`).
    pub fn with_alpn(&self, alpn: &[&[u8]]) -> (Arc<ClientConfig>, ServerName<'static>) {
        let mut config = (*self.config).clone();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        (Arc::new(config), self.server_name.clone())
    }

    /// A new client session for one TCP connection.
    pub fn connection(&self) -> Result<TlsConn, TlsFailure> {
        ClientConnection::new(Arc::clone(&self.config), self.server_name.clone())
            .map(|conn| TlsConn {
                conn: Box::new(conn),
                eof_pending: false,
                full: false,
            })
            .map_err(TlsFailure::Tls)
    }

    /// True when certificates are not checked.
    pub fn insecure(&self) -> bool {
        self.insecure
    }
}

/// Why a TLS connection failed.
#[derive(Debug)]
pub enum TlsFailure {
    /// The socket failed (classed as a plain connection's would be).
    Io(io::Error),
    /// The handshake or a record was refused (ours or the peer's alert).
    Tls(rustls::Error),
    /// The peer closed the connection before the handshake completed.
    HandshakeEof,
}

impl TlsFailure {
    /// The error class it counts as.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Io(e) => ErrorClass::of(e),
            Self::Tls(_) | Self::HandshakeEof => ErrorClass::Tls,
        }
    }

    /// What went wrong, for a TLS failure (the report keeps the first).
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Io(_) => None,
            Self::Tls(e) => Some(e.to_string()),
            Self::HandshakeEof => {
                Some("the peer closed the connection during the handshake".into())
            }
        }
    }
}

/// Where the handshake stands after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Complete: requests may go out.
    Done,
    /// Waiting for the peer; `write` when bytes wait for room in the
    /// socket (poll for OUT as well as IN).
    Pending {
        /// Handshake bytes wait to be written.
        write: bool,
    },
}

/// The protocol version and cipher suite a connection negotiated, by
/// their IANA names (`TLSv1_3`, `TLS13_AES_256_GCM_SHA384`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Protocol version.
    pub version: &'static str,
    /// Cipher suite.
    pub cipher_suite: &'static str,
}

impl Negotiated {
    /// What `conn`'s handshake negotiated (None before it completes).
    pub fn of(conn: &ClientConnection) -> Option<Self> {
        Some(Self {
            version: conn.protocol_version()?.as_str()?,
            cipher_suite: conn.negotiated_cipher_suite()?.suite().as_str()?,
        })
    }
}

/// The raw fd as the `Read`/`Write` rustls moves records through:
/// non-blocking `send` (no SIGPIPE) for writes.
struct Fd(RawFd);

impl Write for Fd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match socket::write_some(self.0, buf)? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One connection's TLS session.
pub struct TlsConn {
    // Boxed: a client session is a few hundred bytes that plain
    // connections should not carry in their slots.
    conn: Box<ClientConnection>,
    /// The peer's close_notify came with the last plaintext returned: the
    /// next read reports the end (the socket may not wake the poller).
    eof_pending: bool,
    /// The last read filled the plaintext buffer: more may wait inside
    /// rustls, which the socket will not report.
    full: bool,
}

impl TlsConn {
    /// Runs the handshake as far as the socket allows; `wire` is scratch
    /// space for what the socket holds, `sent`/`received` count the bytes
    /// that crossed it.
    #[inline(never)]
    pub fn handshake(
        &mut self,
        fd: RawFd,
        wire: &mut [u8],
        sent: &mut u64,
        received: &mut u64,
    ) -> Result<Handshake, TlsFailure> {
        loop {
            if !self.flush(fd, sent)? {
                return Ok(Handshake::Pending { write: true });
            }
            if !self.conn.is_handshaking() {
                return Ok(Handshake::Done);
            }
            let n = match socket::read_some(fd, wire).map_err(TlsFailure::Io)? {
                ReadOutcome::Data(n) => n,
                ReadOutcome::WouldBlock => return Ok(Handshake::Pending { write: false }),
                ReadOutcome::Eof => return Err(TlsFailure::HandshakeEof),
            };
            *received += n as u64;
            let mut src = &wire[..n];
            while !src.is_empty() {
                let k = self.conn.read_tls(&mut src).map_err(TlsFailure::Io)?;
                self.process(fd, sent)?;
                if k == 0 {
                    break;
                }
            }
        }
    }

    /// What the handshake settled on.
    pub fn negotiated(&self) -> Option<Negotiated> {
        Negotiated::of(&self.conn)
    }

    /// Hands `plain` to the session and writes what it can of the records
    /// waiting; returns how much of `plain` was taken (all of it unless the
    /// session's send buffer is full). Bytes the socket had no room for
    /// wait in the session: [`wants_write`](Self::wants_write).
    // Never inlined: the plain path's loop, which shares its caller, stays
    // as compact as it was without TLS.
    #[inline(never)]
    pub fn write(&mut self, fd: RawFd, plain: &[u8], sent: &mut u64) -> Result<usize, TlsFailure> {
        let taken = if plain.is_empty() {
            0
        } else {
            self.conn.writer().write(plain).map_err(TlsFailure::Io)?
        };
        self.flush(fd, sent)?;
        Ok(taken)
    }

    /// True when records wait for room in the socket.
    #[inline]
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Reads what the socket holds (one `recv` into `wire`, of at most
    /// `plain`'s length less [`RECORD_MAX`]), decrypts it and returns the
    /// plaintext in `plain`. `WouldBlock` also when the records carried no
    /// application data (session tickets). The peer's close_notify or a
    /// TCP EOF is `Eof`, once the plaintext before it has been returned.
    #[inline(never)]
    pub fn read(
        &mut self,
        fd: RawFd,
        wire: &mut [u8],
        plain: &mut [u8],
        sent: &mut u64,
        received: &mut u64,
    ) -> Result<ReadOutcome, TlsFailure> {
        if self.eof_pending {
            return Ok(ReadOutcome::Eof);
        }
        // Plaintext the handshake left behind (0.5-RTT data) comes first.
        let mut filled = 0;
        let mut closed = self.drain(plain, &mut filled)?;
        if filled == 0 && !closed {
            let room = wire.len().min(plain.len().saturating_sub(RECORD_MAX));
            let n = match socket::read_some(fd, &mut wire[..room]).map_err(TlsFailure::Io)? {
                ReadOutcome::Data(n) => n,
                ReadOutcome::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                // rustls learns of the EOF from an empty read, and says
                // below whether it came after a close_notify.
                ReadOutcome::Eof => 0,
            };
            *received += n as u64;
            let mut src = &wire[..n];
            loop {
                let k = self.conn.read_tls(&mut src).map_err(TlsFailure::Io)?;
                self.process(fd, sent)?;
                closed |= self.drain(plain, &mut filled)?;
                // k == 0: the EOF, or a close_notify already seen (what
                // follows it is not read).
                if src.is_empty() || k == 0 {
                    break;
                }
            }
        }
        self.full = filled == plain.len();
        if filled > 0 {
            self.eof_pending = closed;
            Ok(ReadOutcome::Data(filled))
        } else if closed {
            Ok(ReadOutcome::Eof)
        } else {
            Ok(ReadOutcome::WouldBlock)
        }
    }

    /// True when the driver should read again without waiting for the
    /// socket: the peer's close_notify arrived with the plaintext last
    /// returned, or that plaintext filled the buffer and more may be
    /// waiting inside rustls.
    #[inline]
    pub fn read_again(&self) -> bool {
        self.eof_pending || self.full
    }

    /// Sends close_notify, as far as the socket takes it at once (an
    /// orderly close; nothing waits for the peer's).
    pub fn close_notify(&mut self, fd: RawFd, sent: &mut u64) {
        self.conn.send_close_notify();
        let _ = self.flush(fd, sent);
    }

    /// Processes the records fed so far; on a TLS error, writes the alert
    /// rustls queued (best effort) before failing.
    fn process(&mut self, fd: RawFd, sent: &mut u64) -> Result<(), TlsFailure> {
        match self.conn.process_new_packets() {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = self.flush(fd, sent);
                Err(TlsFailure::Tls(e))
            }
        }
    }

    /// Moves decrypted plaintext into `plain[*filled..]`; true when the
    /// peer has closed (close_notify, or EOF) and nothing more will come.
    fn drain(&mut self, plain: &mut [u8], filled: &mut usize) -> Result<bool, TlsFailure> {
        while *filled < plain.len() {
            match self.conn.reader().read(&mut plain[*filled..]) {
                Ok(0) => return Ok(true),
                Ok(n) => *filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                // A TCP EOF without close_notify: handled like a plain
                // EOF (many servers close that way).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(true),
                Err(e) => return Err(TlsFailure::Io(e)),
            }
        }
        Ok(false)
    }

    /// Writes the records waiting until done or the socket is full; true
    /// when nothing is left waiting.
    fn flush(&mut self, fd: RawFd, sent: &mut u64) -> Result<bool, TlsFailure> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut Fd(fd)) {
                Ok(n) => *sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(TlsFailure::Io(e)),
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> TlsSpec {
        TlsSpec {
            server_name: name.into(),
            insecure: false,
            ca_file: None,
        }
    }

    fn exit_code(e: &anyhow::Error) -> u8 {
        e.downcast_ref::<crate::error::Exit>().map_or(1, |x| x.code)
    }

    #[test]
    fn a_bad_server_name_or_ca_file_is_a_usage_error() {
        let code = |r: Result<()>| exit_code(&r.unwrap_err());
        assert_eq!(code(spec("not a name!").check()), 2);
        let missing = TlsSpec {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..spec("localhost")
        };
        assert_eq!(code(missing.check()), 2);
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let not_pem = TlsSpec {
            ca_file: Some(empty),
            ..spec("localhost")
        };
        let err = not_pem.check().unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn names_and_addresses_are_server_names() {
        for name in ["localhost", "example.com", "127.0.0.1", "::1"] {
            spec(name).check().unwrap();
            spec(name).client().unwrap();
        }
        let insecure = TlsSpec {
            insecure: true,
            ..spec("localhost")
        };
        assert!(insecure.client().unwrap().insecure());
    }
}
