//! A process's executable mappings and the objects behind them.
//!
//! Each mapped file is opened through `/proc/PID/map_files/START-END`: that
//! is the exact inode the process mapped, whatever a path names now, in any
//! mount namespace, deleted or not, so nothing a non-root user plants or
//! swaps at a path is ever read. The ELF is parsed with `object` through
//! `read()` calls (`ReadCache`): a file owned by another user can be
//! truncated under a mapping of ours, and a read then comes back short
//! where a mapping would raise SIGBUS. Only the large unwind sections of a
//! file only root can change are mapped ([`SectionData`]), so that a node
//! agent does not hold megabytes of a library's `.eh_frame` of which it
//! reads a few pages. Every section read is bounded.
//! Parsed objects are cached per file identity, across processes (nginx's
//! workers share their modules).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::fde::{CfiSections, FdeTable, HdrLookup, hdr_find};

use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, ObjectSegment, ReadCache, SegmentFlags};

/// The largest unwind section (`.eh_frame`, `.eh_frame_hdr`,
/// `.debug_frame`) read from a module; beyond it the module unwinds by
/// frame pointers. Chromium-sized binaries have ~10 MiB of `.eh_frame`.
const MAX_UNWIND_SECTION: u64 = 64 << 20;
/// The most lines of `/proc/PID/maps` read (a process has a few hundred).
const MAX_MAPS_LINES: usize = 65_536;
/// FUSE's `statfs` magic: a file there is served by a user-space daemon,
/// which may be a non-root user, so its owner field proves nothing.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// The identity of a mapped file: the inode, and its size and change time
/// so that an inode number reused after a deletion is not mistaken for the
/// old file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    /// Device of the inode (`st_dev`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// One section's bytes and the addresses the file gives them.
#[derive(Clone, Debug)]
pub struct Section {
    /// Its addresses as the ELF file states them (SVMA).
    pub svma: Range<u64>,
    /// Its bytes.
    pub data: SectionData,
}

/// A section's bytes: a copy, or a read-only mapping of a file only root
/// can change ([`ModuleFile::trusted`]), whose pages are read from the page
/// cache as lookups touch them (a large library's `.eh_frame` is megabytes,
/// of which unwinding reads a few pages) and which the kernel may reclaim.
#[derive(Clone)]
pub struct SectionData(Arc<Backing>);

enum Backing {
    Copy(Box<[u8]>),
    Mapped {
        map: memmap2::Mmap,
        start: usize,
        len: usize,
    },
}

impl SectionData {
    /// A copy of `bytes`.
    pub fn copy(bytes: &[u8]) -> Self {
        Self(Arc::new(Backing::Copy(bytes.into())))
    }

    /// Maps `len` bytes of `file` from `offset`, read-only. The caller
    /// vouches that only root can change the file (a truncation under the
    /// mapping would raise SIGBUS on a later read).
    fn map(file: &File, offset: u64, len: u64) -> io::Result<Self> {
        let page = offset & !0xfff;
        let start = usize::try_from(offset - page).map_err(io::Error::other)?;
        let len = usize::try_from(len).map_err(io::Error::other)?;
        // SAFETY: read-only and private; the file is one only root can
        // change (see above), so its bytes stay as mapped.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(page)
                .len(start + len)
                .map(file)?
        };
        Ok(Self(Arc::new(Backing::Mapped { map, start, len })))
    }

    /// The bytes it holds in memory of its own (a mapping's pages are the
    /// page cache's: 0).
    pub fn owned_bytes(&self) -> u64 {
        match &*self.0 {
            Backing::Copy(b) => b.len() as u64,
            Backing::Mapped { .. } => 0,
        }
    }
}

impl Default for SectionData {
    fn default() -> Self {
        Self::copy(&[])
    }
}

impl std::ops::Deref for SectionData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Backing::Copy(b) => b,
            Backing::Mapped { map, start, len } => &map[*start..*start + *len],
        }
    }
}

impl std::fmt::Debug for SectionData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &*self.0 {
            Backing::Copy(_) => "copy",
            Backing::Mapped { .. } => "mapped",
        };
        write!(f, "SectionData({kind}, {} bytes)", self.len())
    }
}

