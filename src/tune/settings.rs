//! The settings `sockscope tune` audits, read from this machine as they are
//! now: sysctls under /proc/sys, the process's RLIMIT_NOFILE, transparent
//! huge pages, the CPU frequency governor, RPS/XPS masks and conntrack.
//! Only reads; nothing here writes anywhere.
//!
//! Network sysctls are per network namespace: they are read in the
//! namespace sockscope itself runs in, and so are the interfaces and the
//! listening ports. In a child namespace some sysctls exist only in the
//! host's: they read as [`HOST_NAMESPACE_ONLY`], not as missing.

use std::collections::BTreeMap;
use std::path::Path;

/// The sysctls the audit reads, by their sysctl name.
pub const SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.udp_mem",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_max_tw_buckets",
    "net.ipv4.tcp_syncookies",
    "net.core.busy_poll",
    "net.core.busy_read",
    "fs.file-max",
    "fs.nr_open",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_count",
];

/// Key of the soft RLIMIT_NOFILE.
pub const NOFILE_SOFT: &str = "RLIMIT_NOFILE (soft)";
/// Key of the hard RLIMIT_NOFILE.
pub const NOFILE_HARD: &str = "RLIMIT_NOFILE (hard)";
/// Key of /sys/kernel/mm/transparent_hugepage/enabled.
pub const THP_ENABLED: &str = "transparent_hugepage/enabled";
/// Key of /sys/kernel/mm/transparent_hugepage/defrag.
pub const THP_DEFRAG: &str = "transparent_hugepage/defrag";
/// Key of the CPU frequency governor(s).
pub const GOVERNOR: &str = "cpufreq governor";

/// One setting as read: its value, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The value, whitespace runs collapsed to one space ("4096 131072
    /// 6291456"); for THP the selected word ("madvise").
    Value(String),
    /// Not there on this machine, and why ("not loaded", "not exposed (no
    /// cpufreq)", "unreadable: Permission denied").
    Absent(String),
}

/// One network interface's receive/transmit steering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Steering {
    /// The interface (`eth0`).
    pub dev: String,
    /// `rps_cpus` of each receive queue, in queue order ("0", "3", "ff").
    pub rps: Vec<String>,
    /// `xps_cpus` of each transmit queue (empty strings where the file is
    /// absent or unreadable).
    pub xps: Vec<String>,
}

/// Everything the audit reads, at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// Settings by key: sysctl names and the `*_SOFT`/`THP_*`/`GOVERNOR`
    /// keys above.
    pub values: BTreeMap<String, Reading>,
    /// Non-loopback interfaces that are not down, with their queues.
    pub steering: Vec<Steering>,
    /// CPUs online (for RPS: fewer receive queues than CPUs).
    pub cpus: usize,
    /// Ports a wider ephemeral port range must not hand out. Read as the
    /// ports TCP sockets listen on in this network namespace (from
    /// /proc/self/net/tcp and tcp6), sorted, without repeats; `tune` and
    /// profile's advice replace them with the ports named (`--reserve`) or
    /// the target's, and keep the ones read only for a note.
    pub listening: Vec<u16>,
    /// Whether this is a child network namespace (not init's): sysctls
    /// only the host's namespace has are then absent here, not missing.
    pub child_netns: bool,
}

/// What an absent network sysctl says in a child network namespace: the
/// kernel registers some (netdev_max_backlog, busy_poll, udp_mem) only in
/// the host's (initial) namespace.
pub const HOST_NAMESPACE_ONLY: &str = "set in the host's namespace (not visible in this one)";

impl Settings {
    /// Reads this machine's current settings. Never fails: what cannot be
    /// read is a [`Reading::Absent`] with the reason.
    pub fn read() -> Settings {
        Self::read_from(Path::new("/proc/sys"), Path::new("/sys"))
    }

