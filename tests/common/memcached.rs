//! A real memcached as a test peer: on a free loopback port, TCP only
//! (`-U 0`), killed on drop; its own counters read through `stats` (the
//! cross-check of every memcached test). The one place the tests start a
//! memcached over TCP.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Reaped, ports, require_program};

/// A memcached on a free loopback port (TCP only), killed on drop.
pub struct Memcached {
    child: Reaped,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
}

impl Memcached {
    /// Started, or None (the test skips) when it is not installed; under
    /// CI=true a missing memcached fails the test.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// As [`Memcached::start`], with `extra` options (`-t 1`).
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        if !require_program("memcached", "a test with memcached") {
            return None;
        }
        Some(ports::on_free_port("memcached", |port| {
            // -u applies only when run as root (memcached refuses root
            // otherwise); -U 0: no UDP.
            let mut child = Reaped(
                Command::new("memcached")
                    .args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"])
                    .args(["-u", "nobody"])
                    .args(extra)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| panic!("starting memcached: {e}")),
            );
            // An exit before listening: the port was taken meanwhile.
            ports::await_tcp(&mut child, port)
                .ok()
                .map(|()| Self { child, port })
        }))
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends `request` on a new connection and reads until `done` says
    /// the answer is whole.
    pub fn ask(&self, request: &[u8], done: impl Fn(&[u8]) -> bool) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !done(&got) {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "server closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// memcached's `stats` as `name -> value` (the numeric ones).
    pub fn memcached_stats(&self) -> BTreeMap<String, u64> {
        self.ask(b"stats\r\n", |b| b.ends_with(b"END\r\n"))
            .lines()
            .filter_map(|l| {
                let mut w = l.split(' ').skip(1);
                Some((w.next()?.to_string(), w.next()?.parse().ok()?))
            })
            .collect()
    }
}
