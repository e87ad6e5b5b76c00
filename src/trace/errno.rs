//! errno names for the error columns.

/// Symbolic name of errno `e`, including the kernel-internal restart codes
/// a syscall can return at sys_exit before signal handling restarts it.
pub fn name(e: u32) -> String {
    match e {
        0 => "E?".to_string(),
        512 => "ERESTARTSYS".to_string(),
        513 => "ERESTARTNOINTR".to_string(),
        514 => "ERESTARTNOHAND".to_string(),
        515 => "ENOIOCTLCMD".to_string(),
        516 => "ERESTART_RESTARTBLOCK".to_string(),
        517 => "EPROBE_DEFER".to_string(),
        518 => "EOPENSTALE".to_string(),
        519 => "ENOPARAM".to_string(),
        e if e < 512 => {
            let n = format!("{:?}", nix::errno::Errno::from_raw(e as i32));
            if n.starts_with('E') {
                n
            } else {
                format!("E{e}")
            }
        }
        e => format!("E{e}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names() {
        assert_eq!(super::name(2), "ENOENT");
        assert_eq!(super::name(11), "EAGAIN");
        assert_eq!(super::name(111), "ECONNREFUSED");
        assert_eq!(super::name(512), "ERESTARTSYS");
        assert_eq!(super::name(149), "E149");
    }
}
