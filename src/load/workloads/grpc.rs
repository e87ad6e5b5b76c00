//! `load grpc`: gRPC unary calls over HTTP/2, run by the HTTP/2 engine
//! (`http2`): each call is a POST to `/SERVICE/METHOD` with
//! `content-type: application/grpc`, the request message (protobuf bytes,
//! `--data`) in one length-prefixed frame, and the answer judged by its
//! grpc-status (trailers, or the headers of a trailers-only response): not
//! 0 is an error of class `grpc_status:<NAME>`. The response messages are
//! read and not decoded. h2c (prior knowledge) unless `--tls`. With
//! `--protoset` the method is looked up in a descriptor set, the request
//! may be written as JSON (`--data-json`, module `protoset`), and each
//! worker's first OK response must parse as the output type (else
//! `grpc_bad_response`); the later ones are read and not decoded.

use anyhow::Result;
use bytes::{BufMut, Bytes, BytesMut};
use clap::Args;
use serde_json::json;

use crate::error;
use crate::load::Load;
use crate::load::http2::{Call, H2Load, Judge, Windows, field_error, refuse_driver_options};
use crate::load::spec::{ConnModel, Options, Registered, TargetForm, TcpArgs};
use crate::load::workload::{ConnMode, TcpWorkload, TlsSpec};
use crate::load::workloads::protoset;

/// The registration of `load grpc`.
pub static WORKLOAD: Registered<GrpcArgs> = Registered::new(
    "grpc",
    "gRPC unary calls over HTTP/2 (h2c, or TLS with --tls), --streams per connection",
    TargetForm::Addr,
);

/// The largest request message sent: gRPC's default receive limit.
const MAX_MESSAGE: usize = 4 << 20;

/// `load grpc` options.
#[derive(Clone, Debug, Args)]
pub struct GrpcArgs {
    /// Target: IP:PORT, [IPv6]:PORT or HOST:PORT.
    pub addr: String,
    /// Shared TCP options.
    #[command(flatten)]
    pub tcp: TcpArgs,
    /// The method to call: package.Service/Method.
    #[arg(long, value_name = "SERVICE/METHOD")]
    pub method: String,
    /// The request message, protobuf-encoded: @FILE reads it from FILE,
    /// anything else is the bytes themselves (default: the empty message).
    #[arg(long, value_name = "@FILE|BYTES")]
    pub data: Option<String>,
    /// A FileDescriptorSet (protoc --include_imports
    /// --descriptor_set_out=FILE, or buf build -o FILE): the method must be
    /// a unary method in it, and --data must decode as its input.
    #[arg(long, value_name = "FILE")]
    pub protoset: Option<std::path::PathBuf>,
    /// The request message as JSON (proto3 JSON mapping) of the method's
    /// input type in --protoset, converted once before the run: @FILE
    /// reads it from FILE.
    #[arg(
        long,
        value_name = "JSON|@FILE",
        requires = "protoset",
        conflicts_with = "data"
    )]
    pub data_json: Option<String>,
    /// Add this request metadata ('name: value'; repeatable).
    #[arg(short = 'H', long = "metadata", value_name = "'NAME: VALUE'")]
    pub metadata: Vec<String>,
    /// Concurrent streams (calls in flight) per connection.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub streams: u32,
    /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE), bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..=0x7fff_ffff))]
    pub window: u32,
    /// The connection's receive window, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u32).range(65_535..=0x7fff_ffff))]
    pub conn_window: u32,
    /// Speak TLS (ALPN h2) instead of h2c.
    #[arg(long)]
    pub tls: bool,
    /// --tls: accept any server certificate (self-signed test servers).
    #[arg(long, requires = "tls")]
    pub insecure: bool,
    /// --tls: also trust the certificates in this PEM file.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub cacert: Option<std::path::PathBuf>,
}

impl Options for GrpcArgs {
    fn address(&mut self) -> Option<&mut String> {
        Some(&mut self.addr)
    }

    fn conn(&self) -> ConnModel {
        ConnModel::Persistent
    }

    fn driver(&self) -> Option<&TcpArgs> {
        Some(&self.tcp)
    }

