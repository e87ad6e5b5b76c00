//! The audit rows a run's evidence supports: a counter that moved, a
//! connect error class, a socket state or the run-queue delay points at
//! the settings that bound it. Each row quotes what was measured
//! ("TcpExt.ListenOverflows +1,204 during the run"); nothing is advised
//! that the run did not show.
//!
//! The evidence structs are extended by their own collectors; what this
//! file reads of them goes through the small accessors at the bottom, so
//! a change of field names touches only those.

use crate::report::evidence::KernelEvidence;
use crate::report::evidence::sockets::Listener;
use crate::report::load::LoadReport;
use crate::report::tune::AuditRow;

use super::rules::{
    BIG_BUFFER, SOMAXCONN_DEFAULT, WIDE_PORT_RANGE, WIDE_PORTS, reserved_ports, syn_backlog,
    syncookies_on,
};
use super::settings::Settings;

/// A run-queue wait share from which the CPU row is shown.
pub const RUNQUEUE_WAIT_SHARE: f64 = 0.10;

/// The evidence rows for `ev` and the load it measured, against the
/// settings `s` (this machine's, as they are now). Empty when the run
/// showed nothing a setting bounds.
pub fn rows(s: &Settings, ev: &KernelEvidence, load: Option<&LoadReport>) -> Vec<AuditRow> {
    let mut out = Vec::new();
    // Server-side settings are read where sockscope runs; say so when the
    // target's namespace was another one.
    let elsewhere = if ev.netns.shared_with_generator {
        ""
    } else {
        " (value read in sockscope's network namespace, not the target's)"
    };
    listen(s, ev, elsewhere, &mut out);
    syn_queue(s, ev, elsewhere, &mut out);
    udp_rcvbuf(s, ev, elsewhere, &mut out);
    tcp_rcvq(s, ev, elsewhere, &mut out);
    time_wait_overflow(s, ev, elsewhere, &mut out);
    ports(s, ev, load, &mut out);
    softnet(s, ev, &mut out);
    runqueue(ev, &mut out);
    out
}

/// "TcpExt.ListenOverflows +1,204 during the run".
fn quote(name: &str, v: u64) -> String {
    format!("{name} +{} during the run", grouped(v))
}

