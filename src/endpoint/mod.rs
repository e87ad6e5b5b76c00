//! Where a client connects or a server listens: an IP socket address or a
//! Unix-domain socket name ([`Endpoint`]), parsed once from what a user
//! wrote (`127.0.0.1:6379`, `unix:/run/redis.sock`, `unix:@name`, a bare
//! `/run/redis.sock`) and turned into the kernel's socket address in one
//! place, so every workload, server and report names it the same way.

pub mod socket_file;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use socket2::{Domain, SockAddr};

use crate::error;
use crate::values;

/// What marks a Unix-domain socket name: `unix:/path` or `unix:@name`.
pub const UNIX_PREFIX: &str = "unix:";

/// The longest name `sun_path` holds: 108 bytes with a path's final NUL
/// (an abstract name's leading NUL takes the same byte).
pub const MAX_UNIX_NAME: usize = 107;

/// A Unix-domain socket's name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnixName {
    /// A socket file (an absolute path).
    Path(PathBuf),
    /// A name in the network namespace's abstract namespace (`@name`; no
    /// file: it disappears with the last socket bound to it).
    Abstract(Vec<u8>),
}

impl UnixName {
    /// Parses what follows `unix:`: an absolute path or `@name`. Anything
    /// else is a usage error saying why (`whole` is the text as written,
    /// for the message).
    pub fn parse(rest: &str, whole: &str) -> Result<Self> {
        if rest.is_empty() {
            return Err(error::usage(format!(
                "`{whole}` names no socket: give unix:/absolute/path or unix:@abstract-name"
            )));
        }
        if rest.contains('\0') {
            return Err(error::usage(format!(
                "`{whole}`: a Unix socket name cannot hold a NUL byte"
            )));
        }
        let name = if let Some(a) = rest.strip_prefix('@') {
            if a.is_empty() {
                return Err(error::usage(format!(
                    "`{whole}`: the abstract name after @ is empty"
                )));
            }
            Self::Abstract(a.as_bytes().to_vec())
        } else if rest.starts_with('/') {
            Self::Path(PathBuf::from(rest))
        } else {
            // A relative name would depend on the working directory of
            // whoever runs the command (and of a server started elsewhere).
            return Err(error::usage(format!(
                "`{whole}` is a relative path: a Unix socket is named by an absolute path \
                 (unix:/run/app.sock) or an abstract name (unix:@app)"
            )));
        };
        let len = name.bytes().len();
        if len > MAX_UNIX_NAME {
            return Err(error::usage(format!(
                "`{whole}`: the name is {len} bytes long; a Unix socket name holds at most \
                 {MAX_UNIX_NAME} (sun_path)"
            )));
        }
        Ok(name)
    }

    /// The name's bytes (without `@` for an abstract name).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Path(p) => p.as_os_str().as_bytes(),
            Self::Abstract(a) => a,
        }
    }

    /// The socket file, for a path name.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Path(p) => Some(p),
            Self::Abstract(_) => None,
        }
    }

    /// The kernel's address of this name.
    pub fn sock_addr(&self) -> io::Result<SockAddr> {
        match self {
            Self::Path(p) => SockAddr::unix(p),
            Self::Abstract(a) => {
                // socket2 reads a leading NUL as the abstract namespace and
                // then counts the name's exact length (no trailing NUL).
                let mut b = Vec::with_capacity(a.len() + 1);
                b.push(0);
                b.extend_from_slice(a);
                SockAddr::unix(std::ffi::OsStr::from_bytes(&b))
            }
        }
    }
}

impl fmt::Display for UnixName {
    /// `/path` or `@name` (an abstract name's bytes read lossily).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path(p) => write!(f, "{}", p.display()),
            Self::Abstract(a) => write!(f, "@{}", String::from_utf8_lossy(a)),
        }
    }
}

/// An address a socket connects to or listens on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// TCP or UDP over IP.
    Inet(SocketAddr),
    /// A Unix-domain socket (stream or datagram by the workload).
    Unix(UnixName),
}

