//! `load http`: HTTP/1.1 over the TCP driver. Keep-alive connections
//! (`--pipeline K` requests in flight on each, closed or open loop), or one
//! connection per request (`--new-connection`, the HTTP analogue of
//! tcp-crr). This module is the workload: its exchange and how the command
//! line builds it; `request` builds what is sent, `parse` frames what comes
//! back, `status` reads `--ok-status`.
//!
//! Each response is counted by status code and by `METHOD URL`
//! (`responses` in the report); one whose status is not in `--ok-status` is
//! an error of class `status_<code>` and the connection goes on. A server
//! that closes after a response (`Connection: close`, nginx's
//! keepalive_requests, HTTP/1.0, a body delimited by the close) is not an
//! error: the driver reopens the connection, counts it in
//! `responses.reconnects` and sends again what was pipelined behind it.
//! A response that is not HTTP is `protocol_error` (the connection is
//! dropped and reopened after a backoff), one cut short by a close is
//! `short_read`; a stalled one is `ETIMEDOUT` after `--timeout`.

pub mod over_h2;
pub mod parse;
pub mod request;
pub mod status;

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use self::parse::{Cursor, Step};
use self::request::{Extras, Target};
use self::status::OkStatus;
use super::Load;
use super::spec::{ConnModel, Options, Registered, TargetForm, TcpArgs};
use super::tls::TlsSpec;
use super::workload::{ConnMode, ErrorClass, Exchange, Outcome, Parsed, TcpWorkload};
use crate::error;
use crate::report::load::LoadConfig;

/// The registration of `load http`.
pub static WORKLOAD: Registered<HttpArgs> = Registered::new(
    "http",
    "HTTP/1.1 requests over keep-alive connections (or one connection per request with \
     --new-connection)",
    TargetForm::Url,
);

/// `load http` options.
#[derive(Clone, Debug, Args)]
pub struct HttpArgs {
    /// The URL to request: http://HOST[:PORT]/PATH[?QUERY] (https:// speaks
    /// TLS).
    #[arg(
        value_name = "URL",
        required_unless_present = "urls",
        conflicts_with = "urls"
    )]
    pub url: Option<String>,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// Request method (the default for --urls lines that name none).
    #[arg(long, value_name = "METHOD", default_value = "GET")]
    pub method: String,
    /// Add this request header ('Name: value'; repeatable). A Host header
    /// replaces the automatic one.
    #[arg(short = 'H', long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// Request body: @FILE reads it from FILE, anything else is the body
    /// itself (sent with a Content-Length).
    #[arg(long, value_name = "@FILE|STRING")]
    pub body: Option<String>,
    /// Request the URLs of FILE in turn, one a line: [WEIGHT] [METHOD] URL
    /// (all with the same scheme, host and port).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Status codes that count as success; any other is an error of class
    /// status_<code>: codes, ranges and classes, e.g. 2xx, 200-399,
    /// 200,404.
    #[arg(long, value_name = "CODES", default_value = "2xx")]
    pub ok_status: String,
    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// One request per connection (connect, request, response, close: the
    /// HTTP analogue of tcp-crr); the request says Connection: close.
    #[arg(long, conflicts_with = "pipeline")]
    pub new_connection: bool,
    /// HTTP/2: prior knowledge (h2c) for http:// URLs, TLS with ALPN h2
    /// for https://; several streams per connection (--streams).
    #[arg(long, conflicts_with_all = ["pipeline", "new_connection", "urls"])]
    pub http2: bool,
    /// --http2: concurrent streams (requests in flight) per connection.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "http2", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub streams: u32,
    /// --http2: each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE),
    /// bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, requires = "http2", value_parser = clap::value_parser!(u32).range(1..=0x7fff_ffff))]
    pub window: u32,
    /// --http2: the connection's receive window, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, requires = "http2", value_parser = clap::value_parser!(u32).range(65_535..=0x7fff_ffff))]
    pub conn_window: u32,
    /// https: accept any server certificate (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// https: also trust the certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

impl Options for HttpArgs {
    fn take_target(&mut self) -> Option<String> {
        self.url.take()
    }

    fn set_target(&mut self, target: String) {
        self.url = Some(target);
    }

