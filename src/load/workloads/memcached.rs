//! `load memcached`: commands from templates (`keyspace`) in memcached's
//! text protocol, answers read by its framing over persistent
//! connections, `--pipeline` requests in flight on each. This file is the
//! codec ([`McText`]); the exchange around it is the key-value core's
//! (`kv`), shared with redis.
//!
//! A template is the command as a person would say it; the workload writes
//! the protocol's line (and data block) from it:
//!
//! | template | request |
//! |---|---|
//! | `get KEY`, `gets KEY` | `get KEY\r\n` |
//! | `gat EXPTIME KEY`, `gats EXPTIME KEY` | `gat EXPTIME KEY\r\n` |
//! | `set KEY DATA`, `set KEY FLAGS EXPTIME DATA` (also add, replace, append, prepend) | `set KEY FLAGS EXPTIME LEN\r\nDATA\r\n` (FLAGS and EXPTIME 0 when left out; LEN is DATA's length) |
//! | `delete KEY` | `delete KEY\r\n` |
//! | `incr KEY N`, `decr KEY N` | `incr KEY N\r\n` |
//! | `touch KEY EXPTIME` | `touch KEY EXPTIME\r\n` |
//! | `version` | `version\r\n` |
//!
//! One key per retrieval (each response is one hit or one miss, as the
//! server's get_hits/get_misses count them). `noreply` is refused: a
//! request without an answer cannot be timed, and the driver would wait
//! for one. `cas` is refused too (it needs the unique of an earlier
//! `gets`). Any other command is a usage error naming the supported ones.
//!
//! The response parser ([`McCursor`]) reads byte by byte through lines,
//! keeping only the first bytes of each line (enough to tell `VALUE`,
//! `END`, `STORED`, `SERVER_ERROR`... apart) and the numbers it needs,
//! and skips data blocks by count; it resumes across reads at any byte.
//! Lines are at most [`MAX_LINE`] bytes, data blocks at most
//! [`MAX_DATA`]. `SERVER_ERROR` fails the request as `server_error`,
//! `ERROR` and `CLIENT_ERROR` as `client_error` (the connection goes on);
//! anything the command cannot be answered with is a protocol error.

use anyhow::Result;

use crate::error;
use crate::load::KvArgs;
use crate::load::spec::{Registered, TargetForm};
use crate::load::workload::{ErrorClass, Outcome, Parsed, TcpWorkload};
use crate::load::workloads::keyspace::{
    Block, KvSpec, Part, RequestBuilder, Template, Word, literal,
};
use crate::load::workloads::kv::{self, KvExchange, KvProtocol};
use crate::load::workloads::kv_options::{KvLoad, KvOptions};

/// The commands when no --command is given (memtier_benchmark's mix).
pub const DEFAULT_COMMANDS: [&str; 2] = ["set key:{key} {value}", "get key:{key}"];
/// Their ratio.
pub const DEFAULT_RATIO: [u32; 2] = [1, 10];

/// Longest key memcached accepts.
pub const MAX_KEY: usize = 250;
/// Longest response line accepted (a VALUE line with a 250-byte key is
/// about 300).
pub const MAX_LINE: u32 = 2048;
/// Largest data block accepted in a VALUE (memcached's item size limit,
/// -I, tops out at 1 GiB).
pub const MAX_DATA: u64 = 1 << 30;

/// The memcached workload of a command line.
pub fn workload(a: &KvArgs) -> TcpWorkload<McExchange> {
    kv::workload(a, McExchange::new)
}

/// What a command is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `VALUE` blocks then `END`: a hit or a miss.
    Retrieval,
    /// `STORED`, `NOT_STORED`, `EXISTS` or `NOT_FOUND`.
    Storage,
    /// `DELETED` or `NOT_FOUND`.
    Delete,
    /// The new value, or `NOT_FOUND`.
    Arith,
    /// `TOUCHED` or `NOT_FOUND`.
    Touch,
    /// `VERSION ...`.
    Version,
}

/// memcached's text protocol, the codec of the key-value core (`kv`):
/// requests as [`build`] writes them, responses read by [`McCursor`].
pub struct McText;

/// The text-protocol exchange of a set of templates.
pub type McExchange = KvExchange<McText>;

