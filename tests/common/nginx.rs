//! A real nginx as a test peer (tests/http.rs, tests/anatomy.rs).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::scratch;

/// A stock nginx (default keepalive_requests, 1000) serving a scratch
/// directory on a free loopback port, its pid, logs and temporary files in
/// that directory, each request logged to DIR/access.log; stopped with its
/// whole process group on drop.
pub struct Nginx {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    pub tls: bool,
    /// Listening on this Unix socket (DIR/nginx.sock) instead of a port.
    pub unix: Option<PathBuf>,
}

/// A self-signed certificate for localhost and 127.0.0.1 and its key,
/// made by openssl at DIR/cert.pem and DIR/key.pem.
pub fn self_signed_cert(dir: &std::path::Path) {
    let st = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // webpki refuses a CA certificate as the server's own.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running openssl (apt-get install openssl)");
    assert!(st.success(), "openssl req failed");
}

fn nginx_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

impl Nginx {
    /// Plain http, nginx's defaults. None (after a printed reason) when
    /// nginx is not installed outside CI; a failure under CI=true.
    pub fn start(test: &str) -> Option<Self> {
        Self::start_with(test, false, "")
    }

    /// nginx speaking https with a self-signed certificate for localhost
    /// and 127.0.0.1 (made by openssl, at DIR/cert.pem) when `tls`;
    /// `http_conf` goes into its `http` block (e.g. "keepalive_requests 10;").
    pub fn start_with(test: &str, tls: bool, http_conf: &str) -> Option<Self> {
        Self::launch(test, tls, false, http_conf, false, "")
    }

    /// Plain http with `server_conf` in its `server` block (locations, e.g.
    /// `location /a/ { return 200 "ok\n"; }`).
    pub fn start_server_conf(test: &str, server_conf: &str) -> Option<Self> {
        Self::launch(test, false, false, "", false, server_conf)
    }

    /// Plain http on the Unix socket DIR/nginx.sock (`unix` is set).
    pub fn start_unix(test: &str) -> Option<Self> {
        Self::launch(test, false, false, "", true, "")
    }

    /// nginx with HTTP/2 on its listener (`listen ... http2`: h2c with
    /// prior knowledge in plain text, ALPN h2 with `tls`); its access log
    /// lines are `$server_protocol $connection $connection_requests
    /// $request_method $uri $status`.
    pub fn start_h2(test: &str, tls: bool, http_conf: &str) -> Option<Self> {
        Self::launch(test, tls, true, http_conf, false, "")
    }

    /// HTTP/2 (h2c) with `server_conf` in its `server` block, logging as
    /// [`Nginx::start_h2`] does.
    pub fn start_h2_server_conf(test: &str, server_conf: &str) -> Option<Self> {
        Self::launch(test, false, true, "", false, server_conf)
    }

    /// https (self-signed, as [`Nginx::start_with`]) with `server_conf` in
    /// its `server` block; with `http2`, ALPN h2 on it and the log as
    /// [`Nginx::start_h2`] has it (else nginx's combined format).
    pub fn start_tls_server_conf(test: &str, http2: bool, server_conf: &str) -> Option<Self> {
        Self::launch(test, true, http2, "", false, server_conf)
    }

    /// HTTP/2 (h2c) on the Unix socket DIR/nginx.sock, logging as
    /// [`Nginx::start_h2`] does.
    pub fn start_h2_unix(test: &str) -> Option<Self> {
        Self::launch(test, false, true, "", true, "")
    }