    fn check(&self) -> Result<()> {
        workload(self).map(drop)
    }

    fn into_load(self: Box<Self>) -> Result<Load> {
        Ok(Load::tcp(workload(&self)?, self.tcp))
    }
}

/// `package.Service/Method` (a leading `/` allowed): the request path, or
/// why it is not a method name.
pub fn method_path(m: &str) -> Result<String> {
    let bad = |why: &str| {
        error::usage(format!(
            "--method `{m}`: {why} (give package.Service/Method, e.g. helloworld.Greeter/SayHello)"
        ))
    };
    let name = m.strip_prefix('/').unwrap_or(m);
    let Some((service, method)) = name.split_once('/') else {
        return Err(bad("no / between the service and the method"));
    };
    let ident = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !service.split('.').all(ident) {
        return Err(bad("the service is not a dotted name of identifiers"));
    }
    if !ident(method) {
        return Err(bad("the method is not an identifier"));
    }
    Ok(format!("/{service}/{method}"))
}

/// The message of `--data`: @FILE's bytes or the argument's.
fn read_data(arg: Option<&str>) -> Result<Vec<u8>> {
    Ok(match arg {
        None => Vec::new(),
        Some(a) => match a.strip_prefix('@') {
            Some(path) => crate::input::read_bounded(
                std::path::Path::new(path),
                MAX_MESSAGE,
                &format!("--data @{path}"),
            )?,
            None => a.as_bytes().to_vec(),
        },
    })
}

/// Where the request message came from, as the report records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// No --data: the empty message.
    Empty,
    /// --data: protobuf bytes.
    Bytes,
    /// --data-json, converted through --protoset.
    Json,
}

/// The request message of a command line (`path` is its checked
/// `/service/method`), its source, and the method's input type when
/// --protoset names one.
fn request(a: &GrpcArgs, path: &str) -> Result<(Vec<u8>, Source, Option<protoset::Unary>)> {
    let unary = match &a.protoset {
        Some(set) => {
            let (service, method) = path[1..].split_once('/').unwrap_or_default();
            Some(protoset::find(set, service, method)?)
        }
        None => None,
    };
    let (message, source) = match (&a.data_json, &unary) {
        (Some(json), Some(u)) => (
            protoset::encode_json(&u.input(), &protoset::read_json(json)?)?,
            Source::Json,
        ),
        // clap's `requires` says so first; this keeps a spec built
        // elsewhere honest.
        (Some(_), None) => return Err(error::usage("--data-json needs --protoset FILE")),
        (None, _) => {
            let data = read_data(a.data.as_deref())?;
            if let (Some(u), Some(_)) = (&unary, &a.data) {
                protoset::check_bytes(&u.input(), &data)?;
            }
            let source = if a.data.is_some() {
                Source::Bytes
            } else {
                Source::Empty
            };
            (data, source)
        }
    };
    if message.len() > MAX_MESSAGE {
        let what = if source == Source::Json {
            "--data-json"
        } else {
            "--data"
        };
        return Err(error::usage(format!(
            "{what}: the message is {} bytes; a gRPC message is at most {MAX_MESSAGE} here",
            message.len()
        )));
    }
    Ok((message, source, unary))
}

/// One gRPC message as it goes on the wire: not compressed, its length
/// (4 bytes, big-endian), the bytes.
pub fn frame(message: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + message.len());
    b.put_u8(0);
    b.put_u32(message.len() as u32);
    b.put_slice(message);
    b.freeze()
}

