//! What a node agent exports about itself and about its network
//! namespace, read when a scrape is answered (a few /proc reads, never the
//! BPF maps):
//!
//! * its own cost: the CPU of the whole sockscope process (tracer loop,
//!   exporter thread, anatomy thread), its resident memory, and how many
//!   label sets it exports, so a dashboard can watch the agent as it
//!   watches services;
//! * the kernel's reset and drop counters of the namespace sockscope runs
//!   in (/proc/net/snmp, /proc/net/netstat): the errors beside the request
//!   rate and the server time. They are per network namespace, not per
//!   port or per process.

use super::model::{counter, family, label, pb};

/// Kernel counters exported as `sockscope_net_resets_total{kind}`:
/// (kind label, `Group.Name`). The kinds overlap (an established
/// connection reset by us is counted by both), so they are read apart,
/// never summed.
pub const RESETS: [(&str, &str); 4] = [
    ("sent", "Tcp.OutRsts"),
    ("established", "Tcp.EstabResets"),
    ("abort_on_data", "TcpExt.TCPAbortOnData"),
    ("abort_on_close", "TcpExt.TCPAbortOnClose"),
];

/// Kernel counters exported as `sockscope_net_drops_total{kind}`. Each is
/// a distinct place of loss (`listen` includes the accept queue's
/// overflows, which are therefore not listed again).
pub const DROPS: [(&str, &str); 4] = [
    ("listen", "TcpExt.ListenDrops"),
    ("tcp_backlog", "TcpExt.TCPBacklogDrop"),
    ("tcp_rcvq", "TcpExt.TCPRcvQDrop"),
    ("udp_rcvbuf", "Udp.RcvbufErrors"),
];

/// The agent's own cost at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SelfCost {
    /// User CPU of the whole process since it started, seconds.
    pub user_s: f64,
    /// System CPU, seconds.
    pub system_s: f64,
    /// Resident set size (VmRSS), bytes; None when /proc says nothing.
    pub resident_bytes: Option<u64>,
}

impl SelfCost {
    /// Reads this process's CPU (getrusage) and resident memory.
    pub fn read() -> Self {
        let (user, system) = crate::procfs::rusage_ns(libc::RUSAGE_SELF);
        Self {
            user_s: user as f64 / 1e9,
            system_s: system as f64 / 1e9,
            resident_bytes: crate::procfs::status_kb(std::process::id() as i32, "VmRSS")
                .map(|kb| kb * 1024),
        }
    }
}

fn gauge(labels: Vec<pb::LabelPair>, v: f64) -> pb::Metric {
    pb::Metric {
        label: labels,
        gauge: Some(pb::Gauge { value: Some(v) }),
        ..Default::default()
    }
}

/// The agent's cost families; `series` is the number of label sets the
/// other families hold.
pub fn self_families(cost: &SelfCost, series: usize) -> Vec<pb::MetricFamily> {
    use pb::MetricType::{Counter, Gauge};
    let mut f = vec![family(
        "sockscope_agent_cpu_seconds_total",
        "CPU time of the sockscope process itself (tracer, exporter and anatomy threads; its \
         BPF programs run in the traced tasks and are not included).",
        Counter,
        vec![
            counter(vec![label("mode", "user")], cost.user_s),
            counter(vec![label("mode", "system")], cost.system_s),
        ],
    )];
    if let Some(b) = cost.resident_bytes {
        f.push(family(
            "sockscope_agent_resident_bytes",
            "Resident memory of the sockscope process (VmRSS).",
            Gauge,
            vec![gauge(vec![], b as f64)],
        ));
    }
    f.push(family(
        "sockscope_agent_series",
        "Label sets this scrape exports in the other families (a histogram counts once).",
        Gauge,
        vec![gauge(vec![], series as f64)],
    ));
    f
}

