//! JIT code's names from a process's `/tmp/perf-PID.map` (the file node
//! `--perf-basic-prof`, perf-map-agent and others append to as they
//! compile).
//!
//! A map is read only when it is a regular file owned by the process's
//! effective uid or by root, reached inside the process's root through no
//! symbolic link; a refused map keeps its reason, which the frames' hint
//! quotes. A map is parsed once per change of its identity (inode, size,
//! mtime): a miss with the same identity costs an `openat2` and an
//! `fstat`, never a parse, and a map that only grew (a JIT appends) has
//! only its new lines parsed. At most [`MAX_PERF_MAP`] bytes of a map are
//! read; a map cut there says so ([`PerfMaps::notes`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

/// The most bytes of one perf map read.
pub const MAX_PERF_MAP: u64 = 64 << 20;
/// Bytes read per `pread` while parsing.
const CHUNK: usize = 1 << 20;

/// One map entry: `[start, end)` and where its name lies in the arena.
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    end: u64,
    name_at: u32,
    name_len: u32,
}

/// A parsed perf map: entries sorted by start, names in one arena (a map
/// of millions of lines holds one allocation of names, not millions).
#[derive(Debug, Default)]
pub struct PerfMap {
    entries: Vec<Entry>,
    names: String,
}

impl PerfMap {
    /// The name of the entry holding `addr` (the one appended last among
    /// entries starting at the same address).
    pub fn find(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.start <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        if addr >= e.end {
            return None;
        }
        let at = e.name_at as usize;
        self.names.get(at..at + e.name_len as usize)
    }

    /// Parses perf map lines, `START SIZE name` (hex, hex, the rest),
    /// from `bytes`; lines that do not parse are skipped.
    pub fn parse(bytes: &[u8]) -> PerfMap {
        let mut m = PerfMap::default();
        m.add_lines(bytes);
        m.sort();
        m
    }

    /// Adds the lines of `bytes` (unsorted until [`PerfMap::sort`]).
    fn add_lines(&mut self, bytes: &[u8]) {
        for line in bytes.split(|b| *b == b'\n') {
            // Bytes, not a String: a name that is not UTF-8 costs only
            // itself.
            let line = String::from_utf8_lossy(line);
            let mut f = line.splitn(3, ' ');
            let parsed = (|| {
                let start = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = f.next()?.trim();
                Some((start, start.checked_add(size)?, name))
            })();
            let Some((start, end, name)) = parsed else {
                continue;
            };
            let (Ok(name_at), Ok(name_len)) =
                (u32::try_from(self.names.len()), u32::try_from(name.len()))
            else {
                continue;
            };
            self.names.push_str(name);
            self.entries.push(Entry {
                start,
                end,
                name_at,
                name_len,
            });
        }
    }

    /// Sorts by start, keeping the order of appending among equal starts.
    fn sort(&mut self) {
        self.entries.sort_by_key(|e| e.start);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Why a process's perf map was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// There is none (or the process is gone): the generic hint applies.
    Missing,
    /// A symbolic link stands at the path (or on the way to it).
    Link,
    /// Not a regular file.
    NotRegular,
    /// Owned by another user than the process's or root.
    Owner {
        /// The file's owner.
        uid: u32,
        /// The process's effective uid.
        euid: u32,
    },
    /// It could not be opened or read.
    Unreadable(Errno),
}

impl Refused {
    /// Why, in words, for the map at `path`; None when there is none.
    pub fn reason(&self, path: &str) -> Option<String> {
        let why = match self {
            Refused::Missing => return None,
            Refused::Link => "a symbolic link, not followed".to_string(),
            Refused::NotRegular => "not a regular file".to_string(),
            Refused::Owner { uid, euid } => {
                format!("owned by uid {uid}, neither the process's user (uid {euid}) nor root")
            }
            Refused::Unreadable(e) => format!("could not be read ({e})"),
        };
        Some(format!("its perf map {path} was refused: {why}"))
    }
}

/// A map file's identity: the same identity, the same bytes (as far as a
/// stat can tell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// One process's map as last parsed.
#[derive(Debug, Default)]
pub struct CachedMap {
    id: Option<Identity>,
    map: PerfMap,
    /// Bytes parsed, ending at a line's end (an append continues there).
    parsed: u64,
    /// The file's size when it was more than the bound read.
    cut_at: Option<u64>,
    /// Times bytes were parsed (a whole map or an appended part).
    pub parses: u64,
}

impl CachedMap {
    /// Brings the map up to date with `file` (whose metadata is `meta`),
    /// reading at most `limit` bytes of it: nothing is parsed when its
    /// identity is unchanged, only the appended lines when it grew in
    /// place, everything otherwise. True when bytes were parsed.
    pub fn refresh(&mut self, file: &File, meta: &std::fs::Metadata, limit: u64) -> bool {
        let id = Identity::of(meta);
        if self.id == Some(id) {
            return false;
        }
        let grew = self
            .id
            .is_some_and(|old| old.dev == id.dev && old.ino == id.ino && id.size > old.size);
        if !grew {
            self.map = PerfMap::default();
            self.parsed = 0;
        }
        self.id = Some(id);
        self.cut_at = (id.size > limit).then_some(id.size);
        let end = id.size.min(limit);
        if self.parsed >= end {
            return false;
        }
        self.parses += 1;
        self.parse_range(file, self.parsed..end);
        self.map.sort();
        true
    }

