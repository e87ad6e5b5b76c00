//! The netem backend: a veth pair between the two namespaces and
//! `tc qdisc add dev X root netem delay RTT/2 JITTER loss P rate R limit N`
//! on each side's egress, so each direction gets half the RTT. Needs the
//! kernel's sch_netem (CONFIG_NET_SCH_NETEM) and iproute2's `ip` and `tc`.

use std::net::Ipv4Addr;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{Result, bail};

use super::spec::{PathSpec, fmt_duration, fmt_rate};

/// Runs `prog args` inside namespace `ns`; its stdout, or an error with
/// what it printed. A missing program names its package.
fn run_in(ns: RawFd, prog: &str, args: &[String]) -> Result<String> {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    crate::process::target::dies_with_us(&mut cmd);
    // SAFETY: setns is async-signal-safe; `ns` stays open for the call.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(ns, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("the netem backend needs `{prog}` (package iproute2), which is not installed")
        }
        Err(e) => bail!("running {prog}: {e}"),
    };
    if !out.status.success() {
        bail!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Checks that a netem qdisc can be added (on the loopback of namespace
/// `ns`, removed again); the error names what is missing.
pub fn probe(ns: RawFd) -> Result<()> {
    run_in(ns, "tc", &words("qdisc add dev lo root netem delay 1ms")).map_err(|e| {
        let msg = format!("{e:#}");
        if msg.contains("package iproute2") {
            anyhow::anyhow!("--path-backend netem: {msg}")
        } else {
            anyhow::anyhow!(
                "--path-backend netem: this kernel cannot add a netem qdisc (it needs \
                 CONFIG_NET_SCH_NETEM, the sch_netem module: `modprobe sch_netem`); tc said: \
                 {msg}. --path-backend delayline (the default where netem is missing) runs \
                 without it"
            )
        }
    })?;
    run_in(ns, "tc", &words("qdisc del dev lo root"))?;
    Ok(())
}

/// The netem arguments for one direction.
fn netem_args(spec: &PathSpec, dev: &str) -> Vec<String> {
    let mut a = words(&format!(
        "qdisc add dev {dev} root netem limit {} delay {}",
        spec.limit,
        fmt_duration(spec.one_way())
    ));
    if !spec.jitter.is_zero() {
        a.push(fmt_duration(spec.jitter));
    }
    if spec.loss > 0.0 {
        a.extend(["loss".into(), format!("{}%", spec.loss * 100.0)]);
    }
    if let Some(r) = spec.rate_bps {
        a.extend(["rate".into(), fmt_rate(r)]);
    }
    a
}

/// Creates the veth pair (generator side in `ns.0`, target side moved to
/// `ns.1`), addresses and netem qdiscs. Everything goes with the
/// namespaces.
pub fn build(
    spec: &PathSpec,
    ns: (RawFd, RawFd),
    names: (&str, &str),
    ips: (Ipv4Addr, Ipv4Addr),
) -> Result<()> {
    let (g, t) = names;
    run_in(
        ns.0,
        "ip",
        &words(&format!("link add {g} type veth peer name {t}")),
    )?;
    let target_ns = format!("/proc/{}/fd/{}", std::process::id(), ns.1);
    run_in(
        ns.0,
        "ip",
        &["link", "set", t, "netns", &target_ns].map(String::from),
    )?;
    for (fd, dev, ip) in [(ns.0, g, ips.0), (ns.1, t, ips.1)] {
        run_in(fd, "ip", &words(&format!("addr add {ip}/30 dev {dev}")))?;
        run_in(fd, "ip", &words(&format!("link set {dev} up")))?;
        run_in(fd, "tc", &netem_args(spec, dev))?;
    }
    Ok(())
}

/// `tc -s qdisc show dev X` of each side, one line per side (empty where
/// it cannot be read).
pub fn stats(ns: (RawFd, RawFd), names: (&str, &str)) -> Vec<String> {
    [(ns.0, names.0), (ns.1, names.1)]
        .into_iter()
        .filter_map(|(fd, dev)| {
            run_in(fd, "tc", &words(&format!("-s qdisc show dev {dev}")))
                .ok()
                .map(|s| {
                    format!(
                        "{dev}: {}",
                        s.split_whitespace().collect::<Vec<_>>().join(" ")
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_gets_half_the_rtt_per_direction() {
        let s = PathSpec::parse("rtt=20ms jitter=1ms loss=0.1% rate=1gbit limit=500")
            .unwrap()
            .unwrap();
        assert_eq!(
            netem_args(&s, "v").join(" "),
            "qdisc add dev v root netem limit 500 delay 10ms 1ms loss 0.1% rate 1gbit"
        );
    }
}
