//! The raw exchange of tcp-rr and tcp-crr: no framing, a response is a
//! known number of bytes. Either `--req` pattern bytes out and `--resp`
//! back (the response repeats the request's pattern, see proto::rr, so
//! `--verify` can check every byte), or a fixed `--request` and the
//! `--expect`ed answer (a byte count, or the exact bytes).

use anyhow::Result;
use clap::Args;

use crate::error;
use crate::load::workload::{ErrorClass, Exchange, Outcome, Parsed};
use crate::proto::rr;
use crate::values::unescape;

/// The raw exchange's options (tcp-rr, tcp-crr): pattern bytes of a
/// size, or a fixed request and its expected answer.
#[derive(Clone, Debug, Args)]
pub struct RawArgs {
    /// Request size in bytes.
    #[arg(long = "req", value_name = "BYTES", default_value_t = 1, conflicts_with = "request", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub req: u32,
    /// Response size in bytes (default: the request size).
    #[arg(long = "resp", value_name = "BYTES", conflicts_with = "request", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub resp: Option<u32>,
    /// Send this string as the request instead (escapes: \r \n \t \\ \xHH),
    /// e.g. 'PING\r\n' for redis.
    #[arg(long, value_name = "STRING", requires = "expect")]
    pub request: Option<String>,
    /// With --request: the response, as a byte count or as the exact
    /// string (escapes as in --request), e.g. '+PONG\r\n'.
    #[arg(long, value_name = "BYTES|STRING", requires = "request")]
    pub expect: Option<String>,
    /// Check every response byte against the request it answers.
    #[arg(long)]
    pub verify: bool,
}

/// What a transaction sends and expects back.
#[derive(Clone, Debug)]
pub enum RawExchange {
    /// `req` pattern bytes out, `resp` bytes back (the response repeats
    /// the request; see proto::rr).
    Pattern {
        /// Request size.
        req: usize,
        /// Response size.
        resp: usize,
        /// Check every response byte.
        verify: bool,
        /// Transaction 0's request, copied as is when not verifying.
        template: Vec<u8>,
    },
    /// A fixed request (e.g. `PING\r\n`) and what must come back.
    Fixed {
        /// Request bytes.
        request: Vec<u8>,
        /// Expected response.
        expect: Expect,
    },
}

/// The expected response of a fixed request.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Exactly this many bytes, content unchecked.
    Bytes(usize),
    /// Exactly these bytes.
    Exact(Vec<u8>),
}

impl RawExchange {
    /// A pattern exchange of `req` bytes out and `resp` back.
    pub fn pattern(req: usize, resp: usize, verify: bool) -> Self {
        let mut template = vec![0u8; req];
        rr::fill_request(&mut template, 0);
        Self::Pattern {
            req,
            resp,
            verify,
            template,
        }
    }

    /// Request length.
    pub fn req_len(&self) -> usize {
        match self {
            Self::Pattern { req, .. } => *req,
            Self::Fixed { request, .. } => request.len(),
        }
    }

    /// Response length.
    pub fn resp_len(&self) -> usize {
        match self {
            Self::Pattern { resp, .. } => *resp,
            Self::Fixed {
                expect: Expect::Bytes(n),
                ..
            } => *n,
            Self::Fixed {
                expect: Expect::Exact(b),
                ..
            } => b.len(),
        }
    }

    /// Checks `got`, the response bytes at offset `off` of the response to
    /// transaction `seq`.
    #[inline]
    pub fn check(&self, got: &[u8], off: usize, seq: u64) -> Result<(), ErrorClass> {
        match self {
            Self::Pattern {
                verify: true, req, ..
            } => match rr::check_response(got, off, seq, *req) {
                None => Ok(()),
                Some(_) => Err(ErrorClass::Mismatch),
            },
            Self::Fixed {
                expect: Expect::Exact(want),
                ..
            } => {
                if want[off..off + got.len()] == *got {
                    Ok(())
                } else {
                    Err(ErrorClass::Mismatch)
                }
            }
            _ => Ok(()),
        }
    }
}

impl Exchange for RawExchange {
    /// Bytes of the current response seen so far.
    type Cursor = usize;

    fn request_len(&self) -> Option<usize> {
        Some(self.req_len())
    }

    fn response_len(&self) -> Option<usize> {
        Some(self.resp_len())
    }

    #[inline]
    fn push_request(&self, out: &mut Vec<u8>, seq: u64) {
        match self {
            Self::Pattern {
                req, verify: true, ..
            } => {
                let start = out.len();
                out.resize(start + req, 0);
                rr::fill_request(&mut out[start..], seq);
            }
            // Without --verify every request is transaction 0's: a copy.
            Self::Pattern { template, .. } => out.extend_from_slice(template),
            Self::Fixed { request, .. } => out.extend_from_slice(request),
        }
    }

