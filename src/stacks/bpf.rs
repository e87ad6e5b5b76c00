//! Loading, attaching and draining the stack sampler
//! (src/bpf/stacks.bpf.c): a cpu-clock perf event per online CPU for
//! on-CPU samples, the scheduler and syscall-exit hooks for off-CPU ones,
//! and the ring buffer they write [`RawSample`]s through.
//!
//! Programs are attached through links this process owns and nothing is
//! pinned; each perf event's descriptor belongs to its link. However
//! sockscope ends (even SIGKILL), the kernel detaches everything when the
//! last descriptor closes.

use std::cell::RefCell;
use std::io::{self, Read as _};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, OpenObject, RingBuffer, RingBufferBuilder, libbpf_sys};

use super::abi::{self, COUNTS, KERNEL_FRAMES, StacksSkel, StacksSkelBuilder, count, types};
use super::sample::{RawSample, SampleKind, UserRegs};
use crate::probe::ScopeFilter;
use crate::probe::pod;
use crate::probe::scope_filter::set_scope_globals;

/// What to sample and how.
#[derive(Clone, Debug)]
pub struct SamplerConfig {
    /// Whose stacks.
    pub scope: ScopeFilter,
    /// On-CPU samples per second per CPU (the cpu-clock event's frequency);
    /// also sets the off-CPU sampling unit, 1e9/hz ns.
    pub hz: u32,
    /// Sample off-CPU time too (where threads wait).
    pub off_cpu: bool,
    /// Bytes of user stack copied per sample (from sp upward).
    pub stack_bytes: u32,
    /// The ring buffer's size (a power of two, at least a page).
    pub ringbuf_bytes: u32,
    /// The request anatomy's per-thread map (its `threads`), when samples
    /// are tied to the requests it times: each sample then carries the
    /// turn its thread served, and run-queue waits are sampled with the
    /// off-CPU side.
    pub tie: Option<Arc<OwnedFd>>,
    /// Samples wake no one: [`Sampler::drain`] then waits its whole
    /// timeout, and the reader wakes once a drain, not once a sample.
    pub quiet: bool,
}

impl SamplerConfig {
    /// The defaults for `scope`: 99 Hz, on-CPU only, 16 KiB of user stack,
    /// a 4 MiB ring buffer.
    pub fn new(scope: ScopeFilter) -> Self {
        Self {
            scope,
            hz: 99,
            off_cpu: false,
            stack_bytes: 16384,
            ringbuf_bytes: 4 << 20,
            tie: None,
            quiet: false,
        }
    }

    /// Refuses values the programs or the kernel cannot take.
    pub fn check(&self) -> Result<()> {
        if !(1..=10_000).contains(&self.hz) {
            bail!(
                "the sampling frequency must be 1..=10000 Hz (got {})",
                self.hz
            );
        }
        if self.stack_bytes > abi::MAX_STACK_BYTES {
            bail!(
                "the user stack copy is at most {} bytes (got {})",
                abi::MAX_STACK_BYTES,
                self.stack_bytes
            );
        }
        if self.ringbuf_bytes < 4096 || !self.ringbuf_bytes.is_power_of_two() {
            bail!(
                "the ring buffer's size must be a power of two of at least 4096 bytes (got {})",
                self.ringbuf_bytes
            );
        }
        Ok(())
    }
}

/// What the programs counted since they were loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplerCounters {
    /// On-CPU samples written to the ring buffer.
    pub samples: u64,
    /// Off-CPU samples written.
    pub off_cpu_samples: u64,
    /// Samples dropped: the ring buffer was full.
    pub lost: u64,
    /// Samples whose user stack could not be read at all.
    pub copy_failed: u64,
    /// The programs' own run time (their bodies, timed by themselves).
    pub bpf_ns: u64,
    /// cpu-clock ticks that fired, on every CPU, whatever ran there.
    pub ticks: u64,
    /// Ticks the timer skipped: it fired late and moved on by whole
    /// periods (measured per CPU from the gap to the previous tick).
    pub ticks_missed: u64,
    /// Run-queue waits written (samples tied to requests, with off-CPU).
    pub runq_samples: u64,
}

/// The loaded sampler. Its programs run only while it holds their links.
pub struct Sampler<'obj> {
    skel: StacksSkel<'obj>,
    links: Vec<Link>,
    ring: RingBuffer<'static>,
    queue: Rc<RefCell<Vec<RawSample>>>,
    cfg: SamplerConfig,
    ncpus: usize,
}

