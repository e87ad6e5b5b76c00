//! What an HTTP/2 failure counts as: an error class, and whether the
//! connection it came on can carry more streams. Pure, so each case is
//! tested without a peer.

use crate::load::workload::ErrorClass;

/// What a failed request means for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The stream failed (RST_STREAM, a bad response): an error of this
    /// class, and the connection goes on.
    Stream(ErrorClass),
    /// The connection failed under the stream (GOAWAY with an error code,
    /// a socket error, a protocol error): an error of this class, and the
    /// connection is replaced.
    Connection(ErrorClass),
    /// A graceful GOAWAY (NO_ERROR) refused the stream before the server
    /// processed it: no error; the request is issued again on the
    /// connection that replaces this one (RFC 9113 6.8: streams above the
    /// last stream id were not processed and may be retried).
    Retry,
}

/// What the connection saw of a failure, as plain values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP/2 error code, when the failure carries one.
    pub code: Option<u32>,
    /// It came from a GOAWAY frame.
    pub go_away: bool,
    /// It came from a RST_STREAM frame.
    pub reset: bool,
    /// The peer sent it (not our own codec's verdict).
    pub remote: bool,
    /// A socket error, classed as a plain connection's would be.
    pub io: Option<ErrorClass>,
}

/// The class of a socket error under a connection; TLS reports some
/// without an errno (a close in the middle of a record), so by kind as
/// well.
pub fn io_class(e: &std::io::Error) -> ErrorClass {
    use std::io::ErrorKind as K;
    if e.raw_os_error().is_some() {
        return ErrorClass::of(e);
    }
    match e.kind() {
        K::UnexpectedEof => ErrorClass::ShortRead,
        K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted => ErrorClass::Reset,
        K::TimedOut => ErrorClass::TimedOut,
        K::ConnectionRefused => ErrorClass::Refused,
        _ => ErrorClass::Other,
    }
}

/// The verdict on `f`.
pub fn verdict(f: Failure) -> Verdict {
    const NO_ERROR: u32 = 0;
    if let Some(class) = f.io {
        return Verdict::Connection(class);
    }
    match f.code {
        Some(NO_ERROR) if f.go_away => Verdict::Retry,
        Some(code) if f.go_away => Verdict::Connection(ErrorClass::GoAway(code)),
        Some(code) if f.reset && f.remote => Verdict::Stream(ErrorClass::RstStream(code)),
        // Our own codec reset the stream or ended the connection: the
        // peer broke the protocol.
        _ => Verdict::Connection(ErrorClass::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: Option<u32>, go_away: bool, reset: bool, remote: bool) -> Failure {
        Failure {
            code,
            go_away,
            reset,
            remote,
            io: None,
        }
    }

    #[test]
    fn frames_and_sockets_are_classed_by_code() {
        // RST_STREAM REFUSED_STREAM (7) from the server: the stream only.
        let v = verdict(f(Some(7), false, true, true));
        assert_eq!(v, Verdict::Stream(ErrorClass::RstStream(7)));
        assert_eq!(ErrorClass::RstStream(7).name(), "rst_stream:REFUSED_STREAM");
        // GOAWAY ENHANCE_YOUR_CALM (11): the connection is replaced.
        let v = verdict(f(Some(11), true, false, true));
        assert_eq!(v, Verdict::Connection(ErrorClass::GoAway(11)));
        assert_eq!(ErrorClass::GoAway(11).name(), "goaway:ENHANCE_YOUR_CALM");
        assert_eq!(ErrorClass::GoAway(0x42).name(), "goaway:0x42");
        // A graceful GOAWAY is no error: the request goes again.
        assert_eq!(verdict(f(Some(0), true, false, true)), Verdict::Retry);
        // Our codec's own verdict: the peer broke the protocol.
        let v = verdict(f(Some(1), false, true, false));
        assert_eq!(v, Verdict::Connection(ErrorClass::Protocol));
        let io = Failure {
            io: Some(ErrorClass::Reset),
            ..f(None, false, false, false)
        };
        assert_eq!(verdict(io), Verdict::Connection(ErrorClass::Reset));
        assert_eq!(ErrorClass::GrpcStatus(5).name(), "grpc_status:NOT_FOUND");
    }
}