/// 1204 -> "1,204".
pub fn grouped(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Twice `cur`, at least `floor`.
fn doubled(cur: Option<u64>, floor: u64) -> u64 {
    cur.map_or(floor, |c| c.saturating_mul(2).max(floor))
}

fn raise(
    s: &Settings,
    key: &str,
    to: u64,
    why: &str,
    evidence: String,
    elsewhere: &str,
) -> AuditRow {
    let cur = s.num(key);
    let ok = cur.is_some_and(|c| c >= to);
    AuditRow {
        setting: key.to_string(),
        current: s.shown(key),
        advised: format!(">= {to}"),
        ok,
        why: format!("{why}{elsewhere}"),
        evidence: Some(evidence),
        sysctl: (!ok && cur.is_some()).then(|| format!("{key} = {to}")),
    }
}

fn listen(s: &Settings, ev: &KernelEvidence, elsewhere: &str, out: &mut Vec<AuditRow>) {
    let overflows = counter(ev, "TcpExt.ListenOverflows");
    let drops = counter(ev, "TcpExt.ListenDrops");
    if overflows == 0 && drops == 0 {
        return;
    }
    let mut evidence = if overflows > 0 {
        quote("TcpExt.ListenOverflows", overflows)
    } else {
        quote("TcpExt.ListenDrops", drops)
    };
    if overflows > 0 && drops > overflows {
        evidence.push_str(&format!(", ListenDrops +{}", grouped(drops)));
    }
    let somaxconn = s.num("net.core.somaxconn");
    let listeners = listeners(ev);
    // A listener whose backlog is below somaxconn is limited by what the
    // program passed to listen(): no sysctl raises it.
    let mut capped = listeners.is_empty();
    for l in listeners {
        let q = format!(
            "{evidence}; accept queue of {} peaked at {} of {}",
            l.local,
            grouped(u64::from(l.accept_queue_max)),
            l.backlog
        );
        match somaxconn {
            Some(max) if u64::from(l.backlog) < max => out.push(AuditRow {
                setting: format!("listen() backlog ({})", l.local),
                current: l.backlog.to_string(),
                advised: format!("up to {max}"),
                ok: false,
                why: format!(
                    "the program passes {} to listen(), below somaxconn ({max}): its own backlog is the limit and a sysctl cannot fix it; pass a larger backlog (the kernel caps it at somaxconn)",
                    l.backlog
                ),
                evidence: Some(q),
                sysctl: None,
            }),
            _ => capped = true,
        }
    }
    // 65535 was the ceiling before Linux 4.1 (a 16-bit backlog) and is the
    // usual upper value; the kernel default is the floor.
    let to = doubled(somaxconn, SOMAXCONN_DEFAULT).clamp(SOMAXCONN_DEFAULT, 65_535);
    if capped {
        let why = if listeners.is_empty() {
            "the accept queue overflowed; its limit is min(listen() backlog, somaxconn), and the run did not sample the listener's backlog: check the program's listen() too"
        } else {
            "the listener's backlog is capped at somaxconn: raise it (and the backlog the program passes, if it passes exactly this)"
        };
        out.push(raise(s, "net.core.somaxconn", to, why, evidence, elsewhere));
    } else {
        out.push(AuditRow {
            setting: "net.core.somaxconn".into(),
            current: s.shown("net.core.somaxconn"),
            advised: "-".into(),
            ok: true,
            why: format!(
                "not the limit here: the program's own listen() backlog is below it{elsewhere}"
            ),
            evidence: Some(evidence),
            sysctl: None,
        });
    }
}

fn syn_queue(s: &Settings, ev: &KernelEvidence, elsewhere: &str, out: &mut Vec<AuditRow>) {
    let full = counter(ev, "TcpExt.TCPReqQFullDrop");
    if full == 0 {
        return;
    }
    let evidence = quote("TcpExt.TCPReqQFullDrop", full);
    let key = "net.ipv4.tcp_max_syn_backlog";
    out.push(match syncookies_on(s) {
        // TCPReqQFullDrop counts only with cookies off: they are on now
        // (in the namespace read), so the backlog bounds nothing.
        Some(c) => AuditRow {
            evidence: Some(evidence.clone()),
            why: format!(
                "not needed while tcp_syncookies={c} (as read now): TCPReqQFullDrop counts SYNs dropped while cookies were off{elsewhere}"
            ),
            ..syn_backlog(s, None, "")
        },
        None => raise(
            s,
            key,
            doubled(s.num(key), 4096),
            "SYNs were dropped because the SYN queue was full",
            evidence.clone(),
            elsewhere,
        ),
    });
    let cur = s.value("net.ipv4.tcp_syncookies");
    let ok = cur.as_deref() == Some("1");
    out.push(AuditRow {
        setting: "net.ipv4.tcp_syncookies".into(),
        current: s.shown("net.ipv4.tcp_syncookies"),
        advised: "1".into(),
        ok,
        why: format!("with cookies a full SYN queue answers instead of dropping{elsewhere}"),
        evidence: Some(evidence),
        sysctl: (!ok && cur.is_some()).then(|| "net.ipv4.tcp_syncookies = 1".into()),
    });
}

fn udp_rcvbuf(s: &Settings, ev: &KernelEvidence, elsewhere: &str, out: &mut Vec<AuditRow>) {
    let v4 = counter(ev, "Udp.RcvbufErrors");
    let v6 = counter(ev, "Udp6.RcvbufErrors");
    if v4 + v6 == 0 {
        return;
    }
    let evidence = match (v4, v6) {
        (a, 0) => quote("Udp.RcvbufErrors", a),
        (0, b) => quote("Udp6.RcvbufErrors", b),
        (a, b) => format!(
            "{}, Udp6.RcvbufErrors +{}",
            quote("Udp.RcvbufErrors", a),
            grouped(b)
        ),
    };
    out.push(raise(
        s,
        "net.core.rmem_max",
        doubled(s.num("net.core.rmem_max"), BIG_BUFFER),
        "datagrams were dropped at a full receive buffer: the program's SO_RCVBUF is capped at rmem_max (set SO_RCVBUF in the program; raise the cap)",
        evidence.clone(),
        elsewhere,
    ));
    out.push(raise(
        s,
        "net.core.rmem_default",
        doubled(s.num("net.core.rmem_default"), 1 << 20),
        "a socket that sets no SO_RCVBUF gets rmem_default; RcvbufErrors also counts drops at udp_mem's limit",
        evidence,
        elsewhere,
    ));
}

fn tcp_rcvq(s: &Settings, ev: &KernelEvidence, elsewhere: &str, out: &mut Vec<AuditRow>) {
    let backlog = counter(ev, "TcpExt.TCPBacklogDrop");
    let rcvq = counter(ev, "TcpExt.TCPRcvQDrop");
    if backlog + rcvq == 0 {
        return;
    }
    let evidence = match (backlog, rcvq) {
        (a, 0) => quote("TcpExt.TCPBacklogDrop", a),
        (0, b) => quote("TcpExt.TCPRcvQDrop", b),
        (a, b) => format!(
            "{}, TCPRcvQDrop +{}",
            quote("TcpExt.TCPBacklogDrop", a),
            grouped(b)
        ),
    };
    let key = "net.ipv4.tcp_rmem";
    let want = doubled(s.num_at(key, 2), BIG_BUFFER);
    let cur = (s.num_at(key, 0), s.num_at(key, 1), s.num_at(key, 2));
    let ok = cur.2.is_some_and(|m| m >= want);
    out.push(AuditRow {
        setting: key.into(),
        current: s.shown(key),
        advised: format!("max >= {want}"),
        ok,
        why: format!(
            "TCP segments were dropped at a full receive queue or socket backlog: the program reads too slowly for the buffer autotuning may grow to{elsewhere}"
        ),
        evidence: Some(evidence.clone()),
        sysctl: match cur {
            (Some(a), Some(b), Some(_)) if !ok => Some(format!("{key} = {a} {b} {want}")),
            _ => None,
        },
    });
    out.push(raise(
        s,
        "net.core.rmem_max",
        doubled(s.num("net.core.rmem_max"), BIG_BUFFER),
        "a program that sets SO_RCVBUF turns autotuning off and is capped at rmem_max",
        evidence,
        elsewhere,
    ));
}

fn time_wait_overflow(s: &Settings, ev: &KernelEvidence, elsewhere: &str, out: &mut Vec<AuditRow>) {
    let n = counter(ev, "TcpExt.TCPTimeWaitOverflow");
    if n == 0 {
        return;
    }
    out.push(raise(
        s,
        "net.ipv4.tcp_max_tw_buckets",
        doubled(s.num("net.ipv4.tcp_max_tw_buckets"), 262_144),
        "TIME_WAIT sockets were destroyed early because the table was full (old duplicates can then reach a new connection)",
        quote("TcpExt.TCPTimeWaitOverflow", n),
        elsewhere,
    ));
}

fn ports(s: &Settings, ev: &KernelEvidence, load: Option<&LoadReport>, out: &mut Vec<AuditRow>) {
    let key = "net.ipv4.ip_local_port_range";
    let width = match (s.num_at(key, 0), s.num_at(key, 1)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) + 1),
        _ => None,
    };
    let errors = connect_errors(load, "EADDRNOTAVAIL");
    // The clients' own TIME_WAIT towards the target, begun in this run, per
    // source address: what holds that address's ports. The target's
    // TIME_WAIT (it closed first) and other processes' hold none of them.
    let tw = client_time_wait(ev).filter(|&t| t > 0);
    let tw_near = matches!((tw, width), (Some(t), Some(w)) if t.saturating_mul(2) >= w);
    if errors == 0 && !tw_near {
        return;
    }
    let mut parts = Vec::new();
    if errors > 0 {
        parts.push(format!(
            "load: EADDRNOTAVAIL x{} connect errors",
            grouped(errors)
        ));
    }
    if let Some(t) = tw {
        parts.push(format!(
            "{} client sockets from one address entered TIME_WAIT towards the target during the run (most in one count)",
            grouped(t)
        ));
    }
    let evidence = parts.join("; ");
    let (lo, hi) = WIDE_PORT_RANGE;
    let wide = width.is_some_and(|w| w >= WIDE_PORTS);
    let held = format!(
        "{} in range, each held 60 s in TIME_WAIT after an active close",
        width.map_or("?".into(), grouped)
    );
    let why = match (wide, errors > 0) {
        (true, _) => "already wide: new connections per second outrun 60 s of TIME_WAIT; reuse TIME_WAIT ports (below), spread connects over more source addresses, or keep connections open".into(),
        (false, true) => format!(
            "the connecting side ran out of ephemeral ports ({held}); applies where the connections are made"
        ),
        (false, false) => format!(
            "the connecting side's TIME_WAIT sockets towards the target held at least half of one source address's ephemeral ports ({held}); applies where the connections are made"
        ),
    };
    let reserved = reserved_ports(s, true);
    if !reserved.ok {
        out.push(AuditRow {
            evidence: Some(evidence.clone()),
            ..reserved
        });
    }
    out.push(AuditRow {
        setting: key.into(),
        current: s.shown(key),
        advised: format!("{lo} {hi}"),
        ok: wide,
        why,
        evidence: Some(evidence.clone()),
        sysctl: (!wide && width.is_some()).then(|| format!("{key} = {lo} {hi}")),
    });
    let key = "net.ipv4.tcp_tw_reuse";
    let cur = s.value(key);
    let ok = cur.as_deref() == Some("1");
    out.push(AuditRow {
        setting: key.into(),
        current: s.shown(key),
        advised: "1".into(),
        ok,
        why: "lets connect() take a port still in TIME_WAIT when timestamps make it safe; it acts on the CONNECTING side only (2 = loopback only)".into(),
        evidence: Some(evidence),
        sysctl: (!ok && cur.is_some()).then(|| format!("{key} = 1")),
    });
}