    /// [`Settings::read`] with other roots for /proc/sys and /sys.
    pub fn read_from(proc_sys: &Path, sys: &Path) -> Settings {
        let child_netns = child_netns();
        let mut values = BTreeMap::new();
        for name in SYSCTLS {
            values.insert(name.to_string(), read_sysctl(proc_sys, name, child_netns));
        }
        let (soft, hard) = nofile();
        values.insert(NOFILE_SOFT.into(), soft);
        values.insert(NOFILE_HARD.into(), hard);
        let thp = sys.join("kernel/mm/transparent_hugepage");
        values.insert(THP_ENABLED.into(), bracketed(&thp.join("enabled")));
        values.insert(THP_DEFRAG.into(), bracketed(&thp.join("defrag")));
        values.insert(GOVERNOR.into(), governors(&sys.join("devices/system/cpu")));
        Settings {
            values,
            steering: steering(&sys.join("class/net"), &namespace_interfaces()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            listening: listening_ports(),
            child_netns,
        }
    }

    /// The reading of `key` (Absent "not read" for a key never read).
    pub fn reading(&self, key: &str) -> Reading {
        self.values
            .get(key)
            .cloned()
            .unwrap_or_else(|| Reading::Absent("not read".into()))
    }

    /// The value of `key` as text: the value, or the reason it is absent.
    pub fn shown(&self, key: &str) -> String {
        match self.reading(key) {
            Reading::Value(v) => v,
            Reading::Absent(why) => why,
        }
    }

    /// The value of `key` when it was read.
    pub fn value(&self, key: &str) -> Option<String> {
        match self.reading(key) {
            Reading::Value(v) => Some(v),
            Reading::Absent(_) => None,
        }
    }

    /// The `i`-th whitespace-separated number of `key` ("tcp_rmem" 2: the
    /// max), when it is one.
    pub fn num_at(&self, key: &str, i: usize) -> Option<u64> {
        self.value(key)?.split_whitespace().nth(i)?.parse().ok()
    }

    /// The value of `key` as one number (the first, for several).
    pub fn num(&self, key: &str) -> Option<u64> {
        self.num_at(key, 0)
    }

    /// Settings with the given values and nothing else (tests, and
    /// callers that audit values they did not read here).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Settings {
        Settings {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Reading::Value(v.to_string())))
                .collect(),
            steering: Vec::new(),
            cpus: 1,
            listening: Vec::new(),
            child_netns: false,
        }
    }
}

/// Whether this process runs in a network namespace other than init's:
/// /proc/self/ns/net against pid 1's. Where pid 1's cannot be read (a
/// sandbox may refuse it from inside another namespace), the kernel's
/// own mark: net.core.netdev_max_backlog is registered in the initial
/// namespace only, somaxconn in every one.
fn child_netns() -> bool {
    let id = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    match (id("self"), id("1")) {
        (Some(a), Some(b)) => a != b,
        _ => {
            let has = |k: &str| sysctl_path(Path::new("/proc/sys"), k).exists();
            has("net.core.somaxconn") && !has("net.core.netdev_max_backlog")
        }
    }
}

/// Interfaces of this process's network namespace, with their index:
/// /proc/self/net/dev is per namespace, while /sys/class/net is the one
/// of whoever mounted /sys (`nsenter -n` keeps the host's).
fn namespace_interfaces() -> Vec<(String, u32)> {
    let text = std::fs::read_to_string("/proc/self/net/dev").unwrap_or_default();
    parse_net_dev(&text)
        .into_iter()
        .filter_map(|name| {
            let c = std::ffi::CString::new(name.clone()).ok()?;
            // SAFETY: a NUL-terminated name; the call only reads it.
            let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
            (index != 0).then_some((name, index))
        })
        .collect()
}

/// The interface names of /proc/net/dev (after its two header lines).
fn parse_net_dev(text: &str) -> Vec<String> {
    text.lines()
        .skip(2)
        .filter_map(|l| Some(l.split_once(':')?.0.trim().to_string()))
        .filter(|n| !n.is_empty())
        .collect()
}

