//! Per-request fields in what `load http` sends (docs/load.md, "HTTP
//! templates"): `{key}`, `{value}` and `{seq}` in a URL's path or query,
//! a header value or the body, with `{{`/`}}` for literal braces (the
//! syntax of every load template, `load::fields`).
//!
//! - Text with no `{name}` in it is sent as written, braces and all (a
//!   JSON body stays valid), and its request is built once, as before
//!   templates existed: the fast path.
//! - `{key}` is a key of the key space the key-value workloads use
//!   (`keyspace::KeySpace`: `--keys`, `--key-dist`), drawn once per
//!   request (every `{key}` of one request is the same key) and written
//!   zero-padded in decimal; `{value}` is `--value-size` bytes of the same
//!   pattern as theirs (letters and digits). Both alphabets are URL-safe,
//!   so the expanded URL is a valid request target without escaping.
//! - `{seq}` is the request's number in the run, taken from one counter
//!   every connection and thread shares: unique, and contiguous from 0
//!   over the requests sent.
//! - A templated request is a list of segments built once ([`Request`]);
//!   sending it copies the literal segments and writes the key, the
//!   sequence number and the body's Content-Length in between.
//!
//! URLs are checked by the `url` crate, which would escape the braces of
//! a field; so the fields are first replaced by markers of URL-safe
//! letters, the URL parsed, and its request target split at the markers.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use url::Url;

use crate::error;
use crate::load::workloads::fields::{self, Piece};
use crate::load::workloads::keyspace::KeySpace;

/// A field of an http template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// A key of the key space.
    Key,
    /// The run's `--value-size` bytes.
    Value,
    /// The request's number in the run.
    Seq,
}

/// The fields http templates know, by name.
pub const FIELDS: &[(&str, Field)] = &[
    ("key", Field::Key),
    ("value", Field::Value),
    ("seq", Field::Seq),
];

/// A template: literal bytes and fields. Text with no field is one
/// literal piece (or none, when empty).
pub type Pieces = Vec<Piece<Field>>;

/// True when `p` holds a field.
pub fn is_template(p: &Pieces) -> bool {
    p.iter().any(|x| matches!(x, Piece::Field(_)))
}

/// True when `p` holds the field `f`.
pub fn uses(p: &Pieces, f: Field) -> bool {
    p.contains(&Piece::Field(f))
}

/// `text` as a template; `what` names it in a usage error (`-H 'X: ..'`,
/// `--body`). Text without a `{name}` is literal, sent as written.
pub fn parse(what: &str, text: &[u8]) -> Result<Pieces> {
    if !fields::has_field(text) {
        return Ok(literal(text));
    }
    fields::parse(text, FIELDS).map_err(|e| error::usage(format!("{what}: {}", e.message(FIELDS))))
}

fn literal(text: &[u8]) -> Pieces {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![Piece::Lit(text.to_vec())]
    }
}

/// What stands for a field while the URL crate checks a templated URL.
const MARK: &str = "__sockscope_field_";

fn mark(f: Field) -> &'static str {
    match f {
        Field::Key => "__sockscope_field_key__",
        Field::Value => "__sockscope_field_value__",
        Field::Seq => "__sockscope_field_seq__",
    }
}

/// `s` with each marker written back as its field.
pub fn unmark(s: &str) -> String {
    FIELDS.iter().fold(s.to_string(), |s, (name, f)| {
        s.replace(mark(*f), &format!("{{{name}}}"))
    })
}

/// The request target (RFC 9112 3.2: path and query) of `url`.
pub fn request_target(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

/// A URL that may hold fields: the URL (checked by `check`, with a marker
/// for each field; [`unmark`] shows it as written) and its request
/// target as a template. A field anywhere but the path and query is a
/// usage error.
pub fn parse_url(s: &str, check: impl Fn(&str) -> Result<Url>) -> Result<(Url, Pieces)> {
    if !fields::has_field(s.as_bytes()) {
        let url = check(s)?;
        let target = literal(request_target(&url).as_bytes());
        return Ok((url, target));
    }
    if s.contains(MARK) {
        return Err(error::usage(format!(
            "`{s}`: {MARK} is reserved in a templated URL"
        )));
    }
    let pieces = parse(&format!("`{s}`"), s.as_bytes())?;
    let mut marked = String::with_capacity(s.len() + 64);
    for p in &pieces {
        match p {
            Piece::Lit(b) => marked.push_str(&String::from_utf8_lossy(b)),
            Piece::Field(f) => marked.push_str(mark(*f)),
        }
    }
    let url = check(&marked).map_err(|e| error::usage(unmark(&format!("{e:#}"))))?;
    let target = split_marks(&request_target(&url));
    let count = |p: &Pieces| p.iter().filter(|x| matches!(x, Piece::Field(_))).count();
    if count(&target) != count(&pieces) {
        return Err(error::usage(format!(
            "`{s}`: a field may stand in the URL's path or query only (not in its scheme, \
             host, port or #fragment)"
        )));
    }
    Ok((url, target))
}

/// `s` split at the field markers.
fn split_marks(mut s: &str) -> Pieces {
    let mut out = Vec::new();
    while let Some(at) = s.find(MARK) {
        let hit = FIELDS
            .iter()
            .find(|(_, f)| s[at..].starts_with(mark(*f)))
            .map(|(_, f)| *f);
        let Some(f) = hit else {
            // Not one of ours (it cannot be: the URL was refused if it held
            // the prefix); keep it literal.
            break;
        };
        if at > 0 {
            out.push(Piece::Lit(s.as_bytes()[..at].to_vec()));
        }
        out.push(Piece::Field(f));
        s = &s[at + mark(f).len()..];
    }
    if !s.is_empty() {
        out.push(Piece::Lit(s.as_bytes().to_vec()));
    }
    out
}

/// One segment of a templated request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Lit(Vec<u8>),
    Key,
    Seq,
    /// The body's length, in decimal.
    BodyLen,
}

