//! `load redis`: commands from templates (`keyspace`) sent as RESP2
//! arrays of bulk strings, answers read by RESP2's framing over persistent
//! connections, `--pipeline` requests in flight on each. This file is the
//! codec ([`Resp`]); the exchange around it is the key-value core's
//! (`kv`), shared with memcached.
//!
//! The response parser ([`RespCursor`]) is a byte-level state machine that
//! keeps no bytes, only where it is: it resumes across reads at any byte,
//! skips bulk payloads by count, and walks nested arrays with a fixed
//! stack of remaining element counts. Lengths are bounded (a bulk string
//! of at most [`MAX_BULK`], arrays of at most [`MAX_ARRAY`] elements
//! nested at most [`MAX_DEPTH`] deep, simple lines of at most
//! [`MAX_LINE`]), and anything that is not RESP is a protocol error that
//! closes the connection. RESP3's types are read too, for connections
//! opened with `--hello 3`: null `_`, boolean `#`, double `,`, big number
//! `(` and blob error `!`, verbatim string `=`, map `%` (two elements a
//! pair), set `~`, and attribute `|` (its pairs, then the element they
//! annotate); a push `>` answers no request and is a protocol error. What
//! a whole reply means:
//!
//! - `-...` or `!N` at the top: the request failed (`server_error`:
//!   `-ERR`, `-WRONGTYPE`...); the connection goes on.
//! - to a lookup command (GET, GETDEL, GETEX, HGET): a bulk or verbatim
//!   string is a hit, a null (`$-1`, `*-1`, RESP3's `_`) a miss.
//! - anything else well-formed: a plain answer.
//!
//! `--auth @FILE` (or REDISCLI_AUTH), `--user` and `--hello` open every
//! connection with one `AUTH` or `HELLO` command ([`RedisArgs`]), the
//! workload's on-connect step; a refusal fails the connection as
//! `on_connect_refused` and the report quotes the server's answer.

use anyhow::Result;

use crate::load::KvArgs;
use crate::load::spec::{Registered, TargetForm};
use crate::load::workload::{ErrorClass, Outcome, Parsed, TcpWorkload};
use crate::load::workloads::keyspace::{Block, KvSpec, RequestBuilder, Template};
use crate::load::workloads::kv::{self, KvExchange, KvProtocol};
use crate::load::workloads::kv_options::{KvLoad, KvOptions};

/// The commands when no --command is given (memtier_benchmark's mix: a
/// SET per ten GETs, so GETs find keys once SETs have filled them).
pub const DEFAULT_COMMANDS: [&str; 2] = ["SET key:{key} {value}", "GET key:{key}"];
/// Their ratio.
pub const DEFAULT_RATIO: [u32; 2] = [1, 10];

/// Commands whose bulk-string reply is a hit and null reply a miss.
const LOOKUPS: [&str; 4] = ["GET", "GETDEL", "GETEX", "HGET"];

/// Longest bulk string accepted in a reply (redis's own proto-max-bulk-len
/// default is 512 MiB).
pub const MAX_BULK: u64 = 1 << 30;
/// Most elements of one array in a reply.
pub const MAX_ARRAY: u64 = 1 << 31;
/// Deepest nesting of arrays in a reply.
pub const MAX_DEPTH: usize = 16;
/// Longest simple string or error line (`+...`, `-...`) in a reply.
pub const MAX_LINE: u32 = 64 * 1024;

/// The redis workload of a command line.
pub fn workload(a: &KvArgs) -> TcpWorkload<RedisExchange> {
    kv::workload(a, |spec| Ok(RedisExchange::new(spec)))
}

/// RESP2, the codec of the key-value core (`kv`): requests are arrays of
/// bulk strings, replies are read by [`RespCursor`].
pub struct Resp;

/// The RESP2 exchange of a set of templates.
pub type RedisExchange = KvExchange<Resp>;

/// The command name as redis counts it (`cmdstat_get` is `GET`): upper
/// case.
fn command_name(t: &Template) -> String {
    String::from_utf8_lossy(t.name()).to_ascii_uppercase()
}

impl RedisExchange {
    /// Encodes each template as a RESP2 array of bulk strings.
    pub fn new(spec: KvSpec) -> Self {
        let requests = spec
            .templates
            .iter()
            .map(|t| {
                let mut b = RequestBuilder::new(&spec.space, &spec.value);
                b.lit(format!("*{}\r\n", t.words.len()).as_bytes());
                for w in &t.words {
                    let len = b.word_len(w);
                    b.lit(format!("${len}\r\n").as_bytes()).word(w).lit(b"\r\n");
                }
                b.build()
            })
            .collect();
        // Per template: a lookup (hit or miss counted).
        let lookup = spec
            .templates
            .iter()
            .map(|t| LOOKUPS.contains(&command_name(t).as_str()))
            .collect();
        Self::from_parts(spec, requests, lookup)
    }
}

