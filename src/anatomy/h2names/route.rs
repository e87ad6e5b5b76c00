//! An HTTP/2 request's name from its decoded pseudo-headers: a gRPC
//! call's `:path` (`/helloworld.Greeter/SayHello`), or the method and
//! the route template folded exactly as the kernel folds an HTTP/1
//! request's (src/bpf/http1.h: `h1_put`, `h1_seg_byte`, `h1_seg_end`), so
//! the same route is one name whichever version carried it.

use crate::anatomy::abi::H1_TEXT;

/// Bytes of a gRPC name (its `:path`) kept: a method's full name
/// (`/package.Service/Method`) is often past HTTP/1's 64.
pub const GRPC_TEXT: usize = 128;

/// What a path segment can still be (`enum ss_h1_seg`).
const SG_DIGITS: u8 = 1;
const SG_HEX: u8 = 2;
const SG_UUID: u8 = 4;
/// `enum ss_h1_text_flags`: a byte of an earlier segment, or of this
/// one, was dropped.
const TF_CUT: u8 = 1;
const TF_CUTSEG: u8 = 2;

/// The kernel's text being built (`struct ss_h1_conn`'s text fields).
struct Text {
    text: Vec<u8>,
    tf: u8,
    /// Where the segment being read began.
    seg: usize,
    segn: u16,
    segf: u8,
}

impl Text {
    fn put(&mut self, ch: u8) {
        if self.tf & (TF_CUT | TF_CUTSEG) != 0 {
            return;
        }
        if self.text.len() >= H1_TEXT {
            self.tf |= TF_CUTSEG;
            return;
        }
        self.text.push(ch);
    }

    fn seg_begin(&mut self) {
        self.seg = self.text.len();
        self.segn = 0;
        self.segf = SG_DIGITS | SG_HEX | SG_UUID;
    }

    fn seg_byte(&mut self, ch: u8) {
        let n = self.segn;
        let dash_at = matches!(n, 8 | 13 | 18 | 23);
        let digit = ch.is_ascii_digit();
        if ch == b'-' {
            self.segf &= if dash_at { SG_UUID } else { 0 };
        } else if ch.is_ascii_hexdigit() {
            if dash_at {
                self.segf &= !SG_UUID;
            }
            if !digit {
                self.segf &= !SG_DIGITS;
            }
        } else {
            self.segf = 0;
        }
        self.segn = n.saturating_add(1);
        self.put(ch);
    }

    fn seg_end(&mut self) {
        let (n, s, f) = (self.segn, self.seg, self.segf);
        let id = n > 0
            && (f & SG_DIGITS != 0 || (f & SG_HEX != 0 && n >= 8) || (f & SG_UUID != 0 && n == 36));
        if id && self.tf & TF_CUT == 0 && s <= H1_TEXT - 4 {
            self.text.truncate(s);
            self.text.extend_from_slice(b"{id}");
            self.tf &= !TF_CUTSEG;
        }
        if self.tf & TF_CUTSEG != 0 {
            self.tf |= TF_CUT;
        }
        self.tf &= !TF_CUTSEG;
        self.segn = 0;
        self.segf = 0;
    }
}

/// `METHOD route-template`: the path up to its query (`?`) or fragment
/// (`#`), each segment that is all digits, 8+ hex digits or a UUID
/// folded to `{id}`, at most `abi::H1_TEXT` bytes, a cut name ending in
/// `…` (as the loader shows a cut HTTP/1 route).
pub fn http_name(method: &[u8], path: &[u8]) -> Vec<u8> {
    let mut t = Text {
        text: Vec::with_capacity(H1_TEXT + 3),
        tf: 0,
        seg: 0,
        segn: 0,
        segf: 0,
    };
    for &ch in method {
        t.put(ch);
    }
    let path = path
        .iter()
        .position(|b| *b == b'?' || *b == b'#')
        .map_or(path, |end| &path[..end]);
    if !path.is_empty() {
        t.put(b' ');
        for &ch in path {
            if ch == b'/' {
                if t.segf != 0 || t.segn != 0 {
                    t.seg_end();
                }
                t.put(b'/');
                t.seg_begin();
            } else {
                t.seg_byte(ch);
            }
        }
        t.seg_end();
    }
    let mut name = t.text;
    if t.tf & (TF_CUT | TF_CUTSEG) != 0 {
        name.extend_from_slice("…".as_bytes());
    }
    name
}