impl McExchange {
    /// Checks each template against the command's grammar and writes its
    /// request; a template memcached would refuse is a usage error.
    pub fn new(spec: KvSpec) -> Result<Self> {
        let mut requests = Vec::new();
        let mut kinds = Vec::new();
        for t in &spec.templates {
            let mut b = RequestBuilder::new(&spec.space, &spec.value);
            kinds.push(build(t, &mut b)?);
            requests.push(b.build());
        }
        Ok(Self::from_parts(spec, requests, kinds))
    }
}

/// Supported commands, for the usage error.
const SUPPORTED: &str = "get, gets, gat, gats, set, add, replace, append, prepend, delete, incr, \
                         decr, touch, version";

/// Writes template `t`'s request into `b`; returns what answers it.
fn build(t: &Template, b: &mut RequestBuilder) -> Result<Kind> {
    let bad = |why: &str| error::usage(format!("--command '{}': {why}", t.text));
    let name = t.name();
    let args = t.args();
    if args.iter().any(|w| literal(w) == Some(b"noreply")) {
        return Err(bad(
            "noreply is not supported: every request must be answered to be timed",
        ));
    }
    let usage = |form: &str| bad(&format!("memcached's {form}"));
    let key = |w: &Word, b: &RequestBuilder| -> Result<()> {
        let lits_ok = w.iter().all(|p| match p {
            Part::Lit(l) => l.iter().all(|&c| c > b' ' && c != 0x7f),
            Part::Key => true,
            Part::Value => false,
        });
        if !lits_ok {
            return Err(bad(
                "a key is printable text and {key} ({value} has no place in a key)",
            ));
        }
        let len = b.word_len(w);
        if len > MAX_KEY {
            return Err(bad(&format!(
                "the key is {len} bytes; memcached takes at most {MAX_KEY}"
            )));
        }
        Ok(())
    };
    let number = |w: &Word, what: &str, signed: bool| -> Result<()> {
        let ok = literal(w).is_some_and(|l| {
            let digits = if signed {
                l.strip_prefix(b"-").unwrap_or(l)
            } else {
                l
            };
            !digits.is_empty() && digits.len() <= 19 && digits.iter().all(u8::is_ascii_digit)
        });
        if ok {
            Ok(())
        } else {
            Err(bad(&format!("{what} must be a number written out")))
        }
    };
    let line = |b: &mut RequestBuilder, words: &[&Word]| {
        b.lit(name);
        for w in words {
            b.lit(b" ").word(w);
        }
        b.lit(b"\r\n");
    };
    let kind = match name {
        b"get" | b"gets" => {
            let [k] = args else {
                return Err(usage("get takes one key: get KEY"));
            };
            key(k, b)?;
            line(b, &[k]);
            Kind::Retrieval
        }
        b"gat" | b"gats" => {
            let [exp, k] = args else {
                return Err(usage("gat takes an expiry and one key: gat EXPTIME KEY"));
            };
            number(exp, "EXPTIME", true)?;
            key(k, b)?;
            line(b, &[exp, k]);
            Kind::Retrieval
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" => {
            let zero = vec![Part::Lit(b"0".to_vec())];
            let (k, flags, exp, data) = match args {
                [k, data] => (k, &zero, &zero, data),
                [k, flags, exp, data] => (k, flags, exp, data),
                _ => {
                    return Err(usage(
                        "storage commands take a key and the data: set KEY DATA or set KEY \
                         FLAGS EXPTIME DATA (DATA is what is stored, e.g. {value}; its length \
                         is written for you)",
                    ));
                }
            };
            key(k, b)?;
            number(flags, "FLAGS", false)?;
            number(exp, "EXPTIME", true)?;
            let len = vec![Part::Lit(b.word_len(data).to_string().into_bytes())];
            line(b, &[k, flags, exp, &len]);
            b.word(data).lit(b"\r\n");
            Kind::Storage
        }
        b"delete" => {
            let [k] = args else {
                return Err(usage("delete takes one key: delete KEY"));
            };
            key(k, b)?;
            line(b, &[k]);
            Kind::Delete
        }
        b"incr" | b"decr" => {
            let [k, n] = args else {
                return Err(usage("incr takes a key and an amount: incr KEY N"));
            };
            key(k, b)?;
            number(n, "the amount", false)?;
            line(b, &[k, n]);
            Kind::Arith
        }
        b"touch" => {
            let [k, exp] = args else {
                return Err(usage("touch takes a key and an expiry: touch KEY EXPTIME"));
            };
            key(k, b)?;
            number(exp, "EXPTIME", true)?;
            line(b, &[k, exp]);
            Kind::Touch
        }
        b"version" => {
            if !args.is_empty() {
                return Err(usage("version takes no arguments"));
            }
            line(b, &[]);
            Kind::Version
        }
        b"cas" => {
            return Err(bad(
                "cas is not supported (it needs the unique value of an earlier gets)",
            ));
        }
        other => {
            return Err(bad(&format!(
                "`{}` is not a command this workload sends (memcached's commands are lower \
                 case): {SUPPORTED}",
                String::from_utf8_lossy(other)
            )));
        }
    };
    Ok(kind)
}

