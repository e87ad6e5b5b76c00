//! Emulated network paths (`--path`): the target runs in a network
//! namespace of its own, the load generator in another, and the two are
//! joined by a path that adds delay, jitter, loss and a rate limit.
//!
//! - [`spec`]: the `--path` grammar ([`PathSpec`]);
//! - [`ns`]: anonymous namespaces (no name, nothing to clean up: they go
//!   with the last descriptor or process holding them) and interface set-up;
//! - [`delayline`]: TUN devices and a relay thread in sockscope (runs on any
//!   kernel with TUN);
//! - [`netem`]: a veth pair shaped by `tc qdisc ... netem` on each side
//!   (kernels with sch_netem).
//!
//! Addresses come from 10.233.0.0/16 (a /30 per run, chosen by pid) and
//! exist only inside the two namespaces: the path's traffic never leaves
//! them.

pub mod delayline;
pub mod netem;
pub mod ns;
pub mod spec;

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use spec::PathSpec;

/// Which backend builds the path (`--path-backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum BackendChoice {
    /// netem when a probe qdisc can be added, else delayline.
    #[default]
    Auto,
    /// veth pair + `tc qdisc netem` (needs sch_netem and iproute2).
    Netem,
    /// TUN devices + sockscope's own relay thread.
    Delayline,
}

/// The backend a path runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// veth + netem.
    Netem,
    /// TUN + relay.
    Delayline,
}

impl Backend {
    /// Its name in artifacts and messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Netem => "netem",
            Backend::Delayline => "delayline",
        }
    }
}

/// Counters of one direction of the delayline relay.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionStats {
    /// Packets that entered the path.
    pub packets: u64,
    /// Their bytes (IP packets, no link-layer header).
    pub bytes: u64,
    /// Dropped by the random loss.
    pub dropped_loss: u64,
    /// Dropped because `limit` packets were already queued.
    pub dropped_limit: u64,
    /// Written out at the other end.
    pub delivered: u64,
    /// Writes the other device refused (the packet is lost).
    pub write_errors: u64,
}

/// What the delayline relay did.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RelayStats {
    /// Generator to target.
    pub to_target: DirectionStats,
    /// Target to generator.
    pub to_generator: DirectionStats,
    /// Most packets queued in one direction at once.
    pub max_queued: usize,
    /// CPU time of the relay thread, seconds.
    pub cpu_s: f64,
}

/// The path as artifacts record it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PathRecord {
    /// The canonical spec (`rtt=20ms loss=0.1% limit=1000`).
    pub spec: String,
    /// `delayline` or `netem`.
    pub backend: String,
    /// Round-trip time added, ms.
    pub rtt_ms: f64,
    /// Per-direction jitter bound, ms (uniform in [-jitter, +jitter]).
    pub jitter_ms: f64,
    /// Jitter distribution: `uniform`.
    pub jitter_distribution: String,
    /// Loss per packet and direction, percent.
    pub loss_pct: f64,
    /// Rate per direction, bits/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// Queue bound per direction, packets.
    pub limit: usize,
    /// The generator's address on the path.
    pub generator_addr: String,
    /// The target's address on the path.
    pub target_addr: String,
    /// Interface names (generator side, target side).
    pub interfaces: Vec<String>,
    /// The delayline relay's counters (delayline backend only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayStats>,
    /// `tc -s qdisc` of each side at the end (netem backend only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdisc_stats: Vec<String>,
}

/// What an artifact says about the network between load and target: an
/// emulated path, or `"loopback"`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum NetPath {
    /// A `--path`.
    Emulated(Box<PathRecord>),
    /// `"loopback"`: the load and the target met on 127.0.0.1/::1.
    Named(String),
}

impl NetPath {
    /// `"loopback"`.
    pub fn loopback() -> NetPath {
        NetPath::Named("loopback".into())
    }

    /// The emulated path, if any.
    pub fn emulated(&self) -> Option<&PathRecord> {
        match self {
            NetPath::Emulated(p) => Some(p),
            NetPath::Named(_) => None,
        }
    }
}

