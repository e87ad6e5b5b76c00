//! Writing an artifact directory as a set: every file goes into a hidden
//! temporary directory beside the destination, which is renamed into place
//! only once everything is written. A failed or interrupted run removes
//! the temporary directory (the guard's Drop), so no half-written or
//! success-looking directory is ever left at the destination.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error;

/// Files whose presence marks a directory as a sockscope artifact, which a
/// new run may replace. Anything else at the destination is refused.
pub const MARKERS: &[&str] = &["run.json", "bench.json", "demo.json"];

/// An artifact directory being written.
pub struct Staging {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

/// Refuses a destination that exists and is not a sockscope artifact
/// directory (a usage error, checked before any measurement starts).
pub fn check_destination(dest: &Path) -> Result<()> {
    if !dest.exists() {
        let parent = parent_of(dest);
        if !parent.is_dir() {
            return Err(error::usage(format!(
                "--out {}: directory {} does not exist",
                dest.display(),
                parent.display()
            )));
        }
        return Ok(());
    }
    if !dest.is_dir() {
        return Err(error::usage(format!(
            "--out {}: exists and is not a directory",
            dest.display()
        )));
    }
    let empty = fs::read_dir(dest)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    if empty || MARKERS.iter().any(|m| dest.join(m).is_file()) {
        return Ok(());
    }
    Err(error::usage(format!(
        "--out {}: exists and is not a sockscope artifact directory; \
         choose another directory (sockscope only replaces its own artifacts)",
        dest.display()
    )))
}

fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Staging {
    /// Creates the temporary directory beside `dest` (same filesystem, so
    /// the final rename is atomic).
    pub fn new(dest: &Path) -> Result<Self> {
        check_destination(dest)?;
        let name = dest
            .file_name()
            .with_context(|| format!("{} is not a directory path", dest.display()))?
            .to_string_lossy()
            .into_owned();
        let tmp = parent_of(dest).join(format!(".{name}.tmp.{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(Self {
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    /// The temporary directory (files written here appear at the
    /// destination on commit).
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Writes one file of the set (`name` may contain subdirectories).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.tmp.join(name);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let mut f = fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", p.display()))?;
        f.sync_all()
            .with_context(|| format!("syncing {}", p.display()))
    }

    /// Serialises `value` as pretty JSON into `name`.
    pub fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).context("serialising JSON")?;
        bytes.push(b'\n');
        self.write(name, &bytes)
    }

    /// Moves the set into place. An existing artifact directory at the
    /// destination is moved aside first and removed after the rename.
    pub fn commit(mut self) -> Result<PathBuf> {
        let old = if self.dest.exists() {
            let name = self
                .dest
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            let aside = parent_of(&self.dest).join(format!(
                ".{}.old.{}",
                name.unwrap_or_default(),
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&aside);
            fs::rename(&self.dest, &aside)
                .with_context(|| format!("moving the previous {} aside", self.dest.display()))?;
            Some(aside)
        } else {
            None
        };
        fs::rename(&self.tmp, &self.dest).with_context(|| {
            format!("renaming {} to {}", self.tmp.display(), self.dest.display())
        })?;
        self.committed = true;
        if let Some(o) = old {
            let _ = fs::remove_dir_all(o);
        }
        if let Ok(d) = fs::File::open(parent_of(&self.dest)) {
            let _ = d.sync_all();
        }
        Ok(self.dest.clone())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_and_drop_cleans() {
        let base = std::env::temp_dir().join(format!("sockscope-staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).unwrap();
        let dest = base.join("art");
        {
            let s = Staging::new(&dest).unwrap();
            s.write("run.json", b"{}").unwrap();
            // dropped without commit: nothing at dest, no temp left
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(&base).unwrap().count(), 0);
        let s = Staging::new(&dest).unwrap();
        s.write("run.json", b"1").unwrap();
        s.commit().unwrap();
        let s = Staging::new(&dest).unwrap();
        s.write("run.json", b"2").unwrap();
        s.write("sub/x.txt", b"x").unwrap();
        s.commit().unwrap();
        assert_eq!(fs::read(dest.join("run.json")).unwrap(), b"2");
        assert_eq!(fs::read_dir(&base).unwrap().count(), 1);
        // a foreign directory is refused
        let foreign = base.join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("notes.txt"), b"mine").unwrap();
        let e = Staging::new(&foreign).err().unwrap();
        assert_eq!(e.downcast_ref::<error::Exit>().map(|x| x.code), Some(2));
        fs::remove_dir_all(&base).unwrap();
    }
}