/// TCP ports listened on in this network namespace.
fn listening_ports() -> Vec<u16> {
    let mut ports: Vec<u16> = ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .flat_map(|p| parse_listening(&std::fs::read_to_string(p).unwrap_or_default()))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The local ports of /proc/net/tcp{,6} rows in state 0A (LISTEN):
/// `sl local_address rem_address st ...`, the address `HEX:PORT`.
fn parse_listening(text: &str) -> Vec<u16> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let local = f.nth(1)?;
            let state = f.nth(1)?;
            if state != "0A" {
                return None;
            }
            u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()
        })
        .collect()
}

/// `net.core.somaxconn` -> /proc/sys/net/core/somaxconn.
pub fn sysctl_path(proc_sys: &Path, name: &str) -> std::path::PathBuf {
    proc_sys.join(name.replace('.', "/"))
}

fn read_sysctl(proc_sys: &Path, name: &str, child_netns: bool) -> Reading {
    let path = sysctl_path(proc_sys, name);
    match std::fs::read_to_string(&path) {
        Ok(s) => Reading::Value(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Reading::Absent(if name.starts_with("net.netfilter.nf_conntrack") {
                "not loaded".into()
            } else if child_netns && name.starts_with("net.") {
                HOST_NAMESPACE_ONLY.into()
            } else {
                "not in this kernel".into()
            })
        }
        Err(e) => Reading::Absent(format!("unreadable: {e}")),
    }
}

/// This process's RLIMIT_NOFILE: what a server started from the same shell
/// or service manager inherits.
fn nofile() -> (Reading, Reading) {
    let show = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        let e = std::io::Error::last_os_error();
        let r = Reading::Absent(format!("getrlimit: {e}"));
        return (r.clone(), r);
    }
    (
        Reading::Value(show(rl.rlim_cur)),
        Reading::Value(show(rl.rlim_max)),
    )
}

