//! `load grpc --protoset FILE`: the method looked up in a
//! FileDescriptorSet (`protoc --include_imports --descriptor_set_out`,
//! `buf build -o`), and a request written as JSON (`--data-json`, the
//! proto3 JSON mapping) turned into the method's input message once,
//! before the run, so the calls send bytes as `--data` does. prost-reflect
//! holds the descriptors and does the mapping; serde_path_to_error adds
//! where in the JSON a value was refused (prost-reflect's errors name the
//! value, not its place).

use std::path::Path;

use anyhow::Result;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};

use crate::error;

/// The largest descriptor set read: far above any real API's (a few
/// hundred KiB with all of googleapis' imports), and bounded so an endless
/// file is refused.
const MAX_PROTOSET: usize = 64 << 20;

/// The largest JSON read: a message is at most 4 MiB on the wire, and its
/// JSON (base64 bytes, quoted numbers, names) a few times that at most.
const MAX_JSON: usize = 64 << 20;

/// How many names an error lists before "and N more".
const LISTED: usize = 20;

/// A unary method of a descriptor set.
#[derive(Clone, Debug)]
pub struct Unary {
    method: MethodDescriptor,
}

impl Unary {
    /// Its request message type.
    pub fn input(&self) -> MessageDescriptor {
        self.method.input()
    }

    /// Its response message type.
    pub fn output(&self) -> MessageDescriptor {
        self.method.output()
    }
}

/// Reads the descriptor set at `path` and finds `service`/`method` in it:
/// a usage error names what is wrong and what the set holds instead.
pub fn find(path: &Path, service: &str, method: &str) -> Result<Unary> {
    let what = format!("--protoset {}", path.display());
    let bytes = crate::input::read_bounded(path, MAX_PROTOSET, &what)?;
    let pool = DescriptorPool::decode(bytes.as_slice()).map_err(|e| {
        error::usage(format!(
            "{what}: not a FileDescriptorSet: {e} (write one with protoc \
             --include_imports --descriptor_set_out=FILE, or buf build -o FILE)"
        ))
    })?;
    // Bytes that are not a set often decode as an empty one (protobuf
    // skips fields it does not know), so an empty set is refused as such.
    if pool.services().len() == 0 {
        return Err(error::usage(format!(
            "{what}: the set holds no service (is it a FileDescriptorSet, \
             written by protoc --include_imports --descriptor_set_out=FILE?)"
        )));
    }
    let Some(svc) = pool.get_service_by_name(service) else {
        let names = listed(pool.services().map(|s| s.full_name().to_string()));
        return Err(error::usage(format!(
            "--method {service}/{method}: {what} has no service {service}; its services: {names}"
        )));
    };
    let Some(m) = svc.methods().find(|m| m.name() == method) else {
        let names = listed(svc.methods().map(|m| m.name().to_string()));
        return Err(error::usage(format!(
            "--method {service}/{method}: service {service} has no method {method}; its methods: {names}"
        )));
    };
    let streaming = match (m.is_client_streaming(), m.is_server_streaming()) {
        (false, false) => None,
        (true, false) => Some("client-streaming"),
        (false, true) => Some("server-streaming"),
        (true, true) => Some("bidirectional streaming"),
    };
    if let Some(kind) = streaming {
        return Err(error::usage(format!(
            "--method {service}/{method} is {kind}: load grpc runs unary calls only"
        )));
    }
    Ok(Unary { method: m })
}

/// Whether a gRPC response body is one uncompressed message that decodes
/// as `output`. (load grpc asks for no compression, so a compressed one is
/// not an answer to it.) A check of parsing, not of content: protobuf
/// skips unknown fields, so bytes of another type often parse too.
pub fn is_reply(output: &MessageDescriptor, body: &[u8]) -> bool {
    let Some((head, message)) = body.split_at_checked(5) else {
        return false;
    };
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    head[0] == 0
        && len as usize == message.len()
        && DynamicMessage::decode(output.clone(), message).is_ok()
}

