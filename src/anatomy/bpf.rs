//! Loading, attaching and reading the anatomy programs
//! (src/bpf/anatomy.bpf.c). Everything libbpf-specific for the anatomy
//! stays here; the rest of the module sees [`Counts`].
//!
//! Programs are attached through links this process owns and nothing is
//! pinned: however sockscope ends (even SIGKILL), the kernel detaches them
//! when the last descriptor closes.

use std::cell::RefCell;
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use anyhow::{Context, Result, anyhow, bail};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};

use super::abi::{AnatomySkel, AnatomySkelBuilder, COUNTS, H1_TEXT, NAME_LEN, PARTS, PROGS, types};
use super::counts::{Counts, NameCounts, PortTurns, ProgRuns, Transport, Wire};
use super::ends::{TurnEnds, is_turn_end};
use super::h2names::H2Names;
use super::ports::ServedPort;
use crate::clock::monotonic_ns;
use crate::probe::ScopeFilter;
use crate::probe::hist;
use crate::probe::pod::{self, as_bytes};
use crate::probe::scope_filter::set_scope_globals;

mod cost;

/// The loaded programs. They run only while this holds their links.
pub struct Programs<'obj> {
    skel: AnatomySkel<'obj>,
    /// The connection-life, fork and exit hooks (rare events: attached for
    /// the whole window).
    links: Vec<Link>,
    /// The per-request hooks (data ready, read, write): detached while a
    /// sampled window is paused.
    socket_links: Vec<Link>,
    /// HTTP/2's header blocks and stream ends (src/bpf/h2.h), read at
    /// every [`Programs::poll`] into `h2`.
    ring: RingBuffer<'static>,
    /// The HTTP/2 streams' names, decoded from the ring buffer's records.
    h2: Rc<RefCell<H2Names>>,
    /// The ends of the turns a stack sample fell in (tie_samples), from
    /// the same ring buffer.
    ends: Rc<RefCell<TurnEnds>>,
    ncpus: usize,
    /// The kernel's run-time accounting (BPF_ENABLE_STATS), held during
    /// the cost slices only (it costs every program on the machine two
    /// clock reads a run while held).
    stats_fd: Option<std::os::fd::OwnedFd>,
}

/// The HTTP/2 ring buffer's size for a run that measures a target under
/// load: a 10 ms tick's records at well over 100,000 streams a second (a
/// record is 64 or 288 bytes).
pub const H2_RING_BYTES: u32 = 8 << 20;

/// The same for a node agent (`--metrics`): the kernel maps a ring's
/// pages twice into the reader and they are resident from the start, so
/// 8 MiB would be 16 MB of the agent's RSS. 1 MiB still holds about 30 ms
/// of records at 100,000 HTTP/2 streams a second (a tick is 10 ms); a
/// record that finds it full is counted as lost, never waited for.
pub const AGENT_H2_RING_BYTES: u32 = 1 << 20;

/// Entries of the names map (and of the HTTP/1 route texts): each port's
/// names and an "(other)" per protocol, at least the kernel's default and
/// at most [`NAMES_CAP`]. A value is 3.9 KB, allocated only when a name is
/// first seen, so the cap bounds the memory a flood of names can take
/// (about 32 MB); names past it are counted as unnamed.
fn names_capacity(max_ports: u32, max_endpoints: u32) -> u32 {
    let per_port = max_endpoints.saturating_add(Wire::ALL.len() as u32);
    max_ports
        .max(1)
        .saturating_mul(per_port)
        .clamp(super::abi::NAMES_MIN, NAMES_CAP)
}

/// The most entries the names map is given.
const NAMES_CAP: u32 = 8192;

/// What a failed step was doing, with libbpf's reason.
fn failed(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let mut msg = format!("{what} failed: {e}");
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        msg.push_str(
            "\n  the kernel refused: the request anatomy needs CAP_BPF and CAP_PERFMON \
             (or CAP_SYS_ADMIN); run it as root",
        );
    }
    anyhow!(msg)
}

