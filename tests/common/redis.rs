//! A real redis-server as a test peer: on a free loopback port or only on
//! a Unix socket, with no persistence, killed on drop; its own counters
//! read through INFO (the cross-check of every redis test). The one place
//! the tests start redis-server; a profile that launches it takes its
//! command line from [`tcp_command`] or [`unix_command`].

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Reaped, ports, require_program};

/// The server's program.
pub const PROGRAM: &str = "redis-server";

/// True when redis-server is installed; a missing one skips `test` with a
/// printed reason outside CI and fails it under CI=true.
pub fn available(test: &str) -> bool {
    require_program(PROGRAM, test)
}

/// No snapshots, no append-only file, in the foreground.
const EPHEMERAL: [&str; 6] = ["--save", "", "--appendonly", "no", "--daemonize", "no"];

/// redis-server on 127.0.0.1:`port`, program first (for `profile -- ...`).
pub fn tcp_command(port: u16) -> Vec<String> {
    let port = port.to_string();
    [PROGRAM, "--port", &port, "--bind", "127.0.0.1"]
        .into_iter()
        .chain(EPHEMERAL)
        .map(String::from)
        .collect()
}

/// redis-server on the Unix socket `sock` only (no TCP port), its working
/// directory `dir`, program first.
pub fn unix_command(sock: &Path, dir: &Path) -> Vec<String> {
    let (sock, dir) = (sock.to_str().unwrap(), dir.to_str().unwrap());
    [PROGRAM, "--port", "0", "--unixsocket", sock]
        .into_iter()
        .chain(["--unixsocketperm", "700", "--dir", dir])
        .chain(EPHEMERAL)
        .map(String::from)
        .collect()
}

/// Where a [`Redis`] listens.
enum Listen {
    Tcp(u16),
    Unix(PathBuf),
}

/// A running redis-server, killed (and reaped) on drop.
pub struct Redis {
    pub child: Reaped,
    listen: Listen,
    /// The default user's password (`--requirepass`), which the INFO of
    /// the cross-checks sends first.
    password: Option<String>,
    /// The AUTHs those INFOs sent, which redis counts too.
    own_auths: std::cell::Cell<u64>,
}

impl Redis {
    /// One on a free loopback port (another is tried when the port was
    /// taken before it bound); None when redis-server is missing outside CI.
    pub fn start(test: &str) -> Option<Self> {
        Self::start_with(test, &[], None)
    }

