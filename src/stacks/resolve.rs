//! A sample's frames, unwound and named while its process lives: the
//! per-process modules and unwinders, the shared module and name caches,
//! and the CPU time spent in each half.

use std::time::{Duration, Instant};

use super::modules::{MappingKind, ModuleCache, ProcessMaps};
use super::sample::RawSample;
use super::symbolize::Symbolizer;
use super::unwind::{ProcessUnwinder, Unwound};

pub use super::symbolize::Frame;

/// Functions that start a stack: reaching one means the user stack was
/// unwound to its outermost frame even if unwinding stopped there.
const OUTERMOST: &[&str] = &[
    "_start",
    "__clone3",
    "clone3",
    "__clone",
    "clone",
    "start_thread",
];

/// A sample's frames, innermost first: kernel frames, then user frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The frames.
    pub frames: Vec<Frame>,
    /// True when user unwinding reached the outermost frame (`_start`, a
    /// thread's start routine); false when it stopped early, or when the
    /// sample has no user registers.
    pub complete: bool,
}

/// The least time between two readings of a process's maps for frames
/// found outside them (a frame-pointer walk through code that keeps no
/// frame pointer finds such "frames" in every sample).
const STRAY_REREAD: Duration = Duration::from_secs(1);

/// One process: its mappings and its unwinder over them.
struct Process {
    maps: ProcessMaps,
    unwinder: ProcessUnwinder,
    read_at: Instant,
}

impl Process {
    fn read(modules: &mut ModuleCache, pid: u32) -> Self {
        let maps = modules.process(pid).unwrap_or_default();
        let unwinder = ProcessUnwinder::new(&maps);
        Self {
            maps,
            unwinder,
            read_at: Instant::now(),
        }
    }

    fn unwind(&mut self, regs: super::sample::UserRegs, stack: &[u8]) -> Unwound {
        self.unwinder.unwind(&self.maps, regs, stack)
    }
}

/// A bound on what a resolver keeps ([`Resolver::with_budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most bytes its modules hold: their unwind sections and FDE
    /// tables, and what naming them holds (symbol tables and their index,
    /// private copies). Past it, the least recently sampled modules are
    /// dropped, down to three quarters of it, and parsed again if sampled
    /// again; those sampled in the last [`HOT_CHECKS`] checks are kept
    /// unless the modules hold more than one and a half times the budget
    /// (a node whose hot modules alone exceed the budget would otherwise
    /// parse them again at every check).
    pub module_bytes: u64,
    /// The most function names cached.
    pub names: usize,
}

/// How many of the last budget checks a module sampled in is hot (kept
/// while the modules hold at most one and a half times the budget): with
/// a check every 2 s, what was sampled in the last 30 s.
pub const HOT_CHECKS: usize = 15;

/// Unwinds and symbolizes samples; see the module documentation.
pub struct Resolver {
    modules: ModuleCache,
    processes: super::FastMap<u32, Process>,
    symbolizer: Symbolizer,
    budget: Option<Budget>,
    /// Modules dropped to keep to the budget.
    evicted: u64,
    /// The module clock at the last [`HOT_CHECKS`] checks of the budget,
    /// oldest first.
    checked_at: std::collections::VecDeque<u64>,
    unwind_ns: u64,
    symbolize_ns: u64,
}

impl Default for Resolver {
    fn default() -> Self {
        Self::new()
    }
}

impl Resolver {
    /// A resolver with empty caches, bounded only by what is sampled
    /// (a run's own length).
    pub fn new() -> Self {
        Self {
            modules: ModuleCache::default(),
            processes: Default::default(),
            symbolizer: Symbolizer::new(),
            budget: None,
            evicted: 0,
            checked_at: std::collections::VecDeque::new(),
            unwind_ns: 0,
            symbolize_ns: 0,
        }
    }

