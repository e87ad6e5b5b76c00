//! What each goal wants of each audited setting, and why: pure functions
//! from [`Settings`] and a [`Goal`] to audit rows. The values and their
//! sources are in docs/tune.md (kernel documentation: ip-sysctl.rst,
//! admin-guide/sysctl/net.rst and fs.rst, networking/scaling.rst,
//! admin-guide/mm/transhuge.rst, admin-guide/pm/cpufreq.rst).
//!
//! A row whose goal has no preference says "-" and is ok: nothing is
//! advised that the goal does not need.

use crate::report::tune::AuditRow;

use super::settings::{self, Reading, Settings};

/// What the server is tuned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Goal {
    /// Short, predictable response times (request/response traffic).
    Latency,
    /// Bytes per second over few connections (bulk transfers).
    Throughput,
    /// Many connections, or many new connections per second.
    Connections,
}

impl Goal {
    /// Its name, as `--for` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Throughput => "throughput",
            Self::Connections => "connections",
        }
    }
}

/// The kernel default of net.core.somaxconn since Linux 5.4.
pub const SOMAXCONN_DEFAULT: u64 = 4096;
/// 16 MiB: a bandwidth-delay product of 10 Gbit/s x 12.5 ms.
pub const BIG_BUFFER: u64 = 16 * 1024 * 1024;
/// The widest usual ephemeral port range ("1024 65535": different parity,
/// as ip-sysctl.rst asks).
pub const WIDE_PORT_RANGE: (u64, u64) = (1024, 65535);
/// A port range at least this wide counts as wide.
pub const WIDE_PORTS: u64 = 50_000;

