//! `load http --http2`: the same URL, headers, body and `--ok-status` as
//! HTTP/1.1, run by the HTTP/2 engine (`load::http2`): h2c with prior
//! knowledge for an http:// URL, TLS with ALPN `h2` for https://.

use anyhow::Result;
use bytes::Bytes;
use serde_json::json;

use super::HttpArgs;
use super::request::{self, Target};
use super::status::OkStatus;
use super::template;
use crate::error;
use crate::load::http2::{Call, H2Load, Judge, Windows, field_error, refuse_driver_options};
use crate::load::workload::{ConnMode, TcpWorkload};

/// Headers HTTP/2 forbids (RFC 9113 8.2.2): the connection's own, which a
/// multiplexed connection does not have.
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// A URL's `:authority`: its host, and its port when it names one.
fn authority(u: &url::Url) -> String {
    let host = u.host_str().unwrap_or_default();
    match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// The HTTP/2 workload of a command line with `--http2`; what HTTP/2
/// cannot carry is a usage error.
pub fn workload(a: &HttpArgs) -> Result<TcpWorkload<H2Load>> {
    if a.urls.is_some() {
        return Err(error::usage(
            "--urls does not apply to --http2 (one URL per run)",
        ));
    }
    refuse_driver_options(&a.tcp, "--http2")?;
    // The HTTP/1.1 workload checks the URL, method, headers, body and
    // options the same way; its framing is not used.
    let base = super::workload(a)?;
    request::check_method(&a.method)?;
    let raw = a.url.as_deref().unwrap_or_default();
    // Over a Unix socket (h2c only: a unix: URL has no https form), the
    // request's URI is the one after the socket, with authority localhost.
    let unix = request::split_unix(raw);
    let url = unix.as_ref().map_or(raw, |(_, u)| u.as_str());
    let target = Target::new(url, a.method.clone(), 1)?;
    if template::is_template(&target.path) {
        return Err(error::usage(format!(
            "`{raw}`: --http2 sends one fixed request; {{key}}, {{value}} and {{seq}} fields are \
             for HTTP/1.1 (leave out --http2)"
        )));
    }
    let mut headers = Vec::new();
    for h in &a.headers {
        let (name, value) = request::parse_header(h)?;
        let lower = name.to_ascii_lowercase();
        if CONNECTION_SPECIFIC.contains(&lower.as_str()) {
            return Err(error::usage(format!(
                "-H `{h}`: {name} is a connection-specific header, which HTTP/2 forbids"
            )));
        }
        if let Some(why) = field_error(&lower, &value) {
            return Err(error::usage(format!("-H `{h}`: {why}")));
        }
        headers.push((lower, value));
    }
    let body = a.body.as_deref().map(request::read_body).transpose()?;
    let templated_header = a.headers.iter().any(|h| {
        h.split_once(':')
            .and_then(|(_, v)| template::parse("-H", v.trim().as_bytes()).ok())
            .is_some_and(|p| template::is_template(&p))
    });
    let templated_body = body
        .as_ref()
        .is_some_and(|b| template::parse("--body", b).is_ok_and(|p| template::is_template(&p)));
    if templated_header || templated_body {
        return Err(error::usage(
            "--http2 sends one fixed request; {key}, {value} and {seq} fields in headers or \
             the body are for HTTP/1.1 (leave out --http2)",
        ));
    }
    if let Some(b) = &body {
        headers.push(("content-length".into(), b.len().to_string()));
    }
    let ok = OkStatus::parse(&a.ok_status)?;
    let call = Call {
        method: a.method.clone(),
        scheme: if target.url.scheme() == "https" {
            "https"
        } else {
            "http"
        },
        authority: authority(&target.url),
        path: target.url[url::Position::BeforePath..url::Position::AfterQuery].to_string(),
        headers,
        body: body.map(Bytes::from).unwrap_or_default(),
    };
    let windows = Windows {
        stream: a.window,
        connection: a.conn_window,
    };
    let mut config = base.config;
    config.workload_options.insert(
        "http2".into(),
        json!({
            "protocol": if base.tls.is_some() { "h2" } else { "h2c" },
            "streams": a.streams,
            "window": a.window,
            "conn_window": a.conn_window,
        }),
    );
    config.workload_options.remove("pipeline");
    config.workload_options.remove("new_connection");
    Ok(TcpWorkload {
        name: "http",
        addr: base.addr,
        target: base.target,
        tls: base.tls,
        config,
        mode: ConnMode::Persistent {
            pipeline: a.streams as usize,
        },
        exchange: Ok(H2Load {
            check_reply: None,
            call,
            judge: Judge::Http(std::sync::Arc::new(move |s| ok.contains(s))),
            streams: a.streams as usize,
            windows,
            ops: vec![target.name()],
        }),
    })
}