    /// A resolver whose caches keep to `budget` (a node agent, which
    /// samples every process on the machine for days).
    pub fn with_budget(budget: Budget) -> Self {
        Self {
            // A private copy of a module someone else owns is held whole:
            // none larger than half the budget.
            symbolizer: Symbolizer::bounded(budget.names, budget.module_bytes / 2),
            budget: Some(budget),
            ..Self::new()
        }
    }

    /// Its budget, if bounded.
    pub fn budget(&self) -> Option<Budget> {
        self.budget
    }

    /// How many modules were dropped to keep to the budget.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The bytes the cached modules hold ([`Budget::module_bytes`]).
    pub fn held(&self) -> u64 {
        self.modules.held()
    }

    /// Drops the least recently sampled modules, and the processes that
    /// map them (read again when next sampled), once the modules hold more
    /// than the budget ([`Budget::module_bytes`] says which are kept).
    /// Called every few seconds, not per sample: what was sampled since
    /// the last call is what the node runs now.
    pub fn keep_to_budget(&mut self) {
        let Some(b) = self.budget else { return };
        let hot_since = self.checked_at.front().copied().unwrap_or(0);
        if self.checked_at.len() >= HOT_CHECKS {
            self.checked_at.pop_front();
        }
        self.checked_at.push_back(self.modules.clock());
        if self.modules.held() <= b.module_bytes {
            return;
        }
        let gone = self.modules.evict_to(
            b.module_bytes / 4 * 3,
            hot_since,
            b.module_bytes.saturating_add(b.module_bytes / 2),
        );
        if gone.is_empty() {
            return;
        }
        self.evicted += gone.len() as u64;
        self.processes.retain(|_, p| !p.maps.maps_any(&gone));
        let modules = &self.modules;
        self.symbolizer.retain_modules(&|k| modules.contains(k));
    }

    /// Unwinds and names `s` now, while its process still exists (its
    /// modules are read through /proc/PID).
    pub fn resolve(&mut self, s: &RawSample) -> Resolved {
        self.modules.tick();
        let t0 = thread_cpu_ns();
        self.symbolizer.begin_sample();
        let mut frames = self.symbolizer.kernel(&s.kernel, s.ts_ns);
        let t1 = thread_cpu_ns();
        self.symbolize_ns += t1.saturating_sub(t0);
        let Some(regs) = s.user_regs else {
            return Resolved {
                frames,
                complete: false,
            };
        };

        let unwound = self.unwind(s, regs);
        let t2 = thread_cpu_ns();
        self.unwind_ns += t2.saturating_sub(t1);

        let proc = &self.processes[&s.pid];
        // A return address in no executable mapping was made up (a frame
        // pointer that was not one): the walk ends before it.
        let mut stray = false;
        for (i, f) in unwound.frames.iter().enumerate() {
            frames.push(match proc.maps.find(f.lookup) {
                Some(m) => {
                    if let MappingKind::File(file) = &m.kind {
                        self.modules.touch(file);
                    }
                    self.symbolizer.user(s.pid, m, f.lookup)
                }
                None if i == 0 => Frame {
                    name: "[unknown]".into(),
                    module: "[unknown]".into(),
                    kernel: false,
                    symbolized: false,
                },
                None => {
                    stray = true;
                    break;
                }
            });
        }
        let outermost = frames
            .last()
            .filter(|f| !f.kernel && f.symbolized)
            .is_some_and(|f| OUTERMOST.contains(&&*f.name));
        self.symbolize_ns += thread_cpu_ns().saturating_sub(t2);
        Resolved {
            frames,
            complete: !stray && (unwound.ended || outermost),
        }
    }