impl KvProtocol for Resp {
    const NAME: &'static str = "redis";
    const DEFAULT_COMMANDS: &'static [&'static str] = &DEFAULT_COMMANDS;
    const DEFAULT_RATIO: &'static [u32] = &DEFAULT_RATIO;

    /// Whether the command is a lookup (hit or miss counted).
    type Command = bool;
    type Cursor = RespCursor;

    fn op_name(t: &Template) -> String {
        command_name(t)
    }

    #[inline]
    fn parse(cursor: &mut RespCursor, data: &[u8], lookup: bool) -> Parsed {
        match cursor.feed(data) {
            Feed::Partial => Parsed::Partial,
            Feed::Error(class) => Parsed::Error(class),
            Feed::Complete(n, reply) => {
                let mut o = Outcome::OK;
                match reply {
                    Reply::Error => o.error = Some(ErrorClass::ServerError),
                    Reply::Bulk if lookup => o.hit = Some(true),
                    Reply::Null if lookup => o.hit = Some(false),
                    _ => {}
                }
                Parsed::Complete(n, o)
            }
        }
    }

    fn started(cursor: &RespCursor) -> bool {
        cursor.started()
    }

    /// AUTH's `+OK`, HELLO's map (or array, with HELLO 2); a `-...` is a
    /// refusal.
    fn parse_on_connect(cursor: &mut RespCursor, data: &[u8]) -> Parsed {
        Self::parse(cursor, data, false)
    }
}

/// What a whole top-level reply was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reply {
    /// `+...`, `:...`, an array.
    #[default]
    Plain,
    /// `-...`: the request failed.
    Error,
    /// A bulk string (`$N`, N >= 0).
    Bulk,
    /// A null bulk string or null array (`$-1`, `*-1`).
    Null,
}

/// What [`RespCursor::feed`] made of some bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// All consumed; the reply is not whole yet.
    Partial,
    /// The reply is whole after this many bytes.
    Complete(usize, Reply),
    /// Not RESP2.
    Error(ErrorClass),
}

/// What the header line being read introduces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Head {
    /// `+`, `-`, and RESP3's `#`, `,`, `(`: a line that is the element.
    #[default]
    Simple,
    /// RESP3's `_`: an empty line, a null.
    Null,
    Int,
    /// `$`, and RESP3's `!` (an error) and `=` (verbatim): a length, then
    /// that many bytes.
    Bulk,
    /// `*`, and RESP3's `~`: that many elements.
    Array,
    /// RESP3's `%`: that many pairs.
    Map,
    /// RESP3's `|`: that many pairs, then the element they annotate.
    Attribute,
}

/// Where the parser is inside a reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Before an element's type byte.
    #[default]
    Type,
    /// Inside a `+`/`-` line, before its CR.
    Simple,
    /// Inside a `:`/`$`/`*` number, before its CR.
    Number(Head),
    /// After a header line's CR, before its LF.
    HeadLf(Head),
    /// Inside a bulk payload or its closing CR LF.
    Payload(Block),
}

/// Parse state of one connection's awaited reply (see the module header).
#[derive(Clone, Debug, Default)]
pub struct RespCursor {
    state: State,
    /// Remaining elements of each enclosing array, innermost last.
    stack: [u32; MAX_DEPTH],
    depth: u8,
    /// The number being read: its magnitude, sign and digit count.
    num: u64,
    neg: bool,
    digits: u8,
    /// Bytes of the simple line being read.
    line: u32,
    /// What the top-level reply is, once its type byte is read.
    reply: Reply,
    /// The depth of the top-level reply's element: 0, or, when the reply
    /// opens with attributes, the depth inside the innermost of them
    /// (whose last element is the one annotated).
    top_depth: u8,
    /// The line being read is RESP3's null (`_`), which must be empty.
    null_line: bool,
    /// The header being read may be RESP2's null (`$-1`, `*-1`): RESP3's
    /// own lengths are never negative.
    nullable: bool,
    /// Any byte of the reply consumed.
    started: bool,
}

impl RespCursor {
    /// True once any byte of the reply has been consumed.
    pub fn started(&self) -> bool {
        self.started
    }

    /// True when the element about to be read is the top-level reply: at
    /// depth 0, or the element an opening attribute annotates.
    fn at_top(&self) -> bool {
        let d = self.top_depth;
        self.depth == d && (d == 0 || self.stack[d as usize - 1] == 1)
    }