    /// Parses the whole lines of `range`; a last line without its newline
    /// waits for the next append, unless the bound ends the read there.
    fn parse_range(&mut self, file: &File, range: Range<u64>) {
        let mut at = range.start;
        let mut carry: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        while at < range.end {
            let want = ((range.end - at) as usize).min(CHUNK);
            let n = match file.read_at(&mut buf[..want], at) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            at += n as u64;
            carry.extend_from_slice(&buf[..n]);
            if let Some(last) = carry.iter().rposition(|b| *b == b'\n') {
                self.map.add_lines(&carry[..last]);
                self.parsed += last as u64 + 1;
                carry.drain(..=last);
            }
        }
        if self.cut_at.is_some() && at >= range.end && !carry.is_empty() {
            // The bound cut this line: what is before it is all there is.
            self.map.add_lines(&carry);
            self.parsed += carry.len() as u64;
        }
    }

    /// The map.
    pub fn map(&self) -> &PerfMap {
        &self.map
    }
}

/// One process's perf map state.
#[derive(Debug)]
enum State {
    Read(CachedMap),
    Refused(Refused, String),
}

/// Every sampled process's perf map; see the module documentation.
#[derive(Debug, Default)]
pub struct PerfMaps {
    procs: HashMap<u32, State>,
    /// Per process whose map was cut: its path and size.
    cut: BTreeMap<u32, (String, u64)>,
}

impl PerfMaps {
    /// The JIT name of `addr` in process `pid`. On a miss, and when
    /// `recheck` allows, the map is opened again and reparsed if it
    /// changed.
    pub fn name(&mut self, pid: u32, addr: u64, recheck: bool) -> Option<String> {
        if let Some(State::Read(c)) = self.procs.get(&pid)
            && let Some(n) = c.map.find(addr)
        {
            return Some(n.to_string());
        }
        if self.procs.contains_key(&pid) && !recheck {
            return None;
        }
        let opened = open_perf_map(pid);
        let state = self.procs.remove(&pid);
        let (state, found) = match opened {
            Ok((file, meta, path)) => {
                let mut c = match state {
                    Some(State::Read(c)) => c,
                    _ => CachedMap::default(),
                };
                c.refresh(&file, &meta, MAX_PERF_MAP);
                if let Some(size) = c.cut_at {
                    self.cut.insert(pid, (path, size));
                }
                let found = c.map.find(addr).map(str::to_string);
                (State::Read(c), found)
            }
            Err((why, path)) => (State::Refused(why, path), None),
        };
        self.procs.insert(pid, state);
        found
    }

    /// Why process `pid`'s map was refused, in words (None when it was
    /// read, or there is none).
    pub fn refusal(&self, pid: u32) -> Option<String> {
        match self.procs.get(&pid)? {
            State::Refused(why, path) => why.reason(path),
            State::Read(_) => None,
        }
    }

