//! The value parsers only the CLI uses (serve's message sizes, trace's
//! reporting interval), and every shared one re-exported from
//! [`crate::values`], so each option of `cli/` names its parser as
//! `values::NAME` whichever module owns it. Load's `--ratio` and
//! `--key-dist` parsers are beside their types in `crate::load::workloads::kv`.

pub use crate::values::*;

/// A message size in bytes, 1 to [`crate::serve::MAX_MESSAGE`]: serve
/// echo's `--req-size` and `--resp-size`.
pub fn message_size(s: &str) -> Result<usize, String> {
    let max = crate::serve::MAX_MESSAGE;
    let v: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes"))?;
    if v == 0 || v > max {
        return Err(format!("`{s}`: must be between 1 and {max} bytes"));
    }
    Ok(v)
}

/// A reporting interval (trace `--interval`): `10s`, `500ms`, `1m`, or a
/// number of seconds; between 100 ms and a day.
pub fn interval(s: &str) -> Result<std::time::Duration, String> {
    let d = match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => std::time::Duration::from_secs_f64(v.min(1e9)),
        Ok(_) => {
            return Err(format!(
                "`{s}`: must be a positive span such as 10s or 500ms"
            ));
        }
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("`{s}` is not a span such as 10s or 500ms ({e})"))?,
    };
    if d < std::time::Duration::from_millis(100) || d > std::time::Duration::from_secs(86_400) {
        return Err(format!("`{s}`: must be between 100ms and 24h"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded() {
        assert!(message_size("0").is_err());
        assert_eq!(message_size("16777216"), Ok(16 << 20));
        assert!(message_size("16777217").is_err());
    }

    #[test]
    fn intervals_take_spans_or_seconds_within_bounds() {
        use std::time::Duration;
        assert_eq!(interval("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(interval("2"), Ok(Duration::from_secs(2)));
        assert!(interval("10ms").unwrap_err().contains("100ms"));
        assert!(interval("2d").unwrap_err().contains("24h"));
        assert!(interval("-1").is_err());
        assert!(interval("soon").unwrap_err().contains("10s"));
    }
}
