//! User unwinding and symbolization of real processes (no BPF): a C
//! program blocked in nanosleep under main -> middle -> leaf, built with
//! and without frame pointers and stripped, is stopped with ptrace, and a
//! `RawSample` is made of its registers and its stack read from
//! /proc/PID/mem, as the sampler copies them; and kernel addresses from
//! /proc/kallsyms.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sockscope::stacks::sample::{RawSample, SampleKind, UserRegs};
use sockscope::stacks::{Resolved, Resolver};

/// clock_nanosleep's number on x86_64 (glibc's nanosleep calls it).
const SYS_CLOCK_NANOSLEEP: &str = "230";

/// Compiles tests/workload/stack_chain.c with `flags` into `dir/name`.
fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    compile_src("stack_chain.c", dir, name, flags)
}

/// Compiles tests/workload/`src` with `flags` into `dir/name`.
fn compile_src(src: &str, dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workload")
        .join(src);
    let st = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("running cc (make deps installs gcc)");
    assert!(st.success(), "compiling {}", src.display());
    out
}

/// The fixture, running; killed and reaped on drop.
struct Chain {
    child: Child,
    pid: u32,
    attached: bool,
}

impl Chain {
    /// Starts `bin` and waits until it blocks in clock_nanosleep.
    fn start(bin: &Path) -> Self {
        let mut child = Command::new(bin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        let pid = child.id();
        let blocked = common::procs::wait_for(Duration::from_secs(20), || {
            let s = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
            (s.split_whitespace().next() == Some(SYS_CLOCK_NANOSLEEP)).then_some(())
        });
        assert!(blocked.is_some(), "the fixture never blocked in nanosleep");
        Self {
            child,
            pid,
            attached: false,
        }
    }

    /// Stops it with ptrace and makes the sample a sampler would: its user
    /// registers and its stack from sp to the end of the stack mapping.
    fn sample(&mut self) -> RawSample {
        let pid = self.pid as libc::pid_t;
        // SAFETY: ptrace and waitpid on our own child, with valid pointers.
        let regs = unsafe {
            assert_eq!(libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0), 0);
            self.attached = true;
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, libc::__WALL), pid);
            assert!(libc::WIFSTOPPED(status));
            let mut regs: libc::user_regs_struct = std::mem::zeroed();
            assert_eq!(libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs), 0);
            regs
        };
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let end = maps
            .lines()
            .filter_map(sockscope::stacks::modules::parse_maps_line)
            .find(|m| m.start <= regs.rsp && regs.rsp < m.end)
            .expect("sp is mapped")
            .end;
        let mut stack = vec![0u8; (end - regs.rsp).min(64 << 10) as usize];
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
        mem.read_exact_at(&mut stack, regs.rsp).unwrap();
        RawSample {
            kind: SampleKind::OffCpu {
                weight_ns: 1,
                state: 'S',
                open: false,
            },
            pid: self.pid,
            tid: self.pid,
            comm: [0; 16],
            ts_ns: 0,
            kernel: Vec::new(),
            user_regs: Some(UserRegs {
                ip: regs.rip,
                sp: regs.rsp,
                bp: regs.rbp,
            }),
            user_stack: stack,
            syscall: Some(230),
            turn: 0,
            span_ns: (0, 0),
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if self.attached {
            // SAFETY: detaching our own traced child.
            unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid as libc::pid_t, 0, 0) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn names(r: &Resolved) -> Vec<&str> {
    r.frames.iter().map(|f| &*f.name).collect()
}

/// Whether libc's debug file (Debian's libc6-dbg) is installed: it names
/// libc's local functions, such as `__libc_start_call_main`.
fn libc_debug_installed() -> bool {
    let out = Command::new("readelf")
        .args(["-n", "/lib/x86_64-linux-gnu/libc.so.6"])
        .output()
        .expect("readelf (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(id) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
    else {
        return false;
    };
    Path::new(&format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ))
    .exists()
}

/// leaf, middle, main in a row under libc's nanosleep, then libc's start
/// (named when its debug file is installed), and the stack complete.
fn assert_chain(r: &Resolved, leaf: &str, middle: &str, main: &str) {
    let n = names(r);
    let at = n
        .iter()
        .position(|f| *f == leaf)
        .unwrap_or_else(|| panic!("no {leaf}: {n:?}"));
    assert_eq!(&n[at..at + 3], &[leaf, middle, main], "{n:?}");
    assert!(
        n[..at].iter().any(|f| f.contains("nanosleep")),
        "libc's nanosleep beneath leaf: {n:?}"
    );
    if libc_debug_installed() {
        assert_eq!(n[at + 3], "__libc_start_call_main", "{n:?}");
    } else {
        assert!(n[at + 3].starts_with("libc.so.6+0x"), "{n:?}");
    }
    assert!(r.complete, "unwinding reached _start: {n:?}");
    assert!(r.frames.iter().all(|f| !f.kernel));
}

fn resolves_to_main(test: &str, flags: &[&str]) {
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let bin = compile(&dir, "stack_chain", flags);
    let mut chain = Chain::start(&bin);
    let s = chain.sample();
    let mut r = Resolver::new();
    let cold = r.resolve(&s);
    eprintln!("{test}: {:?}", names(&cold));
    assert_chain(&cold, "leaf", "middle", "main");
    let top = &cold.frames[cold.frames.iter().position(|f| &*f.name == "leaf").unwrap()];
    assert_eq!(&*top.module, "stack_chain");
    assert!(top.symbolized);
    // Resolved again from the caches: the same frames.
    assert_eq!(r.resolve(&s), cold);
}

#[test]
fn a_build_without_frame_pointers_unwinds_to_main_with_names() {
    resolves_to_main(
        "a_build_without_frame_pointers_unwinds_to_main_with_names",
        &["-O2", "-fomit-frame-pointer"],
    );
}

#[test]
fn a_build_with_frame_pointers_unwinds_to_main_with_names() {
    resolves_to_main(
        "a_build_with_frame_pointers_unwinds_to_main_with_names",
        &["-O2", "-fno-omit-frame-pointer"],
    );
}

#[test]
fn a_stripped_build_gives_module_offsets_and_says_what_would_name_them() {
    let test = "a_stripped_build_gives_module_offsets_and_says_what_would_name_them";
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let bin = compile(&dir, "stack_chain", &["-O2", "-fomit-frame-pointer"]);
    let stripped = strip(&bin, &dir, "chain_stripped");
    let mut chain = Chain::start(&stripped);
    let s = chain.sample();
    let mut r = Resolver::new();
    let got = r.resolve(&s);
    let n = names(&got);
    let ours: Vec<_> = got
        .frames
        .iter()
        .filter(|f| &*f.module == "chain_stripped")
        .collect();
    // leaf, middle, main and _start, none named.
    assert!(ours.len() >= 4, "{n:?}");
    for f in &ours {
        assert!(!f.symbolized, "{f:?}");
        assert!(f.name.starts_with("chain_stripped+0x"), "{f:?}");
    }
    assert!(
        n.iter().any(|f| f.contains("nanosleep")),
        "libc still named: {n:?}"
    );
    assert!(got.complete, "{n:?}");
    let notes = r.unsymbolized();
    let note = notes
        .iter()
        .find(|(p, _, _)| p.ends_with("/chain_stripped"))
        .unwrap_or_else(|| panic!("no note for the stripped module: {notes:?}"));
    assert_eq!(note.1, ours.len() as u64);
    assert!(note.2.contains("unstripped build"), "{note:?}");
    drop(chain);
    r.process_gone(s.pid);
}

/// `bin` stripped into `dir/name`.
fn strip(bin: &Path, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let st = Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(bin)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

/// The address `nm` gives function `name` in `bin`.
fn symbol_address(bin: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(bin).output().expect("nm (binutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("no {name} in {}", bin.display()))
}

#[test]
fn a_stripped_function_is_one_frame_named_after_its_fde() {
    let test = "a_stripped_function_is_one_frame_named_after_its_fde";
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let bin = compile(&dir, "stack_chain", &["-O2", "-fomit-frame-pointer"]);
    let want: Vec<String> = ["leaf", "middle", "main"]
        .iter()
        .map(|f| format!("chain_stripped+0x{:x}", symbol_address(&bin, f)))
        .collect();
    let stripped = strip(&bin, &dir, "chain_stripped");
    let mut chain = Chain::start(&stripped);
    let s = chain.sample();
    let mut r = Resolver::new();
    let got = r.resolve(&s);
    let n = names(&got);
    // Each function's frame is named after its first address (where its
    // FDE starts, as nm names it in the unstripped build), not after the
    // return address inside it: every sample in one function adds up.
    let at = n
        .iter()
        .position(|f| *f == want[0])
        .unwrap_or_else(|| panic!("no {}: {n:?}", want[0]));
    assert_eq!(&n[at..at + 3], &want[..], "{n:?}");
    assert!(got.complete, "{n:?}");
}

#[test]
fn code_without_cfi_ends_the_walk_instead_of_inventing_frames() {
    let test = "code_without_cfi_ends_the_walk_instead_of_inventing_frames";
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let flags = [
        "-O2",
        "-fomit-frame-pointer",
        "-fno-asynchronous-unwind-tables",
    ];
    let bin = compile_src("no_cfi.c", &dir, "no_cfi", &flags);
    let stripped = strip(&bin, &dir, "no_cfi_stripped");
    for (bin, leaf) in [(&bin, "leaf"), (&stripped, "[no_cfi_stripped]")] {
        let mut chain = Chain::start(bin);
        let s = chain.sample();
        let got = Resolver::new().resolve(&s);
        let n = names(&got);
        eprintln!("{test}: {n:?}");
        // libc's nanosleep (its CFI unwinds it) returns into leaf, which
        // has none: the walk ends there. A frame-pointer walk would have
        // read middle's decoy frame and made up 0x101b46a7.
        assert!(n.iter().any(|f| f.contains("nanosleep")), "{n:?}");
        assert_eq!(n.last(), Some(&leaf), "{n:?}");
        assert!(
            !n.iter()
                .any(|f| f.contains("unknown") || f.contains("101b46a7")),
            "{n:?}"
        );
        assert!(!got.complete, "{n:?}");
    }
}

#[test]
fn a_module_owned_by_another_user_is_named_from_a_private_copy() {
    let test = "a_module_owned_by_another_user_is_named_from_a_private_copy";
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let bin = compile(&dir, "stack_chain", &["-O2", "-fomit-frame-pointer"]);
    // Its owner could truncate it under a mapping of ours (SIGBUS).
    std::os::unix::fs::chown(&bin, Some(65534), Some(65534)).unwrap();
    let mut chain = Chain::start(&bin);
    let s = chain.sample();
    let mut r = Resolver::new();
    let got = r.resolve(&s);
    assert_chain(&got, "leaf", "middle", "main");
    // The names came from a sealed memfd copy, which we now hold.
    let copies = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("/memfd:sockscope-module"))
        .count();
    assert!(copies >= 1, "no private copy held");
}

/// Text symbols of /proc/kallsyms whose address no other symbol shares.
fn unique_kernel_symbols(wanted: &[&str]) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut count = std::collections::HashMap::new();
    let mut syms = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let addr = u64::from_str_radix(f[0], 16).unwrap();
        *count.entry(addr).or_insert(0) += 1;
        if matches!(f[1], "T" | "t") && f.len() == 3 && wanted.contains(&f[2]) {
            syms.push((addr, f[2].to_string()));
        }
    }
    syms.retain(|(a, _)| count[a] == 1 && *a != 0);
    syms
}