impl PathRecord {
    /// The caveat that replaces the loopback one.
    pub fn caveat(&self) -> String {
        let mut s = format!(
            "Emulated path ({}, {} backend): the load ran in one network namespace and the \
             target in another, joined by a path that adds {} ms of round-trip time",
            self.spec, self.backend, self.rtt_ms
        );
        if self.jitter_ms > 0.0 {
            s.push_str(&format!(" (+-{} ms jitter per direction)", self.jitter_ms));
        }
        if self.loss_pct > 0.0 {
            s.push_str(&format!(", drops {}% of packets", self.loss_pct));
        }
        if let Some(r) = self.rate_bps {
            s.push_str(&format!(", limits each direction to {}", spec::fmt_rate(r)));
        }
        s.push_str(
            ". No NIC, driver or wire is involved: both ends' kernel work and the path itself \
             run on this machine's CPUs",
        );
        if let Some(r) = &self.relay {
            s.push_str(&format!(
                " (the delayline relay used {:.3} s of CPU and adds its own wake-up latency, \
                 see docs/path.md)",
                r.cpu_s
            ));
        }
        s.push('.');
        s
    }
}

/// The /30 of this run inside 10.233.0.0/16: (generator, target).
pub fn addresses(pid: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(10, 233, 0, 0)) + (pid % 16384) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

/// A path between two anonymous namespaces; torn down when dropped (and,
/// whatever happens to sockscope, when its descriptors close).
pub struct EmulatedPath {
    /// What it emulates.
    pub spec: PathSpec,
    /// How.
    pub backend: Backend,
    /// The generator's address.
    pub generator_ip: Ipv4Addr,
    /// The target's address.
    pub target_ip: Ipv4Addr,
    /// (generator side, target side) interface names.
    pub interfaces: (String, String),
    gen_ns: OwnedFd,
    target_ns: OwnedFd,
    relay: Option<delayline::Relay>,
}

impl EmulatedPath {
    /// Builds the path: two namespaces, then the backend `choice` asks
    /// for (auto: netem when a probe qdisc can be added, else delayline).
    /// `--path-backend netem` where netem cannot run is an error that
    /// names what is missing.
    pub fn create(spec: &PathSpec, choice: BackendChoice) -> Result<EmulatedPath> {
        let pid = std::process::id();
        let (gen_ip, target_ip) = addresses(pid);
        let (gen_ns, ()) = ns::with_new_netns(|| Ok(()))?;
        let (target_ns, ()) = ns::with_new_netns(|| Ok(()))?;
        let backend = match choice {
            BackendChoice::Delayline => Backend::Delayline,
            BackendChoice::Netem => {
                netem::probe(gen_ns.as_raw_fd())?;
                Backend::Netem
            }
            BackendChoice::Auto => match netem::probe(gen_ns.as_raw_fd()) {
                Ok(()) => Backend::Netem,
                Err(_) => Backend::Delayline,
            },
        };
        let names = match backend {
            Backend::Delayline => (format!("ss{pid}g"), format!("ss{pid}t")),
            Backend::Netem => (format!("ss{pid}vg"), format!("ss{pid}vt")),
        };
        let relay = match backend {
            Backend::Delayline => {
                let g = in_ns(gen_ns.as_raw_fd(), || {
                    ns::open_tun(&names.0, gen_ip, target_ip)
                })?;
                let t = in_ns(target_ns.as_raw_fd(), || {
                    ns::open_tun(&names.1, target_ip, gen_ip)
                })?;
                Some(delayline::Relay::start(spec, g, t)?)
            }
            Backend::Netem => {
                netem::build(
                    spec,
                    (gen_ns.as_raw_fd(), target_ns.as_raw_fd()),
                    (&names.0, &names.1),
                    (gen_ip, target_ip),
                )?;
                None
            }
        };
        Ok(EmulatedPath {
            spec: spec.clone(),
            backend,
            generator_ip: gen_ip,
            target_ip,
            interfaces: names,
            gen_ns,
            target_ns,
            relay,
        })
    }

