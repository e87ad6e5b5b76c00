//! A cgroup of its own for each process sockscope launches, so that a stop
//! reaches everything it started: a process group is left by any child
//! that calls `setsid` or `setpgid` (a `--load-cmd` script's background
//! job, a daemonizing server), and such a child kept loading the target as
//! root after `profile` had exited 0. A cgroup cannot be left by its
//! members: the kernel moves a process only on a write by someone allowed
//! to write the cgroup's `cgroup.procs`.
//!
//! The cage is a child of sockscope's own cgroup on the cgroup2 hierarchy
//! (the unified mount of a hybrid layout counts: no controller is needed),
//! named afresh with `mkdir` (an existing directory is never reused), and
//! the launched process moves itself in between fork and exec, before it
//! can start anything. `cgroup.kill` (Linux 5.14) kills every member at
//! once; on older kernels the members are killed one by one until none is
//! left. Where there is no cgroup2 mount or sockscope may not create a
//! cgroup (not root), [`Cage::create`] says why and the process group is
//! the only reach, as before.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Most bytes read of /proc/self/mounts, /proc/self/cgroup or a
/// cgroup.procs: far more than any real one.
const READ_LIMIT: u64 = 4 << 20;

/// A cgroup holding one launched process and everything it starts;
/// killed and removed when dropped.
#[derive(Debug)]
pub struct Cage {
    dir: PathBuf,
    /// Its `cgroup.procs`, opened for writing before the fork: the child
    /// writes `0` to it (moving itself), an async-signal-safe write.
    procs: OwnedFd,
}