#[test]
fn kernel_addresses_resolve_to_their_kallsyms_names() {
    if !common::require_root("kernel_addresses_resolve_to_their_kallsyms_names") {
        return;
    }
    let syms = unique_kernel_symbols(&[
        "schedule",
        "do_nanosleep",
        "hrtimer_nanosleep",
        "do_syscall_64",
    ]);
    assert!(
        syms.len() >= 2,
        "kallsyms shows addresses to root: {syms:?}"
    );
    let s = RawSample {
        kind: SampleKind::OnCpu,
        pid: std::process::id(),
        tid: 0,
        comm: [0; 16],
        ts_ns: 0,
        // Return addresses point inside their functions.
        kernel: syms.iter().map(|(a, _)| a + 1).collect(),
        user_regs: None,
        user_stack: Vec::new(),
        syscall: None,
        turn: 0,
        span_ns: (0, 0),
    };
    let got = Resolver::new().resolve(&s);
    assert_eq!(got.frames.len(), syms.len());
    for (f, (_, name)) in got.frames.iter().zip(&syms) {
        assert_eq!(&*f.name, name);
        assert_eq!(&*f.module, "[kernel]");
        assert!(f.kernel && f.symbolized);
    }
    assert!(!got.complete, "no user stack to complete");
}

/// Prints the CPU cost of a resolve, cold (a new resolver: maps, module
/// parse, symbol tables) and warm (every cache hit), for docs/stacks.md.
#[test]
fn resolve_cost_cold_and_warm() {
    let test = "resolve_cost_cold_and_warm";
    if !common::require_root(test) {
        return;
    }
    let dir = common::scratch(test);
    let bin = compile(&dir, "stack_chain", &["-O2", "-fomit-frame-pointer"]);
    let mut chain = Chain::start(&bin);
    let s = chain.sample();
    let (cold_n, warm_n) = (20u64, 2000u64);
    let mut cold = 0;
    for _ in 0..cold_n {
        let mut r = Resolver::new();
        let got = r.resolve(&s);
        assert!(got.complete);
        let (u, y) = r.cost();
        cold += u + y;
    }
    let mut r = Resolver::new();
    let first = r.resolve(&s);
    let before = r.cost();
    for _ in 0..warm_n {
        assert_eq!(r.resolve(&s).frames.len(), first.frames.len());
    }
    let after = r.cost();
    let (wu, ws) = (after.0 - before.0, after.1 - before.1);
    eprintln!(
        "resolve cost ({} frames): cold {} ns, warm {} ns (unwind {} + symbolize {})",
        first.frames.len(),
        cold / cold_n,
        (wu + ws) / warm_n,
        wu / warm_n,
        ws / warm_n
    );
}