/// A request with fields, built once: its segments and how long its
/// body is.
#[derive(Clone, Debug)]
pub struct Request {
    segs: Vec<Seg>,
    /// Body bytes besides its `{seq}`s (keys have one width).
    body_fixed: usize,
    /// `{seq}` fields in the body.
    body_seqs: usize,
    key: bool,
    seq: bool,
}

/// Builds a [`Request`]: literal bytes, templates, the body's length.
pub struct Builder<'a> {
    segs: Vec<Seg>,
    width: usize,
    value: &'a [u8],
    body_fixed: usize,
    body_seqs: usize,
}

impl<'a> Builder<'a> {
    /// A builder for keys `width` digits wide and the run's `value`.
    pub fn new(width: usize, value: &'a [u8]) -> Self {
        Self {
            segs: Vec::new(),
            width,
            value,
            body_fixed: 0,
            body_seqs: 0,
        }
    }

    /// Appends literal bytes.
    pub fn lit(&mut self, b: &[u8]) -> &mut Self {
        match self.segs.last_mut() {
            Some(Seg::Lit(l)) => l.extend_from_slice(b),
            _ => self.segs.push(Seg::Lit(b.to_vec())),
        }
        self
    }

    /// Appends a template (`{value}` copied in now).
    pub fn pieces(&mut self, p: &Pieces) -> &mut Self {
        for x in p {
            match x {
                Piece::Lit(b) => {
                    self.lit(b);
                }
                Piece::Field(Field::Value) => {
                    let v = self.value;
                    self.lit(v);
                }
                Piece::Field(Field::Key) => self.segs.push(Seg::Key),
                Piece::Field(Field::Seq) => self.segs.push(Seg::Seq),
            }
        }
        self
    }

    /// Appends the body's length (written per request).
    pub fn body_len(&mut self, body: &Pieces) -> &mut Self {
        for x in body {
            match x {
                Piece::Lit(b) => self.body_fixed += b.len(),
                Piece::Field(Field::Value) => self.body_fixed += self.value.len(),
                Piece::Field(Field::Key) => self.body_fixed += self.width,
                Piece::Field(Field::Seq) => self.body_seqs += 1,
            }
        }
        self.segs.push(Seg::BodyLen);
        self
    }

    /// The request; its bytes alone when nothing in it varies.
    pub fn build(self) -> Built {
        if self.body_seqs == 0 && !self.segs.iter().any(|s| matches!(s, Seg::Key | Seg::Seq)) {
            // Only literals and a fixed body length: write it out now.
            let mut out = Vec::new();
            for s in &self.segs {
                match s {
                    Seg::Lit(b) => out.extend_from_slice(b),
                    Seg::BodyLen => push_decimal(&mut out, self.body_fixed as u64),
                    Seg::Key | Seg::Seq => unreachable!("checked above"),
                }
            }
            return Built::Fixed(out);
        }
        Built::Templated(Request {
            key: self.segs.contains(&Seg::Key),
            seq: self.segs.contains(&Seg::Seq),
            segs: self.segs,
            body_fixed: self.body_fixed,
            body_seqs: self.body_seqs,
        })
    }
}

/// A request as sent: the same bytes every time, or a template.
#[derive(Clone, Debug)]
pub enum Built {
    /// Built once, copied per request.
    Fixed(Vec<u8>),
    /// Expanded per request.
    Templated(Request),
}

impl Built {
    /// The bytes of a fixed request (None for a template).
    pub fn fixed(&self) -> Option<&[u8]> {
        match self {
            Self::Fixed(b) => Some(b),
            Self::Templated(_) => None,
        }
    }
}

/// What expanding requests shares across connections: the key space and
/// the run's sequence counter.
#[derive(Debug)]
pub struct Expansion {
    /// The key space `{key}` draws from.
    pub space: KeySpace,
    /// The next `{seq}`.
    next: AtomicU64,
}

impl Expansion {
    /// Expansion over `space`, `{seq}` from 0.
    pub fn new(space: KeySpace) -> Self {
        Self {
            space,
            next: AtomicU64::new(0),
        }
    }

