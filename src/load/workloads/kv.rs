//! The key-value exchange core that `redis` and `memcached` share: one
//! [`Exchange`] over a set of command templates (`keyspace`), with each
//! protocol's codec apart behind [`KvProtocol`].
//!
//! What the core owns, the same for every key-value protocol:
//!
//! - the requests: one per template, pushed by the `--ratio` schedule with a
//!   fresh key each ([`Mix`]), so `push_request` writes digits into fixed
//!   holes and allocates nothing;
//! - which template request `seq` was (the schedule read at `seq`): what
//!   the protocol's parser is told it is answering, since pipelined
//!   responses carry no name;
//! - the op accounting: the distinct command names (what `Outcome::op`
//!   indexes, counted per name as the servers' own counters do) and, per
//!   template, its index among them;
//! - the rest of the driver's questions (`request_len`, `on_eof`, `ops`,
//!   per-response counts) and the workload the command line makes.
//!
//! What a protocol supplies ([`KvProtocol`]): its name, default commands
//! and ratio, how a template's command name is counted, per template the
//! request bytes and what its parser needs to know of it
//! ([`KvProtocol::Command`]: redis, whether it is a lookup; memcached, what
//! it is answered with), and the response parser itself (RESP2 framing,
//! memcached's text framing). Everything is generic (no dynamic dispatch):
//! `KvExchange<P>` compiles to what a hand-written exchange would.

use std::marker::PhantomData;

use anyhow::Result;

use crate::load::KvArgs;
use crate::load::workload::{ConnMode, ErrorClass, Exchange, Outcome, Parsed, TcpWorkload};
use crate::load::workloads::keyspace::{KvSpec, Mix, Request, Template};
use crate::report::load::LoadConfig;

/// The protocol side of a key-value workload: its codec and its defaults.
pub trait KvProtocol {
    /// Its subcommand, also the report's `workload`.
    const NAME: &'static str;
    /// The commands when no --command is given.
    const DEFAULT_COMMANDS: &'static [&'static str];
    /// Their ratio.
    const DEFAULT_RATIO: &'static [u32];

    /// What the response parser needs to know of a template's command
    /// (kept per template; read per response).
    type Command: Copy + Send + Sync;
    /// Per-connection state of the response parser.
    type Cursor: Default + Send;

    /// The name a template's responses are counted under (the server's
    /// own spelling: redis upper case).
    fn op_name(t: &Template) -> String;

    /// Consumes `data`, the next bytes of the response to a request of
    /// `command`; a whole response's [`Outcome`] says hit or miss and
    /// whether the server refused the request (its `op` is the core's to
    /// fill in).
    fn parse(cursor: &mut Self::Cursor, data: &[u8], command: Self::Command) -> Parsed;

    /// True once any byte of the awaited response has been consumed (a
    /// close then cuts it short instead of falling between responses).
    fn started(cursor: &Self::Cursor) -> bool;

    /// Consumes `data`, the next bytes of the answer to the on-connect
    /// step ([`KvExchange::with_on_connect`]); a refusal is a whole answer
    /// whose outcome has an error. Only a protocol that has a step needs
    /// it.
    fn parse_on_connect(_cursor: &mut Self::Cursor, _data: &[u8]) -> Parsed {
        Parsed::Error(ErrorClass::Protocol)
    }
}

/// The exchange of a key-value protocol `P` over a set of templates.
pub struct KvExchange<P: KvProtocol> {
    mix: Mix,
    /// Distinct command names, what `Outcome::op` indexes.
    ops: Vec<String>,
    /// Per template: its index into `ops`.
    op_of: Vec<u16>,
    /// Per template: what the parser needs to know of it.
    commands: Vec<P::Command>,
    /// The on-connect step's bytes (redis AUTH/HELLO), if any.
    on_connect: Option<Vec<u8>>,
    // `fn() -> P`: the exchange holds no `P`, so it is Send and Sync
    // whatever `P` is.
    protocol: PhantomData<fn() -> P>,
}

impl<P: KvProtocol> KvExchange<P> {
    /// The exchange of `spec`'s templates, encoded by the protocol: per
    /// template (in `spec.templates` order) its request and its command.
    pub fn from_parts(spec: KvSpec, requests: Vec<Request>, commands: Vec<P::Command>) -> Self {
        debug_assert_eq!(requests.len(), spec.templates.len());
        debug_assert_eq!(commands.len(), spec.templates.len());
        let (ops, op_of) = spec.op_names(P::op_name);
        Self {
            mix: Mix {
                requests,
                schedule: spec.schedule,
                space: spec.space,
            },
            ops,
            op_of,
            commands,
            on_connect: None,
            protocol: PhantomData,
        }
    }

    /// Opens every connection with `step` (its answer read by
    /// [`KvProtocol::parse_on_connect`]).
    pub fn with_on_connect(mut self, step: Option<Vec<u8>>) -> Self {
        self.on_connect = step;
        self
    }
}

impl<P: KvProtocol> Exchange for KvExchange<P> {
    type Cursor = P::Cursor;

    fn request_len(&self) -> Option<usize> {
        self.mix.request_len()
    }

    fn response_len(&self) -> Option<usize> {
        None
    }

    #[inline]
    fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
        self.mix.push(out, seq);
    }

    #[inline]
    fn parse(&self, cursor: &mut P::Cursor, data: &[u8], seq: u64) -> Parsed {
        let t = self.mix.schedule.op(seq);
        match P::parse(cursor, data, self.commands[t]) {
            Parsed::Complete(n, o) => Parsed::Complete(
                n,
                Outcome {
                    op: self.op_of[t],
                    ..o
                },
            ),
            other => other,
        }
    }

    fn on_eof(&self, cursor: &P::Cursor) -> ErrorClass {
        if P::started(cursor) {
            ErrorClass::ShortRead
        } else {
            ErrorClass::Closed
        }
    }

    fn ops(&self) -> &[String] {
        &self.ops
    }

    fn counts_responses(&self) -> bool {
        true
    }

    fn on_connect(&self) -> Option<&[u8]> {
        self.on_connect.as_deref()
    }

    fn parse_on_connect(&self, cursor: &mut P::Cursor, data: &[u8]) -> Parsed {
        P::parse_on_connect(cursor, data)
    }
}

/// The workload of protocol `P` for a command line: persistent
/// connections, `--pipeline` requests in flight on each, and the exchange
/// `build` makes of the parsed options (or why there is none: a usage
/// error, reported after the target address is checked).
pub fn workload<P: KvProtocol>(
    a: &KvArgs,
    build: impl FnOnce(KvSpec) -> Result<KvExchange<P>>,
) -> TcpWorkload<KvExchange<P>> {
    let built = KvSpec::from_args(a, P::DEFAULT_COMMANDS, P::DEFAULT_RATIO).and_then(|spec| {
        let options = spec.options(a);
        Ok((build(spec)?, options))
    });
    let (exchange, options) = match built {
        Ok((e, o)) => (Ok(e), o),
        Err(e) => (Err(e), Default::default()),
    };
    TcpWorkload {
        name: P::NAME,
        mode: ConnMode::Persistent {
            pipeline: a.pipeline as usize,
        },
        addr: a.addr.clone(),
        target: None,
        tls: None,
        config: LoadConfig {
            workload_options: options,
            ..Default::default()
        },
        exchange,
    }
}