/// Sections at least this large are mapped rather than copied, where the
/// file may be mapped at all (smaller ones cost less copied than a
/// mapping's page-rounded pages and its descriptor-free bookkeeping).
const MAP_AT_LEAST: u64 = 64 << 10;

/// One `PT_LOAD` segment: where file bytes go in the address space.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Its first address as the file states it.
    pub vaddr: u64,
    /// Offset of its first byte in the file.
    pub offset: u64,
    /// Bytes of it that come from the file.
    pub filesz: u64,
    /// Mapped executable.
    pub exec: bool,
}

/// What the unwinder and the symbolizer need of an ELF object.
#[derive(Clone, Debug, Default)]
pub struct ElfInfo {
    /// The lowest segment address, page-aligned: the module's base.
    pub base_svma: u64,
    /// Its `PT_LOAD` segments.
    pub loads: Vec<Segment>,
    /// `.text`'s addresses.
    pub text: Option<Range<u64>>,
    /// `.got`'s addresses (DWARF pointer encodings may be relative to it).
    pub got: Option<Range<u64>>,
    /// `.eh_frame`.
    pub eh_frame: Option<Section>,
    /// `.eh_frame_hdr`, its binary-search index.
    pub eh_frame_hdr: Option<Section>,
    /// `.debug_frame`, used where there is no `.eh_frame`.
    pub debug_frame: Option<Section>,
    /// The GNU build id (names the debug file under /usr/lib/debug).
    pub build_id: Option<Vec<u8>>,
    /// Whether it has a non-empty `.symtab` (an unstripped build).
    pub has_symtab: bool,
    /// What naming from it may hold ([`symbol_bytes`]).
    pub symbol_bytes: u64,
    /// Its FDE ranges, read on first need ([`ElfInfo::fdes`]).
    pub fde_table: OnceLock<FdeTable>,
}

impl ElfInfo {
    /// The address ranges its call-frame information covers, read on
    /// first need.
    pub fn fdes(&self) -> &FdeTable {
        self.fde_table
            .get_or_init(|| FdeTable::of(&self.cfi_sections()))
    }

    /// The range of the FDE holding file address `svma`: looked up in
    /// `.eh_frame_hdr`'s table where there is one, else in the whole
    /// table of its FDEs ([`ElfInfo::fdes`], read once).
    pub fn fde_range(&self, svma: u64) -> Option<Range<u64>> {
        match self.cfi_of(Some(svma)) {
            Cfi::Covered(r) => Some(r),
            Cfi::Uncovered | Cfi::Absent => None,
        }
    }

    /// Where file address `svma` (None: outside its segments) stands with
    /// its call-frame information: one search of `.eh_frame_hdr`'s table
    /// where there is one, else the whole table of its FDEs.
    fn cfi_of(&self, svma: Option<u64>) -> Cfi {
        match svma.map(|a| hdr_find(&self.cfi_sections(), a)) {
            Some(HdrLookup::Covered(r)) => Cfi::Covered(r),
            Some(HdrLookup::Uncovered) => Cfi::Uncovered,
            Some(HdrLookup::NoTable) | None => {
                let fdes = self.fdes();
                if fdes.is_empty() {
                    return Cfi::Absent;
                }
                svma.and_then(|a| fdes.find(a))
                    .map_or(Cfi::Uncovered, Cfi::Covered)
            }
        }
    }

    /// Its CFI sections, as [`FdeTable::of`] reads them.
    pub fn cfi_sections(&self) -> CfiSections<'_> {
        CfiSections {
            eh_frame: self.eh_frame.as_ref().map(|s| (&s.data[..], s.svma.start)),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|s| s.svma.start),
            eh_frame_hdr_data: self.eh_frame_hdr.as_ref().map(|s| &s.data[..]),
            text: self.text.as_ref().map(|t| t.start),
            got: self.got.as_ref().map(|g| g.start),
            debug_frame: self.debug_frame.as_ref().map(|s| &s.data[..]),
        }
    }

    /// The file's address (SVMA) of the byte at file offset `off`, from
    /// the segment holding it.
    pub fn svma_of_offset(&self, off: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|s| off >= s.offset && off - s.offset < s.filesz)
            .map(|s| s.vaddr + (off - s.offset))
    }

    /// The load bias (runtime address less file address) of an executable
    /// mapping at `start` of file offset `offset`. The mapping starts at
    /// the page holding the segment's first byte, which may lie before the
    /// segment (and be shared with the segment before it).
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let holds = |s: &&Segment| {
            offset >= s.offset & !0xfff && offset < s.offset.saturating_add(s.filesz)
        };
        let s = (self.loads.iter().filter(|s| s.exec).find(holds))
            .or_else(|| self.loads.iter().find(holds))?;
        let svma = s.vaddr.wrapping_sub(s.offset).wrapping_add(offset);
        Some(start.wrapping_sub(svma))
    }
}

