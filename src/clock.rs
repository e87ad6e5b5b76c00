//! The one clock readers and BPF programs share.

/// CLOCK_MONOTONIC now, ns: the clock of `bpf_ktime_get_ns` (the BPF
/// programs' timestamps), of the UDP probes' send stamps and of the load
/// driver's transactions. Read directly: `Instant::elapsed` adds a timespec
/// subtraction and a 128-bit conversion to each of the two clock reads a
/// transaction makes.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer; CLOCK_MONOTONIC
    // cannot fail (vDSO) and is never negative.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