    /// Unwinds the user stack, reading the process's maps again (once)
    /// when an address lies outside every module known (dlopen, exec): at
    /// once for the sampled address, at most once a second for a return
    /// address.
    fn unwind(&mut self, s: &RawSample, regs: super::sample::UserRegs) -> Unwound {
        let mut reread = false;
        let known = self
            .processes
            .get(&s.pid)
            .is_some_and(|p| p.maps.find(regs.ip).is_some());
        if !known {
            self.processes
                .insert(s.pid, Process::read(&mut self.modules, s.pid));
            reread = true;
        }
        let proc = self.processes.get_mut(&s.pid).expect("inserted above");
        let unwound = proc.unwind(regs, &s.user_stack);
        let stray = unwound
            .frames
            .iter()
            .any(|f| proc.maps.find(f.lookup).is_none());
        if !stray || reread || proc.read_at.elapsed() < STRAY_REREAD {
            return unwound;
        }
        let proc = Process::read(&mut self.modules, s.pid);
        self.processes.insert(s.pid, proc);
        let proc = self.processes.get_mut(&s.pid).expect("inserted above");
        proc.unwind(regs, &s.user_stack)
    }

    /// Drops what was kept for process `pid` (its maps, unwinder, perf
    /// map) and the modules no other process maps.
    pub fn process_gone(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.symbolizer.process_gone(pid);
        if self.modules.prune() {
            let modules = &self.modules;
            self.symbolizer.retain_modules(&|k| modules.contains(k));
        }
    }

    /// Per module path: frames that got no name, and what would name them
    /// (`apt install <pkg>-dbgsym`, an unstripped build, ...).
    pub fn unsymbolized(&self) -> Vec<(String, u64, String)> {
        self.symbolizer.unsymbolized()
    }

    /// What naming cut short (a perf map past its bound), for the
    /// section's notes.
    pub fn notes(&self) -> Vec<String> {
        self.symbolizer.notes()
    }

    /// This thread's CPU time spent unwinding and symbolizing, in ns.
    pub fn cost(&self) -> (u64, u64) {
        (self.unwind_ns, self.symbolize_ns)
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::unix::fs::FileExt as _;

    use super::super::sample::{SampleKind, UserRegs};
    use super::*;

    /// Opening /proc/PID/map_files needs root (CAP_SYS_ADMIN): skip with
    /// a reason outside CI, fail under CI=true.
    fn root_or_skip(test: &str) -> bool {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: CI=true but not root"
        );
        eprintln!("SKIP {test}: not root (map_files needs CAP_SYS_ADMIN)");
        false
    }

