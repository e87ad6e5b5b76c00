//! What `load http` sends: its URLs (the positional one, or the lines of
//! `--urls FILE`), checked once, and each URL's request built once
//! (method, path, `Host`, the user's `-H` headers, `Content-Length` and the
//! `--body`), so sending a request is one copy, or, when a field of
//! `template` is in it, a copy of its segments with the fields written in. Which URL a request goes to
//! is decided by its sequence number over a precomputed weighted schedule
//! ([`schedule`]): the response parser knows what it answers without
//! keeping any per-request state.

use std::path::Path;

use anyhow::Result;
use url::Url;

use super::template::{self, Builder, Built, Pieces};
use crate::error;

/// The largest `--body` (each URL's request holds a copy, and every
/// connection's send buffer one per pipelined request).
pub const MAX_BODY: usize = 64 << 20;
/// Longest `--urls` file read.
pub const MAX_URLS_FILE: usize = 64 << 20;
/// The most distinct URLs: a response names its URL by a `u16` index.
pub const MAX_URLS: usize = u16::MAX as usize;
/// The longest weighted schedule (sum of the weights after dividing by
/// their greatest common divisor).
pub const MAX_SCHEDULE: u64 = 1 << 20;

/// One URL of the load and how it is requested.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL (normalised: `http://127.0.0.1:8080` reads as
    /// `http://127.0.0.1:8080/`).
    pub url: Url,
    /// The request method (`GET`, `HEAD`, `POST`...).
    pub method: String,
    /// Its share of the requests, relative to the other URLs' weights.
    pub weight: u64,
    /// Its request target (path and query), fields and all.
    pub path: Pieces,
}

impl Target {
    /// `METHOD URL`: how the report names it (`responses.by_command`).
    pub fn name(&self) -> String {
        format!("{} {}", self.method, self.shown())
    }

    /// The URL as the report shows it: its fields written `{key}`.
    pub fn shown(&self) -> String {
        template::unmark(self.url.as_str())
    }

    /// A URL that may hold template fields, checked.
    pub fn new(url: &str, method: String, weight: u64) -> Result<Self> {
        let (url, path) = template::parse_url(url, parse_url)?;
        Ok(Self {
            url,
            method,
            weight,
            path,
        })
    }

    /// True when responses to it have no body whatever their headers say.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// Where every URL of a load points: one scheme, host and port, since the
/// driver connects to one address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// `https` (true) or `http`.
    pub https: bool,
    /// The host as written in the URL (`[::1]` for IPv6).
    pub host: String,
    /// The port, the scheme's default when the URL gives none.
    pub port: u16,
    /// The `Host` header value: the host, and the port when it is not the
    /// scheme's default (RFC 9110 7.2).
    pub host_header: String,
}

impl Origin {
    /// The origin of `url`.
    fn of(url: &Url) -> Self {
        let host = url.host_str().unwrap_or_default().to_string();
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        Self {
            https: url.scheme() == "https",
            port: url.port_or_known_default().unwrap_or(80),
            host,
            host_header,
        }
    }

    /// Where to connect: HOST:PORT (`[::1]:8080` for IPv6).
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The name TLS sends as SNI and checks the certificate against (the
    /// host without IPv6 brackets).
    pub fn server_name(&self) -> String {
        self.host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    }
}

/// Splits an http target on a Unix socket, `unix:PATH[:/URI]` (the form
/// nginx's proxy_pass takes): the socket (`unix:PATH`) and the URL the
/// requests name, `http://localhost/URI` (`/` when none is given). None
/// for any other target. A socket path holding `:/` cannot be named here.
pub fn split_unix(target: &str) -> Option<(String, String)> {
    let rest = target.strip_prefix(crate::endpoint::UNIX_PREFIX)?;
    let (socket, uri) = match rest.find(":/") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, "/"),
    };
    Some((
        format!("{}{socket}", crate::endpoint::UNIX_PREFIX),
        format!("http://localhost{uri}"),
    ))
}

