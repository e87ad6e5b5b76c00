//! The processes of one sockscope run, found by ancestry (other tests run
//! sockscope at the same time), and the wait for them to be gone; and, for
//! checks that nothing with a marker unique to one test is left, the
//! processes whose command line holds that marker.

use std::time::{Duration, Instant};

/// A process seen once: pid, start time (so a reused pid is not mistaken
/// for it) and command line.
#[derive(Clone, Debug)]
pub struct Seen {
    pub pid: i32,
    start: u64,
    pub cmdline: String,
}

/// (state, start time) from /proc/PID/stat.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: state is
    // field 3, starttime field 22.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((state, fields.get(19)?.parse().ok()?))
}

/// Every pid in /proc now.
pub fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
}

/// Processes whose command line (arguments joined by spaces) contains
/// `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    pids()
        .filter(|&pid| cmdline(pid).contains(needle))
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

impl Seen {
    fn of(pid: i32) -> Option<Self> {
        let (_, start) = stat(pid)?;
        Some(Self {
            pid,
            start,
            cmdline: cmdline(pid),
        })
    }

    /// Still running: the same process, with a thread that is not a
    /// zombie. A zombie whose new parent has not reaped it yet has released
    /// everything, but a killed multi-threaded process shows its leader as
    /// a zombie while other threads are still exiting and still hold its
    /// files (its listening socket among them): every thread must be done.
    pub fn running(&self) -> bool {
        let Some((state, start)) = stat(self.pid) else {
            return false;
        };
        if start != self.start {
            return false;
        }
        let live = |s: char| s != 'Z' && s != 'X';
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return live(state);
        };
        tasks.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|text| {
                    let rest = &text[text.rfind(')')? + 1..];
                    rest.split_whitespace().next()?.chars().next()
                })
                .is_some_and(live)
        })
    }
}

/// Every descendant of `root`, as now.
pub fn tree(root: i32) -> Vec<Seen> {
    sockscope::procfs::descendants(root)
        .into_iter()
        .filter_map(Seen::of)
        .collect()
}

/// Waits up to `limit` for all of `procs` to be gone; returns those still
/// running then.
pub fn still_running_after(procs: &[Seen], limit: Duration) -> Vec<Seen> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<Seen> = procs.iter().filter(|p| p.running()).cloned().collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `what` every 20 ms until it returns something or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut what: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = what() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Established TCP connections whose local port is `port` (the server's
/// side of a load's connections).
pub fn established_on(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .skip(1)
                .filter(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    let local_port = cols
                        .get(1)
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| u16::from_str_radix(p, 16).ok());
                    local_port == Some(port) && cols.get(3) == Some(&"01")
                })
                .map(|_| ())
                .collect::<Vec<_>>()
        })
        .count()
}