/// What a failed step was doing, with libbpf's reason.
fn failed(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let mut msg = format!("{what} failed: {e}");
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        msg.push_str(
            "\n  the kernel refused: the stack sampler needs CAP_BPF and CAP_PERFMON \
             (or CAP_SYS_ADMIN); run it as root",
        );
    }
    anyhow!(msg)
}

impl<'obj> Sampler<'obj> {
    /// Opens, configures and loads the programs (nothing attached yet).
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>, cfg: &SamplerConfig) -> Result<Self> {
        cfg.check()?;
        crate::probe::libbpf_log::capture_libbpf_log();
        let ncpus = libbpf_rs::num_possible_cpus().context("counting possible CPUs")?;
        let mut open = StacksSkelBuilder::default()
            .open(storage)
            .map_err(|e| failed("opening the stack sampler's BPF object", e))?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .ok_or_else(|| anyhow!("the stack sampler's BPF object has no .rodata"))?;
            ro.self_tgid = std::process::id();
            set_scope_globals!(&mut *ro, types::ss_scope_mode, cfg.scope.words());
            ro.stack_bytes = cfg.stack_bytes;
            ro.period_ns = 1_000_000_000 / u64::from(cfg.hz);
            ro.tie_turns = u32::from(cfg.tie.is_some());
            ro.quiet_ring = u32::from(cfg.quiet);
        }
        if let Some(fd) = &cfg.tie {
            open.maps
                .threads
                .reuse_fd(fd.as_fd())
                .map_err(|e| failed("sharing the request anatomy's thread map", e))?;
        }
        if !cfg.off_cpu {
            // The window's walks serve the off-CPU side only.
            open.progs.ss_open_waits.set_autoload(false);
            open.progs.ss_close_waits.set_autoload(false);
        }
        open.maps
            .scratch
            .set_max_entries(ncpus as u32 * abi::SLOTS)
            .context("sizing the per-CPU scratch buffers")?;
        open.maps
            .samples
            .set_max_entries(cfg.ringbuf_bytes)
            .context("sizing the ring buffer")?;
        let skel = open.load().map_err(|e| {
            crate::probe::libbpf_log::load_error("loading the stack sampler's BPF programs", e)
        })?;
        let queue = Rc::new(RefCell::new(Vec::new()));
        let ring = {
            let q = Rc::clone(&queue);
            let mut b = RingBufferBuilder::new();
            b.add(&skel.maps.samples, move |bytes: &[u8]| {
                if let Some(s) = parse_record(bytes) {
                    q.borrow_mut().push(s);
                }
                0
            })
            .map_err(|e| failed("opening the sampler's ring buffer", e))?;
            b.build()
                .map_err(|e| failed("opening the sampler's ring buffer", e))?
        };
        Ok(Self {
            skel,
            links: Vec::new(),
            ring,
            queue,
            cfg: cfg.clone(),
            ncpus,
        })
    }

    /// Tree scope: these processes (and the children they fork from now
    /// on) are sampled.
    pub fn add_tree(&self, tgids: &[i32]) -> Result<()> {
        crate::probe::scope_filter::add_tree(&self.skel.maps.tree, tgids)
    }

    /// Attaches the tree hooks, the off-CPU hooks when asked for, and a
    /// cpu-clock perf event on every online CPU. On an error what was
    /// attached stays until [`Sampler::detach`] or the drop.
    pub fn attach(&mut self) -> Result<()> {
        let p = &self.skel.progs;
        let mut hooks = vec![
            (&p.ss_fork, "sched_process_fork"),
            (&p.ss_exit, "sched_process_exit"),
        ];
        if self.cfg.off_cpu {
            hooks.push((&p.ss_switch, "sched_switch"));
            hooks.push((&p.ss_wakeup, "sched_wakeup"));
            hooks.push((&p.ss_sys_exit, "sys_exit"));
        }
        for (prog, name) in hooks {
            let link = prog
                .attach()
                .map_err(|e| failed(&format!("attaching to {name}"), e))?;
            self.links.push(link);
        }
        let cpus = online_cpus()?;
        for cpu in cpus {
            let fd = open_cpu_clock(cpu, self.cfg.hz)?;
            let link = self
                .skel
                .progs
                .ss_tick
                .attach_perf_event(fd.as_raw_fd())
                .map_err(|e| failed(&format!("attaching to CPU {cpu}'s cpu-clock event"), e))?;
            // The link owns the descriptor from here on (libbpf closes it
            // when the link is destroyed).
            let _ = fd.into_raw_fd();
            self.links.push(link);
        }
        if self.cfg.off_cpu {
            // The hooks see every wait that begins from now; the walk
            // dates those already going on.
            self.walk(WalkEdge::Open, |_| Ok(()))?;
        }
        Ok(())
    }

    /// Detaches every program and closes the perf events (idempotent).
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Ends the window: detaches everything, then (off-CPU) takes the
    /// waits still going on, up to now, and returns what the ring buffer
    /// holds. Idempotent: a second call finds nothing left.
    pub fn close(&mut self) -> Result<Vec<RawSample>> {
        if self.links.is_empty() {
            return self.drain(Duration::ZERO);
        }
        self.bss_mut()?.window_end_ns = crate::clock::monotonic_ns();
        self.detach();
        let mut out = Vec::new();
        if self.cfg.off_cpu {
            self.walk(WalkEdge::Close, |s| {
                out.extend(s.drain(Duration::ZERO)?);
                Ok(())
            })?;
        }
        out.extend(self.drain(Duration::ZERO)?);
        Ok(out)
    }

    /// Runs one of the window's walks over every task to its end. The
    /// closing walk writes a byte per sample: reading a few at a time lets
    /// `between` drain the ring buffer before a target with thousands of
    /// sleeping threads fills it.
    fn walk(
        &mut self,
        edge: WalkEdge,
        mut between: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let prog = match edge {
            WalkEdge::Open => &self.skel.progs.ss_open_waits,
            WalkEdge::Close => &self.skel.progs.ss_close_waits,
        };
        let what = edge.what();
        let link = prog
            .attach()
            .map_err(|e| failed(&format!("starting {what}"), e))?;
        let mut it = Iter::new(&link).map_err(|e| failed(&format!("starting {what}"), e))?;
        let mut buf = [0u8; 64];
        loop {
            match it.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => between(self)?,
                // The kernel stops a read that visited a million tasks
                // without output; the next goes on from there.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(e) => return Err(anyhow!("{what}: {e}")),
            }
        }
    }

    fn bss_mut(&mut self) -> Result<&mut types::bss> {
        self.skel
            .maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("the stack sampler's BPF object has no .bss"))
    }

    /// The samples the ring buffer holds, waiting up to `timeout` for the
    /// first when it holds none (the whole `timeout` when samples wake no
    /// one, [`SamplerConfig::quiet`]).
    pub fn drain(&mut self, timeout: Duration) -> Result<Vec<RawSample>> {
        // A signal's arrival (a container's stop reaches every thread of
        // its first process: deploy/check.sh saw EINTR here on SIGTERM)
        // only cuts the wait short; what the ring holds is read below.
        if let Err(e) = self.ring.poll(timeout)
            && e.kind() != libbpf_rs::ErrorKind::Interrupted
        {
            return Err(anyhow!("reading the sampler's ring buffer: {e}"));
        }
        self.ring
            .consume()
            .map_err(|e| anyhow!("reading the sampler's ring buffer: {e}"))?;
        Ok(std::mem::take(&mut *self.queue.borrow_mut()))
    }

    /// What the programs counted so far.
    pub fn counters(&self) -> Result<SamplerCounters> {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .ok_or_else(|| anyhow!("the stack sampler's BPF object has no .bss"))?;
        let mut sum = [0u64; COUNTS];
        for cpu in bss.cpus.iter().take(self.ncpus.max(1)) {
            for (s, c) in sum.iter_mut().zip(cpu.count.iter()) {
                *s += c;
            }
        }
        Ok(SamplerCounters {
            samples: sum[count::SAMPLES],
            off_cpu_samples: sum[count::OFF_SAMPLES],
            lost: sum[count::LOST],
            copy_failed: sum[count::COPY_FAILED],
            bpf_ns: sum[count::RUN_NS],
            ticks: sum[count::TICKS],
            ticks_missed: sum[count::TICKS_MISSED],
            runq_samples: sum[count::RUNQ_SAMPLES],
        })
    }
}

