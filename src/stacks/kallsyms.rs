//! Kernel symbols from `/proc/kallsyms`, read again when code loaded
//! since may be sampled.
//!
//! The kernel's own text never moves, but BPF programs (and modules) come
//! and go: a program loaded after the table was read would be named after
//! the nearest older symbol. So an address whose nearest symbol is a
//! module's or a BPF program's (a line with a `[module]` tag), or that
//! lies past the kernel image's own symbols (where loaded code lives),
//! sampled after the
//! table was read, makes the table be read again (at most once per
//! [`REREAD_EVERY`], at most [`MAX_KALLSYMS`] bytes); its name is kept
//! only once a table read after its sample named it. Reading the table
//! costs tens of milliseconds (the kernel formats every symbol), so where
//! it can be known cheaply whether code was loaded since (the highest BPF
//! program id, and /proc/modules' names and addresses: [`Generation`]), a
//! table nothing was loaded after is current for later samples too and is
//! not read again. Names are chosen as
//! blazesym chose them before (the first listed of the symbols at the
//! greatest address not above it), so kernel frames keep their names.
//!
//! BPF programs are listed as `bpf_prog_<tag>_<name>` with the `[bpf]`
//! tag; sockscope's own ([`SOCKSCOPE_PROGS`]) are marked as such
//! ([`KernelName::ours`]).

use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::monotonic_ns;

/// The most bytes of /proc/kallsyms read (about 10 MiB on a distribution
/// kernel).
pub const MAX_KALLSYMS: u64 = 64 << 20;
/// The least time between two readings.
pub const REREAD_EVERY: Duration = Duration::from_secs(1);
/// The least time between two checks of [`Generation`].
pub const CHECK_EVERY: Duration = Duration::from_millis(100);
/// The most addresses [`KernelSymbols`] keeps of one reading before it
/// starts that cache afresh.
const MAX_THIS_READING: usize = 16_384;
/// The most bytes of /proc/modules read for [`loaded_code_generation`].
const MAX_MODULES: u64 = 4 << 20;

/// The names sockscope gives its BPF programs (src/bpf/*.bpf.c), as the
/// kernel keeps them (15 characters at most).
pub const SOCKSCOPE_PROGS: &[&str] = &[
    "relay_verdict",
    "ss_cgroup_attac",
    "ss_close_turns",
    "ss_close_waits",
    "ss_data_ready",
    "ss_exec",
    "ss_exit",
    "ss_exit_tail",
    "ss_fork",
    "ss_iter_task",
    "ss_learn_unix",
    "ss_open_waits",
    "ss_recv",
    "ss_send",
    "ss_sock_state",
    "ss_ssl_read",
    "ss_ssl_read_ex",
    "ss_ssl_read_ex_",
    "ss_ssl_read_ret",
    "ss_ssl_write",
    "ss_ssl_write_ex",
    "ss_ssl_write_re",
    "ss_switch",
    "ss_sys_enter",
    "ss_sys_exit",
    "ss_tick",
    "ss_wakeup",
];

/// True for `bpf_prog_<16 hex digits>_<name>` with one of sockscope's
/// program names.
pub fn is_sockscope_prog(symbol: &str) -> bool {
    let Some(rest) = symbol.strip_prefix("bpf_prog_") else {
        return false;
    };
    let Some((tag, name)) = rest.split_at_checked(16) else {
        return false;
    };
    tag.bytes().all(|b| b.is_ascii_hexdigit())
        && name
            .strip_prefix('_')
            .is_some_and(|n| SOCKSCOPE_PROGS.contains(&n))
}

/// One symbol; its name lies in the table's arena.
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    name_at: u32,
    name_len: u32,
    /// Listed with a `[module]` tag: a module's or a BPF program's.
    loaded: bool,
    /// Listed as `[bpf]`.
    bpf: bool,
}

/// One reading of kallsyms, sorted by address (the order of the file
/// kept among equal addresses).
#[derive(Debug, Default)]
pub struct KernelTable {
    syms: Vec<Sym>,
    names: String,
    /// The highest address of the kernel image's own symbols (those with
    /// no tag): loaded code lies above it.
    image_end: u64,
}

