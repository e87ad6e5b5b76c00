//! The kernel's per-program run-time accounting (BPF_ENABLE_STATS): held
//! while a descriptor is, and read per program from its info. It adds two
//! clock reads to every program run on the machine while held, so its
//! users hold it in short slices (the syscall tracer's self-cost, the
//! request anatomy's per-process cost).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

/// Turns the accounting on until the returned descriptor is dropped;
/// the reason when the kernel refuses (it needs CAP_SYS_ADMIN).
pub fn enable() -> Result<OwnedFd, String> {
    // SAFETY: plain syscall wrapper; a non-negative result is an fd we own.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(format!(
            "BPF run-time statistics unavailable: {}",
            std::io::Error::from_raw_os_error(-fd)
        ));
    }
    // SAFETY: fd is a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A program's run count and run time so far, ns (they grow only while
/// the accounting is on); None when its info cannot be read.
pub fn of(prog: &libbpf_rs::ProgramMut<'_>) -> Option<(u64, u64)> {
    // SAFETY: a zeroed bpf_prog_info is a valid value of the plain struct.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info is a zeroed bpf_prog_info of the length we pass.
    let rc = unsafe {
        libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
    };
    (rc == 0).then_some((info.run_cnt, info.run_time_ns))
}