    #[inline]
    fn parse(&self, got: &mut usize, data: &[u8], seq: u64) -> Parsed {
        let resp = self.resp_len();
        let take = (resp - *got).min(data.len());
        if let Err(class) = self.check(&data[..take], *got, seq) {
            return Parsed::Error(class);
        }
        *got += take;
        if *got == resp {
            Parsed::Complete(take, Outcome::OK)
        } else {
            Parsed::Partial
        }
    }

    fn on_eof(&self, got: &usize) -> ErrorClass {
        if *got > 0 {
            ErrorClass::ShortRead
        } else {
            ErrorClass::Closed
        }
    }
}

impl RawExchange {
    /// The exchange the shared TCP options describe: `--request` and
    /// `--expect`, or `--req`/`--resp` pattern bytes.
    pub fn from_args(a: &RawArgs) -> Result<Self> {
        Ok(match (&a.request, &a.expect) {
            (Some(req), Some(exp)) => {
                let request = unescape("--request", req)?;
                if request.is_empty() {
                    return Err(error::usage("--request must not be empty"));
                }
                Self::Fixed {
                    request,
                    expect: parse_expect(exp, a.verify)?,
                }
            }
            _ => Self::pattern(a.req as usize, a.resp.unwrap_or(a.req) as usize, a.verify),
        })
    }
}

impl RawArgs {
    /// What the raw options record in the report's `config`.
    pub fn config(&self) -> crate::report::load::LoadConfig {
        crate::report::load::LoadConfig {
            request: self.request.clone(),
            expect: self.expect.clone(),
            verify: self.verify,
            ..Default::default()
        }
    }
}

/// Parses --expect: a byte count or the exact response (escapes as in
/// --request). An empty response, as a count or as a string, is a usage
/// error: a response of no bytes cannot be waited for.
fn parse_expect(exp: &str, verify: bool) -> Result<Expect> {
    let expect = match exp.parse::<usize>() {
        Ok(0) => {
            return Err(error::usage(
                "--expect 0: a response of 0 bytes cannot be waited for",
            ));
        }
        Ok(n) => Expect::Bytes(n),
        Err(_) => {
            let bytes = unescape("--expect", exp)?;
            if bytes.is_empty() {
                return Err(error::usage(
                    "--expect '': an empty response cannot be waited for (give the \
                     response, or its size in bytes)",
                ));
            }
            Expect::Exact(bytes)
        }
    };
    if verify && matches!(expect, Expect::Bytes(_)) {
        return Err(error::usage(
            "--verify with --expect BYTES: give the expected string to verify",
        ));
    }
    Ok(expect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_expected_response_is_a_usage_error() {
        for exp in ["", "0"] {
            let Err(e) = parse_expect(exp, false) else {
                panic!("--expect {exp:?} was accepted");
            };
            assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
            assert!(e.to_string().contains("cannot be waited for"), "{e}");
        }
        assert!(matches!(parse_expect("5", false), Ok(Expect::Bytes(5))));
        assert!(
            matches!(parse_expect("+PONG\\r\\n", true), Ok(Expect::Exact(b)) if b == b"+PONG\r\n")
        );
        assert!(parse_expect("5", true).is_err());
    }

    #[test]
    fn a_pattern_response_completes_across_reads_and_pipelined() {
        let ex = RawExchange::pattern(3, 4, false);
        let mut got = 0;
        assert_eq!(ex.parse(&mut got, b"ab", 0), Parsed::Partial);
        assert_eq!(got, 2);
        // The rest of this response, then the start of the next one.
        assert_eq!(
            ex.parse(&mut got, b"cdef", 0),
            Parsed::Complete(2, Outcome::OK)
        );
        assert_eq!(ex.on_eof(&got), ErrorClass::ShortRead);
        assert_eq!(ex.on_eof(&0), ErrorClass::Closed);
    }

    #[test]
    fn an_exact_response_is_checked() {
        let ex = RawExchange::Fixed {
            request: b"PING\r\n".to_vec(),
            expect: Expect::Exact(b"+PONG\r\n".to_vec()),
        };
        let mut got = 0;
        assert_eq!(ex.parse(&mut got, b"+PO", 0), Parsed::Partial);
        assert_eq!(
            ex.parse(&mut got, b"NG\r\n", 0),
            Parsed::Complete(4, Outcome::OK)
        );
        let mut got = 0;
        assert_eq!(
            ex.parse(&mut got, b"-ERR\r\n", 0),
            Parsed::Error(ErrorClass::Mismatch)
        );
    }
}