/// CLOCK_MONOTONIC, ns: the clock of a sample's `ts_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A sample of kernel frames only, taken now.
fn kernel_sample(addrs: Vec<u64>) -> RawSample {
    RawSample {
        kind: SampleKind::OnCpu,
        pid: std::process::id(),
        tid: 0,
        comm: [0; 16],
        ts_ns: monotonic_ns(),
        kernel: addrs,
        user_regs: None,
        user_stack: Vec::new(),
        syscall: None,
        turn: 0,
        span_ns: (0, 0),
    }
}

#[test]
fn a_bpf_program_loaded_after_kallsyms_was_read_gets_its_own_name_marked_as_ours() {
    let test = "a_bpf_program_loaded_after_kallsyms_was_read_gets_its_own_name_marked_as_ours";
    if !common::require_root(test) {
        return;
    }
    let mut r = Resolver::new();
    // kallsyms read now, before the program exists.
    let schedule = unique_kernel_symbols(&["schedule"]);
    assert_eq!(
        r.resolve(&kernel_sample(vec![schedule[0].0 + 1])).frames[0]
            .name
            .as_ref(),
        "schedule"
    );
    let mut storage = std::mem::MaybeUninit::uninit();
    let sampler = sockscope::stacks::bpf::Sampler::load(
        &mut storage,
        &sockscope::stacks::bpf::SamplerConfig::new(sockscope::probe::ScopeFilter::Tree),
    )
    .expect("loading the sampler's programs");
    // Every sampler's tick program now listed (ours among them; another
    // sockscope may run beside this test).
    let ticks: Vec<(u64, String)> = std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with("[bpf]"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[2].ends_with("_ss_tick"))
                .then(|| (u64::from_str_radix(f[0], 16).unwrap(), f[2].to_string()))
        })
        .collect();
    assert!(!ticks.is_empty(), "ss_tick in kallsyms (bpf_jit_kallsyms)");
    // kallsyms is read again at most once per REREAD_EVERY.
    std::thread::sleep(sockscope::stacks::kallsyms::REREAD_EVERY);
    let got = r.resolve(&kernel_sample(ticks.iter().map(|(a, _)| a + 2).collect()));
    // Another test's sampler may have been unloaded meanwhile, and another
    // program loaded at its address: only the programs still listed as they
    // were are judged (ours is, until it is dropped below).
    let still = std::fs::read_to_string("/proc/kallsyms").unwrap();
    drop(sampler);
    let alive = |(a, name): &(u64, String)| {
        still
            .lines()
            .any(|l| l.starts_with(&format!("{a:016x} ")) && l.contains(&format!(" {name}\t")))
    };
    let judged: Vec<_> = got
        .frames
        .iter()
        .zip(&ticks)
        .filter(|(_, t)| alive(t))
        .collect();
    assert!(!judged.is_empty(), "our own ss_tick is still loaded");
    for (f, (_, name)) in judged {
        assert_eq!(
            f.name.to_string(),
            format!("[sockscope] {name}"),
            "{:?}",
            got.frames
        );
        assert_eq!(&*f.module, "[sockscope]");
        assert!(f.kernel && f.symbolized);
    }
    // The kernel's own text kept its name.
    assert_eq!(
        r.resolve(&kernel_sample(vec![schedule[0].0 + 1])).frames[0]
            .name
            .as_ref(),
        "schedule"
    );
}