/// The audit of `s` for `goal`: one row per setting (one per interface for
/// RPS/XPS), in a fixed order.
pub fn audit(s: &Settings, goal: Goal) -> Vec<AuditRow> {
    use Goal::*;
    let mut rows = vec![
        at_least(
            s,
            "net.core.somaxconn",
            Some(SOMAXCONN_DEFAULT),
            match goal {
                Connections => {
                    "caps every listen() backlog: a connect burst beyond it overflows the accept queue (4096 is the default since 5.4)"
                }
                _ => {
                    "caps every listen() backlog: an overflow drops the SYN and the client retries 1 s later (4096 is the default since 5.4)"
                }
            },
        ),
        syn_backlog(
            s,
            (goal == Connections).then_some(4096),
            "SYN_RECV requests kept per listener; with tcp_syncookies=0, SYNs beyond 3/4 of it are dropped",
        ),
        at_least(
            s,
            "net.core.netdev_max_backlog",
            None,
            "per-CPU input queue before the protocol stack; double it when softnet_stat counts drops (--from a run shows them)",
        ),
        at_least(
            s,
            "net.core.netdev_budget",
            None,
            "packets one NAPI poll cycle may take; raise it when softnet_stat counts time_squeeze (--from a run shows it)",
        ),
        at_least(
            s,
            "net.core.rmem_default",
            None,
            "receive buffer of sockets that set no SO_RCVBUF, UDP ones included (TCP starts at tcp_rmem's middle value)",
        ),
        at_least(
            s,
            "net.core.rmem_max",
            (goal == Throughput).then_some(BIG_BUFFER),
            match goal {
                Throughput => {
                    "caps SO_RCVBUF: a program that sizes its buffer to the bandwidth-delay product (10 Gbit/s x 12.5 ms = 16 MiB) gets no more"
                }
                _ => "caps SO_RCVBUF a program sets; the default suits small messages",
            },
        ),
        at_least(
            s,
            "net.core.wmem_default",
            None,
            "send buffer of sockets that set no SO_SNDBUF (TCP starts at tcp_wmem's middle value)",
        ),
        at_least(
            s,
            "net.core.wmem_max",
            (goal == Throughput).then_some(BIG_BUFFER),
            match goal {
                Throughput => {
                    "caps SO_SNDBUF: a sender sized to the bandwidth-delay product (16 MiB at 10 Gbit/s x 12.5 ms) gets no more"
                }
                _ => "caps SO_SNDBUF a program sets; the default suits small messages",
            },
        ),
        triple_max(
            s,
            "net.ipv4.tcp_rmem",
            (goal == Throughput).then_some(BIG_BUFFER),
            match goal {
                Throughput => {
                    "min default max: autotuning grows a connection's receive window up to max; it must cover the bandwidth-delay product"
                }
                Connections => {
                    "min default max per connection: keep the default (middle) small, each of many connections starts there"
                }
                Latency => "min default max: small request/response messages never reach the max",
            },
        ),
        triple_max(
            s,
            "net.ipv4.tcp_wmem",
            (goal == Throughput).then_some(BIG_BUFFER),
            match goal {
                Throughput => {
                    "min default max: autotuning grows a connection's send buffer up to max; it must cover the bandwidth-delay product"
                }
                Connections => {
                    "min default max per connection: keep the default (middle) small, each of many connections starts there"
                }
                Latency => "min default max: small request/response messages never reach the max",
            },
        ),
        at_least(
            s,
            "net.ipv4.udp_mem",
            None,
            "pages all UDP sockets may hold (min pressure max), sized from memory at boot; drops at max count as Udp.RcvbufErrors too",
        ),
        reserved_ports(s, goal == Connections),
        port_range(s, goal),
        equal(
            s,
            "net.ipv4.tcp_tw_reuse",
            (goal == Connections).then_some("1"),
            "lets connect() reuse a TIME_WAIT port when TCP timestamps make it safe; it acts on the CONNECTING side (clients, proxies' upstreams); 2 (the default) = loopback only",
        ),
        at_most(
            s,
            "net.ipv4.tcp_fin_timeout",
            (goal == Connections).then_some(30),
            "how long an orphaned connection stays in FIN_WAIT_2; it does not shorten TIME_WAIT (fixed at 60 s)",
        ),
        at_least(
            s,
            "net.ipv4.tcp_max_tw_buckets",
            None,
            "TIME_WAIT sockets kept system-wide; beyond it they are destroyed early and TcpExt.TCPTimeWaitOverflow counts them",
        ),
        equal(
            s,
            "net.ipv4.tcp_syncookies",
            Some("1"),
            "1 answers a SYN queue overflow with cookies instead of dropping the SYN; 2 sends them always (and loses TCP options)",
        ),
        busy(s, "net.core.busy_poll", goal),
        busy(s, "net.core.busy_read", goal),
        at_least(
            s,
            "fs.file-max",
            (goal == Connections).then_some(1_048_576),
            "open files system-wide; every connection is one",
        ),
        at_least(
            s,
            "fs.nr_open",
            (goal == Connections).then_some(1_048_576),
            "the ceiling of RLIMIT_NOFILE's hard limit (the default is 1048576)",
        ),
        nofile(s, settings::NOFILE_SOFT, goal),
        nofile(s, settings::NOFILE_HARD, goal),
        thp(s, settings::THP_ENABLED, goal),
        thp(s, settings::THP_DEFRAG, goal),
        governor(s, goal),
    ];
    rows.extend(steering(s, goal));
    rows.push(conntrack(s, goal));
    rows
}

/// A row, with its sysctl line when `key` is a sysctl that must change.
fn row(
    key: &str,
    current: String,
    advised: String,
    ok: bool,
    why: &str,
    set: Option<String>,
) -> AuditRow {
    AuditRow {
        setting: key.to_string(),
        current,
        advised,
        ok,
        why: why.to_string(),
        evidence: None,
        sysctl: if ok {
            None
        } else {
            set.map(|v| format!("{key} = {v}"))
        },
    }
}

/// A row for a setting this machine does not have (or could not read):
/// nothing to change here.
fn absent(key: &str, why_absent: String, advised: String, why: &str) -> AuditRow {
    row(key, why_absent, advised, true, why, None)
}

/// `key` (a number) >= `min`; None: the goal has no preference.
pub(crate) fn at_least(s: &Settings, key: &str, min: Option<u64>, why: &str) -> AuditRow {
    let advised = min.map_or("-".to_string(), |m| format!(">= {m}"));
    match (s.reading(key), s.num(key), min) {
        (Reading::Absent(w), _, _) => absent(key, w, advised, why),
        (Reading::Value(v), Some(cur), Some(m)) => {
            row(key, v, advised, cur >= m, why, Some(m.to_string()))
        }
        (Reading::Value(v), _, _) => row(key, v, advised, true, why, None),
    }
}

