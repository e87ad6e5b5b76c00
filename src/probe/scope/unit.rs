//! `--unit NAME` ([`resolve_unit`]): the unit's name completed like
//! systemctl does, its cgroup asked of systemd (`systemctl show`, bounded
//! wait) or searched for in the v2 hierarchy, and checked to hold a process.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::cgroup::open_cgroup;
use super::mounts::{MountEntry, below, pick_v2, read_mountinfo, v2_missing};
use super::open::open_dir;
use super::place::{self, WHERE};
use super::walk::{MAX_DEPTH, WalkEntry, walk, walk_fd};
use super::{CgroupTarget, UnitFound};
use crate::error::{usage, with_code};

/// How long `systemctl show` may take to answer before sockscope gives up.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where systemd says it is the running init (sd_booted(3)).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";

/// Unit types systemctl recognises as a name's suffix; any other name gets
/// `.service` appended, as systemctl does.
const UNIT_SUFFIXES: [&str; 11] = [
    ".service",
    ".socket",
    ".target",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".timer",
    ".path",
    ".slice",
    ".scope",
];

/// Resolves `--unit NAME` to the unit's cgroup.
///
/// The name is completed like systemctl does (`nginx` is `nginx.service`).
/// Where systemd runs (`/run/systemd/system` exists) it is asked with
/// `systemctl show`; elsewhere the v2 hierarchy is searched (8 levels deep,
/// 100,000 cgroups at most, no symbolic links) for a directory named
/// exactly like the unit where systemd would put a system unit
/// (`system.slice`, or a `system-*.slice` nested in it), owned by root from
/// the v2 root down. [`CgroupTarget::unit_note`] says which was taken and
/// how. Errors (exit 1): the unit is unknown, not active, has no cgroup,
/// has a cgroup without a process in it or below it, or several cgroups
/// carry its name where a system unit may be.
pub fn resolve_unit(name: &str) -> Result<CgroupTarget> {
    let unit = unit_name(name)?;
    let mounts = read_mountinfo()?;
    let Some(v2) = pick_v2(&mounts) else {
        return Err(with_code(1, format!("--unit {unit}: {}", v2_missing())));
    };
    let target = if Path::new(SYSTEMD_RUNNING).is_dir() {
        let show = systemctl_show(Path::new("systemctl"), &unit, SYSTEMCTL_TIMEOUT)?;
        let rel = control_group(&unit, &show)?;
        let path = below(&v2.mount_point, &rel);
        match open_cgroup(&path, &mounts) {
            Ok(t) => CgroupTarget {
                found_by: Some(UnitFound::Systemd),
                ..t
            },
            Err(e) => {
                return Err(with_code(
                    1,
                    format!("unit {unit} has ControlGroup={rel}, but {e}"),
                ));
            }
        }
    } else {
        search_unit(&unit, &v2.mount_point, &mounts)?
    };
    ensure_running(&unit, target)
}

/// `name` completed like systemctl does: no unit-type suffix means
/// `.service`.
fn unit_name(name: &str) -> Result<String> {
    if name.is_empty() {
        return Err(usage(
            "--unit needs a systemd unit name, such as nginx.service",
        ));
    }
    if name.contains('/') {
        return Err(usage(format!(
            "--unit {name}: a unit name contains no '/'; for a cgroup path use --cgroup"
        )));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(usage(format!(
            "--unit {name:?}: a unit name contains no spaces or control characters"
        )));
    }
    let has_suffix = UNIT_SUFFIXES
        .iter()
        .any(|s| name.len() > s.len() && name.ends_with(s));
    if UNIT_SUFFIXES.contains(&name) {
        return Err(usage(format!(
            "--unit {name}: a unit type alone is not a unit name (such as nginx{name})"
        )));
    }
    let unit = if has_suffix {
        name.to_owned()
    } else {
        format!("{name}.service")
    };
    // UNIT_NAME_MAX in systemd is 256 including the NUL.
    if unit.len() > 255 {
        return Err(usage(format!(
            "--unit: {} bytes is longer than a unit name can be (255)",
            unit.len()
        )));
    }
    Ok(unit)
}