    fn conn(&self) -> ConnModel {
        if self.new_connection {
            ConnModel::PerTransaction
        } else {
            ConnModel::Persistent
        }
    }

    fn driver(&self) -> Option<&TcpArgs> {
        Some(&self.tcp)
    }

    /// The host and port of the URL (of the first line of --urls).
    fn endpoint(&self, target: Option<&str>) -> Result<String> {
        let url = match (target, &self.urls) {
            (Some(u), _) => u.to_string(),
            (None, Some(file)) => request::read_urls(file, &self.method)?
                .first()
                .map(|t| t.url.to_string())
                .ok_or_else(|| error::usage(format!("--urls {}: no URL", file.display())))?,
            (None, None) => unreachable!("clap requires a URL or --urls"),
        };
        let u = request::parse_url(&url)?;
        let host = u.host_str().unwrap_or_default();
        Ok(format!(
            "{host}:{}",
            u.port_or_known_default().unwrap_or(80)
        ))
    }

    fn check(&self) -> Result<()> {
        if self.http2 {
            return over_h2::workload(self).map(drop);
        }
        workload(self).map(drop)
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        if self.http2 {
            return Ok(Load::tcp(over_h2::workload(&self)?, self.tcp));
        }
        Ok(Load::tcp(workload(&self)?, self.tcp))
    }
}

/// The HTTP exchange: precomputed requests, a weighted schedule over
/// them, and the status codes that count as success.
pub struct HttpExchange {
    /// Each target's request bytes.
    requests: Vec<Vec<u8>>,
    /// Each target's method is HEAD (its responses have no body).
    head: Vec<bool>,
    /// Target index of request `seq`: `schedule[seq % len]`.
    schedule: Vec<u16>,
    /// Status codes that count as success.
    ok: OkStatus,
    /// `METHOD URL` of each target (`responses.by_command`).
    ops: Vec<String>,
    /// The request size when every target's is the same.
    request_len: Option<usize>,
}

impl HttpExchange {
    /// The target request `seq` goes to.
    #[inline]
    fn target(&self, seq: u64) -> usize {
        self.schedule[(seq % self.schedule.len() as u64) as usize] as usize
    }

    /// What the response to target `t`, whole in `cur`, meant.
    #[inline]
    fn outcome(&self, cur: &Cursor, t: usize) -> Outcome {
        let code = cur.status();
        Outcome {
            status: Some(code),
            op: t as u16,
            hit: None,
            error: (!self.ok.contains(code)).then_some(ErrorClass::Status(code)),
            close: cur.closes(),
        }
    }
}

impl Exchange for HttpExchange {
    type Cursor = Cursor;

    fn request_len(&self) -> Option<usize> {
        self.request_len
    }

    fn response_len(&self) -> Option<usize> {
        None
    }

    #[inline]
    fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
        out.extend_from_slice(&self.requests[self.target(seq)]);
    }

    #[inline]
    fn parse(&self, cur: &mut Cursor, data: &[u8], seq: u64) -> Parsed {
        let t = self.target(seq);
        match cur.feed(data, self.head[t]) {
            Step::Partial => Parsed::Partial,
            Step::Done(n) => Parsed::Complete(n, self.outcome(cur, t)),
            Step::Error(class) => Parsed::Error(class),
        }
    }

    fn on_eof(&self, cur: &Cursor) -> ErrorClass {
        cur.eof_error()
    }

    fn complete_at_eof(&self, cur: &Cursor, seq: u64) -> Option<Outcome> {
        cur.ends_at_eof()
            .then(|| self.outcome(cur, self.target(seq)))
    }

    fn ops(&self) -> &[String] {
        &self.ops
    }

    fn counts_responses(&self) -> bool {
        true
    }

    fn unsolicited(&self) -> Option<ErrorClass> {
        // A response cannot come before its request: bytes then are not
        // HTTP as a client speaks it.
        Some(ErrorClass::Protocol)
    }
}

