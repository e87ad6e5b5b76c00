//! libbpf's messages, the verifier's log among them, kept so that a failed
//! load can quote them: every BPF loader of sockscope calls
//! [`capture_libbpf_log`] before opening its object and [`load_error`] when
//! the load fails.

use std::sync::Mutex;

use anyhow::anyhow;
use libbpf_rs::PrintLevel;

static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());

fn libbpf_print(level: PrintLevel, msg: String) {
    if level == PrintLevel::Debug {
        return;
    }
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        // Keep the tail: the verifier's verdict is at the end of its log.
        if log.len() > 64 * 1024 {
            let cut = log.len() - 32 * 1024;
            let cut = (cut..log.len())
                .find(|i| log.is_char_boundary(*i))
                .unwrap_or(0);
            log.drain(..cut);
        }
        log.push_str(&msg);
    }
}

/// Sends libbpf's messages (the verifier's log among them) to the buffer
/// [`load_error`] quotes from, and empties it: call before opening an
/// object.
pub fn capture_libbpf_log() {
    libbpf_rs::set_print(Some((PrintLevel::Info, libbpf_print)));
    take_libbpf_log();
}

/// What libbpf said since the last [`capture_libbpf_log`] or take, emptied:
/// an attach failure's explanation.
pub fn take_libbpf_log() -> String {
    LIBBPF_LOG
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
}

/// A load failure with the verifier's last lines (see
/// [`capture_libbpf_log`]).
pub fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let log = take_libbpf_log();
    let tail: Vec<&str> = log.lines().rev().take(25).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let mut msg = format!("{what} failed: {e}");
    let verifier = log.contains("END PROG LOAD LOG") || log.contains("processed ");
    if verifier {
        msg.push_str(
            "\n  the BPF verifier rejected a program; its verdict is the last lines below",
        );
    } else if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        msg.push_str(
            "\n  the kernel refused: sockscope trace needs CAP_BPF and CAP_PERFMON \
             (or CAP_SYS_ADMIN); run it as root",
        );
    }
    if !tail.is_empty() {
        msg.push_str("\n  libbpf/verifier said:\n    ");
        msg.push_str(&tail.join("\n    "));
    }
    anyhow!(msg)
}