/// The reset and drop families from `counters` (`Group.Name`, value); a
/// counter the kernel does not have is left out, not exported as 0.
pub fn net_families(counters: &[(String, u64)]) -> Vec<pb::MetricFamily> {
    use pb::MetricType::Counter;
    let pick = |table: &[(&str, &str)]| -> Vec<pb::Metric> {
        table
            .iter()
            .filter_map(|(kind, name)| {
                let v = counters.iter().find(|(n, _)| n == name)?.1;
                Some(counter(vec![label("kind", *kind)], v as f64))
            })
            .collect()
    };
    vec![
        family(
            "sockscope_net_resets_total",
            "TCP resets in sockscope's network namespace (kernel counters since boot; kinds \
             overlap: sent = Tcp OutRsts, established = Tcp EstabResets, abort_on_data and \
             abort_on_close = TcpExt TCPAbortOn*).",
            Counter,
            pick(&RESETS),
        ),
        family(
            "sockscope_net_drops_total",
            "Packets and connections dropped in sockscope's network namespace (kernel counters \
             since boot: listen = TcpExt ListenDrops, tcp_backlog = TCPBacklogDrop, tcp_rcvq = \
             TCPRcvQDrop, udp_rcvbuf = Udp RcvbufErrors).",
            Counter,
            pick(&DROPS),
        ),
    ]
}

/// Appends the agent's own and its namespace's families to `fams`.
pub fn extend(fams: &mut Vec<pb::MetricFamily>) {
    let series = fams.iter().map(|f| f.metric.len()).sum();
    fams.extend(net_families(&crate::procfs::snmp::net_counters()));
    fams.extend(self_families(&SelfCost::read(), series));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::snmp::parse_pairs;

    const SNMP: &str = "Tcp: RtoAlgorithm ActiveOpens EstabResets OutRsts\n\
                        Tcp: 1 10 3 7\n\
                        Udp: InDatagrams InErrors RcvbufErrors\n\
                        Udp: 100 6 5\n";
    const NETSTAT: &str = "TcpExt: ListenOverflows ListenDrops TCPBacklogDrop TCPAbortOnData\n\
                           TcpExt: 2 4 1 9\n";

    #[test]
    fn resets_and_drops_come_from_the_named_kernel_counters() {
        let mut c = parse_pairs(SNMP);
        c.extend(parse_pairs(NETSTAT));
        let text = super::super::text::encode(&net_families(&c));
        for line in [
            "sockscope_net_resets_total{kind=\"sent\"} 7\n",
            "sockscope_net_resets_total{kind=\"established\"} 3\n",
            "sockscope_net_resets_total{kind=\"abort_on_data\"} 9\n",
            "sockscope_net_drops_total{kind=\"listen\"} 4\n",
            "sockscope_net_drops_total{kind=\"tcp_backlog\"} 1\n",
            "sockscope_net_drops_total{kind=\"udp_rcvbuf\"} 5\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // A counter this kernel lacks is absent, not a made-up 0.
        assert!(!text.contains("kind=\"abort_on_close\""), "{text}");
        assert!(!text.contains("kind=\"tcp_rcvq\""), "{text}");
    }

    #[test]
    fn self_cost_is_this_process_and_counts_series() {
        // Burn a little CPU so user time is above zero whatever the clock.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let cost = SelfCost::read();
        assert!(cost.user_s > 0.0, "{cost:?}");
        let rss = cost.resident_bytes.expect("VmRSS of this process");
        assert!(rss > 1 << 20, "{rss}");
        let text = super::super::text::encode(&self_families(&cost, 42));
        assert!(text.contains("sockscope_agent_cpu_seconds_total{mode=\"user\"} "));
        assert!(text.contains("sockscope_agent_cpu_seconds_total{mode=\"system\"} "));
        assert!(text.contains("# TYPE sockscope_agent_resident_bytes gauge\n"));
        assert!(text.contains("sockscope_agent_series 42\n"), "{text}");
    }

    #[test]
    fn extend_counts_the_series_before_it() {
        let mut fams = vec![family(
            "x_total",
            "x",
            pb::MetricType::Counter,
            vec![counter(vec![], 1.0), counter(vec![label("a", "b")], 2.0)],
        )];
        extend(&mut fams);
        let text = super::super::text::encode(&fams);
        assert!(text.contains("sockscope_agent_series 2\n"), "{text}");
        assert!(text.contains("# TYPE sockscope_net_resets_total counter\n"));
    }
}
