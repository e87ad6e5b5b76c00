//! Names for frames: blazesym reads ELF symbol tables (`.symtab`,
//! `.dynsym`) and demangles Rust and C++; the debug file of a stripped
//! module is found by its build id under `/usr/lib/debug/.build-id`
//! (where Debian's `-dbgsym` and `-dbg` packages put them); kernel
//! addresses are named from `/proc/kallsyms` (`stacks::kallsyms`, read
//! again for code loaded since) and JIT code from `/tmp/perf-PID.map`
//! (`stacks::perfmap`). A frame without a name is named after the FDE
//! holding it (`stacks::fde`), or after its module.
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
use std::sync::Arc;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};

use super::kallsyms::KernelSymbols;
use super::modules::{FileKey, Mapping, MappingKind, ModuleFile, sealed_copy};
use super::perfmap::PerfMaps;
use crate::report::stacks::{SOCKSCOPE_MODULE, SOCKSCOPE_PREFIX};

/// The largest module copied for a non-root owner (bigger ones stay
/// unsymbolized: the copy is held in memory while the module is mapped).
const MAX_COPY: u64 = 256 << 20;
/// The most bytes of private copies held at once.
const COPY_BUDGET: u64 = 1 << 30;
/// Where Debian installs debug files, by build id.
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// One frame, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The demangled function; when it has no name, `module+0xSTART`, the
    /// first address (the module's own, as `addr2line -e` takes it) of
    /// the `.eh_frame` entry (FDE) holding it, so that one unnamed
    /// function is one frame; `[module]` where no FDE holds it (all of the
    /// module's unnamed code without CFI as one frame); `[kernel]+0xADDR`
    /// for a kernel address kallsyms does not name.
    pub name: Arc<str>,
    /// The module's file name, `[kernel]`, `[vdso]`, `[anon]` (JIT code)
    /// or `[unknown]` (an address in no mapping).
    pub module: Arc<str>,
    /// A kernel frame.
    pub kernel: bool,
    /// Whether `name` is a function name.
    pub symbolized: bool,
}

impl Frame {
    /// A named frame; `name` is made safe to print. Names and modules are
    /// shared (`Arc`): a frame is made for every address of every sample,
    /// its strings once per address.
    fn named(name: &str, module: &Arc<str>, kernel: bool) -> Self {
        Self {
            name: crate::text::escape(name).into(),
            module: Arc::clone(module),
            kernel,
            symbolized: true,
        }
    }

    fn unnamed(module: &Arc<str>, offset: u64, kernel: bool) -> Self {
        Self {
            name: format!("{module}+0x{offset:x}").into(),
            module: Arc::clone(module),
            kernel,
            symbolized: false,
        }
    }

    /// A frame with no name and no FDE: its module, as one frame.
    fn in_module(module: &Arc<str>) -> Self {
        let name = if module.starts_with('[') {
            Arc::clone(module)
        } else {
            format!("[{module}]").into()
        };
        Self {
            name,
            module: Arc::clone(module),
            kernel: false,
            symbolized: false,
        }
    }
}

/// The most (module, offset) names kept before the cache starts afresh
/// (about 100 bytes each), unless [`Symbolizer::bounded`] says.
const MAX_NAMES: usize = 100_000;

/// Why frames of one module have no names, and how many.
#[derive(Clone, Debug)]
struct Missing {
    frames: u64,
    hint: String,
}