    fn launch(
        test: &str,
        tls: bool,
        http2: bool,
        http_conf: &str,
        unix: bool,
        server_conf: &str,
    ) -> Option<Self> {
        let Some(bin) = nginx_binary() else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: CI=true but nginx is not installed (apt-get install nginx-light)");
            }
            eprintln!("SKIP {test}: nginx not installed");
            return None;
        };
        let dir = scratch(test);
        std::fs::create_dir_all(dir.join("www")).unwrap();
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        std::fs::write(
            dir.join("www/index.html"),
            "<html><body>hello</body></html>\n",
        )
        .unwrap();
        let (h2, log_format) = if http2 {
            (
                " http2",
                "log_format h2 '$server_protocol $connection $connection_requests \
                 $request_method $uri $status';\n  ",
            )
        } else {
            ("", "")
        };
        let log_as = if http2 { " h2" } else { "" };
        let ssl = if tls {
            self_signed_cert(&dir);
            format!(
                " ssl;\n    ssl_certificate {d}/cert.pem;\n    ssl_certificate_key {d}/key.pem",
                d = dir.display()
            )
        } else {
            String::new()
        };
        // A port taken between probing and nginx's bind: try another.
        for _ in 0..5 {
            let port = super::ports::free_tcp();
            let d = dir.display();
            // SAFETY: geteuid has no preconditions.
            let user = if unsafe { libc::geteuid() } == 0 {
                "user root;"
            } else {
                ""
            };
            let sock = dir.join("nginx.sock");
            let listen = if unix {
                format!("unix:{}", sock.display())
            } else {
                format!("127.0.0.1:{port}")
            };
            let conf = format!(
                "{user}\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
                 events {{ worker_connections 1024; }}\n\
                 http {{\n  {log_format}access_log {d}/access.log{log_as};\n  {http_conf}\n\
                   client_body_temp_path {d}/tmp/body;\n  proxy_temp_path {d}/tmp/proxy;\n\
                   fastcgi_temp_path {d}/tmp/fastcgi;\n  uwsgi_temp_path {d}/tmp/uwsgi;\n\
                   scgi_temp_path {d}/tmp/scgi;\n\
                   server {{\n    listen {listen}{h2}{ssl};\n    root {d}/www;\n    {server_conf}\n  }}\n}}\n"
            );
            std::fs::write(dir.join("nginx.conf"), conf).unwrap();
            let mut cmd = Command::new(&bin);
            cmd.arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            let child = cmd.spawn().expect("starting nginx");
            let mut n = Self {
                child,
                port,
                dir: dir.clone(),
                tls,
                unix: unix.then(|| sock.clone()),
            };
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(st) = n.child.try_wait().unwrap() {
                    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                    if log.contains("Address already in use") {
                        break;
                    }
                    panic!("nginx exited ({st}): {log}");
                }
                let up = if unix {
                    std::os::unix::net::UnixStream::connect(&sock).is_ok()
                } else {
                    TcpStream::connect(("127.0.0.1", port)).is_ok()
                };
                if up {
                    return Some(n);
                }
                assert!(Instant::now() < end, "nginx did not listen on {listen}");
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("nginx found no free port");
    }

    /// The load http target of `path`: a URL, or on a Unix socket
    /// `unix:SOCKET:PATH`.
    pub fn url(&self, path: &str) -> String {
        if let Some(sock) = &self.unix {
            return format!("unix:{}:{path}", sock.display());
        }
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// Lines in the access log: nginx's own count of the requests it
    /// answered. It writes a line after the response went out, so this
    /// waits (bounded) until the count reaches `expect` and then a little
    /// more for any line beyond it.
    pub fn logged(&self, expect: u64) -> u64 {
        let end = Instant::now() + Duration::from_secs(5);
        while self.lines() < expect && Instant::now() < end {
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(100));
        self.lines()
    }

    /// The access log's lines now.
    pub fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// Lines in the access log now.
    pub fn lines(&self) -> u64 {
        std::fs::read(self.dir.join("access.log"))
            .map(|b| b.iter().filter(|c| **c == b'\n').count() as u64)
            .unwrap_or(0)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let pg = -(self.child.id() as i32);
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(pg, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(5);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            thread::sleep(Duration::from_millis(10));
        }
        // Whatever is left of the group (a worker), and the master if it
        // did not stop.
        // SAFETY: as above.
        unsafe { libc::kill(pg, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
