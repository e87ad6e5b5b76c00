//! dnsmasq as a test's DNS server (tests/udp_rr.rs, tests/anatomy_dns.rs):
//! its arguments for a free port, answering from its own configuration.

use std::path::Path;

/// dnsmasq's arguments: in the foreground on 127.0.0.1:`port`, no
/// upstream, no hosts file, no cache, bench.test answered with 10.0.0.1,
/// every query logged to `log`; `extra` adds records.
pub fn args(port: u16, log: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--keep-in-foreground",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--no-resolv",
        "--no-hosts",
        "--address=/bench.test/10.0.0.1",
        "--cache-size=0",
        "--log-queries",
        "--pid-file=",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(format!("--port={port}"));
    args.push(format!("--log-facility={}", log.display()));
    // As root dnsmasq would switch to nobody, who cannot write the log in
    // the scratch directory.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        args.push("--user=root".into());
    }
    args
}
