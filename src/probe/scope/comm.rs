//! `--comm NAME` ([`comm_name`]): checked and padded to the 16 bytes the BPF
//! side compares with a task's `comm`.

use anyhow::Result;

use crate::error::usage;

/// Validates `--comm NAME` and returns the NUL-padded 16 bytes the BPF side
/// compares with a task's `comm`.
///
/// A process name may hold any byte but NUL (even `/`, through
/// `prctl(PR_SET_NAME)`); the kernel keeps only its first 15 bytes, so a
/// longer NAME could never match: usage error (exit 2) suggesting the
/// prefix the kernel keeps.
pub fn comm_name(arg: &str) -> Result<[u8; 16]> {
    if arg.is_empty() {
        return Err(usage(
            "--comm needs a process name, as `ps -o comm` shows it (such as nginx)",
        ));
    }
    if arg.contains('\0') {
        return Err(usage("--comm: a process name cannot contain a NUL byte"));
    }
    let bytes = arg.as_bytes();
    if bytes.len() > 15 {
        let mut keep = 15;
        while !arg.is_char_boundary(keep) {
            keep -= 1;
        }
        let prefix = &arg[..keep];
        let advice = if keep == 15 {
            format!("such a process is named {prefix:?}: use --comm {prefix}")
        } else {
            format!(
                "the kernel's 15 bytes end inside the character {:?}, so no --comm can \
                 name such a process exactly (the nearest whole-character prefix is {prefix:?})",
                arg[keep..].chars().next().unwrap_or_default()
            )
        };
        return Err(usage(format!(
            "--comm {arg:?} is {} bytes long, but the kernel keeps only the first 15 bytes \
             of a process name (comm); {advice}",
            bytes.len()
        )));
    }
    let mut comm = [0u8; 16];
    comm[..bytes.len()].copy_from_slice(bytes);
    Ok(comm)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn comm_names_are_checked_and_padded() {
        let c = comm_name("nginx").unwrap();
        assert_eq!(&c[..6], b"nginx\0");
        assert!(c[5..].iter().all(|&b| b == 0));
        let fifteen = comm_name("abcdefghijklmno").unwrap();
        assert_eq!(&fifteen[..15], b"abcdefghijklmno");
        assert_eq!(fifteen[15], 0);
        // prctl(PR_SET_NAME) names may hold '/' and spaces.
        assert_eq!(&comm_name("kworker/0:1 x").unwrap()[..13], b"kworker/0:1 x");
        let (code, msg) = message(&comm_name("verylongprocessname").unwrap_err());
        assert_eq!(code, 2);
        assert!(msg.contains("is 19 bytes long"), "{msg}");
        assert!(msg.contains("keeps only the first 15 bytes"), "{msg}");
        assert!(msg.contains("use --comm verylongprocess"), "{msg}");
        // 14 ASCII bytes and a two-byte character: the 15th byte splits it.
        let msg = message(&comm_name("abcdefghijklmné").unwrap_err()).1;
        assert!(
            msg.contains("15 bytes end inside the character 'é'"),
            "{msg}"
        );
        assert_eq!(message(&comm_name("").unwrap_err()).0, 2);
        assert_eq!(message(&comm_name("a\0b").unwrap_err()).0, 2);
    }
}
