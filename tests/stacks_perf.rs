//! Issue 25's agreement check: Debian's stock nginx under a sockscope http
//! load, sampled by sockscope and by `perf record --call-graph dwarf` in
//! the same window; each side's five hottest functions outside the
//! interrupt-enable points have the same share on the other side, within
//! what the two sample counts allow, and the samples cover nginx's CPU
//! time. Where a tick deferred by interrupts-off lands (a quarter to a
//! third of nginx's samples) is not reproducible between two cpu-clock
//! timers on this VM: 10.1 % against 23.7 % once in a fresh-clone suite,
//! within 2 points in most windows; bench/stacks_perf.sh keeps that part
//! of the comparison.
//!
//! nginx runs on one CPU and everything else (the load, perf, sockscope's
//! own threads) on the others. That is not for speed: on this project's
//! 2-vCPU VM the second vCPU's cpu-clock timers stop for tens of ms at a
//! time, one timer at a time, so two samplers there lose different ticks
//! and their shares drift apart by whole points (perf against perf as much
//! as sockscope against perf; docs/stacks.md, "Agreement with perf
//! record"). On the first CPU both timers keep time, and the comparison is
//! of what it should be: the two tools' unwinding, naming and scope.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Reaped, read_json, require_bpf, scratch, sockscope};

/// The sampling rate on both sides, and perf's fixed period for it (the
/// way sockscope's cpu-clock event fires): 499 Hz gives about 3,800
/// samples of nginx in 8 s, where 199 Hz gave 1,500 and bounds on shares
/// 1.6 times as wide.
const HZ: u64 = 499;
const PERIOD_NS: u64 = 1_000_000_000 / HZ;

/// The CPUs this test may use, from its own affinity mask.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity fills
    // it for this thread and reads nothing else.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(
        rc,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu < CPU_SETSIZE, within the set.
        .filter(|cpu| unsafe { libc::CPU_ISSET(*cpu, &set) })
        .collect()
}

/// Pins every thread of `pid` and of its child processes to `cpu`.
fn pin_tree(pid: i32, cpu: usize) {
    // SAFETY: as in allowed_cpus; CPU_SET writes inside the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for t in tasks {
        let tid: i32 = t.unwrap().file_name().to_str().unwrap().parse().unwrap();
        // SAFETY: set is a valid cpu_set_t; tid is a thread of the nginx
        // this test started.
        let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
        assert_eq!(rc, 0, "pinning {tid}: {}", std::io::Error::last_os_error());
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).unwrap_or_default();
        for c in children.split_whitespace() {
            pin_tree(c.parse().unwrap(), cpu);
        }
    }
}

/// perf's nginx samples by the symbol of each sample's own address
/// (`perf script -G`: the call graph hidden, not `perf report
/// --no-children`, whose self column moved functions by whole points
/// against the raw samples here), and their count.
fn perf_leaves(data: &Path) -> (BTreeMap<String, u64>, u64) {
    let out = Command::new("perf")
        .args(["script", "-F", "comm,ip,sym", "-G", "--comm", "nginx", "-i"])
        .arg(data)
        .output()
        .expect("running perf script");
    assert!(out.status.success(), "perf script: {out:?}");
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut n = 0;
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        // `nginx IP SYM`
        let words: Vec<&str> = l.split_whitespace().collect();
        if words.len() >= 3 && words[0] == "nginx" {
            *counts.entry(words[2].to_string()).or_default() += 1;
            n += 1;
        }
    }
    (counts, n)
}

/// sockscope's samples by their stacks' leaf frame, and their count.
fn our_leaves(graph: &serde_json::Value) -> (BTreeMap<String, u64>, u64) {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut n = 0;
    for s in graph["stacks"].as_array().unwrap() {
        let leaf = s["frames"].as_array().unwrap().last().unwrap();
        let w = s["weight"].as_u64().unwrap();
        *counts
            .entry(leaf.as_str().unwrap().to_string())
            .or_default() += w;
        n += w;
    }
    (counts, n)
}