    /// Drops what was kept for process `pid`.
    pub fn process_gone(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// A note per map cut at the bound.
    pub fn notes(&self) -> Vec<String> {
        self.cut
            .iter()
            .map(|(pid, (path, size))| {
                format!(
                    "process {pid}'s perf map {path} is {:.1} MiB; only its first {} MiB were \
                     read, so JIT code named past that is shown unnamed",
                    *size as f64 / f64::from(1u32 << 20),
                    MAX_PERF_MAP >> 20
                )
            })
            .collect()
    }
}

/// Opens `/tmp/perf-PID.map` inside the process's root: only a regular
/// file, reached through no symbolic link, owned by the process's user or
/// root. Returns it with its metadata and the path the process sees; or
/// why not, with that path.
fn open_perf_map(pid: u32) -> Result<(File, std::fs::Metadata, String), (Refused, String)> {
    let unnamed = || (Refused::Missing, format!("/tmp/perf-{pid}.map"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| unnamed())?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
    };
    // The pid the process sees (its own PID namespace) names the file.
    let nspid: u32 = field("NSpid:")
        .and_then(|v| v.last()?.parse().ok())
        .ok_or_else(unnamed)?;
    let euid: u32 = field("Uid:")
        .and_then(|v| v.get(1)?.parse().ok())
        .ok_or_else(unnamed)?;
    let path = format!("/tmp/perf-{nspid}.map");
    let refuse = |why| (why, path.clone());
    let root = nix::fcntl::open(
        format!("/proc/{pid}/root").as_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|_| refuse(Refused::Missing))?;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK)
        .resolve(
            ResolveFlag::RESOLVE_IN_ROOT
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let fd = openat2(&root, &path[1..], how).map_err(|e| {
        refuse(match e {
            Errno::ENOENT | Errno::ENOTDIR => Refused::Missing,
            Errno::ELOOP => Refused::Link,
            e => Refused::Unreadable(e),
        })
    })?;
    let f = File::from(fd);
    let meta = f.metadata().map_err(|e| {
        refuse(Refused::Unreadable(Errno::from_raw(
            e.raw_os_error().unwrap_or(0),
        )))
    })?;
    if !meta.file_type().is_file() {
        return Err(refuse(Refused::NotRegular));
    }
    if meta.uid() != euid && meta.uid() != 0 {
        return Err(refuse(Refused::Owner {
            uid: meta.uid(),
            euid,
        }));
    }
    Ok((f, meta, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn perf_map_lines_parse_and_look_up() {
        let m =
            PerfMap::parse(b"7f00 10 LazyCompile:*handler /app.js:3\nbad line\n7e00 0x20 stub\n");
        assert_eq!(m.find(0x7f05), Some("LazyCompile:*handler /app.js:3"));
        assert_eq!(m.find(0x7e1f), Some("stub"));
        assert_eq!(m.find(0x7f10), None);
        assert_eq!(m.find(0x10), None);
        assert_eq!(m.len(), 2);
    }

    fn meta(f: &tempfile::NamedTempFile) -> std::fs::Metadata {
        f.as_file().metadata().unwrap()
    }

    /// Makes the file's mtime differ from what was cached, whatever the
    /// file system's timestamp granularity.
    fn touch(f: &tempfile::NamedTempFile, secs: i64) {
        let t = nix::sys::time::TimeSpec::new(1_700_000_000 + secs, 0);
        nix::sys::stat::futimens(f.as_file(), &t, &t).unwrap();
    }

    #[test]
    fn a_map_is_parsed_again_only_when_it_changes() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"1000 10 one\n2000 10 two\n").unwrap();
        touch(&f, 1);
        let mut c = CachedMap::default();
        assert!(c.refresh(f.as_file(), &meta(&f), MAX_PERF_MAP));
        assert_eq!(c.parses, 1);
        assert_eq!(c.map().find(0x2004), Some("two"));
        // Unchanged: however many misses, no parse.
        for _ in 0..100 {
            assert!(!c.refresh(f.as_file(), &meta(&f), MAX_PERF_MAP));
        }
        assert_eq!(c.parses, 1);

        // Appended (a JIT compiled more): only the new lines are parsed,
        // and a line not yet whole waits for its end.
        f.write_all(b"3000 10 three\n4000 10 fo").unwrap();
        touch(&f, 2);
        assert!(c.refresh(f.as_file(), &meta(&f), MAX_PERF_MAP));
        assert_eq!(c.parses, 2);
        assert_eq!(c.map().find(0x3000), Some("three"));
        assert_eq!(c.map().find(0x4000), None);
        assert_eq!(c.parsed, 38);
        f.write_all(b"ur\n").unwrap();
        touch(&f, 3);
        assert!(c.refresh(f.as_file(), &meta(&f), MAX_PERF_MAP));
        assert_eq!(c.map().find(0x4000), Some("four"));
        assert_eq!(c.map().find(0x1000), Some("one"));
        assert_eq!(c.map().len(), 4);

        // Rewritten in place, same size: parsed whole again.
        f.as_file().write_all_at(b"1000 10 ONE", 0).unwrap();
        touch(&f, 4);
        assert!(c.refresh(f.as_file(), &meta(&f), MAX_PERF_MAP));
        assert_eq!(c.map().find(0x1000), Some("ONE"));
        assert_eq!(c.map().len(), 4);
        assert_eq!(c.parses, 4);
    }

    #[test]
    fn a_map_past_the_bound_is_read_to_the_bound_and_says_so() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        // 64 lines of 16 bytes: 1,024 bytes.
        for i in 0..64u64 {
            writeln!(f, "{:04x} 10 f{i:06}", 0x1000 + i * 0x10).unwrap();
        }
        let mut c = CachedMap::default();
        assert!(c.refresh(f.as_file(), &meta(&f), 106));
        assert_eq!(c.cut_at, Some(1024));
        // Six whole lines, and the seventh cut at byte 106 (`1060 10 f0`).
        assert_eq!(c.map().find(0x1050), Some("f000005"));
        assert_eq!(c.map().find(0x1060), Some("f0"));
        assert_eq!(c.map().find(0x1070), None);
        assert!(!c.refresh(f.as_file(), &meta(&f), 106));
        // Growing past the bound parses nothing more.
        writeln!(f, "9000 10 late").unwrap();
        touch(&f, 5);
        assert!(!c.refresh(f.as_file(), &meta(&f), 106));
        assert_eq!(c.parses, 1);
        assert_eq!(c.cut_at, Some(1037));

        let mut maps = PerfMaps::default();
        maps.cut.insert(7, ("/tmp/perf-7.map".into(), 72 << 20));
        let notes = maps.notes();
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("/tmp/perf-7.map is 72.0 MiB; only its first 64 MiB were read"),
            "{}",
            notes[0]
        );
    }

