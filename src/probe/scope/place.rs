//! Where systemd itself would put a system unit's cgroup, for `--unit`
//! without systemd: a directory merely named like the unit elsewhere (in a
//! delegated subtree, under `user.slice`) may have been planted by whoever
//! owns that subtree, so it is never taken for the unit.
//!
//! systemd names cgroups after their slices: the system manager's units
//! live in `system.slice`, and slice `a-b.slice` always lives inside
//! `a.slice`, so a system unit's cgroup is `/system.slice/NAME` or
//! `/system.slice/system-x.slice/system-x-y.slice/NAME`; at the top of the
//! hierarchy there are only slices and `init.scope`.

use std::os::fd::AsFd;
use std::path::Path;

use nix::sys::stat::fstat;

use super::mounts::below;
use super::open::open_dir;

/// Where a system unit may be, in words, for messages.
pub(super) const WHERE: &str = "system.slice/NAME, or a system-*.slice nested below it";

/// Why cgroup `rel` (below the hierarchy's root, its last part named
/// `unit`) is not where systemd would put system unit `unit`; None when it
/// is.
pub(super) fn misplaced(unit: &str, rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let Some((_, parents)) = parts.split_last() else {
        return Some("the root cgroup is no unit's".into());
    };
    if unit == "init.scope" || unit == "system.slice" {
        return (!parents.is_empty()).then(|| format!("systemd puts {unit} at the top"));
    }
    let Some((first, nested)) = parents.split_first() else {
        return Some(
            "at the top of the hierarchy, where systemd puts only slices and init.scope".into(),
        );
    };
    if *first != "system.slice" {
        return Some(format!("under /{first}, not in system.slice"));
    }
    let mut stem = "system";
    for slice in nested {
        match slice_child(stem, slice) {
            Some(s) => stem = s,
            None => {
                return Some(format!(
                    "below {slice}, which is no slice systemd would put in {stem}.slice"
                ));
            }
        }
    }
    if unit.ends_with(".slice") && slice_child(stem, unit).is_none() {
        return Some(format!(
            "systemd would not put slice {unit} in {stem}.slice"
        ));
    }
    None
}

/// The stem of `name` when it is a slice systemd nests directly in the
/// slice of stem `parent` (`system-x.slice` in `system.slice`).
fn slice_child<'a>(parent: &str, name: &'a str) -> Option<&'a str> {
    let stem = name.strip_suffix(".slice")?;
    let rest = stem.strip_prefix(parent)?.strip_prefix('-')?;
    (!rest.is_empty() && !rest.contains('-')).then_some(stem)
}

/// Why cgroup `rel` below `root` could have been planted by someone other
/// than root: it, or a directory between `root` and it, is owned by
/// another user or writable by group or others. None when all are root's
/// alone.
pub(super) fn not_roots(root: &Path, rel: &str) -> Option<String> {
    let mut sofar = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        sofar.push('/');
        sofar.push_str(part);
        let path = below(root, &sofar);
        let st = match open_dir(&path) {
            Ok(fd) => fstat(fd.as_fd()),
            Err(e) => return Some(e.to_string()),
        };
        match st {
            Ok(st) if st.st_uid != 0 => {
                return Some(format!(
                    "{} is owned by uid {}, not root",
                    path.display(),
                    st.st_uid
                ));
            }
            Ok(st) if st.st_mode & 0o022 != 0 => {
                return Some(format!(
                    "{} is writable by group or others (mode {:o})",
                    path.display(),
                    st.st_mode & 0o7777
                ));
            }
            Ok(_) => {}
            Err(e) => return Some(format!("cannot stat {}: {}", path.display(), e.desc())),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_units_are_placed_where_systemd_puts_them() {
        let ok = [
            ("x.service", "/system.slice/x.service"),
            ("x.service", "/system.slice/system-a.slice/x.service"),
            (
                "x.service",
                "/system.slice/system-a.slice/system-a-b.slice/x.service",
            ),
            ("system-a.slice", "/system.slice/system-a.slice"),
            ("system.slice", "/system.slice"),
            ("init.scope", "/init.scope"),
        ];
        for (unit, rel) in ok {
            assert_eq!(misplaced(unit, rel), None, "{rel}");
        }
        let bad = [
            ("x.service", "/x.service", "at the top"),
            (
                "x.service",
                "/someuser.slice/x/x.service",
                "under /someuser.slice",
            ),
            (
                "x.service",
                "/user.slice/user-1000.slice/user@1000.service/x.service",
                "under /user.slice",
            ),
            (
                "x.service",
                "/system.slice/y.service/x.service",
                "below y.service",
            ),
            (
                "x.service",
                "/system.slice/a.slice/x.service",
                "below a.slice",
            ),
            (
                "x.service",
                "/system.slice/system-a.slice/system-b.slice/x.service",
                "below system-b.slice",
            ),
            (
                "x.service",
                "/system.slice/system-a-b.slice/x.service",
                "below",
            ),
            (
                "system-a.slice",
                "/system.slice/system-b.slice/system-a.slice",
                "would not put",
            ),
            ("init.scope", "/system.slice/init.scope", "at the top"),
            ("x.service", "/", "root"),
        ];
        for (unit, rel, why) in bad {
            let msg = misplaced(unit, rel).unwrap_or_else(|| panic!("{rel} taken"));
            assert!(msg.contains(why), "{rel}: {msg}");
        }
    }
}