/// One function's name as both tools can spell it: perf names glibc's
/// functions by their internal aliases from libc6-dbg (`__GI___writev`,
/// `__GI___fstatat64`), sockscope by the exported ones (`writev`,
/// `fstatat`): the same address. The kernel's aliases (`memset`,
/// `__memset` and `__pi_memset` at one address) are joined by their
/// address in /proc/kallsyms: which of them each tool shows is its own
/// choice (perf's differs between versions).
fn comparable(name: &str) -> String {
    static ALIASES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    let aliases = ALIASES.get_or_init(|| {
        kernel_aliases(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
    });
    comparable_with(name, aliases)
}

/// [`comparable`] with the kernel's aliases given.
fn comparable_with(name: &str, kernel: &BTreeMap<String, String>) -> String {
    let n = name.strip_suffix("_[k]").unwrap_or(name);
    // sockscope marks its own BPF programs; perf names them plainly.
    let n = n.strip_prefix("[sockscope] ").unwrap_or(n);
    if let Some(first) = kernel.get(n) {
        return first.clone();
    }
    match n.strip_prefix("__GI_") {
        Some(alias) => {
            let alias = alias.trim_start_matches('_');
            alias.strip_suffix("64").unwrap_or(alias).to_string()
        }
        None => n.to_string(),
    }
}

/// Every kernel function name that shares its address with another, to
/// the first name listed at that address (kallsyms' text format:
/// `ADDRESS TYPE NAME [MODULE]`). Addresses all zero (read without
/// root) join nothing.
fn kernel_aliases(kallsyms: &str) -> BTreeMap<String, String> {
    let mut by_addr: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for line in kallsyms.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 3 || !matches!(w[1], "T" | "t" | "W" | "w") {
            continue;
        }
        match u64::from_str_radix(w[0], 16) {
            Ok(a) if a != 0 => by_addr.entry(a).or_default().push(w[2]),
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for names in by_addr.values().filter(|n| n.len() > 1) {
        for n in names {
            out.entry(n.to_string())
                .or_insert_with(|| names[0].to_string());
        }
    }
    out
}

/// Functions both tools can name: perf's `[unknown]` and sockscope's
/// `module+0x...` (an unnamed function, from its FDE) or `[module]` are
/// the same unnamed code counted by address on one side and by function
/// or module on the other.
fn named(name: &str) -> bool {
    let bracketed = name.starts_with('[') && name.ends_with(']');
    !bracketed && !name.contains("+0x")
}

/// Where a tick that came due while interrupts were off fires: the
/// functions that turn them back on.
fn deferred_landing(name: &str) -> bool {
    name.contains("unlock_irq") || name.starts_with("finish_task_switch")
}

/// Samples at the interrupt-enable points, and the rest by name.
fn split_deferred(counts: BTreeMap<String, u64>) -> (u64, BTreeMap<String, u64>) {
    let (irq, rest): (BTreeMap<_, _>, BTreeMap<_, _>) = counts
        .into_iter()
        .partition(|(n, _)| deferred_landing(&comparable(n)));
    (irq.values().sum(), rest)
}

/// Samples each side must have outside the interrupt-enable points for
/// shares to be compared at all: about half a second of nginx's CPU.
const MIN_COMPARED: u64 = 100;

/// How far apart two samplings' shares of one function may be: 4.5
/// standard errors of the difference between two binomial shares (the
/// pooled share over `n1` and `n2` samples), and half a point for the
/// rounding of small shares. In 14 pinned windows (bench/stacks_perf.sh,
/// docs/benchmarks.md SP) the largest gap among the top functions was
/// 2.6 standard errors; 4.5 is passed by chance once in 150,000
/// comparisons.
fn agreement_bound(a: f64, n1: u64, b: f64, n2: u64) -> f64 {
    let (n1, n2) = (n1.max(1) as f64, n2.max(1) as f64);
    let p = (a * n1 + b * n2) / (n1 + n2);
    let se = (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt();
    4.5 * se + 0.005
}

/// Self shares (0..1) by comparable name, hottest first.
fn shares(counts: BTreeMap<String, u64>, total: u64) -> Vec<(String, f64)> {
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    for (n, c) in counts {
        *m.entry(comparable(&n)).or_default() += c as f64 / total.max(1) as f64;
    }
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

#[test]
fn comparable_names_join_glibc_and_kernel_aliases_only() {
    let k = kernel_aliases(
        "ffffffff821f67c0 T memset\nffffffff821f67c0 T __memset\nffffffff821f67c0 T __pi_memset\n\
         ffffffff821f6800 T memmove\n0000000000000000 T zeroed\n0000000000000000 T also_zeroed\n",
    );
    assert_eq!(comparable_with("__pi_memset_[k]", &k), "memset");
    assert_eq!(comparable_with("__memset", &k), "memset");
    assert_eq!(comparable_with("memmove", &k), "memmove");
    assert_eq!(comparable_with("also_zeroed", &k), "also_zeroed");
    assert_eq!(comparable("__GI___writev"), comparable("writev"));
    assert_eq!(comparable("__GI___fstatat64"), comparable("fstatat"));
    assert_eq!(comparable("tcp_ack_[k]"), comparable("tcp_ack"));
    assert_ne!(comparable("tcp_ack"), comparable("tcp_ack_snd_check"));
    assert_eq!(comparable("do_syscall_64_[k]"), "do_syscall_64");
    assert!(!named("[unknown]") && !named("nginx+0x4f2a0") && named("ngx_http_core_run_phases"));
    assert!(!named("[nginx]"));
    assert_eq!(
        comparable("[sockscope] bpf_prog_0123456789abcdef_ss_tick_[k]"),
        "bpf_prog_0123456789abcdef_ss_tick"
    );
    assert!(deferred_landing("_raw_spin_unlock_irqrestore"));
    assert!(deferred_landing("finish_task_switch.isra.0"));
    assert!(!deferred_landing("tcp_ack"));
    let s = shares(
        BTreeMap::from([
            ("__GI___writev".to_string(), 1),
            ("writev".to_string(), 1),
            ("tcp_ack_[k]".to_string(), 2),
        ]),
        4,
    );
    assert_eq!(
        s,
        vec![("tcp_ack".to_string(), 0.5), ("writev".to_string(), 0.5)]
    );
    let (irq, rest) = split_deferred(BTreeMap::from([
        ("_raw_spin_unlock_irqrestore_[k]".to_string(), 3),
        ("finish_task_switch.isra.0_[k]".to_string(), 2),
        ("tcp_ack_[k]".to_string(), 5),
    ]));
    assert_eq!(irq, 5);
    assert_eq!(rest.keys().collect::<Vec<_>>(), ["tcp_ack_[k]"]);
}

#[test]
fn the_agreement_bound_follows_the_sample_counts() {
    // 10 % of 1,000 samples each side: a standard error of 1.34 points.
    let b = agreement_bound(0.1, 1000, 0.1, 1000);
    assert!((b - (4.5 * 0.013416 + 0.005)).abs() < 1e-4, "{b}");
    // Four times the samples, half the bound (less the half point).
    let b4 = agreement_bound(0.1, 4000, 0.1, 4000);
    assert!(((b4 - 0.005) * 2.0 - (b - 0.005)).abs() < 1e-9);
    // A share no side has: only the rounding allowance.
    assert_eq!(agreement_bound(0.0, 1000, 0.0, 1000), 0.005);
}

#[test]
fn nginx_top_functions_agree_with_perf_dwarf_in_the_same_window() {
    const TEST: &str = "nginx_top_functions_agree_with_perf_dwarf_in_the_same_window";
    if !require_bpf(TEST) || !common::require_program("perf", TEST) {
        return;
    }
    let Some(nginx) = common::nginx::Nginx::start("stacks-perf-nginx") else {
        return;
    };
    let cpus = allowed_cpus();
    let nginx_cpu = cpus[0];
    let rest: Vec<String> = match cpus[1..].is_empty() {
        true => vec![nginx_cpu.to_string()],
        false => cpus[1..].iter().map(|c| c.to_string()).collect(),
    };
    let rest = rest.join(",");
    pin_tree(nginx.child.id() as i32, nginx_cpu);
    let dir = scratch("stacks-perf-run");
    let data = dir.join("perf.data");
    let json = dir.join("stacks.json");
    let load = Command::new("taskset")
        .args(["-c", &rest])
        .arg(sockscope())
        .args(["load", "http", &nginx.url("/"), "-c", "4", "-d", "14", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running taskset (util-linux)");
    let mut load = Reaped(load);
    std::thread::sleep(Duration::from_secs(1));
    // perf samples the way sockscope does (a cpu-clock event per CPU, a
    // fixed period of 1/199 s; nginx's samples picked by comm) over
    // sockscope's own lifetime: the same seconds on both sides. Not per
    // task (-p): a per-task cpu-clock timer restarts at each switch-in
    // with interrupts off, and so lands on the interrupt-enable points
    // after a switch far more often than a per-CPU one.
    let perf = Command::new("taskset")
        .args(["-c", &rest, "perf", "record", "-q", "-a", "-e", "cpu-clock"])
        .args(["-c", &PERIOD_NS.to_string(), "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(sockscope())
        .args(["trace", "--stacks-only", "--pid"])
        .arg(nginx.child.id().to_string())
        .args(["--stack-hz", &HZ.to_string(), "-d", "8", "-q", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut perf = Reaped(perf);
    let st = common::wait_bounded(&mut perf.0, Duration::from_secs(60));
    common::wait_bounded(&mut load.0, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(perf.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        st.success(),
        "perf record -- sockscope trace --stacks-only: {err}"
    );
    let rep = read_json(&json);
    let s = &rep["stacks"];
    let (ours, our_n) = our_leaves(&s["on_cpu"]);
    let (theirs, their_n) = perf_leaves(&data);
    let cost = &s["cost"];
    eprintln!(
        "nginx samples: sockscope {our_n}, perf {their_n}; sockscope's coverage of nginx's \
         CPU time {}; ticks with none, all CPUs: {} of {}",
        cost["coverage"], cost["ticks_missed"], cost["ticks"]
    );
    // The samples are an even sample of nginx's time: at least one per
    // period it ran (its CPU time from /proc, over sockscope's window),
    // and at most one per period of the window on its one CPU. More than
    // its CPU time is due (coverage 1.01 to 1.11 measured here) where its
    // CPU also idles: a tick that came due in the idle task fires as the
    // CPU wakes, in the task woken, for perf as for sockscope (their
    // counts agree below).
    let coverage = cost["coverage"]
        .as_f64()
        .expect("coverage of a --pid scope");
    assert!(
        coverage >= 0.85,
        "sockscope's samples cover {:.0} % of nginx's CPU time x {HZ} Hz",
        coverage * 100.0
    );
    let window_s = rep["window"]["duration_s"].as_f64().unwrap();
    let ticks_on_its_cpu = window_s * HZ as f64;
    assert!(
        (our_n as f64) <= ticks_on_its_cpu * 1.02,
        "sockscope put {our_n} samples on nginx, pinned to one CPU whose timer fired about \
         {ticks_on_its_cpu:.0} times in the window"
    );
    // perf's window holds sockscope's start and end too (its child), a
    // few tenths of a second more of the same load. The counts agree only
    // roughly when other work shares nginx's CPU: with two CPU hogs beside
    // the suite, the two timers split that CPU's ticks between nginx and a
    // hog at 37 % and 32 % (1,487 against 1,303 samples, neither losing
    // any); coverage, against nginx's own clock, is the exact check.
    let ratio = our_n as f64 / their_n.max(1) as f64;
    assert!(
        (0.7..=1.3).contains(&ratio),
        "sockscope took {our_n} samples of nginx, perf {their_n} in a window that holds \
         sockscope's"
    );
    // Where a tick that came due with interrupts off lands is not
    // reproducible between two cpu-clock timers here (both sides' shares
    // printed; the whole comparison is bench/stacks_perf.sh's): shares
    // are compared among the samples outside those points.
    let (ours_irq, ours) = split_deferred(ours);
    let (theirs_irq, theirs) = split_deferred(theirs);
    let (our_m, their_m) = (our_n - ours_irq, their_n - theirs_irq);
    eprintln!(
        "interrupt-enable points (not compared): sockscope {:.1} %, perf {:.1} %",
        100.0 * ours_irq as f64 / our_n.max(1) as f64,
        100.0 * theirs_irq as f64 / their_n.max(1) as f64
    );
    assert!(
        our_m >= MIN_COMPARED && their_m >= MIN_COMPARED,
        "too few samples outside the interrupt-enable points to compare shares \
         (sockscope {our_m}, perf {their_m}; nginx ran {:.2} s of CPU in the window)",
        rep["target_cpu"]["cpu_s"]
    );
    let (ours, theirs) = (shares(ours, our_m), shares(theirs, their_m));
    let share = |list: &[(String, f64)], name: &str| {
        list.iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |(_, s)| *s)
    };
    let top5 = |l: &[(String, f64)]| -> Vec<String> {
        l.iter()
            .filter(|(n, _)| named(n))
            .take(5)
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut names = top5(&ours);
    let more: Vec<String> = top5(&theirs)
        .into_iter()
        .filter(|n| !names.contains(n))
        .collect();
    names.extend(more);
    let rows: Vec<(&String, f64, f64, f64)> = names
        .iter()
        .map(|n| {
            let (a, b) = (share(&ours, n), share(&theirs, n));
            (n, a, b, agreement_bound(a, our_m, b, their_m))
        })
        .collect();
    for (name, a, b, bound) in &rows {
        eprintln!(
            "{name}: sockscope {:.1} %, perf {:.1} % (may differ by {:.1} points)",
            a * 100.0,
            b * 100.0,
            bound * 100.0
        );
    }
    for (name, a, b, bound) in rows {
        assert!(
            (a - b).abs() <= bound,
            "{name}: {:.1} % of sockscope's samples, {:.1} % of perf's (at most {:.1} points \
             apart for these counts)\n sockscope {:?}\n perf {:?}",
            a * 100.0,
            b * 100.0,
            bound * 100.0,
            &ours[..12.min(ours.len())],
            &theirs[..12.min(theirs.len())]
        );
    }
}
