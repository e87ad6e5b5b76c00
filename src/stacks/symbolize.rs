//! Names for frames: blazesym reads ELF symbol tables (`.symtab`,
//! `.dynsym`) and `/proc/kallsyms`, and demangles Rust and C++; the debug
//! file of a stripped module is found by its build id under
//! `/usr/lib/debug/.build-id` (where Debian's `-dbgsym` and `-dbg`
//! packages put them); JIT code is named from `/tmp/perf-PID.map`.
//!
//! blazesym mmaps what it reads. It is only ever given a file root alone
//! can change: a module owned by root (off FUSE) through
//! `/proc/self/fd/N` of the descriptor opened through map_files (the exact
//! inode), a debug file owned by root opened without following symbolic
//! links, or, for a module someone else owns, a private sealed memfd copy
//! of it, so that its owner truncating it cannot SIGBUS sockscope. Names
//! are cached per (module, file offset); every name is escaped
//! (`crate::text`) because a hostile binary chooses its symbol names.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use blazesym::MaybeDefault;
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};

use super::modules::{FileKey, Mapping, MappingKind, ModuleFile, sealed_copy};

/// The largest module copied for a non-root owner (bigger ones stay
/// unsymbolized: the copy is held in memory while the module is mapped).
const MAX_COPY: u64 = 256 << 20;
/// The most bytes of private copies held at once.
const COPY_BUDGET: u64 = 1 << 30;
/// The largest perf map read.
const MAX_PERF_MAP: u64 = 64 << 20;
/// Where Debian installs debug files, by build id.
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// One frame, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The demangled function, or `module+0xoffset` when it has no name
    /// (the offset is the module's own address, as `addr2line -e` takes
    /// it, or the file offset when the module is not a readable ELF).
    pub name: String,
    /// The module's file name, `[kernel]`, `[vdso]`, `[anon]` (JIT code)
    /// or `[unknown]` (an address in no mapping).
    pub module: String,
    /// A kernel frame.
    pub kernel: bool,
    /// Whether `name` is a function name.
    pub symbolized: bool,
}

impl Frame {
    fn named(name: &str, module: &str, kernel: bool) -> Self {
        Self {
            name: crate::text::escape(name).into_owned(),
            module: module.to_string(),
            kernel,
            symbolized: true,
        }
    }

    fn unnamed(module: &str, offset: u64, kernel: bool) -> Self {
        Self {
            name: format!("{module}+0x{offset:x}"),
            module: module.to_string(),
            kernel,
            symbolized: false,
        }
    }
}

/// Why frames of one module have no names, and how many.
#[derive(Clone, Debug)]
struct Missing {
    frames: u64,
    hint: String,
}

/// A JIT's perf map: sorted (start, end, name).
#[derive(Debug, Default)]
struct PerfMap {
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    fn find(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        (addr < e.1).then_some(e.2.as_str())
    }
}

/// Names frames; see the module documentation.
pub struct Symbolizer {
    /// blazesym for module files; rebuilt when modules go, since it keeps
    /// every file it opened.
    files: Blaze,
    /// blazesym for the kernel (kallsyms parsed once).
    kernel: Blaze,
    /// Per module, the files given to blazesym, in the order tried: the
    /// module (or its private copy), then its debug file.
    sources: HashMap<FileKey, Vec<File>>,
    /// (module, file offset) -> name.
    names: HashMap<(FileKey, u64), Option<String>>,
    /// Kernel address -> name.
    kernel_names: HashMap<u64, Option<String>>,
    /// Per process, its perf map (None: none readable).
    perf_maps: HashMap<u32, Option<PerfMap>>,
    /// Whether a perf map was re-read for the current sample.
    perf_reread: bool,
    /// Per module path, the unnamed frames and what would name them.
    missing: HashMap<String, Missing>,
    /// Bytes of private copies held.
    copied: u64,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

fn blaze() -> Blaze {
    Blaze::builder()
        .enable_demangling(true)
        .enable_code_info(false)
        .enable_inlined_fns(false)
        // Each path it is given (/proc/self/fd/N) may name another file
        // once N is closed and reused: stat each time.
        .enable_auto_reload(true)
        .build()
}

impl Symbolizer {
    /// An empty symbolizer.
    pub fn new() -> Self {
        Self {
            files: blaze(),
            kernel: blaze(),
            sources: HashMap::new(),
            names: HashMap::new(),
            kernel_names: HashMap::new(),
            perf_maps: HashMap::new(),
            perf_reread: false,
            missing: HashMap::new(),
            copied: 0,
        }
    }

