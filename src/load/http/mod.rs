//! `load http`: HTTP/1.1 over the TCP driver. Keep-alive connections
//! (`--pipeline K` requests in flight on each, closed or open loop), or one
//! connection per request (`--new-connection`, the HTTP analogue of
//! tcp-crr). This module is the workload: its exchange and how the command
//! line builds it; `request` builds what is sent (`template`: the
//! per-request fields `{key}`, `{value}`, `{seq}`), `parse` frames what
//! comes back, `status` reads `--ok-status`.
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
pub mod template;

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use self::parse::{Cursor, Step};
use self::request::{Extras, Target};
use self::status::OkStatus;
use self::template::{Built, Expansion, Field, Pieces};
use super::Load;
use crate::error;
use crate::load::driver::tls::TlsSpec;
use crate::load::spec::{ConnModel, Options, Registered, TargetForm, TcpArgs};
use crate::load::workload::{ConnMode, ErrorClass, Exchange, Outcome, Parsed, TcpWorkload};
use crate::load::workloads::keyspace::{KeySpace, value_bytes};
use crate::load::workloads::kv_options::{self, KeyDist, MAX_KEYS, MAX_VALUE_SIZE};
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
    /// TLS), or unix:SOCKET[:/PATH] over a Unix socket (Host: localhost).
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
    /// replaces the automatic one. The value may hold {key}, {value} and
    /// {seq}, as the URL's path and query and the body may.
    #[arg(short = 'H', long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// Request body: @FILE reads it from FILE, anything else is the body
    /// itself (sent with a Content-Length). A body with a {key}, {value}
    /// or {seq} field is a template ({{ and }} literal braces); one without
    /// is sent as written.
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
    /// Keys {key} is drawn from: 0 to N-1, zero-padded to one width
    /// (default 100000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_KEYS))]
    pub keys: Option<u64>,
    /// How {key} is drawn: uniform (the default), or zipf:S (S > 0, key 0
    /// the hottest).
    #[arg(long, value_name = "uniform|zipf:S", value_parser = kv_options::key_dist)]
    pub key_dist: Option<KeyDist>,
    /// Bytes of {value}, letters and digits (default 32).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_VALUE_SIZE)))]
    pub value_size: Option<u32>,
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

    /// The host and port of the URL (of the first line of --urls), or the
    /// Unix socket of a `unix:PATH[:/URI]` target.
    fn endpoint(&self, target: Option<&str>) -> Result<String> {
        if let Some((socket, _)) = target.and_then(request::split_unix) {
            return Ok(socket);
        }
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

/// The HTTP exchange: precomputed requests (or their templates), a
/// weighted schedule over them, and the status codes that count as
/// success.
pub struct HttpExchange {
    /// Each target's request.
    requests: Vec<Built>,
    /// The key space and `{seq}` counter templates expand with.
    expansion: Expansion,
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
        match &self.requests[self.target(seq)] {
            Built::Fixed(b) => out.extend_from_slice(b),
            Built::Templated(r) => self.expansion.push(r, out),
        }
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
    let unix = a.url.as_deref().and_then(request::split_unix);
    let targets = match (&a.url, &a.urls) {
        (Some(url), None) => vec![Target::new(
            unix.as_ref().map_or(url.as_str(), |(_, u)| u.as_str()),
            a.method.clone(),
            1,
        )?],
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
        .map(|h| {
            let (name, value) = request::parse_header(h)?;
            let value = template::parse(&format!("-H `{h}`"), value.as_bytes())?;
            Ok((name, value))
        })
        .collect::<Result<Vec<_>>>()?;
    let body = a.body.as_deref().map(request::read_body).transpose()?;
    let body = body
        .map(|b| template::parse("--body", &b).map(|p| (b.len(), p)))
        .transpose()?;
    let ok = OkStatus::parse(&a.ok_status)?;
    let fields = Fields::of(&targets, &headers, body.as_ref().map(|b| &b.1));
    fields.check(a)?;
    let space = KeySpace::new(
        a.keys.unwrap_or(kv_options::DEFAULT_KEYS),
        a.key_dist.unwrap_or(KeyDist::Uniform),
    )?;
    let value = value_bytes(a.value_size.unwrap_or(kv_options::DEFAULT_VALUE_SIZE) as usize);
    let extras = Extras {
        headers: &headers,
        body: body.as_ref().map(|b| &b.1),
        close: a.new_connection,
        key_width: space.width(),
        value: &value,
    };
    let requests: Vec<Built> = targets
        .iter()
        .map(|t| request::request(t, &origin, &extras))
        .collect();
    let weights: Vec<u64> = targets.iter().map(|t| t.weight).collect();
    let fixed: Option<Vec<usize>> = requests
        .iter()
        .map(|r| r.fixed().map(<[u8]>::len))
        .collect();
    let exchange = HttpExchange {
        request_len: fixed.filter(|l| l.iter().all(|n| *n == l[0])).map(|l| l[0]),
        requests,
        expansion: Expansion::new(space),
        head: targets.iter().map(Target::is_head).collect(),
        schedule: request::schedule(&weights)?,
        ok,
        ops: targets.iter().map(Target::name).collect(),
    };
    let target = match (&unix, targets.len()) {
        // The target as written: the socket, then the path when not `/`.
        (Some(_), _) => a.url.clone().unwrap_or_default(),
        (None, 1) => targets[0].shown(),
        (None, n) => format!("{} (+{} more)", targets[0].shown(), n - 1),
    };
    let mut config = LoadConfig::default();
    let options = [
        ("method", json!(a.method)),
        (
            "urls",
            json!(
                targets
                    .iter()
                    .map(|t| json!({"url": t.shown(), "method": t.method, "weight": t.weight}))
                    .collect::<Vec<_>>()
            ),
        ),
        ("ok_status", json!(a.ok_status)),
        (
            "headers",
            json!(headers.iter().map(|(n, _)| n).collect::<Vec<_>>()),
        ),
        (
            "body_bytes",
            json!(
                body.as_ref()
                    .filter(|b| !template::is_template(&b.1))
                    .map(|b| b.0)
            ),
        ),
        ("pipeline", json!(a.pipeline)),
        ("new_connection", json!(a.new_connection)),
        ("template", fields.record()),
        (
            "keys",
            json!(fields.key.then(|| exchange.expansion.space.keys())),
        ),
        (
            "key_dist",
            json!(
                fields
                    .key
                    .then(|| a.key_dist.unwrap_or(KeyDist::Uniform).to_string())
            ),
        ),
        ("value_size", json!(fields.value.then_some(value.len()))),
    ];
    config.workload_options = options
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(TcpWorkload {
        name: "http",
        addr: unix.map_or_else(|| origin.addr(), |(socket, _)| socket),
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

/// Where the command line's templates put fields: which fields, and in
/// which parts of the request.
struct Fields {
    key: bool,
    value: bool,
    seq: bool,
    /// `url`, `header NAME`, `body`: the parts holding a field.
    parts: Vec<String>,
}

impl Fields {
    fn of(targets: &[Target], headers: &[(String, Pieces)], body: Option<&Pieces>) -> Self {
        let mut all: Vec<(String, &Pieces)> = Vec::new();
        all.extend(targets.iter().map(|t| ("url".to_string(), &t.path)));
        all.extend(headers.iter().map(|(n, v)| (format!("header {n}"), v)));
        all.extend(body.map(|b| ("body".to_string(), b)));
        let any = |f| all.iter().any(|(_, p)| template::uses(p, f));
        let mut parts: Vec<String> = Vec::new();
        for (name, p) in &all {
            if template::is_template(p) && !parts.contains(name) {
                parts.push(name.clone());
            }
        }
        Self {
            key: any(Field::Key),
            value: any(Field::Value),
            seq: any(Field::Seq),
            parts,
        }
    }

    /// Key-space options with no field to use them would silently do
    /// nothing: usage errors.
    fn check(&self, a: &HttpArgs) -> Result<()> {
        let key_opts: Vec<&str> = [
            a.keys.is_some().then_some("--keys"),
            a.key_dist.is_some().then_some("--key-dist"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !self.key && !key_opts.is_empty() {
            return Err(error::usage(format!(
                "{} given but no URL, -H value or --body holds a {{key}} field for it to                  fill (e.g. http://HOST/item/{{key}})",
                key_opts.join(" and ")
            )));
        }
        if !self.value && a.value_size.is_some() {
            return Err(error::usage(
                "--value-size given but no URL, -H value or --body holds a {value} field for                  it to fill (e.g. --body '{value}')",
            ));
        }
        Ok(())
    }

    /// The report's `template`: the fields used and where (null when the
    /// requests are fixed).
    fn record(&self) -> serde_json::Value {
        if self.parts.is_empty() {
            return serde_json::Value::Null;
        }
        let names: Vec<&str> = [
            self.key.then_some("key"),
            self.value.then_some("value"),
            self.seq.then_some("seq"),
        ]
        .into_iter()
        .flatten()
        .collect();
        json!({"fields": names, "in": self.parts})
    }
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
    fn a_unix_target_connects_to_the_socket_and_names_localhost() {
        for (target, socket, line) in [
            (
                "unix:/run/nginx.sock",
                "unix:/run/nginx.sock",
                "GET / HTTP/1.1",
            ),
            (
                "unix:/run/n.sock:/a?b=1",
                "unix:/run/n.sock",
                "GET /a?b=1 HTTP/1.1",
            ),
            ("unix:@web:/x", "unix:@web", "GET /x HTTP/1.1"),
        ] {
            let a = args(&[target]);
            let w = workload(&a).unwrap();
            assert_eq!(w.addr, socket);
            assert_eq!(w.target.as_deref(), Some(target));
            assert_eq!(a.endpoint(Some(target)).unwrap(), socket);
            let mut out = Vec::new();
            w.exchange.unwrap().push_request(&mut out, 0);
            assert_eq!(out, format!("{line}\r\nHost: localhost\r\n\r\n").as_bytes());
        }
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

    fn sent(ex: &HttpExchange, seq: u64) -> String {
        let mut out = Vec::new();
        ex.push_request(&mut out, seq);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn templates_expand_per_request_and_are_recorded() {
        let w = workload(&args(&[
            "http://127.0.0.1:1/i/{key}?n={seq}",
            "-H",
            "X-Id: {seq}",
            "--method",
            "PUT",
            "--body",
            "{value}",
            "--keys",
            "10",
            "--value-size",
            "4",
        ]))
        .unwrap();
        assert_eq!(
            w.target.as_deref(),
            Some("http://127.0.0.1:1/i/{key}?n={seq}")
        );
        let o = &w.config.workload_options;
        assert_eq!(o["template"]["fields"], json!(["key", "value", "seq"]));
        assert_eq!(o["template"]["in"], json!(["url", "header X-Id", "body"]));
        assert_eq!(
            (o["keys"].clone(), o["value_size"].clone()),
            (json!(10), json!(4))
        );
        assert_eq!(o["key_dist"], "uniform");
        assert_eq!(o["urls"][0]["url"], "http://127.0.0.1:1/i/{key}?n={seq}");
        assert!(!o.contains_key("body_bytes"), "{o:?}");
        let ex = w.exchange.unwrap();
        assert_eq!(ex.request_len(), None);
        assert_eq!(ex.ops(), ["PUT http://127.0.0.1:1/i/{key}?n={seq}"]);
        // The connection's own sequence number picks the URL only; {seq}
        // counts the run's requests.
        for n in 0..3 {
            let r = sent(&ex, 7);
            let key = &r["PUT /i/".len().."PUT /i/".len() + 1];
            assert_eq!(
                r,
                format!(
                    "PUT /i/{key}?n={n} HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Id: {n}\r\n\
                     Content-Length: 4\r\n\r\n0123"
                )
            );
        }
        // Without a field nothing is recorded and the request is fixed.
        let w = workload(&args(&["http://127.0.0.1:1/", "--body", "{\"a\":{}}"])).unwrap();
        assert!(!w.config.workload_options.contains_key("template"));
        assert_eq!(w.config.workload_options["body_bytes"], 8);
        let ex = w.exchange.unwrap();
        assert!(sent(&ex, 0).ends_with("Content-Length: 8\r\n\r\n{\"a\":{}}"));
        assert_eq!(ex.request_len(), Some(sent(&ex, 0).len()));
    }

    #[test]
    fn key_options_without_their_field_are_usage_errors() {
        for (line, says) in [
            (&["http://127.0.0.1/", "--keys", "5"][..], "--keys given"),
            (
                &[
                    "http://127.0.0.1/{seq}",
                    "--keys",
                    "5",
                    "--key-dist",
                    "zipf:1",
                ],
                "--keys and --key-dist given",
            ),
            (
                &["http://127.0.0.1/{key}", "--value-size", "5"],
                "--value-size given",
            ),
            (&["http://127.0.0.1/{foo}"], "unknown field {foo}"),
            (
                &["http://127.0.0.1/", "-H", "X: {nope}"],
                "-H `X: {nope}`: unknown field {nope}",
            ),
            (
                &["http://127.0.0.1/", "--body", "{key}}"],
                "--body: stray '}'",
            ),
        ] {
            let e = workload(&args(line)).err().expect("refused");
            assert_eq!(code(&e), Some(2), "{line:?}: {e}");
            assert!(e.to_string().contains(says), "{line:?}: {e}");
        }
        // The fields make the options apply.
        assert!(workload(&args(&["http://127.0.0.1/{key}", "--keys", "5"])).is_ok());
        assert!(
            workload(&args(&[
                "http://127.0.0.1/",
                "--body",
                "{value}",
                "--value-size",
                "0"
            ]))
            .is_ok()
        );
    }
}