impl KernelTable {
    /// Parses kallsyms lines, `ADDR TYPE NAME [MODULE]`; lines that do not
    /// parse, and address 0 (what an unprivileged reader sees), are left
    /// out.
    pub fn parse(bytes: &[u8]) -> KernelTable {
        let mut t = KernelTable::default();
        for line in bytes.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let mut tok = line.split_ascii_whitespace();
            let (Some(addr), Some(_ty), Some(name)) = (tok.next(), tok.next(), tok.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let tag = tok.next();
            let (Ok(name_at), Ok(name_len)) =
                (u32::try_from(t.names.len()), u32::try_from(name.len()))
            else {
                continue;
            };
            t.names.push_str(name);
            if tag.is_none() {
                t.image_end = t.image_end.max(addr);
            }
            t.syms.push(Sym {
                addr,
                name_at,
                name_len,
                loaded: tag.is_some(),
                bpf: tag == Some("[bpf]"),
            });
        }
        // Stable: among equal addresses the first listed is found.
        t.syms.sort_by_key(|s| s.addr);
        // Kept for the window's life (an agent's: days): not the doubling
        // growth's spare capacity.
        t.syms.shrink_to_fit();
        t.names.shrink_to_fit();
        t
    }

    /// The symbol naming `addr`: the first listed of those at the
    /// greatest address not above it.
    fn lookup(&self, addr: u64) -> Option<&Sym> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let at = self.syms.get(i.checked_sub(1)?)?.addr;
        let first = self.syms[..i].partition_point(|s| s.addr < at);
        self.syms.get(first)
    }

    /// Whether `addr` lies in loaded code (a module's or a BPF
    /// program's region, or past the kernel image, where programs loaded
    /// since this reading may be).
    fn in_loaded_code(&self, addr: u64) -> bool {
        addr > self.image_end || self.lookup(addr).is_some_and(|s| s.loaded)
    }

    fn name(&self, s: &Sym) -> &str {
        let at = s.name_at as usize;
        self.names.get(at..at + s.name_len as usize).unwrap_or("")
    }

    /// Symbols held.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when it holds none (kallsyms hides addresses from this user).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

/// A kernel address's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelName {
    /// The symbol, made safe to print (shared: it is handed out for every
    /// sample of its address).
    pub name: Arc<str>,
    /// One of sockscope's own BPF programs.
    pub ours: bool,
}

/// Where the table's bytes come from (/proc/kallsyms; a fixed text in
/// tests).
pub type Source = Box<dyn FnMut() -> Option<Vec<u8>> + Send>;

/// A token that changes whenever kernel code is loaded (a BPF program,
/// a module); `None` when that cannot be known (then a sample of loaded
/// code taken after the reading makes the table be read again).
pub type Generation = Box<dyn FnMut() -> Option<u64> + Send>;

/// Names kernel addresses; see the module documentation.
pub struct KernelSymbols {
    source: Source,
    every: Duration,
    generation: Generation,
    table: Option<KernelTable>,
    /// The generation taken just before the table was read.
    read_generation: Option<u64>,
    /// CLOCK_MONOTONIC when the table was read (samples' clock).
    read_mono_ns: u64,
    /// CLOCK_MONOTONIC of the last check that found the generation
    /// unchanged since the reading: samples up to it are current.
    valid_mono_ns: u64,
    read_at: Option<Instant>,
    checked_at: Option<Instant>,
    /// Address -> name (and whether it lies in loaded code), kept once
    /// known to be current.
    names: super::FastMap<u64, (Option<KernelName>, bool)>,
    /// Address -> what this reading of the table says of it (its name,
    /// whether it lies in loaded code), for the addresses `names` may not
    /// keep yet: loaded code sampled after the last check, which is named
    /// from this table until a check or a reading settles it. Emptied at
    /// each reading; bounded by [`MAX_THIS_READING`].
    this_reading: super::FastMap<u64, (Option<KernelName>, bool)>,
    /// Times the table was read.
    pub reads: u64,
}

impl Default for KernelSymbols {
    fn default() -> Self {
        Self::new()
    }
}

impl KernelSymbols {
    /// Symbols from /proc/kallsyms, read again only when code was loaded
    /// since ([`loaded_code_generation`]).
    pub fn new() -> Self {
        Self::with_source(Box::new(read_kallsyms), REREAD_EVERY)
            .with_generation(loaded_code_generation())
    }

    /// Symbols from `source`, read again at most once per `every`
    /// whenever loaded code is sampled after the reading (no
    /// [`Generation`]).
    pub fn with_source(source: Source, every: Duration) -> Self {
        Self {
            source,
            every,
            generation: Box::new(|| None),
            table: None,
            read_generation: None,
            read_mono_ns: 0,
            valid_mono_ns: 0,
            read_at: None,
            checked_at: None,
            names: Default::default(),
            this_reading: Default::default(),
            reads: 0,
        }
    }