/// `names` joined, the first [`LISTED`] of them sorted.
fn listed(names: impl Iterator<Item = String>) -> String {
    let mut all: Vec<String> = names.collect();
    all.sort();
    let more = all.len().saturating_sub(LISTED);
    all.truncate(LISTED);
    let mut s = all.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// The text of `--data-json`: @FILE's or the argument itself.
pub fn read_json(arg: &str) -> Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => crate::input::read_text_bounded(
            Path::new(path),
            MAX_JSON,
            &format!("--data-json @{path}"),
        ),
        None => Ok(arg.to_string()),
    }
}

/// The JSON `json` as the protobuf encoding of `input` (proto3 JSON
/// mapping: field names as in the .proto or lowerCamelCase, 64-bit
/// integers as numbers or strings, unknown fields refused).
pub fn encode_json(input: &MessageDescriptor, json: &str) -> Result<Vec<u8>> {
    let mut de = serde_json::Deserializer::from_str(json);
    let mut track = serde_path_to_error::Track::new();
    let parsed = DynamicMessage::deserialize(
        input.clone(),
        serde_path_to_error::Deserializer::new(&mut de, &mut track),
    )
    .and_then(|m| de.end().map(|()| m));
    match parsed {
        Ok(m) => Ok(m.encode_to_vec()),
        Err(e) if e.is_syntax() || e.is_eof() => {
            Err(error::usage(format!("--data-json: not JSON: {e}")))
        }
        Err(e) => {
            // The top level's path is "."; an unknown field there is named
            // by the error itself.
            let path = track.path().to_string();
            let at = if path == "." {
                String::new()
            } else {
                format!(" at {path}")
            };
            Err(error::usage(format!(
                "--data-json: not a {}{at}: {e}",
                input.full_name()
            )))
        }
    }
}

