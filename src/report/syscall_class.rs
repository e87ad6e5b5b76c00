//! Which part of the kernel a syscall exercises, coarsely, so the derived
//! sentences can say what a target's kernel time went to only when its
//! syscall mix supports it. The classes go by the syscall's name alone:
//! a tracer that counts syscalls does not see which descriptor a `read`
//! was on, so read/write get a class of their own rather than a guess.

use serde::{Deserialize, Serialize};

/// A kind of syscall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyscallClass {
    /// Calls only sockets answer: send/recv families, accept, connect,
    /// shutdown, socket options and names.
    SocketIo,
    /// read/write families, close, sendfile, splice: on any descriptor
    /// (socket, pipe or file).
    ReadWrite,
    /// Waiting for readiness: epoll, poll, select and their set-up.
    Readiness,
    /// io_uring: submission and completion, socket or file I/O alike.
    IoUring,
    /// Address space: mmap, munmap, mprotect, madvise, brk...
    Memory,
    /// Process and thread life cycle: fork, clone, exec, exit, wait, kill,
    /// sessions.
    Process,
    /// File system: open, stat, directory and file metadata, sync.
    File,
    /// Signal handling: masks, handlers, alternate stacks, signalfd.
    Signals,
    /// Anything else (futex, signals, clocks, random...).
    Other,
}

/// Syscalls that create a process or a thread.
pub const TASK_CREATING: [&str; 4] = ["fork", "vfork", "clone", "clone3"];
/// Syscalls that replace a process's program.
pub const EXECS: [&str; 2] = ["execve", "execveat"];

impl SyscallClass {
    /// Every class, in the order reports list them when tied.
    pub const ALL: [SyscallClass; 9] = [
        Self::SocketIo,
        Self::ReadWrite,
        Self::Readiness,
        Self::IoUring,
        Self::Memory,
        Self::Process,
        Self::File,
        Self::Signals,
        Self::Other,
    ];

    /// The class of the syscall called `name` (x86_64 names, as the trace
    /// table spells them).
    pub fn of(name: &str) -> Self {
        match name {
            "sendto" | "recvfrom" | "sendmsg" | "recvmsg" | "sendmmsg" | "recvmmsg" | "accept"
            | "accept4" | "connect" | "shutdown" | "socket" | "socketpair" | "bind" | "listen"
            | "setsockopt" | "getsockopt" | "getsockname" | "getpeername" => Self::SocketIo,
            "read" | "write" | "readv" | "writev" | "pread64" | "pwrite64" | "preadv"
            | "pwritev" | "preadv2" | "pwritev2" | "close" | "close_range" | "sendfile"
            | "splice" | "tee" | "vmsplice" | "copy_file_range" | "dup" | "dup2" | "dup3"
            | "fcntl" | "ioctl" => Self::ReadWrite,
            "epoll_wait" | "epoll_pwait" | "epoll_pwait2" | "epoll_ctl" | "epoll_create"
            | "epoll_create1" | "poll" | "ppoll" | "select" | "pselect6" | "eventfd"
            | "eventfd2" => Self::Readiness,
            "io_uring_enter" | "io_uring_setup" | "io_uring_register" | "io_setup"
            | "io_submit" | "io_getevents" | "io_pgetevents" | "io_destroy" | "io_cancel" => {
                Self::IoUring
            }
            "mmap" | "munmap" | "mremap" | "mprotect" | "madvise" | "brk" | "mlock" | "mlock2"
            | "munlock" | "mlockall" | "munlockall" | "msync" | "mincore" | "process_madvise"
            | "memfd_create" | "userfaultfd" => Self::Memory,
            "fork" | "vfork" | "clone" | "clone3" | "execve" | "execveat" | "exit"
            | "exit_group" | "wait4" | "waitid" | "kill" | "tkill" | "tgkill" | "setsid"
            | "setpgid" | "unshare" | "set_tid_address" | "set_robust_list" | "rseq"
            | "pidfd_open" | "pidfd_send_signal" => Self::Process,
            "open" | "openat" | "openat2" | "creat" | "stat" | "fstat" | "lstat" | "newfstatat"
            | "statx" | "statfs" | "fstatfs" | "access" | "faccessat" | "faccessat2" | "lseek"
            | "fsync" | "fdatasync" | "sync_file_range" | "getdents" | "getdents64" | "unlink"
            | "unlinkat" | "rename" | "renameat" | "renameat2" | "mkdir" | "mkdirat" | "rmdir"
            | "readlink" | "readlinkat" | "truncate" | "ftruncate" | "fallocate" | "flock"
            | "chmod" | "fchmod" | "fchmodat" | "chown" | "fchown" | "fchownat" | "link"
            | "linkat" | "symlink" | "symlinkat" | "utimensat" | "getcwd" | "chdir" | "fchdir"
            | "fadvise64" | "inotify_add_watch" => Self::File,
            "rt_sigaction" | "rt_sigprocmask" | "rt_sigreturn" | "rt_sigsuspend"
            | "rt_sigpending" | "rt_sigtimedwait" | "rt_sigqueueinfo" | "rt_tgsigqueueinfo"
            | "sigaltstack" | "signalfd" | "signalfd4" | "pause" | "alarm" | "setitimer"
            | "getitimer" => Self::Signals,
            _ => Self::Other,
        }
    }

    /// For people.
    pub fn label(self) -> &'static str {
        match self {
            Self::SocketIo => "socket I/O",
            Self::ReadWrite => "read/write (any descriptor)",
            Self::Readiness => "readiness/polling",
            Self::IoUring => "io_uring",
            Self::Memory => "memory mapping",
            Self::Process => "process life cycle",
            Self::File => "file system",
            Self::Signals => "signals",
            Self::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fall_in_their_class() {
        assert_eq!(SyscallClass::of("recvfrom"), SyscallClass::SocketIo);
        assert_eq!(SyscallClass::of("accept4"), SyscallClass::SocketIo);
        assert_eq!(SyscallClass::of("read"), SyscallClass::ReadWrite);
        assert_eq!(SyscallClass::of("epoll_ctl"), SyscallClass::Readiness);
        assert_eq!(SyscallClass::of("pselect6"), SyscallClass::Readiness);
        assert_eq!(SyscallClass::of("io_uring_enter"), SyscallClass::IoUring);
        assert_eq!(SyscallClass::of("munmap"), SyscallClass::Memory);
        assert_eq!(SyscallClass::of("clone"), SyscallClass::Process);
        assert_eq!(SyscallClass::of("wait4"), SyscallClass::Process);
        assert_eq!(SyscallClass::of("openat"), SyscallClass::File);
        assert_eq!(SyscallClass::of("rt_sigprocmask"), SyscallClass::Signals);
        assert_eq!(SyscallClass::of("futex"), SyscallClass::Other);
        assert_eq!(SyscallClass::of("syscall_999"), SyscallClass::Other);
        for n in TASK_CREATING.iter().chain(EXECS.iter()) {
            assert_eq!(SyscallClass::of(n), SyscallClass::Process, "{n}");
        }
        assert_eq!(
            serde_json::to_value(SyscallClass::SocketIo).unwrap(),
            "socket_io"
        );
    }
}
