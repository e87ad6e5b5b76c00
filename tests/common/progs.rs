//! The BPF programs a process holds (its fdinfo's `prog_id`s) and every
//! loaded program's name: how a test sees which programs a run attached.

/// Program ids of the BPF programs `pid` holds descriptors of.
pub fn prog_ids_of(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let t = std::fs::read_to_string(e.path()).ok()?;
            t.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect()
}

/// Every loaded program: (id, name).
pub fn loaded_programs() -> Vec<(u32, String)> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| (p.id, p.name.to_string_lossy().into_owned()))
        .collect()
}

/// The names of the programs `pid` holds.
pub fn program_names_of(pid: u32) -> Vec<String> {
    let held = prog_ids_of(pid);
    loaded_programs()
        .into_iter()
        .filter(|(id, _)| held.contains(id))
        .map(|(_, n)| n)
        .collect()
}
