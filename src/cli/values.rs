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

/// The one process tree that `--pid`'s pids name. One pid is itself;
/// several (`--pid $(pidof nginx)`: the master and its workers) name the
/// one among them that is an ancestor of every other, since `--pid` covers
/// a process and its descendants. Pids of unrelated processes are a usage
/// error that says what to give instead; so is a pid that is not positive.
pub fn tree_root(flag: &str, pids: &[i32]) -> anyhow::Result<Option<i32>> {
    let list = || {
        pids.iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    if let Some(bad) = pids.iter().find(|p| **p <= 0) {
        return Err(crate::error::usage(format!(
            "{flag} {bad}: not a process id"
        )));
    }
    if pids.len() <= 1 {
        return Ok(pids.first().copied());
    }
    // Bounded walk up the parent links: a chain longer than this is no
    // process tree anyone asked for.
    let descends = |mut p: i32, root: i32| {
        for _ in 0..256 {
            if p == root {
                return true;
            }
            match crate::procfs::ppid(p) {
                Some(pp) if pp > 0 && pp != p => p = pp,
                _ => return false,
            }
        }
        false
    };
    pids.iter()
        .copied()
        .find(|&root| pids.iter().all(|&p| descends(p, root)))
        .map(Some)
        .ok_or_else(|| {
            crate::error::usage(format!(
                "{flag} {}: these processes are not one process tree (none of them is an \
                 ancestor of all the others); give one pid, whose descendants are covered \
                 (a server's master), or a scope: --cgroup PATH or --unit NAME",
                list()
            ))
        })
}

/// A reporting interval (trace `--interval`): `10s`, `500ms`, `1m`, or a
/// number of seconds; between 100 ms and a day.
pub fn interval(s: &str) -> Result<std::time::Duration, String> {
    let d = span(s)?;
    if d < std::time::Duration::from_millis(100) || d > std::time::Duration::from_secs(86_400) {
        return Err(format!("`{s}`: must be between 100ms and 24h"));
    }
    Ok(d)
}

/// A node agent's stacks window (trace `--stack-window`): `60s`, `5m`, or
/// a number of seconds; whole seconds (a pprof scraper asks for
/// `seconds=N`), between 1 s and an hour.
pub fn stack_window(s: &str) -> Result<std::time::Duration, String> {
    use crate::stacks::export::{MAX_WINDOW, MIN_WINDOW};
    let d = span(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("`{s}`: must be whole seconds"));
    }
    if d < MIN_WINDOW || d > MAX_WINDOW {
        return Err(format!("`{s}`: must be between 1s and 1h"));
    }
    Ok(d)
}

/// A span: a humantime text (`10s`, `500ms`, `1m`) or a number of seconds.
fn span(s: &str) -> Result<std::time::Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(std::time::Duration::from_secs_f64(v.min(1e9))),
        Ok(_) => Err(format!(
            "`{s}`: must be a positive span such as 10s or 500ms"
        )),
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("`{s}` is not a span such as 10s or 500ms ({e})")),
    }
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

    #[test]
    fn stack_windows_are_whole_seconds_within_bounds() {
        use std::time::Duration;
        assert_eq!(stack_window("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(stack_window("2"), Ok(Duration::from_secs(2)));
        assert_eq!(stack_window("1h"), Ok(Duration::from_secs(3600)));
        assert!(stack_window("1500ms").unwrap_err().contains("whole"));
        assert!(stack_window("0").unwrap_err().contains("1s and 1h"));
        assert!(stack_window("2h").unwrap_err().contains("1s and 1h"));
        assert!(stack_window("-5").is_err());
    }

    #[test]
    fn several_pids_name_their_common_ancestor_or_are_refused() {
        let me = std::process::id() as i32;
        let parent = crate::procfs::ppid(me).unwrap();
        assert_eq!(tree_root("--pid", &[]).unwrap(), None);
        assert_eq!(tree_root("--pid", &[me]).unwrap(), Some(me));
        // A master and its workers, in either order.
        assert_eq!(tree_root("--pid", &[me, parent]).unwrap(), Some(parent));
        assert_eq!(tree_root("--pid", &[parent, me]).unwrap(), Some(parent));
        // Two siblings: neither is the other's ancestor.
        let mut kids: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("5")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let pids: Vec<i32> = kids.iter().map(|k| k.id() as i32).collect();
        let err = tree_root("--pid", &pids).unwrap_err().to_string();
        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        assert!(err.contains("not one process tree"), "{err}");
        assert!(
            tree_root("-p", &[me, 0])
                .unwrap_err()
                .to_string()
                .contains("not a process id")
        );
    }
}