impl<'obj> Programs<'obj> {
    /// Opens, configures and loads the programs (nothing attached yet).
    /// `max_ports` is how many served ports keep their own statistics,
    /// `max_endpoints` how many request names each keeps (the rest are
    /// its "(other)"); `tls_plaintext` readies the TLS connections' state
    /// and the uprobes on OpenSSL ([`Programs::attach_tls`] attaches them);
    /// `tie_samples` keeps each serving thread's turn for the stack
    /// sampler ([`Programs::threads_map`]) and writes the ends of the turns
    /// it sampled; `ring_bytes` sizes the ring buffer of HTTP/2 records
    /// and turn ends (a power of two).
    pub fn load(
        storage: &'obj mut MaybeUninit<OpenObject>,
        scope: &ScopeFilter,
        max_ports: u32,
        max_endpoints: u32,
        tls_plaintext: bool,
        tie_samples: bool,
        ring_bytes: u32,
    ) -> Result<Self> {
        // CPU wait is the kernel's per-thread run-queue sum; without
        // CONFIG_SCHED_INFO the field is absent and every turn would show
        // none: refuse rather than report a wait of zero.
        if !std::path::Path::new("/proc/self/schedstat").exists() {
            return Err(anyhow!(
                "the request anatomy needs the kernel's run-queue accounting per thread \
                 (CONFIG_SCHED_INFO; /proc/self/schedstat is missing), which this kernel lacks"
            ));
        }
        if cfg!(anatomy_hooks_only) {
            crate::progress::say!(
                "sockscope: this build's request anatomy programs return at once \
                 (SOCKSCOPE_ANATOMY_HOOKS_ONLY, for bench/anatomy.sh): no turn is recorded"
            );
        }
        crate::probe::libbpf_log::capture_libbpf_log();
        let mut open = AnatomySkelBuilder::default()
            .open(storage)
            .map_err(|e| failed("opening the anatomy BPF object", e))?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .ok_or_else(|| anyhow!("the anatomy BPF object has no .rodata"))?;
            ro.self_tgid = std::process::id();
            ro.max_endpoints = max_endpoints.max(1);
            ro.tls_plaintext = u32::from(tls_plaintext);
            ro.tie_samples = u32::from(tie_samples);
            set_scope_globals!(&mut *ro, types::ss_scope_mode, scope.words());
        }
        open.maps
            .stats
            .set_max_entries(max_ports.max(1))
            .context("sizing the per-port statistics")?;
        let names = names_capacity(max_ports, max_endpoints);
        open.maps
            .names
            .set_max_entries(names)
            .context("sizing the request names")?;
        open.maps
            .h1_routes
            .set_max_entries(names)
            .context("sizing the HTTP/1 route texts")?;
        open.maps
            .h2_events
            .set_max_entries(ring_bytes)
            .context("sizing the HTTP/2 ring buffer")?;
        if !tls_plaintext {
            // Preallocated LRUs: no room taken for what is not asked.
            open.maps
                .tls_conns
                .set_max_entries(1)
                .context("sizing the TLS connections")?;
            open.maps
                .tls_ssl
                .set_max_entries(1)
                .context("sizing the TLS sessions")?;
            let p = &mut open.progs;
            for prog in [
                &mut p.ss_ssl_read,
                &mut p.ss_ssl_read_ex,
                &mut p.ss_ssl_write,
                &mut p.ss_ssl_write_ex,
                &mut p.ss_ssl_read_ret,
                &mut p.ss_ssl_read_ex_ret,
                &mut p.ss_ssl_write_ret,
                &mut p.ss_ssl_write_ex_ret,
            ] {
                prog.set_autoload(false);
            }
        }
        let skel = open.load().map_err(|e| {
            crate::probe::libbpf_log::load_error("loading the anatomy BPF programs", e)
        })?;
        let ncpus = libbpf_rs::num_possible_cpus().context("counting possible CPUs")?;
        let h2 = Rc::new(RefCell::new(H2Names::new(max_endpoints.max(1))));
        let ends = Rc::new(RefCell::new(TurnEnds::default()));
        let ring = {
            let names = Rc::clone(&h2);
            let turn_ends = Rc::clone(&ends);
            let mut b = RingBufferBuilder::new();
            b.add(&skel.maps.h2_events, move |bytes: &[u8]| {
                if is_turn_end(bytes) {
                    turn_ends.borrow_mut().record(bytes);
                } else {
                    names.borrow_mut().record(bytes);
                }
                0
            })
            .map_err(|e| failed("opening the HTTP/2 ring buffer", e))?;
            b.build()
                .map_err(|e| failed("opening the HTTP/2 ring buffer", e))?
        };
        Ok(Self {
            skel,
            links: Vec::new(),
            socket_links: Vec::new(),
            ring,
            h2,
            ends,
            ncpus,
            stats_fd: None,
        })
    }

    /// With `tie_samples`: a timed turn whose server time reaches `ns`
    /// writes its end whether a sample fell in it or not.
    pub fn set_tail_floor(&mut self, ns: u64) -> Result<()> {
        self.bss()?.tail_floor_ns = ns;
        Ok(())
    }

    /// A descriptor of the per-thread map (`threads`), for the stack
    /// sampler to read each serving thread's turn from.
    pub fn threads_map(&self) -> Result<OwnedFd> {
        self.skel
            .maps
            .threads
            .as_fd()
            .try_clone_to_owned()
            .context("sharing the anatomy's thread map")
    }

    /// The ends of the sampled turns collected so far, taken (HTTP/1
    /// names turned into their routes' text).
    pub fn take_turn_ends(&self) -> Result<TurnEnds> {
        let mut t = std::mem::take(&mut *self.ends.borrow_mut());
        let mut routes: std::collections::HashMap<Vec<u8>, Vec<u8>> = Default::default();
        for e in &mut t.ends {
            if let Some((super::counts::Wire::Http1, name)) = &mut e.endpoint {
                if !routes.contains_key(name.as_slice()) {
                    let mut key = name.clone();
                    key.resize(NAME_LEN, 0);
                    routes.insert(name.clone(), self.h1_text(&key)?);
                }
                *name = routes[name.as_slice()].clone();
            }
        }
        Ok(t)
    }

    /// Reads the HTTP/2 records the programs wrote since the last call
    /// (without waiting): call it often, the ring buffer holds a few
    /// milliseconds of a busy server's streams.
    pub fn poll(&self) -> Result<()> {
        self.ring
            .consume()
            .map_err(|e| failed("reading the HTTP/2 ring buffer", e))?;
        Ok(())
    }

    /// Tree scope: these processes are the target's (their children join
    /// through the fork hook).
    pub fn add_tree(&self, tgids: &[i32]) -> Result<()> {
        crate::probe::scope_filter::add_tree(&self.skel.maps.tree, tgids)
    }

    /// The ports whose connections are followed: each registered in its
    /// namespace, its bit set in the prefilter, and its statistics entry
    /// created here (in process context, where the allocation cannot fail
    /// the way it can in the programs).
    pub fn add_ports(&mut self, ports: &[ServedPort]) -> Result<()> {
        for p in ports {
            let key = types::ss_anat_port_key {
                netns: p.netns,
                port: p.port,
                proto: p.transport.number(),
            };
            self.skel
                .maps
                .ports
                .update(as_bytes(&key), &[1], MapFlags::ANY)
                .with_context(|| format!("registering port {}/{}", p.port, p.transport.name()))?;
            self.create_stats(p)?;
            let word = usize::from(p.port >> 6);
            let bit = 1u64 << (p.port & 63);
            self.bss()?.port_bits[word] |= bit;
        }
        Ok(())
    }

    /// A served port's statistics entry, created here (in process
    /// context, where the allocation cannot fail the way it can in the
    /// programs).
    fn create_stats(&mut self, p: &ServedPort) -> Result<()> {
        let zero = vec![0u8; std::mem::size_of::<types::ss_anat_stats>()];
        let zeros: Vec<Vec<u8>> = (0..self.ncpus).map(|_| zero.clone()).collect();
        let skey = types::ss_anat_stats_key {
            port: p.port,
            proto: p.transport.number(),
            pad: 0,
        };
        // NOEXIST: the same port in two namespaces shares its entry.
        // The kernel takes a no-prealloc per-CPU value from a cache it
        // refills asynchronously: ENOMEM right after the previous port
        // means "not refilled yet", so it is retried for a while; a
        // port that still gets none has its turns in the overflow (the
        // report's overflow_turns), as one beyond the limit does.
        for attempt in 0..200 {
            match self
                .skel
                .maps
                .stats
                .update_percpu(as_bytes(&skey), &zeros, MapFlags::NO_EXIST)
            {
                Ok(()) => break,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => break,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::TooBig => break,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::OutOfMemory && attempt < 199 => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) if e.kind() == libbpf_rs::ErrorKind::OutOfMemory => break,
                Err(e) => {
                    return Err(anyhow!(
                        "creating the statistics of port {}/{}: {e}",
                        p.port,
                        p.transport.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The Unix listeners whose connections are followed, by socket inode,
    /// numbered in the order given (each `ServedPort`'s port is its
    /// number). Once the hooks are attached: an iterator over the Unix
    /// sockets learns each listener's address, which the connections it
    /// accepts share. Returns the numbers of those it found.
    pub fn add_unix(&mut self, listeners: &[(u64, ServedPort)]) -> Result<Vec<u16>> {
        if listeners.is_empty() {
            return Ok(Vec::new());
        }
        for (inode, p) in listeners {
            self.skel
                .maps
                .unix_inodes
                .update(&inode.to_ne_bytes(), &p.port.to_ne_bytes(), MapFlags::ANY)
                .context("registering a Unix listener")?;
            self.create_stats(p)?;
        }
        let link = self
            .skel
            .progs
            .ss_learn_unix
            .attach()
            .map_err(|e| failed("attaching the Unix listeners' iterator", e))?;
        let mut it = Iter::new(&link).context("creating the Unix listeners' iterator")?;
        std::io::copy(&mut it, &mut std::io::sink())
            .context("running the Unix listeners' iterator")?;
        let mut found: Vec<u16> = self
            .skel
            .maps
            .unix_addrs
            .keys()
            .filter_map(|k| {
                let v = self.skel.maps.unix_addrs.lookup(&k, MapFlags::ANY).ok()??;
                Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?))
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        if !found.is_empty() {
            self.bss()?.unix_on = 1;
        }
        Ok(found)
    }

    /// Attaches every tracepoint program. Until the window opens they keep
    /// no turn.
    pub fn attach(&mut self) -> Result<()> {
        let p = &self.skel.progs;
        for (prog, name) in [
            (&p.ss_fork, "sched_process_fork"),
            (&p.ss_exit, "sched_process_exit"),
            (&p.ss_sock_state, "inet_sock_set_state"),
        ] {
            let link = prog
                .attach()
                .map_err(|e| failed(&format!("attaching to {name}"), e))?;
            self.links.push(link);
        }
        self.attach_socket_hooks()
    }

    /// `--tls-plaintext`: uprobes on OpenSSL's SSL_read, SSL_read_ex,
    /// SSL_write and SSL_write_ex (entries and returns) in each library, in
    /// the target's processes that map it (or in every process, when they
    /// are too many: the programs then keep the target's calls only). A
    /// library without the `_ex` calls (OpenSSL before 1.1.1) is probed on
    /// the others. Each library's shown path, for the report.
    pub fn attach_tls(&mut self, libs: &[super::tls::Library]) -> Result<Vec<String>> {
        let mut probed = Vec::new();
        for lib in libs {
            let p = &self.skel.progs;
            let probes = [
                (&p.ss_ssl_read, "SSL_read", false),
                (&p.ss_ssl_read_ret, "SSL_read", true),
                (&p.ss_ssl_read_ex, "SSL_read_ex", false),
                (&p.ss_ssl_read_ex_ret, "SSL_read_ex", true),
                (&p.ss_ssl_write, "SSL_write", false),
                (&p.ss_ssl_write_ret, "SSL_write", true),
                (&p.ss_ssl_write_ex, "SSL_write_ex", false),
                (&p.ss_ssl_write_ex_ret, "SSL_write_ex", true),
            ];
            let pids = if lib.pids.is_empty() {
                vec![-1]
            } else {
                lib.pids.clone()
            };
            let mut n = 0;
            for &pid in &pids {
                for (prog, func, ret) in probes {
                    let opts = libbpf_rs::UprobeOpts {
                        retprobe: ret,
                        func_name: Some(func.to_string()),
                        ..Default::default()
                    };
                    match prog.attach_uprobe_with_opts(pid, &lib.open, 0, opts) {
                        Ok(link) => {
                            self.links.push(link);
                            n += 1;
                        }
                        // The _ex calls are OpenSSL 1.1.1's: an older one
                        // has none.
                        Err(_) if func.ends_with("_ex") => {}
                        // A process gone since its maps were read.
                        Err(_)
                            if pid > 0
                                && !std::path::Path::new(&format!("/proc/{pid}")).exists() =>
                        {
                            break;
                        }
                        Err(e) => {
                            return Err(failed(
                                &format!(
                                    "--tls-plaintext: attaching to {func} in {}",
                                    crate::text::escape(&lib.shown)
                                ),
                                e,
                            ));
                        }
                    }
                }
            }
            if n > 0 {
                probed.push(lib.shown.clone());
            }
        }
        Ok(probed)
    }

    fn attach_socket_hooks(&mut self) -> Result<()> {
        let p = &self.skel.progs;
        for (prog, name) in [
            (&p.ss_data_ready, "sk_data_ready"),
            (&p.ss_recv, "sock_recv_length"),
            (&p.ss_send, "sock_send_length"),
        ] {
            let link = prog
                .attach()
                .map_err(|e| failed(&format!("attaching to {name}"), e))?;
            self.socket_links.push(link);
        }
        Ok(())
    }

    /// Sampled windows: detaches the per-request hooks (nothing runs per
    /// request until [`Programs::resume`]), closes the turns answered so
    /// far and leaves every connection's turn unknown.
    pub fn pause(&mut self) -> Result<()> {
        // Closed first: the three hooks stop changing turns at once, not
        // one by one as their links go.
        self.bss()?.window_open = 0;
        self.socket_links.clear();
        self.bss()?.pausing = 1;
        let done = self.run_close_iterator();
        self.bss()?.pausing = 0;
        done
    }

    /// Re-attaches the per-request hooks after a [`Programs::pause`]; a
    /// turn whose request came while paused is skipped, not timed.
    pub fn resume(&mut self) -> Result<()> {
        // All three attached before any changes a turn: a read seen
        // without its data's arrival (or a write without its read) would
        // look like a pipelined connection.
        self.attach_socket_hooks()?;
        let bss = self.bss()?;
        bss.resumed = 1;
        bss.window_open = 1;
        Ok(())
    }

    fn bss(&mut self) -> Result<&mut types::bss> {
        self.skel
            .maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("the anatomy BPF object has no .bss"))
    }

    /// Opens the window: turns are kept from now on. Returns its start
    /// (CLOCK_MONOTONIC ns).
    pub fn open_window(&mut self) -> Result<u64> {
        let now = monotonic_ns();
        let bss = self.bss()?;
        bss.window_start = now;
        bss.window_open = 1;
        Ok(now)
    }

    /// Switches the programs' own timing on or off (cost slices).
    pub fn set_cost(&mut self, on: bool) -> Result<()> {
        self.bss()?.cost_on = u32::from(on);
        Ok(())
    }

    /// Closes the window: no turn is kept after this; the programs are
    /// detached, then every answered turn still open is closed and the
    /// unanswered ones counted in flight.
    pub fn close_window(&mut self) -> Result<()> {
        {
            let bss = self.bss()?;
            bss.window_open = 0;
            bss.cost_on = 0;
        }
        self.links.clear();
        self.socket_links.clear();
        self.run_close_iterator()
    }

    /// Runs the iterator that closes every connection's turn in progress
    /// (the programs that change turns must be detached).
    fn run_close_iterator(&mut self) -> Result<()> {
        let link = self
            .skel
            .progs
            .ss_close_turns
            .attach()
            .map_err(|e| failed("attaching the end-of-window iterator", e))?;
        let mut it = Iter::new(&link).context("creating the end-of-window iterator")?;
        let mut sink = Vec::new();
        it.read_to_end(&mut sink)
            .context("running the end-of-window iterator")?;
        Ok(())
    }

    /// Everything the programs hold now.
    pub fn read(&mut self) -> Result<Counts> {
        let mut out = Counts::empty();
        let keys: Vec<Vec<u8>> = self.skel.maps.stats.keys().collect();
        for key in keys {
            let Some(k) = pod::read::<types::ss_anat_stats_key>(&key) else {
                bail!("short key in the per-port statistics");
            };
            let Some(transport) = Transport::from_number(k.proto) else {
                continue;
            };
            let per_cpu = self
                .skel
                .maps
                .stats
                .lookup_percpu(&key, MapFlags::ANY)
                .context("reading the per-port statistics")?
                .unwrap_or_default();
            out.ports
                .push(self.sum_cpus(&per_cpu, PortTurns::empty(k.port, transport))?);
        }
        out.ports.sort_by_key(|p| (p.transport, p.port));
        let per_cpu = self
            .skel
            .maps
            .stats_other
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .context("reading the overflow statistics")?
            .unwrap_or_default();
        out.other = self.sum_cpus(&per_cpu, PortTurns::empty(0, Transport::Tcp))?;
        out.names = self.read_names()?;
        self.poll()?;
        {
            let h2 = self.h2.borrow();
            out.names.extend(h2.names());
            out.h2 = h2.stats();
        }
        out.names.sort_by(|a, b| {
            (a.transport, a.port, a.wire, &a.name).cmp(&(b.transport, b.port, b.wire, &b.name))
        });
        let ncpus = self.ncpus;
        let bss = self.bss()?;
        for cpu in bss.cpus.iter().take(ncpus.max(1)) {
            for (sum, c) in out.count.iter_mut().zip(cpu.count.iter()).take(COUNTS) {
                *sum += c;
            }
            for (sum, p) in out.progs.iter_mut().zip(cpu.prog.iter()).take(PROGS) {
                add_runs(sum, p);
            }
        }
        Ok(out)
    }

    /// The command names' counts, sorted by transport, port, protocol,
    /// name.
    fn read_names(&self) -> Result<Vec<NameCounts>> {
        let map = &self.skel.maps.names;
        let mut out = Vec::new();
        for key in map.keys() {
            let Some(k) = pod::read::<types::ss_anat_name_key>(&key) else {
                bail!("short key in the command names");
            };
            let (Some(transport), Some(wire)) =
                (Transport::from_number(k.proto), Wire::from_number(k.wire))
            else {
                continue;
            };
            // Gone since the keys were listed: nothing to add.
            let Some(bytes) = map
                .lookup(&key, MapFlags::ANY)
                .context("reading the command names")?
            else {
                continue;
            };
            let Some(v) = pod::read_boxed::<types::ss_anat_name>(&bytes) else {
                bail!("short value in the command names");
            };
            // The kernel pads a shorter name with zeros (all zeros: "(other)").
            let name = &k.name[..NAME_LEN.min(k.name.len())];
            let len = name.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
            let name = if wire == Wire::Http1 && len > 0 {
                self.h1_text(name)?
            } else {
                name[..len].to_vec()
            };
            out.push(NameCounts {
                port: k.port,
                transport,
                wire,
                name,
                commands: v.commands,
                batched: v.batched,
                noreply: v.noreply,
                turns: v.turns,
                sum_ns: v.sum_ns,
                max_ns: v.max_ns,
                hist: v.hist.to_vec(),
                status: v.status,
                grpc: [0; super::counts::GRPC_CODES],
                parts: v.parts,
                by_band: v.by_band.to_vec(),
            });
        }
        out.sort_by(|a, b| {
            (a.transport, a.port, a.wire, &a.name).cmp(&(b.transport, b.port, b.wire, &b.name))
        });
        Ok(out)
    }

    /// An HTTP/1 name's text from its hash (the key's first 8 bytes):
    /// `…` marks a route cut at the kernel's length; a hash whose text is
    /// missing (not expected: the kernel writes it before the name
    /// counts) shows as `(route not kept)`.
    fn h1_text(&self, key_name: &[u8]) -> Result<Vec<u8>> {
        let hash = key_name.get(..8).context("short HTTP/1 name")?;
        let Some(bytes) = self
            .skel
            .maps
            .h1_routes
            .lookup(hash, MapFlags::ANY)
            .context("reading the HTTP/1 routes")?
        else {
            return Ok(b"(route not kept)".to_vec());
        };
        let Some(r) = pod::read::<types::ss_h1_route>(&bytes) else {
            bail!("short value in the HTTP/1 routes");
        };
        let len = usize::from(r.len).min(H1_TEXT);
        let mut text = r.text[..len].to_vec();
        if r.cut != 0 {
            text.extend_from_slice("…".as_bytes());
        }
        Ok(text)
    }

    fn sum_cpus(&self, per_cpu: &[Vec<u8>], mut acc: PortTurns) -> Result<PortTurns> {
        for bytes in per_cpu.iter().take(self.ncpus) {
            let Some(s) = pod::read_boxed::<types::ss_anat_stats>(bytes) else {
                bail!("short per-CPU value in the per-port statistics");
            };
            if s.turns == 0 {
                continue;
            }
            acc.turns += s.turns;
            for p in 0..PARTS {
                acc.sum_ns[p] += s.sum_ns[p];
                acc.max_ns[p] = acc.max_ns[p].max(s.max_ns[p]);
                let row = &s.hist[p * hist::BUCKETS..(p + 1) * hist::BUCKETS];
                for (a, b) in acc.hist[p].iter_mut().zip(row) {
                    *a += b;
                }
            }
            // Interleaved in the kernel: bucket b's four sums side by side.
            for (b, four) in s.by_server.chunks_exact(4).enumerate() {
                for (p, v) in four.iter().enumerate() {
                    acc.by_server[p][b] += v;
                }
            }
        }
        Ok(acc)
    }
}

fn add_runs(sum: &mut ProgRuns, p: &types::ss_anat_prog_cost) {
    sum.matched += p.matched;
    sum.filtered += p.filtered;
    sum.timed_matched += p.timed_matched;
    sum.timed_filtered += p.timed_filtered;
    sum.matched_ns += p.matched_ns;
    sum.filtered_ns += p.filtered_ns;
    sum.clock_ns += p.clock_ns;
}