/// The grpc workload of a command line.
pub fn workload(a: &GrpcArgs) -> Result<TcpWorkload<H2Load>> {
    refuse_driver_options(&a.tcp, "load grpc")?;
    let path = method_path(&a.method)?;
    let (message, source, unary) = request(a, &path)?;
    let scheme = if a.tls { "https" } else { "http" };
    let unix = crate::endpoint::Endpoint::is_unix_text(&a.addr);
    if unix && a.tls {
        return Err(error::usage(format!(
            "`{}`: --tls over a Unix socket is not supported (gRPC over a Unix socket is h2c)",
            a.addr
        )));
    }
    // A Unix socket has no host: the :authority is localhost, as grpc-go
    // and grpcurl send for unix: targets.
    let authority = if unix { "localhost" } else { a.addr.as_str() };
    let uri = url::Url::parse(&format!("{scheme}://{authority}{path}"))
        .ok()
        .filter(|u| u.path() == path)
        .ok_or_else(|| error::usage(format!("{}: not an address for a URI", a.addr)))?;
    let mut headers = vec![
        ("content-type".to_string(), "application/grpc".to_string()),
        ("te".to_string(), "trailers".to_string()),
    ];
    for m in &a.metadata {
        let bad = |why: &dyn std::fmt::Display| error::usage(format!("-H `{m}`: {why}"));
        let (name, value) = m
            .split_once(':')
            .ok_or_else(|| bad(&"metadata is 'name: value' (no colon found)"))?;
        let name = name.trim().to_ascii_lowercase();
        if name.starts_with("grpc-") || name == "content-type" || name == "te" {
            return Err(bad(&format!("{name} is set by load grpc")));
        }
        let value = value.trim();
        if let Some(why) = field_error(&name, value) {
            return Err(bad(&why));
        }
        headers.push((name, value.to_string()));
    }
    let host = uri.host_str().unwrap_or_default();
    let server_name = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let body = frame(&message);
    let mut workload_options: std::collections::BTreeMap<String, serde_json::Value> = [
        ("method", json!(path)),
        ("message_bytes", json!(message.len())),
        (
            "request",
            json!(match source {
                Source::Empty => "empty",
                Source::Bytes => "bytes",
                Source::Json => "json",
            }),
        ),
        (
            "http2",
            json!({
                "protocol": if a.tls { "h2" } else { "h2c" },
                "streams": a.streams,
                "window": a.window,
                "conn_window": a.conn_window,
            }),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let (Some(set), Some(u)) = (&a.protoset, &unary) {
        workload_options.insert(
            "protoset".into(),
            json!({
                "file": set.to_string_lossy(),
                "input_type": u.input().full_name(),
                "output_type": u.output().full_name(),
                "checked_responses": "first_per_worker",
            }),
        );
    }
    let check_reply = unary.map(|u| {
        let output = u.output();
        let check: crate::load::http2::ReplyCheck =
            std::sync::Arc::new(move |body: &[u8]| protoset::is_reply(&output, body));
        check
    });
    let config = crate::report::load::LoadConfig {
        workload_options,
        request_bytes: Some(body.len()),
        ..Default::default()
    };
    Ok(TcpWorkload {
        name: "grpc",
        addr: a.addr.clone(),
        target: None,
        tls: a.tls.then(|| TlsSpec {
            server_name,
            insecure: a.insecure,
            ca_file: a.cacert.clone(),
        }),
        config,
        mode: ConnMode::Persistent {
            pipeline: a.streams as usize,
        },
        exchange: Ok(H2Load {
            call: Call {
                method: "POST".into(),
                scheme,
                authority: authority.to_string(),
                path: path.clone(),
                headers,
                body,
            },
            judge: Judge::Grpc,
            streams: a.streams as usize,
            windows: Windows {
                stream: a.window,
                connection: a.conn_window,
            },
            ops: vec![path],
            check_reply,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_are_checked_and_messages_framed() {
        assert_eq!(method_path("pkg.Svc/Do").unwrap(), "/pkg.Svc/Do");
        assert_eq!(method_path("/Svc/Do_2").unwrap(), "/Svc/Do_2");
        for bad in [
            "pkg.Svc",
            "pkg.Svc/",
            "/Do",
            "pkg..Svc/Do",
            "p-kg.Svc/Do",
            "S/1x",
        ] {
            let e = method_path(bad).unwrap_err();
            assert_eq!(
                e.downcast_ref::<error::Exit>().map(|x| x.code),
                Some(2),
                "{bad}"
            );
        }
        assert_eq!(&frame(b"ab")[..], b"\x00\x00\x00\x00\x02ab");
        assert_eq!(&frame(b"")[..], b"\x00\x00\x00\x00\x00");
    }
}
