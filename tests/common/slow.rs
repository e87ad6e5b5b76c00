//! tests/workload/slow_server.c with every request slow_hash's 2 ms of
//! CPU: the server once it said "ready", and one closed-loop connection
//! against it (the stack tests' known hot function).

use std::path::Path;
use std::process::{Command, Stdio};

use super::Reaped;

/// `bin serve PORT cpu SECS`, once ready, and `bin load PORT 1 LOAD_SECS
/// 1` against it; returns both and the port.
pub fn cpu_under_load(bin: &Path, secs: u32, load_secs: u32) -> (Reaped, Reaped, u16) {
    let port = super::ports::free_tcp();
    let mut srv = Reaped(
        Command::new(bin)
            .args(["serve", &port.to_string(), "cpu", &secs.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(srv.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    let load = Reaped(
        Command::new(bin)
            .args(["load", &port.to_string(), "1", &load_secs.to_string(), "1"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (srv, load, port)
}
