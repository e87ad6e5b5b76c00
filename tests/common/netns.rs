//! Network namespaces for tests that must change a per-namespace sysctl
//! (ip_local_port_range, somaxconn) or shape a link (netem) without
//! touching the host: created with `ip netns`, removed on drop. Addresses
//! come from 10.231.0.0/16, used only between namespaces a test created.
#![allow(dead_code)]

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// One network namespace with its loopback up; deleted on drop.
pub struct Netns {
    /// Its name (`sstest-PID-N`).
    pub name: String,
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (package iproute2)")
}

fn ok(args: &[&str]) {
    let o = ip(args);
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Netns {
    /// A fresh namespace, or None (with the reason printed) where
    /// namespaces cannot be made outside CI; under CI=true that fails the
    /// test instead.
    pub fn new(test: &str) -> Option<Netns> {
        let name = format!(
            "sstest-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let o = Command::new("ip").args(["netns", "add", &name]).output();
        match o {
            Ok(o) if o.status.success() => {}
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => format!("ip: {e}"),
                };
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!("{test}: CI=true but a network namespace cannot be made: {why}");
                }
                eprintln!("SKIP {test}: cannot make a network namespace: {why}");
                return None;
            }
        }
        let ns = Netns { name };
        ok(&["-n", &ns.name, "link", "set", "lo", "up"]);
        Some(ns)
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Sets a per-namespace sysctl (`net.ipv4.ip_local_port_range`,
    /// "40000 40009").
    pub fn sysctl(&self, key: &str, value: &str) {
        let o = self
            .command("sysctl")
            .args(["-w", &format!("{key}={value}")])
            .output()
            .expect("running sysctl");
        assert!(
            o.status.success(),
            "sysctl {key}={value} in {}: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Runs `ip ARGS` inside the namespace (`ip -n NAME ...`), failing the
    /// test when it fails.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ok(&all);
    }

    /// Runs `tc ARGS` inside the namespace, failing the test when it fails.
    pub fn tc(&self, args: &[&str]) {
        let o = self.command("tc").args(args).output().expect("running tc");
        assert!(
            o.status.success(),
            "tc {} in {}: {}",
            args.join(" "),
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Processes still inside keep the namespace alive but unnamed;
        // tests kill theirs before this runs.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A veth pair between two namespaces.
pub struct Veth {
    /// Address of `a`'s end (no prefix).
    pub a_ip: String,
    /// Address of `b`'s end.
    pub b_ip: String,
    /// Device name in `a` (for `tc qdisc ... dev`).
    pub a_dev: String,
    /// Device name in `b`.
    pub b_dev: String,
}

/// Joins `a` and `b` with a veth pair: `a` gets 10.231.N.1/24, `b`
/// 10.231.N.2/24 (N from the pair's sequence number). The pair goes when
/// either namespace is deleted.
pub fn veth(a: &Netns, b: &Netns) -> Veth {
    let n = SEQ.fetch_add(1, Ordering::SeqCst) % 250 + 1;
    let (ea, eb) = (
        format!("ssa{}-{n}", std::process::id() % 10000),
        format!("ssb{}-{n}", std::process::id() % 10000),
    );
    ok(&[
        "link", "add", &ea, "netns", &a.name, "type", "veth", "peer", "name", &eb, "netns", &b.name,
    ]);
    let (ipa, ipb) = (format!("10.231.{n}.1"), format!("10.231.{n}.2"));
    a.ip(&["addr", "add", &format!("{ipa}/24"), "dev", &ea]);
    b.ip(&["addr", "add", &format!("{ipb}/24"), "dev", &eb]);
    a.ip(&["link", "set", &ea, "up"]);
    b.ip(&["link", "set", &eb, "up"]);
    Veth {
        a_ip: ipa,
        b_ip: ipb,
        a_dev: ea,
        b_dev: eb,
    }
}
