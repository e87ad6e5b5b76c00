//! A `sockscope serve ...` process under test: started, its ready line
//! parsed, stopped with SIGTERM, killed on drop.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `sockscope serve ...`: its pid, the address it printed, and
/// its stderr collected in the background. Killed on drop if still alive.
pub struct Server {
    child: Option<Child>,
    /// What the server printed on stdout after the ready line (must be
    /// nothing: everything else goes to stderr).
    stdout_rest: Option<thread::JoinHandle<String>>,
    /// The address it printed on its ready line (0.0.0.0:0 for a Unix
    /// socket: see `listen`).
    pub addr: SocketAddr,
    /// The ready line's address as printed (`unix:/path` for a Unix
    /// socket).
    pub listen: String,
    /// Its pid.
    pub pid: i32,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Self {
        Self::spawn(args, None)
    }

    /// Starts with RLIMIT_NOFILE set to `nofile` in the child.
    pub fn spawn(args: &[&str], nofile: Option<u64>) -> Self {
        let mut cmd = Command::new(super::sockscope());
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(n) = nofile {
            // SAFETY: setrlimit is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
            };
        }
        let mut child = cmd.spawn().expect("starting sockscope");
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let mut err = child.stderr.take().unwrap();
            let sink = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout_rest = thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
            let mut rest = String::new();
            let _ = r.read_to_string(&mut rest);
            rest
        });
        let pid = child.id() as i32;
        let line = rx.recv_timeout(IO_TIMEOUT).unwrap_or_default();
        let mut s = Self {
            child: Some(child),
            stdout_rest: Some(stdout_rest),
            addr: "0.0.0.0:0".parse().unwrap(),
            listen: String::new(),
            pid,
            stderr,
        };
        let Some(addr) = line.strip_prefix("listening on ") else {
            let st = s.kill();
            panic!(
                "no ready line (got {line:?}, {st:?}); stderr: {}",
                s.stderr()
            );
        };
        s.listen = addr.trim().to_string();
        if !s.listen.starts_with("unix:") {
            s.addr = s.listen.parse().expect("listening address");
        }
        s
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn kill(&mut self) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        let _ = c.kill();
        c.wait().ok()
    }

    /// SIGTERM, then a bounded wait; returns the status and stderr.
    pub fn stop(mut self) -> (ExitStatus, String) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        self.wait(Duration::from_secs(10))
    }

    /// Waits (bounded) for the server to exit on its own.
    pub fn wait(&mut self, limit: Duration) -> (ExitStatus, String) {
        let mut c = self.child.take().unwrap();
        let st = super::wait_bounded(&mut c, limit);
        // The process is gone, so its stdout is at EOF.
        let rest = self.stdout_rest.take().unwrap().join().unwrap();
        assert!(rest.is_empty(), "stdout after the ready line: {rest:?}");
        // Let the stderr reader catch the last lines.
        thread::sleep(Duration::from_millis(50));
        (st, self.stderr())
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Stops `srv` with SIGTERM, asserts exit 0, returns the JSON it wrote.
pub fn stop_ok(srv: Server, json: &Path) -> Value {
    let (st, err) = srv.stop();
    assert!(st.success(), "server exited {st}: {err}");
    super::read_json(json)
}