    /// Our own stack from `sp` to the end of its mapping (at most 1 MiB).
    fn own_stack(sp: u64) -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let end = maps
            .lines()
            .filter_map(super::super::modules::parse_maps_line)
            .find(|m| m.start <= sp && sp < m.end)
            .expect("sp is mapped")
            .end;
        let mut buf = vec![0u8; (end - sp).min(1 << 20) as usize];
        let mem = std::fs::File::open("/proc/self/mem").unwrap();
        mem.read_exact_at(&mut buf, sp).unwrap();
        buf
    }

    fn sample(regs: UserRegs, stack: Vec<u8>, kernel: Vec<u64>) -> RawSample {
        RawSample {
            kind: SampleKind::OnCpu,
            pid: std::process::id(),
            tid: 0,
            comm: [0; 16],
            ts_ns: 0,
            kernel,
            user_regs: Some(regs),
            user_stack: stack,
            syscall: None,
            turn: 0,
            span_ns: (0, 0),
        }
    }

    #[inline(never)]
    fn chain_leaf() -> RawSample {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers, touches no memory.
        unsafe {
            std::arch::asm!(
                "lea {0}, [rip]", "mov {1}, rsp", "mov {2}, rbp",
                out(reg) ip, out(reg) sp, out(reg) bp,
                options(nostack, nomem, preserves_flags),
            );
        }
        sample(UserRegs { ip, sp, bp }, own_stack(sp), Vec::new())
    }

    #[inline(never)]
    fn chain_middle() -> RawSample {
        let s = chain_leaf();
        std::hint::black_box(&s);
        s
    }

    #[inline(never)]
    fn chain_outer() -> RawSample {
        let s = chain_middle();
        std::hint::black_box(&s);
        s
    }

    fn position(r: &Resolved, needle: &str) -> usize {
        r.frames
            .iter()
            .position(|f| f.name.contains(needle))
            .unwrap_or_else(|| panic!("no frame {needle} in {:#?}", r.frames))
    }

    #[test]
    fn own_stack_unwinds_through_the_named_chain_to_the_thread_start() {
        if !root_or_skip("own_stack_unwinds_through_the_named_chain_to_the_thread_start") {
            return;
        }
        let s = chain_outer();
        let mut r = Resolver::new();
        let got = r.resolve(&s);
        let (leaf, middle, outer) = (
            position(&got, "chain_leaf"),
            position(&got, "chain_middle"),
            position(&got, "chain_outer"),
        );
        assert_eq!(leaf, 0, "{:#?}", got.frames);
        assert!(leaf < middle && middle < outer, "{:#?}", got.frames);
        let test_fn = position(&got, "own_stack_unwinds_through_the_named_chain");
        assert!(outer < test_fn);
        // The test harness's thread runs it: its start routine is reached.
        position(&got, "thread_start");
        assert!(got.complete, "{:#?}", got.frames);
        assert!(got.frames.iter().all(|f| !f.kernel));
        let (unwind_ns, sym_ns) = r.cost();
        assert!(unwind_ns > 0 && sym_ns > 0);
    }

    #[test]
    fn a_new_address_in_a_function_already_named_is_named_from_its_extent() {
        if !root_or_skip("a_new_address_in_a_function_already_named_is_named_from_its_extent") {
            return;
        }
        let s = chain_outer();
        let mut r = Resolver::new();
        let got = r.resolve(&s);
        let leaf = &got.frames[position(&got, "chain_leaf")];
        let ip = s.user_regs.expect("user registers").ip;
        let before = r.symbolizer.lookups();
        assert!(before > 0);
        // Another instruction of chain_leaf (the one before the sampled
        // address): a new address, but in a function named already.
        let m = r.processes[&s.pid].maps.find(ip - 1).expect("mapped");
        let again = r.symbolizer.user(s.pid, m, ip - 1);
        assert_eq!(again.name, leaf.name);
        assert_eq!(r.symbolizer.lookups(), before, "named without blazesym");
        // A function never sampled is looked up.
        let other = Resolver::keep_to_budget as fn(&mut Resolver) as usize as u64;
        let m = r.processes[&s.pid].maps.find(other).expect("mapped");
        let named = r.symbolizer.user(s.pid, m, other);
        assert!(named.name.contains("keep_to_budget"), "{named:?}");
        assert_eq!(r.symbolizer.lookups(), before + 1);
    }

    #[test]
    fn a_stack_cut_short_unwinds_honestly_incomplete() {
        if !root_or_skip("a_stack_cut_short_unwinds_honestly_incomplete") {
            return;
        }
        let mut s = chain_outer();
        s.user_stack.truncate(64);
        let got = Resolver::new().resolve(&s);
        assert!(!got.complete, "{:#?}", got.frames);
        assert!(got.frames[0].name.contains("chain_leaf"));
        assert!(!got.frames.iter().any(|f| f.name.contains("thread_start")));
    }

    #[test]
    fn a_budget_drops_the_least_recently_sampled_modules_and_reads_them_again() {
        if !root_or_skip("a_budget_drops_the_least_recently_sampled_modules_and_reads_them_again") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
        let (base, _f) = map_exec(dir.path(), "other.bin", &garbage);
        let elsewhere = || {
            let regs = UserRegs {
                ip: base + 0x10,
                sp: 0x7000_0000,
                bp: 0x7000_0010,
            };
            sample(regs, vec![0xffu8; 256], Vec::new())
        };
        let mut r = Resolver::with_budget(Budget {
            module_bytes: 1,
            names: 4,
        });
        let first = r.resolve(&chain_outer());
        assert_eq!(position(&first, "chain_leaf"), 0);
        // The last sample's own modules are spared, however much they hold.
        r.keep_to_budget();
        assert_eq!(r.evicted(), 0);
        let held = r.held();
        assert!(held > 1, "the test binary's unwind and symbol data: {held}");
        // A sample elsewhere makes them the least recently used: dropped,
        // with the process that maps them.
        r.resolve(&elsewhere());
        r.keep_to_budget();
        assert!(r.evicted() >= 1);
        assert!(r.held() < held, "{} after, {held} before", r.held());
        // Sampled again, they are read again: the same frames.
        let again = r.resolve(&chain_outer());
        assert_eq!(position(&again, "chain_leaf"), 0);
        assert!(position(&again, "chain_middle") < position(&again, "chain_outer"));
        assert!(again.complete, "{:#?}", again.frames);
        // Over a budget, but within one and a half times it: the modules
        // sampled in the last checks are kept, and dropped once the checks
        // since they were last sampled are HOT_CHECKS.
        let budget = held / 4 * 3;
        let mut r = Resolver::with_budget(Budget {
            module_bytes: budget,
            names: 4,
        });
        r.resolve(&chain_outer());
        r.keep_to_budget();
        r.resolve(&elsewhere());
        r.resolve(&elsewhere());
        assert!(r.held() > budget);
        r.keep_to_budget();
        assert_eq!(r.evicted(), 0, "sampled since the last check: kept");
        for _ in 1..HOT_CHECKS {
            r.resolve(&elsewhere());
            r.keep_to_budget();
            assert_eq!(r.evicted(), 0, "sampled in the last checks: kept");
        }
        r.resolve(&elsewhere());
        r.keep_to_budget();
        assert!(r.evicted() >= 1, "cold by now: dropped");
        assert!(r.held() <= budget / 4 * 3, "{} of {budget}", r.held());
        // Unbounded, nothing is ever dropped.
        let mut unbounded = Resolver::new();
        unbounded.resolve(&chain_outer());
        unbounded.resolve(&elsewhere());
        unbounded.keep_to_budget();
        assert_eq!(unbounded.evicted(), 0);
        assert!(unbounded.held() >= held);
    }

    /// Maps `bytes` executable in this process, as a file in a temp dir.
    fn map_exec(dir: &std::path::Path, name: &str, bytes: &[u8]) -> (u64, std::fs::File) {
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: a fresh private read+exec mapping of an open file; it is
        // never unmapped (the test process ends soon) and never executed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.len(),
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        (p as u64, f)
    }

    #[test]
    fn garbage_and_truncated_modules_give_module_frames() {
        if !root_or_skip("garbage_and_truncated_modules_give_module_frames") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let garbage: Vec<u8> = (0..8192u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let mut truncated = exe[..65536.min(exe.len())].to_vec();
        // A section header table said to lie far past the end.
        truncated[0x28..0x30].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let mut r = Resolver::new();
        for (name, bytes) in [("garbage.bin", &garbage), ("truncated.so", &truncated)] {
            let (base, _f) = map_exec(dir.path(), name, bytes);
            let stack = vec![0xffu8; 256];
            let regs = UserRegs {
                ip: base + 0x10,
                sp: 0x7000_0000,
                bp: 0x7000_0010,
            };
            let got = r.resolve(&sample(regs, stack, Vec::new()));
            let first = &got.frames[0];
            assert_eq!(&*first.module, name);
            assert!(!first.symbolized);
            // No FDE to name a function by: the module, as one frame.
            assert_eq!(first.name.to_string(), format!("[{name}]"), "{first:?}");
        }
        let missing = r.unsymbolized();
        let garbage_note = missing
            .iter()
            .find(|(p, _, _)| p.ends_with("garbage.bin"))
            .expect("the garbage module is listed");
        assert!(garbage_note.1 >= 1);
        assert!(garbage_note.2.contains("not an ELF"), "{garbage_note:?}");
        assert!(missing.iter().any(|(p, _, _)| p.ends_with("truncated.so")));
    }
}