/// What `systemctl show` says about a unit.
#[derive(Debug, Default, PartialEq, Eq)]
struct UnitShow {
    load_state: String,
    active_state: String,
    control_group: String,
}

fn parse_show(text: &str) -> UnitShow {
    let mut show = UnitShow::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().to_owned();
        match key.trim() {
            "LoadState" => show.load_state = value,
            "ActiveState" => show.active_state = value,
            "ControlGroup" => show.control_group = value,
            _ => {}
        }
    }
    show
}

/// Runs `PROGRAM show -p LoadState,ActiveState,ControlGroup -- UNIT`,
/// killing it after `timeout`.
fn systemctl_show(program: &Path, unit: &str, timeout: Duration) -> Result<UnitShow> {
    let mut child = Command::new(program)
        .args([
            "show",
            "--no-pager",
            "--property=LoadState,ActiveState,ControlGroup",
            "--",
            unit,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            with_code(
                1,
                format!(
                    "--unit {unit}: systemd is running ({SYSTEMD_RUNNING} exists) but {} \
                     could not be run: {e}",
                    program.display()
                ),
            )
        })?;
    // Readers on their own threads, so a chatty child cannot block on a
    // full pipe while we wait for it.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            crate::signals::keep_off_this_thread();
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(1 << 20).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(with_code(
                    1,
                    format!(
                        "--unit {unit}: `{} show {unit}` did not answer within {} s",
                        program.display(),
                        timeout.as_secs_f64()
                    ),
                ));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(with_code(
                    1,
                    format!("--unit {unit}: waiting for systemctl: {e}"),
                ));
            }
        }
    };
    // The child is gone; its pipes close unless it left a grandchild
    // holding them, which the 1 MiB cap and the child's exit bound anyway.
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        return Err(with_code(
            1,
            format!(
                "--unit {unit}: `{} show {unit}` failed ({status}): {}",
                program.display(),
                err.trim()
            ),
        ));
    }
    Ok(parse_show(&String::from_utf8_lossy(&out)))
}

/// The unit's cgroup below the v2 mount, if it is loaded and running.
fn control_group(unit: &str, show: &UnitShow) -> Result<String> {
    if show.load_state == "not-found" {
        return Err(with_code(1, format!("unit {unit} not found")));
    }
    if !matches!(show.active_state.as_str(), "active" | "reloading") {
        let state = if show.active_state.is_empty() {
            "unknown"
        } else {
            &show.active_state
        };
        return Err(with_code(
            1,
            format!("unit {unit} is not running (ActiveState={state})"),
        ));
    }
    if show.control_group.is_empty() {
        return Err(with_code(
            1,
            format!(
                "unit {unit} is not running (it is {} but has no cgroup: a {} unit runs no \
                 processes of its own)",
                show.active_state,
                unit.rsplit('.').next().unwrap_or("such")
            ),
        ));
    }
    if show.control_group.split('/').any(|p| p == "..") {
        return Err(with_code(
            1,
            format!(
                "unit {unit}: systemd reports ControlGroup={}, which has `..`",
                show.control_group
            ),
        ));
    }
    Ok(show.control_group.clone())
}

/// A directory named like the unit, met by the search.
struct Candidate {
    rel: String,
    running: bool,
    /// Why it is not taken for the unit (misplaced, or not root's).
    refused: Option<String>,
}

