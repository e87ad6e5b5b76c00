//! Fixed-size request/response payloads.
//!
//! A request of `req` bytes carries a pattern derived from a per-connection
//! transaction number, so a response that belongs to another request, or
//! has a corrupted byte, is caught by `--verify`. The server's response of
//! `resp` bytes repeats the request: byte `i` of the response is byte
//! `i % req` of the request. A plain echo (resp == req) is the special case
//! where the response equals the request.

/// Fills `buf` with the request pattern of transaction `seq`.
pub fn fill_request(buf: &mut [u8], seq: u64) {
    // Any cheap pattern that differs between consecutive transactions and
    // along the buffer works; 251 is prime so it does not align with sizes.
    let start = (seq.wrapping_mul(31) % 251) as u8;
    for (i, b) in buf.iter_mut().enumerate() {
        *b = start.wrapping_add((i % 251) as u8);
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
    let start = (seq.wrapping_mul(31) % 251) as u8;
    got.iter().enumerate().find_map(|(i, b)| {
        let pos = (off + i) % req_len;
        let want = start.wrapping_add((pos % 251) as u8);
        (*b != want).then_some(off + i)
    })
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
}