/// `key` (a number) <= `max`.
fn at_most(s: &Settings, key: &str, max: Option<u64>, why: &str) -> AuditRow {
    let advised = max.map_or("-".to_string(), |m| format!("<= {m}"));
    match (s.reading(key), s.num(key), max) {
        (Reading::Absent(w), _, _) => absent(key, w, advised, why),
        (Reading::Value(v), Some(cur), Some(m)) => {
            row(key, v, advised, cur <= m, why, Some(m.to_string()))
        }
        (Reading::Value(v), _, _) => row(key, v, advised, true, why, None),
    }
}

/// `key` == `want`.
fn equal(s: &Settings, key: &str, want: Option<&str>, why: &str) -> AuditRow {
    let advised = want.unwrap_or("-").to_string();
    match (s.reading(key), want) {
        (Reading::Absent(w), _) => absent(key, w, advised, why),
        (Reading::Value(v), Some(want)) => {
            let ok = v == want;
            row(key, v, advised, ok, why, Some(want.to_string()))
        }
        (Reading::Value(v), None) => row(key, v, advised, true, why, None),
    }
}

/// "min default max" settings: the max (third value) >= `min_max`; the
/// sysctl line keeps the first two values.
pub(crate) fn triple_max(s: &Settings, key: &str, min_max: Option<u64>, why: &str) -> AuditRow {
    let advised = min_max.map_or("-".to_string(), |m| format!("max >= {m}"));
    let (Some(v), Some(lo), Some(mid), Some(max)) = (
        s.value(key),
        s.num_at(key, 0),
        s.num_at(key, 1),
        s.num_at(key, 2),
    ) else {
        return absent(key, s.shown(key), advised, why);
    };
    match min_max {
        Some(m) => row(
            key,
            v,
            advised,
            max >= m,
            why,
            Some(format!("{lo} {mid} {m}")),
        ),
        None => row(key, v, advised, true, why, None),
    }
}

/// Whether SYN cookies are on (1: when the SYN queue is full, 2:
/// always): a full SYN queue then answers instead of dropping, and
/// tcp_max_syn_backlog no longer bounds anything.
pub(crate) fn syncookies_on(s: &Settings) -> Option<String> {
    s.value("net.ipv4.tcp_syncookies")
        .filter(|v| v == "1" || v == "2")
}

/// `net.ipv4.tcp_max_syn_backlog` >= `min`, unless SYN cookies are on:
/// then it is not needed, whatever it is.
pub(crate) fn syn_backlog(s: &Settings, min: Option<u64>, why: &str) -> AuditRow {
    let key = "net.ipv4.tcp_max_syn_backlog";
    match (syncookies_on(s), min) {
        (Some(c), Some(_)) => row(
            key,
            s.shown(key),
            "-".into(),
            true,
            &format!(
                "not needed while tcp_syncookies={c}: a full SYN queue answers with cookies instead of dropping; it matters only with cookies off ({why})"
            ),
            None,
        ),
        _ => at_least(s, key, min, why),
    }
}

/// The ports a widening of the ephemeral range to `WIDE_PORT_RANGE`
/// would newly hand out to connect() although a service listens on them:
/// the listening ports outside the current range and inside the new one,
/// not already reserved. Empty when the range is not read.
pub(crate) fn exposed_ports(s: &Settings) -> Vec<u16> {
    let key = "net.ipv4.ip_local_port_range";
    let (Some(a), Some(b)) = (s.num_at(key, 0), s.num_at(key, 1)) else {
        return Vec::new();
    };
    let (lo, hi) = WIDE_PORT_RANGE;
    let reserved = s
        .value("net.ipv4.ip_local_reserved_ports")
        .unwrap_or_default();
    s.listening
        .iter()
        .copied()
        .filter(|&p| {
            let p64 = u64::from(p);
            (lo..=hi).contains(&p64) && !(a..=b).contains(&p64) && !reserved_has(&reserved, p)
        })
        .collect()
}

/// Whether `list` (ip_local_reserved_ports: "8080,9000-9010") holds
/// `port`.
fn reserved_has(list: &str, port: u16) -> bool {
    list.split(',').map(str::trim).any(|item| {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        matches!((a.trim().parse::<u16>(), b.trim().parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&port))
    })
}

