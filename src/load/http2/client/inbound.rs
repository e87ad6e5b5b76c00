//! What a connection does with the frames it reads: responses (header
//! blocks, body bytes, trailers), resets, settings, pings, GOAWAY and
//! window updates; any frame that breaks the protocol is a connection
//! error (GOAWAY with its code).

use super::super::classify::{self, Failure, Verdict};
use super::super::frame::{self, ConnError, Frame, HEAD_LEN, MAX_WINDOW};
use super::super::{CHECKED_BODY, Judge, judge};
use super::{Client, Done, MAX_FRAME, MAX_HEADER_LIST, bad, parse_status};
use crate::load::workload::ErrorClass;

impl Client<'_> {
    /// Handles the whole frames of `buf[start..]`; returns where the
    /// unhandled bytes start.
    pub(super) fn on_bytes(&mut self, buf: &[u8], mut start: usize) -> usize {
        while !self.dead && buf.len() - start >= HEAD_LEN {
            let h = frame::head(&buf[start..]);
            if h.len > MAX_FRAME {
                self.protocol(ConnError {
                    code: frame::FRAME_SIZE_ERROR,
                    why: "frame larger than our SETTINGS_MAX_FRAME_SIZE",
                });
                break;
            }
            let Some(p) = buf.get(start + HEAD_LEN..start + HEAD_LEN + h.len) else {
                break;
            };
            start += HEAD_LEN + h.len;
            if let Err(e) = self.on_frame(&h, p) {
                self.protocol(e);
            }
        }
        start
    }

    fn on_frame(&mut self, h: &frame::Head, p: &[u8]) -> Result<(), ConnError> {
        let f = frame::parse(h, p)?;
        if !self.settled {
            if !matches!(f, Frame::Settings { ack: false, .. }) {
                return Err(bad(
                    frame::PROTOCOL_ERROR,
                    "the server's first frame is not SETTINGS",
                ));
            }
            self.settled = true;
        }
        if let Some((sid, _)) = self.cont {
            if !matches!(f, Frame::Continuation { stream, .. } if stream == sid) {
                return Err(bad(
                    frame::PROTOCOL_ERROR,
                    "a header block cut by another frame",
                ));
            }
        }
        match f {
            Frame::Data {
                stream,
                end,
                data,
                flow,
            } => self.on_data(stream, end, data, flow)?,
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                self.check_id(stream)?;
                if end_headers {
                    self.on_block(stream, end_stream, block)?;
                } else {
                    self.hblock.clear();
                    self.hblock.extend_from_slice(block);
                    self.cont = Some((stream, end_stream));
                }
            }
            Frame::Continuation {
                end_headers, block, ..
            } => {
                let Some((stream, end_stream)) = self.cont else {
                    return Err(bad(frame::PROTOCOL_ERROR, "CONTINUATION without HEADERS"));
                };
                if self.hblock.len() + block.len() > MAX_HEADER_LIST {
                    return Err(bad(frame::PROTOCOL_ERROR, "header block too large"));
                }
                self.hblock.extend_from_slice(block);
                if end_headers {
                    self.cont = None;
                    let b = std::mem::take(&mut self.hblock);
                    let r = self.on_block(stream, end_stream, &b);
                    self.hblock = b;
                    r?;
                }
            }
            Frame::Settings { ack: true, .. } => {}
            Frame::Settings { ack: false, pairs } => {
                self.apply_settings(pairs)?;
                frame::put_head(&mut self.out, 0, frame::SETTINGS, frame::ACK, 0);
            }
            Frame::Ping { ack: true, .. } => {}
            Frame::Ping { ack: false, data } => {
                frame::put_head(&mut self.out, 8, frame::PING, frame::ACK, 0);
                self.out.extend_from_slice(&data);
            }
            Frame::GoAway { last, code } => self.on_goaway(last, code),
            Frame::RstStream { stream, code } => {
                self.check_id(stream)?;
                if let Some(&slot) = self.by_id.get(&stream) {
                    let f = Failure {
                        code: Some(code),
                        reset: true,
                        remote: true,
                        ..Failure::default()
                    };
                    let class = match classify::verdict(f) {
                        Verdict::Stream(c) | Verdict::Connection(c) => c,
                        Verdict::Retry => ErrorClass::Protocol,
                    };
                    self.finish(slot, Done::Error(class));
                }
            }
            Frame::WindowUpdate { stream: 0, inc } => {
                self.conn_send += i64::from(inc);
                if self.conn_send > MAX_WINDOW {
                    return Err(bad(frame::FLOW_CONTROL_ERROR, "connection window overflow"));
                }
            }
            Frame::WindowUpdate { stream, inc } => {
                if let Some(s) = self
                    .by_id
                    .get(&stream)
                    .and_then(|&i| self.slots[i].as_mut())
                {
                    s.send_window += i64::from(inc);
                    if s.send_window > MAX_WINDOW {
                        return Err(bad(frame::FLOW_CONTROL_ERROR, "stream window overflow"));
                    }
                }
            }
            Frame::Ignored => {}
        }
        Ok(())
    }

    /// A frame for a stream we never opened (server streams: push is off).
    fn check_id(&self, stream: u32) -> Result<(), ConnError> {
        if stream % 2 == 0 || stream >= self.next_id {
            return Err(bad(frame::PROTOCOL_ERROR, "frame on an idle stream"));
        }
        Ok(())
    }

    fn on_data(
        &mut self,
        stream: u32,
        end: bool,
        data: &[u8],
        flow: usize,
    ) -> Result<(), ConnError> {
        self.check_id(stream)?;
        self.conn_unacked += flow;
        if self.conn_unacked >= self.conn_half {
            frame::put_word(
                &mut self.out,
                frame::WINDOW_UPDATE,
                0,
                self.conn_unacked as u32,
            );
            self.conn_unacked = 0;
        }
        // A stream we reset (timed out): only the connection's window.
        let Some(&slot) = self.by_id.get(&stream) else {
            return Ok(());
        };
        let Some(s) = self.slots[slot].as_mut() else {
            return Ok(());
        };
        if s.status.is_none() {
            return Err(bad(
                frame::PROTOCOL_ERROR,
                "DATA before the response's HEADERS",
            ));
        }
        if s.keep && s.kept.len() <= CHECKED_BODY {
            s.kept.extend_from_slice(data);
        }
        if matches!(self.w.judge, Judge::Grpc) {
            s.messages.feed(data);
        }
        if end {
            self.complete(slot);
        } else {
            s.unacked += flow;
            if s.unacked >= self.stream_half {
                frame::put_word(
                    &mut self.out,
                    frame::WINDOW_UPDATE,
                    stream,
                    s.unacked as u32,
                );
                s.unacked = 0;
            }
        }
        Ok(())
    }

    /// A whole header block: decoded even for a stream we reset (the
    /// dynamic table must follow the peer's); the response's status and
    /// grpc-status kept, the rest seen and dropped.
    fn on_block(&mut self, stream: u32, end_stream: bool, block: &[u8]) -> Result<(), ConnError> {
        let mut status = None;
        let mut bad_status = false;
        let mut grpc = None;
        self.dec
            .decode_wanted(
                block,
                |n| n == b":status" || n == b"grpc-status",
                |name, value| match name {
                    b":status" => match parse_status(value) {
                        Some(s) => status = Some(s),
                        None => bad_status = true,
                    },
                    b"grpc-status" => {
                        grpc = Some(std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()));
                    }
                    _ => {}
                },
            )
            .map_err(|_| bad(frame::COMPRESSION_ERROR, "bad HPACK header block"))?;
        let Some(&slot) = self.by_id.get(&stream) else {
            return Ok(());
        };
        let Some(s) = self.slots[slot].as_mut() else {
            return Ok(());
        };
        if s.status.is_none() {
            let Some(st) = status.filter(|_| !bad_status) else {
                return Err(bad(
                    frame::PROTOCOL_ERROR,
                    "a response without a valid :status",
                ));
            };
            if (100..200).contains(&st) {
                // Informational: the final response follows.
                if end_stream {
                    return Err(bad(
                        frame::PROTOCOL_ERROR,
                        "an informational response ends the stream",
                    ));
                }
                return Ok(());
            }
            s.status = Some(st);
            s.grpc = grpc;
        } else {
            if !end_stream {
                return Err(bad(frame::PROTOCOL_ERROR, "trailers without END_STREAM"));
            }
            if s.grpc.is_none() {
                s.grpc = grpc;
            }
        }
        if end_stream {
            self.complete(slot);
        }
        Ok(())
    }

    /// A whole response: judged, and the worker's first OK one checked.
    fn complete(&mut self, slot: usize) {
        let Some(s) = self.slots[slot].as_mut() else {
            return;
        };
        let w = self.w;
        let mut outcome = judge(&w.judge, s.status.unwrap_or_default(), s.grpc);
        // An OK unary answer is one whole uncompressed message: the
        // status cannot make a broken body a success.
        if matches!(w.judge, Judge::Grpc) && outcome.error.is_none() {
            outcome.error = s.messages.unary_fault().map(ErrorClass::GrpcFraming);
        }
        // Streams in flight together may each keep their first body; the
        // first to finish OK is checked, the others are dropped unchecked.
        if s.keep && outcome.error.is_none() && !w.checked.replace(true) {
            if let Some(check) = w
                .check_reply
                .as_ref()
                .filter(|_| s.kept.len() <= CHECKED_BODY)
            {
                if !check(&s.kept) {
                    outcome.error = Some(ErrorClass::GrpcBadResponse);
                }
            }
        }
        if s.body_off < w.call.body.len() {
            // Answered before the whole request went: stop sending it.
            frame::put_word(&mut self.out, frame::RST_STREAM, s.id, frame::CANCEL);
        }
        self.finish(slot, Done::Answer(outcome));
    }

    /// GOAWAY: with NO_ERROR the streams above `last` were not processed
    /// and go again on the next connection, those at or below finish;
    /// with an error code every stream in flight is cut with it.
    fn on_goaway(&mut self, last: u32, code: u32) {
        self.goaway = true;
        let f = Failure {
            code: Some(code),
            go_away: true,
            remote: true,
            ..Failure::default()
        };
        if classify::verdict(f) != Verdict::Retry {
            self.fail(f);
            return;
        }
        for slot in 0..self.slots.len() {
            if self.slots[slot].as_ref().is_some_and(|s| s.id > last) {
                self.finish(slot, Done::Retry);
            }
        }
    }

    fn apply_settings(&mut self, pairs: &[u8]) -> Result<(), ConnError> {
        for (id, v) in frame::settings(pairs) {
            match id {
                frame::SETTINGS_ENABLE_PUSH if v > 1 => {
                    return Err(bad(
                        frame::PROTOCOL_ERROR,
                        "SETTINGS_ENABLE_PUSH not 0 or 1",
                    ));
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = v as usize,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(bad(frame::FLOW_CONTROL_ERROR, "initial window too large"));
                    }
                    let delta = i64::from(v) - self.peer_window;
                    self.peer_window = i64::from(v);
                    for s in self.slots.iter_mut().flatten() {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return Err(bad(frame::FLOW_CONTROL_ERROR, "stream window overflow"));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(bad(
                            frame::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        ));
                    }
                    self.peer_max_frame = v as usize;
                }
                // The peer's table size bounds a dynamic table our
                // encoder does not use; unknown settings are ignored.
                _ => {}
            }
        }
        Ok(())
    }
}
