//! A real Prometheus server (Debian's `prometheus`) for tests: its own
//! config and storage in a scratch directory, on a loopback port it picks
//! itself (port 0), scraping given targets every second; killed in Drop.
//! And the HTTP GET the exporter tests scrape with.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Reaped, ports};

/// One HTTP/1.0 GET on loopback: (status, headers, body). None when the
/// connection fails.
pub fn http_get(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> Option<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, head, buf[split + 4..].to_vec()))
}

/// A running Prometheus.
pub struct Prometheus {
    child: Reaped,
    /// Its web address.
    pub addr: SocketAddr,
}

impl Prometheus {
    /// Starts one scraping `target` every second; `native` enables native
    /// histograms (Prometheus then asks for the protobuf format).
    pub fn start(dir: &Path, target: SocketAddr, native: bool) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n\
                 scrape_configs:\n  - job_name: sockscope\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap());
        if native {
            cmd.arg("--enable-feature=native-histograms");
        }
        let mut child = Reaped(cmd.spawn().expect("starting prometheus"));
        let addr = ports::listening(&mut child, Duration::from_secs(30));
        let p = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if http_get(addr, "/-/ready", None).is_some_and(|(s, _, _)| s == 200) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "prometheus did not get ready in 30 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
    }

    /// An instant query through the HTTP API: the `data.result` array.
    pub fn query(&self, expr: &str) -> serde_json::Value {
        let q: String = url::form_urlencoded::byte_serialize(expr.as_bytes()).collect();
        let (status, _, body) = http_get(self.addr, &format!("/api/v1/query?query={q}"), None)
            .expect("querying prometheus");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(status, 200, "query {expr}: {v}");
        v["data"]["result"].clone()
    }

    /// The single value an instant query returns, if it returns one.
    pub fn scalar(&self, expr: &str) -> Option<f64> {
        let r = self.query(expr);
        let arr = r.as_array()?;
        if arr.len() != 1 {
            return None;
        }
        arr[0]["value"][1].as_str()?.parse().ok()
    }
}