/// Without systemd: the one cgroup named exactly `unit` below `root` (the
/// v2 mount; a test's own cgroup in tests) at a place systemd itself would
/// put a system unit ([`place::misplaced`]), owned by root all the way
/// down from `root` ([`place::not_roots`]). Directories named like the unit
/// anywhere else are not taken, and are listed when nothing is.
fn search_unit(unit: &str, root: &Path, mounts: &[MountEntry]) -> Result<CgroupTarget> {
    let mut found: Vec<Candidate> = Vec::new();
    let summary = walk(root, &mut |e: &WalkEntry<'_>| {
        if e.name.as_bytes() == unit.as_bytes() {
            found.push(Candidate {
                rel: e.rel.to_owned(),
                running: populated(e.fd, e.rel).unwrap_or(false),
                refused: place::misplaced(unit, e.rel),
            });
        }
    })?;
    for c in found.iter_mut().filter(|c| c.refused.is_none()) {
        c.refused = place::not_roots(root, &c.rel);
    }
    let (taken, refused): (Vec<&Candidate>, Vec<&Candidate>) =
        found.iter().partition(|c| c.refused.is_none());
    match taken.as_slice() {
        [] => {
            let limits = if summary.truncated {
                format!(
                    " (the search stopped after {} cgroups, {MAX_DEPTH} levels deep)",
                    summary.visited
                )
            } else {
                String::new()
            };
            let not_taken = if refused.is_empty() {
                String::new()
            } else {
                let list = refused
                    .iter()
                    .map(|c| {
                        format!(
                            "{} ({})",
                            below(root, &c.rel).display(),
                            c.refused.as_deref().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                format!(
                    "; not taken for it, since anyone owning their parent could have made \
                     them: {list}"
                )
            };
            Err(with_code(
                1,
                format!(
                    "unit {unit} is not running: no systemd here and no cgroup named {unit} \
                     under {} where systemd puts a system unit ({WHERE}){limits}{not_taken}",
                    root.display()
                ),
            ))
        }
        [c] => {
            let path = below(root, &c.rel);
            open_cgroup(&path, mounts)
                .map(|t| CgroupTarget {
                    found_by: Some(UnitFound::Path),
                    ..t
                })
                .map_err(|e| with_code(1, format!("unit {unit}: its cgroup went away: {e}")))
        }
        several => {
            let list = several
                .iter()
                .map(|c| {
                    format!(
                        "{}{}",
                        below(root, &c.rel).display(),
                        if c.running {
                            " (running)"
                        } else {
                            " (no processes)"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            Err(with_code(
                1,
                format!(
                    "unit {unit}: {} cgroups carry that name: {list}; name one with \
                     --cgroup PATH",
                    several.len()
                ),
            ))
        }
    }
}

/// `target` with its unit, if a process is in it or below it.
fn ensure_running(unit: &str, target: CgroupTarget) -> Result<CgroupTarget> {
    let fd = open_dir(&target.path)
        .map_err(|e| with_code(1, format!("unit {unit}: its cgroup went away: {e}")))?;
    match populated(fd.as_fd(), &target.rel) {
        Ok(true) => Ok(CgroupTarget {
            unit: Some(unit.to_owned()),
            ..target
        }),
        Ok(false) => Err(with_code(
            1,
            format!(
                "unit {unit} is not running (its cgroup {} has no processes)",
                target.path.display()
            ),
        )),
        Err(e) => Err(with_code(
            1,
            format!(
                "unit {unit}: cannot tell whether its cgroup {} has processes: {e}",
                target.path.display()
            ),
        )),
    }
}

/// Whether a process is in cgroup `dir` or below it: `populated` in its
/// cgroup.events, or (the root has no cgroup.events) a non-empty
/// cgroup.procs anywhere in the subtree.
fn populated(dir: BorrowedFd<'_>, rel: &str) -> io::Result<bool> {
    match read_small(dir, "cgroup.events") {
        Ok(text) => {
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("populated ") {
                    return Ok(v.trim() != "0");
                }
            }
            Err(io::Error::other("cgroup.events has no `populated` line"))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let mut any = false;
            walk_fd(dir, rel, &mut |e: &WalkEntry<'_>| {
                if !any && read_small(e.fd, "cgroup.procs").is_ok_and(|t| !t.trim().is_empty()) {
                    any = true;
                }
            })?;
            Ok(any)
        }
        Err(e) => Err(e),
    }
}

/// Reads at most 64 KiB of file `name` in directory `dir`, following no
/// link.
fn read_small(dir: BorrowedFd<'_>, name: &str) -> io::Result<String> {
    let fd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )?;
    let mut text = String::new();
    File::from(fd).take(64 << 10).read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use super::super::testutil::*;
    use super::*;

    #[test]
    fn unit_search_takes_only_root_owned_system_slice_places() {
        let Some(mount) = cgroup_env("unit_search_takes_only_root_owned_system_slice_places")
        else {
            return;
        };
        let mounts = read_mountinfo().unwrap();
        let mut g = Groups::new(&mount);
        let top = unique("units");
        // The test's own cgroup stands for the hierarchy's root.
        let root = g.mkdir(&top);
        let unit = format!("sockscope-test-{}.service", std::process::id());

        // Impostors: one in a user's subtree, with a process in it; one in
        // a well-named slice that a user owns.
        let impostor = g.mkdir(&format!("{top}/someuser.slice/x/{unit}"));
        let owned_slice = g.mkdir(&format!("{top}/system.slice/system-own.slice"));
        let in_owned = g.mkdir(&format!("{top}/system.slice/system-own.slice/{unit}"));
        for d in [
            root.join("someuser.slice"),
            root.join("someuser.slice/x"),
            impostor.clone(),
            owned_slice.clone(),
        ] {
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        }
        g.spawn_in(&impostor);
        let msg = message(&search_unit(&unit, &root, &mounts).unwrap_err()).1;
        assert!(
            msg.starts_with(&format!(
                "unit {unit} is not running: no systemd here and no cgroup named {unit} under \
                 {} where systemd puts a system unit",
                root.display()
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(
                "{} (under /someuser.slice, not in system.slice)",
                impostor.display()
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(
                "{} ({} is owned by uid 65534, not root)",
                in_owned.display(),
                owned_slice.display()
            )),
            "{msg}"
        );

        // The real one: taken, though empty, while the impostors stay.
        let dir = g.mkdir(&format!("{top}/system.slice/{unit}"));
        let found = search_unit(&unit, &root, &mounts).unwrap();
        assert_eq!(found.path, dir);
        assert_eq!(found.found_by, Some(UnitFound::Path));
        let msg = message(&ensure_running(&unit, found).unwrap_err()).1;
        assert_eq!(
            msg,
            format!(
                "unit {unit} is not running (its cgroup {} has no processes)",
                dir.display()
            )
        );

        // A process in it (a child group counts too): running.
        let child = g.mkdir(&format!("{top}/system.slice/{unit}/worker"));
        g.spawn_in(&child);
        let found = search_unit(&unit, &root, &mounts).unwrap();
        let t = ensure_running(&unit, found).unwrap();
        assert_eq!(t.rel, format!("/{top}/system.slice/{unit}"));
        assert_eq!(t.level, 3);
        assert_eq!(t.unit.as_deref(), Some(unit.as_str()));
        assert_eq!(
            t.unit_note().unwrap(),
            format!(
                "--unit {unit}: cgroup {} (no systemd running: found by path)",
                dir.display()
            )
        );

        // Twice where a system unit may be: refused, listing both.
        let other = g.mkdir(&format!("{top}/system.slice/system-a.slice/{unit}"));
        let msg = message(&search_unit(&unit, &root, &mounts).unwrap_err()).1;
        assert!(msg.contains("2 cgroups carry that name"), "{msg}");
        assert!(
            msg.contains(&format!("{} (running)", dir.display())),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("{} (no processes)", other.display())),
            "{msg}"
        );
        assert!(msg.contains("--cgroup PATH"), "{msg}");

        // Nowhere.
        let missing = format!("{}-missing.service", unique("u"));
        let msg = message(&search_unit(&missing, &root, &mounts).unwrap_err()).1;
        assert_eq!(
            msg,
            format!(
                "unit {missing} is not running: no systemd here and no cgroup named {missing} \
                 under {} where systemd puts a system unit ({WHERE})",
                root.display()
            )
        );
    }

    #[test]
    fn unit_names_are_completed_like_systemctl_does() {
        assert_eq!(unit_name("nginx").unwrap(), "nginx.service");
        assert_eq!(unit_name("nginx.service").unwrap(), "nginx.service");
        assert_eq!(unit_name("user.slice").unwrap(), "user.slice");
        assert_eq!(unit_name("docker-1.scope").unwrap(), "docker-1.scope");
        assert_eq!(unit_name("foo.bar").unwrap(), "foo.bar.service");
        for bad in ["", "a/b.service", ".service", "a b", "a\nb"] {
            assert_eq!(message(&unit_name(bad).unwrap_err()).0, 2, "{bad:?}");
        }
        assert_eq!(message(&unit_name(&"x".repeat(300)).unwrap_err()).0, 2);
    }

    #[test]
    fn systemctl_show_answers_decide_the_cgroup() {
        let show = parse_show(
            "LoadState=loaded\nActiveState=active\nControlGroup=/system.slice/nginx.service\n",
        );
        assert_eq!(
            control_group("nginx.service", &show).unwrap(),
            "/system.slice/nginx.service"
        );
        let reloading = UnitShow {
            active_state: "reloading".into(),
            ..show
        };
        assert!(control_group("nginx.service", &reloading).is_ok());
        let not_found = parse_show("LoadState=not-found\nActiveState=inactive\nControlGroup=\n");
        let (code, msg) = message(&control_group("x.service", &not_found).unwrap_err());
        assert_eq!((code, msg.as_str()), (1, "unit x.service not found"));
        let inactive = parse_show("LoadState=loaded\nActiveState=inactive\nControlGroup=\n");
        let msg = message(&control_group("x.service", &inactive).unwrap_err()).1;
        assert_eq!(msg, "unit x.service is not running (ActiveState=inactive)");
        let failed = parse_show("LoadState=loaded\nActiveState=failed\nControlGroup=/x\n");
        let msg = message(&control_group("x.service", &failed).unwrap_err()).1;
        assert_eq!(msg, "unit x.service is not running (ActiveState=failed)");
        let no_cgroup = parse_show("LoadState=loaded\nActiveState=active\nControlGroup=\n");
        let msg = message(&control_group("x.timer", &no_cgroup).unwrap_err()).1;
        assert!(
            msg.starts_with("unit x.timer is not running (it is active but has no cgroup"),
            "{msg}"
        );
        let sneaky = parse_show("LoadState=loaded\nActiveState=active\nControlGroup=/a/../b\n");
        assert!(control_group("x.service", &sneaky).is_err());
    }

    /// A stand-in systemctl: a shell script printing `body`.
    fn fake_systemctl(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("systemctl");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// systemctl_show, retrying ETXTBSY: another test thread forking while
    /// the script was open for writing holds it open a moment.
    fn show_with(program: &Path, timeout: Duration) -> Result<UnitShow> {
        for _ in 0..50 {
            match systemctl_show(program, "x.service", timeout) {
                Err(e) if e.to_string().contains("Text file busy") => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
        systemctl_show(program, "x.service", timeout)
    }

    #[test]
    fn systemctl_is_asked_with_a_bounded_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let ok = fake_systemctl(
            tmp.path(),
            r#"[ "$1 $3 $4 $5" = "show --property=LoadState,ActiveState,ControlGroup -- x.service" ] || exit 3
printf 'LoadState=loaded\nActiveState=active\nControlGroup=/system.slice/x.service\n'"#,
        );
        let show = show_with(&ok, Duration::from_secs(10)).unwrap();
        assert_eq!(
            show,
            UnitShow {
                load_state: "loaded".into(),
                active_state: "active".into(),
                control_group: "/system.slice/x.service".into(),
            }
        );
        let tmp = tempfile::tempdir().unwrap();
        let failing = fake_systemctl(tmp.path(), "echo 'Failed to connect to bus' >&2; exit 1");
        let msg = message(&show_with(&failing, Duration::from_secs(10)).unwrap_err()).1;
        assert!(msg.contains("Failed to connect to bus"), "{msg}");
        let tmp = tempfile::tempdir().unwrap();
        let hanging = fake_systemctl(tmp.path(), "exec sleep 30");
        let started = Instant::now();
        let msg = message(&show_with(&hanging, Duration::from_millis(300)).unwrap_err()).1;
        assert!(msg.contains("did not answer within 0.3 s"), "{msg}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let msg = message(
            &systemctl_show(
                &tmp.path().join("absent"),
                "x.service",
                Duration::from_secs(1),
            )
            .unwrap_err(),
        )
        .1;
        assert!(msg.contains("could not be run"), "{msg}");
    }
}
