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

pub use crate::report::path::{DirectionStats, NetPath, PathRecord, RelayStats};
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