/// `net.ipv4.ip_local_reserved_ports`: when the range is to be widened
/// (`widening`, and the range is narrower than [`WIDE_PORTS`]), the
/// listening ports the wider range would newly hand out, added to what is
/// reserved already; otherwise no preference. A port connect() took
/// first makes the service's bind() fail with EADDRINUSE when it restarts.
pub(crate) fn reserved_ports(s: &Settings, widening: bool) -> AuditRow {
    let key = "net.ipv4.ip_local_reserved_ports";
    let current = match s.reading(key) {
        Reading::Value(v) if v.is_empty() => "none".to_string(),
        Reading::Value(v) => v,
        Reading::Absent(w) => w,
    };
    let range = "net.ipv4.ip_local_port_range";
    let narrow = match (s.num_at(range, 0), s.num_at(range, 1)) {
        (Some(a), Some(b)) => b.saturating_sub(a) + 1 < WIDE_PORTS,
        _ => false,
    };
    let exposed = exposed_ports(s);
    let why = "ports connect() never picks from the ephemeral range: a service's port inside the range may be taken by an outgoing connection before the service binds it";
    if !widening || !narrow || exposed.is_empty() || s.value(key).is_none() {
        return row(key, current, "-".into(), true, why, None);
    }
    let added: Vec<String> = exposed.iter().map(u16::to_string).collect();
    let old = s.value(key).unwrap_or_default();
    let value = if old.is_empty() {
        added.join(",")
    } else {
        format!("{old},{}", added.join(","))
    };
    let (lo, hi) = WIDE_PORT_RANGE;
    row(
        key,
        current,
        value.clone(),
        false,
        &format!(
            "the port range advised below ({lo} {hi}) takes in ports services listen on here ({}): reserve them first, or an outgoing connection may hold one when its service restarts",
            added.join(", ")
        ),
        Some(value),
    )
}

fn port_range(s: &Settings, goal: Goal) -> AuditRow {
    let key = "net.ipv4.ip_local_port_range";
    let why = "ephemeral ports for outgoing connections (the CONNECTING side): each lasts 60 s in TIME_WAIT after an active close, so the width bounds new connections per second per destination";
    let (lo, hi) = WIDE_PORT_RANGE;
    if goal != Goal::Connections {
        return equal(s, key, None, why);
    }
    let advised = format!("{lo} {hi}");
    match (s.value(key), s.num_at(key, 0), s.num_at(key, 1)) {
        (Some(v), Some(a), Some(b)) => {
            let ok = b.saturating_sub(a) + 1 >= WIDE_PORTS;
            let why = format!(
                "{why}; {WIDE_PORTS}+ ports count as wide; the services' ports the wider range \
                 takes in are reserved by net.ipv4.ip_local_reserved_ports (its own row)"
            );
            row(key, v, advised.clone(), ok, &why, Some(advised))
        }
        _ => absent(key, s.shown(key), advised, why),
    }
}

fn busy(s: &Settings, key: &str, goal: Goal) -> AuditRow {
    let what = if key.ends_with("busy_poll") {
        "poll/select/epoll"
    } else {
        "blocking reads"
    };
    match goal {
        Goal::Latency => {
            let why = format!(
                "{what} spin up to 50 us on the device queue instead of sleeping: less wake-up latency for more CPU; needs a NIC with busy-poll support (not loopback); 50 is the documented value"
            );
            at_least(s, key, Some(50), &why)
        }
        _ => {
            let why = format!(
                "{what} would spin on the device queue, burning CPU that throughput and connection handling need"
            );
            equal(s, key, Some("0"), &why)
        }
    }
}