/// A mapped file, opened once, shared by every process that maps it.
#[derive(Debug)]
pub struct ModuleFile {
    /// Its identity.
    pub key: FileKey,
    /// The path `/proc/PID/maps` shows (in the process's mount namespace;
    /// for hints only, never opened).
    pub path: String,
    /// Its file name, made safe to print.
    pub name: Arc<str>,
    /// Its owner.
    pub uid: u32,
    /// True when only root can change its bytes: owned by root and not on
    /// FUSE. Only such files are ever mmapped (by the symbolizer).
    pub trusted: bool,
    /// The open file: the exact inode the process mapped.
    pub file: File,
    /// Its ELF contents, None when it is not a (readable) 64-bit ELF.
    pub elf: Option<ElfInfo>,
    /// Bytes held to name its frames (the symbolizer's estimate of its
    /// symbol tables, mapped or indexed, and of any private copy).
    pub naming_bytes: AtomicU64,
    /// When a sample last had a frame in it ([`ModuleCache`]'s clock).
    used: AtomicU64,
}

impl ModuleFile {
    /// The bytes held for it: its unwind sections, their FDE table once
    /// built, and what naming it holds ([`ModuleFile::naming_bytes`]).
    pub fn held(&self) -> u64 {
        let unwind = self.elf.as_ref().map_or(0, |e| {
            let sections = [&e.eh_frame, &e.eh_frame_hdr, &e.debug_frame]
                .into_iter()
                .flatten()
                .map(|s| s.data.owned_bytes())
                .sum::<u64>();
            sections + e.fde_table.get().map_or(0, FdeTable::bytes)
        });
        unwind + self.naming_bytes.load(Ordering::Relaxed)
    }
}

/// What one executable mapping holds.
#[derive(Clone, Debug)]
pub enum MappingKind {
    /// A file, opened and (where it is an ELF) parsed.
    File(Arc<ModuleFile>),
    /// A file that could not be opened (named by its maps path, which is
    /// shown, never opened).
    Unread(String),
    /// Anonymous executable memory: JIT code, named by a perf map if any.
    Anon,
    /// A kernel-provided mapping such as `[vsyscall]`.
    Special(String),
}

/// Where an address stands with its module's call-frame information.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cfi {
    /// An FDE covers it: its range, as file addresses.
    Covered(Range<u64>),
    /// The module has CFI, but none for this address (code built with
    /// `-fno-asynchronous-unwind-tables`, or not code at all).
    Uncovered,
    /// The module has none (not an ELF, no `.eh_frame` nor
    /// `.debug_frame`, JIT code, an unreadable file).
    Absent,
}

/// One executable mapping of a process.
#[derive(Clone, Debug)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// What it holds.
    pub kind: MappingKind,
}

impl Mapping {
    /// The file offset of address `addr` (inside this mapping).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }

    /// Where `addr` (inside this mapping) stands with its module's
    /// call-frame information.
    pub fn cfi(&self, addr: u64) -> Cfi {
        let MappingKind::File(f) = &self.kind else {
            return Cfi::Absent;
        };
        let Some(elf) = &f.elf else {
            return Cfi::Absent;
        };
        elf.cfi_of(elf.svma_of_offset(self.file_offset(addr)))
    }

    /// The module name frames in it carry.
    pub fn module_name(&self) -> String {
        match &self.kind {
            MappingKind::File(m) => m.name.to_string(),
            MappingKind::Unread(p) => file_name(p),
            MappingKind::Anon => "[anon]".to_string(),
            MappingKind::Special(s) => crate::text::escape(s).into_owned(),
        }
    }
}