    /// Reads again only when `generation` changed since the reading.
    pub fn with_generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    fn read(&mut self) {
        // Taken first: code loaded between the two is a change at the next
        // check (one reading too many), never a stale name.
        self.read_generation = (self.generation)();
        self.valid_mono_ns = 0;
        self.read_mono_ns = monotonic_ns();
        self.read_at = Some(Instant::now());
        self.reads += 1;
        let table = (self.source)().map(|b| KernelTable::parse(&b));
        self.table = Some(table.unwrap_or_default());
        // Loaded code may have moved: its names are looked up again.
        self.names.retain(|_, (_, loaded)| !*loaded);
        self.this_reading.clear();
    }

    /// What the table read last says of `addr`: its name and whether it
    /// lies in loaded code, looked up once per reading (two binary
    /// searches of 100,000-odd symbols each otherwise, for every frame in
    /// a module or a BPF program sampled between two checks).
    fn table_says(&mut self, addr: u64) -> Option<(Option<KernelName>, bool)> {
        if let Some(known) = self.this_reading.get(&addr) {
            return Some(known.clone());
        }
        let table = self.table.as_ref()?;
        let loaded = table.in_loaded_code(addr);
        let name = table.lookup(addr).map(|s| {
            let name = table.name(s);
            KernelName {
                ours: s.bpf && is_sockscope_prog(name),
                name: crate::text::escape(name).into(),
            }
        });
        // The rest is kept in `names` at once.
        if loaded {
            if self.this_reading.len() >= MAX_THIS_READING {
                self.this_reading.clear();
            }
            self.this_reading.insert(addr, (name.clone(), loaded));
        }
        Some((name, loaded))
    }

    /// The name of kernel address `addr`, sampled at `ts_ns`
    /// (CLOCK_MONOTONIC).
    pub fn name(&mut self, addr: u64, ts_ns: u64) -> Option<KernelName> {
        if let Some((n, _)) = self.names.get(&addr) {
            return n.clone();
        }
        if self.table.is_none() {
            self.read();
        }
        let mut current = self.read_mono_ns.max(self.valid_mono_ns) >= ts_ns;
        let (mut name, mut loaded) = self.table_says(addr)?;
        if loaded && !current {
            match self.since_reading() {
                Loaded::Nothing => current = self.valid_mono_ns >= ts_ns,
                // Asked too recently: named from this table, not kept.
                Loaded::NotAsked => {}
                Loaded::Something => {
                    if self.read_at.is_none_or(|t| t.elapsed() >= self.every) {
                        self.read();
                        current = self.read_mono_ns >= ts_ns;
                        (name, loaded) = self.table_says(addr)?;
                    }
                }
            }
        }
        // A name from a table older than the sample, for loaded code, may
        // be stale: it is not kept, so a later reading names it.
        if current || !loaded {
            self.names.insert(addr, (name.clone(), loaded));
        }
        name
    }
}

/// What was loaded since the table was read, as far as is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loaded {
    /// Nothing: the generation is the reading's.
    Nothing,
    /// Not asked: the last check was less than [`CHECK_EVERY`] ago.
    NotAsked,
    /// Something, or it cannot be known (no generation).
    Something,
}

impl KernelSymbols {
    /// Whether code was loaded since the reading (the generation checked
    /// at most once per [`CHECK_EVERY`]); if nothing was, samples taken
    /// up to now are current.
    fn since_reading(&mut self) -> Loaded {
        if self.read_generation.is_none() {
            return Loaded::Something;
        }
        if self.checked_at.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
            return Loaded::NotAsked;
        }
        self.checked_at = Some(Instant::now());
        // Before the check: code loaded after it is sampled after it.
        let now = monotonic_ns();
        if (self.generation)().is_some_and(|g| Some(g) == self.read_generation) {
            self.valid_mono_ns = now;
            Loaded::Nothing
        } else {
            Loaded::Something
        }
    }
}

