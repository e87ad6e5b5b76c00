//! A sample's frames, unwound and named while its process lives: the
//! per-process modules and unwinders, the shared module and name caches,
//! and the CPU time spent in each half.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::modules::{ModuleCache, ProcessMaps};
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

/// Unwinds and symbolizes samples; see the module documentation.
pub struct Resolver {
    modules: ModuleCache,
    processes: HashMap<u32, Process>,
    symbolizer: Symbolizer,
    unwind_ns: u64,
    symbolize_ns: u64,
}

impl Default for Resolver {
    fn default() -> Self {
        Self::new()
    }
}

impl Resolver {
    /// A resolver with empty caches.
    pub fn new() -> Self {
        Self {
            modules: ModuleCache::default(),
            processes: HashMap::new(),
            symbolizer: Symbolizer::new(),
            unwind_ns: 0,
            symbolize_ns: 0,
        }
    }

    /// Unwinds and names `s` now, while its process still exists (its
    /// modules are read through /proc/PID).
    pub fn resolve(&mut self, s: &RawSample) -> Resolved {
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
                Some(m) => self.symbolizer.user(s.pid, m, f.lookup),
                None if i == 0 => Frame {
                    name: "[unknown]".to_string(),
                    module: "[unknown]".to_string(),
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
            .is_some_and(|f| OUTERMOST.contains(&f.name.as_str()));
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
            assert_eq!(first.module, name);
            assert!(!first.symbolized);
            // No FDE to name a function by: the module, as one frame.
            assert_eq!(first.name, format!("[{name}]"), "{first:?}");
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
