//! A small tmpfs mounted for a test that needs a full filesystem (ENOSPC
//! on the write under test), unmounted on drop. Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a given size mounted at a directory.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's `size=`: "64k") at `at`, made
    /// if missing.
    pub fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("tmpfs")
            .arg(at)
            .status()
            .unwrap();
        assert!(st.success(), "mounting a tmpfs at {}", at.display());
        Self(at.to_path_buf())
    }

    /// Fills it: a file grown until ENOSPC.
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a process the failed test left with a file open there
        // does not keep the mount.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