/// A process's executable mappings, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct ProcessMaps {
    /// The mappings, by start address.
    pub mappings: Vec<Mapping>,
}

impl ProcessMaps {
    /// Whether one of its mappings is of a module in `keys`.
    pub fn maps_any(&self, keys: &[FileKey]) -> bool {
        self.mappings
            .iter()
            .any(|m| matches!(&m.kind, MappingKind::File(f) if keys.contains(&f.key)))
    }

    /// The mapping holding `addr`.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }
}

/// One line of `/proc/PID/maps`, the fields used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Executable.
    pub exec: bool,
    /// File offset of `start`.
    pub offset: u64,
    /// Inode (0 for anonymous memory).
    pub inode: u64,
    /// The path or pseudo-name (`[vdso]`), empty for anonymous memory.
    pub path: String,
}

/// Parses one maps line (`start-end perms offset dev inode path`).
pub fn parse_maps_line(line: &str) -> Option<MapsLine> {
    let mut f = line.splitn(6, ' ');
    let (start, end) = f.next()?.split_once('-')?;
    let perms = f.next()?;
    let offset = f.next()?;
    let _dev = f.next()?;
    let inode = f.next()?;
    let path = f.next().unwrap_or("").trim_start();
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        inode: inode.parse().ok()?,
        path: path.to_string(),
    })
}

/// The last path component, made safe to print.
pub fn file_name(path: &str) -> String {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let name = path.rsplit('/').next().unwrap_or(path);
    crate::text::escape(name).into_owned()
}

/// Reads the executable lines of `/proc/PID/maps`. Lines are read as
/// bytes: the kernel prints file names as they are, and one mapping of a
/// file named in bytes that are not UTF-8 must not fail the whole read
/// (its name is shown lossily; the file is opened through map_files).
pub fn read_maps(pid: u32) -> io::Result<Vec<MapsLine>> {
    let f = File::open(format!("/proc/{pid}/maps"))?;
    let mut out = Vec::new();
    for line in BufReader::new(f).split(b'\n').take(MAX_MAPS_LINES) {
        let line = line?;
        if let Some(m) = parse_maps_line(&String::from_utf8_lossy(&line)).filter(|m| m.exec) {
            out.push(m);
        }
    }
    Ok(out)
}

/// Parsed modules, shared across processes, keyed by file identity.
#[derive(Debug, Default)]
pub struct ModuleCache {
    files: HashMap<FileKey, Arc<ModuleFile>>,
    /// Our own vDSO image (the kernel maps the same one into every
    /// process), loaded on first need; `Some(None)` when it could not be.
    vdso: Option<Option<Arc<ModuleFile>>>,
    /// Counts samples, to order modules by their last use.
    clock: u64,
}

impl ModuleCache {
    /// A process's executable mappings, each file opened through
    /// map_files and parsed (or found in the cache).
    pub fn process(&mut self, pid: u32) -> io::Result<ProcessMaps> {
        let mut mappings = Vec::new();
        for line in read_maps(pid)? {
            let kind = self.kind_of(pid, &line);
            mappings.push(Mapping {
                start: line.start,
                end: line.end,
                offset: line.offset,
                kind,
            });
        }
        mappings.sort_by_key(|m| m.start);
        Ok(ProcessMaps { mappings })
    }

    fn kind_of(&mut self, pid: u32, line: &MapsLine) -> MappingKind {
        if line.path == "[vdso]" {
            return match self.vdso() {
                Some(m) => MappingKind::File(m),
                None => MappingKind::Special(line.path.clone()),
            };
        }
        if line.inode == 0 {
            return if line.path.is_empty() || line.path.starts_with("[anon") {
                MappingKind::Anon
            } else {
                MappingKind::Special(line.path.clone())
            };
        }
        let at = format!("/proc/{pid}/map_files/{:x}-{:x}", line.start, line.end);
        match File::open(&at) {
            Ok(file) => match self.module(file, &line.path) {
                Some(m) => MappingKind::File(m),
                None => MappingKind::Unread(line.path.clone()),
            },
            Err(_) => MappingKind::Unread(line.path.clone()),
        }
    }

