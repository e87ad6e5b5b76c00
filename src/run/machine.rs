//! What makes a measurement reproducible and honest: the kernel, the CPU,
//! the sysctls that shape socket behaviour (read from /proc and /sys into
//! [`Machine`], whose schema is report::machine's), and the caveats that
//! follow from them (virtual machine, loopback, shared CPUs).

use std::fs;
use std::net::IpAddr;

use crate::process::ready::is_loopback;
use crate::report::machine::Machine;

/// The sysctls recorded with every artifact (path under /proc/sys).
pub const SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "kernel.io_uring_disabled",
];

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Vendors whose DMI `sys_vendor` means a virtual machine.
const VM_VENDORS: &[&str] = &[
    "QEMU",
    "KVM",
    "VMware",
    "Microsoft Corporation",
    "Xen",
    "innotek",
    "Amazon EC2",
    "Google",
    "Firecracker",
    "Parallels",
    "BHYVE",
    "OpenStack",
];

/// The reading half of [`Machine`]: its schema lives in report/ (a leaf that
/// touches no /proc), so what fills it from the running system lives here.
impl Machine {
    /// Reads everything from /proc and /sys (missing files are recorded as
    /// unknown, never guessed).
    pub fn current() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let flag = cpuinfo.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim() == "flags" && v.split_whitespace().any(|f| f == "hypervisor")
            })
        });
        let vendor = read_trim("/sys/class/dmi/id/sys_vendor");
        let vendor_vm = vendor
            .as_deref()
            .filter(|v| VM_VENDORS.iter().any(|x| v.contains(x)));
        let evidence = match (flag, vendor_vm) {
            (true, Some(v)) => Some(format!("cpuinfo hypervisor flag; DMI sys_vendor {v}")),
            (true, None) => Some("cpuinfo hypervisor flag".to_string()),
            (false, Some(v)) => Some(format!("DMI sys_vendor {v}")),
            (false, None) => None,
        };
        let sysctls = SYSCTLS
            .iter()
            .map(|name| {
                let path = format!("/proc/sys/{}", name.replace('.', "/"));
                // Multi-value sysctls are tab-separated; spaces read better.
                let v =
                    read_trim(&path).map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "));
                (name.to_string(), v)
            })
            .collect();
        Self {
            kernel_release: read_trim("/proc/sys/kernel/osrelease")
                .unwrap_or_else(|| "unknown".into()),
            kernel_version: read_trim("/proc/sys/kernel/version")
                .unwrap_or_else(|| "unknown".into()),
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            virtual_machine: evidence.is_some(),
            virtualization_evidence: evidence,
            sysctls,
        }
    }
}

/// The caveats every single-host run carries, as sentences.
pub fn caveats(machine: &Machine, target_ip: Option<IpAddr>, shared_cpus: bool) -> Vec<String> {
    let mut out = Vec::new();
    if target_ip.is_some_and(is_loopback) {
        out.push(
            "Loopback: the load and the target talk over 127.0.0.1/::1, so no NIC, driver or \
             wire is involved, and both ends' kernel work (including the softirq processing of \
             each packet) lands on this machine's CPUs."
                .to_string(),
        );
    }
    if let Some(why) = &machine.virtualization_evidence {
        out.push(format!(
            "Virtual machine ({why}): context switches, timer wake-ups and syscalls cost more \
             than on bare metal, and a neighbour on the host can steal CPU time."
        ));
    }
    if shared_cpus {
        out.push(format!(
            "The load generator and the target share the same {} CPU{} (neither is pinned): \
             each one's CPU time is partly the other's waiting, and either may be the \
             bottleneck.",
            machine.cpus,
            if machine.cpus == 1 { "" } else { "s" }
        ));
    }
    out
}

/// True when the CPU sets of `pid` and this process overlap (both may run
/// on the same CPU). Unknown counts as shared.
pub fn shares_cpus_with(pid: i32) -> bool {
    let mine = allowed_cpus("self");
    let theirs = allowed_cpus(&pid.to_string());
    match (mine, theirs) {
        (Some(a), Some(b)) => a.iter().any(|c| b.contains(c)),
        _ => true,
    }
}

/// `Cpus_allowed_list` of /proc/WHO/status, expanded.
fn allowed_cpus(who: &str) -> Option<Vec<u32>> {
    let s = fs::read_to_string(format!("/proc/{who}/status")).ok()?;
    let list = s
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut out = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                out.extend(a..=b.min(a + 4096));
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::machine::Build;

    #[test]
    fn reads_this_machine() {
        let m = Machine::current();
        assert!(m.cpus >= 1);
        assert_ne!(m.kernel_release, "unknown");
        assert_eq!(m.sysctls.len(), SYSCTLS.len());
        assert!(m.sysctls["net.core.somaxconn"].is_some());
        assert!(shares_cpus_with(std::process::id() as i32));
        let b = Build::current();
        assert!(!b.git_commit.is_empty());
    }
}
