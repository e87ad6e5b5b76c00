//! What the key-value workloads (`redis`, `memcached`) share: command
//! templates over a key space, and which command each request is.
//!
//! - A [`Template`] is a command as the user wrote it (`SET key:{key}
//!   {value}`): words separated by whitespace, each made of literal bytes
//!   and the fields `{key}` and `{value}`. The protocol file turns it into
//!   request bytes ([`RequestBuilder`]).
//! - `{key}` is a key index in `0..--keys`, written in decimal zero-padded
//!   to the width of the largest index, so every key of a run has the same
//!   length and a request is its template with the digits written into
//!   fixed holes ([`Request::push`]): no formatting, no allocation.
//! - `{value}` is `--value-size` bytes fixed for the run (a repeating
//!   printable pattern), copied in when the template is built.
//! - Which command request `seq` of a connection is follows from `seq`
//!   alone ([`Schedule`]): `--ratio 1:10` is a table of 11 slots, the one
//!   SET spread among the GETs, read at `seq % 11`. That is how `parse`
//!   knows what it is answering (the driver passes it the same `seq`).
//! - The key is drawn at random from `--key-dist`: uniform, or Zipf with
//!   exponent S (key 0 the hottest) by `rand_distr`'s rejection-inversion
//!   sampler. `Exchange::push_request` takes `&self` and is called from
//!   every worker thread, so each thread draws from its own fast generator
//!   (`SmallRng`, a thread-local seeded from a process-wide counter, the
//!   pid and the clock): no lock, no sharing, and two runs do not repeat
//!   each other's keys. A request sent again (after the server closed the
//!   connection behind it) draws a new key; its command, the part `parse`
//!   depends on, is the same.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::error;
use crate::load::KeyDist;
use crate::load::KvArgs;
use crate::load::workload::ErrorClass;
use crate::load::workloads::fields::{self, Piece};

/// Most commands one run may mix (`Outcome::op` is a u16, and a longer
/// list is not a workload anyone means).
pub const MAX_COMMANDS: usize = 256;

/// One piece of a template word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Bytes as written.
    Lit(Vec<u8>),
    /// The request's key.
    Key,
    /// The run's value bytes.
    Value,
}

/// The fields a key-value template knows.
const KV_FIELDS: &[(&str, Part)] = &[("key", Part::Key), ("value", Part::Value)];

/// A word of a template: its pieces in order.
pub type Word = Vec<Part>;

/// A command template as parsed from `--command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The template as written (for messages and the report).
    pub text: String,
    /// Its words; the first is the command name.
    pub words: Vec<Word>,
}

impl Template {
    /// Parses a template: words split on whitespace, `{key}` and `{value}`
    /// fields, `{{`/`}}` for literal braces. An unknown field, an
    /// unclosed `{`, a stray `}`, an empty template or a command name
    /// that is not plain text are usage errors naming what is wrong.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| error::usage(format!("--command '{text}': {why}"));
        let mut words = Vec::new();
        for raw in text.split_ascii_whitespace() {
            let pieces = fields::parse(raw.as_bytes(), KV_FIELDS)
                .map_err(|e| bad(format!("{} in `{raw}`", e.message(KV_FIELDS))))?;
            words.push(
                pieces
                    .into_iter()
                    .map(|p| match p {
                        Piece::Lit(b) => Part::Lit(b),
                        Piece::Field(f) => f,
                    })
                    .collect(),
            );
        }
        let Some(first) = words.first() else {
            return Err(error::usage("--command '': a template needs a command"));
        };
        if literal(first).is_none() {
            return Err(bad(
                "the command name cannot hold a field: {key} and {value} go in its arguments"
                    .into(),
            ));
        }
        Ok(Self {
            text: text.to_string(),
            words,
        })
    }

    /// The command name as written.
    pub fn name(&self) -> &[u8] {
        literal(&self.words[0]).unwrap_or_default()
    }

    /// The words after the command name.
    pub fn args(&self) -> &[Word] {
        &self.words[1..]
    }
}

/// The bytes of a word that has no field, or None.
pub fn literal(word: &Word) -> Option<&[u8]> {
    match word.as_slice() {
        [Part::Lit(b)] => Some(b),
        _ => None,
    }
}

/// Which command request `seq` is: `--ratio` spread over a table of
/// slots (smooth weighted round-robin, so 1:10 sends the SET among the
/// GETs rather than after them), read at `seq % len`.
#[derive(Clone, Debug)]
pub struct Schedule {
    slots: Vec<u16>,
}