fn softnet(s: &Settings, ev: &KernelEvidence, out: &mut Vec<AuditRow>) {
    let dropped = counter(ev, "softnet.dropped");
    if dropped > 0 {
        out.push(raise(
            s,
            "net.core.netdev_max_backlog",
            doubled(s.num("net.core.netdev_max_backlog"), 2000),
            "packets were dropped at a full per-CPU input queue: double it until softnet_stat stops counting drops",
            quote("softnet.dropped", dropped),
            "",
        ));
    }
    let squeezed = counter(ev, "softnet.time_squeeze");
    if squeezed > 0 {
        out.push(raise(
            s,
            "net.core.netdev_budget",
            doubled(s.num("net.core.netdev_budget"), 600),
            "NAPI polls ran out of budget with packets left (netdev_budget_usecs bounds the same cycle in time)",
            quote("softnet.time_squeeze", squeezed),
            "",
        ));
    }
}

fn runqueue(ev: &KernelEvidence, out: &mut Vec<AuditRow>) {
    let Some((share, wait_s, on_s)) = runqueue_wait(ev) else {
        return;
    };
    // The same bar as the profile's sentence, and a share worth a row.
    if share < RUNQUEUE_WAIT_SHARE || !ev.sched.as_ref().is_some_and(|s| s.notable()) {
        return;
    }
    out.push(AuditRow {
        setting: "CPUs for the target".into(),
        current: format!("waited {:.0}% of runnable time", share * 100.0),
        advised: "less waiting".into(),
        ok: false,
        why: "its threads were runnable but waited for a CPU: give it more CPUs, or move competing work off its CPUs (taskset, cpusets); not a sysctl".into(),
        evidence: Some(format!(
            "schedstat: {wait_s:.2} s waiting for a CPU against {on_s:.2} s on one during the run"
        )),
        sysctl: None,
    });
}

