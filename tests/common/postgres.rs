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

/// A server of a [`Cluster`] started by the test (as user postgres), for
/// a profile that attaches to it (`--pid`); stopped (fast shutdown) on
/// drop.
pub struct Server {
    child: std::process::Child,
    pid: i32,
    /// Its port (TCP and the Unix socket's name).
    pub port: u16,
    sock_dir: PathBuf,
}

impl Server {
    /// Starts the cluster's server listening on `listen` (empty: the Unix
    /// socket only) and `port`, with `settings` (`name=value`, each a
    /// `-c`), and waits until it answers a query.
    pub fn start(cluster: &Cluster, listen: &str, port: u16, settings: &[&str]) -> Self {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]);
        cmd.args(cluster.server(listen, port));
        for s in settings {
            cmd.args(["-c", s]);
        }
        let log = std::fs::File::create(cluster.dir.path().join("server.log")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            pid: 0,
            port,
            sock_dir: cluster.sock_dir(),
        };
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(st) = server.child.try_wait().unwrap() {
                let said = std::fs::read_to_string(cluster.dir.path().join("server.log"));
                panic!("postgres exited ({st}): {}", said.unwrap_or_default());
            }
            if server.try_query("SELECT 1").is_some() {
                break;
            }
            assert!(std::time::Instant::now() < end, "postgres did not answer");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let pidfile = std::fs::read_to_string(cluster.data().join("postmaster.pid")).unwrap();
        server.pid = pidfile.lines().next().unwrap().trim().parse().unwrap();
        server
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The directory of its Unix socket (pgbench's `-h`).
    pub fn sock_dir(&self) -> &Path {
        &self.sock_dir
    }

    /// The rows of `sql` (psql -At over the Unix socket: `|` between
    /// fields), or None when it failed.
    pub fn try_query(&self, sql: &str) -> Option<String> {
        let out = Command::new("psql")
            .arg("-h")
            .arg(&self.sock_dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-At",
                "-c",
                sql,
            ])
            .arg("postgres")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// As [`Server::try_query`], failing the test when it failed.
    pub fn query(&self, sql: &str) -> String {
        self.try_query(sql)
            .unwrap_or_else(|| panic!("psql failed: {sql}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.pid > 0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if std::time::Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