    /// The cached module for an open file, parsed on first sight.
    pub fn module(&mut self, file: File, path: &str) -> Option<Arc<ModuleFile>> {
        let meta = file.metadata().ok()?;
        let key = FileKey::of(&meta);
        if let Some(m) = self.files.get(&key) {
            return Some(Arc::clone(m));
        }
        let trusted = meta.uid() == 0 && !on_fuse(&file);
        let elf = parse_elf_as(&file, trusted);
        let m = Arc::new(ModuleFile {
            key,
            path: path.to_string(),
            name: file_name(path).into(),
            uid: meta.uid(),
            trusted,
            file,
            elf,
            naming_bytes: AtomicU64::new(0),
            used: AtomicU64::new(self.clock),
        });
        self.files.insert(key, Arc::clone(&m));
        Some(m)
    }

    /// Whether the module `key` is still cached.
    pub fn contains(&self, key: &FileKey) -> bool {
        self.files.contains_key(key)
    }

    /// Drops the modules no process maps any more; true when it dropped
    /// one (so holders of per-file state may drop theirs).
    pub fn prune(&mut self) -> bool {
        let before = self.files.len();
        self.files.retain(|_, m| Arc::strong_count(m) > 1);
        self.files.len() != before
    }

    /// Starts a sample: the modules [`ModuleCache::touch`]ed from now on
    /// are its.
    pub fn tick(&mut self) {
        self.clock += 1;
    }

    /// Marks `m` as used by the current sample.
    pub fn touch(&self, m: &ModuleFile) {
        m.used.store(self.clock, Ordering::Relaxed);
    }

    /// The bytes the cached modules hold ([`ModuleFile::held`]).
    pub fn held(&self) -> u64 {
        self.files.values().map(|m| m.held()).sum()
    }

    /// The current sample's clock reading.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Drops the least recently used modules until those left hold at
    /// most `target` bytes, sparing those used since clock `hot_since`;
    /// then, if they still hold more than `cap`, the least recently used
    /// of those too, down to `cap`. The current sample's modules and the
    /// vDSO (every process maps it) are always kept. Returns the modules
    /// dropped, which their holders must let go of for the memory to be
    /// freed.
    pub fn evict_to(&mut self, target: u64, hot_since: u64, cap: u64) -> Vec<FileKey> {
        let vdso = self.vdso.clone().flatten().map(|m| m.key);
        let mut by_age: Vec<(u64, u64, FileKey)> = self
            .files
            .values()
            .map(|m| (m.used.load(Ordering::Relaxed), m.held(), m.key))
            .filter(|&(used, _, key)| used < self.clock && Some(key) != vdso)
            .collect();
        let mut held = self.held();
        by_age.sort_unstable_by_key(|(used, _, _)| *used);
        let mut gone = Vec::new();
        for (used, h, key) in by_age {
            let limit = if used < hot_since { target } else { cap };
            if held <= limit {
                if used < hot_since {
                    continue;
                }
                break;
            }
            self.files.remove(&key);
            held -= h;
            gone.push(key);
        }
        gone
    }

    fn vdso(&mut self) -> Option<Arc<ModuleFile>> {
        if self.vdso.is_none() {
            let m = own_vdso_file().and_then(|f| self.module(f, "[vdso]"));
            self.vdso = Some(m);
        }
        self.vdso.clone().flatten()
    }
}

/// True when `file` is on a FUSE file system.
fn on_fuse(file: &File) -> bool {
    // SAFETY: statfs is plain data; fstatfs fills it from a valid fd.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open for the duration of the call.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    rc != 0 || magic == FUSE_SUPER_MAGIC
}

/// Parses the ELF parts unwinding and symbolization need, through reads.
/// None for anything that is not a little-endian 64-bit ELF or whose
/// headers do not parse; a section that is too large or unreadable is
/// left out, not an error.
pub fn parse_elf(file: &File) -> Option<ElfInfo> {
    parse_elf_as(file, false)
}

