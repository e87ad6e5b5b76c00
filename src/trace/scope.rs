//! Placeholder of the scope resolution (replaced by the `scope` branch).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error;

/// A cgroup v2 directory to trace.
#[derive(Clone, Debug)]
pub struct CgroupTarget {
    /// Absolute path.
    pub path: PathBuf,
    /// Path below the v2 mount.
    pub rel: String,
    /// Cgroup id.
    pub id: u64,
    /// Depth below the root.
    pub level: u32,
    /// The unit it came from.
    pub unit: Option<String>,
}

/// The cgroup2 mount.
pub fn v2_mount() -> Result<PathBuf> {
    let m = std::fs::read_to_string("/proc/self/mounts")?;
    m.lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
        .ok_or_else(|| error::with_code(1, "cgroup v2 is not mounted"))
}

/// Resolves --cgroup.
pub fn resolve_cgroup(arg: &str) -> Result<CgroupTarget> {
    let mount = v2_mount()?;
    let p = if Path::new(arg).is_absolute() && Path::new(arg).exists() {
        PathBuf::from(arg)
    } else {
        mount.join(arg.trim_start_matches('/'))
    };
    let md =
        std::fs::metadata(&p).map_err(|e| error::with_code(1, format!("--cgroup {arg}: {e}")))?;
    let rel = p.strip_prefix(&mount).map_err(|_| {
        error::with_code(1, format!("--cgroup {arg}: not below {}", mount.display()))
    })?;
    let rel = format!("/{}", rel.display());
    let level = rel.split('/').filter(|c| !c.is_empty()).count() as u32;
    Ok(CgroupTarget {
        path: p,
        rel,
        id: md.ino(),
        level,
        unit: None,
    })
}

/// Resolves --unit.
pub fn resolve_unit(name: &str) -> Result<CgroupTarget> {
    Err(error::with_code(
        1,
        format!("--unit {name}: not implemented yet"),
    ))
}

/// Validates --comm.
pub fn comm_name(arg: &str) -> Result<[u8; 16]> {
    if arg.is_empty() || arg.len() > 15 {
        return Err(error::usage("--comm: 1 to 15 bytes"));
    }
    let mut b = [0u8; 16];
    b[..arg.len()].copy_from_slice(arg.as_bytes());
    Ok(b)
}

/// Names cgroup ids.
pub struct CgroupNames {
    mount: PathBuf,
    names: HashMap<u64, String>,
}

impl CgroupNames {
    /// For the hierarchy at `mount`.
    pub fn new(mount: PathBuf) -> Self {
        Self {
            mount,
            names: HashMap::new(),
        }
    }

    /// The path of cgroup `id`.
    pub fn name_of(&mut self, id: u64) -> String {
        if let Some(n) = self.names.get(&id) {
            return n.clone();
        }
        fn walk(dir: &Path, rel: &str, out: &mut HashMap<u64, String>, depth: u32) {
            if let Ok(md) = std::fs::symlink_metadata(dir) {
                out.insert(
                    md.ino(),
                    if rel.is_empty() {
                        "/".into()
                    } else {
                        rel.into()
                    },
                );
            }
            if depth > 8 {
                return;
            }
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        let name = e.file_name().to_string_lossy().into_owned();
                        walk(&e.path(), &format!("{rel}/{name}"), out, depth + 1);
                    }
                }
            }
        }
        walk(&self.mount.clone(), "", &mut self.names, 0);
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("#{id}"))
    }
}