/// A gRPC call's name: its `:path` up to `?`, at most [`GRPC_TEXT`]
/// bytes, a cut one ending in `…`.
pub fn grpc_name(path: &[u8]) -> Vec<u8> {
    let path = path
        .iter()
        .position(|b| *b == b'?')
        .map_or(path, |end| &path[..end]);
    if path.len() <= GRPC_TEXT {
        return path.to_vec();
    }
    let mut name = path[..GRPC_TEXT].to_vec();
    name.extend_from_slice("…".as_bytes());
    name
}

/// Whether a request's `content-type` makes it a gRPC call.
pub fn is_grpc(content_type: &[u8]) -> bool {
    content_type.starts_with(b"application/grpc")
}

/// A `grpc-status` value's code (0..=16); None for anything else.
pub fn grpc_code(value: &[u8]) -> Option<u8> {
    if value.is_empty() || value.len() > 2 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = value.iter().fold(0u8, |n, d| n * 10 + (d - b'0'));
    (code <= 16).then_some(code)
}

/// A final `:status` (200..=599)'s class index in `NameCounts::status`
/// (2xx, 3xx, 4xx, 5xx); None for an interim 1xx or anything else.
pub fn status_class(value: &[u8]) -> Option<usize> {
    if value.len() != 3 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    match value[0] {
        b'2'..=b'5' => Some(usize::from(value[0] - b'2')),
        _ => None,
    }
}

/// Whether a `:status` is an interim (1xx) one.
pub fn is_interim(value: &[u8]) -> bool {
    value.len() == 3 && value[0] == b'1' && value.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(method: &str, path: &str) -> String {
        String::from_utf8(http_name(method.as_bytes(), path.as_bytes())).unwrap()
    }

    #[test]
    fn routes_fold_as_the_kernel_folds_http1_routes() {
        assert_eq!(h("GET", "/users/123/orders?x=1"), "GET /users/{id}/orders");
        assert_eq!(h("GET", "/"), "GET /");
        assert_eq!(h("GET", "/a#frag"), "GET /a");
        assert_eq!(h("POST", "/blob/deadbeef"), "POST /blob/{id}");
        // Seven hex digits, not all digits: not an id.
        assert_eq!(h("GET", "/blob/deadbee"), "GET /blob/deadbee");
        assert_eq!(
            h("DELETE", "/u/123e4567-e89b-12d3-a456-426614174000/x"),
            "DELETE /u/{id}/x"
        );
        // A dash out of place: no UUID, not hex either.
        assert_eq!(
            h("GET", "/u/123e4567e-89b-12d3-a456-42661417400"),
            "GET /u/123e4567e-89b-12d3-a456-42661417400"
        );
        assert_eq!(h("GET", "//7/"), "GET //{id}/");
        assert_eq!(h("OPTIONS", "*"), "OPTIONS *");
        assert_eq!(h("CONNECT", ""), "CONNECT");
        // Cut at 64 bytes, said so; a numeric segment begun early enough
        // still folds.
        let long = format!("/{}/{}", "z".repeat(70), "b");
        let got = h("GET", &long);
        assert_eq!(got, format!("GET /{}…", "z".repeat(59)));
        assert_eq!(got.len() - "…".len(), H1_TEXT);
        let num = format!("/x/{}", "1".repeat(80));
        assert_eq!(h("GET", &num), "GET /x/{id}");
        let after = format!("/{}/12", "z".repeat(58));
        assert_eq!(h("GET", &after), format!("GET /{}/…", "z".repeat(58)));
    }

    #[test]
    fn grpc_names_statuses_and_codes() {
        assert_eq!(
            grpc_name(b"/helloworld.Greeter/SayHello?x"),
            b"/helloworld.Greeter/SayHello"
        );
        let long = vec![b'a'; 200];
        let n = grpc_name(&long);
        assert_eq!(n.len(), GRPC_TEXT + "…".len());
        assert!(is_grpc(b"application/grpc+proto"));
        assert!(!is_grpc(b"application/json"));
        assert_eq!(grpc_code(b"0"), Some(0));
        assert_eq!(grpc_code(b"16"), Some(16));
        assert_eq!(grpc_code(b"17"), None);
        assert_eq!(grpc_code(b" 5"), None);
        assert_eq!(grpc_code(b""), None);
        assert_eq!(status_class(b"200"), Some(0));
        assert_eq!(status_class(b"503"), Some(3));
        assert_eq!(status_class(b"103"), None);
        assert_eq!(status_class(b"600"), None);
        assert!(is_interim(b"100") && !is_interim(b"200"));
    }
}