/// [`parse_elf`], mapping the large unwind sections instead of copying
/// them when `map` (only for a file only root can change).
pub fn parse_elf_as(file: &File, map: bool) -> Option<ElfInfo> {
    let cache = ReadCache::new(file);
    let elf = ElfFile64::<LittleEndian, _>::parse(&cache).ok()?;
    let loads: Vec<Segment> = elf
        .segments()
        .map(|s| {
            let (offset, filesz) = s.file_range();
            Segment {
                vaddr: s.address(),
                offset,
                filesz,
                exec: matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0),
            }
        })
        .collect();
    let base_svma = loads.iter().map(|s| s.vaddr).min().unwrap_or(0) & !0xfff;
    let range = |name: &str| {
        elf.section_by_name(name)
            .map(|s| s.address()..s.address().saturating_add(s.size()))
    };
    let section = |name: &str| {
        let s = elf.section_by_name(name)?;
        if s.size() > MAX_UNWIND_SECTION {
            return None;
        }
        let svma = s.address()..s.address().saturating_add(s.size());
        let mapped = s
            .file_range()
            .filter(|&(_, len)| map && len >= MAP_AT_LEAST && len == s.size())
            .and_then(|(off, len)| SectionData::map(file, off, len).ok());
        let data = match mapped {
            Some(d) => d,
            None => SectionData::copy(s.data().ok()?),
        };
        Some(Section { svma, data })
    };
    Some(ElfInfo {
        base_svma,
        text: range(".text"),
        got: range(".got"),
        eh_frame: section(".eh_frame"),
        eh_frame_hdr: section(".eh_frame_hdr"),
        debug_frame: section(".debug_frame"),
        build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
        has_symtab: elf.section_by_name(".symtab").is_some_and(|s| s.size() > 0),
        symbol_bytes: symbol_bytes_of(&elf),
        fde_table: OnceLock::new(),
        loads,
    })
}

/// What naming from an ELF file holds: its symbol tables (`.symtab`,
/// `.dynsym`), which blazesym reads whole to sort them, plus a third of
/// them for the sorted index it keeps (8 bytes per 24-byte symbol). The
/// names are read only for the addresses looked up (a few pages). 0 for a
/// file that does not parse.
pub fn symbol_bytes(file: &File) -> u64 {
    let cache = ReadCache::new(file);
    ElfFile64::<LittleEndian, _>::parse(&cache).map_or(0, |elf| symbol_bytes_of(&elf))
}

fn symbol_bytes_of<'d, R: object::ReadRef<'d>>(elf: &ElfFile64<'d, LittleEndian, R>) -> u64 {
    let size = |name: &str| elf.section_by_name(name).map_or(0, |s| s.size());
    let tables = size(".symtab") + size(".dynsym");
    tables + tables / 3
}

/// Our own vDSO image, copied into a sealed memfd: the kernel maps the
/// same image into every 64-bit process, and a file lets it be parsed and
/// symbolized like any module.
fn own_vdso_file() -> Option<File> {
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return None;
    }
    let f = File::open("/proc/self/maps").ok()?;
    let line = BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| parse_maps_line(&l))
        .find(|m| m.path == "[vdso]" && m.start == base)?;
    let len = usize::try_from(line.end - line.start).ok()?;
    // SAFETY: the kernel maps [vdso] readable for the process's lifetime,
    // and `len` is its mapped size.
    let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, len) };
    sealed_copy(bytes, "sockscope-vdso").ok()
}