impl Cage {
    /// A new, empty cgroup under sockscope's own; an error saying why
    /// there is none (no cgroup2 mount, not permitted).
    pub fn create() -> Result<Self> {
        let mounts = read_bounded(Path::new("/proc/self/mounts"))?;
        let mount = cgroup2_mount(&mounts).context("no cgroup2 hierarchy is mounted")?;
        let own = read_bounded(Path::new("/proc/self/cgroup"))?;
        let own = unified_path(&own).context("/proc/self/cgroup has no cgroup2 (0::) line")?;
        let parent = mount.join(own.trim_start_matches('/'));
        sweep_stale(&parent);
        static SEQ: AtomicU32 = AtomicU32::new(0);
        for _ in 0..16 {
            let name = format!(
                "sockscope-{}-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed),
                nanos()
            );
            let dir = parent.join(name);
            match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
                Ok(()) => {
                    let procs = std::fs::OpenOptions::new()
                        .write(true)
                        .open(dir.join("cgroup.procs"));
                    return match procs {
                        Ok(f) => Ok(Self {
                            dir,
                            procs: f.into(),
                        }),
                        Err(e) => {
                            let _ = std::fs::remove_dir(&dir);
                            Err(e)
                                .with_context(|| format!("opening {}/cgroup.procs", dir.display()))
                        }
                    };
                }
                // Someone made that name first: never use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("creating a cgroup in {}", parent.display()));
                }
            }
        }
        bail!(
            "no fresh cgroup name in {} after 16 tries",
            parent.display()
        )
    }

    /// The descriptor a child writes `0` to, between fork and exec, to move
    /// itself in.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The processes in it now.
    pub fn pids(&self) -> Vec<i32> {
        read_bounded(&self.dir.join("cgroup.procs"))
            .map(|t| parse_pids(&t))
            .unwrap_or_default()
    }

    /// Sends `sig` to every process in it.
    pub fn signal(&self, sig: i32) {
        self.signal_outside_group(sig, None);
    }

    /// Sends `sig` to every process in it but those of process group
    /// `group` (already signalled through it: a second SIGTERM that comes
    /// while a server is stopping on the first stays pending, and kills it
    /// by default once its handling ends and the signal is unblocked).
    pub fn signal_outside_group(&self, sig: i32, group: Option<i32>) {
        for pid in self.pids() {
            // SAFETY: getpgid has no memory preconditions; -1 (gone) is
            // not a group, so such a pid is signalled and gets ESRCH.
            if group.is_some_and(|g| unsafe { libc::getpgid(pid) } == g) {
                continue;
            }
            // SAFETY: kill has no memory preconditions; a pid gone since
            // the read gets ESRCH.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// Kills every process in it and waits up to `limit` for it to be
    /// empty; true when it is.
    pub fn kill(&self, limit: Duration) -> bool {
        let t0 = Instant::now();
        let killed_at_once = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"))
            .is_ok();
        loop {
            if !self.populated() {
                return true;
            }
            if !killed_at_once {
                // Without cgroup.kill: one by one, again while a fork
                // races the reads.
                self.signal(libc::SIGKILL);
            }
            if t0.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether a live process is in it (`cgroup.events`' `populated`).
    fn populated(&self) -> bool {
        match read_bounded(&self.dir.join("cgroup.events")) {
            Ok(t) => t.lines().any(|l| l.trim() == "populated 1"),
            Err(_) => !self.pids().is_empty(),
        }
    }
}

impl Drop for Cage {
    fn drop(&mut self) {
        if self.kill(Duration::from_secs(2)) {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Removes the empty cages a sockscope that is gone left in `parent` (one
/// killed by SIGKILL never removed its own): named `sockscope-PID-...`
/// with no process PID any more. A cage with a member is never removed
/// (the kernel refuses to), nor one whose PID is alive (it may be that
/// sockscope's, or a reused PID's: left for later).
fn sweep_stale(parent: &Path) {
    let Ok(dir) = std::fs::read_dir(parent) else {
        return;
    };
    for e in dir.flatten().take(4096) {
        let name = e.file_name();
        let Some(pid) = stale_owner(&name.to_string_lossy()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// The sockscope PID in a cage's name (`sockscope-PID-N-NANOS`).
fn stale_owner(name: &str) -> Option<u32> {
    let mut w = name.strip_prefix("sockscope-")?.split('-');
    let pid = w.next()?.parse().ok()?;
    (w.count() == 2).then_some(pid)
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

fn read_bounded(path: &Path) -> Result<String> {
    let mut text = String::new();
    File::open(path)
        .and_then(|f| f.take(READ_LIMIT).read_to_string(&mut text))
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(text)
}

/// The mount point of the first cgroup2 file system in /proc/mounts'
/// format (`DEVICE MOUNTPOINT TYPE OPTIONS ...`, octal escapes in the
/// mount point).
fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let mut w = l.split(' ');
        let (_dev, at, fstype) = (w.next()?, w.next()?, w.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(unescape(at)))
    })
}

/// `\ooo` octal escapes (the kernel's for space, tab, newline, backslash)
/// written back.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup2 path in /proc/PID/cgroup's format (its `0::PATH` line).
fn unified_path(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|p| p.starts_with('/') && !p.split('/').any(|c| c == ".."))
}

/// The pids of a cgroup.procs, one per line; anything else skipped.
fn parse_pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|&p: &i32| p > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_in_a_hybrid_layout() {
        let m = "sysfs /sys sysfs rw 0 0\n\
                 tmpfs /sys/fs/cgroup tmpfs ro 0 0\n\
                 cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n\
                 cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
        assert_eq!(
            cgroup2_mount(m),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("none /my\\040cg cgroup2 rw 0 0\n"),
            Some(PathBuf::from("/my cg"))
        );
        assert_eq!(
            cgroup2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n"),
            None
        );
        assert_eq!(unescape("a\\134b\\012"), "a\\b\n");
        assert_eq!(unescape("tail\\04"), "tail\\04");
    }

    #[test]
    fn the_unified_line_is_the_path_and_never_climbs() {
        let t = "12:cpu,cpuacct:/user.slice\n0::/user.slice/session-3.scope\n";
        assert_eq!(unified_path(t), Some("/user.slice/session-3.scope"));
        assert_eq!(unified_path("0::/a/../b\n"), None);
        assert_eq!(unified_path("1:name=systemd:/x\n"), None);
        assert_eq!(parse_pids("12\n\nx\n-3\n40\n"), vec![12, 40]);
        assert_eq!(stale_owner("sockscope-123-0-999"), Some(123));
        assert_eq!(stale_owner("sockscope-123-0"), None);
        assert_eq!(stale_owner("system.slice"), None);
        assert_eq!(stale_owner("sockscope-x-0-1"), None);
    }

    mod props {
        use super::super::*;
        use crate::hostile;
        use proptest::prelude::*;

        /// A mount point with the characters the kernel escapes.
        fn escape(p: &str) -> String {
            p.chars()
                .map(|c| match c {
                    ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", c as u32),
                    c => c.to_string(),
                })
                .collect()
        }

        proptest! {
            #![proptest_config(hostile::config(256))]

            #[test]
            fn a_mount_point_written_escaped_reads_back_whole(
                at in "/[a-z \t\n\\\\]{1,30}",
            ) {
                let mounts = format!("none {} cgroup2 rw 0 0\n", escape(&at));
                prop_assert_eq!(cgroup2_mount(&mounts), Some(PathBuf::from(&at)));
            }

            #[test]
            fn a_cgroup_path_and_its_pids_read_back(
                path in "(/[a-z0-9][a-z0-9.-]{0,11}){1,5}",
                pids in proptest::collection::vec(1..i32::MAX, 0..20),
            ) {
                let text = format!("3:cpu:/x\n0::{path}\n");
                prop_assert_eq!(unified_path(&text), Some(path.as_str()));
                let list: String = pids.iter().map(|p| format!("{p}\n")).collect();
                prop_assert_eq!(parse_pids(&list), pids);
            }

            #[test]
            fn mutated_mounts_cgroup_files_and_names_never_panic(
                ms in hostile::mutations(),
            ) {
                let mounts = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n\
                              none /my\\040cg cgroup2 rw 0 0\n";
                let m = hostile::mutate_text(mounts, &ms);
                let _ = cgroup2_mount(&m);
                let _ = unescape(&m);
                let c = hostile::mutate_text("0::/user.slice/a.scope\n12\n40\n", &ms);
                if let Some(p) = unified_path(&c) {
                    prop_assert!(p.starts_with('/') && !p.split('/').any(|x| x == ".."));
                }
                prop_assert!(parse_pids(&c).iter().all(|&p| p > 0));
                let _ = stale_owner(&hostile::mutate_text("sockscope-123-0-999", &ms));
            }
        }
    }
}