impl Endpoint {
    /// True when `text` is written as a Unix socket: `unix:...` or an
    /// absolute path.
    pub fn is_unix_text(text: &str) -> bool {
        text.starts_with(UNIX_PREFIX) || text.starts_with('/')
    }

    /// Parses a target: `unix:/path`, `unix:@name`, a bare absolute path,
    /// or `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT` (resolved). Bad text is a
    /// usage error saying why.
    pub fn parse(text: &str) -> Result<Self> {
        match Self::parse_unix(text)? {
            Some(name) => Ok(Self::Unix(name)),
            None => values::resolve(text).map(Self::Inet),
        }
    }

    /// Parses a listening address: `unix:/path`, `unix:@name`, a bare
    /// absolute path, or `IP:PORT` / `[IPv6]:PORT` (no host names: a
    /// server binds what it is told).
    pub fn parse_listen(text: &str) -> Result<Self> {
        if let Some(name) = Self::parse_unix(text)? {
            return Ok(Self::Unix(name));
        }
        text.parse::<SocketAddr>().map(Self::Inet).map_err(|_| {
            error::usage(format!(
                "`{text}` is not a listening address (IP:PORT, [IPv6]:PORT, unix:/path or \
                 unix:@name)"
            ))
        })
    }

    /// The Unix name `text` writes, None when it is not written as one.
    fn parse_unix(text: &str) -> Result<Option<UnixName>> {
        if let Some(rest) = text.strip_prefix(UNIX_PREFIX) {
            return UnixName::parse(rest, text).map(Some);
        }
        if text.starts_with('/') {
            return UnixName::parse(text, text).map(Some);
        }
        Ok(None)
    }

    /// The socket domain to create.
    pub fn domain(&self) -> Domain {
        match self {
            Self::Inet(a) => Domain::for_address(*a),
            Self::Unix(_) => Domain::UNIX,
        }
    }

    /// Where a client's connect goes: the kernel's address, and for a
    /// socket file the descriptor it names, resolved as output paths are
    /// ([`socket_file`]: no symbolic link another user owns is followed).
    /// Hold it until the connect returned.
    pub fn connect_addr(&self) -> io::Result<ConnectAddr> {
        match self {
            Self::Inet(a) => Ok(ConnectAddr {
                addr: SockAddr::from(*a),
                pinned: None,
            }),
            Self::Unix(UnixName::Path(p)) => {
                let pinned = socket_file::pin(p)?;
                Ok(ConnectAddr {
                    addr: pinned.sock_addr()?,
                    pinned: Some(pinned),
                })
            }
            Self::Unix(n) => Ok(ConnectAddr {
                addr: n.sock_addr()?,
                pinned: None,
            }),
        }
    }

    /// The IP address, None for a Unix socket.
    pub fn inet(&self) -> Option<SocketAddr> {
        match self {
            Self::Inet(a) => Some(*a),
            Self::Unix(_) => None,
        }
    }

    /// The Unix name, None for an IP address.
    pub fn unix(&self) -> Option<&UnixName> {
        match self {
            Self::Inet(_) => None,
            Self::Unix(n) => Some(n),
        }
    }

    /// True for a Unix-domain socket.
    pub fn is_unix(&self) -> bool {
        matches!(self, Self::Unix(_))
    }

    /// Checks, before a client starts, that a socket file is one: a path
    /// that exists and is something else (a regular file, a directory)
    /// is a usage error, and so is a path through a symbolic link another
    /// user owns (resolved as output paths are: sockscope runs as root
    /// and would connect wherever that link points). A missing file is
    /// left to the connects, which fail like a refused TCP connect (the
    /// server may not be up yet).
    pub fn check_connectable(&self) -> Result<()> {
        use std::os::unix::fs::FileTypeExt;
        let Some(path) = self.unix().and_then(UnixName::path) else {
            return Ok(());
        };
        match std::fs::metadata(path) {
            Ok(m) if !m.file_type().is_socket() => Err(error::usage(format!(
                "`{self}` is not a socket ({}): give the path a server listens on",
                describe_type(&m.file_type())
            ))),
            Ok(_) => crate::output::locate(path)
                .map(drop)
                .map_err(|e| error::usage(format!("`{self}`: {e:#}"))),
            Err(_) => Ok(()),
        }
    }
}