/// A private, sealed in-memory copy of what `src` reads (a memfd): what is handed
/// to code that mmaps a file, when the original could be truncated by its
/// owner under the mapping (SIGBUS). The seals make the copy immutable.
pub fn sealed_copy(mut src: impl io::Read, name: &str) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
    // SAFETY: a valid NUL-terminated name and flags.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new descriptor we own.
    let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    io::copy(&mut src, &mut f)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on our own open descriptor.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let l = "7f0a1c200000-7f0a1c228000 r-xp 00028000 fd:01 1835017   /usr/lib/x86_64-linux-gnu/libc.so.6";
        let m = parse_maps_line(l).unwrap();
        assert_eq!(m.start, 0x7f0a1c200000);
        assert_eq!(m.end, 0x7f0a1c228000);
        assert!(m.exec);
        assert_eq!(m.offset, 0x28000);
        assert_eq!(m.inode, 1835017);
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let anon = parse_maps_line("7f0a1c200000-7f0a1c228000 rwxp 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.path, "");
        let spaced =
            parse_maps_line("1000-2000 r-xp 00000000 fd:01 7   /tmp/a b (deleted)").unwrap();
        assert_eq!(spaced.path, "/tmp/a b (deleted)");
        assert_eq!(file_name(&spaced.path), "a b");
        assert!(parse_maps_line("garbage").is_none());
    }

    #[test]
    fn a_name_with_control_characters_is_escaped() {
        assert_eq!(file_name("/tmp/x\x1b[31m"), "x\\x1b[31m");
    }

    #[test]
    fn svma_follows_the_segment_holding_the_offset() {
        // Two segments sharing the file page 0x1000..0x2000, as linkers
        // lay out a read-only segment and the text after it.
        let e = ElfInfo {
            loads: vec![
                Segment {
                    vaddr: 0,
                    offset: 0,
                    filesz: 0x1040,
                    exec: false,
                },
                Segment {
                    vaddr: 0x2040,
                    offset: 0x1040,
                    filesz: 0x500,
                    exec: true,
                },
            ],
            ..ElfInfo::default()
        };
        assert_eq!(e.svma_of_offset(0x10), Some(0x10));
        assert_eq!(e.svma_of_offset(0x1050), Some(0x2050));
        assert_eq!(e.svma_of_offset(0x1600), None);
        // The executable mapping of that shared page (offset 0x1000) at
        // 0x5000 holds the text's 0x2000 there, not the first segment's.
        assert_eq!(e.bias(0x5000, 0x1000), Some(0x5000 - 0x2000));
    }

    #[test]
    fn own_vdso_parses_with_unwind_info() {
        let f = own_vdso_file().expect("vdso");
        let e = parse_elf(&f).expect("the vdso is an ELF");
        assert!(e.eh_frame.is_some(), "the vdso carries .eh_frame");
    }

    /// Found while writing the properties below: a mapping of a file
    /// whose name is not UTF-8 (any data file the target maps) failed
    /// the whole read of /proc/PID/maps, and with it every frame of the
    /// process.
    #[test]
    fn a_file_name_that_is_not_utf8_fails_no_read() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join(std::ffi::OsStr::from_bytes(b"odd-\xff.bin"));
        std::fs::write(&path, [0u8; 4096]).unwrap();
        let f = File::open(&path).unwrap();
        // SAFETY: a fresh private read-only mapping of an open file,
        // unmapped below; nothing reads through it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let got = read_maps(std::process::id());
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(at, 4096) };
        assert!(
            !got.unwrap().is_empty(),
            "our own code is mapped executable"
        );
    }

    // Property tests: maps lines written the way the kernel writes them
    // (`show_map_vma`: the path padded to its column) parse back; mutated
    // lines parse or are skipped, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn maps_lines_round_trip_and_mutations_never_panic(
            (start, end, offset) in any::<(u64, u64, u64)>(),
            perms in prop::sample::select(vec!["r-xp", "r--p", "rw-s", "--xp"]),
            (major, minor, inode) in any::<(u8, u8, u64)>(),
            path in prop_oneof![
                Just(String::new()),
                Just("[vdso]".to_string()),
                prop::collection::vec(any::<char>().prop_filter("no newline", |c| *c != '\n'), 1..40)
                    .prop_map(|v| format!("/{}", v.into_iter().collect::<String>())),
            ],
            ms in hostile::mutations(),
        ) {
            let head = format!("{start:08x}-{end:08x} {perms} {offset:08x} {major:02x}:{minor:02x} {inode} ");
            // The kernel pads to the path's column (73 bytes on 64-bit).
            let line = format!("{head:<73}{path}");
            let m = parse_maps_line(&line).unwrap();
            prop_assert_eq!((m.start, m.end, m.offset, m.inode), (start, end, offset, inode));
            prop_assert_eq!(m.exec, perms.as_bytes()[2] == b'x');
            prop_assert_eq!(m.path, path.trim_start());
            let _ = parse_maps_line(&hostile::mutate_text(&line, &ms));
        }
    }
}
