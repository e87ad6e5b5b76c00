//! `--ok-status`: which response status codes count as a successful
//! request (default `2xx`). A response with any other code is whole and
//! well-formed, so the connection goes on, but the request counts as an
//! error of class `status_<code>` (`status_404`).

use anyhow::Result;

use crate::error;

/// A set of status codes (100 to 599).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OkStatus {
    /// Bit `code` set when `code` is in the set (codes 0 to 639).
    bits: [u64; 10],
}

impl OkStatus {
    /// Parses a comma-separated list of codes (`200`), ranges (`200-399`)
    /// and classes (`2xx`), e.g. `2xx,304,404`.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |why: &str| {
            error::usage(format!(
                "--ok-status `{spec}`: {why} (give codes, ranges and classes such as \
                 `2xx`, `200-399`, `200,404`)"
            ))
        };
        let code = |s: &str| -> Result<u16> {
            match s.trim().parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(bad(&format!(
                    "`{}` is not a status code from 100 to 599",
                    s.trim()
                ))),
            }
        };
        let mut set = Self { bits: [0; 10] };
        for item in spec.split(',') {
            let item = item.trim();
            let (lo, hi) = if let Some((a, b)) = item.split_once('-') {
                (code(a)?, code(b)?)
            } else if item.len() == 3 && item[1..].eq_ignore_ascii_case("xx") {
                match item.as_bytes()[0] {
                    d @ b'1'..=b'5' => {
                        let c = u16::from(d - b'0') * 100;
                        (c, c + 99)
                    }
                    _ => return Err(bad(&format!("`{item}` is not a class 1xx to 5xx"))),
                }
            } else if item.is_empty() {
                return Err(bad("an empty item"));
            } else {
                let c = code(item)?;
                (c, c)
            };
            if lo > hi {
                return Err(bad(&format!("the range `{item}` is empty")));
            }
            for c in lo..=hi {
                set.bits[c as usize / 64] |= 1 << (c % 64);
            }
        }
        Ok(set)
    }

    /// True when `code` counts as success.
    #[inline]
    pub fn contains(&self, code: u16) -> bool {
        let c = code as usize;
        c < 640 && self.bits[c / 64] & (1 << (c % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_ranges_and_classes() {
        let s = OkStatus::parse("2xx").unwrap();
        assert!(s.contains(200) && s.contains(299));
        assert!(!s.contains(199) && !s.contains(300) && !s.contains(404));
        let s = OkStatus::parse("200-399, 404").unwrap();
        assert!(s.contains(301) && s.contains(404) && !s.contains(400) && !s.contains(500));
        let s = OkStatus::parse("5XX").unwrap();
        assert!(s.contains(503) && !s.contains(200));
        // Codes a server may send beyond the range are never ok.
        assert!(!s.contains(600) && !s.contains(999));
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        for bad in [
            "", "2xx,", "abc", "6xx", "0xx", "99", "600", "400-300", "200-", "2x",
        ] {
            let e = OkStatus::parse(bad).unwrap_err();
            assert_eq!(
                e.downcast_ref::<error::Exit>().map(|x| x.code),
                Some(2),
                "{bad}"
            );
        }
    }
}