/// A connect's destination ([`Endpoint::connect_addr`]).
pub struct ConnectAddr {
    /// The kernel's address.
    pub addr: SockAddr,
    pinned: Option<socket_file::Pinned>,
}

impl ConnectAddr {
    /// After a connect refused (ECONNREFUSED): a socket file is resolved
    /// anew by the next connect, as a restarted server binds a new one.
    pub fn refused(&self) {
        if let Some(p) = &self.pinned {
            p.forget();
        }
    }
}

/// A file type for a message: `a regular file`, `a directory`...
pub fn describe_type(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "a block device"
    }
}

impl fmt::Display for Endpoint {
    /// `IP:PORT` (`[IPv6]:PORT`), `unix:/path` or `unix:@name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Inet(a) => write!(f, "{a}"),
            Self::Unix(n) => write!(f, "{UNIX_PREFIX}{n}"),
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(a: SocketAddr) -> Self {
        Self::Inet(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: &anyhow::Error) -> u8 {
        e.downcast_ref::<error::Exit>().map_or(1, |x| x.code)
    }

    fn usage(text: &str) -> String {
        let e = Endpoint::parse(text).unwrap_err();
        assert_eq!(code(&e), 2, "{text}: {e:#}");
        format!("{e:#}")
    }

    #[test]
    fn unix_names_parse_and_print_as_written() {
        for (text, shown) in [
            ("unix:/run/redis.sock", "unix:/run/redis.sock"),
            ("/run/redis.sock", "unix:/run/redis.sock"),
            ("unix:@sockscope-x", "unix:@sockscope-x"),
            ("127.0.0.1:6379", "127.0.0.1:6379"),
            ("[::1]:80", "[::1]:80"),
        ] {
            let e = Endpoint::parse(text).unwrap();
            assert_eq!(e.to_string(), shown);
            assert_eq!(e.is_unix(), text != "127.0.0.1:6379" && text != "[::1]:80");
        }
        let a = Endpoint::parse("unix:@ab").unwrap().connect_addr().unwrap();
        assert_eq!(a.addr.as_abstract_namespace(), Some(&b"ab"[..]));
        let p = Endpoint::parse("unix:/x/y").unwrap();
        let p = p.unix().unwrap().sock_addr().unwrap();
        assert_eq!(p.as_pathname(), Some(Path::new("/x/y")));
    }

    #[test]
    fn bad_unix_names_are_usage_errors_that_say_why() {
        assert!(usage("unix:").contains("names no socket"));
        assert!(usage("unix:@").contains("empty"));
        assert!(usage("unix:run/x.sock").contains("relative path"));
        let long = format!("unix:/{}", "a".repeat(107));
        assert!(usage(&long).contains("108 bytes long"));
        let fits = format!("unix:/{}", "a".repeat(106));
        assert!(Endpoint::parse(&fits).is_ok());
        assert!(usage(&format!("unix:@{}", "b".repeat(108))).contains("at most 107"));
        assert!(
            Endpoint::parse_listen("localhost:80")
                .unwrap_err()
                .to_string()
                .contains("not a listening address")
        );
    }

    #[test]
    fn a_path_that_is_not_a_socket_is_refused() {
        let e = Endpoint::parse("unix:/").unwrap();
        let err = e.check_connectable().unwrap_err();
        assert_eq!(code(&err), 2);
        assert!(
            err.to_string().contains("not a socket (a directory)"),
            "{err}"
        );
        let missing = Endpoint::parse("unix:/nonexistent/sockscope.sock").unwrap();
        assert!(missing.check_connectable().is_ok());
    }
}