/// Whether `bytes` decode as `input`: a usage error naming the type when
/// they do not (`--data` with `--protoset`).
pub fn check_bytes(input: &MessageDescriptor, bytes: &[u8]) -> Result<()> {
    DynamicMessage::decode(input.clone(), bytes)
        .map(drop)
        .map_err(|e| {
            error::usage(format!(
                "--data: does not decode as {}: {e}",
                input.full_name()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::field_descriptor_proto::{Label, Type};
    use prost_types::{
        DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
        MethodDescriptorProto, ServiceDescriptorProto,
    };

    fn field(name: &str, number: i32, ty: Type, label: Label) -> FieldDescriptorProto {
        FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            r#type: Some(ty as i32),
            label: Some(label as i32),
            json_name: None,
            ..Default::default()
        }
    }

    /// package test; message Req { string key = 1; int64 n = 2; repeated
    /// string tags = 3; bytes blob = 4; } service S { rpc Do(Req) returns
    /// (Req); rpc Many(stream Req) returns (Req); }
    fn input() -> (tempfile::TempDir, std::path::PathBuf) {
        let file = FileDescriptorProto {
            name: Some("t.proto".into()),
            package: Some("test".into()),
            syntax: Some("proto3".into()),
            message_type: vec![DescriptorProto {
                name: Some("Req".into()),
                field: vec![
                    field("key", 1, Type::String, Label::Optional),
                    field("n", 2, Type::Int64, Label::Optional),
                    field("tags", 3, Type::String, Label::Repeated),
                    field("blob", 4, Type::Bytes, Label::Optional),
                ],
                ..Default::default()
            }],
            service: vec![ServiceDescriptorProto {
                name: Some("S".into()),
                method: vec![
                    MethodDescriptorProto {
                        name: Some("Do".into()),
                        input_type: Some(".test.Req".into()),
                        output_type: Some(".test.Req".into()),
                        ..Default::default()
                    },
                    MethodDescriptorProto {
                        name: Some("Many".into()),
                        input_type: Some(".test.Req".into()),
                        output_type: Some(".test.Req".into()),
                        client_streaming: Some(true),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set.pb");
        let set = FileDescriptorSet { file: vec![file] };
        std::fs::write(&path, set.encode_to_vec()).unwrap();
        (dir, path)
    }

    fn usage_text(r: Result<impl std::fmt::Debug>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
        e.to_string()
    }

    #[test]
    fn json_becomes_the_input_message_and_bad_json_says_where() {
        let (_dir, path) = input();
        let m = find(&path, "test.S", "Do").unwrap();
        let input = m.input();
        let bytes = encode_json(&input, r#"{"key":"a","n":"5","tags":["x"],"blob":"AAE="}"#);
        // key=1 "a", n=2 varint 5, tags=3 "x", blob=4 00 01.
        assert_eq!(
            bytes.unwrap(),
            b"\x0a\x01a\x10\x05\x1a\x01x\x22\x02\x00\x01".to_vec()
        );
        assert_eq!(encode_json(&input, "{}").unwrap(), Vec::<u8>::new());
        let e = usage_text(encode_json(&input, r#"{"key": "#));
        assert!(e.contains("not JSON"), "{e}");
        let e = usage_text(encode_json(&input, r#"{"key":"a"} x"#));
        assert!(e.contains("not JSON"), "{e}");
        let e = usage_text(encode_json(&input, r#"{"nope":1}"#));
        assert!(
            e.contains("not a test.Req: unrecognized field name 'nope'"),
            "{e}"
        );
        let e = usage_text(encode_json(&input, r#"{"tags":["x", 7]}"#));
        assert!(e.contains("at tags[1]"), "{e}");
        let e = usage_text(encode_json(&input, r#"{"n":"five"}"#));
        assert!(e.contains("at n:"), "{e}");
        check_bytes(&input, b"\x0a\x01a").unwrap();
        assert!(is_reply(&m.output(), b"\0\0\0\0\x03\x0a\x01a"));
        assert!(is_reply(&m.output(), b"\0\0\0\0\0"));
        // Cut short; a length that is not the rest; compressed; no frame.
        assert!(!is_reply(&m.output(), b"\0\0\0\0\x03\x0a\x05a"));
        assert!(!is_reply(&m.output(), b"\0\0\0\0\x04\x0a\x01a"));
        assert!(!is_reply(&m.output(), b"\x01\0\0\0\x03\x0a\x01a"));
        assert!(!is_reply(&m.output(), b"\0\0\0"));
        let e = usage_text(check_bytes(&input, b"\x0a\x05a"));
        assert!(e.contains("does not decode as test.Req"), "{e}");
    }

    #[test]
    fn missing_services_and_methods_list_what_the_set_holds() {
        let (dir, path) = input();
        let e = usage_text(find(&path, "test.T", "Do"));
        assert!(e.contains("no service test.T; its services: test.S"), "{e}");
        let e = usage_text(find(&path, "test.S", "Get"));
        assert!(e.contains("no method Get; its methods: Do, Many"), "{e}");
        let e = usage_text(find(&path, "test.S", "Many"));
        assert!(
            e.contains("client-streaming: load grpc runs unary calls only"),
            "{e}"
        );
        let junk = dir.path().join("junk");
        std::fs::write(&junk, b"hello, world").unwrap();
        let e = usage_text(find(&junk, "test.S", "Do"));
        assert!(e.contains("FileDescriptorSet"), "{e}");
        let e = usage_text(find(&dir.path().join("absent"), "test.S", "Do"));
        assert!(e.contains("cannot read it"), "{e}");
        assert_eq!(
            listed((0..25).map(|i| format!("s{i:02}")))
                .matches(", ")
                .count(),
            19
        );
        assert!(listed((0..25).map(|i| format!("s{i:02}"))).ends_with("s19 and 5 more"));
    }
}