impl KvProtocol for McText {
    const NAME: &'static str = "memcached";
    const DEFAULT_COMMANDS: &'static [&'static str] = &DEFAULT_COMMANDS;
    const DEFAULT_RATIO: &'static [u32] = &DEFAULT_RATIO;

    /// What the command is answered with.
    type Command = Kind;
    type Cursor = McCursor;

    fn op_name(t: &Template) -> String {
        String::from_utf8_lossy(t.name()).into_owned()
    }

    #[inline]
    fn parse(cursor: &mut McCursor, data: &[u8], kind: Kind) -> Parsed {
        match cursor.feed(data, kind) {
            Feed::Partial => Parsed::Partial,
            Feed::Error(class) => Parsed::Error(class),
            Feed::Complete(n, answer) => Parsed::Complete(
                n,
                Outcome {
                    hit: answer.hit,
                    error: answer.error,
                    ..Outcome::OK
                },
            ),
        }
    }

    fn started(cursor: &McCursor) -> bool {
        cursor.started
    }
}

/// What a whole response said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// A retrieval: found (`VALUE`) or not (`END` alone).
    pub hit: Option<bool>,
    /// `SERVER_ERROR` (server_error), `ERROR`/`CLIENT_ERROR`
    /// (client_error).
    pub error: Option<ErrorClass>,
}

/// What [`McCursor::feed`] made of some bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// All consumed; the response is not whole yet.
    Partial,
    /// The response is whole after this many bytes.
    Complete(usize, Answer),
    /// Not an answer to the command.
    Error(ErrorClass),
}

/// Where the parser is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Inside a line.
    #[default]
    Line,
    /// Inside a VALUE's data block or its closing CR LF.
    Data(Block),
}

/// Bytes of a line kept to tell its first word (`SERVER_ERROR` is 12).
const HEAD: usize = 16;

/// Parse state of one connection's awaited response.
#[derive(Clone, Debug, Default)]
pub struct McCursor {
    state: State,
    /// The line's first bytes.
    head: [u8; HEAD],
    /// The line's length so far (CR LF not counted).
    len: u32,
    /// A CR was read; its LF must follow.
    cr: bool,
    /// Spaces so far: the index of the field being read.
    field: u8,
    /// The current field as a number, while it is all digits.
    num: u64,
    num_ok: bool,
    field_len: u32,
    /// Field 3 of the line as a number (a VALUE line's byte count).
    f3: Option<u64>,
    /// The whole line as one number (an incr/decr answer).
    only_number: bool,
    /// VALUE blocks so far.
    values: u32,
    /// Any byte of the response consumed.
    started: bool,
}

impl McCursor {
    /// Consumes `data`, the next bytes of the answer to a command of
    /// `kind`; stops at its end.
    pub fn feed(&mut self, data: &[u8], kind: Kind) -> Feed {
        if !data.is_empty() {
            self.started = true;
        }
        let mut i = 0;
        while i < data.len() {
            match self.state {
                State::Line => {
                    let b = data[i];
                    i += 1;
                    if self.cr {
                        if b != b'\n' {
                            return Feed::Error(ErrorClass::Protocol);
                        }
                        self.end_field();
                        match self.line_done(kind) {
                            Ok(Some(answer)) => return Feed::Complete(i, answer),
                            Ok(None) => {}
                            Err(class) => return Feed::Error(class),
                        }
                        continue;
                    }
                    match b {
                        b'\r' => self.cr = true,
                        b'\n' => return Feed::Error(ErrorClass::Protocol),
                        _ => {
                            if (self.len as usize) < HEAD {
                                self.head[self.len as usize] = b;
                            }
                            self.len += 1;
                            if self.len > MAX_LINE {
                                return Feed::Error(ErrorClass::Protocol);
                            }
                            if b == b' ' {
                                self.end_field();
                                self.field = self.field.saturating_add(1);
                                (self.num, self.num_ok, self.field_len) = (0, false, 0);
                            } else {
                                self.digit(b);
                            }
                        }
                    }
                }
                State::Data(mut block) => match block.step(data, &mut i) {
                    Ok(true) => self.state = State::Line,
                    Ok(false) => self.state = State::Data(block),
                    Err(class) => return Feed::Error(class),
                },
            }
        }
        Feed::Partial
    }

