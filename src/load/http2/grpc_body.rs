//! A gRPC response body's message framing, followed as its DATA arrives:
//! each message is a flag byte (bit 0: compressed), a 4-byte big-endian
//! length and that many bytes. A unary call's OK answer is exactly one
//! whole uncompressed message (we offer no `grpc-accept-encoding`, so a
//! compressed one was never negotiated); anything else is the server
//! breaking gRPC, whatever its grpc-status says. Nothing is kept but the
//! position in the current message, so a length prefix of 4 GB costs
//! nothing: the body ends first, cut.

use crate::load::workload::GrpcFault;

/// The framing of one response body so far.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    /// The current message's prefix, as far as it came.
    head: [u8; 5],
    /// Bytes of `head` received (5: the message's bytes are coming).
    have: usize,
    /// Bytes of the current message still to come.
    left: u64,
    /// Messages whose prefix came.
    count: u64,
    /// The first fault seen; the rest of the body is not read.
    fault: Option<GrpcFault>,
}

impl Messages {
    /// Follows `data`, the next bytes of the body.
    pub fn feed(&mut self, mut data: &[u8]) {
        while self.fault.is_none() && !data.is_empty() {
            if self.have == 5 {
                let n = (data.len() as u64).min(self.left);
                data = &data[n as usize..];
                self.left -= n;
                if self.left == 0 {
                    self.have = 0;
                }
                continue;
            }
            let n = (5 - self.have).min(data.len());
            self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have < 5 {
                break;
            }
            self.count += 1;
            self.fault = match self.head[0] {
                0 if self.count > 1 => Some(GrpcFault::ExtraMessages),
                0 => None,
                1 => Some(GrpcFault::Compressed),
                _ => Some(GrpcFault::BadFlags),
            };
            self.left = u64::from(u32::from_be_bytes([
                self.head[1],
                self.head[2],
                self.head[3],
                self.head[4],
            ]));
            if self.left == 0 {
                self.have = 0;
            }
        }
    }

    /// What is wrong with the whole body of a unary call's answer, now
    /// that it ended; None when it was one whole uncompressed message.
    pub fn unary_fault(&self) -> Option<GrpcFault> {
        if self.fault.is_some() {
            return self.fault;
        }
        if self.have > 0 {
            return Some(GrpcFault::Truncated);
        }
        (self.count == 0).then_some(GrpcFault::NoMessage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault_of(chunks: &[&[u8]]) -> Option<GrpcFault> {
        let mut m = Messages::default();
        for c in chunks {
            m.feed(c);
        }
        m.unary_fault()
    }

    fn message(flag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![flag];
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn one_whole_message_is_right_however_it_is_cut() {
        let m = message(0, b"hello");
        for cut in 0..=m.len() {
            assert_eq!(fault_of(&[&m[..cut], &m[cut..]]), None, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = m.chunks(1).collect();
        assert_eq!(fault_of(&bytes), None);
        assert_eq!(fault_of(&[&message(0, b"")]), None);
    }

    #[test]
    fn every_broken_framing_is_named() {
        // A 4 GB length over 3 bytes: cut.
        assert_eq!(
            fault_of(&[b"\x00\xff\xff\xff\xffabc"]),
            Some(GrpcFault::Truncated)
        );
        assert_eq!(fault_of(&[b"\x00\x00\x00"]), Some(GrpcFault::Truncated));
        assert_eq!(fault_of(&[&message(1, b"zz")]), Some(GrpcFault::Compressed));
        assert_eq!(
            fault_of(&[&message(0x80, b"zz")]),
            Some(GrpcFault::BadFlags)
        );
        assert_eq!(fault_of(&[]), Some(GrpcFault::NoMessage));
        let many: Vec<u8> = (0..1000).flat_map(|_| message(0, b"x")).collect();
        assert_eq!(fault_of(&[&many]), Some(GrpcFault::ExtraMessages));
        let two = [message(0, b""), message(0, b"")].concat();
        assert_eq!(fault_of(&[&two]), Some(GrpcFault::ExtraMessages));
    }

    /// The reference reader: the whole body at once, message by message.
    fn reference(body: &[u8]) -> Option<GrpcFault> {
        let mut at = 0;
        let mut count = 0;
        while at < body.len() {
            let Some(head) = body.get(at..at + 5) else {
                return Some(GrpcFault::Truncated);
            };
            count += 1;
            match head[0] {
                0 if count > 1 => return Some(GrpcFault::ExtraMessages),
                0 => {}
                1 => return Some(GrpcFault::Compressed),
                _ => return Some(GrpcFault::BadFlags),
            }
            let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            if body.len() - at - 5 < len {
                return Some(GrpcFault::Truncated);
            }
            at += 5 + len;
        }
        (count == 0).then_some(GrpcFault::NoMessage)
    }

    proptest::proptest! {
        #![proptest_config(crate::hostile::config(1024))]

        /// Valid bodies (one message, or several) from the model, mutated,
        /// cut into DATA frames anywhere: the streaming reader says what
        /// the whole-body reader says, and never panics.
        #[test]
        fn cut_and_mutated_bodies_are_read_as_the_whole_body_reader_reads_them(
            msgs in proptest::collection::vec(proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..20), 0..3),
            ms in crate::hostile::mutations(),
            cuts in proptest::collection::vec(proptest::arbitrary::any::<proptest::sample::Index>(), 0..6),
        ) {
            let body: Vec<u8> = msgs.iter().flat_map(|m| message(0, m)).collect();
            proptest::prop_assert_eq!(fault_of(&[&body]), reference(&body));
            let body = crate::hostile::mutate(&body, &ms);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for c in at {
                chunks.push(&body[from..c]);
                from = c;
            }
            chunks.push(&body[from..]);
            proptest::prop_assert_eq!(fault_of(&chunks), reference(&body));
        }
    }
}