/// Names frames; see the module documentation.
pub struct Symbolizer {
    /// blazesym for module files; rebuilt when modules go, since it keeps
    /// every file it opened.
    files: Blaze,
    /// The kernel's symbols (kallsyms, read again for code loaded since).
    kernel: KernelSymbols,
    /// Per module, the files given to blazesym, in the order tried: the
    /// module (or its private copy), then its debug file.
    sources: HashMap<FileKey, Vec<File>>,
    /// (module, file offset) -> its frame.
    names: super::FastMap<(FileKey, u64), Frame>,
    /// Per module, the functions named so far by their extent (file
    /// offsets of the first byte -> of the byte past the last, and the
    /// frame): an address `names` has not seen, in a function already
    /// named, is named without asking blazesym (a leaf frame's address is
    /// any instruction of its function, so most leaves are new
    /// addresses).
    functions: super::FastMap<FileKey, std::collections::BTreeMap<u64, (u64, Frame)>>,
    /// Functions held in `functions`, bounded by `max_names`.
    function_count: usize,
    /// Addresses of modules named through blazesym (misses of both
    /// caches).
    lookups: u64,
    /// The module names of kernel frames, `[kernel]` and
    /// [`SOCKSCOPE_MODULE`], and `[anon]`.
    kernel_module: Arc<str>,
    ours_module: Arc<str>,
    anon_module: Arc<str>,
    /// Each of sockscope's BPF programs' frame name, `[sockscope] NAME`.
    ours_names: super::FastMap<Arc<str>, Arc<str>>,
    /// Every process's perf map, parsed once per change.
    perf_maps: PerfMaps,
    /// Whether a perf map was re-read for the current sample.
    perf_reread: bool,
    /// Per module path, the unnamed frames and what would name them.
    missing: HashMap<String, Missing>,
    /// Bytes of private copies held.
    copied: u64,
    /// The most entries of `names`.
    max_names: usize,
    /// The largest module copied privately.
    max_copy: u64,
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
            kernel: KernelSymbols::new(),
            sources: HashMap::new(),
            names: Default::default(),
            functions: Default::default(),
            function_count: 0,
            lookups: 0,
            kernel_module: "[kernel]".into(),
            ours_module: SOCKSCOPE_MODULE.into(),
            anon_module: "[anon]".into(),
            ours_names: Default::default(),
            perf_maps: PerfMaps::default(),
            perf_reread: false,
            missing: HashMap::new(),
            copied: 0,
            max_names: MAX_NAMES,
            max_copy: MAX_COPY,
        }
    }

    /// An empty symbolizer that keeps at most `names` names and copies no
    /// module larger than `copy` bytes (a node agent's budget: a copy is
    /// held whole while its module is cached).
    pub fn bounded(names: usize, copy: u64) -> Self {
        Self {
            max_names: names.max(1),
            max_copy: copy.min(MAX_COPY),
            ..Self::new()
        }
    }

    /// Marks the start of a sample (a perf map is re-read at most once per
    /// sample).
    pub fn begin_sample(&mut self) {
        self.perf_reread = false;
    }

    /// Names kernel addresses (innermost first, sampled at `ts_ns`) from
    /// /proc/kallsyms; sockscope's own BPF programs are marked as its
    /// (module [`SOCKSCOPE_MODULE`], the name after `[sockscope] `).
    pub fn kernel(&mut self, addrs: &[u64], ts_ns: u64) -> Vec<Frame> {
        let mut out = Vec::with_capacity(addrs.len());
        for &a in addrs {
            out.push(match self.kernel.name(a, ts_ns) {
                Some(n) if n.ours => {
                    let name = self
                        .ours_names
                        .entry(n.name)
                        .or_insert_with_key(|n| format!("{SOCKSCOPE_PREFIX}{n}").into());
                    Frame {
                        name: Arc::clone(name),
                        module: Arc::clone(&self.ours_module),
                        kernel: true,
                        symbolized: true,
                    }
                }
                // kallsyms' names are made safe to print as read.
                Some(n) => Frame {
                    name: n.name,
                    module: Arc::clone(&self.kernel_module),
                    kernel: true,
                    symbolized: true,
                },
                None => {
                    self.count_missing(
                        "[kernel]",
                        "kernel symbols: /proc/kallsyms shows addresses to root only",
                    );
                    Frame::unnamed(&self.kernel_module, a, true)
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
                Some(n) => Frame::named(&n, &self.anon_module, false),
                None => {
                    match self.perf_maps.refusal(pid) {
                        // Its own reason, not the generic hint, and the
                        // latest one: the map a user can fix.
                        Some(why) => {
                            self.count_missing("[anon]", "");
                            if let Some(m) = self.missing.get_mut("[anon]") {
                                m.hint = format!("JIT code: {why}");
                            }
                        }
                        None => self.count_missing(
                            "[anon]",
                            "JIT code: a runtime that writes /tmp/perf-PID.map \
                             (node --perf-basic-prof, perf-map-agent for Java)",
                        ),
                    }
                    Frame::in_module(&self.anon_module)
                }
            },
            MappingKind::Unread(path) => {
                self.count_missing(
                    path,
                    "its file could not be opened through /proc/PID/map_files (needs root)",
                );
                Frame::in_module(&m.module_name().into())
            }
            MappingKind::Special(_) => Frame::in_module(&m.module_name().into()),
        }
    }

    fn file_frame(&mut self, f: &ModuleFile, off: u64) -> Frame {
        let key = (f.key, off);
        let frame = match self.names.get(&key) {
            Some(fr) => fr.clone(),
            None => {
                let fr = match self.function_at(f.key, off) {
                    Some(fr) => fr,
                    None => self.name_new(f, off),
                };
                if self.names.len() >= self.max_names {
                    // A cache: a node agent sampling for days would
                    // otherwise keep every address it ever named.
                    self.names.clear();
                }
                self.names.insert(key, fr.clone());
                fr
            }
        };
        if !frame.symbolized {
            // The hint (a scan of dpkg's file lists) once per module.
            match self.missing.get_mut(&f.path) {
                Some(m) => m.frames += 1,
                None => {
                    let hint = hint_for(f, self.copied, self.max_copy);
                    self.count_missing(&f.path, &hint);
                }
            }
        }
        frame
    }

    /// The frame of a function already named that holds file offset
    /// `off` of module `key`.
    fn function_at(&self, key: FileKey, off: u64) -> Option<Frame> {
        let (_, (end, fr)) = self.functions.get(&key)?.range(..=off).next_back()?;
        (off < *end).then(|| fr.clone())
    }

    /// Names file offset `off` of `f` through its files (blazesym), and
    /// keeps the extent of the function found.
    fn name_new(&mut self, f: &ModuleFile, off: u64) -> Frame {
        match self.lookup_file(f, off) {
            Some((n, extent)) => {
                let fr = Frame::named(&n, &f.name, false);
                if let Some((start, end)) = extent {
                    if self.function_count >= self.max_names {
                        self.functions.clear();
                        self.function_count = 0;
                    }
                    let fns = self.functions.entry(f.key).or_default();
                    if fns.insert(start, (end, fr.clone())).is_none() {
                        self.function_count += 1;
                    }
                }
                fr
            }
            None => {
                // The function's first address, from the FDE
                // holding it: one frame per unnamed function, not
                // one per instruction sampled.
                let fde = f.elf.as_ref().and_then(|e| {
                    let svma = e.svma_of_offset(off)?;
                    e.fde_range(svma)
                });
                match fde {
                    Some(r) => Frame::unnamed(&f.name, r.start, false),
                    None => Frame::in_module(&f.name),
                }
            }
        }
    }

    /// The name of the function holding file offset `off` of `f`, and
    /// its extent in file offsets when the symbol gives its size.
    fn lookup_file(&mut self, f: &ModuleFile, off: u64) -> Option<(String, Option<(u64, u64)>)> {
        let svma = f.elf.as_ref()?.svma_of_offset(off)?;
        self.lookups += 1;
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
                // The symbol's extent, moved from addresses to file
                // offsets as `off` was (one segment holds a function).
                let start = off.checked_sub(s.offset as u64);
                let extent = start
                    .zip(s.size.filter(|&n| n > 0))
                    .and_then(|(a, n)| Some((a, a.checked_add(n as u64)?)))
                    .filter(|&(a, b)| a <= off && off < b);
                return Some((s.name.into_owned(), extent));
            }
        }
        None
    }

    fn open_sources(&mut self, f: &ModuleFile) -> Vec<File> {
        let mut out = Vec::new();
        // What naming from it holds, for the resolver's budget.
        let symbols = f.elf.as_ref().map_or(0, |e| e.symbol_bytes);
        let mut held = 0;
        if f.trusted {
            if let Ok(c) = f.file.try_clone() {
                held += symbols;
                out.push(c);
            }
        } else if f.key.size <= self.max_copy && self.copied + f.key.size <= COPY_BUDGET {
            let reader = AtReader {
                file: &f.file,
                pos: 0,
            };
            if let Ok(c) = sealed_copy(reader.take(self.max_copy), "sockscope-module") {
                self.copied += f.key.size;
                held += f.key.size + symbols;
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
            held += super::modules::symbol_bytes(&d);
            out.push(d);
        }
        f.naming_bytes
            .store(held, std::sync::atomic::Ordering::Relaxed);
        out
    }

    fn perf_name(&mut self, pid: u32, addr: u64) -> Option<String> {
        // A JIT appends as it compiles: look again on a miss, once per
        // sample (a parse only when the map changed).
        let recheck = !self.perf_reread;
        let n = self.perf_maps.name(pid, addr, recheck);
        if n.is_none() && recheck {
            self.perf_reread = true;
        }
        n
    }

    /// How many module addresses were named through their files, not
    /// from a cache.
    pub fn lookups(&self) -> u64 {
        self.lookups
    }

    /// What was cut short or refused while naming (a perf map past its
    /// bound), for the section's notes.
    pub fn notes(&self) -> Vec<String> {
        self.perf_maps.notes()
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
        self.perf_maps.process_gone(pid);
    }

    /// Drops what was kept for modules no longer in `live`.
    pub fn retain_modules(&mut self, live: &dyn Fn(&FileKey) -> bool) {
        let before = self.sources.len();
        self.sources.retain(|k, _| live(k));
        self.names.retain(|(k, _), _| live(k));
        self.functions.retain(|k, _| live(k));
        self.function_count = self.functions.values().map(|f| f.len()).sum();
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
fn hint_for(f: &ModuleFile, copied: u64, max_copy: u64) -> String {
    let Some(elf) = &f.elf else {
        return "not an ELF file sockscope can read".to_string();
    };
    if !f.trusted && (f.key.size > max_copy || copied + f.key.size > COPY_BUDGET) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_name_with_escapes_is_made_safe() {
        let f = Frame::named("evil\x1b]0;title\x07", &"m".into(), false);
        assert!(!f.name.contains('\x1b'));
        assert!(f.name.contains("\\x1b"));
    }
}