// Accessors over the evidence structs (their collectors extend them).

/// A counter's increase over the window, 0 when it was not read.
fn counter(ev: &KernelEvidence, name: &str) -> u64 {
    ev.counters.as_ref().map_or(0, |c| c.get(name))
}

/// The target's listening sockets, as sampled.
fn listeners(ev: &KernelEvidence) -> &[Listener] {
    ev.sockets.as_ref().map_or(&[], |s| s.listeners.as_slice())
}

/// Most client sockets from one source address that entered TIME_WAIT
/// towards the target during the window, in one count; None when not
/// counted (an artifact from before the count at the start: its TIME_WAIT
/// figures may be earlier runs' and support no port advice).
fn client_time_wait(ev: &KernelEvidence) -> Option<u64> {
    ev.sockets
        .as_ref()?
        .time_wait
        .as_ref()?
        .remote_new_per_source_max
}

/// Run-queue wait: (share of runnable time, seconds waiting, seconds on a
/// CPU), when measured.
fn runqueue_wait(ev: &KernelEvidence) -> Option<(f64, f64, f64)> {
    let s = ev.sched.as_ref()?;
    (s.threads > 0).then_some((s.wait_share, s.runqueue_wait_s, s.on_cpu_s))
}

/// Connect/transaction errors of one class in the load report (none
/// without sockscope's own load).
fn connect_errors(load: Option<&LoadReport>, class: &str) -> u64 {
    load.and_then(|l| l.errors.by_class.get(class).copied())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::sockets::{SocketEvidence, TimeWait};
    use crate::report::evidence::{CounterDeltas, SchedEvidence};

    fn settings() -> Settings {
        Settings::from_pairs(&[
            ("net.core.somaxconn", "4096"),
            ("net.ipv4.ip_local_port_range", "40000 40100"),
            ("net.ipv4.tcp_tw_reuse", "2"),
            ("net.core.rmem_max", "212992"),
            ("net.core.rmem_default", "212992"),
            ("net.core.netdev_max_backlog", "1000"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
        ])
    }

    fn with_counters(pairs: &[(&str, u64)]) -> KernelEvidence {
        KernelEvidence {
            counters: Some(CounterDeltas {
                source: "test".into(),
                deltas: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                ..Default::default()
            }),
            netns: crate::report::evidence::Netns {
                id: "net:[1]".into(),
                shared_with_generator: true,
            },
            ..Default::default()
        }
    }

    fn load() -> LoadReport {
        let r = crate::report::fixtures::profile(&crate::report::fixtures::epoll_echo());
        r.load.unwrap()
    }

    #[test]
    fn a_small_listen_backlog_is_named_before_somaxconn_and_quoted() {
        let mut ev = with_counters(&[
            ("TcpExt.ListenOverflows", 1204),
            ("TcpExt.ListenDrops", 1204),
        ]);
        ev.sockets = Some(SocketEvidence {
            samples: 10,
            listeners: vec![Listener {
                local: "127.0.0.1:8080".into(),
                backlog: 1,
                accept_queue_max: 2,
                ..Default::default()
            }],
            ..Default::default()
        });
        let rows = rows(&settings(), &ev, Some(&load()));
        assert_eq!(rows[0].setting, "listen() backlog (127.0.0.1:8080)");
        assert!(!rows[0].ok && rows[0].sysctl.is_none());
        assert!(rows[0].why.contains("a sysctl cannot fix it"));
        let e = rows[0].evidence.as_deref().unwrap();
        assert!(
            e.starts_with("TcpExt.ListenOverflows +1,204 during the run"),
            "{e}"
        );
        assert_eq!(rows[1].setting, "net.core.somaxconn");
        assert!(rows[1].ok && rows[1].why.contains("not the limit"));
    }

    #[test]
    fn a_backlog_capped_at_somaxconn_asks_for_a_larger_somaxconn() {
        let mut ev = with_counters(&[("TcpExt.ListenOverflows", 7)]);
        ev.sockets = Some(SocketEvidence {
            listeners: vec![Listener {
                local: "[::]:80".into(),
                backlog: 4096,
                accept_queue_max: 4097,
                ..Default::default()
            }],
            ..Default::default()
        });
        let rows = rows(&settings(), &ev, Some(&load()));
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].sysctl.as_deref(), Some("net.core.somaxconn = 8192"));
        // Without socket samples: somaxconn, and the reason to check listen().
        let rows = super::rows(
            &settings(),
            &with_counters(&[("TcpExt.ListenOverflows", 7)]),
            Some(&load()),
        );
        assert!(rows[0].why.contains("did not sample"));
    }

    fn with_time_wait(t: TimeWait) -> KernelEvidence {
        let mut ev = with_counters(&[]);
        ev.sockets = Some(SocketEvidence {
            time_wait: Some(t),
            ..Default::default()
        });
        ev
    }

    fn keys(rows: &[AuditRow]) -> Vec<&str> {
        rows.iter().map(|r| r.setting.as_str()).collect()
    }

    #[test]
    fn eaddrnotavail_names_the_port_range_and_tw_reuse() {
        let mut l = load();
        l.errors.by_class.insert("EADDRNOTAVAIL".into(), 1500);
        let ev = with_time_wait(TimeWait {
            samples: 3,
            remote_max: 101,
            namespace_max: Some(101),
            local_new_max: Some(0),
            remote_new_max: Some(101),
            remote_new_per_source_max: Some(101),
            ..Default::default()
        });
        let rows = rows(&settings(), &ev, Some(&l));
        assert_eq!(
            keys(&rows),
            ["net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse"]
        );
        assert_eq!(
            rows[0].evidence.as_deref(),
            Some(
                "load: EADDRNOTAVAIL x1,500 connect errors; 101 client sockets from one address \
                 entered TIME_WAIT towards the target during the run (most in one count)"
            )
        );
        assert!(
            rows[0]
                .why
                .starts_with("the connecting side ran out of ephemeral ports")
        );
        assert_eq!(
            rows[0].sysctl.as_deref(),
            Some("net.ipv4.ip_local_port_range = 1024 65535")
        );
        assert_eq!(rows[1].sysctl.as_deref(), Some("net.ipv4.tcp_tw_reuse = 1"));
        // The clients' TIME_WAIT filling half the range counts without
        // errors, and then does not say the ports ran out.
        let rows = super::rows(&settings(), &ev, Some(&load()));
        assert_eq!(rows.len(), 2);
        assert!(
            rows[0]
                .why
                .contains("held at least half of one source address's"),
            "{}",
            rows[0].why
        );
        assert!(!rows[0].why.contains("ran out"));
    }

    /// Issue 22: no EADDRNOTAVAIL, and the TIME_WAIT sockets were the
    /// server's own (it closed first), earlier runs' or other processes':
    /// none of them holds a port of this run's connecting side.
    #[test]
    fn time_wait_that_is_not_this_runs_clients_advises_no_ports() {
        let servers = TimeWait {
            samples: 3,
            local_max: 5000,
            namespace_max: Some(9000),
            local_new_max: Some(5000),
            remote_new_max: Some(0),
            remote_new_per_source_max: Some(0),
            ..Default::default()
        };
        assert!(rows(&settings(), &with_time_wait(servers.clone()), Some(&load())).is_empty());
        // Towards the target, but left before the run.
        let earlier = TimeWait {
            remote_max: 100,
            remote_new_max: Some(3),
            remote_new_per_source_max: Some(3),
            ..servers
        };
        assert!(rows(&settings(), &with_time_wait(earlier), Some(&load())).is_empty());
        // Spread over source addresses: 40 from each of three is not half
        // of one address's 101 ports.
        let spread = TimeWait {
            samples: 3,
            remote_max: 120,
            remote_new_max: Some(120),
            remote_new_per_source_max: Some(40),
            ..Default::default()
        };
        assert!(rows(&settings(), &with_time_wait(spread), Some(&load())).is_empty());
        // An artifact without the start count: its counts may be earlier
        // runs', so they support nothing.
        let legacy = TimeWait {
            samples: 3,
            remote_max: 101,
            namespace_max: Some(101),
            ..Default::default()
        };
        assert!(rows(&settings(), &with_time_wait(legacy), Some(&load())).is_empty());
    }

    #[test]
    fn widening_the_range_reserves_the_listening_ports_it_takes_in() {
        let mut s = settings();
        s.values.insert(
            "net.ipv4.ip_local_reserved_ports".into(),
            super::super::settings::Reading::Value("8080".into()),
        );
        // 8080 reserved already, 40050 inside the current range, 80 below
        // the new one: only 5432 is newly handed out.
        s.listening = vec![80, 5432, 8080, 40050];
        let mut l = load();
        l.errors.by_class.insert("EADDRNOTAVAIL".into(), 3);
        let rows = rows(&s, &with_counters(&[]), Some(&l));
        assert_eq!(
            keys(&rows),
            [
                "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.ip_local_port_range",
                "net.ipv4.tcp_tw_reuse"
            ]
        );
        assert_eq!(
            rows[0].sysctl.as_deref(),
            Some("net.ipv4.ip_local_reserved_ports = 8080,5432")
        );
        assert!(!rows[0].ok && rows[0].evidence.is_some());
    }

    #[test]
    fn a_full_syn_queue_with_cookies_on_now_needs_no_larger_backlog() {
        let ev = with_counters(&[("TcpExt.TCPReqQFullDrop", 2)]);
        let mut s = settings();
        s.values.insert(
            "net.ipv4.tcp_syncookies".into(),
            super::super::settings::Reading::Value("1".into()),
        );
        let rows = rows(&s, &ev, Some(&load()));
        let r = &rows[0];
        assert_eq!(r.setting, "net.ipv4.tcp_max_syn_backlog");
        assert!(r.ok && r.sysctl.is_none(), "{r:?}");
        assert!(r.why.contains("not needed while tcp_syncookies=1"), "{r:?}");
        assert!(rows[1].ok, "{:?}", rows[1]);
    }

    #[test]
    fn drops_point_at_buffers_and_queues_and_quiet_runs_at_nothing() {
        let ev = with_counters(&[
            ("Udp.RcvbufErrors", 12),
            ("TcpExt.TCPRcvQDrop", 3),
            ("softnet.dropped", 5),
            ("softnet.time_squeeze", 9),
            ("TcpExt.TCPTimeWaitOverflow", 1),
            ("TcpExt.TCPReqQFullDrop", 2),
            ("Tcp.RetransSegs", 100),
        ]);
        let rows = rows(&settings(), &ev, Some(&load()));
        let keys: Vec<_> = rows.iter().map(|r| r.setting.as_str()).collect();
        for k in [
            "net.core.rmem_max",
            "net.core.rmem_default",
            "net.ipv4.tcp_rmem",
            "net.core.netdev_max_backlog",
            "net.core.netdev_budget",
            "net.ipv4.tcp_max_tw_buckets",
            "net.ipv4.tcp_max_syn_backlog",
        ] {
            assert!(keys.contains(&k), "{k} in {keys:?}");
        }
        let r = rows
            .iter()
            .find(|r| r.setting == "net.core.netdev_max_backlog")
            .unwrap();
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.core.netdev_max_backlog = 2000")
        );
        assert_eq!(
            r.evidence.as_deref(),
            Some("softnet.dropped +5 during the run")
        );
        let r = rows
            .iter()
            .find(|r| r.setting == "net.ipv4.tcp_rmem")
            .unwrap();
        assert_eq!(
            r.sysctl.as_deref(),
            Some("net.ipv4.tcp_rmem = 4096 131072 16777216")
        );
        assert!(rows.iter().all(|r| r.evidence.is_some()));
        assert!(
            super::rows(
                &settings(),
                &with_counters(&[("Tcp.RetransSegs", 5)]),
                Some(&load())
            )
            .is_empty()
        );
        assert!(super::rows(&settings(), &KernelEvidence::default(), Some(&load())).is_empty());
    }

    #[test]
    fn runqueue_wait_is_a_cpu_row_without_a_sysctl() {
        let mut ev = with_counters(&[]);
        ev.sched = Some(SchedEvidence {
            source: "t".into(),
            threads: 2,
            on_cpu_s: 2.0,
            runqueue_wait_s: 1.0,
            wait_share: 1.0 / 3.0,
            ..Default::default()
        });
        let rows = rows(&settings(), &ev, Some(&load()));
        assert_eq!(rows.len(), 1);
        assert!(rows[0].current.contains("33%") && rows[0].sysctl.is_none());
    }

    #[test]
    fn grouping() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