impl Schedule {
    /// The schedule of `weights`, one per command (reduced by their
    /// greatest common divisor first: 2:20 is 1:10).
    pub fn new(weights: &[u32]) -> Self {
        let g = weights.iter().fold(0u32, |g, &w| gcd(g, w)).max(1);
        let w: Vec<i64> = weights.iter().map(|&x| i64::from(x / g)).collect();
        let total: i64 = w.iter().sum();
        let mut current = vec![0i64; w.len()];
        let mut slots = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, x) in current.iter_mut().zip(&w) {
                *c += x;
            }
            // The first of the largest: ties go to the earlier command.
            let best = (0..w.len())
                .max_by_key(|&i| (current[i], std::cmp::Reverse(i)))
                .unwrap_or(0);
            current[best] -= total;
            slots.push(best as u16);
        }
        Self { slots }
    }

    /// The command (template index) of request `seq`.
    #[inline]
    pub fn op(&self, seq: u64) -> usize {
        self.slots[(seq % self.slots.len() as u64) as usize] as usize
    }

    /// Slots in one round of the schedule.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Never true: a schedule has at least one slot.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The key space: how many keys, how wide they are written, and how a
/// request's key is drawn.
#[derive(Clone, Debug)]
pub struct KeySpace {
    keys: u64,
    width: usize,
    zipf: Option<Zipf<f64>>,
}

thread_local! {
    /// This thread's generator (see the module header).
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(thread_seed()));
}

/// A seed no other thread of this or another recent run gets: a
/// process-wide counter, the pid and the clock, mixed (splitmix64).
fn thread_seed() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = NEXT
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ nanos
        ^ (u64::from(std::process::id()) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl KeySpace {
    /// `keys` keys (at least 1) drawn from `dist`.
    pub fn new(keys: u64, dist: KeyDist) -> Result<Self> {
        let keys = keys.max(1);
        let zipf =
            match dist {
                KeyDist::Uniform => None,
                KeyDist::Zipf(s) => Some(Zipf::new(keys as f64, s).map_err(|e| {
                    error::usage(format!("--key-dist zipf:{s} over {keys} keys: {e}"))
                })?),
            };
        Ok(Self {
            keys,
            width: digits(keys - 1),
            zipf,
        })
    }

    /// Digits every key is written with.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Keys in the space.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// Appends key `key` as every key of the space is written: decimal,
    /// zero-padded to [`KeySpace::width`].
    #[inline]
    pub fn push_key(&self, out: &mut Vec<u8>, key: u64) {
        let start = out.len();
        out.resize(start + self.width, b'0');
        write_padded(&mut out[start..], key);
    }

    /// Draws a key index from this thread's generator.
    #[inline]
    pub fn draw(&self) -> u64 {
        RNG.with(|r| self.draw_with(&mut r.borrow_mut()))
    }

    /// Draws a key index from `rng`.
    #[inline]
    pub fn draw_with(&self, rng: &mut SmallRng) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..self.keys),
            // The sampler gives ranks 1..=keys as floats.
            Some(z) => (z.sample(rng) as u64).clamp(1, self.keys) - 1,
        }
    }
}

/// Decimal digits of `n` (1 for 0).
fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Writes `n` in decimal into `out`, zero-padded on the left to its whole
/// length (the caller sized it to the key width, which holds every key).
#[inline]
fn write_padded(out: &mut [u8], mut n: u64) {
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A request's bytes with holes where the key's digits go.
#[derive(Clone, Debug, Default)]
pub struct Request {
    bytes: Vec<u8>,
    holes: Vec<usize>,
    width: usize,
}

impl Request {
    /// Appends this request for key `key` to `out`.
    #[inline]
    pub fn push(&self, out: &mut Vec<u8>, key: u64) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let Some((&first, rest)) = self.holes.split_first() else {
            return;
        };
        let w = self.width;
        write_padded(&mut out[start + first..start + first + w], key);
        for &h in rest {
            out.copy_within(start + first..start + first + w, start + h);
        }
    }

    /// Its length in bytes (every key has the same width).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True for a request of no bytes (never built by the workloads).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Builds a [`Request`] from literal bytes and template words.
pub struct RequestBuilder<'a> {
    req: Request,
    value: &'a [u8],
}

impl<'a> RequestBuilder<'a> {
    /// A builder for keys of `space` and the run's `value`.
    pub fn new(space: &KeySpace, value: &'a [u8]) -> Self {
        Self {
            req: Request {
                width: space.width,
                ..Default::default()
            },
            value,
        }
    }