fn nofile(s: &Settings, key: &str, goal: Goal) -> AuditRow {
    let soft = key == settings::NOFILE_SOFT;
    let how = if soft {
        "ulimit -n, or LimitNOFILE= in the service unit"
    } else {
        "limits.conf, or LimitNOFILE= in the service unit"
    };
    let (min, why) = match (goal, soft) {
        (Goal::Connections, true) => (
            Some(65_536),
            format!(
                "every connection is a descriptor: at 1024 a server stops near 1,000 connections (EMFILE) unless it raises its own limit; this shell's value, which servers started from it inherit ({how})"
            ),
        ),
        (Goal::Connections, false) => (
            Some(524_288),
            format!(
                "how far a server may raise its own soft limit (systemd's default since v240 is 524288); this shell's value ({how})"
            ),
        ),
        _ => (
            None,
            "descriptors a server started from this shell may open; few connections need few"
                .to_string(),
        ),
    };
    let advised = min.map_or("-".to_string(), |m| format!(">= {m}"));
    match (s.reading(key), s.value(key), min) {
        (Reading::Absent(w), _, _) => absent(key, w, advised, &why),
        (_, Some(v), Some(m)) => {
            let ok = v == "unlimited" || v.parse::<u64>().is_ok_and(|c| c >= m);
            row(key, v, advised, ok, &why, None)
        }
        (_, Some(v), None) => row(key, v, advised, true, &why, None),
        (_, None, _) => absent(key, s.shown(key), advised, &why),
    }
}

fn thp(s: &Settings, key: &str, goal: Goal) -> AuditRow {
    let enabled = key == settings::THP_ENABLED;
    let path = format!("/sys/kernel/mm/{key}");
    let (advised, why) = match (goal, enabled) {
        (Goal::Latency, true) => (
            "madvise",
            format!(
                "`always` lets khugepaged and page faults compact memory behind the server's back (latency spikes; Redis and databases ask for it off): echo madvise > {path}"
            ),
        ),
        (Goal::Latency, false) => (
            "madvise",
            format!(
                "`always` makes a page fault stall in direct compaction to get a huge page: echo madvise > {path}"
            ),
        ),
        _ => (
            "-",
            "huge pages cut TLB misses; the stalls they can cost matter for latency, not here"
                .to_string(),
        ),
    };
    match s.reading(key) {
        Reading::Absent(w) => absent(key, w, advised.into(), &why),
        Reading::Value(v) => {
            let ok = advised == "-" || v != "always";
            row(key, v, advised.into(), ok, &why, None)
        }
    }
}

fn governor(s: &Settings, goal: Goal) -> AuditRow {
    let key = settings::GOVERNOR;
    let (advised, why) = match goal {
        Goal::Latency => (
            "performance",
            "other governors lower the clock when idle and raise it only after load is seen: the first requests after a pause run slow (cpupower frequency-set -g performance)",
        ),
        Goal::Throughput => (
            "performance",
            "the highest clock all the time: no ramp-up when a burst starts (cpupower frequency-set -g performance)",
        ),
        Goal::Connections => (
            "-",
            "the clock matters for per-request time, not for how many connections fit",
        ),
    };
    match s.reading(key) {
        Reading::Absent(w) => absent(
            key,
            w,
            advised.into(),
            "the hypervisor or firmware sets the clock here: nothing to change from inside",
        ),
        Reading::Value(v) => {
            let ok = advised == "-" || v == "performance";
            row(key, v, advised.into(), ok, why, None)
        }
    }
}