    /// Marks the start of a sample (a perf map is re-read at most once per
    /// sample).
    pub fn begin_sample(&mut self) {
        self.perf_reread = false;
    }

    /// Names kernel addresses (innermost first) from /proc/kallsyms.
    pub fn kernel(&mut self, addrs: &[u64]) -> Vec<Frame> {
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Some(PathBuf::from("/proc/kallsyms")),
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        });
        let mut out = Vec::with_capacity(addrs.len());
        for &a in addrs {
            let name = match self.kernel_names.get(&a) {
                Some(n) => n.clone(),
                None => {
                    let n = match self.kernel.symbolize_single(&src, Input::AbsAddr(a)) {
                        Ok(Symbolized::Sym(s)) => Some(s.name.into_owned()),
                        _ => None,
                    };
                    self.kernel_names.insert(a, n.clone());
                    n
                }
            };
            out.push(match name {
                Some(n) => Frame::named(&n, "[kernel]", true),
                None => {
                    self.count_missing(
                        "[kernel]",
                        "kernel symbols: /proc/kallsyms shows addresses to root only",
                    );
                    Frame::unnamed("[kernel]", a, true)
                }
            });
        }
        out
    }

    /// Names the user address `lookup` of process `pid`, inside `m`.
    pub fn user(&mut self, pid: u32, m: &Mapping, lookup: u64) -> Frame {
        match &m.kind {
            MappingKind::File(f) => self.file_frame(f, m.file_offset(lookup)),
            MappingKind::Anon => match self.perf_name(pid, lookup) {
                Some(n) => Frame::named(&n, "[anon]", false),
                None => {
                    self.count_missing(
                        "[anon]",
                        "JIT code: a runtime that writes /tmp/perf-PID.map \
                         (node --perf-basic-prof, perf-map-agent for Java)",
                    );
                    Frame::unnamed("[anon]", lookup, false)
                }
            },
            MappingKind::Unread(path) => {
                self.count_missing(
                    path,
                    "its file could not be opened through /proc/PID/map_files (needs root)",
                );
                Frame::unnamed(&m.module_name(), m.file_offset(lookup), false)
            }
            MappingKind::Special(_) => {
                Frame::unnamed(&m.module_name(), m.file_offset(lookup), false)
            }
        }
    }

    fn file_frame(&mut self, f: &ModuleFile, off: u64) -> Frame {
        let key = (f.key, off);
        let name = match self.names.get(&key) {
            Some(n) => n.clone(),
            None => {
                let n = self.lookup_file(f, off);
                self.names.insert(key, n.clone());
                n
            }
        };
        if let Some(n) = name {
            return Frame::named(&n, &f.name, false);
        }
        // The hint (a scan of dpkg's file lists) once per module.
        match self.missing.get_mut(&f.path) {
            Some(m) => m.frames += 1,
            None => {
                let hint = hint_for(f, self.copied);
                self.count_missing(&f.path, &hint);
            }
        }
        let shown = f
            .elf
            .as_ref()
            .and_then(|e| e.svma_of_offset(off))
            .unwrap_or(off);
        Frame::unnamed(&f.name, shown, false)
    }

    fn lookup_file(&mut self, f: &ModuleFile, off: u64) -> Option<String> {
        let svma = f.elf.as_ref()?.svma_of_offset(off)?;
        if !self.sources.contains_key(&f.key) {
            let s = self.open_sources(f);
            self.sources.insert(f.key, s);
        }
        for file in self.sources.get(&f.key)? {
            let path = format!("/proc/self/fd/{}", file.as_raw_fd());
            let src = Source::Elf(Elf {
                path: PathBuf::from(path),
                // No DWARF and no debug-link search of blazesym's own: it
                // would look beside the module's path, which a non-root
                // user may control.
                debug_syms: false,
                ..Elf::new("")
            });
            if let Ok(Symbolized::Sym(s)) =
                self.files.symbolize_single(&src, Input::VirtOffset(svma))
            {
                return Some(s.name.into_owned());
            }
        }
        None
    }

    fn open_sources(&mut self, f: &ModuleFile) -> Vec<File> {
        let mut out = Vec::new();
        if f.trusted {
            if let Ok(c) = f.file.try_clone() {
                out.push(c);
            }
        } else if f.key.size <= MAX_COPY && self.copied + f.key.size <= COPY_BUDGET {
            let reader = AtReader {
                file: &f.file,
                pos: 0,
            };
            if let Ok(c) = sealed_copy(reader.take(MAX_COPY), "sockscope-module") {
                self.copied += f.key.size;
                out.push(c);
            }
        }
        // After the module: its exported names (.dynsym) are the public
        // ones (`nanosleep`, not glibc's internal alias `__GI___nanosleep`);
        // the debug file names what it does not export.
        if let Some(d) = f
            .elf
            .as_ref()
            .and_then(|e| e.build_id.as_deref())
            .and_then(debug_file)
        {
            out.push(d);
        }
        out
    }

    fn perf_name(&mut self, pid: u32, addr: u64) -> Option<String> {
        let cached = self.perf_maps.get(&pid);
        if let Some(Some(map)) = cached
            && let Some(n) = map.find(addr)
        {
            return Some(n.to_string());
        }
        // A JIT appends as it compiles: read again on a miss, once per
        // sample.
        if cached.is_some() && self.perf_reread {
            return None;
        }
        self.perf_reread = true;
        let map = read_perf_map(pid);
        let n = map.as_ref().and_then(|m| m.find(addr)).map(str::to_string);
        self.perf_maps.insert(pid, map);
        n
    }

    fn count_missing(&mut self, path: &str, hint: &str) {
        let e = self
            .missing
            .entry(path.to_string())
            .or_insert_with(|| Missing {
                frames: 0,
                hint: hint.to_string(),
            });
        e.frames += 1;
    }

    /// Drops what was kept for process `pid`.
    pub fn process_gone(&mut self, pid: u32) {
        self.perf_maps.remove(&pid);
    }

    /// Drops what was kept for modules no longer in `live`.
    pub fn retain_modules(&mut self, live: &dyn Fn(&FileKey) -> bool) {
        let before = self.sources.len();
        self.sources.retain(|k, _| live(k));
        self.names.retain(|(k, _), _| live(k));
        if self.sources.len() != before {
            self.files = blaze();
            self.copied = 0;
            for files in self.sources.values() {
                for f in files.iter().filter(|f| is_memfd(f)) {
                    self.copied += f.metadata().map(|m| m.size()).unwrap_or(0);
                }
            }
        }
    }

    /// Per module path, frames without a name and what would name them,
    /// most frames first.
    pub fn unsymbolized(&self) -> Vec<(String, u64, String)> {
        let mut v: Vec<_> = self
            .missing
            .iter()
            .map(|(p, m)| {
                (
                    crate::text::escape(p).into_owned(),
                    m.frames,
                    m.hint.clone(),
                )
            })
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// True for a memfd (our private copies).
fn is_memfd(f: &File) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
        .is_ok_and(|p| p.to_string_lossy().starts_with("/memfd:"))
}