    /// A byte of the current field other than a space.
    #[inline]
    fn digit(&mut self, b: u8) {
        self.field_len += 1;
        if self.field_len == 1 {
            self.num_ok = true;
        }
        if !b.is_ascii_digit() {
            self.num_ok = false;
            return;
        }
        match self
            .num
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
        {
            Some(v) => self.num = v,
            None => self.num_ok = false,
        }
    }

    /// The current field ended (a space or the line's end).
    fn end_field(&mut self) {
        let number = (self.num_ok && self.field_len > 0).then_some(self.num);
        if self.field == 3 {
            self.f3 = number;
        }
        if self.field == 0 {
            self.only_number = number.is_some();
        }
    }

    /// A whole line was read: the response's end (Some), more to come
    /// (None: a VALUE line, whose data block follows), or not an answer to
    /// `kind`.
    fn line_done(&mut self, kind: Kind) -> Result<Option<Answer>, ErrorClass> {
        let len = self.len as usize;
        let head = &self.head[..len.min(HEAD)];
        let is = |w: &[u8]| len == w.len() && head == w;
        // A word followed by a message (or by nothing).
        let word = |w: &[u8]| head.starts_with(w) && (len == w.len() || head[w.len()] == b' ');
        let failed = |class| {
            Ok(Some(Answer {
                hit: None,
                error: Some(class),
            }))
        };
        if word(b"SERVER_ERROR") {
            return failed(ErrorClass::ServerError);
        }
        if word(b"CLIENT_ERROR") || is(b"ERROR") {
            return failed(ErrorClass::ClientError);
        }
        let done = Ok(Some(Answer::default()));
        let not_found = is(b"NOT_FOUND");
        let answer = match kind {
            Kind::Retrieval if is(b"END") => Ok(Some(Answer {
                hit: Some(self.values > 0),
                error: None,
            })),
            Kind::Retrieval if head.starts_with(b"VALUE ") && (3..=4).contains(&self.field) => {
                match self.f3 {
                    Some(n) if n <= MAX_DATA => {
                        self.values = self.values.saturating_add(1);
                        self.state = State::Data(Block::Bytes(n));
                        Ok(None)
                    }
                    _ => Err(ErrorClass::Protocol),
                }
            }
            Kind::Storage if is(b"STORED") || is(b"NOT_STORED") || is(b"EXISTS") || not_found => {
                done
            }
            Kind::Delete if is(b"DELETED") || not_found => done,
            Kind::Arith if (self.field == 0 && self.only_number) || not_found => done,
            Kind::Touch if is(b"TOUCHED") || not_found => done,
            Kind::Version if word(b"VERSION") && len > b"VERSION ".len() => done,
            _ => Err(ErrorClass::Protocol),
        };
        // The next line (after a VALUE's data block) starts afresh.
        (self.len, self.cr, self.field) = (0, false, 0);
        (self.num, self.num_ok, self.field_len) = (0, false, 0);
        (self.f3, self.only_number) = (None, false);
        answer
    }
}

/// The registration of `load memcached`.
pub static WORKLOAD: Registered<KvOptions<Memcached>> = Registered::new(
    "memcached",
    "Memcached (text protocol) commands built from templates over a key \
     space",
    TargetForm::Addr,
);

/// The memcached protocol of the key-value workloads.
pub struct Memcached;

impl KvLoad for Memcached {
    type Own = crate::load::workloads::kv_options::NoOptions;

