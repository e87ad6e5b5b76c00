//! One stack sample as the BPF side delivers it, before unwinding and
//! symbolization: the contract between `stacks::bpf` (which produces
//! these) and `stacks::unwind` / `stacks::symbolize` (which consume them).

/// What a sample weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleKind {
    /// One tick of the cpu-clock event: the thread was on a CPU.
    OnCpu,
    /// Off-CPU time this sample stands for, in ns: the thread was switched
    /// out in a sleeping state (waiting) until woken. Sampled in proportion
    /// to its length, so the weight of a short wait can exceed the wait.
    OffCpu {
        /// The time this sample represents.
        weight_ns: u64,
        /// The task state it was switched out in (`S`, `D`, ...).
        state: char,
        /// The window's end cut it: the thread was still waiting as the
        /// window closed (its part inside the window is the weight).
        open: bool,
    },
    /// Time the thread was runnable and waited for a CPU (woken or
    /// preempted until it ran), sampled as off-CPU waits are; taken only
    /// when samples are tied to requests. It carries no stack.
    RunQueue {
        /// The time this sample represents.
        weight_ns: u64,
    },
}

/// The user-mode registers an unwinder starts from (x86_64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer: `user_stack[0]` is the byte at this address.
    pub sp: u64,
    /// Frame pointer (rbp), for frames with no unwind information.
    pub bp: u64,
}

/// One sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSample {
    /// What it weighs.
    pub kind: SampleKind,
    /// Thread-group id (the process).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name (NUL-padded, as the kernel keeps it).
    pub comm: [u8; 16],
    /// CLOCK_MONOTONIC time of the sample, ns.
    pub ts_ns: u64,
    /// Kernel return addresses, innermost first (empty when the sample hit
    /// user mode).
    pub kernel: Vec<u64>,
    /// The user registers (None for kernel threads, or when they could not
    /// be read).
    pub user_regs: Option<UserRegs>,
    /// A copy of the user stack from `user_regs.sp` upward (possibly
    /// shorter than the stack: bounded by the copy size and by the end of
    /// the stack's mapping).
    pub user_stack: Vec<u8>,
    /// The user syscall the thread was in when it blocked (off-CPU
    /// samples), as its number.
    pub syscall: Option<u32>,
    /// The request turn the thread served (0: none; the anatomy's number,
    /// odd: one that cannot be told from others), when samples are tied
    /// to requests.
    pub turn: u64,
    /// When the time this sample stands for began and ended
    /// (CLOCK_MONOTONIC ns): a tick's time for both on-CPU; a wait's
    /// switch-out (or wake-up or preemption) and its wake-up (or switch-in).
    pub span_ns: (u64, u64),
}
