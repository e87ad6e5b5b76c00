//! The ready step: wait until the target itself (or, attached, its tree
//! or cgroup) owns a socket the load can use, learn the address to load,
//! and say precisely why when it does not (exited, port taken by someone
//! else, a child holds the listener, nothing reachable on the path).

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::loadline::LoadLine;
use super::spec::{ProfileSpec, ProfileTarget, Workload};
use super::subject::{Subject, cgroup_pids};
use super::watch::check_signals;
use crate::endpoint::Endpoint;
use crate::process::ready::{self, OwnedSocket, Proto, UnixListener};
use crate::process::target;
use crate::run::exit::{self, fail};
use crate::signals::Signals;

/// What the ready step learned: the address to load and every socket the
/// target owned then.
pub(super) struct Learned {
    /// The address the load goes to: a TCP/UDP one, or the target's Unix
    /// listener when it has no TCP listener.
    pub addr: Endpoint,
    /// Its TCP listeners and bound UDP sockets.
    pub sockets: Vec<OwnedSocket>,
    /// Its listening Unix stream sockets.
    pub unix: Vec<UnixListener>,
}

/// An address the load line names itself.
#[derive(Clone, Copy)]
enum Explicit<'a> {
    Inet(std::net::SocketAddr),
    /// A Unix socket's name as readiness names it (`ready::UnixListener`).
    Unix(&'a str),
}