/// The http workload of a command line: its URLs, requests and options
/// checked (bad ones are usage errors, exit 2).
pub fn workload(a: &HttpArgs) -> Result<TcpWorkload<HttpExchange>> {
    request::check_method(&a.method)?;
    let targets = match (&a.url, &a.urls) {
        (Some(url), None) => vec![Target {
            url: request::parse_url(url)?,
            method: a.method.clone(),
            weight: 1,
        }],
        (None, Some(file)) => request::read_urls(file, &a.method)?,
        // clap requires exactly one of them.
        _ => return Err(error::usage("load http needs a URL or --urls FILE")),
    };
    let origin = request::common_origin(&targets)?;
    if !origin.https && (a.insecure || a.cacert.is_some()) {
        return Err(error::usage(
            "--insecure and --cacert apply to https:// URLs only",
        ));
    }
    let headers = a
        .headers
        .iter()
        .map(|h| request::parse_header(h))
        .collect::<Result<Vec<_>>>()?;
    let body = a.body.as_deref().map(request::read_body).transpose()?;
    let ok = OkStatus::parse(&a.ok_status)?;
    let extras = Extras {
        headers: &headers,
        body: body.as_deref(),
        close: a.new_connection,
    };
    let requests: Vec<Vec<u8>> = targets
        .iter()
        .map(|t| request::request_bytes(t, &origin, &extras))
        .collect();
    let weights: Vec<u64> = targets.iter().map(|t| t.weight).collect();
    let exchange = HttpExchange {
        request_len: requests
            .iter()
            .all(|r| r.len() == requests[0].len())
            .then(|| requests[0].len()),
        requests,
        head: targets.iter().map(Target::is_head).collect(),
        schedule: request::schedule(&weights)?,
        ok,
        ops: targets.iter().map(Target::name).collect(),
    };
    let target = match targets.len() {
        1 => targets[0].url.to_string(),
        n => format!("{} (+{} more)", targets[0].url, n - 1),
    };
    let mut config = LoadConfig::default();
    let options = [
        ("method", json!(a.method)),
        (
            "urls",
            json!(
                targets
                    .iter()
                    .map(|t| json!({"url": t.url.as_str(), "method": t.method, "weight": t.weight}))
                    .collect::<Vec<_>>()
            ),
        ),
        ("ok_status", json!(a.ok_status)),
        (
            "headers",
            json!(headers.iter().map(|(n, _)| n).collect::<Vec<_>>()),
        ),
        ("body_bytes", json!(body.as_ref().map(Vec::len))),
        ("pipeline", json!(a.pipeline)),
        ("new_connection", json!(a.new_connection)),
    ];
    config.workload_options = options
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(TcpWorkload {
        name: "http",
        addr: origin.addr(),
        target: Some(target),
        tls: origin.https.then(|| TlsSpec {
            server_name: origin.server_name(),
            insecure: a.insecure,
            ca_file: a.cacert.clone(),
        }),
        config,
        mode: if a.new_connection {
            ConnMode::PerTransaction { close_rst: false }
        } else {
            ConnMode::Persistent {
                pipeline: a.pipeline as usize,
            }
        },
        exchange: Ok(exchange),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> HttpArgs {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            a: HttpArgs,
        }
        use clap::Parser;
        Line::try_parse_from(std::iter::once("http").chain(line.iter().copied()))
            .unwrap()
            .a
    }

    fn code(e: &anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn a_url_becomes_an_address_a_target_and_requests() {
        let w = workload(&args(&["http://127.0.0.1:8080/index.html", "-c", "4"])).unwrap();
        assert_eq!(w.name, "http");
        assert_eq!(w.addr, "127.0.0.1:8080");
        assert_eq!(
            w.target.as_deref(),
            Some("http://127.0.0.1:8080/index.html")
        );
        assert_eq!(w.mode, ConnMode::Persistent { pipeline: 1 });
        assert!(w.tls.is_none());
        let ex = w.exchange.unwrap();
        let mut out = Vec::new();
        ex.push_request(&mut out, 0);
        assert_eq!(
            out,
            b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        assert_eq!(ex.request_len(), Some(out.len()));
        assert_eq!(ex.ops(), ["GET http://127.0.0.1:8080/index.html"]);
        assert_eq!(w.config.workload_options["ok_status"], "2xx");
        assert_eq!(w.config.workload_options["new_connection"], false);
    }

    #[test]
    fn outcomes_say_status_url_error_and_close() {
        let w = workload(&args(&["http://127.0.0.1:1/", "--ok-status", "200,404"])).unwrap();
        let ex = w.exchange.unwrap();
        let mut cur = Cursor::default();
        let r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            ex.parse(&mut cur, r, 7),
            Parsed::Complete(
                r.len(),
                Outcome {
                    status: Some(404),
                    ..Outcome::OK
                }
            )
        );
        let mut cur = Cursor::default();
        let r = b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        let Parsed::Complete(_, o) = ex.parse(&mut cur, r, 0) else {
            panic!()
        };
        assert_eq!(o.error, Some(ErrorClass::Status(503)));
        assert!(o.close);
        // A body delimited by the close completes when it comes.
        let mut cur = Cursor::default();
        assert_eq!(
            ex.parse(&mut cur, b"HTTP/1.0 200 OK\r\n\r\nabc", 0),
            Parsed::Partial
        );
        let o = ex.complete_at_eof(&cur, 0).unwrap();
        assert_eq!((o.status, o.close, o.error), (Some(200), true, None));
        let mut cur = Cursor::default();
        assert_eq!(
            ex.parse(
                &mut cur,
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
                0
            ),
            Parsed::Partial
        );
        assert_eq!(ex.complete_at_eof(&cur, 0), None);
        assert_eq!(ex.on_eof(&cur), ErrorClass::ShortRead);
    }

    #[test]
    fn a_urls_file_is_scheduled_by_weight_and_head_has_no_body() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("urls");
        std::fs::write(&f, "2 http://127.0.0.1:9/a\nHEAD http://127.0.0.1:9/b\n").unwrap();
        let w = workload(&args(&["--urls", f.to_str().unwrap(), "--pipeline", "4"])).unwrap();
        assert_eq!(w.target.as_deref(), Some("http://127.0.0.1:9/a (+1 more)"));
        assert_eq!(w.mode, ConnMode::Persistent { pipeline: 4 });
        let ex = w.exchange.unwrap();
        assert_eq!(ex.request_len(), None);
        let firsts: Vec<Vec<u8>> = (0..6)
            .map(|seq| {
                let mut out = Vec::new();
                ex.push_request(&mut out, seq);
                out[..4].to_vec()
            })
            .collect();
        let heads = firsts.iter().filter(|r| r.as_slice() == b"HEAD").count();
        assert_eq!(heads, 2, "one HEAD in three requests");
        // The HEAD's response has no body though it names a length.
        let seq = (0..3).find(|s| ex.target(*s) == 1).unwrap();
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        let mut cur = Cursor::default();
        assert!(
            matches!(ex.parse(&mut cur, r, seq), Parsed::Complete(n, o) if n == r.len() && o.op == 1)
        );
    }

    #[test]
    fn new_connection_https_and_bad_input() {
        let w = workload(&args(&["http://127.0.0.1:1/", "--new-connection"])).unwrap();
        assert_eq!(w.mode, ConnMode::PerTransaction { close_rst: false });
        let mut out = Vec::new();
        w.exchange.unwrap().push_request(&mut out, 1);
        assert!(out.ends_with(b"Connection: close\r\n\r\n"));
        let w = workload(&args(&["https://localhost/", "--insecure"])).unwrap();
        assert_eq!(w.addr, "localhost:443");
        let tls = w.tls.unwrap();
        assert_eq!(
            (tls.server_name.as_str(), tls.insecure),
            ("localhost", true)
        );
        for bad in [
            &["ftp://127.0.0.1/"][..],
            &["http://127.0.0.1/", "-H", "NoColon"],
            &["http://127.0.0.1/", "--ok-status", "7xx"],
            &["http://127.0.0.1/", "--method", "G T"],
            &["http://127.0.0.1/", "--insecure"],
            &["http://127.0.0.1/", "--body", "@/nonexistent/body"],
            &["--urls", "/nonexistent/urls"],
        ] {
            let e = workload(&args(bad)).err().expect("refused");
            assert_eq!(code(&e), Some(2), "{bad:?}: {e}");
        }
        // clap: a URL or --urls, --new-connection without --pipeline.
        for bad in [
            &["http"][..],
            &[
                "http",
                "http://127.0.0.1/",
                "--new-connection",
                "--pipeline",
                "2",
            ],
        ] {
            let v: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let e = crate::load::registry::parse_line(&v).unwrap_err();
            assert_eq!(code(&e), Some(2), "{bad:?}");
        }
    }
}
