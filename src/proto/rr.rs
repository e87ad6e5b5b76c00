//! Fixed-size request/response payloads.
//!
//! A request of `req` bytes carries a pattern derived from a per-connection
//! transaction number, so a response that belongs to another request, or
//! has a corrupted byte, is caught by `--verify`. The server's response of
//! `resp` bytes repeats the request: byte `i` of the response is byte
//! `i % req` of the request. A plain echo (resp == req) is the special case
//! where the response equals the request.

/// The pattern's period: prime, so it does not align with message sizes.
const PERIOD: usize = 251;
/// Longest stretch filled or checked from the ramp at once.
const CHUNK: usize = 4096;

/// 0, 1, ... 250, 0, 1, ...: PERIOD + CHUNK bytes, so any stretch of up to
/// CHUNK bytes at any phase is one slice of it. Filling and checking by
/// slices instead of a division per byte keeps --verify from costing the
/// generator more than the exchange itself (it was 2.5 ns a byte: 165 us
/// per 64 KiB response).
fn ramp() -> &'static [u8] {
    static RAMP: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    RAMP.get_or_init(|| (0..PERIOD + CHUNK).map(|i| (i % PERIOD) as u8).collect())
}

/// First byte of transaction `seq`'s request: consecutive transactions
/// differ.
fn start_of(seq: u64) -> u8 {
    (seq.wrapping_mul(31) % PERIOD as u64) as u8
}

/// Fills `buf` with the request pattern of transaction `seq`.
pub fn fill_request(buf: &mut [u8], seq: u64) {
    let start = start_of(seq);
    let r = ramp();
    for (n, chunk) in buf.chunks_mut(CHUNK).enumerate() {
        let ph = (n * CHUNK) % PERIOD;
        chunk.copy_from_slice(&r[ph..ph + chunk.len()]);
        for b in chunk.iter_mut() {
            *b = b.wrapping_add(start);
        }
    }
}

/// Writes the response to `req` into `out` (any length): the request
/// repeated. `req` must not be empty.
pub fn fill_response(out: &mut [u8], req: &[u8]) {
    debug_assert!(!req.is_empty());
    for chunk in out.chunks_mut(req.len()) {
        chunk.copy_from_slice(&req[..chunk.len()]);
    }
}

/// Checks a received response fragment: `got` holds response bytes
/// starting at offset `off` of the response to the request of transaction
/// `seq` (of `req_len` bytes). Returns the offset of the first wrong byte.
pub fn check_response(got: &[u8], off: usize, seq: u64, req_len: usize) -> Option<usize> {
    let start = start_of(seq);
    let r = ramp();
    let mut i = 0;
    while i < got.len() {
        let pos = (off + i) % req_len;
        // A stretch within one repetition of the request and one chunk of
        // the ramp, compared without branches (so it vectorizes); the
        // slow search for the first wrong byte runs only on a mismatch.
        let k = (req_len - pos).min(CHUNK).min(got.len() - i);
        let ph = pos % PERIOD;
        let (g, want) = (&got[i..i + k], &r[ph..ph + k]);
        let diff = g
            .iter()
            .zip(want)
            .fold(0u8, |acc, (b, w)| acc | (b.wrapping_sub(start) ^ w));
        if diff != 0 {
            let j = g
                .iter()
                .zip(want)
                .position(|(b, w)| b.wrapping_sub(start) != *w)?;
            return Some(off + i + j);
        }
        i += k;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_repeats_request_and_verifies() {
        let mut req = vec![0u8; 100];
        fill_request(&mut req, 7);
        let mut resp = vec![0u8; 250];
        fill_response(&mut resp, &req);
        assert_eq!(&resp[..100], &req[..]);
        assert_eq!(&resp[100..200], &req[..]);
        assert_eq!(check_response(&resp, 0, 7, 100), None);
        assert_eq!(check_response(&resp[30..], 30, 7, 100), None);
        // Another transaction's response is caught.
        assert_eq!(check_response(&resp, 0, 8, 100), Some(0));
        resp[123] ^= 1;
        assert_eq!(check_response(&resp, 0, 7, 100), Some(123));
    }

    /// The pattern as first written: one division per byte. The fast
    /// versions must agree with it everywhere.
    fn reference(off: usize, seq: u64, req_len: usize, len: usize) -> Vec<u8> {
        let start = (seq.wrapping_mul(31) % 251) as u8;
        (0..len)
            .map(|i| start.wrapping_add((((off + i) % req_len) % 251) as u8))
            .collect()
    }

    #[test]
    fn fast_fill_and_check_agree_with_the_reference() {
        for &req_len in &[1usize, 7, 250, 251, 252, 4095, 4096, 4097, 9000, 65536] {
            for seq in [0u64, 1, 9, 250, 251, u64::MAX] {
                let mut req = vec![0u8; req_len];
                fill_request(&mut req, seq);
                assert_eq!(req, reference(0, seq, req_len, req_len), "{req_len} {seq}");
                // Responses longer than the request, checked in fragments
                // that start anywhere.
                let resp = reference(0, seq, req_len, req_len * 2 + 13);
                for off in [0usize, 1, req_len / 2, req_len, req_len + 3] {
                    let frag = &resp[off.min(resp.len())..];
                    assert_eq!(check_response(frag, off, seq, req_len), None);
                    if !frag.is_empty() {
                        let mut bad = frag.to_vec();
                        let at = bad.len() * 2 / 3;
                        bad[at] ^= 0x40;
                        assert_eq!(
                            check_response(&bad, off, seq, req_len),
                            Some(off + at),
                            "{req_len} {seq} {off}"
                        );
                    }
                }
            }
        }
    }
}