/// Reads a file from offset 0 with pread, leaving its shared offset alone.
struct AtReader<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for AtReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Opens `path` for reading without following any symbolic link; only a
/// regular file owned by root, off FUSE, is returned.
fn open_root_owned(dir: impl std::os::fd::AsFd, path: &Path, resolve: ResolveFlag) -> Option<File> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK)
        .resolve(resolve | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd: OwnedFd = openat2(dir, path, how).ok()?;
    let f = File::from(fd);
    let meta = f.metadata().ok()?;
    (meta.file_type().is_file() && meta.uid() == 0).then_some(f)
}

/// The debug file of a build id, where Debian's debug packages put it.
fn debug_file(build_id: &[u8]) -> Option<File> {
    let (first, rest) = build_id.split_first()?;
    if rest.len() < 4 {
        return None;
    }
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let path = PathBuf::from(format!("{BUILD_ID_DIR}/{first:02x}/{hex}.debug"));
    open_root_owned(AT_FDCWD, &path, ResolveFlag::empty())
}

/// What would name a module's frames.
fn hint_for(f: &ModuleFile, copied: u64) -> String {
    let Some(elf) = &f.elf else {
        return "not an ELF file sockscope can read".to_string();
    };
    if !f.trusted && (f.key.size > MAX_COPY || copied + f.key.size > COPY_BUDGET) {
        return "owned by a non-root user and too large to copy privately".to_string();
    }
    if elf.has_symtab {
        return "no symbol covers these addresses (PLT stubs or padding)".to_string();
    }
    match package_of(f) {
        Some(pkg) if pkg == "libc6" => "apt install libc6-dbg".to_string(),
        Some(pkg) => format!("apt install {pkg}-dbgsym"),
        None => {
            "an unstripped build (or its debug file under /usr/lib/debug/.build-id)".to_string()
        }
    }
}