/// The window's two walks over every task (src/bpf/stacks.bpf.c).
#[derive(Clone, Copy)]
enum WalkEdge {
    /// Dates the waits going on as the window opens.
    Open,
    /// Takes the waits still going on as it closes.
    Close,
}

impl WalkEdge {
    fn what(self) -> &'static str {
        match self {
            WalkEdge::Open => "dating the waits going on as the window opens",
            WalkEdge::Close => "taking the waits still going on as the window closes",
        }
    }
}

/// Opens a cpu-clock software event on `cpu` (every task), firing every
/// 1/`hz` s, disabled (attaching the program enables it).
///
/// A fixed period, not perf's frequency mode: cpu-clock counts
/// nanoseconds, so a period of 1e9/hz ns is exactly `hz` a second already.
/// Frequency mode would add the kernel's estimator, which stops and
/// restarts the timer at every scheduler tick to re-derive the period from
/// the count since the last tick: variation with nothing to gain for this
/// event (systing moved its sampler off frequency mode after measuring the
/// estimator oversample wake-up paths).
fn open_cpu_clock(cpu: u32, hz: u32) -> Result<OwnedFd> {
    let mut attr = libbpf_sys::perf_event_attr {
        type_: libbpf_sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
        config: u64::from(libbpf_sys::PERF_COUNT_SW_CPU_CLOCK),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1_000_000_000 / u64::from(hz);
    attr.set_disabled(1);
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: attr is a valid, fully initialised perf_event_attr whose
    // size field says its size; pid -1 with a CPU samples every task there.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(perf_open_error(cpu, hz, io::Error::last_os_error()));
    }
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// perf_event_open's refusal, with what is missing.
fn perf_open_error(cpu: u32, hz: u32, e: io::Error) -> anyhow::Error {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    let why = match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => format!(
            "the kernel refused: sampling every task on a CPU needs CAP_PERFMON (or \
             CAP_SYS_ADMIN), or kernel.perf_event_paranoid at most 0 (it is {}); run it as root",
            read("/proc/sys/kernel/perf_event_paranoid")
        ),
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => {
            "this kernel has no cpu-clock software event (CONFIG_PERF_EVENTS)".to_string()
        }
        Some(libc::EINVAL) => format!(
            "the kernel refused {hz} Hz: kernel.perf_event_max_sample_rate is {}",
            read("/proc/sys/kernel/perf_event_max_sample_rate")
        ),
        _ => "the kernel refused the event".to_string(),
    };
    anyhow!("opening a cpu-clock perf event on CPU {cpu} failed: {e}\n  {why}")
}