/// The bracketed choice of a sysfs selector ("always [madvise] never").
fn bracketed(path: &Path) -> Reading {
    match std::fs::read_to_string(path) {
        Ok(s) => match s.split_whitespace().find(|w| w.starts_with('[')) {
            Some(w) => Reading::Value(w.trim_matches(|c| c == '[' || c == ']').to_string()),
            None => Reading::Value(s.trim().to_string()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Reading::Absent("not exposed (no THP)".into())
        }
        Err(e) => Reading::Absent(format!("unreadable: {e}")),
    }
}

/// The scaling governors of the CPUs: one name when they agree, "NAME (N
/// CPUs), ..." when they differ.
fn governors(cpu_dir: &Path) -> Reading {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(cpu_dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let is_cpu = name
                .strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !is_cpu {
                continue;
            }
            if let Ok(g) = std::fs::read_to_string(e.path().join("cpufreq/scaling_governor")) {
                *seen.entry(g.trim().to_string()).or_default() += 1;
            }
        }
    }
    match seen.len() {
        0 => Reading::Absent("not exposed (no cpufreq)".into()),
        1 => Reading::Value(seen.into_keys().next().unwrap_or_default()),
        _ => Reading::Value(
            seen.iter()
                .map(|(g, n)| format!("{g} ({n} CPUs)"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// The RPS/XPS masks of every non-loopback interface of this network
/// namespace (`ours`: name and index) that is not down. An interface of
/// /sys/class/net whose name or index is not one of ours belongs to the
/// namespace /sys was mounted in, not this one: left out.
fn steering(class_net: &Path, ours: &[(String, u32)]) -> Vec<Steering> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(class_net) else {
        return out;
    };
    let mut devs: Vec<_> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|d| d != "lo")
        .filter(|d| {
            let index = std::fs::read_to_string(class_net.join(d).join("ifindex"))
                .ok()
                .and_then(|i| i.trim().parse::<u32>().ok());
            ours.iter().any(|(n, i)| n == d && Some(*i) == index)
        })
        .collect();
    devs.sort();
    for dev in devs {
        let dir = class_net.join(&dev);
        let state = std::fs::read_to_string(dir.join("operstate")).unwrap_or_default();
        if state.trim() == "down" {
            continue;
        }
        let queues = |prefix: &str, file: &str| -> Vec<String> {
            let mut qs: Vec<(u32, String)> = std::fs::read_dir(dir.join("queues"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let i: u32 = n.strip_prefix(prefix)?.parse().ok()?;
                    let v = std::fs::read_to_string(e.path().join(file)).unwrap_or_default();
                    Some((i, v.trim().to_string()))
                })
                .collect();
            qs.sort();
            qs.into_iter().map(|(_, v)| v).collect()
        };
        out.push(Steering {
            rps: queues("rx-", "rps_cpus"),
            xps: queues("tx-", "xps_cpus"),
            dev,
        });
    }
    out
}

/// Whether a CPU mask ("0", "00000000,00000003") selects no CPU.
pub fn mask_is_empty(mask: &str) -> bool {
    mask.chars().all(|c| c == '0' || c == ',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctls_are_read_collapsed_and_absent_ones_say_why() {
        let root = tempfile::tempdir().unwrap();
        let ps = root.path().join("proc_sys");
        std::fs::create_dir_all(ps.join("net/ipv4")).unwrap();
        std::fs::write(ps.join("net/ipv4/tcp_rmem"), "4096\t131072\t6291456\n").unwrap();
        let sys = root.path().join("sys");
        std::fs::create_dir_all(sys.join("kernel/mm/transparent_hugepage")).unwrap();
        std::fs::write(
            sys.join("kernel/mm/transparent_hugepage/enabled"),
            "always [madvise] never\n",
        )
        .unwrap();
        let s = Settings::read_from(&ps, &sys);
        assert_eq!(s.value("net.ipv4.tcp_rmem").unwrap(), "4096 131072 6291456");
        assert_eq!(s.num_at("net.ipv4.tcp_rmem", 2), Some(6291456));
        assert_eq!(s.shown("net.netfilter.nf_conntrack_max"), "not loaded");
        assert_eq!(s.shown("net.core.somaxconn"), "not in this kernel");
        assert_eq!(s.value(THP_ENABLED).unwrap(), "madvise");
        assert_eq!(s.shown(THP_DEFRAG), "not exposed (no THP)");
        assert_eq!(s.shown(GOVERNOR), "not exposed (no cpufreq)");
    }

    #[test]
    fn listening_ports_and_interface_names_are_parsed() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n\
   1: 0100007F:C350 0100007F:07E8 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n";
        assert_eq!(parse_listening(tcp), vec![2024]);
        let tcp6 = "  sl  local_address remote_address st\n\
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0\n";
        assert_eq!(parse_listening(tcp6), vec![8080]);
        assert!(parse_listening("garbage\n0: x y\n").is_empty());
        let dev = "Inter-|   Receive\n face |bytes\n    lo: 1 2 3\n  eth0: 4 5 6\n";
        assert_eq!(parse_net_dev(dev), ["lo", "eth0"]);
    }

    #[test]
    fn in_a_child_namespace_a_missing_net_sysctl_is_the_hosts() {
        let root = tempfile::tempdir().unwrap();
        let p = root.path();
        assert_eq!(
            read_sysctl(p, "net.core.busy_poll", true),
            Reading::Absent(HOST_NAMESPACE_ONLY.into())
        );
        assert_eq!(
            read_sysctl(p, "net.core.busy_poll", false),
            Reading::Absent("not in this kernel".into())
        );
        assert_eq!(
            read_sysctl(p, "fs.nr_open", true),
            Reading::Absent("not in this kernel".into())
        );
        assert_eq!(
            read_sysctl(p, "net.netfilter.nf_conntrack_max", true),
            Reading::Absent("not loaded".into())
        );
    }

    #[test]
    fn governors_and_queues_are_read_per_cpu_and_per_interface() {
        let root = tempfile::tempdir().unwrap();
        let cpu = root.path().join("devices/system/cpu");
        for (i, g) in ["performance", "performance", "powersave"]
            .iter()
            .enumerate()
        {
            let d = cpu.join(format!("cpu{i}/cpufreq"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("scaling_governor"), format!("{g}\n")).unwrap();
        }
        std::fs::create_dir_all(cpu.join("cpufreq")).unwrap();
        assert_eq!(
            governors(&cpu),
            Reading::Value("performance (2 CPUs), powersave (1 CPUs)".into())
        );
        let net = root.path().join("class/net");
        for (dev, state) in [("eth0", "up"), ("lo", "unknown"), ("ifb0", "down")] {
            for q in ["rx-1", "rx-0", "tx-0"] {
                let d = net.join(dev).join("queues").join(q);
                std::fs::create_dir_all(&d).unwrap();
                let file = if q.starts_with("rx") {
                    "rps_cpus"
                } else {
                    "xps_cpus"
                };
                std::fs::write(d.join(file), if q == "rx-1" { "3\n" } else { "0\n" }).unwrap();
            }
            std::fs::write(net.join(dev).join("operstate"), state).unwrap();
        }
        for (dev, index) in [("eth0", "2"), ("lo", "1"), ("ifb0", "3"), ("veth9", "9")] {
            std::fs::create_dir_all(net.join(dev)).unwrap();
            std::fs::write(net.join(dev).join("ifindex"), format!("{index}\n")).unwrap();
        }
        let ours = [("eth0".to_string(), 2), ("ifb0".to_string(), 3)];
        let st = steering(&net, &ours);
        assert_eq!(st.len(), 1, "{st:?}");
        assert_eq!(st[0].dev, "eth0");
        assert_eq!(st[0].rps, vec!["0", "3"]);
        assert_eq!(st[0].xps, vec!["0"]);
        // /sys mounted in another namespace: its eth0 (index 2) is not
        // this namespace's eth0 (index 5), and veth9 is not ours at all.
        assert!(steering(&net, &[("eth0".to_string(), 5)]).is_empty());
        assert!(mask_is_empty("00000000,00000000"));
        assert!(!mask_is_empty("3"));
    }

    // Property tests: /proc/net/dev and /proc/net/tcp written from a
    // model parse back to the interface names and the listening ports;
    // mutated files parse to names and ports or fewer, never a panic.

    use crate::hostile;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn net_dev_and_tcp_tables_round_trip_and_mutations_never_panic(
            devs in prop::collection::vec(prop::collection::vec(prop::sample::select(b"abcxyz019-_.@".to_vec()), 1..15), 0..5),
            socks in prop::collection::vec((any::<u16>(), prop::sample::select(vec![0x0Au8, 0x01, 0x06])), 0..6),
            ms in hostile::mutations(),
        ) {
            let mut dev = "Inter-|   Receive\n face |bytes    packets\n".to_string();
            let mut want = Vec::new();
            for d in &devs {
                let name = String::from_utf8(d.clone()).unwrap();
                dev += &format!("{name:>6}: 1234 5 0 0 0 0 0 0 1234 5 0 0 0 0 0 0\n");
                want.push(name);
            }
            prop_assert_eq!(parse_net_dev(&dev), want);
            let _ = parse_net_dev(&hostile::mutate_text(&dev, &ms));
            let mut tcp = "  sl  local_address rem_address   st tx_queue\n".to_string();
            let mut ports = Vec::new();
            for (i, (port, st)) in socks.iter().enumerate() {
                tcp += &format!("{i:4}: 0100007F:{port:04X} 00000000:0000 {st:02X} 00000000:00000000 00:00000000 00000000     0        0 1 1\n");
                if *st == 0x0A {
                    ports.push(*port);
                }
            }
            prop_assert_eq!(parse_listening(&tcp), ports);
            let _ = parse_listening(&hostile::mutate_text(&tcp, &ms));
        }
    }
}