    fn load(a: KvArgs, _own: Self::Own) -> Result<crate::load::Load> {
        Ok(crate::load::Load::tcp(workload(&a), a.tcp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::KeyDist;
    use crate::load::workload::Exchange;

    /// Feeds `bytes` whole, split at every boundary and byte by byte: each
    /// way must give the same answer.
    fn parse_every_way(bytes: &[u8], kind: Kind) -> Feed {
        let whole = McCursor::default().feed(bytes, kind);
        for cut in 1..bytes.len() {
            let mut c = McCursor::default();
            let got = match c.feed(&bytes[..cut], kind) {
                Feed::Partial => match c.feed(&bytes[cut..], kind) {
                    Feed::Complete(n, a) => Feed::Complete(n + cut, a),
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
        let mut c = McCursor::default();
        let mut got = Feed::Partial;
        for (k, b) in bytes.iter().enumerate() {
            got = match c.feed(std::slice::from_ref(b), kind) {
                Feed::Complete(_, a) => Feed::Complete(k + 1, a),
                other => other,
            };
            if got != Feed::Partial {
                break;
            }
        }
        assert_eq!(got, whole, "byte by byte");
        whole
    }

    const OK: Answer = Answer {
        hit: None,
        error: None,
    };
    const HIT: Answer = Answer {
        hit: Some(true),
        error: None,
    };
    const MISS: Answer = Answer {
        hit: Some(false),
        error: None,
    };

    #[test]
    fn every_answer_parses_split_at_every_byte() {
        let server = Answer {
            hit: None,
            error: Some(ErrorClass::ServerError),
        };
        let client = Answer {
            hit: None,
            error: Some(ErrorClass::ClientError),
        };
        for (bytes, kind, want) in [
            (
                &b"VALUE key:001 0 5\r\nhello\r\nEND\r\n"[..],
                Kind::Retrieval,
                HIT,
            ),
            // A data block holding CR LF and "END" is skipped by count.
            (
                b"VALUE k 7 9 123\r\nEND\r\n\r\nxy\r\nEND\r\n",
                Kind::Retrieval,
                HIT,
            ),
            (b"VALUE k 0 0\r\n\r\nEND\r\n", Kind::Retrieval, HIT),
            (b"END\r\n", Kind::Retrieval, MISS),
            (b"STORED\r\n", Kind::Storage, OK),
            (b"NOT_STORED\r\n", Kind::Storage, OK),
            (b"DELETED\r\n", Kind::Delete, OK),
            (b"NOT_FOUND\r\n", Kind::Delete, OK),
            (b"18446744073709551615\r\n", Kind::Arith, OK),
            (b"NOT_FOUND\r\n", Kind::Arith, OK),
            (b"TOUCHED\r\n", Kind::Touch, OK),
            (b"VERSION 1.6.18\r\n", Kind::Version, OK),
            (
                b"SERVER_ERROR out of memory storing object\r\n",
                Kind::Storage,
                server,
            ),
            (b"SERVER_ERROR\r\n", Kind::Retrieval, server),
            (b"CLIENT_ERROR bad data chunk\r\n", Kind::Storage, client),
            (b"ERROR\r\n", Kind::Version, client),
        ] {
            assert_eq!(
                parse_every_way(bytes, kind),
                Feed::Complete(bytes.len(), want),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn pipelined_answers_in_one_read_end_where_each_does() {
        let data = b"VALUE a 0 1\r\nx\r\nEND\r\nEND\r\nSTORED\r\nSERVER_ERROR no\r\nEND\r\n";
        let kinds = [
            Kind::Retrieval,
            Kind::Retrieval,
            Kind::Storage,
            Kind::Storage,
            Kind::Retrieval,
        ];
        let mut i = 0;
        let mut got = Vec::new();
        for kind in kinds {
            match McCursor::default().feed(&data[i..], kind) {
                Feed::Complete(n, a) => {
                    got.push(a);
                    i += n;
                }
                other => panic!("{other:?} at {i}"),
            }
        }
        assert_eq!(i, data.len());
        assert_eq!(got[..3], [HIT, MISS, OK]);
        assert_eq!(got[3].error, Some(ErrorClass::ServerError));
        assert_eq!(got[4], MISS);
    }

    #[test]
    fn garbage_and_wrong_answers_are_protocol_errors() {
        for (bad, kind) in [
            (&b"HTTP/1.1 400 Bad Request\r\n"[..], Kind::Retrieval),
            (b"STORED\r\n", Kind::Retrieval),
            (b"END\r\n", Kind::Storage),
            (b"END\n", Kind::Retrieval),
            (b"END\rX", Kind::Retrieval),
            (b"VALUE k 0 x\r\n", Kind::Retrieval),
            (b"VALUE k 0\r\n", Kind::Retrieval),
            (b"VALUE k 0 3\r\nabcX", Kind::Retrieval),
            (b"VALUE k 0 3\r\nabc\rX", Kind::Retrieval),
            (b"VALUE k 0 99999999999999999999999\r\n", Kind::Retrieval),
            (b"12a\r\n", Kind::Arith),
            (b"1 2\r\n", Kind::Arith),
            (b"STOREDX\r\n", Kind::Storage),
            (b"VERSION\r\n", Kind::Version),
            (b"SERVER_ERRORX\r\n", Kind::Storage),
        ] {
            assert_eq!(
                parse_every_way(bad, kind),
                Feed::Error(ErrorClass::Protocol),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn oversized_lines_and_blocks_are_refused() {
        let big = format!("VALUE k 0 {}\r\n", MAX_DATA + 1);
        assert_eq!(
            McCursor::default().feed(big.as_bytes(), Kind::Retrieval),
            Feed::Error(ErrorClass::Protocol)
        );
        let ok = format!("VALUE k 0 {MAX_DATA}\r\n");
        assert_eq!(
            McCursor::default().feed(ok.as_bytes(), Kind::Retrieval),
            Feed::Partial
        );
        let long = vec![b'A'; MAX_LINE as usize + 1];
        assert_eq!(
            McCursor::default().feed(&long, Kind::Storage),
            Feed::Error(ErrorClass::Protocol)
        );
    }

    fn exchange(cmds: &[&str]) -> Result<McExchange> {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: KvArgs,
        }
        let mut a = P::parse_from(["x", "127.0.0.1:1", "--keys", "100"]).a;
        a.commands = cmds.iter().map(|s| s.to_string()).collect();
        a.key_dist = KeyDist::Uniform;
        a.value_size = 5;
        McExchange::new(KvSpec::from_args(&a, &DEFAULT_COMMANDS, &DEFAULT_RATIO)?)
    }

    fn request(ex: &McExchange, seq: u64) -> String {
        let mut out = Vec::new();
        ex.push_request(&mut out, seq);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn templates_become_text_protocol_requests() {
        let ex = exchange(&[
            "set k:{key} {value}",
            "add k:{key} 7 -1 v{value}",
            "get k:{key}",
            "gat 60 k:{key}",
            "delete k:{key}",
            "incr n:{key} 5",
            "touch k:{key} 10",
            "version",
        ])
        .unwrap();
        let reqs: Vec<String> = (0..8).map(|s| request(&ex, s)).collect();
        let k = &reqs[0][4..8];
        assert!(k.starts_with("k:"), "{}", reqs[0]);
        assert_eq!(reqs[0], format!("set {k} 0 0 5\r\n01234\r\n"));
        assert!(reqs[1].starts_with("add k:") && reqs[1].ends_with(" 7 -1 6\r\nv01234\r\n"));
        assert!(reqs[2].starts_with("get k:") && reqs[2].len() == "get k:00\r\n".len());
        assert!(reqs[3].starts_with("gat 60 k:"));
        assert!(reqs[4].starts_with("delete k:"));
        assert!(reqs[5].starts_with("incr n:") && reqs[5].ends_with(" 5\r\n"));
        assert!(reqs[6].starts_with("touch k:") && reqs[6].ends_with(" 10\r\n"));
        assert_eq!(reqs[7], "version\r\n");
        assert_eq!(
            ex.ops(),
            [
                "set", "add", "get", "gat", "delete", "incr", "touch", "version"
            ]
        );
    }

    #[test]
    fn templates_memcached_would_refuse_are_usage_errors() {
        let long_key = format!("get {}{{key}}", "k".repeat(249));
        for (t, says) in [
            ("GET k{key}", "not a command this workload sends"),
            ("stats", "not a command this workload sends"),
            ("get a{key} b{key}", "get takes one key"),
            ("set k{key} 0 0 {value} noreply", "noreply is not supported"),
            ("set k{key}", "storage commands take a key and the data"),
            ("set k{key} x 0 {value}", "FLAGS must be a number"),
            ("incr k{key} {key}", "the amount must be a number"),
            ("get k{value}", "{value} has no place in a key"),
            (long_key.as_str(), "memcached takes at most 250"),
            ("cas k{key} 0 0 {value} 1", "cas is not supported"),
        ] {
            let Err(e) = exchange(&[t]) else {
                panic!("{t} was accepted");
            };
            assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
            assert!(e.to_string().contains(says), "{t}: {e}");
        }
    }

    #[test]
    fn outcomes_name_the_command_and_count_hits_misses_and_errors() {
        let ex = exchange(&[]).unwrap();
        assert_eq!(ex.ops(), ["set", "get"]);
        let set_seq = (0..11)
            .find(|&s| request(&ex, s).starts_with("set"))
            .unwrap();
        let get_seq = (0..11)
            .find(|&s| request(&ex, s).starts_with("get"))
            .unwrap();
        let out = |data: &[u8], seq| match ex.parse(&mut McCursor::default(), data, seq) {
            Parsed::Complete(n, o) => {
                assert_eq!(n, data.len());
                o
            }
            other => panic!("{other:?}"),
        };
        let o = out(b"STORED\r\n", set_seq);
        assert_eq!((o.op, o.hit, o.error), (0, None, None));
        let o = out(b"VALUE key:07 0 5\r\n01234\r\nEND\r\n", get_seq);
        assert_eq!((o.op, o.hit), (1, Some(true)));
        let o = out(b"END\r\n", get_seq);
        assert_eq!(o.hit, Some(false));
        let o = out(b"SERVER_ERROR object too large for cache\r\n", set_seq);
        assert_eq!((o.op, o.error), (0, Some(ErrorClass::ServerError)));
        let mut c = McCursor::default();
        assert_eq!(ex.on_eof(&c), ErrorClass::Closed);
        assert_eq!(
            ex.parse(&mut c, b"VALUE k 0 5\r\n01", get_seq),
            Parsed::Partial
        );
        assert_eq!(ex.on_eof(&c), ErrorClass::ShortRead);
        // A get answered by STORED is not memcached.
        assert_eq!(
            ex.parse(&mut McCursor::default(), b"STORED\r\n", get_seq),
            Parsed::Error(ErrorClass::Protocol)
        );
    }

    // Property tests: responses from a reference model of the text
    // protocol, for each kind of command, read whole, cut at every byte
    // and pipelined; mutated ones read alike whatever the cuts, end on a
    // CR LF when whole, and fail only as protocol errors.

    use crate::hostile;
    use proptest::prelude::*;

    /// A VALUE block: key, flags, data, cas.
    type Value = (Vec<u8>, u32, Vec<u8>, Option<u64>);

    /// A response, and the command kind it answers.
    #[derive(Clone, Debug)]
    enum Resp {
        /// VALUE blocks then END.
        Values(Vec<Value>),
        /// A one-word answer (STORED, DELETED, NOT_FOUND...).
        Word(&'static str),
        /// incr/decr's new value.
        Number(u64),
        Version(Vec<u8>),
        ServerError(Vec<u8>),
        ClientError(Vec<u8>),
        Error,
    }

    /// Text without CR or LF.
    fn message(min: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            any::<u8>().prop_filter("no CR or LF", |b| *b != b'\r' && *b != b'\n'),
            min..24,
        )
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(0x21..0x7fu8, 1..20)
    }

    fn response() -> impl Strategy<Value = (Kind, Resp)> {
        let values = prop::collection::vec(
            (
                key(),
                any::<u32>(),
                prop::collection::vec(any::<u8>(), 0..24),
                any::<Option<u64>>(),
            ),
            0..3,
        );
        let failure = prop_oneof![
            message(0).prop_map(Resp::ServerError),
            message(0).prop_map(Resp::ClientError),
            Just(Resp::Error),
        ];
        let kind = prop::sample::select(vec![
            Kind::Retrieval,
            Kind::Storage,
            Kind::Delete,
            Kind::Arith,
            Kind::Touch,
            Kind::Version,
        ]);
        let word =
            |w: &'static [&'static str]| prop::sample::select(w.to_vec()).prop_map(Resp::Word);
        prop_oneof![
            values.prop_map(|v| (Kind::Retrieval, Resp::Values(v))),
            word(&["STORED", "NOT_STORED", "EXISTS", "NOT_FOUND"]).prop_map(|r| (Kind::Storage, r)),
            word(&["DELETED", "NOT_FOUND"]).prop_map(|r| (Kind::Delete, r)),
            prop_oneof![
                any::<u64>().prop_map(Resp::Number),
                Just(Resp::Word("NOT_FOUND"))
            ]
            .prop_map(|r| (Kind::Arith, r)),
            word(&["TOUCHED", "NOT_FOUND"]).prop_map(|r| (Kind::Touch, r)),
            message(1).prop_map(|v| (Kind::Version, Resp::Version(v))),
            (kind, failure),
        ]
    }

    impl Resp {
        fn encode(&self, out: &mut Vec<u8>) {
            let line = |out: &mut Vec<u8>, parts: &[&[u8]]| {
                out.extend_from_slice(&parts.concat());
                out.extend_from_slice(b"\r\n");
            };
            match self {
                Resp::Values(v) => {
                    for (k, flags, data, cas) in v {
                        let mut head = format!(" {flags} {}", data.len());
                        if let Some(c) = cas {
                            head += &format!(" {c}");
                        }
                        line(out, &[b"VALUE ", k, head.as_bytes()]);
                        line(out, &[data]);
                    }
                    line(out, &[b"END"]);
                }
                Resp::Word(w) => line(out, &[w.as_bytes()]),
                Resp::Number(n) => line(out, &[n.to_string().as_bytes()]),
                Resp::Version(v) => line(out, &[b"VERSION ", v]),
                Resp::ServerError(m) => line(out, &[b"SERVER_ERROR ", m]),
                Resp::ClientError(m) => line(out, &[b"CLIENT_ERROR ", m]),
                Resp::Error => line(out, &[b"ERROR"]),
            }
        }

        fn answer(&self) -> Answer {
            match self {
                Resp::Values(v) => Answer {
                    hit: Some(!v.is_empty()),
                    error: None,
                },
                Resp::ServerError(_) => Answer {
                    hit: None,
                    error: Some(ErrorClass::ServerError),
                },
                Resp::ClientError(_) | Resp::Error => Answer {
                    hit: None,
                    error: Some(ErrorClass::ClientError),
                },
                _ => OK,
            }
        }
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        /// Each response reads whole to its length and answer at any cut,
        /// and a pipeline of them ends where each does.
        #[test]
        fn responses_round_trip_at_every_cut_and_pipelined(rs in prop::collection::vec(response(), 1..5)) {
            let mut all = Vec::new();
            for (kind, r) in &rs {
                let mut one = Vec::new();
                r.encode(&mut one);
                prop_assert_eq!(parse_every_way(&one, *kind), Feed::Complete(one.len(), r.answer()));
                all.extend_from_slice(&one);
            }
            let mut at = 0;
            for (kind, r) in &rs {
                match McCursor::default().feed(&all[at..], *kind) {
                    Feed::Complete(n, a) => {
                        prop_assert_eq!(a, r.answer());
                        at += n;
                    }
                    other => prop_assert!(false, "{:?} at {}", other, at),
                }
            }
            prop_assert_eq!(at, all.len());
        }

        /// Mutated responses, read as any kind: the same verdict at every
        /// cut; a whole one ends on CR LF; errors are protocol errors.
        #[test]
        fn mutated_responses_read_alike_and_fail_as_protocol_errors(
            (kind, r) in response(),
            as_kind in prop::sample::select(vec![Kind::Retrieval, Kind::Storage, Kind::Arith, Kind::Version]),
            ms in hostile::mutations(),
        ) {
            let mut one = Vec::new();
            r.encode(&mut one);
            let bad = hostile::mutate(&one, &ms);
            for k in [kind, as_kind] {
                match parse_every_way(&bad, k) {
                    Feed::Complete(n, a) => {
                        prop_assert!(n >= 2 && n <= bad.len());
                        prop_assert_eq!(&bad[n - 2..n], b"\r\n");
                        prop_assert!(matches!(
                            a.error,
                            None | Some(ErrorClass::ServerError | ErrorClass::ClientError)
                        ));
                    }
                    Feed::Partial => {}
                    Feed::Error(class) => prop_assert_eq!(class, ErrorClass::Protocol),
                }
            }
        }
    }
}