/// The online CPUs, from /sys/devices/system/cpu/online.
fn online_cpus() -> Result<Vec<u32>> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
    parse_cpu_list(&text).ok_or_else(|| anyhow!("{PATH} is not a CPU list: {:?}", text.trim()))
}

/// A kernel CPU list ("0-3,5,7-8").
fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The letter `ps` shows for a task state word (`__state`).
pub fn state_char(state: u32) -> char {
    const INTERRUPTIBLE: u32 = 1;
    const UNINTERRUPTIBLE: u32 = 2;
    const STOPPED: u32 = 4;
    const TRACED: u32 = 8;
    const NOLOAD: u32 = 0x400;
    if state & UNINTERRUPTIBLE != 0 {
        // TASK_IDLE is an uninterruptible sleep that does not count as
        // load: a kernel thread's idle wait.
        if state & NOLOAD != 0 { 'I' } else { 'D' }
    } else if state & INTERRUPTIBLE != 0 {
        'S'
    } else if state & STOPPED != 0 {
        'T'
    } else if state & TRACED != 0 {
        't'
    } else {
        '?'
    }
}

/// One ring-buffer record as a [`RawSample`]; None when it is shorter than
/// its header says.
fn parse_record(bytes: &[u8]) -> Option<RawSample> {
    let h: types::ss_stk_sample = pod::read(bytes)?;
    let hdr = std::mem::size_of::<types::ss_stk_sample>();
    let kframes = (h.kernel_frames as usize).min(KERNEL_FRAMES);
    let kend = hdr + kframes * 8;
    let send = kend + h.stack_bytes as usize;
    if bytes.len() < send {
        return None;
    }
    let kernel = bytes[hdr..kend]
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let kind = if h.kind == abi::KIND_ON_CPU {
        SampleKind::OnCpu
    } else if h.kind == abi::KIND_RUNQ {
        SampleKind::RunQueue {
            weight_ns: h.weight_ns,
        }
    } else {
        SampleKind::OffCpu {
            weight_ns: h.weight_ns,
            state: state_char(h.state),
            open: h.flags & abi::FLAG_OPEN != 0,
        }
    };
    let user_regs = (h.flags & abi::FLAG_USER_REGS != 0).then_some(UserRegs {
        ip: h.ip,
        sp: h.sp,
        bp: h.bp,
    });
    let mut comm = [0u8; 16];
    for (d, s) in comm.iter_mut().zip(h.comm.iter()) {
        *d = *s as u8;
    }
    Some(RawSample {
        kind,
        pid: h.pid,
        tid: h.tid,
        comm,
        ts_ns: h.ts_ns,
        kernel,
        user_regs,
        user_stack: bytes[kend..send].to_vec(),
        syscall: (h.flags & abi::FLAG_SYSCALL != 0).then_some(h.syscall),
        turn: h.turn,
        span_ns: (h.begin_ns, h.end_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(h: types::ss_stk_sample, kernel: &[u64], stack: &[u8]) -> Vec<u8> {
        let mut v = pod::as_bytes(&h).to_vec();
        for k in kernel {
            v.extend_from_slice(&k.to_ne_bytes());
        }
        v.extend_from_slice(stack);
        v
    }

    #[test]
    fn an_on_cpu_record_becomes_its_sample() {
        let mut comm = [0; 16];
        comm[0] = b'a' as _;
        let h = types::ss_stk_sample {
            kind: abi::KIND_ON_CPU,
            flags: abi::FLAG_USER_REGS,
            pid: 7,
            tid: 8,
            ip: 0x401000,
            sp: 0x7ffd_0000,
            bp: 0x7ffd_0040,
            ts_ns: 5,
            kernel_frames: 2,
            stack_bytes: 3,
            comm,
            ..Default::default()
        };
        let s = parse_record(&record(h, &[0xffff_0001, 0xffff_0002], &[1, 2, 3])).unwrap();
        assert_eq!(s.kind, SampleKind::OnCpu);
        assert_eq!((s.pid, s.tid, s.ts_ns), (7, 8, 5));
        assert_eq!(s.kernel, vec![0xffff_0001, 0xffff_0002]);
        assert_eq!(
            s.user_regs,
            Some(UserRegs {
                ip: 0x401000,
                sp: 0x7ffd_0000,
                bp: 0x7ffd_0040
            })
        );
        assert_eq!(s.user_stack, vec![1, 2, 3]);
        assert_eq!(s.syscall, None);
        assert_eq!(&s.comm[..2], b"a\0");
    }

    #[test]
    fn an_off_cpu_record_keeps_weight_state_and_syscall_and_no_regs_without_the_flag() {
        let h = types::ss_stk_sample {
            kind: 1,
            flags: abi::FLAG_SYSCALL | abi::FLAG_OPEN,
            weight_ns: 12_345,
            state: 1,
            syscall: 230,
            ..Default::default()
        };
        let s = parse_record(&record(h, &[], &[])).unwrap();
        assert_eq!(
            s.kind,
            SampleKind::OffCpu {
                weight_ns: 12_345,
                state: 'S',
                open: true,
            }
        );
        assert_eq!(s.user_regs, None);
        assert_eq!(s.syscall, Some(230));
    }

    #[test]
    fn a_record_shorter_than_its_header_says_is_dropped() {
        let h = types::ss_stk_sample {
            kernel_frames: 4,
            stack_bytes: 16,
            ..Default::default()
        };
        assert!(parse_record(&record(h, &[1, 2, 3, 4], &[0; 15])).is_none());
        assert!(parse_record(&[0; 8]).is_none());
    }

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("4-2"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn task_states_read_as_ps_letters() {
        assert_eq!(state_char(1), 'S');
        assert_eq!(state_char(2), 'D');
        assert_eq!(state_char(0x102), 'D'); // TASK_KILLABLE
        assert_eq!(state_char(0x402), 'I'); // TASK_IDLE
        assert_eq!(state_char(4), 'T');
        assert_eq!(state_char(8), 't');
        assert_eq!(state_char(0), '?');
    }

    #[test]
    fn a_refused_perf_event_names_what_is_missing() {
        let denied = perf_open_error(1, 99, io::Error::from_raw_os_error(libc::EACCES));
        let msg = format!("{denied:#}");
        assert!(msg.contains("CPU 1"), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");
        assert!(msg.contains("kernel.perf_event_paranoid"), "{msg}");
        let rate = perf_open_error(0, 5000, io::Error::from_raw_os_error(libc::EINVAL));
        assert!(
            format!("{rate:#}").contains("kernel.perf_event_max_sample_rate"),
            "{rate:#}"
        );
        let none = perf_open_error(0, 99, io::Error::from_raw_os_error(libc::ENOENT));
        assert!(format!("{none:#}").contains("no cpu-clock"), "{none:#}");
    }

    #[test]
    fn configs_the_programs_cannot_take_are_refused() {
        let ok = SamplerConfig::new(ScopeFilter::Tree);
        assert!(ok.check().is_ok());
        for bad in [
            SamplerConfig {
                hz: 0,
                ..ok.clone()
            },
            SamplerConfig {
                hz: 20_000,
                ..ok.clone()
            },
            SamplerConfig {
                stack_bytes: abi::MAX_STACK_BYTES + 1,
                ..ok.clone()
            },
            SamplerConfig {
                ringbuf_bytes: 3 << 20,
                ..ok.clone()
            },
            SamplerConfig {
                ringbuf_bytes: 2048,
                ..ok.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