    /// Bytes `word` renders to (every key has the same width).
    pub fn word_len(&self, word: &Word) -> usize {
        word.iter()
            .map(|p| match p {
                Part::Lit(b) => b.len(),
                Part::Key => self.req.width,
                Part::Value => self.value.len(),
            })
            .sum()
    }

    /// Appends literal bytes.
    pub fn lit(&mut self, b: &[u8]) -> &mut Self {
        self.req.bytes.extend_from_slice(b);
        self
    }

    /// Appends a word: its literal bytes and value as they are, a hole per
    /// key.
    pub fn word(&mut self, word: &Word) -> &mut Self {
        for p in word {
            match p {
                Part::Lit(b) => self.req.bytes.extend_from_slice(b),
                Part::Value => self.req.bytes.extend_from_slice(self.value),
                Part::Key => {
                    self.req.holes.push(self.req.bytes.len());
                    let w = self.req.width;
                    self.req.bytes.resize(self.req.bytes.len() + w, b'0');
                }
            }
        }
        self
    }

    /// The request.
    pub fn build(self) -> Request {
        self.req
    }
}

/// The value bytes of a run: `size` bytes of a repeating printable pattern
/// (so a response dumped by hand shows where it was cut).
pub fn value_bytes(size: usize) -> Vec<u8> {
    const PATTERN: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    PATTERN.iter().copied().cycle().take(size).collect()
}

/// The parsed key-value options, before a protocol builds its requests.
pub struct KvSpec {
    /// The command templates, in --command order.
    pub templates: Vec<Template>,
    /// Which template each request is.
    pub schedule: Schedule,
    /// The key space.
    pub space: KeySpace,
    /// The bytes of {value}.
    pub value: Vec<u8>,
    /// The ratio as used (one part per template).
    pub ratio: Vec<u32>,
}

impl KvSpec {
    /// Reads the options of `a`; `defaults` are the commands when none is
    /// given, at `default_ratio` unless --ratio says otherwise. A --ratio
    /// whose parts do not match the commands is a usage error.
    pub fn from_args(a: &KvArgs, defaults: &[&str], default_ratio: &[u32]) -> Result<Self> {
        let (texts, fallback): (Vec<&str>, Vec<u32>) = if a.commands.is_empty() {
            (defaults.to_vec(), default_ratio.to_vec())
        } else {
            let n = a.commands.len();
            (a.commands.iter().map(String::as_str).collect(), vec![1; n])
        };
        if texts.len() > MAX_COMMANDS {
            return Err(error::usage(format!(
                "{} --command given; at most {MAX_COMMANDS}",
                texts.len()
            )));
        }
        let templates = texts
            .iter()
            .map(|t| Template::parse(t))
            .collect::<Result<Vec<_>>>()?;
        let ratio = a.ratio.as_ref().map_or(fallback, |r| r.0.clone());
        if ratio.len() != templates.len() {
            let given = if a.commands.is_empty() {
                format!(
                    "{} default commands ({})",
                    templates.len(),
                    texts.join(", ")
                )
            } else {
                format!("{} --command", templates.len())
            };
            return Err(error::usage(format!(
                "--ratio {} has {} part{} but there are {given}: give one part per command",
                ratio
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(":"),
                ratio.len(),
                if ratio.len() == 1 { "" } else { "s" },
            )));
        }
        Ok(Self {
            schedule: Schedule::new(&ratio),
            space: KeySpace::new(a.keys, a.key_dist)?,
            value: value_bytes(a.value_size as usize),
            templates,
            ratio,
        })
    }

