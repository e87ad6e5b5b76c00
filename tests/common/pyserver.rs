//! A python3 test server started from a `-c` script that prints its port
//! first (tests/http2.rs: an h2 server, a gRPC server; tests/anatomy.rs: a
//! slow reader; tests/http.rs: a server logging each request). Debian's
//! python3-h2 and python3-grpcio are test dependencies (Makefile
//! TEST_PKGS): a missing module skips the test with a printed reason
//! outside CI and fails it under CI=true (a script that needs nothing but
//! the standard library names a module of it, `socket`). Killed on drop.
//! The interpreter is Debian's own, /usr/bin/python3 (the one those
//! packages serve), not whichever python3 comes first in PATH.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use super::Reaped;

/// Debian's python3.
const PYTHON: &str = "/usr/bin/python3";

/// A running python3 server.
pub struct PyServer {
    pub child: Reaped,
    pub port: u16,
}

impl PyServer {
    /// Runs `python3 -c script args...` once `module` imports; None (after
    /// a printed reason) when it does not, outside CI.
    pub fn start(test: &str, module: &str, script: &str, args: &[&str]) -> Option<Self> {
        let found = Command::new(PYTHON)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: python3 module {module} missing under CI (make deps installs it)");
            }
            eprintln!("SKIP {test}: no python3 module {module}");
            return None;
        }
        let mut child = Command::new(PYTHON)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{test}: python3 said {line:?}"));
        Some(Self {
            child: Reaped(child),
            port,
        })
    }
}