    /// Appends `r` with a fresh key and the next sequence number.
    #[inline]
    pub fn push(&self, r: &Request, out: &mut Vec<u8>) {
        let key = if r.key { self.space.draw() } else { 0 };
        let seq = if r.seq {
            self.next.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        for s in &r.segs {
            match s {
                Seg::Lit(b) => out.extend_from_slice(b),
                Seg::Key => self.space.push_key(out, key),
                Seg::Seq => push_decimal(out, seq),
                Seg::BodyLen => {
                    let len = r.body_fixed + r.body_seqs * decimal_len(seq);
                    push_decimal(out, len as u64);
                }
            }
        }
    }
}

/// Digits of `n` in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::KeyDist;

    fn code(e: &anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    fn check(s: &str) -> Result<Url> {
        super::super::request::parse_url(s)
    }

    #[test]
    fn a_templated_url_keeps_its_fields_in_the_request_target() {
        let (url, t) = parse_url(
            "http://127.0.0.1:8080/k/{key}/{{x}}?v={value}&n={seq}",
            check,
        )
        .unwrap();
        assert_eq!(url.host_str(), Some("127.0.0.1"));
        assert_eq!(
            t,
            [
                Piece::Lit(b"/k/".to_vec()),
                Piece::Field(Field::Key),
                // A literal brace is escaped as the URL crate escapes it.
                Piece::Lit(b"/%7Bx%7D?v=".to_vec()),
                Piece::Field(Field::Value),
                Piece::Lit(b"&n=".to_vec()),
                Piece::Field(Field::Seq),
            ]
        );
        assert_eq!(
            unmark(url.as_str()),
            "http://127.0.0.1:8080/k/{key}/%7Bx%7D?v={value}&n={seq}"
        );
        // No field: the URL as before, braces escaped by the URL crate.
        let (url, t) = parse_url("http://127.0.0.1/{a?x", check).unwrap();
        assert_eq!(t, [Piece::Lit(b"/%7Ba?x".to_vec())]);
        assert_eq!(url.as_str(), "http://127.0.0.1/%7Ba?x");
    }

    #[test]
    fn bad_url_templates_say_why() {
        for (s, says) in [
            (
                "http://127.0.0.1/{foo}",
                "unknown field {foo}: the fields are {key}, {value} and {seq}",
            ),
            ("http://{key}.example/", "path or query only"),
            ("http://127.0.0.1/#{seq}", "path or query only"),
            ("http://127.0.0.1:{seq}/", "not a URL"),
            ("http://127.0.0.1/{key}}", "stray '}'"),
            ("http://127.0.0.1/{key}/__sockscope_field_x", "reserved"),
        ] {
            let e = parse_url(s, check).unwrap_err();
            assert_eq!(code(&e), Some(2), "{s}");
            assert!(e.to_string().contains(says), "{s}: {e}");
            assert!(!e.to_string().contains("__sockscope_field_seq"), "{s}: {e}");
        }
    }

    #[test]
    fn requests_expand_keys_seq_and_the_body_length() {
        let space = KeySpace::new(1000, KeyDist::Uniform).unwrap();
        let value = b"0123";
        let body = parse("--body", b"{{\"k\":{key},\"n\":{seq},\"v\":\"{value}\"}}").unwrap();
        let mut b = Builder::new(space.width(), value);
        b.lit(b"POST /").pieces(&parse("url", b"{key}").unwrap());
        b.lit(b" HTTP/1.1\r\nContent-Length: ").body_len(&body);
        b.lit(b"\r\n\r\n").pieces(&body);
        let Built::Templated(r) = b.build() else {
            panic!("a template")
        };
        let x = Expansion::new(space);
        let mut out = Vec::new();
        for _ in 0..12 {
            x.push(&r, &mut out);
        }
        let text = String::from_utf8(out).unwrap();
        let reqs: Vec<&str> = text.split("POST /").skip(1).collect();
        assert_eq!(reqs.len(), 12);
        for (n, r) in reqs.iter().enumerate() {
            let key = &r[..3];
            assert!(key.bytes().all(|b| b.is_ascii_digit()), "{r}");
            let (head, body) = r.split_once("\r\n\r\n").unwrap();
            assert_eq!(body, format!("{{\"k\":{key},\"n\":{n},\"v\":\"0123\"}}"));
            assert!(
                head.ends_with(&format!("Content-Length: {}", body.len())),
                "{r}"
            );
        }
        // Nothing varies: the bytes are built once.
        let mut b = Builder::new(3, value);
        let body = parse("--body", b"{\"a\":{}}").unwrap();
        b.lit(b"L:").body_len(&body).lit(b";").pieces(&body);
        assert_eq!(b.build().fixed(), Some(&b"L:8;{\"a\":{}}"[..]));
    }

    #[test]
    fn decimals_are_written_whole() {
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
            assert_eq!(decimal_len(n), out.len());
        }
    }
}