    /// One on a free loopback port with `extra` configuration words
    /// (`--user NAME on >PASS ...`), the default user's password
    /// `password` (`--requirepass`); None when redis-server is missing
    /// outside CI.
    pub fn start_with(test: &str, extra: &[&str], password: Option<&str>) -> Option<Self> {
        if !available(test) {
            return None;
        }
        Some(ports::on_free_port("redis-server", |port| {
            let log = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("redis-{}-{port}.log", std::process::id()));
            let mut args = tcp_command(port);
            args.extend(["--logfile".to_string(), log.to_str().unwrap().to_string()]);
            if let Some(p) = password {
                args.extend(["--requirepass".to_string(), p.to_string()]);
            }
            args.extend(extra.iter().map(|w| w.to_string()));
            let mut child = Reaped(spawn(&args));
            match ports::await_tcp(&mut child, port) {
                Ok(()) => Some(Self {
                    child,
                    listen: Listen::Tcp(port),
                    password: password.map(String::from),
                    own_auths: Default::default(),
                }),
                Err(st) => {
                    let said = std::fs::read_to_string(&log).unwrap_or_default();
                    assert!(
                        said.contains("in use"),
                        "redis-server exited ({st}): {said}"
                    );
                    None
                }
            }
        }))
    }

    /// One listening only on DIR/redis.sock (mode 700), DIR its working
    /// directory; None when redis-server is missing outside CI.
    pub fn start_unix(test: &str, dir: &Path) -> Option<Self> {
        if !available(test) {
            return None;
        }
        let sock = dir.join("redis.sock");
        let mut child = Reaped(spawn(&unix_command(&sock, dir)));
        let found = super::procs::wait_for(Duration::from_secs(10), || {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("redis-server exited ({st}) before listening on {sock:?}");
            }
            UnixStream::connect(&sock).ok()
        });
        assert!(found.is_some(), "redis-server did not listen on {sock:?}");
        Some(Self {
            child,
            listen: Listen::Unix(sock),
            password: None,
            own_auths: Default::default(),
        })
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Its TCP port (a Unix-socket server has none: a test error).
    pub fn port(&self) -> u16 {
        match self.listen {
            Listen::Tcp(p) => p,
            Listen::Unix(_) => panic!("this redis-server listens on a Unix socket"),
        }
    }

    /// Its Unix socket (a TCP server has none: a test error).
    pub fn sock(&self) -> &Path {
        match &self.listen {
            Listen::Unix(s) => s,
            Listen::Tcp(_) => panic!("this redis-server listens on a TCP port"),
        }
    }

    /// The address a load takes: `127.0.0.1:PORT` or `unix:/path`.
    pub fn addr(&self) -> String {
        match &self.listen {
            Listen::Tcp(p) => format!("127.0.0.1:{p}"),
            Listen::Unix(s) => format!("unix:{}", s.display()),
        }
    }

    /// `INFO section` as `name -> value` (commandstats rows keep their
    /// `calls=...,usec=...` text). The INFO itself is counted by redis.
    pub fn info(&self, section: &str) -> BTreeMap<String, String> {
        let mut req = String::new();
        if let Some(p) = &self.password {
            self.own_auths.set(self.own_auths.get() + 1);
            req += &format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len());
        }
        req += &format!("*2\r\n$4\r\nINFO\r\n${}\r\n{section}\r\n", section.len());
        let limit = Some(Duration::from_secs(5));
        let text = match &self.listen {
            Listen::Tcp(p) => {
                let s = std::net::TcpStream::connect(("127.0.0.1", *p)).unwrap();
                s.set_read_timeout(limit).unwrap();
                ask(s, &req)
            }
            Listen::Unix(p) => {
                let s = UnixStream::connect(p).unwrap();
                s.set_read_timeout(limit).unwrap();
                ask(s, &req)
            }
        };
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    }

    /// commandstats `calls` of `cmd` (lower case); 0 if never called. The
    /// AUTHs these checks sent are not counted.
    pub fn calls(&self, cmd: &str) -> u64 {
        let n = self
            .info("commandstats")
            .get(&format!("cmdstat_{cmd}"))
            .map_or(0, |row| field(row, "calls"));
        if cmd == "auth" {
            n - self.own_auths.get()
        } else {
            n
        }
    }

    /// commandstats `calls` of every command but INFO (the cross-check's
    /// own).
    pub fn calls_but_info(&self) -> u64 {
        self.info("commandstats")
            .iter()
            .filter(|(k, _)| k.starts_with("cmdstat_") && *k != "cmdstat_info")
            .map(|(_, row)| field(row, "calls"))
            .sum()
    }

    /// INFO stats' total_commands_processed (the INFO that asks counted).
    pub fn commands(&self) -> u64 {
        self.info("stats")["total_commands_processed"]
            .parse()
            .unwrap()
    }
}

/// `name=N` in a commandstats or errorstats row (0 when absent).
pub fn field(row: &str, name: &str) -> u64 {
    row.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .map_or(0, |v| v.parse().unwrap())
}

fn spawn(args: &[String]) -> std::process::Child {
    Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting redis-server")
}

/// Sends `req` and reads the bulk string that answers it (`$N`, CR LF, N
/// bytes, CR LF; at most 1 MiB), after the `+OK` of an AUTH before it.
/// `s` has a read timeout.
fn ask<S: Read + Write>(mut s: S, req: &str) -> String {
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut ok_pending = req.starts_with("*2\r\n$4\r\nAUTH\r\n");
    let mut buf = [0u8; 65536];
    loop {
        if ok_pending && got.starts_with(b"+OK\r\n") {
            got.drain(..5);
            ok_pending = false;
        }
        if ok_pending && b"+OK\r\n".starts_with(&got) {
            // Still reading AUTH's answer.
        } else if let Some(eol) = got.windows(2).position(|w| w == b"\r\n") {
            let len: usize = std::str::from_utf8(&got[1..eol])
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("redis answered {:?}", String::from_utf8_lossy(&got)));
            if got.len() >= eol + 2 + len + 2 {
                return String::from_utf8_lossy(&got[eol + 2..eol + 2 + len]).into_owned();
            }
        }
        assert!(got.len() < 1 << 20, "an INFO answer over 1 MiB");
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "redis closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}