/// The running kernel's [`Generation`]: the highest BPF program id (ids
/// are handed out in increasing order, so a program loaded since has a
/// higher one) and /proc/modules' names and addresses. `None` where the
/// ids cannot be listed (no CAP_SYS_ADMIN).
pub fn loaded_code_generation() -> Generation {
    let mut max_id = 0u32;
    Box::new(move || {
        loop {
            let mut next = 0u32;
            // SAFETY: libbpf writes the next id through a valid pointer.
            let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_next_id(max_id, &mut next) };
            if rc == 0 {
                max_id = next;
                continue;
            }
            // libbpf returns -errno: ENOENT past the highest id.
            if rc == -libc::ENOENT {
                break;
            }
            return None;
        }
        Some(u64::from(max_id) ^ modules_hash()?.rotate_left(32))
    })
}

/// A hash of each loaded module's name and address (0 on a kernel
/// without modules); `None` when /proc/modules cannot be read.
fn modules_hash() -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let f = match std::fs::File::open("/proc/modules") {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(0),
        Err(_) => return None,
    };
    let mut bytes = Vec::new();
    f.take(MAX_MODULES).read_to_end(&mut bytes).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for line in bytes.split(|b| *b == b'\n') {
        // `name size refs deps state address [taint]`: the counts change
        // with use, not with what is loaded.
        let mut tok = line.split(|b| *b == b' ').filter(|t| !t.is_empty());
        tok.next().hash(&mut h);
        tok.nth(4).hash(&mut h);
    }
    Some(h.finish())
}

