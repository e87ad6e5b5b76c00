//! [`CgroupNames`]: cgroup ids named back into paths for `--by cgroup`,
//! learnt by bounded walks of the v2 hierarchy.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cgroup::cgroup_id;
use super::mounts::{read_mountinfo, rel_below};
use super::walk::{WalkEntry, walk};

/// Names cgroup ids for the `--by cgroup` breakdown.
///
/// Ids are learnt by walking the v2 hierarchy (8 levels, 100,000 cgroups at
/// most, no symbolic links). An id not known yet makes it walk again, but
/// at most once a second, so a flood of unknown ids cannot make it walk per
/// call. A name once learnt is kept, so a cgroup removed during the trace
/// keeps its path; one never seen is `#ID`.
#[derive(Debug)]
pub struct CgroupNames {
    mount: PathBuf,
    names: HashMap<u64, String>,
    last_walk: Option<Instant>,
    min_rewalk: Duration,
    walks: u32,
    /// What the mount shows of the hierarchy (its mountinfo root, empty
    /// for the whole of it), learnt at the first walk, so names match
    /// [`CgroupTarget::rel`] even on a bind-mounted subtree.
    root: Option<String>,
}

impl CgroupNames {
    /// Names ids of the cgroup2 hierarchy mounted at `mount` (see
    /// [`v2_mount`]). Nothing is read until the first [`Self::name_of`].
    pub fn new(mount: PathBuf) -> Self {
        Self::with_rewalk(mount, Duration::from_secs(1))
    }

    fn with_rewalk(mount: PathBuf, min_rewalk: Duration) -> Self {
        Self {
            mount,
            names: HashMap::new(),
            last_walk: None,
            min_rewalk,
            walks: 0,
            root: None,
        }
    }

    /// The path of cgroup `id` below the mount (`/system.slice/x.service`,
    /// `/` for the root), or `#ID` when it is not (or no longer) there.
    pub fn name_of(&mut self, id: u64) -> String {
        if let Some(name) = self.names.get(&id) {
            return name.clone();
        }
        if self
            .last_walk
            .is_none_or(|t| t.elapsed() >= self.min_rewalk)
        {
            self.rewalk();
        }
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("#{id}"))
    }

    fn rewalk(&mut self) {
        self.walks += 1;
        let mount = &self.mount;
        let root = self.root.get_or_insert_with(|| {
            let mounts = read_mountinfo().unwrap_or_default();
            let m = mounts
                .iter()
                .rev()
                .find(|m| m.fstype == "cgroup2" && m.mount_point == *mount);
            m.map(|m| rel_below(m, &m.mount_point))
                .filter(|r| r != "/")
                .unwrap_or_default()
        });
        let names = &mut self.names;
        // A hierarchy that cannot be walked (unmounted meanwhile) leaves the
        // names learnt so far; ids unknown then are named `#ID`, which is
        // the honest answer.
        let _ = walk(mount, &mut |e: &WalkEntry<'_>| {
            let (id, _) = cgroup_id(e.fd);
            let name = match (root.as_str(), e.rel) {
                ("", rel) => rel.to_owned(),
                (root, "/") => root.to_owned(),
                (root, rel) => format!("{root}{rel}"),
            };
            names.insert(id, name);
        });
        self.last_walk = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::super::CgroupTarget;
    use super::super::cgroup::resolve_cgroup;
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn cgroup_names_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<CgroupNames>();
        send::<CgroupTarget>();
    }

    #[test]
    fn cgroup_names_map_ids_and_keep_or_hash_removed_ones() {
        let Some(mount) = cgroup_env("cgroup_names_map_ids_and_keep_or_hash_removed_ones") else {
            return;
        };
        let mut g = Groups::new(&mount);
        let top = unique("names");
        let a = g.mkdir(&format!("{top}/a"));
        let id_a = resolve_cgroup(&a.display().to_string()).unwrap().id;
        let id_top = resolve_cgroup(&top).unwrap().id;

        let mut names = CgroupNames::with_rewalk(mount.clone(), Duration::ZERO);
        assert_eq!(names.name_of(1), "/");
        assert_eq!(names.name_of(id_a), format!("/{top}/a"));
        assert_eq!(names.name_of(id_top), format!("/{top}"));
        // Known ids are answered from memory.
        let walks = names.walks;
        names.name_of(id_a);
        assert_eq!(names.walks, walks);

        // Created after the first walk: found by a re-walk.
        let b = g.mkdir(&format!("{top}/b"));
        let id_b = resolve_cgroup(&b.display().to_string()).unwrap().id;
        assert_eq!(names.name_of(id_b), format!("/{top}/b"));

        // Removed: a name learnt stays; one never learnt is #ID.
        g.rmdir(&b);
        assert_eq!(names.name_of(id_b), format!("/{top}/b"));
        let mut fresh = CgroupNames::new(mount.clone());
        assert_eq!(fresh.name_of(id_b), format!("#{id_b}"));
        assert_eq!(fresh.name_of(id_a), format!("/{top}/a"));

        // Unknown ids do not make it walk more than once per interval.
        let mut slow = CgroupNames::with_rewalk(mount.clone(), Duration::from_secs(3600));
        assert_eq!(slow.name_of(id_a), format!("/{top}/a"));
        let c = g.mkdir(&format!("{top}/c"));
        let id_c = resolve_cgroup(&c.display().to_string()).unwrap().id;
        for _ in 0..1000 {
            assert_eq!(slow.name_of(id_c), format!("#{id_c}"));
            assert_eq!(slow.name_of(u64::MAX), format!("#{}", u64::MAX));
        }
        assert_eq!(slow.walks, 1);
    }
}
