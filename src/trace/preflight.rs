//! Checks made before loading anything, so a missing capability or kernel
//! feature is reported by name instead of as a libbpf errno.

use std::path::Path;

use anyhow::{Result, bail};

use crate::procfs;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with a message naming what is missing: kernel BTF, or the
/// capabilities to load and attach tracing programs.
pub fn check() -> Result<()> {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing); \
             sockscope trace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    let caps = procfs::effective_caps().unwrap_or(0);
    let has = |c: u32| caps & (1u64 << c) != 0;
    let can_load = has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON));
    if !can_load {
        let mut missing = Vec::new();
        if !has(CAP_BPF) {
            missing.push("CAP_BPF");
        }
        if !has(CAP_PERFMON) {
            missing.push("CAP_PERFMON");
        }
        bail!(
            "sockscope trace needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to load \
             its BPF programs, and this process lacks {} (effective capabilities {caps:#x}); \
             run it as root, e.g. sudo sockscope trace ...",
            missing.join(" and ")
        );
    }
    Ok(())
}
