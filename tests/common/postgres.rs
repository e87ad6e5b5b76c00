//! PostgreSQL as a real peer: a fresh cluster in a temporary directory
//! owned by the `postgres` user (the server refuses to run as root), for a
//! target `profile -u postgres` launches, and pgbench as its load.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A cluster made with initdb (trust authentication, user `postgres`),
/// removed on drop with its directory.
pub struct Cluster {
    /// The server's programs (`postgres`, `initdb`, `pgbench`).
    pub bin: PathBuf,
    /// The temporary directory: `data/` and `sock/` inside.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Initializes a cluster, or None (with the reason printed; a panic
    /// under CI=true, where `make deps` installs postgresql) when
    /// PostgreSQL or its user is missing.
    pub fn init(test: &str) -> Option<Self> {
        let Some(bin) = bin_dir() else {
            return missing(
                test,
                "no PostgreSQL server (/usr/lib/postgresql/*/bin/postgres)",
            );
        };
        let Some(user) = nix::unistd::User::from_name("postgres").ok().flatten() else {
            return missing(test, "no postgres user");
        };
        let dir = tempfile::Builder::new()
            .prefix("sockscope-pg-")
            .tempdir()
            .unwrap();
        std::fs::create_dir(dir.path().join("sock")).unwrap();
        for p in [dir.path().to_path_buf(), dir.path().join("sock")] {
            nix::unistd::chown(&p, Some(user.uid), Some(user.gid)).unwrap();
        }
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin.join("initdb"))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Cluster { bin, dir })
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the server's Unix socket (`-k`, pgbench's `-h`).
    pub fn sock_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The server's command line: its socket in `sock_dir`, listening on
    /// TCP `listen` (empty: Unix only) and `port`, without fsync.
    pub fn server(&self, listen: &str, port: u16) -> Vec<String> {
        vec![
            self.bin.join("postgres").display().to_string(),
            "-D".into(),
            self.data().display().to_string(),
            "-k".into(),
            self.sock_dir().display().to_string(),
            "-c".into(),
            format!("listen_addresses={listen}"),
            "-p".into(),
            port.to_string(),
            "-F".into(),
        ]
    }
}

/// The newest installed server's program directory.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("postgres").exists() && b.join("pgbench").exists())
        .collect();
    found.sort_by_key(|b| {
        b.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str()?.parse::<u32>().ok())
    });
    found.pop()
}

fn missing(test: &str, why: &str) -> Option<Cluster> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why} under CI (make deps installs postgresql)");
    }
    eprintln!("SKIP {test}: {why}");
    None
}
