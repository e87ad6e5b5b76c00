//! Results: artifact schemas (serde, versioned), text rendering, HTML with
//! inline SVG charts, comparison, and the atomic writer every artifact goes
//! through. [`artifact`] is what the profile, experiment and demo
//! artifacts have in common (their JSON, summary and page); [`table`] a
//! table rendered to text and to HTML; [`bench`] each experiment's
//! results, table, text and page section; [`sections`] a profile's
//! sections, which its summary and its page walk in one order.

pub mod anatomy;
pub mod artifact;
pub mod bench;
// Above html, bench and sections: it lays out the pages they make.
#[cfg(test)]
mod browser_check;
pub mod commands;
pub mod compare;
pub mod composition;
pub mod endpoints_compare;
pub mod evidence;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod flame;
pub mod header;
pub mod headline;
pub mod html;
pub mod insight;
pub mod load;
pub mod load_text;
pub mod machine;
pub mod merge;
pub mod path;
pub mod path_insight;
pub mod pprof;
pub mod profile;
pub mod requests;
pub mod sections;
pub mod serve;
pub mod slow;
pub mod stacks;
pub mod stacks_compare;
pub mod stacks_only;
pub mod stacks_text;
pub mod svg;
pub mod sweep;
pub mod sweep_text;
pub mod syscall_class;
pub mod table;
pub mod tails;
pub mod trace;
pub mod trace_text;
pub mod tune;
pub mod units;
pub mod untraced;
pub mod volume;
pub mod workload;

use std::path::Path;

use anyhow::Result;

/// Writes `bytes` to `path` (see [`crate::output`]: streams and devices
/// are written through, files replaced atomically, planted links refused).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::output::write(path, bytes)
}

/// Serialises `value` as pretty JSON and writes it with [`write_atomic`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    crate::output::write_json(path, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("sockscope-aw-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(write_atomic(&dir.join("missing/x.json"), b"x").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
