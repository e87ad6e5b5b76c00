//! Where the target's OpenSSL is, for `--tls-plaintext` (src/bpf/tls.h):
//! the libssl files its processes map, found in their `/proc/PID/maps`
//! and opened through `/proc/PID/map_files/`, so that the file probed is
//! the one mapped (a path the target names is never walked: its symlinks
//! are the target's to plant). Each file is probed once, for the target's
//! processes that map it: other processes' calls into the same file do
//! not trap (a uprobe's filter is per process), unless there are more
//! than [`MAX_PROBED_PIDS`] of them.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// An OpenSSL library to put uprobes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    /// Where to open it: the mapping's `/proc/PID/map_files/` entry (or,
    /// for the system's own copy, its path).
    pub open: PathBuf,
    /// Its path as the process that maps it names it (for people; the
    /// target's bytes: escape before showing).
    pub shown: String,
    /// The target's processes to probe it in; empty: every process that
    /// maps it (more than [`MAX_PROBED_PIDS`]).
    pub pids: Vec<i32>,
}

/// Processes probed one by one at most: past it a library is probed for
/// every process (each of its calls then traps, the target's or not).
pub const MAX_PROBED_PIDS: usize = 64;

/// Processes whose maps are read at most (a machine-wide scope).
const MAX_PIDS: usize = 4096;
/// Lines of one process's maps read at most.
const MAX_LINES: usize = 65536;

/// The system's OpenSSL, probed when no target process maps one yet (a
/// command not started yet, or one that loads it later).
const SYSTEM_LIBSSL: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/libssl.so.3",
    "/lib/x86_64-linux-gnu/libssl.so.3",
    "/usr/lib64/libssl.so.3",
    "/usr/lib/libssl.so.3",
];

/// One line of `/proc/PID/maps`: its address range (as written, the name
/// of its `map_files` entry), whether it is executable, and its path.
#[derive(Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    /// `start-end`, hexadecimal, as the kernel writes it.
    pub range: &'a str,
    /// The mapping can be executed (holds the library's code).
    pub exec: bool,
    /// The file's path (may be empty, or a pseudo-path such as `[heap]`).
    pub path: &'a str,
}

/// Parses one maps line (`range perms offset dev inode path`); None when
/// it is not one.
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let s = rest.trim_start_matches(' ');
        let end = s.find(' ').unwrap_or(s.len());
        let (f, r) = s.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let (_offset, _dev, _inode) = (field()?, field()?, field()?);
    let (start, end) = range.split_once('-')?;
    let hex = |s: &str| !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(start) || !hex(end) || perms.len() != 4 {
        return None;
    }
    Some(MapsLine {
        range,
        exec: perms.as_bytes()[2] == b'x',
        path: rest.trim_start_matches(' '),
    })
}

/// Is this path an OpenSSL libssl (`libssl.so`, `libssl.so.3`, ...)?
fn is_libssl(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "libssl.so" || name.starts_with("libssl.so.")
}

/// The libssl files the processes `pids` map (each once, by device and
/// inode, with the processes that map it), else the system's own (for all
/// of them: a process that maps it later is probed as it does).
pub fn openssl_libraries(pids: &[i32]) -> Vec<Library> {
    let mut seen = HashMap::new();
    let mut out: Vec<Library> = Vec::new();
    for &pid in pids.iter().take(MAX_PIDS) {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue; // gone, or a kernel thread
        };
        for line in maps.lines().take(MAX_LINES) {
            let Some(m) = parse_maps_line(line) else {
                continue;
            };
            if !m.exec || !is_libssl(m.path) {
                continue;
            }
            let open = PathBuf::from(format!("/proc/{pid}/map_files/{}", m.range));
            let Ok(meta) = std::fs::metadata(&open) else {
                continue;
            };
            let i = *seen.entry((meta.dev(), meta.ino())).or_insert_with(|| {
                out.push(Library {
                    open,
                    shown: m.path.to_string(),
                    pids: Vec::new(),
                });
                out.len() - 1
            });
            if out[i].pids.last() != Some(&pid) {
                out[i].pids.push(pid);
            }
        }
    }
    if out.is_empty() {
        for p in SYSTEM_LIBSSL {
            // Root's own directories: a path no other user can plant.
            if let Ok(meta) = std::fs::metadata(p)
                && meta.uid() == 0
                && seen.insert((meta.dev(), meta.ino()), 0).is_none()
            {
                out.push(Library {
                    open: PathBuf::from(p),
                    shown: p.to_string(),
                    pids: pids.to_vec(),
                });
            }
        }
    }
    for lib in &mut out {
        if lib.pids.len() > MAX_PROBED_PIDS {
            lib.pids.clear();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_library_line_is_read() {
        let l = "7f1c2a400000-7f1c2a45e000 r-xp 00022000 fe:01 1311 \
                 /usr/lib/x86_64-linux-gnu/libssl.so.3";
        let m = parse_maps_line(l).unwrap();
        assert_eq!(m.range, "7f1c2a400000-7f1c2a45e000");
        assert!(m.exec);
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libssl.so.3");
        assert!(is_libssl(m.path));
    }

    #[test]
    fn anonymous_and_data_mappings_and_other_names_are_not_probed() {
        let anon = parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(anon.path, "");
        assert!(!anon.exec);
        let data = parse_maps_line("1000-2000 r--p 0 fe:01 9 /lib/libssl.so.3").unwrap();
        assert!(!data.exec);
        assert!(!is_libssl("/usr/lib/libssl3.so"));
        assert!(!is_libssl("/tmp/libssl.so.3/evil.so"));
        assert!(is_libssl("/opt/x/libssl.so.1.1"));
        assert_eq!(parse_maps_line("zz-1 r-xp 0 0 0 /x"), None);
        assert_eq!(parse_maps_line("1-2 r-xp"), None);
        assert_eq!(parse_maps_line(""), None);
    }

    #[test]
    fn a_path_with_spaces_is_kept_whole() {
        let m = parse_maps_line("1-2 r-xp 0 fe:01 9 /opt/my app/libssl.so.3 (deleted)").unwrap();
        assert_eq!(m.path, "/opt/my app/libssl.so.3 (deleted)");
    }

    proptest! {
        #[test]
        fn valid_lines_round_trip(
            start in any::<u64>(), len in 1u64..1 << 32, exec in any::<bool>(),
            path in "(/[a-z0-9._ -]{1,12}){0,4}",
        ) {
            let end = start.saturating_add(len);
            let range = format!("{start:x}-{end:x}");
            let perms = if exec { "r-xp" } else { "r--p" };
            let line = format!("{range} {perms} 00000000 fe:01 42 {path}");
            let m = parse_maps_line(&line).unwrap();
            prop_assert_eq!(m.range, range.as_str());
            prop_assert_eq!(m.exec, exec);
            prop_assert_eq!(m.path, path.trim_start_matches(' '));
        }

        #[test]
        fn any_bytes_never_panic(s in "\\PC{0,200}") {
            let _ = parse_maps_line(&s);
        }
    }
}