/// One RPS and one XPS row per interface (RPS/XPS are not sysctls: they
/// are masks under /sys/class/net/DEV/queues).
fn steering(s: &Settings, goal: Goal) -> Vec<AuditRow> {
    if s.steering.is_empty() {
        return vec![absent(
            "RPS/XPS",
            "no non-loopback interface up".into(),
            "-".into(),
            "receive/transmit steering applies to real interfaces only",
        )];
    }
    let all = all_cpus_mask(s.cpus);
    let mut rows = Vec::new();
    for st in &s.steering {
        let rx = st.rps.len();
        let on = st
            .rps
            .iter()
            .filter(|m| !settings::mask_is_empty(m))
            .count();
        let current = format!("{rx} rx queues, RPS on {on}");
        let key = format!("RPS {}", st.dev);
        let few_queues = rx < s.cpus;
        let r = match goal {
            Goal::Latency => row(
                &key,
                current,
                "-".into(),
                true,
                "RPS hands packets to another CPU (one more hop); use it only when one CPU's softirq time is saturated",
                None,
            ),
            _ if few_queues && on == 0 => row(
                &key,
                current,
                format!("rps_cpus = {all}"),
                false,
                &format!(
                    "{rx} receive queue(s) for {} CPUs: all protocol processing lands on the interrupted CPU; RPS spreads it (echo {all} > /sys/class/net/{}/queues/rx-*/rps_cpus)",
                    s.cpus, st.dev
                ),
                None,
            ),
            _ => row(
                &key,
                current,
                "-".into(),
                true,
                "enough receive queues for the CPUs, or RPS already set",
                None,
            ),
        };
        rows.push(r);
        let tx = st.xps.len();
        let mapped = st
            .xps
            .iter()
            .filter(|m| !settings::mask_is_empty(m))
            .count();
        let key = format!("XPS {}", st.dev);
        let current = format!("{tx} tx queues, XPS on {mapped}");
        rows.push(if tx > 1 && mapped == 0 && goal != Goal::Connections {
            row(
                &key,
                current,
                "map CPUs to tx queues".into(),
                false,
                &format!(
                    "without XPS CPUs share transmit queues by hash: lock contention and completions on other CPUs (/sys/class/net/{}/queues/tx-N/xps_cpus)",
                    st.dev
                ),
                None,
            )
        } else {
            row(
                &key,
                current,
                "-".into(),
                true,
                if tx <= 1 {
                    "one transmit queue: nothing to map"
                } else {
                    "transmit queues mapped, or the goal does not need it"
                },
                None,
            )
        });
    }
    rows
}

/// The hex mask of CPUs 0..n ("3" for 2 CPUs), in 32-bit groups as sysfs
/// writes it.
pub fn all_cpus_mask(n: usize) -> String {
    let n = n.max(1);
    let mut groups = Vec::new();
    let mut left = n;
    while left > 0 {
        let bits = left.min(32);
        let g: u64 = if bits == 32 {
            0xffff_ffff
        } else {
            (1u64 << bits) - 1
        };
        groups.push(format!("{g:x}"));
        left -= bits;
    }
    groups.reverse();
    if groups.len() > 1 {
        for g in groups.iter_mut().skip(1) {
            *g = format!("{:0>8}", g);
        }
    }
    groups.join(",")
}