    /// Consumes `data`, the next bytes of the reply; stops at its end.
    pub fn feed(&mut self, data: &[u8]) -> Feed {
        let mut i = 0;
        if !data.is_empty() {
            self.started = true;
        }
        while i < data.len() {
            match self.state {
                State::Type => {
                    let top = self.at_top();
                    let head = match data[i] {
                        b'+' | b'#' | b',' | b'(' => Head::Simple,
                        b'-' | b'!' => {
                            if top {
                                self.reply = Reply::Error;
                            }
                            if data[i] == b'-' {
                                Head::Simple
                            } else {
                                Head::Bulk
                            }
                        }
                        b'_' => Head::Null,
                        b':' => Head::Int,
                        b'$' | b'=' => Head::Bulk,
                        b'*' | b'~' => Head::Array,
                        b'%' => Head::Map,
                        b'|' => Head::Attribute,
                        _ => return Feed::Error(ErrorClass::Protocol),
                    };
                    i += 1;
                    self.line = 0;
                    (self.num, self.neg, self.digits) = (0, false, 0);
                    self.state = match head {
                        Head::Simple => State::Simple,
                        Head::Null => State::Simple,
                        _ => State::Number(head),
                    };
                    self.null_line = head == Head::Null;
                    self.nullable = matches!(data[i - 1], b'$' | b'*');
                }
                State::Simple => {
                    let rest = &data[i..];
                    let end = rest.iter().position(|&b| b == b'\r' || b == b'\n');
                    let take = end.unwrap_or(rest.len());
                    self.line = self.line.saturating_add(take as u32);
                    if self.line > MAX_LINE {
                        return Feed::Error(ErrorClass::Protocol);
                    }
                    i += take;
                    if let Some(e) = end {
                        if rest[e] == b'\n' || (self.null_line && self.line > 0) {
                            return Feed::Error(ErrorClass::Protocol);
                        }
                        i += 1;
                        let head = if self.null_line {
                            Head::Null
                        } else {
                            Head::Simple
                        };
                        self.state = State::HeadLf(head);
                    }
                }
                State::Number(head) => {
                    let b = data[i];
                    i += 1;
                    match b {
                        b'-' if self.digits == 0 && !self.neg => self.neg = true,
                        b'0'..=b'9' => {
                            let v = self
                                .num
                                .checked_mul(10)
                                .and_then(|v| v.checked_add(u64::from(b - b'0')));
                            match v {
                                Some(v) => self.num = v,
                                None => return Feed::Error(ErrorClass::Protocol),
                            }
                            self.digits = self.digits.saturating_add(1);
                        }
                        b'\r' if self.digits > 0 => self.state = State::HeadLf(head),
                        _ => return Feed::Error(ErrorClass::Protocol),
                    }
                }
                State::HeadLf(head) => {
                    if data[i] != b'\n' {
                        return Feed::Error(ErrorClass::Protocol);
                    }
                    i += 1;
                    match self.header_done(head) {
                        Ok(true) => {
                            if let Some(f) = self.element_done(i) {
                                return f;
                            }
                        }
                        Ok(false) => {}
                        Err(class) => return Feed::Error(class),
                    }
                }
                State::Payload(mut block) => {
                    let done = match block.step(data, &mut i) {
                        Ok(done) => done,
                        Err(class) => return Feed::Error(class),
                    };
                    self.state = State::Payload(block);
                    if done && let Some(f) = self.element_done(i) {
                        return f;
                    }
                }
            }
        }
        Feed::Partial
    }

    /// A header line ended: Ok(true) when it is a whole element (simple
    /// string, error, integer, null, empty array), Ok(false) when a payload
    /// or elements follow.
    fn header_done(&mut self, head: Head) -> Result<bool, ErrorClass> {
        let top = self.at_top();
        match head {
            Head::Simple | Head::Int => {
                // ':' takes any sign; a '-' alone was refused at its CR.
                Ok(true)
            }
            Head::Null => {
                if top {
                    self.reply = Reply::Null;
                }
                Ok(true)
            }
            Head::Bulk | Head::Array | Head::Map | Head::Attribute if self.neg => {
                if self.num != 1 || !self.nullable {
                    return Err(ErrorClass::Protocol);
                }
                if top {
                    self.reply = Reply::Null;
                }
                Ok(true)
            }
            Head::Bulk => {
                if self.num > MAX_BULK {
                    return Err(ErrorClass::Protocol);
                }
                if top && self.reply != Reply::Error {
                    self.reply = Reply::Bulk;
                }
                self.state = State::Payload(Block::Bytes(self.num));
                Ok(false)
            }
            Head::Array | Head::Map | Head::Attribute => {
                // Elements to read: a map's pairs are two each, and an
                // attribute's pairs are followed by the element they
                // annotate.
                let elements = match head {
                    Head::Array => Some(self.num),
                    Head::Map => self.num.checked_mul(2),
                    _ => self.num.checked_mul(2).and_then(|n| n.checked_add(1)),
                };
                let Some(elements) = elements.filter(|n| *n <= MAX_ARRAY) else {
                    return Err(ErrorClass::Protocol);
                };
                if elements == 0 {
                    return Ok(true);
                }
                if self.depth as usize == MAX_DEPTH {
                    return Err(ErrorClass::Protocol);
                }
                if head == Head::Attribute && top {
                    self.top_depth = self.depth + 1;
                }
                self.stack[self.depth as usize] = elements as u32;
                self.depth += 1;
                self.state = State::Type;
                Ok(false)
            }
        }
    }

    /// An element ended at byte `i`: the reply is whole when it was the
    /// top-level one or the last of every enclosing array; otherwise the
    /// next element's type byte comes.
    fn element_done(&mut self, i: usize) -> Option<Feed> {
        self.state = State::Type;
        while self.depth > 0 {
            let top = &mut self.stack[self.depth as usize - 1];
            *top -= 1;
            if *top > 0 {
                return None;
            }
            self.depth -= 1;
        }
        Some(Feed::Complete(i, self.reply))
    }
}

/// The registration of `load redis`.
pub static WORKLOAD: Registered<KvOptions<Redis>> = Registered::new(
    "redis",
    "Redis (RESP2) commands built from templates over a key space",
    TargetForm::Addr,
);

/// The redis protocol of the key-value workloads.
pub struct Redis;

impl KvLoad for Redis {
    type Own = RedisArgs;

    fn load(a: KvArgs, own: RedisArgs) -> Result<crate::load::Load> {
        let step = own.on_connect(std::env::var_os(AUTH_ENV))?;
        let mut w = workload(&a);
        if let Some(step) = step {
            w.config
                .workload_options
                .insert("on_connect".into(), serde_json::json!(step.described));
            w.exchange = w.exchange.map(|e| e.with_on_connect(Some(step.bytes)));
        }
        Ok(crate::load::Load::tcp(w, a.tcp))
    }
}

/// The environment variable a password is taken from when `--auth` is
/// not given, as redis-cli does.
pub const AUTH_ENV: &str = "REDISCLI_AUTH";
/// The longest password file read.
pub const MAX_PASSWORD: usize = 64 * 1024;