/// Reads /proc/kallsyms, at most [`MAX_KALLSYMS`] bytes.
fn read_kallsyms() -> Option<Vec<u8>> {
    let f = std::fs::File::open("/proc/kallsyms").ok()?;
    let mut bytes = Vec::with_capacity(16 << 20);
    f.take(MAX_KALLSYMS).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const V1: &str = "ffffffff81000000 T _stext\n\
        ffffffff81000100 T schedule\n\
        ffffffff81000100 t __schedule_alias\n\
        ffffffff82000000 B _end\n\
        ffffffffa0000000 t ext4_read\t[ext4]\n\
        ffffffffc0001000 t bpf_prog_0123456789abcdef_other\t[bpf]\n";

    /// A source whose text the test changes, and a count of its reads.
    fn source(text: &Arc<Mutex<String>>) -> Source {
        let text = Arc::clone(text);
        Box::new(move || Some(text.lock().unwrap().clone().into_bytes()))
    }

    fn name(k: &mut KernelSymbols, addr: u64, ts: u64) -> Option<String> {
        k.name(addr, ts).map(|n| n.name.to_string())
    }

    #[test]
    fn names_are_chosen_as_before_and_kernel_text_is_read_once() {
        let text = Arc::new(Mutex::new(V1.to_string()));
        let mut k = KernelSymbols::with_source(source(&text), Duration::ZERO);
        // The first listed at the address, as blazesym chose.
        assert_eq!(
            name(&mut k, 0xffffffff81000180, u64::MAX).as_deref(),
            Some("schedule")
        );
        assert_eq!(
            name(&mut k, 0xffffffff81000100, u64::MAX).as_deref(),
            Some("schedule")
        );
        assert_eq!(name(&mut k, 0xffffffff80000000, u64::MAX), None);
        // Kernel text sampled after the reading needs no other.
        assert_eq!(k.reads, 1);
        assert_eq!(
            name(&mut k, 0xffffffff81000110, u64::MAX).as_deref(),
            Some("schedule")
        );
        assert_eq!(k.reads, 1);
    }

    #[test]
    fn a_program_loaded_after_the_reading_is_named_after_a_new_one() {
        let text = Arc::new(Mutex::new(V1.to_string()));
        let mut k = KernelSymbols::with_source(source(&text), Duration::ZERO);
        let prog = 0xffffffffc0001800;
        // Sampled before the reading: current.
        assert_eq!(
            name(&mut k, 0xffffffffc0001010, 0).as_deref(),
            Some("bpf_prog_0123456789abcdef_other")
        );
        assert_eq!(k.reads, 1);
        // A program loaded at 0x...1400 since; a sample in it, taken after
        // the reading, makes kallsyms be read again.
        text.lock()
            .unwrap()
            .push_str("ffffffffc0001400 t bpf_prog_fedcba9876543210_ss_sys_enter\t[bpf]\n");
        let got = k.name(prog, monotonic_ns()).unwrap();
        assert_eq!(&*got.name, "bpf_prog_fedcba9876543210_ss_sys_enter");
        assert!(got.ours);
        assert_eq!(k.reads, 2);
        // Known now: no reading.
        assert_eq!(
            name(&mut k, prog, 0).as_deref(),
            Some("bpf_prog_fedcba9876543210_ss_sys_enter")
        );
        assert_eq!(k.reads, 2);
        // Past every known program (a new pack): read again too.
        text.lock()
            .unwrap()
            .push_str("ffffffffc0200000 t bpf_prog_00000000000000aa_late\t[bpf]\n");
        assert_eq!(
            name(&mut k, 0xffffffffc0200010, monotonic_ns()).as_deref(),
            Some("bpf_prog_00000000000000aa_late")
        );
        assert_eq!(k.reads, 3);
        // Past the kernel image, with no program known there before.
        text.lock()
            .unwrap()
            .push_str("ffffffffc0400000 t bpf_prog_00000000000000bb_first\t[bpf]\n");
        let mut fresh = KernelSymbols::with_source(
            source(&Arc::new(Mutex::new(
                "ffffffff81000000 T _stext\nffffffff82000000 B _end\n".to_string(),
            ))),
            Duration::ZERO,
        );
        assert_eq!(
            name(&mut fresh, 0xffffffff81000010, 0).as_deref(),
            Some("_stext")
        );
        assert_eq!(fresh.reads, 1);
        assert_eq!(
            name(&mut fresh, 0xffffffffc0400010, monotonic_ns()).as_deref(),
            Some("_end")
        );
        assert_eq!(fresh.reads, 2, "read again for an address past the image");
        // A module's address too.
        assert_eq!(
            name(&mut k, 0xffffffffa0000010, monotonic_ns()).as_deref(),
            Some("ext4_read")
        );
        assert_eq!(k.reads, 4);
        assert_eq!(
            name(&mut k, 0xffffffffc0400010, monotonic_ns()).as_deref(),
            Some("bpf_prog_00000000000000bb_first")
        );
    }

    #[test]
    fn readings_are_rate_limited_and_stale_names_not_kept() {
        let text = Arc::new(Mutex::new(V1.to_string()));
        let mut k = KernelSymbols::with_source(source(&text), Duration::from_secs(3600));
        let prog = 0xffffffffc0001800;
        assert_eq!(
            name(&mut k, 0xffffffff81000100, 0).as_deref(),
            Some("schedule")
        );
        text.lock()
            .unwrap()
            .push_str("ffffffffc0001400 t bpf_prog_fedcba9876543210_new\t[bpf]\n");
        // Within the interval: the old table's name, not kept.
        for _ in 0..10 {
            assert_eq!(
                name(&mut k, prog, monotonic_ns()).as_deref(),
                Some("bpf_prog_0123456789abcdef_other")
            );
        }
        assert_eq!(k.reads, 1);
        assert!(!k.names.contains_key(&prog));
        // Looked up in the table once, kept for this reading only.
        assert_eq!(k.this_reading.len(), 1);
        assert!(k.this_reading.contains_key(&prog));
        // Once the interval has passed, read again and named right (the
        // old reading's answer is not used).
        k.every = Duration::ZERO;
        assert_eq!(
            name(&mut k, prog, monotonic_ns()).as_deref(),
            Some("bpf_prog_fedcba9876543210_new")
        );
        assert_eq!(k.reads, 2);
    }

    #[test]
    fn a_table_nothing_was_loaded_after_is_not_read_again() {
        let text = Arc::new(Mutex::new(V1.to_string()));
        let generation = Arc::new(Mutex::new(Some(7u64)));
        let g = Arc::clone(&generation);
        let mut k = KernelSymbols::with_source(source(&text), Duration::ZERO)
            .with_generation(Box::new(move || *g.lock().unwrap()));
        let (other, late) = (0xffffffffc0001010, 0xffffffffc0001800);
        assert_eq!(
            name(&mut k, other, 0).as_deref(),
            Some("bpf_prog_0123456789abcdef_other")
        );
        assert_eq!(k.reads, 1);
        // Loaded code sampled after the reading, nothing loaded since:
        // the table is current, the name kept, no reading.
        k.checked_at = None;
        assert_eq!(
            name(&mut k, late, monotonic_ns()).as_deref(),
            Some("bpf_prog_0123456789abcdef_other")
        );
        assert_eq!(k.reads, 1);
        assert!(k.names.contains_key(&late));
        // Checks are rate-limited: within CHECK_EVERY a later sample is
        // named from the table but not kept, and nothing is read (the
        // reading's own interval is zero here: a check not made is not a
        // change).
        let x = 0xffffffffc0001900;
        k.checked_at = Some(Instant::now());
        for _ in 0..5 {
            assert!(name(&mut k, x, monotonic_ns()).is_some());
        }
        assert!(!k.names.contains_key(&x));
        assert_eq!(k.reads, 1);
        // A program loaded since changes the generation: read again, and
        // named after the new one.
        k.checked_at = None;
        text.lock()
            .unwrap()
            .push_str("ffffffffc0001400 t bpf_prog_fedcba9876543210_new\t[bpf]\n");
        *generation.lock().unwrap() = Some(8);
        k.names.clear();
        assert_eq!(
            name(&mut k, late, monotonic_ns()).as_deref(),
            Some("bpf_prog_fedcba9876543210_new")
        );
        assert_eq!(k.reads, 2);
        // An unknown generation (no permission): read as without one.
        *generation.lock().unwrap() = None;
        k.checked_at = None;
        assert!(name(&mut k, 0xffffffffc0001a00, monotonic_ns()).is_some());
        assert_eq!(k.reads, 3);
        k.checked_at = None;
        assert!(name(&mut k, 0xffffffffc0001b00, monotonic_ns()).is_some());
        assert_eq!(k.reads, 4, "never current without a known generation");
    }

    #[test]
    fn the_running_kernel_s_generation_is_steady_and_moves_with_a_new_program() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root: listing BPF programs must be tried"
            );
            eprintln!("skipped: listing and loading BPF programs needs root");
            return;
        }
        let mut g = loaded_code_generation();
        let a = g().expect("root lists BPF program ids");
        assert_eq!(g(), Some(a), "nothing loaded between two checks");
        // `r0 = 0; exit`, as a socket filter: the least program there is.
        let insns: [u64; 2] = [0xb7, 0x95];
        // SAFETY: two valid instructions, NUL-terminated strings, no opts.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_load(
                libbpf_rs::libbpf_sys::BPF_PROG_TYPE_SOCKET_FILTER,
                c"ss_gen_test".as_ptr(),
                c"GPL".as_ptr(),
                insns.as_ptr().cast(),
                2,
                std::ptr::null_mut(),
            )
        };
        assert!(fd >= 0, "loading a socket filter: {fd}");
        let b = g();
        // SAFETY: fd was returned by bpf_prog_load above and is ours.
        unsafe { libc::close(fd) };
        assert!(
            b.is_some() && b != Some(a),
            "a program loaded since moves it"
        );
    }

    #[test]
    fn sockscope_programs_are_recognized_by_name_and_the_list_is_whole() {
        assert!(is_sockscope_prog("bpf_prog_0123456789abcdef_ss_sys_enter"));
        assert!(!is_sockscope_prog("bpf_prog_0123456789abcdef_sd_fw_egress"));
        assert!(!is_sockscope_prog("bpf_prog_0123456789abcdeX_ss_tick"));
        assert!(!is_sockscope_prog("ss_tick"));
        // Every program of src/bpf, by the name the kernel keeps.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bpf");
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if !p.to_string_lossy().ends_with(".bpf.c") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let mut lines = text.lines();
            while let Some(l) = lines.next() {
                if !l.starts_with("SEC(\"") || l.contains(".maps") || l.contains("license") {
                    continue;
                }
                let def = lines.next().unwrap();
                let wrapped = ["BPF_PROG(", "BPF_UPROBE(", "BPF_URETPROBE("]
                    .iter()
                    .find_map(|w| def.split_once(w));
                let name = match wrapped {
                    Some((_, r)) => r.split(',').next().unwrap(),
                    None => def.split('(').next().unwrap().rsplit(' ').next().unwrap(),
                };
                let kept: String = name.trim().chars().take(15).collect();
                found.push(kept);
            }
        }
        found.sort();
        found.dedup();
        assert!(found.len() >= 10, "{found:?}");
        assert_eq!(
            found, SOCKSCOPE_PROGS,
            "src/bpf's programs and SOCKSCOPE_PROGS"
        );
    }

    #[test]
    fn hostile_lines_parse_to_fewer_symbols_never_a_panic() {
        let t =
            KernelTable::parse(b"zz T x\n0 T zero\nffff\nffffffff81000000 T a b c d\n\xff\xfe\n");
        assert_eq!(t.len(), 1);
        assert_eq!(t.lookup(0xffffffff81000001).map(|s| t.name(s)), Some("a"));
    }
}