/// The Debian package that installed the module's file, if the path the
/// process mapped it at names the same inode here (not in another mount
/// namespace): one scan of dpkg's file lists per module.
fn package_of(f: &ModuleFile) -> Option<String> {
    let meta = std::fs::metadata(&f.path).ok()?;
    if meta.dev() != f.key.dev || meta.ino() != f.key.ino {
        return None;
    }
    // Merged /usr: dpkg may list /lib/... for what maps as /usr/lib/...
    let alias = f.path.strip_prefix("/usr").map(str::to_string);
    for entry in std::fs::read_dir("/var/lib/dpkg/info").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pkg) = name.to_str().and_then(|n| n.strip_suffix(".list")) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if text
            .lines()
            .any(|l| l == f.path || alias.as_deref() == Some(l))
        {
            let pkg = pkg.split(':').next().unwrap_or(pkg);
            return Some(pkg.to_string());
        }
    }
    None
}

/// Reads `/tmp/perf-PID.map` inside the process's root: only a regular
/// file, reached through no symbolic link, owned by the process's user.
fn read_perf_map(pid: u32) -> Option<PerfMap> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
    };
    // The pid the process sees (its own PID namespace) names the file.
    let nspid: u32 = field("NSpid:")?.last()?.parse().ok()?;
    let euid: u32 = field("Uid:")?.get(1)?.parse().ok()?;
    let root = nix::fcntl::open(
        format!("/proc/{pid}/root").as_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK)
        .resolve(
            ResolveFlag::RESOLVE_IN_ROOT
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let fd = openat2(&root, format!("tmp/perf-{nspid}.map").as_str(), how).ok()?;
    let f = File::from(fd);
    let meta = f.metadata().ok()?;
    if !meta.file_type().is_file() || meta.uid() != euid {
        return None;
    }
    // Bytes, not a String: a name that is not UTF-8, or the cap cutting
    // a character in two, must not lose every other symbol of the map.
    let mut bytes = Vec::new();
    f.take(MAX_PERF_MAP).read_to_end(&mut bytes).ok()?;
    Some(parse_perf_map(&String::from_utf8_lossy(&bytes)))
}

/// Parses perf map lines, `START SIZE name` (hex, hex, the rest).
fn parse_perf_map(text: &str) -> PerfMap {
    let mut entries: Vec<(u64, u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let start = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            let size = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            let name = f.next()?.trim();
            Some((start, start.checked_add(size)?, name.to_string()))
        })
        .collect();
    entries.sort_by_key(|e| e.0);
    PerfMap { entries }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_parse_and_look_up() {
        let m =
            parse_perf_map("7f00 10 LazyCompile:*handler /app.js:3\nbad line\n7e00 0x20 stub\n");
        assert_eq!(m.find(0x7f05), Some("LazyCompile:*handler /app.js:3"));
        assert_eq!(m.find(0x7e1f), Some("stub"));
        assert_eq!(m.find(0x7f10), None);
        assert_eq!(m.find(0x10), None);
    }

    /// Removes the perf map path on drop.
    struct Remove(PathBuf);

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
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let _clean = Remove(path.clone());
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, "1000 10 jitted\n").unwrap();
        let map = read_perf_map(pid).expect("our own map, owned by our uid");
        assert_eq!(map.find(0x1008), Some("jitted"));
        // A name that is not UTF-8 (found while writing the properties
        // below: it lost the whole map) costs only itself.
        std::fs::write(&path, b"1000 10 jitted\n2000 10 odd\xff\n").unwrap();
        let map = read_perf_map(pid).expect("a map with one odd name");
        assert_eq!(map.find(0x1008), Some("jitted"));
        assert_eq!(map.find(0x2000), Some("odd\u{fffd}"));

        // Owned by another user than the process's: refused.
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        assert!(read_perf_map(pid).is_none());

        // A symbolic link planted at the path: refused, whatever it names.
        let real = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(real.path(), "1000 10 planted\n").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(real.path(), &path).unwrap();
        assert!(read_perf_map(pid).is_none());
    }

    #[test]
    fn a_symbol_name_with_escapes_is_made_safe() {
        let f = Frame::named("evil\x1b]0;title\x07", "m", false);
        assert!(!f.name.contains('\x1b'));
        assert!(f.name.contains("\\x1b"));
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
            let m = parse_perf_map(&text);
            for (first, last, name) in &want {
                prop_assert_eq!(m.find(*first), Some(name.as_str()));
                prop_assert_eq!(m.find(*last), Some(name.as_str()));
            }
            let _ = parse_perf_map(&hostile::mutate_text(&text, &ms)).find(at);
        }
    }
}