/// `load redis`'s own options: how each connection opens.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RedisArgs {
    /// The password every connection authenticates with, from a file:
    /// @FILE (its bytes, less one final newline). Without --auth, the
    /// REDISCLI_AUTH environment variable is used when set, as redis-cli
    /// does. Never the password itself: every local user can read a
    /// command line in /proc. Neither is written to any report.
    #[arg(long, value_name = "@FILE")]
    pub auth: Option<String>,
    /// The ACL user to authenticate as (default: the server's `default`
    /// user); needs a password.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Open every connection with HELLO 2 or HELLO 3 (RESP3 replies), with
    /// the password when there is one.
    #[arg(long, value_name = "2|3", value_parser = clap::value_parser!(u8).range(2..=3))]
    pub hello: Option<u8>,
}

/// The on-connect step of a run: the command's bytes and how the report
/// names it (without the password).
#[derive(Debug)]
pub struct OnConnect {
    /// The RESP command (it holds the password: never printed).
    pub bytes: Vec<u8>,
    /// `AUTH (password from @FILE)`, `HELLO 3 AUTH app (password from
    /// REDISCLI_AUTH)`.
    pub described: String,
}

impl RedisArgs {
    /// The step these options ask for (`env`: REDISCLI_AUTH's value), or
    /// None. Usage errors name the option, never the password.
    pub fn on_connect(&self, env: Option<std::ffi::OsString>) -> Result<Option<OnConnect>> {
        use std::os::unix::ffi::OsStringExt;
        let password = match (&self.auth, env) {
            (Some(a), _) => {
                let Some(path) = a.strip_prefix('@') else {
                    return Err(crate::error::usage(format!(
                        "--auth takes @FILE, a file holding the password (or set {AUTH_ENV}): a \
                         password on the command line is readable by every local user"
                    )));
                };
                let what = format!("--auth {a}");
                let mut bytes =
                    crate::input::read_secret(std::path::Path::new(path), MAX_PASSWORD, &what)?;
                if bytes.ends_with(b"\n") {
                    bytes.pop();
                    if bytes.ends_with(b"\r") {
                        bytes.pop();
                    }
                }
                Some((bytes, format!("password from {a}")))
            }
            (None, Some(v)) => Some((v.into_vec(), format!("password from {AUTH_ENV}"))),
            (None, None) => None,
        };
        if let Some((_, from)) = password.as_ref().filter(|(p, _)| p.is_empty()) {
            return Err(crate::error::usage(format!("the {from} is empty")));
        }
        if self.user.is_some() && password.is_none() {
            return Err(crate::error::usage(format!(
                "--user needs a password: --auth @FILE or {AUTH_ENV}"
            )));
        }
        let mut words: Vec<Vec<u8>> = Vec::new();
        let mut shown: Vec<String> = Vec::new();
        if let Some(v) = self.hello {
            words.push(b"HELLO".to_vec());
            words.push(v.to_string().into_bytes());
            shown.push(format!("HELLO {v}"));
        }
        if let Some((pw, from)) = password {
            let user = self.user.clone();
            words.push(b"AUTH".to_vec());
            match (&user, self.hello.is_some()) {
                (Some(u), _) => words.push(u.clone().into_bytes()),
                // HELLO's AUTH always names a user.
                (None, true) => words.push(b"default".to_vec()),
                (None, false) => {}
            }
            words.push(pw);
            let who = user.map(|u| format!(" {u}")).unwrap_or_default();
            shown.push(format!("AUTH{who} ({from})"));
        }
        if words.is_empty() {
            return Ok(None);
        }
        let mut bytes = format!("*{}\r\n", words.len()).into_bytes();
        for w in &words {
            bytes.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            bytes.extend_from_slice(w);
            bytes.extend_from_slice(b"\r\n");
        }
        Ok(Some(OnConnect {
            bytes,
            described: shown.join(" "),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::KeyDist;
    use crate::load::workload::Exchange;

    #[test]
    fn resp3_types_are_read_and_nulls_are_misses() {
        let whole = |b: &[u8]| match parse_every_way(b) {
            Feed::Complete(n, r) => {
                assert_eq!(n, b.len(), "{:?}", String::from_utf8_lossy(b));
                r
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
        };
        assert_eq!(whole(b"_\r\n"), Reply::Null);
        assert_eq!(whole(b"#t\r\n"), Reply::Plain);
        assert_eq!(whole(b",3.14\r\n"), Reply::Plain);
        assert_eq!(
            whole(b"(3492890328409238509324850943850943825024385\r\n"),
            Reply::Plain
        );
        assert_eq!(whole(b"!21\r\nSYNTAX invalid syntax\r\n"), Reply::Error);
        assert_eq!(whole(b"=15\r\ntxt:Some string\r\n"), Reply::Bulk);
        assert_eq!(
            whole(b"%2\r\n+first\r\n:1\r\n+second\r\n_\r\n"),
            Reply::Plain
        );
        assert_eq!(whole(b"~2\r\n+a\r\n+b\r\n"), Reply::Plain);
        assert_eq!(whole(b"%0\r\n"), Reply::Plain);
        // An attribute, then the element it annotates: that element is the
        // reply (a bulk string here: a hit).
        assert_eq!(
            whole(b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n$3\r\nabc\r\n"),
            Reply::Bulk
        );
        assert_eq!(whole(b"|1\r\n+ttl\r\n:3\r\n_\r\n"), Reply::Null);
        // HELLO 3's answer: a map with a nested array.
        assert_eq!(
            whole(b"%3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n"),
            Reply::Plain
        );
        for bad in [
            &b">2\r\n+message\r\n+x\r\n"[..],
            b"_x\r\n",
            b"%-2\r\n",
            b"%4294967296\r\n",
            b"|2147483648\r\n",
        ] {
            assert!(
                matches!(
                    RespCursor::default().feed(bad),
                    Feed::Error(ErrorClass::Protocol)
                ),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A miss and a hit under RESP3, as a lookup's outcome.
        let miss = Resp::parse(&mut RespCursor::default(), b"_\r\n", true);
        assert!(matches!(miss, Parsed::Complete(3, o) if o.hit == Some(false)));
    }

    #[test]
    fn the_on_connect_step_is_one_auth_or_hello_command_and_never_a_password_word() {
        let dir = std::env::temp_dir().join(format!("ss-redis-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        let at = format!("@{}", file.display());
        let args = |auth: Option<&str>, user: Option<&str>, hello: Option<u8>| RedisArgs {
            auth: auth.map(String::from),
            user: user.map(String::from),
            hello,
        };
        let step = |a: RedisArgs, env: Option<&str>| a.on_connect(env.map(Into::into)).unwrap();
        assert!(step(args(None, None, None), None).is_none());
        let s = step(args(Some(&at), None, None), None).unwrap();
        assert_eq!(s.bytes, b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n");
        assert!(!s.described.contains("s3cret"), "{}", s.described);
        assert!(s.described.contains(&at), "{}", s.described);
        let s = step(args(Some(&at), Some("app"), None), None).unwrap();
        assert_eq!(
            s.bytes,
            b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$6\r\ns3cret\r\n"
        );
        let s = step(args(None, None, Some(3)), Some("envpw")).unwrap();
        assert_eq!(
            s.bytes,
            b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$5\r\nenvpw\r\n"
        );
        assert_eq!(s.described, "HELLO 3 AUTH (password from REDISCLI_AUTH)");
        let s = step(args(None, None, Some(2)), None).unwrap();
        assert_eq!(s.bytes, b"*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n");
        // --auth beats the environment.
        let s = step(args(Some(&at), None, None), Some("envpw")).unwrap();
        assert!(s.bytes.ends_with(b"s3cret\r\n"));
        // Refused: a password as a word, a user without one, an empty one.
        for (a, env) in [
            (args(Some("s3cret"), None, None), None),
            (args(None, Some("app"), None), None),
            (args(None, None, None), Some("")),
        ] {
            let e = a.on_connect(env.map(Into::into)).unwrap_err();
            assert!(!format!("{e:#}").contains("s3cret"), "{e:#}");
            let code = e.downcast_ref::<crate::error::Exit>().map(|x| x.code);
            assert_eq!(code, Some(2), "{e:#}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Feeds `bytes` whole and split at every boundary (and byte by byte):
    /// each way must give the same answer.
    fn parse_every_way(bytes: &[u8]) -> Feed {
        let whole = RespCursor::default().feed(bytes);
        for cut in 1..bytes.len() {
            let mut c = RespCursor::default();
            let first = c.feed(&bytes[..cut]);
            let got = match first {
                Feed::Partial => match c.feed(&bytes[cut..]) {
                    Feed::Complete(n, r) => Feed::Complete(n + cut, r),
                    other => other,
                },
                other => other,
            };
            assert_eq!(
                got,
                whole,
                "split at {cut} of {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let mut c = RespCursor::default();
        let mut got = Feed::Partial;
        for (k, b) in bytes.iter().enumerate() {
            got = match c.feed(std::slice::from_ref(b)) {
                Feed::Complete(_, r) => Feed::Complete(k + 1, r),
                Feed::Partial => Feed::Partial,
                e => e,
            };
            if got != Feed::Partial {
                break;
            }
        }
        assert_eq!(got, whole, "byte by byte");
        whole
    }

    #[test]
    fn every_reply_type_parses_split_at_every_byte() {
        for (bytes, want) in [
            (&b"+OK\r\n"[..], Reply::Plain),
            (b"-ERR unknown command 'FOO'\r\n", Reply::Error),
            (b":0\r\n", Reply::Plain),
            (b":-42\r\n", Reply::Plain),
            (b"$5\r\nhello\r\n", Reply::Bulk),
            (b"$0\r\n\r\n", Reply::Bulk),
            (b"$-1\r\n", Reply::Null),
            (b"*-1\r\n", Reply::Null),
            (b"*0\r\n", Reply::Plain),
            (b"*3\r\n$1\r\na\r\n$-1\r\n:7\r\n", Reply::Plain),
            // Nested, with errors and nulls inside: the top decides.
            (
                b"*2\r\n*2\r\n+a\r\n-ERR inner\r\n*1\r\n*0\r\n",
                Reply::Plain,
            ),
            // A payload of CR LF CR is skipped by count.
            (b"*1\r\n*1\r\n*1\r\n$3\r\n\r\n\r\r\n", Reply::Plain),
        ] {
            assert_eq!(parse_every_way(bytes), Feed::Complete(bytes.len(), want));
        }
    }

    #[test]
    fn pipelined_replies_in_one_read_end_where_each_does() {
        let data = b"+OK\r\n$3\r\nabc\r\n$-1\r\n-ERR x\r\n*2\r\n:1\r\n:2\r\n";
        let mut i = 0;
        let mut got = Vec::new();
        while i < data.len() {
            match RespCursor::default().feed(&data[i..]) {
                Feed::Complete(n, r) => {
                    got.push(r);
                    i += n;
                }
                other => panic!("{other:?} at {i}"),
            }
        }
        assert_eq!(
            got,
            [
                Reply::Plain,
                Reply::Bulk,
                Reply::Null,
                Reply::Error,
                Reply::Plain
            ]
        );
    }

    #[test]
    fn garbage_and_broken_frames_are_protocol_errors() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\n"[..],
            b"+OK\n",
            b"+OK\rX",
            b"$abc\r\n",
            b"$\r\n",
            b"$-2\r\n",
            b"$--1\r\n",
            b"*-5\r\n",
            b":1x\r\n",
            b"$3\r\nabcX\r\n",
            b"$3\r\nabc\rX",
            b"*1\r\n?\r\n",
            b":99999999999999999999999\r\n",
        ] {
            assert_eq!(
                parse_every_way(bad),
                Feed::Error(ErrorClass::Protocol),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn oversized_lengths_and_depths_are_refused_before_any_payload() {
        let big = format!("${}\r\n", MAX_BULK + 1);
        assert_eq!(
            RespCursor::default().feed(big.as_bytes()),
            Feed::Error(ErrorClass::Protocol)
        );
        let ok = format!("${MAX_BULK}\r\n");
        assert_eq!(RespCursor::default().feed(ok.as_bytes()), Feed::Partial);
        let arr = format!("*{}\r\n", MAX_ARRAY + 1);
        assert_eq!(
            RespCursor::default().feed(arr.as_bytes()),
            Feed::Error(ErrorClass::Protocol)
        );
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        assert_eq!(
            RespCursor::default().feed(deep.as_bytes()),
            Feed::Error(ErrorClass::Protocol)
        );
        let deep_ok = format!("{}:1\r\n", "*1\r\n".repeat(MAX_DEPTH));
        assert!(matches!(
            RespCursor::default().feed(deep_ok.as_bytes()),
            Feed::Complete(..)
        ));
        let mut long = vec![b'+'];
        long.resize(MAX_LINE as usize + 2, b'a');
        assert_eq!(
            RespCursor::default().feed(&long),
            Feed::Error(ErrorClass::Protocol)
        );
    }

    #[test]
    fn a_close_mid_reply_is_a_short_read_and_between_replies_a_close() {
        let ex = exchange(&["GET k{key}"], None);
        let mut c = RespCursor::default();
        assert_eq!(ex.on_eof(&c), ErrorClass::Closed);
        assert_eq!(ex.parse(&mut c, b"$10\r\nabc", 0), Parsed::Partial);
        assert_eq!(ex.on_eof(&c), ErrorClass::ShortRead);
    }

    fn exchange(cmds: &[&str], ratio: Option<Vec<u32>>) -> RedisExchange {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: KvArgs,
        }
        let mut a = P::parse_from(["x", "127.0.0.1:1", "--keys", "1000"]).a;
        a.commands = cmds.iter().map(|s| s.to_string()).collect();
        a.ratio = ratio.map(crate::load::Ratio);
        a.key_dist = KeyDist::Uniform;
        a.value_size = 4;
        RedisExchange::new(KvSpec::from_args(&a, &DEFAULT_COMMANDS, &DEFAULT_RATIO).unwrap())
    }

    #[test]
    fn requests_are_resp_arrays_of_bulk_strings() {
        let ex = exchange(&["SET k:{key} {value}", "get k:{key}"], None);
        let mut out = Vec::new();
        ex.push_request(&mut out, 0);
        let s = String::from_utf8(out).unwrap();
        let key = &s[s.find("k:").unwrap()..][..5];
        assert_eq!(
            s,
            format!("*3\r\n$3\r\nSET\r\n$5\r\n{key}\r\n$4\r\n0123\r\n")
        );
        let mut out = Vec::new();
        ex.push_request(&mut out, 1);
        assert!(out.starts_with(b"*2\r\n$3\r\nget\r\n$5\r\nk:"));
        assert_eq!(ex.ops(), ["SET", "GET"]);
        assert_eq!(ex.request_len(), None);
    }

    #[test]
    fn outcomes_name_the_command_and_count_hits_misses_and_errors() {
        // 1:1:1: seq % 3 == 0 is a SET, the others GETs.
        let ex = exchange(&["SET k{key} {value}", "GET k{key}", "GET j{key}"], None);
        assert_eq!(ex.ops(), ["SET", "GET"]);
        let out = |data: &[u8], seq| match ex.parse(&mut RespCursor::default(), data, seq) {
            Parsed::Complete(n, o) => {
                assert_eq!(n, data.len());
                o
            }
            other => panic!("{other:?}"),
        };
        let set = out(b"+OK\r\n", 0);
        assert_eq!((set.op, set.hit, set.error), (0, None, None));
        let hit = out(b"$4\r\n0123\r\n", 1);
        assert_eq!((hit.op, hit.hit, hit.error), (1, Some(true), None));
        // The second GET template counts as GET too.
        let miss = out(b"$-1\r\n", 2);
        assert_eq!((miss.op, miss.hit), (1, Some(false)));
        let err = out(b"-WRONGTYPE Operation against a key\r\n", 4);
        assert_eq!(err.error, Some(ErrorClass::ServerError));
        assert_eq!(err.op, 1);
        // A SET answered by a bulk string is no lookup.
        assert_eq!(out(b"$1\r\nx\r\n", 3).hit, None);
    }

    // Property tests: replies from a reference model of RESP2, encoded,
    // read whole, cut at every byte and pipelined; mutated replies read
    // as a recursive reference reader of the same grammar reads them.

    use crate::hostile;
    use proptest::prelude::*;

    /// A RESP2 or RESP3 value.
    #[derive(Clone, Debug)]
    enum Value {
        Simple(Vec<u8>),
        Error(Vec<u8>),
        Int(i64),
        Bulk(Vec<u8>),
        NullBulk,
        NullArray,
        Array(Vec<Value>),
        /// RESP3: `_`.
        Null,
        /// RESP3's line types: `#`, `,`, `(` with their line.
        Line(u8, Vec<u8>),
        /// RESP3: `!` (an error) or `=` (verbatim) with their bytes.
        Blob(u8, Vec<u8>),
        /// RESP3: `~` (a set) or `%` (a map: pairs, flattened here).
        Aggregate(u8, Vec<Value>),
        /// RESP3: `|`, its pairs (flattened), then the element they annotate.
        Attribute(Vec<Value>, Box<Value>),
    }

    /// Bytes of a simple line: anything but CR and LF.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            any::<u8>().prop_filter("no CR or LF", |b| *b != b'\r' && *b != b'\n'),
            0..24,
        )
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            line().prop_map(Value::Simple),
            line().prop_map(Value::Error),
            any::<i64>().prop_map(Value::Int),
            prop::collection::vec(any::<u8>(), 0..32).prop_map(Value::Bulk),
            Just(Value::NullBulk),
            Just(Value::NullArray),
            Just(Value::Null),
            (prop::sample::select(vec![b'#', b',', b'(']), line())
                .prop_map(|(t, l)| Value::Line(t, l)),
            (
                prop::sample::select(vec![b'!', b'=']),
                prop::collection::vec(any::<u8>(), 0..32)
            )
                .prop_map(|(t, b)| Value::Blob(t, b)),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(inner.clone(), 0..6).prop_map(|v| Value::Aggregate(b'~', v)),
                prop::collection::vec(inner.clone(), 0..3).prop_map(|v| {
                    let mut flat = v.clone();
                    flat.extend(v);
                    Value::Aggregate(b'%', flat)
                }),
                (prop::collection::vec(inner.clone(), 0..2), inner).prop_map(|(v, e)| {
                    let mut flat = v.clone();
                    flat.extend(v);
                    Value::Attribute(flat, Box::new(e))
                }),
            ]
        })
    }

    impl Value {
        fn encode(&self, out: &mut Vec<u8>) {
            match self {
                Value::Simple(s) | Value::Error(s) => {
                    out.push(if matches!(self, Value::Simple(_)) {
                        b'+'
                    } else {
                        b'-'
                    });
                    out.extend_from_slice(s);
                    out.extend_from_slice(b"\r\n");
                }
                Value::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
                Value::Bulk(b) => {
                    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                }
                Value::NullBulk => out.extend_from_slice(b"$-1\r\n"),
                Value::NullArray => out.extend_from_slice(b"*-1\r\n"),
                Value::Array(v) => {
                    out.extend_from_slice(format!("*{}\r\n", v.len()).as_bytes());
                    for e in v {
                        e.encode(out);
                    }
                }
                Value::Null => out.extend_from_slice(b"_\r\n"),
                Value::Line(t, l) => {
                    out.push(*t);
                    out.extend_from_slice(l);
                    out.extend_from_slice(b"\r\n");
                }
                Value::Blob(t, b) => {
                    out.extend_from_slice(format!("{}{}\r\n", *t as char, b.len()).as_bytes());
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                }
                Value::Aggregate(t, v) => {
                    let n = if *t == b'%' { v.len() / 2 } else { v.len() };
                    out.extend_from_slice(format!("{}{n}\r\n", *t as char).as_bytes());
                    for e in v {
                        e.encode(out);
                    }
                }
                Value::Attribute(v, e) => {
                    out.extend_from_slice(format!("|{}\r\n", v.len() / 2).as_bytes());
                    for x in v {
                        x.encode(out);
                    }
                    e.encode(out);
                }
            }
        }

        /// What the reply is as a whole.
        fn reply(&self) -> Reply {
            match self {
                Value::Error(_) | Value::Blob(b'!', _) => Reply::Error,
                Value::Bulk(_) | Value::Blob(..) => Reply::Bulk,
                Value::NullBulk | Value::NullArray | Value::Null => Reply::Null,
                Value::Attribute(_, e) => e.reply(),
                _ => Reply::Plain,
            }
        }
    }

    /// RESP2 and RESP3 read by recursive descent, with the cursor's bounds: Ok(Some)
    /// a whole reply and its length, Ok(None) the bytes end first, Err
    /// anything else.
    fn reference(b: &[u8]) -> Result<Option<(usize, Reply)>, ()> {
        /// A header line's number: Ok(None) when the bytes end first.
        fn number(b: &[u8], p: &mut usize) -> Result<Option<(bool, u64)>, ()> {
            let (mut neg, mut num, mut digits) = (false, 0u64, 0);
            loop {
                let Some(&c) = b.get(*p) else { return Ok(None) };
                *p += 1;
                match c {
                    b'-' if digits == 0 && !neg => neg = true,
                    b'0'..=b'9' => {
                        num = num
                            .checked_mul(10)
                            .and_then(|n| n.checked_add(u64::from(c - b'0')))
                            .ok_or(())?;
                        digits += 1;
                    }
                    b'\r' if digits > 0 => break,
                    _ => return Err(()),
                }
            }
            match b.get(*p) {
                None => Ok(None),
                Some(b'\n') => {
                    *p += 1;
                    Ok(Some((neg, num)))
                }
                Some(_) => Err(()),
            }
        }
        /// One element at `depth` enclosing arrays: Ok(Some(kind)).
        fn element(b: &[u8], p: &mut usize, depth: usize) -> Result<Option<Reply>, ()> {
            let Some(&t) = b.get(*p) else { return Ok(None) };
            *p += 1;
            match t {
                b'+' | b'-' | b'#' | b',' | b'(' | b'_' => {
                    let start = *p;
                    loop {
                        if *p - start > MAX_LINE as usize {
                            return Err(());
                        }
                        let Some(&c) = b.get(*p) else { return Ok(None) };
                        *p += 1;
                        match c {
                            b'\n' => return Err(()),
                            b'\r' => break,
                            _ => {}
                        }
                    }
                    // `_`'s line is empty.
                    if t == b'_' && *p - start > 1 {
                        return Err(());
                    }
                    match b.get(*p) {
                        None => Ok(None),
                        Some(b'\n') => {
                            *p += 1;
                            Ok(Some(match t {
                                b'-' => Reply::Error,
                                b'_' => Reply::Null,
                                _ => Reply::Plain,
                            }))
                        }
                        Some(_) => Err(()),
                    }
                }
                b':' => Ok(number(b, p)?.map(|_| Reply::Plain)),
                b'$' | b'*' | b'!' | b'=' | b'~' | b'%' | b'|' => {
                    let Some((neg, n)) = number(b, p)? else {
                        return Ok(None);
                    };
                    if neg {
                        return if n == 1 && (t == b'$' || t == b'*') {
                            Ok(Some(Reply::Null))
                        } else {
                            Err(())
                        };
                    }
                    if matches!(t, b'$' | b'!' | b'=') {
                        if n > MAX_BULK {
                            return Err(());
                        }
                        let end = *p + n as usize;
                        if end + 2 > b.len() {
                            // The bytes end inside; what came of the CR LF
                            // must be right.
                            if end < b.len() && b[end] != b'\r' {
                                return Err(());
                            }
                            return Ok(None);
                        }
                        if &b[end..end + 2] != b"\r\n" {
                            return Err(());
                        }
                        *p = end + 2;
                        return Ok(Some(if t == b'!' { Reply::Error } else { Reply::Bulk }));
                    }
                    let n = match t {
                        b'%' => n.checked_mul(2).ok_or(())?,
                        b'|' => n.checked_mul(2).and_then(|n| n.checked_add(1)).ok_or(())?,
                        _ => n,
                    };
                    if n > MAX_ARRAY {
                        return Err(());
                    }
                    if n > 0 && depth == MAX_DEPTH {
                        return Err(());
                    }
                    let mut last = Reply::Plain;
                    for _ in 0..n {
                        match element(b, p, depth + 1)? {
                            Some(r) => last = r,
                            None => return Ok(None),
                        }
                    }
                    // An attribute's reply is the element it annotates.
                    Ok(Some(if t == b'|' { last } else { Reply::Plain }))
                }
                _ => Err(()),
            }
        }
        let mut p = 0;
        Ok(element(b, &mut p, 0)?.map(|r| (p, r)))
    }

    fn verdict(f: Feed) -> Result<Option<(usize, Reply)>, ()> {
        match f {
            Feed::Complete(n, r) => Ok(Some((n, r))),
            Feed::Partial => Ok(None),
            Feed::Error(ErrorClass::Protocol) => Err(()),
            Feed::Error(other) => panic!("an error of another class: {other:?}"),
        }
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// A reply reads whole to its length and kind, at any cut, and
        /// several in one read end where each does.
        #[test]
        fn replies_round_trip_at_every_cut_and_pipelined(vs in prop::collection::vec(value(), 1..5)) {
            let mut all = Vec::new();
            for v in &vs {
                let mut one = Vec::new();
                v.encode(&mut one);
                prop_assert_eq!(parse_every_way(&one), Feed::Complete(one.len(), v.reply()));
                prop_assert_eq!(reference(&one), Ok(Some((one.len(), v.reply()))));
                all.extend_from_slice(&one);
            }
            let mut at = 0;
            for v in &vs {
                match RespCursor::default().feed(&all[at..]) {
                    Feed::Complete(n, r) => {
                        prop_assert_eq!(r, v.reply());
                        at += n;
                    }
                    other => prop_assert!(false, "{:?} at {}", other, at),
                }
            }
            prop_assert_eq!(at, all.len());
        }

        /// Mutated replies: the cursor says what the reference reader
        /// says (a reply and its length, more to come, or a protocol
        /// error), whatever the reads cut them into.
        #[test]
        fn mutated_replies_read_as_the_reference_reads_them(
            v in value(),
            ms in hostile::mutations(),
        ) {
            let mut one = Vec::new();
            v.encode(&mut one);
            let bad = hostile::mutate(&one, &ms);
            let got = parse_every_way(&bad);
            prop_assert_eq!(verdict(got), reference(&bad), "{:?}", String::from_utf8_lossy(&bad));
        }
    }
}
