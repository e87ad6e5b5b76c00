//! Checks made before loading anything, so a missing capability or kernel
//! feature is reported by name instead of as a libbpf errno.

use std::path::Path;

use anyhow::{Result, bail};

use crate::procfs;

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The BPF programs a command loads, which decide the capabilities it
/// needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// The syscall tracer's tracepoint programs (trace, profile, bench
    /// transport and overhead): CAP_BPF and CAP_PERFMON.
    Tracing,
    /// serve relay's sockmap: a SOCKHASH and an sk_skb verdict program.
    /// The map and the program type need CAP_NET_ADMIN besides CAP_BPF, and
    /// the verifier lets the program's packet pointer arithmetic through
    /// only with CAP_PERFMON (measured on Linux 6.18: each one missing
    /// fails the load with EPERM or EACCES).
    Sockmap,
}

impl Programs {
    /// The capabilities needed besides CAP_SYS_ADMIN, which covers all.
    fn needs(self) -> &'static [(u32, &'static str)] {
        match self {
            Programs::Tracing => &[(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")],
            Programs::Sockmap => &[
                (CAP_BPF, "CAP_BPF"),
                (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
                (CAP_PERFMON, "CAP_PERFMON"),
            ],
        }
    }
}

/// [`check_for`] the tracer, as `sockscope trace`.
pub fn check() -> Result<()> {
    check_for(Programs::Tracing, "sockscope trace")
}

/// Fails with a message naming what is missing for `who` (the command, as
/// the user would type it: "sockscope bench relay") to load `programs`:
/// kernel BTF, or capabilities.
pub fn check_for(programs: Programs, who: &str) -> Result<()> {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing); \
             {who} needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    let caps = procfs::effective_caps().unwrap_or(0);
    let missing = missing_caps(programs, caps);
    if !missing.is_empty() {
        let all: Vec<&str> = programs.needs().iter().map(|(_, n)| *n).collect();
        bail!(
            "{who} needs {} (or CAP_SYS_ADMIN) to load its BPF programs, and this process \
             lacks {} (effective capabilities {caps:#x}); run it as root, e.g. sudo {who} ...",
            and_list(&all),
            and_list(&missing)
        );
    }
    Ok(())
}

/// The capabilities `programs` need that `caps` (an effective set) lacks;
/// empty when it has them all, or CAP_SYS_ADMIN.
fn missing_caps(programs: Programs, caps: u64) -> Vec<&'static str> {
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) {
        return Vec::new();
    }
    programs
        .needs()
        .iter()
        .filter(|(c, _)| !has(*c))
        .map(|(_, n)| *n)
        .collect()
}

/// "A", "A and B", "A, B and C".
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn bit(c: u32) -> u64 {
        1u64 << c
    }

    #[test]
    fn tracing_needs_bpf_and_perfmon_or_sys_admin() {
        assert_eq!(
            missing_caps(Programs::Tracing, 0),
            ["CAP_BPF", "CAP_PERFMON"]
        );
        assert_eq!(
            missing_caps(Programs::Tracing, bit(CAP_BPF)),
            ["CAP_PERFMON"]
        );
        assert!(missing_caps(Programs::Tracing, bit(CAP_BPF) | bit(CAP_PERFMON)).is_empty());
        assert!(missing_caps(Programs::Tracing, bit(CAP_SYS_ADMIN)).is_empty());
    }

    #[test]
    fn sockmap_also_needs_net_admin() {
        assert_eq!(
            missing_caps(Programs::Sockmap, bit(CAP_BPF) | bit(CAP_PERFMON)),
            ["CAP_NET_ADMIN"]
        );
        assert_eq!(
            missing_caps(Programs::Sockmap, 0),
            ["CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"]
        );
        assert!(missing_caps(Programs::Sockmap, bit(CAP_SYS_ADMIN)).is_empty());
    }

    #[test]
    fn lists_read_as_english() {
        assert_eq!(and_list(&["A"]), "A");
        assert_eq!(and_list(&["A", "B"]), "A and B");
        assert_eq!(and_list(&["A", "B", "C"]), "A, B and C");
    }
}