/// Parses one URL: http:// or https://, with a host, without credentials.
pub fn parse_url(s: &str) -> Result<Url> {
    let url = Url::parse(s).map_err(|e| error::usage(format!("`{s}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(error::usage(format!(
            "`{s}`: load http speaks http:// and https:// only, not {}:// (give a URL such \
             as http://127.0.0.1:8080/index.html)",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(error::usage(format!("`{s}` names no host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Sending them would need an Authorization scheme; saying nothing
        // would silently load the server without them.
        return Err(error::usage(format!(
            "`{s}`: credentials in the URL are not sent; give them as a header \
             (-H 'Authorization: Basic ...')"
        )));
    }
    Ok(url)
}

/// Checks a request method: an HTTP token (RFC 9110 5.6.2). CONNECT is
/// refused: its answer opens a tunnel, not a response to frame.
pub fn check_method(m: &str) -> Result<()> {
    if m.is_empty() || !m.bytes().all(is_tchar) {
        return Err(error::usage(format!(
            "--method `{m}` is not an HTTP method (a token such as GET, HEAD, POST)"
        )));
    }
    if m.eq_ignore_ascii_case("CONNECT") {
        return Err(error::usage(
            "--method CONNECT opens a tunnel; load http sends requests that get responses",
        ));
    }
    Ok(())
}

/// A token character (RFC 9110 5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// One `-H 'Name: value'`, checked: the name a token, the value free of
/// control characters (a CR or LF would end the header early and inject
/// whatever follows). `Content-Length` and `Transfer-Encoding` are
/// refused: the request's framing follows from `--body`.
pub fn parse_header(h: &str) -> Result<(String, String)> {
    let Some((name, value)) = h.split_once(':') else {
        return Err(error::usage(format!(
            "-H `{h}`: a header is 'Name: value' (no colon found)"
        )));
    };
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(error::usage(format!(
            "-H `{h}`: `{name}` is not a header name (letters, digits and !#$%&'*+-.^_`|~, \
             no spaces)"
        )));
    }
    let value = value.trim_matches([' ', '\t']);
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(error::usage(format!(
            "-H `{}`: the value holds a control character (CR, LF...)",
            h.escape_debug()
        )));
    }
    for framing in ["Content-Length", "Transfer-Encoding"] {
        if name.eq_ignore_ascii_case(framing) {
            return Err(error::usage(format!(
                "-H `{h}`: {framing} is set by load http from --body"
            )));
        }
    }
    Ok((name.to_string(), value.to_string()))
}

/// `--body`: `@FILE` reads FILE, anything else is the body itself.
pub fn read_body(arg: &str) -> Result<Vec<u8>> {
    let body = match arg.strip_prefix('@') {
        Some(path) => {
            crate::input::read_bounded(Path::new(path), MAX_BODY, &format!("--body @{path}"))?
        }
        None => arg.as_bytes().to_vec(),
    };
    if body.len() > MAX_BODY {
        return Err(error::usage(format!(
            "--body is {} bytes; at most {MAX_BODY} are sent",
            body.len()
        )));
    }
    Ok(body)
}

/// Reads `--urls FILE`: one URL a line, as `[WEIGHT] [METHOD] URL`
/// (WEIGHT a positive integer, default 1; METHOD default `method`); blank
/// lines and lines starting with `#` are skipped. The same method and URL
/// on several lines is one URL whose weight is their sum.
pub fn read_urls(path: &Path, method: &str) -> Result<Vec<Target>> {
    let text = crate::input::read_text_bounded(
        path,
        MAX_URLS_FILE,
        &format!("--urls {}", path.display()),
    )?;
    let targets = parse_urls(&text, method)
        .map_err(|e| error::usage(format!("--urls {}: {e:#}", path.display())))?;
    if targets.is_empty() {
        return Err(error::usage(format!(
            "--urls {}: no URL in it (one a line: [WEIGHT] [METHOD] URL)",
            path.display()
        )));
    }
    Ok(targets)
}

/// The lines of a `--urls` file (see [`read_urls`]).
fn parse_urls(text: &str, method: &str) -> Result<Vec<Target>> {
    let mut out: Vec<Target> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |e: anyhow::Error| anyhow::anyhow!("line {}: {e:#}", n + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        let (weight, m, url) = match words[..] {
            [url] => (None, None, url),
            [first, url] if first.bytes().all(|b| b.is_ascii_digit()) => (Some(first), None, url),
            [m, url] => (None, Some(m), url),
            [w, m, url] => (Some(w), Some(m), url),
            _ => {
                return Err(anyhow::anyhow!(
                    "line {}: `{line}` is not [WEIGHT] [METHOD] URL",
                    n + 1
                ));
            }
        };
        let weight = match weight {
            None => 1,
            Some(w) => match w.parse::<u64>() {
                Ok(w) if (1..=MAX_SCHEDULE).contains(&w) => w,
                _ => {
                    return Err(anyhow::anyhow!(
                        "line {}: weight `{w}` is not an integer from 1 to {MAX_SCHEDULE}",
                        n + 1
                    ));
                }
            },
        };
        let method = m.unwrap_or(method).to_string();
        check_method(&method).map_err(at)?;
        let t = Target::new(url, method, weight).map_err(at)?;
        match out
            .iter_mut()
            .find(|o| o.url == t.url && o.method == t.method)
        {
            Some(o) => o.weight += weight,
            None => out.push(t),
        }
        if out.len() > MAX_URLS {
            return Err(anyhow::anyhow!("more than {MAX_URLS} distinct URLs"));
        }
    }
    Ok(out)
}

/// The one origin every target shares; a usage error naming the first
/// that differs otherwise.
pub fn common_origin(targets: &[Target]) -> Result<Origin> {
    let first = Origin::of(&targets[0].url);
    for t in &targets[1..] {
        let o = Origin::of(&t.url);
        if o.https != first.https || o.host != first.host || o.port != first.port {
            return Err(error::usage(format!(
                "{} and {}: every URL of a load must have the same scheme, host and port \
                 (the load connects to one address)",
                targets[0].url, t.url
            )));
        }
    }
    Ok(first)
}

/// What every request carries besides its method and path.
pub struct Extras<'a> {
    /// The user's headers, in order, their values templates (`Host`
    /// among them replaces the automatic one).
    pub headers: &'a [(String, Pieces)],
    /// The body (sent with a `Content-Length`), if any.
    pub body: Option<&'a Pieces>,
    /// Ask the server to close after answering (`--new-connection`).
    pub close: bool,
    /// Digits of every `{key}`.
    pub key_width: usize,
    /// The bytes of `{value}`.
    pub value: &'a [u8],
}

/// The request for `t` on `origin`: its bytes, or its template when a
/// field is in its path, a header value or the body.
pub fn request(t: &Target, origin: &Origin, x: &Extras) -> Built {
    let mut r = Builder::new(x.key_width, x.value);
    let has = |name: &str| x.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    r.lit(t.method.as_bytes()).lit(b" ").pieces(&t.path);
    r.lit(b" HTTP/1.1\r\n");
    if !has("Host") {
        r.lit(format!("Host: {}\r\n", origin.host_header).as_bytes());
    }
    for (n, v) in x.headers {
        r.lit(n.as_bytes()).lit(b": ").pieces(v).lit(b"\r\n");
    }
    if let Some(body) = x.body {
        r.lit(b"Content-Length: ").body_len(body).lit(b"\r\n");
    }
    if x.close && !has("Connection") {
        r.lit(b"Connection: close\r\n");
    }
    r.lit(b"\r\n");
    if let Some(body) = x.body {
        r.pieces(body);
    }
    r.build()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The order in which requests visit the targets: target `i` appears
/// `weight[i]` times (after dividing the weights by their greatest common
/// divisor), spread evenly rather than in runs (its k-th visit falls at
/// (k + 1/2) / weight of the way through), so a short run still sees every
/// URL in proportion. Request `seq` goes to `schedule[seq % len]`.
pub fn schedule(weights: &[u64]) -> Result<Vec<u16>> {
    let g = weights.iter().copied().fold(0, gcd).max(1);
    let total: u64 = weights.iter().map(|w| w / g).sum();
    if total > MAX_SCHEDULE {
        return Err(error::usage(format!(
            "--urls: the weights add up to {total} (after dividing by their common divisor \
             {g}); at most {MAX_SCHEDULE}"
        )));
    }
    let mut slots: Vec<(u64, u64, u16)> = Vec::with_capacity(total as usize);
    for (i, w) in weights.iter().enumerate() {
        let w = w / g;
        for k in 0..w {
            // The k-th visit's place, (2k + 1) / 2w, kept as a fraction
            // so ties (equal places) sort exactly, by target index.
            slots.push((2 * k + 1, 2 * w, i as u16));
        }
    }
    slots.sort_by(|a, b| {
        // a.0 / a.1 against b.0 / b.1 by cross products (exact in u128).
        let l = a.0 as u128 * b.1 as u128;
        let r = b.0 as u128 * a.1 as u128;
        l.cmp(&r).then(a.2.cmp(&b.2))
    });
    Ok(slots.into_iter().map(|s| s.2).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: &anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn urls_must_be_http_with_a_host_and_no_credentials() {
        for bad in [
            "ftp://127.0.0.1/x",
            "127.0.0.1:8080",
            "http://",
            "file:///etc/passwd",
            "http://u:p@127.0.0.1/",
            "not a url",
        ] {
            let e = parse_url(bad).unwrap_err();
            assert_eq!(code(&e), Some(2), "{bad}: {e}");
        }
        let e = parse_url("ftp://127.0.0.1/x").unwrap_err();
        assert!(e.to_string().contains("not ftp://"), "{e}");
        let u = parse_url("http://127.0.0.1:8080").unwrap();
        assert_eq!(u.as_str(), "http://127.0.0.1:8080/");
    }

    #[test]
    fn the_origin_gives_the_address_host_header_and_sni_name() {
        let o = Origin::of(&parse_url("http://127.0.0.1:8080/a").unwrap());
        assert_eq!(o.addr(), "127.0.0.1:8080");
        assert_eq!(o.host_header, "127.0.0.1:8080");
        let o = Origin::of(&parse_url("http://localhost/").unwrap());
        assert_eq!(
            (o.addr().as_str(), o.host_header.as_str()),
            ("localhost:80", "localhost")
        );
        let o = Origin::of(&parse_url("https://[::1]:8443/").unwrap());
        assert!(o.https);
        assert_eq!(o.addr(), "[::1]:8443");
        assert_eq!(o.server_name(), "::1");
        let o = Origin::of(&parse_url("https://example.com/").unwrap());
        assert_eq!((o.port, o.host_header.as_str()), (443, "example.com"));
    }

    #[test]
    fn headers_are_checked() {
        assert_eq!(
            parse_header("Accept:  text/html ").unwrap(),
            ("Accept".into(), "text/html".into())
        );
        assert_eq!(parse_header("X-Empty:").unwrap().1, "");
        for bad in [
            "NoColon",
            ": v",
            "Bad Name: v",
            "X: a\r\nInjected: yes",
            "X: a\nb",
            "Content-Length: 5",
            "transfer-encoding: chunked",
        ] {
            let e = parse_header(bad).unwrap_err();
            assert_eq!(code(&e), Some(2), "{bad:?}: {e}");
        }
    }

    #[test]
    fn methods_are_tokens_and_connect_is_refused() {
        assert!(check_method("GET").is_ok());
        assert!(check_method("PURGE").is_ok());
        for bad in ["", "G T", "GET\r\n", "CONNECT"] {
            assert_eq!(code(&check_method(bad).unwrap_err()), Some(2), "{bad:?}");
        }
    }

    fn target(url: &str, method: &str) -> Target {
        Target::new(url, method.into(), 1).unwrap()
    }

    fn lit(s: &str) -> Pieces {
        template::parse("test", s.as_bytes()).unwrap()
    }

    /// Issue 22: `--body @/dev/zero` grew to 4.7 GB although the docs
    /// promise 64 MiB; now the read stops one byte past the bound.
    #[test]
    fn a_body_file_is_bounded_while_it_is_read() {
        let e = read_body("@/dev/zero").unwrap_err();
        assert_eq!(code(&e), Some(2));
        assert!(
            e.to_string()
                .contains("--body @/dev/zero: larger than 67108864"),
            "{e}"
        );
        let e = read_urls(Path::new("/dev/zero"), "GET").unwrap_err();
        assert_eq!(code(&e), Some(2));
    }

    #[test]
    fn request_bytes_carry_host_headers_body_and_close() {
        let t = target("http://127.0.0.1:8080/a/b?x=1&y=2#frag", "POST");
        let o = Origin::of(&t.url);
        let headers = vec![("Accept".to_string(), lit("*/*"))];
        let r = request(
            &t,
            &o,
            &Extras {
                headers: &headers,
                body: Some(&lit("hello")),
                close: true,
                key_width: 1,
                value: b"",
            },
        );
        assert_eq!(
            String::from_utf8(r.fixed().unwrap().to_vec()).unwrap(),
            "POST /a/b?x=1&y=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
        // A Host of the user's replaces the automatic one; nothing else
        // is added without a body or --new-connection.
        let headers = vec![("host".to_string(), lit("example.com"))];
        let t = target("http://127.0.0.1/", "GET");
        let r = request(
            &t,
            &Origin::of(&t.url),
            &Extras {
                headers: &headers,
                body: None,
                close: false,
                key_width: 1,
                value: b"",
            },
        );
        assert_eq!(
            r.fixed(),
            Some(&b"GET / HTTP/1.1\r\nhost: example.com\r\n\r\n"[..])
        );
    }

    #[test]
    fn a_urls_file_reads_weights_and_methods() {
        let text = "# comment\n\n3 http://127.0.0.1:1/a\nHEAD http://127.0.0.1:1/b\n\
                    2 POST http://127.0.0.1:1/c\nhttp://127.0.0.1:1/a\n";
        let t = parse_urls(text, "GET").unwrap();
        let got: Vec<(String, u64)> = t.iter().map(|t| (t.name(), t.weight)).collect();
        assert_eq!(
            got,
            [
                ("GET http://127.0.0.1:1/a".to_string(), 4),
                ("HEAD http://127.0.0.1:1/b".to_string(), 1),
                ("POST http://127.0.0.1:1/c".to_string(), 2),
            ]
        );
        for bad in [
            "0 http://127.0.0.1/",
            "1 GET http://127.0.0.1/ extra",
            "G@T http://127.0.0.1/",
            "ftp://127.0.0.1/",
        ] {
            let e = parse_urls(bad, "GET").unwrap_err();
            assert!(e.to_string().starts_with("line 1:"), "{bad}: {e}");
        }
        let two = parse_urls("http://127.0.0.1:1/\nhttp://127.0.0.2:1/\n", "GET").unwrap();
        assert_eq!(code(&common_origin(&two).unwrap_err()), Some(2));
        let schemes = parse_urls("http://127.0.0.1:1/\nhttps://127.0.0.1:1/\n", "GET").unwrap();
        assert!(common_origin(&schemes).is_err());
        // The default port written out is the same origin.
        let same = parse_urls("http://127.0.0.1/\nhttp://127.0.0.1:80/x\n", "GET").unwrap();
        assert!(common_origin(&same).is_ok());
    }

    #[test]
    fn the_schedule_interleaves_by_weight() {
        assert_eq!(schedule(&[1, 1, 1]).unwrap(), [0, 1, 2]);
        // Weights 4:2 reduce to 2:1.
        assert_eq!(schedule(&[4, 2]).unwrap(), [0, 1, 0]);
        let s = schedule(&[5, 1, 1]).unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.iter().filter(|i| **i == 0).count(), 5);
        // Spread out: the light targets are not at the end together.
        assert_eq!(s, [0, 0, 0, 1, 2, 0, 0]);
        let e = schedule(&[MAX_SCHEDULE, 1]).unwrap_err();
        assert_eq!(code(&e), Some(2));
    }
}