    /// Removes the perf map path on drop.
    struct Remove(std::path::PathBuf);

    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn a_perf_map_is_read_only_when_its_owner_wrote_it_in_place() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but not root"
            );
            eprintln!("SKIP: chown needs root");
            return;
        }
        let pid = std::process::id();
        let path = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let _clean = Remove(path.clone());
        let _ = std::fs::remove_file(&path);
        let mut maps = PerfMaps::default();
        assert_eq!(maps.name(pid, 0x1008, true), None);
        assert_eq!(maps.refusal(pid), None, "none there: the generic hint");

        std::fs::write(&path, b"1000 10 jitted\n2000 10 odd\xff\n").unwrap();
        let mut maps = PerfMaps::default();
        assert_eq!(maps.name(pid, 0x1008, true).as_deref(), Some("jitted"));
        // A name that is not UTF-8 costs only itself.
        assert_eq!(maps.name(pid, 0x2000, true).as_deref(), Some("odd\u{fffd}"));
        // A miss without leave to look again does not open it.
        assert_eq!(maps.name(pid, 0x9000, false), None);

        // Owned by another user than the process's: refused, with why.
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let mut maps = PerfMaps::default();
        assert_eq!(maps.name(pid, 0x1008, true), None);
        let why = maps.refusal(pid).unwrap();
        assert!(
            why.contains(&format!(
                "/tmp/perf-{pid}.map was refused: owned by uid 65534"
            )),
            "{why}"
        );

        // A symbolic link planted at the path: refused, whatever it names.
        let real = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(real.path(), "1000 10 planted\n").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(real.path(), &path).unwrap();
        let mut maps = PerfMaps::default();
        assert_eq!(maps.name(pid, 0x1008, true), None);
        assert!(maps.refusal(pid).unwrap().contains("a symbolic link"));

        // A directory: not a regular file.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let mut maps = PerfMaps::default();
        assert_eq!(maps.name(pid, 0x1008, true), None);
        let why = maps.refusal(pid).unwrap();
        std::fs::remove_dir(&path).unwrap();
        assert!(why.contains("not a regular file"), "{why}");
    }

    // Property tests: perf maps written from a model (hex with or without
    // 0x, names with spaces) find each symbol at its start and its last
    // byte; mutated maps parse to entries or fewer, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    /// A symbol name as JITs write them: letters, punctuation, spaces.
    fn name() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(b"azAZ_:*/. ()<>$0".to_vec()), 1..30)
            .prop_map(|v| String::from_utf8(v).unwrap())
    }

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn perf_maps_round_trip_and_mutations_never_panic(
            es in prop::collection::vec((0..1u64 << 40, 1..4096u64, any::<bool>(), name()), 0..8),
            ms in hostile::mutations(),
        ) {
            // Disjoint ranges, in order of their starts.
            let mut at = 0x1000u64;
            let mut text = String::new();
            let mut want = Vec::new();
            for (gap, size, hex, name) in &es {
                let start = at + gap % 4096;
                let name = name.trim().to_string();
                if name.is_empty() {
                    continue;
                }
                let p = if *hex { "0x" } else { "" };
                text += &format!("{p}{start:x} {p}{size:x} {name}\n");
                want.push((start, start + size - 1, name));
                at = start + size;
            }
            let m = PerfMap::parse(text.as_bytes());
            for (first, last, name) in &want {
                prop_assert_eq!(m.find(*first), Some(name.as_str()));
                prop_assert_eq!(m.find(*last), Some(name.as_str()));
            }
            let _ = PerfMap::parse(hostile::mutate_text(&text, &ms).as_bytes()).find(at);
        }
    }
}
