/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The log-linear latency histogram's bucket function, shared by every BPF
 * program that keeps histograms (syscalls.bpf.c, anatomy.bpf.c). Its Rust
 * twin is `hist::bucket_of` in src/trace/hist.rs; the unit tests there pin
 * the boundaries. The layout constants (SS_HIST_SUB_BITS, SS_HIST_SUB,
 * SS_HIST_BUCKETS) are in syscalls.h's enum ss_limits.
 */
#ifndef SOCKSCOPE_HIST_H
#define SOCKSCOPE_HIST_H

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* Must match hist::bucket_of in src/trace/hist.rs. */
static __always_inline __u32 hist_bucket(__u64 v)
{
	__u32 e, idx;

	if (v < SS_HIST_SUB)
		return v;
	e = log2_u64(v);
	idx = (e - SS_HIST_SUB_BITS + 1) * SS_HIST_SUB +
	      ((v >> (e - SS_HIST_SUB_BITS)) & (SS_HIST_SUB - 1));
	return idx < SS_HIST_BUCKETS ? idx : SS_HIST_BUCKETS - 1;
}

#endif /* SOCKSCOPE_HIST_H */
