//! The build and machine description every artifact carries (the schema;
//! `run::machine` reads the machine from /proc and /sys).

use serde::{Deserialize, Serialize};

/// The sockscope build that produced an artifact.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Build {
    /// Crate version.
    pub version: String,
    /// `git rev-parse HEAD` at build time, or "unknown".
    pub git_commit: String,
    /// "true" when the tree had uncommitted changes at build time, "false",
    /// or "unknown" (not built from a git checkout).
    pub git_dirty: String,
}

impl Build {
    /// This binary's build.
    pub fn current() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: env!("SOCKSCOPE_GIT_COMMIT").to_string(),
            git_dirty: env!("SOCKSCOPE_GIT_DIRTY").to_string(),
        }
    }

    /// `0.1.0 (abc1234, dirty)` for people.
    pub fn describe(&self) -> String {
        let short: String = self.git_commit.chars().take(12).collect();
        let dirty = match self.git_dirty.as_str() {
            "true" => ", uncommitted changes",
            "false" => "",
            _ => ", tree state unknown",
        };
        format!("{} ({short}{dirty})", self.version)
    }
}

/// The machine a run happened on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// /proc/cpuinfo `model name` of the first CPU.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// True when the CPU flags or DMI vendor name a hypervisor.
    pub virtual_machine: bool,
    /// What said so (`cpuinfo hypervisor flag`, `DMI sys_vendor QEMU`...).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub virtualization_evidence: Option<String>,
    /// name -> value (null when unreadable) for each sysctl recorded
    /// (`run::machine::SYSCTLS`).
    pub sysctls: std::collections::BTreeMap<String, Option<String>>,
}

impl Machine {
    /// One line for people: kernel, CPU, count, VM.
    pub fn describe(&self) -> String {
        format!(
            "Linux {}, {} x {}{}",
            self.kernel_release,
            self.cpus,
            self.cpu_model,
            if self.virtual_machine {
                " (virtual machine)"
            } else {
                ""
            }
        )
    }
}