fn conntrack(s: &Settings, goal: Goal) -> AuditRow {
    let key = "net.netfilter.nf_conntrack_max";
    let why_loaded = "every tracked connection (TIME_WAIT included) takes an entry; when the table is full new connections are dropped (\"nf_conntrack: table full\")";
    let (Some(v), Some(max)) = (s.value(key), s.num(key)) else {
        return absent(
            key,
            s.shown(key),
            "-".into(),
            "connection tracking is off: no table to fill",
        );
    };
    let count = s.num("net.netfilter.nf_conntrack_count");
    let current = match count {
        Some(c) => format!("{v} ({c} in use)"),
        None => v,
    };
    let min = match goal {
        Goal::Connections => 262_144,
        _ => 0,
    };
    // A table 80% full is close to dropping whatever goal.
    let busy_need = count.map_or(0, |c| c.saturating_mul(5) / 4);
    let need = min.max(busy_need);
    let advised = if need == 0 {
        "-".to_string()
    } else {
        format!(">= {need}")
    };
    row(
        key,
        current,
        advised,
        max >= need,
        why_loaded,
        Some(need.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Settings {
        Settings::from_pairs(&[
            ("net.core.somaxconn", "4096"),
            ("net.ipv4.tcp_max_syn_backlog", "2048"),
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.ip_local_port_range", "32768 60999"),
            ("net.ipv4.tcp_tw_reuse", "2"),
            ("net.ipv4.tcp_fin_timeout", "60"),
            ("net.ipv4.tcp_syncookies", "1"),
            ("net.core.busy_poll", "0"),
            ("net.core.busy_read", "0"),
            ("fs.file-max", "2466193"),
            ("fs.nr_open", "1048576"),
            (settings::NOFILE_SOFT, "1024"),
            (settings::NOFILE_HARD, "524288"),
            (settings::THP_ENABLED, "always"),
            (settings::THP_DEFRAG, "madvise"),
            (settings::GOVERNOR, "powersave"),
        ])
    }

    fn find(rows: &[AuditRow], key: &str) -> AuditRow {
        rows.iter()
            .find(|r| r.setting == key)
            .cloned()
            .unwrap_or_else(|| panic!("no row {key}"))
    }

    #[test]
    fn connections_want_backlogs_ports_tw_reuse_and_descriptors() {
        let rows = audit(&host(), Goal::Connections);
        let r = find(&rows, "net.ipv4.ip_local_port_range");
        assert!(!r.ok);
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.ipv4.ip_local_port_range = 1024 65535")
        );
        let r = find(&rows, "net.ipv4.tcp_tw_reuse");
        assert!(!r.ok);
        assert_eq!(r.sysctl.as_deref(), Some("net.ipv4.tcp_tw_reuse = 1"));
        assert!(r.why.contains("CONNECTING"));
        assert!(find(&rows, "net.core.somaxconn").ok);
        // SYN cookies are on: the SYN backlog is not needed (issue 22).
        let r = find(&rows, "net.ipv4.tcp_max_syn_backlog");
        assert!(r.ok && r.sysctl.is_none() && r.advised == "-", "{r:?}");
        assert!(
            r.why.starts_with("not needed while tcp_syncookies=1"),
            "{r:?}"
        );
        let r = find(&rows, settings::NOFILE_SOFT);
        assert!(!r.ok && r.sysctl.is_none(), "{r:?}");
        assert!(find(&rows, settings::NOFILE_HARD).ok);
        // Not a latency goal: busy polling off is right, THP no matter.
        assert!(find(&rows, "net.core.busy_poll").ok);
        assert!(find(&rows, settings::THP_ENABLED).ok);
    }

    #[test]
    fn the_syn_backlog_matters_only_with_cookies_off() {
        let mut s = host();
        for (cookies, ok) in [("0", false), ("1", true), ("2", true)] {
            s.values.insert(
                "net.ipv4.tcp_syncookies".into(),
                Reading::Value(cookies.into()),
            );
            let r = find(
                &audit(&s, Goal::Connections),
                "net.ipv4.tcp_max_syn_backlog",
            );
            assert_eq!(r.ok, ok, "syncookies {cookies}: {r:?}");
            if !ok {
                assert_eq!(
                    r.sysctl.as_deref(),
                    Some("net.ipv4.tcp_max_syn_backlog = 4096")
                );
            }
        }
    }

    /// Issue 22: "1024 65535" hands out the ports services listen on below
    /// 32768; they are reserved in the same snippet, before the range.
    #[test]
    fn widening_the_port_range_reserves_the_services_ports_it_takes_in() {
        let mut s = host();
        s.values.insert(
            "net.ipv4.ip_local_reserved_ports".into(),
            Reading::Value(String::new()),
        );
        s.listening = vec![22, 2024, 5432, 40000];
        let rows = audit(&s, Goal::Connections);
        let at = |k: &str| rows.iter().position(|r| r.setting == k).unwrap();
        let r = find(&rows, "net.ipv4.ip_local_reserved_ports");
        assert!(!r.ok && r.current == "none", "{r:?}");
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.ipv4.ip_local_reserved_ports = 2024,5432")
        );
        assert!(r.why.contains("2024, 5432"), "{r:?}");
        assert!(at("net.ipv4.ip_local_reserved_ports") < at("net.ipv4.ip_local_port_range"));
        // Nothing to reserve when the range is not widened: another goal,
        // a range already wide, or every such port reserved.
        assert!(
            find(
                &audit(&s, Goal::Latency),
                "net.ipv4.ip_local_reserved_ports"
            )
            .ok
        );
        let mut wide = s.clone();
        wide.values.insert(
            "net.ipv4.ip_local_port_range".into(),
            Reading::Value("1024 65535".into()),
        );
        assert!(
            find(
                &audit(&wide, Goal::Connections),
                "net.ipv4.ip_local_reserved_ports"
            )
            .ok
        );
        s.values.insert(
            "net.ipv4.ip_local_reserved_ports".into(),
            Reading::Value("2000-3000,5432".into()),
        );
        assert!(
            find(
                &audit(&s, Goal::Connections),
                "net.ipv4.ip_local_reserved_ports"
            )
            .ok
        );
    }

    #[test]
    fn latency_wants_busy_polling_thp_off_and_the_performance_governor() {
        let rows = audit(&host(), Goal::Latency);
        let r = find(&rows, "net.core.busy_read");
        assert!(!r.ok);
        assert_eq!(r.sysctl.as_deref(), Some("net.core.busy_read = 50"));
        let r = find(&rows, settings::THP_ENABLED);
        assert!(!r.ok && r.advised == "madvise" && r.sysctl.is_none());
        assert!(find(&rows, settings::THP_DEFRAG).ok);
        assert!(!find(&rows, settings::GOVERNOR).ok);
        // Connection rows have no preference here.
        let r = find(&rows, "net.ipv4.ip_local_port_range");
        assert!(r.ok && r.advised == "-" && r.sysctl.is_none());
    }

    #[test]
    fn throughput_wants_big_buffer_ceilings_keeping_min_and_default() {
        let rows = audit(&host(), Goal::Throughput);
        let r = find(&rows, "net.ipv4.tcp_rmem");
        assert!(!r.ok);
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.ipv4.tcp_rmem = 4096 131072 16777216")
        );
        assert_eq!(
            find(&rows, "net.core.rmem_max").sysctl.as_deref(),
            Some("net.core.rmem_max = 16777216")
        );
        let r = find(&rows, "net.core.busy_poll");
        assert!(r.ok && r.advised == "0");
    }

    #[test]
    fn every_goal_lists_every_family_and_ok_rows_carry_no_sysctl_line() {
        for goal in [Goal::Latency, Goal::Throughput, Goal::Connections] {
            let rows = audit(&host(), goal);
            for key in settings::SYSCTLS
                .iter()
                .filter(|k| !k.ends_with("nf_conntrack_count"))
            {
                find(&rows, key);
            }
            for r in &rows {
                if r.ok {
                    assert!(r.sysctl.is_none(), "{r:?}");
                }
                if let Some(l) = &r.sysctl {
                    assert!(l.starts_with(&format!("{} = ", r.setting)), "{l}");
                }
            }
        }
    }

    #[test]
    fn absent_settings_are_ok_and_say_why() {
        let s = Settings::from_pairs(&[]);
        let mut s2 = s.clone();
        s2.values.insert(
            settings::GOVERNOR.into(),
            Reading::Absent("not exposed (no cpufreq)".into()),
        );
        s2.values.insert(
            "net.netfilter.nf_conntrack_max".into(),
            Reading::Absent("not loaded".into()),
        );
        let rows = audit(&s2, Goal::Latency);
        let r = find(&rows, settings::GOVERNOR);
        assert!(r.ok && r.current == "not exposed (no cpufreq)");
        let r = find(&rows, "net.netfilter.nf_conntrack_max");
        assert!(r.ok && r.current == "not loaded");
        let r = find(&audit(&s, Goal::Connections), "net.core.somaxconn");
        assert!(r.ok && r.sysctl.is_none() && r.current == "not read");
    }

    #[test]
    fn conntrack_close_to_full_is_flagged_for_any_goal() {
        let s = Settings::from_pairs(&[
            ("net.netfilter.nf_conntrack_max", "1000"),
            ("net.netfilter.nf_conntrack_count", "900"),
        ]);
        let r = find(&audit(&s, Goal::Latency), "net.netfilter.nf_conntrack_max");
        assert!(!r.ok, "{r:?}");
        assert_eq!(r.current, "1000 (900 in use)");
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.netfilter.nf_conntrack_max = 1125")
        );
    }

    #[test]
    fn rps_is_advised_for_one_queue_and_many_cpus() {
        let mut s = host();
        s.cpus = 4;
        s.steering = vec![settings::Steering {
            dev: "eth0".into(),
            rps: vec!["0".into()],
            xps: vec!["0".into()],
        }];
        let rows = audit(&s, Goal::Throughput);
        let r = find(&rows, "RPS eth0");
        assert!(!r.ok && r.advised == "rps_cpus = f", "{r:?}");
        assert!(find(&rows, "XPS eth0").ok);
        assert!(find(&audit(&s, Goal::Latency), "RPS eth0").ok);
        assert_eq!(all_cpus_mask(2), "3");
        assert_eq!(all_cpus_mask(40), "ff,ffffffff");
    }
}
