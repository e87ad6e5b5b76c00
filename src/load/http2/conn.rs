//! One HTTP/2 connection's set-up: the TCP or Unix-socket connect, TLS with ALPN `h2`
//! (https) or prior knowledge (h2c). The HTTP/2 preface and settings are
//! the connection's first write (`client`). The socket is wrapped so the
//! bytes on the wire (TLS records included) are counted as the driver
//! counts them.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::endpoint::Endpoint;
use crate::load::driver::socket;
use crate::load::driver::tls::{Negotiated, TlsFailure};
use crate::load::workload::ErrorClass;

/// Bytes written and read on the wire by a worker's connections.
#[derive(Default)]
pub struct WireBytes {
    /// Written.
    pub sent: Cell<u64>,
    /// Read.
    pub received: Cell<u64>,
}

/// A socket whose reads and writes are counted in a [`WireBytes`].
struct Counted<T> {
    inner: T,
    bytes: Rc<WireBytes>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let c = &self.bytes.received;
            c.set(c.get() + (buf.filled().len() - before) as u64);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.bytes.sent.set(self.bytes.sent.get() + n as u64);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.bytes.sent.set(self.bytes.sent.get() + n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The HTTP/2 settings a run asks of every connection.
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    /// Each stream's initial receive window, bytes.
    pub stream: u32,
    /// The connection's receive window, bytes.
    pub connection: u32,
}

/// TLS as an HTTP/2 connection speaks it: the run's configuration with
/// ALPN `h2`, and the server name.
pub type Tls = (Arc<ClientConfig>, ServerName<'static>);

/// A byte stream an HTTP/2 connection runs over (TCP, Unix, TLS).
pub trait Io: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// A connection that is up, before the HTTP/2 preface.
pub struct Up {
    /// The socket (TLS over it when asked), its bytes counted.
    pub io: Box<dyn Io>,
    /// TLS: how long the handshake took (ns) and what it negotiated.
    pub tls: Option<(u64, Option<Negotiated>)>,
}

/// Why a connection could not be set up.
pub enum SetupError {
    /// The socket failed with this class.
    Class(ErrorClass),
    /// TLS failed (the class and reason come from it).
    Tls(TlsFailure),
    /// TLS succeeded but the server did not choose h2 by ALPN.
    NoH2(Option<Vec<u8>>),
}

/// Connects to `addr` (TCP, or a Unix stream socket), with TLS over it
/// when `tls`; `now` is the run clock.
pub async fn open(
    addr: &Endpoint,
    tls: Option<&Tls>,
    bytes: Rc<WireBytes>,
    now: impl Fn() -> u64,
) -> Result<Up, SetupError> {
    let class = |e: io::Error| SetupError::Class(ErrorClass::of(&e));
    match addr {
        Endpoint::Inet(a) => {
            let tcp = TcpStream::connect(*a).await.map_err(class)?;
            // A loop turn's frames go in one write; Nagle would hold a
            // small one back behind an unacknowledged one.
            let _ = tcp.set_nodelay(true);
            setup(Counted { inner: tcp, bytes }, tls, now).await
        }
        Endpoint::Unix(_) => {
            let s = unix_connect(addr).await.map_err(class)?;
            setup(Counted { inner: s, bytes }, tls, now).await
        }
    }
}

/// A Unix stream connection (abstract names included, which tokio's own
/// connect cannot name), through the driver's one non-blocking connect.
async fn unix_connect(addr: &Endpoint) -> io::Result<UnixStream> {
    let (sock, connected) = socket::start_connect(addr, None)?;
    let std: std::os::unix::net::UnixStream = sock.into();
    let s = UnixStream::from_std(std)?;
    if !connected {
        s.writable().await?;
        if let Some(e) = s.take_error()? {
            return Err(e);
        }
    }
    Ok(s)
}

/// TLS (when asked, with the ALPN h2 check) over a connected socket.
async fn setup<T: AsyncRead + AsyncWrite + Unpin + 'static>(
    io: Counted<T>,
    tls: Option<&Tls>,
    now: impl Fn() -> u64,
) -> Result<Up, SetupError> {
    let Some((config, name)) = tls else {
        return Ok(Up {
            io: Box::new(io),
            tls: None,
        });
    };
    let t0 = now();
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(name.clone(), io)
        .await
        .map_err(|e| SetupError::Tls(tls_failure(e)))?;
    let session = stream.get_ref().1;
    if session.alpn_protocol() != Some(b"h2") {
        return Err(SetupError::NoH2(
            session.alpn_protocol().map(<[u8]>::to_vec),
        ));
    }
    let negotiated = Negotiated::of(session);
    let took = now() - t0;
    Ok(Up {
        io: Box::new(stream),
        tls: Some((took, negotiated)),
    })
}

/// tokio-rustls reports TLS errors as io::Errors wrapping rustls' own.
fn tls_failure(e: io::Error) -> TlsFailure {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return TlsFailure::HandshakeEof;
    }
    let is_tls = e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>());
    if is_tls {
        let inner = e.into_inner().expect("checked above");
        match inner.downcast::<rustls::Error>() {
            Ok(t) => TlsFailure::Tls(*t),
            Err(other) => TlsFailure::Io(io::Error::other(other)),
        }
    } else {
        TlsFailure::Io(e)
    }
}