    /// What the report's `config.workload_options` records of these
    /// options.
    pub fn options(&self, a: &KvArgs) -> std::collections::BTreeMap<String, serde_json::Value> {
        use serde_json::json;
        [
            (
                "commands",
                json!(self.templates.iter().map(|t| &t.text).collect::<Vec<_>>()),
            ),
            (
                "ratio",
                json!(
                    self.ratio
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(":")
                ),
            ),
            ("keys", json!(self.space.keys)),
            ("key_dist", json!(a.key_dist.to_string())),
            ("value_size", json!(self.value.len())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Names the distinct command names of the templates take, in first-use
    /// order, and the index into them of each template: the report counts
    /// responses per command name, as the servers' own counters do, so two
    /// templates of one command add up. `name` normalises a template's
    /// command name (redis: upper case).
    pub fn op_names(&self, name: impl Fn(&Template) -> String) -> (Vec<String>, Vec<u16>) {
        let mut names: Vec<String> = Vec::new();
        let index = self
            .templates
            .iter()
            .map(|t| {
                let n = name(t);
                let i = names.iter().position(|x| *x == n).unwrap_or_else(|| {
                    names.push(n);
                    names.len() - 1
                });
                i as u16
            })
            .collect();
        (names, index)
    }
}

/// The request table both key-value exchanges push from: one request per
/// template, the schedule, the key space.
pub struct Mix {
    /// One request per template.
    pub requests: Vec<Request>,
    /// Which template each request is.
    pub schedule: Schedule,
    /// The key space.
    pub space: KeySpace,
}

impl Mix {
    /// Appends request `seq` (its template by the schedule, a fresh key).
    #[inline]
    pub fn push(&self, out: &mut Vec<u8>, seq: u64) {
        self.requests[self.schedule.op(seq)].push(out, self.space.draw());
    }

    /// The request length when every template has the same one.
    pub fn request_len(&self) -> Option<usize> {
        let first = self.requests.first()?.len();
        self.requests
            .iter()
            .all(|r| r.len() == first)
            .then_some(first)
    }
}

/// A data block of known length followed by CR LF, as a RESP bulk string
/// and a memcached VALUE frame their bytes: the bytes are skipped, not
/// read, and the block may end in any later read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Bytes of the block still to skip.
    Bytes(u64),
    /// The bytes are over; the CR is next.
    Cr,
    /// The CR was read; the LF is next.
    Lf,
}

impl Block {
    /// Takes one step over `data[*i..]`, which is not empty: true once the
    /// LF that ends the block was consumed (the block then stays `Lf`); a
    /// byte other than the CR or LF due is a protocol error.
    pub fn step(&mut self, data: &[u8], i: &mut usize) -> Result<bool, ErrorClass> {
        match *self {
            Block::Bytes(left) => {
                let take = left.min((data.len() - *i) as u64);
                *i += take as usize;
                *self = if take == left {
                    Block::Cr
                } else {
                    Block::Bytes(left - take)
                };
                Ok(false)
            }
            Block::Cr => {
                if data[*i] != b'\r' {
                    return Err(ErrorClass::Protocol);
                }
                *i += 1;
                *self = Block::Lf;
                Ok(false)
            }
            Block::Lf => {
                if data[*i] != b'\n' {
                    return Err(ErrorClass::Protocol);
                }
                *i += 1;
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: &anyhow::Error) -> Option<u8> {
        e.downcast_ref::<error::Exit>().map(|x| x.code)
    }

    #[test]
    fn templates_parse_fields_and_literal_braces() {
        let t = Template::parse("SET  key:{key}\t{value}").unwrap();
        assert_eq!(t.name(), b"SET");
        assert_eq!(
            t.args(),
            [
                vec![Part::Lit(b"key:".to_vec()), Part::Key],
                vec![Part::Value]
            ]
        );
        let t = Template::parse("HSET h{{x}} f:{key}:{key}").unwrap();
        assert_eq!(t.args()[0], vec![Part::Lit(b"h{x}".to_vec())]);
        assert_eq!(
            t.args()[1],
            vec![
                Part::Lit(b"f:".to_vec()),
                Part::Key,
                Part::Lit(b":".to_vec()),
                Part::Key
            ]
        );
    }

    #[test]
    fn bad_templates_are_usage_errors_naming_the_problem() {
        for (t, says) in [
            ("GET key:{id}", "unknown field {id}"),
            ("GET key:{}", "unknown field {}"),
            ("GET {key", "unclosed '{'"),
            ("GET key}", "stray '}'"),
            ("", "needs a command"),
            ("   ", "needs a command"),
            ("{key} x", "command name cannot hold a field"),
        ] {
            let e = Template::parse(t).unwrap_err();
            assert_eq!(code(&e), Some(2), "{t}");
            assert!(e.to_string().contains(says), "{t}: {e}");
        }
    }

    #[test]
    fn the_schedule_interleaves_by_ratio() {
        let s = Schedule::new(&[1, 10]);
        assert_eq!(s.len(), 11);
        let ops: Vec<usize> = (0..11).map(|i| s.op(i)).collect();
        assert_eq!(ops.iter().filter(|&&o| o == 0).count(), 1);
        // Spread: the SET is not at either end of the round.
        let set_at = ops.iter().position(|&o| o == 0).unwrap();
        assert!(set_at > 0 && set_at < 10, "{ops:?}");
        assert_eq!(s.op(11), ops[0]);
        // 2:20 is 1:10; a zero part never runs.
        assert_eq!(Schedule::new(&[2, 20]).len(), 11);
        let s = Schedule::new(&[0, 3, 1]);
        assert_eq!(s.len(), 4);
        assert!((0..100).all(|i| s.op(i) != 0));
        assert_eq!((0..4).filter(|&i| s.op(i) == 2).count(), 1);
        // 1:1 alternates.
        let s = Schedule::new(&[1, 1]);
        assert_eq!((0..4).map(|i| s.op(i)).collect::<Vec<_>>(), [0, 1, 0, 1]);
    }

    fn args(cmds: &[&str], ratio: Option<Vec<u32>>) -> KvArgs {
        use crate::load::Ratio;
        use clap::Parser;
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: KvArgs,
        }
        let mut a = P::parse_from(["x", "127.0.0.1:1"]).a;
        a.commands = cmds.iter().map(|s| s.to_string()).collect();
        a.ratio = ratio.map(Ratio);
        a
    }

    #[test]
    fn a_ratio_must_match_the_commands() {
        let d = ["SET k{key} {value}", "GET k{key}"];
        let s = KvSpec::from_args(&args(&[], None), &d, &[1, 10]).unwrap();
        assert_eq!(s.ratio, [1, 10]);
        let s = KvSpec::from_args(&args(&["GET a", "GET b", "PING"], None), &d, &[1, 10]).unwrap();
        assert_eq!(s.ratio, [1, 1, 1]);
        let e = KvSpec::from_args(&args(&["GET a"], Some(vec![1, 10])), &d, &[1, 10])
            .err()
            .unwrap();
        assert_eq!(code(&e), Some(2));
        assert!(
            e.to_string()
                .contains("has 2 parts but there are 1 --command"),
            "{e}"
        );
        let e = KvSpec::from_args(&args(&[], Some(vec![1, 2, 3])), &d, &[1, 10])
            .err()
            .unwrap();
        assert!(e.to_string().contains("2 default commands"), "{e}");
    }

    #[test]
    fn requests_get_fixed_width_keys_in_their_holes() {
        let space = KeySpace::new(100_000, KeyDist::Uniform).unwrap();
        assert_eq!(space.width(), 5);
        let value = value_bytes(3);
        let t = Template::parse("SET k:{key}:{key} {value}").unwrap();
        let mut b = RequestBuilder::new(&space, &value);
        b.lit(b"<");
        for w in &t.words {
            b.word(w).lit(b" ");
        }
        let req = b.build();
        let mut out = b"x".to_vec();
        req.push(&mut out, 42);
        assert_eq!(out, b"x<SET k:00042:00042 012 ");
        req.push(&mut out, 99_999);
        assert!(out.ends_with(b"<SET k:99999:99999 012 "));
        assert_eq!(req.len(), b"<SET k:00042:00042 012 ".len());
        assert_eq!(KeySpace::new(1, KeyDist::Uniform).unwrap().width(), 1);
        assert_eq!(KeySpace::new(10, KeyDist::Uniform).unwrap().width(), 1);
        assert_eq!(KeySpace::new(11, KeyDist::Uniform).unwrap().width(), 2);
    }

    #[test]
    fn uniform_keys_cover_the_space_and_stay_inside_it() {
        let space = KeySpace::new(10, KeyDist::Uniform).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[space.draw_with(&mut rng) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        // The thread-local generator draws inside the space too.
        assert!((0..1000).all(|_| space.draw() < 10));
    }

    #[test]
    fn zipf_keys_are_skewed_toward_key_zero() {
        // Zipf(n = 1000, s = 0.99): P(rank 1) = 1 / H(1000, 0.99) ~ 0.13;
        // uniform would give each key 0.001.
        let space = KeySpace::new(1000, KeyDist::Zipf(0.99)).unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        let n = 100_000;
        let mut seen = vec![0u32; 1000];
        for _ in 0..n {
            seen[space.draw_with(&mut rng) as usize] += 1;
        }
        let h: f64 = (1..=1000).map(|k| 1.0 / (k as f64).powf(0.99)).sum();
        let top = f64::from(seen[0]) / f64::from(n);
        assert!(
            (top - 1.0 / h).abs() < 0.01,
            "top key share {top}, expected {}",
            1.0 / h
        );
        // Rank 2 about half as often as rank 1; the coldest key rarely.
        let r = f64::from(seen[1]) / f64::from(seen[0]);
        assert!((0.42..0.58).contains(&r), "{r}");
        assert!(seen[999] < 100, "{}", seen[999]);
        // The 10 hottest keys take about 2/5 of the requests.
        let top10: u32 = seen[..10].iter().sum();
        assert!(top10 > n / 3, "{top10}");
    }
}