    /// The target namespace's descriptor (for a child's setns before exec).
    pub fn target_netns(&self) -> RawFd {
        self.target_ns.as_raw_fd()
    }

    /// Moves the calling thread into the generator namespace; threads it
    /// starts afterwards (the load's workers) are born there.
    pub fn enter_generator(&self) -> Result<()> {
        ns::enter(self.gen_ns.as_raw_fd())
    }

    /// Stops the path and returns its record with the counters.
    pub fn finish(mut self) -> PathRecord {
        let relay = self.relay.take().map(delayline::Relay::finish);
        let qdisc_stats = match self.backend {
            Backend::Netem => netem::stats(
                (self.gen_ns.as_raw_fd(), self.target_ns.as_raw_fd()),
                (&self.interfaces.0, &self.interfaces.1),
            ),
            Backend::Delayline => Vec::new(),
        };
        PathRecord {
            spec: self.spec.to_string(),
            backend: self.backend.name().into(),
            rtt_ms: self.spec.rtt.as_secs_f64() * 1e3,
            jitter_ms: self.spec.jitter.as_secs_f64() * 1e3,
            jitter_distribution: "uniform".into(),
            loss_pct: self.spec.loss * 100.0,
            rate_bps: self.spec.rate_bps,
            limit: self.spec.limit,
            generator_addr: self.generator_ip.to_string(),
            target_addr: self.target_ip.to_string(),
            interfaces: vec![self.interfaces.0.clone(), self.interfaces.1.clone()],
            relay,
            qdisc_stats,
        }
    }
}

/// Runs `f` on a short-lived thread inside namespace `ns`.
pub fn in_ns<T: Send>(ns: RawFd, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sockscope-netns".into())
            .spawn_scoped(s, || {
                ns::enter(ns)?;
                f()
            })
            .context("starting a thread inside the path's namespace")?
            .join()
            .unwrap_or_else(|_| anyhow::bail!("the namespace thread panicked"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> PathRecord {
        PathRecord {
            spec: "rtt=20ms loss=1% limit=1000".into(),
            backend: "delayline".into(),
            rtt_ms: 20.0,
            jitter_ms: 0.0,
            jitter_distribution: "uniform".into(),
            loss_pct: 1.0,
            rate_bps: None,
            limit: 1000,
            generator_addr: "10.233.0.1".into(),
            target_addr: "10.233.0.2".into(),
            interfaces: vec!["ss1g".into(), "ss1t".into()],
            relay: Some(RelayStats::default()),
            qdisc_stats: Vec::new(),
        }
    }

    #[test]
    fn net_path_is_a_record_or_the_word_loopback() {
        let lo = serde_json::to_value(NetPath::loopback()).unwrap();
        assert_eq!(lo, serde_json::json!("loopback"));
        let back: NetPath = serde_json::from_value(lo).unwrap();
        assert!(back.emulated().is_none());
        let e = NetPath::Emulated(Box::new(record()));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["backend"], "delayline");
        assert!(v.get("rate_bps").is_none());
        let back: NetPath = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn the_caveat_says_what_was_emulated() {
        let c = record().caveat();
        assert!(
            c.starts_with("Emulated path (rtt=20ms loss=1% limit=1000"),
            "{c}"
        );
        assert!(c.contains("20 ms of round-trip time"), "{c}");
        assert!(c.contains("drops 1% of packets"), "{c}");
        assert!(!c.contains("Loopback"), "{c}");
    }

    #[test]
    fn addresses_are_a_private_slash_30() {
        for pid in [1, 8210, 4_194_303] {
            let (g, t) = addresses(pid);
            assert_eq!(g.octets()[..2], [10, 233]);
            assert_eq!(u32::from(t), u32::from(g) + 1);
            assert_eq!(u32::from(g) % 4, 1, "{g}: .1 of its /30");
        }
    }
}