/// Waits until the target itself owns a socket the load can use; returns
/// the address to load and every socket it owns. TCP is preferred: a
/// target is loaded on its Unix listener only when it has no TCP one (or
/// the load line names the Unix socket).
pub(super) fn wait_ready(
    spec: &ProfileSpec,
    subject: &mut Subject,
    signals: &mut Signals,
    path_ip: Option<Ipv4Addr>,
) -> Result<Learned> {
    let proto = if spec.workload.is_udp() {
        Proto::Udp
    } else {
        Proto::TcpListen
    };
    let kind = if spec.workload.is_udp() {
        "a bound UDP socket"
    } else {
        "a listening TCP or Unix stream socket"
    };
    let explicit_unix = match spec.workload.own().and_then(LoadLine::explicit) {
        Some(text) if Endpoint::is_unix_text(text) => match Endpoint::parse(text)? {
            Endpoint::Unix(name) => Some(name.to_string()),
            Endpoint::Inet(_) => None,
        },
        _ => None,
    };
    let explicit = match &explicit_unix {
        Some(name) => Some(Explicit::Unix(name)),
        None => spec
            .workload
            .own()
            .and_then(LoadLine::explicit)
            .map(crate::values::resolve)
            .transpose()?
            .map(Explicit::Inet),
    };
    let t0 = Instant::now();
    let deadline = t0 + spec.ready_timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        check_signals(signals, "while waiting for the target to be ready")?;
        if subject.exited() {
            let status = subject
                .launched
                .as_mut()
                .and_then(|l| l.try_exited())
                .map_or_else(|| "exited".to_string(), target::describe_status);
            let tail = subject.log_tail();
            let taken = ["in use", "EADDRINUSE"].iter().any(|w| tail.contains(w));
            let code = if taken {
                exit::PORT_TAKEN
            } else {
                exit::TARGET_EXITED_EARLY
            };
            let why = if taken {
                "its port is taken (address in use)"
            } else {
                "it never owned"
            };
            return Err(fail(
                code,
                format!(
                    "the target (pid {}) exited ({status}) before it was ready: {why}{}; its \
                     output:\n{tail}",
                    subject.pid,
                    if taken {
                        "".to_string()
                    } else {
                        format!(" {kind}")
                    },
                ),
            ));
        }
        let socks = ready_sockets(spec, subject.pid);
        // A UDP load has no use for a stream socket; an emulated path
        // carries IP only.
        let unix = if proto == Proto::Udp || path_ip.is_some() {
            Vec::new()
        } else {
            ready_unix(spec, subject.pid)
        };
        let learned = |addr: Endpoint| Learned {
            addr,
            sockets: socks.clone(),
            unix: unix.clone(),
        };
        match explicit {
            // A running service (-p, --cgroup) is ready already: with
            // listeners on several ports, which one the load is for is the
            // user's to say, never ours to guess.
            None if subject.launched.is_none() => {
                if let Some(list) = several_ports(&socks, proto, subject.pid) {
                    let first =
                        ready::choose(&socks, proto).map_or("ADDR".into(), |a| a.to_string());
                    match &spec.workload {
                        Workload::Own(l) => {
                            return Err(crate::error::usage(format!(
                                "the target listens on several ports ({list}): name the one to \
                                 load in --load, e.g. '{} {first} ...'",
                                l.workload(),
                            )));
                        }
                        Workload::Command(c, _) if c.has_placeholders() => {
                            return Err(crate::error::usage(format!(
                                "the target listens on several ports ({list}): ADDR, HOST and \
                                 PORT would be one of them; write the address into --load-cmd \
                                 instead (e.g. {first})"
                            )));
                        }
                        // Every listening port is observed; the address
                        // named in the record is one of them.
                        _ => {}
                    }
                }
                let chosen = match path_ip {
                    Some(ip) => choose_on_path(subject, &socks, proto, ip)?,
                    None => ready::choose(&socks, proto),
                };
                if let Some(addr) = chosen {
                    return Ok(learned(addr.into()));
                }
                if let Some(addr) = choose_unix(spec, &unix, subject.pid)? {
                    return Ok(learned(addr));
                }
            }
            None => {
                let chosen = match path_ip {
                    Some(ip) => choose_on_path(subject, &socks, proto, ip)?,
                    None => ready::choose(&socks, proto),
                };
                if let Some(addr) = chosen {
                    return Ok(learned(addr.into()));
                }
                if let Some(addr) = choose_unix(spec, &unix, subject.pid)? {
                    return Ok(learned(addr));
                }
            }
            Some(Explicit::Unix(name)) => {
                if unix.iter().any(|l| l.name == name) {
                    return Ok(learned(Endpoint::parse(&format!("unix:{name}"))?));
                }
                let others = ready::unix_listeners_named(name, &ready_tree(spec, subject.pid));
                if !unix.is_empty() && !others.is_empty() {
                    return Err(unix_taken(subject, name, &unix, &others));
                }
            }
            Some(Explicit::Inet(addr)) => {
                if ready::serves(&socks, proto, addr) {
                    return Ok(learned(addr.into()));
                }
                let others =
                    ready::listeners_on_port(addr.port(), proto, &ready_tree(spec, subject.pid));
                let mine = socks.iter().any(|s| s.proto == proto);
                if mine && !others.is_empty() {
                    return Err(port_taken(subject, addr, &socks, &others));
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            match explicit {
                Some(Explicit::Inet(addr)) => {
                    let others = ready::listeners_on_port(
                        addr.port(),
                        proto,
                        &ready_tree(spec, subject.pid),
                    );
                    if !others.is_empty() {
                        return Err(port_taken(subject, addr, &socks, &others));
                    }
                }
                Some(Explicit::Unix(name)) => {
                    let others = ready::unix_listeners_named(name, &ready_tree(spec, subject.pid));
                    if !others.is_empty() {
                        return Err(unix_taken(subject, name, &unix, &others));
                    }
                }
                None => {}
            }
            let named = match explicit {
                Some(Explicit::Inet(a)) => Some(a.to_string()),
                Some(Explicit::Unix(n)) => Some(format!("unix:{n}")),
                None => None,
            };
            return Err(not_ready(spec, subject, kind, proto, &socks, &unix, named));
        }
        // Wake early on the target's exit or a signal; otherwise re-read
        // /proc with a growing pause (5 ms doubling to 100 ms).
        let wait = pause.min(deadline - now);
        let mut pfds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(subject.exit_fd.as_fd(), PollFlags::POLLIN),
        ];
        let ms = wait.as_millis().max(1).min(i32::MAX as u128) as i32;
        let _ = poll(
            &mut pfds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        );
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// On a path: the target's path address with the port of a socket bound
/// to it or to a wildcard; an error when the target listens only on
/// addresses the path cannot reach (127.0.0.1).
fn choose_on_path(
    subject: &Subject,
    socks: &[OwnedSocket],
    proto: Proto,
    ip: Ipv4Addr,
) -> Result<Option<std::net::SocketAddr>> {
    let mine: Vec<&OwnedSocket> = socks.iter().filter(|s| s.proto == proto).collect();
    if let Some(s) = mine
        .iter()
        .find(|s| s.local.ip() == IpAddr::V4(ip) || s.local.ip().is_unspecified())
    {
        return Ok(Some(std::net::SocketAddr::new(
            IpAddr::V4(ip),
            s.local.port(),
        )));
    }
    if mine.is_empty() {
        return Ok(None);
    }
    Err(crate::error::usage(format!(
        "--path: {} listens on {} only, which the load in the other namespace cannot reach; \
         make it listen on the path's target address {ip} or a wildcard (0.0.0.0 / [::]); a \
         sockscope serve target gets --listen {ip}:0 when it has no --listen of its own",
        subject.describe(),
        fmt_sockets(socks, subject.pid)
    )))
}

/// The sockets that make the target ready: with --pid, those of the
/// traced tree (the pid and its descendants, as the tracer follows them),
/// so a master whose worker holds the listener (haproxy -W, nginx,
/// postgres) is ready; a launched target must hold it itself.
fn ready_sockets(spec: &ProfileSpec, pid: i32) -> Vec<OwnedSocket> {
    match &spec.target {
        ProfileTarget::Pid(_) => ready::tree_sockets(pid),
        ProfileTarget::Cgroup(cg) => cgroup_pids(&cg.path)
            .into_iter()
            .flat_map(ready::owned_sockets)
            .collect(),
        _ => ready::owned_sockets(pid),
    }
}

/// The processes whose sockets count as the target's (see
/// [`ready_sockets`]); anyone else listening on the port is someone else.
fn ready_tree(spec: &ProfileSpec, pid: i32) -> Vec<i32> {
    match &spec.target {
        ProfileTarget::Pid(_) => std::iter::once(pid)
            .chain(crate::procfs::descendants(pid))
            .collect(),
        ProfileTarget::Cgroup(cg) => cgroup_pids(&cg.path),
        _ => vec![pid],
    }
}

/// `tcp 127.0.0.1:80`, with the holder's pid when it is not `root`.
pub(super) fn fmt_socket(s: &OwnedSocket, root: i32) -> String {
    format!(
        "{} {}{}",
        match s.proto {
            Proto::TcpListen => "tcp",
            Proto::Udp => "udp",
        },
        s.local,
        if s.pid == root {
            String::new()
        } else {
            format!(" (pid {})", s.pid)
        }
    )
}

/// The sockets of `proto`, listed, when they are on more than one port
/// (the same port on 0.0.0.0 and [::] is one service).
fn several_ports(socks: &[OwnedSocket], proto: Proto, root: i32) -> Option<String> {
    let mine: Vec<&OwnedSocket> = socks.iter().filter(|s| s.proto == proto).collect();
    let ports: std::collections::BTreeSet<u16> = mine.iter().map(|s| s.local.port()).collect();
    (ports.len() > 1).then(|| {
        mine.iter()
            .map(|s| fmt_socket(s, root))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn fmt_sockets(socks: &[OwnedSocket], root: i32) -> String {
    if socks.is_empty() {
        return "none".into();
    }
    socks
        .iter()
        .map(|s| fmt_socket(s, root))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Unix listeners that make the target ready, the same processes as
/// [`ready_sockets`]'s, each socket once.
fn ready_unix(spec: &ProfileSpec, pid: i32) -> Vec<UnixListener> {
    let mut seen = std::collections::HashSet::new();
    ready_tree(spec, pid)
        .into_iter()
        .flat_map(ready::owned_unix_listeners)
        .filter(|l| seen.insert(l.inode))
        .collect()
}

/// The target's Unix listener to load when it has no TCP one: the only
/// one, or for a launched target the first by name; a running service
/// with several is the user's to choose (usage error).
fn choose_unix(spec: &ProfileSpec, unix: &[UnixListener], root: i32) -> Result<Option<Endpoint>> {
    let names: std::collections::BTreeSet<&str> = unix.iter().map(|l| l.name.as_str()).collect();
    let Some(first) = names.first() else {
        return Ok(None);
    };
    if names.len() > 1
        && matches!(
            spec.target,
            ProfileTarget::Pid(_) | ProfileTarget::Cgroup(_)
        )
    {
        return Err(crate::error::usage(format!(
            "the target listens on several Unix sockets ({}): name the one to load in --load, \
             e.g. 'unix:{first}'",
            unix.iter()
                .map(|l| fmt_unix(l, root))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Endpoint::parse(&format!("unix:{first}")).map(Some)
}

/// `unix /run/app.sock`, with the holder's pid when it is not `root`.
pub(super) fn fmt_unix(l: &UnixListener, root: i32) -> String {
    format!(
        "unix {}{}",
        crate::text::escape(&l.name),
        if l.pid == root {
            String::new()
        } else {
            format!(" (pid {})", l.pid)
        }
    )
}

fn fmt_all(socks: &[OwnedSocket], unix: &[UnixListener], root: i32) -> String {
    if unix.is_empty() {
        return fmt_sockets(socks, root);
    }
    let mut all: Vec<String> = socks.iter().map(|s| fmt_socket(s, root)).collect();
    all.extend(unix.iter().map(|l| fmt_unix(l, root)));
    all.join(", ")
}

fn unix_taken(
    subject: &Subject,
    name: &str,
    unix: &[UnixListener],
    others: &[(i32, String)],
) -> anyhow::Error {
    let who: Vec<String> = others
        .iter()
        .map(|(p, c)| format!("pid {p} ({c})"))
        .collect();
    fail(
        exit::PORT_TAKEN,
        format!(
            "unix:{} is not served by {}: another process listens there ({}); the target owns: \
             {}. Give the load no address (profile learns the target's own) or the target's \
             socket.",
            crate::text::escape(name),
            subject.describe(),
            who.join(", "),
            fmt_all(&[], unix, subject.pid)
        ),
    )
}

fn port_taken(
    subject: &Subject,
    addr: std::net::SocketAddr,
    socks: &[OwnedSocket],
    others: &[(i32, String)],
) -> anyhow::Error {
    let who: Vec<String> = others
        .iter()
        .map(|(p, c)| format!("pid {p} ({c})"))
        .collect();
    fail(
        exit::PORT_TAKEN,
        format!(
            "{addr} is not served by {}: another process listens there ({}); the target owns: \
             {}. Give the load no address (profile learns the target's own) or the target's \
             address.",
            subject.describe(),
            who.join(", "),
            fmt_sockets(socks, subject.pid)
        ),
    )
}

fn not_ready(
    spec: &ProfileSpec,
    subject: &Subject,
    kind: &str,
    proto: Proto,
    socks: &[OwnedSocket],
    unix: &[UnixListener],
    explicit: Option<String>,
) -> anyhow::Error {
    let tree = matches!(
        spec.target,
        ProfileTarget::Pid(_) | ProfileTarget::Cgroup(_)
    );
    let mut msg = format!(
        "{}{} did not own {kind}{} within {:.1} s (--ready-timeout); {}: {}",
        subject.describe(),
        if tree { " and its descendants" } else { "" },
        explicit.map_or_else(String::new, |a| format!(" serving {a}")),
        spec.ready_timeout.as_secs_f64(),
        if tree { "they own" } else { "it owns" },
        fmt_all(socks, unix, subject.pid)
    );
    if tree {
        // Its descendants' sockets are already in `socks`: there is no
        // child to point at, and --pid was given.
        return fail(exit::TIMED_OUT, msg);
    }
    let kids: Vec<String> = crate::procfs::descendants(subject.pid)
        .into_iter()
        .filter_map(|p| {
            let s: Vec<OwnedSocket> = ready::owned_sockets(p)
                .into_iter()
                .filter(|s| s.proto == proto)
                .collect();
            (!s.is_empty()).then(|| {
                format!(
                    "pid {p} ({}) owns {}",
                    crate::text::escape(&crate::procfs::comm(p).unwrap_or_default()),
                    fmt_sockets(&s, p)
                )
            })
        })
        .collect();
    if !kids.is_empty() {
        msg.push_str(&format!(
            ". A child process does: {}. profile measures the process it launched itself; \
             start the server so that it is that process (e.g. `exec` in a shell wrapper) or \
             use --pid",
            kids.join("; ")
        ));
    }
    if subject.launched.is_some() {
        msg.push_str(&format!("; its output:\n{}", subject.log_tail()));
    }
    fail(exit::TIMED_OUT, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(proto: Proto, local: &str, pid: i32) -> OwnedSocket {
        OwnedSocket {
            proto,
            local: local.parse().unwrap(),
            inode: 1,
            pid,
        }
    }

    #[test]
    fn sockets_are_named_with_their_holder_when_it_is_not_the_root() {
        assert_eq!(
            fmt_socket(&sock(Proto::TcpListen, "127.0.0.1:80", 10), 10),
            "tcp 127.0.0.1:80"
        );
        assert_eq!(
            fmt_socket(&sock(Proto::Udp, "[::]:53", 11), 10),
            "udp [::]:53 (pid 11)"
        );
        assert_eq!(fmt_sockets(&[], 10), "none");
        assert_eq!(
            fmt_sockets(
                &[
                    sock(Proto::TcpListen, "0.0.0.0:8080", 10),
                    sock(Proto::Udp, "127.0.0.1:9", 12)
                ],
                10
            ),
            "tcp 0.0.0.0:8080, udp 127.0.0.1:9 (pid 12)"
        );
    }
}
